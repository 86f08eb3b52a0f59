#include "devices/blk/blk_cow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/virtio/iov.h"

#define BLK BLK_COW_BLOCK

static bool test(const struct blk_image *im, uint64_t b)
{
	return im->map[b / 64] >> (b % 64) & 1;
}

static void set(struct blk_image *im, uint64_t b)
{
	if (!test(im, b)) {
		im->map[b / 64] |= 1ULL << (b % 64);
		im->in_overlay++;
	}
}

static void clear(struct blk_image *im, uint64_t b)
{
	if (test(im, b)) {
		im->map[b / 64] &= ~(1ULL << (b % 64));
		im->in_overlay--;
	}
}

/* An unnamed file in dir, or a named one at path that stays. Returns the
 * descriptor or -errno. */
static int create_overlay(const struct blk_opts *o, bool *keep, struct tvm_err *e)
{
	const char *dir = o->overlay_dir ? o->overlay_dir : getenv("TMPDIR");
	char tmpl[PATH_MAX];
	int fd;

	*keep = o->overlay_path != NULL;
	if (o->overlay_path) {
		fd = open(o->overlay_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return tvm_errf(e, errno, "drive %s: cannot create overlay %s: %s", o->path, o->overlay_path,
					strerror(errno));
		return fd;
	}
	if (!dir || !*dir)
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* No O_TMPFILE on this file system: a named file, unlinked at once. */
		if (snprintf(tmpl, sizeof(tmpl), "%s/tinyvmm-overlay-XXXXXX", dir) >= (int)sizeof(tmpl))
			return tvm_errf(e, ENAMETOOLONG, "drive %s: overlay directory name too long", o->path);
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0)
			unlink(tmpl);
	}
	if (fd < 0)
		return tvm_errf(e, errno, "drive %s: cannot create an overlay in %s: %s", o->path, dir,
				strerror(errno));
	return fd;
}

int cow_open(struct blk_image *im, const struct blk_opts *o, struct tvm_err *e)
{
	im->nblocks = (im->size + BLK - 1) / BLK;
	/* The default is what the drive's own size allows anyway, kept
	 * explicit: a guest filling its disk fills no more of the host's. */
	im->limit_blocks = o->overlay_limit ? o->overlay_limit / BLK : im->nblocks;
	im->map = calloc((im->nblocks + 63) / 64, sizeof(uint64_t));
	im->tmp = calloc(IOV_MAX, sizeof(struct iovec));
	if (!im->map || !im->tmp)
		return tvm_errf(e, ENOMEM, "drive %s: no memory for the overlay map", o->path);
	im->ofd = create_overlay(o, &im->keep_overlay, e);
	if (im->ofd < 0)
		return im->ofd;
	/* Same size as the image, all holes: untouched blocks cost nothing. */
	if (ftruncate(im->ofd, (off_t)im->size) < 0)
		return tvm_errf(e, errno, "drive %s: cannot size the overlay: %s", o->path, strerror(errno));
	return 0;
}

void cow_close(struct blk_image *im)
{
	if (im->ofd >= 0)
		close(im->ofd);
	im->ofd = -1;
	free(im->map);
	free(im->tmp);
	im->map = NULL;
	im->tmp = NULL;
}

int cow_read(struct blk_image *im, struct iovec *iov, int n, uint64_t off, uint64_t len)
{
	uint64_t pos = off, end = off + len;

	/* One preadv per run of blocks that live in the same file. */
	while (pos < end) {
		uint64_t b = pos / BLK, run_end;
		bool over = test(im, b);
		int k, r;

		while (b < im->nblocks && b * BLK < end && test(im, b) == over)
			b++;
		run_end = b * BLK < end ? b * BLK : end;
		/* Past the image's end (a drive larger than its image) an
		 * unwritten block reads zeros. */
		if (!over && pos < im->base_size && run_end > im->base_size)
			run_end = im->base_size;
		k = iov_slice(iov, n, pos - off, run_end - pos, im->tmp, IOV_MAX);
		if (k < 0)
			return -EINVAL;
		if (!over && pos >= im->base_size) {
			for (int i = 0; i < k; i++)
				memset(im->tmp[i].iov_base, 0, im->tmp[i].iov_len);
			pos = run_end;
			continue;
		}
		r = iov_pread_full(over ? im->ofd : im->fd, im->tmp, k, pos);
		if (r)
			return r;
		pos = run_end;
	}
	return 0;
}

static int copy_up(struct blk_image *im, uint64_t b)
{
	uint8_t buf[BLK] = { 0 };
	uint64_t off = b * BLK;
	size_t n = im->size - off < BLK ? im->size - off : BLK; /* the last block may be short */
	/* What of it the image has (none past its end: zeros). */
	size_t from_image = off >= im->base_size ? 0 : im->base_size - off < n ? im->base_size - off : n;
	struct iovec v = { .iov_base = buf, .iov_len = from_image };
	int r = from_image ? iov_pread_full(im->fd, &v, 1, off) : 0;

	if (r)
		return r;
	v = (struct iovec){ .iov_base = buf, .iov_len = n };
	r = iov_pwrite_full(im->ofd, &v, 1, off);
	if (r)
		return r;
	set(im, b);
	return 0;
}

/* Before changing [off, off + len) in the overlay: check the limit with the
 * blocks this adds, and copy up edge blocks only partly covered. */
static int prepare(struct blk_image *im, uint64_t off, uint64_t len)
{
	uint64_t first = off / BLK, last = (off + len - 1) / BLK, fresh = 0;
	int r;

	for (uint64_t b = first; b <= last; b++)
		fresh += !test(im, b);
	if (fresh > im->limit_blocks - im->in_overlay)
		return -ENOSPC;
	if (off % BLK && !test(im, first) && (r = copy_up(im, first)))
		return r;
	if ((off + len) % BLK && !test(im, last) && (r = copy_up(im, last)))
		return r;
	return 0;
}

static void mark(struct blk_image *im, uint64_t off, uint64_t len)
{
	for (uint64_t b = off / BLK; b <= (off + len - 1) / BLK; b++)
		set(im, b);
}

int cow_write(struct blk_image *im, struct iovec *iov, int n, uint64_t off, uint64_t len)
{
	int r = prepare(im, off, len);

	if (!r)
		r = iov_pwrite_full(im->ofd, iov, n, off);
	if (!r)
		mark(im, off, len);
	return r;
}

int cow_write_zeroes(struct blk_image *im, uint64_t off, uint64_t len)
{
	int r = prepare(im, off, len);

	if (!r)
		r = blk_zero_range(im->ofd, off, len);
	if (!r)
		mark(im, off, len);
	return r;
}

/* Blocks wholly inside the range go back to the image: after a discard the
 * guest may read old data, and the overlay (and its limit) shrinks. */
int cow_discard(struct blk_image *im, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	uint64_t b = (off + BLK - 1) / BLK;
	/* The image's last block may be short: ending at the image end covers it. */
	uint64_t stop = end == im->size ? im->nblocks : end / BLK;

	while (b < stop) {
		uint64_t start;
		int r;

		if (!test(im, b)) {
			b++;
			continue;
		}
		start = b;
		while (b < stop && test(im, b))
			clear(im, b++);
		r = blk_punch(im->ofd, start * BLK, (b - start) * BLK);
		if (r)
			return r;
	}
	return 0;
}

/* Copy [off, off + len) from in to out at the same offset. */
static int copy_range(int in, int out, uint64_t off, uint64_t len)
{
	uint8_t buf[64 * 1024];

	while (len) {
		loff_t a = (loff_t)off, b = (loff_t)off;
		ssize_t n = copy_file_range(in, &a, out, &b, len, 0);

		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
			size_t want = len < sizeof(buf) ? (size_t)len : sizeof(buf);

			n = pread(in, buf, want, (off_t)off);
			if (n > 0 && pwrite(out, buf, (size_t)n, (off_t)off) != n)
				return -EIO;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* short source */
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Copy every run of blocks set in the map from in to out. */
static int copy_runs(struct blk_image *im, int in, int out)
{
	uint64_t b = 0;

	while (b < im->nblocks) {
		uint64_t start, end;
		int r;

		if (!test(im, b)) {
			b++;
			continue;
		}
		start = b;
		while (b < im->nblocks && test(im, b))
			b++;
		end = b * BLK < im->size ? b * BLK : im->size;
		r = copy_range(in, out, start * BLK, end - start * BLK);
		if (r)
			return r;
	}
	return 0;
}

int cow_export(struct blk_image *im, int fd)
{
	if (ftruncate(fd, (off_t)im->size) < 0)
		return -errno;
	return copy_runs(im, im->ofd, fd);
}

int cow_import(struct blk_image *im, int fd, const uint64_t *map, uint64_t nwords)
{
	uint64_t words = (im->nblocks + 63) / 64, count = 0;
	struct stat st;
	int r;

	if (nwords != words || fstat(fd, &st) < 0 || (uint64_t)st.st_size != im->size)
		return -EINVAL;
	if (im->nblocks % 64 && (map[words - 1] >> (im->nblocks % 64)))
		return -EINVAL; /* bits past the last block */
	for (uint64_t i = 0; i < words; i++)
		count += (uint64_t)__builtin_popcountll(map[i]);
	if (count > im->limit_blocks)
		return -ENOSPC;
	memcpy(im->map, map, words * sizeof(uint64_t));
	im->in_overlay = count;
	r = copy_runs(im, fd, im->ofd);
	if (r) {
		memset(im->map, 0, words * sizeof(uint64_t));
		im->in_overlay = 0;
	}
	return r;
}
