#include "devices/blk/blk_image.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/blk/blk_cow.h"
#include "devices/virtio/iov.h"

int blk_image_open(struct blk_image *im, const struct blk_opts *o, struct tvm_err *e)
{
	bool cow = o->cow && !o->read_only;
	bool in_place = !o->read_only && !cow;
	struct stat st;
	off_t end;
	int r;

	memset(im, 0, sizeof(*im));
	im->fd = im->ofd = -1;
	if (!o->path || !*o->path)
		return tvm_errf(e, EINVAL, "drive: no image path given");
	/* O_NONBLOCK so that a FIFO is refused below instead of blocking
	 * the open; cleared again for the image's I/O. */
	im->fd = open(o->path, (in_place ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
	if (im->fd < 0)
		return tvm_errf(e, errno, "drive %s: cannot open: %s", o->path, strerror(errno));
	if (fstat(im->fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
		r = tvm_errf(e, EINVAL, "drive %s: not a regular file or block device", o->path);
		goto fail;
	}
	if (fcntl(im->fd, F_SETFL, fcntl(im->fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		r = tvm_errf(e, errno, "drive %s: fcntl: %s", o->path, strerror(errno));
		goto fail;
	}
	if (flock(im->fd, (in_place ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? tvm_errf(e, EBUSY, "drive %s: in use by another VM (locked)", o->path)
					 : tvm_errf(e, errno, "drive %s: cannot lock: %s", o->path, strerror(errno));
		goto fail;
	}
	end = lseek(im->fd, 0, SEEK_END);
	if (end < 0) {
		r = tvm_errf(e, errno, "drive %s: cannot find the size: %s", o->path, strerror(errno));
		goto fail;
	}
	if (end == 0 || end % BLK_SECTOR) {
		r = tvm_errf(e, EINVAL, "drive %s: size %lld bytes is not a positive multiple of %d", o->path,
			     (long long)end, BLK_SECTOR);
		goto fail;
	}
	im->size = im->base_size = (uint64_t)end;
	if (o->size && o->size != im->size) {
		if (!cow || o->size < im->size || o->size % BLK_SECTOR) {
			r = tvm_errf(e, EINVAL,
				     "drive %s: size %llu bytes: only a copy-on-write drive may be larger than its "
				     "image (%lld bytes), by whole %d-byte sectors",
				     o->path, (unsigned long long)o->size, (long long)end, BLK_SECTOR);
			goto fail;
		}
		im->size = o->size;
	}
	im->read_only = o->read_only;
	im->cow = cow;
	if (cow) {
		r = cow_open(im, o, e);
		if (r)
			goto fail;
	}
	return 0;
fail:
	blk_image_close(im);
	return r;
}

void blk_image_close(struct blk_image *im)
{
	if (im->cow)
		cow_close(im);
	if (im->fd >= 0)
		close(im->fd);
	im->fd = -1;
	im->cow = false;
}

/* The one range check for every request: [off, off + len) in the image. */
static int check(const struct blk_image *im, uint64_t off, uint64_t len, bool write)
{
	if (off > im->size || len > im->size - off)
		return -ERANGE;
	if (write && im->read_only)
		return -EROFS;
	return 0;
}

static uint64_t iov_total(const struct iovec *iov, int n)
{
	uint64_t len = 0;

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
}

static int rw(struct blk_image *im, struct iovec *iov, int n, uint64_t off, bool write)
{
	uint64_t len = iov_total(iov, n);
	int r = check(im, off, len, write);

	if (r || !len)
		return r;
	if (im->cow)
		return write ? cow_write(im, iov, n, off, len) : cow_read(im, iov, n, off, len);
	return write ? iov_pwrite_full(im->fd, iov, n, off) : iov_pread_full(im->fd, iov, n, off);
}

int blk_image_read(struct blk_image *im, struct iovec *iov, int n, uint64_t off)
{
	return rw(im, iov, n, off, false);
}

int blk_image_write(struct blk_image *im, struct iovec *iov, int n, uint64_t off)
{
	return rw(im, iov, n, off, true);
}

int blk_image_flush(struct blk_image *im)
{
	int fd = im->cow ? (im->keep_overlay ? im->ofd : -1) : (im->read_only ? -1 : im->fd);

	if (fd >= 0 && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

/* Discard or write zeroes over a byte range. */
static int span(struct blk_image *im, uint64_t off, uint64_t len, bool zeroes)
{
	int r = check(im, off, len, true);

	if (r || !len)
		return r;
	if (im->cow)
		return zeroes ? cow_write_zeroes(im, off, len) : cow_discard(im, off, len);
	return zeroes ? blk_zero_range(im->fd, off, len) : blk_punch(im->fd, off, len);
}

int blk_image_discard(struct blk_image *im, uint64_t off, uint64_t len)
{
	return span(im, off, len, false);
}

int blk_image_write_zeroes(struct blk_image *im, uint64_t off, uint64_t len)
{
	return span(im, off, len, true);
}

static bool unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOSYS || err == EINVAL || err == ENODEV;
}

int blk_punch(int fd, uint64_t off, uint64_t len)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	/* Discarding is advisory: a file system without holes keeps the data. */
	return unsupported(errno) ? 0 : -errno;
}

int blk_zero_range(int fd, uint64_t off, uint64_t len)
{
	static const uint8_t zeroes[64 * 1024];

	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (!unsupported(errno))
		return -errno;
	if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (!unsupported(errno))
		return -errno;
	while (len) {
		size_t chunk = len < sizeof(zeroes) ? len : sizeof(zeroes);
		struct iovec v = { .iov_base = (void *)zeroes, .iov_len = chunk };
		int r = iov_pwrite_full(fd, &v, 1, off);

		if (r)
			return r;
		off += chunk;
		len -= chunk;
	}
	return 0;
}

int blk_image_export(struct blk_image *im, int data_fd, const uint64_t **map, uint64_t *nwords)
{
	if (!im->cow)
		return -EINVAL;
	*map = im->map;
	*nwords = (im->nblocks + 63) / 64;
	return cow_export(im, data_fd);
}

int blk_image_import(struct blk_image *im, int data_fd, const uint64_t *map, uint64_t nwords)
{
	if (!im->cow)
		return -EINVAL;
	return cow_import(im, data_fd, map, nwords);
}
