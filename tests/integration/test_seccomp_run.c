/* The tinyvmm binary's seccomp filters on real runs (vmm/sandbox/seccomp.h):
 * every thread of a VMM running a job is confined, and so is every thread of
 * the child process a run makes its template in; the debug mode's
 * line and exit status come from build/tinyvmm-seccomp-test, whose event
 * loop calls what its filter forbids (TVM_SECCOMP_SELFTEST; the release
 * binary cannot). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>

#include "tests/integration/it_common.h"
#include "vmm/core/tvm_types.h"

#define SELFTEST_BIN "build/tinyvmm-seccomp-test"

static char out[128], err[128];

static void setup(void)
{
	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
}

static void teardown(void)
{
	unlink(out);
	unlink(err);
}

/* bin run --kernel K --rootfs R --no-snapshot EXTRA... (NULL-terminated);
 * stderr in *e. */
static int run_vm(const char *bin, char **e, const char *const *extra)
{
	char *argv[32] = { "tinyvmm",      "run",
			   "--kernel",     (char *)it_guest("vmlinux"),
			   "--rootfs",     getenv("TINYVMM_ROOTFS"),
			   "--no-snapshot" };
	int n = 7, st;

	ck_assert_msg(argv[5], "TINYVMM_ROOTFS is not set (run through make integration)");
	while (*extra)
		argv[n++] = (char *)*extra++;
	argv[n] = NULL;
	st = it_run_bin(bin, argv, out, err, 900);
	*e = it_slurp(err);
	return st;
}

#define RUN(bin, e, ...) run_vm(bin, e, (const char *const[]){ __VA_ARGS__, NULL })

/* "Name:\tvalue" of /proc/<pid>/task/<tid>/status, or -1. */
static long status_field(const char *path, const char *name)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t n = strlen(name);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

START_TEST(every_thread_is_confined_while_a_job_runs)
{
	const char *rootfs = getenv("TINYVMM_ROOTFS");
	char line[256], dir[64], path[sizeof(dir) + 256 + 8];
	int pipefd[2], st, threads = 0;
	struct dirent *de;
	FILE *f;
	DIR *d;
	pid_t pid;

	ck_assert_msg(rootfs, "TINYVMM_ROOTFS is not set (run through make integration)");
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	if (pid == 0) { /* no check call here: see it_jail_spawn */
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		alarm(900);
		execl("./tinyvmm", "tinyvmm", "run", "--kernel", it_guest("vmlinux"), "--rootfs", rootfs,
		      "--no-snapshot", "--cpus", "2", "--", "sh", "-c", "echo started; sleep 10; echo done",
		      (char *)NULL);
		_exit(98);
	}
	ck_assert_int_ge(pid, 0);
	close(pipefd[1]);
	f = fdopen(pipefd[0], "r");
	ck_assert_ptr_nonnull(f);
	/* The job's first line came through the main thread's agent client:
	 * every thread exists and has put its filter on. */
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_str_eq(line, "started\n");
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/status", dir, de->d_name);
		/* 2: SECCOMP_MODE_FILTER */
		ck_assert_msg(status_field(path, "Seccomp") == 2, "thread %s of tinyvmm: Seccomp %ld", de->d_name,
			      status_field(path, "Seccomp"));
		ck_assert_msg(status_field(path, "NoNewPrivs") == 1, "thread %s: NoNewPrivs %ld", de->d_name,
			      status_field(path, "NoNewPrivs"));
		threads++;
	}
	closedir(d);
	/* main, the signal waiter, the event loop, two vCPUs */
	ck_assert_int_ge(threads, 5);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_str_eq(line, "done\n");
	fclose(f);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status 0x%x", st);
}
END_TEST

/* Threads of process pid (-1 when it is gone); confined: how many of them
 * have a seccomp filter. */
static int threads_of(pid_t pid, int *confined)
{
	char dir[64], path[sizeof(dir) + 256 + 8];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		return -1;
	*confined = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/status", dir, de->d_name);
		*confined += status_field(path, "Seccomp") == 2;
		n++;
	}
	closedir(d);
	return n;
}

/* A run that makes its template first: that VM runs in a child process of
 * tinyvmm (while it does, tinyvmm itself is one thread), and every thread
 * of that child ends up confined, its main thread (the agent client of the
 * warm-up) included. Sampled while the template is made: that takes tens
 * of seconds here, about one on real KVM. */
START_TEST(template_is_made_in_a_confined_child)
{
	const char *rootfs = getenv("TINYVMM_ROOTFS");
	char cache[64], children[64], cmd[128];
	int st = 0, seen = 0, parent_threads = 1;
	pid_t pid, done = 0;

	ck_assert_msg(rootfs, "TINYVMM_ROOTFS is not set (run through make integration)");
	snprintf(cache, sizeof(cache), "/tmp/tinyvmm-it-tcache-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(cache));
	pid = fork();
	if (pid == 0) { /* no check call here: see it_jail_spawn */
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		setenv("TINYVMM_CACHE", cache, 1);
		alarm(900);
		execl("./tinyvmm", "tinyvmm", "run", "--kernel", it_guest("vmlinux"), "--rootfs", rootfs, "--", "true",
		      (char *)NULL);
		_exit(98);
	}
	ck_assert_int_ge(pid, 0);
	snprintf(children, sizeof(children), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	while (!done) {
		FILE *f = fopen(children, "r");
		int child, confined, n, mine;

		while (f && fscanf(f, "%d", &child) == 1) {
			n = threads_of(child, &confined);
			mine = threads_of(pid, &(int){ 0 });
			/* main, the event loop, a vCPU: the template's VM runs */
			if (n >= 3 && confined == n)
				seen = 1;
			if (n >= 3 && mine > parent_threads)
				parent_threads = mine;
		}
		if (f)
			fclose(f);
		done = waitpid(pid, &st, WNOHANG);
		ck_assert_int_ge(done, 0);
		usleep(10000);
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status 0x%x", st);
	ck_assert_msg(seen, "no child of tinyvmm ran the template with every thread confined");
	ck_assert_int_eq(parent_threads, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(log_mode_names_the_thread_and_the_call)
{
	char *e;
	int st = RUN(SELFTEST_BIN, &e, "--seccomp", "log", "--", "true");

	ck_assert_msg(st == TVM_SECCOMP_EXIT, "status %d, stderr: %s", st, e);
	ck_assert_msg(strstr(e, "tinyvmm: seccomp: the event loop thread made a forbidden system call: openat (257)\n"),
		      "stderr: %s", e);
	free(e);
}
END_TEST

START_TEST(kill_mode_kills_the_process)
{
	char *e;
	int st = RUN(SELFTEST_BIN, &e, "--", "true"); /* the default: --seccomp kill */

	ck_assert_msg(st == 1000 + SIGSYS, "status %d, stderr: %s", st, e);
	ck_assert_msg(!strstr(e, "seccomp"), "stderr: %s", e);
	free(e);
}
END_TEST

/* Without filters the self-test does nothing; the release binary has none:
 * both run a console VM until its --ttl (exit status 124). */
START_TEST(no_selftest_without_filters_or_in_the_release_binary)
{
	char *e;
	int st = RUN(SELFTEST_BIN, &e, "--no-seccomp", "--ttl", "1", "--serial-out", "/dev/null");

	ck_assert_msg(st == 124, "status %d, stderr: %s", st, e);
	free(e);
	st = RUN("./tinyvmm", &e, "--seccomp", "log", "--ttl", "1", "--serial-out", "/dev/null");
	ck_assert_msg(st == 124, "status %d, stderr: %s", st, e);
	ck_assert_msg(!strstr(e, "seccomp"), "stderr: %s", e);
	free(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seccomp_run");
	TCase *tc = tcase_create("cli");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 1800);
	tcase_add_test(tc, log_mode_names_the_thread_and_the_call);
	tcase_add_test(tc, kill_mode_kills_the_process);
	tcase_add_test(tc, no_selftest_without_filters_or_in_the_release_binary);
	tcase_add_test(tc, every_thread_is_confined_while_a_job_runs);
	tcase_add_test(tc, template_is_made_in_a_confined_child);
	suite_add_tcase(s, tc);
	return it_run_suite(s);
}
