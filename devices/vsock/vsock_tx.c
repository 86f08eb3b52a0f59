/* Packets from the guest (tx queue, spec 5.10.6.4 - 5.10.6.6). Each chain
 * is one header (the first 44 readable bytes, any layout) and its payload
 * (the next len readable bytes); the device writes nothing back. Every
 * header field is read once into struct vsock_pkt and checked before use:
 * wrong CIDs are dropped silently (nobody to answer), anything else wrong
 * resets the connection it names or gets an RST. */
#include "devices/vsock/vsock_impl.h"

#include <endian.h>
#include <string.h>
#include <unistd.h>

#include "devices/virtio/iov.h"

void vsock_rst_unknown(struct virtio_vsock *v, uint32_t guest_port, uint32_t host_port)
{
	/* Dropping one is harmless: the guest times out instead. */
	if (v->rst_len == VSOCK_RST_RING)
		return;
	v->rst[(v->rst_head + v->rst_len++) % VSOCK_RST_RING] = (struct vsock_rst){ guest_port, host_port };
	v->rx_wanted = true;
}

static void parse(const struct virtio_vsock_hdr *h, struct vsock_pkt *p)
{
	p->src_cid = le64toh(h->src_cid);
	p->dst_cid = le64toh(h->dst_cid);
	p->src_port = le32toh(h->src_port);
	p->dst_port = le32toh(h->dst_port);
	p->len = le32toh(h->len);
	p->type = le16toh(h->type);
	p->op = le16toh(h->op);
	p->flags = le32toh(h->flags);
	p->buf_alloc = le32toh(h->buf_alloc);
	p->fwd_cnt = le32toh(h->fwd_cnt);
}

/* A bad packet: reset what it names, or answer RST (never to an RST). */
static void refuse(struct virtio_vsock *v, struct vsock_conn *c, const struct vsock_pkt *p)
{
	if (c && c->state != CONN_CLOSED)
		vsock_conn_reset(v, c);
	else if (!c && p->op != VIRTIO_VSOCK_OP_RST)
		vsock_rst_unknown(v, p->src_port, p->dst_port);
}

/* The guest connects to host port dst_port: dial uds_path_<port>. */
static void on_request(struct virtio_vsock *v, struct vsock_conn *c, const struct vsock_pkt *p)
{
	int fd;

	if (c && c->state != CONN_CLOSED) {
		refuse(v, c, p);
		return;
	}
	/* A new connection reusing the ports of one we are closing: the old
	 * one's RST would now reset the new one. */
	if (c)
		vsock_conn_drop(v, c);
	fd = v->nconns < VSOCK_MAX_CONNS ? vsock_uds_dial(v, p->dst_port) : -1;
	c = fd >= 0 ? vsock_conn_new(v, fd, CONN_ESTABLISHED) : NULL;
	if (!c) {
		if (fd >= 0)
			close(fd);
		vsock_rst_unknown(v, p->src_port, p->dst_port);
		return;
	}
	c->guest_port = p->src_port;
	c->host_port = p->dst_port;
	c->peer_buf_alloc = p->buf_alloc;
	c->peer_fwd_cnt = p->fwd_cnt;
	vsock_conn_owe(v, c, OWE_RESPONSE);
	vsock_conn_watch(v, c);
}

static void on_response(struct virtio_vsock *v, struct vsock_conn *c, const struct vsock_pkt *p)
{
	if (!c || c->state != CONN_CONNECTING || (c->owe & OWE_REQUEST)) {
		refuse(v, c, p);
		return;
	}
	if (c->hybrid && vsock_uds_ok(c) < 0) {
		vsock_conn_reset(v, c);
		return;
	}
	c->state = CONN_ESTABLISHED;
	/* The client may have written before the guest accepted. */
	c->host_readable = true;
	v->rx_wanted = true;
	vsock_conn_watch(v, c);
}

static void on_rw(struct virtio_vsock *v, struct vsock_conn *c, const struct vq_chain *ch, const struct vsock_pkt *p)
{
	if (!c || c->state != CONN_ESTABLISHED || (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND)) {
		refuse(v, c, p);
		return;
	}
	if (p->len)
		vsock_conn_write(v, c, ch->iov, ch->nreadable, VSOCK_HDR, p->len);
}

/* Ops valid on an established connection only. */
static void on_established(struct virtio_vsock *v, struct vsock_conn *c, const struct vsock_pkt *p)
{
	if (!c || c->state != CONN_ESTABLISHED) {
		refuse(v, c, p);
		return;
	}
	if (p->op == VIRTIO_VSOCK_OP_SHUTDOWN)
		vsock_conn_guest_shutdown(v, c, p->flags);
	else if (p->op == VIRTIO_VSOCK_OP_CREDIT_REQUEST)
		vsock_conn_owe(v, c, OWE_CREDIT);
	/* CREDIT_UPDATE: the credit fields were taken already. */
}

static void dispatch(struct virtio_vsock *v, struct vsock_conn *c, const struct vq_chain *ch, const struct vsock_pkt *p)
{
	switch (p->op) {
	case VIRTIO_VSOCK_OP_REQUEST: on_request(v, c, p); break;
	case VIRTIO_VSOCK_OP_RESPONSE: on_response(v, c, p); break;
	case VIRTIO_VSOCK_OP_RST:
		if (c)
			vsock_conn_drop(v, c);
		break;
	case VIRTIO_VSOCK_OP_RW: on_rw(v, c, ch, p); break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST: on_established(v, c, p); break;
	default: refuse(v, c, p); break;
	}
}

void vsock_tx_packet(struct virtio_vsock *v, const struct vq_chain *ch)
{
	struct virtio_vsock_hdr h;
	struct vsock_pkt p;
	struct vsock_conn *c;

	if (ch->readable_len < VSOCK_HDR)
		return;
	iov_to_buf(ch->iov, ch->nreadable, 0, &h, VSOCK_HDR);
	parse(&h, &p);
	if (p.src_cid != v->guest_cid || p.dst_cid != VSOCK_HOST_CID)
		return;
	c = vsock_conn_find(v, p.src_port, p.dst_port);
	if (p.type != VIRTIO_VSOCK_TYPE_STREAM || p.len > ch->readable_len - VSOCK_HDR || p.len > VSOCK_MAX_PKT) {
		refuse(v, c, &p);
		return;
	}
	/* Spec 5.10.6.3: every header carries the sender's credit. */
	if (c && c->state != CONN_CLOSED) {
		c->peer_buf_alloc = p.buf_alloc;
		c->peer_fwd_cnt = p.fwd_cnt;
		if (vsock_conn_can_read(c))
			v->rx_wanted = true;
	}
	dispatch(v, c, ch, &p);
}
