/* Custom templates: a named snapshot of one of the caller's sandboxes
 * (POST /v1/templates {name, from_sandbox}), from which creates start
 * (POST /v1/sandboxes {template: name}) with its files and processes.
 * Made as a fork is: the sandbox paused, its snapshot's files hard-linked
 * into <state>/templates/<uid>/<name>/ (a diff against the default
 * template: a few MiB), the sandbox resumed. A create links them into its
 * own paused-1 and starts from there, getting its own hostname, entropy
 * and clock. Each uid has its own names: another uid's template answers
 * 404, as a missing one. Templates outlive a daemon restart; deleting one
 * never touches the sandboxes made from it (they hold their own links,
 * and their later pauses are diffs against the default template). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/file_open.h"
#include "vmm/serve/serve.h"

#define TEMPLATES_MAX 64     /* per uid */
#define WARMUP_MAX 16384     /* bytes of a warm-up command */
#define WARMUP_TIMEOUT_S 600 /* a warm-up's default timeout */
#define WARMUP_SAVE_S 300    /* its sandbox's lifetime past the timeout */
#define WARMUP_OUT_CAP 65536 /* bytes of its output kept per stream */
#define WARMUP_TAIL 400      /* bytes of its stderr in a failure's message */
#define TMPL_JSON_MAX 1024   /* bytes of a Template as the API shows it */

bool tmpl_name_ok(const char *n)
{
	size_t len = strlen(n);

	if (!len || len > 63 || !strcmp(n, "default"))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && (!i || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

static void tmpl_path(const struct srv *s, uid_t owner, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/templates/%u/%s", s->cfg.state_dir, (unsigned)owner, name);
}

struct tmpl *tmpl_find_locked(struct srv *s, uid_t owner, const char *name)
{
	for (struct tmpl *t = s->templates; t; t = t->next)
		if (t->owner == owner && !strcmp(t->name, name))
			return t;
	return NULL;
}

/* A Template; with figures, as the API shows it (not saved: they start
 * again with the daemon, as the pool's do). */
static void write_json(struct json_w *w, const struct tmpl *t, bool figures)
{
	char ts[32];

	json_w_obj_begin(w);
	json_w_kstr(w, "name", t->name);
	rfc3339(ts, sizeof(ts), t->created_at);
	json_w_kstr(w, "created_at", ts);
	json_w_kstr(w, "from_sandbox", t->from);
	json_w_kuint(w, "cpus", t->cpus);
	json_w_kuint(w, "memory_mib", t->memory_mib);
	json_w_kuint(w, "memory_kib", t->mem_kib);
	json_w_kbool(w, "network", t->network);
	if (figures) {
		json_w_key(w, "create_latency", 14);
		stats_write(w, &t->st, POOL_MISS, "ms");
		json_w_key(w, "pause_time", 10);
		stats_write(w, &t->st, POOL_PAUSE_MS, "ms");
		json_w_key(w, "pause_size", 10);
		stats_write(w, &t->st, POOL_PAUSE_KIB, "kib");
	}
	json_w_obj_end(w);
}

static int save(const char *dir, const struct tmpl *t)
{
	char buf[512], path[700];
	struct json_w w;
	size_t len;
	int fd, r = 0;

	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "template", 8);
	write_json(&w, t, false);
	json_w_kuint(&w, "owner", t->owner);
	json_w_obj_end(&w);
	if (json_w_finish(&w, &len))
		return -ENOSPC;
	snprintf(path, sizeof(path), "%s/template.json", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len)
		r = -EIO;
	if (close(fd) < 0 && !r)
		r = -errno;
	return r;
}

static uint64_t mem_kib(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%.1000s/snap/mem", dir);
	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks / 2 : 0;
}

/* What a template built by a warm-up asked for. sb: its sandbox, not yet
 * started, holding the network asked for (parse_network), owned until
 * warm_up takes it. */
struct warmup {
	char cmd[WARMUP_MAX + 1];
	uint32_t cpus, memory_mib, timeout_s;
	struct sandbox *sb;
};

static int parse_warmup(struct conn *c, const struct json_doc *d, struct warmup *w)
{
	int i = json_find(d, 0, "warmup");
	size_t n;

	w->cpus = 1;
	w->memory_mib = SB_MEM_MIB_DEFAULT;
	w->timeout_s = WARMUP_TIMEOUT_S < c->s->cfg.max_timeout_s ? WARMUP_TIMEOUT_S : c->s->cfg.max_timeout_s;
	if (json_get_string(d, i, w->cmd, sizeof(w->cmd), &n) || !n) {
		conn_error(c, 400, "bad_request", "warmup: a shell command, a string of 1 to %u bytes without NUL",
			   WARMUP_MAX);
		return -1;
	}
	if (!(w->sb = calloc(1, sizeof(*w->sb)))) {
		conn_error(c, 500, "internal", "out of memory");
		return -1;
	}
	return field_u32(c, d, 0, "cpus", 1, SB_CPUS_MAX, &w->cpus) ||
			       field_u32(c, d, 0, "memory_mib", SB_MEM_MIB_MIN, SB_MEM_MIB_MAX, &w->memory_mib) ||
			       field_u32(c, d, 0, "timeout_s", 1, c->s->cfg.max_timeout_s, &w->timeout_s) ||
			       parse_network(c, d, w->sb)
		       ? -1
		       : 0;
}

/* The warm-up in its sandbox's audit log, as an exec is: at its start
 * the command (res NULL), at its end how it ended (why: it could not
 * run). */
static void audit_warmup(struct srv *s, struct sandbox *sb, const struct warmup *w, const struct tvm_job_result *res,
			 const char *why)
{
	size_t cap = 6 * strlen(w->cmd) + 1024; /* every byte escaped at worst */
	char *buf = malloc(cap);
	struct json_w aw;

	if (!buf)
		return;
	audit_begin(&aw, buf, cap, res || why ? "warmup_end" : "warmup_start");
	if (!res && !why) {
		json_w_kstr(&aw, "command", w->cmd);
		json_w_kstr(&aw, "user", "root");
		json_w_kuint(&aw, "timeout_s", w->timeout_s);
	} else if (why) {
		json_w_kstr(&aw, "error", why);
	} else {
		json_w_key(&aw, "exit_code", 9);
		json_w_int(&aw, res->exit_code);
		json_w_key(&aw, "timed_out", 9);
		json_w_bool(&aw, res->timed_out);
		json_w_kuint(&aw, "wall_ms", res->wall_ms);
	}
	audit_end(s, sb, &aw);
	free(buf);
}

/* The end of a warm-up's stderr (err, len bytes), where a failed build
 * says why, as the end of a one-line message into tail: ": " and its last
 * WARMUP_TAIL bytes with lines joined by " | " and NULs as spaces (one
 * would end the message early), "..." first when cut; "" when empty. */
static void stderr_tail(const char *err, size_t en, char *tail, size_t cap)
{
	char line[3 * WARMUP_TAIL + 1];
	size_t t = en > WARMUP_TAIL ? en - WARMUP_TAIL : 0, o = 0;

	while (en > t && (err[en - 1] == '\n' || err[en - 1] == '\r'))
		en--;
	for (size_t k = t; k < en; k++)
		if (err[k] == '\n' || err[k] == '\r') {
			memcpy(line + o, " | ", 3);
			o += 3;
		} else {
			line[o++] = err[k] ? err[k] : ' ';
		}
	line[o] = 0;
	snprintf(tail, cap, "%s%s",
		 !o                     ? ""
		 : t || o > WARMUP_TAIL ? ": ..."
					: ": ",
		 o > WARMUP_TAIL ? line + o - WARMUP_TAIL : line);
}

/* A new sandbox of the default template with w's shape and network, in
 * which w's command has run as root and exited 0: returned with a
 * reference, or NULL once c has its answer (422 warmup_failed with the
 * exit and the end of its stderr; the create's own errors). Takes w->sb. */
static struct sandbox *warm_up(struct conn *c, struct warmup *w, const char *name)
{
	const char *argv[] = { "/bin/sh", "-c", w->cmd, NULL };
	struct srv *s = c->s;
	struct sandbox *sb = w->sb;
	struct tvm_job_result res;
	struct tvm_err e = { 0 };
	char *out = NULL, *err = NULL, tail[WARMUP_TAIL + 8];
	const char *reason = NULL;
	size_t n, en = 0;
	int rc;

	w->sb = NULL;
	snprintf(sb->template, sizeof(sb->template), "default");
	sb->cpus = w->cpus;
	sb->memory_mib = w->memory_mib;
	/* What it is, in its owner's listing: metadata template_build=name */
	sb->meta = calloc(1, sizeof(*sb->meta));
	if (sb->meta && (sb->meta[0].key = strdup("template_build")) && (sb->meta[0].value = strdup(name)))
		sb->nmeta = 1;
	/* Its lifetime covers the warm-up and the save: a daemon that dies
	 * meanwhile leaves nothing running for long. */
	sb->timeout_s = w->timeout_s + WARMUP_SAVE_S;
	if (!(sb = sb_start(c, sb, false)))
		return NULL;
	/* A running command, as an exec is: no pause, fork or template of
	 * it meanwhile (409); marked so that a restarted daemon ends it. */
	pthread_mutex_lock(&s->mu);
	sb->running_execs++;
	sb->template_build = true;
	sb_persist_locked(s, sb);
	pthread_mutex_unlock(&s->mu);
	audit_warmup(s, sb, w, NULL, NULL);
	rc = exec_simple(sb, argv, TVM_ID_ROOT, w->timeout_s * 1000u, WARMUP_OUT_CAP, &res, &out, &n, &err, &en, &e);
	audit_warmup(s, sb, w, rc ? NULL : &res, rc ? e.msg : NULL);
	pthread_mutex_lock(&s->mu);
	sb->running_execs--;
	sb->last_active_ns = now_ns();
	if (rc)
		wait_vmm_end_locked(s, sb);
	if (sb->state == SB_ENDED)
		reason = sb->end_reason ? sb->end_reason : "killed";
	pthread_mutex_unlock(&s->mu);
	stderr_tail(err, en, tail, sizeof(tail));
	if (reason && (!strcmp(reason, "killed") || !strcmp(reason, "expired") || !strcmp(reason, "idle")))
		conn_error_reason(c, 410, "sandbox_expired", reason, "the warm-up's sandbox %s ended (%s) during it",
				  sb->id, reason);
	else if (reason)
		conn_error(c, 422, "warmup_failed", "the warm-up in sandbox %s: its VM ended (%s) while it ran%s",
			   sb->id, reason, tail);
	else if (rc)
		conn_error(c, 422, "warmup_failed", "the warm-up in sandbox %s did not finish: %s%s", sb->id, e.msg,
			   tail);
	else if (res.timed_out || res.exit_code)
		conn_error(c, 422, "warmup_failed", "the warm-up in sandbox %s %s %d%s%s", sb->id,
			   res.timed_out ? "timed out after" : "exited with",
			   res.timed_out ? (int)w->timeout_s : res.exit_code, res.timed_out ? " s" : "", tail);
	rc = rc || reason || res.timed_out || res.exit_code;
	fprintf(stderr, "tinyvmm serve: uid %u: template warm-up in sandbox %s: %s\n", (unsigned)c->uid, sb->id,
		!rc      ? "exit 0"
		: reason ? reason
			 : "failed");
	free(out);
	free(err);
	if (!rc)
		return sb;
	pthread_mutex_lock(&s->mu);
	sb_end_locked(s, sb, "killed");
	pthread_mutex_unlock(&s->mu);
	sb_put(s, sb);
	return NULL;
}

/* POST /v1/templates {name, from_sandbox} or {name, warmup, cpus,
 * memory_mib, timeout_s, network}. */
static void api_template_create(struct conn *c)
{
	static const char *const known[] = { "name",       "from_sandbox", "warmup",  "cpus",
					     "memory_mib", "timeout_s",    "network", NULL };
	struct srv *s = c->s;
	struct tmpl *t = NULL;
	struct sandbox *sb = NULL;
	struct warmup *wu = NULL;
	struct body b;
	char from[40] = "", dir[600], tmp[620], snap[640], paused[600], err[700];
	unsigned mine = 0;
	bool listed = false;
	int i, code;

	if (body_parse(c, &b))
		goto out;
	if (fields_known(c, &b.d, 0, known, "body"))
		goto out;
	if (!(t = calloc(1, sizeof(*t)))) {
		conn_error(c, 500, "internal", "out of memory");
		goto out;
	}
	if ((i = json_find(&b.d, 0, "name")) < 0 || json_get_string(&b.d, i, t->name, sizeof(t->name), NULL) ||
	    !tmpl_name_ok(t->name)) {
		conn_error(c, 400, "bad_request",
			   "name: required, 1 to 63 of a-z 0-9 - _ . (a letter or digit first), not \"default\"");
		goto out;
	}
	if ((json_find(&b.d, 0, "warmup") >= 0) == (json_find(&b.d, 0, "from_sandbox") >= 0)) {
		conn_error(c, 400, "bad_request",
			   "from_sandbox (save one of your sandboxes) or warmup (a shell command run in a new one): "
			   "one of the two");
		goto out;
	}
	if (json_find(&b.d, 0, "warmup") >= 0) {
		if (!(wu = calloc(1, sizeof(*wu)))) {
			conn_error(c, 500, "internal", "out of memory");
			goto out;
		}
		if (parse_warmup(c, &b.d, wu))
			goto out;
	} else {
		for (const char *const *k = known + 3; *k; k++)
			if (json_find(&b.d, 0, *k) >= 0) {
				conn_error(c, 400, "bad_request",
					   "%s: only with warmup (a template from a sandbox has that sandbox's)", *k);
				goto out;
			}
		if ((i = json_find(&b.d, 0, "from_sandbox")) < 0 ||
		    json_get_string(&b.d, i, from, sizeof(from), NULL)) {
			conn_error(c, 400, "bad_request", "from_sandbox: required, the id of one of your sandboxes");
			goto out;
		}
		/* Only the owner's own sandboxes (not through a token): what
		 * is made is theirs. */
		if (!(sb = sb_get(s, from, c->uid, NULL))) {
			conn_error(c, 404, "sandbox_not_found", "no sandbox %s", from);
			goto out;
		}
		if (api_ended(c, sb))
			goto out;
	}
	pthread_mutex_lock(&s->mu);
	for (struct tmpl *o = s->templates; o; o = o->next)
		mine += o->owner == c->uid;
	const struct tmpl *had = tmpl_find_locked(s, c->uid, t->name);
	bool building = had && !had->ready;
	code = had ? 409 : mine >= TEMPLATES_MAX ? 429 : 0;
	if (!code) {
		/* The name is taken now (not ready: no create, list or GET
		 * sees it), so that two builds of one name cannot race. */
		t->owner = c->uid;
		t->id = ++s->tmpl_ids;
		t->next = s->templates;
		s->templates = t;
		listed = true;
	}
	pthread_mutex_unlock(&s->mu);
	if (code == 409) {
		if (building)
			conn_error(c, 409, "conflict", "template \"%s\" is being built: try again once it is made",
				   t->name);
		else
			conn_error(c, 409, "conflict", "template \"%s\" exists: DELETE /v1/templates/%s first", t->name,
				   t->name);
		goto out;
	}
	if (code) {
		conn_error(c, 429, "quota_exceeded", "uid %u has %u templates (the limit)", (unsigned)c->uid, mine);
		goto out;
	}
	/* The name is held while the warm-up runs: a second build of it
	 * answers 409 at once. */
	if (wu && !(sb = warm_up(c, wu, t->name)))
		goto out;
	if ((code = sb_pause(s, sb, true, err, sizeof(err)))) {
		if (code == 410)
			api_ended(c, sb);
		else
			conn_error(c, code, code == 409 ? "conflict" : "internal",
				   "sandbox %s cannot be saved as a template: %s", sb->id, err);
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	sb_snapshot_dir(sb, sb->pause_gen, paused, sizeof(paused));
	t->cpus = sb->cpus;
	t->memory_mib = sb->memory_mib;
	t->network = sb->net_enabled; /* its snapshot has its NIC; the guest, its address until a create's NET */
	memcpy(t->from, sb->id, sizeof(t->from));
	pthread_mutex_unlock(&s->mu);
	t->created_at = time(NULL);
	tmpl_path(s, c->uid, t->name, dir, sizeof(dir));
	/* Built beside it under a name no template has (a dot first). */
	snprintf(tmp, sizeof(tmp), "%s/templates/%u/.%s.build", s->cfg.state_dir, (unsigned)c->uid, t->name);
	snprintf(snap, sizeof(snap), "%s/snap", tmp);
	sb_remove_dir(tmp); /* a build a crash left */
	snprintf(snap, sizeof(snap), "%s/templates", s->cfg.state_dir);
	mkdir(snap, 0700);
	snprintf(snap, sizeof(snap), "%s/templates/%u", s->cfg.state_dir, (unsigned)c->uid);
	mkdir(snap, 0700);
	snprintf(snap, sizeof(snap), "%s/snap", tmp);
	code = mkdir(tmp, 0700) < 0 ? -errno : 0;
	if (code)
		snprintf(err, sizeof(err), "%s: %s", tmp, strerror(-code));
	if (!code)
		code = sb_link_snapshot(paused, snap, err, sizeof(err));
	if (!code && (code = save(tmp, t)))
		snprintf(err, sizeof(err), "%s/template.json: %s", tmp, strerror(-code));
	if (!code && rename(tmp, dir) < 0) {
		code = -errno;
		snprintf(err, sizeof(err), "%s: %s", dir, strerror(errno));
	}
	t->mem_kib = mem_kib(dir);
	/* The sandbox runs on, whatever became of the template (a warm-up's
	 * was only the means: it ends below). */
	char rerr[700];
	if (!wu && sb_resume_started(s, sb, rerr, sizeof(rerr)))
		fprintf(stderr, "tinyvmm serve: sandbox %s: its resume after a template failed: %s (it stays paused)\n",
			sb->id, rerr);
	if (code) {
		sb_remove_dir(tmp);
		conn_error(c, 500, "internal", "template \"%s\": %s", t->name, err);
		goto out;
	}
	char buf[TMPL_JSON_MAX];
	struct json_w w;
	json_w_init(&w, buf, sizeof(buf));
	pthread_mutex_lock(&s->mu);
	t->ready = true;
	write_json(&w, t, true);
	pthread_mutex_unlock(&s->mu);
	fprintf(stderr, "tinyvmm serve: uid %u: template \"%s\" made from sandbox %s (%llu KiB of memory)\n",
		(unsigned)c->uid, t->name, t->from, (unsigned long long)t->mem_kib);
	t = NULL;
	conn_json(c, 201, &w);
out:
	if (sb && wu) {
		pthread_mutex_lock(&s->mu);
		sb->pausing = false;
		sb_end_locked(s, sb, "killed");
		pthread_mutex_unlock(&s->mu);
	}
	if (sb)
		sb_put(s, sb);
	if (t && listed) {
		pthread_mutex_lock(&s->mu);
		for (struct tmpl **pp = &s->templates; *pp; pp = &(*pp)->next)
			if (*pp == t) {
				*pp = t->next;
				break;
			}
		pthread_mutex_unlock(&s->mu);
	}
	free(t);
	if (wu && wu->sb)
		srv_free_sandbox(wu->sb);
	free(wu);
	body_free(&b);
}

static void api_template_list(struct conn *c)
{
	struct srv *s = c->s;
	size_t cap = 64;
	char *buf;
	struct json_w w;

	pthread_mutex_lock(&s->mu);
	for (struct tmpl *t = s->templates; t; t = t->next)
		cap += t->owner == c->uid && t->ready ? TMPL_JSON_MAX : 0;
	buf = malloc(cap);
	json_w_init(&w, buf, buf ? cap : 0);
	json_w_obj_begin(&w);
	json_w_key(&w, "templates", 9);
	json_w_arr_begin(&w);
	for (struct tmpl *t = s->templates; t; t = t->next)
		if (t->owner == c->uid && t->ready)
			write_json(&w, t, true);
	json_w_arr_end(&w);
	json_w_obj_end(&w);
	pthread_mutex_unlock(&s->mu);
	conn_json(c, 200, &w);
	free(buf);
}

/* GET or DELETE /v1/templates/{name}. */
static void api_template_one(struct conn *c, const char *name, bool del)
{
	struct srv *s = c->s;
	struct tmpl *t, **pp;
	char buf[TMPL_JSON_MAX], dir[600];
	struct json_w w;

	pthread_mutex_lock(&s->mu);
	for (pp = &s->templates; (t = *pp); pp = &t->next)
		if (t->owner == c->uid && t->ready && !strcmp(t->name, name))
			break;
	if (!t) {
		pthread_mutex_unlock(&s->mu);
		conn_error(c, 404, "template_not_found", "no template \"%s\"%s", name,
			   strcmp(name, "default") ? "" : " of yours (\"default\" is the service's)");
		return;
	}
	if (!del) {
		json_w_init(&w, buf, sizeof(buf));
		write_json(&w, t, true);
		pthread_mutex_unlock(&s->mu);
		conn_json(c, 200, &w);
		return;
	}
	*pp = t->next;
	pthread_mutex_unlock(&s->mu);
	/* Sandboxes made from it have links of their own. */
	tmpl_path(s, t->owner, t->name, dir, sizeof(dir));
	sb_remove_dir(dir);
	fprintf(stderr, "tinyvmm serve: uid %u: template \"%s\" deleted\n", (unsigned)c->uid, t->name);
	free(t);
	conn_respond(c, 204, NULL, NULL, 0, NULL);
}

void api_templates(struct conn *c, const struct http_request *r, const char *name)
{
	const struct http_str *m = &r->method;
	bool get = m->n == 3 && !memcmp(m->p, "GET", 3), post = m->n == 4 && !memcmp(m->p, "POST", 4),
	     del = m->n == 6 && !memcmp(m->p, "DELETE", 6);

	if (!name && post)
		api_template_create(c);
	else if (!name && get)
		api_template_list(c);
	else if (!name)
		conn_not_allowed(c, "GET, POST", "/v1/templates");
	else if (get || del)
		api_template_one(c, name, del);
	else
		conn_not_allowed(c, "GET, DELETE", "/v1/templates/{name}");
}

int tmpl_start_from(struct srv *s, struct sandbox *sb, const char *name, char *err, size_t cap)
{
	char dir[600], snap[620], to[600];
	int r;

	pthread_mutex_lock(&s->mu);
	const struct tmpl *t = tmpl_find_locked(s, sb->owner, name);
	bool found = t && t->ready;
	sb->tmpl_id = found ? t->id : 0;
	pthread_mutex_unlock(&s->mu);
	if (!found) {
		snprintf(err, cap, "template \"%s\" was deleted", name);
		return -ENOENT;
	}
	tmpl_path(s, sb->owner, name, dir, sizeof(dir));
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	snprintf(to, sizeof(to), "%s/paused-1", sb->dir);
	if (mkdir(sb->dir, 0700) < 0) {
		snprintf(err, cap, "%s: %s", sb->dir, strerror(errno));
		return -errno;
	}
	r = sb_link_snapshot(snap, to, err, cap);
	if (r)
		return r;
	sb->pause_gen = 1;
	return 0;
}

/* Integer field key of object o in lo..hi into *v: 0, or -1. */
static int get_range(const struct json_doc *d, int o, const char *key, int64_t lo, int64_t hi, unsigned *v)
{
	int64_t x;
	int i = json_find(d, o, key);

	if (i < 0 || json_get_int64(d, i, &x) || x < lo || x > hi)
		return -1;
	*v = (unsigned)x;
	return 0;
}

/* One <state>/templates/<uid>/<name>/template.json, read back (the
 * daemon wrote it, but the state directory is checked as any input). */
static void load_one(struct srv *s, const char *dir, uid_t owner, const char *name)
{
	char path[700], text[4096];
	struct json_tok tok[64];
	struct json_doc d;
	struct tmpl *t = calloc(1, sizeof(*t));
	int o = -1, i;
	ssize_t n;

	snprintf(path, sizeof(path), "%.600s/template.json", dir);
	n = file_read_whole(path, O_NOFOLLOW, text, sizeof(text));
	if (!t || n <= 0 || json_parse(&d, text, (size_t)n, tok, 64, 0, NULL) ||
	    (o = json_find(&d, 0, "template")) < 0 || (i = json_find(&d, o, "name")) < 0 ||
	    json_get_string(&d, i, t->name, sizeof(t->name), NULL) || strcmp(t->name, name) || !tmpl_name_ok(name) ||
	    (i = json_find(&d, o, "from_sandbox")) < 0 || json_get_string(&d, i, t->from, sizeof(t->from), NULL) ||
	    get_range(&d, o, "cpus", 1, SB_CPUS_MAX, &t->cpus) ||
	    get_range(&d, o, "memory_mib", SB_MEM_MIB_MIN, SB_MEM_MIB_MAX, &t->memory_mib)) {
		fprintf(stderr, "tinyvmm serve: %s: unreadable template: skipped\n", dir);
		free(t);
		return;
	}
	t->owner = owner;
	if ((i = json_find(&d, o, "created_at")) >= 0) {
		char ts[40];
		struct tm tm = { 0 };
		if (!json_get_string(&d, i, ts, sizeof(ts), NULL) && strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm))
			t->created_at = timegm(&tm);
	}
	if ((i = json_find(&d, o, "network")) >= 0)
		json_get_bool(&d, i, &t->network);
	t->mem_kib = mem_kib(dir);
	t->ready = true;
	t->id = ++s->tmpl_ids;
	t->next = s->templates;
	s->templates = t;
}

void tmpl_load(struct srv *s)
{
	char top[600], udir[700], dir[800];
	DIR *d, *u;
	struct dirent *de, *te;

	snprintf(top, sizeof(top), "%s/templates", s->cfg.state_dir);
	if (!(d = opendir(top)))
		return;
	while ((de = readdir(d))) {
		char *end;
		unsigned long uid = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end || uid > UINT32_MAX - 1)
			continue;
		snprintf(udir, sizeof(udir), "%.500s/%.32s", top, de->d_name);
		if (!(u = opendir(udir)))
			continue;
		while ((te = readdir(u))) {
			size_t len = strlen(te->d_name);

			if (!strcmp(te->d_name, ".") || !strcmp(te->d_name, "..") || len > 1 + 63 + 6)
				continue; /* no name of ours */
			snprintf(dir, sizeof(dir), "%.600s/%.70s", udir, te->d_name);
			if (te->d_name[0] == '.') {
				if (len > 6 && !strcmp(te->d_name + len - 6, ".build"))
					sb_remove_dir(dir); /* a build that did not finish */
				continue;
			}
			pthread_mutex_lock(&s->mu);
			load_one(s, dir, (uid_t)uid, te->d_name);
			pthread_mutex_unlock(&s->mu);
		}
		closedir(u);
	}
	closedir(d);
}
