/* POST /v1/sandboxes/{id}/pause and .../resume. Every sandbox's VMM runs
 * with `--pause-to <dir>/paused-<gen+1>`: a pause closes the keeper and
 * sends SIGUSR1; the VMM saves the VM there (files, processes, memory)
 * and ends with status 0, which the supervisor reaps as a pause, not a
 * crash. The sandbox is then `paused`: no process, no lifetime running,
 * its snapshot on disk. A resume starts `tinyvmm run --snapshot
 * <dir>/paused-<gen>` (sb_create) and waits for its agent as a create
 * does; the previous snapshot is removed once a newer one exists. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vmm/serve/serve.h"
#include "vmm/snapshot/snapshot_diff.h"

#define PAUSE_WAIT_S 120 /* the save of a VM of several GiB on a slow disk */

/* Is the snapshot in dir the base of the one saved after it? A VMM
 * restored from a diff saves a diff against that diff's base (a
 * template), one restored from a full snapshot a diff against that one:
 * a sandbox that booted (a networked one: no template has a network
 * device yet) paused first into a full paused-1, which stays while it
 * lives. One that cannot be read is kept too (a line says so): disk is
 * cheaper than a sandbox that can no longer resume. */
static bool is_base(const struct sandbox *sb, const char *dir)
{
	struct snap_base b;
	struct tvm_err e = { 0 };
	bool diff = false;

	if (snap_base_identify(dir, &b, &diff, &e) == 0)
		return !diff;
	fprintf(stderr, "tinyvmm serve: sandbox %s: %s: kept\n", sb->id, e.msg);
	return true;
}

int sb_pause(struct srv *s, struct sandbox *sb, bool hold, char *err, size_t cap)
{
	char dir[600], mem[620];
	uint64_t t0 = now_ns();
	struct timespec ts;
	struct stat st;
	const char *why = NULL;
	unsigned npaused = 0;

	pthread_mutex_lock(&s->mu);
	for (struct sandbox *o = s->sandboxes; o; o = o->next)
		npaused += o->owner == sb->owner && o->paused && o->state != SB_ENDED;
	if (sb->paused)
		why = "it is paused already";
	else if (sb->pausing)
		why = "a pause is under way";
	else if (sb->running_execs)
		why = "commands are running in it: wait for them or signal them first";
	else if (sb->state != SB_RUNNING || sb->exited)
		why = "it is not running";
	if (why) {
		pthread_mutex_unlock(&s->mu);
		snprintf(err, cap, "%s", why);
		return 409;
	}
	/* Paused sandboxes hold disk and never expire: as many per owner
	 * as may run. A held pause (fork, template) resumes at once. */
	if (!hold && npaused >= s->cfg.max_per_owner) {
		pthread_mutex_unlock(&s->mu);
		snprintf(err, cap, "uid %u has %u paused sandboxes (the limit: delete or resume one)",
			 (unsigned)sb->owner, npaused);
		return 429;
	}
	sb->pausing = true;
	/* No connection may stay open across the save: the keeper goes
	 * first (with it the VMM's --idle-timeout would start: it does not
	 * matter, the VMM ends now). */
	tvm_agent_close(sb->keeper);
	sb->keeper = NULL;
	sb_signal(s, sb, SIGUSR1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += PAUSE_WAIT_S;
	while (!sb->exited && sb->state != SB_ENDED)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	if (!sb->paused) {
		bool running = !sb->exited && sb->state != SB_ENDED, ended = sb->state == SB_ENDED;
		sb->pausing = false;
		pthread_mutex_unlock(&s->mu);
		if (ended) { /* a DELETE or its lifetime, meanwhile: 410 */
			snprintf(err, cap, "it ended during the pause");
			return 410;
		}
		if (running) {
			/* Still running, as it was: the keeper comes back. */
			struct tvm_agent *k = NULL;
			struct tvm_err e = { 0 };
			if (!sb_keeper(sb, 5000, &k, &e)) {
				pthread_mutex_lock(&s->mu);
				sb->keeper = k;
				pthread_mutex_unlock(&s->mu);
			}
		}
		snprintf(err, cap, "the pause failed (%s; its log: %s/vmm.log)",
			 running ? "the VM runs on" : "its VMM ended", sb->dir);
		return 500;
	}
	sb_snapshot_dir(sb, sb->pause_gen + 1, dir, sizeof(dir));
	snprintf(mem, sizeof(mem), "%s/mem", dir);
	sb->pause_gen++;
	sb->pause_ms = (now_ns() - t0) / 1000000u;
	sb->pause_bytes = stat(mem, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
	/* the figures of GET .../default/pool, or of GET /v1/templates/NAME */
	stats_sample_locked(s, sb, POOL_PAUSE_MS, sb->pause_ms);
	stats_sample_locked(s, sb, POOL_PAUSE_KIB, sb->pause_bytes >> 10);
	sb_audit_locked(s, sb, "paused"); /* with the pid of the VMM that saved it */
	sb->pid = 0;
	sb->pausing = hold; /* held: the caller starts it again, no one else */
	sb_persist_locked(s, sb);
	if (sb->pause_gen > 1) {
		/* The VM that just ended mapped the one before: no longer used,
		 * unless the new one is a diff against it. */
		sb_snapshot_dir(sb, sb->pause_gen - 1, dir, sizeof(dir));
		if (!is_base(sb, dir))
			sb_remove_dir(dir);
	}
	pthread_mutex_unlock(&s->mu);
	fprintf(stderr, "tinyvmm serve: sandbox %s paused in %llu ms (memory %llu KiB on disk)\n", sb->id,
		(unsigned long long)sb->pause_ms, (unsigned long long)(sb->pause_bytes >> 10));
	return 0;
}

void api_pause(struct conn *c, struct sandbox *sb)
{
	char err[700];
	int code = sb_pause(c->s, sb, false, err, sizeof(err));

	if (code == 409 || code == 429)
		conn_error(c, code, code == 409 ? "conflict" : "quota_exceeded", "sandbox %s cannot be paused: %s",
			   sb->id, err);
	else if (code == 410)
		api_ended(c, sb);
	else if (code)
		conn_error(c, code, "internal", "sandbox %s: %s", sb->id, err);
	else
		api_get(c, sb);
}

/* Start sb's VMM from its newest snapshot (sb->pausing set by the
 * caller, under mu, so that no second resume runs meanwhile). */
int sb_resume_started(struct srv *s, struct sandbox *sb, char *err, size_t cap)
{
	int r;

	pthread_mutex_lock(&s->mu);
	sb->exited = false;
	sb->own_child = true;
	sb->kill_at_ns = 0;
	sb->cpu_counted = false;
	sb->cpu_ms = sb->cpu_base_ms = 0;
	pthread_mutex_unlock(&s->mu);
	r = sb_create(s, sb, err, cap);
	pthread_mutex_lock(&s->mu);
	if (r && sb->pid > 0 && !sb->exited) {
		/* Not resumed (its agent never answered): that VMM goes, and
		 * its end leaves the sandbox paused (reaped_locked). */
		struct timespec ts;

		sb_signal(s, sb, SIGKILL);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 30;
		while (!sb->exited)
			if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
				break;
	}
	sb->pausing = false;
	if (!r) {
		sb->paused = false;
	} else if (sb->exited || sb->pid <= 0) {
		sb->exited = true;
		sb->pid = 0;
	}
	sb_persist_locked(s, sb);
	pthread_mutex_unlock(&s->mu);
	return r;
}

void api_resume(struct conn *c, struct sandbox *sb)
{
	struct srv *s = c->s;
	char err[700];

	pthread_mutex_lock(&s->mu);
	if (sb->state == SB_ENDED) { /* a DELETE since the router looked */
		pthread_mutex_unlock(&s->mu);
		api_ended(c, sb);
		return;
	}
	if (!sb->paused || sb->pausing) {
		bool held = sb->paused;
		pthread_mutex_unlock(&s->mu);
		conn_error(c, 409, "conflict", "sandbox %s %s", sb->id,
			   held ? "is held: a resume or fork of it is under way" : "is not paused");
		return;
	}
	/* A resume starts a VMM as a create does: the owner's limit and
	 * its daily CPU budget. */
	if (quota_admit_locked(c, sb->owner, "resume") || sb_admit_locked(c, sb->owner))
		return;
	sb->pausing = true; /* no second resume meanwhile */
	pthread_mutex_unlock(&s->mu);
	if (!sb_resume_started(s, sb, err, sizeof(err)))
		api_get(c, sb);
	else if (!api_ended(c, sb)) /* a DELETE meanwhile: 410 */
		conn_error(c, 500, "internal", "sandbox %s could not resume (it stays paused): %s", sb->id, err);
}
