/* The daemon's walls (vmm/serve/serve_walls.c): in a forked child that
 * puts them on as tinyvmm serve does, what a daemon taken over by a client
 * could try. It writes and reads beneath its state dir only (not even a
 * removal beside its socket), reads /proc but no other host file, as root
 * sees no other path at all (a named socket outside included), cannot open another process's memory,
 * write /proc/sys or reach an abstract socket, and signals no process (a
 * VMM's signal is the helper's: PRIV_KILL). Each step a child exit
 * status. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/serve/serve_walls.c"
#include "tests/unit.h"

static char state[] = "/tmp/tvm-walls-state-XXXXXX", sock_dir[] = "/tmp/tvm-walls-sock-XXXXXX",
	    outside[] = "/tmp/tvm-walls-out-XXXXXX";

static int abstract_listener(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "tvm-walls-%d", (int)getpid());
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	return fd;
}

static int named_listener(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	return fd;
}

/* The child's steps: 0 all as expected, else 10 + the step that was not.
 * A path outside is refused by Landlock (EACCES) or, as root, absent from
 * the daemon's own view (ENOENT). */
static int as_the_daemon(pid_t parent, int abi)
{
	int refused = geteuid() == 0 ? ENOENT : EACCES;
	char p[256], q[256];
	int fd;

	/* its state dir: files, directories, links across them, renames */
	snprintf(p, sizeof(p), "%s/sandboxes", state);
	if (mkdir(p, 0700))
		return 10;
	snprintf(p, sizeof(p), "%s/sandboxes/a", state);
	snprintf(q, sizeof(q), "%s/b", state);
	if (mkdir(p, 0700) || mkdir(q, 0700))
		return 11;
	snprintf(p, sizeof(p), "%s/sandboxes/a/f", state);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0 || write(fd, "x", 1) != 1)
		return 12;
	close(fd);
	snprintf(q, sizeof(q), "%s/b/f", state);
	if (linkat(AT_FDCWD, p, AT_FDCWD, q, 0) || unlink(p))
		return 13;
	snprintf(p, sizeof(p), "%s/b2", state);
	snprintf(q, sizeof(q), "%s/b", state);
	if (rename(q, p))
		return 14;
	/* reads /proc (a VMM's start time and command line) and its state
	 * dir, no other host file; the socket's directory: nothing (the
	 * helper removes the socket at its stop), not even a removal */
	snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)parent);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 15;
	close(fd);
	snprintf(q, sizeof(q), "%s/b2/f", state);
	if ((fd = open(q, O_RDONLY | O_CLOEXEC)) < 0)
		return 23;
	close(fd);
	if (open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != refused)
		return 24;
	snprintf(p, sizeof(p), "%s/victim", outside);
	if (open(p, O_RDONLY | O_CLOEXEC) >= 0 || errno != refused || opendir(outside))
		return 25;
	snprintf(p, sizeof(p), "%s/api.sock", sock_dir);
	if (unlink(p) == 0 || errno != refused)
		return 16;
	snprintf(p, sizeof(p), "%s/new", sock_dir);
	if (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != refused)
		return 17;
	/* nothing elsewhere */
	snprintf(p, sizeof(p), "%s/planted", outside);
	if (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0755) >= 0 || errno != refused)
		return 18;
	snprintf(p, sizeof(p), "%s/victim", outside);
	if (open(p, O_WRONLY | O_CLOEXEC) >= 0 || unlink(p) == 0 || rename(p, "/tmp/tvm-walls-moved") == 0)
		return 19;
	/* as root: the capabilities it needs for other users' files in its
	 * state dir (CHOWN, DAC_OVERRIDE, FOWNER) and no others (not CAP_SYS_PTRACE: another root
	 * process's /proc/PID/root stays out of reach even without Landlock) */
	if (geteuid() == 0) {
		char st[4096];
		ssize_t n;
		const char *cap;

		if ((fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) < 0 ||
		    (n = read(fd, st, sizeof(st) - 1)) <= 0)
			return 28;
		close(fd);
		st[n] = 0;
		if (!(cap = strstr(st, "CapEff:\t")) || strncmp(cap + 8, "000000000000000b\n", 17) ||
		    !(cap = strstr(st, "CapBnd:\t")) || strncmp(cap + 8, "000000000000000b\n", 17))
			return 29;
	}
	/* its VMMs' jails are read-only to it (root trusts what is there) */
	snprintf(p, sizeof(p), "%s/jail/planted", state);
	if (geteuid() == 0 && (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EROFS ||
			       mkdir(p, 0700) == 0 || errno != EROFS))
		return 27;
	/* a named socket outside (a container runtime's): in its own view
	 * (root) it does not exist; Landlock alone cannot refuse a connect */
	if (geteuid() == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%.60s/runtime.sock", outside);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno != ENOENT)
			return 26;
		close(fd);
	}
	if (open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC) >= 0)
		return 20;
	/* another process's memory (a root daemon could write the helper's) */
	snprintf(p, sizeof(p), "/proc/%d/mem", (int)parent);
	if (open(p, O_RDONLY | O_CLOEXEC) >= 0)
		return 21;
	/* an abstract socket outside (ABI 6 and later) */
	if (abi >= 6) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "tvm-walls-%d", (int)parent);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 22;
		close(fd);
	}
	return 0;
}

static int signal_parent(pid_t parent)
{
	kill(parent, 0);
	return 0;
}

static int look_out_of_fds(pid_t parent)
{
	while (open("/proc/self/stat", O_RDONLY) >= 0)
		;
	return errno == EMFILE && jail_owner_alive(parent, 0) == 1 ? 0 : 3;
}

/* fn(parent) in a forked child behind the daemon's walls c (no core
 * file: SIGSYS would write one): the child's wait status. */
static int walled(const struct srv_cfg *c, int (*fn)(pid_t), pid_t parent)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct tvm_err e = { 0 };
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		if (srv_walls(c, &e))
			_exit(2);
		_exit(fn(parent));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(the_daemon_writes_its_state_dir_only)
{
	struct srv_cfg c = { .seccomp = TVM_SECCOMP_LOG };
	char p[256];
	int status, lfd, nfd, fd;
	pid_t parent = getpid(), pid;
	int abi = jail_landlock_abi();

	if (abi == 0) {
		printf("test_serve_walls: SKIPPED: no Landlock on this kernel\n");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(state));
	ck_assert_ptr_nonnull(mkdtemp(sock_dir));
	ck_assert_ptr_nonnull(mkdtemp(outside));
	snprintf(c.state_dir, sizeof(c.state_dir), "%s", state);
	snprintf(p, sizeof(p), "%s/jail", state);
	ck_assert_int_eq(mkdir(p, 0700), 0); /* as srv_state_init makes it */
	snprintf(c.socket_path, sizeof(c.socket_path), "%s/api.sock", sock_dir);
	ck_assert_int_ge(fd = open(c.socket_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/victim", outside);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600), 0);
	close(fd);
	lfd = abstract_listener();
	snprintf(p, sizeof(p), "%s/runtime.sock", outside);
	nfd = named_listener(p);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct tvm_err e = { 0 };

		if (srv_walls(&c, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			_exit(2);
		}
		_exit(as_the_daemon(parent, abi));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x: step %d", status,
		      WIFEXITED(status) ? WEXITSTATUS(status) - 10 : -1);
	/* no signal to any process, not even one that does nothing (kill 0) */
	c.seccomp = TVM_SECCOMP_KILL;
	status = walled(&c, signal_parent, parent);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS, "status 0x%x", status);
	/* its liveness look at a VMM when out of fds: no kill(0) fallback */
	status = walled(&c, look_out_of_fds, parent);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
	close(lfd);
	close(nfd);
	snprintf(p, sizeof(p), "rm -rf %s %s %s", state, sock_dir, outside);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

/* --seccomp off: no walls at all, Landlock included. */
START_TEST(off_is_no_walls)
{
	struct srv_cfg c = { .seccomp = TVM_SECCOMP_OFF };
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char p[] = "/tmp/tvm-walls-off-XXXXXX";
		int fd;

		snprintf(c.state_dir, sizeof(c.state_dir), "/nonexistent");
		if (srv_walls(&c, NULL) || (fd = mkstemp(p)) < 0)
			_exit(1);
		unlink(p);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve_walls");
	TCase *tc = tcase_create("walls");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, the_daemon_writes_its_state_dir_only);
	tcase_add_test(tc, off_is_no_walls);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
