/* The audit log: one JSON line per event (a sandbox created or ended, an
 * exec started or ended, a file moved), appended to the sandbox's
 * audit.jsonl (GET /v1/sandboxes/{id}/logs) and to the daemon's stderr.
 * Callers write names, sizes and statuses, never an environment value. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/serve/serve.h"

void audit_begin(struct json_w *w, char *buf, size_t cap, const char *event)
{
	char t[32];

	json_w_init(w, buf, cap);
	json_w_obj_begin(w);
	json_w_key(w, "time", 4);
	rfc3339(t, sizeof(t), time(NULL));
	json_w_string(w, t, strlen(t));
	json_w_key(w, "event", 5);
	json_w_string(w, event, strlen(event));
}

void audit_end(struct srv *s, struct sandbox *sb, struct json_w *w)
{
	char path[600];
	size_t len;
	int fd;

	(void)s;
	json_w_key(w, "sandbox", 7);
	json_w_string(w, sb->id, strlen(sb->id));
	json_w_obj_end(w);
	if (json_w_finish(w, &len)) {
		fprintf(stderr, "tinyvmm serve: sandbox %s: an audit line did not fit its buffer\n", sb->id);
		return;
	}
	if (len < w->cap)
		w->buf[len++] = '\n';
	snprintf(path, sizeof(path), "%s/audit.jsonl", sb->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, w->buf, len) < 0) {
			/* The daemon's own line below still says it. */
		}
		close(fd);
	}
	fprintf(stderr, "tinyvmm serve: %.*s", (int)len, w->buf);
}
