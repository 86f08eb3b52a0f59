/* The host agent client (vmm/agent_client.c) against a hostile guest agent:
 * a thread plays the agent over a socketpair with scripted bytes (giant
 * lengths, truncated frames, frames for other ids, floods beyond the caps,
 * lying FILE_END sizes, control bytes in ERROR text, EOF mid-transfer).
 * The host must return an error with a one-line message, never crash,
 * never allocate without bound and never pass on more than it asked for. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest/protocol.h"
#include "tests/unit.h"
#include "vmm/tinyvmm.h"

/* ---- script building ---- */

struct sbuf {
	uint8_t *p;
	size_t len, cap;
};

static void sb_put(struct sbuf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void sb_frame(struct sbuf *b, uint8_t type, uint8_t flags, uint32_t id, const void *payload, uint32_t len)
{
	uint8_t hdr[TVP_HDR_SIZE];

	tvp_put_header(hdr, type, flags, id, len);
	sb_put(b, hdr, sizeof(hdr));
	if (len)
		sb_put(b, payload, len);
}

static void sb_msg(struct sbuf *b, const struct tvp_msg *m)
{
	size_t need = 0;
	uint8_t *buf;

	ck_assert_int_eq(tvp_encode(m, NULL, 0, &need), TVP_E_NOSPACE);
	buf = malloc(need);
	ck_assert_int_eq(tvp_encode(m, buf, need, &need), 0);
	sb_put(b, buf, need);
	free(buf);
}

static void sb_ready(struct sbuf *b)
{
	struct tvp_msg m = { .type = TVP_READY };

	m.ready = (struct tvp_ready){ TVP_VERSION, TVP_CAP_SYSTEM, TVP_MAX_PAYLOAD, 1, tvp_cstr("hostile") };
	sb_msg(b, &m);
}

static void sb_result(struct sbuf *b, uint32_t id, int32_t exit_code, uint32_t sig)
{
	struct tvp_msg m = { .type = TVP_RESULT, .id = id };

	m.result = (struct tvp_result){ .exit_code = exit_code, .signal = sig, .wall_us = 5000 };
	sb_msg(b, &m);
}

static void sb_error(struct sbuf *b, uint32_t id, int32_t sys_errno, const char *text, uint32_t len)
{
	struct tvp_msg m = { .type = TVP_ERROR, .id = id };

	m.error = (struct tvp_error){ TVP_ERR_IO, sys_errno, { text, len } };
	sb_msg(b, &m);
}

static void sb_file_end(struct sbuf *b, uint32_t id, uint64_t size)
{
	struct tvp_msg m = { .type = TVP_FILE_END, .id = id, .file_end = { size, 0644 } };

	sb_msg(b, &m);
}

/* ---- the hostile agent ---- */

struct peer {
	int fd;              /* agent end of the socketpair */
	struct sbuf out;     /* bytes sent to the host, as fast as it takes them */
	int no_read;         /* never read what the host sends */
	int keep_open;       /* after the script, stay silent instead of EOF */
	size_t got;          /* bytes the host sent */
	uint8_t first[4096]; /* the first of them */
	pthread_t thread;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	size_t off = 0;
	int wr_open = 1;

	for (;;) {
		struct pollfd pf = { .fd = p->fd, .events = p->no_read ? 0 : POLLIN };

		if (off < p->out.len)
			pf.events |= POLLOUT;
		if (off == p->out.len && wr_open && !p->keep_open) {
			shutdown(p->fd, SHUT_WR);
			wr_open = 0;
		}
		if (poll(&pf, 1, -1) < 0)
			break;
		if (pf.revents & POLLOUT) {
			ssize_t n = send(p->fd, p->out.p + off, p->out.len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				off = p->out.len; /* host went away */
		}
		if (!p->no_read && (pf.revents & (POLLIN | POLLHUP | POLLERR))) {
			uint8_t buf[65536];
			ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (n > 0) {
				if (p->got < sizeof(p->first))
					memcpy(p->first + p->got, buf,
					       (size_t)n < sizeof(p->first) - p->got ? (size_t)n
										     : sizeof(p->first) - p->got);
				p->got += (size_t)n;
			}
		} else if (p->no_read && (pf.revents & (POLLHUP | POLLERR))) {
			break;
		}
	}
	close(p->fd);
	return NULL;
}

/* Start the peer; returns the host end. */
static int peer_start(struct peer *p)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	p->fd = sv[1];
	ck_assert_int_eq(pthread_create(&p->thread, NULL, peer_main, p), 0);
	return sv[0];
}

static void peer_join(struct peer *p)
{
	pthread_join(p->thread, NULL);
	free(p->out.p);
}

/* Connect through tvm_agent_open (the script must start with READY). */
static struct tvm_agent *peer_open(struct peer *p)
{
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	int r = tvm_agent_open(peer_start(p), 2000, &a, &e);

	ck_assert_msg(r == 0, "open: %d %s", r, e.msg);
	return a;
}

static void assert_one_line(const struct tvm_err *e)
{
	ck_assert_uint_gt(strlen(e->msg), 0);
	for (const char *c = e->msg; *c; c++)
		ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in \"%s\"", *c, e->msg);
}

/* ---- output collection ---- */

struct sink {
	size_t bytes[3];
	unsigned calls;
	uint8_t head[64];
	size_t head_len;
};

static void on_out(void *ctx, int stream, const void *buf, size_t len)
{
	struct sink *s = ctx;

	ck_assert(stream == 1 || stream == 2);
	s->bytes[stream] += len;
	s->calls++;
	if (stream == 1 && s->head_len + len <= sizeof(s->head)) {
		memcpy(s->head + s->head_len, buf, len);
		s->head_len += len;
	}
}

static const char *const argv_true[] = { "true", NULL };

static int run_job(struct tvm_agent *a, uint32_t cap, struct sink *s, struct tvm_job_result *res, struct tvm_err *e)
{
	struct tvm_job j = { .argv = argv_true,
			     .uid = TVM_ID_DEFAULT,
			     .gid = TVM_ID_DEFAULT,
			     .stdout_cap = cap,
			     .stderr_cap = cap,
			     .on_output = on_out,
			     .ctx = s };

	return tvm_agent_exec(a, &j, res, e);
}

/* Open the peer, run one job on it, close and wait for the peer. */
static int peer_run_job(struct peer *p, uint32_t cap, struct sink *s, struct tvm_job_result *res, struct tvm_err *e)
{
	struct tvm_agent *a = peer_open(p);
	int r = run_job(a, cap, s, res, e);

	tvm_agent_close(a);
	peer_join(p);
	return r;
}

/* ---- tvm_agent_open ---- */

static int open_with(struct peer *p, int timeout_ms, struct tvm_err *e)
{
	struct tvm_agent *a = (struct tvm_agent *)&a; /* must be reset to NULL */
	int r = tvm_agent_open(peer_start(p), timeout_ms, &a, e);

	ck_assert_ptr_null(a);
	peer_join(p);
	return r;
}

START_TEST(open_giant_length)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	uint8_t hdr[TVP_HDR_SIZE];

	tvp_put_header(hdr, TVP_READY, 0, 0, 0xFFFFFFFFu);
	sb_put(&p.out, hdr, sizeof(hdr));
	p.keep_open = 1; /* the error must come from the length, not an EOF */
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "bad frame"));
	ck_assert_ptr_nonnull(strstr(e.msg, "4294967295"));
	assert_one_line(&e);
}
END_TEST

START_TEST(open_just_over_max_payload)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	uint8_t hdr[TVP_HDR_SIZE];

	tvp_put_header(hdr, TVP_STDOUT, 0, 0, TVP_MAX_PAYLOAD + 1);
	sb_put(&p.out, hdr, sizeof(hdr));
	p.keep_open = 1;
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "over limit"));
}
END_TEST

START_TEST(open_bad_magic)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };

	sb_put(&p.out, "HTTP/1.1 200 OK\r\n\r\n", 19);
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "magic"));
	assert_one_line(&e);
}
END_TEST

START_TEST(open_truncated_ready_then_eof)
{
	struct sbuf full = { 0 };
	struct tvm_err e = { 0 };

	sb_ready(&full);
	/* Every cut of the READY frame, including a header alone. */
	for (size_t cut = 0; cut < full.len; cut++) {
		struct peer p = { 0 };

		if (cut)
			sb_put(&p.out, full.p, cut);
		ck_assert_int_eq(open_with(&p, 2000, &e), -ECONNRESET);
		ck_assert_str_eq(e.msg, "agent: connection closed");
	}
	free(full.p);
}
END_TEST

START_TEST(open_result_before_ready)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };

	sb_result(&p.out, 1, 0, 0);
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_str_eq(e.msg, "agent: expected READY, got RESULT");
}
END_TEST

START_TEST(open_unknown_type)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };

	sb_frame(&p.out, 0xEE, 0, 0, "x", 1);
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "unknown"));
}
END_TEST

START_TEST(open_ready_with_trailing_bytes)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	struct sbuf r = { 0 };

	sb_ready(&r);
	/* Grow the payload by 3 bytes the READY layout does not have. */
	tvp_put_header(r.p, TVP_READY, 0, 0, (uint32_t)(r.len - TVP_HDR_SIZE + 3));
	sb_put(&r, "abc", 3);
	sb_put(&p.out, r.p, r.len);
	free(r.p);
	ck_assert_int_eq(open_with(&p, 2000, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "bad READY message"));
	ck_assert_ptr_nonnull(strstr(e.msg, "trailing"));
}
END_TEST

START_TEST(open_silent_agent_times_out)
{
	struct peer p = { .keep_open = 1 };
	struct tvm_err e = { 0 };

	ck_assert_int_eq(open_with(&p, 100, &e), -ETIMEDOUT);
	ck_assert_str_eq(e.msg, "agent: no answer within 100 ms");
}
END_TEST

/* ---- tvm_agent_exec: the job is id 1 on a fresh connection ---- */

/* The first frame the host sent the peer, which must be EXEC id 1; *m
 * points into d (free it after). */
static void first_exec(const struct peer *p, struct tvp_decoder *d, struct tvp_msg *m)
{
	size_t n = p->got < sizeof(p->first) ? p->got : sizeof(p->first);
	struct tvp_frame f;

	tvp_decoder_init(d, 0);
	ck_assert_uint_eq(tvp_decoder_feed(d, p->first, n), n);
	ck_assert_int_eq(tvp_decoder_next(d, &f), 1);
	ck_assert_int_eq(tvp_parse(&f, m, NULL, 0), 0);
	ck_assert_uint_eq(m->type, TVP_EXEC);
	ck_assert_uint_eq(m->id, 1);
}

START_TEST(exec_result_first)
{
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };
	struct tvp_decoder d;
	struct tvp_msg m;

	sb_ready(&p.out);
	sb_result(&p.out, 1, 42, 0);
	ck_assert_int_eq(peer_run_job(&p, 1000, &s, &res, &e), 0);
	ck_assert_int_eq(res.exit_code, 42);
	ck_assert_int_eq(res.stdout_truncated, 0);
	ck_assert_uint_eq(s.calls, 0);
	/* The host asked for the caps it was given. */
	first_exec(&p, &d, &m);
	ck_assert_uint_eq(m.exec.stdout_cap, 1000);
	tvp_decoder_free(&d);
}
END_TEST

/* Secure by default: a job's unset (zero) uid/gid reach the agent as its
 * default unprivileged user; root only when asked for with TVM_ID_ROOT. */
START_TEST(exec_ids_default_unprivileged)
{
	static const struct {
		uint32_t uid, gid; /* in the tvm_job; init: from tvm_job_init */
		int init;
		uint32_t wire_uid, wire_gid; /* in the EXEC frame */
	} cases[] = {
		{ 0, 0, 0, TVP_ID_DEFAULT, TVP_ID_DEFAULT },
		{ 0, 0, 1, TVP_ID_DEFAULT, TVP_ID_DEFAULT },
		{ TVM_ID_DEFAULT, TVM_ID_DEFAULT, 0, TVP_ID_DEFAULT, TVP_ID_DEFAULT },
		{ TVM_ID_ROOT, TVM_ID_ROOT, 0, 0, 0 },
		{ TVM_ID_ROOT, 0, 0, 0, TVP_ID_DEFAULT },
		{ 1001, 1002, 0, 1001, 1002 },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct peer p = { 0 };
		struct tvm_job_result res = { 0 };
		struct tvm_err e = { 0 };
		struct tvm_job j = { .argv = argv_true, .uid = cases[i].uid, .gid = cases[i].gid };
		struct tvm_agent *a;
		struct tvp_decoder d;
		struct tvp_msg m;

		if (cases[i].init) {
			memset(&j, 0xa5, sizeof(j)); /* tvm_job_init sets every field */
			tvm_job_init(&j);
			ck_assert_ptr_null(j.env);
			ck_assert_ptr_null(j.on_output);
			ck_assert_uint_eq(j.stdin_len, 0);
			j.argv = argv_true;
		}
		sb_ready(&p.out);
		sb_result(&p.out, 1, 0, 0);
		a = peer_open(&p);
		ck_assert_msg(tvm_agent_exec(a, &j, &res, &e) == 0, "case %u: %s", i, e.msg);
		tvm_agent_close(a);
		peer_join(&p);
		first_exec(&p, &d, &m);
		ck_assert_msg(m.exec.uid == cases[i].wire_uid && m.exec.gid == cases[i].wire_gid,
			      "case %u: uid %u gid %u on the wire", i, m.exec.uid, m.exec.gid);
		tvp_decoder_free(&d);
	}
}
END_TEST

START_TEST(exec_other_ids_ignored)
{
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_STDOUT, 0, 99, "not yours", 9);
	sb_error(&p.out, 0, EIO, "connection-level noise", 22);
	sb_result(&p.out, 2, 7, 0);
	sb_frame(&p.out, TVP_STDOUT, 0, 1, "mine", 4);
	sb_frame(&p.out, TVP_OK, 0, 1, "\x10\0\0\0\0\0\0\0\0\0\0\0", 12); /* wrong type for a job: ignored */
	sb_result(&p.out, 1, 3, 0);
	ck_assert_int_eq(peer_run_job(&p, 1000, &s, &res, &e), 0);
	ck_assert_int_eq(res.exit_code, 3);
	ck_assert_uint_eq(s.bytes[1], 4);
	ck_assert_mem_eq(s.head, "mine", 4);
}
END_TEST

/* Far more stdout than the cap the host asked for: the callback sees the
 * cap, no more, and the result says truncated. */
START_TEST(exec_stdout_flood_beyond_cap)
{
	static uint8_t chunk[TVP_MAX_PAYLOAD];
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };

	memset(chunk, 'A', sizeof(chunk));
	sb_ready(&p.out);
	for (int i = 0; i < 16; i++) {
		sb_frame(&p.out, TVP_STDOUT, 0, 1, chunk, sizeof(chunk));
		sb_frame(&p.out, TVP_STDERR, 0, 1, chunk, 1000);
	}
	sb_result(&p.out, 1, 0, 0); /* the agent even claims nothing was cut */
	ck_assert_int_eq(peer_run_job(&p, 100000, &s, &res, &e), 0);
	ck_assert_uint_eq(s.bytes[1], 100000);
	ck_assert_uint_eq(s.bytes[2], 16000);
	ck_assert_int_eq(res.stdout_truncated, 1);
	ck_assert_int_eq(res.stderr_truncated, 0);
}
END_TEST

START_TEST(exec_error_with_hostile_text)
{
	char text[TVP_MAX_MESSAGE];
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };

	memset(text, 'x', sizeof(text));
	memcpy(text, "spawn\nfailed\x1b]0;pwned\x07\r\x7f", 24);
	sb_ready(&p.out);
	sb_error(&p.out, 1, ENOENT, text, sizeof(text));
	ck_assert_int_eq(peer_run_job(&p, 0, &s, &res, &e), -ENOENT);
	ck_assert_int_eq(e.code, ENOENT);
	ck_assert_uint_eq(strlen(e.msg), sizeof(e.msg) - 1);
	ck_assert_ptr_nonnull(strstr(e.msg, "agent: spawn?failed?]0;pwned???xxx"));
	assert_one_line(&e);
}
END_TEST

/* An ERROR text over TVP_MAX_MESSAGE is a protocol error, not a message. */
START_TEST(exec_error_over_max_message)
{
	static uint8_t payload[12 + 2000];
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };

	payload[0] = TVP_ERR_IO;
	payload[4] = EIO;
	payload[8] = 2000 & 0xff;
	payload[9] = 2000 >> 8;
	memset(payload + 12, 'x', 2000);
	sb_ready(&p.out);
	sb_frame(&p.out, TVP_ERROR, 0, 1, payload, sizeof(payload));
	ck_assert_int_eq(peer_run_job(&p, 0, &s, &res, &e), -EPROTO);
	ck_assert_msg(strstr(e.msg, "bad ERROR message") && strstr(e.msg, "message"), "%s", e.msg);
	assert_one_line(&e);
}
END_TEST

START_TEST(exec_error_odd_errno)
{
	static const int32_t errs[] = { 0, -5, 0x7fffffff };

	for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		struct peer p = { 0 };
		struct tvm_job_result res = { 0 };
		struct tvm_err e = { 0 };
		struct sink s = { 0 };
		int r;

		sb_ready(&p.out);
		sb_error(&p.out, 1, errs[i], "", 0);
		r = peer_run_job(&p, 0, &s, &res, &e);
		ck_assert_int_eq(r, errs[i] > 0 ? -errs[i] : -EPROTO);
		ck_assert_int_eq(e.code, -r);
		ck_assert_str_eq(e.msg, "agent: ");
	}
}
END_TEST

/* exit_code and signal out of the documented ranges: an exit code of 256
 * would otherwise become the CLI's exit status 0. */
START_TEST(exec_result_out_of_range)
{
	static const struct {
		int32_t code;
		uint32_t sig;
	} bad[] = { { 256, 0 }, { -1, 0 }, { 0x7fffffff, 0 }, { 137, 65 }, { 0, 0xffffffffu } };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct peer p = { 0 };
		struct tvm_job_result res = { 0 };
		struct tvm_err e = { 0 };
		struct sink s = { 0 };

		sb_ready(&p.out);
		sb_result(&p.out, 1, bad[i].code, bad[i].sig);
		ck_assert_int_eq(peer_run_job(&p, 0, &s, &res, &e), -EPROTO);
		ck_assert_ptr_nonnull(strstr(e.msg, "bad RESULT"));
	}
}
END_TEST

START_TEST(exec_eof_mid_frame)
{
	struct peer p = { 0 };
	struct tvm_job_result res = { .exit_code = -77 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };
	uint8_t hdr[TVP_HDR_SIZE];

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_STDOUT, 0, 1, "whole", 5);
	tvp_put_header(hdr, TVP_STDOUT, 0, 1, 5000);
	sb_put(&p.out, hdr, sizeof(hdr));
	sb_put(&p.out, "partial", 7);
	ck_assert_int_eq(peer_run_job(&p, 0, &s, &res, &e), -ECONNRESET);
	ck_assert_str_eq(e.msg, "agent: connection closed");
	ck_assert_uint_eq(s.bytes[1], 5);     /* only the whole frame */
	ck_assert_int_eq(res.exit_code, -77); /* untouched */
}
END_TEST

START_TEST(exec_bad_frame_mid_job)
{
	struct peer p = { 0 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_STDOUT, 0x80, 1, "x", 1); /* flags not allowed */
	sb_result(&p.out, 1, 0, 0);
	p.keep_open = 1;
	ck_assert_int_eq(peer_run_job(&p, 0, &s, &res, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "bad STDOUT message"));
	ck_assert_uint_eq(s.calls, 0);
}
END_TEST

/* An agent that never reads stdin but finishes: the host must not block
 * in send with 8 MiB of stdin queued. */
START_TEST(exec_stdin_never_read)
{
	struct peer p = { .no_read = 1 };
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	struct sink s = { 0 };
	struct tvm_agent *a;
	size_t len = 8u << 20;
	uint8_t *in = calloc(1, len);
	struct tvm_job j = { .argv = argv_true,
			     .uid = TVM_ID_DEFAULT,
			     .gid = TVM_ID_DEFAULT,
			     .stdin_data = in,
			     .stdin_len = len,
			     .on_output = on_out,
			     .ctx = &s };

	sb_ready(&p.out);
	sb_result(&p.out, 1, 9, 0);
	a = peer_open(&p);
	ck_assert_int_eq(tvm_agent_exec(a, &j, &res, &e), 0);
	ck_assert_int_eq(res.exit_code, 9);
	tvm_agent_close(a);
	peer_join(&p);
	free(in);
}
END_TEST

/* ---- tvm_agent_get_file: transfer id 1 on a fresh connection ---- */

static int get(struct tvm_agent *a, size_t cap, void **data, size_t *len, struct tvm_err *e)
{
	*data = (void *)&data; /* must be reset */
	*len = 12345;
	return tvm_agent_get_file(a, "/out", cap, data, len, e);
}

/* Open the peer, get /out from it, close and wait for the peer. */
static int peer_get(struct peer *p, size_t cap, void **data, size_t *len, struct tvm_err *e)
{
	struct tvm_agent *a = peer_open(p);
	int r = get(a, cap, data, len, e);

	tvm_agent_close(a);
	peer_join(p);
	return r;
}

START_TEST(get_data_beyond_cap)
{
	static uint8_t chunk[65536];
	struct peer p = { .keep_open = 1 };
	struct tvm_err e = { 0 };
	void *data;
	size_t len;

	sb_ready(&p.out);
	for (int i = 0; i < 64; i++)
		sb_frame(&p.out, TVP_FILE_DATA, 0, 1, chunk, sizeof(chunk));
	sb_file_end(&p.out, 1, 64 * sizeof(chunk));
	ck_assert_int_eq(peer_get(&p, 100000, &data, &len, &e), -EFBIG);
	ck_assert_ptr_null(data);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(e.msg, "get /out: more than 100000 bytes");
}
END_TEST

START_TEST(get_cap_zero)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	void *data;
	size_t len;

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "", 0); /* empty chunks are fine */
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "x", 1);
	sb_file_end(&p.out, 1, 1);
	ck_assert_int_eq(peer_get(&p, 0, &data, &len, &e), -EFBIG);
	ck_assert_ptr_null(data);
}
END_TEST

START_TEST(get_end_size_mismatch)
{
	static const uint64_t claims[] = { 0, 5, 7, UINT64_MAX };

	for (unsigned i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		struct peer p = { 0 };
		struct tvm_err e = { 0 };
		char want[96];
		void *data;
		size_t len;

		sb_ready(&p.out);
		sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "abc", 3);
		sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "def", 3);
		sb_file_end(&p.out, 1, claims[i]);
		ck_assert_int_eq(peer_get(&p, 1000, &data, &len, &e), -EPROTO);
		ck_assert_ptr_null(data);
		snprintf(want, sizeof(want), "get /out: agent said %llu bytes, sent 6", (unsigned long long)claims[i]);
		ck_assert_str_eq(e.msg, want);
	}
}
END_TEST

START_TEST(get_eof_mid_transfer)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	uint8_t hdr[TVP_HDR_SIZE];
	void *data;
	size_t len;

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "abc", 3);
	tvp_put_header(hdr, TVP_FILE_DATA, 0, 1, 100);
	sb_put(&p.out, hdr, sizeof(hdr));
	sb_put(&p.out, "de", 2);
	ck_assert_int_eq(peer_get(&p, 1000, &data, &len, &e), -ECONNRESET);
	ck_assert_ptr_null(data);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(e.msg, "get /out: agent: connection closed");
}
END_TEST

START_TEST(get_other_ids_and_types)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	void *data;
	size_t len;

	sb_ready(&p.out);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 2, "zzzzzz", 6);
	sb_file_end(&p.out, 2, 6);
	sb_error(&p.out, 7, EIO, "other", 5);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "abc", 3);
	sb_frame(&p.out, TVP_STDOUT, 0, 1, "ignored", 7);
	sb_result(&p.out, 1, 0, 0);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "de", 2);
	sb_file_end(&p.out, 1, 5);
	ck_assert_int_eq(peer_get(&p, 5, &data, &len, &e), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(data, "abcde", 5);
	free(data);
}
END_TEST

START_TEST(get_error_huge_message)
{
	char text[TVP_MAX_MESSAGE];
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	void *data;
	size_t len;

	memset(text, '\n', sizeof(text));
	sb_ready(&p.out);
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "abc", 3);
	sb_error(&p.out, 1, EACCES, text, sizeof(text));
	ck_assert_int_eq(peer_get(&p, 1000, &data, &len, &e), -EACCES);
	ck_assert_ptr_null(data);
	ck_assert(strncmp(e.msg, "get /out: agent: ???", 20) == 0);
	assert_one_line(&e);
}
END_TEST

/* ---- put_file and seed ---- */

START_TEST(put_eof_before_ok)
{
	static uint8_t data[300000];
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_agent *a;
	struct tvp_msg ok = { .type = TVP_OK, .id = 9, .ok = { TVP_PUT_FILE, 1 } };

	sb_ready(&p.out);
	sb_msg(&p.out, &ok); /* someone else's OK */
	p.keep_open = 0;
	a = peer_open(&p);
	ck_assert_int_eq(tvm_agent_put_file(a, "/in", 0644, data, sizeof(data), &e), -ECONNRESET);
	ck_assert_str_eq(e.msg, "put /in: agent: connection closed");
	tvm_agent_close(a);
	peer_join(&p);
	ck_assert_uint_ge(p.got, sizeof(data)); /* it was all sent before waiting */
}
END_TEST

START_TEST(put_error_with_control_bytes)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_agent *a;

	sb_ready(&p.out);
	sb_error(&p.out, 1, ENOSPC, "disk\tfull\n", 10);
	a = peer_open(&p);
	ck_assert_int_eq(tvm_agent_put_file(a, "/in", 0644, "x", 1, &e), -ENOSPC);
	ck_assert_str_eq(e.msg, "put /in: agent: disk?full?");
	tvm_agent_close(a);
	peer_join(&p);
}
END_TEST

START_TEST(seed_wrong_answers_then_eof)
{
	struct peer p = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_agent *a;

	sb_ready(&p.out);
	sb_result(&p.out, 1, 0, 0);                    /* wrong type for our id */
	sb_frame(&p.out, TVP_FILE_DATA, 0, 1, "x", 1); /* and again */
	a = peer_open(&p);
	ck_assert_int_eq(tvm_agent_seed(a, &e), -ECONNRESET);
	ck_assert_str_eq(e.msg, "agent: connection closed");
	tvm_agent_close(a);
	peer_join(&p);
}
END_TEST

/* Every prefix of a valid session, cut at every byte and ended with EOF:
 * every call ends with an error or success, never a crash or a hang. */
START_TEST(every_cut_of_a_session)
{
	struct sbuf full = { 0 };
	size_t ready_len;

	sb_ready(&full);
	ready_len = full.len;
	sb_frame(&full, TVP_STDOUT, 0, 1, "hello", 5);
	sb_frame(&full, TVP_STDERR, 0, 1, "oops", 4);
	sb_result(&full, 1, 1, 0);
	for (size_t cut = ready_len; cut <= full.len; cut++) {
		struct peer p = { 0 };
		struct tvm_job_result res = { 0 };
		struct tvm_err e = { 0 };
		struct sink s = { 0 };
		int r;

		sb_put(&p.out, full.p, cut);
		r = peer_run_job(&p, 0, &s, &res, &e);
		if (cut == full.len) {
			ck_assert_int_eq(r, 0);
			ck_assert_int_eq(res.exit_code, 1);
			ck_assert_uint_eq(s.bytes[1], 5);
			ck_assert_uint_eq(s.bytes[2], 4);
		} else {
			ck_assert_int_eq(r, -ECONNRESET);
			ck_assert_str_eq(e.msg, "agent: connection closed");
		}
	}
	free(full.p);
}
END_TEST

/* ---- tvm_agent_connect_uds: the hybrid vsock handshake ---- */

struct uds_peer {
	int lfd;
	const char *answer; /* bytes sent after reading the CONNECT line */
	size_t len;
	int hold; /* then stay silent instead of closing */
	pthread_t thread;
};

static void *uds_main(void *arg)
{
	struct uds_peer *u = arg;
	int fd = accept(u->lfd, NULL, NULL);
	char c;

	if (fd < 0)
		return NULL;
	while (recv(fd, &c, 1, 0) == 1 && c != '\n')
		;
	if (u->len)
		send(fd, u->answer, u->len, MSG_NOSIGNAL);
	if (u->hold) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		poll(&pf, 1, 5000); /* until the host gives up and closes */
	}
	close(fd);
	return NULL;
}

static int uds_try(const char *answer, size_t len, int hold, struct tvm_agent **a, struct tvm_err *e)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct uds_peer u = { .answer = answer, .len = len, .hold = hold };
	int r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/tinyvmm-hostile-uds-%d", (int)getpid());
	unlink(sa.sun_path);
	u.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(u.lfd, 0);
	ck_assert_int_eq(bind(u.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(u.lfd, 1), 0);
	ck_assert_int_eq(pthread_create(&u.thread, NULL, uds_main, &u), 0);
	r = tvm_agent_connect_uds(sa.sun_path, TVM_AGENT_PORT, 200, a, e);
	if (!r)
		tvm_agent_close(*a);
	pthread_join(u.thread, NULL);
	close(u.lfd);
	unlink(sa.sun_path);
	return r;
}

START_TEST(uds_hostile_handshakes)
{
	static char longline[300];
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	struct sbuf ok_ready = { 0 };

	ck_assert_int_eq(uds_try("NO\n", 3, 0, &a, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "unexpected answer to CONNECT"));
	ck_assert_int_eq(uds_try("", 0, 0, &a, &e), -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(e.msg, "guest port 1024 refused"));
	ck_assert_int_eq(uds_try("OK 5", 4, 1, &a, &e), -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(e.msg, "no answer to CONNECT 1024"));
	/* "OK " and then no newline for far longer than the line buffer:
	 * the rest is taken as agent frames, which are garbage. */
	memset(longline, 'x', sizeof(longline));
	memcpy(longline, "OK ", 3);
	ck_assert_int_eq(uds_try(longline, sizeof(longline), 0, &a, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "bad frame"));
	/* OK, then silence where READY should be. */
	ck_assert_int_eq(uds_try("OK 5\n", 5, 1, &a, &e), -ETIMEDOUT);
	ck_assert_str_eq(e.msg, "agent: no answer within 200 ms");
	/* And the real thing, with READY in the same segment as the OK. */
	sb_put(&ok_ready, "OK 5\n", 5);
	sb_ready(&ok_ready);
	ck_assert_int_eq(uds_try((const char *)ok_ready.p, ok_ready.len, 0, &a, &e), 0);
	free(ok_ready.p);
}
END_TEST

static Suite *hostile_agent_suite(void)
{
	Suite *s = suite_create("hostile_agent_client");
	TCase *tc = tcase_create("open");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, open_giant_length);
	tcase_add_test(tc, open_just_over_max_payload);
	tcase_add_test(tc, open_bad_magic);
	tcase_add_test(tc, open_truncated_ready_then_eof);
	tcase_add_test(tc, open_result_before_ready);
	tcase_add_test(tc, open_unknown_type);
	tcase_add_test(tc, open_ready_with_trailing_bytes);
	tcase_add_test(tc, open_silent_agent_times_out);
	suite_add_tcase(s, tc);

	tc = tcase_create("exec");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, exec_result_first);
	tcase_add_test(tc, exec_ids_default_unprivileged);
	tcase_add_test(tc, exec_other_ids_ignored);
	tcase_add_test(tc, exec_stdout_flood_beyond_cap);
	tcase_add_test(tc, exec_error_with_hostile_text);
	tcase_add_test(tc, exec_error_odd_errno);
	tcase_add_test(tc, exec_error_over_max_message);
	tcase_add_test(tc, exec_result_out_of_range);
	tcase_add_test(tc, exec_eof_mid_frame);
	tcase_add_test(tc, exec_bad_frame_mid_job);
	tcase_add_test(tc, exec_stdin_never_read);
	tcase_add_test(tc, every_cut_of_a_session);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, get_data_beyond_cap);
	tcase_add_test(tc, get_cap_zero);
	tcase_add_test(tc, get_end_size_mismatch);
	tcase_add_test(tc, get_eof_mid_transfer);
	tcase_add_test(tc, get_other_ids_and_types);
	tcase_add_test(tc, get_error_huge_message);
	tcase_add_test(tc, put_eof_before_ok);
	tcase_add_test(tc, put_error_with_control_bytes);
	tcase_add_test(tc, seed_wrong_answers_then_eof);
	tcase_add_test(tc, uds_hostile_handshakes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(hostile_agent_suite());
}
