/* The sandbox routes of vmm/serve/API.md: create, list, get, delete,
 * timeout, logs. Every field of a request body is checked here, once:
 * its type, its range, its length; an unknown field is refused (a client
 * with a typo learns it at once). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/net/net_filter.h"
#include "vmm/serve/serve.h"

#define BODY_MAX (1u << 20)
#define MAX_TOK 8192
#define MAX_META 32
#define MAX_ENV 256
#define MAX_RULES SB_NET_RULES_MAX

void body_free(struct body *b)
{
	free(b->text);
	free(b->tok);
}

int body_parse(struct conn *c, struct body *b)
{
	struct json_err je = { 0 };
	size_t len;
	int r;

	*b = (struct body){ 0 };
	r = conn_body_all(c, BODY_MAX, &b->text, &len);
	if (r == -EFBIG)
		return conn_error(c, 413, "payload_too_large", "the request body is over %u bytes", BODY_MAX), -1;
	if (r)
		return conn_error(c, 400, "bad_request", "the request body could not be read: %s", strerror(-r)), -1;
	b->tok = malloc(MAX_TOK * sizeof(*b->tok));
	if (!b->tok)
		return conn_error(c, 500, "internal", "out of memory"), -1;
	if (len == 0) {
		free(b->text);
		b->text = strdup("{}");
		len = 2;
	}
	if (json_parse(&b->d, b->text, len, b->tok, MAX_TOK, 0, &je))
		return conn_error(c, 400, "bad_request", "body: invalid JSON: %s", je.msg), -1;
	if (b->d.tok[0].type != JSON_OBJECT)
		return conn_error(c, 400, "bad_request", "body: a JSON object is expected"), -1;
	return 0;
}

int field_u32(struct conn *c, const struct json_doc *d, int obj, const char *key, uint32_t lo, uint32_t hi, uint32_t *v)
{
	int64_t x;
	int i = json_find(d, obj, key);

	if (i < 0 || json_is_null(d, i))
		return 0;
	if (json_get_int64(d, i, &x) || x < lo || x > hi) {
		conn_error(c, 400, "bad_request", "%s: an integer from %u to %u is expected", key, lo, hi);
		return -1;
	}
	*v = (uint32_t)x;
	return 0;
}

/* Does obj have only keys from the NULL-terminated list? 0, or -1 after
 * answering 400 naming the first other key. */
int fields_known(struct conn *c, const struct json_doc *d, int obj, const char *const *known, const char *what)
{
	for (int k = json_first(d, obj); k >= 0; k = json_next(d, obj, k)) {
		size_t i = 0;
		char name[64];

		while (known[i] && !json_str_eq(d, k, known[i], strlen(known[i])))
			i++;
		if (!known[i]) {
			if (json_get_string(d, k, name, sizeof(name), NULL))
				snprintf(name, sizeof(name), "(long)");
			conn_error(c, 400, "bad_request", "%s: unknown field \"%s\"", what, name);
			return -1;
		}
	}
	return 0;
}

static bool env_name_ok(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

int env_append(struct conn *c, const struct json_doc *d, const char *field, char ***env, unsigned *n)
{
	int obj = json_find(d, 0, field);

	if (obj < 0 || json_is_null(d, obj))
		return 0;
	if (d->tok[obj].type != JSON_OBJECT) {
		conn_error(c, 400, "bad_request", "%s: an object of NAME: value strings is expected", field);
		return -1;
	}
	if (*n + d->tok[obj].size > MAX_ENV) {
		conn_error(c, 400, "bad_request", "%s: at most %u variables", field, MAX_ENV);
		return -1;
	}
	char **e = realloc(*env, (*n + d->tok[obj].size + 1) * sizeof(char *));
	if (!e) {
		conn_error(c, 500, "internal", "out of memory");
		return -1;
	}
	*env = e;
	for (int k = json_first(d, obj); k >= 0; k = json_next(d, obj, k)) {
		char name[257];
		size_t vl = d->tok[k + 1].len;
		char *s;

		if (json_get_string(d, k, name, sizeof(name), NULL) || !env_name_ok(name)) {
			conn_error(c, 400, "bad_request",
				   "%s: a name of letters, digits and _ (at most 256) is expected", field);
			return -1;
		}
		if (d->tok[k + 1].type != JSON_STRING || vl > 131072) {
			/* The value is never named: it may be a secret. */
			conn_error(c, 400, "bad_request", "%s.%s: a string of at most 128 KiB is expected", field,
				   name);
			return -1;
		}
		s = malloc(strlen(name) + vl + 2);
		if (!s) {
			conn_error(c, 500, "internal", "out of memory");
			return -1;
		}
		int w = sprintf(s, "%s=", name);
		if (json_get_string(d, k + 1, s + w, vl + 1, NULL)) {
			free(s);
			conn_error(c, 400, "bad_request", "%s.%s: no NUL character allowed", field, name);
			return -1;
		}
		(*env)[(*n)++] = s;
		(*env)[*n] = NULL;
	}
	return 0;
}

static bool rule_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '.' ||
		      *s == ':' || *s == '/' || *s == '[' || *s == ']'))
			return false;
	return true;
}

/* The rule parser's messages name the CLI's flag ("net-allow 1.2.3.4:0:
 * port must be 1..65535"); an API client named no flag, so the flag goes
 * and the message starts at the value, or at the reason when none is
 * quoted ("net-allow: empty rule", "net-dns : ..." of an empty value).
 * Only the flag's own separator goes: a value may begin with a colon
 * ("::1/129"). */
static const char *api_words(const char *msg, const char *flag)
{
	size_t n = strlen(flag);

	if (strncmp(msg, flag, n))
		return msg;
	msg += n;
	if (!strncmp(msg, " : ", 3)) /* an empty value */
		return msg + 3;
	if (*msg == ':')
		msg++;
	return *msg == ' ' ? msg + 1 : msg;
}

int parse_network(struct conn *c, const struct json_doc *d, struct sandbox *sb)
{
	static const char *const known[] = { "enabled", "allow_out", "dns", NULL };
	int net = json_find(d, 0, "network"), i;
	bool en = false;

	if (net < 0 || json_is_null(d, net))
		return 0;
	if (d->tok[net].type != JSON_OBJECT) {
		conn_error(c, 400, "bad_request",
			   "network: an object is expected ({\"enabled\": true} for a network with the default rules)");
		return -1;
	}
	if (fields_known(c, d, net, known, "network"))
		return -1;
	if ((i = json_find(d, net, "enabled")) >= 0 && json_get_bool(d, i, &en)) {
		conn_error(c, 400, "bad_request", "network.enabled: true or false is expected");
		return -1;
	}
	static const char *const lists[2] = { "allow_out", "dns" };
	if (!en) { /* rules without a network: a mistake, not a silent no */
		for (int l = 0; l < 2; l++)
			if ((i = json_find(d, net, lists[l])) >= 0 && !json_is_null(d, i) &&
			    !(d->tok[i].type == JSON_ARRAY && d->tok[i].size == 0)) {
				conn_error(c, 400, "bad_request",
					   "network.%s: given without network.enabled true (the sandbox would have "
					   "no network)",
					   lists[l]);
				return -1;
			}
		return 0;
	}
	static const char *const flags[2] = { "--net-allow", "--net-dns" };
	/* the VMM's own limits (tvm_net), so a create over them is this 400 */
	static const unsigned most[2] = { MAX_RULES, TVM_MAX_NET_DNS };
	bool listed = false;
	for (int l = 0; l < 2; l++) {
		int a = json_find(d, net, lists[l]);
		if (a < 0 || json_is_null(d, a))
			continue;
		listed = true;
		if (d->tok[a].type != JSON_ARRAY || d->tok[a].size > most[l]) {
			conn_error(c, 400, "bad_request", "network.%s: an array of at most %u strings is expected",
				   lists[l], most[l]);
			return -1;
		}
		for (int k = json_first(d, a); k >= 0; k = json_next(d, a, k)) {
			static const char *const want[2] = { "CIDR[:PORT[/tcp|udp]] (one port per rule)",
							     "an IPv4 or IPv6 address" };
			struct tvm_err e = { 0 };
			struct net_rule r;
			struct net_policy p = { 0 };
			char v[72];

			if (json_get_string(d, k, v, sizeof(v), NULL)) {
				conn_error(c, 400, "bad_request",
					   "network.%s: %s, a string of at most %zu bytes, is expected", lists[l],
					   want[l], sizeof(v) - 1);
				return -1;
			}
			if (!rule_ok(v)) { /* named: the JSON writer escapes what it must */
				conn_error(c, 400, "bad_request", "network.%s: \"%s\": %s is expected", lists[l], v,
					   want[l]);
				return -1;
			}
			/* the VMM's own parser: a rule it would refuse is the
			 * client's 400 now, not a sandbox that dies starting */
			if (l ? net_policy_add_dns(&p, v, &e) : net_rule_parse(v, &r, &e)) {
				conn_error(c, 400, "bad_request", "network.%s: %s", lists[l],
					   api_words(e.msg, flags[l] + 2));
				return -1;
			}
			if (sb_net_arg_add(sb, flags[l], v)) {
				conn_error(c, 500, "internal", "out of memory");
				return -1;
			}
		}
	}
	/* Lists given, and empty: nothing may go out (the default rules are
	 * for a create that gives no list at all). */
	if (listed && !sb->nnet_args && sb_net_arg_add(sb, "--net-deny-all", NULL)) {
		conn_error(c, 500, "internal", "out of memory");
		return -1;
	}
	sb->net_enabled = true;
	return 0;
}

static int parse_metadata(struct conn *c, const struct json_doc *d, struct sandbox *sb)
{
	int m = json_find(d, 0, "metadata");

	if (m < 0 || json_is_null(d, m))
		return 0;
	if (d->tok[m].type != JSON_OBJECT || d->tok[m].size > MAX_META) {
		conn_error(c, 400, "bad_request", "metadata: an object of at most %u string values is expected",
			   MAX_META);
		return -1;
	}
	sb->meta = calloc(d->tok[m].size + 1, sizeof(*sb->meta));
	if (!sb->meta)
		return conn_error(c, 500, "internal", "out of memory"), -1;
	for (int k = json_first(d, m); k >= 0; k = json_next(d, m, k)) {
		char key[65], val[513];

		if (json_get_string(d, k, key, sizeof(key), NULL) || !*key ||
		    json_get_string(d, k + 1, val, sizeof(val), NULL)) {
			conn_error(c, 400, "bad_request",
				   "metadata: keys of 1..64 bytes and string values of at most 512 bytes are expected");
			return -1;
		}
		sb->meta[sb->nmeta].key = strdup(key);
		sb->meta[sb->nmeta].value = strdup(val);
		if (!sb->meta[sb->nmeta].key || !sb->meta[sb->nmeta].value)
			return conn_error(c, 500, "internal", "out of memory"), -1;
		sb->nmeta++;
	}
	return 0;
}

int sb_room_locked(struct conn *c, uid_t owner, unsigned n, bool answer)
{
	struct srv *s = c->s;
	unsigned running = 0, mine = 0;
	char problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];

	/* Said before a VMM is spawned to fail: not a 500 after it. */
	if (answer && srv_problems(s, problem, false)) {
		pthread_mutex_unlock(&s->mu);
		conn_error(c, 503, "unavailable", "%s", problem[0]);
		return -1;
	}
	/* A paused sandbox held by a fork or a template build (pausing) is
	 * resumed at once: it keeps its place meanwhile. */
	for (struct sandbox *o = s->sandboxes; o; o = o->next)
		if (o->state != SB_ENDED && !o->pooled && (!o->paused || o->pausing)) {
			running++;
			mine += o->owner == owner;
		}
	/* Each count is at most the table's length: no overflow. */
	if (running + n <= s->cfg.max_sandboxes && mine + n <= s->cfg.max_per_owner && !s->stopping)
		return 0;
	if (!answer)
		return -1;
	pthread_mutex_unlock(&s->mu);
	if (mine + n > s->cfg.max_per_owner)
		conn_error(c, 429, "quota_exceeded",
			   "uid %u has %u running sandboxes: %u more would pass the limit of %u", (unsigned)owner, mine,
			   n, s->cfg.max_per_owner);
	else
		conn_error(c, 503, "capacity", "the service runs %u sandboxes, its limit: try again later", running);
	return -1;
}

int sb_admit_locked(struct conn *c, uid_t owner)
{
	return sb_room_locked(c, owner, 1, true);
}

/* 201 with sb and its token; sb's reference (taken for the create) is
 * given back. */
static void answer_created(struct conn *c, struct sandbox *sb, uint64_t t0)
{
	size_t cap = sb_json_size(sb);
	char *buf = malloc(cap);
	struct json_w w;

	json_w_init(&w, buf, buf ? cap : 0);
	pthread_mutex_lock(&c->s->mu);
	stats_sample_locked(c->s, sb, sb->from_pool ? POOL_HIT : POOL_MISS, (now_ns() - t0) / 1000000u);
	sb_write_json(&w, sb, true);
	sb->refs--;
	pthread_mutex_unlock(&c->s->mu);
	conn_json(c, 201, &w);
	free(buf);
}

struct sandbox *sb_start(struct conn *c, struct sandbox *sb, bool custom)
{
	struct srv *s = c->s;
	struct sandbox *taken;
	struct host_addrs haddrs;
	char err[700], problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];
	/* restored from another's snapshot: its own hostname (and address)
	 * through the agent once up (sb_set_identity), below */
	bool ident = custom || sb->net_enabled;

	/* no allow_out, no dns: the daemon's default rules for its /30 (sb_create) */
	sb->net_default = sb->net_enabled && !sb->nnet_args;
	sb->owner = c->uid;
	sb_name(s, sb);
	/* Set again once it is ready: the lifetime starts then (a first
	 * create may wait a minute or more for its template). */
	sb->created_at = time(NULL);
	sb->expires_at = sb->created_at + sb->timeout_s;
	sb->state = SB_STARTING;
	/* the default template's guest, before anything (a custom template
	 * is a snapshot of its own) */
	if (!custom && srv_problems(s, problem, true)) {
		conn_error(c, 503, "unavailable", "%s", problem[0]);
		srv_free_sandbox(sb);
		return NULL;
	}
	if (sb->net_enabled)
		net_host_addrs_ask(s, &haddrs);

	pthread_mutex_lock(&s->mu);
	if (quota_admit_locked(c, c->uid, "create") || sb_admit_locked(c, c->uid)) {
		srv_free_sandbox(sb);
		return NULL;
	}
	/* Its /30 now, under the lock that admitted it, and before a pooled
	 * VM stops to make room: a full range is the service's capacity
	 * (503) and leaves no sandbox. */
	if (sb->net_enabled && net_claim_locked(s, sb, &haddrs)) {
		unsigned n = 1u << (30 - s->cfg.net_prefix);

		pthread_mutex_unlock(&s->mu);
		srv_free_sandbox(sb);
		conn_error(c, 503, "capacity", "network: net_range has no free /30 (%u in all): try again later", n);
		return NULL;
	}
	/* The pool and its figures are the default template's. */
	if (!(taken = custom ? NULL : pool_take_locked(s, sb)))
		pool_make_room_locked(s); /* the VM this create starts may be the one too many */
	if (taken) {
		srv_free_sandbox(sb); /* what it asked for is in taken now */
		sb = taken;
		sb->refs++;
		pthread_mutex_unlock(&s->mu);
		return sb;
	}
	sb->refs = 1;
	sb->identity_pending = ident;
	sb->next = s->sandboxes;
	s->sandboxes = sb;
	pthread_mutex_unlock(&s->mu);

	/* From a custom template: its snapshot linked in as paused-1. Once
	 * up, the guest's own hostname (not the template's), and its /30's
	 * address when networked (restored from a template whose guest has
	 * none). */
	if ((custom && tmpl_start_from(s, sb, sb->template, err, sizeof(err))) || sb_create(s, sb, err, sizeof(err)) ||
	    (ident && sb_set_identity(s, sb, err, sizeof(err)))) {
		const char *reason;

		pthread_mutex_lock(&s->mu);
		/* Also after its VMM came up (a template's hostname failed):
		 * no sandbox the client was not given stays running. */
		sb_abandon_locked(s, sb, "crashed");
		reason = sb->end_reason;
		pthread_mutex_unlock(&s->mu);
		if (!strcmp(reason, "killed"))
			conn_error_reason(c, 410, "sandbox_expired", reason,
					  "the sandbox was deleted while it started");
		else
			conn_error(c, 500, "internal", "sandbox could not start: %s", err);
		return NULL;
	}
	return sb;
}

void api_create(struct conn *c, const struct http_request *r)
{
	static const char *const known[] = { "template", "timeout_s",   "idle_timeout_s", "cpus",    "memory_mib",
					     "envs",     "secret_envs", "metadata",       "network", NULL };
	struct srv *s = c->s;
	struct body b;
	struct sandbox *sb = NULL;
	uint64_t t0 = now_ns();
	uint32_t timeout_s = s->cfg.default_timeout_s;
	unsigned tcpus = 0, tmem = 0;
	bool tnet = false;
	bool custom;
	int i;

	(void)r;
	if (body_parse(c, &b))
		goto out;
	if (fields_known(c, &b.d, 0, known, "body"))
		goto out;
	sb = calloc(1, sizeof(*sb));
	if (!sb) {
		conn_error(c, 500, "internal", "out of memory");
		goto out;
	}
	snprintf(sb->template, sizeof(sb->template), "default");
	sb->cpus = 1;
	sb->memory_mib = SB_MEM_MIB_DEFAULT;
	if ((i = json_find(&b.d, 0, "template")) >= 0 && !json_is_null(&b.d, i) &&
	    json_get_string(&b.d, i, sb->template, sizeof(sb->template), NULL)) {
		conn_error(c, 400, "bad_request", "template: a string (a name)");
		goto out;
	}
	if ((custom = strcmp(sb->template, "default") != 0)) {
		/* The shape is the template's snapshot's. */
		pthread_mutex_lock(&s->mu);
		const struct tmpl *t = tmpl_find_locked(s, c->uid, sb->template);
		if (t && !t->ready)
			t = NULL;
		if (t) {
			sb->cpus = tcpus = t->cpus;
			sb->memory_mib = tmem = t->memory_mib;
			tnet = t->network;
		}
		pthread_mutex_unlock(&s->mu);
		if (!t) {
			conn_error(c, 400, "bad_request",
				   "template: no template \"%s\" (\"default\", or yours: GET /v1/templates)",
				   sb->template);
			goto out;
		}
	}
	if (field_u32(c, &b.d, 0, "timeout_s", 1, s->cfg.max_timeout_s, &timeout_s) ||
	    field_u32(c, &b.d, 0, "idle_timeout_s", 0, s->cfg.max_timeout_s, &sb->idle_timeout_s) ||
	    field_u32(c, &b.d, 0, "cpus", 1, SB_CPUS_MAX, &sb->cpus) ||
	    field_u32(c, &b.d, 0, "memory_mib", SB_MEM_MIB_MIN, SB_MEM_MIB_MAX, &sb->memory_mib))
		goto out;
	if (custom && (sb->cpus != tcpus || sb->memory_mib != tmem)) {
		conn_error(c, 400, "bad_request", "%s: template \"%s\" has cpus %u and memory_mib %u: leave them out",
			   sb->cpus != tcpus ? "cpus" : "memory_mib", sb->template, tcpus, tmem);
		goto out;
	}
	if (env_append(c, &b.d, "envs", &sb->env, &sb->nenv))
		goto out;
	sb->nsecret_from = sb->nenv;
	if (env_append(c, &b.d, "secret_envs", &sb->env, &sb->nenv) || parse_metadata(c, &b.d, sb) ||
	    parse_network(c, &b.d, sb))
		goto out;
	/* A restore can neither add a network device nor leave one out. */
	if (custom && sb->net_enabled != tnet) {
		conn_error(c, 400, "bad_request",
			   tnet ? "network: template \"%s\" has a network device: network.enabled true "
				  "is required"
				: "network: template \"%s\" has no network device (a networked "
				  "sandbox or warm-up makes one that has)",
			   sb->template);
		goto out;
	}

	sb->timeout_s = timeout_s;
	if (!(sb = sb_start(c, sb, custom)))
		goto out;
	answer_created(c, sb, t0);
	sb = NULL;
out:
	if (sb)
		srv_free_sandbox(sb);
	body_free(&b);
}

/* Does sb match every metadata.KEY=VALUE of the query? */
static bool meta_match(const struct http_request *r, const struct sandbox *sb, int *bad)
{
	const char *p = r->query.p, *end = r->query.p + r->query.n;

	while (r->has_query && p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(pe - p));
		char key[128], val[600];

		if (eq && !http_pct_decode(p, (size_t)(eq - p), key, sizeof(key), NULL, true, NULL) &&
		    !strncmp(key, "metadata.", 9)) {
			bool hit = false;
			if (http_pct_decode(eq + 1, (size_t)(pe - eq - 1), val, sizeof(val), NULL, true, NULL)) {
				*bad = 1;
				return false;
			}
			for (unsigned i = 0; i < sb->nmeta; i++)
				hit |= !strcmp(sb->meta[i].key, key + 9) && !strcmp(sb->meta[i].value, val);
			if (!hit)
				return false;
		}
		p = pe + 1;
	}
	return true;
}

void api_list(struct conn *c, const struct http_request *r)
{
	struct srv *s = c->s;
	char state[16] = "";
	size_t cap = 4096;
	char *buf;
	struct json_w w;
	int bad = 0;

	if (query_get(r, "state", state, sizeof(state)) < 0 ||
	    (*state && strcmp(state, "running") && strcmp(state, "ended") && strcmp(state, "paused"))) {
		conn_error(c, 400, "bad_request", "state: running, paused or ended is expected");
		return;
	}
	pthread_mutex_lock(&s->mu);
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next)
		cap += sb_json_size(sb);
	buf = malloc(cap);
	if (!buf) {
		pthread_mutex_unlock(&s->mu);
		conn_error(c, 500, "internal", "out of memory");
		return;
	}
	json_w_init(&w, buf, cap);
	json_w_obj_begin(&w);
	json_w_key(&w, "sandboxes", 9);
	json_w_arr_begin(&w);
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next) {
		if (sb->owner != c->uid || sb->state == SB_STARTING)
			continue;
		if (*state && strcmp(state, sb_state_name(sb)))
			continue;
		if (!meta_match(r, sb, &bad))
			continue;
		sb_write_json(&w, sb, false);
	}
	json_w_arr_end(&w);
	json_w_obj_end(&w);
	pthread_mutex_unlock(&s->mu);
	if (bad)
		conn_error(c, 400, "bad_request", "metadata filter: a malformed value");
	else
		conn_json(c, 200, &w);
	free(buf);
}

void api_get(struct conn *c, struct sandbox *sb)
{
	size_t cap = sb_json_size(sb);
	char *buf = malloc(cap);
	struct json_w w;

	json_w_init(&w, buf, buf ? cap : 0);
	pthread_mutex_lock(&c->s->mu);
	sb_write_json(&w, sb, false);
	pthread_mutex_unlock(&c->s->mu);
	conn_json(c, 200, &w);
	free(buf);
}

void api_delete(struct conn *c, struct sandbox *sb)
{
	pthread_mutex_lock(&c->s->mu);
	sb_end_locked(c->s, sb, "killed");
	pthread_mutex_unlock(&c->s->mu);
	conn_respond(c, 204, NULL, NULL, 0, NULL);
}

bool api_ended(struct conn *c, struct sandbox *sb)
{
	const char *reason = NULL;

	pthread_mutex_lock(&c->s->mu);
	if (sb->state == SB_ENDED)
		reason = sb->end_reason ? sb->end_reason : "killed";
	pthread_mutex_unlock(&c->s->mu);
	if (reason)
		conn_error_reason(c, 410, "sandbox_expired", reason, "sandbox %s has ended (%s)", sb->id, reason);
	return reason != NULL;
}

void api_timeout(struct conn *c, struct sandbox *sb)
{
	static const char *const known[] = { "timeout_s", NULL };
	struct body b;
	uint32_t t = 0;
	char buf[128], ts[32];
	struct json_w w;

	if (body_parse(c, &b) || fields_known(c, &b.d, 0, known, "body") ||
	    field_u32(c, &b.d, 0, "timeout_s", 1, c->s->cfg.max_timeout_s, &t))
		goto out;
	if (!t) {
		conn_error(c, 400, "bad_request", "timeout_s: required");
		goto out;
	}
	pthread_mutex_lock(&c->s->mu);
	sb->expires_at = time(NULL) + t;
	sb_persist_locked(c->s, sb);
	rfc3339(ts, sizeof(ts), sb->expires_at);
	pthread_mutex_unlock(&c->s->mu);
	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "expires_at", 10);
	json_w_string(&w, ts, strlen(ts));
	json_w_obj_end(&w);
	conn_json(c, 200, &w);
out:
	body_free(&b);
}

void api_logs(struct conn *c, struct sandbox *sb)
{
	char path[600], buf[16384];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/audit.jsonl", sb->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (conn_stream_begin(c, 200, "application/x-ndjson"))
		goto out;
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		if (conn_chunk(c, buf, (size_t)n))
			goto out;
	conn_stream_end(c);
out:
	if (fd >= 0)
		close(fd);
}
