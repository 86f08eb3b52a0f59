/* Connection table and state machine of the vsock device: slots, the host
 * fd's watch set, credit, the guest -> host byte path and closing. */
#include "devices/vsock/vsock_impl.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/virtio/iov.h"

/* Tell the guest how much it may send once it is down to this much
 * credit (and we have freed some): one update per ~3/4 buffer. */
#define CREDIT_LOW (VSOCK_BUF_ALLOC / 4)

/* Every slot is in use: free the one of the oldest hybrid client still
 * writing its CONNECT line. Such a client has cost the guest nothing yet,
 * and leaving it its slot would let any local process that can reach the
 * socket hold them all. NULL when no client is handshaking. */
static struct vsock_conn *evict_handshake(struct virtio_vsock *v)
{
	struct vsock_conn *old = NULL;

	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->state == CONN_HANDSHAKE && (!old || c->deadline_ns < old->deadline_ns))
			old = c;
	}
	if (old)
		vsock_conn_drop(v, old);
	return old;
}

struct vsock_conn *vsock_conn_new(struct virtio_vsock *v, int fd, enum conn_state st)
{
	struct vsock_conn *c = NULL;

	for (unsigned i = 0; i < VSOCK_MAX_CONNS && !c; i++)
		if (v->conns[i].state == CONN_FREE)
			c = &v->conns[i];
	if (!c)
		c = evict_handshake(v);
	if (!c)
		return NULL;
	*c = (struct vsock_conn){ .v = v, .state = st, .fd = fd };
	v->nconns++;
	v->opened++;
	return c;
}

struct vsock_conn *vsock_conn_find(struct virtio_vsock *v, uint32_t guest_port, uint32_t host_port)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->state > CONN_HANDSHAKE && c->guest_port == guest_port && c->host_port == host_port)
			return c;
	}
	return NULL;
}

/* The next host port for a host-initiated connection: counting up from
 * VSOCK_HOST_PORT_BASE, wrapping, skipping ports in use with guest_port.
 * At most VSOCK_MAX_CONNS ports can be taken, so this ends. */
static uint32_t alloc_host_port(struct virtio_vsock *v, uint32_t guest_port)
{
	for (;;) {
		uint32_t p = v->next_host_port++;

		if (v->next_host_port == 0)
			v->next_host_port = VSOCK_HOST_PORT_BASE;
		if (!vsock_conn_find(v, guest_port, p))
			return p;
	}
}

void vsock_conn_start(struct virtio_vsock *v, struct vsock_conn *c, uint32_t guest_port)
{
	c->guest_port = guest_port;
	c->host_port = alloc_host_port(v, guest_port);
	c->state = CONN_CONNECTING;
	/* REQUEST owed first: a watch that fails then drops a connection
	 * the guest never heard of, rather than owing it an RST. */
	vsock_conn_owe(v, c, OWE_REQUEST);
	vsock_conn_watch(v, c);
}

static void close_fd(struct virtio_vsock *v, struct vsock_conn *c)
{
	if (c->fd < 0)
		return;
	if (c->watching)
		v->io.unwatch(v->io.ctx, c->fd);
	c->watching = 0;
	close(c->fd);
	c->fd = -1;
	vbuf_free(&c->buf);
	vsock_uds_resume(v);
}

void vsock_conn_drop(struct virtio_vsock *v, struct vsock_conn *c)
{
	close_fd(v, c);
	*c = (struct vsock_conn){ .v = v, .fd = -1 };
	v->nconns--;
}

void vsock_conn_reset(struct virtio_vsock *v, struct vsock_conn *c)
{
	/* A guest that never saw a REQUEST or sent one has nothing to reset. */
	if (c->state == CONN_HANDSHAKE || (c->state == CONN_CONNECTING && (c->owe & OWE_REQUEST))) {
		vsock_conn_drop(v, c);
		return;
	}
	close_fd(v, c);
	c->state = CONN_CLOSED;
	c->owe = 0;
	vsock_conn_owe(v, c, OWE_RST);
}

void vsock_conn_drop_all(struct virtio_vsock *v)
{
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		if (v->conns[i].state != CONN_FREE)
			vsock_conn_drop(v, &v->conns[i]);
	v->rst_len = 0;
}

void vsock_conn_owe(struct virtio_vsock *v, struct vsock_conn *c, uint32_t bits)
{
	c->owe |= bits;
	v->rx_wanted = true;
}

void vsock_conn_watch(struct virtio_vsock *v, struct vsock_conn *c)
{
	uint32_t want = 0;

	if (c->fd < 0)
		return;
	if (c->state == CONN_HANDSHAKE)
		want = EPOLLIN;
	/* Awaiting the guest (or held behind a transport reset): only a
	 * hang-up, so a client that left frees its slot now and its REQUEST,
	 * if still held, never reaches the guest. EPOLLHUP is a full close:
	 * a client that only shut its write side still waits for its OK. */
	if (c->state == CONN_CONNECTING)
		want = EPOLLHUP;
	if (c->state == CONN_ESTABLISHED) {
		/* Not while readable: level-triggered readiness would fire
		 * again and again while credit or rx buffers are missing. */
		if (!c->host_readable && !c->host_eof && !(c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV))
			want |= EPOLLIN;
		if (c->buf.len)
			want |= EPOLLOUT;
	}
	if (want == c->watching)
		return;
	if (c->watching)
		v->io.unwatch(v->io.ctx, c->fd);
	c->watching = 0;
	if (!want)
		return;
	if (v->io.watch(v->io.ctx, c->fd, want, vsock_conn_cb, c) == 0)
		c->watching = want;
	else
		vsock_conn_reset(v, c);
}

uint32_t vsock_conn_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	/* The guest may shrink buf_alloc below what is in flight. */
	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

bool vsock_conn_can_read(const struct vsock_conn *c)
{
	return c->state == CONN_ESTABLISHED && c->host_readable && !c->host_eof &&
	       !(c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV) && vsock_conn_credit(c) > 0;
}

/* The guest only learns fwd_cnt from our headers; without a packet going
 * its way it would stall at zero credit. */
static void maybe_credit(struct virtio_vsock *v, struct vsock_conn *c)
{
	uint32_t guest_view_used = c->rx_cnt - c->fwd_cnt_sent;

	if (c->fwd_cnt != c->fwd_cnt_sent && VSOCK_BUF_ALLOC - guest_view_used < CREDIT_LOW)
		vsock_conn_owe(v, c, OWE_CREDIT);
}

/* After bytes left the buffer: half-close the host end if the guest is
 * done sending, give credit, see whether the connection is over. */
static void after_progress(struct virtio_vsock *v, struct vsock_conn *c)
{
	if (c->buf.len == 0) {
		vbuf_free(&c->buf);
		if ((c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->wr_shut) {
			shutdown(c->fd, SHUT_WR);
			c->wr_shut = true;
		}
	}
	maybe_credit(v, c);
	vsock_conn_check_done(v, c);
	if (c->state == CONN_ESTABLISHED)
		vsock_conn_watch(v, c);
}

void vsock_conn_write(struct virtio_vsock *v, struct vsock_conn *c, const struct iovec *iov, int n, size_t skip,
		      uint32_t len)
{
	uint32_t sent = 0;

	/* Spec 5.10.6.3: the guest may have at most buf_alloc bytes in
	 * flight as of the fwd_cnt we last told it. A guest that sends more
	 * is broken or hostile; holding its bytes would grow our memory. */
	if ((uint64_t)(uint32_t)(c->rx_cnt - c->fwd_cnt_sent) + len > VSOCK_BUF_ALLOC) {
		vsock_conn_reset(v, c);
		return;
	}
	c->rx_cnt += len;
	if (c->buf.len == 0) {
		int k = iov_slice(iov, n, skip, len, v->iov, VQ_MAX_SEGS);
		long r = k < 0 ? -EINVAL : vsock_send(c->fd, v->iov, k);

		if (r < 0) {
			vsock_conn_reset(v, c);
			return;
		}
		sent = (uint32_t)r;
		c->fwd_cnt += sent;
	}
	if (sent < len && vbuf_put(&c->buf, iov, n, skip + sent, len - sent) < 0) {
		vsock_conn_reset(v, c);
		return;
	}
	after_progress(v, c);
}

void vsock_conn_flush(struct virtio_vsock *v, struct vsock_conn *c)
{
	long r = vbuf_flush(&c->buf, c->fd);

	if (r < 0) {
		vsock_conn_reset(v, c);
		return;
	}
	c->fwd_cnt += (uint32_t)r;
	after_progress(v, c);
}

void vsock_conn_guest_shutdown(struct virtio_vsock *v, struct vsock_conn *c, uint32_t flags)
{
	c->peer_shut |= flags & VSOCK_SHUT_BOTH;
	after_progress(v, c);
}

void vsock_conn_check_done(struct virtio_vsock *v, struct vsock_conn *c)
{
	bool guest_done = (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_SEND) && c->buf.len == 0;
	bool host_done = c->host_eof || (c->peer_shut & VIRTIO_VSOCK_SHUTDOWN_RCV);

	if (c->state == CONN_ESTABLISHED && guest_done && host_done)
		vsock_conn_reset(v, c);
}

/* Event-loop thread, no lock held on entry. */
void vsock_conn_cb(void *arg, uint32_t events)
{
	struct vsock_conn *c = arg;
	struct virtio_vsock *v = c->v;

	pthread_mutex_lock(&v->lock);
	if (c->fd >= 0 && c->watching) {
		if (c->state == CONN_HANDSHAKE) {
			vsock_uds_handshake(v, c);
		} else if (c->state == CONN_CONNECTING && (events & (EPOLLHUP | EPOLLERR))) {
			vsock_conn_reset(v, c);
		} else if (c->state == CONN_ESTABLISHED && (events & EPOLLERR)) {
			vsock_conn_reset(v, c);
		} else if (c->state == CONN_ESTABLISHED) {
			if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) {
				c->host_readable = true;
				v->rx_wanted = true;
			}
			if (c->buf.len && (events & (EPOLLOUT | EPOLLHUP)))
				vsock_conn_flush(v, c);
			vsock_conn_watch(v, c);
		}
	}
	vsock_unlock_kick_rx(v);
}
