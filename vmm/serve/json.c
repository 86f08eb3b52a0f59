/* JSON reader and writer (see json.h), RFC 8259.
 *
 * The reader is recursive descent; the recursion is bounded by max_depth
 * (at most JSON_DEPTH_MAX), checked before each descent. Strings are
 * validated once while tokenizing, so the accessors decode without
 * rechecking.
 */
#include "vmm/serve/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_A_VALUE "expected a value (object, array, string, number, true, false, null)"

struct jp {
	const unsigned char *s;
	size_t n, i;
	struct json_tok *tok;
	uint32_t max, ntok;
	unsigned max_depth;
	struct json_err *err;
	size_t dup_work; /* key bytes decoded by the duplicate check (equal hashes) */
};

static int jfail(struct jp *p, int code, size_t off, const char *what)
{
	if (p->err) {
		p->err->off = off;
		snprintf(p->err->msg, sizeof(p->err->msg), "byte %zu: %s", off, what);
	}
	return -code;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 if there
 * is none: no overlong forms, no surrogates, nothing past U+10FFFF
 * (RFC 3629 §4). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t need;

	if (c < 0x80)
		return 1;
	if (c < 0xc2)
		return 0;
	if (c < 0xe0) {
		need = 2;
	} else if (c < 0xf0) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c < 0xf5) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < need || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t k = 2; k < need; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	return need;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 4 hex digits at s (n bytes left), or -1. */
static long hex4(const unsigned char *s, size_t n)
{
	long v = 0;

	if (n < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		int h = hexval(s[k]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

static void skip_ws(struct jp *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
		p->i++;
}

/* string = quotation-mark *char quotation-mark (RFC 8259 §7); p->i is at
 * the opening quote. */
static int scan_string(struct jp *p, struct json_tok *t)
{
	size_t start = ++p->i;

	t->type = JSON_STRING;
	for (;;) {
		unsigned char c;

		if (p->i >= p->n)
			return jfail(p, EINVAL, start - 1, "unterminated string");
		c = p->s[p->i];
		if (c == '"')
			break;
		if (c < 0x20)
			return jfail(p, EINVAL, p->i, "control character in a string (must be escaped)");
		if (c == '\\') {
			long u;

			t->escaped = true;
			if (p->i + 1 >= p->n)
				return jfail(p, EINVAL, p->i, "unterminated escape");
			c = p->s[p->i + 1];
			if (c != 'u') {
				if (!strchr("\"\\/bfnrt", c) || !c)
					return jfail(
						p, EINVAL, p->i,
						"invalid escape (expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
				p->i += 2;
				continue;
			}
			u = hex4(p->s + p->i + 2, p->n - p->i - 2);
			if (u < 0)
				return jfail(p, EINVAL, p->i, "\\u not followed by 4 hex digits");
			if (u >= 0xdc00 && u <= 0xdfff)
				return jfail(p, EINVAL, p->i, "lone low surrogate \\u escape");
			if (u >= 0xd800 && u <= 0xdbff) {
				long lo;

				if (p->n - p->i < 12 || p->s[p->i + 6] != '\\' || p->s[p->i + 7] != 'u')
					return jfail(p, EINVAL, p->i,
						     "high surrogate \\u escape not followed by a low one");
				lo = hex4(p->s + p->i + 8, p->n - p->i - 8);
				if (lo < 0xdc00 || lo > 0xdfff)
					return jfail(p, EINVAL, p->i,
						     "high surrogate \\u escape not followed by a low one");
				p->i += 6;
			}
			p->i += 6;
			continue;
		}
		if (c >= 0x80) {
			size_t l = utf8_len(p->s + p->i, p->n - p->i);

			if (!l)
				return jfail(p, EINVAL, p->i, "invalid UTF-8 in a string");
			p->i += l;
			continue;
		}
		p->i++;
	}
	t->off = start;
	t->len = p->i - start;
	p->i++;
	return 0;
}

/* number = [ minus ] int [ frac ] [ exp ] (RFC 8259 §6). */
static int scan_number(struct jp *p, struct json_tok *t)
{
	size_t start = p->i;

	t->type = JSON_NUMBER;
	t->integer = true;
	if (p->s[p->i] == '-')
		p->i++;
	if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
		return jfail(p, EINVAL, p->i, "expected a digit after '-'");
	if (p->s[p->i] == '0') {
		p->i++;
		if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
			return jfail(p, EINVAL, p->i - 1, "number with a leading zero");
	} else {
		while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
			p->i++;
	}
	if (p->i < p->n && p->s[p->i] == '.') {
		t->integer = false;
		p->i++;
		if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
			return jfail(p, EINVAL, p->i, "expected a digit after '.'");
		while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
			p->i++;
	}
	if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
		t->integer = false;
		p->i++;
		if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
			p->i++;
		if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
			return jfail(p, EINVAL, p->i, "expected a digit in the exponent");
		while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
			p->i++;
	}
	t->off = start;
	t->len = p->i - start;
	return 0;
}

/* The next code point of an already validated string body s[*i..n). */
static uint32_t next_cp(const unsigned char *s, size_t n, size_t *i)
{
	unsigned char c = s[*i];
	uint32_t cp;

	if (c == '\\') {
		c = s[*i + 1];
		*i += 2;
		switch (c) {
		case 'b': return '\b';
		case 'f': return '\f';
		case 'n': return '\n';
		case 'r': return '\r';
		case 't': return '\t';
		case 'u':
			cp = (uint32_t)hex4(s + *i, n - *i);
			*i += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				uint32_t lo = (uint32_t)hex4(s + *i + 2, n - *i - 2);

				*i += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			return cp;
		default: return c; /* " \ / */
		}
	}
	if (c < 0x80) {
		(*i)++;
		return c;
	}
	if (c < 0xe0) {
		cp = (uint32_t)(c & 0x1f) << 6 | (s[*i + 1] & 0x3f);
		*i += 2;
	} else if (c < 0xf0) {
		cp = (uint32_t)(c & 0x0f) << 12 | (uint32_t)(s[*i + 1] & 0x3f) << 6 | (s[*i + 2] & 0x3f);
		*i += 3;
	} else {
		cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3f) << 12 |
		     (uint32_t)(s[*i + 2] & 0x3f) << 6 | (s[*i + 3] & 0x3f);
		*i += 4;
	}
	return cp;
}

static size_t put_utf8(uint32_t cp, unsigned char out[4])
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | cp >> 18);
	out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Do two validated string bodies decode to the same text? */
static bool body_eq(const unsigned char *a, size_t an, bool aesc, const unsigned char *b, size_t bn, bool besc)
{
	size_t i = 0, j = 0;

	if (!aesc && !besc)
		return an == bn && !memcmp(a, b, an);
	while (i < an && j < bn)
		if (next_cp(a, an, &i) != next_cp(b, bn, &j))
			return false;
	return i == an && j == bn;
}

#define JSON_DUP_SLACK 4096 /* key bytes the duplicate check may decode beyond the document's length */

/* FNV-1a of a validated string body's code points: equal for any two
 * bodies body_eq finds equal, however escaped. */
static uint32_t body_hash(const unsigned char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n;)
		h = (h ^ next_cp(s, n, &i)) * 16777619u;
	return h;
}

static int parse_value(struct jp *p, unsigned depth);

/* '[' or '{' at p->i: the members, each checked against the earlier keys. */
static int parse_container(struct jp *p, uint32_t idx, unsigned depth, bool obj)
{
	const char close = obj ? '}' : ']';
	int r;

	if (depth >= p->max_depth)
		return jfail(p, E2BIG, p->i,
			     obj ? "object nested deeper than the depth limit"
				 : "array nested deeper than the depth limit");
	p->tok[idx].type = obj ? JSON_OBJECT : JSON_ARRAY;
	p->i++;
	skip_ws(p);
	if (p->i < p->n && p->s[p->i] == close) {
		p->i++;
		return 0;
	}
	for (;;) {
		if (obj) {
			uint32_t k;

			skip_ws(p);
			if (p->i >= p->n || p->s[p->i] != '"')
				return jfail(p, EINVAL, p->i, "expected a string key");
			if (p->ntok >= p->max)
				return jfail(p, E2BIG, p->i, "more tokens than the token limit");
			if (p->tok[idx].size >= JSON_MEMBERS_MAX)
				return jfail(p, E2BIG, p->i, "more members in one object than its limit");
			k = p->ntok++;
			memset(&p->tok[k], 0, sizeof(p->tok[k]));
			r = scan_string(p, &p->tok[k]);
			if (r)
				return r;
			p->tok[k].next = p->ntok;
			p->tok[k].hash = body_hash(p->s + p->tok[k].off, p->tok[k].len);
			/* RFC 8259 §4 leaves duplicate names to the implementation;
			 * two meanings for one field invite confusion, so refuse.
			 * Keys are decoded once each (their hash): a body of many
			 * long escaped keys costs no more than its length. */
			for (uint32_t e = idx + 1; e < k; e = p->tok[e + 1].next) {
				const struct json_tok *a = &p->tok[e], *b = &p->tok[k];

				if (a->hash != b->hash)
					continue;
				/* The hash is public: keys made to share one
				 * would have every pair decoded. Decoding is
				 * bounded by the document's length. */
				p->dup_work += a->len + b->len;
				if (p->dup_work > p->n + JSON_DUP_SLACK)
					return jfail(p, E2BIG, b->off - 1,
						     "too many object keys alike (their hashes collide)");
				if (body_eq(p->s + a->off, a->len, a->escaped, p->s + b->off, b->len, b->escaped))
					return jfail(p, EINVAL, b->off - 1, "duplicate key in an object");
			}
			skip_ws(p);
			if (p->i >= p->n || p->s[p->i] != ':')
				return jfail(p, EINVAL, p->i, "expected ':' after an object key");
			p->i++;
		}
		r = parse_value(p, depth + 1);
		if (r)
			return r;
		p->tok[idx].size++;
		skip_ws(p);
		if (p->i < p->n && p->s[p->i] == ',') {
			p->i++;
			continue;
		}
		if (p->i < p->n && p->s[p->i] == close) {
			p->i++;
			return 0;
		}
		return jfail(p, EINVAL, p->i,
			     obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
	}
}

static int parse_value(struct jp *p, unsigned depth)
{
	uint32_t idx;
	struct json_tok *t;
	int r = 0;

	skip_ws(p);
	if (p->i >= p->n)
		return jfail(p, EINVAL, p->i, "expected a value, found the end of the input");
	if (p->ntok >= p->max)
		return jfail(p, E2BIG, p->i, "more tokens than the token limit");
	idx = p->ntok++;
	t = &p->tok[idx];
	memset(t, 0, sizeof(*t));
	t->off = p->i;
	switch (p->s[p->i]) {
	case '{': r = parse_container(p, idx, depth, true); break;
	case '[': r = parse_container(p, idx, depth, false); break;
	case '"': r = scan_string(p, t); break;
	case '-':
	case '0' ... '9': r = scan_number(p, t); break;
	case 't':
	case 'f':
	case 'n': {
		static const char *const lit[] = { "true", "false", "null" };
		static const uint8_t type[] = { JSON_TRUE, JSON_FALSE, JSON_NULL };
		int k = p->s[p->i] == 't' ? 0 : p->s[p->i] == 'f' ? 1 : 2;
		size_t l = strlen(lit[k]);

		/* "not json" is no misspelt null: said as any other non-value */
		if (p->n - p->i < l || memcmp(p->s + p->i, lit[k], l))
			return jfail(p, EINVAL, p->i, NOT_A_VALUE);
		t->type = type[k];
		p->i += l;
		break;
	}
	default: return jfail(p, EINVAL, p->i, NOT_A_VALUE);
	}
	if (r)
		return r;
	t = &p->tok[idx];
	if (t->type == JSON_ARRAY || t->type == JSON_OBJECT)
		t->len = p->i - t->off;
	t->next = p->ntok;
	return 0;
}

int json_parse(struct json_doc *doc, const char *buf, size_t len, struct json_tok *tok, uint32_t max_tok,
	       unsigned max_depth, struct json_err *err)
{
	struct jp p = { .s = (const unsigned char *)buf, .n = len, .tok = tok, .max = max_tok, .err = err };
	int r;

	memset(doc, 0, sizeof(*doc));
	if (err) {
		err->off = 0;
		err->msg[0] = 0;
	}
	if (!max_depth)
		max_depth = JSON_DEPTH_DEFAULT;
	if (max_depth > JSON_DEPTH_MAX)
		return jfail(&p, EINVAL, 0, "depth limit larger than JSON_DEPTH_MAX");
	if (!buf && len)
		return jfail(&p, EINVAL, 0, "no buffer");
	p.max_depth = max_depth;
	r = parse_value(&p, 0);
	if (r)
		return r;
	skip_ws(&p);
	if (p.i != p.n)
		return jfail(&p, EINVAL, p.i, "trailing characters after the JSON value");
	doc->buf = buf;
	doc->len = len;
	doc->tok = tok;
	doc->ntok = p.ntok;
	return 0;
}

static bool valid(const struct json_doc *d, int i)
{
	return i >= 0 && (uint32_t)i < d->ntok;
}

bool json_str_eq(const struct json_doc *d, int i, const char *s, size_t n)
{
	const struct json_tok *t;
	const unsigned char *b;
	size_t k = 0, j = 0;

	if (!valid(d, i) || d->tok[i].type != JSON_STRING)
		return false;
	t = &d->tok[i];
	b = (const unsigned char *)d->buf + t->off;
	if (!t->escaped)
		return t->len == n && !memcmp(b, s, n);
	while (k < t->len) {
		unsigned char u[4];
		size_t l = put_utf8(next_cp(b, t->len, &k), u);

		if (n - j < l || memcmp(s + j, u, l))
			return false;
		j += l;
	}
	return j == n;
}

int json_find(const struct json_doc *d, int obj, const char *key)
{
	size_t n = strlen(key);

	if (!valid(d, obj) || d->tok[obj].type != JSON_OBJECT)
		return -1;
	for (int k = json_first(d, obj); k >= 0; k = json_next(d, obj, k))
		if (json_str_eq(d, k, key, n))
			return k + 1;
	return -1;
}

int json_first(const struct json_doc *d, int c)
{
	if (!valid(d, c) || (d->tok[c].type != JSON_ARRAY && d->tok[c].type != JSON_OBJECT) || !d->tok[c].size)
		return -1;
	return c + 1;
}

int json_next(const struct json_doc *d, int c, int i)
{
	uint32_t n;

	if (!valid(d, c) || !valid(d, i) || i <= c || (uint32_t)i >= d->tok[c].next)
		return -1;
	n = d->tok[i].next;
	if (d->tok[c].type == JSON_OBJECT) /* i is a key: skip its value too */
		n = valid(d, (int)n) ? d->tok[n].next : n;
	return n < d->tok[c].next ? (int)n : -1;
}

static int get_str(const struct json_doc *d, int i, char *out, size_t cap, size_t *len, bool allow_nul)
{
	const struct json_tok *t;
	const unsigned char *b;
	size_t k = 0, o = 0;
	bool nul = false;

	if (len)
		*len = 0;
	if (cap)
		out[0] = 0;
	if (!valid(d, i) || d->tok[i].type != JSON_STRING)
		return -EINVAL;
	t = &d->tok[i];
	b = (const unsigned char *)d->buf + t->off;
	while (k < t->len) {
		unsigned char u[4];
		uint32_t cp = next_cp(b, t->len, &k);
		size_t l = put_utf8(cp, u);

		nul |= cp == 0;
		if (cap - o <= l || !cap) {
			if (cap)
				out[0] = 0;
			return -ENOSPC;
		}
		memcpy(out + o, u, l);
		o += l;
	}
	if (!cap)
		return -ENOSPC;
	out[o] = 0;
	if (nul && !allow_nul) {
		out[0] = 0;
		return -EINVAL;
	}
	if (len)
		*len = o;
	return 0;
}

int json_get_string(const struct json_doc *d, int i, char *out, size_t cap, size_t *len)
{
	return get_str(d, i, out, cap, len, false);
}

int json_get_bytes(const struct json_doc *d, int i, char *out, size_t cap, size_t *len)
{
	return get_str(d, i, out, cap, len, true);
}

int json_get_int64(const struct json_doc *d, int i, int64_t *v)
{
	const struct json_tok *t;
	const char *s;
	bool neg;
	uint64_t x = 0, lim;

	if (!valid(d, i) || d->tok[i].type != JSON_NUMBER || !d->tok[i].integer)
		return -EINVAL;
	t = &d->tok[i];
	s = d->buf + t->off;
	neg = s[0] == '-';
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (size_t k = neg; k < t->len; k++) {
		unsigned dg = (unsigned)(s[k] - '0');

		if (x > (lim - dg) / 10)
			return -ERANGE;
		x = x * 10 + dg;
	}
	if (neg)
		*v = x ? -(int64_t)(x - 1) - 1 : 0;
	else
		*v = (int64_t)x;
	return 0;
}

int json_get_double(const struct json_doc *d, int i, double *v)
{
	char tmp[513];
	double x;

	if (!valid(d, i) || d->tok[i].type != JSON_NUMBER)
		return -EINVAL;
	if (d->tok[i].len >= sizeof(tmp))
		return -ERANGE;
	memcpy(tmp, d->buf + d->tok[i].off, d->tok[i].len);
	tmp[d->tok[i].len] = 0;
	x = strtod(tmp, NULL);
	if (isinf(x))
		return -ERANGE;
	*v = x;
	return 0;
}

int json_get_bool(const struct json_doc *d, int i, bool *v)
{
	if (!valid(d, i) || (d->tok[i].type != JSON_TRUE && d->tok[i].type != JSON_FALSE))
		return -EINVAL;
	*v = d->tok[i].type == JSON_TRUE;
	return 0;
}

bool json_is_null(const struct json_doc *d, int i)
{
	return valid(d, i) && d->tok[i].type == JSON_NULL;
}

/* The writer. */

void json_w_init(struct json_w *w, char *buf, size_t cap)
{
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->cap = buf ? cap : 0;
}

static void put(struct json_w *w, const void *s, size_t n)
{
	if (w->err)
		return;
	if (n > w->cap - w->len) {
		w->err = -ENOBUFS;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

/* Commas and the place of a value; false if none may come here. */
static bool before_value(struct json_w *w)
{
	if (w->err)
		return false;
	if (w->want_value) {
		w->want_value = false;
		return true;
	}
	if (w->depth ? w->in_obj[w->depth - 1] : w->need_comma) {
		w->err = -EINVAL; /* a value where a key is due, or a second top-level value */
		return false;
	}
	if (w->need_comma)
		put(w, ",", 1);
	return !w->err;
}

static void begin(struct json_w *w, bool obj)
{
	if (!before_value(w))
		return;
	if (w->depth >= JSON_W_DEPTH) {
		w->err = -EINVAL;
		return;
	}
	put(w, obj ? "{" : "[", 1);
	w->in_obj[w->depth++] = obj;
	w->need_comma = false;
}

static void end(struct json_w *w, bool obj)
{
	if (w->err)
		return;
	if (!w->depth || w->in_obj[w->depth - 1] != obj || w->want_value) {
		w->err = -EINVAL;
		return;
	}
	put(w, obj ? "}" : "]", 1);
	w->depth--;
	w->need_comma = true;
}

void json_w_obj_begin(struct json_w *w)
{
	begin(w, true);
}

void json_w_obj_end(struct json_w *w)
{
	end(w, true);
}

void json_w_arr_begin(struct json_w *w)
{
	begin(w, false);
}

void json_w_arr_end(struct json_w *w)
{
	end(w, false);
}

static void put_escaped(struct json_w *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	put(w, "\"", 1);
	while (i < n && !w->err) {
		unsigned char c = s[i];
		char esc[7];
		size_t l;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0x80 && (l = utf8_len(s + i, n - i))) {
			i += l;
			continue;
		}
		put(w, s + run, i - run);
		switch (c) {
		case '"': put(w, "\\\"", 2); break;
		case '\\': put(w, "\\\\", 2); break;
		case '\b': put(w, "\\b", 2); break;
		case '\f': put(w, "\\f", 2); break;
		case '\n': put(w, "\\n", 2); break;
		case '\r': put(w, "\\r", 2); break;
		case '\t': put(w, "\\t", 2); break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				put(w, esc, 6);
			} else {
				put(w, "\xef\xbf\xbd", 3); /* U+FFFD for a byte that is not UTF-8 */
			}
		}
		run = ++i;
	}
	put(w, s + run, n - run);
	put(w, "\"", 1);
}

void json_w_key(struct json_w *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (!w->depth || !w->in_obj[w->depth - 1] || w->want_value) {
		w->err = -EINVAL;
		return;
	}
	if (w->need_comma)
		put(w, ",", 1);
	put_escaped(w, s, n);
	put(w, ":", 1);
	w->want_value = !w->err;
}

void json_w_string(struct json_w *w, const char *s, size_t n)
{
	if (!before_value(w))
		return;
	put_escaped(w, s, n);
	w->need_comma = true;
}

void json_w_int(struct json_w *w, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", (long long)v);

	if (!before_value(w))
		return;
	put(w, tmp, (size_t)n);
	w->need_comma = true;
}

void json_w_uint(struct json_w *w, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);

	if (!before_value(w))
		return;
	put(w, tmp, (size_t)n);
	w->need_comma = true;
}

void json_w_double(struct json_w *w, double v)
{
	char tmp[32];
	int n;

	if (w->err)
		return;
	if (!isfinite(v)) {
		w->err = -EINVAL;
		return;
	}
	n = snprintf(tmp, sizeof(tmp), "%.17g", v);
	json_w_number(w, tmp, (size_t)n);
}

void json_w_number(struct json_w *w, const char *s, size_t n)
{
	struct jp p = { .s = (const unsigned char *)s, .n = n };
	struct json_tok t;

	if (w->err)
		return;
	if (!n || !((s[0] >= '0' && s[0] <= '9') || s[0] == '-') || scan_number(&p, &t) || p.i != n) {
		w->err = -EINVAL;
		return;
	}
	if (!before_value(w))
		return;
	put(w, s, n);
	w->need_comma = true;
}

void json_w_bool(struct json_w *w, bool v)
{
	if (!before_value(w))
		return;
	put(w, v ? "true" : "false", v ? 4 : 5);
	w->need_comma = true;
}

void json_w_null(struct json_w *w)
{
	if (!before_value(w))
		return;
	put(w, "null", 4);
	w->need_comma = true;
}

int json_base64_encode(const void *data, size_t n, char *out, size_t cap, size_t *out_len)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = data;
	size_t need, o = 0, i = 0;

	if (out_len)
		*out_len = 0;
	if (__builtin_mul_overflow(n / 3 + (n % 3 != 0), (size_t)4, &need) || need > cap)
		return -ENOSPC;
	for (; n - i >= 3; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		out[o++] = abc[v >> 18];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = abc[v >> 6 & 63];
		out[o++] = abc[v & 63];
	}
	if (n - i) {
		uint32_t v = (uint32_t)s[i] << 16 | (n - i == 2 ? (uint32_t)s[i + 1] << 8 : 0);

		out[o++] = abc[v >> 18];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = n - i == 2 ? abc[v >> 6 & 63] : '=';
		out[o++] = '=';
	}
	if (out_len)
		*out_len = o;
	return 0;
}

void json_w_base64(struct json_w *w, const void *data, size_t n)
{
	size_t l;

	if (!before_value(w))
		return;
	put(w, "\"", 1);
	if (w->err)
		return;
	if (json_base64_encode(data, n, w->buf + w->len, w->cap - w->len, &l)) {
		w->err = -ENOBUFS;
		return;
	}
	w->len += l;
	put(w, "\"", 1);
	w->need_comma = true;
}

int json_w_finish(struct json_w *w, size_t *len)
{
	if (len)
		*len = w->len;
	if (w->err)
		return w->err;
	if (w->depth || w->want_value || !w->need_comma)
		return -EINVAL;
	return 0;
}

void json_w_kstr(struct json_w *w, const char *key, const char *s)
{
	json_w_key(w, key, strlen(key));
	if (s)
		json_w_string(w, s, strlen(s));
	else
		json_w_null(w);
}

void json_w_kint(struct json_w *w, const char *key, int64_t v)
{
	json_w_key(w, key, strlen(key));
	json_w_int(w, v);
}

void json_w_kuint(struct json_w *w, const char *key, uint64_t v)
{
	json_w_key(w, key, strlen(key));
	json_w_uint(w, v);
}

void json_w_kbool(struct json_w *w, const char *key, bool v)
{
	json_w_key(w, key, strlen(key));
	json_w_bool(w, v);
}

void json_w_knull(struct json_w *w, const char *key)
{
	json_w_key(w, key, strlen(key));
	json_w_null(w);
}
