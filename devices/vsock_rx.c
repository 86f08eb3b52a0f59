/* Packets to the guest (rx queue, spec 5.10.6.4). The driver posts empty
 * buffers; the device fills one per packet: the 44-byte header at the start
 * of its writable bytes, the payload read from the host socket straight
 * into the bytes after it. The used length is header + payload (Linux
 * drops anything shorter than the header or shorter than header.len).
 *
 * A buffer is popped before the device knows whether a read will find
 * bytes, so one popped buffer may be held until something is owed. */
#include "devices/vsock_impl.h"

#include <endian.h>
#include <errno.h>
#include <unistd.h>

#include "devices/blk_iov.h"

static const struct iovec *wiov(const struct vq_chain *ch)
{
	return ch->iov + ch->nreadable;
}

static int wn(const struct vq_chain *ch)
{
	return ch->n - ch->nreadable;
}

/* Write a header into ch; returns the used length. */
static uint32_t put_hdr(struct virtio_vsock *v, struct vq_chain *ch, uint32_t guest_port, uint32_t host_port,
			uint16_t op, uint32_t flags, uint32_t len, struct vsock_conn *c)
{
	struct virtio_vsock_hdr h = {
		.src_cid = htole64(VSOCK_HOST_CID),
		.dst_cid = htole64(v->guest_cid),
		.src_port = htole32(host_port),
		.dst_port = htole32(guest_port),
		.len = htole32(len),
		.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
		.op = htole16(op),
		.flags = htole32(flags),
	};

	/* Every header tells the guest our credit (spec 5.10.6.3). */
	if (c) {
		h.buf_alloc = htole32(VSOCK_BUF_ALLOC);
		h.fwd_cnt = htole32(c->fwd_cnt);
		c->fwd_cnt_sent = c->fwd_cnt;
		c->owe &= ~(uint32_t)OWE_CREDIT;
	}
	iov_from_buf(wiov(ch), wn(ch), 0, &h, VSOCK_HDR);
	return VSOCK_HDR + len;
}

static uint32_t pkt(struct virtio_vsock *v, struct vq_chain *ch, struct vsock_conn *c, uint16_t op,
		    uint32_t flags, uint32_t len)
{
	return put_hdr(v, ch, c->guest_port, c->host_port, op, flags, len, c);
}

static uint32_t min3(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t m = a < b ? a : b;

	return m < c ? m : c;
}

/* Read host bytes into ch after the header. Returns the used length, or
 * 0 when nothing was read (would block; EOF and errors set c->owe). */
static uint32_t read_data(struct virtio_vsock *v, struct vsock_conn *c, struct vq_chain *ch)
{
	uint32_t max = min3(0xffffffff, ch->writable_len - VSOCK_HDR, VSOCK_MAX_PKT);
	ssize_t r;
	int k;

	if (max == 0)
		return 0;
	k = iov_slice(wiov(ch), wn(ch), VSOCK_HDR, max, v->iov, VQ_MAX_SEGS);
	if (k < 0)
		return 0;
	do
		r = readv(c->fd, v->iov, k);
	while (r < 0 && errno == EINTR);
	if (r > 0) {
		c->tx_cnt += (uint32_t)r;
		return pkt(v, ch, c, VIRTIO_VSOCK_OP_RW, 0, (uint32_t)r);
	}
	c->host_readable = false;
	if (r == 0) {
		c->host_eof = true;
		vsock_conn_owe(v, c, OWE_SHUTDOWN);
		vsock_conn_check_done(v, c);
	} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
		vsock_conn_reset(v, c);
	}
	if (c->state == CONN_ESTABLISHED)
		vsock_conn_watch(v, c);
	return 0;
}

/* The next control packet c owes, in priority order, or 0. */
static uint32_t control(struct virtio_vsock *v, struct vsock_conn *c, struct vq_chain *ch)
{
	uint32_t n;

	if (c->owe & OWE_RST) {
		n = pkt(v, ch, c, VIRTIO_VSOCK_OP_RST, 0, 0);
		vsock_conn_drop(v, c);
		return n;
	}
	if (c->owe & OWE_REQUEST) {
		c->owe &= ~(uint32_t)OWE_REQUEST;
		return pkt(v, ch, c, VIRTIO_VSOCK_OP_REQUEST, 0, 0);
	}
	if (c->owe & OWE_RESPONSE) {
		c->owe &= ~(uint32_t)OWE_RESPONSE;
		return pkt(v, ch, c, VIRTIO_VSOCK_OP_RESPONSE, 0, 0);
	}
	if (c->owe & OWE_SHUTDOWN) {
		c->owe &= ~(uint32_t)OWE_SHUTDOWN;
		return pkt(v, ch, c, VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_SHUTDOWN_SEND, 0);
	}
	if (c->owe & OWE_CREDIT)
		return pkt(v, ch, c, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, 0);
	return 0;
}

static uint32_t conn_emit(struct virtio_vsock *v, struct vsock_conn *c, struct vq_chain *ch)
{
	uint32_t n;

	if (!(c->owe & (OWE_RST | OWE_REQUEST | OWE_RESPONSE)) && vsock_conn_can_read(c)) {
		n = read_data(v, c, ch);
		if (n)
			return n;
	}
	return c->owe ? control(v, c, ch) : 0;
}

/* The next packet for the guest into ch: unknown-connection RSTs first,
 * then connections in turn. Returns the used length, 0 for none. */
static uint32_t next_packet(struct virtio_vsock *v, struct vq_chain *ch)
{
	if (v->rst_len) {
		struct vsock_rst r = v->rst[v->rst_head];

		v->rst_head = (v->rst_head + 1) % VSOCK_RST_RING;
		v->rst_len--;
		return put_hdr(v, ch, r.guest_port, r.host_port, VIRTIO_VSOCK_OP_RST, 0, 0, NULL);
	}
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		unsigned k = (v->rr + i) % VSOCK_MAX_CONNS;
		struct vsock_conn *c = &v->conns[k];
		uint32_t n;

		if (c->state == CONN_FREE || c->state == CONN_HANDSHAKE)
			continue;
		n = conn_emit(v, c, ch);
		if (n) {
			v->rr = (k + 1) % VSOCK_MAX_CONNS;
			return n;
		}
	}
	return 0;
}

int vsock_rx_run(struct virtio_vsock *v, struct virtqueue *vq)
{
	for (;;) {
		uint32_t used;

		if (!v->rx_held) {
			int r = vq_pop(vq, &v->rx_chain);

			if (r <= 0)
				return r;
			if (v->rx_chain.writable_len < VSOCK_HDR) {
				vq_push(vq, v->rx_chain.head, 0);
				continue;
			}
			v->rx_held = true;
		}
		used = next_packet(v, &v->rx_chain);
		if (!used)
			return 0;
		vq_push(vq, v->rx_chain.head, used);
		v->rx_held = false;
	}
}
