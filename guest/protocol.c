/* Wire codec of the host <-> agent protocol: a table of field layouts per
 * message type drives both tvp_encode() and tvp_parse(), so the two cannot
 * disagree on a layout. */
#include "guest/protocol.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECODER_MIN_BUF (64u << 10)

enum field_kind {
	F_U32,
	F_U64,
	F_STR,    /* u32 length + bytes, NUL-free */
	F_BYTES,  /* u32 length + bytes */
	F_STRVEC, /* u32 count + count x (u32 length + bytes) */
	F_REST,   /* the rest of the payload */
};

enum field_check {
	C_NONE,
	C_PATH, /* non-empty, absolute */
	C_ARGV, /* at least one entry */
	C_ENV,  /* entries are NAME=value with a non-empty NAME */
};

struct field {
	uint8_t kind, check;
	uint16_t off; /* in struct tvp_msg */
	uint32_t max; /* length or count limit */
	const char *name;
};

struct msgdef {
	const char *name;
	uint8_t flags;
	uint8_t nfields;
	const struct field *fields;
};

/* The message tables read as tables: one field or message per line. */
/* clang-format off */
#define FLD(kind, check, member, max) { kind, check, offsetof(struct tvp_msg, member), max, #member }
#define MSG(name, flags, fields) { name, flags, sizeof(fields) / sizeof(fields[0]), fields }

static const struct field hello_f[] = {
	FLD(F_U32, C_NONE, hello.version, 0),
	FLD(F_U32, C_NONE, hello.caps, 0),
	FLD(F_STR, C_NONE, hello.name, TVP_MAX_NAME),
};
static const struct field ready_f[] = {
	FLD(F_U32, C_NONE, ready.version, 0),
	FLD(F_U32, C_NONE, ready.caps, 0),
	FLD(F_U32, C_NONE, ready.max_payload, 0),
	FLD(F_U64, C_NONE, ready.boot_us, 0),
	FLD(F_STR, C_NONE, ready.agent, TVP_MAX_NAME),
};
static const struct field ok_f[] = {
	FLD(F_U32, C_NONE, ok.of_type, 0),
	FLD(F_U64, C_NONE, ok.value, 0),
};
static const struct field error_f[] = {
	FLD(F_U32, C_NONE, error.code, 0),
	FLD(F_U32, C_NONE, error.sys_errno, 0),
	FLD(F_STR, C_NONE, error.message, TVP_MAX_MESSAGE),
};
static const struct field exec_f[] = {
	FLD(F_U32, C_NONE, exec.uid, 0),
	FLD(F_U32, C_NONE, exec.gid, 0),
	FLD(F_U32, C_NONE, exec.timeout_ms, 0),
	FLD(F_U32, C_NONE, exec.stdout_cap, 0),
	FLD(F_U32, C_NONE, exec.stderr_cap, 0),
	FLD(F_U64, C_NONE, exec.mem_max, 0),
	FLD(F_U32, C_NONE, exec.pids_max, 0),
	FLD(F_STR, C_NONE, exec.cwd, TVP_MAX_PATH),
	FLD(F_STRVEC, C_ARGV, exec.argv, TVP_MAX_ARGC),
	FLD(F_STRVEC, C_ENV, exec.env, TVP_MAX_ENVC),
	FLD(F_BYTES, C_NONE, exec.stdin_data, TVP_MAX_PAYLOAD),
};
static const struct field data_f[] = {
	FLD(F_REST, C_NONE, data.data, 0),
};
static const struct field result_f[] = {
	FLD(F_U32, C_NONE, result.exit_code, 0),
	FLD(F_U32, C_NONE, result.signal, 0),
	FLD(F_U64, C_NONE, result.wall_us, 0),
	FLD(F_U64, C_NONE, result.user_us, 0),
	FLD(F_U64, C_NONE, result.sys_us, 0),
	FLD(F_U64, C_NONE, result.max_rss_kib, 0),
	FLD(F_U64, C_NONE, result.stdout_bytes, 0),
	FLD(F_U64, C_NONE, result.stderr_bytes, 0),
};
static const struct field kill_f[] = {
	FLD(F_U32, C_NONE, kill.signal, 0),
};
static const struct field put_f[] = {
	FLD(F_U32, C_NONE, put.mode, 0),
	FLD(F_U32, C_NONE, put.uid, 0),
	FLD(F_U32, C_NONE, put.gid, 0),
	FLD(F_STR, C_PATH, put.path, TVP_MAX_PATH),
};
static const struct field get_f[] = {
	FLD(F_U64, C_NONE, get.max_bytes, 0),
	FLD(F_U32, C_NONE, get.uid, 0),
	FLD(F_U32, C_NONE, get.gid, 0),
	FLD(F_STR, C_PATH, get.path, TVP_MAX_PATH),
};
static const struct field file_end_f[] = {
	FLD(F_U64, C_NONE, file_end.size, 0),
	FLD(F_U32, C_NONE, file_end.mode, 0),
};
static const struct field seed_f[] = {
	FLD(F_U64, C_NONE, seed.realtime_ns, 0),
	FLD(F_BYTES, C_NONE, seed.entropy, TVP_MAX_ENTROPY),
};
static const struct field net_f[] = {
	FLD(F_STR, C_NONE, net.spec, TVP_MAX_NET),
};

static const struct msgdef msgdefs[] = {
	[TVP_HELLO] = MSG("HELLO", 0, hello_f),
	[TVP_READY] = MSG("READY", 0, ready_f),
	[TVP_OK] = MSG("OK", 0, ok_f),
	[TVP_ERROR] = MSG("ERROR", 0, error_f),
	[TVP_EXEC] = MSG("EXEC", TVP_EXEC_STDIN_STREAM | TVP_EXEC_KEEP_GROUP, exec_f),
	[TVP_STDIN] = MSG("STDIN", 0, data_f),
	[TVP_STDIN_CLOSE] = { "STDIN_CLOSE", 0, 0, NULL },
	[TVP_STDOUT] = MSG("STDOUT", 0, data_f),
	[TVP_STDERR] = MSG("STDERR", 0, data_f),
	[TVP_RESULT] = MSG("RESULT", TVP_RESULT_TIMED_OUT | TVP_RESULT_STDOUT_TRUNC | TVP_RESULT_STDERR_TRUNC |
				   TVP_RESULT_CORE_DUMPED | TVP_RESULT_KILLED | TVP_RESULT_OOM_KILLED | TVP_RESULT_PIDS_LIMITED,
				   result_f),
	[TVP_KILL] = MSG("KILL", 0, kill_f),
	[TVP_PUT_FILE] = MSG("PUT_FILE", TVP_PUT_MKDIRS, put_f),
	[TVP_GET_FILE] = MSG("GET_FILE", 0, get_f),
	[TVP_FILE_DATA] = MSG("FILE_DATA", 0, data_f),
	[TVP_FILE_END] = MSG("FILE_END", 0, file_end_f),
	[TVP_SEED] = MSG("SEED", 0, seed_f),
	[TVP_SHUTDOWN] = { "SHUTDOWN", 0, 0, NULL },
	[TVP_NET] = MSG("NET", 0, net_f),
};
/* clang-format on */

static const struct msgdef *msgdef(uint8_t type)
{
	if (type >= sizeof(msgdefs) / sizeof(msgdefs[0]) || !msgdefs[type].name)
		return NULL;
	return &msgdefs[type];
}

const char *tvp_type_name(uint8_t type)
{
	const struct msgdef *d = msgdef(type);

	return d ? d->name : NULL;
}

const char *tvp_strerror(int status)
{
	switch (status) {
	case 0: return "ok";
	case TVP_E_NOSPACE: return "buffer too small";
	case TVP_E_TOO_BIG: return "payload too big";
	case TVP_E_BAD_MAGIC: return "bad magic";
	case TVP_E_BAD_VERSION: return "unsupported version";
	case TVP_E_UNKNOWN_TYPE: return "unknown message type";
	case TVP_E_BAD_FLAGS: return "bad flags";
	case TVP_E_TRUNCATED: return "truncated message";
	case TVP_E_TRAILING: return "trailing bytes";
	case TVP_E_LIMIT: return "count or length over limit";
	case TVP_E_BAD_STRING: return "bad string";
	case TVP_E_NOMEM: return "out of memory";
	}
	return "unknown error";
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void tvp_put_header(void *buf, uint8_t type, uint8_t flags, uint32_t id, uint32_t len)
{
	uint8_t *p = buf;

	p[0] = TVP_MAGIC;
	p[1] = TVP_VERSION;
	p[2] = type;
	p[3] = flags;
	put_le32(p + 4, id);
	put_le32(p + 8, len);
}

/* Semantic checks on one string; NULL if fine, else why not. */
static const char *check_string(struct tvp_str s, uint8_t check)
{
	const char *eq;

	if (memchr(s.p, 0, s.len))
		return "contains a NUL byte";
	switch (check) {
	case C_PATH:
		if (s.len == 0 || s.p[0] != '/')
			return "is not an absolute path";
		break;
	case C_ENV:
		eq = memchr(s.p, '=', s.len);
		if (!eq || eq == s.p)
			return "is not NAME=value";
		break;
	}
	return NULL;
}

bool tvp_strvec_next(const struct tvp_strvec *v, struct tvp_strvec_iter *it, struct tvp_str *s)
{
	uint32_t n;

	if (it->index >= v->count)
		return false;
	if (v->items) {
		*s = tvp_cstr(v->items[it->index++]);
		return true;
	}
	if (!v->wire || it->off > v->wire_len || v->wire_len - it->off < 4)
		return false;
	n = get_le32(v->wire + it->off);
	if (n > v->wire_len - it->off - 4)
		return false;
	s->p = (const char *)v->wire + it->off + 4;
	s->len = n;
	it->off += 4 + n;
	it->index++;
	return true;
}

char **tvp_strvec_dup(const struct tvp_strvec *v)
{
	struct tvp_strvec_iter it = { 0 };
	struct tvp_str s;
	size_t strbytes = 0, ptrbytes;
	char **out, *p;
	uint32_t i = 0;

	if (v->count > (TVP_MAX_ARGC > TVP_MAX_ENVC ? TVP_MAX_ARGC : TVP_MAX_ENVC))
		return NULL;
	while (tvp_strvec_next(v, &it, &s)) {
		if (s.len > TVP_MAX_ARG_LEN || memchr(s.p, 0, s.len))
			return NULL;
		strbytes += (size_t)s.len + 1; /* <= count * (MAX_ARG_LEN + 1): no overflow */
	}
	if (it.index != v->count)
		return NULL;
	ptrbytes = ((size_t)v->count + 1) * sizeof(char *);
	out = malloc(ptrbytes + strbytes);
	if (!out)
		return NULL;
	p = (char *)out + ptrbytes;
	memset(&it, 0, sizeof(it));
	while (tvp_strvec_next(v, &it, &s)) {
		out[i++] = p;
		memcpy(p, s.p, s.len);
		p[s.len] = 0;
		p += s.len + 1;
	}
	out[i] = NULL;
	return out;
}

/* ---- encoding ---- */

/* Appends to buf[0..cap); past cap it only counts, so one pass gives both
 * the frame and the size needed. */
struct writer {
	uint8_t *buf;
	size_t cap, off;
};

static void w_bytes(struct writer *w, const void *p, size_t n)
{
	if (n && w->buf && w->off <= w->cap && n <= w->cap - w->off)
		memcpy(w->buf + w->off, p, n);
	w->off += n;
}

static void w_u32(struct writer *w, uint32_t v)
{
	uint8_t b[4];

	put_le32(b, v);
	w_bytes(w, b, 4);
}

static void w_u64(struct writer *w, uint64_t v)
{
	w_u32(w, (uint32_t)v);
	w_u32(w, (uint32_t)(v >> 32));
}

static int w_str(struct writer *w, struct tvp_str s, uint32_t max, uint8_t check)
{
	if (s.len > max)
		return TVP_E_LIMIT;
	if (!s.p) {
		if (s.len)
			return TVP_E_BAD_STRING;
		s.p = "";
	}
	if (check_string(s, check))
		return TVP_E_BAD_STRING;
	w_u32(w, s.len);
	w_bytes(w, s.p, s.len);
	return 0;
}

static int w_strvec(struct writer *w, const struct tvp_strvec *v, uint32_t max, uint8_t check)
{
	struct tvp_strvec_iter it = { 0 };
	struct tvp_str s;
	int rc;

	if (v->count > max || (check == C_ARGV && v->count == 0))
		return TVP_E_LIMIT;
	w_u32(w, v->count);
	while (tvp_strvec_next(v, &it, &s)) {
		rc = w_str(w, s, TVP_MAX_ARG_LEN, check == C_ENV ? C_ENV : C_NONE);
		if (rc)
			return rc;
	}
	return it.index == v->count ? 0 : TVP_E_TRUNCATED;
}

int tvp_encode(const struct tvp_msg *m, void *buf, size_t cap, size_t *len)
{
	const struct msgdef *d = msgdef(m->type);
	struct writer w = { buf, cap, TVP_HDR_SIZE };
	const char *base = (const char *)m;
	int rc = 0;

	*len = 0;
	if (!d)
		return TVP_E_UNKNOWN_TYPE;
	if (m->flags & ~d->flags)
		return TVP_E_BAD_FLAGS;
	for (unsigned i = 0; i < d->nfields && !rc; i++) {
		const struct field *f = &d->fields[i];
		const void *fp = base + f->off;
		uint32_t u32;
		uint64_t u64;
		struct tvp_bytes b;

		switch (f->kind) {
		case F_U32:
			memcpy(&u32, fp, 4);
			w_u32(&w, u32);
			break;
		case F_U64:
			memcpy(&u64, fp, 8);
			w_u64(&w, u64);
			break;
		case F_STR: rc = w_str(&w, *(const struct tvp_str *)fp, f->max, f->check); break;
		case F_STRVEC: rc = w_strvec(&w, fp, f->max, f->check); break;
		case F_BYTES:
		case F_REST:
			b = *(const struct tvp_bytes *)fp;
			if ((f->kind == F_BYTES && b.len > f->max) || (!b.p && b.len))
				return TVP_E_LIMIT;
			if (f->kind == F_BYTES)
				w_u32(&w, b.len);
			w_bytes(&w, b.p, b.len);
			break;
		}
	}
	if (rc)
		return rc;
	if (w.off - TVP_HDR_SIZE > TVP_MAX_PAYLOAD)
		return TVP_E_TOO_BIG;
	*len = w.off;
	if (!buf || w.off > cap)
		return TVP_E_NOSPACE;
	tvp_put_header(buf, m->type, m->flags, m->id, (uint32_t)(w.off - TVP_HDR_SIZE));
	return 0;
}

/* ---- parsing ---- */

struct reader {
	const uint8_t *p;
	uint32_t len, off;
};

static bool r_u32(struct reader *r, uint32_t *v)
{
	if (r->len - r->off < 4)
		return false;
	*v = get_le32(r->p + r->off);
	r->off += 4;
	return true;
}

static int fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return status;
}

/* A length-prefixed string at r; checked against max and check. */
static int r_str(struct reader *r, struct tvp_str *s, uint32_t max, uint8_t check, const char **why)
{
	uint32_t n;

	if (!r_u32(r, &n)) {
		*why = "ends inside a length";
		return TVP_E_TRUNCATED;
	}
	if (n > max) {
		*why = "is longer than its limit";
		return TVP_E_LIMIT;
	}
	if (n > r->len - r->off) {
		*why = "ends early";
		return TVP_E_TRUNCATED;
	}
	s->p = (const char *)r->p + r->off;
	s->len = n;
	r->off += n;
	*why = check_string(*s, check);
	return *why ? TVP_E_BAD_STRING : 0;
}

static int r_field(struct reader *r, const struct field *f, void *fp, const char **why)
{
	struct tvp_strvec *v = fp;
	struct tvp_str s;
	uint32_t u32, start;
	int rc;

	switch (f->kind) {
	case F_U32:
		if (!r_u32(r, &u32))
			break;
		memcpy(fp, &u32, 4);
		return 0;
	case F_U64:
		if (r->len - r->off < 8)
			break;
		*(uint64_t *)fp = get_le32(r->p + r->off) | (uint64_t)get_le32(r->p + r->off + 4) << 32;
		r->off += 8;
		return 0;
	case F_STR: return r_str(r, fp, f->max, f->check, why);
	case F_BYTES:
		rc = r_str(r, &s, f->max, C_NONE, why);
		if (rc == TVP_E_BAD_STRING) /* bytes may hold NULs */
			rc = 0;
		*(struct tvp_bytes *)fp = (struct tvp_bytes){ (const uint8_t *)s.p, s.len };
		return rc;
	case F_REST:
		*(struct tvp_bytes *)fp = (struct tvp_bytes){ r->p + r->off, r->len - r->off };
		r->off = r->len;
		return 0;
	case F_STRVEC:
		if (!r_u32(r, &u32))
			break;
		if (u32 > f->max || (f->check == C_ARGV && u32 == 0)) {
			*why = u32 ? "has more entries than its limit" : "is empty";
			return TVP_E_LIMIT;
		}
		start = r->off;
		for (uint32_t i = 0; i < u32; i++) {
			rc = r_str(r, &s, TVP_MAX_ARG_LEN, f->check == C_ENV ? C_ENV : C_NONE, why);
			if (rc)
				return rc;
		}
		*v = (struct tvp_strvec){ u32, NULL, r->p + start, r->off - start };
		return 0;
	}
	*why = "ends early";
	return TVP_E_TRUNCATED;
}

int tvp_parse(const struct tvp_frame *f, struct tvp_msg *m, char *err, size_t errlen)
{
	static const uint8_t empty[1];
	const struct msgdef *d = msgdef(f->type);
	struct reader r = { f->payload ? f->payload : empty, f->len, 0 };
	const char *why = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	m->type = f->type;
	m->flags = f->flags;
	m->id = f->id;
	if (!d)
		return fail(err, errlen, TVP_E_UNKNOWN_TYPE, "unknown message type 0x%02x", f->type);
	if (f->flags & ~d->flags)
		return fail(err, errlen, TVP_E_BAD_FLAGS, "%s: flags 0x%02x not allowed", d->name, f->flags);
	if (f->len > TVP_MAX_PAYLOAD)
		return fail(err, errlen, TVP_E_TOO_BIG, "%s: payload length %u over limit", d->name, f->len);
	if (f->len && !f->payload)
		return fail(err, errlen, TVP_E_TRUNCATED, "%s: payload missing", d->name);
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct field *fd = &d->fields[i];

		rc = r_field(&r, fd, (char *)m + fd->off, &why);
		if (rc)
			return fail(err, errlen, rc, "%s: %s %s", d->name, strchr(fd->name, '.') + 1, why);
	}
	if (r.off != r.len)
		return fail(err, errlen, TVP_E_TRAILING, "%s: %u trailing bytes", d->name, r.len - r.off);
	return 0;
}

/* ---- decoder ---- */

void tvp_decoder_init(struct tvp_decoder *d, uint32_t max_payload)
{
	memset(d, 0, sizeof(*d));
	d->max_payload = max_payload && max_payload < TVP_MAX_PAYLOAD ? max_payload : TVP_MAX_PAYLOAD;
}

void tvp_decoder_free(struct tvp_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
	d->cap = d->rd = d->wr = 0;
}

static int dec_fail(struct tvp_decoder *d, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	d->status = status;
	return status;
}

/* Size of the frame starting at rd once its header is in, else 0; checks
 * the header first so that a bad length never reaches an allocation. */
static size_t dec_frame_size(struct tvp_decoder *d)
{
	const uint8_t *h;
	uint32_t len;

	if (d->wr - d->rd < TVP_HDR_SIZE)
		return 0;
	h = d->buf + d->rd;
	if (h[0] != TVP_MAGIC)
		return dec_fail(d, TVP_E_BAD_MAGIC, "bad frame magic 0x%02x (want 0x%02x)", h[0], TVP_MAGIC), 0;
	if (h[1] != TVP_VERSION)
		return dec_fail(d, TVP_E_BAD_VERSION, "unsupported protocol version %u (want %u)", h[1], TVP_VERSION),
		       0;
	len = get_le32(h + 8);
	if (len > d->max_payload)
		return dec_fail(d, TVP_E_TOO_BIG, "frame payload length %u over limit %u", len, d->max_payload), 0;
	return TVP_HDR_SIZE + (size_t)len;
}

int tvp_decoder_next(struct tvp_decoder *d, struct tvp_frame *f)
{
	const uint8_t *h;
	size_t size;

	if (d->status)
		return d->status;
	size = dec_frame_size(d);
	if (d->status)
		return d->status;
	if (!size || d->wr - d->rd < size)
		return 0;
	h = d->buf + d->rd;
	f->type = h[2];
	f->flags = h[3];
	f->id = get_le32(h + 4);
	f->len = (uint32_t)(size - TVP_HDR_SIZE);
	f->payload = h + TVP_HDR_SIZE;
	d->rd += size;
	return 1;
}

void *tvp_decoder_space(struct tvp_decoder *d, size_t *avail)
{
	size_t need, frame;
	uint8_t *nb;

	*avail = 0;
	if (d->status)
		return NULL;
	frame = dec_frame_size(d);
	if (d->status)
		return NULL;
	if (frame && d->wr - d->rd >= frame) {
		/* A complete frame is waiting: read-ahead only into the space
		 * there is, never growing the buffer for it. */
		*avail = d->cap - d->wr;
		return *avail ? d->buf + d->wr : NULL;
	}
	if (d->rd == d->wr && d->cap > DECODER_MIN_BUF) {
		/* Drop a big buffer once its frame is done: idle connections stay small. */
		free(d->buf);
		d->buf = NULL;
		d->cap = 0;
	}
	if (d->rd == d->wr)
		d->rd = d->wr = 0;
	need = frame > DECODER_MIN_BUF ? frame : DECODER_MIN_BUF;
	if (d->cap - d->wr < need - (d->wr - d->rd) || d->cap < need) {
		if (d->rd) {
			memmove(d->buf, d->buf + d->rd, d->wr - d->rd);
			d->wr -= d->rd;
			d->rd = 0;
		}
		if (d->cap < need) {
			nb = realloc(d->buf, need);
			if (!nb) {
				dec_fail(d, TVP_E_NOMEM, "no memory for a %zu-byte frame", need);
				return NULL;
			}
			d->buf = nb;
			d->cap = need;
		}
	}
	*avail = d->cap - d->wr;
	return d->buf + d->wr;
}

void tvp_decoder_commit(struct tvp_decoder *d, size_t n)
{
	if (n <= d->cap - d->wr)
		d->wr += n;
}

size_t tvp_decoder_feed(struct tvp_decoder *d, const void *data, size_t n)
{
	size_t avail;
	void *p = tvp_decoder_space(d, &avail);

	if (!p)
		return 0;
	if (n > avail)
		n = avail;
	memcpy(p, data, n);
	tvp_decoder_commit(d, n);
	return n;
}

size_t tvp_decoder_pending(const struct tvp_decoder *d)
{
	return d->wr - d->rd;
}

const char *tvp_decoder_error(const struct tvp_decoder *d)
{
	return d->status ? d->err : "";
}
