/* Host side of the agent protocol (guest/PROTOCOL.md): one connection,
 * blocking calls, a poll loop while a job runs so stdin and output flow at
 * the same time. Every frame from the guest goes through the shared codec
 * (guest/protocol.c), which bounds every length before use. */
#include "vmm/agent_client.h"
#include "vmm/tinyvmm.h"
#include "vmm/core/err.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "guest/protocol.h"
#include "vmm/core/clock.h"

#define CHUNK (64u << 10) /* bytes of stdin/file data per frame */
#define DEFAULT_CAP (1u << 20)

struct tvm_agent {
	int fd;
	uint32_t next_id;
	struct tvp_decoder dec;
	uint32_t job_id; /* the job tvm_agent_exec runs now, 0: none */
	bool stdin_open; /* and it takes tvm_agent_job_stdin */
};

static int send_all(struct tvm_agent *a, const void *buf, size_t len, struct tvm_err *e)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(a->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = a->fd, .events = POLLOUT };
			poll(&pf, 1, -1);
			continue;
		}
		if (n <= 0)
			return tvm_errf(e, n < 0 ? errno : EPIPE, "agent: send: %s",
					n < 0 ? strerror(errno) : "closed");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_msg(struct tvm_agent *a, const struct tvp_msg *m, struct tvm_err *e)
{
	size_t need = 0;
	uint8_t small[512], *buf = small;
	int r = tvp_encode(m, NULL, 0, &need);

	if (r != TVP_E_NOSPACE && r != 0)
		return tvm_errf(e, EINVAL, "agent: cannot encode %s: %s", tvp_type_name(m->type), tvp_strerror(r));
	if (need > sizeof(small) && !(buf = malloc(need)))
		return tvm_errf(e, ENOMEM, "agent: out of memory");
	r = tvp_encode(m, buf, need, &need);
	r = r ? tvm_errf(e, EINVAL, "agent: cannot encode %s: %s", tvp_type_name(m->type), tvp_strerror(r))
	      : send_all(a, buf, need, e);
	if (buf != small)
		free(buf);
	return r;
}

/* A data frame (STDIN, FILE_DATA) straight from the caller's bytes. */
static int send_data(struct tvm_agent *a, uint8_t type, uint32_t id, const void *data, size_t len, struct tvm_err *e)
{
	uint8_t hdr[TVP_HDR_SIZE];
	int r;

	tvp_put_header(hdr, type, 0, id, (uint32_t)len);
	r = send_all(a, hdr, sizeof(hdr), e);
	return r ? r : send_all(a, data, len, e);
}

/* Read until a whole frame is there (timeout_ms < 0: wait forever) and
 * parse it. The message points into the decoder until the next call. */
static int recv_msg(struct tvm_agent *a, struct tvp_msg *m, int timeout_ms, struct tvm_err *e)
{
	/* The time is for the whole frame: a peer sending a byte now and then
	 * must not stretch it. */
	uint64_t end = clock_mono_ns() + (timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000u : 0);
	struct tvp_frame f;
	char why[128];

	for (;;) {
		int r = tvp_decoder_next(&a->dec, &f);
		size_t avail;
		void *space;
		ssize_t n;

		if (r < 0)
			return tvm_errf(e, EPROTO, "agent: bad frame: %s", tvp_decoder_error(&a->dec));
		if (r == 1) {
			r = tvp_parse(&f, m, why, sizeof(why));
			if (r)
				return tvm_errf(e, EPROTO, "agent: bad %s message: %s",
						tvp_type_name(f.type) ? tvp_type_name(f.type) : "unknown", why);
			return 0;
		}
		if (timeout_ms >= 0) {
			struct pollfd pf = { .fd = a->fd, .events = POLLIN };
			uint64_t now = clock_mono_ns();

			r = poll(&pf, 1, now >= end ? 0 : (int)((end - now + 999999) / 1000000));
			if (r == 0)
				return tvm_errf(e, ETIMEDOUT, "agent: no answer within %d ms", timeout_ms);
			if (r < 0)
				continue; /* EINTR: a blocking recv now could wait forever */
		}
		space = tvp_decoder_space(&a->dec, &avail);
		if (!space)
			return tvm_errf(e, EPROTO, "agent: %s", tvp_decoder_error(&a->dec));
		n = recv(a->fd, space, avail, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return tvm_errf(e, n < 0 ? errno : ECONNRESET, "agent: connection %s",
					n < 0 ? strerror(errno) : "closed");
		tvp_decoder_commit(&a->dec, (size_t)n);
	}
}

/* The agent's ERROR text is the guest's: control bytes (newlines, terminal
 * escapes) become '?' so the message stays one harmless line. */
static int agent_error(const struct tvp_msg *m, struct tvm_err *e)
{
	int err = m->error.sys_errno > 0 ? m->error.sys_errno : EPROTO;
	char text[sizeof(e->msg)];
	size_t n = m->error.message.len < sizeof(text) - 1 ? m->error.message.len : sizeof(text) - 1;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)m->error.message.p[i];
		text[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	text[n] = 0;
	return tvm_errf(e, err, "agent: %s", text);
}

int tvm_agent_open(int fd, int timeout_ms, struct tvm_agent **out, struct tvm_err *e)
{
	struct tvm_agent *a = calloc(1, sizeof(*a));
	struct tvp_msg m;
	int r;

	*out = NULL;
	if (!a) {
		close(fd);
		return tvm_errf(e, ENOMEM, "agent: out of memory");
	}
	a->fd = fd;
	tvp_decoder_init(&a->dec, 0);
	r = recv_msg(a, &m, timeout_ms, e);
	if (!r && m.type == TVP_ERROR && m.error.code == TVP_ERR_LIMIT)
		r = tvm_errf(e, EBUSY, "agent: every connection it takes is in use");
	else if (!r && m.type != TVP_READY)
		r = tvm_errf(e, EPROTO, "agent: expected READY, got %s", tvp_type_name(m.type));
	if (r) {
		tvm_agent_close(a);
		return r;
	}
	*out = a;
	return 0;
}

void tvm_agent_close(struct tvm_agent *a)
{
	if (!a)
		return;
	close(a->fd);
	tvp_decoder_free(&a->dec);
	free(a);
}

static int fill_result(const struct tvp_msg *m, struct tvm_job_result *r, struct tvm_err *e)
{
	/* PROTOCOL.md: exit_code 0..255, signal 0..64; anything else would
	 * reach the caller's exit status mangled (256 reads as success). */
	if (m->result.exit_code < 0 || m->result.exit_code > 255 || m->result.signal > 64)
		return tvm_errf(e, EPROTO, "agent: bad RESULT: exit code %d, signal %u", (int)m->result.exit_code,
				m->result.signal);
	*r = (struct tvm_job_result){
		.exit_code = m->result.exit_code,
		.signal = (int)m->result.signal,
		.timed_out = !!(m->flags & TVP_RESULT_TIMED_OUT),
		.stdout_truncated = !!(m->flags & TVP_RESULT_STDOUT_TRUNC),
		.stderr_truncated = !!(m->flags & TVP_RESULT_STDERR_TRUNC),
		.oom_killed = !!(m->flags & TVP_RESULT_OOM_KILLED),
		.pids_limited = !!(m->flags & TVP_RESULT_PIDS_LIMITED),
		.wall_ms = m->result.wall_us / 1000,
		.cpu_ms = (m->result.user_us + m->result.sys_us) / 1000,
		.max_rss_kib = m->result.max_rss_kib,
	};
	return 0;
}

/* Feed the next piece of stdin without blocking: partial frames continue
 * on the next call. Returns 0, or -errno. */
struct stdin_feed {
	const uint8_t *data;
	size_t len, off; /* job bytes sent so far */
	uint8_t frame[TVP_HDR_SIZE + CHUNK];
	size_t flen, foff; /* current frame and how much of it went out */
	int closed;        /* STDIN_CLOSE queued */
};

static int feed_stdin(struct tvm_agent *a, uint32_t id, struct stdin_feed *s, struct tvm_err *e)
{
	if (s->foff == s->flen) {
		size_t n = s->len - s->off < CHUNK ? s->len - s->off : CHUNK;

		if (n) {
			tvp_put_header(s->frame, TVP_STDIN, 0, id, (uint32_t)n);
			memcpy(s->frame + TVP_HDR_SIZE, s->data + s->off, n);
			s->off += n;
		} else {
			tvp_put_header(s->frame, TVP_STDIN_CLOSE, 0, id, 0);
			s->closed = 1;
		}
		s->flen = TVP_HDR_SIZE + n;
		s->foff = 0;
	}
	ssize_t w = send(a->fd, s->frame + s->foff, s->flen - s->foff, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (w < 0)
		return tvm_errf(e, errno, "agent: send stdin: %s", strerror(errno));
	s->foff += (size_t)w;
	return 0;
}

_Static_assert(TVM_ID_DEFAULT == TVP_ID_DEFAULT, "the public default id is the wire's");

void tvm_job_init(struct tvm_job *j)
{
	*j = (struct tvm_job){ .uid = TVM_ID_DEFAULT, .gid = TVM_ID_DEFAULT };
}

/* A job's uid or gid as the agent reads it (tinyvmm.h): zero, the value a
 * job left unset, is the default user; root only as TVM_ID_ROOT. */
static uint32_t wire_id(uint32_t id)
{
	if (id == 0)
		return TVP_ID_DEFAULT;
	return id == TVM_ID_ROOT ? 0 : id;
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC ns), for poll: -1
 * without one (0). */
static int ms_left(uint64_t deadline)
{
	uint64_t now = clock_mono_ns();

	if (!deadline)
		return -1;
	if (now >= deadline)
		return 0;
	return (deadline - now) / 1000000 >= INT_MAX ? INT_MAX : (int)((deadline - now + 999999) / 1000000);
}

/* The guest did not end the job by its timeout + grace (stopped, or not
 * honouring it): say it timed out, and shut our sending side, which tells
 * the agent, should it run again, to kill the job (PROTOCOL.md). */
static void host_timeout(struct tvm_agent *a, uint64_t started, struct tvm_job_result *res)
{
	shutdown(a->fd, SHUT_WR);
	*res = (struct tvm_job_result){ .exit_code = 128 + SIGKILL,
					.signal = SIGKILL,
					.timed_out = 1,
					.host_timed_out = 1,
					.wall_ms = (clock_mono_ns() - started) / 1000000 };
}

int tvm_agent_exec(struct tvm_agent *a, const struct tvm_job *j, struct tvm_job_result *res, struct tvm_err *e)
{
	uint32_t id = ++a->next_id;
	size_t argc = 0, envc = 0;
	struct stdin_feed *in = NULL;
	struct tvp_msg m = { .type = TVP_EXEC, .id = id };
	uint32_t left[3]; /* output bytes still forwarded per stream: the caps asked for */
	int trunc[3] = { 0 };
	uint64_t started = clock_mono_ns(), deadline = 0;
	int r, wait_ms;

	if (j->timeout_ms)
		deadline = started + ((uint64_t)j->timeout_ms + TVM_JOB_HOST_GRACE_MS(j->timeout_ms)) * 1000000u;
	while (j->argv && j->argv[argc])
		argc++;
	while (j->env && j->env[envc])
		envc++;
	if (!argc)
		return tvm_errf(e, EINVAL, "job: empty argv");
	if (j->mem_max_bytes && j->mem_max_bytes < TVM_JOB_MEM_MIN)
		return tvm_errf(e, EINVAL, "job: a memory limit of %llu bytes is below the least, 1 MiB",
				(unsigned long long)j->mem_max_bytes);
	if (j->stdin_open && j->stdin_len)
		return tvm_errf(e, EINVAL, "job: stdin_open with stdin_data: send the data with tvm_agent_job_stdin");
	m.exec = (struct tvp_exec){
		.uid = wire_id(j->uid),
		.gid = wire_id(j->gid),
		.timeout_ms = j->timeout_ms,
		.stdout_cap = j->stdout_cap ? j->stdout_cap : DEFAULT_CAP,
		.stderr_cap = j->stderr_cap ? j->stderr_cap : DEFAULT_CAP,
		.mem_max = j->mem_max_bytes,
		.pids_max = j->pids_max,
		.cwd = tvp_cstr(j->cwd),
		.argv = { .count = (uint32_t)argc, .items = j->argv },
		.env = { .count = (uint32_t)envc, .items = j->env },
	};
	left[1] = m.exec.stdout_cap;
	left[2] = m.exec.stderr_cap;
	if (j->stdin_len) {
		/* Streamed, so that a big stdin never has to fit one frame and
		 * never blocks the output coming back. */
		m.flags |= TVP_EXEC_STDIN_STREAM;
		in = calloc(1, sizeof(*in));
		if (!in)
			return tvm_errf(e, ENOMEM, "job: out of memory");
		in->data = j->stdin_data;
		in->len = j->stdin_len;
	}
	if (j->stdin_open)
		m.flags |= TVP_EXEC_STDIN_STREAM;
	r = send_msg(a, &m, e);
	a->job_id = id;
	a->stdin_open = j->stdin_open;
	while (!r) {
		struct pollfd pfs[2] = { { .fd = a->fd, .events = POLLIN }, { .fd = j->control_fd, .events = POLLIN } };
		struct pollfd *pf = &pfs[0];

		if (in && !(in->closed && in->foff == in->flen))
			pf->events |= POLLOUT;
		/* Checked on every frame: a guest streaming output must not
		 * keep us past the deadline either. */
		if ((wait_ms = ms_left(deadline)) == 0) {
			host_timeout(a, started, res);
			break;
		}
		/* Only buffered frames left, or new bytes: recv_msg decides. */
		if (tvp_decoder_pending(&a->dec) == 0 && poll(pfs, j->on_control ? 2 : 1, wait_ms) < 0 &&
		    errno != EINTR) {
			r = tvm_errf(e, errno, "job: poll: %s", strerror(errno));
			break;
		}
		if (j->on_control && (pfs[1].revents & (POLLIN | POLLHUP | POLLERR)))
			j->on_control(j->ctx, a);
		if (pf->revents & POLLOUT) {
			r = feed_stdin(a, id, in, e);
			if (r)
				break;
		}
		if (!(pf->revents & (POLLIN | POLLHUP | POLLERR)) && tvp_decoder_pending(&a->dec) == 0)
			continue;
		r = recv_msg(a, &m, wait_ms, e);
		if (r == -ETIMEDOUT && deadline) {
			r = 0; /* a frame begun and never finished */
			host_timeout(a, started, res);
			break;
		}
		if (r)
			break;
		if (m.id != id)
			continue; /* another job's frame on a shared connection: not ours */
		if (m.type == TVP_STDOUT || m.type == TVP_STDERR) {
			/* The agent enforces the caps; enforce them again, callers
			 * may keep what they are given (--json does). */
			int s = m.type == TVP_STDOUT ? 1 : 2;
			uint32_t n = m.data.data.len;

			if (n > left[s]) {
				n = left[s];
				trunc[s] = 1;
			}
			left[s] -= n;
			if (n && j->on_output)
				j->on_output(j->ctx, s, m.data.data.p, n);
		} else if (m.type == TVP_RESULT) {
			r = fill_result(&m, res, e);
			if (!r) {
				res->stdout_truncated |= trunc[1];
				res->stderr_truncated |= trunc[2];
			}
			break;
		} else if (m.type == TVP_ERROR) {
			r = agent_error(&m, e);
		}
	}
	a->job_id = 0;
	free(in);
	return r;
}

int tvm_agent_job_stdin(struct tvm_agent *a, const void *data, size_t len, struct tvm_err *e)
{
	struct tvp_msg m = { .type = TVP_STDIN_CLOSE, .id = a->job_id };
	int r = 0;

	if (!a->job_id)
		return tvm_errf(e, ESRCH, "job: none running");
	if (!a->stdin_open)
		return tvm_errf(e, EINVAL, "job: its stdin is not open (stdin_open)");
	if (!len) {
		a->stdin_open = false;
		return send_msg(a, &m, e);
	}
	for (size_t off = 0; !r && off < len; off += CHUNK)
		r = send_data(a, TVP_STDIN, a->job_id, (const uint8_t *)data + off,
			      len - off < CHUNK ? len - off : CHUNK, e);
	return r;
}

int tvm_agent_job_signal(struct tvm_agent *a, int sig, struct tvm_err *e)
{
	struct tvp_msg m = { .type = TVP_KILL, .id = a->job_id, .kill = { .signal = (uint32_t)sig } };

	if (!a->job_id)
		return tvm_errf(e, ESRCH, "job: none running");
	if (sig < 1 || sig > 64)
		return tvm_errf(e, EINVAL, "job: signal %d: 1 to 64 is expected", sig);
	return send_msg(a, &m, e);
}

/* Wait for the answer to a request: OK (0) or ERROR (-errno). */
static int wait_ok(struct tvm_agent *a, uint32_t id, struct tvp_msg *m, struct tvm_err *e)
{
	for (;;) {
		int r = recv_msg(a, m, -1, e);
		if (r)
			return r;
		if (m->id != id)
			continue;
		if (m->type == TVP_OK)
			return 0;
		if (m->type == TVP_ERROR)
			return agent_error(m, e);
	}
}

int tvm_agent_put_stream(struct tvm_agent *a, const char *path, uint32_t mode, uint32_t uid,
			 ssize_t (*read_fn)(void *ctx, void *buf, size_t cap), void *ctx, uint64_t *size,
			 struct tvm_err *e)
{
	uint32_t id = ++a->next_id;
	struct tvp_msg m = { .type = TVP_PUT_FILE, .flags = TVP_PUT_MKDIRS, .id = id };
	uint64_t total = 0;
	uint8_t *buf = malloc(CHUNK);
	int r;

	if (!buf)
		return tvm_errf(e, ENOMEM, "put %s: out of memory", path);
	m.put = (struct tvp_put_file){ .mode = mode, .uid = wire_id(uid), .gid = wire_id(uid), .path = tvp_cstr(path) };
	r = send_msg(a, &m, e);
	while (!r) {
		ssize_t n = read_fn(ctx, buf, CHUNK);

		if (n < 0) {
			r = tvm_errf(e, (int)-n, "source: %s", strerror((int)-n));
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		r = send_data(a, TVP_FILE_DATA, id, buf, (size_t)n, e);
	}
	free(buf);
	if (!r) {
		m = (struct tvp_msg){ .type = TVP_FILE_END, .id = id, .file_end = { .size = total } };
		r = send_msg(a, &m, e);
	}
	if (!r)
		r = wait_ok(a, id, &m, e);
	if (r)
		tvm_err_prefix(e, "put %s", path);
	else if (size)
		*size = total;
	return r;
}

int tvm_agent_get_stream(struct tvm_agent *a, const char *path, uint64_t max_bytes, uint32_t uid,
			 int (*write_fn)(void *ctx, const void *buf, size_t len), void *ctx, uint64_t *size,
			 struct tvm_err *e)
{
	uint32_t id = ++a->next_id;
	struct tvp_msg m = { .type = TVP_GET_FILE, .id = id };
	uint64_t have = 0;
	int r;

	m.get = (struct tvp_get_file){
		.max_bytes = max_bytes, .uid = wire_id(uid), .gid = wire_id(uid), .path = tvp_cstr(path)
	};
	r = send_msg(a, &m, e);
	while (!r) {
		r = recv_msg(a, &m, -1, e);
		if (r || m.id != id)
			continue;
		if (m.type == TVP_ERROR) {
			r = agent_error(&m, e);
		} else if (m.type == TVP_FILE_DATA) {
			/* The agent enforces max_bytes; check it again, the peer
			 * is not trusted with our memory. */
			if (m.data.data.len > max_bytes - have) {
				r = tvm_errf(e, EFBIG, "more than %llu bytes", (unsigned long long)max_bytes);
				break;
			}
			have += m.data.data.len;
			r = write_fn(ctx, m.data.data.p, m.data.data.len);
			if (r)
				r = tvm_errf(e, -r, "sink: %s", strerror(-r));
		} else if (m.type == TVP_FILE_END) {
			if (m.file_end.size != have)
				r = tvm_errf(e, EPROTO, "agent said %llu bytes, sent %llu",
					     (unsigned long long)m.file_end.size, (unsigned long long)have);
			break;
		}
	}
	if (r)
		tvm_err_prefix(e, "get %s", path);
	else if (size)
		*size = have;
	return r;
}

/* tvm_agent_put_file's source: a buffer. */
struct mem_src {
	const uint8_t *p;
	size_t len, off;
};

static ssize_t mem_read(void *ctx, void *buf, size_t cap)
{
	struct mem_src *s = ctx;
	size_t n = s->len - s->off < cap ? s->len - s->off : cap;

	memcpy(buf, s->p + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

int tvm_agent_put_file(struct tvm_agent *a, const char *path, uint32_t mode, const void *data, size_t len,
		       struct tvm_err *e)
{
	struct mem_src s = { data, len, 0 };

	return tvm_agent_put_stream(a, path, mode, TVM_ID_DEFAULT, mem_read, &s, NULL, e);
}

/* tvm_agent_get_file's sink: a growing buffer, one byte more for a NUL. */
struct mem_sink {
	uint8_t *buf;
	size_t len;
};

static int mem_write(void *ctx, const void *data, size_t len)
{
	struct mem_sink *s = ctx;
	uint8_t *nb = realloc(s->buf, s->len + len + 1);

	if (!nb)
		return -ENOMEM;
	s->buf = nb;
	memcpy(nb + s->len, data, len);
	s->len += len;
	return 0;
}

int tvm_agent_get_file(struct tvm_agent *a, const char *path, size_t cap, void **data, size_t *len, struct tvm_err *e)
{
	struct mem_sink s = { 0 };
	int r = tvm_agent_get_stream(a, path, cap, TVM_ID_DEFAULT, mem_write, &s, NULL, e);

	*data = NULL;
	*len = 0;
	if (r) {
		free(s.buf);
		return r;
	}
	*data = s.buf ? s.buf : calloc(1, 1);
	*len = s.len;
	return 0;
}

int tvm_agent_seed(struct tvm_agent *a, struct tvm_err *e)
{
	uint8_t entropy[64];
	struct timespec now;
	struct tvp_msg m = { .type = TVP_SEED, .id = ++a->next_id };

	if (getrandom(entropy, sizeof(entropy), 0) != (ssize_t)sizeof(entropy))
		return tvm_errf(e, EIO, "seed: getrandom failed");
	clock_gettime(CLOCK_REALTIME, &now);
	m.seed.realtime_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	m.seed.entropy = (struct tvp_bytes){ entropy, sizeof(entropy) };
	int r = send_msg(a, &m, e);
	return r ? r : wait_ok(a, m.id, &m, e);
}

int tvm_agent_net(struct tvm_agent *a, const char *spec, struct tvm_err *e)
{
	struct tvp_msg m = { .type = TVP_NET, .id = ++a->next_id };

	if (strlen(spec) > TVP_MAX_NET)
		return tvm_errf(e, EINVAL, "net %.40s...: longer than %u bytes", spec, TVP_MAX_NET);
	m.net.spec = tvp_cstr(spec);
	int r = send_msg(a, &m, e);
	return r ? r : wait_ok(a, m.id, &m, e);
}

int tvm_agent_shutdown(struct tvm_agent *a, struct tvm_err *e)
{
	struct tvp_msg m = { .type = TVP_SHUTDOWN, .id = ++a->next_id };

	return send_msg(a, &m, e);
}

int tvm_agent_connect_uds(const char *uds_path, uint32_t port, int timeout_ms, struct tvm_agent **out,
			  struct tvm_err *e)
{
	return agent_connect_uds(uds_path, port, timeout_ms, out, NULL, e);
}

int agent_connect_uds(const char *uds_path, uint32_t port, int timeout_ms, struct tvm_agent **out, bool *no_vmm,
		      struct tvm_err *e)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[64];
	size_t n = 0;
	int fd, r;

	if (no_vmm)
		*no_vmm = false;
	if (strlen(uds_path) >= sizeof(sa.sun_path))
		return tvm_errf(e, ENAMETOOLONG, "vsock socket %s: path too long", uds_path);
	strcpy(sa.sun_path, uds_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tvm_errf(e, errno, "vsock socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* Nothing listens there (a socket left by a VMM that ended),
		 * or nothing is there yet: not the guest's answer. */
		struct stat st;
		int err = errno;

		if (err == ECONNREFUSED && stat(uds_path, &st) == 0 && !S_ISSOCK(st.st_mode))
			r = tvm_errf(e, ENOTSOCK, "vsock socket %s: not a socket", uds_path);
		else if (err == ECONNREFUSED)
			r = tvm_errf(e, err,
				     "vsock socket %s: no VM listens there (a socket left by a VMM that ended?)",
				     uds_path);
		else
			r = tvm_errf(e, err, "vsock socket %s: %s", uds_path, strerror(err));
		if (no_vmm)
			*no_vmm = r == -ECONNREFUSED || r == -ENOENT;
		close(fd);
		return r;
	}
	n = (size_t)snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (send(fd, line, n, MSG_NOSIGNAL) != (ssize_t)n) {
		close(fd);
		return tvm_errf(e, EPIPE, "vsock socket %s: cannot send CONNECT", uds_path);
	}
	/* Byte by byte up to the newline: what follows belongs to the agent. */
	for (n = 0; n < sizeof(line) - 1;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (poll(&pf, 1, timeout_ms) <= 0) {
			close(fd);
			return tvm_errf(e, ETIMEDOUT, "vsock socket %s: no answer to CONNECT %u", uds_path, port);
		}
		got = recv(fd, line + n, 1, 0);
		if (got <= 0) {
			close(fd);
			return tvm_errf(e, ECONNREFUSED, "vsock socket %s: guest port %u refused", uds_path, port);
		}
		if (line[n++] == '\n')
			break;
	}
	line[n] = 0;
	if (strncmp(line, "OK ", 3)) {
		close(fd);
		return tvm_errf(e, EPROTO, "vsock socket %s: unexpected answer to CONNECT", uds_path);
	}
	return tvm_agent_open(fd, timeout_ms, out, e);
}
