/* The sandbox table. Each sandbox is one `tinyvmm run` process (jailed
 * when the daemon is root), restored from the default template, with a
 * hybrid vsock socket in the sandbox's directory; the daemon holds one
 * agent connection open to it (the keeper), so the VMM's --idle-timeout
 * (the orphan timeout) only runs once the daemon is gone: a daemon that
 * never comes back leaves no VM running for long. A restarted daemon
 * re-adopts a sandbox only when its pid still has the start time recorded
 * at spawn and its agent answers; any other is ended and cleaned up. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/core/file_open.h"
#include "vmm/sandbox/jail.h"
#include "devices/net/net_filter.h"
#include "vmm/serve/serve.h"

#define STOP_GRACE_NS (5ull * 1000000000ull) /* SIGTERM, then SIGKILL */
#define READY_TIMEOUT_S 900                  /* the first sandbox may wait for the template to be made */
#define STATE_MAX (1u << 20)
/* run, its fixed flags and their values (--net, --net-ip and --net-gw
 * among them), and what net_args holds at most (a flag and a value per
 * rule) */
#define SB_NET_DEFAULT_RULES 32 /* net_egress_rules: 30 at most */
#define VMM_ARGV_MAX (32 + SB_NET_ARGS_MAX + 2 * SB_NET_DEFAULT_RULES)

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rfc3339(char *buf, size_t cap, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void random_hex(char *out, size_t nbytes)
{
	uint8_t b[32];
	size_t got = 0;

	while (got < nbytes) {
		ssize_t n = getrandom(b + got, nbytes - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void jail_dir(const struct srv *s, char *out, size_t cap)
{
	snprintf(out, cap, "%s/jail", s->cfg.state_dir);
}

/* Tokens compared in time independent of where they differ. */
static bool token_eq(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

void sb_snapshot_dir(const struct sandbox *sb, unsigned gen, char *out, size_t cap)
{
	snprintf(out, cap, "%s/paused-%u", sb->dir, gen);
}

void sb_abandon_locked(struct srv *s, struct sandbox *sb, const char *reason)
{
	if (sb->state == SB_STARTING)
		sb->state = SB_RUNNING; /* so that it ends like any other */
	if (sb->state != SB_ENDED)
		sb_end_locked(s, sb, reason);
	if (sb->pid <= 0)
		sb->exited = true; /* no process was started: nothing to reap */
	sb->refs--;
}

void sb_name(const struct srv *s, struct sandbox *sb)
{
	memcpy(sb->id, "sbx_", 4);
	random_hex(sb->id + 4, 16);
	random_hex(sb->token, 16);
	snprintf(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", s->cfg.state_dir, sb->id);
	snprintf(sb->uds, sizeof(sb->uds), "%s/vsock.sock", sb->dir);
}

struct sandbox *sb_get(struct srv *s, const char *id, uid_t uid, const struct http_str *authz)
{
	struct sandbox *found = NULL;

	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next) {
		if (strcmp(sb->id, id))
			continue;
		if (sb->pooled)
			break;
		bool ok = sb->owner == uid;
		/* "Bearer " + 32 hex digits (RFC 6750 §2.1), nothing else. */
		if (!ok && authz && authz->n == 7 + 32 && !strncasecmp(authz->p, "Bearer ", 7))
			ok = token_eq(authz->p + 7, sb->token, 32);
		if (ok) {
			sb->refs++;
			found = sb;
		}
		break;
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

void sb_put(struct srv *s, struct sandbox *sb)
{
	pthread_mutex_lock(&s->mu);
	sb->refs--;
	pthread_mutex_unlock(&s->mu);
}

void sb_touch(struct srv *s, struct sandbox *sb)
{
	pthread_mutex_lock(&s->mu);
	sb->last_active_ns = now_ns();
	pthread_mutex_unlock(&s->mu);
}

void sb_remove_dir(const char *dir)
{
	int r = jail_remove_tree(AT_FDCWD, dir);

	if (r && r != -ENOENT)
		fprintf(stderr, "tinyvmm serve: %s: not all removed: %s\n", dir, strerror(-r));
}

const char *sb_state_name(const struct sandbox *sb)
{
	return sb->state == SB_ENDED ? "ended" : sb->paused ? "paused" : "running";
}

size_t sb_json_size(const struct sandbox *sb)
{
	/* metadata: key (64) and value (512) escaped at worst, 6 bytes each */
	return 2048 + (size_t)sb->nmeta * 6 * (64 + 512 + 8);
}

void sb_write_json(struct json_w *w, const struct sandbox *sb, bool with_token)
{
	char t[32];

	json_w_obj_begin(w);
	json_w_key(w, "id", 2);
	json_w_string(w, sb->id, strlen(sb->id));
	json_w_key(w, "state", 5);
	json_w_string(w, sb_state_name(sb), strlen(sb_state_name(sb)));
	json_w_key(w, "template", 8);
	json_w_string(w, sb->template, strlen(sb->template));
	json_w_key(w, "created_at", 10);
	rfc3339(t, sizeof(t), sb->created_at);
	json_w_string(w, t, strlen(t));
	json_w_key(w, "expires_at", 10);
	rfc3339(t, sizeof(t), sb->expires_at);
	json_w_string(w, t, strlen(t));
	json_w_key(w, "ended_at", 8);
	if (sb->state == SB_ENDED) {
		rfc3339(t, sizeof(t), sb->ended_at);
		json_w_string(w, t, strlen(t));
	} else {
		json_w_null(w);
	}
	json_w_key(w, "end_reason", 10);
	if (sb->end_reason)
		json_w_string(w, sb->end_reason, strlen(sb->end_reason));
	else
		json_w_null(w);
	json_w_key(w, "cpus", 4);
	json_w_uint(w, sb->cpus);
	json_w_key(w, "memory_mib", 10);
	json_w_uint(w, sb->memory_mib);
	json_w_key(w, "idle_timeout_s", 14);
	json_w_uint(w, sb->idle_timeout_s);
	json_w_kbool(w, "from_pool", sb->from_pool);
	json_w_key(w, "forked_from", 11);
	if (sb->forked_from[0])
		json_w_string(w, sb->forked_from, strlen(sb->forked_from));
	else
		json_w_null(w);
	json_w_key(w, "network", 7);
	if (sb->net_enabled) {
		char tap[16], host[16], guest[16];

		json_w_obj_begin(w);
		json_w_key(w, "tap", 3);
		if (sb->net_claimed) {
			net_tap_name(sb, tap);
			net_addrs(sb, host, guest);
			json_w_string(w, tap, strlen(tap));
			json_w_key(w, "host_address", 12);
			json_w_string(w, host, strlen(host));
			json_w_key(w, "address", 7);
			json_w_string(w, guest, strlen(guest));
		} else {
			json_w_null(w);
			json_w_key(w, "host_address", 12);
			json_w_null(w);
			json_w_key(w, "address", 7);
			json_w_null(w);
		}
		json_w_obj_end(w);
	} else {
		json_w_null(w);
	}
	json_w_key(w, "metadata", 8);
	json_w_obj_begin(w);
	for (unsigned i = 0; i < sb->nmeta; i++) {
		json_w_key(w, sb->meta[i].key, strlen(sb->meta[i].key));
		json_w_string(w, sb->meta[i].value, strlen(sb->meta[i].value));
	}
	json_w_obj_end(w);
	if (with_token) {
		json_w_key(w, "access_token", 12);
		json_w_string(w, sb->token, 32);
	}
	json_w_obj_end(w);
}

/* The state kept on disk for a restart: what sb_write_json says plus what
 * only the daemon may know (owner, token, pid, environment). The file is
 * root's, mode 0600, in a 0700 directory. */
void sb_persist_locked(struct srv *s, struct sandbox *sb)
{
	size_t cap = 4096 + sb_json_size(sb);
	char *buf, path[600], tmp[620];
	struct json_w w;
	size_t len;
	int fd;

	(void)s;
	for (unsigned i = 0; i < sb->nenv; i++)
		cap += 6 * strlen(sb->env[i]) + 8;
	for (unsigned i = 0; i < sb->nnet_args; i++)
		cap += 6 * strlen(sb->net_args[i]) + 8;
	buf = malloc(cap);
	if (!buf)
		return;
	json_w_init(&w, buf, cap);
	json_w_obj_begin(&w);
	json_w_key(&w, "sandbox", 7);
	sb_write_json(&w, sb, true);
	json_w_key(&w, "owner", 5);
	json_w_uint(&w, sb->owner);
	json_w_key(&w, "pid", 3);
	json_w_int(&w, sb->pid);
	json_w_key(&w, "pid_start", 9);
	json_w_uint(&w, sb->pid_start);
	json_w_key(&w, "net", 3);
	json_w_bool(&w, sb->net_enabled);
	if (sb->net_claimed)
		json_w_kuint(&w, "net_host", sb->net_host);
	json_w_key(&w, "net_args", 8);
	json_w_arr_begin(&w);
	for (unsigned i = 0; i < sb->nnet_args; i++)
		json_w_string(&w, sb->net_args[i], strlen(sb->net_args[i]));
	json_w_arr_end(&w);
	json_w_key(&w, "pooled", 6);
	json_w_bool(&w, sb->pooled);
	json_w_kbool(&w, "paused", sb->paused);
	json_w_kbool(&w, "template_build", sb->template_build);
	json_w_kbool(&w, "net_default", sb->net_default);
	json_w_kbool(&w, "identity_pending", sb->identity_pending);
	json_w_kuint(&w, "pause_gen", sb->pause_gen);
	json_w_kuint(&w, "timeout_s", sb->timeout_s);
	json_w_key(&w, "cpu_base_ms", 11);
	json_w_uint(&w, sb->cpu_base_ms);
	json_w_key(&w, "secret_from", 11);
	json_w_uint(&w, sb->nsecret_from);
	json_w_key(&w, "env", 3);
	json_w_arr_begin(&w);
	for (unsigned i = 0; i < sb->nenv; i++)
		json_w_string(&w, sb->env[i], strlen(sb->env[i]));
	json_w_arr_end(&w);
	json_w_obj_end(&w);
	if (json_w_finish(&w, &len))
		fprintf(stderr, "tinyvmm serve: sandbox %s: its state did not fit %zu bytes: not saved\n", sb->id, cap);
	else {
		snprintf(path, sizeof(path), "%s/state.json", sb->dir);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			bool ok = write(fd, buf, len) == (ssize_t)len;
			close(fd);
			if (!ok || rename(tmp, path) < 0) {
				fprintf(stderr, "tinyvmm serve: sandbox %s: %s: not saved\n", sb->id, path);
				unlink(tmp);
			}
		} else {
			fprintf(stderr, "tinyvmm serve: sandbox %s: %s: %s\n", sb->id, tmp, strerror(errno));
		}
	}
	free(buf);
}

int sb_net_arg_add(struct sandbox *sb, const char *flag, const char *value)
{
	char **v = realloc(sb->net_args, (sb->nnet_args + 3) * sizeof(*v));
	unsigned n = sb->nnet_args;

	if (!v)
		return -ENOMEM;
	sb->net_args = v;
	v[n] = strdup(flag);
	v[n + 1] = value ? strdup(value) : NULL;
	if (!v[n] || (value && !v[n + 1])) {
		free(v[n]);
		free(v[n + 1]);
		v[n] = NULL;
		return -ENOMEM;
	}
	sb->nnet_args = n + 1 + (value != NULL);
	v[sb->nnet_args] = NULL;
	return 0;
}

void srv_free_sandbox(struct sandbox *sb)
{
	for (unsigned i = 0; i < sb->nenv; i++)
		free(sb->env[i]);
	free(sb->env);
	for (unsigned i = 0; i < sb->nmeta; i++) {
		free(sb->meta[i].key);
		free(sb->meta[i].value);
	}
	free(sb->meta);
	for (unsigned i = 0; i < sb->nnet_args; i++)
		free(sb->net_args[i]);
	free(sb->net_args);
	exec_free_all(sb);
	tvm_agent_close(sb->keeper);
	free(sb);
}

void sb_audit_locked(struct srv *s, struct sandbox *sb, const char *event)
{
	char buf[512];
	struct json_w w;

	audit_begin(&w, buf, sizeof(buf), event);
	json_w_key(&w, "owner", 5);
	if (sb->pooled) /* no one's yet: not (uid_t)-1 */
		json_w_null(&w);
	else
		json_w_uint(&w, sb->owner);
	if (sb->end_reason) {
		json_w_key(&w, "end_reason", 10);
		json_w_string(&w, sb->end_reason, strlen(sb->end_reason));
	}
	json_w_key(&w, "pid", 3);
	json_w_int(&w, sb->pid);
	audit_end(s, sb, &w);
}

/* A state file is input (a previous daemon's, maybe a taken-over one's),
 * and a pid and start time are anyone's to read in /proc: those alone
 * would let it name any process for a SIGKILL. A command line is its
 * process's own. */
bool vmm_is_ours(const struct sandbox *sb)
{
	return sb->pid > 0 && sb->pid_start && jail_owner_alive(sb->pid, sb->pid_start) &&
	       vmm_cmdline_is(sb->pid, sb->uds) &&
	       jail_owner_alive(sb->pid, sb->pid_start); /* the same process still */
}

int sb_signal(struct srv *s, struct sandbox *sb, int sig)
{
	/* Through the helper, which checks it is this VMM by its start time:
	 * one it started (our child), or a re-adopted one by its command
	 * line. */
	if (sb->pid <= 0)
		return -ESRCH;
	/* our child, not reaped: its start time can still be read */
	if (!sb->pid_start && sb->own_child)
		jail_pid_start(sb->pid, &sb->pid_start);
	return priv_kill(s, sb, sig);
}

/* SIGTERM to its VMM, SIGKILL after the grace (ended_chores_locked). */
static void stop_vmm_locked(struct srv *s, struct sandbox *sb)
{
	if (!sb->exited && sb->pid > 0) {
		sb_signal(s, sb, SIGTERM);
		sb->kill_at_ns = now_ns() + STOP_GRACE_NS;
	}
}

void sb_end_locked(struct srv *s, struct sandbox *sb, const char *reason)
{
	if (sb->state == SB_ENDED)
		return;
	sb->state = SB_ENDED;
	sb->end_reason = reason;
	sb->ended_at = time(NULL);
	stop_vmm_locked(s, sb);
	sb_persist_locked(s, sb);
	sb_audit_locked(s, sb, "ended");
	pthread_cond_broadcast(&s->cv);
}

/* <dir>/paused-<gen>/state exists: the VMM wrote that snapshot whole (the
 * state file is written last). */
static bool snapshot_complete(const struct sandbox *sb, unsigned gen)
{
	char dir[620], path[640];
	struct stat st;

	sb_snapshot_dir(sb, gen, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/state", dir);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

static void last_line(const char *path, char *out, size_t cap);

/* The VMM process is gone (final_ms: its CPU time, 0 when unknown): what
 * it leaves is removed. */
static void reaped_locked(struct srv *s, struct sandbox *sb, int status, uint64_t final_ms)
{
	quota_count_locked(s, sb, final_ms);
	sb->exited = true;
	/* A pause: exit status 0, or, for a re-adopted VMM (not our child:
	 * no status), the snapshot it was to write, whole. Not a resume's
	 * VMM (paused still): whatever its status, the next branch, and its
	 * resume's hold (pausing) stays until sb_resume_started ends. */
	if (sb->pausing && !sb->paused && sb->state != SB_ENDED &&
	    (status == 0 || (status == -1 && snapshot_complete(sb, sb->pause_gen + 1)))) {
		sb->pausing = false;
		sb->paused = true;
	} else if (sb->paused && sb->state != SB_ENDED) {
		/* A resume's VMM that ended before the sandbox ran again: the
		 * snapshot is untouched (only ever mapped private), and the
		 * sandbox stays paused. */
		fprintf(stderr,
			"tinyvmm serve: sandbox %s: the VMM resuming it (pid %d) ended (status 0x%x): it stays paused\n",
			sb->id, (int)sb->pid, status);
	} else if (sb->state != SB_ENDED) {
		/* Its jail's parent saw the cgroup's OOM killer end the VMM. */
		bool oom = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == TVM_OOM_EXIT;

		char log[600], last[256] = "";

		sb_end_locked(s, sb, oom ? "oom" : "crashed");
		snprintf(log, sizeof(log), "%s/vmm.log", sb->dir);
		last_line(log, last, sizeof(last));
		fprintf(stderr, "tinyvmm serve: sandbox %s: its VMM (pid %d) ended by itself (status 0x%x%s)%s%s\n",
			sb->id, (int)sb->pid, status, oom ? ": out of memory" : "", *last ? ": " : "", last);
	}
	unlink(sb->uds);
	tvm_agent_close(sb->keeper);
	sb->keeper = NULL;
	net_release(s, sb);
	/* A VMM killed before it could clean up leaves its jail: the next
	 * VMM's start removes it (jail_run), or the next daemon's. Not this
	 * one: its jail dir is read-only to it (srv_walls). */
	sb_persist_locked(s, sb);
	pthread_cond_broadcast(&s->cv);
}

/* Reap its VMM if that has ended. */
static void reap_locked(struct srv *s, struct sandbox *sb)
{
	struct rusage ru;
	int st = 0;

	if (sb->exited || sb->pid <= 0)
		return;
	quota_sample_locked(s, sb);
	if (sb->own_child) {
		if (wait4(sb->pid, &st, WNOHANG, &ru) == sb->pid)
			reaped_locked(s, sb, st,
				      (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
					      (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000);
	} else if (!jail_owner_alive(sb->pid, sb->pid_start)) { /* re-adopted: see sb_signal */
		reaped_locked(s, sb, -1, 0);
	}
}

/* An ended sandbox's VMM past its stop grace gets SIGKILL; a TAP whose
 * removal failed (a VMM slow to let go) is tried again. */
static void ended_chores_locked(struct srv *s, struct sandbox *sb, uint64_t mono)
{
	if (sb->state == SB_ENDED && !sb->exited && sb->kill_at_ns && mono >= sb->kill_at_ns) {
		/* The helper checks it is still that process (a re-adopted
		 * pid is not our child and could have been reused); one it
		 * could not signal is tried again a second later. */
		int r = sb_signal(s, sb, SIGKILL);

		sb->kill_at_ns = r && r != -ESRCH ? mono + 1000000000ull : 0;
	}
	if (sb->exited && sb->net_claimed)
		net_release(s, sb);
}

void sb_drain_ended(struct srv *s)
{
	uint64_t deadline = now_ns() + STOP_GRACE_NS + 1000000000ull;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		bool left = false;

		for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next) {
			if (sb->state != SB_ENDED)
				continue;
			reap_locked(s, sb);
			ended_chores_locked(s, sb, now_ns());
			left |= !sb->exited || sb->net_claimed;
		}
		if (!left || now_ns() >= deadline)
			break;
		pthread_mutex_unlock(&s->mu);
		usleep(50000);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

void *srv_supervisor(void *arg)
{
	struct srv *s = arg;
	uint64_t host_at = now_ns() + PRIV_HOST_EVERY_NS;

	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		uint64_t mono = now_ns();
		time_t real = time(NULL);
		struct sandbox **pp = &s->sandboxes;

		/* What a VMM would find (/dev/kvm, the guest) changes with the
		 * host: srv_problems says the helper's last look. */
		if (mono >= host_at) {
			pthread_mutex_unlock(&s->mu);
			priv_host(s);
			pthread_mutex_lock(&s->mu);
			host_at = mono + PRIV_HOST_EVERY_NS;
			continue;
		}

		/* No VMM can start and no TAP go without it, and a confined
		 * daemon cannot make another: it stops, so that its service
		 * manager starts a new one (which re-adopts the sandboxes). */
		if (!priv_alive(s)) {
			fprintf(stderr, "tinyvmm serve: its privileged helper is gone: the daemon stops (its sandboxes "
					"stay for the next daemon)\n");
			s->failed = 1;
			s->stopping = 1;
			break;
		}

		while (*pp) {
			struct sandbox *sb = *pp;

			reap_locked(s, sb);
			if (sb->state == SB_RUNNING && !sb->pooled && !sb->paused) {
				if (real >= sb->expires_at)
					sb_end_locked(s, sb, "expired");
				else if (sb->idle_timeout_s && !sb->running_execs &&
					 mono - sb->last_active_ns >= (uint64_t)sb->idle_timeout_s * 1000000000u)
					sb_end_locked(s, sb, "idle");
			}
			ended_chores_locked(s, sb, mono);
			if (sb->state == SB_ENDED && sb->exited && !sb->refs && !sb->running_execs &&
			    (sb->pooled || real - sb->ended_at >= (time_t)s->cfg.retention_s)) {
				*pp = sb->next;
				sb_remove_dir(sb->dir);
				srv_free_sandbox(sb);
				continue;
			}
			pp = &sb->next;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 250 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The argv of the sandbox's VMM. */
static int vmm_argv(struct srv *s, struct sandbox *sb, char **argv, size_t cap, char num[][24])
{
	size_t n = 0;
	static __thread char jd[300], pause_to[600], resume_from[600], tap[16], mac[18];

#define ADD(x)                           \
	do {                             \
		if (n + 2 > cap)         \
			return -E2BIG;   \
		argv[n++] = (char *)(x); \
	} while (0)
	ADD(s->cfg.exe);
	ADD("run");
	ADD("--vsock-uds");
	ADD(sb->uds);
	ADD("--serial-out");
	ADD("/dev/null");
	ADD("--no-inplace-drives"); /* a snapshot of the state dir names no host file to write */
	sb_snapshot_dir(sb, sb->pause_gen + 1, pause_to, sizeof(pause_to));
	ADD("--pause-to");
	ADD(pause_to);
	if (sb->pause_gen) {
		sb_snapshot_dir(sb, sb->pause_gen, resume_from, sizeof(resume_from));
		ADD("--snapshot");
		ADD(resume_from);
	}
	snprintf(num[0], 24, "%u", sb->memory_mib);
	snprintf(num[1], 24, "%u", sb->cpus);
	snprintf(num[2], 24, "%u", s->cfg.orphan_timeout_s);
	if (!sb->pause_gen) { /* a resume takes them from its snapshot */
		ADD("--mem");
		ADD(num[0]);
		ADD("--cpus");
		ADD(num[1]);
	}
	ADD("--idle-timeout");
	ADD(num[2]);
	if (s->cfg.cgroup_parent[0]) {
		ADD("--cgroup-parent");
		ADD(s->cfg.cgroup_parent);
	}
	if (s->cfg.jail == 1 || (s->cfg.jail < 0 && geteuid() == 0)) {
		jail_dir(s, jd, sizeof(jd));
		ADD("--jail");
		ADD("--jail-dir");
		ADD(jd);
	}
	if (sb->net_claimed) {
		/* Its guest is addressed through the agent once up (at a
		 * create or a fork: sb_set_identity), so a create is restored
		 * from the template with a network device, not booted. */
		net_tap_name(sb, tap);
		ADD("--net");
		ADD(tap);
		/* Nothing on the host opens a connection into a sandbox (another
		 * user's process); its own traffic gets its replies. */
		ADD("--net-ingress");
		ADD("replies");
		if (sb->forked_from[0]) { /* its own, not its parent's (sb_set_identity) */
			net_mac(sb, mac);
			ADD("--net-mac");
			ADD(mac);
		}
		for (unsigned i = 0; i < sb->nnet_args; i++)
			ADD(sb->net_args[i]);
	}
	argv[n] = NULL;
	return 0;
#undef ADD
}

/* The last non-empty line of the VMM's log (its own messages: why it
 * could not start), control bytes as '?', at most cap - 1 bytes. */
static void last_line(const char *path, char *out, size_t cap)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
	ssize_t n = 0;

	*out = 0;
	if (end > 0) {
		off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
		n = pread(fd, buf, sizeof(buf) - 1, from);
	}
	if (fd >= 0)
		close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n <= 0)
		return;
	buf[n] = 0;
	char *line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	snprintf(out, cap, "%.*s", (int)(cap - 1), line);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* No allow_out, no dns: the daemon's default rules for its /30, made
 * once, at its create, and kept with it (a resume by a daemon with
 * another net_range gives the rules it had). 0 or -errno. */
static int default_rules(const struct srv *s, struct sandbox *sb)
{
	char rules[SB_NET_DEFAULT_RULES][32];
	int nr = net_egress_rules(s, sb, rules, SB_NET_DEFAULT_RULES);

	for (int i = 0; i < nr; i++)
		if (sb_net_arg_add(sb, "--net-allow", rules[i]))
			return -ENOMEM;
	return nr < 0 ? nr : 0;
}

int sb_create(struct srv *s, struct sandbox *sb, char *err, size_t errcap)
{
	char *argv[VMM_ARGV_MAX], num[3][24], log[600];
	struct tvm_err e = { 0 };
	pid_t pid;
	int r;

	if (mkdir(sb->dir, 0700) < 0 && !(sb->pause_gen && errno == EEXIST)) { /* a resume, a fork: it is there */
		snprintf(err, errcap, "%s: %s", sb->dir, strerror(errno));
		return -errno;
	}
	if (sb->net_enabled) {          /* its /30 was claimed at its admission (sb_start) */
		if (!sb->net_claimed) { /* a resume after its end gave the /30 back */
			snprintf(err, errcap, "network: its /30 was given back");
			return -ENOENT;
		}
		/* a create's, or a child's of a parent that had them */
		if (sb->net_default && !sb->nnet_args && (r = default_rules(s, sb))) {
			snprintf(err, errcap, "network: its default egress rules: %s", strerror(-r));
			net_release(s, sb);
			return r;
		}
		pthread_mutex_lock(&s->mu);
		sb_persist_locked(s, sb); /* before its TAP exists: a daemon killed now still finds it */
		pthread_mutex_unlock(&s->mu);
		if ((r = net_setup(s, sb, err, errcap))) {
			sb->net_claimed = sb->paused; /* a paused one keeps its /30: its guest has it */
			return r;
		}
	}
	if ((r = vmm_argv(s, sb, argv, VMM_ARGV_MAX, num))) {
		snprintf(err, errcap, "too many network rules");
		net_release(s, sb);
		return r;
	}
	snprintf(log, sizeof(log), "%s/vmm.log", sb->dir);
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		snprintf(err, errcap, "%s: %s", log, strerror(errno));
		r = -errno;
		net_release(s, sb);
		return r;
	}
	pid = priv_spawn(s, argv, logfd, err, errcap);
	close(logfd);
	if (pid < 0) {
		net_release(s, sb);
		return pid;
	}
	pthread_mutex_lock(&s->mu);
	sb->pid = pid;
	sb->own_child = true;
	sb->pid_start = 0; /* not a previous VMM's (a resume): sb_signal reads it again */
	jail_pid_start(pid, &sb->pid_start);
	if (sb->state == SB_ENDED) /* a DELETE before it had a pid sent no SIGTERM */
		stop_vmm_locked(s, sb);
	sb_persist_locked(s, sb);
	pthread_mutex_unlock(&s->mu);

	/* Wait for the agent (seeded: a restored guest must not share its
	 * template's entropy and clock), while the VMM lives. */
	uint64_t deadline = now_ns() + (uint64_t)READY_TIMEOUT_S * 1000000000u;
	for (;;) {
		bool gone;

		struct tvm_agent *keeper = NULL;

		r = sb_keeper(sb, 2000, &keeper, &e);
		if (!r) {
			pthread_mutex_lock(&s->mu);
			gone = sb->exited || sb->state == SB_ENDED;
			if (!gone)
				sb->keeper = keeper;
			pthread_mutex_unlock(&s->mu);
			if (gone)
				tvm_agent_close(keeper);
			else
				break;
		}
		pthread_mutex_lock(&s->mu);
		gone = sb->exited || sb->state == SB_ENDED;
		pthread_mutex_unlock(&s->mu);
		if (gone || now_ns() > deadline) {
			char last[256];

			last_line(log, last, sizeof(last));
			/* The VMM found no guest where the daemon's environment
			 * points it (TINYVMM_DATA_DIR): say so in the daemon's
			 * terms, not the CLI's flags. */
			bool no_guest = strstr(last, "no guest kernel") || strstr(last, "no base image found");
			snprintf(err, errcap, "the sandbox's VM %s%s%s (its log: %s)%s",
				 gone ? "ended while starting" : "did not start", *last ? ": " : "", last, log,
				 no_guest ? "; tinyvmm serve's VMMs take the guest from $TINYVMM_DATA_DIR: start the "
					    "daemon with it set (/usr/local/share/tinyvmm after bash tools/setup.sh)"
					  : "");
			return -EIO;
		}
	}
	pthread_mutex_lock(&s->mu);
	if (sb->state == SB_STARTING)
		sb->state = SB_RUNNING;
	if (!sb->pause_gen)
		sb->created_at = time(NULL);
	sb->expires_at = time(NULL) + sb->timeout_s; /* a resume: a new lifetime */
	sb->last_active_ns = now_ns();
	sb_persist_locked(s, sb);
	sb_audit_locked(s, sb,
			sb->pooled           ? "pooled"
			: sb->paused         ? "resumed"
			: sb->forked_from[0] ? "forked"
					     : "created");
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* Hard-link every regular file of the snapshot from into the new
 * directory to. 0 or -errno with err set. */
int sb_link_snapshot(const char *from, const char *to, char *err, size_t cap)
{
	int src = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW), r = 0;
	DIR *d;
	struct dirent *de;

	if (src < 0 || mkdir(to, 0700) < 0) {
		r = -errno;
		snprintf(err, cap, "%s: %s", src < 0 ? from : to, strerror(errno));
		if (src >= 0)
			close(src);
		return r;
	}
	if (!(d = fdopendir(src))) {
		r = -errno;
		close(src);
		snprintf(err, cap, "%s: %s", from, strerror(-r));
		return r;
	}
	while (!r && (errno = 0, de = readdir(d))) {
		char path[1024];
		struct stat st;

		if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", to, de->d_name) >= (int)sizeof(path))
			r = -ENAMETOOLONG;
		else if (linkat(src, de->d_name, AT_FDCWD, path, 0) < 0)
			r = -errno;
		if (r)
			snprintf(err, cap, "link %.300s/%.100s: %s", from, de->d_name, strerror(-r));
	}
	closedir(d);
	return r;
}

/* The hostname, as the source of a file PUT. */
struct hostname_src {
	const char *p;
	size_t left;
};

static ssize_t hostname_read(void *ctx, void *buf, size_t cap)
{
	struct hostname_src *h = ctx;
	size_t n = h->left < cap ? h->left : cap;

	memcpy(buf, h->p, n);
	h->p += n;
	h->left -= n;
	return (ssize_t)n;
}

/* The file is procfs's: written in place, no new process in the guest. */
int sb_set_identity(struct srv *s, struct sandbox *sb, char *err, size_t cap)
{
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	char name[48], spec[128], host[16], guest[16], mac[18];
	const char *what = "its agent";
	int r;

	snprintf(name, sizeof(name), "sbx-%s\n", sb->id + 4);
	r = sb_agent(sb, 5000, &a, &e);
	if (!r && sb->net_enabled) {
		net_addrs(sb, host, guest);
		int n = snprintf(spec, sizeof(spec), "%s/30,gw=%s", guest, host);
		if (sb->forked_from[0]) { /* its VMM's NIC has it (vmm_argv) */
			net_mac(sb, mac);
			n += snprintf(spec + n, sizeof(spec) - (size_t)n, ",mac=%s", mac);
		}
		/* its first IPv4 --net-dns for resolv.conf (a fork's child's
		 * made its own by net_inherit_args) */
		for (unsigned i = 0; i + 1 < sb->nnet_args; i++)
			if (!strcmp(sb->net_args[i], "--net-dns") && !strchr(sb->net_args[i + 1], ':')) {
				snprintf(spec + n, sizeof(spec) - (size_t)n, ",dns=%s", sb->net_args[i + 1]);
				break;
			}
		what = "its network";
		r = tvm_agent_net(a, spec, &e);
	}
	if (!r) {
		struct hostname_src src = { name, strlen(name) };

		/* as root: /proc/sys checks the agent's effective uid, which
		 * is the identity's for a file request (guest/PROTOCOL.md) */
		what = "its hostname";
		r = tvm_agent_put_stream(a, "/proc/sys/kernel/hostname", 0644, TVM_ID_ROOT, hostname_read, &src, NULL,
					 &e);
	}
	tvm_agent_close(a);
	if (r) {
		snprintf(err, cap, "%s: %s", what, e.msg);
		return r;
	}
	pthread_mutex_lock(&s->mu);
	sb->identity_pending = false;
	sb_persist_locked(s, sb);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* ---- After a restart ---- */

/* A state file is input: a regular file of at most max bytes (a FIFO at
 * its place would hang the start), not a symlink. */
static char *read_file(const char *path, size_t max, size_t *len)
{
	char *b = malloc(max + 1);
	ssize_t n = b ? file_read_whole(path, O_NOFOLLOW, b, max + 1) : -ENOMEM;

	if (n < 0) {
		free(b);
		return NULL;
	}
	*len = (size_t)n;
	return b;
}

/* "sbx_" and 32 lowercase hex digits, as sb_name makes them. */
static bool sb_id_ok(const char *name)
{
	if (strncmp(name, "sbx_", 4) || strlen(name) != 36)
		return false;
	for (const char *p = name + 4; *p; p++)
		if (!hex_lower(*p))
			return false;
	return true;
}

static int get_u64(const struct json_doc *d, int obj, const char *key, uint64_t *v)
{
	int64_t x;
	int i = json_find(d, obj, key);

	if (i < 0 || json_get_int64(d, i, &x) || x < 0)
		return -EINVAL;
	*v = (uint64_t)x;
	return 0;
}

static time_t get_time(const struct json_doc *d, int obj, const char *key)
{
	char t[40];
	struct tm tm = { 0 };
	int i = json_find(d, obj, key);

	if (i < 0 || json_get_string(d, i, t, sizeof(t), NULL) || !strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return 0;
	return timegm(&tm);
}

static const char *reason_const(const char *r)
{
	static const char *const all[] = { "killed", "expired", "idle", "crashed", "oom" };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(r, all[i]))
			return all[i];
	return "crashed";
}

/* SIGKILL to a previous daemon's VMM we do not re-adopt, if that pid still
 * runs it, and wait (2 s at most) for it to go: then jail_gc removes its
 * jail, and its TAP is free to remove. */
static void kill_wait(struct srv *s, struct sandbox *sb)
{
	if (!vmm_is_ours(sb) || sb_signal(s, sb, SIGKILL))
		return;
	for (int i = 0; i < 100 && jail_owner_alive(sb->pid, sb->pid_start); i++)
		usleep(20000);
}

/* A networked sandbox's egress flags, as its create made them (its
 * allow_out and dns, or the default rules of then): a resume gives them
 * again: pairs of --net-allow or --net-dns and a value, or
 * --net-deny-all alone (a create's empty lists). Anything else, or an
 * empty or missing list (an older daemon's state): it fails closed, to
 * --net-deny-all. True when it read pairs (rules that may be the default
 * ones), false when sb denies all. */
static bool load_net_args(const struct json_doc *d, struct sandbox *sb)
{
	int a = json_find(d, 0, "net_args"), n = 0;
	bool ok = a >= 0 && d->tok[a].type == JSON_ARRAY && d->tok[a].size <= 4 * SB_NET_RULES_MAX;
	char flag[16], value[72];
	unsigned ndns = 0;

	if (ok && d->tok[a].size == 1 && !json_get_string(d, json_first(d, a), flag, sizeof(flag), NULL) &&
	    !strcmp(flag, "--net-deny-all") && !sb_net_arg_add(sb, flag, NULL))
		return false;
	for (int k = ok ? json_first(d, a) : -1; k >= 0 && ok; k = json_next(d, a, k), n++) {
		if (n % 2 == 0)
			ok = !json_get_string(d, k, flag, sizeof(flag), NULL) &&
			     (!strcmp(flag, "--net-allow") || !strcmp(flag, "--net-dns"));
		else
			ok = !json_get_string(d, k, value, sizeof(value), NULL) &&
			     net_egress_value_ok(flag, value, &ndns) && !sb_net_arg_add(sb, flag, value);
	}
	if (ok && n && n % 2 == 0)
		return true;
	fprintf(stderr, "tinyvmm serve: sandbox %s: its egress rules are unreadable: it is given none\n", sb->id);
	for (unsigned i = 0; i < sb->nnet_args; i++)
		free(sb->net_args[i]);
	if (sb->net_args)
		sb->net_args[0] = NULL;
	sb->nnet_args = 0;
	if (sb_net_arg_add(sb, "--net-deny-all", NULL))
		sb->net_claimed = false; /* no memory for it: its VMM gets no TAP (a resume fails) */
	return false;
}

/* One sandbox directory of a previous daemon: into the table (ended or
 * re-adopted), or removed when it cannot be read. */
static void load_one(struct srv *s, const char *dir, const char *name)
{
	char path[600], str[256];
	size_t len;
	char *text;
	struct json_tok *tok = NULL;
	struct json_doc d;
	struct sandbox *sb = calloc(1, sizeof(*sb));
	uint64_t v;
	int o, i;

	snprintf(path, sizeof(path), "%.500s/state.json", dir);
	text = read_file(path, STATE_MAX, &len);
	tok = calloc(16384, sizeof(*tok));
	if (!sb || !text || !tok || json_parse(&d, text, len, tok, 16384, 0, NULL) ||
	    (o = json_find(&d, 0, "sandbox")) < 0)
		goto bad;
	snprintf(sb->dir, sizeof(sb->dir), "%.500s", dir);
	snprintf(sb->uds, sizeof(sb->uds), "%.500s/vsock.sock", dir);
	if ((i = json_find(&d, o, "id")) < 0 || json_get_string(&d, i, sb->id, sizeof(sb->id), NULL) ||
	    strcmp(sb->id, name) || (i = json_find(&d, o, "access_token")) < 0 ||
	    json_get_string(&d, i, sb->token, sizeof(sb->token), &len) || len != 32)
		goto bad;
	if ((i = json_find(&d, o, "template")) < 0 ||
	    json_get_string(&d, i, sb->template, sizeof(sb->template), NULL) ||
	    (strcmp(sb->template, "default") && !tmpl_name_ok(sb->template)))
		goto bad;
	if ((i = json_find(&d, o, "forked_from")) >= 0 && !json_is_null(&d, i) &&
	    json_get_string(&d, i, sb->forked_from, sizeof(sb->forked_from), NULL))
		goto bad;
	if (get_u64(&d, 0, "owner", &v))
		goto bad;
	sb->owner = (uid_t)v;
	if (get_u64(&d, 0, "pid", &v))
		goto bad;
	sb->pid = (pid_t)v;
	if (get_u64(&d, 0, "pid_start", &v))
		goto bad;
	sb->pid_start = v;
	/* Within a create's bounds, as this daemon wrote them (else a
	 * create's defaults: a listing never shows what no create gives). */
	sb->cpus = !get_u64(&d, o, "cpus", &v) && v >= 1 && v <= SB_CPUS_MAX ? (unsigned)v : 1;
	sb->memory_mib = !get_u64(&d, o, "memory_mib", &v) && v >= SB_MEM_MIB_MIN && v <= SB_MEM_MIB_MAX
				 ? (unsigned)v
				 : SB_MEM_MIB_DEFAULT;
	if (!get_u64(&d, o, "idle_timeout_s", &v) && v <= s->cfg.max_timeout_s)
		sb->idle_timeout_s = (unsigned)v;
	if (!get_u64(&d, 0, "secret_from", &v))
		sb->nsecret_from = (unsigned)v;
	sb->created_at = get_time(&d, o, "created_at");
	sb->expires_at = get_time(&d, o, "expires_at");
	sb->ended_at = get_time(&d, o, "ended_at");
	if ((i = json_find(&d, o, "metadata")) >= 0 && d.tok[i].type == JSON_OBJECT && d.tok[i].size) {
		sb->meta = calloc(d.tok[i].size, sizeof(*sb->meta));
		for (int k = json_first(&d, i); k >= 0 && sb->meta; k = json_next(&d, i, k)) {
			char key[256], val[1024];
			if (json_get_string(&d, k, key, sizeof(key), NULL) ||
			    json_get_string(&d, k + 1, val, sizeof(val), NULL))
				continue;
			sb->meta[sb->nmeta].key = strdup(key);
			sb->meta[sb->nmeta].value = strdup(val);
			sb->nmeta++;
		}
	}
	if ((i = json_find(&d, 0, "env")) >= 0 && d.tok[i].type == JSON_ARRAY) {
		sb->env = calloc(d.tok[i].size + 1, sizeof(char *));
		for (int k = json_first(&d, i); k >= 0 && sb->env; k = json_next(&d, i, k)) {
			size_t n = d.tok[k].len + 1;
			char *e = malloc(n);
			if (e && json_get_string(&d, k, e, n, NULL) == 0)
				sb->env[sb->nenv++] = e;
			else
				free(e);
		}
	}
	if (sb->nsecret_from > sb->nenv)
		sb->nsecret_from = sb->nenv;
	if (!get_u64(&d, 0, "cpu_base_ms", &v))
		sb->cpu_base_ms = v;
	if ((i = json_find(&d, 0, "net")) >= 0)
		json_get_bool(&d, i, &sb->net_enabled);
	/* Its /30, held while its VMM runs (whatever this daemon's range);
	 * its TAP is found by its name (net_release), not by this. */
	if (sb->net_enabled && !get_u64(&d, 0, "net_host", &v) && v <= UINT32_MAX && net_host_ok((uint32_t)v)) {
		sb->net_host = (uint32_t)v;
		sb->net_claimed = true;
	}
	if ((i = json_find(&d, 0, "net_default")) >= 0)
		json_get_bool(&d, i, &sb->net_default);
	/* Denying all, its rules are not the default ones: a fork's child
	 * inherits the denial, never gets default rules of its own. */
	if (sb->net_enabled && !load_net_args(&d, sb))
		sb->net_default = false;
	if ((i = json_find(&d, o, "from_pool")) >= 0)
		json_get_bool(&d, i, &sb->from_pool);
	if ((i = json_find(&d, 0, "pooled")) >= 0 && !json_get_bool(&d, i, &sb->pooled) && sb->pooled) {
		/* A previous daemon's pool: nobody's, not worth re-adopting
		 * (the new pool is made by its own settings). */
		kill_wait(s, sb);
		net_release(s, sb);
		sb_remove_dir(dir);
		free(text);
		free(tok);
		srv_free_sandbox(sb);
		return;
	}
	if (!get_u64(&d, 0, "pause_gen", &v) && v < UINT32_MAX)
		sb->pause_gen = (unsigned)v;
	/* the lifetime a resume gives (state of an older daemon: the default) */
	sb->timeout_s = !get_u64(&d, 0, "timeout_s", &v) && v && v <= s->cfg.max_timeout_s ? (unsigned)v
											   : s->cfg.default_timeout_s;
	/* A template build the previous daemon did not finish: its client
	 * got no template, and nothing of the build runs on. */
	bool build = false, pending = false;
	if ((i = json_find(&d, 0, "template_build")) >= 0)
		json_get_bool(&d, i, &build);
	/* Nor a start that had not given its guest its own identity: its
	 * client got no sandbox, and it runs as another (a fork's parent). */
	if ((i = json_find(&d, 0, "identity_pending")) >= 0)
		json_get_bool(&d, i, &pending);
	i = json_find(&d, o, "state");
	bool was_running = i >= 0 && json_str_eq(&d, i, "running", 7);
	/* A daemon killed after the VMM saved a pause but before it said so:
	 * the newer snapshot is whole, its VMM gone; paused, from it. */
	bool recovered = false;
	if (!build && !pending && was_running && !vmm_is_ours(sb) && snapshot_complete(sb, sb->pause_gen + 1)) {
		sb->pause_gen++;
		recovered = true;
		fprintf(stderr, "tinyvmm serve: sandbox %s: its pause into paused-%u was done: paused\n", sb->id,
			sb->pause_gen);
	}
	if (!build && !pending && (recovered || (i >= 0 && json_str_eq(&d, i, "paused", 6) && sb->pause_gen))) {
		/* Its snapshot waits for a resume. A VMM a killed daemon was
		 * starting from it (a resume, a fork's) is not ours to keep:
		 * the sandbox is paused, nothing else may run as it. */
		if (vmm_is_ours(sb) && !sb_signal(s, sb, SIGKILL)) {
			fprintf(stderr, "tinyvmm serve: sandbox %s: paused; the VMM (pid %d) started from it ended\n",
				sb->id, (int)sb->pid);
		}
		unlink(sb->uds);
		sb->state = SB_RUNNING;
		sb->paused = sb->exited = true;
		sb->pid = 0;
		sb->next = s->sandboxes;
		s->sandboxes = sb;
		free(text);
		free(tok);
		return;
	}
	sb->state = SB_ENDED;
	sb->exited = true;
	if ((i = json_find(&d, o, "end_reason")) >= 0 && json_get_string(&d, i, str, sizeof(str), NULL) == 0)
		sb->end_reason = reason_const(str);
	if ((build || pending) && !sb->end_reason) /* paused by it, or still running */
		was_running = true;
	if (was_running) {
		struct tvm_err e = { 0 };

		if (!build && !pending && vmm_is_ours(sb) && sb_keeper(sb, 5000, &sb->keeper, &e) == 0) {
			sb->state = SB_RUNNING;
			sb->exited = false;
			sb->end_reason = NULL;
			sb->last_active_ns = now_ns();
			fprintf(stderr, "tinyvmm serve: sandbox %s re-adopted (VMM pid %d)\n", sb->id, (int)sb->pid);
		} else {
			/* Not provably ours and alive: ended, and its process
			 * (if that pid still runs the VMM we started) stopped. */
			kill_wait(s, sb);
			sb->state = SB_RUNNING; /* for sb_end_locked */
			sb_end_locked(s, sb, build ? "killed" : "crashed");
			sb->kill_at_ns = 0;
			sb->exited = true;
			unlink(sb->uds);
			fprintf(stderr, "tinyvmm serve: sandbox %s: %s: ended\n", sb->id,
				build     ? "its template build was not finished"
				: pending ? "its start was not finished"
					  : "its VMM did not survive the restart");
		}
		sb_persist_locked(s, sb);
	} else {
		/* Ended, but its VMM may have outlived its stop (a previous
		 * daemon whose helper was gone could not signal it). */
		kill_wait(s, sb);
	}
	if (sb->state == SB_ENDED)
		net_release(s, sb); /* its VMM is gone; the daemon that saw it end may not have removed it */
	if (!sb->ended_at)
		sb->ended_at = time(NULL);
	sb->next = s->sandboxes;
	s->sandboxes = sb;
	free(text);
	free(tok);
	return;
bad:
	fprintf(stderr, "tinyvmm serve: %s: unreadable sandbox state: removed\n", dir);
	/* A daemon killed between making its TAP and saving its state (or a
	 * damaged state): its TAP, if any, goes by name; an unreadable state
	 * proves no VMM of ours holds it. */
	net_remove_tap(s, name);
	sb_remove_dir(dir);
	free(text);
	free(tok);
	if (sb)
		srv_free_sandbox(sb);
}

int srv_state_init(struct srv *s)
{
	char path[300];
	DIR *d;
	struct dirent *de;

	if (mkdir(s->cfg.state_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* One daemon per state directory: two would both re-adopt (and
	 * end) the same sandboxes. Held until we exit. */
	snprintf(path, sizeof(path), "%s/lock", s->cfg.state_dir);
	int lk = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lk < 0)
		return -errno;
	if (flock(lk, LOCK_EX | LOCK_NB) < 0) {
		close(lk);
		return -EBUSY;
	}
	snprintf(path, sizeof(path), "%s/sandboxes", s->cfg.state_dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	jail_dir(s, path, sizeof(path)); /* its walls show it read-only: it must exist */
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (quota_load(s) < 0)
		fprintf(stderr, "tinyvmm serve: %s/cpu-usage unreadable: today's CPU use starts at 0\n",
			s->cfg.state_dir);
	snprintf(path, sizeof(path), "%s/sandboxes", s->cfg.state_dir);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char dir[600];

		if (!sb_id_ok(de->d_name)) {
			if (!strncmp(de->d_name, "sbx_", 4))
				fprintf(stderr,
					"tinyvmm serve: %s/%s: not a sandbox id (sbx_ and 32 hex digits): left alone\n",
					path, de->d_name);
			continue;
		}
		snprintf(dir, sizeof(dir), "%s/%s", path, de->d_name);
		pthread_mutex_lock(&s->mu);
		load_one(s, dir, de->d_name);
		pthread_mutex_unlock(&s->mu);
	}
	closedir(d);
	tmpl_load(s);
	/* After load_one killed what it does not re-adopt. Before the walls,
	 * as root: what it reads there only root wrote (a VMM's jail parent),
	 * the confined daemon cannot (srv_walls), so no stage path in it
	 * is a taken-over daemon's. */
	jail_dir(s, path, sizeof(path));
	jail_gc(path, NULL, NULL);
	return 0;
}
