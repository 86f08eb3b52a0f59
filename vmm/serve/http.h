/* HTTP/1.1 for the `tinyvmm serve` daemon: an incremental request-head
 * parser, a chunked-body decoder, a percent-decoder and a response-head
 * writer. Every input comes from a client we do not trust: everything is
 * bounded by caller limits, nothing allocates, nothing aborts. Message
 * syntax follows RFC 9112, semantics RFC 9110, the request-target RFC 3986.
 */
#ifndef TVM_SERVE_HTTP_H
#define TVM_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a feed call reports. On HTTP_ERROR the parser holds the status to
 * answer (400, 413, 414, 417, 431, 501, 505) and a one-line reason, and
 * stays in error: the connection is to be answered and closed. */
enum http_result {
	HTTP_ERROR = -1,
	HTTP_NEED_MORE = 0,
	HTTP_DONE = 1,
};

/* Limits of one request head, in bytes unless told. line: the request-line
 * without its CRLF (longer: 414, RFC 9112 §3). header_block: every field
 * line with its CRLF, not counting the empty line that ends the head
 * (longer: 431, RFC 6585 §5). headers: field lines (more: 431). body: the
 * largest Content-Length accepted (larger: 413, RFC 9110 §15.5.14).
 * http_limits_default() gives 8 KiB, 16 KiB, 64 and 1 MiB. */
struct http_limits {
	size_t line;
	size_t header_block;
	unsigned headers;
	uint64_t body;
};

/* A slice of the caller's storage (not NUL-terminated). */
struct http_str {
	const char *p;
	size_t n;
};

/* One field line as received: name and value with surrounding OWS removed
 * (RFC 9112 §5). */
struct http_header {
	struct http_str name;
	struct http_str value;
};

/* A request head, parsed and interpreted. All slices point into the
 * storage given to http_req_init and are valid until it is reused.
 * body_len is meaningful when has_length; chunked means the body is to go
 * through struct http_chunked (RFC 9112 §6.3). keep_alive is the
 * version's default (1.1 yes, 1.0 no) changed by Connection. */
struct http_request {
	struct http_str method, target, path, query, version;
	bool has_query;
	int minor;                   /* HTTP/1.<minor>: 0 or 1 */
	struct http_header *headers; /* nheaders entries, in storage */
	unsigned nheaders;
	bool has_length, chunked, keep_alive, expect_continue;
	uint64_t body_len;
	struct http_str host, authorization, accept, content_type; /* .p NULL when absent */
};

/* The incremental parser of one request head. Its fields are private;
 * read `req` once http_req_feed returned HTTP_DONE, `status`/`reason`
 * once it returned HTTP_ERROR, `consumed` at any time. */
struct http_parser {
	struct http_request req;
	int status;         /* HTTP status to answer on error, 0 otherwise */
	const char *reason; /* static one-line reason on error, NULL otherwise */
	uint64_t consumed;  /* bytes of the stream taken so far */
	struct http_limits lim;
	char *store;
	size_t store_cap, store_len;
	size_t line_start;   /* where the current line begins in store */
	size_t line_len;     /* bytes of the current line so far */
	size_t header_bytes; /* of the header block so far */
	size_t skipped;      /* empty lines before the request-line */
	int state;
	bool seen_cl, seen_te, seen_host, seen_auth, seen_ctype;
};

/* The default limits (see struct http_limits). */
struct http_limits http_limits_default(void);

/* Bytes of storage http_req_init needs for limits lim: the request-line,
 * the header block and the header table; SIZE_MAX if that overflows. */
size_t http_store_size(const struct http_limits *lim);

/* Start parsing a new request into p. store (store_cap bytes, owned by the
 * caller, kept until the request is done with) receives the head's text
 * and the header table; it must hold http_store_size(lim) bytes. lim NULL
 * means the defaults. Returns 0, or -EINVAL (store too small, limits of 0,
 * or misaligned store) with p->reason set; p then answers every feed with
 * HTTP_ERROR and status 500. */
int http_req_init(struct http_parser *p, const struct http_limits *lim, void *store, size_t store_cap);

/* Feed the next n bytes of the connection (any split, even 1 byte at a
 * time, gives the same result). *used gets how many of them belong to the
 * head: on HTTP_DONE the body (or the next request) starts at in + *used;
 * on HTTP_NEED_MORE all n were taken; on HTTP_ERROR it is where the bad
 * byte was. Feeding after DONE or ERROR returns the same result again,
 * using nothing. */
enum http_result http_req_feed(struct http_parser *p, const void *in, size_t n, size_t *used);

/* The value of the first field named name (ASCII case-insensitive, RFC 9110
 * §5.1), or NULL. Only after HTTP_DONE. */
const struct http_str *http_req_header(const struct http_request *r, const char *name);

/* Percent-decode (RFC 3986 §2.1) n bytes at in into out (cap bytes),
 * NUL-terminating it; *out_len gets the decoded length. Decode one path
 * segment or one query name or value at a time: split on '/', '&', '='
 * first, so an encoded delimiter stays data. plus_is_space: '+' decodes to
 * ' ' (application/x-www-form-urlencoded query values). Returns 0;
 * -EINVAL for a malformed escape, %00 or a raw NUL; -ENOSPC if the result
 * and its NUL do not fit. *why (may be NULL) gets a one-line reason. */
int http_pct_decode(const char *in, size_t n, char *out, size_t cap, size_t *out_len, bool plus_is_space,
		    const char **why);

/* The chunked transfer coding decoder (RFC 9112 §7.1). Limits: line is the
 * longest chunk-size line (size, extensions, without CRLF; default 1 KiB),
 * body the total of the chunk data (more: 413), trailers the bytes of the
 * trailer section (more: 431; trailer fields are checked and dropped). */
struct http_chunked {
	int status;         /* on HTTP_ERROR: 400, 413 or 431 */
	const char *reason; /* static one-line reason on HTTP_ERROR */
	uint64_t body_max, body_len;
	size_t line_max, trailers_max;
	uint64_t chunk_left; /* data bytes left in the current chunk */
	size_t line_len, trailer_bytes;
	int state;
	bool ext_needs_semi; /* whitespace after the size: ';' or nothing more */
	bool line_has_data;
};

/* Start decoding a chunked body of at most body_max data bytes, with a
 * chunk-size line of at most line_max bytes and trailers of at most
 * trailers_max bytes (0 for either: the defaults 1 KiB and 4 KiB). */
void http_chunked_init(struct http_chunked *c, uint64_t body_max, size_t line_max, size_t trailers_max);

/* Decode n bytes at buf in place: the chunk data in them is moved to the
 * front of buf, *out_len gets its length, *used the bytes taken. Returns
 * HTTP_NEED_MORE (all n taken), HTTP_DONE (the last chunk and trailers
 * ended at buf + *used; what follows is the next request) or HTTP_ERROR
 * (c->status, c->reason). Any split of the input gives the same data and
 * result. */
enum http_result http_chunked_decode(struct http_chunked *c, void *buf, size_t n, size_t *used, size_t *out_len);

/* What a response head says (RFC 9112 §4, §6). content_type NULL: none.
 * chunked: Transfer-Encoding: chunked instead of Content-Length. A 1xx,
 * 204 or 304 status gets neither (RFC 9110 §8.6). close: Connection: close
 * (else keep-alive, which HTTP/1.1 implies and says nothing). */
struct http_response {
	int status;
	const char *content_type;
	uint64_t content_length;
	bool chunked;
	bool close;
};

/* The reason phrase of status (RFC 9110 §15), "Unknown" for others. */
const char *http_reason_phrase(int status);

/* Write the response head for r, ending with the empty line, into buf
 * (cap bytes) followed by a NUL that *len (may be NULL) does not count.
 * Returns 0; -EINVAL for a status outside 100..599 or a content type with
 * a control character (header injection); -ENOSPC if it does not fit (buf
 * then holds an empty string when cap > 0; nothing is written past cap). */
int http_write_head(char *buf, size_t cap, const struct http_response *r, size_t *len);

#endif
