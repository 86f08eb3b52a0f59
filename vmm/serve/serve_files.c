/* The file routes: PUT and GET stream between the HTTP body and the
 * agent's PUT_FILE/GET_FILE transfer in 64 KiB pieces (the daemon never
 * holds a whole file); list and delete run find(1) and rm(1) in the guest,
 * the agent having no message for them. Paths are the guest's: they never
 * touch a host file, and a relative one is under /home/sandbox. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/core/err.h"
#include "vmm/serve/serve.h"

#define GUEST_HOME "/home/sandbox"
#define LIST_CAP (4u << 20)
#define FILE_OP_MS 60000 /* a mkdir, stat, ls or rm in the guest */

static ssize_t body_src(void *ctx, void *buf, size_t cap)
{
	return conn_body_read(ctx, buf, cap);
}

static int http_sink(void *ctx, const void *buf, size_t len)
{
	struct conn *c = ctx;

	if (!c->head_sent && conn_stream_begin(c, 200, "application/octet-stream"))
		return -EPIPE;
	return conn_chunk(c, buf, len) ? -EPIPE : 0;
}

/* An agent's refusal as an answer. */
static void refused(struct conn *c, int r, const char *what, const char *path, const struct tvm_err *e)
{
	if (r == -ENOENT)
		conn_error(c, 404, "not_found", "%s %s: no such file or directory", what, path);
	else if (r == -ENOSPC)
		conn_error(c, 507, "insufficient_storage", "%s %s: the sandbox's disk is full", what, path);
	else if (r == -EFBIG)
		conn_error(c, 413, "payload_too_large", "%s %s: over the limit of %llu bytes", what, path,
			   (unsigned long long)c->s->cfg.max_file_bytes);
	else if (c->body_fault)
		conn_error(c, 400, "bad_request", "%s %s: the request body: %s", what, path, c->body_fault);
	else
		conn_error(c, 502, "guest_error", "%s", e->msg);
}

/* Sized for the path escaped at worst: the line is never dropped. */
static void audit_file(struct conn *c, struct sandbox *sb, const char *event, const char *path, uint64_t size, bool ok)
{
	size_t cap = 512 + 6 * strlen(path);
	char *ab = malloc(cap);
	struct json_w aw;

	if (!ab)
		return;
	audit_begin(&aw, ab, cap, event);
	json_w_key(&aw, "path", 4);
	json_w_string(&aw, path, strlen(path));
	json_w_key(&aw, "size", 4);
	json_w_uint(&aw, size);
	json_w_key(&aw, "ok", 2);
	json_w_bool(&aw, ok);
	audit_end(c->s, sb, &aw);
	free(ab);
}

static void file_put(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *path, uint32_t uid)
{
	char mode_s[16] = "0644", *end, buf[6 * 4096 + 256]; /* the path escaped at worst */
	unsigned long mode;
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	uint64_t size = 0;
	struct json_w w;
	int q = query_get(r, "mode", mode_s, sizeof(mode_s));

	mode = strtoul(mode_s, &end, 8);
	if (q < 0 || !*mode_s || *end || mode > 07777) {
		conn_error(c, 400, "bad_request", "mode: an octal file mode (e.g. 0644) is expected");
		return;
	}
	if (!r->chunked && !r->has_length) {
		conn_error(c, 400, "bad_request", "PUT needs Content-Length or chunked Transfer-Encoding");
		return;
	}
	int rc = sb_agent(sb, 30000, &a, &e);
	if (!rc)
		rc = tvm_agent_put_stream(a, path, (uint32_t)mode, uid, body_src, c, &size, &e);
	/* A PUT that failed after its open (a client that stopped, a full
	 * disk) leaves no half file: the agent removes what it wrote (and only
	 * that: a PUT refused at its open leaves what was there). */
	tvm_agent_close(a);
	audit_file(c, sb, "file_put", path, size, rc == 0);
	if (rc) {
		refused(c, rc, "put", path, &e);
		return;
	}
	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "path", 4);
	json_w_string(&w, path, strlen(path));
	json_w_key(&w, "size", 4);
	json_w_uint(&w, size);
	json_w_obj_end(&w);
	conn_json(c, 201, &w);
}

static void file_get(struct conn *c, struct sandbox *sb, const char *path, uint32_t uid)
{
	struct tvm_agent *a = NULL;
	struct tvm_err e = { 0 };
	uint64_t size = 0;
	int rc = sb_agent(sb, 30000, &a, &e);

	if (!rc)
		rc = tvm_agent_get_stream(a, path, UINT64_MAX, uid, http_sink, c, &size, &e);
	tvm_agent_close(a);
	audit_file(c, sb, "file_get", path, size, rc == 0);
	if (rc) {
		refused(c, rc, "get", path, &e);
		return;
	}
	if (!c->head_sent && conn_stream_begin(c, 200, "application/octet-stream"))
		return;
	conn_stream_end(c);
}

/* The guest's stderr, as the one line of a 404 or a 502. */
static void cmd_failed(struct conn *c, const char *what, const char *path, const char *err)
{
	if (strstr(err, "No such file"))
		conn_error(c, 404, "not_found", "%s %s: no such file or directory", what, path);
	else
		conn_error(c, 502, "guest_error", "%s %s: %.200s", what, path, err);
}

static void file_delete(struct conn *c, struct sandbox *sb, const char *path, uint32_t uid)
{
	const char *argv[] = { "rm", "-r", "--", path, NULL };
	struct tvm_job_result res;
	struct tvm_err e = { 0 };
	char *out = NULL, *err = NULL;
	size_t n;
	int rc = exec_simple(sb, argv, uid, FILE_OP_MS, 4096, &res, &out, &n, &err, NULL, &e);

	if (rc)
		conn_error(c, 502, "guest_error", "delete %s: %s", path, e.msg);
	else if (res.exit_code)
		cmd_failed(c, "delete", path, err);
	else
		conn_respond(c, 204, NULL, NULL, 0, NULL);
	free(out);
	free(err);
}

static const char *type_name(char t)
{
	return t == 'f' ? "file" : t == 'd' ? "dir" : t == 'l' ? "symlink" : "other";
}

/* find's records "TYPE\tSIZE\tMODE\tNAME\0" (the guest's output: every
 * field checked, a malformed record skipped) as entries. */
static void list_entries(struct json_w *w, const char *out, size_t n)
{
	const char *p = out, *end = out + n;

	while (p < end) {
		const char *z = memchr(p, 0, (size_t)(end - p));
		const char *rec_end = z ? z : end;
		const char *t1 = memchr(p, '\t', (size_t)(rec_end - p));
		const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(rec_end - t1 - 1)) : NULL;
		const char *t3 = t2 ? memchr(t2 + 1, '\t', (size_t)(rec_end - t2 - 1)) : NULL;

		if (t3 && t1 - p == 1 && t2 > t1 + 1 && t3 > t2 + 1 && rec_end > t3 + 1) {
			char num[24];
			unsigned long long size = 0, mode = 0;
			size_t l1 = (size_t)(t2 - t1 - 1), l2 = (size_t)(t3 - t2 - 1);

			if (l1 < sizeof(num) && l2 < sizeof(num)) {
				memcpy(num, t1 + 1, l1);
				num[l1] = 0;
				size = strtoull(num, NULL, 10);
				memcpy(num, t2 + 1, l2);
				num[l2] = 0;
				mode = strtoull(num, NULL, 8);
				json_w_obj_begin(w);
				json_w_key(w, "name", 4);
				json_w_string(w, t3 + 1, (size_t)(rec_end - t3 - 1));
				json_w_key(w, "type", 4);
				const char *tn = type_name(*p);
				json_w_string(w, tn, strlen(tn));
				json_w_key(w, "size", 4);
				json_w_uint(w, size);
				json_w_key(w, "mode", 4);
				json_w_uint(w, mode & 07777);
				json_w_obj_end(w);
			}
		}
		p = rec_end + 1;
	}
}

static void file_list(struct conn *c, struct sandbox *sb, const char *path, uint32_t uid)
{
	const char *argv[] = {
		"find", path, "-mindepth", "1", "-maxdepth", "1", "-printf", "%y\\t%s\\t%m\\t%f\\0", NULL
	};
	struct tvm_job_result res;
	struct tvm_err e = { 0 };
	char *out = NULL, *err = NULL, *buf = NULL;
	size_t n = 0, cap;
	struct json_w w;
	int rc = exec_simple(sb, argv, uid, FILE_OP_MS, LIST_CAP, &res, &out, &n, &err, NULL, &e);

	if (rc) {
		conn_error(c, 502, "guest_error", "list %s: %s", path, e.msg);
		goto out;
	}
	if (res.exit_code && !n) {
		cmd_failed(c, "list", path, err);
		goto out;
	}
	cap = 6 * n + 6 * strlen(path) + 8192;
	buf = malloc(cap);
	if (!buf) {
		conn_error(c, 500, "internal", "out of memory");
		goto out;
	}
	json_w_init(&w, buf, cap);
	json_w_obj_begin(&w);
	json_w_key(&w, "path", 4);
	json_w_string(&w, path, strlen(path));
	json_w_key(&w, "entries", 7);
	json_w_arr_begin(&w);
	list_entries(&w, out, n);
	json_w_arr_end(&w);
	json_w_obj_end(&w);
	conn_json(c, 200, &w);
out:
	free(buf);
	free(out);
	free(err);
}

void files_route(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *what)
{
	const struct http_str *m = &r->method;
	char raw[4096], path[4096 + sizeof(GUEST_HOME)], user[16] = "sandbox";
	uint32_t uid = TVM_ID_DEFAULT;
	int q = query_get(r, "path", raw, sizeof(raw));

	if (q <= 0 || !*raw) {
		conn_error(c, 400, "bad_request", "path: a query parameter naming a file in the sandbox is required");
		return;
	}
	if (raw[0] == '/')
		snprintf(path, sizeof(path), "%s", raw);
	else
		snprintf(path, sizeof(path), GUEST_HOME "/%s", raw);
	if (strlen(path) > 4095) {
		conn_error(c, 400, "bad_request", "path: at most 4095 bytes");
		return;
	}
	if (query_get(r, "user", user, sizeof(user)) < 0 || (strcmp(user, "sandbox") && strcmp(user, "root"))) {
		conn_error(c, 400, "bad_request", "user: \"sandbox\" or \"root\" is expected");
		return;
	}
	if (!strcmp(user, "root"))
		uid = TVM_ID_ROOT;
	if (!strcmp(what, "list")) {
		if (m->n == 3 && !memcmp(m->p, "GET", 3))
			file_list(c, sb, path, uid);
		else
			conn_not_allowed(c, "GET", "fs/list");
	} else if (m->n == 3 && !memcmp(m->p, "PUT", 3)) {
		file_put(c, r, sb, path, uid);
	} else if (m->n == 3 && !memcmp(m->p, "GET", 3)) {
		file_get(c, sb, path, uid);
	} else if (m->n == 6 && !memcmp(m->p, "DELETE", 6)) {
		file_delete(c, sb, path, uid);
	} else {
		conn_not_allowed(c, "GET, PUT, DELETE", "files");
	}
}
