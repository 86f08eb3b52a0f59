/* The warm pool: sandboxes of the default template restored ahead of the
 * creates that will take them. A pooled sandbox is a whole sandbox (its
 * own VMM process, restored from the template, agent connected and seeded
 * with its own entropy and clock) that belongs to no one: no client can
 * name it (sb_get and the list skip it) and nothing of a request is in it.
 * A create that the pool can serve takes one ready sandbox under the
 * table's mutex, so no two creates ever get the same one; its owner,
 * token, environment, metadata and lifetimes are decided at that moment.
 * The refill thread then restores another, one at a time, while the pool
 * is below its size and the service below max_sandboxes VMs; a create is
 * admitted on running sandboxes alone, and one that starts a VM while the
 * pool fills max_sandboxes ends a pooled one (pool_make_room_locked), so
 * pooled sandboxes never take a place a create needs. Idle pooled VMs share the
 * template's memory file through the page cache (each maps it privately):
 * what each costs is the pages it touched. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/sandbox/jail.h"
#include "vmm/serve/serve.h"

#define POOL_CPUS 1
#define POOL_MEM_MIB 256
/* After a failed restore the next try waits 1, 2, 4 ... 60 s. */
#define RETRY_MAX_S 60

static void counts_locked(struct srv *s, unsigned *pooled, unsigned *ready, unsigned *others)
{
	*pooled = *ready = *others = 0;
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next) {
		if (sb->state == SB_ENDED)
			continue;
		if (!sb->pooled)
			(*others)++;
		else {
			(*pooled)++;
			*ready += sb->state == SB_RUNNING && sb->keeper;
		}
	}
}

static struct sandbox *pool_new(struct srv *s)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb_name(s, sb);
	snprintf(sb->template, sizeof(sb->template), "default");
	sb->owner = (uid_t)-1;
	sb->pooled = true;
	sb->cpus = POOL_CPUS;
	sb->memory_mib = POOL_MEM_MIB;
	sb->timeout_s = s->cfg.max_timeout_s;
	sb->created_at = time(NULL);
	sb->expires_at = sb->created_at + sb->timeout_s;
	sb->state = SB_STARTING;
	sb->refs = 1;
	return sb;
}

/* Over the wanted size (a PUT made it smaller): the extra ready ones end. */
static void trim_locked(struct srv *s)
{
	unsigned pooled, ready, others;

	counts_locked(s, &pooled, &ready, &others);
	for (struct sandbox *sb = s->sandboxes; sb && pooled > s->pool.size; sb = sb->next)
		if (sb->pooled && sb->state == SB_RUNNING) {
			sb_end_locked(s, sb, "killed");
			pooled--;
		}
}

static void *pool_main(void *arg)
{
	struct srv *s = arg;
	unsigned fails = 0;
	uint64_t retry_at = 0;

	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		unsigned pooled, ready, others;
		char problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];

		trim_locked(s);
		counts_locked(s, &pooled, &ready, &others);
		/* No VMM started to fail while none can start (the daemon
		 * said why at its start; /v1/health says it still). */
		if (pooled < s->pool.size && others + pooled < s->cfg.max_sandboxes && now_ns() >= retry_at &&
		    !srv_problems(s, problem, true)) {
			struct sandbox *sb = pool_new(s);
			char err[700];
			int r;

			if (sb) {
				sb->next = s->sandboxes;
				s->sandboxes = sb;
				pthread_mutex_unlock(&s->mu);
				r = sb_create(s, sb, err, sizeof(err));
				pthread_mutex_lock(&s->mu);
				sb->refs--;
				if (!r) {
					fails = 0;
					pthread_cond_broadcast(&s->cv);
					continue;
				}
				if (sb->state == SB_STARTING) {
					sb->state = SB_RUNNING;
					sb_end_locked(s, sb, "crashed");
				}
				if (sb->pid <= 0)
					sb->exited = true;
				/* Ended on purpose (shrunk, room made, stopping): no failure. */
				if (!strcmp(sb->end_reason, "killed"))
					continue;
				fprintf(stderr, "tinyvmm serve: pool: a sandbox could not start: %s\n", err);
			}
			unsigned wait_s = fails < 6 ? 1u << fails : RETRY_MAX_S;
			fails++;
			retry_at = now_ns() + (uint64_t)wait_s * 1000000000u;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

void pool_start(struct srv *s)
{
	s->pool.size = s->cfg.pool_size;
	if (pthread_create(&s->pool.thread, NULL, pool_main, s))
		fprintf(stderr, "tinyvmm serve: pool: no refill thread: %s: every create restores on demand\n",
			strerror(errno));
	else
		s->pool.started = true;
}

void pool_end_locked(struct srv *s)
{
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next)
		if (sb->pooled && sb->state != SB_ENDED) {
			if (sb->state == SB_STARTING)
				sb->state = SB_RUNNING; /* its sb_create sees the end and gives up */
			sb_end_locked(s, sb, "killed");
		}
}

void pool_stop(struct srv *s)
{
	uint64_t kill_at = now_ns() + 5000000000ull;

	if (s->pool.started)
		pthread_join(s->pool.thread, NULL);
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next) {
		if (!sb->pooled)
			continue;
		while (sb->own_child && !sb->exited && sb->pid > 0) {
			pid_t w = waitpid(sb->pid, NULL, WNOHANG);
			if (w == sb->pid || (w < 0 && errno == ECHILD))
				break;
			/* no helper to send it (gone: the daemon stops for
			 * that): left to the next daemon, which ends a
			 * previous pool's VMMs */
			if (now_ns() >= kill_at && sb_signal(s, sb, SIGKILL) < 0)
				break;
			usleep(20000);
		}
		sb->exited = true;
		sb_remove_dir(sb->dir);
	}
	pthread_mutex_unlock(&s->mu);
}

/* The supervisor notices a dead VMM within 250 ms; a create must not get
 * it in between. Not reaped here (WNOWAIT): that stays the supervisor's. */
static bool alive(const struct sandbox *sb)
{
	siginfo_t si = { 0 };

	if (sb->own_child)
		return waitid(P_PID, (id_t)sb->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
	return jail_owner_alive(sb->pid, sb->pid_start);
}

void pool_make_room_locked(struct srv *s)
{
	unsigned pooled, ready, others;
	struct sandbox *victim = NULL;

	counts_locked(s, &pooled, &ready, &others);
	if (!pooled || others + pooled < s->cfg.max_sandboxes)
		return;
	/* One still starting first: it has cost the least so far. */
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next)
		if (sb->pooled && sb->state != SB_ENDED && (!victim || sb->state == SB_STARTING))
			victim = sb;
	if (victim->state == SB_STARTING)
		victim->state = SB_RUNNING; /* its sb_create sees the end and gives up */
	sb_end_locked(s, victim, "killed");
}

struct sandbox *pool_take_locked(struct srv *s, struct sandbox *req)
{
	struct sandbox *p = NULL;

	if (req->cpus == POOL_CPUS && req->memory_mib == POOL_MEM_MIB && !req->net_enabled &&
	    !strcmp(req->template, "default"))
		for (p = s->sandboxes; p; p = p->next)
			if (p->pooled && p->state == SB_RUNNING && p->keeper && !p->exited && alive(p))
				break;
	if (!p) {
		s->pool.misses++;
		return NULL;
	}
	s->pool.hits++;
	quota_take_locked(p);
	p->pooled = false;
	p->from_pool = true;
	p->owner = req->owner;
	memcpy(p->token, req->token, sizeof(p->token));
	p->env = req->env;
	p->nenv = req->nenv;
	p->nsecret_from = req->nsecret_from;
	p->meta = req->meta;
	p->nmeta = req->nmeta;
	req->env = NULL;
	req->meta = NULL;
	req->nenv = req->nmeta = 0;
	p->idle_timeout_s = req->idle_timeout_s;
	p->timeout_s = req->timeout_s;
	p->created_at = time(NULL);
	p->expires_at = p->created_at + p->timeout_s;
	p->last_active_ns = now_ns();
	sb_persist_locked(s, p);
	sb_audit_locked(s, p, "created");
	pthread_cond_broadcast(&s->cv); /* the refill thread */
	return p;
}

void stats_sample_locked(struct srv *s, const struct sandbox *sb, unsigned k, uint64_t v)
{
	bool custom = strcmp(sb->template, "default") != 0;
	struct tmpl *t = custom ? tmpl_find_locked(s, sb->owner, sb->template) : NULL;
	struct tmpl_stats *st = t ? &t->st : &s->pool.st;

	/* A custom template's sandbox counts for that template only: not for
	 * one of the same name made after it was deleted, nor (re-adopted
	 * by this daemon: no id) for any. */
	if (custom && (!t || !sb->tmpl_id || t->id != sb->tmpl_id))
		return;
	st->ring[k][st->nring[k] % LAT_RING] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	st->nring[k]++;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

void stats_write(struct json_w *w, const struct tmpl_stats *st, unsigned k, const char *unit)
{
	uint32_t v[LAT_RING];
	unsigned n = st->nring[k] < LAT_RING ? st->nring[k] : LAT_RING;
	char key[16];

	memcpy(v, st->ring[k], n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), cmp_u32);
	json_w_obj_begin(w);
	json_w_kuint(w, "samples", n);
	for (unsigned p = 50; p <= 99; p += 49) {
		snprintf(key, sizeof(key), "p%u_%s", p, unit);
		json_w_key(w, key, strlen(key));
		if (n)
			json_w_uint(w, v[(n * p + 99) / 100 - 1]);
		else
			json_w_null(w);
	}
	json_w_obj_end(w);
}

void api_pool(struct conn *c, const struct http_request *r, const char *name)
{
	static const char *const known[] = { "size", NULL };
	struct srv *s = c->s;
	const struct http_str *m = &r->method;
	bool put = m->n == 3 && !memcmp(m->p, "PUT", 3);
	unsigned pooled, ready, others, np;
	char buf[1024 + SRV_PROBLEMS * (2 * SRV_PROBLEM_LEN + 4)], problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];
	struct json_w w;

	if (strcmp(name, "default")) {
		conn_error(c, 404, "not_found", "template \"%s\": only \"default\" has a warm pool", name);
		return;
	}
	if (!put && !(m->n == 3 && !memcmp(m->p, "GET", 3))) {
		conn_not_allowed(c, "GET, PUT", "/v1/templates/{name}/pool");
		return;
	}
	if (put) {
		struct body b;
		uint32_t size = UINT32_MAX;

		/* The pool's VMs are the host's memory: the daemon's own user
		 * (or root) sizes it, not any client of the socket. */
		if (!conn_operator(c)) {
			conn_error(c, 403, "forbidden", "uid %u may not size the pool (root or the daemon's user may)",
				   (unsigned)c->uid);
			return;
		}
		if (body_parse(c, &b) || fields_known(c, &b.d, 0, known, "body") ||
		    field_u32(c, &b.d, 0, "size", 0, s->cfg.max_sandboxes, &size)) {
			body_free(&b);
			return;
		}
		body_free(&b);
		if (size == UINT32_MAX) {
			conn_error(c, 400, "bad_request", "size: required");
			return;
		}
		pthread_mutex_lock(&s->mu);
		s->pool.size = size;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		fprintf(stderr, "tinyvmm serve: pool of template default: size %u (set by uid %u)\n", size,
			(unsigned)c->uid);
	}
	/* A size set while no sandbox can start is kept (the pool fills
	 * once one can), and the answer says why it stays empty. */
	np = srv_problems(s, problem, true);
	json_w_init(&w, buf, sizeof(buf));
	pthread_mutex_lock(&s->mu);
	counts_locked(s, &pooled, &ready, &others);
	json_w_obj_begin(&w);
	json_w_key(&w, "template", 8);
	json_w_string(&w, name, strlen(name));
	json_w_kuint(&w, "size", s->pool.size);
	json_w_kuint(&w, "ready", ready);
	json_w_kuint(&w, "starting", pooled - ready);
	json_w_kuint(&w, "hits", s->pool.hits);
	json_w_kuint(&w, "misses", s->pool.misses);
	srv_problems_write(&w, problem, np);
	json_w_kuint(&w, "cpus", POOL_CPUS);
	json_w_kuint(&w, "memory_mib", POOL_MEM_MIB);
	json_w_key(&w, "create_latency", 14);
	json_w_obj_begin(&w);
	json_w_key(&w, "hit", 3);
	stats_write(&w, &s->pool.st, POOL_HIT, "ms");
	json_w_key(&w, "miss", 4);
	stats_write(&w, &s->pool.st, POOL_MISS, "ms");
	json_w_obj_end(&w);
	/* Pauses of this template's sandboxes: time, and memory saved. */
	json_w_key(&w, "pause_time", 10);
	stats_write(&w, &s->pool.st, POOL_PAUSE_MS, "ms");
	json_w_key(&w, "pause_size", 10);
	stats_write(&w, &s->pool.st, POOL_PAUSE_KIB, "kib");
	json_w_obj_end(&w);
	pthread_mutex_unlock(&s->mu);
	conn_json(c, 200, &w);
}
