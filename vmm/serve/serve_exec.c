/* Execs: each runs in a thread of its own on its own agent connection
 * (guest/PROTOCOL.md EXEC), so it outlives the HTTP connection that
 * started it. Its output, capped per stream by the agent and again by the
 * library, is kept whole in the exec's log: a list of events (stream,
 * offset, length) over one byte buffer, offsets counting both streams in
 * order. Result, ndjson stream and `events?since=` are all read from it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/serve/serve.h"

#define MAX_RUNNING 12      /* at once per sandbox: the agent serves 16 connections */
#define MAX_OUT (64u << 20) /* max_output_bytes */
#define KEEPALIVE_S 10
#define CONNECT_MS 30000
#define VMM_END_WAIT_MS 5000    /* see wait_vmm_end_locked */
#define STDIN_PIECE (64u << 10) /* stdin sent per wake-up of the exec's thread */

enum ex_state { EX_RUNNING, EX_EXITED, EX_FAILED };

struct ev {
	uint64_t off;
	uint32_t len;
	uint8_t stream; /* 1 stdout, 2 stderr */
};

struct exec {
	struct exec *next;
	/* Its thread and the HTTP handlers that hold it (under mu): only
	 * an exec nobody holds (so one that has ended) is forgotten. */
	unsigned users;
	char id[24]; /* "ex_" + 16 hex digits */
	struct srv *s;
	struct sandbox *sb;
	enum ex_state state;
	struct tvm_job_result res;
	char err_code[32], err_msg[300];
	bool dropped[3]; /* output of stream 1/2 dropped: the sandbox's budget was spent */
	uint8_t *data;
	size_t len, cap;
	struct ev *evs;
	size_t nev, evcap;
	/* the job */
	char **argv, **env;
	unsigned argc, nenv;
	char *cwd;
	uint32_t uid, timeout_ms, out_cap;
	uint32_t mem_mib, pids_max; /* the job's own cgroup in the guest; 0: no limit */
	uint8_t *in;
	size_t in_len;
	/* Control from HTTP threads to the exec's thread: queued under mu,
	 * announced by a byte on ctl[1], sent by on_control. */
	int ctl[2];
	bool stdin_job;  /* the job was asked with "stdin": true (fixed at creation) */
	bool stdin_open; /* and the client has not closed it yet (under mu) */
	uint8_t *q;
	size_t q_len;
	bool q_close;
	int q_sig[8];
	unsigned q_nsig;
};

static void exec_free(struct exec *ex)
{
	for (unsigned i = 0; i < ex->argc; i++)
		free(ex->argv[i]);
	free(ex->argv);
	/* env entries past the sandbox's are the exec's own */
	for (unsigned i = ex->sb->nenv; i < ex->nenv; i++)
		free(ex->env[i]);
	free(ex->env);
	free(ex->cwd);
	free(ex->in);
	free(ex->data);
	free(ex->evs);
	free(ex->q);
	if (ex->ctl[0] >= 0)
		close(ex->ctl[0]);
	if (ex->ctl[1] >= 0)
		close(ex->ctl[1]);
	free(ex);
}

/* Forget the oldest exec nobody holds (its record and kept output), so
 * a long-lived sandbox keeps running commands: the cost of the history is
 * bounded, not the number of commands. Under mu. false: none to forget. */
static bool forget_oldest_locked(struct sandbox *sb)
{
	struct exec **pp, **old = NULL;

	for (pp = &sb->execs; *pp; pp = &(*pp)->next) /* newest first */
		if (!(*pp)->users)
			old = pp;
	if (!old)
		return false;
	struct exec *ex = *old;
	*old = ex->next;
	sb->nexecs--;
	sb->kept_bytes -= ex->len;
	exec_free(ex);
	return true;
}

static void exec_put(struct srv *s, struct exec *ex)
{
	pthread_mutex_lock(&s->mu);
	ex->users--;
	pthread_mutex_unlock(&s->mu);
}

void exec_free_all(struct sandbox *sb)
{
	while (sb->execs) {
		struct exec *ex = sb->execs;
		sb->execs = ex->next;
		exec_free(ex);
	}
}

/* Output from the job's thread: appended under mu, announced. */
static void on_output(void *ctx, int stream, const void *buf, size_t len)
{
	struct exec *ex = ctx;
	struct srv *s = ex->s;
	uint64_t budget = (uint64_t)s->cfg.kept_output_mib << 20;

	pthread_mutex_lock(&s->mu);
	while (ex->sb->kept_bytes + len > budget && forget_oldest_locked(ex->sb))
		;
	if (ex->sb->kept_bytes + len > budget) {
		ex->dropped[stream == 1 ? 1 : 2] = true;
		goto out;
	}
	if (ex->len + len > ex->cap) {
		size_t nc = ex->cap ? ex->cap : 65536;
		while (nc < ex->len + len)
			nc *= 2;
		uint8_t *nd = realloc(ex->data, nc);
		if (!nd)
			goto out;
		ex->data = nd;
		ex->cap = nc;
	}
	if (ex->nev == ex->evcap) {
		size_t nc = ex->evcap ? ex->evcap * 2 : 64;
		struct ev *ne = realloc(ex->evs, nc * sizeof(*ne));
		if (!ne)
			goto out;
		ex->evs = ne;
		ex->evcap = nc;
	}
	memcpy(ex->data + ex->len, buf, len);
	ex->evs[ex->nev++] = (struct ev){ .off = ex->len, .len = (uint32_t)len, .stream = (uint8_t)stream };
	ex->len += len;
	ex->sb->kept_bytes += len;
	pthread_cond_broadcast(&s->cv);
out:
	pthread_mutex_unlock(&s->mu);
}

static void audit_exec(struct exec *ex, const char *event)
{
	size_t cap = 4096;
	char *buf;
	struct json_w w;

	/* Room for every field escaped at worst: the line is never dropped. */
	for (unsigned i = 0; i < ex->argc; i++)
		cap += 6 * strlen(ex->argv[i]) + 4;
	for (unsigned i = 0; i < ex->nenv; i++)
		cap += 6 * strlen(ex->env[i]) + 4;
	cap += ex->cwd ? 6 * strlen(ex->cwd) : 0;
	buf = malloc(cap);
	if (!buf)
		return;
	audit_begin(&w, buf, cap, event);
	json_w_key(&w, "exec_id", 7);
	json_w_string(&w, ex->id, strlen(ex->id));
	if (!strcmp(event, "exec_start")) {
		json_w_key(&w, "argv", 4);
		json_w_arr_begin(&w);
		for (unsigned i = 0; i < ex->argc; i++)
			json_w_string(&w, ex->argv[i], strlen(ex->argv[i]));
		json_w_arr_end(&w);
		json_w_key(&w, "cwd", 3); /* null: the user's home (/home/sandbox, /root) */
		if (ex->cwd)
			json_w_string(&w, ex->cwd, strlen(ex->cwd));
		else
			json_w_null(&w);
		json_w_key(&w, "user", 4);
		json_w_string(&w, ex->uid == TVM_ID_ROOT ? "root" : "sandbox", ex->uid == TVM_ID_ROOT ? 4 : 7);
		/* Names only: values may be secrets. */
		json_w_key(&w, "env_names", 9);
		json_w_arr_begin(&w);
		for (unsigned i = 0; i < ex->nenv; i++)
			json_w_string(&w, ex->env[i], (size_t)(strchr(ex->env[i], '=') - ex->env[i]));
		json_w_arr_end(&w);
	} else if (ex->state == EX_EXITED) {
		json_w_key(&w, "exit_code", 9);
		json_w_int(&w, ex->res.exit_code);
		json_w_key(&w, "timed_out", 9);
		json_w_bool(&w, ex->res.timed_out);
		json_w_key(&w, "output_bytes", 12);
		json_w_uint(&w, ex->len);
		json_w_key(&w, "wall_ms", 7);
		json_w_uint(&w, ex->res.wall_ms);
	} else {
		json_w_key(&w, "error", 5);
		json_w_string(&w, ex->err_code, strlen(ex->err_code));
		json_w_key(&w, "message", 7);
		json_w_string(&w, ex->err_msg, strlen(ex->err_msg));
	}
	audit_end(ex->s, ex->sb, &w);
	free(buf);
}

/* On the exec's thread, when ctl[0] is readable: what HTTP threads
 * queued goes to the guest. */
static void on_control(void *ctx, struct tvm_agent *a)
{
	struct exec *ex = ctx;
	char drain[64];
	uint8_t *q;
	size_t q_len;
	bool close_it;
	int sig[8];
	unsigned nsig;
	struct tvm_err e = { 0 };

	while (read(ex->ctl[0], drain, sizeof(drain)) > 0)
		;
	pthread_mutex_lock(&ex->s->mu);
	q = ex->q;
	q_len = ex->q_len;
	close_it = ex->q_close;
	nsig = ex->q_nsig;
	memcpy(sig, ex->q_sig, sizeof(sig));
	ex->q = NULL;
	ex->q_len = 0;
	ex->q_close = false;
	ex->q_nsig = 0;
	pthread_mutex_unlock(&ex->s->mu);
	/* Signals first: they must not wait behind stdin the job does not
	 * read. Stdin goes 64 KiB per call, the rest put back and the pipe
	 * re-armed, so the loop reads the job's output (and signals queued
	 * meanwhile go) between pieces. */
	for (unsigned i = 0; i < nsig; i++)
		tvm_agent_job_signal(a, sig[i], &e);
	size_t piece = q_len < STDIN_PIECE ? q_len : STDIN_PIECE;
	if (piece)
		tvm_agent_job_stdin(a, q, piece, &e);
	if (piece < q_len) {
		pthread_mutex_lock(&ex->s->mu);
		uint8_t *nq = malloc(q_len - piece + ex->q_len);
		if (nq) {
			memcpy(nq, q + piece, q_len - piece);
			if (ex->q_len)
				memcpy(nq + q_len - piece, ex->q, ex->q_len);
			free(ex->q);
			ex->q = nq;
			ex->q_len += q_len - piece;
		}
		ex->q_close |= close_it;
		pthread_mutex_unlock(&ex->s->mu);
		if (write(ex->ctl[1], "x", 1) < 0) {
			/* full: a wake-up is pending anyway */
		}
	} else if (close_it) {
		tvm_agent_job_stdin(a, NULL, 0, &e);
	}
	free(q);
}

/* When the connection broke because the VMM is ending (killed, out of
 * memory), its reaping (the supervisor, a few rounds of 250 ms; a jailed
 * VMM's parent first checks its cgroup) decides the end reason, and the
 * error should name it, not "connection closed". A VMM that runs on costs
 * VMM_END_WAIT_MS once, on this failure path only. */
void wait_vmm_end_locked(struct srv *s, struct sandbox *sb)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += VMM_END_WAIT_MS / 1000;
	while (!sb->exited && sb->state != SB_ENDED)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
}

static void *exec_thread(void *arg)
{
	struct exec *ex = arg;
	struct srv *s = ex->s;
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	struct tvm_job j;
	struct tvm_job_result res = { 0 };
	int r;

	tvm_job_init(&j);
	j.argv = (const char *const *)ex->argv;
	j.env = (const char *const *)ex->env;
	j.cwd = ex->cwd;
	j.uid = j.gid = ex->uid;
	j.timeout_ms = ex->timeout_ms;
	j.mem_max_bytes = (uint64_t)ex->mem_mib << 20;
	j.pids_max = ex->pids_max;
	j.stdout_cap = j.stderr_cap = ex->out_cap;
	j.stdin_data = ex->in;
	j.stdin_len = ex->in_len;
	j.on_output = on_output;
	j.ctx = ex;
	j.stdin_open = ex->stdin_job;
	j.control_fd = ex->ctl[0];
	j.on_control = on_control;
	r = sb_agent(ex->sb, CONNECT_MS, &a, &e);
	if (!r)
		r = tvm_agent_exec(a, &j, &res, &e);
	tvm_agent_close(a);

	pthread_mutex_lock(&s->mu);
	if (r)
		wait_vmm_end_locked(s, ex->sb);
	if (!r) {
		ex->res = res;
		ex->res.stdout_truncated |= ex->dropped[1];
		ex->res.stderr_truncated |= ex->dropped[2];
		ex->state = EX_EXITED;
	} else {
		ex->state = EX_FAILED;
		if (ex->sb->state == SB_ENDED) {
			snprintf(ex->err_code, sizeof(ex->err_code), "sandbox_ended");
			snprintf(ex->err_msg, sizeof(ex->err_msg), "the sandbox ended (%s) while the command ran",
				 ex->sb->end_reason ? ex->sb->end_reason : "killed");
		} else {
			snprintf(ex->err_code, sizeof(ex->err_code), "guest_error");
			snprintf(ex->err_msg, sizeof(ex->err_msg), "%s", e.msg);
		}
	}
	ex->sb->running_execs--;
	ex->sb->last_active_ns = now_ns();
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	audit_exec(ex, "exec_end");
	exec_put(s, ex);
	sb_put(s, ex->sb);
	return NULL;
}

/* Strict base64 (RFC 4648 §4, padded): bytes, or -1. */
static long b64_decode(const char *in, size_t n, uint8_t *out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v = 0;
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			const char *p = in[i + k] ? strchr(al, in[i + k]) : NULL;
			if (in[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || in[i + 3] == '=')) {
				pad++;
				v <<= 6;
				continue;
			}
			if (!p || pad)
				return -1;
			v = v << 6 | (uint32_t)(p - al);
		}
		out[o++] = (uint8_t)(v >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(v >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)v;
	}
	return (long)o;
}

/* The job of an exec request: 0, or -1 after answering. */
static int parse_exec(struct conn *c, struct sandbox *sb, const struct json_doc *d, struct exec *ex, bool *bg)
{
	static const char *const known[] = { "cmd",        "shell",      "envs",
					     "cwd",        "user",       "timeout_s",
					     "stdin_b64",  "stdin",      "max_output_bytes",
					     "background", "memory_mib", "pids_max",
					     NULL };
	int cmd = json_find(d, 0, "cmd"), sh = json_find(d, 0, "shell"), i;
	uint32_t t = 0;

	if (fields_known(c, d, 0, known, "body"))
		return -1;
	if ((cmd >= 0) == (sh >= 0)) {
		conn_error(c, 400, "bad_request", "give exactly one of cmd (an argv array) and shell (a string)");
		return -1;
	}
	if (cmd >= 0) {
		if (d->tok[cmd].type != JSON_ARRAY || d->tok[cmd].size < 1 || d->tok[cmd].size > 4096) {
			conn_error(c, 400, "bad_request", "cmd: an array of 1 to 4096 strings is expected");
			return -1;
		}
		ex->argv = calloc(d->tok[cmd].size + 1, sizeof(char *));
		for (int k = json_first(d, cmd); ex->argv && k >= 0; k = json_next(d, cmd, k)) {
			size_t n = d->tok[k].len + 1;
			char *a = d->tok[k].type == JSON_STRING ? malloc(n) : NULL;
			if (!a || json_get_string(d, k, a, n, NULL)) {
				free(a);
				conn_error(c, 400, "bad_request", "cmd[%u]: a string without NUL is expected",
					   ex->argc);
				return -1;
			}
			ex->argv[ex->argc++] = a;
		}
	} else {
		size_t n = d->tok[sh].len + 1;
		ex->argv = calloc(4, sizeof(char *));
		if (ex->argv) {
			ex->argv[0] = strdup("/bin/sh");
			ex->argv[1] = strdup("-c");
			ex->argv[2] = d->tok[sh].type == JSON_STRING ? malloc(n) : NULL;
			ex->argc = 3;
		}
		if (!ex->argv || !ex->argv[2] || json_get_string(d, sh, ex->argv[2], n, NULL)) {
			conn_error(c, 400, "bad_request", "shell: a string without NUL is expected");
			return -1;
		}
	}
	if (!ex->argv)
		return conn_error(c, 500, "internal", "out of memory"), -1;
	/* The sandbox's environment first, the exec's after it (the later
	 * of two equal names wins in the agent). */
	ex->env = calloc(sb->nenv + 1, sizeof(char *));
	if (!ex->env)
		return conn_error(c, 500, "internal", "out of memory"), -1;
	if (sb->nenv)
		memcpy(ex->env, sb->env, sb->nenv * sizeof(char *));
	ex->nenv = sb->nenv;
	if (env_append(c, d, "envs", &ex->env, &ex->nenv))
		return -1;
	if ((i = json_find(d, 0, "cwd")) >= 0 && !json_is_null(d, i)) {
		char cwd[4096];
		if (json_get_string(d, i, cwd, sizeof(cwd), NULL) || cwd[0] != '/') {
			conn_error(c, 400, "bad_request", "cwd: an absolute path of at most 4095 bytes is expected");
			return -1;
		}
		ex->cwd = strdup(cwd);
	}
	ex->uid = TVM_ID_DEFAULT;
	if ((i = json_find(d, 0, "user")) >= 0 && !json_is_null(d, i)) {
		if (json_str_eq(d, i, "root", 4))
			ex->uid = TVM_ID_ROOT;
		else if (!json_str_eq(d, i, "sandbox", 7)) {
			conn_error(c, 400, "bad_request", "user: \"sandbox\" or \"root\" is expected");
			return -1;
		}
	}
	ex->out_cap = 1u << 20;
	if (field_u32(c, d, 0, "timeout_s", 0, 86400, &t) ||
	    field_u32(c, d, 0, "max_output_bytes", 1, MAX_OUT, &ex->out_cap) ||
	    field_u32(c, d, 0, "memory_mib", 1, 1u << 20, &ex->mem_mib) ||
	    field_u32(c, d, 0, "pids_max", 1, 1u << 22, &ex->pids_max))
		return -1;
	ex->timeout_ms = t * 1000;
	if ((i = json_find(d, 0, "stdin_b64")) >= 0 && !json_is_null(d, i)) {
		size_t n = d->tok[i].len;
		char *text = d->tok[i].type == JSON_STRING ? malloc(n + 1) : NULL;
		long got = -1;

		ex->in = malloc(n / 4 * 3 + 3);
		if (text && ex->in && !json_get_string(d, i, text, n + 1, &n))
			got = b64_decode(text, n, ex->in);
		free(text);
		if (got < 0) {
			conn_error(c, 400, "bad_request", "stdin_b64: base64 (RFC 4648, padded) is expected");
			return -1;
		}
		ex->in_len = (size_t)got;
	}
	if ((i = json_find(d, 0, "stdin")) >= 0 && !json_is_null(d, i) &&
	    (json_get_bool(d, i, &ex->stdin_job) || (ex->stdin_job && ex->in_len))) {
		conn_error(c, 400, "bad_request",
			   "stdin: true or false is expected, and true not with stdin_b64 (send it to .../stdin)");
		return -1;
	}
	ex->stdin_open = ex->stdin_job;
	*bg = false;
	if ((i = json_find(d, 0, "background")) >= 0 && !json_is_null(d, i) && json_get_bool(d, i, bg)) {
		conn_error(c, 400, "bad_request", "background: true or false is expected");
		return -1;
	}
	return 0;
}

/* The fields of a result, into an open object. */
static void result_fields(struct json_w *w, const struct exec *ex)
{
	const struct tvm_job_result *r = &ex->res;

	json_w_key(w, "exec_id", 7);
	json_w_string(w, ex->id, strlen(ex->id));
	json_w_key(w, "exit_code", 9);
	json_w_int(w, r->exit_code);
	json_w_key(w, "signal", 6);
	json_w_int(w, r->signal);
	json_w_key(w, "timed_out", 9);
	json_w_bool(w, r->timed_out);
	json_w_key(w, "stdout_truncated", 16);
	json_w_bool(w, r->stdout_truncated);
	json_w_key(w, "stderr_truncated", 16);
	json_w_bool(w, r->stderr_truncated);
	json_w_key(w, "oom_killed", 10);
	json_w_bool(w, r->oom_killed);
	json_w_key(w, "pids_limited", 12);
	json_w_bool(w, r->pids_limited);
	json_w_key(w, "wall_ms", 7);
	json_w_uint(w, r->wall_ms);
	json_w_key(w, "cpu_ms", 6);
	json_w_uint(w, r->cpu_ms);
	json_w_key(w, "max_rss_kib", 11);
	json_w_uint(w, r->max_rss_kib);
}

/* One stream's bytes, gathered from the log (under mu). */
static void stream_string(struct json_w *w, const struct exec *ex, int stream)
{
	size_t n = 0, o = 0;
	char *b;

	for (size_t i = 0; i < ex->nev; i++)
		n += ex->evs[i].stream == stream ? ex->evs[i].len : 0;
	b = malloc(n + 1);
	if (!b) {
		w->err = -ENOBUFS;
		return;
	}
	for (size_t i = 0; i < ex->nev; i++)
		if (ex->evs[i].stream == stream) {
			memcpy(b + o, ex->data + ex->evs[i].off, ex->evs[i].len);
			o += ex->evs[i].len;
		}
	json_w_string(w, b, n);
	free(b);
}

/* The result object with its output, into w (under mu). */
static void result_object(struct json_w *w, const struct exec *ex)
{
	json_w_obj_begin(w);
	result_fields(w, ex);
	json_w_key(w, "stdout", 6);
	stream_string(w, ex, 1);
	json_w_key(w, "stderr", 6);
	stream_string(w, ex, 2);
	json_w_obj_end(w);
}

/* Answer with the finished exec's result (200) or why it did not run. */
static void send_result(struct conn *c, struct exec *ex)
{
	struct srv *s = c->s;
	size_t cap;
	char *buf;
	struct json_w w;

	pthread_mutex_lock(&s->mu);
	if (ex->state == EX_FAILED) {
		char code[32], msg[300];
		snprintf(code, sizeof(code), "%s", ex->err_code);
		snprintf(msg, sizeof(msg), "%s", ex->err_msg);
		pthread_mutex_unlock(&s->mu);
		if (!strcmp(code, "sandbox_ended"))
			conn_error_reason(c, 410, "sandbox_expired", ex->sb->end_reason ? ex->sb->end_reason : "killed",
					  "%s", msg);
		else
			conn_error(c, 502, code, "%s", msg);
		return;
	}
	/* Exited: its log no longer changes and lives while we hold it
	 * (users): encoded without the lock. */
	pthread_mutex_unlock(&s->mu);
	/* Escaped text is at most 6 bytes per byte (\u00XX). */
	cap = 6 * ex->len + 4096;
	buf = malloc(cap);
	if (!buf) {
		conn_error(c, 500, "internal", "out of memory for the result");
		return;
	}
	json_w_init(&w, buf, cap);
	result_object(&w, ex);
	conn_json(c, 200, &w);
	free(buf);
}

static int send_line(struct conn *c, struct json_w *w)
{
	size_t len;

	if (json_w_finish(w, &len) || len >= w->cap)
		return -ENOBUFS;
	w->buf[len++] = '\n';
	return conn_chunk(c, w->buf, len);
}

/* Stream the exec's events from output offset since: start, the kept
 * output, then live, then the terminal event. */
static void stream_events(struct conn *c, struct exec *ex, uint64_t since)
{
	struct srv *s = c->s;
	char small[1024];
	struct json_w w;
	size_t i = 0;

	if (conn_stream_begin(c, 200, "application/x-ndjson"))
		return;
	json_w_init(&w, small, sizeof(small));
	json_w_obj_begin(&w);
	json_w_key(&w, "type", 4);
	json_w_string(&w, "start", 5);
	json_w_key(&w, "exec_id", 7);
	json_w_string(&w, ex->id, strlen(ex->id));
	json_w_obj_end(&w);
	if (send_line(c, &w))
		return;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (i < ex->nev) {
			struct ev e = ex->evs[i++];
			size_t cap = (size_t)e.len / 3 * 4 + 256;
			char *buf;
			uint8_t *copy;

			if (e.off + e.len <= since)
				continue;
			buf = malloc(cap);
			copy = malloc(e.len ? e.len : 1);
			if (!buf || !copy) {
				free(buf);
				free(copy);
				pthread_mutex_unlock(&s->mu);
				return;
			}
			memcpy(copy, ex->data + e.off, e.len);
			pthread_mutex_unlock(&s->mu);
			json_w_init(&w, buf, cap);
			json_w_obj_begin(&w);
			json_w_key(&w, "type", 4);
			json_w_string(&w, e.stream == 1 ? "stdout" : "stderr", 6);
			json_w_key(&w, "offset", 6);
			json_w_uint(&w, e.off);
			json_w_key(&w, "data", 4);
			json_w_base64(&w, copy, e.len);
			json_w_obj_end(&w);
			int r = send_line(c, &w);
			free(buf);
			free(copy);
			if (r)
				return;
			pthread_mutex_lock(&s->mu);
		}
		if (ex->state != EX_RUNNING) {
			json_w_init(&w, small, sizeof(small));
			json_w_obj_begin(&w);
			json_w_key(&w, "type", 4);
			if (ex->state == EX_EXITED) {
				json_w_string(&w, "exit", 4);
				result_fields(&w, ex);
			} else {
				json_w_string(&w, "error", 5);
				json_w_key(&w, "error", 5);
				json_w_string(&w, ex->err_code, strlen(ex->err_code));
				json_w_key(&w, "message", 7);
				json_w_string(&w, ex->err_msg, strlen(ex->err_msg));
			}
			json_w_obj_end(&w);
			pthread_mutex_unlock(&s->mu);
			if (!send_line(c, &w))
				conn_stream_end(c);
			return;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += KEEPALIVE_S;
		size_t seen = ex->nev;
		enum ex_state state = ex->state;
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && ex->nev == seen && ex->state == state) {
			pthread_mutex_unlock(&s->mu);
			if (conn_chunk(c, "{\"type\":\"keepalive\"}\n", 21))
				return;
			pthread_mutex_lock(&s->mu);
		}
	}
}

void exec_create(struct conn *c, const struct http_request *r, struct sandbox *sb)
{
	struct srv *s = c->s;
	struct body b;
	struct exec *ex = calloc(1, sizeof(*ex));
	bool bg = false, stream;
	const struct http_str *acc = &r->accept;
	pthread_t t;
	pthread_attr_t at;

	stream = acc->p && memmem(acc->p, acc->n, "application/x-ndjson", 20);
	if (!ex) {
		conn_error(c, 500, "internal", "out of memory");
		return;
	}
	ex->s = s;
	ex->sb = sb;
	ex->ctl[0] = ex->ctl[1] = -1;
	if (pipe2(ex->ctl, O_CLOEXEC | O_NONBLOCK) < 0) {
		conn_error(c, 503, "capacity", "no file descriptors left for an exec");
		exec_free(ex);
		return;
	}
	if (body_parse(c, &b) || parse_exec(c, sb, &b.d, ex, &bg)) {
		body_free(&b);
		exec_free(ex);
		return;
	}
	body_free(&b);
	memcpy(ex->id, "ex_", 3);
	random_hex(ex->id + 3, 8);

	pthread_mutex_lock(&s->mu);
	while (sb->state == SB_RUNNING && sb->nexecs >= s->cfg.kept_execs && forget_oldest_locked(sb))
		;
	if (sb->state != SB_RUNNING || sb->running_execs >= MAX_RUNNING || sb->nexecs >= s->cfg.kept_execs) {
		bool ended = sb->state == SB_ENDED;
		unsigned running = sb->running_execs, kept = sb->nexecs;
		pthread_mutex_unlock(&s->mu);
		exec_free(ex);
		if (ended)
			api_ended(c, sb);
		else if (running >= MAX_RUNNING)
			conn_error(c, 429, "quota_exceeded", "%u execs already run in this sandbox (the limit)",
				   running);
		else
			conn_error(c, 429, "quota_exceeded",
				   "the %u execs this sandbox keeps are all in use (read by a request)", kept);
		return;
	}
	ex->users = 2; /* its thread's and ours */
	ex->next = sb->execs;
	sb->execs = ex;
	sb->nexecs++;
	sb->running_execs++;
	sb->refs++; /* the thread's */
	pthread_mutex_unlock(&s->mu);
	audit_exec(ex, "exec_start");

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 << 10);
	if (pthread_create(&t, &at, exec_thread, ex)) {
		pthread_mutex_lock(&s->mu);
		ex->state = EX_FAILED;
		snprintf(ex->err_code, sizeof(ex->err_code), "internal");
		snprintf(ex->err_msg, sizeof(ex->err_msg), "no thread for the exec");
		sb->running_execs--;
		sb->refs--;
		ex->users--;
		pthread_mutex_unlock(&s->mu);
	}
	pthread_attr_destroy(&at);

	if (bg) {
		char buf[128];
		struct json_w w;

		json_w_init(&w, buf, sizeof(buf));
		json_w_obj_begin(&w);
		json_w_key(&w, "exec_id", 7);
		json_w_string(&w, ex->id, strlen(ex->id));
		json_w_obj_end(&w);
		conn_json(c, 201, &w);
	} else if (stream) {
		stream_events(c, ex, 0);
	} else {
		pthread_mutex_lock(&s->mu);
		while (ex->state == EX_RUNNING)
			pthread_cond_wait(&s->cv, &s->mu);
		pthread_mutex_unlock(&s->mu);
		send_result(c, ex);
	}
	exec_put(s, ex);
}

/* The exec eid of sb, held (exec_put), or NULL after a 404 answer. */
static struct exec *find_exec(struct conn *c, struct sandbox *sb, const char *eid)
{
	struct exec *ex;

	pthread_mutex_lock(&c->s->mu);
	for (ex = sb->execs; ex && strcmp(ex->id, eid); ex = ex->next)
		;
	if (ex)
		ex->users++;
	pthread_mutex_unlock(&c->s->mu);
	if (!ex)
		conn_error(c, 404, "exec_not_found", "no exec %s in this sandbox (or one so old it was forgotten)",
			   eid);
	return ex;
}

static void get_held(struct conn *c, struct exec *ex)
{
	char *buf;
	size_t cap;
	struct json_w w;

	/* Once it has exited its log no longer changes (and lives while we
	 * hold it): the output is encoded without the lock. */
	pthread_mutex_lock(&c->s->mu);
	enum ex_state st = ex->state;
	char code[32], msg[300];
	snprintf(code, sizeof(code), "%s", ex->err_code);
	snprintf(msg, sizeof(msg), "%s", ex->err_msg);
	pthread_mutex_unlock(&c->s->mu);
	cap = (st == EX_EXITED ? 6 * ex->len : 0) + 8192;
	buf = malloc(cap);
	if (!buf) {
		conn_error(c, 500, "internal", "out of memory for the result");
		return;
	}
	json_w_init(&w, buf, cap);
	json_w_obj_begin(&w);
	json_w_key(&w, "exec_id", 7);
	json_w_string(&w, ex->id, strlen(ex->id));
	json_w_key(&w, "state", 5);
	json_w_string(&w,
		      st == EX_RUNNING  ? "running"
		      : st == EX_EXITED ? "exited"
					: "failed",
		      st == EX_RUNNING ? 7 : 6);
	json_w_key(&w, "result", 6);
	if (st == EX_EXITED)
		result_object(&w, ex);
	else
		json_w_null(&w);
	json_w_key(&w, "error", 5);
	if (st == EX_FAILED) {
		json_w_obj_begin(&w);
		json_w_key(&w, "error", 5);
		json_w_string(&w, code, strlen(code));
		json_w_key(&w, "message", 7);
		json_w_string(&w, msg, strlen(msg));
		json_w_obj_end(&w);
	} else {
		json_w_null(&w);
	}
	json_w_obj_end(&w);
	conn_json(c, 200, &w);
	free(buf);
}

/* Names of the signals a client may send, as kill(1) spells them. */
static int signal_number(const struct json_doc *d, int i)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = { { "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		      { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
		      { "STOP", SIGSTOP }, { "ALRM", SIGALRM } };
	char name[16];
	int64_t v;

	if (json_get_int64(d, i, &v) == 0)
		return v >= 1 && v <= 64 ? (int)v : -1;
	if (json_get_string(d, i, name, sizeof(name), NULL))
		return -1;
	const char *n = strncmp(name, "SIG", 3) ? name : name + 3;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (!strcmp(n, names[k].name))
			return names[k].sig;
	return -1;
}

void exec_get(struct conn *c, struct sandbox *sb, const char *eid)
{
	struct exec *ex = find_exec(c, sb, eid);

	if (ex) {
		get_held(c, ex);
		exec_put(c->s, ex);
	}
}

static void control_held(struct conn *c, const struct http_request *r, struct exec *ex, const char *eid,
			 bool stdin_route)
{
	struct srv *s = c->s;
	char *data = NULL, flag[8] = "";
	size_t len = 0;
	int sig = 0, eof = 0;

	if (stdin_route) {
		int q = query_get(r, "eof", flag, sizeof(flag));
		if (q < 0 || (q > 0 && strcmp(flag, "1") && strcmp(flag, "0") && strcmp(flag, "true") &&
			      strcmp(flag, "false"))) {
			conn_error(c, 400, "bad_request", "eof: 1 or 0 is expected");
			return;
		}
		eof = q > 0 && (!strcmp(flag, "1") || !strcmp(flag, "true"));
		int rr = conn_body_all(c, 1u << 20, &data, &len);
		if (rr) {
			conn_error(c, rr == -EFBIG ? 413 : 400, rr == -EFBIG ? "payload_too_large" : "bad_request",
				   "stdin: the body (at most 1 MiB per request) could not be read");
			return;
		}
	} else {
		static const char *const known[] = { "signal", NULL };
		struct body b;
		int i;

		if (body_parse(c, &b) || fields_known(c, &b.d, 0, known, "body")) {
			body_free(&b);
			return;
		}
		i = json_find(&b.d, 0, "signal");
		sig = i < 0 ? -1 : signal_number(&b.d, i);
		body_free(&b);
		if (sig < 0) {
			conn_error(c, 400, "bad_request",
				   "signal: a number from 1 to 64 or a name such as \"SIGTERM\"");
			return;
		}
	}
	pthread_mutex_lock(&s->mu);
	const char *why = ex->state != EX_RUNNING                       ? "has ended"
			  : stdin_route && !ex->stdin_job               ? "was started without \"stdin\": true"
			  : stdin_route && !ex->stdin_open              ? "has its stdin closed already (eof=1)"
			  : stdin_route && ex->q_len + len > (8u << 20) ? "has 8 MiB of stdin not yet taken"
			  : !stdin_route && ex->q_nsig == 8             ? "has 8 signals not yet sent"
									: NULL;
	if (!why) {
		if (len) {
			uint8_t *nq = realloc(ex->q, ex->q_len + len);
			if (nq) {
				memcpy(nq + ex->q_len, data, len);
				ex->q = nq;
				ex->q_len += len;
			} else {
				why = "is out of memory";
			}
		}
		if (eof)
			ex->stdin_open = false, ex->q_close = true;
		if (sig)
			ex->q_sig[ex->q_nsig++] = sig;
	}
	pthread_mutex_unlock(&s->mu);
	free(data);
	if (why) {
		conn_error(c, 409, "conflict", "exec %s %s", eid, why);
		return;
	}
	if (write(ex->ctl[1], "x", 1) < 0 && errno != EAGAIN) {
		conn_error(c, 500, "internal", "exec %s: its control pipe: %s", eid, strerror(errno));
		return;
	}
	conn_respond(c, 204, NULL, NULL, 0, NULL);
}

void exec_control(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *eid, bool stdin_route)
{
	struct exec *ex = find_exec(c, sb, eid);

	if (ex) {
		control_held(c, r, ex, eid, stdin_route);
		exec_put(c->s, ex);
	}
}

void exec_events(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *eid)
{
	struct exec *ex = find_exec(c, sb, eid);
	char num[32];
	unsigned long long since = 0;
	char *end;
	int q;

	if (!ex)
		return;
	q = query_get(r, "since", num, sizeof(num));
	if (q < 0 || (q > 0 && (!*num || (since = strtoull(num, &end, 10), *end) || *num == '-')))
		conn_error(c, 400, "bad_request", "since: a byte offset (a decimal number) is expected");
	else
		stream_events(c, ex, since);
	exec_put(c->s, ex);
}

/* For exec_simple: stdout's first cap bytes (a listing's start), stderr's
 * last cap bytes (where a failure says why). */
struct capture {
	char *buf[3];
	size_t len[3], cap;
};

static void capture_out(void *ctx, int stream, const void *p, size_t n)
{
	struct capture *k = ctx;
	size_t keep;

	if (stream == 1) {
		n = n < k->cap - k->len[1] ? n : k->cap - k->len[1];
		memcpy(k->buf[1] + k->len[1], p, n);
		k->len[1] += n;
	} else if (stream == 2) {
		if (n >= k->cap) { /* this chunk's end is all that stays */
			p = (const char *)p + (n - k->cap);
			n = k->cap;
		}
		keep = k->len[2] + n <= k->cap ? k->len[2] : k->cap - n;
		memmove(k->buf[2], k->buf[2] + (k->len[2] - keep), keep);
		memcpy(k->buf[2] + keep, p, n);
		k->len[2] = keep + n;
	}
}

int exec_simple(struct sandbox *sb, const char *const *argv, uint32_t uid, uint32_t timeout_ms, uint32_t cap,
		struct tvm_job_result *res, char **out, size_t *out_len, char **err_out, size_t *err_len,
		struct tvm_err *e)
{
	struct capture k = { .cap = cap };
	struct tvm_agent *a = NULL;
	struct tvm_job j;
	int r;

	k.buf[1] = malloc(cap + 1);
	k.buf[2] = malloc(cap + 1);
	if (!k.buf[1] || !k.buf[2]) {
		free(k.buf[1]);
		free(k.buf[2]);
		return tvm_errf(e, ENOMEM, "out of memory");
	}
	tvm_job_init(&j);
	j.argv = argv;
	j.uid = j.gid = uid;
	j.stdout_cap = cap;
	j.stderr_cap = MAX_OUT; /* forwarded, for its tail */
	j.timeout_ms = timeout_ms;
	j.on_output = capture_out;
	j.ctx = &k;
	r = sb_agent(sb, CONNECT_MS, &a, e);
	if (!r)
		r = tvm_agent_exec(a, &j, res, e);
	tvm_agent_close(a);
	k.buf[1][k.len[1]] = 0;
	k.buf[2][k.len[2]] = 0;
	*out = k.buf[1];
	*out_len = k.len[1];
	*err_out = k.buf[2];
	if (err_len)
		*err_len = k.len[2];
	return r;
}
