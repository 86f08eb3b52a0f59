/* Hybrid Unix-socket backend, Firecracker compatible: host clients connect
 * to uds_path and name the guest port with "CONNECT <port>\n"; the guest's
 * connections to host port P go to the Unix socket "uds_path_P". */
#include "devices/vsock/vsock_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_addr(struct sockaddr_un *a, const char *path, const char *suffix)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path, sizeof(a->sun_path), "%s%s", path, suffix);
	return n < 0 || (size_t)n >= sizeof(a->sun_path) ? -ENAMETOOLONG : 0;
}

/* Accept every pending client; each starts its handshake. Clients beyond
 * VSOCK_MAX_CONNS are closed at once, and when accept fails for lack of
 * fds or memory the listener is unwatched until a connection closes:
 * leaving clients queued would keep the listener readable and the event
 * loop spinning. */
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
		vsock_conn_watch(v, c);
	}
	pthread_mutex_unlock(&v->lock);
}

int vsock_uds_listen(struct virtio_vsock *v, struct tvm_err *e)
{
	struct sockaddr_un a;
	struct stat st;
	int fd, r;

	/* Room for the longest "_<port>" the guest may ask for. */
	if (unix_addr(&a, v->uds_path, "_4294967295") < 0)
		return tvm_errf(e, EINVAL, "vsock %s: path too long for a Unix socket", v->uds_path);
	unix_addr(&a, v->uds_path, "");
	if (lstat(v->uds_path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(v->uds_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tvm_errf(e, errno, "vsock %s: socket: %s", v->uds_path, strerror(errno));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		r = errno;
		close(fd);
		return tvm_errf(e, r, "vsock %s: %s", v->uds_path, strerror(r));
	}
	r = v->io.watch(v->io.ctx, fd, EPOLLIN, accept_cb, v);
	if (r < 0) {
		close(fd);
		unlink(v->uds_path);
		return tvm_errf(e, -r, "vsock %s: watch: %s", v->uds_path, strerror(-r));
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
	if (v->listen_fd < 0)
		return;
	if (!v->listen_paused)
		v->io.unwatch(v->io.ctx, v->listen_fd);
	close(v->listen_fd);
	unlink(v->uds_path);
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
