/* Byte queue for guest bytes a host socket would not take yet, and the
 * non-blocking socket send used for them. Capacity VSOCK_BUF_ALLOC bytes,
 * allocated on first use and freed by vbuf_free (the device frees it each
 * time it drains, so only stalled connections hold memory). */
#ifndef TVM_VSOCK_BUF_H
#define TVM_VSOCK_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct vsock_buf {
	uint8_t *data; /* VSOCK_BUF_ALLOC bytes, or NULL */
	uint32_t head; /* offset of the oldest byte */
	uint32_t len;  /* bytes queued */
};

/* Append len bytes found skip bytes into iov[0..n). Returns 0, -ENOSPC
 * when they would not fit (nothing appended), -ENOMEM, or -EINVAL when
 * iov holds fewer bytes. */
int vbuf_put(struct vsock_buf *b, const struct iovec *iov, int n, size_t skip, uint32_t len);

/* Send queued bytes to fd until it would block. Returns the bytes sent
 * (maybe 0) or -errno (EPIPE, ECONNRESET...). */
long vbuf_flush(struct vsock_buf *b, int fd);

void vbuf_free(struct vsock_buf *b);

/* sendmsg(iov[0..n)) without blocking or SIGPIPE, retrying EINTR. Returns
 * bytes sent, 0 when fd would block, or -errno. */
long vsock_send(int fd, const struct iovec *iov, int n);

#endif
