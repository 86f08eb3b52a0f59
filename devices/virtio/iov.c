#include "devices/virtio/iov.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static size_t copy(const struct iovec *iov, int n, size_t skip, uint8_t *buf, size_t len, bool to_iov)
{
	size_t done = 0;

	for (int i = 0; i < n && done < len; i++) {
		size_t l = iov[i].iov_len, chunk;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		chunk = l - skip < len - done ? l - skip : len - done;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + skip, buf + done, chunk);
		else
			memcpy(buf + done, (const uint8_t *)iov[i].iov_base + skip, chunk);
		done += chunk;
		skip = 0;
	}
	return done;
}

size_t iov_to_buf(const struct iovec *iov, int n, size_t skip, void *dst, size_t len)
{
	return copy(iov, n, skip, dst, len, false);
}

size_t iov_from_buf(const struct iovec *iov, int n, size_t skip, const void *src, size_t len)
{
	return copy(iov, n, skip, (uint8_t *)src, len, true);
}

int iov_slice(const struct iovec *iov, int n, size_t skip, size_t len, struct iovec *dst, int cap)
{
	int k = 0;

	for (int i = 0; i < n && len; i++) {
		size_t l = iov[i].iov_len, chunk;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		if (k == cap)
			return -1;
		chunk = l - skip < len ? l - skip : len;
		dst[k++] = (struct iovec){ .iov_base = (uint8_t *)iov[i].iov_base + skip, .iov_len = chunk };
		len -= chunk;
		skip = 0;
	}
	return len ? -1 : k;
}

/* Drop the first done bytes of iov[0..*n), moving *iov past finished entries. */
static void advance(struct iovec **iov, int *n, size_t done)
{
	while (*n && done >= (*iov)->iov_len) {
		done -= (*iov)->iov_len;
		(*iov)++;
		(*n)--;
	}
	if (*n) {
		(*iov)->iov_base = (uint8_t *)(*iov)->iov_base + done;
		(*iov)->iov_len -= done;
	}
}

static int xfer_full(int fd, struct iovec *iov, int n, uint64_t off, int write)
{
	while (n) {
		ssize_t r;

		if (off > (uint64_t)LLONG_MAX)
			return -EINVAL;
		r = write ? pwritev(fd, iov, n, (off_t)off) : preadv(fd, iov, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		off += (uint64_t)r;
		advance(&iov, &n, (size_t)r);
	}
	return 0;
}

int iov_pread_full(int fd, struct iovec *iov, int n, uint64_t off)
{
	return xfer_full(fd, iov, n, off, 0);
}

int iov_pwrite_full(int fd, struct iovec *iov, int n, uint64_t off)
{
	return xfer_full(fd, iov, n, off, 1);
}
