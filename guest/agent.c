/* tinyvmm guest agent: PID 1 of the guest. Listens on vsock (or, for host
 * tests, a Unix socket), speaks guest/PROTOCOL.md with every connection and
 * runs jobs, all from one epoll loop.
 *
 * Usage: tinyvmm-agent [--listen-unix PATH] [--vsock-port N]
 * (TINYVMM_AGENT_UNIX=PATH works like --listen-unix). As PID 1 it reads
 * tinyvmm.agent_port= and tinyvmm.hostname= from /proc/cmdline. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define PID1_UID 1000
#define PID1_GID 1000

struct agent ag = { .epfd = -1, .listen = { W_LISTEN, -1, 0 }, .sig = { W_SIGNAL, -1, 0 } };

void agent_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	memcpy(buf, "tinyvmm-agent: ", 15);
	va_start(ap, fmt);
	n = vsnprintf(buf + 15, sizeof(buf) - 16, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = 15 + (n < (int)sizeof(buf) - 16 ? n : (int)sizeof(buf) - 17);
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return; /* nowhere else to report it */
}

uint64_t agent_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int watch_set(struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int op;

	if (w->fd < 0 || events == w->events)
		return 0;
	/* Removed rather than set to 0: EPOLLHUP is reported even when not
	 * asked for, and would spin the loop while we hold a producer back. */
	op = !events ? EPOLL_CTL_DEL : w->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(ag.epfd, op, w->fd, op == EPOLL_CTL_DEL ? NULL : &ev) < 0) {
		agent_log("epoll_ctl(%d): %s", w->fd, strerror(errno));
		return -1;
	}
	w->events = events;
	return 0;
}

void watch_close(struct watch *w)
{
	/* Deleted explicitly: a child between clone() and exec may still hold
	 * a copy of the fd, which would keep it in the epoll set (reporting
	 * events for a freed watch) after close(). */
	watch_set(w, 0);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	w->events = 0;
}

bool agent_identity(uint32_t *uid, uint32_t *gid)
{
	if (*uid == TVP_ID_DEFAULT)
		*uid = ag.def_uid;
	if (*gid == TVP_ID_DEFAULT)
		*gid = ag.def_gid;
	return ag.can_setuid || (*uid == ag.def_uid && *gid == ag.def_gid);
}

/* ---- output queue ---- */

bool conn_room(const struct conn *c)
{
	return !c->dead && c->olen - c->ooff < AGENT_OUT_HIGH;
}

/* Room for n more bytes at obuf + olen; false when memory ran out. */
static bool conn_reserve(struct conn *c, size_t n)
{
	size_t want;
	uint8_t *nb;

	if (c->ocap - c->olen >= n)
		return true;
	if (c->ooff) {
		memmove(c->obuf, c->obuf + c->ooff, c->olen - c->ooff);
		c->olen -= c->ooff;
		c->ooff = 0;
		if (c->ocap - c->olen >= n)
			return true;
	}
	want = c->ocap ? c->ocap : 4096;
	while (want - c->olen < n)
		want *= 2;
	nb = realloc(c->obuf, want);
	if (!nb)
		return false;
	c->obuf = nb;
	c->ocap = want;
	return true;
}

static void conn_kill(struct conn *c, const char *why);

void conn_send(struct conn *c, const struct tvp_msg *m)
{
	size_t len;
	int rc;

	if (c->dead)
		return;
	rc = tvp_encode(m, NULL, 0, &len);
	if (rc == TVP_E_NOSPACE && conn_reserve(c, len))
		rc = tvp_encode(m, c->obuf + c->olen, c->ocap - c->olen, &len);
	if (rc) {
		/* Only our own messages get here: a bug or no memory. */
		agent_log("cannot queue %s: %s", tvp_type_name(m->type), tvp_strerror(rc));
		conn_kill(c, "output queue failure");
		return;
	}
	c->olen += len;
}

void conn_send_error(struct conn *c, uint32_t id, uint32_t code, int err, const char *fmt, ...)
{
	struct tvp_msg m = { .type = TVP_ERROR, .id = id };
	char text[TVP_MAX_MESSAGE];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	m.error = (struct tvp_error){ code, err, tvp_cstr(text) };
	conn_send(c, &m);
}

void conn_send_ok(struct conn *c, uint32_t id, uint8_t of_type, uint64_t value)
{
	struct tvp_msg m = { .type = TVP_OK, .id = id, .ok = { of_type, value } };

	conn_send(c, &m);
}

uint8_t *conn_data_begin(struct conn *c, size_t max)
{
	if (c->dead || !conn_reserve(c, TVP_HDR_SIZE + max))
		return NULL;
	return c->obuf + c->olen + TVP_HDR_SIZE;
}

void conn_data_end(struct conn *c, uint8_t type, uint32_t id, size_t n)
{
	tvp_put_header(c->obuf + c->olen, type, 0, id, (uint32_t)n);
	c->olen += TVP_HDR_SIZE + n;
}

static void conn_flush(struct conn *c)
{
	ssize_t n;

	if (c->dead || c->olen == c->ooff)
		return;
	n = write(c->w.fd, c->obuf + c->ooff, c->olen - c->ooff);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_kill(c, NULL);
		return;
	}
	c->ooff += (size_t)n;
	if (c->ooff == c->olen) {
		c->ooff = c->olen = 0;
		if (c->ocap > 2 * AGENT_OUT_HIGH) {
			free(c->obuf); /* a burst is over: give the memory back */
			c->obuf = NULL;
			c->ocap = 0;
		}
	}
}

/* ---- connections ---- */

static void conn_kill(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	if (why)
		agent_log("closing connection: %s", why);
	c->dead = true;
	job_conn_gone(c);
	file_conn_gone(c);
	watch_close(&c->w);
	tvp_decoder_free(&c->dec);
	free(c->obuf);
	c->obuf = NULL;
	c->ocap = c->olen = c->ooff = 0;
}

/* Report a protocol error to the host (one best-effort write) and close. */
static void conn_fail(struct conn *c, const char *why)
{
	conn_send_error(c, 0, TVP_ERR_PROTO, 0, "%s", why);
	conn_flush(c);
	conn_kill(c, why);
}

/* The connection to evict for a new one when every slot is taken: the one
 * quiet longest, if for AGENT_EVICT_IDLE_MS (no whole frame taken from it;
 * bytes of a frame trickled in do not count), that has no job, no
 * transfer, nothing queued and nothing unread in its socket, and is not
 * the keeper. Else NULL. Without it, connections left open and quiet (a
 * host client that never closed) would lock every exec out. */
static struct conn *conn_idlest(uint64_t now)
{
	struct conn *best = NULL;
	char b;

	for (struct conn *c = ag.conns; c; c = c->next)
		if (!c->dead && !c->keeper && !c->njobs && !c->xfers && c->olen == c->ooff &&
		    now - c->active_ns >= AGENT_EVICT_IDLE_MS * 1000000ull &&
		    (!best || c->active_ns < best->active_ns) &&
		    recv(c->w.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) /* a request not read yet is not quiet */
			best = c;
	return best;
}

/* Whether a live connection is the keeper: the first one to send SEED
 * while there was none (the host's long-lived handle on the VM). */
static bool keeper_open(void)
{
	for (struct conn *c = ag.conns; c; c = c->next)
		if (!c->dead && c->keeper)
			return true;
	return false;
}

static unsigned conns_live(void)
{
	unsigned n = 0;

	for (struct conn *c = ag.conns; c; c = c->next)
		n += !c->dead;
	return n;
}

static void conn_accept(void)
{
	struct tvp_msg ready = { .type = TVP_READY };
	struct timespec ts;
	struct conn *c;
	int fd;

	while ((fd = accept4(ag.listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		unsigned live = conns_live();

		if (live >= AGENT_MAX_CONNS && (c = conn_idlest(agent_now_ns()))) {
			conn_send_error(c, 0, TVP_ERR_LIMIT, 0, "evicted: idle while every connection slot was taken");
			conn_flush(c);
			conn_kill(c, NULL); /* no console line: a client could make many */
			live--;
		}
		c = live < AGENT_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			static const char msg[] = "too many connections";
			uint8_t buf[TVP_HDR_SIZE + 12 + sizeof(msg)];
			struct tvp_msg m = { .type = TVP_ERROR, .error = { TVP_ERR_LIMIT, 0, tvp_cstr(msg) } };
			size_t len;

			/* best effort, and no console line: a client could make many */
			if (!tvp_encode(&m, buf, sizeof(buf), &len))
				(void)!write(fd, buf, len);
			close(fd);
			continue;
		}
		c->w = (struct watch){ W_CONN, fd, 0 };
		c->active_ns = agent_now_ns();
		tvp_decoder_init(&c->dec, TVP_MAX_PAYLOAD);
		c->next = ag.conns;
		ag.conns = c;
		clock_gettime(CLOCK_BOOTTIME, &ts);
		ready.ready = (struct tvp_ready){
			.version = TVP_VERSION,
			.caps = (ag.system ? TVP_CAP_SYSTEM : 0) | (ag.can_setuid ? TVP_CAP_SETUID : 0),
			.max_payload = TVP_MAX_PAYLOAD,
			.boot_us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000,
			.agent = tvp_cstr(AGENT_VERSION),
		};
		conn_send(c, &ready);
	}
	if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
		agent_log("accept: %s", strerror(errno));
}

static void conn_read(struct conn *c)
{
	size_t avail;
	void *p = tvp_decoder_space(&c->dec, &avail);
	ssize_t n;

	if (!p) {
		if (c->dec.status)
			conn_fail(c, tvp_decoder_error(&c->dec));
		return;
	}
	n = read(c->w.fd, p, avail);
	if (n > 0)
		tvp_decoder_commit(&c->dec, (size_t)n);
	else if (n == 0)
		c->eof = true;
	else if (errno != EAGAIN && errno != EINTR)
		conn_kill(c, NULL);
}

/* Requests that the agent never takes (its own message types). */
static void reject(struct conn *c, const struct tvp_msg *m)
{
	conn_send_error(c, m->id, TVP_ERR_UNSUPPORTED, 0, "the agent does not accept %s", tvp_type_name(m->type));
}

static void dispatch(struct conn *c, const struct tvp_msg *m)
{
	switch (m->type) {
	case TVP_HELLO:
		if (m->hello.version != TVP_VERSION) {
			conn_send_error(c, 0, TVP_ERR_UNSUPPORTED, 0,
					"protocol version %u unsupported (agent speaks %u)", m->hello.version,
					TVP_VERSION);
			conn_flush(c);
			conn_kill(c, "unsupported protocol version");
		}
		break;
	case TVP_EXEC: job_exec(c, m); break;
	case TVP_STDIN:
	case TVP_STDIN_CLOSE: job_stdin(c, m); break;
	case TVP_KILL: job_kill(c, m); break;
	case TVP_PUT_FILE: file_put(c, m); break;
	case TVP_GET_FILE: file_get(c, m); break;
	case TVP_FILE_DATA: file_data(c, m); break;
	case TVP_FILE_END: file_end(c, m); break;
	case TVP_SEED:
		c->keeper = c->keeper || !keeper_open();
		sys_seed(c, m);
		break;
	case TVP_NET: net_request(c, m); break;
	case TVP_SHUTDOWN:
		if (ag.system)
			sys_shutdown();
		else
			ag.quit = true;
		break;
	case TVP_ERROR:
		agent_log("host error %u on id %u: %.*s", m->error.code, m->id, (int)m->error.message.len,
			  m->error.message.p);
		break;
	default: reject(c, m); break;
	}
}

/* Whether frames may be taken now: the host must read what we queue, and
 * stdin that a job has not taken yet holds further frames back. */
static bool conn_can_take(const struct conn *c)
{
	return conn_room(c) && !job_stdin_backlog(c);
}

/* Takes and handles the frames that are in; returns true when it stopped
 * with frames possibly left because conn_can_take() said no. */
static bool conn_process(struct conn *c)
{
	struct tvp_frame f;
	struct tvp_msg m;
	char why[160];
	int rc;

	while (!c->dead) {
		if (!conn_can_take(c))
			return true;
		rc = tvp_decoder_next(&c->dec, &f);
		if (rc == 0)
			break;
		if (rc < 0) {
			conn_fail(c, tvp_decoder_error(&c->dec));
			break;
		}
		rc = tvp_parse(&f, &m, why, sizeof(why));
		if (rc == TVP_E_UNKNOWN_TYPE) {
			conn_send_error(c, f.id, TVP_ERR_UNSUPPORTED, 0, "%s", why);
			continue;
		}
		if (rc) {
			conn_fail(c, why);
			break;
		}
		c->active_ns = agent_now_ns();
		dispatch(c, &m);
	}
	return false;
}

/* Input, file pumping and output for one connection; true if it has work
 * that can go on without waiting for an event. */
static bool conn_work(struct conn *c)
{
	bool held, more;

	if (c->dead)
		return false;
	held = conn_process(c);
	more = file_pump(c);
	conn_flush(c);
	if (c->dead)
		return false;
	if (c->eof) {
		/* Closing (or shutting down writing) ends the host's interest:
		 * its jobs and transfers are cancelled. */
		conn_kill(c, NULL);
		return false;
	}
	/* The flush may have made room for what was held back. */
	return (more && conn_room(c)) || (held && conn_can_take(c));
}

static void conn_sync_events(struct conn *c)
{
	uint32_t ev = 0;

	if (c->dead)
		return;
	if (conn_can_take(c))
		ev |= EPOLLIN;
	if (c->olen != c->ooff)
		ev |= EPOLLOUT;
	watch_set(&c->w, ev);
}

static void conn_event(struct conn *c, uint32_t events)
{
	if (c->dead)
		return;
	/* With EPOLLIN registered, a hang-up shows as EOF once the input is
	 * read (a SHUTDOWN may be in it); otherwise nobody is left to serve. */
	if (events & EPOLLERR)
		conn_kill(c, NULL);
	else if (events & EPOLLIN)
		conn_read(c);
	else if (events & EPOLLHUP)
		conn_kill(c, NULL);
	/* EPOLLOUT: conn_work() flushes every connection anyway. */
}

static void conns_sweep(void)
{
	struct conn **pp = &ag.conns, *c;

	while ((c = *pp)) {
		if (c->dead) {
			*pp = c->next;
			free(c);
		} else {
			pp = &c->next;
		}
	}
}

/* ---- setup ---- */

static int listen_socket(void)
{
	int fd;

	if (ag.unix_path) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		if (strlen(ag.unix_path) >= sizeof(sa.sun_path)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		strcpy(sa.sun_path, ag.unix_path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		unlink(ag.unix_path);
		if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)) {
			close(fd);
			fd = -1;
		}
	} else {
		struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = ag.port };

		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static bool try_listen(void)
{
	char line[160];
	int fd = listen_socket(), n;

	if (fd < 0)
		return false;
	ag.listen.fd = fd;
	if (watch_set(&ag.listen, EPOLLIN) < 0) {
		watch_close(&ag.listen);
		return false;
	}
	if (ag.unix_path)
		n = snprintf(line, sizeof(line), "tinyvmm-agent: ready on unix socket %s\n", ag.unix_path);
	else
		n = snprintf(line, sizeof(line), "tinyvmm-agent: ready on vsock port %u\n", ag.port);
	if (n > 0 && write(STDOUT_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		return true; /* no console: still serving */
	return true;
}

/* The environment jobs start from: what the kernel (or the test) gave us,
 * which carries host quirk words like GLIBC_TUNABLES, plus a PATH. */
static void base_env_init(char **envp)
{
	size_t n = 0, k = 0;
	bool has_path = false;

	while (envp[n])
		n++;
	ag.base_env = calloc(n + 2, sizeof(char *));
	if (!ag.base_env)
		return;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(envp[i], "TINYVMM_AGENT_", 14))
			continue;
		has_path |= !strncmp(envp[i], "PATH=", 5);
		ag.base_env[k++] = envp[i];
	}
	if (!has_path)
		ag.base_env[k++] = DEFAULT_PATH;
	ag.base_envc = k;
}

static int parse_args(int argc, char **argv)
{
	const char *env = getenv("TINYVMM_AGENT_UNIX");
	char val[32];

	ag.port = AGENT_DEFAULT_PORT;
	if (env && *env)
		ag.unix_path = env;
	if (ag.system && sys_cmdline_get("tinyvmm.agent_port", val, sizeof(val)))
		ag.port = (unsigned)strtoul(val, NULL, 0);
	/* The kernel hands init its unrecognised words as arguments: as PID 1
	 * anything but our own options is ignored. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen-unix") && i + 1 < argc) {
			ag.unix_path = argv[++i];
		} else if (!strcmp(argv[i], "--vsock-port") && i + 1 < argc) {
			ag.port = (unsigned)strtoul(argv[++i], NULL, 0);
		} else if (!ag.system) {
			fprintf(stderr, "usage: %s [--listen-unix PATH] [--vsock-port N]\n", argv[0]);
			return -1;
		}
	}
	return 0;
}

static int setup(int argc, char **argv, char **envp)
{
	sigset_t mask;

	ag.system = getpid() == 1;
	if (ag.system) {
		sys_pid1_setup();
		ag.def_uid = PID1_UID;
		ag.def_gid = PID1_GID;
	} else {
		ag.def_uid = geteuid();
		ag.def_gid = getegid();
		/* Orphaned job processes come to us, as they would to PID 1. */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	}
	ag.can_setuid = geteuid() == 0;
	if (parse_args(argc, argv) < 0)
		return -1;
	base_env_init(envp);
	/* Modes of created files are exactly what PUT_FILE asks for; jobs get 022 back. */
	umask(0);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (!ag.system) {
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGINT);
	}
	sigprocmask(SIG_BLOCK, &mask, NULL);
	ag.epfd = epoll_create1(EPOLL_CLOEXEC);
	ag.sig.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ag.epfd < 0 || ag.sig.fd < 0 || watch_set(&ag.sig, EPOLLIN) < 0 || !ag.base_env) {
		agent_log("setup failed: %s", strerror(errno));
		return -1;
	}
	if (!try_listen()) {
		agent_log("cannot listen on %s: %s", ag.unix_path ? ag.unix_path : "vsock", strerror(errno));
		if (!ag.system)
			return -1;
	}
	return 0;
}

static void on_signal(void)
{
	struct signalfd_siginfo si[8];
	ssize_t n;

	while ((n = read(ag.sig.fd, si, sizeof(si))) > 0) {
		for (size_t i = 0; i < (size_t)n / sizeof(si[0]); i++)
			if (si[i].ssi_signo == SIGTERM || si[i].ssi_signo == SIGINT)
				ag.quit = true;
	}
	job_reap();
}

static int loop_timeout(uint64_t now, bool busy)
{
	uint64_t next = job_timers(now), ms;

	if (busy)
		return 0;
	if (ag.listen.fd < 0 && (!next || next > now + 1000000000u))
		next = now + 1000000000u; /* PID 1 retries listening every second */
	if (!next)
		return -1;
	ms = next > now ? (next - now + 999999) / 1000000 : 0;
	return ms > 60000 ? 60000 : (int)ms;
}

int main(int argc, char **argv, char **envp)
{
	struct epoll_event evs[32];
	bool busy = false;

	if (setup(argc, argv, envp) < 0) {
		if (getpid() != 1)
			return 1;
		/* PID 1 must not exit: the agent is useless, but the VM stays up. */
		for (;;)
			pause();
	}
	while (!ag.quit) {
		int n = epoll_wait(ag.epfd, evs, 32, loop_timeout(agent_now_ns(), busy));

		if (n < 0 && errno != EINTR)
			agent_log("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;

			if (w->fd < 0)
				continue;
			switch (w->kind) {
			case W_LISTEN: conn_accept(); break;
			case W_SIGNAL: on_signal(); break;
			case W_CONN: conn_event((struct conn *)w, evs[i].events); break;
			default: job_on_event((struct job_pipe *)w, evs[i].events); break;
			}
		}
		if (ag.listen.fd < 0)
			try_listen();
		job_timers(agent_now_ns());
		busy = false;
		for (struct conn *c = ag.conns; c; c = c->next)
			busy |= conn_work(c);
		job_sync_events();
		for (struct conn *c = ag.conns; c; c = c->next)
			conn_sync_events(c);
		job_sweep();
		conns_sweep();
	}
	/* Test mode only (SIGTERM or SHUTDOWN): leave nothing running or allocated. */
	for (struct conn *c = ag.conns; c; c = c->next)
		conn_kill(c, NULL);
	conns_sweep();
	job_kill_all();
	free(ag.base_env);
	return 0;
}
