#include "vmm/snapshot/snapshot_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/core/crc32c.h"

#define CRC_OFF 24 /* offset of the CRC field in the header */

static void put_le(uint8_t *d, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		d[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *d, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)d[i] << (8 * i);
	return v;
}

static uint8_t *w_room(struct snap_w *w, size_t n)
{
	if (w->oom)
		return NULL;
	if (n > w->cap - w->len) {
		size_t cap = w->cap ? w->cap : 4096;
		uint8_t *p;

		while (n > cap - w->len) {
			if (cap > SIZE_MAX / 2) {
				w->oom = true;
				return NULL;
			}
			cap *= 2;
		}
		p = realloc(w->p, cap);
		if (!p) {
			w->oom = true;
			return NULL;
		}
		w->p = p;
		w->cap = cap;
	}
	w->len += n;
	return w->p + w->len - n;
}

void snap_w_init(struct snap_w *w)
{
	uint8_t *h;

	memset(w, 0, sizeof(*w));
	h = w_room(w, SNAP_HEADER_SIZE);
	if (h)
		memset(h, 0, SNAP_HEADER_SIZE);
}

void snap_w_bytes(struct snap_w *w, const void *p, size_t n)
{
	uint8_t *d = w_room(w, n);

	if (d && n)
		memcpy(d, p, n);
}

void snap_w_u32(struct snap_w *w, uint32_t v)
{
	uint8_t *d = w_room(w, 4);

	if (d)
		put_le(d, v, 4);
}

void snap_w_u64(struct snap_w *w, uint64_t v)
{
	uint8_t *d = w_room(w, 8);

	if (d)
		put_le(d, v, 8);
}

void snap_w_str(struct snap_w *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n >= UINT32_MAX) {
		w->oom = true;
		return;
	}
	snap_w_u32(w, s ? (uint32_t)n : UINT32_MAX);
	snap_w_bytes(w, s, n);
}

void snap_w_begin(struct snap_w *w, uint32_t type, uint32_t index)
{
	w->sec_start = w->len;
	w->open = true;
	snap_w_u32(w, type);
	snap_w_u32(w, index);
	snap_w_u64(w, 0); /* length, patched by snap_w_end */
}

void snap_w_end(struct snap_w *w)
{
	size_t payload = w->len - w->sec_start - 16;
	static const uint8_t zero[8];

	w->open = false;
	if (w->oom)
		return;
	put_le(w->p + w->sec_start + 8, payload, 8);
	snap_w_bytes(w, zero, (8 - payload % 8) % 8);
	w->nsec++;
}

int snap_w_finish(struct snap_w *w, struct tvm_err *e)
{
	if (w->oom || w->open || w->nsec > SNAP_MAX_SECTIONS || w->len > SNAP_MAX_FILE)
		return tvm_errf(e, ENOMEM, "snapshot state: out of memory or too large (%zu bytes)", w->len);
	memcpy(w->p, SNAP_MAGIC, 8);
	put_le(w->p + 8, SNAP_VERSION, 4);
	put_le(w->p + 12, w->nsec, 4);
	put_le(w->p + 16, w->len, 8);
	put_le(w->p + CRC_OFF, 0, 8);
	put_le(w->p + CRC_OFF, crc32c(0, w->p, w->len), 4);
	return 0;
}

void snap_w_free(struct snap_w *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

static uint32_t file_crc(const uint8_t *buf, size_t len)
{
	static const uint8_t zero[4];
	uint32_t c = crc32c(0, buf, CRC_OFF);

	c = crc32c(c, zero, 4);
	return crc32c(c, buf + CRC_OFF + 4, len - CRC_OFF - 4);
}

int snap_parse(const uint8_t *buf, size_t len, const char *name, struct snap_file *f, struct tvm_err *e)
{
	uint64_t flen, nsec, off = SNAP_HEADER_SIZE;
	uint32_t version;

	memset(f, 0, sizeof(*f));
	if (len < SNAP_HEADER_SIZE || memcmp(buf, SNAP_MAGIC, 8))
		return tvm_errf(e, EINVAL, "%s: not a tinyvmm snapshot state file", name);
	version = (uint32_t)get_le(buf + 8, 4);
	if (version != SNAP_VERSION)
		return tvm_errf(e, EPROTONOSUPPORT, "%s: format version %u, this tinyvmm reads %u", name, version,
				SNAP_VERSION);
	nsec = get_le(buf + 12, 4);
	flen = get_le(buf + 16, 8);
	if (flen != len)
		return tvm_errf(e, EINVAL, "%s: truncated or extended: %zu bytes, header says %llu", name, len,
				(unsigned long long)flen);
	if (get_le(buf + CRC_OFF + 4, 4) != 0 || file_crc(buf, len) != (uint32_t)get_le(buf + CRC_OFF, 4))
		return tvm_errf(e, EINVAL, "%s: checksum mismatch (file damaged)", name);
	if (nsec > SNAP_MAX_SECTIONS)
		return tvm_errf(e, EINVAL, "%s: %llu sections, at most %u", name, (unsigned long long)nsec,
				SNAP_MAX_SECTIONS);
	f->s = calloc(nsec ? nsec : 1, sizeof(*f->s));
	if (!f->s)
		return tvm_errf(e, ENOMEM, "%s: out of memory", name);
	for (uint32_t i = 0; i < nsec; i++) {
		struct snap_section *s = &f->s[i];
		uint64_t plen, padded;

		if (len - off < 16)
			goto bad;
		s->type = (uint32_t)get_le(buf + off, 4);
		s->index = (uint32_t)get_le(buf + off + 4, 4);
		plen = get_le(buf + off + 8, 8);
		off += 16;
		/* plen <= len - off first, so the padding cannot overflow. */
		if (plen > len - off)
			goto bad;
		padded = plen + (8 - plen % 8) % 8;
		if (padded > len - off)
			goto bad;
		s->data = buf + off;
		s->len = (size_t)plen;
		off += padded;
		f->n = i + 1;
	}
	if (off != len)
		goto bad;
	return 0;
bad:
	snap_file_free(f);
	return tvm_errf(e, EINVAL, "%s: section table does not match the file length", name);
}

void snap_file_free(struct snap_file *f)
{
	free(f->s);
	memset(f, 0, sizeof(*f));
}

const struct snap_section *snap_find(const struct snap_file *f, uint32_t type, uint32_t index)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (f->s[i].type == type && f->s[i].index == index)
			return &f->s[i];
	return NULL;
}

void snap_r_init(struct snap_r *r, const struct snap_section *s)
{
	*r = (struct snap_r){ .p = s ? s->data : NULL, .len = s ? s->len : 0, .bad = !s };
}

const uint8_t *snap_r_bytes(struct snap_r *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

void snap_r_copy(struct snap_r *r, void *dst, size_t n)
{
	const uint8_t *p = snap_r_bytes(r, n);

	if (p)
		memcpy(dst, p, n);
	else
		memset(dst, 0, n);
}

uint32_t snap_r_u32(struct snap_r *r)
{
	const uint8_t *p = snap_r_bytes(r, 4);

	return p ? (uint32_t)get_le(p, 4) : 0;
}

uint64_t snap_r_u64(struct snap_r *r)
{
	const uint8_t *p = snap_r_bytes(r, 8);

	return p ? get_le(p, 8) : 0;
}

const char *snap_r_str(struct snap_r *r, char *buf, size_t cap)
{
	uint32_t n = snap_r_u32(r);
	const uint8_t *p;

	buf[0] = 0;
	if (n == UINT32_MAX)
		return NULL;
	if (n >= cap) {
		r->bad = true;
		return buf;
	}
	p = snap_r_bytes(r, n);
	if (!p || memchr(p, 0, n)) {
		r->bad = true;
		return buf;
	}
	memcpy(buf, p, n);
	buf[n] = 0;
	return buf;
}

void snap_r_fail(struct snap_r *r)
{
	r->bad = true;
}

bool snap_r_done(const struct snap_r *r)
{
	return !r->bad && r->off == r->len;
}
