#include "devices/vsock/vsock_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "devices/virtio/iov.h"
#include "devices/vsock/virtio_vsock.h"

#define CAP VSOCK_BUF_ALLOC

int vbuf_put(struct vsock_buf *b, const struct iovec *iov, int n, size_t skip, uint32_t len)
{
	uint32_t tail, first;

	if (len > CAP - b->len)
		return -ENOSPC;
	if (!b->data && !(b->data = malloc(CAP)))
		return -ENOMEM;
	tail = (b->head + b->len) % CAP;
	first = len < CAP - tail ? len : CAP - tail;
	/* The ring wraps at most once: the free space is [tail, CAP) then
	 * [0, head). */
	if (iov_to_buf(iov, n, skip, b->data + tail, first) != first ||
	    iov_to_buf(iov, n, skip + first, b->data, len - first) != len - first)
		return -EINVAL;
	b->len += len;
	return 0;
}

long vbuf_flush(struct vsock_buf *b, int fd)
{
	long total = 0;

	while (b->len) {
		uint32_t first = b->len < CAP - b->head ? b->len : CAP - b->head;
		struct iovec iov[2] = { { b->data + b->head, first }, { b->data, b->len - first } };
		long r = vsock_send(fd, iov, b->len > first ? 2 : 1);

		if (r < 0)
			return r;
		if (r == 0)
			break;
		b->head = (uint32_t)((b->head + (unsigned long)r) % CAP);
		b->len -= (uint32_t)r;
		total += r;
	}
	if (!b->len)
		b->head = 0;
	return total;
}

void vbuf_free(struct vsock_buf *b)
{
	free(b->data);
	*b = (struct vsock_buf){ 0 };
}

long vsock_send(int fd, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };

	for (;;) {
		ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r >= 0)
			return r;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}
