/* HTTP/1.1 request heads, chunked bodies and response heads (see http.h).
 *
 * The head parser is a byte-at-a-time state machine: every decision is
 * taken on one byte with only the state behind it, so how the input is
 * split cannot change the outcome. Lines are copied into the caller's
 * storage (without their CRLF) and parsed when their LF arrives. We are
 * strict where RFC 9112 lets a server choose: a bare LF is not a line end,
 * whitespace is exactly one SP in the request-line, obs-fold is refused
 * (§5.2), and any doubt about the framing is a 400 (§6.3, §11.2).
 */
#include "vmm/serve/http.h"

#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

enum {
	ST_LINE,        /* in the request-line (or before it) */
	ST_LINE_CR,     /* CR seen in the request-line */
	ST_LEAD_CR,     /* CR of an empty line before the request-line */
	ST_FIELD_START, /* at the start of a field line or of the final CRLF */
	ST_FIELD,       /* in a field line */
	ST_FIELD_CR,    /* CR seen in a field line */
	ST_END_CR,      /* CR of the empty line that ends the head */
	ST_DONE,
	ST_ERROR,
};

struct http_limits http_limits_default(void)
{
	return (struct http_limits){ .line = 8192, .header_block = 16384, .headers = 64, .body = 1 << 20 };
}

size_t http_store_size(const struct http_limits *lim)
{
	struct http_limits d = http_limits_default();
	size_t table, text;

	if (!lim)
		lim = &d;
	if (__builtin_mul_overflow((size_t)lim->headers, sizeof(struct http_header), &table) ||
	    __builtin_add_overflow(lim->line, lim->header_block, &text) || __builtin_add_overflow(table, text, &text))
		return SIZE_MAX;
	return text;
}

/* tchar of RFC 9110 §5.6.2. */
static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_val(unsigned char c)
{
	if (c <= '9')
		return c - '0';
	return (c | 0x20) - 'a' + 10;
}

/* Characters of an origin-form target (RFC 3986 pchar, '/', '?'; '%' is
 * checked with its two hex digits by the caller). No '#': a fragment is
 * never sent (RFC 9110 §7.1). */
static bool is_target_char(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("-._~!$&'()*+,;=:@/?%", c);
}

static bool str_ieq(struct http_str s, const char *lit)
{
	size_t n = strlen(lit);

	if (s.n != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char a = (unsigned char)s.p[i], b = (unsigned char)lit[i];

		if (a >= 'A' && a <= 'Z')
			a |= 0x20;
		if (b >= 'A' && b <= 'Z')
			b |= 0x20;
		if (a != b)
			return false;
	}
	return true;
}

static enum http_result req_fail(struct http_parser *p, int status, const char *reason)
{
	p->state = ST_ERROR;
	p->status = status;
	p->reason = reason;
	return HTTP_ERROR;
}

int http_req_init(struct http_parser *p, const struct http_limits *lim, void *store, size_t store_cap)
{
	size_t need;

	memset(p, 0, sizeof(*p));
	p->lim = lim ? *lim : http_limits_default();
	p->state = ST_ERROR;
	p->status = 500;
	if (!p->lim.line || !p->lim.header_block || !p->lim.headers) {
		p->reason = "http limits: a limit of 0";
		return -EINVAL;
	}
	need = http_store_size(&p->lim);
	if (!store || need == SIZE_MAX || store_cap < need) {
		p->reason = "http storage: smaller than http_store_size()";
		return -EINVAL;
	}
	if ((uintptr_t)store % alignof(struct http_header)) {
		p->reason = "http storage: not aligned for the header table";
		return -EINVAL;
	}
	p->req.headers = store;
	p->store = (char *)store + (size_t)p->lim.headers * sizeof(struct http_header);
	p->store_cap = store_cap - (size_t)p->lim.headers * sizeof(struct http_header);
	p->state = ST_LINE;
	p->status = 0;
	return 0;
}

/* method SP request-target SP HTTP-version (RFC 9112 §3), in the line just
 * stored. */
static enum http_result parse_request_line(struct http_parser *p)
{
	struct http_request *r = &p->req;
	const char *s = p->store + p->line_start, *sp1, *sp2, *v;
	size_t n = p->line_len;

	sp1 = memchr(s, ' ', n);
	if (!sp1)
		return req_fail(p, 400, "request-line: no space after the method");
	if (sp1 == s)
		return req_fail(p, 400, "request-line: empty method");
	for (const char *c = s; c < sp1; c++)
		if (!is_tchar((unsigned char)*c))
			return req_fail(p, 400, "request-line: method is not a token");
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s));
	if (!sp2)
		return req_fail(p, 400, "request-line: no space after the request-target");
	v = sp2 + 1;
	if (memchr(v, ' ', n - (size_t)(v - s)))
		return req_fail(p, 400, "request-line: more than two spaces");
	r->method = (struct http_str){ s, (size_t)(sp1 - s) };
	r->target = (struct http_str){ sp1 + 1, (size_t)(sp2 - sp1 - 1) };
	r->version = (struct http_str){ v, n - (size_t)(v - s) };

	if (!r->target.n)
		return req_fail(p, 400, "request-target: empty");
	if (r->target.p[0] != '/')
		return req_fail(p, 400, "request-target: not origin-form (must start with '/')");
	for (size_t i = 0; i < r->target.n; i++) {
		unsigned char c = (unsigned char)r->target.p[i];

		if (!is_target_char(c))
			return req_fail(p, 400, "request-target: a character outside RFC 3986");
		if (c == '%' && (i + 2 >= r->target.n || !is_hex((unsigned char)r->target.p[i + 1]) ||
				 !is_hex((unsigned char)r->target.p[i + 2])))
			return req_fail(p, 400, "request-target: '%' not followed by two hex digits");
	}
	const char *q = memchr(r->target.p, '?', r->target.n);
	if (q) {
		r->path = (struct http_str){ r->target.p, (size_t)(q - r->target.p) };
		r->query = (struct http_str){ q + 1, r->target.n - r->path.n - 1 };
		r->has_query = true;
	} else {
		r->path = r->target;
		r->query = (struct http_str){ r->target.p + r->target.n, 0 };
	}

	/* HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3): another
	 * well-formed version is one we do not speak (505), anything else is
	 * not HTTP (400). */
	if (r->version.n != 8 || memcmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
	    v[7] > '9')
		return req_fail(p, 400, "HTTP-version: not HTTP/<digit>.<digit>");
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return req_fail(p, 505, "HTTP-version: only HTTP/1.0 and HTTP/1.1 are supported");
	r->minor = v[7] - '0';
	r->keep_alive = r->minor == 1;
	return HTTP_NEED_MORE;
}

/* Content-Length = 1*DIGIT (RFC 9110 §8.6), overflow-safe: 0, -EINVAL
 * if not digits, -ERANGE if past 2^64 - 1. */
static int parse_length(struct http_str s, uint64_t *v)
{
	uint64_t x = 0;
	bool big = false;

	if (!s.n)
		return -EINVAL;
	for (size_t i = 0; i < s.n; i++) {
		unsigned d = (unsigned)((unsigned char)s.p[i] - '0');

		if (d > 9)
			return -EINVAL;
		if (x > (UINT64_MAX - d) / 10)
			big = true;
		else
			x = x * 10 + d;
	}
	*v = x;
	return big ? -ERANGE : 0;
}

/* Host = uri-host [ ":" port ] (RFC 9110 §7.2): the characters of a
 * reg-name, an IP literal or a port; possibly empty. */
static bool valid_host(struct http_str s)
{
	for (size_t i = 0; i < s.n; i++) {
		unsigned char c = (unsigned char)s.p[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      strchr("-._~!$&'()*+,;=:[]%", c)))
			return false;
	}
	return true;
}

/* Connection = #connection-option (RFC 9110 §7.6.1): "close" wins over
 * "keep-alive"; other options (upgrade, ...) mean nothing to us. */
static void parse_connection(struct http_str s, bool *close, bool *keep)
{
	size_t i = 0;

	while (i < s.n) {
		size_t b, e;

		while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t' || s.p[i] == ','))
			i++;
		b = i;
		while (i < s.n && s.p[i] != ',')
			i++;
		e = i;
		while (e > b && (s.p[e - 1] == ' ' || s.p[e - 1] == '\t'))
			e--;
		struct http_str opt = { s.p + b, e - b };
		if (str_ieq(opt, "close"))
			*close = true;
		else if (str_ieq(opt, "keep-alive"))
			*keep = true;
	}
}

/* field-name ":" OWS field-value OWS (RFC 9112 §5.1), just stored. */
static enum http_result parse_field(struct http_parser *p)
{
	struct http_request *r = &p->req;
	const char *s = p->store + p->line_start, *colon;
	size_t n = p->line_len, b, e;
	struct http_header *h;

	colon = memchr(s, ':', n);
	if (!colon)
		return req_fail(p, 400, "header field: no ':'");
	if (colon == s)
		return req_fail(p, 400, "header field: empty name");
	if (colon[-1] == ' ' || colon[-1] == '\t')
		return req_fail(p, 400, "header field: whitespace before ':'");
	for (const char *c = s; c < colon; c++)
		if (!is_tchar((unsigned char)*c))
			return req_fail(p, 400, "header field: name is not a token");
	b = (size_t)(colon + 1 - s);
	e = n;
	while (b < e && (s[b] == ' ' || s[b] == '\t'))
		b++;
	while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
		e--;
	h = &r->headers[r->nheaders++];
	h->name = (struct http_str){ s, (size_t)(colon - s) };
	h->value = (struct http_str){ s + b, e - b };

	if (str_ieq(h->name, "content-length")) {
		uint64_t v;
		int e = parse_length(h->value, &v);

		/* Past 2^64 it is certainly past the body limit; two such
		 * values could not be compared anyway. */
		if (e == -ERANGE)
			return req_fail(p, 413, "Content-Length: larger than 2^64 - 1");
		if (e)
			return req_fail(p, 400, "Content-Length: not a decimal number");
		if (p->seen_cl && v != r->body_len)
			return req_fail(p, 400, "Content-Length: repeated with a different value");
		p->seen_cl = true;
		r->has_length = true;
		r->body_len = v;
	} else if (str_ieq(h->name, "transfer-encoding")) {
		if (p->seen_te)
			return req_fail(p, 400, "Transfer-Encoding: repeated");
		p->seen_te = true;
		if (!str_ieq(h->value, "chunked"))
			return req_fail(p, 501, "Transfer-Encoding: only chunked is implemented");
		r->chunked = true;
	} else if (str_ieq(h->name, "host")) {
		if (p->seen_host)
			return req_fail(p, 400, "Host: repeated");
		if (!valid_host(h->value))
			return req_fail(p, 400, "Host: not a host[:port]");
		p->seen_host = true;
		r->host = h->value;
	} else if (str_ieq(h->name, "authorization")) {
		if (p->seen_auth)
			return req_fail(p, 400, "Authorization: repeated");
		p->seen_auth = true;
		r->authorization = h->value;
	} else if (str_ieq(h->name, "content-type")) {
		if (p->seen_ctype)
			return req_fail(p, 400, "Content-Type: repeated");
		p->seen_ctype = true;
		r->content_type = h->value;
	} else if (str_ieq(h->name, "accept")) {
		if (!r->accept.p)
			r->accept = h->value; /* a list field: the first line is enough for us */
	} else if (str_ieq(h->name, "expect")) {
		if (!str_ieq(h->value, "100-continue"))
			return req_fail(p, 417, "Expect: only 100-continue is supported");
		r->expect_continue = true;
	}
	return HTTP_NEED_MORE;
}

/* The head is complete: the checks that need every field (RFC 9112 §6.3). */
static enum http_result finish_head(struct http_parser *p)
{
	struct http_request *r = &p->req;
	bool close = false, keep = false;

	if (r->chunked && p->seen_cl)
		return req_fail(p, 400, "Transfer-Encoding and Content-Length together (request smuggling)");
	if (r->chunked && r->minor == 0)
		return req_fail(p, 400, "Transfer-Encoding in an HTTP/1.0 request");
	if (r->minor == 1 && !p->seen_host)
		return req_fail(p, 400, "Host: missing in an HTTP/1.1 request");
	if (r->has_length && r->body_len > p->lim.body)
		return req_fail(p, 413, "Content-Length: larger than the body limit");
	for (unsigned i = 0; i < r->nheaders; i++)
		if (str_ieq(r->headers[i].name, "connection"))
			parse_connection(r->headers[i].value, &close, &keep);
	if (close)
		r->keep_alive = false;
	else if (keep)
		r->keep_alive = true;
	p->state = ST_DONE;
	return HTTP_DONE;
}

/* One byte of the head. */
static enum http_result step(struct http_parser *p, unsigned char c)
{
	switch (p->state) {
	case ST_LINE:
		if (c == '\r') {
			p->state = p->line_len ? ST_LINE_CR : ST_LEAD_CR;
			return HTTP_NEED_MORE;
		}
		if (c == '\n')
			return req_fail(p, 400, "request-line: LF without CR");
		if (c < 0x20 || c > 0x7e)
			return req_fail(p, 400, "request-line: a control or non-ASCII byte");
		if (p->line_len >= p->lim.line)
			return req_fail(p, 414, "request-line: longer than the limit");
		p->store[p->line_start + p->line_len++] = (char)c;
		return HTTP_NEED_MORE;
	case ST_LEAD_CR:
		/* RFC 9112 §2.2: ignore empty lines before the request-line,
		 * but not without end. */
		if (c != '\n')
			return req_fail(p, 400, "request-line: CR without LF");
		p->skipped += 2;
		if (p->skipped > p->lim.line)
			return req_fail(p, 400, "request: too many empty lines before the request-line");
		p->state = ST_LINE;
		return HTTP_NEED_MORE;
	case ST_LINE_CR:
		if (c != '\n')
			return req_fail(p, 400, "request-line: CR without LF");
		if (parse_request_line(p) == HTTP_ERROR)
			return HTTP_ERROR;
		p->line_start += p->line_len;
		p->line_len = 0;
		p->state = ST_FIELD_START;
		return HTTP_NEED_MORE;
	case ST_FIELD_START:
		if (c == '\r') {
			p->state = ST_END_CR;
			return HTTP_NEED_MORE;
		}
		if (c == ' ' || c == '\t')
			return req_fail(p, 400, "header field: line folding (obs-fold) or whitespace before a name");
		if (p->req.nheaders >= p->lim.headers)
			return req_fail(p, 431, "header fields: more than the limit");
		p->state = ST_FIELD;
		/* fall through */
	case ST_FIELD:
		if (p->header_bytes >= p->lim.header_block)
			return req_fail(p, 431, "header fields: larger than the limit");
		p->header_bytes++;
		if (c == '\r') {
			p->state = ST_FIELD_CR;
			return HTTP_NEED_MORE;
		}
		if (c == '\n')
			return req_fail(p, 400, "header field: LF without CR");
		if (c == 0)
			return req_fail(p, 400, "header field: NUL byte");
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return req_fail(p, 400, "header field: control character");
		p->store[p->line_start + p->line_len++] = (char)c;
		return HTTP_NEED_MORE;
	case ST_FIELD_CR:
		if (p->header_bytes >= p->lim.header_block)
			return req_fail(p, 431, "header fields: larger than the limit");
		p->header_bytes++;
		if (c != '\n')
			return req_fail(p, 400, "header field: CR without LF");
		if (parse_field(p) == HTTP_ERROR)
			return HTTP_ERROR;
		p->line_start += p->line_len;
		p->line_len = 0;
		p->state = ST_FIELD_START;
		return HTTP_NEED_MORE;
	case ST_END_CR:
		if (c != '\n')
			return req_fail(p, 400, "header section: CR without LF");
		return finish_head(p);
	}
	return req_fail(p, 500, "http parser: bad state");
}

enum http_result http_req_feed(struct http_parser *p, const void *in, size_t n, size_t *used)
{
	const unsigned char *b = in;
	size_t i;

	*used = 0;
	if (p->state == ST_DONE)
		return HTTP_DONE;
	if (p->state == ST_ERROR)
		return HTTP_ERROR;
	for (i = 0; i < n; i++) {
		enum http_result r = step(p, b[i]);

		if (r != HTTP_NEED_MORE) {
			*used = r == HTTP_DONE ? i + 1 : i;
			p->consumed += *used;
			return r;
		}
	}
	*used = n;
	p->consumed += n;
	return HTTP_NEED_MORE;
}

const struct http_str *http_req_header(const struct http_request *r, const char *name)
{
	for (unsigned i = 0; i < r->nheaders; i++)
		if (str_ieq(r->headers[i].name, name))
			return &r->headers[i].value;
	return NULL;
}

int http_pct_decode(const char *in, size_t n, char *out, size_t cap, size_t *out_len, bool plus_is_space,
		    const char **why)
{
	const char *w = NULL;
	size_t o = 0;
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '%') {
			if (n - i < 3 || !is_hex((unsigned char)in[i + 1]) || !is_hex((unsigned char)in[i + 2])) {
				w = "percent-encoding: '%' not followed by two hex digits";
				ret = -EINVAL;
				goto out;
			}
			c = (unsigned char)(hex_val((unsigned char)in[i + 1]) << 4 | hex_val((unsigned char)in[i + 2]));
			if (!c) {
				w = "percent-encoding: %00";
				ret = -EINVAL;
				goto out;
			}
			i += 2;
		} else if (c == '+' && plus_is_space) {
			c = ' ';
		} else if (!c) {
			w = "percent-encoding: NUL byte";
			ret = -EINVAL;
			goto out;
		}
		if (o + 1 >= cap) {
			w = "percent-encoding: the decoded text does not fit";
			ret = -ENOSPC;
			goto out;
		}
		out[o++] = (char)c;
	}
out:
	if (ret)
		o = 0;
	if (cap)
		out[o] = 0;
	if (out_len)
		*out_len = o;
	if (why)
		*why = w;
	return ret;
}

/* Chunked decoder states. */
enum {
	CH_SIZE,    /* hex digits of the chunk size */
	CH_EXT,     /* after the size: BWS and chunk extensions, up to CR */
	CH_SIZE_LF, /* CR of the chunk-size line seen */
	CH_DATA,    /* chunk data */
	CH_DATA_CR, /* the CRLF after the data */
	CH_DATA_LF,
	CH_TRAILER, /* at the start of a trailer line or of the final CRLF */
	CH_TRAILER_LINE,
	CH_TRAILER_LF,
	CH_END_LF,
	CH_DONE,
	CH_ERROR,
};

void http_chunked_init(struct http_chunked *c, uint64_t body_max, size_t line_max, size_t trailers_max)
{
	memset(c, 0, sizeof(*c));
	c->body_max = body_max;
	c->line_max = line_max ? line_max : 1024;
	c->trailers_max = trailers_max ? trailers_max : 4096;
	c->state = CH_SIZE;
}

static enum http_result ch_fail(struct http_chunked *c, int status, const char *reason)
{
	c->state = CH_ERROR;
	c->status = status;
	c->reason = reason;
	return HTTP_ERROR;
}

/* One byte outside chunk data. */
static enum http_result ch_step(struct http_chunked *c, unsigned char b)
{
	switch (c->state) {
	case CH_SIZE:
	case CH_EXT:
		if (b == '\r') {
			if (!c->line_has_data)
				return ch_fail(c, 400, "chunk-size: no hex digits");
			if (c->ext_needs_semi)
				return ch_fail(c, 400, "chunk-size: whitespace not followed by ';'");
			c->state = CH_SIZE_LF;
			return HTTP_NEED_MORE;
		}
		if (c->line_len >= c->line_max)
			return ch_fail(c, 400, "chunk-size line: longer than the limit");
		c->line_len++;
		if (c->state == CH_SIZE && is_hex(b)) {
			if (c->chunk_left > (UINT64_MAX >> 4))
				return ch_fail(c, 413, "chunk-size: too large");
			c->chunk_left = c->chunk_left << 4 | hex_val(b);
			c->line_has_data = true;
			return HTTP_NEED_MORE;
		}
		if (!c->line_has_data)
			return ch_fail(c, 400, "chunk-size: no hex digits");
		if (b == '\n')
			return ch_fail(c, 400, "chunk-size line: LF without CR");
		if (b == 0 || (b < 0x20 && b != '\t') || b == 0x7f)
			return ch_fail(c, 400, "chunk extension: control character");
		if (c->state == CH_SIZE) {
			/* chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ):
			 * their content is ignored (RFC 9112 §7.1.1). */
			if (b != ';' && b != ' ' && b != '\t')
				return ch_fail(c, 400, "chunk-size: not a hex digit");
			c->state = CH_EXT;
			c->ext_needs_semi = b != ';';
			return HTTP_NEED_MORE;
		}
		if (b == ';')
			c->ext_needs_semi = false;
		else if (c->ext_needs_semi && b != ' ' && b != '\t')
			return ch_fail(c, 400, "chunk-size: whitespace not followed by ';'");
		return HTTP_NEED_MORE;
	case CH_SIZE_LF:
		if (b != '\n')
			return ch_fail(c, 400, "chunk-size line: CR without LF");
		c->line_len = 0;
		c->line_has_data = false;
		if (!c->chunk_left) {
			c->state = CH_TRAILER;
			return HTTP_NEED_MORE;
		}
		if (c->chunk_left > c->body_max - c->body_len)
			return ch_fail(c, 413, "chunked body: larger than the body limit");
		c->body_len += c->chunk_left;
		c->state = CH_DATA;
		return HTTP_NEED_MORE;
	case CH_DATA_CR:
		if (b != '\r')
			return ch_fail(c, 400, "chunk data: not followed by CRLF");
		c->state = CH_DATA_LF;
		return HTTP_NEED_MORE;
	case CH_DATA_LF:
		if (b != '\n')
			return ch_fail(c, 400, "chunk data: CR without LF");
		c->state = CH_SIZE;
		c->chunk_left = 0;
		return HTTP_NEED_MORE;
	case CH_TRAILER:
		if (b == '\r') {
			c->state = CH_END_LF;
			return HTTP_NEED_MORE;
		}
		if (b == ' ' || b == '\t')
			return ch_fail(c, 400, "trailer field: line folding (obs-fold)");
		c->state = CH_TRAILER_LINE;
		/* fall through */
	case CH_TRAILER_LINE:
		if (c->trailer_bytes >= c->trailers_max)
			return ch_fail(c, 431, "trailer fields: larger than the limit");
		c->trailer_bytes++;
		if (b == '\r') {
			c->state = CH_TRAILER_LF;
			return HTTP_NEED_MORE;
		}
		if (b == '\n')
			return ch_fail(c, 400, "trailer field: LF without CR");
		if (b == 0 || (b < 0x20 && b != '\t') || b == 0x7f)
			return ch_fail(c, 400, "trailer field: control character");
		return HTTP_NEED_MORE;
	case CH_TRAILER_LF:
		if (b != '\n')
			return ch_fail(c, 400, "trailer field: CR without LF");
		if (c->trailer_bytes >= c->trailers_max)
			return ch_fail(c, 431, "trailer fields: larger than the limit");
		c->trailer_bytes++;
		c->state = CH_TRAILER;
		return HTTP_NEED_MORE;
	case CH_END_LF:
		if (b != '\n')
			return ch_fail(c, 400, "chunked body: CR without LF at the end");
		c->state = CH_DONE;
		return HTTP_DONE;
	}
	return ch_fail(c, 400, "chunked decoder: bad state");
}

enum http_result http_chunked_decode(struct http_chunked *c, void *buf, size_t n, size_t *used, size_t *out_len)
{
	unsigned char *b = buf;
	size_t i = 0, o = 0;
	enum http_result r = HTTP_NEED_MORE;

	*used = 0;
	*out_len = 0;
	if (c->state == CH_DONE)
		return HTTP_DONE;
	if (c->state == CH_ERROR)
		return HTTP_ERROR;
	while (i < n) {
		if (c->state == CH_DATA) {
			size_t take = n - i;

			if (take > c->chunk_left)
				take = (size_t)c->chunk_left;
			memmove(b + o, b + i, take); /* o <= i: data only moves forward */
			o += take;
			i += take;
			c->chunk_left -= take;
			if (!c->chunk_left)
				c->state = CH_DATA_CR;
			continue;
		}
		r = ch_step(c, b[i]);
		if (r == HTTP_ERROR)
			break;
		i++;
		if (r == HTTP_DONE)
			break;
	}
	*used = i;
	*out_len = o;
	return r;
}

static const struct {
	int status;
	const char *phrase;
} reasons[] = {
	{ 100, "Continue" },
	{ 101, "Switching Protocols" },
	{ 200, "OK" },
	{ 201, "Created" },
	{ 202, "Accepted" },
	{ 204, "No Content" },
	{ 206, "Partial Content" },
	{ 301, "Moved Permanently" },
	{ 302, "Found" },
	{ 304, "Not Modified" },
	{ 400, "Bad Request" },
	{ 401, "Unauthorized" },
	{ 403, "Forbidden" },
	{ 404, "Not Found" },
	{ 405, "Method Not Allowed" },
	{ 406, "Not Acceptable" },
	{ 408, "Request Timeout" },
	{ 409, "Conflict" },
	{ 410, "Gone" },
	{ 411, "Length Required" },
	{ 412, "Precondition Failed" },
	{ 413, "Content Too Large" },
	{ 414, "URI Too Long" },
	{ 415, "Unsupported Media Type" },
	{ 417, "Expectation Failed" },
	{ 422, "Unprocessable Content" },
	{ 429, "Too Many Requests" },
	{ 431, "Request Header Fields Too Large" },
	{ 500, "Internal Server Error" },
	{ 501, "Not Implemented" },
	{ 502, "Bad Gateway" },
	{ 503, "Service Unavailable" },
	{ 504, "Gateway Timeout" },
	{ 505, "HTTP Version Not Supported" },
	{ 507, "Insufficient Storage" },
};

const char *http_reason_phrase(int status)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			return reasons[i].phrase;
	return "Unknown";
}

int http_write_head(char *buf, size_t cap, const struct http_response *r, size_t *len)
{
	size_t o = 0;
	int n;
	bool no_body = (r->status >= 100 && r->status < 200) || r->status == 204 || r->status == 304;

	if (len)
		*len = 0;
	if (cap)
		buf[0] = 0;
	if (r->status < 100 || r->status > 599)
		return -EINVAL;
	if (r->content_type)
		for (const char *c = r->content_type; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return -EINVAL;

/* Append with snprintf; on truncation leave an empty string and fail. */
#define PUT(...)                                             \
	do {                                                 \
		n = snprintf(buf + o, cap - o, __VA_ARGS__); \
		if (n < 0 || (size_t)n >= cap - o) {         \
			if (cap)                             \
				buf[0] = 0;                  \
			return -ENOSPC;                      \
		}                                            \
		o += (size_t)n;                              \
	} while (0)

	if (!cap)
		return -ENOSPC;
	PUT("HTTP/1.1 %d %s\r\n", r->status, http_reason_phrase(r->status));
	if (r->content_type)
		PUT("Content-Type: %s\r\n", r->content_type);
	if (!no_body) {
		if (r->chunked)
			PUT("Transfer-Encoding: chunked\r\n");
		else
			PUT("Content-Length: %llu\r\n", (unsigned long long)r->content_length);
	}
	if (r->close)
		PUT("Connection: close\r\n");
	PUT("\r\n");
#undef PUT
	if (len)
		*len = o;
	return 0;
}
