/* Image files for the block tests: a private temp directory, images filled
 * with a known pattern, and ways to look at what ended up in them. */
#ifndef TVM_TESTS_BLK_FILES_H
#define TVM_TESTS_BLK_FILES_H

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tb {
	char dir[64];
	char path[128]; /* the image made by tb_image() */
};

/* Byte at image offset off before anything is written. */
static inline uint8_t tb_pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + off / 512 + 1);
}

static inline void tb_init(struct tb *t)
{
	strcpy(t->dir, "/tmp/tvm-blk-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

/* Remove the directory and every file made in it. */
static inline void tb_fini(struct tb *t)
{
	DIR *d = opendir(t->dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d)
		closedir(d);
	rmdir(t->dir);
}

/* t->dir/name as a path (static buffer per call site's t). */
static inline const char *tb_file(struct tb *t, const char *name)
{
	snprintf(t->path, sizeof(t->path), "%s/%s", t->dir, name);
	return t->path;
}

/* Create t->dir/name, size bytes of tb_pattern(); returns its path. */
static inline const char *tb_image(struct tb *t, const char *name, uint64_t size)
{
	const char *p = tb_file(t, name);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	uint8_t *buf = malloc(size);

	ck_assert_int_ge(fd, 0);
	for (uint64_t i = 0; i < size; i++)
		buf[i] = tb_pattern(i);
	ck_assert_int_eq(pwrite(fd, buf, size, 0), (ssize_t)size);
	free(buf);
	close(fd);
	return p;
}

static inline void tb_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

/* FNV-1a of the whole file. */
static inline uint64_t tb_hash(const char *path)
{
	uint64_t h = 1469598103934665603ULL;
	uint8_t buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

/* Whether buf[0..len) holds the pattern of image offset off. */
static inline int tb_is_pattern(const uint8_t *buf, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != tb_pattern(off + i))
			return 0;
	return 1;
}

static inline int tb_is_fill(const uint8_t *buf, uint8_t v, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != v)
			return 0;
	return 1;
}

#endif
