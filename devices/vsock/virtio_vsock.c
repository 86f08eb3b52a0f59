/* virtio-vsock device: the transport callbacks, the public entry points
 * and their locking (see virtio_vsock.h), and the event queue. */
#include "devices/vsock/virtio_vsock.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/virtio_ids.h>

#include "devices/virtio/iov.h"
#include "devices/vsock/vsock_impl.h"

#define F_STREAM 0 /* VIRTIO_VSOCK_F_STREAM, spec 5.10.3; not in older UAPI headers */

/* Take rx_wanted under the lock: whoever does must make sure the rx queue
 * gets run. */
static bool take_rx_wanted(struct virtio_vsock *v)
{
	bool w = v->rx_wanted;

	v->rx_wanted = false;
	return w;
}

/* Backend entry points: drop the lock, then kick (the kick runs the
 * transport, which takes its lock and then ours). */
static void unlock_and_kick(struct virtio_vsock *v, unsigned queue, bool kick)
{
	pthread_mutex_unlock(&v->lock);
	if (kick)
		v->io.kick(v->io.ctx, queue);
}

void vsock_unlock_kick_rx(struct virtio_vsock *v)
{
	bool kick = take_rx_wanted(v);

	unlock_and_kick(v, VSOCK_RXQ, kick);
}

/* The eventfd written from transport callbacks: event-loop thread. */
static void kick_cb(void *arg, uint32_t events)
{
	struct virtio_vsock *v = arg;
	eventfd_t n;

	(void)events;
	if (eventfd_read(v->kick_fd, &n) == 0)
		v->io.kick(v->io.ctx, VSOCK_RXQ);
}

/* Post TRANSPORT_RESET into the first event buffer big enough. The guest
 * drops every connected socket when it handles the event, including one
 * a host client opened after the reset was posted: a REQUEST to the guest
 * waits until the driver gives an event buffer back (Linux refills the
 * queue once it has handled the events it took), so a host connection
 * made right after a restore is never cut by that restore's reset. */
static int event_run(struct virtio_vsock *v, struct virtqueue *vq)
{
	const struct virtio_vsock_event ev = { htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET) };
	struct vq_chain *ch = &v->chain;
	int r = 0;

	while (v->event_pending && (r = vq_pop(vq, ch)) > 0) {
		if (ch->writable_len < sizeof(ev)) {
			vq_push(vq, ch->head, 0);
			continue;
		}
		iov_from_buf(ch->iov + ch->nreadable, ch->n - ch->nreadable, 0, &ev, sizeof(ev));
		vq_push(vq, ch->head, sizeof(ev));
		v->event_pending = false;
		v->reset_unacked = true;
		v->reset_avail = vq_watch_avail(vq);
	}
	/* Read again after asking for the notification: a buffer given back
	 * before the driver could see the request comes without one. */
	if (v->reset_unacked && vq_watch_avail(vq) != v->reset_avail) {
		v->reset_unacked = false;
		v->rx_wanted = true; /* the REQUESTs held back */
	}
	return r < 0 ? r : 0;
}

static int tx_run(struct virtio_vsock *v, struct virtqueue *vq)
{
	int r;

	while ((r = vq_pop(vq, &v->chain)) > 0) {
		vsock_tx_packet(v, &v->chain);
		vq_push(vq, v->chain.head, 0);
	}
	return r;
}

static int vsock_notify(void *dev, unsigned queue)
{
	struct virtio_vsock *v = dev;
	int r = 0;

	pthread_mutex_lock(&v->lock);
	if (v->vqs) {
		if (queue == VSOCK_RXQ)
			r = vsock_rx_run(v, &v->vqs[VSOCK_RXQ]);
		else if (queue == VSOCK_TXQ)
			r = tx_run(v, &v->vqs[VSOCK_TXQ]);
		else if (queue == VSOCK_EVQ)
			r = event_run(v, &v->vqs[VSOCK_EVQ]);
	}
	/* Replies owed on rx while serving another queue: the transport's
	 * lock is held, so no kick from here; the eventfd's callback kicks.
	 * On rx itself, what is left waits for the driver's next buffers. */
	if (take_rx_wanted(v) && queue != VSOCK_RXQ)
		eventfd_write(v->kick_fd, 1);
	pthread_mutex_unlock(&v->lock);
	return r;
}

static uint64_t vsock_features(void *dev)
{
	(void)dev;
	return 1ULL << F_STREAM;
}

static void vsock_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, (const uint8_t *)&((struct virtio_vsock *)dev)->cfg + off, len);
}

static int vsock_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	struct virtio_vsock *v = dev;

	(void)features;
	pthread_mutex_lock(&v->lock);
	v->vqs = vqs;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

/* The driver reset the device: its sockets are gone (Linux resets them
 * all), so are ours. */
static void vsock_reset(void *dev)
{
	struct virtio_vsock *v = dev;

	pthread_mutex_lock(&v->lock);
	v->vqs = NULL;
	v->event_pending = false;
	v->reset_unacked = false;
	vsock_conn_drop_all(v);
	v->rx_wanted = false;
	pthread_mutex_unlock(&v->lock);
}

/* Snapshot blob: the next host port, little endian. The guest may still
 * hold sockets of connections that ended with the snapshot (closing, until
 * the transport reset and its own timeout clear them); a restored device
 * that handed out the same host ports again would have its requests match
 * those and be dropped. */
static long vsock_save(void *dev, void *buf, size_t cap)
{
	struct virtio_vsock *v = dev;
	uint32_t p;

	if (cap < 4)
		return -ENOSPC;
	pthread_mutex_lock(&v->lock);
	p = htole32(v->next_host_port);
	pthread_mutex_unlock(&v->lock);
	memcpy(buf, &p, 4);
	return 4;
}

static int vsock_restore(void *dev, const void *buf, size_t len)
{
	struct virtio_vsock *v = dev;
	uint32_t p;

	if (len != 4)
		return -EINVAL;
	memcpy(&p, buf, 4);
	p = le32toh(p);
	if (p < VSOCK_HOST_PORT_BASE)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	v->next_host_port = p;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

const struct virtio_dev_ops virtio_vsock_ops = {
	.device_id = VIRTIO_ID_VSOCK,
	.num_queues = 3,
	.queue_max = VSOCK_QUEUE_MAX,
	.config_size = sizeof(struct virtio_vsock_config),
	.features = vsock_features,
	.config_read = vsock_config_read,
	.activate = vsock_activate,
	.reset = vsock_reset,
	.notify = vsock_notify,
	.save = vsock_save,
	.restore = vsock_restore,
};

int virtio_vsock_open(struct virtio_vsock **out, const struct vsock_opts *o, struct tvm_err *e)
{
	uint64_t cid = o->guest_cid ? o->guest_cid : VSOCK_DEFAULT_GUEST_CID;
	struct virtio_vsock *v;
	int r;

	*out = NULL;
	/* CIDs are 32 bits in Linux; 0-2 are reserved, U32_MAX is "any". */
	if (cid < 3 || cid >= UINT32_MAX)
		return tvm_errf(e, EINVAL, "vsock: guest CID %llu is not in 3..%u", (unsigned long long)cid,
				UINT32_MAX - 1);
	if (!o->io.watch || !o->io.unwatch || !o->io.kick)
		return tvm_errf(e, EINVAL, "vsock: watch, unwatch and kick are required");
	v = calloc(1, sizeof(*v));
	if (!v)
		return tvm_errf(e, ENOMEM, "vsock: out of memory");
	pthread_mutex_init(&v->lock, NULL);
	v->guest_cid = cid;
	v->cfg.guest_cid = htole64(cid);
	v->io = o->io;
	v->listen_fd = -1;
	v->hs_timer_fd = -1;
	v->handshake_ns = (uint64_t)(o->handshake_ms ? o->handshake_ms : VSOCK_HANDSHAKE_MS) * 1000000u;
	v->next_host_port = VSOCK_HOST_PORT_BASE;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++)
		v->conns[i] = (struct vsock_conn){ .v = v, .fd = -1 };
	v->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->kick_fd < 0) {
		r = tvm_errf(e, errno, "vsock: eventfd: %s", strerror(errno));
		goto fail;
	}
	r = v->io.watch(v->io.ctx, v->kick_fd, EPOLLIN, kick_cb, v);
	if (r < 0) {
		close(v->kick_fd);
		v->kick_fd = -1;
		r = tvm_errf(e, -r, "vsock: watch: %s", strerror(-r));
		goto fail;
	}
	if (o->uds_path) {
		v->uds_path = strdup(o->uds_path);
		r = v->uds_path ? vsock_uds_listen(v, e) : tvm_errf(e, ENOMEM, "vsock: out of memory");
		if (r < 0)
			goto fail;
	}
	*out = v;
	return 0;
fail:
	virtio_vsock_close(v);
	return r;
}

void virtio_vsock_close(struct virtio_vsock *v)
{
	if (!v)
		return;
	vsock_conn_drop_all(v);
	vsock_uds_close(v);
	if (v->kick_fd >= 0) {
		v->io.unwatch(v->io.ctx, v->kick_fd);
		close(v->kick_fd);
	}
	free(v->uds_path);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

int virtio_vsock_connect(struct virtio_vsock *v, uint32_t guest_port, int *fd_out, struct tvm_err *e)
{
	struct vsock_conn *c;
	int sv[2], r = 0;

	*fd_out = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return tvm_errf(e, errno, "vsock: socketpair: %s", strerror(errno));
	/* Ours non-blocking; the caller's end as socketpair made it. */
	if (fcntl(sv[1], F_SETFL, O_NONBLOCK) < 0) {
		r = tvm_errf(e, errno, "vsock: fcntl: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	pthread_mutex_lock(&v->lock);
	c = vsock_conn_new(v, sv[1], CONN_HANDSHAKE);
	if (c)
		vsock_conn_start(v, c, guest_port);
	vsock_unlock_kick_rx(v);
	if (!c) {
		close(sv[0]);
		close(sv[1]);
		return tvm_errf(e, EAGAIN, "vsock: %d connections in use", VSOCK_MAX_CONNS);
	}
	*fd_out = sv[0];
	return 0;
}

void virtio_vsock_transport_reset(struct virtio_vsock *v)
{
	pthread_mutex_lock(&v->lock);
	vsock_conn_drop_all(v);
	v->event_pending = true;
	v->rx_wanted = false;
	unlock_and_kick(v, VSOCK_EVQ, true);
}

void virtio_vsock_stats(struct virtio_vsock *v, struct vsock_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&v->lock);
	s->conns = v->nconns;
	s->opened = v->opened;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		const struct vsock_conn *c = &v->conns[i];

		s->buffered += c->buf.len;
		s->buffer_mem += c->buf.data ? VSOCK_BUF_ALLOC : 0;
	}
	pthread_mutex_unlock(&v->lock);
}
