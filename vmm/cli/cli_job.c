#include "vmm/cli/cli_job.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/file_open.h"
#include "vmm/cli/cli_report.h"

#define FILE_CAP CLI_FILE_CAP
#define STDIN_CAP (256u << 20) /* largest stdin forwarded */

int cli_job_seconds(const char *name, const char *arg, uint32_t *ms)
{
	char *end;
	double s;

	errno = 0;
	s = strtod(arg, &end);
	/* Written so that NaN fails too (it would become 0: no limit at all). */
	if (errno || end == arg || *end || !(s >= 0 && s <= 4e6)) {
		fprintf(stderr, "tinyvmm: --%s: '%s' is not a number of seconds\n", name, arg);
		return -1;
	}
	*ms = (uint32_t)(s * 1000);
	if (s > 0 && *ms == 0)
		*ms = 1; /* 0.0001 s is a (short) limit, not "none" */
	return 0;
}

static int add(const char **list, unsigned *n, const char *name, const char *arg)
{
	if (*n >= CLI_MAX_LIST) {
		fprintf(stderr, "tinyvmm: --%s: at most %d\n", name, CLI_MAX_LIST);
		return -1;
	}
	list[(*n)++] = arg;
	return 1;
}

static int split_pair(const char *name, const char *arg)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon == arg || !colon[1]) {
		fprintf(stderr, "tinyvmm: --%s %s: expected SRC:DST\n", name, arg);
		return -1;
	}
	return 0;
}

/* A variable name as a shell would take it: [A-Za-z_][A-Za-z0-9_]*. */
static int env_name_ok(const char *s, size_t n)
{
	if (!n || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* One NAME=VALUE, or NAME alone: then its value is ours, and a name we do
 * not have is left out (docker run -e NAME does the same), so a secret
 * need not appear on the command line. where: "-e" or "--env-file F:N". */
static int add_env(struct cli_job *j, const char *where, const char *arg)
{
	const char *eq = strchr(arg, '='), *val;
	size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
	char *kv;

	if (!env_name_ok(arg, n)) {
		fprintf(stderr, "tinyvmm: %s %s: expected NAME=VALUE or NAME (a variable name)\n", where, arg);
		return -1;
	}
	if (eq)
		return add(j->env, &j->nenv, "env", arg);
	if (!(val = getenv(arg)))
		return 1;
	if (asprintf(&kv, "%s=%s", arg, val) < 0) {
		fprintf(stderr, "tinyvmm: %s %s: out of memory\n", where, arg);
		return -1;
	}
	return add(j->env, &j->nenv, "env", kv); /* kv lives as long as the process */
}

/* --env-file: one NAME=VALUE or NAME per line; blank lines and lines
 * starting with # are skipped; no quoting (the value is the rest of the
 * line, as docker's --env-file). */
static int add_env_file(struct cli_job *j, const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL, where[4200];
	size_t cap = 0;
	unsigned lineno = 0;
	ssize_t n;
	int r = 1;

	if (!f) {
		fprintf(stderr, "tinyvmm: --env-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (r > 0 && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		if (!n || line[0] == '#')
			continue;
		snprintf(where, sizeof(where), "--env-file %s:%u:", path, lineno);
		char *copy = strdup(line);
		if (!copy) {
			fprintf(stderr, "tinyvmm: %s out of memory\n", where);
			r = -1;
			break;
		}
		r = add_env(j, where, copy);
	}
	free(line);
	fclose(f);
	return r < 0 ? -1 : 1;
}

int cli_job_option(struct cli_job *j, const char *name, const char *arg)
{
	if (!strcmp(name, "env"))
		return add_env(j, "-e", arg);
	if (!strcmp(name, "env-file"))
		return add_env_file(j, arg);
	if (!strcmp(name, "put") || !strcmp(name, "get")) {
		if (split_pair(name, arg))
			return -1;
		return name[0] == 'p' ? add(j->puts, &j->nput, name, arg) : add(j->gets, &j->nget, name, arg);
	}
	if (!strcmp(name, "workdir")) {
		j->workdir = arg;
		return 1;
	}
	if (!strcmp(name, "timeout"))
		return cli_job_seconds(name, arg, &j->timeout_ms) ? -1 : 1;
	if (!strcmp(name, "job-mem")) {
		if (cli_parse_size("--job-mem", arg, &j->mem_max))
			return -1;
		if (j->mem_max < TVM_JOB_MEM_MIN) {
			fprintf(stderr, "tinyvmm: --job-mem %s: at least 1M (a job needs some memory to start)\n", arg);
			return -1;
		}
		return 1;
	}
	if (!strcmp(name, "job-pids")) {
		if (cli_parse_u32("--job-pids", arg, &j->pids_max))
			return -1;
		if (!j->pids_max) {
			fprintf(stderr, "tinyvmm: --job-pids 0: at least 1 (the job itself)\n");
			return -1;
		}
		return 1;
	}
	return 0;
}

/* Whole file or stream into memory, at most cap bytes. */
static int slurp(int fd, size_t cap, uint8_t **out, size_t *len)
{
	size_t n = 0, size = 65536;
	uint8_t *buf = malloc(size);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;
		if (n == size) {
			uint8_t *nb;
			if (size >= cap) {
				free(buf);
				return -EFBIG;
			}
			size = size * 2 > cap ? cap : size * 2;
			if (!(nb = realloc(buf, size))) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		r = read(fd, buf + n, size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			free(buf);
			return -err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* The guest side of --put LOCAL:GUEST / --get GUEST:LOCAL (guest: its
 * first n bytes): an absolute path naming a file, not a directory. */
static int guest_path_ok(const char *flag, const char *arg, const char *guest, size_t n)
{
	if (guest[0] != '/' || guest[n - 1] == '/') {
		fprintf(stderr, "tinyvmm: --%s %s: the guest path '%.*s' must be absolute and name a file\n", flag, arg,
			(int)n, guest);
		return -1;
	}
	return 0;
}

int cli_job_check_puts(const struct cli_job *j)
{
	for (unsigned i = 0; i < j->nget; i++)
		if (guest_path_ok("get", j->gets[i], j->gets[i], (size_t)(strchr(j->gets[i], ':') - j->gets[i])))
			return EXIT_USAGE;
	for (unsigned i = 0; i < j->nput; i++) {
		const char *guest = strchr(j->puts[i], ':') + 1;
		if (guest_path_ok("put", j->puts[i], guest, strlen(guest)))
			return EXIT_USAGE;
	}
	for (unsigned i = 0; i < j->nget; i++) {
		const char *local = strchr(j->gets[i], ':') + 1;
		char dir[4096];

		struct stat st;

		/* Its folder must take the file, and it be no directory: else
		 * the job would run for nothing. */
		path_parent(local, dir, sizeof(dir));
		if (access(dir, W_OK | X_OK) < 0 || (stat(local, &st) == 0 && S_ISDIR(st.st_mode))) {
			char why[600];

			if (access(dir, W_OK | X_OK) == 0)
				snprintf(why, sizeof(why), "--get %.200s: %.200s is a directory (name a file)",
					 j->gets[i], local);
			else
				snprintf(why, sizeof(why), "--get %.200s: cannot write into %.200s: %s", j->gets[i],
					 dir, strerror(errno));
			fprintf(stderr, "tinyvmm: %s\n", why);
			cli_report_file(j->report, 1, i, 0, why); /* the entry says why, not "not attempted" */
			return EXIT_VM_FAILED;
		}
	}
	for (unsigned i = 0; i < j->nput; i++) {
		const char *colon = strchr(j->puts[i], ':');
		char local[4096];
		struct stat st;

		snprintf(local, sizeof(local), "%.*s", (int)(colon - j->puts[i]), j->puts[i]);
		const char *why = stat(local, &st) < 0 || access(local, R_OK) < 0 ? strerror(errno)
				  : S_ISDIR(st.st_mode)                           ? "is a directory (files only)"
										  : NULL;
		if (why) {
			char line[600];

			snprintf(line, sizeof(line), "--put %.300s: %s", local, why);
			fprintf(stderr, "tinyvmm: %s\n", line);
			cli_report_file(j->report, 0, i, 0, line); /* the entry says why, not "not attempted" */
			return EXIT_VM_FAILED;
		}
	}
	return 0;
}

/* One line for --put (get 0) or --get number i, said and kept for the
 * report: "--put SPEC: why", or with what, "--put WHAT: why". */
static void file_failed(struct cli_job *j, int get, unsigned i, const char *what, const char *fmt, ...)
{
	char msg[600], kept[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tinyvmm: --%s %s: %s\n", get ? "get" : "put",
		what  ? what
		: get ? j->gets[i]
		      : j->puts[i],
		msg);
	snprintf(kept, sizeof(kept), "%s%s%s", what ? what : "", what ? ": " : "", msg);
	cli_report_file(j->report, get, i, 0, kept);
}

static int put_files(struct cli_job *j, struct tvm_agent *a)
{
	for (unsigned i = 0; i < j->nput; i++) {
		char *local = strdup(j->puts[i]), *guest;
		struct stat st;
		uint8_t *data = NULL;
		size_t len = 0;
		struct tvm_err e = { 0 };
		int fd, r;

		if (!local) {
			file_failed(j, 0, i, NULL, "out of memory");
			return -1;
		}
		guest = strchr(local, ':');
		*guest++ = 0;
		fd = j->puts_open ? j->put_fd[i] : open(local, O_RDONLY | O_CLOEXEC);
		r = fd < 0 ? -errno : fstat(fd, &st) < 0 ? -errno : slurp(fd, FILE_CAP, &data, &len);
		if (fd >= 0)
			close(fd);
		if (j->puts_open)
			j->put_fd[i] = -1;
		if (r) {
			file_failed(j, 0, i, local, "%s", strerror(-r));
			free(local);
			return -1;
		}
		r = tvm_agent_put_file(a, guest, st.st_mode & 07777, data, len, &e);
		free(data);
		free(local);
		if (r) {
			file_failed(j, 0, i, NULL, "%s", e.msg);
			return -1;
		}
		cli_report_file(j->report, 0, i, len, NULL);
	}
	return 0;
}

int cli_job_open_puts(struct cli_job *j)
{
	for (unsigned i = 0; i < j->nput; i++) {
		char local[4096];

		snprintf(local, sizeof(local), "%.*s", (int)(strchr(j->puts[i], ':') - j->puts[i]), j->puts[i]);
		j->put_fd[i] = open(local, O_RDONLY | O_CLOEXEC);
		if (j->put_fd[i] < 0) {
			fprintf(stderr, "tinyvmm: --put %s: %s\n", local, strerror(errno));
			while (i--)
				close(j->put_fd[i]);
			return -1;
		}
	}
	j->puts_open = 1;
	return 0;
}

/* Written next to the target and renamed, so a failed copy never leaves
 * the user's file half written. */
static int write_local(const char *path, const void *data, size_t len)
{
	char tmp[4096];
	struct stat st;
	mode_t mode = umask(0);
	int fd, r = 0;

	/* The mode a plain create would give, or the replaced file's own:
	 * a 0600 file must not come back world-readable. */
	umask(mode);
	mode = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0666 & ~mode;
	if (snprintf(tmp, sizeof(tmp), "%s.tinyvmm-XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len && !r;) {
		ssize_t n = write(fd, (const uint8_t *)data + off, len - off);
		if (n < 0 && errno != EINTR)
			r = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (!r && fchmod(fd, mode) < 0)
		r = -errno;
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

static int get_files(struct cli_job *j, struct tvm_agent *a)
{
	int failed = 0;

	for (unsigned i = 0; i < j->nget; i++) {
		char *guest = strdup(j->gets[i]), *local, staged[4200];
		struct tvm_err e = { 0 };
		void *data;
		size_t len;
		int r;

		if (!guest) {
			file_failed(j, 1, i, NULL, "out of memory");
			failed = -1;
			continue;
		}
		local = strchr(guest, ':');
		*local++ = 0;
		if (j->get_stage) { /* jailed: moved to LOCAL from outside (cli_job_collect_gets) */
			snprintf(staged, sizeof(staged), "%s/get%u", j->get_stage, i);
			local = staged;
		}
		r = tvm_agent_get_file(a, guest, FILE_CAP, &data, &len, &e);
		if (r) {
			file_failed(j, 1, i, NULL, "%s", e.msg);
			failed = -1;
		} else if ((r = write_local(local, data, len))) {
			file_failed(j, 1, i, NULL, "writing %s: %s", local, strerror(-r));
			failed = -1;
		} else
			cli_report_file(j->report, 1, i, len, NULL);
		free(data); /* NULL after a failed get; also freed after a failed write */
		free(guest);
	}
	return failed;
}

int cli_move_staged(const char *staged, const char *target)
{
	int fd = open(staged, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), r;
	uint8_t *data = NULL;
	struct stat st;
	size_t len = 0;

	/* Written by the jailed process: only a regular file, within the cap. */
	if (fd < 0)
		return -errno;
	r = fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : slurp(fd, FILE_CAP, &data, &len);
	close(fd);
	if (!r)
		r = write_local(target, data, len);
	free(data);
	unlink(staged);
	return r;
}

int cli_job_collect_gets(struct cli_job *j, const char *host_stage)
{
	int failed = 0;

	for (unsigned i = 0; i < j->nget; i++) {
		const char *local = strchr(j->gets[i], ':') + 1;
		char staged[4200];
		int r;

		snprintf(staged, sizeof(staged), "%s/get%u", host_stage, i);
		r = cli_move_staged(staged, local);
		if (r && r != -ENOENT) {
			file_failed(j, 1, i, NULL, "writing %s: %s", local, strerror(-r));
			failed = -1;
		}
	}
	return failed;
}

/* The job's output: into the report, dropped (quiet), or to our stdout
 * and stderr as it comes. */
static void on_output(void *ctx, int stream, const void *buf, size_t len)
{
	const struct cli_job *j = ctx;

	if (j->report || j->quiet) {
		cli_report_output(j->report, stream, buf, len);
		return;
	}
	/* Short writes retried. */
	for (size_t off = 0; off < len;) {
		ssize_t n = write(stream, (const char *)buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

static int status_of(const struct tvm_job_result *r)
{
	if (r->timed_out)
		return EXIT_TIMED_OUT;
	return r->exit_code;
}

int cli_job_run(struct cli_job *j, struct tvm_agent *a)
{
	struct tvm_job job = {
		.argv = (const char *const *)j->argv,
		.env = j->env,
		.cwd = j->workdir,
		.uid = j->uid,
		.gid = j->gid,
		.timeout_ms = j->timeout_ms,
		.stdout_cap = j->output_cap,
		.stderr_cap = j->output_cap,
		.mem_max_bytes = j->mem_max,
		.pids_max = j->pids_max,
		.on_output = on_output,
		.ctx = j,
	};
	struct tvm_job_result res = { 0 };
	struct tvm_err e = { 0 };
	uint8_t *in = NULL;
	size_t in_len = 0;
	int r, status;

	cli_report_stage(j->report, CLI_ST_PUT);
	if (put_files(j, a))
		return EXIT_VM_FAILED;
	if (j->forward_stdin) {
		r = slurp(0, STDIN_CAP, &in, &in_len);
		if (r) {
			fprintf(stderr, "tinyvmm: stdin: %s\n", strerror(-r));
			return EXIT_VM_FAILED;
		}
		job.stdin_data = in;
		job.stdin_len = in_len;
	}
	cli_report_stage(j->report, CLI_ST_JOB);
	cli_report_job_times(j->report, 0);
	r = tvm_agent_exec(a, &job, &res, &e);
	free(in);
	if (r) {
		fprintf(stderr, "tinyvmm: job %s: %s\n", j->argv[0], e.msg);
		return r == -ENOENT                      ? EXIT_NOT_FOUND
		       : (r == -EACCES || r == -ENOEXEC) ? EXIT_CANNOT_RUN
							 : EXIT_VM_FAILED;
	}
	cli_report_job_times(j->report, 1);
	cli_report_result(j->report, &res);
	status = status_of(&res);
	/* After the host gave up on the guest, the connection only closes. */
	if (res.host_timed_out)
		fprintf(stderr,
			"tinyvmm: job %s: no result from the guest %llu ms after its --timeout: gave up on it\n",
			j->argv[0], (unsigned long long)TVM_JOB_HOST_GRACE_MS(j->timeout_ms));
	else {
		cli_report_stage(j->report, CLI_ST_GET);
		if (get_files(j, a) && status == 0)
			status = EXIT_VM_FAILED;
	}
	if (!j->report) {
		if (res.timed_out && !res.host_timed_out)
			fprintf(stderr, "tinyvmm: job %s: timed out after its --timeout of %.1f s (killed)\n",
				j->argv[0], j->timeout_ms / 1000.0);
		if (res.oom_killed)
			fprintf(stderr, "tinyvmm: job %s: a process of it was killed at its --job-mem limit\n",
				j->argv[0]);
		if (res.pids_limited)
			fprintf(stderr, "tinyvmm: job %s: a fork failed at its --job-pids limit\n", j->argv[0]);
		/* Said once, so a cut output is never mistaken for the whole. */
		if (res.stdout_truncated || res.stderr_truncated)
			fprintf(stderr, "tinyvmm: job output cut at %u bytes per stream (--output-cap):%s%s\n",
				j->output_cap ? j->output_cap : CLI_DEFAULT_OUTPUT_CAP,
				res.stdout_truncated ? " stdout" : "", res.stderr_truncated ? " stderr" : "");
	}
	return status;
}
