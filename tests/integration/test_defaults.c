/* `tinyvmm run -- CMD` with no other flag (issue 11): the kernel and base
 * image are found where a build or install puts them, the first run makes
 * a template snapshot and later runs restore it; -e NAME and --env-file;
 * exec right after a VM starts; a console VM's --ttl. The data directory
 * is a temporary one holding links to the guest under test, the template
 * cache a fresh one, so nothing of an earlier run is reused. No
 * wall-clock asserts: the times are printed for the notes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/integration/it_common.h"

static char data_dir[64], cache_dir[64], out[128], err[128];

static void rm_rf(const char *path)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	char link[128];
	const char *rootfs = getenv("TINYVMM_ROOTFS");

	ck_assert_msg(rootfs, "TINYVMM_ROOTFS is not set (run through make integration)");
	snprintf(data_dir, sizeof(data_dir), "/tmp/tinyvmm-it-data-XXXXXX");
	snprintf(cache_dir, sizeof(cache_dir), "/tmp/tinyvmm-it-cache-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(data_dir));
	ck_assert_ptr_nonnull(mkdtemp(cache_dir));
	snprintf(link, sizeof(link), "%s/vmlinux", data_dir);
	ck_assert_int_eq(symlink(it_guest("vmlinux"), link), 0);
	snprintf(link, sizeof(link), "%s/rootfs.ext4", data_dir);
	ck_assert_int_eq(symlink(rootfs, link), 0);
	setenv("TINYVMM_DATA_DIR", data_dir, 1);
	setenv("TINYVMM_CACHE", cache_dir, 1);
	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
}

static void teardown(void)
{
	rm_rf(data_dir);
	rm_rf(cache_dir);
	unlink(out);
	unlink(err);
}

/* ./tinyvmm ARGS... (NULL-terminated); stdout and stderr in *o, *e. */
static int cli(char **o, char **e, const char *const *args)
{
	char *argv[32] = { "tinyvmm" };
	int n = 1, st;

	while (*args)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	st = it_run_cli(argv, out, err, 900);
	*o = it_slurp(out);
	*e = it_slurp(err);
	return st;
}

#define CLI(o, e, ...) cli(o, e, (const char *const[]){ __VA_ARGS__, NULL })

/* The integer after "key": in a --json object; -1 when absent. */
static long json_num(const char *json, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(json, k);
	return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

START_TEST(zero_flag_run_twice_second_restores)
{
	char *o, *e;
	int st;

	st = CLI(&o, &e, "run", "--json", "--", "python3", "-c", "print(6*7)");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_msg(strstr(o, "\"stdout\":\"42\\n\""), "stdout: %s", o);
	ck_assert_msg(strstr(o, "\"started\":\"restore\""), "first run: %s", o);
	ck_assert_msg(strstr(o, "\"template_made\":true"), "first run made no template: %s", o);
	ck_assert_msg(strstr(e, "make a template snapshot"), "stderr: %s", e);
	printf("first run (boot + template + restore): host_total_ms %ld\n", json_num(o, "host_total_ms"));
	fflush(stdout); /* not again in the next run's child */
	free(o);
	free(e);

	st = CLI(&o, &e, "run", "--json", "--", "python3", "-c", "print(6*7)");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_msg(strstr(o, "\"stdout\":\"42\\n\""), "stdout: %s", o);
	ck_assert_msg(strstr(o, "\"started\":\"restore\""), "second run: %s", o);
	ck_assert_msg(strstr(o, "\"template_made\":false"), "second run made a template again: %s", o);
	ck_assert_msg(!strstr(e, "template"), "stderr: %s", e);
	printf("second run (restore): host_total_ms %ld\n", json_num(o, "host_total_ms"));
	fflush(stdout);
	free(o);
	free(e);

	/* A run killed while saving a template leaves <key>.tmp-PID: the
	 * next run that makes a template removes it, also under another key
	 * (an older version's, never made again: "aaaa", and "cccc" with no
	 * lock file) unless a run holds that key's lock ("bbbb", held by
	 * flock(1) meanwhile). */
	{
		char cmd[1024], left[256] = "";
		FILE *p;

		snprintf(
			cmd, sizeof(cmd),
			"cd %s/templates && k=$(ls | grep -v '\\.' | head -1) && [ -n \"$k\" ] && rm -rf \"$k\" && "
			"for d in \"$k\" aaaa bbbb cccc; do mkdir \"$d.tmp-999999\" && touch \"$d.tmp-999999/mem\" || exit 1; "
			"done && touch aaaa.lock && { flock bbbb.lock sleep 600 >/dev/null 2>&1 & echo $! > held.pid; } && "
			"for i in $(seq 100); do flock -n bbbb.lock true || exit 0; sleep 0.1; done; exit 1",
			cache_dir);
		ck_assert_int_eq(system(cmd), 0);
		st = CLI(&o, &e, "run", "--json", "--", "true");
		snprintf(cmd, sizeof(cmd), "cd %s/templates && ls -d *.tmp-* 2>/dev/null | tr '\\n' ' '", cache_dir);
		p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		if (!fgets(left, sizeof(left), p))
			left[0] = 0;
		pclose(p);
		snprintf(cmd, sizeof(cmd),
			 "cd %s/templates && pkill -P $(cat held.pid); kill $(cat held.pid); "
			 "rm -rf held.pid aaaa.lock bbbb.lock bbbb.tmp-999999",
			 cache_dir);
		if (system(cmd) != 0)
			printf("cleanup of the held lock: %s failed\n", cmd);
		ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
		ck_assert_msg(strstr(o, "\"template_made\":true"), "the template was not made again: %s", o);
		ck_assert_msg(!strcmp(left, "bbbb.tmp-999999 "),
			      "template directories left: \"%s\" (only the held "
			      "key's expected)",
			      left);
		free(o);
		free(e);
	}

	/* --no-snapshot boots cold, and says so. */
	st = CLI(&o, &e, "run", "--json", "--no-snapshot", "--", "true");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_msg(strstr(o, "\"started\":\"boot\",\"snapshot\":null"), "cold run: %s", o);
	printf("--no-snapshot run (boot): host_total_ms %ld\n", json_num(o, "host_total_ms"));
	fflush(stdout);
	free(o);
	free(e);
}
END_TEST

/* -e NAME takes our value (the secret is not on the command line); a name
 * we do not have is left out; --env-file likewise. */
START_TEST(env_from_ours_and_from_a_file)
{
	char *o, *e, envs[128];
	int fd, st;

	setenv("TVM_IT_SECRET", "s3cr3t value", 1);
	unsetenv("TVM_IT_UNSET");
	it_tmp(envs, sizeof(envs), "envs");
	fd = open(envs, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "# a comment\nFROM_FILE=a b=c\n\nTVM_IT_SECRET\n", 43), 43);
	close(fd);
	st = CLI(&o, &e, "run", "-e", "TVM_IT_SECRET", "-e", "TVM_IT_UNSET", "--", "sh", "-c",
		 "echo \"[$TVM_IT_SECRET][${TVM_IT_UNSET-unset}]\"");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_str_eq(o, "[s3cr3t value][unset]\n");
	free(o);
	free(e);
	st = CLI(&o, &e, "run", "--env-file", envs, "--", "sh", "-c", "echo \"[$FROM_FILE][$TVM_IT_SECRET]\"");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_str_eq(o, "[a b=c][s3cr3t value]\n");
	free(o);
	free(e);
	unlink(envs);
}
END_TEST

/* The default sandbox: HOME and cwd are the unprivileged user's home, and
 * / fills the 2 GiB copy-on-write drive (larger than the base image),
 * grown by the agent at boot. */
START_TEST(home_and_default_disk_size)
{
	char *o, *e;
	long kib = 0;
	int st;

	st = CLI(&o, &e, "run", "--", "sh", "-c", "echo $HOME; pwd; df -kP / | awk 'NR == 2 {print $2}'");
	ck_assert_msg(st == 0, "status %d, stderr: %s", st, e);
	ck_assert_msg(!strncmp(o, "/home/sandbox\n/home/sandbox\n", 28), "stdout: %s", o);
	kib = strtol(o + 28, NULL, 10);
	printf("default sandbox: / is %ld KiB\n", kib);
	fflush(stdout);
	ck_assert_msg(kib > 1900000 && kib <= 2097152, "/ is %ld KiB, want about 2 GiB: %s", kib, o);
	free(o);
	free(e);
}
END_TEST

/* README: exec waits while the guest still boots (it used to give up
 * after 10 s with "no answer to CONNECT 1024"); a VM whose backend went
 * away ends after --idle-timeout (issue 11). */
START_TEST(exec_right_after_start_waits_for_the_guest)
{
	char sock[64], *o, *e;
	pid_t vm;
	int st;

	snprintf(sock, sizeof(sock), "/tmp/tinyvmm-it-exec-%d.sock", getpid());
	vm = fork();
	if (vm == 0) { /* no check call here: see it_jail_spawn */
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execl("./tinyvmm", "tinyvmm", "run", "--no-snapshot", "--vsock-uds", sock, "--idle-timeout", "3",
		      "--ttl", "600", (char *)NULL);
		_exit(98);
	}
	ck_assert_int_ge(vm, 0);
	st = CLI(&o, &e, "exec", "--vsock-uds", sock, "--", "sh", "-c", "sleep 5; echo ok");
	ck_assert_msg(st == 0, "exec status %d, stderr: %s", st, e);
	ck_assert_str_eq(o, "ok\n");
	free(o);
	free(e);
	/* Nobody connects again: --idle-timeout ends the VM, a clean end.
	 * Before it, neither the boot (exec's tries, each refused in a few
	 * ms until the agent listens: an idle VM if only open connections
	 * counted) nor the 5 s job, longer than the idle time, was idle. */
	ck_assert_int_eq(waitpid(vm, &st, 0), vm);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "VM wait status 0x%x (124: its --ttl)", st);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

/* A console VM that hits --ttl: status 124 and a line saying so (it was
 * "guest failed"). */
START_TEST(console_vm_ttl_is_124)
{
	char *o, *e;
	int st = CLI(&o, &e, "run", "--kernel", it_guest("vmlinux"), "--initrd", it_guest("initramfs.cpio"),
		     "--serial-out", "/dev/null", "--ttl", "0.5");

	ck_assert_msg(st == 124, "status %d, stderr: %s", st, e);
	ck_assert_msg(strstr(e, "tinyvmm: VM stopped: its --ttl of 0.5 s expired\n"), "stderr: %s", e);
	ck_assert_msg(!strstr(e, "guest failed"), "stderr: %s", e);
	free(o);
	free(e);
}
END_TEST

/* --die-with-parent: a backend killed with SIGKILL takes its VM along. */
START_TEST(die_with_parent)
{
	int pipefd[2], st, status = 0;
	pid_t parent, vmm = 0;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(pipefd), 0);
	parent = fork();
	if (parent == 0) { /* no check call here: see it_jail_spawn */
		pid_t child = fork();
		if (child == 0) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			execl("./tinyvmm", "tinyvmm", "run", "--die-with-parent", "--no-snapshot", "--ttl", "600", "--",
			      "sleep", "600", (char *)NULL);
			_exit(98);
		}
		if (write(pipefd[1], &child, sizeof(child)) != sizeof(child))
			_exit(97);
		pause();
		_exit(0);
	}
	ck_assert_int_ge(parent, 0);
	ck_assert_int_eq(read(pipefd[0], &vmm, sizeof(vmm)), sizeof(vmm));
	sleep(2); /* let it get past its prctl */
	kill(parent, SIGKILL);
	waitpid(parent, NULL, 0);
	/* We are its subreaper: the orphaned VMM is ours to wait for
	 * (bounded: 60 s, then it is killed and the test fails). */
	for (st = 0; st < 600; st++) {
		pid_t r = waitpid(vmm, &status, WNOHANG);
		if (r == vmm)
			break;
		usleep(100000);
	}
	if (st == 600) {
		kill(vmm, SIGKILL);
		waitpid(vmm, NULL, 0);
	}
	ck_assert_msg(st < 600, "tinyvmm %d still ran 60 s after its parent died", (int)vmm);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM, "tinyvmm ended with wait status 0x%x",
		      status);
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("defaults");
	TCase *tc = tcase_create("defaults");

	tcase_set_timeout(tc, 3600);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, console_vm_ttl_is_124);
	tcase_add_test(tc, zero_flag_run_twice_second_restores);
	tcase_add_test(tc, env_from_ours_and_from_a_file);
	tcase_add_test(tc, home_and_default_disk_size);
	tcase_add_test(tc, die_with_parent);
	tcase_add_test(tc, exec_right_after_start_waits_for_the_guest);
	suite_add_tcase(s, tc);
	return it_run_suite(s);
}
