#include "vmm/snapshot/snapshot_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/file_open.h"

#define PAGE 4096

int snap_path(char *buf, size_t cap, const char *dir, const char *name, struct tvm_err *e)
{
	int n = snprintf(buf, cap, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= cap)
		return tvm_errf(e, ENAMETOOLONG, "snapshot %s: path too long", dir);
	return 0;
}

static int snap_dir_reusable(const char *dir, struct tvm_err *e)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool others = false, state = false;

	if (!d)
		return tvm_errf(e, errno, "snapshot %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strcmp(de->d_name, "state"))
			state = true;
		else
			others = true;
	}
	closedir(d);
	if (others && !state)
		return tvm_errf(e, EEXIST, "snapshot %s: directory holds other files (give a new or empty one)", dir);
	return 0;
}

int snap_mkdir(const char *dir, struct tvm_err *e)
{
	struct stat st;

	if (mkdir(dir, 0700) == 0)
		return 0;
	if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return snap_dir_reusable(dir, e);
	return tvm_errf(e, errno == EEXIST ? ENOTDIR : errno, "snapshot %s: %s", dir,
			errno == EEXIST ? "exists and is not a directory" : strerror(errno));
}

int snap_write_file(const char *dir, const char *name, snap_fill_fn fill, void *ctx, struct tvm_err *e)
{
	char tmp[4096], path[4096], tname[256];
	int fd, r;

	snprintf(tname, sizeof(tname), ".%s.tmp", name);
	r = snap_path(tmp, sizeof(tmp), dir, tname, e);
	if (!r)
		r = snap_path(path, sizeof(path), dir, name, e);
	if (r)
		return r;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return tvm_errf(e, errno, "%s: %s", tmp, strerror(errno));
	r = fill(fd, ctx, e);
	if (!r && fsync(fd) < 0)
		r = tvm_errf(e, errno, "%s: fsync: %s", tmp, strerror(errno));
	if (close(fd) < 0 && !r)
		r = tvm_errf(e, errno, "%s: close: %s", tmp, strerror(errno));
	if (!r && rename(tmp, path) < 0)
		r = tvm_errf(e, errno, "%s: rename: %s", path, strerror(errno));
	if (r)
		unlink(tmp);
	return r;
}

int snap_sync_dir(const char *dir, struct tvm_err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return tvm_errf(e, errno, "snapshot %s: %s", dir, strerror(errno));
	if (fsync(fd) < 0)
		r = tvm_errf(e, errno, "snapshot %s: fsync: %s", dir, strerror(errno));
	close(fd);
	return r;
}

int snap_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, struct tvm_err *e)
{
	uint64_t size;
	uint8_t *p;
	size_t got = 0;
	int fd = file_open_regular(NULL, path, O_RDONLY, 0, max, &size, e);

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return fd;
	p = malloc(size ? (size_t)size : 1);
	if (!p) {
		close(fd);
		return tvm_errf(e, ENOMEM, "%s: out of memory", path);
	}
	while (got < (size_t)size) {
		ssize_t n = read(fd, p + got, (size_t)size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;
			free(p);
			close(fd);
			return tvm_errf(e, err, "%s: read: %s", path, n < 0 ? strerror(err) : "file shrank");
		}
		got += (size_t)n;
	}
	close(fd);
	*buf = p;
	*len = got;
	return 0;
}

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;

	for (size_t i = 0; i < PAGE / 8; i++)
		if (w[i])
			return false;
	return true;
}

int snap_pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off, const char *what, struct tvm_err *e)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tvm_errf(e, w < 0 ? errno : EIO, "%s: write: %s", what,
					w < 0 ? strerror(errno) : "short write");
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int snap_fill_mem(int fd, void *ctx, struct tvm_err *e)
{
	const struct guest_mem *m = ctx;
	uint64_t off = 0;

	/* The file is the host mapping, byte for byte (regions are laid out
	 * back to back from base). */
	if (ftruncate(fd, (off_t)m->size) < 0)
		return tvm_errf(e, errno, "memory file: ftruncate: %s", strerror(errno));
	while (off < m->size) {
		uint64_t start;
		int r;

		if (page_is_zero(m->base + off)) {
			off += PAGE;
			continue;
		}
		start = off;
		while (off < m->size && !page_is_zero(m->base + off))
			off += PAGE;
		r = snap_pwrite_all(fd, m->base + start, off - start, start, "memory file", e);
		if (r)
			return r;
	}
	return 0;
}
