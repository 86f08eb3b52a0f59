/* Which handler a request goes to. The path is split on '/' first and
 * each segment percent-decoded on its own (RFC 3986 §2.1), so an encoded
 * '/' stays data; a segment that decodes to ".", ".." or holds a '/' is
 * refused, whatever route it would reach. The caller's identity (owner
 * uid, bearer token) is checked once, here, before any sandbox handler. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/core/version.h"
#include "vmm/serve/serve.h"

void srv_problems_write(struct json_w *w, char p[SRV_PROBLEMS][SRV_PROBLEM_LEN], unsigned n)
{
	json_w_key(w, "problems", 8);
	json_w_arr_begin(w);
	for (unsigned k = 0; k < n; k++)
		json_w_string(w, p[k], strlen(p[k]));
	json_w_arr_end(w);
}

#define MAX_SEGS 8
#define SEG_CAP 128

static bool is(const struct http_str *m, const char *s)
{
	return m->n == strlen(s) && !memcmp(m->p, s, m->n);
}

int query_get(const struct http_request *r, const char *name, char *out, size_t cap)
{
	const char *p = r->query.p, *end = r->query.p + r->query.n;
	char key[256];

	if (!r->has_query)
		return 0;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(pe - p));
		const char *ke = eq ? eq : pe;

		if (http_pct_decode(p, (size_t)(ke - p), key, sizeof(key), NULL, true, NULL) == 0 &&
		    !strcmp(key, name)) {
			if (!eq) {
				if (cap)
					*out = 0;
				return 1;
			}
			return http_pct_decode(eq + 1, (size_t)(pe - eq - 1), out, cap, NULL, true, NULL) ? -22 : 1;
		}
		p = pe + 1;
	}
	return 0;
}

/* A paused sandbox has no VM: 409 for what needs one. */
static bool api_paused(struct conn *c, struct sandbox *sb)
{
	pthread_mutex_lock(&c->s->mu);
	bool paused = sb->paused || sb->pausing;
	pthread_mutex_unlock(&c->s->mu);
	if (paused)
		conn_error(c, 409, "conflict", "sandbox %s is paused: POST /v1/sandboxes/%s/resume first", sb->id,
			   sb->id);
	return paused;
}

/* A sandbox whose guest has not its own identity yet (a fork's child, a
 * networked or custom-template create, still starting): 409 for what
 * would run, save or copy it as it is. */
static bool api_starting(struct conn *c, struct sandbox *sb)
{
	pthread_mutex_lock(&c->s->mu);
	bool starting = sb->identity_pending;
	pthread_mutex_unlock(&c->s->mu);
	if (starting)
		conn_error(c, 409, "conflict", "sandbox %s is still starting: try again once its create answered",
			   sb->id);
	return starting;
}

static void sandbox_route(struct conn *c, const struct http_request *r, char seg[][SEG_CAP], int n)
{
	const struct http_str *m = &r->method;
	struct sandbox *sb = sb_get(c->s, seg[2], c->uid, r->authorization.p ? &r->authorization : NULL);

	if (!sb) {
		conn_error(c, 404, "sandbox_not_found", seg[2][0] ? "no sandbox %s" : "no sandbox: the id is empty%s",
			   seg[2]);
		return;
	}
	sb_touch(c->s, sb); /* a request is activity: the idle timeout starts again */
	if (n == 3 && is(m, "GET"))
		api_get(c, sb);
	else if (n == 3 && is(m, "DELETE"))
		api_delete(c, sb);
	else if (n == 3)
		conn_not_allowed(c, "GET, DELETE", "/v1/sandboxes/{id}");
	else if (n == 4 && !strcmp(seg[3], "logs") && is(m, "GET"))
		api_logs(c, sb);
	else if (api_ended(c, sb))
		; /* answered 410 */
	else if (api_starting(c, sb))
		; /* answered 409 */
	else if (n == 4 && !strcmp(seg[3], "pause") && is(m, "POST"))
		api_pause(c, sb);
	else if (n == 4 && !strcmp(seg[3], "resume") && is(m, "POST"))
		api_resume(c, sb);
	else if (n == 4 && !strcmp(seg[3], "fork") && is(m, "POST"))
		api_fork(c, r, sb); /* a paused one too: from its snapshot */
	else if (api_paused(c, sb))
		; /* answered 409 */
	else if (n == 4 && !strcmp(seg[3], "timeout") && is(m, "POST"))
		api_timeout(c, sb);
	else if (n == 4 && !strcmp(seg[3], "execs") && is(m, "POST"))
		exec_create(c, r, sb);
	else if (n == 5 && !strcmp(seg[3], "execs") && is(m, "GET"))
		exec_get(c, sb, seg[4]);
	else if (n == 6 && !strcmp(seg[3], "execs") && !strcmp(seg[5], "events") && is(m, "GET"))
		exec_events(c, r, sb, seg[4]);
	else if (n == 6 && !strcmp(seg[3], "execs") && (!strcmp(seg[5], "stdin") || !strcmp(seg[5], "signal")) &&
		 is(m, "POST"))
		exec_control(c, r, sb, seg[4], !strcmp(seg[5], "stdin"));
	else if (n == 4 && !strcmp(seg[3], "files"))
		files_route(c, r, sb, "files");
	else if (n == 5 && !strcmp(seg[3], "fs") && !strcmp(seg[4], "list"))
		files_route(c, r, sb, "list");
	else
		conn_error(c, 404, "not_found", "no route %.*s %.*s", (int)m->n, m->p, (int)r->path.n, r->path.p);
	sb_put(c->s, sb);
}

void route(struct conn *c, const struct http_request *r)
{
	char seg[MAX_SEGS][SEG_CAP];
	const char *p = r->path.p, *end = r->path.p + r->path.n;
	const struct http_str *m = &r->method;
	int n = 0;

	if (r->path.n < 1 || *p != '/') {
		conn_error(c, 400, "bad_request", "the request target must be an absolute path");
		return;
	}
	p++;
	while (p <= end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		const char *se = slash ? slash : end;
		const char *why = NULL;
		size_t len;

		if (n == MAX_SEGS) {
			conn_error(c, 404, "not_found", "no route %.*s", (int)r->path.n, r->path.p);
			return;
		}
		if (http_pct_decode(p, (size_t)(se - p), seg[n], SEG_CAP, &len, false, &why)) {
			conn_error(c, 400, "bad_request", "path segment %d: %s", n + 1, why ? why : "too long");
			return;
		}
		if (!strcmp(seg[n], ".") || !strcmp(seg[n], "..") || memchr(seg[n], '/', len)) {
			conn_error(c, 400, "bad_request", "path segment %d: '.', '..' and encoded '/' are not allowed",
				   n + 1);
			return;
		}
		n++;
		if (!slash)
			break;
		p = slash + 1;
	}
	if (n < 2 || strcmp(seg[0], "v1")) {
		conn_error(c, 404, "not_found", "no route %.*s (the API is under /v1)", (int)r->path.n, r->path.p);
		return;
	}
	if (n == 2 && !strcmp(seg[1], "health") && is(m, "GET")) {
		char buf[2048], problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];
		struct json_w w;
		unsigned running = 0;
		uint64_t used_ms;
		/* What would make every create fail: said here, so a probe
		 * (a load balancer, a deploy check) sees it before a user does. */
		unsigned np = srv_problems(c->s, problem, true);

		/* The caller's own sandboxes: how busy the service is is the
		 * operator's to know, not every client's. */
		pthread_mutex_lock(&c->s->mu);
		for (struct sandbox *sb = c->s->sandboxes; sb; sb = sb->next)
			running += sb->state != SB_ENDED && !sb->pooled && (sb->owner == c->uid || conn_operator(c));
		used_ms = quota_used_locked(c->s, c->uid);
		pthread_mutex_unlock(&c->s->mu);
		json_w_init(&w, buf, sizeof(buf));
		json_w_obj_begin(&w);
		json_w_kstr(&w, "status", np ? "degraded" : "ok");
		json_w_kuint(&w, "sandboxes", running);
		srv_problems_write(&w, problem, np);
		/* The caller's daily CPU budget (serve_quota.c), null without one. */
		if (c->s->cfg.cpu_budget_s) {
			json_w_kuint(&w, "cpu_budget_s", c->s->cfg.cpu_budget_s);
			json_w_key(&w, "cpu_used_s", 10);
			json_w_double(&w, (double)used_ms / 1000);
		} else {
			json_w_knull(&w, "cpu_budget_s");
			json_w_knull(&w, "cpu_used_s");
		}
		json_w_obj_end(&w);
		conn_json(c, 200, &w);
	} else if (n == 2 && !strcmp(seg[1], "version") && is(m, "GET")) {
		char buf[128];
		struct json_w w;

		json_w_init(&w, buf, sizeof(buf));
		json_w_obj_begin(&w);
		json_w_key(&w, "version", 7);
		json_w_string(&w, TVM_VERSION, strlen(TVM_VERSION));
		json_w_key(&w, "api", 3);
		json_w_string(&w, "v1", 2);
		json_w_obj_end(&w);
		conn_json(c, 200, &w);
	} else if (n == 2 && !strcmp(seg[1], "sandboxes") && is(m, "POST")) {
		api_create(c, r);
	} else if (n == 2 && !strcmp(seg[1], "sandboxes") && is(m, "GET")) {
		api_list(c, r);
	} else if (n == 2 && !strcmp(seg[1], "sandboxes")) {
		conn_not_allowed(c, "GET, POST", "/v1/sandboxes");
	} else if (n >= 3 && !strcmp(seg[1], "sandboxes")) {
		sandbox_route(c, r, seg, n);
	} else if (n == 4 && !strcmp(seg[1], "templates") && !strcmp(seg[3], "pool")) {
		api_pool(c, r, seg[2]);
	} else if ((n == 2 || n == 3) && !strcmp(seg[1], "templates")) {
		api_templates(c, r, n == 3 ? seg[2] : NULL);
	} else if (n == 2 && (!strcmp(seg[1], "health") || !strcmp(seg[1], "version"))) {
		conn_not_allowed(c, "GET", !strcmp(seg[1], "health") ? "/v1/health" : "/v1/version");
	} else {
		conn_error(c, 404, "not_found", "no route %.*s %.*s", (int)m->n, m->p, (int)r->path.n, r->path.p);
	}
}
