/* Suites that run a second time jailed (TINYVMM_IT_JAIL=1, the host walls
 * issue: "the jobs and snapshot suites also pass under --jail"): their VMs
 * are `./tinyvmm run --jail` processes in jails under a directory of the
 * suite's own, reached through --vsock-uds, and that directory must be
 * empty once they have ended. */
#ifndef TVM_IT_JAIL_H
#define TVM_IT_JAIL_H

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>

#include "tests/integration/it_common.h"

struct it_jail {
	int on;
	char dir[64]; /* --jail-dir */
	char opt[80]; /* "--jail-dir=<dir>" */
};

/* Jailed when TINYVMM_IT_JAIL is 1: then the jails' directory is made. */
static inline void it_jail_init(struct it_jail *j, const char *suite)
{
	const char *s = getenv("TINYVMM_IT_JAIL");

	j->on = s && !strcmp(s, "1");
	if (!j->on)
		return;
	snprintf(j->dir, sizeof(j->dir), "/tmp/tinyvmm-it-%s-jails-%d", suite, (int)getpid());
	ck_assert_int_eq(mkdir(j->dir, 0755), 0);
	snprintf(j->opt, sizeof(j->opt), "--jail-dir=%s", j->dir);
	printf("%s: every VM jailed (tinyvmm run --jail, jails in %s)\n", suite, j->dir);
	fflush(stdout);
}

/* The options of a jailed VM that boots the test guest (the in-process
 * suites' kernel and command line), up to --rootfs, whose value follows. */
#define IT_JAIL_BOOT(j)                                                           \
	"--jail", (j)->opt, "--kernel", (char *)it_guest("vmlinux"), "--cmdline", \
		"console=ttyS0 reboot=k panic=-1 quiet", "--rootfs"

/* ./tinyvmm with argv (argv[0] ignored), stdin and stdout /dev/null,
 * stderr ours (its errors in the test's log), no other descriptor of ours
 * (check's own message file among them: a VMM that outlives setup must not
 * hold it); returns its pid. The child makes no check call: check (not
 * forking, it_run_suite) records every assertion in a file the child
 * shares, and a record of the child's there garbles the parent's.
 * -1 with errno when fork failed; no check call (threads may use it). */
static inline pid_t it_jail_try_spawn(char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		alarm(1800);
		execv("./tinyvmm", argv);
		_exit(98);
	}
	return pid;
}

/* it_jail_try_spawn(), asserting that the fork worked. */
static inline pid_t it_jail_spawn(char *const argv[])
{
	pid_t pid = it_jail_try_spawn(argv);

	ck_assert_int_ge(pid, 0);
	return pid;
}

/* Send sig (0: none) to *pid and reap it; its exit status, or 1000 +
 * the signal that killed it; -1 when there was none. */
static inline int it_jail_end(pid_t *pid, int sig)
{
	int st;

	if (*pid <= 0)
		return -1;
	if (sig)
		kill(*pid, sig);
	ck_assert_int_eq(waitpid(*pid, &st, 0), *pid);
	*pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* Every jail is gone (the VMs have ended): the directory is removed. */
static inline void it_jail_done(struct it_jail *j)
{
	struct dirent *de;
	DIR *d;

	if (!j->on)
		return;
	d = opendir(j->dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		ck_assert_msg(de->d_name[0] == '.', "%s/%s is left after its VM ended", j->dir, de->d_name);
	closedir(d);
	ck_assert_int_eq(rmdir(j->dir), 0);
}

#endif
