#include "vmm/snapshot/snapshot_diff.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/crc32c.h"
#include "vmm/core/file_open.h"
#include "vmm/snapshot/snapshot_io.h"

#define PAGE SNAP_DIFF_PAGE
#define CRC_OFF 40 /* the header's CRC field */

/* pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst) */
#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_FILE (1ULL << 61) /* file page or shared anonymous */

void snap_base_set_mem(struct snap_base *b, const struct stat *st)
{
	b->mem_size = (uint64_t)st->st_size;
	b->mem_ino = (uint64_t)st->st_ino;
	b->mtime_sec = (uint64_t)st->st_mtim.tv_sec;
	b->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
}

bool snap_base_same_mem(const struct snap_base *b, const struct stat *st)
{
	struct snap_base now;

	snap_base_set_mem(&now, st);
	return now.mem_size == b->mem_size && now.mem_ino == b->mem_ino && now.mtime_sec == b->mtime_sec &&
	       now.mtime_nsec == b->mtime_nsec;
}

void snap_base_write(struct snap_w *w, const struct snap_base *b)
{
	snap_w_begin(w, SNAP_BASE, 0);
	snap_w_str(w, b->dir);
	snap_w_u64(w, b->mem_size);
	snap_w_u64(w, b->mem_ino);
	snap_w_u64(w, b->mtime_sec);
	snap_w_u32(w, b->mtime_nsec);
	snap_w_u32(w, b->state_crc);
	snap_w_end(w);
}

int snap_base_read(const struct snap_section *sec, struct snap_base *b, struct tvm_err *e)
{
	struct snap_r r;

	snap_r_init(&r, sec);
	memset(b, 0, sizeof(*b));
	if (!snap_r_str(&r, b->dir, sizeof(b->dir)) || b->dir[0] != '/' || strchr(b->dir, '\n'))
		snap_r_fail(&r);
	b->mem_size = snap_r_u64(&r);
	b->mem_ino = snap_r_u64(&r);
	b->mtime_sec = snap_r_u64(&r);
	b->mtime_nsec = snap_r_u32(&r);
	b->state_crc = snap_r_u32(&r);
	if (b->mtime_nsec >= 1000000000u || !b->mem_size || b->mem_size % PAGE)
		snap_r_fail(&r);
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "state: base section is damaged");
	return 0;
}

int snap_base_identify(const char *dir, struct snap_base *b, bool *is_diff, struct tvm_err *e)
{
	char path[PATH_MAX + 16];
	struct snap_file f = { 0 };
	struct stat st;
	uint8_t *buf = NULL;
	size_t len = 0;
	int r;

	memset(b, 0, sizeof(*b));
	if (!realpath(dir, b->dir))
		return tvm_errf(e, errno, "base snapshot %s: %s", dir, strerror(errno));
	if ((r = snap_path(path, sizeof(path), b->dir, SNAP_MEM_FILE, e)))
		return r;
	if (stat(path, &st) < 0)
		return tvm_errf(e, errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return tvm_errf(e, EINVAL, "%s: not a regular file", path);
	snap_base_set_mem(b, &st);
	if ((r = snap_path(path, sizeof(path), b->dir, SNAP_STATE_FILE, e)))
		return r;
	r = snap_read_file(path, SNAP_MAX_FILE, &buf, &len, e);
	if (!r)
		r = snap_parse(buf, len, path, &f, e);
	if (!r) {
		memcpy(&b->state_crc, buf + 24, 4); /* checked by snap_parse */
		if (is_diff)
			*is_diff = snap_find(&f, SNAP_BASE, 0) != NULL;
	}
	snap_file_free(&f);
	free(buf);
	return r;
}

int snap_base_check(const struct snap_base *want, const char *since, struct tvm_err *e)
{
	struct snap_base now;
	bool is_diff = false;
	int r = snap_base_identify(want->dir, &now, &is_diff, e);

	if (r)
		return r;
	if (strcmp(now.dir, want->dir))
		return tvm_errf(e, ESTALE, "base snapshot %s: now resolves to %s", want->dir, now.dir);
	if (now.state_crc != want->state_crc)
		return tvm_errf(e, ESTALE, "%s/%s: changed since %s (another state file)", want->dir, SNAP_STATE_FILE,
				since);
	if (now.mem_size != want->mem_size || now.mem_ino != want->mem_ino || now.mtime_sec != want->mtime_sec ||
	    now.mtime_nsec != want->mtime_nsec)
		return tvm_errf(e, ESTALE, "%s/%s: changed since %s (%s differs)", want->dir, SNAP_MEM_FILE, since,
				now.mem_size != want->mem_size ? "size"
				: now.mem_ino != want->mem_ino ? "inode"
							       : "modification time");
	if (is_diff)
		return tvm_errf(e, EINVAL, "base snapshot %s: is itself a diff (chains are not supported)", want->dir);
	return 0;
}

/* Why pagemap and not KVM's dirty log: guest memory of a restored VM is a
 * MAP_PRIVATE mapping of the base's memory file, so the kernel itself
 * records every page written since, whoever wrote it: the guest (through
 * KVM's faults), and the VMM's own threads (virtio devices write into
 * guest memory from host threads; KVM_GET_DIRTY_LOG never sees those).
 * A written page became private anonymous: present (or swapped out) and
 * not a file page. Nothing to enable on the memslots, no cost while the
 * guest runs. Flags are readable without privileges (only PFNs are not). */
int snap_diff_scan(int pagemap_fd, const struct guest_mem *m, uint64_t **pages, uint64_t *n, struct tvm_err *e)
{
	enum { CHUNK = 512 };
	uint64_t ent[CHUNK], total = m->size / PAGE, first = (uint64_t)(uintptr_t)m->base / PAGE;
	uint64_t *p = NULL, cnt = 0, cap = 0;

	*pages = NULL;
	*n = 0;
	if (pagemap_fd < 0)
		return tvm_errf(e, EBADF, "/proc/self/pagemap: not opened when the VM was restored");
	for (uint64_t i = 0; i < total; i += CHUNK) {
		uint64_t k = total - i < CHUNK ? total - i : CHUNK;
		ssize_t got = pread(pagemap_fd, ent, k * 8, (off_t)((first + i) * 8));

		if (got < 0 && errno == EINTR) {
			i -= CHUNK;
			continue;
		}
		if (got != (ssize_t)(k * 8)) {
			free(p);
			return tvm_errf(e, got < 0 ? errno : EIO, "/proc/self/pagemap: read: %s",
					got < 0 ? strerror(errno) : "short read");
		}
		for (uint64_t j = 0; j < k; j++) {
			if ((ent[j] & PM_FILE) || !(ent[j] & (PM_PRESENT | PM_SWAP)))
				continue;
			if (cnt == cap) {
				uint64_t *q;

				cap = cap ? cap * 2 : 1024;
				q = realloc(p, cap * sizeof(*p));
				if (!q) {
					free(p);
					return tvm_errf(e, ENOMEM, "snapshot: out of memory");
				}
				p = q;
			}
			p[cnt++] = i + j;
		}
	}
	*pages = p;
	*n = cnt;
	return 0;
}

static uint64_t data_offset(uint64_t npages)
{
	return (SNAP_DIFF_HEADER + npages * 8 + PAGE - 1) / PAGE * PAGE;
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4); /* x86: little endian */
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

int snap_fill_diff(int fd, void *ctx, struct tvm_err *e)
{
	const struct snap_diff_src *s = ctx;
	uint64_t doff = data_offset(s->n);
	uint8_t *h = calloc(1, doff);
	int r;

	if (!h)
		return tvm_errf(e, ENOMEM, "snapshot: out of memory");
	memcpy(h, SNAP_DIFF_MAGIC, 8);
	put32(h + 8, SNAP_DIFF_VERSION);
	put32(h + 12, PAGE);
	put64(h + 16, s->m->size);
	put64(h + 24, s->n);
	put64(h + 32, doff);
	for (uint64_t i = 0; i < s->n; i++)
		put64(h + SNAP_DIFF_HEADER + i * 8, s->pages[i]);
	put32(h + CRC_OFF, crc32c(0, h, SNAP_DIFF_HEADER + s->n * 8));
	r = snap_pwrite_all(fd, h, doff, 0, "diff memory file", e);
	free(h);
	/* The pages, consecutive ones in one write. */
	for (uint64_t i = 0; !r && i < s->n;) {
		uint64_t k = 1;

		while (i + k < s->n && s->pages[i + k] == s->pages[i] + k)
			k++;
		r = snap_pwrite_all(fd, s->m->base + s->pages[i] * PAGE, k * PAGE, doff + i * PAGE, "diff memory file",
				    e);
		i += k;
	}
	return r;
}

int snap_diff_header(const uint8_t *h, size_t len, uint64_t file_size, uint64_t ram_size, struct snap_diff_hdr *d,
		     const char *name, struct tvm_err *e)
{
	uint64_t max_pages = ram_size / PAGE;

	memset(d, 0, sizeof(*d));
	if (len < SNAP_DIFF_HEADER)
		return tvm_errf(e, EINVAL, "%s: truncated (no diff header)", name);
	if (memcmp(h, SNAP_DIFF_MAGIC, 8))
		return tvm_errf(e, EINVAL, "%s: not a diff memory file (bad magic)", name);
	if (get32(h + 8) != SNAP_DIFF_VERSION)
		return tvm_errf(e, EPROTONOSUPPORT, "%s: diff format version %u, this tinyvmm reads %u", name,
				get32(h + 8), SNAP_DIFF_VERSION);
	if (get32(h + 12) != PAGE)
		return tvm_errf(e, EINVAL, "%s: page size %u, expected %u", name, get32(h + 12), PAGE);
	d->ram_size = get64(h + 16);
	d->npages = get64(h + 24);
	d->data_off = get64(h + 32);
	d->crc = get32(h + CRC_OFF);
	if (d->ram_size != ram_size)
		return tvm_errf(e, EINVAL, "%s: diff of %llu bytes of RAM, the snapshot has %llu", name,
				(unsigned long long)d->ram_size, (unsigned long long)ram_size);
	/* ram_size <= 1 TiB (checked config), so npages <= 2^28 and nothing
	 * below overflows. */
	if (d->npages > max_pages)
		return tvm_errf(e, EINVAL, "%s: %llu pages, more than the RAM's %llu", name,
				(unsigned long long)d->npages, (unsigned long long)max_pages);
	if (d->data_off != data_offset(d->npages))
		return tvm_errf(e, EINVAL, "%s: data offset %llu, expected %llu", name, (unsigned long long)d->data_off,
				(unsigned long long)data_offset(d->npages));
	if (file_size != d->data_off + d->npages * PAGE)
		return tvm_errf(e, EINVAL, "%s: %s (%llu bytes, the header says %llu)", name,
				file_size < d->data_off + d->npages * PAGE ? "truncated" : "trailing bytes",
				(unsigned long long)file_size, (unsigned long long)(d->data_off + d->npages * PAGE));
	for (size_t i = CRC_OFF + 4; i < SNAP_DIFF_HEADER; i++)
		if (h[i])
			return tvm_errf(e, EINVAL, "%s: reserved header bytes are not zero", name);
	return 0;
}

int snap_diff_index(const uint8_t *buf, size_t len, const struct snap_diff_hdr *d, const char *name, struct tvm_err *e)
{
	uint8_t zero[4] = { 0 };
	uint64_t max_pages = d->ram_size / PAGE, prev = 0;
	uint32_t c;

	if (d->npages > max_pages || len != SNAP_DIFF_HEADER + d->npages * 8)
		return tvm_errf(e, EINVAL, "%s: truncated (page index)", name);
	c = crc32c(0, buf, CRC_OFF);
	c = crc32c(c, zero, 4);
	c = crc32c(c, buf + CRC_OFF + 4, len - CRC_OFF - 4);
	if (c != d->crc)
		return tvm_errf(e, EINVAL, "%s: checksum mismatch (header or page index)", name);
	for (uint64_t i = 0; i < d->npages; i++) {
		uint64_t p = get64(buf + SNAP_DIFF_HEADER + i * 8);

		if (p >= max_pages || (i && p <= prev))
			return tvm_errf(e, EINVAL, "%s: page index entry %llu (%llu) out of order or range", name,
					(unsigned long long)i, (unsigned long long)p);
		prev = p;
	}
	return 0;
}

static int pread_all(int fd, uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t g = pread(fd, p, n, (off_t)off);

		if (g < 0 && errno == EINTR)
			continue;
		if (g <= 0)
			return g < 0 ? -errno : -EIO;
		p += g;
		n -= (size_t)g;
		off += (uint64_t)g;
	}
	return 0;
}

/* Host offset off of m (regions back to back from base) as a GPA. */
static uint64_t off_gpa(const struct guest_mem *m, uint64_t off)
{
	uint64_t low = gm_low_end(m);

	return off < low ? off : GM_MMIO_HOLE_END + (off - low);
}

/* Lay pages [off, off + len) of RAM from the file at foff; a run may not
 * cross the MMIO hole, so it is split there. */
static int lay_run(const struct guest_mem *m, int fd, uint64_t off, uint64_t foff, uint64_t len, bool copy)
{
	uint64_t low = gm_low_end(m);

	while (len) {
		uint64_t k = off < low && off + len > low ? low - off : len;
		int r = copy ? pread_all(fd, m->base + off, (size_t)k, foff)
			     : gm_map_file(m, off_gpa(m, off), fd, foff, k);

		if (r)
			return r;
		off += k;
		foff += k;
		len -= k;
	}
	return 0;
}

int snap_pages_union(const uint64_t *a, uint64_t na, const uint64_t *b, uint64_t nb, uint64_t **out, uint64_t *n)
{
	uint64_t i = 0, j = 0, k = 0, *p;

	*out = NULL;
	*n = 0;
	if (!na && !nb)
		return 0;
	/* Each list is at most RAM/4096 entries (< 2^28): no overflow. */
	if (!(p = malloc((size_t)(na + nb) * sizeof(*p))))
		return -ENOMEM;
	while (i < na || j < nb) {
		uint64_t v = j >= nb || (i < na && a[i] <= b[j]) ? a[i] : b[j];

		/* Both lists are strictly increasing: a page in both is
		 * taken once, from each. */
		if (i < na && a[i] == v)
			i++;
		if (j < nb && b[j] == v)
			j++;
		p[k++] = v;
	}
	*out = p;
	*n = k;
	return 0;
}

int snap_diff_load(const char *path, const struct guest_mem *m, uint64_t **pages, uint64_t *npages, struct tvm_err *e)
{
	struct snap_diff_hdr d;
	uint8_t h[SNAP_DIFF_HEADER], *idx = NULL;
	uint64_t size, runs = 0;
	size_t ilen;
	int r, fd;

	if (npages)
		*npages = 0;
	if (pages)
		*pages = NULL;
	/* At most the header, an index of every page and every page. */
	fd = file_open_regular("diff memory file", path, O_RDONLY, SNAP_DIFF_HEADER,
			       data_offset(m->size / PAGE) + m->size, &size, e);
	if (fd < 0)
		return fd;
	r = pread_all(fd, h, sizeof(h), 0);
	if (r)
		r = tvm_errf(e, -r, "%s: read: %s", path, strerror(-r));
	if (!r)
		r = snap_diff_header(h, sizeof(h), size, m->size, &d, path, e);
	if (!r) {
		ilen = SNAP_DIFF_HEADER + (size_t)d.npages * 8;
		if (!(idx = malloc(ilen)))
			r = tvm_errf(e, ENOMEM, "restore: out of memory");
	}
	if (!r && (r = pread_all(fd, idx, ilen, 0)))
		r = tvm_errf(e, -r, "%s: read: %s", path, strerror(-r));
	if (!r)
		r = snap_diff_index(idx, ilen, &d, path, e);
	for (uint64_t i = 0; !r && i < d.npages; i++)
		if (!i || get64(idx + SNAP_DIFF_HEADER + i * 8) != get64(idx + SNAP_DIFF_HEADER + (i - 1) * 8) + 1)
			runs++;
	/* Checked: every page number < RAM pages, increasing. */
	for (uint64_t i = 0; !r && i < d.npages;) {
		uint64_t p = get64(idx + SNAP_DIFF_HEADER + i * 8), k = 1;

		while (i + k < d.npages && get64(idx + SNAP_DIFF_HEADER + (i + k) * 8) == p + k)
			k++;
		r = lay_run(m, fd, p * PAGE, d.data_off + i * PAGE, k * PAGE, runs > SNAP_DIFF_MAX_MAPS);
		if (r)
			r = tvm_errf(e, -r, "%s: cannot lay pages %llu..%llu over the base: %s", path,
				     (unsigned long long)p, (unsigned long long)(p + k - 1), strerror(-r));
		i += k;
	}
	if (!r && pages && d.npages) {
		if (!(*pages = malloc((size_t)d.npages * sizeof(**pages))))
			r = tvm_errf(e, ENOMEM, "restore: out of memory");
		for (uint64_t i = 0; !r && i < d.npages; i++)
			(*pages)[i] = get64(idx + SNAP_DIFF_HEADER + i * 8);
	}
	if (!r && npages)
		*npages = d.npages;
	free(idx);
	close(fd);
	return r;
}
