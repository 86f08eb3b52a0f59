/* Test harness for the guest agent: starts the agent binary on this host in
 * Unix-socket test mode and drives it with the guest/protocol.h codec.
 * Included by the tests/test_agent*.c programs. */
#ifndef TVM_TESTS_AGENT_CLIENT_H
#define TVM_TESTS_AGENT_CLIENT_H

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/protocol.h"
#include "tests/unit.h"

#define AC_TIMEOUT_MS 20000
#define AC_MAX_IDS 8

/* The agent under test; its environment carries AC_QUIRK as a stand-in for
 * the KEY=VALUE words the kernel hands to init. */
#define AC_QUIRK "TINYVMM_TEST_QUIRK=from-init"

static pid_t ac_agent_pid = -1;
static char ac_sock[108];

static inline const char *ac_agent_bin(void)
{
	const char *p = getenv("TINYVMM_AGENT_BIN");

	return p && *p ? p : "build/guest/tinyvmm-agent-san";
}

static inline int ac_try_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sa.sun_path, ac_sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	close(fd);
	return -1;
}

/* Start bin in test mode, under the wrapper command wrap (NULL-terminated
 * argv prefix, or NULL), and wait until it accepts connections on sock. */
static inline void ac_start_at(const char *bin, const char *const *wrap, const char *sock)
{
	const char *argv[16];
	int fd = -1, n = 0;

	snprintf(ac_sock, sizeof(ac_sock), "%s", sock);
	unlink(ac_sock);
	ck_assert_msg(access(bin, X_OK) == 0, "agent binary %s missing (make agent, or set TINYVMM_AGENT_BIN)", bin);
	while (wrap && *wrap && n < 10)
		argv[n++] = *wrap++;
	argv[n++] = bin;
	argv[n++] = "--listen-unix";
	argv[n++] = ac_sock;
	argv[n] = NULL;
	ac_agent_pid = fork();
	ck_assert_int_ge(ac_agent_pid, 0);
	if (ac_agent_pid == 0) {
		putenv(AC_QUIRK);
		if (!freopen("/dev/null", "w", stdout))
			_exit(98);
		execvp(argv[0], (char *const *)argv);
		_exit(99);
	}
	for (int i = 0; i < 1000 && fd < 0; i++) {
		fd = ac_try_connect();
		if (fd < 0)
			usleep(10000);
	}
	ck_assert_msg(fd >= 0, "agent did not listen on %s", ac_sock);
	close(fd);
}

static inline void ac_start_bin(const char *bin)
{
	char sock[108];

	snprintf(sock, sizeof(sock), "/tmp/tinyvmm-agent-test-%d.sock", (int)getpid());
	ac_start_at(bin, NULL, sock);
}

static inline void ac_start(void)
{
	ac_start_bin(ac_agent_bin());
}

/* Wait for the agent to exit on its own; returns its wait status. */
static inline int ac_wait_exit(int timeout_ms)
{
	int st = -1;

	for (int i = 0; i < timeout_ms / 10; i++) {
		pid_t r = waitpid(ac_agent_pid, &st, WNOHANG);

		if (r == ac_agent_pid) {
			ac_agent_pid = -1;
			return st;
		}
		usleep(10000);
	}
	ck_abort_msg("agent did not exit");
	return -1;
}

/* Stop the agent with SIGTERM; it must exit cleanly (status 0 also means
 * no sanitizer report). */
static inline void ac_stop(void)
{
	int st;

	if (ac_agent_pid < 0)
		return;
	kill(ac_agent_pid, SIGTERM);
	st = ac_wait_exit(20000);
	unlink(ac_sock);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "agent ended with status 0x%x", st);
}

/* ---- a connection ---- */

struct ac_conn {
	int fd;
	struct tvp_decoder dec;
	uint8_t *out; /* frames not yet written */
	size_t outlen, outoff;
	bool eof;
};

static inline struct ac_conn *ac_connect(void)
{
	struct ac_conn *c = calloc(1, sizeof(*c));

	c->fd = ac_try_connect();
	ck_assert_int_ge(c->fd, 0);
	tvp_decoder_init(&c->dec, 0);
	return c;
}

static inline void ac_close(struct ac_conn *c)
{
	close(c->fd);
	tvp_decoder_free(&c->dec);
	free(c->out);
	free(c);
}

/* Raw bytes to the agent (queued; written as the socket takes them). */
static inline void ac_send_raw(struct ac_conn *c, const void *p, size_t n)
{
	c->out = realloc(c->out, c->outlen + n);
	memcpy(c->out + c->outlen, p, n);
	c->outlen += n;
}

static inline void ac_send(struct ac_conn *c, const struct tvp_msg *m)
{
	size_t len;

	ck_assert_int_eq(tvp_encode(m, NULL, 0, &len), TVP_E_NOSPACE);
	c->out = realloc(c->out, c->outlen + len);
	ck_assert_int_eq(tvp_encode(m, c->out + c->outlen, len, &len), 0);
	c->outlen += len;
}

/* One poll round: write what is queued, read what came. */
static inline void ac_io(struct ac_conn *c, int timeout_ms)
{
	struct pollfd pfd = { c->fd, POLLIN | (c->outoff < c->outlen ? POLLOUT : 0), 0 };
	ssize_t n;

	ck_assert_int_ge(poll(&pfd, 1, timeout_ms), 0);
	if ((pfd.revents & POLLOUT) && c->outoff < c->outlen) {
		n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			c->outoff += (size_t)n;
		if (c->outoff == c->outlen)
			c->outoff = c->outlen = 0;
	}
	if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
		size_t avail;
		void *p = tvp_decoder_space(&c->dec, &avail);

		if (!p)
			return;
		n = recv(c->fd, p, avail, MSG_DONTWAIT);
		if (n > 0)
			tvp_decoder_commit(&c->dec, (size_t)n);
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			c->eof = true;
	}
}

/* Next message from the agent: 1, or 0 at EOF. Its views stay valid until
 * the next call. */
static inline int ac_recv(struct ac_conn *c, struct tvp_msg *m)
{
	static char err[160];
	struct tvp_frame f;
	struct timespec t0, t1;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		rc = tvp_decoder_next(&c->dec, &f);
		ck_assert_msg(rc >= 0, "agent sent a bad frame: %s", tvp_decoder_error(&c->dec));
		if (rc == 1) {
			rc = tvp_parse(&f, m, err, sizeof(err));
			ck_assert_msg(rc == 0, "agent sent a bad message: %s", err);
			return 1;
		}
		if (c->eof)
			return 0;
		ac_io(c, 100);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ck_assert_msg((t1.tv_sec - t0.tv_sec) * 1000 < AC_TIMEOUT_MS, "no message from the agent in time");
	}
}

/* Next message, which must be of the given type. */
static inline void ac_expect(struct ac_conn *c, struct tvp_msg *m, uint8_t type)
{
	ck_assert_msg(ac_recv(c, m) == 1, "EOF while waiting for %s", tvp_type_name(type));
	ck_assert_msg(m->type == type, "got %s, wanted %s", tvp_type_name(m->type), tvp_type_name(type));
}

/* A connection that has seen its READY. */
static inline struct ac_conn *ac_open(void)
{
	struct ac_conn *c = ac_connect();
	struct tvp_msg m;

	ac_expect(c, &m, TVP_READY);
	ck_assert_uint_eq(m.ready.version, TVP_VERSION);
	return c;
}

/* Drain until the agent closes the connection; returns the first ERROR
 * code seen (0 if none). */
static inline uint32_t ac_expect_close(struct ac_conn *c)
{
	struct tvp_msg m;
	uint32_t code = 0;

	while (ac_recv(c, &m))
		if (m.type == TVP_ERROR && !code)
			code = m.error.code;
	return code;
}

/* ---- jobs ---- */

struct ac_job {
	const char *const *argv;
	const char *const *env;
	const char *cwd;
	const void *in;
	size_t inlen;
	uint32_t timeout_ms, stdout_cap, stderr_cap;
	uint64_t mem_max; /* the job's cgroup limits; 0: none */
	uint32_t pids_max;
	uint32_t uid, gid; /* 0 means TVP_ID_DEFAULT here */
	bool root;         /* uid and gid 0 (an agent that may setuid) */
	uint8_t flags;
};

/* What came back for one job id. */
struct ac_out {
	char *out, *err;
	size_t outlen, errlen;
	bool done;     /* RESULT or ERROR seen */
	bool failed;   /* ERROR */
	uint8_t flags; /* RESULT flags */
	struct tvp_result r;
	uint32_t ecode;
	int32_t eerrno;
	char emsg[256];
};

static inline size_t ac_count(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

static inline void ac_exec(struct ac_conn *c, uint32_t id, const struct ac_job *j)
{
	struct tvp_msg m = { .type = TVP_EXEC, .id = id, .flags = j->flags };

	m.exec = (struct tvp_exec){
		.uid = j->root  ? 0
		       : j->uid ? j->uid
				: TVP_ID_DEFAULT,
		.gid = j->root  ? 0
		       : j->gid ? j->gid
				: TVP_ID_DEFAULT,
		.timeout_ms = j->timeout_ms,
		.stdout_cap = j->stdout_cap ? j->stdout_cap : 64u << 20,
		.stderr_cap = j->stderr_cap ? j->stderr_cap : 64u << 20,
		.mem_max = j->mem_max,
		.pids_max = j->pids_max,
		.cwd = tvp_cstr(j->cwd),
		.argv = { .count = (uint32_t)ac_count(j->argv), .items = j->argv },
		.env = { .count = (uint32_t)ac_count(j->env), .items = j->env },
		.stdin_data = { j->in, (uint32_t)j->inlen },
	};
	ac_send(c, &m);
}

static inline void ac_append(char **buf, size_t *len, struct tvp_bytes b)
{
	*buf = realloc(*buf, *len + b.len + 1);
	memcpy(*buf + *len, b.p, b.len);
	*len += b.len;
	(*buf)[*len] = 0;
}

/* Take one message into outs[id] (ids < AC_MAX_IDS); false at EOF. */
static inline bool ac_collect_one(struct ac_conn *c, struct ac_out *outs)
{
	struct tvp_msg m;
	struct ac_out *o;

	if (!ac_recv(c, &m))
		return false;
	ck_assert_msg(m.id < AC_MAX_IDS, "%s for unexpected id %u", tvp_type_name(m.type), m.id);
	o = &outs[m.id];
	ck_assert_msg(!o->done, "%s after the end of job %u", tvp_type_name(m.type), m.id);
	switch (m.type) {
	case TVP_STDOUT: ac_append(&o->out, &o->outlen, m.data.data); break;
	case TVP_STDERR: ac_append(&o->err, &o->errlen, m.data.data); break;
	case TVP_RESULT:
		o->done = true;
		o->flags = m.flags;
		o->r = m.result;
		break;
	case TVP_ERROR:
		o->done = o->failed = true;
		o->ecode = m.error.code;
		o->eerrno = m.error.sys_errno;
		snprintf(o->emsg, sizeof(o->emsg), "%.*s", (int)m.error.message.len, m.error.message.p);
		break;
	default: ck_abort_msg("unexpected %s", tvp_type_name(m.type));
	}
	return true;
}

/* Collect until job id is done. */
static inline void ac_wait(struct ac_conn *c, struct ac_out *outs, uint32_t id)
{
	while (!outs[id].done)
		ck_assert_msg(ac_collect_one(c, outs), "EOF before job %u ended", id);
}

static inline void ac_out_free(struct ac_out *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(o[i].out);
		free(o[i].err);
		memset(&o[i], 0, sizeof(o[i]));
	}
}

/* Run one job on c as id 1; its output in *o (free with ac_out_free). */
static inline void ac_run(struct ac_conn *c, const struct ac_job *j, struct ac_out o[AC_MAX_IDS])
{
	memset(o, 0, sizeof(*o) * AC_MAX_IDS);
	ac_exec(c, 1, j);
	ac_wait(c, o, 1);
}

#define AC_ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* A process that is gone (reaped) within timeout_ms. */
static inline bool ac_pid_gone(pid_t pid, int timeout_ms)
{
	for (int i = 0; i < timeout_ms / 10; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		usleep(10000);
	}
	return false;
}

/* VmRSS or VmHWM of a process in KiB. */
static inline long ac_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)) && line[strlen(field)] == ':')
			v = strtol(line + strlen(field) + 1, NULL, 10);
	fclose(f);
	return v;
}

/* Output a job's on_output collects (both streams, NUL-terminated, what
 * does not fit dropped). */
struct ac_collected {
	char buf[256];
	size_t len;
};

static inline void ac_on_output(void *ctx, int stream, const void *p, size_t n)
{
	struct ac_collected *o = ctx;

	(void)stream;
	if (o->len + n < sizeof(o->buf)) {
		memcpy(o->buf + o->len, p, n);
		o->len += n;
		o->buf[o->len] = 0;
	}
}

/* Byte off of the test pattern streamed files carry. */
static inline uint8_t ac_pattern(uint64_t off)
{
	return (uint8_t)(off * 131 + 7);
}

/* A source of n bytes of a known pattern, in odd-sized pieces; fail_at:
 * return -EIO once this many bytes went out (0: never). */
struct ac_gen {
	uint64_t n, off, fail_at;
};

static inline ssize_t ac_gen_read(void *ctx, void *buf, size_t cap)
{
	struct ac_gen *g = ctx;
	size_t k = cap > 7777 ? 7777 : cap;

	if (g->fail_at && g->off >= g->fail_at)
		return -EIO;
	if (k > g->n - g->off)
		k = (size_t)(g->n - g->off);
	for (size_t i = 0; i < k; i++)
		((uint8_t *)buf)[i] = ac_pattern(g->off + i);
	g->off += k;
	return (ssize_t)k;
}

/* A sink checking the same pattern; refuse_at: answer -ENOSPC there. */
struct ac_check {
	uint64_t off, bad, refuse_at;
	unsigned calls;
};

static inline int ac_check_write(void *ctx, const void *buf, size_t len)
{
	struct ac_check *k = ctx;

	k->calls++;
	if (k->refuse_at && k->off >= k->refuse_at)
		return -ENOSPC;
	for (size_t i = 0; i < len; i++)
		k->bad += ((const uint8_t *)buf)[i] != ac_pattern(k->off + i);
	k->off += len;
	return 0;
}

#endif
