/* One HTTP/1.1 connection (RFC 9112): request heads through the parser of
 * http.c under a deadline (a client sending one byte a second holds only
 * its own thread, and not for long), bodies by Content-Length or chunked,
 * responses with Content-Length or chunked. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmm/serve/serve.h"

#define IN_CAP (64u << 10)
#define HEAD_TIMEOUT_MS 30000 /* a request head must arrive within this */
#define IDLE_TIMEOUT_MS 60000 /* keep-alive: the next request's first byte */
#define BODY_TIMEOUT_MS 60000 /* between two pieces of a body */
#define SEND_TIMEOUT_MS 60000 /* a client that reads nothing is dropped */

/* Wait up to ms for fd to be readable: 1, 0 on timeout, -errno. */
static int wait_in(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

/* More bytes into c->in (compacted first): >0 read, 0 EOF, -errno. */
static ssize_t fill(struct conn *c, int ms)
{
	ssize_t n;
	int r;

	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	if (c->in_len == c->in_cap && c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	r = wait_in(c->fd, ms);
	if (r <= 0)
		return r ? r : -ETIMEDOUT;
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	if (n < 0)
		return -errno;
	c->in_len += (size_t)n;
	return n;
}

int conn_send_all(struct conn *c, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
			int r = poll(&pf, 1, SEND_TIMEOUT_MS);
			if (r == 0)
				return -ETIMEDOUT;
			if (r < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int conn_respond(struct conn *c, int status, const char *ctype, const void *body, size_t len, const char *extra_headers)
{
	char head[1024];
	size_t hl;
	struct http_response h = {
		.status = status, .content_type = ctype, .content_length = len, .close = !c->keep_alive
	};

	if (http_write_head(head, sizeof(head), &h, &hl))
		return -EINVAL;
	if (extra_headers) {
		/* Before the empty line that ends the head. */
		size_t el = strlen(extra_headers);
		if (hl + el >= sizeof(head))
			return -ENOSPC;
		memmove(head + hl - 2 + el, head + hl - 2, 3);
		memcpy(head + hl - 2, extra_headers, el);
		hl += el;
	}
	c->head_sent = true;
	int r = conn_send_all(c, head, hl);
	return r ? r : conn_send_all(c, body, len);
}

int conn_json(struct conn *c, int status, struct json_w *w)
{
	size_t len;

	if (json_w_finish(w, &len))
		return conn_error(c, 500, "internal", "the answer did not fit its buffer");
	return conn_respond(c, status, "application/json", w->buf, len, NULL);
}

static int verror(struct conn *c, int status, const char *code, const char *reason, const char *fmt, va_list ap)
{
	char msg[512], buf[6 * 512 + 256]; /* the message escaped at worst */
	char extra[96] = "";
	struct json_w w;
	size_t len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (c->head_sent) {
		/* The client already has a status: all that is left is to
		 * cut the stream, which it sees as a truncated body. */
		c->keep_alive = false;
		return -EPIPE;
	}
	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "code", 4);
	json_w_int(&w, status);
	json_w_key(&w, "error", 5);
	json_w_string(&w, code, strlen(code));
	json_w_key(&w, "message", 7);
	json_w_string(&w, msg, strlen(msg));
	if (reason) {
		json_w_key(&w, "end_reason", 10);
		json_w_string(&w, reason, strlen(reason));
	}
	json_w_obj_end(&w);
	json_w_finish(&w, &len);
	/* A body left unread would be taken for the next request. */
	if (!c->body_done)
		c->keep_alive = false;
	if (c->retry_after_s || status == 503)
		snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", c->retry_after_s ? c->retry_after_s : 5);
	else if (status == 405 && c->allow)
		snprintf(extra, sizeof(extra), "Allow: %s\r\n", c->allow);
	c->retry_after_s = 0;
	c->allow = NULL;
	return conn_respond(c, status, "application/json", buf, len, *extra ? extra : NULL);
}

int conn_error(struct conn *c, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = verror(c, status, code, NULL, fmt, ap);
	va_end(ap);
	return r;
}

bool conn_operator(const struct conn *c)
{
	return c->uid == 0 || c->uid == geteuid();
}

int conn_not_allowed(struct conn *c, const char *allow, const char *resource)
{
	c->allow = allow;
	return conn_error(c, 405, "method_not_allowed", "%.*s %s: it allows %s", (int)c->p.req.method.n,
			  c->p.req.method.p, resource, allow);
}

int conn_error_reason(struct conn *c, int status, const char *code, const char *reason, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = verror(c, status, code, reason, fmt, ap);
	va_end(ap);
	return r;
}

int conn_stream_begin(struct conn *c, int status, const char *ctype)
{
	char head[512];
	size_t hl;
	struct http_response h = { .status = status, .content_type = ctype, .chunked = true, .close = !c->keep_alive };

	/* HTTP/1.0 has no chunked coding (RFC 9112 §6.1): the body ends
	 * where the connection does. */
	c->raw_stream = c->p.req.minor == 0;
	if (c->raw_stream) {
		int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nConnection: close\r\n\r\n",
				 status, http_reason_phrase(status), ctype);
		c->keep_alive = false;
		c->head_sent = true;
		return n > 0 && (size_t)n < sizeof(head) ? conn_send_all(c, head, (size_t)n) : -EINVAL;
	}
	if (http_write_head(head, sizeof(head), &h, &hl))
		return -EINVAL;
	c->head_sent = true;
	return conn_send_all(c, head, hl);
}

int conn_chunk(struct conn *c, const void *p, size_t n)
{
	char size[24];
	int r;

	if (!n)
		return 0;
	if (c->raw_stream)
		return conn_send_all(c, p, n);
	snprintf(size, sizeof(size), "%zx\r\n", n);
	if ((r = conn_send_all(c, size, strlen(size))) || (r = conn_send_all(c, p, n)))
		return r;
	return conn_send_all(c, "\r\n", 2);
}

int conn_stream_end(struct conn *c)
{
	return c->raw_stream ? 0 : conn_send_all(c, "0\r\n\r\n", 5);
}

ssize_t conn_body_read(struct conn *c, void *buf, size_t cap)
{
	if (c->body_done || !cap)
		return 0;
	if (!c->body_started) {
		c->body_started = true;
		/* RFC 9110 §10.1.1: the client waits for this before the body. */
		if (c->p.req.expect_continue && conn_send_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			return -EPIPE;
	}
	for (;;) {
		size_t avail = c->in_len - c->in_off;

		if (!c->body_chunked) {
			if (!c->body_left) {
				c->body_done = true;
				return 0;
			}
			if (avail) {
				size_t n = avail < cap ? avail : cap;
				if (n > c->body_left)
					n = (size_t)c->body_left;
				memcpy(buf, c->in + c->in_off, n);
				c->in_off += n;
				c->body_left -= n;
				if (!c->body_left)
					c->body_done = true;
				return (ssize_t)n;
			}
		} else if (avail) {
			/* Decode in place a piece no larger than cap, then copy
			 * the data out. */
			size_t take = avail < cap ? avail : cap, used = 0, out = 0;
			enum http_result hr = http_chunked_decode(&c->chunk, c->in + c->in_off, take, &used, &out);

			if (hr == HTTP_ERROR) {
				c->body_fault = c->chunk.reason;
				return c->chunk.status == 413 ? -EFBIG : -EPROTO;
			}
			memcpy(buf, c->in + c->in_off, out);
			c->in_off += used;
			if (hr == HTTP_DONE)
				c->body_done = true;
			if (out || c->body_done)
				return (ssize_t)out;
			continue;
		}
		ssize_t n = fill(c, BODY_TIMEOUT_MS);
		if (n == 0) {
			c->body_fault = "the client closed the connection in the middle of its body";
			return -EPROTO;
		}
		if (n < 0)
			return n;
	}
}

int conn_body_all(struct conn *c, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, have = 0;
	char *b;

	/* Said too long before any of it is asked for: a client waiting for
	 * 100 Continue gets the 413, not a 100 and then a closed socket. */
	if (c->p.req.has_length && c->p.req.body_len > max && !c->body_started)
		return -EFBIG;
	b = malloc(cap + 1);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (have == cap) {
			if (cap >= max + 1) {
				free(b);
				return -EFBIG;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
		}
		ssize_t n = conn_body_read(c, b + have, cap - have);
		if (n < 0) {
			free(b);
			return (int)n;
		}
		if (n == 0)
			break;
		have += (size_t)n;
	}
	if (have > max) {
		free(b);
		return -EFBIG;
	}
	b[have] = 0;
	*out = b;
	*len = have;
	return 0;
}

/* Drain what is left of a body the handler did not read, so the next
 * request starts where it should; a long one closes the connection. */
static void finish_body(struct conn *c)
{
	char sink[4096];
	size_t total = 0;

	/* A client that waited for 100 Continue got the final answer
	 * instead: no 100 now (RFC 9110 §10.1.1), and whether its body
	 * follows is not guessed: the connection ends. */
	if (c->p.req.expect_continue && !c->body_started && !c->body_done) {
		c->keep_alive = false;
		return;
	}
	while (!c->body_done && c->keep_alive) {
		ssize_t n = conn_body_read(c, sink, sizeof(sink));
		if (n <= 0 || (total += (size_t)n) > (1u << 20)) {
			c->keep_alive = false;
			break;
		}
	}
}

void conn_serve(struct conn *c)
{
	struct http_limits lim = http_limits_default();
	size_t store_cap;

	/* A file PUT may be this long; control bodies are held to 1 MiB
	 * where they are read (conn_body_all). */
	lim.body = c->s->cfg.max_file_bytes;
	store_cap = http_store_size(&lim);

	c->in_cap = IN_CAP;
	c->in = malloc(c->in_cap);
	c->store = aligned_alloc(16, (store_cap + 15) & ~(size_t)15);
	if (!c->in || !c->store)
		goto out;
	for (;;) {
		uint64_t start = now_ns();
		enum http_result hr = HTTP_NEED_MORE;
		bool first = true;

		http_req_init(&c->p, &lim, c->store, store_cap);
		c->head_sent = c->raw_stream = false;
		c->body_started = c->body_done = false;
		c->body_fault = NULL;
		while (hr == HTTP_NEED_MORE) {
			size_t used = 0;

			if (c->in_off < c->in_len) {
				hr = http_req_feed(&c->p, c->in + c->in_off, c->in_len - c->in_off, &used);
				c->in_off += used;
				first = false;
				if (hr != HTTP_NEED_MORE)
					break;
			}
			/* The whole head within HEAD_TIMEOUT_MS of its first
			 * byte, however it trickles in. */
			/* Before it, the connection may idle IDLE_TIMEOUT_MS
			 * (from the previous request or the accept). */
			uint64_t spent = (now_ns() - start) / 1000000,
				 limit = first ? IDLE_TIMEOUT_MS : HEAD_TIMEOUT_MS;
			int ms = spent >= limit ? 0 : (int)(limit - spent);
			if (c->s->stopping)
				goto out;
			ssize_t n = ms ? fill(c, ms < 1000 ? ms : 1000) : -ETIMEDOUT;
			if (n == -ETIMEDOUT && ms > 1000)
				continue; /* a second passed: look at stopping again */
			if (n == -ETIMEDOUT && !first) {
				c->keep_alive = false;
				c->body_done = true;
				conn_error(c, 408, "request_timeout", "the request head did not arrive within %d s",
					   HEAD_TIMEOUT_MS / 1000);
				goto out;
			}
			if (n <= 0)
				goto out;
			if (first)
				start = now_ns();
			first = false;
		}
		if (hr == HTTP_ERROR) {
			c->keep_alive = false;
			c->body_done = true;
			conn_error(c, c->p.status, "bad_request", "%s",
				   c->p.reason ? c->p.reason : "malformed request");
			goto out;
		}
		const struct http_request *r = &c->p.req;
		c->keep_alive = r->keep_alive;
		c->body_chunked = r->chunked;
		c->body_left = r->has_length ? r->body_len : 0;
		c->body_done = !r->chunked && c->body_left == 0;
		if (r->chunked)
			http_chunked_init(&c->chunk, c->s->cfg.max_file_bytes, 0, 0);
		route(c, r);
		finish_body(c);
		if (!c->keep_alive || c->s->stopping)
			break;
	}
out:
	free(c->in);
	free(c->store);
}
