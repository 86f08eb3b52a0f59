/* Hybrid Unix-socket backend, Firecracker compatible: host clients connect
 * to uds_path and name the guest port with "CONNECT <port>\n"; the guest's
 * connections to host port P go to the Unix socket "uds_path_P".
 *
 * Any local process that can reach the socket is a client, so a client
 * still writing its line (CONN_HANDSHAKE) holds a slot only until its
 * deadline (v->handshake_ns after accept; one timerfd armed for the
 * earliest) and gives it up at once to a newcomer when every slot is in use
 * (vsock_conn_new): idle half-open clients cannot lock the agent out. */
#include "devices/vsock/vsock_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmm/core/clock.h"

static int unix_addr(struct sockaddr_un *a, const char *path, const char *suffix)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path, sizeof(a->sun_path), "%s%s", path, suffix);
	return n < 0 || (size_t)n >= sizeof(a->sun_path) ? -ENAMETOOLONG : 0;
}

/* ---- handshake deadlines ---- */

static void hs_timer_cb(void *arg, uint32_t events);

/* The earliest deadline of a client still handshaking, 0 if none. */
static uint64_t hs_next_deadline(const struct virtio_vsock *v)
{
	uint64_t next = 0;

	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		const struct vsock_conn *c = &v->conns[i];

		if (c->state == CONN_HANDSHAKE && (!next || c->deadline_ns < next))
			next = c->deadline_ns;
	}
	return next;
}

/* Arm the timer for at (CLOCK_MONOTONIC ns; 0: disarm). It is watched
 * only while armed, so an idle device costs the event loop nothing. When
 * it cannot be armed or watched, hs_timer_at stays 0 and the next accept
 * tries again; meanwhile eviction still keeps room for new clients. */
static void hs_timer_set(struct virtio_vsock *v, uint64_t at)
{
	struct itimerspec its = { .it_value = { (time_t)(at / 1000000000u), (long)(at % 1000000000u) } };

	v->hs_timer_at = 0;
	if (!at && !v->hs_timer_watched)
		return; /* idle already: no syscall per accepted client */
	if (timerfd_settime(v->hs_timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0 || !at) {
		if (v->hs_timer_watched)
			v->io.unwatch(v->io.ctx, v->hs_timer_fd);
		v->hs_timer_watched = false;
		return;
	}
	if (!v->hs_timer_watched)
		v->hs_timer_watched = v->io.watch(v->io.ctx, v->hs_timer_fd, EPOLLIN, hs_timer_cb, v) == 0;
	if (v->hs_timer_watched)
		v->hs_timer_at = at;
}

/* Event-loop thread: close the handshakes past their deadline (they owe
 * the guest nothing), re-arm for the next one. */
static void hs_timer_cb(void *arg, uint32_t events)
{
	struct virtio_vsock *v = arg;
	uint64_t ticks, now = clock_mono_ns();
	ssize_t n;

	(void)events;
	pthread_mutex_lock(&v->lock);
	n = read(v->hs_timer_fd, &ticks, sizeof(ticks)); /* clears readiness; EAGAIN if re-armed since */
	(void)n;
	for (unsigned i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->state == CONN_HANDSHAKE && c->deadline_ns <= now)
			vsock_conn_drop(v, c);
	}
	hs_timer_set(v, hs_next_deadline(v));
	pthread_mutex_unlock(&v->lock);
}

/* ---- the listener ---- */

/* Accept every pending client; each starts its handshake with what it has
 * sent already (a client that wrote its line at once is served now, not a
 * loop round later). Clients beyond VSOCK_MAX_CONNS are closed at once
 * unless an older handshake gives its slot up, and when accept fails for
 * lack of fds or memory the listener is unwatched until a connection
 * closes: leaving clients queued would keep the listener readable and the
 * event loop spinning. */
static void accept_cb(void *arg, uint32_t events)
{
	struct virtio_vsock *v = arg;

	(void)events;
	pthread_mutex_lock(&v->lock);
	for (;;) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct vsock_conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && !v->listen_paused) {
				v->io.unwatch(v->io.ctx, v->listen_fd);
				v->listen_paused = true;
			}
			break;
		}
		c = vsock_conn_new(v, fd, CONN_HANDSHAKE);
		if (!c) {
			close(fd);
			continue;
		}
		c->hybrid = true;
		c->deadline_ns = clock_mono_ns() + v->handshake_ns;
		vsock_uds_handshake(v, c);
		if (c->state == CONN_HANDSHAKE)
			vsock_conn_watch(v, c);
	}
	/* New deadlines come after every armed one: arm only an idle timer. */
	if (!v->hs_timer_at)
		hs_timer_set(v, hs_next_deadline(v));
	vsock_unlock_kick_rx(v);
}

/* The path may hold the socket file of a VM that ended without removing
 * it (stale: nobody listens, so it is replaced) or of a VM that still runs
 * (refused, as Firecracker does: taking it over would cut that VM's agent
 * off, and our exit would delete its path). Anything else there is left
 * for bind() to refuse. */
static int claim_path(struct virtio_vsock *v, const struct sockaddr_un *a, struct tvm_err *e)
{
	struct stat st;
	int fd, r;

	if (lstat(v->uds_path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tvm_errf(e, errno, "vsock-uds %s: socket: %s", v->uds_path, strerror(errno));
	r = connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0 ? 0 : errno;
	close(fd);
	/* EAGAIN: a listener with a full backlog, alive all the same. */
	if (r == 0 || r == EAGAIN)
		return tvm_errf(e, EADDRINUSE, "vsock-uds %s: address in use (another VM listens there)", v->uds_path);
	if (r == ECONNREFUSED)
		unlink(v->uds_path);
	return 0;
}

/* Unlink the socket file we bound, unless it was replaced since: then it
 * is another VM's or the user's. */
static void unlink_if_ours(struct virtio_vsock *v)
{
	struct stat st;

	if (v->uds_bound && lstat(v->uds_path, &st) == 0 && st.st_dev == v->uds_dev && st.st_ino == v->uds_ino)
		unlink(v->uds_path);
	v->uds_bound = false;
}

int vsock_uds_listen(struct virtio_vsock *v, struct tvm_err *e)
{
	struct sockaddr_un a;
	struct stat st;
	int fd, r;

	/* Room for the longest "_<port>" the guest may ask for. */
	if (unix_addr(&a, v->uds_path, "_4294967295") < 0)
		return tvm_errf(e, EINVAL, "vsock-uds %s: path too long for a Unix socket", v->uds_path);
	unix_addr(&a, v->uds_path, "");
	r = claim_path(v, &a, e);
	if (r < 0)
		return r;
	v->hs_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (v->hs_timer_fd < 0)
		return tvm_errf(e, errno, "vsock-uds %s: timerfd_create: %s", v->uds_path, strerror(errno));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tvm_errf(e, errno, "vsock-uds %s: socket: %s", v->uds_path, strerror(errno));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		r = errno;
		close(fd);
		return tvm_errf(e, r, "vsock-uds %s: %s", v->uds_path, strerror(r));
	}
	/* Which file is ours, so that we never delete a successor's. */
	if (lstat(v->uds_path, &st) == 0) {
		v->uds_bound = true;
		v->uds_dev = st.st_dev;
		v->uds_ino = st.st_ino;
	}
	r = v->io.watch(v->io.ctx, fd, EPOLLIN, accept_cb, v);
	if (r < 0) {
		close(fd);
		unlink_if_ours(v);
		return tvm_errf(e, -r, "vsock-uds %s: watch: %s", v->uds_path, strerror(-r));
	}
	v->listen_fd = fd;
	return 0;
}

void vsock_uds_resume(struct virtio_vsock *v)
{
	if (v->listen_paused && v->io.watch(v->io.ctx, v->listen_fd, EPOLLIN, accept_cb, v) == 0)
		v->listen_paused = false;
}

void vsock_uds_close(struct virtio_vsock *v)
{
	if (v->hs_timer_fd >= 0) {
		if (v->hs_timer_watched)
			v->io.unwatch(v->io.ctx, v->hs_timer_fd);
		v->hs_timer_watched = false;
		close(v->hs_timer_fd);
		v->hs_timer_fd = -1;
	}
	if (v->listen_fd < 0)
		return;
	if (!v->listen_paused)
		v->io.unwatch(v->io.ctx, v->listen_fd);
	close(v->listen_fd);
	unlink_if_ours(v);
	v->listen_fd = -1;
}

/* "CONNECT <decimal u32>\n", nothing else. */
static bool parse_connect(const char *s, size_t n, uint32_t *port)
{
	static const char pfx[] = "CONNECT ";
	size_t i = sizeof(pfx) - 1;
	uint64_t p = 0;

	if (n < i + 2 || memcmp(s, pfx, i) || s[n - 1] != '\n')
		return false;
	for (; i < n - 1; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		p = p * 10 + (uint64_t)(s[i] - '0');
		if (p > UINT32_MAX)
			return false;
	}
	*port = (uint32_t)p;
	return true;
}

void vsock_uds_handshake(struct virtio_vsock *v, struct vsock_conn *c)
{
	uint32_t port;

	/* A byte at a time, so that bytes after the line stay in the socket
	 * for the guest. The line is at most VSOCK_LINE_MAX bytes. */
	while (c->line_len == 0 || c->line[c->line_len - 1] != '\n') {
		ssize_t r;

		if (c->line_len == VSOCK_LINE_MAX) {
			vsock_conn_drop(v, c);
			return;
		}
		r = read(c->fd, &c->line[c->line_len], 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			vsock_conn_drop(v, c);
			return;
		}
		c->line_len++;
	}
	if (!parse_connect(c->line, c->line_len, &port)) {
		vsock_conn_drop(v, c);
		return;
	}
	vsock_conn_start(v, c, port);
}

int vsock_uds_dial(struct virtio_vsock *v, uint32_t port)
{
	struct sockaddr_un a;
	char suffix[16];
	int fd;

	if (!v->uds_path)
		return -ECONNREFUSED;
	snprintf(suffix, sizeof(suffix), "_%u", port);
	if (unix_addr(&a, v->uds_path, suffix) < 0)
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Unix stream connects complete at once: EAGAIN means a full backlog,
	 * which the guest sees as a refusal. */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

int vsock_uds_ok(struct vsock_conn *c)
{
	char line[24];
	struct iovec iov;
	int n = snprintf(line, sizeof(line), "OK %u\n", c->host_port);

	/* Nothing has been written to this new socket yet, so its buffer
	 * takes the whole line. */
	iov = (struct iovec){ line, (size_t)n };
	return vsock_send(c->fd, &iov, 1) == n ? 0 : -EIO;
}
