/* Packets to the guest (rx queue, spec 5.10.6.4). The driver posts empty
 * buffers; the device fills one per packet: the 44-byte header at the start
 * of its writable bytes, the payload read from the host socket straight
 * into the bytes after it. The used length is header + payload (Linux
 * drops anything shorter than the header or shorter than header.len).
 *
 * A buffer is popped only once a packet is certain (a host socket is
 * peeked first), so the device never holds a guest buffer between calls:
 * nothing for a snapshot to lose. */
#include "devices/vsock/vsock_impl.h"

#include <endian.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/virtio/iov.h"

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

static uint32_t pkt(struct virtio_vsock *v, struct vq_chain *ch, struct vsock_conn *c, uint16_t op, uint32_t flags,
		    uint32_t len)
{
	return put_hdr(v, ch, c->guest_port, c->host_port, op, flags, len, c);
}

static uint32_t min3(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t m = a < b ? a : b;

	return m < c ? m : c;
}

/* A read or peek of c's socket returned r <= 0 (errno set when < 0):
 * EOF owes the guest a SHUTDOWN, an error an RST, "would block" means
 * watching the socket again. */
static void read_ended(struct virtio_vsock *v, struct vsock_conn *c, ssize_t r)
{
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
}

/* Read host bytes into ch after the header. Returns the used length, or
 * 0 when nothing was read (would block; EOF and errors set c->owe). */
static uint32_t read_data(struct virtio_vsock *v, struct vsock_conn *c, struct vq_chain *ch)
{
	uint32_t max = min3(vsock_conn_credit(c), ch->writable_len - VSOCK_HDR, VSOCK_MAX_PKT);
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
	read_ended(v, c, r);
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

/* Whether c has a packet to send now. For data, ask the socket (a peek)
 * rather than take an rx buffer that a read might then leave empty. A
 * REQUEST waits while a transport reset is unhandled (see event_run). */
static bool conn_ready(struct virtio_vsock *v, struct vsock_conn *c)
{
	uint8_t b;
	ssize_t r;

	if (v->reset_unacked && (c->owe & OWE_REQUEST) && !(c->owe & OWE_RST))
		return false;
	if (c->owe)
		return true;
	if (!vsock_conn_can_read(c))
		return false;
	do
		r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		return true;
	read_ended(v, c, r);
	return c->owe != 0;
}

/* The next connection with a packet, taking them in turn. */
static struct vsock_conn *next_ready(struct virtio_vsock *v)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		unsigned k = (v->rr + i) % VSOCK_MAX_CONNS;
		struct vsock_conn *c = &v->conns[k];

		if (c->state != CONN_FREE && c->state != CONN_HANDSHAKE && conn_ready(v, c)) {
			v->rr = (k + 1) % VSOCK_MAX_CONNS;
			return c;
		}
	}
	return NULL;
}

static uint32_t rst_unknown(struct virtio_vsock *v, struct vq_chain *ch)
{
	struct vsock_rst r = v->rst[v->rst_head];

	v->rst_head = (v->rst_head + 1) % VSOCK_RST_RING;
	v->rst_len--;
	return put_hdr(v, ch, r.guest_port, r.host_port, VIRTIO_VSOCK_OP_RST, 0, 0, NULL);
}

int vsock_rx_run(struct virtio_vsock *v, struct virtqueue *vq)
{
	struct vq_chain *ch = &v->chain;

	for (;;) {
		struct vsock_conn *c = NULL;
		uint32_t used = 0;
		int r;

		/* RSTs for unknown connections first: their ring is small. */
		if (!v->rst_len && !(c = next_ready(v)))
			return 0;
		r = vq_pop(vq, ch);
		if (r <= 0)
			return r;
		/* Too small for a header: given back empty (Linux drops it).
		 * A buffer of exactly a header carries control packets only;
		 * should data have been all c had, it too goes back empty. */
		if (ch->writable_len >= VSOCK_HDR)
			used = c ? conn_emit(v, c, ch) : rst_unknown(v, ch);
		vq_push(vq, ch->head, used);
	}
}
