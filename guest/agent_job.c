/* Jobs: spawn, stdin/stdout/stderr pumping, timeouts, reaping, RESULT.
 *
 * Spawning costs the most in an emulated guest kernel, so a job is one
 * clone(CLONE_VM | CLONE_VFORK) + execve: no shell, no page-table copy, and
 * the exec error comes back through shared memory instead of a pipe. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_SEARCH_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* What the child needs; err and stage are written by the child before it
 * _exits, and read by the parent once clone() returns (CLONE_VFORK). */
struct spawn {
	char **argv, **envp;
	const char *cwd, *path;
	int fds[3];
	int cg_fd; /* the job's cgroup.procs; -1: none */
	uint32_t uid, gid;
	bool set_ids;
	bool cwd_default; /* cwd is the user's home: "/" if it cannot be entered */
	bool renice;      /* back to nice 0 from the agent's AGENT_NICE */
	int err;
	const char *stage;
};

/* One stack is enough: CLONE_VFORK suspends us until the child execs. */
static char child_stack[256 << 10] __attribute__((aligned(16)));
/* Output past a stream's cap is read into here and dropped. */
static uint8_t discard[AGENT_PIPE_CHUNK];

/* The child runs on child_stack, sharing our memory: keep ASan's stack
 * bookkeeping out of it. */
#define CHILD_CODE __attribute__((no_sanitize("address")))

CHILD_CODE static void exec_search(struct spawn *s)
{
	const char *file = s->argv[0], *dir = s->path, *end;
	size_t flen = strlen(file), dlen;
	bool eacces = false;
	char buf[PATH_MAX];

	if (strchr(file, '/')) {
		execve(file, s->argv, s->envp);
		return;
	}
	if (!flen) {
		errno = ENOENT;
		return;
	}
	for (;; dir = end + 1) {
		end = strchrnul(dir, ':');
		dlen = (size_t)(end - dir);
		if (dlen + 1 + flen < sizeof(buf)) {
			memcpy(buf, dir, dlen);
			if (dlen) /* an empty entry is the working directory */
				buf[dlen++] = '/';
			memcpy(buf + dlen, file, flen + 1);
			execve(buf, s->argv, s->envp);
			if (errno == EACCES)
				eacces = true;
			else if (errno != ENOENT && errno != ENOTDIR)
				return;
		}
		if (!*end)
			break;
	}
	errno = eacces ? EACCES : ENOENT;
}

CHILD_CODE static int child_main(void *arg)
{
	struct spawn *s = arg;
	gid_t gid = s->gid;
	sigset_t none;

	sigemptyset(&none);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	umask(022);
	s->stage = "cgroup";
	if (s->cg_fd >= 0 && write(s->cg_fd, "0", 1) != 1)
		goto fail;
	s->stage = "setpriority";
	if (s->renice && setpriority(PRIO_PROCESS, 0, 0) < 0)
		goto fail;
	s->stage = "setsid";
	if (setsid() < 0)
		goto fail;
	s->stage = "dup2";
	for (int i = 0; i < 3; i++)
		if (dup2(s->fds[i], i) < 0)
			goto fail;
	if (s->set_ids) {
		/* Raw syscalls: libc's wrappers would try to sync other threads'
		 * ids, which here are the agent's. */
		s->stage = "setuid";
		if (syscall(SYS_setgroups, 1, &gid) || syscall(SYS_setgid, gid) || syscall(SYS_setuid, s->uid))
			goto fail;
	}
	s->stage = "chdir";
	if (chdir(s->cwd) < 0 && (!s->cwd_default || chdir("/") < 0))
		goto fail;
	s->stage = "execve";
	exec_search(s);
fail:
	s->err = errno ? errno : EINVAL;
	_exit(127);
}

/* ---- helpers ---- */

static struct job *job_find(const struct conn *c, uint32_t id)
{
	for (unsigned i = 0; i < ag.njobs; i++)
		if (ag.jobs[i]->conn == c && ag.jobs[i]->id == id && !ag.jobs[i]->done)
			return ag.jobs[i];
	return NULL;
}

static bool env_has(char **env, const char *name, size_t len)
{
	for (; *env; env++)
		if (!strncmp(*env, name, len) && (*env)[len] == '=')
			return true;
	return false;
}

static size_t env_count(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	return n;
}

/* Append the entries of layer to out[*k..] that no later layer (upper, a
 * NULL-terminated list of lists) has a name of. */
static void env_add_layer(char **out, size_t *k, char **layer, size_t n, char **const *upper)
{
	for (size_t i = 0; i < n; i++) {
		const char *e = layer[i];
		size_t len = (size_t)(strchrnul(e, '=') - e);
		bool hidden = false;

		for (char **const *u = upper; *u && !hidden; u++)
			hidden = env_has(*u, e, len);
		if (!hidden)
			out[(*k)++] = layer[i];
	}
}

/* The agent's base environment, the identity entries on top of it, the
 * job's entries on top of those (an entry replaces one of the same name
 * below it). Pointers only; free() the array. */
static char **env_merge(char **ident, char **jenv)
{
	size_t ni = env_count(ident), nj = env_count(jenv), k = 0;
	char **out = malloc((ag.base_envc + ni + nj + 1) * sizeof(char *));

	if (!out)
		return NULL;
	env_add_layer(out, &k, ag.base_env, ag.base_envc, (char **const[]){ ident, jenv, NULL });
	env_add_layer(out, &k, ident, ni, (char **const[]){ jenv, NULL });
	memcpy(out + k, jenv, (nj + 1) * sizeof(char *));
	return out;
}

static const char *env_get(char **env, const char *name)
{
	size_t len = strlen(name);

	for (; *env; env++)
		if (!strncmp(*env, name, len) && (*env)[len] == '=')
			return *env + len + 1;
	return NULL;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

/* Three pipes; the agent's ends (in[1], out[0], err[0]) non-blocking. */
static int make_pipes(int p[3][2])
{
	for (int i = 0; i < 3; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return -1;
		if (fcntl(i == 0 ? p[i][1] : p[i][0], F_SETFL, O_NONBLOCK) < 0)
			return -1;
	}
	return 0;
}

static uint64_t tv_us(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

/* ---- stdin ---- */

static void stdin_flush(struct job *j)
{
	ssize_t n;

	if (j->in.w.fd >= 0 && j->in_off < j->in_len) {
		n = write(j->in.w.fd, j->in_buf + j->in_off, j->in_len - j->in_off);
		if (n >= 0)
			j->in_off += (size_t)n;
		else if (errno != EAGAIN && errno != EINTR)
			j->in_off = j->in_len; /* EPIPE: the job stopped reading; drop the rest */
	}
	if (j->in_off < j->in_len)
		return;
	free(j->in_buf);
	j->in_buf = NULL;
	j->in_off = j->in_len = 0;
	if (j->in_close)
		watch_close(&j->in.w);
}

/* Queue n bytes for the job's stdin (written at once when the pipe takes
 * them). False when out of memory. */
static bool stdin_queue(struct job *j, const uint8_t *p, size_t n)
{
	uint8_t *nb;

	if (j->in_off == j->in_len && j->in.w.fd >= 0 && n) {
		ssize_t w = write(j->in.w.fd, p, n);

		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return true; /* the job stopped reading */
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		}
	}
	if (n) {
		/* Only one frame's worth can be here: the connection holds further
		 * frames back while stdin is queued. */
		nb = realloc(j->in_buf, j->in_len + n);
		if (!nb)
			return false;
		memcpy(nb + j->in_len, p, n);
		j->in_buf = nb;
		j->in_len += n;
	}
	stdin_flush(j);
	return true;
}

bool job_stdin_backlog(const struct conn *c)
{
	for (unsigned i = 0; i < ag.njobs; i++)
		if (ag.jobs[i]->conn == c && ag.jobs[i]->in_off < ag.jobs[i]->in_len)
			return true;
	return false;
}

/* STDIN / STDIN_CLOSE. Frames for a job that is gone or whose stdin is
 * closed are dropped: the host cannot know when that happens. */
void job_stdin(struct conn *c, const struct tvp_msg *m)
{
	struct job *j = job_find(c, m->id);

	if (!j || j->in.w.fd < 0 || j->in_close || !(j->exec_flags & TVP_EXEC_STDIN_STREAM))
		return;
	if (m->type == TVP_STDIN_CLOSE) {
		j->in_close = true;
		stdin_flush(j);
	} else if (!stdin_queue(j, m->data.data.p, m->data.data.len)) {
		conn_send_error(c, m->id, TVP_ERR_LIMIT, ENOMEM, "no memory for stdin");
	}
}

/* ---- spawning ---- */

static void spawn_fail(struct conn *c, uint32_t id, int err, const char *stage, const char *argv0)
{
	conn_send_error(c, id, TVP_ERR_SPAWN, err, "%s %s: %s", stage, argv0, strerror(err));
}

/* The working directory, not the command, is what failed: name it, and
 * report EACCES ("could not run") whatever chdir said, since hosts read
 * ENOENT as "command not found" (the CLI's exit 127 vs 126). */
static void chdir_fail(struct conn *c, uint32_t id, int err, const char *dir)
{
	conn_send_error(c, id, TVP_ERR_SPAWN, EACCES, "chdir to working directory %s: %s", dir, strerror(err));
}

static void job_start(struct conn *c, const struct tvp_msg *m, struct spawn *s, int p[3][2], struct job_cg *cg)
{
	const struct tvp_exec *e = &m->exec;
	struct job *j = calloc(1, sizeof(*j));
	uint64_t start;
	pid_t pid;

	if (!j) {
		spawn_fail(c, m->id, ENOMEM, "alloc", s->argv[0]);
		return;
	}
	s->fds[0] = p[0][0];
	s->fds[1] = p[1][1];
	s->fds[2] = p[2][1];
	s->cg_fd = cg->procs_fd;
	start = agent_now_ns();
	errno = 0;
	pid = clone(child_main, child_stack + sizeof(child_stack), CLONE_VM | CLONE_VFORK | SIGCHLD, s);
	jobcg_started(cg);
	if (pid >= 0 && s->err && !strcmp(s->stage, "chdir")) {
		chdir_fail(c, m->id, s->err, s->cwd);
		free(j);
		return;
	}
	if (pid < 0 || s->err) {
		spawn_fail(c, m->id, pid < 0 ? errno : s->err, pid < 0 ? "clone" : s->stage, s->argv[0]);
		free(j);
		return; /* a failed child is reaped like any other */
	}
	*j = (struct job){
		.conn = c,
		.id = m->id,
		.pid = pid,
		.exec_flags = m->flags,
		.start_ns = start,
		.out = { { W_JOB_OUT, p[1][0], 0 }, j, TVP_STDOUT, e->stdout_cap, 0 },
		.err = { { W_JOB_OUT, p[2][0], 0 }, j, TVP_STDERR, e->stderr_cap, 0 },
		.in = { { W_JOB_IN, p[0][1], 0 }, j, TVP_STDIN, 0, 0 },
		.in_close = !(m->flags & TVP_EXEC_STDIN_STREAM),
		.cg = *cg,
	};
	cg->made = false; /* now the job's */
	if (e->timeout_ms)
		j->deadline_ns = j->start_ns + (uint64_t)e->timeout_ms * 1000000u;
	p[1][0] = p[2][0] = p[0][1] = -1; /* now the job's */
	ag.jobs[ag.njobs++] = j;
	c->njobs++;
	if (!stdin_queue(j, e->stdin_data.p, e->stdin_data.len))
		conn_send_error(c, m->id, TVP_ERR_LIMIT, ENOMEM, "no memory for stdin");
}

void job_exec(struct conn *c, const struct tvp_msg *m)
{
	const struct tvp_exec *e = &m->exec;
	struct spawn s = { .uid = e->uid, .gid = e->gid, .stage = "spawn" };
	char cwd[TVP_MAX_PATH + 1] = "/";
	char **argv = NULL, **jenv = NULL;
	char *no_ident[] = { NULL };
	struct job_ident *id = NULL;
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	struct job_cg cg = { .procs_fd = -1 };
	const char *what;
	int rc;

	if (job_find(c, m->id)) {
		conn_send_error(c, m->id, TVP_ERR_BUSY, 0, "job id %u is running", m->id);
		return;
	}
	if (ag.njobs >= AGENT_MAX_JOBS) {
		conn_send_error(c, m->id, TVP_ERR_LIMIT, 0, "too many jobs (%d)", AGENT_MAX_JOBS);
		return;
	}
	argv = tvp_strvec_dup(&e->argv);
	jenv = tvp_strvec_dup(&e->env);
	s.argv = argv;
	if (!argv || !jenv) {
		spawn_fail(c, m->id, ENOMEM, "alloc", argv ? argv[0] : "job");
		goto out;
	}
	if (!agent_identity(&s.uid, &s.gid)) {
		spawn_fail(c, m->id, EPERM, "setuid", argv[0]);
		goto out;
	}
	s.set_ids = ag.can_setuid && (s.uid || s.gid);
	s.renice = ag.system;
	/* As the guest's init the agent gives jobs a login-like environment and
	 * start in their home; in test mode they get the agent's own, and /. */
	if (ag.system) {
		id = malloc(sizeof(*id));
		if (!id) {
			spawn_fail(c, m->id, ENOMEM, "alloc", argv[0]);
			goto out;
		}
		ident_init(id, s.uid, "/etc/passwd", env_get(ag.base_env, "PATH"));
	}
	s.envp = env_merge(id ? id->env : no_ident, jenv);
	if (!s.envp) {
		spawn_fail(c, m->id, ENOMEM, "alloc", argv[0]);
		goto out;
	}
	if (e->cwd.len) {
		memcpy(cwd, e->cwd.p, e->cwd.len);
		cwd[e->cwd.len] = 0;
	} else if (id) {
		snprintf(cwd, sizeof(cwd), "%s", id->cwd);
		s.cwd_default = true;
	}
	s.cwd = cwd;
	s.path = env_get(s.envp, "PATH");
	if (!s.path)
		s.path = DEFAULT_SEARCH_PATH;
	rc = jobcg_create(&cg, e->mem_max, e->pids_max, &what);
	if (rc == -EOPNOTSUPP)
		conn_send_error(c, m->id, TVP_ERR_UNSUPPORTED, EOPNOTSUPP,
				"per-job memory and pids limits need cgroup v2 in the guest kernel");
	else if (rc < 0)
		conn_send_error(c, m->id, TVP_ERR_SPAWN, -rc, "job cgroup: %s: %s", what, strerror(-rc));
	else if (make_pipes(p) < 0)
		spawn_fail(c, m->id, errno, "pipe", argv[0]);
	else
		job_start(c, m, &s, p, &cg);
out:
	jobcg_release(&cg); /* unless the job took it */
	for (int i = 0; i < 3; i++)
		close_pair(p[i]);
	free(s.envp);
	free(id);
	free(jenv);
	free(argv);
}

/* SIGKILL to the job's process group and to its cgroup, which also holds
 * what left the group (setsid). */
static void kill_whole_job(const struct job *j)
{
	kill(-j->pid, SIGKILL);
	jobcg_kill(&j->cg);
}

void job_kill(struct conn *c, const struct tvp_msg *m)
{
	struct job *j = job_find(c, m->id);
	int sig = m->kill.signal ? (int)m->kill.signal : SIGKILL;

	if (m->kill.signal > 64) {
		conn_send_error(c, m->id, TVP_ERR_STATE, EINVAL, "bad signal %u", m->kill.signal);
		return;
	}
	if (!j || j->exited)
		return; /* already over: its RESULT is on the way */
	if (sig == SIGKILL)
		kill_whole_job(j);
	else
		kill(-j->pid, sig);
	j->result_flags |= TVP_RESULT_KILLED;
}

/* ---- output and completion ---- */

static void job_finish(struct job *j)
{
	struct tvp_msg m = { .type = TVP_RESULT, .id = j->id, .flags = j->result_flags };
	int st = j->status;

	if (!j->exited || j->out.w.fd >= 0 || j->err.w.fd >= 0 || j->done)
		return;
	if (WIFSIGNALED(st) && WCOREDUMP(st))
		m.flags |= TVP_RESULT_CORE_DUMPED;
	m.flags |= jobcg_result_flags(&j->cg);
	jobcg_release(&j->cg);
	m.result = (struct tvp_result){
		.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
		.signal = WIFSIGNALED(st) ? (uint32_t)WTERMSIG(st) : 0,
		.wall_us = (j->end_ns - j->start_ns) / 1000,
		.user_us = tv_us(j->ru.ru_utime),
		.sys_us = tv_us(j->ru.ru_stime),
		.max_rss_kib = (uint64_t)j->ru.ru_maxrss,
		.stdout_bytes = j->out.total,
		.stderr_bytes = j->err.total,
	};
	if (j->conn) {
		conn_send(j->conn, &m);
		j->conn->njobs--;
	}
	j->in_close = true;
	j->in_off = j->in_len;
	stdin_flush(j);
	j->done = true;
}

static void pipe_read(struct job_pipe *p)
{
	struct job *j = p->job;
	bool fwd = j->conn && p->total < p->cap;
	uint8_t *buf = discard;
	ssize_t n;

	if (fwd) {
		if (!conn_room(j->conn))
			return; /* the host is behind: wait (the job blocks on its pipe) */
		buf = conn_data_begin(j->conn, AGENT_PIPE_CHUNK);
		if (!buf) {
			buf = discard; /* no memory: counted and dropped, reported as truncated */
			fwd = false;
		}
	}
	n = read(p->w.fd, buf, AGENT_PIPE_CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		watch_close(&p->w);
		job_finish(j);
		return;
	}
	if (fwd && p->total < p->cap)
		conn_data_end(j->conn, p->type, j->id,
			      (size_t)n < p->cap - p->total ? (size_t)n : (size_t)(p->cap - p->total));
	p->total += (uint64_t)n;
	if (p->total > p->cap || (!fwd && j->conn))
		j->result_flags |= p->type == TVP_STDOUT ? TVP_RESULT_STDOUT_TRUNC : TVP_RESULT_STDERR_TRUNC;
}

void job_on_event(struct job_pipe *p, uint32_t events)
{
	(void)events;
	if (p->w.kind == W_JOB_IN)
		stdin_flush(p->job);
	else
		pipe_read(p);
}

void job_reap(void)
{
	for (;;) {
		siginfo_t si = { 0 };
		struct job *j = NULL;
		int st;

		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
			break;
		for (unsigned i = 0; i < ag.njobs && !j; i++)
			if (ag.jobs[i]->pid == si.si_pid && !ag.jobs[i]->exited)
				j = ag.jobs[i];
		/* While the leader is an unreaped zombie its pid cannot be reused,
		 * so the group kill cannot hit a stranger. */
		if (j && !(j->exec_flags & TVP_EXEC_KEEP_GROUP))
			kill(-j->pid, SIGKILL);
		if (wait4(si.si_pid, &st, WNOHANG, j ? &j->ru : NULL) <= 0)
			break;
		if (!j) {
			jobcg_sweep(); /* an orphan, or a child whose exec failed */
			continue;
		}
		j->exited = true;
		j->status = st;
		j->end_ns = agent_now_ns();
		j->deadline_ns = 0;
		j->grace_ns = j->end_ns + AGENT_GRACE_MS * 1000000ull;
		job_finish(j);
	}
}

static uint64_t earlier(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

uint64_t job_timers(uint64_t now)
{
	static uint64_t sweep_ns;
	uint64_t next = 0;

	/* A job's cgroup can still be busy when its job ends (its killed
	 * processes exit a little later, and they may not be ours to reap):
	 * try again each second while any is left. */
	if (now >= sweep_ns)
		sweep_ns = jobcg_sweep() ? now + 1000000000ull : 0;
	next = sweep_ns;

	for (unsigned i = 0; i < ag.njobs; i++) {
		struct job *j = ag.jobs[i];

		if (j->done)
			continue;
		if (j->deadline_ns && now >= j->deadline_ns) {
			kill_whole_job(j);
			j->result_flags |= TVP_RESULT_TIMED_OUT;
			j->deadline_ns = 0;
		}
		/* Pipes still open after the process exited are held by processes
		 * that left the group: stop waiting for them, unless the host is
		 * just slow to take what is already there. */
		if (j->exited && now >= j->grace_ns) {
			if (j->conn && !conn_room(j->conn)) {
				j->grace_ns = now + AGENT_GRACE_MS * 1000000ull;
			} else {
				watch_close(&j->out.w);
				watch_close(&j->err.w);
				job_finish(j);
				continue;
			}
		}
		next = earlier(next, j->deadline_ns);
		next = earlier(next, j->exited ? j->grace_ns : 0);
	}
	return next;
}

static uint32_t out_events(const struct job_pipe *p)
{
	const struct conn *c = p->job->conn;

	return (!c || p->total >= p->cap || conn_room(c)) ? EPOLLIN : 0;
}

void job_sync_events(void)
{
	for (unsigned i = 0; i < ag.njobs; i++) {
		struct job *j = ag.jobs[i];

		watch_set(&j->out.w, out_events(&j->out));
		watch_set(&j->err.w, out_events(&j->err));
		watch_set(&j->in.w, j->in_off < j->in_len ? EPOLLOUT : 0);
	}
}

void job_conn_gone(struct conn *c)
{
	for (unsigned i = 0; i < ag.njobs; i++) {
		struct job *j = ag.jobs[i];

		if (j->conn != c)
			continue;
		j->conn = NULL;
		if (!j->exited)
			kill_whole_job(j);
		j->in_close = true;
		j->in_off = j->in_len;
		stdin_flush(j);
	}
	c->njobs = 0;
}

void job_sweep(void)
{
	unsigned k = 0;

	for (unsigned i = 0; i < ag.njobs; i++) {
		struct job *j = ag.jobs[i];

		if (j->done) {
			free(j->in_buf);
			free(j);
		} else {
			ag.jobs[k++] = j;
		}
	}
	ag.njobs = k;
}

void job_kill_all(void)
{
	for (unsigned i = 0; i < ag.njobs; i++) {
		struct job *j = ag.jobs[i];

		if (!j->exited)
			kill(-j->pid, SIGKILL);
		jobcg_kill(&j->cg);
		jobcg_release(&j->cg);
		watch_close(&j->out.w);
		watch_close(&j->err.w);
		watch_close(&j->in.w);
		j->done = true;
	}
	job_sweep();
}
