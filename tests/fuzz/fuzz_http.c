/* libFuzzer target for the serve daemon's HTTP/1.1 code (vmm/serve/http.c,
 * compiled in: it is not part of the library): the request-head parser,
 * the chunked decoder on what follows the head, the percent-decoder on the
 * path and query, and the response writer. Whatever the bytes: no crash,
 * no read past the input, and feeding the input in three pieces (two split
 * points taken from the input) gives the same result as one call.
 *
 * Byte 0: bit 0 small limits (reached quickly), bits 1-7 the status and
 * capacity of a response head. Bytes 1-2: the split points. The rest is
 * the request stream. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/http.c"

#define CHECK(x)                 \
	do {                     \
		if (!(x))        \
			abort(); \
	} while (0)

static _Alignas(max_align_t) char store_a[1 << 16];
static _Alignas(max_align_t) char store_b[1 << 16];

/* Feed p the n bytes at s in up to three pieces cut at a and b. */
static enum http_result feed3(struct http_parser *p, const struct http_limits *lim, void *store, const uint8_t *s,
			      size_t n, size_t a, size_t b, uint64_t *used_total)
{
	size_t cut[4] = { 0, a, b, n }, used;
	enum http_result r = HTTP_NEED_MORE;

	CHECK(http_req_init(p, lim, store, sizeof(store_a)) == 0);
	*used_total = 0;
	for (int k = 0; k < 3; k++) {
		r = http_req_feed(p, s + cut[k], cut[k + 1] - cut[k], &used);
		CHECK(used <= cut[k + 1] - cut[k]);
		*used_total += used;
		if (r != HTTP_NEED_MORE)
			break;
		CHECK(used == cut[k + 1] - cut[k]);
	}
	return r;
}

static bool same_str(struct http_str x, const char *bx, struct http_str y, const char *by)
{
	if (!x.p || !y.p)
		return !x.p && !y.p;
	return x.n == y.n && x.p - bx == y.p - by;
}

static void check_requests(const struct http_parser *p, const struct http_parser *q)
{
	const struct http_request *x = &p->req, *y = &q->req;
	const char *bx = p->store, *by = q->store;

	CHECK(same_str(x->method, bx, y->method, by) && same_str(x->target, bx, y->target, by));
	CHECK(same_str(x->path, bx, y->path, by) && same_str(x->query, bx, y->query, by));
	CHECK(same_str(x->host, bx, y->host, by) && same_str(x->authorization, bx, y->authorization, by));
	CHECK(same_str(x->accept, bx, y->accept, by) && same_str(x->content_type, bx, y->content_type, by));
	CHECK(x->minor == y->minor && x->nheaders == y->nheaders && x->has_query == y->has_query);
	CHECK(x->has_length == y->has_length && x->chunked == y->chunked && x->keep_alive == y->keep_alive);
	CHECK(x->expect_continue == y->expect_continue && x->body_len == y->body_len);
	CHECK(!memcmp(p->store, q->store, p->line_start));
	/* Every slice lies in the stored text. */
	for (unsigned i = 0; i < x->nheaders; i++) {
		CHECK(x->headers[i].name.p >= bx && x->headers[i].name.p + x->headers[i].name.n <= bx + p->line_start);
		CHECK(x->headers[i].value.p >= bx &&
		      x->headers[i].value.p + x->headers[i].value.n <= bx + p->line_start);
	}
}

/* Percent-decode every '&'/'='-separated piece of the query and every
 * '/'-separated segment of the path. */
static void decode_pieces(struct http_str s, const char *seps, bool plus)
{
	char out[64];
	size_t b = 0, len;
	const char *why;

	for (size_t i = 0; i <= s.n; i++) {
		if (i < s.n && !strchr(seps, s.p[i]))
			continue;
		int r = http_pct_decode(s.p + b, i - b, out, sizeof(out), &len, plus, &why);

		CHECK(r == 0 || (r < 0 && why));
		CHECK(len < sizeof(out) && out[len] == 0);
		b = i + 1;
	}
}

/* Decode the chunked body s[0..n) at once, and in two pieces cut at a. */
static void chunked(const uint8_t *s, size_t n, size_t a, uint64_t body_max)
{
	struct http_chunked c1, c2;
	uint8_t *b1 = malloc(n ? n : 1), *b2 = malloc(n ? n : 1);
	size_t u1, o1, u2, o2, ub = 0, ob = 0;
	enum http_result r1, r2;

	memcpy(b1, s, n);
	memcpy(b2, s, n);
	http_chunked_init(&c1, body_max, 32, 64);
	http_chunked_init(&c2, body_max, 32, 64);
	r1 = http_chunked_decode(&c1, b1, n, &u1, &o1);
	r2 = http_chunked_decode(&c2, b2, a, &u2, &o2);
	if (r2 == HTTP_NEED_MORE) {
		CHECK(u2 == a);
		/* The second piece decodes in place right after the first's data. */
		memmove(b2 + o2, b2 + a, n - a);
		r2 = http_chunked_decode(&c2, b2 + o2, n - a, &ub, &ob);
		u2 += ub;
		o2 += ob;
	}
	CHECK(r1 == r2 && c1.status == c2.status && c1.reason == c2.reason);
	CHECK(u1 == u2 && o1 == o2 && !memcmp(b1, b2, o1));
	CHECK(o1 <= u1 && c1.body_len <= body_max);
	if (r1 == HTTP_NEED_MORE)
		CHECK(u1 == n);
	if (r1 == HTTP_ERROR)
		CHECK(c1.reason && (c1.status == 400 || c1.status == 413 || c1.status == 431));
	free(b1);
	free(b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_parser p, q;
	struct http_limits small = { .line = 64, .header_block = 128, .headers = 4, .body = 100 };
	const struct http_limits *lim;
	uint64_t ua, ub;
	enum http_result ra, rb;
	uint8_t *buf;
	size_t n, a, b;

	if (size < 3)
		return 0;
	lim = data[0] & 1 ? &small : NULL;
	n = size - 3;
	a = n ? data[1] % (n + 1) : 0;
	b = n ? data[2] % (n + 1) : 0;
	if (a > b) {
		size_t t = a;
		a = b;
		b = t;
	}
	buf = malloc(n ? n : 1); /* exact size: ASan catches overreads */
	memcpy(buf, data + 3, n);

	ra = feed3(&p, lim, store_a, buf, n, n, n, &ua);
	rb = feed3(&q, lim, store_b, buf, n, a, b, &ub);
	CHECK(ra == rb && ua == ub && p.status == q.status && p.reason == q.reason);
	CHECK(p.consumed == ua && q.consumed == ub);
	if (ra == HTTP_ERROR)
		CHECK(p.reason && p.status >= 400 && p.status <= 505);
	if (ra == HTTP_DONE) {
		check_requests(&p, &q);
		decode_pieces(p.req.path, "/", false);
		decode_pieces(p.req.query, "&=", true);
		if (p.req.chunked)
			chunked(buf + ua, n - (size_t)ua, (n - (size_t)ua) ? a % (n - (size_t)ua + 1) : 0,
				lim ? lim->body : 1 << 20);
	}

	/* A response head: the status and capacity from byte 0, the content
	 * type from the head's first bytes; never past the capacity. */
	{
		char out[160], ct[40];
		size_t cap = (size_t)(data[0] >> 1) + 20, len, k = n < sizeof(ct) - 1 ? n : sizeof(ct) - 1;
		struct http_response r = { .status = 100 + data[0] * 2,
					   .content_type = ct,
					   .content_length = ua,
					   .chunked = data[1] & 1,
					   .close = data[2] & 1 };

		memcpy(ct, buf, k);
		ct[k] = 0;
		memset(out, 0x5a, sizeof(out));
		int e = http_write_head(out, cap, &r, &len);
		CHECK(e == 0 || e == -EINVAL || e == -ENOSPC);
		for (size_t i = cap; i < sizeof(out); i++)
			CHECK(out[i] == 0x5a);
		if (!e)
			CHECK(len < cap && out[len] == 0 && len == strlen(out));
	}
	free(buf);
	return 0;
}
