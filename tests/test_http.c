/* The HTTP/1.1 request-head parser, chunked decoder, percent-decoder and
 * response writer of the serve daemon (vmm/serve/http.c), above all on
 * hostile input. vmm/serve is not part of the library: its source is
 * compiled into this test. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/http.c"
#include "tests/unit.h"

static _Alignas(max_align_t) char store_a[1 << 18];
static _Alignas(max_align_t) char store_b[1 << 18];

struct outcome {
	enum http_result r;
	int status;
	uint64_t used;
};

/* Feed n bytes in pieces of step bytes (0: all at once) into p. */
static struct outcome feed(struct http_parser *p, const struct http_limits *lim, void *store, const char *s, size_t n,
			   size_t step)
{
	struct outcome o = { HTTP_NEED_MORE, 0, 0 };
	size_t off = 0;

	ck_assert_int_eq(http_req_init(p, lim, store, sizeof(store_a)), 0);
	if (!n)
		return o;
	while (off < n) {
		size_t k = step && n - off > step ? step : n - off, used = 0;

		o.r = http_req_feed(p, s + off, k, &used);
		ck_assert_uint_le(used, k);
		o.used += used;
		off += k;
		if (o.r != HTTP_NEED_MORE)
			break;
		ck_assert_uint_eq(used, k);
	}
	o.status = p->status;
	return o;
}

/* Parse s (n bytes) at once into *p, check that 1 byte and 7 bytes at a
 * time give the same result, and return the result. */
static enum http_result parse_lim(struct http_parser *p, const struct http_limits *lim, const char *s, size_t n)
{
	struct http_parser q;
	struct outcome a = feed(p, lim, store_a, s, n, 0);
	size_t steps[] = { 1, 7, 4096 };

	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		struct outcome b = feed(&q, lim, store_b, s, n, steps[k]);

		ck_assert_int_eq(b.r, a.r);
		ck_assert_int_eq(b.status, a.status);
		ck_assert_uint_eq(b.used, a.used);
		ck_assert_uint_eq(q.consumed, p->consumed);
		if (a.r == HTTP_ERROR)
			ck_assert_str_eq(q.reason, p->reason);
	}
	if (a.r == HTTP_ERROR) {
		ck_assert_ptr_nonnull(p->reason);
		ck_assert_int_ne(p->status, 0);
	}
	return a.r;
}

static enum http_result parse(struct http_parser *p, const char *s)
{
	return parse_lim(p, NULL, s, strlen(s));
}

/* The status of a request expected to fail. */
static int status_of(const char *s)
{
	struct http_parser p;

	ck_assert_int_eq(parse(&p, s), HTTP_ERROR);
	return p.status;
}

/* The reason of a request expected to fail with status. */
static const char *reason_of(const char *s, int status)
{
	struct http_parser p;

	ck_assert_int_eq(parse(&p, s), HTTP_ERROR);
	ck_assert_int_eq(p.status, status);
	return p.reason;
}

static bool str_is(struct http_str s, const char *lit)
{
	return s.p && s.n == strlen(lit) && !memcmp(s.p, lit, s.n);
}

START_TEST(simple_get)
{
	struct http_parser p;
	const char *s = "GET /v1/sandboxes/abc?x=1&y=%20 HTTP/1.1\r\nHost: localhost:8080\r\n"
			"Accept: application/json\r\nAuthorization: Bearer t0k\r\nX-Empty:\r\n\r\nBODY";

	ck_assert_int_eq(parse(&p, s), HTTP_DONE);
	ck_assert_uint_eq(p.consumed, strlen(s) - 4);
	ck_assert(str_is(p.req.method, "GET"));
	ck_assert(str_is(p.req.target, "/v1/sandboxes/abc?x=1&y=%20"));
	ck_assert(str_is(p.req.path, "/v1/sandboxes/abc"));
	ck_assert(str_is(p.req.query, "x=1&y=%20"));
	ck_assert(p.req.has_query);
	ck_assert_int_eq(p.req.minor, 1);
	ck_assert(p.req.keep_alive);
	ck_assert(!p.req.has_length);
	ck_assert(!p.req.chunked);
	ck_assert(str_is(p.req.host, "localhost:8080"));
	ck_assert(str_is(p.req.accept, "application/json"));
	ck_assert(str_is(p.req.authorization, "Bearer t0k"));
	ck_assert_ptr_null(p.req.content_type.p);
	ck_assert_uint_eq(p.req.nheaders, 4);
	ck_assert(str_is(*http_req_header(&p.req, "x-EMPTY"), ""));
	ck_assert(str_is(*http_req_header(&p.req, "AUTHORIZATION"), "Bearer t0k"));
	ck_assert_ptr_null(http_req_header(&p.req, "Cookie"));

	/* Feeding after DONE uses nothing and says DONE again. */
	size_t used = 99;
	ck_assert_int_eq(http_req_feed(&p, "GET", 3, &used), HTTP_DONE);
	ck_assert_uint_eq(used, 0);
}
END_TEST

START_TEST(body_offset_and_fields)
{
	struct http_parser p;
	const char *s =
		"POST /v1/x HTTP/1.1\r\nHost: h\r\ncontent-length: 0005\r\nContent-Type:  application/json \t\r\n"
		"Content-Length: 5\r\nExpect: 100-Continue\r\n\r\nhello";
	size_t used;

	ck_assert_int_eq(parse(&p, s), HTTP_DONE);
	ck_assert(p.req.has_length);
	ck_assert_uint_eq(p.req.body_len, 5);
	ck_assert(str_is(p.req.content_type, "application/json"));
	ck_assert(p.req.expect_continue);
	ck_assert(!p.req.has_query);
	ck_assert_uint_eq(p.req.query.n, 0);
	ck_assert_str_eq(s + p.consumed, "hello");

	/* used is relative to the last call. */
	ck_assert_int_eq(http_req_init(&p, NULL, store_a, sizeof(store_a)), 0);
	ck_assert_int_eq(http_req_feed(&p, s, 10, &used), HTTP_NEED_MORE);
	ck_assert_uint_eq(used, 10);
	ck_assert_int_eq(http_req_feed(&p, s + 10, strlen(s) - 10, &used), HTTP_DONE);
	ck_assert_str_eq(s + 10 + used, "hello");
}
END_TEST

START_TEST(connection_defaults)
{
	struct http_parser p;

	ck_assert_int_eq(parse(&p, "GET / HTTP/1.0\r\n\r\n"), HTTP_DONE);
	ck_assert(!p.req.keep_alive);
	ck_assert_int_eq(p.req.minor, 0);
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), HTTP_DONE);
	ck_assert(p.req.keep_alive);
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, CLOSE\r\n\r\n"), HTTP_DONE);
	ck_assert(!p.req.keep_alive);
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"),
			 HTTP_DONE);
	ck_assert(!p.req.keep_alive);
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n"), HTTP_DONE);
	ck_assert(p.req.keep_alive);
	/* Empty lines before the request-line are ignored (RFC 9112 §2.2). */
	ck_assert_int_eq(parse(&p, "\r\n\r\nGET / HTTP/1.0\r\n\r\n"), HTTP_DONE);
	ck_assert(str_is(p.req.method, "GET"));
}
END_TEST

START_TEST(host_rules)
{
	struct http_parser p;

	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"), 400);
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost:\r\n\r\n"), HTTP_DONE);
	ck_assert(str_is(p.req.host, ""));
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"), HTTP_DONE);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: x\r\nauthorization: y\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nContent-Type: x\r\nContent-Type: x\r\n\r\n"), 400);
}
END_TEST

START_TEST(request_line_errors)
{
	/* Not origin-form. */
	ck_assert_int_eq(status_of("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	/* Bad characters and escapes in the target. */
	ck_assert_int_eq(status_of("GET /a#f HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /a%g0 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /a% HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /\x80 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /\t HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	/* Spaces. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of(" GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET /\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
	/* Versions. */
	ck_assert_int_eq(status_of("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
	ck_assert_int_eq(status_of("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505);
	ck_assert_int_eq(status_of("GET / HTTP/0.9\r\n\r\n"), 505);
	ck_assert_int_eq(status_of("GET / HTTP/1.10\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / http/1.1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1\r\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.x\r\nHost: a\r\n\r\n"), 400);
	/* Line ends and control bytes. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\rHost: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("\n"), 400);
	ck_assert_int_eq(status_of("\rX"), 400);
	ck_assert_int_eq(status_of("GET /\x7f HTTP/1.1\r\n"), 400);
}
END_TEST

START_TEST(nul_bytes)
{
	struct http_parser p;
	static const char a[] = "GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char b[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
	static const char c[] = "GET / HTTP/1.1\r\nHost: a\r\nX\0: ab\r\n\r\n";
	static const char d[] = "\0GET / HTTP/1.1\r\n\r\n";

	ck_assert_int_eq(parse_lim(&p, NULL, a, sizeof(a) - 1), HTTP_ERROR);
	ck_assert_int_eq(p.status, 400);
	ck_assert_uint_eq(p.consumed, 5);
	ck_assert_int_eq(parse_lim(&p, NULL, b, sizeof(b) - 1), HTTP_ERROR);
	ck_assert_int_eq(p.status, 400);
	ck_assert_str_eq(p.reason, "header field: NUL byte");
	ck_assert_int_eq(parse_lim(&p, NULL, c, sizeof(c) - 1), HTTP_ERROR);
	ck_assert_int_eq(parse_lim(&p, NULL, d, sizeof(d) - 1), HTTP_ERROR);
	ck_assert_uint_eq(p.consumed, 0);
}
END_TEST

START_TEST(field_errors)
{
	/* obs-fold (RFC 9112 §5.2) and whitespace before the first field:
	 * refused as such, not as whatever the folded line looks like. */
	const char *fold = "header field: line folding (obs-fold) or whitespace before a name";
	ck_assert_str_eq(reason_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400), fold);
	ck_assert_str_eq(reason_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb: c\r\n\r\n", 400), fold);
	ck_assert_str_eq(reason_of("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400), fold);
	ck_assert_str_eq(reason_of("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400), "header field: whitespace before ':'");
	/* Whitespace before the colon (RFC 9112 §5.1), no colon, empty name. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\n: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHo(st: a\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nH\xc3\xa9: a\r\nHost: a\r\n\r\n"), 400);
	/* Bare CR and LF. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\n\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\n\r\r"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\n\n\r\n"), 400);
	/* Other control characters; obs-text is allowed in values. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n"), 400);
	struct http_parser p;
	ck_assert_int_eq(parse(&p, "GET / HTTP/1.1\r\nHost: a\r\nX: \xff\tb\r\n\r\n"), HTTP_DONE);
	ck_assert(str_is(*http_req_header(&p.req, "x"), "\xff\tb"));
	/* Expect other than 100-continue. */
	ck_assert_int_eq(status_of("GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"), 417);
}
END_TEST

START_TEST(content_length)
{
	struct http_parser p;
	char req[256];

	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
			 400);
	ck_assert_int_eq(parse(&p, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 005\r\n\r\n"),
			 HTTP_DONE);
	ck_assert_uint_eq(p.req.body_len, 5);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n"), 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"), 400);
	/* At the body limit, past it, and past 2^64. */
	snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %u\r\n\r\n", 1u << 20);
	ck_assert_int_eq(parse(&p, req), HTTP_DONE);
	ck_assert_uint_eq(p.req.body_len, 1u << 20);
	snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %u\r\n\r\n", (1u << 20) + 1);
	ck_assert_int_eq(status_of(req), 413);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n"), 413);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n"), 413);
	ck_assert_int_eq(
		status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999999999\r\n\r\n"), 413);
	/* Overflow is refused at once: two overflowing values are never compared. */
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n"
				   "Content-Length: 18446744073709551617\r\n\r\n"),
			 413);
}
END_TEST

START_TEST(transfer_encoding)
{
	struct http_parser p;

	ck_assert_int_eq(parse(&p, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"), HTTP_DONE);
	ck_assert(p.req.chunked);
	ck_assert(!p.req.has_length);
	/* Smuggling: both framings, either order. */
	ck_assert_int_eq(
		status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
		400);
	ck_assert_int_eq(
		status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
		400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n"),
			 400);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 501);
	ck_assert_int_eq(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"), 501);
	ck_assert_int_eq(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
}
END_TEST

/* A request with a line of exactly len bytes. */
static size_t line_of(char *buf, size_t len)
{
	const char *tail = " HTTP/1.0";
	size_t tl = strlen(tail);

	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', len - 5 - tl);
	memcpy(buf + len - tl, tail, tl);
	memcpy(buf + len, "\r\n\r\n", 4);
	return len + 4;
}

START_TEST(request_line_limit)
{
	static char buf[20000];
	struct http_parser p;
	struct http_limits lim = { .line = 64, .header_block = 64, .headers = 2, .body = 10 };
	size_t n;

	n = line_of(buf, 8192);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_DONE);
	ck_assert_uint_eq(p.req.target.n, 8192 - 4 - 9);
	n = line_of(buf, 8193);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 414);
	ck_assert_uint_eq(p.consumed, 8192);
	n = line_of(buf, 64);
	ck_assert_int_eq(parse_lim(&p, &lim, buf, n), HTTP_DONE);
	n = line_of(buf, 65);
	ck_assert_int_eq(parse_lim(&p, &lim, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 414);
	/* Empty lines before the request-line are bounded by the same limit. */
	memset(buf, 0, sizeof(buf));
	for (n = 0; n < 64; n += 2)
		memcpy(buf + n, "\r\n", 2);
	n += (size_t)sprintf(buf + n, "GET / HTTP/1.0\r\n\r\n");
	ck_assert_int_eq(parse_lim(&p, &lim, buf, n), HTTP_DONE);
	memmove(buf + 2, buf, n);
	memcpy(buf, "\r\n", 2);
	ck_assert_int_eq(parse_lim(&p, &lim, buf, n + 2), HTTP_ERROR);
	ck_assert_int_eq(p.status, 400);
}
END_TEST

/* A request whose header block (field lines with CRLFs) is len bytes,
 * as nfields lines. */
static size_t block_of(char *buf, size_t len, unsigned nfields)
{
	size_t o = (size_t)sprintf(buf, "GET / HTTP/1.1\r\n"), left = len;

	for (unsigned i = 0; i < nfields; i++) {
		size_t l = i + 1 == nfields ? left : left / (nfields - i);

		ck_assert_uint_ge(l, i ? 5 : 7);
		if (i == 0) {
			memcpy(buf + o, "Host:", 5);
			memset(buf + o + 5, 'h', l - 7);
		} else {
			memcpy(buf + o, "X:", 2);
			memset(buf + o + 2, 'v', l - 4);
		}
		memcpy(buf + o + l - 2, "\r\n", 2);
		o += l;
		left -= l;
	}
	memcpy(buf + o, "\r\n", 2);
	return o + 2;
}

START_TEST(header_block_limit)
{
	static char buf[40000];
	struct http_parser p;
	size_t n;

	n = block_of(buf, 16384, 1);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_DONE);
	ck_assert_uint_eq(p.req.host.n, 16384 - 7);
	n = block_of(buf, 16385, 1);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	ck_assert_uint_eq(p.consumed, 16 + 16384); /* at the LF, the block's 16385th byte */
	/* A full block, then one more field byte: refused at that byte. */
	n = block_of(buf, 16384, 1);
	memcpy(buf + n - 2, "X: y\r\n\r\n", 8);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n + 6), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	ck_assert_uint_eq(p.consumed, 16 + 16384);
	n = block_of(buf, 16384, 64);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_DONE);
	ck_assert_uint_eq(p.req.nheaders, 64);
	n = block_of(buf, 16385, 64);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	/* The limit falls on the CR and on the LF of the last line. */
	n = block_of(buf, 16386, 1);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
}
END_TEST

START_TEST(header_count_limit)
{
	static char buf[4096];
	struct http_parser p;
	struct http_limits lim = http_limits_default();
	size_t n;

	n = block_of(buf, 64 * 8, 64);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_DONE);
	ck_assert_uint_eq(p.req.nheaders, 64);
	n = block_of(buf, 65 * 8, 65);
	ck_assert_int_eq(parse_lim(&p, NULL, buf, n), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
	lim.headers = 1;
	ck_assert_int_eq(parse_lim(&p, &lim, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 28), HTTP_DONE);
	ck_assert_int_eq(parse_lim(&p, &lim, "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n", 34), HTTP_ERROR);
	ck_assert_int_eq(p.status, 431);
}
END_TEST

START_TEST(init_checks)
{
	struct http_parser p;
	struct http_limits lim = http_limits_default();
	size_t need = http_store_size(&lim);
	size_t used;

	ck_assert_uint_eq(need, 8192 + 16384 + 64 * sizeof(struct http_header));
	ck_assert_int_eq(http_req_init(&p, &lim, store_a, need - 1), -EINVAL);
	ck_assert_ptr_nonnull(p.reason);
	ck_assert_int_eq(http_req_feed(&p, "GET", 3, &used), HTTP_ERROR);
	ck_assert_int_eq(http_req_init(&p, &lim, store_a + 1, need), -EINVAL);
	ck_assert_int_eq(http_req_init(&p, &lim, NULL, need), -EINVAL);
	ck_assert_int_eq(http_req_init(&p, &lim, store_a, need), 0);
	lim.headers = 0;
	ck_assert_int_eq(http_req_init(&p, &lim, store_a, need), -EINVAL);
	lim.headers = UINT32_MAX;
	lim.line = SIZE_MAX;
	ck_assert_uint_eq(http_store_size(&lim), SIZE_MAX);
	ck_assert_int_eq(http_req_init(&p, &lim, store_a, sizeof(store_a)), -EINVAL);
}
END_TEST

START_TEST(pct_decode)
{
	char out[16];
	size_t n = 99;
	const char *why = NULL;

	ck_assert_int_eq(http_pct_decode("a%20b%2Fc%e2%82%ac", 18, out, sizeof(out), &n, false, &why), 0);
	ck_assert_str_eq(out, "a b/c\xe2\x82\xac");
	ck_assert_uint_eq(n, 8);
	ck_assert_ptr_null(why);
	ck_assert_int_eq(http_pct_decode("a+b", 3, out, sizeof(out), &n, true, NULL), 0);
	ck_assert_str_eq(out, "a b");
	ck_assert_int_eq(http_pct_decode("a+b", 3, out, sizeof(out), &n, false, NULL), 0);
	ck_assert_str_eq(out, "a+b");
	ck_assert_int_eq(http_pct_decode("%00", 3, out, sizeof(out), &n, false, &why), -EINVAL);
	ck_assert_str_eq(why, "percent-encoding: %00");
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(http_pct_decode("a%0", 3, out, sizeof(out), &n, false, &why), -EINVAL);
	ck_assert_int_eq(http_pct_decode("a%", 2, out, sizeof(out), &n, false, &why), -EINVAL);
	ck_assert_int_eq(http_pct_decode("%zz", 3, out, sizeof(out), &n, false, &why), -EINVAL);
	ck_assert_int_eq(http_pct_decode("%+1", 3, out, sizeof(out), &n, false, &why), -EINVAL);
	ck_assert_int_eq(http_pct_decode("a\0b", 3, out, sizeof(out), &n, false, &why), -EINVAL);
	/* A % at the end of the slice must not read past it. */
	ck_assert_int_eq(http_pct_decode("%41", 2, out, sizeof(out), &n, false, &why), -EINVAL);
	/* Exactly fitting with its NUL, one byte short, and cap 0. */
	ck_assert_int_eq(http_pct_decode("abc%41", 6, out, 5, &n, false, &why), 0);
	ck_assert_str_eq(out, "abcA");
	ck_assert_int_eq(http_pct_decode("abc%41", 6, out, 4, &n, false, &why), -ENOSPC);
	ck_assert_str_eq(out, "");
	out[0] = 'X';
	ck_assert_int_eq(http_pct_decode("a", 1, out, 0, &n, false, &why), -ENOSPC);
	ck_assert_int_eq(out[0], 'X');
	ck_assert_int_eq(http_pct_decode("", 0, out, 1, &n, false, &why), 0);
	ck_assert_str_eq(out, "");
}
END_TEST

struct ch_out {
	enum http_result r;
	int status;
	size_t used;
	char data[256];
	size_t len;
};

/* Decode s (n bytes) in pieces of step (0: all). */
static struct ch_out chunk_run(const char *s, size_t n, size_t step, uint64_t body_max, size_t line_max,
			       size_t trailers_max)
{
	struct ch_out o = { HTTP_NEED_MORE, 0, 0, { 0 }, 0 };
	struct http_chunked c;
	static char buf[4096];
	size_t off = 0;

	ck_assert_uint_le(n, sizeof(buf));
	http_chunked_init(&c, body_max, line_max, trailers_max);
	while (off < n) {
		size_t k = step && n - off > step ? step : n - off, used, len;

		memcpy(buf, s + off, k);
		o.r = http_chunked_decode(&c, buf, k, &used, &len);
		ck_assert_uint_le(len, used);
		ck_assert_uint_le(o.len + len, sizeof(o.data));
		memcpy(o.data + o.len, buf, len);
		o.len += len;
		o.used += used;
		off += k;
		if (o.r != HTTP_NEED_MORE)
			break;
		ck_assert_uint_eq(used, k);
	}
	o.status = c.status;
	if (o.r == HTTP_ERROR)
		ck_assert_ptr_nonnull(c.reason);
	return o;
}

/* Decode at once, check that 1, 2 and 5 bytes at a time agree. */
static struct ch_out chunk(const char *s, uint64_t body_max, size_t line_max, size_t trailers_max)
{
	size_t n = strlen(s);
	struct ch_out a = chunk_run(s, n, 0, body_max, line_max, trailers_max);
	size_t steps[] = { 1, 2, 5 };

	for (size_t k = 0; k < 3; k++) {
		struct ch_out b = chunk_run(s, n, steps[k], body_max, line_max, trailers_max);

		ck_assert_int_eq(b.r, a.r);
		ck_assert_int_eq(b.status, a.status);
		ck_assert_uint_eq(b.used, a.used);
		ck_assert_uint_eq(b.len, a.len);
		ck_assert(!memcmp(b.data, a.data, a.len));
	}
	return a;
}

START_TEST(chunked_good)
{
	struct ch_out o;

	o = chunk("5\r\nhello\r\n6;name=val\r\n world\r\n0\r\n\r\nGET", 100, 0, 0);
	ck_assert_int_eq(o.r, HTTP_DONE);
	ck_assert_uint_eq(o.len, 11);
	ck_assert(!memcmp(o.data, "hello world", 11));
	ck_assert_uint_eq(o.used, strlen("5\r\nhello\r\n6;name=val\r\n world\r\n0\r\n\r\n"));
	o = chunk("A\r\n0123456789\r\n00 ; x\r\nTrailer: v\r\nT2: w\r\n\r\n", 10, 0, 0);
	ck_assert_int_eq(o.r, HTTP_DONE);
	ck_assert_uint_eq(o.len, 10);
	o = chunk("0000000000000000000000001\r\nx\r\n0\r\n\r\n", 10, 0, 0);
	ck_assert_int_eq(o.r, HTTP_DONE);
	o = chunk("5\r\nhel", 10, 0, 0);
	ck_assert_int_eq(o.r, HTTP_NEED_MORE);
	ck_assert_uint_eq(o.len, 3);
}
END_TEST

START_TEST(chunked_bad)
{
	ck_assert_int_eq(chunk("\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk(";x\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk(" 5\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("-5\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("0x5\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5g\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5 x\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5 \r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5\rx", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5;a\0\r\n", 100, 0, 0).status, 0); /* strlen stops at the NUL: NEED_MORE */
	ck_assert_int_eq(chunk("5\r\nhelloX\r\n", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5\r\nhello\rX", 100, 0, 0).status, 400);
	ck_assert_int_eq(chunk("5\r\nhello\n", 100, 0, 0).status, 400);
	/* Overflow: 16 hex digits fit, 17 significant ones do not. */
	ck_assert_int_eq(chunk("ffffffffffffffff\r\n", UINT64_MAX, 0, 0).status, 0);
	ck_assert_int_eq(chunk("10000000000000000\r\n", UINT64_MAX, 0, 0).status, 413);
	ck_assert_int_eq(chunk("ffffffffffffffff\r\n", 100, 0, 0).status, 413);
	/* The body limit at and past it, across chunks. */
	ck_assert_int_eq(chunk("5\r\nhello\r\n5\r\nhello\r\n0\r\n\r\n", 10, 0, 0).r, HTTP_DONE);
	ck_assert_int_eq(chunk("5\r\nhello\r\n6\r\nhello!\r\n0\r\n\r\n", 10, 0, 0).status, 413);
	/* The size line limit: 4 bytes fit, 5 do not. */
	ck_assert_int_eq(chunk("5;ab\r\nhello\r\n0\r\n\r\n", 10, 4, 0).r, HTTP_DONE);
	ck_assert_int_eq(chunk("5;abc\r\nhello\r\n0\r\n\r\n", 10, 4, 0).status, 400);
	ck_assert_int_eq(chunk("00001\r\nx\r\n0\r\n\r\n", 10, 4, 0).status, 400);
	/* Trailers: 6 bytes ("T: v\r\n") fit a limit of 6, not 5. */
	ck_assert_int_eq(chunk("0\r\nT: v\r\n\r\n", 10, 0, 6).r, HTTP_DONE);
	ck_assert_int_eq(chunk("0\r\nT: v\r\n\r\n", 10, 0, 5).status, 431);
	ck_assert_int_eq(chunk("0\r\nT: v\r\n\r\n", 10, 0, 4).status, 431);
	ck_assert_int_eq(chunk("0\r\nT: v\r\n x\r\n\r\n", 10, 0, 0).status, 400);
	ck_assert_int_eq(chunk("0\r\nT: v\n\r\n", 10, 0, 0).status, 400);
	ck_assert_int_eq(chunk("0\r\nT: \x01\r\n\r\n", 10, 0, 0).status, 400);
	ck_assert_int_eq(chunk("0\r\n\rX", 10, 0, 0).status, 400);
	ck_assert_int_eq(chunk("0\r\nT: v\rX", 10, 0, 0).status, 400);
}
END_TEST

START_TEST(chunked_nul)
{
	static const char s[] = "5;a\0b\r\nhello\r\n0\r\n\r\n";
	static const char t[] = "5\r\nhe\0lo\r\n0\r\nT: \0\r\n\r\n";
	struct ch_out o;

	o = chunk_run(s, sizeof(s) - 1, 0, 100, 0, 0);
	ck_assert_int_eq(o.r, HTTP_ERROR);
	ck_assert_uint_eq(o.used, 3);
	o = chunk_run(t, sizeof(t) - 1, 1, 100, 0, 0);
	ck_assert_int_eq(o.r, HTTP_ERROR); /* NUL is data in a chunk, not in a trailer */
	ck_assert_uint_eq(o.len, 5);
	ck_assert_uint_eq(o.used, 16);
}
END_TEST

START_TEST(write_head)
{
	char buf[256];
	size_t len;
	struct http_response r = { .status = 200, .content_type = "application/json", .content_length = 12 };

	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), 0);
	ck_assert_str_eq(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n");
	ck_assert_uint_eq(len, strlen(buf));
	r = (struct http_response){ .status = 404, .chunked = true, .close = true };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), 0);
	ck_assert_str_eq(buf, "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	r = (struct http_response){ .status = 204, .content_length = 5 };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), 0);
	ck_assert_str_eq(buf, "HTTP/1.1 204 No Content\r\n\r\n");
	r = (struct http_response){ .status = 100 };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), 0);
	ck_assert_str_eq(buf, "HTTP/1.1 100 Continue\r\n\r\n");
	r = (struct http_response){ .status = 599 };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), 0);
	ck_assert_str_eq(buf, "HTTP/1.1 599 Unknown\r\nContent-Length: 0\r\n\r\n");
	ck_assert_str_eq(http_reason_phrase(431), "Request Header Fields Too Large");
	/* Bad input. */
	r = (struct http_response){ .status = 99 };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), -EINVAL);
	r.status = 600;
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), -EINVAL);
	r = (struct http_response){ .status = 200, .content_type = "text/plain\r\nSet-Cookie: x" };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), -EINVAL);
	r = (struct http_response){ .status = 200, .content_type = "text/plain\n" };
	ck_assert_int_eq(http_write_head(buf, sizeof(buf), &r, &len), -EINVAL);
}
END_TEST

START_TEST(write_head_every_capacity)
{
	struct http_response r = {
		.status = 413, .content_type = "application/json", .content_length = UINT64_MAX, .close = true
	};
	char full[256], buf[256];
	size_t need, len;

	ck_assert_int_eq(http_write_head(full, sizeof(full), &r, &need), 0);
	for (size_t cap = 0; cap <= need + 1; cap++) {
		memset(buf, 0x5a, sizeof(buf));
		len = 77;
		int ret = http_write_head(buf, cap, &r, &len);

		if (cap <= need) {
			ck_assert_int_eq(ret, -ENOSPC);
			ck_assert_uint_eq(len, 0);
			if (cap)
				ck_assert_int_eq(buf[0], 0);
		} else {
			ck_assert_int_eq(ret, 0);
			ck_assert_uint_eq(len, need);
			ck_assert_str_eq(buf, full);
		}
		for (size_t k = cap; k < sizeof(buf); k++)
			ck_assert_int_eq(buf[k], 0x5a);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("http");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, simple_get);
	tcase_add_test(tc, body_offset_and_fields);
	tcase_add_test(tc, connection_defaults);
	tcase_add_test(tc, host_rules);
	tcase_add_test(tc, request_line_errors);
	tcase_add_test(tc, nul_bytes);
	tcase_add_test(tc, field_errors);
	tcase_add_test(tc, content_length);
	tcase_add_test(tc, transfer_encoding);
	tcase_add_test(tc, request_line_limit);
	tcase_add_test(tc, header_block_limit);
	tcase_add_test(tc, header_count_limit);
	tcase_add_test(tc, init_checks);
	tcase_add_test(tc, pct_decode);
	tcase_add_test(tc, chunked_good);
	tcase_add_test(tc, chunked_bad);
	tcase_add_test(tc, chunked_nul);
	tcase_add_test(tc, write_head);
	tcase_add_test(tc, write_head_every_capacity);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
