#include "vmm/core/guest_mem.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm/core/file_open.h"

static void layout(struct guest_mem *m, uint8_t *base, uint64_t size)
{
	uint64_t low = size < GM_MMIO_HOLE_START ? size : GM_MMIO_HOLE_START;

	m->base = base;
	m->size = size;
	m->nr = 1;
	m->r[0] = (struct gm_region){ .gpa = 0, .size = low, .host = base };
	if (size > low) {
		m->r[1] = (struct gm_region){ .gpa = GM_MMIO_HOLE_END, .size = size - low, .host = base + low };
		m->nr = 2;
	}
}

static int check_size(uint64_t size, struct tvm_err *e)
{
	if (size == 0 || size % 4096)
		return tvm_errf(e, EINVAL, "guest memory: size %llu bytes is not a positive multiple of 4 KiB",
				(unsigned long long)size);
	/* 1 TiB keeps every GPA computation far from 2^64. */
	if (size > (1ULL << 40))
		return tvm_errf(e, EINVAL, "guest memory: size %llu MiB is larger than 1 TiB",
				(unsigned long long)(size >> 20));
	return 0;
}

/* m's memory is the mapping p of size bytes (unmapped by gm_destroy).
 * Guest RAM is not worth dumping with the VMM and should not be shared
 * with a child on fork. */
static void adopt_mapping(struct guest_mem *m, void *p, uint64_t size)
{
	madvise(p, size, MADV_DONTDUMP);
	madvise(p, size, MADV_DONTFORK);
	layout(m, p, size);
	m->mapped = 1;
}

int gm_init_anon(struct guest_mem *m, uint64_t size, struct tvm_err *e)
{
	int r = check_size(size, e);
	void *p;

	memset(m, 0, sizeof(*m));
	if (r)
		return r;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return tvm_errf(e, errno, "guest memory: cannot map %llu MiB: %s", (unsigned long long)(size >> 20),
				strerror(errno));
	adopt_mapping(m, p, size);
	return 0;
}

int gm_init_file(struct guest_mem *m, const char *path, uint64_t size, struct tvm_err *e)
{
	int r = check_size(size, e);
	uint64_t have;
	void *p;
	int fd;

	memset(m, 0, sizeof(*m));
	if (r)
		return r;
	fd = file_open_regular("memory file", path, O_RDONLY, 0, UINT64_MAX, &have, e);
	if (fd < 0)
		return fd;
	if (have != size) {
		close(fd);
		return tvm_errf(e, EINVAL, "%s: memory file is %llu bytes, the snapshot's config says %llu", path,
				(unsigned long long)have, (unsigned long long)size);
	}
	/* Read-only file, writable private mapping: writes never reach it. */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return tvm_errf(e, errno, "%s: cannot map %llu MiB: %s", path, (unsigned long long)(size >> 20),
				strerror(errno));
	adopt_mapping(m, p, size);
	return 0;
}

int gm_init_buffer(struct guest_mem *m, void *buf, uint64_t size, struct tvm_err *e)
{
	int r = check_size(size, e);

	memset(m, 0, sizeof(*m));
	if (r)
		return r;
	layout(m, buf, size);
	return 0;
}

void gm_destroy(struct guest_mem *m)
{
	if (m->mapped && m->base)
		munmap(m->base, m->size);
	memset(m, 0, sizeof(*m));
}

void *gm_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	for (int i = 0; i < m->nr; i++) {
		const struct gm_region *r = &m->r[i];
		uint64_t off;

		if (gpa < r->gpa)
			continue;
		off = gpa - r->gpa;
		if (off >= r->size)
			continue;
		/* off < size, so size - off cannot underflow; compare lengths
		 * instead of adding to avoid gpa + len overflow. */
		if (len > r->size - off)
			return NULL;
		return r->host + off;
	}
	return NULL;
}

int gm_map_file(const struct guest_mem *m, uint64_t gpa, int fd, uint64_t off, uint64_t len)
{
	void *p;

	if (!len || ((gpa | off | len) & 4095))
		return -EINVAL;
	p = gm_ptr(m, gpa, len);
	if (!p)
		return -EFAULT;
	if (mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)off) == MAP_FAILED)
		return -errno;
	madvise(p, len, MADV_DONTDUMP);
	madvise(p, len, MADV_DONTFORK);
	return 0;
}

int gm_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len)
{
	void *p = gm_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, len);
	return 0;
}

int gm_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gm_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(p, src, len);
	return 0;
}

uint64_t gm_low_end(const struct guest_mem *m)
{
	return m->nr ? m->r[0].size : 0;
}
