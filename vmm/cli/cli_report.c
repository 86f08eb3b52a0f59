/* The one JSON object of a --json run (cli_report.h). */
#include "vmm/cli/cli_report.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/cli/cli_job.h"
#include "vmm/core/clock.h"
#include "vmm/core/version.h"
#include "vmm/serve/json.h"

#define LINE_MAX_KEPT 512
#define ID_MAX 128
#define NR_FILES (2 * CLI_MAX_LIST)

static const char *const stage_names[CLI_ST_NR] = {
	"args", "setup", "template", "vm", "agent", "put", "job", "get", "end",
};

struct file_result {
	int done, ok;
	uint64_t bytes;
	char error[LINE_MAX_KEPT];
};

/* Everything a jailed child may write lives in this one mapping. */
struct shared {
	int stage;
	uint64_t stage_ms[CLI_ST_NR];  /* since t0; 0: not reached */
	char last_line[LINE_MAX_KEPT]; /* the last line said on stderr: a failure's */
	int line_stage;                /* the stage it was said in */
	int have_result;
	struct tvm_job_result res;
	uint64_t job_start_ms, job_end_ms;
	int signal, signal_stage;
	int no_vm; /* cli_report_no_vm: "started" is null */
	struct file_result files[NR_FILES];
	size_t len[2];
	/* then 2 * cap bytes of output */
};

struct cli_report {
	struct shared *sh;
	size_t map_len, cap;
	uint64_t t0_ns;
	const char *json_out, *encoding;
	int out_fd; /* our stdout as it was: a template's making points fd 1 at /dev/null */
	/* --json-out resolved at the start (seccomp allows no readlink at
	 * the end): a FIFO, terminal or /dev/stdout is written in place (a
	 * rename would put a regular file where it was and its reader would
	 * get nothing); a symlink to a file has the file replaced, not the
	 * link. */
	int json_in_place;
	char *json_real;
	char id[ID_MAX + 1];
	char host[256];
	int exec; /* exec, not run */
	FILE *old_stderr, *tee;
	char pending[LINE_MAX_KEPT]; /* a line not yet ended, in this process */
	size_t npending;
	int have_conf; /* cli_report_config: the run's settings as given */
	struct tvm_config conf;
	struct cli_job conf_job;
	char *conf_paths[2];        /* kernel, root drive: ours */
	struct stop_obj *sig_obj;   /* for on_stop_signal */
	struct stop_obj *sig_stale; /* the one it replaced */
	char sig_msg[3][64];        /* each signal's error message */
};

/* A signal handler reaches static state only; tinyvmm has one report per
 * process (on_stop_signal below). */
static const int stop_sigs[3] = { SIGINT, SIGTERM, SIGHUP };

/* One object, rendered as if stopped by SIGTERM, serves all three stop
 * signals: on_stop_signal writes it with the status and the message
 * swapped for its own signal's. (Three objects, each up to 6 times the
 * job's output escaped, got tinyvmm killed by its own cgroup's memory
 * limit for an output of a few MiB.) */
struct stop_obj {
	size_t len, status_off, msg_off, msg_len; /* "143" at status_off, the message at msg_off */
	char text[];
};
static struct cli_report *sig_report;

static void render_stopped(struct cli_report *r);
static void on_stop_signal(int sig);

static char *out_buf(struct cli_report *r, int stream)
{
	return (char *)(r->sh + 1) + (size_t)(stream - 1) * r->cap;
}

static uint64_t ms_since(const struct cli_report *r)
{
	uint64_t ms = (clock_mono_ns() - r->t0_ns) / 1000000;
	return ms ? ms : 1; /* 0 means "not reached" */
}

static void keep_line(struct cli_report *r, const char *s, size_t n)
{
	if (n > 9 && !memcmp(s, "tinyvmm: ", 9)) {
		s += 9;
		n -= 9;
	}
	if (n >= LINE_MAX_KEPT)
		n = LINE_MAX_KEPT - 1;
	memcpy(r->sh->last_line, s, n);
	r->sh->last_line[n] = 0;
	r->sh->line_stage = r->sh->stage;
}

/* stderr while a report exists: everything to fd 2 as before, and each
 * line kept for the report's error message. */
static ssize_t tee_write(void *cookie, const char *buf, size_t len)
{
	struct cli_report *r = cookie;

	for (size_t off = 0; off < len;) {
		ssize_t n = write(2, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			keep_line(r, r->pending, r->npending);
			r->npending = 0;
		} else if (r->npending < sizeof(r->pending) - 1)
			r->pending[r->npending++] = buf[i];
	}
	return (ssize_t)len;
}

/* The value of option name in argv (before "--"): "--name V" or
 * "--name=V"; flag: the option takes no value (then "" when given). */
static const char *find_opt(int argc, char **argv, const char *name, int flag)
{
	size_t n = strlen(name);
	const char *v = NULL;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (strncmp(argv[i], name, n))
			continue;
		if (flag && !argv[i][n])
			v = "";
		else if (!flag && argv[i][n] == '=')
			v = argv[i] + n + 1;
		else if (!flag && !argv[i][n] && i + 1 < argc)
			v = argv[++i];
	}
	return v;
}

/* --id, else the Slurm array task's, else a random one. */
static void make_id(struct cli_report *r, const char *given)
{
	const char *job = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
	uint8_t rnd[8] = { 0 };

	if (given && *given)
		snprintf(r->id, sizeof(r->id), "%s", given);
	else if (job && task && *job && *task)
		snprintf(r->id, sizeof(r->id), "%s-%s", job, task);
	else {
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			memset(rnd, 0, sizeof(rnd));
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(r->id + 2 * i, 3, "%02x", rnd[i]);
	}
}

struct cli_report *cli_report_new(int argc, char **argv, uint64_t t0_ns)
{
	const char *cap_opt = find_opt(argc, argv, "--output-cap", 0);
	unsigned long cap = cap_opt ? strtoul(cap_opt, NULL, 10) : 0;
	const char *json = find_opt(argc, argv, "--json", 1), *json_out = find_opt(argc, argv, "--json-out", 0);
	struct cli_report *r;
	cookie_io_functions_t io = { .write = tee_write };

	if (!json && !json_out)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "tinyvmm: --json: out of memory\n");
		return NULL;
	}
	/* A bad --output-cap is the parser's to refuse; this only bounds. */
	r->cap = cap && cap <= UINT32_MAX ? cap : CLI_DEFAULT_OUTPUT_CAP;
	r->map_len = sizeof(struct shared) + 2 * r->cap;
	/* Reserved, not committed: pages exist once output is written. */
	r->sh = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->sh == MAP_FAILED) {
		fprintf(stderr, "tinyvmm: --json: %s\n", strerror(errno));
		free(r);
		return NULL;
	}
	r->t0_ns = t0_ns;
	r->out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (r->out_fd < 0)
		r->out_fd = 1;
	r->json_out = json_out;
	if (json_out && *json_out) {
		struct stat st, lst;

		if (stat(json_out, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			r->json_in_place = 1;
		else if (lstat(json_out, &lst) == 0 && S_ISLNK(lst.st_mode))
			r->json_real = realpath(json_out, NULL);
	}
	r->encoding = find_opt(argc, argv, "--output-encoding", 0);
	r->exec = !strcmp(argv[0], "exec");
	make_id(r, find_opt(argc, argv, "--id", 0));
	gethostname(r->host, sizeof(r->host) - 1); /* now: seccomp allows no uname later */
	r->tee = fopencookie(r, "w", io);
	if (r->tee) {
		setvbuf(r->tee, NULL, _IOLBF, 0);
		r->old_stderr = stderr;
		stderr = r->tee;
	}
	for (int i = 0; i < 3; i++)
		snprintf(r->sig_msg[i], sizeof(r->sig_msg[i]), "stopped by signal %d (SIG%s)", stop_sigs[i],
			 sigabbrev_np(stop_sigs[i]));
	render_stopped(r);
	sig_report = r;
	for (int i = 0; i < 3; i++)
		sigaction(stop_sigs[i], &(struct sigaction){ .sa_handler = on_stop_signal }, NULL);
	return r;
}

void cli_report_no_vm(struct cli_report *r)
{
	if (r)
		r->sh->no_vm = 1;
}

void cli_report_stage(struct cli_report *r, enum cli_stage s)
{
	if (!r || (int)s <= r->sh->stage)
		return;
	r->sh->stage = s;
	r->sh->stage_ms[s] = ms_since(r);
	/* exec has no signal thread: its handler stays in charge. Not past the
	 * job's start: from there the object would hold the job's output, up
	 * to 6 times its caps, rendered inside the VM's cgroup at every stage
	 * (run's signal thread has the signals by then anyway). */
	if (s <= CLI_ST_JOB)
		render_stopped(r);
}

void cli_report_output(struct cli_report *r, int stream, const void *buf, size_t len)
{
	size_t *have;

	if (!r || (stream != 1 && stream != 2))
		return;
	have = &r->sh->len[stream - 1];
	if (len > r->cap - *have)
		len = r->cap - *have;
	memcpy(out_buf(r, stream) + *have, buf, len);
	*have += len;
}

void cli_report_result(struct cli_report *r, const struct tvm_job_result *res)
{
	if (!r)
		return;
	r->sh->res = *res;
	r->sh->have_result = 1;
}

void cli_report_file(struct cli_report *r, int get, unsigned i, uint64_t bytes, const char *error)
{
	struct file_result *f;

	if (!r || i >= CLI_MAX_LIST)
		return;
	f = &r->sh->files[(get ? CLI_MAX_LIST : 0) + i];
	f->done = 1;
	f->ok = !error;
	f->bytes = bytes;
	snprintf(f->error, sizeof(f->error), "%s", error ? error : "");
}

void cli_report_config(struct cli_report *r, const struct tvm_config *c, const struct cli_job *j)
{
	if (!r)
		return;
	r->conf = *c;
	r->conf_job = *j;
	r->conf_paths[0] = c->kernel_path ? strdup(c->kernel_path) : NULL;
	r->conf_paths[1] = c->root_drive && c->nr_drives ? strdup(c->drives[0].path) : NULL;
	r->conf.kernel_path = r->conf_paths[0];
	r->conf.drives[0].path = r->conf_paths[1];
	r->conf.root_drive = r->conf_paths[1] != NULL;
	r->have_conf = 1;
}

void cli_report_job_times(struct cli_report *r, int end)
{
	if (!r)
		return;
	if (end)
		r->sh->job_end_ms = ms_since(r);
	else
		r->sh->job_start_ms = ms_since(r);
}

void cli_report_signal(struct cli_report *r, int sig)
{
	if (r && !r->sh->signal) {
		r->sh->signal_stage = r->sh->stage;
		r->sh->signal = sig;
	}
}

/* A value in milliseconds since tinyvmm started, null when not reached. */
static void kms(struct json_w *w, const char *key, uint64_t ms)
{
	if (ms)
		json_w_kuint(w, key, ms);
	else
		json_w_knull(w, key);
}

/* n bytes of a C string as a member (the guest or local half of a spec). */
static void kstrn(struct json_w *w, const char *key, const char *s, size_t n)
{
	json_w_key(w, key, strlen(key));
	json_w_string(w, s, n);
}

static void config_object(struct json_w *w, const struct tvm_config *c, const struct cli_job *j)
{
	json_w_key(w, "config", 6);
	if (!c) {
		json_w_null(w);
		return;
	}
	json_w_obj_begin(w);
	json_w_kstr(w, "kernel", c->kernel_path);
	json_w_kstr(w, "rootfs", c->root_drive && c->nr_drives ? c->drives[0].path : NULL);
	json_w_kuint(w, "mem_mib", c->mem_mib);
	json_w_kuint(w, "cpus", c->cpus);
	json_w_kuint(w, "drives", c->nr_drives);
	json_w_kbool(w, "net", c->net.enabled);
	json_w_kstr(w, "seccomp",
		    c->seccomp == TVM_SECCOMP_KILL  ? "kill"
		    : c->seccomp == TVM_SECCOMP_LOG ? "log"
						    : "off");
	kms(w, "timeout_ms", j ? j->timeout_ms : 0);
	kms(w, "job_mem_bytes", j ? j->mem_max : 0); /* not ms, but null for none too */
	kms(w, "job_pids", j ? j->pids_max : 0);
	kms(w, "ttl_ms", c->ttl_ms);
	json_w_key(w, "argv", 4);
	if (j && j->argv) {
		json_w_arr_begin(w);
		for (char **a = j->argv; *a; a++)
			json_w_string(w, *a, strlen(*a));
		json_w_arr_end(w);
	} else
		json_w_null(w);
	json_w_obj_end(w);
}

static void files_array(struct json_w *w, const struct cli_report *r, const struct cli_job *j)
{
	json_w_key(w, "files", 5);
	json_w_arr_begin(w);
	for (int get = 0; j && get < 2; get++)
		for (unsigned i = 0; i < (get ? j->nget : j->nput); i++) {
			const char *spec = get ? j->gets[i] : j->puts[i], *colon = strchr(spec, ':');
			const struct file_result *fr = &r->sh->files[(get ? CLI_MAX_LIST : 0) + i];

			json_w_obj_begin(w);
			json_w_kstr(w, "direction", get ? "get" : "put");
			kstrn(w, get ? "guest" : "local", spec, (size_t)(colon - spec));
			json_w_kstr(w, get ? "local" : "guest", colon + 1);
			json_w_kbool(w, "ok", fr->done && fr->ok);
			if (fr->done && fr->ok)
				json_w_kuint(w, "bytes", fr->bytes);
			else
				json_w_knull(w, "bytes");
			json_w_kstr(w, "error", !fr->done ? "not attempted" : fr->ok ? NULL : fr->error);
			json_w_obj_end(w);
		}
	json_w_arr_end(w);
}

/* The error of a run that ended with status, or NULL for none: the job
 * ran, its files moved and status is its own. */
static const char *error_of(const struct cli_report *r, int status, int stop, const char **msg)
{
	const struct shared *sh = r->sh;
	static char sigmsg[64];
	int sig = stop ? stop : sh->signal, stage = stop ? sh->stage : sh->signal_stage;

	/* A jailed VMM ended by a signal the jail forwarded before its own
	 * signal thread ran: the status says which. */
	if (!sig && !sh->have_result && (status == 128 + SIGINT || status == 128 + SIGTERM || status == 128 + SIGHUP)) {
		sig = status - 128;
		stage = sh->stage;
	}
	if (sig) {
		snprintf(sigmsg, sizeof(sigmsg), "stopped by signal %d (SIG%s)", sig,
			 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
		*msg = sigmsg;
		return stage_names[stage];
	}
	for (unsigned i = 0; i < NR_FILES; i++)
		if (sh->files[i].done && !sh->files[i].ok) {
			*msg = sh->files[i].error;
			/* refused before any VM (a local file missing): setup */
			if (sh->stage < CLI_ST_PUT)
				return stage_names[sh->stage];
			return i < CLI_MAX_LIST ? "put" : "get";
		}
	if (sh->have_result && status == (sh->res.timed_out ? EXIT_TIMED_OUT : sh->res.exit_code))
		return NULL;
	if (!sh->last_line[0]) {
		*msg = "tinyvmm failed (no message)";
		return stage_names[sh->stage];
	}
	*msg = sh->last_line;
	/* 64 is a wrong command line whenever it was found. */
	return stage_names[status == EXIT_USAGE ? CLI_ST_ARGS : sh->line_stage];
}

/* Room for the whole object: every string may grow 6 times escaped. */
static size_t object_bound(const struct cli_report *r, const struct cli_job *j, const struct tvm_config *c)
{
	size_t n = 65536 + 6 * (sizeof(r->sh->last_line) + sizeof(r->id) + 256);

	n += 6 * (r->sh->len[0] + r->sh->len[1]);
	for (unsigned i = 0; j && i < j->nput; i++)
		n += 6 * (strlen(j->puts[i]) + LINE_MAX_KEPT) + 128;
	for (unsigned i = 0; j && i < j->nget; i++)
		n += 6 * (strlen(j->gets[i]) + LINE_MAX_KEPT) + 128;
	for (char **a = j && j->argv ? j->argv : NULL; a && *a; a++)
		n += 6 * strlen(*a) + 4;
	if (j && j->snapshot)
		n += 6 * strlen(j->snapshot);
	if (c && c->kernel_path)
		n += 6 * strlen(c->kernel_path);
	if (c && c->root_drive && c->nr_drives)
		n += 6 * strlen(c->drives[0].path);
	return n;
}

static void object(struct json_w *w, struct cli_report *r, int status, int stop, const struct tvm_config *c,
		   const struct cli_job *j)
{
	const struct shared *sh = r->sh;
	const struct tvm_job_result *res = &sh->res;
	const char *msg = NULL, *stage = error_of(r, status, stop, &msg);
	int b64 = r->encoding && !strcmp(r->encoding, "base64");
	json_w_obj_begin(w);
	json_w_kuint(w, "format", 1);
	json_w_kstr(w, "id", r->id);
	json_w_kstr(w, "host", r->host);
	json_w_kstr(w, "version", TVM_VERSION);
	json_w_kstr(w, "command", r->exec ? "exec" : "run");
	json_w_kbool(w, "ok", !stage && status == 0);
	json_w_kint(w, "status", status);
	json_w_key(w, "error", 5);
	if (stage) {
		json_w_obj_begin(w);
		json_w_kstr(w, "stage", stage);
		json_w_kstr(w, "message", msg);
		json_w_obj_end(w);
	} else
		json_w_null(w);
	config_object(w, c, j);
	json_w_kstr(w, "started", j && !sh->no_vm ? j->started : NULL);
	json_w_kstr(w, "snapshot", j ? j->snapshot : NULL);
	json_w_kbool(w, "template_made", j && j->template_made);
	json_w_key(w, "timings", 7);
	json_w_obj_begin(w);
	for (int st = CLI_ST_SETUP; st < CLI_ST_NR; st++) {
		char key[32];

		snprintf(key, sizeof(key), "%s_ms", stage_names[st]);
		kms(w, key, sh->stage_ms[st]);
	}
	kms(w, "job_end_ms", sh->job_end_ms);
	kms(w, "total_ms", ms_since(r));
	json_w_obj_end(w);
	if (sh->have_result) {
		json_w_kint(w, "exit_code", res->exit_code);
		json_w_kint(w, "signal", res->signal);
	} else {
		json_w_knull(w, "exit_code");
		json_w_knull(w, "signal");
	}
	json_w_kbool(w, "timed_out", res->timed_out);
	json_w_kbool(w, "host_timed_out", res->host_timed_out);
	json_w_kstr(w, "output_encoding", b64 ? "base64" : "utf8");
	for (int s = 1; s <= 2; s++) {
		json_w_key(w, s == 1 ? "stdout" : "stderr", 6);
		if (b64)
			json_w_base64(w, out_buf(r, s), sh->len[s - 1]);
		else
			json_w_string(w, out_buf(r, s), sh->len[s - 1]);
	}
	json_w_kbool(w, "stdout_truncated", res->stdout_truncated);
	json_w_kbool(w, "stderr_truncated", res->stderr_truncated);
	json_w_kbool(w, "oom_killed", res->oom_killed);
	json_w_kbool(w, "pids_limited", res->pids_limited);
	json_w_kuint(w, "wall_ms", res->wall_ms);
	json_w_kuint(w, "cpu_ms", res->cpu_ms);
	json_w_kuint(w, "max_rss_kib", res->max_rss_kib);
	json_w_kuint(w, "host_job_ms", sh->job_end_ms > sh->job_start_ms ? sh->job_end_ms - sh->job_start_ms : 0);
	json_w_kuint(w, "host_total_ms", ms_since(r));
	files_array(w, r, j);
	json_w_obj_end(w);
}

/* The object and its newline, NUL-terminated (JSON text holds no NUL), in
 * a buffer of ours, for a run ending with status (stop: as if stopped by
 * that signal now, 0: as it is); NULL when out of memory or the bound was
 * wrong (a bug). */
static char *render(struct cli_report *r, int status, int stop, const struct tvm_config *c, const struct cli_job *j,
		    size_t *len)
{
	size_t cap = object_bound(r, j, c);
	char *buf = malloc(cap);
	struct json_w w;

	if (!buf)
		return NULL;
	json_w_init(&w, buf, cap - 2);
	object(&w, r, status, stop, c, j);
	if (json_w_finish(&w, len)) {
		free(buf);
		return NULL;
	}
	buf[(*len)++] = '\n';
	buf[*len] = 0;
	return buf;
}

static int write_all(int fd, const char *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			off += (size_t)n;
	}
	return 0;
}

static int write_object(int fd, struct cli_report *r, int status, const struct tvm_config *c, const struct cli_job *j)
{
	size_t len;
	char *buf = render(r, status, 0, c, j, &len);
	int err = buf ? write_all(fd, buf, len) : -ENOMEM;

	free(buf);
	return err;
}

/* Until the VM's own signal thread takes SIGINT, SIGTERM and SIGHUP (or
 * the jail's parent forwards them), one of them ends tinyvmm from this
 * handler, with the object rendered beforehand for the stage reached:
 * only write, open and _exit here. */
static void on_stop_signal(int sig)
{
	struct cli_report *r = sig_report;
	const struct stop_obj *o = r ? __atomic_load_n(&r->sig_obj, __ATOMIC_ACQUIRE) : NULL;
	int fd = r ? r->out_fd : 1, i = 0;

	while (i < 2 && stop_sigs[i] != sig)
		i++;
	if (o) {
		const char *m = r->sig_msg[i];
		char st[4] = { (char)('0' + (128 + sig) / 100), (char)('0' + (128 + sig) / 10 % 10),
			       (char)('0' + (128 + sig) % 10), 0 };

		if (r->json_out && *r->json_out)
			fd = open(r->json_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			write_all(fd, o->text, o->status_off);
			write_all(fd, st, 3);
			write_all(fd, o->text + o->status_off + 3, o->msg_off - o->status_off - 3);
			write_all(fd, m, strlen(m));
			write_all(fd, o->text + o->msg_off + o->msg_len, o->len - o->msg_off - o->msg_len);
		}
	}
	_exit(128 + sig);
}

/* The object on_stop_signal writes, for the stage reached now. It is
 * swapped in with one store; the one it replaces is freed a generation
 * later, so a handler running on another thread meanwhile still reads a
 * live one. */
static void render_stopped(struct cli_report *r)
{
	const char *term = r->sig_msg[1], *sp, *mp;
	struct stop_obj *o;
	size_t len;
	char *obj = render(r, 128 + SIGTERM, SIGTERM, NULL, NULL, &len);

	/* Outside strings a quote is never escaped: the first of each is
	 * the object's own member. */
	sp = obj ? strstr(obj, "\"status\":143,") : NULL;
	mp = sp ? strstr(sp, "\"message\":\"") : NULL;
	if (!mp || strncmp(mp + 11, term, strlen(term)) || !(o = malloc(sizeof(*o) + len + 1))) {
		free(obj);
		return; /* the last one stays */
	}
	o->len = len;
	o->status_off = (size_t)(sp - obj) + 9;
	o->msg_off = (size_t)(mp - obj) + 11;
	o->msg_len = strlen(term);
	memcpy(o->text, obj, len + 1);
	free(obj);
	free(r->sig_stale);
	r->sig_stale = __atomic_exchange_n(&r->sig_obj, o, __ATOMIC_ACQ_REL);
}

/* Written next to the target and renamed: a reader never sees half. */
static int write_file(struct cli_report *r, int status, const struct tvm_config *c, const struct cli_job *j)
{
	char tmp[4200];
	const char *target = r->json_real ? r->json_real : r->json_out;
	int fd, err;

	if (r->json_in_place) {
		fd = open(target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		err = write_object(fd, r, status, c, j);
		if (close(fd) < 0 && !err)
			err = -errno;
		return err;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tinyvmm-XXXXXX", target) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	err = write_object(fd, r, status, c, j);
	if (!err && fchmod(fd, 0644) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, target) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

/* The handlers stay (seccomp allows no sigaction at the end of a run):
 * without a report they end tinyvmm as the default action would. */
static void report_free(struct cli_report *r)
{
	sig_report = NULL;
	free(r->conf_paths[0]);
	free(r->conf_paths[1]);
	free(r->sig_obj);
	free(r->sig_stale);
	if (r->tee) {
		fflush(r->tee);
		stderr = r->old_stderr;
		fclose(r->tee);
	}
	munmap(r->sh, r->map_len);
	if (r->out_fd > 2)
		close(r->out_fd);
	free(r->json_real);
	free(r);
}

void cli_report_cancel(struct cli_report *r)
{
	if (r)
		report_free(r);
}

void cli_report_json_out_refused(struct cli_report *r)
{
	if (r)
		r->json_out = NULL;
}

int cli_report_finish(struct cli_report *r, int status, const struct tvm_config *c, const struct cli_job *j)
{
	int err = 0;

	if (!r)
		return status;
	if (r->have_conf) {
		c = &r->conf;
		j = &r->conf_job;
	}
	fflush(stderr);
	if (r->npending) /* a last line without its newline */
		keep_line(r, r->pending, r->npending);
	if (r->json_out && *r->json_out && (err = write_file(r, status, c, j))) {
		/* Not lost: with --json-out, stdout is ours and empty. A run
		 * that had worked fails with this line as its error; a failed
		 * one keeps its own. */
		char keep[LINE_MAX_KEPT];
		int keep_stage = r->sh->line_stage;

		memcpy(keep, r->sh->last_line, sizeof(keep));
		fprintf(stderr, "tinyvmm: --json-out %s: %s: the object goes to stdout\n", r->json_out, strerror(-err));
		fflush(stderr);
		if (status) {
			memcpy(r->sh->last_line, keep, sizeof(keep));
			r->sh->line_stage = keep_stage;
		} else {
			status = EXIT_VM_FAILED;
		}
	}
	if (!(r->json_out && *r->json_out) || err) {
		fflush(stdout);
		err = write_object(r->out_fd, r, status, c, j);
	}
	if (r->tee) {
		stderr = r->old_stderr;
		fclose(r->tee);
		r->tee = NULL;
	}
	if (err) {
		fprintf(stderr, "tinyvmm: --json: stdout: %s\n", strerror(-err));
		status = status ? status : EXIT_VM_FAILED;
	}
	report_free(r);
	return status;
}
