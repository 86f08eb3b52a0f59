/* Scatter-gather helpers for the block device: carve byte ranges out of a
 * chain's buffers, and preadv/pwritev that finish the whole transfer. */
#ifndef TVM_BLK_IOV_H
#define TVM_BLK_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Copy up to len bytes starting skip bytes into iov[0..n) to dst. Returns
 * the bytes copied (less than len when iov ends first). */
size_t iov_to_buf(const struct iovec *iov, int n, size_t skip, void *dst, size_t len);
/* The other way: copy up to len bytes of src into iov from skip on. */
size_t iov_from_buf(const struct iovec *iov, int n, size_t skip, const void *src, size_t len);

/* Write into dst[0..cap) the entries covering bytes [skip, skip + len) of
 * iov[0..n), trimming the first and last. Returns the number of entries, or
 * -1 when iov holds fewer than skip + len bytes or cap is too small. */
int iov_slice(const struct iovec *iov, int n, size_t skip, size_t len, struct iovec *dst, int cap);

/* preadv/pwritev all bytes of iov[0..n) at file offset off (bytes),
 * retrying EINTR and short transfers. iov is consumed (entries advanced).
 * Returns 0, -errno, or -EIO when the file ends first (reads). */
int iov_pread_full(int fd, struct iovec *iov, int n, uint64_t off);
int iov_pwrite_full(int fd, struct iovec *iov, int n, uint64_t off);

#endif
