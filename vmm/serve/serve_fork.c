/* POST /v1/sandboxes/{id}/fork {count, timeout_s}: count new sandboxes
 * that start from this one's state now (its files and running processes),
 * built on pause. The parent is paused (its VMM saves a diff against the
 * template and ends); each child gets a directory whose paused-1 holds
 * hard links to that snapshot's files, only ever read (a restore maps
 * memory private, copy-on-write, and gives every copy-on-write drive a
 * fresh overlay); the children and the parent then start from it at once.
 * Every child gets the agent's SEED (its own entropy and clock) as every
 * restore does, and its own hostname (sbx-<its id's hex>); its vsock
 * device is its own VMM's. A networked parent's children each get a /30
 * and a TAP of their own, the parent's egress rules (addresses of its /30
 * in them made the child's; default rules made anew), and through the
 * agent their own
 * address and MAC (sb_set_identity). All or nothing: if one child cannot start,
 * none stays. A paused sandbox is forked from its snapshot as it is, and
 * stays paused. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/serve/serve.h"

#define FORK_MAX 8 /* children per request */

/* One start: a child from its paused-1, or the parent resumed. */
struct start {
	struct srv *s;
	struct sandbox *sb;
	bool child;
	int r;
	char err[700];
	pthread_t t;
	bool threaded;
};

static char *dup_or_null(const char *p, bool *fail)
{
	char *d = p ? strdup(p) : NULL;

	*fail |= p && !d;
	return d;
}

/* A child of p: its shape, owner, environment and metadata, an id and
 * token of its own, starting from <its dir>/paused-1. NULL when out of
 * memory. */
static struct sandbox *child_of(struct srv *s, const struct sandbox *p, unsigned timeout_s)
{
	struct sandbox *c = calloc(1, sizeof(*c));
	bool fail = !c;

	if (fail)
		return NULL;
	memcpy(c->template, p->template, sizeof(c->template));
	c->tmpl_id = p->tmpl_id;
	c->cpus = p->cpus;
	c->memory_mib = p->memory_mib;
	c->idle_timeout_s = p->idle_timeout_s;
	c->owner = p->owner;
	if (p->nenv && !(c->env = calloc(p->nenv + 1, sizeof(*c->env))))
		fail = true;
	for (unsigned i = 0; !fail && i < p->nenv; i++, c->nenv++)
		c->env[i] = dup_or_null(p->env[i], &fail);
	c->nsecret_from = p->nsecret_from;
	if (p->nmeta && !(c->meta = calloc(p->nmeta, sizeof(*c->meta))))
		fail = true;
	for (unsigned i = 0; !fail && i < p->nmeta; i++, c->nmeta++) {
		c->meta[i].key = dup_or_null(p->meta[i].key, &fail);
		c->meta[i].value = dup_or_null(p->meta[i].value, &fail);
	}
	if (fail) {
		srv_free_sandbox(c);
		return NULL;
	}
	sb_name(s, c);
	snprintf(c->forked_from, sizeof(c->forked_from), "%s", p->id);
	c->pause_gen = 1;
	c->identity_pending = true;
	c->timeout_s = timeout_s;
	c->created_at = time(NULL);
	c->expires_at = c->created_at + timeout_s;
	c->state = SB_STARTING;
	c->refs = 1;
	return c;
}

static void *start_one(void *arg)
{
	struct start *x = arg;

	if (!x->child)
		x->r = sb_resume_started(x->s, x->sb, x->err, sizeof(x->err));
	else if (!(x->r = sb_create(x->s, x->sb, x->err, sizeof(x->err))))
		x->r = sb_set_identity(x->s, x->sb, x->err, sizeof(x->err));
	return NULL;
}

/* 503: not count /30s free, before the pause or at the claim. */
static void no_free_30(struct conn *c, unsigned count)
{
	conn_error(c, 503, "capacity", "network: net_range has no free /30 for %u more sandboxes: try again later",
		   count);
}

static void answer_forked(struct conn *c, struct start *x, unsigned n)
{
	size_t cap = 64;
	char *buf;
	struct json_w w;

	pthread_mutex_lock(&c->s->mu);
	for (unsigned i = 1; i <= n; i++)
		cap += sb_json_size(x[i].sb);
	buf = malloc(cap);
	json_w_init(&w, buf, buf ? cap : 0);
	json_w_obj_begin(&w);
	json_w_key(&w, "sandboxes", 9);
	json_w_arr_begin(&w);
	for (unsigned i = 1; i <= n; i++) {
		sb_write_json(&w, x[i].sb, true);
		x[i].sb->refs--;
	}
	json_w_arr_end(&w);
	json_w_obj_end(&w);
	pthread_mutex_unlock(&c->s->mu);
	conn_json(c, 201, &w);
	free(buf);
}

void api_fork(struct conn *c, const struct http_request *r, struct sandbox *sb)
{
	static const char *const known[] = { "count", "timeout_s", NULL };
	struct srv *s = c->s;
	struct start x[FORK_MAX + 1];
	struct host_addrs haddrs;
	struct body b;
	uint32_t count = 1, timeout_s;
	char err[700], from[600];
	int code, failed = 0;
	bool stays = false; /* the parent is paused, and stays so */

	(void)r;
	if (body_parse(c, &b))
		goto out;
	/* New sandboxes are its owner's to make, not a token holder's: the
	 * token grants this one sandbox. */
	if (c->uid != sb->owner) {
		conn_error(c, 403, "forbidden",
			   "only the owner of sandbox %s may fork it (its token grants that sandbox alone)", sb->id);
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	timeout_s = sb->timeout_s;
	pthread_mutex_unlock(&s->mu);
	if (fields_known(c, &b.d, 0, known, "body") || field_u32(c, &b.d, 0, "count", 1, FORK_MAX, &count) ||
	    field_u32(c, &b.d, 0, "timeout_s", 1, s->cfg.max_timeout_s, &timeout_s))
		goto out;
	if (sb->net_enabled) /* fixed at its create */
		net_host_addrs_ask(s, &haddrs);
	pthread_mutex_lock(&s->mu);
	/* The parent counts, and keeps its place while held: room for count more. */
	if (quota_admit_locked(c, sb->owner, "fork") || sb_room_locked(c, sb->owner, count, true))
		goto out;
	/* A /30 each, checked before the pause (claimed after it: a create
	 * may take one meanwhile, then the fork is undone, 503 still) */
	if (sb->net_enabled && net_free_locked(s, &haddrs) < count) {
		pthread_mutex_unlock(&s->mu);
		no_free_30(c, count);
		goto out;
	}
	/* Held (pausing) from here: no resume or other fork meanwhile. */
	stays = sb->paused && !sb->pausing && sb->state != SB_ENDED;
	if (stays)
		sb->pausing = true;
	if (!stays && sb->paused && sb->pausing) { /* held: a resume or another fork */
		pthread_mutex_unlock(&s->mu);
		conn_error(c, 409, "conflict", "sandbox %s cannot be forked: a resume or fork of it is under way",
			   sb->id);
		goto out;
	}
	pthread_mutex_unlock(&s->mu);
	if (!stays && (code = sb_pause(s, sb, true, err, sizeof(err)))) {
		if (code == 409)
			conn_error(c, 409, "conflict", "sandbox %s cannot be forked: %s", sb->id, err);
		else if (code == 410)
			api_ended(c, sb);
		else
			conn_error(c, code, "internal", "sandbox %s: %s", sb->id, err);
		goto out;
	}

	memset(x, 0, sizeof(x));
	x[0] = (struct start){ .s = s, .sb = sb };
	pthread_mutex_lock(&s->mu);
	sb_snapshot_dir(sb, sb->pause_gen, from, sizeof(from));
	/* A parent to resume keeps its place (held); one that stays paused
	 * holds none, but is counted while held: one fewer to find. */
	bool room = !sb_room_locked(c, sb->owner, count - stays, false), net_full = false;
	for (unsigned i = 1; room && i <= count; i++) {
		x[i] = (struct start){ .s = s, .child = true, .sb = child_of(s, sb, timeout_s) };
		if (!x[i].sb) {
			x[i].r = -ENOMEM;
			snprintf(x[i].err, sizeof(x[i].err), "out of memory");
			continue;
		}
		x[i].sb->next = s->sandboxes;
		s->sandboxes = x[i].sb;
		if (!sb->net_enabled || net_full)
			continue;
		x[i].sb->net_enabled = true;
		/* default rules are made for its own /30 (sb_create) */
		x[i].sb->net_default = sb->net_default;
		if (net_claim_locked(s, x[i].sb, &haddrs))
			net_full = true;
		else if (!sb->net_default && net_inherit_args(x[i].sb, sb)) {
			x[i].r = -ENOMEM;
			snprintf(x[i].err, sizeof(x[i].err), "out of memory");
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 1; room && !net_full && i <= count; i++)
		if (x[i].sb && !x[i].r && mkdir(x[i].sb->dir, 0700) < 0) {
			x[i].r = -errno;
			snprintf(x[i].err, sizeof(x[i].err), "%s: %s", x[i].sb->dir, strerror(errno));
		} else if (x[i].sb && !x[i].r) {
			char to[600];
			snprintf(to, sizeof(to), "%s/paused-1", x[i].sb->dir);
			x[i].r = sb_link_snapshot(from, to, x[i].err, sizeof(x[i].err));
		}
	/* Every start at once (the parent's too): each waits for its agent.
	 * Without a thread, one runs here: slower, not wrong. */
	for (unsigned i = stays; i <= (room && !net_full ? count : 0); i++) {
		if (i && (!x[i].sb || x[i].r))
			continue;
		if (!pthread_create(&x[i].t, NULL, start_one, &x[i]))
			x[i].threaded = true;
		else
			start_one(&x[i]);
	}
	for (unsigned i = 0; i <= count; i++)
		if (x[i].threaded)
			pthread_join(x[i].t, NULL);
	for (unsigned i = 1; room && i <= count; i++)
		if (x[i].r && !failed)
			failed = (int)i;
	if (x[0].r)
		fprintf(stderr, "tinyvmm serve: sandbox %s: its resume after a fork failed: %s (it stays paused)\n",
			sb->id, x[0].err);
	pthread_mutex_lock(&s->mu);
	if (stays)
		sb->pausing = false;
	/* The parent ended meanwhile (a DELETE): its fork is undone, 410. */
	bool gone = sb->state == SB_ENDED;
	pthread_mutex_unlock(&s->mu);
	if (!room || net_full || failed || gone) {
		pthread_mutex_lock(&s->mu);
		for (unsigned i = 1; room && i <= count; i++)
			if (x[i].sb)
				sb_abandon_locked(s, x[i].sb, (int)i == failed || x[i].r ? "crashed" : "killed");
		pthread_mutex_unlock(&s->mu);
		if (!room)
			conn_error(c, 503, "capacity", "no room for %u more sandboxes: try again later", count);
		else if (net_full)
			no_free_30(c, count);
		else if (gone)
			api_ended(c, sb);
		else
			conn_error(c, 500, "internal", "sandbox %s: fork %d of %u could not start: %s", sb->id, failed,
				   count, x[failed].err);
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 1; i <= count; i++)
		sb_persist_locked(s, x[i].sb);
	pthread_mutex_unlock(&s->mu);
	fprintf(stderr, "tinyvmm serve: sandbox %s forked into %u\n", sb->id, count);
	answer_forked(c, x, count);
out:
	body_free(&b);
}
