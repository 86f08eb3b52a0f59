/* The daemon's way to a sandbox's VMM (vmm/serve/serve_vsock.c): the
 * socket itself, or through the jail parent's link into the jail's /run,
 * never a link a (taken-over) VMM put there to another sandbox's socket. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vmm/serve/serve_vsock.c"
#include "tests/unit.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char state[] = "/tmp/tvm-vsock-XXXXXX";

static int listener(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

/* Open the socket of the sandbox "a" and connect through the path given:
 * 0 connected, else vmm_socket_open's -errno (msg: its line). */
static int reach(char *msg, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tvm_err e = { 0 };
	char dir[128], uds[160], path[64];
	int fd, c, r;

	snprintf(dir, sizeof(dir), "%s/sandboxes/a", state);
	snprintf(uds, sizeof(uds), "%s/vsock.sock", dir);
	fd = vmm_socket_open(dir, uds, path, sizeof(path), &e);
	snprintf(msg, cap, "%s", e.msg);
	if (fd < 0)
		return fd;
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	r = connect(c, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	close(c);
	close(fd);
	return r;
}

static void p(char *out, size_t cap, const char *rel)
{
	snprintf(out, cap, "%s/%s", state, rel);
}

START_TEST(only_its_own_socket_is_reached)
{
	char a[160], b[160], jail[160], js[200], msg[512], want[600];
	int la, lb, lj;

	ck_assert_ptr_nonnull(mkdtemp(state));
	p(a, sizeof(a), "sandboxes/a");
	p(b, sizeof(b), "sandboxes/b");
	p(jail, sizeof(jail), "jail/j1/root/run");
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s %s %s", a, b, jail);
	ck_assert_int_eq(system(cmd), 0);

	/* nothing there yet: not found (the caller waits) */
	ck_assert_int_eq(reach(msg, sizeof(msg)), -ENOENT);
	/* an unjailed VMM's own socket */
	p(a, sizeof(a), "sandboxes/a/vsock.sock");
	la = listener(a);
	ck_assert_msg(reach(msg, sizeof(msg)) == 0, "%s", msg);
	close(la);
	unlink(a);
	/* a jailed one's, through the jail parent's link */
	snprintf(js, sizeof(js), "%s/vsock", jail);
	lj = listener(js);
	ck_assert_int_eq(symlink(js, a), 0);
	ck_assert_msg(reach(msg, sizeof(msg)) == 0, "%s", msg);
	/* the VMM put a link to sandbox b's socket in its /run: refused */
	p(b, sizeof(b), "sandboxes/b/vsock.sock");
	lb = listener(b);
	close(lj);
	unlink(js);
	ck_assert_int_eq(symlink(b, js), 0);
	ck_assert_int_eq(reach(msg, sizeof(msg)), -EPERM);
	snprintf(want, sizeof(want), "vsock socket %s: not a socket (its VMM put something else there): refused", js);
	ck_assert_str_eq(msg, want);
	/* a link elsewhere than a jail's /run (made by no jail parent) */
	unlink(a);
	ck_assert_int_eq(symlink(b, a), 0);
	ck_assert_int_eq(reach(msg, sizeof(msg)), -EPERM);
	snprintf(want, sizeof(want), "vsock socket %s: a link to %s, not into a jail's /run: refused", a, b);
	ck_assert_str_eq(msg, want);
	unlink(a);
	snprintf(cmd, sizeof(cmd), "%s/jail/../root/run/vsock", state);
	ck_assert_int_eq(symlink(cmd, a), 0);
	ck_assert_int_eq(reach(msg, sizeof(msg)), -EPERM);
	close(lb);
	/* a state dir whose own path has a "/sandboxes/" in it: its jails are
	 * beside its last one (helper-62: the first was taken) */
	{
		char dir[256], js2[256], uds2[300], path[64];
		struct tvm_err e = { 0 };
		int fd;

		snprintf(dir, sizeof(dir), "%s/sandboxes/st/sandboxes/a", state);
		snprintf(js2, sizeof(js2), "%s/sandboxes/st/jail/j2/root/run", state);
		snprintf(cmd, sizeof(cmd), "mkdir -p %s %s", dir, js2);
		ck_assert_int_eq(system(cmd), 0);
		strcat(js2, "/vsock");
		lj = listener(js2);
		snprintf(uds2, sizeof(uds2), "%s/vsock.sock", dir);
		ck_assert_int_eq(symlink(js2, uds2), 0);
		fd = vmm_socket_open(dir, uds2, path, sizeof(path), &e);
		ck_assert_msg(fd >= 0, "%s", e.msg);
		close(fd);
		close(lj);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve_vsock");
	TCase *tc = tcase_create("vsock");

	tcase_add_test(tc, only_its_own_socket_is_reached);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
