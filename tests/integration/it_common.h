/* Helpers for the integration tests: they boot the real guest built by
 * tools/build-guest.sh (directory in $TINYVMM_GUEST_DIR) and run the
 * tinyvmm binary from the repository root. No wall-clock assertions: the
 * guest kernel is emulated on the CI host and takes tens of seconds. */
#ifndef TVM_IT_COMMON_H
#define TVM_IT_COMMON_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define IT_MARKER "TINYVMM-TEST-INIT: ok"

/* Path of a guest artifact (vmlinux, bzImage, initramfs.cpio.gz), in a
 * static buffer per call site's lifetime (copy it if needed across calls). */
static inline const char *it_guest(const char *name)
{
	static char buf[4][512];
	static int next;
	const char *dir = getenv("TINYVMM_GUEST_DIR");
	char *p = buf[next++ % 4];

	ck_assert_msg(dir && *dir, "TINYVMM_GUEST_DIR is not set (run through make integration)");
	snprintf(p, 512, "%s/%s", dir, name);
	return p;
}

/* Whole file as a NUL-terminated malloc'd string (caller frees). */
static inline char *it_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = calloc(1, (size_t)n + 1);
	ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return s;
}

/* A fresh temp file path (created empty). */
static inline void it_tmp(char *buf, size_t len, const char *tag)
{
	int fd;

	snprintf(buf, len, "/tmp/tinyvmm-it-%s-XXXXXX", tag);
	fd = mkstemp(buf);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* Run the suite in this process (VM threads do not survive fork) with
 * verbose output; returns the exit status (0 = all passed). */
static inline int it_run_suite(Suite *su)
{
	SRunner *sr = srunner_create(su);
	int failed;

	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}

/* Job output collected per stream (1 stdout, 2 stderr), NUL-terminated. */
struct it_out {
	char *buf[3];
	size_t len[3];
};

/* struct tvm_job on_output callback; ctx is a struct it_out. */
static inline void it_collect(void *ctx, int stream, const void *buf, size_t len)
{
	struct it_out *o = ctx;
	char *nb = realloc(o->buf[stream], o->len[stream] + len + 1);

	ck_assert_ptr_nonnull(nb);
	memcpy(nb + o->len[stream], buf, len);
	o->len[stream] += len;
	nb[o->len[stream]] = 0;
	o->buf[stream] = nb;
}

static inline const char *it_str(const struct it_out *o, int stream)
{
	return o->buf[stream] ? o->buf[stream] : "";
}

static inline void it_out_free(struct it_out *o)
{
	free(o->buf[1]);
	free(o->buf[2]);
	memset(o, 0, sizeof(*o));
}

/* Run the program bin with argv (NULL-terminated, argv[0] ignored); stdout
 * and stderr go to the given files, stdin is /dev/null; with alarm_s > 0 a
 * run longer than that many seconds ends with SIGALRM (the alarm survives
 * exec). Returns the exit status, or 1000 + signal number when it was
 * killed. */
static inline int it_run_bin(const char *bin, char *const argv[], const char *out, const char *err, unsigned alarm_s)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) { /* no check call here: see it_jail_spawn */
		if (!freopen("/dev/null", "r", stdin) || !freopen(out, "w", stdout) || !freopen(err, "w", stderr))
			_exit(99);
		alarm(alarm_s);
		execv(bin, argv);
		_exit(98);
	}
	ck_assert_int_ge(pid, 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* it_run_bin of ./tinyvmm. */
static inline int it_run_cli(char *const argv[], const char *out, const char *err, unsigned alarm_s)
{
	return it_run_bin("./tinyvmm", argv, out, err, alarm_s);
}

#endif
