/* The jail (vmm/sandbox/jail.h): what it plans to show, the rlimits, the
 * privilege drop and Landlock (each in a forked child: they cannot be
 * undone), gc of jails whose owner is gone, and whole jails run as root:
 * what the body sees inside, what it can no longer do after the lockdown,
 * staged outputs published and the directory gone after. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit.h"
#include "vmm/core/err.h"
#include "vmm/sandbox/jail.h"
#include "vmm/sandbox/jail_impl.h"

#define JAIL_UID 64100
#define JAIL_GID 64101

static char tmp[64];

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/tinyvmm-test-jail-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void rm_rf(const char *path)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
	rm_rf(tmp);
}

/* path = tmp/name, a file of size bytes (sparse). */
static const char *make_file(char *path, size_t cap, const char *name, off_t size)
{
	int fd;

	snprintf(path, cap, "%s/%s", tmp, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
	return path;
}

static const struct jail_mount *find_mount(const struct jail *j, const char *path)
{
	for (unsigned i = 0; i < j->nm; i++)
		if (!strcmp(j->m[i].path, path))
			return &j->m[i];
	return NULL;
}

static struct jail *new_jail(void)
{
	char base[128];
	struct jail_opts o = { .uid = JAIL_UID, .gid = JAIL_GID, .dir = base };
	struct tvm_err e = { 0 };
	struct jail *j;

	snprintf(base, sizeof(base), "%s/jails", tmp);
	j = jail_new(&o, &e);
	ck_assert_msg(j != NULL, "%s", e.msg);
	return j;
}

static void base_config(struct tvm_config *c, char kernel[256], char image[256], char rw[256])
{
	tvm_config_init(c);
	c->kernel_path = make_file(kernel, 256, "vmlinux", 4096);
	c->drives[0] = (struct tvm_drive){ .path = make_file(image, 256, "base.ext4", (300 << 20) + 512), .cow = 1 };
	c->drives[1] = (struct tvm_drive){ .path = make_file(rw, 256, "data.img", 1 << 20) };
	c->nr_drives = 2;
	c->quirks = TVM_QUIRKS_AUTO;
}

START_TEST(plan_shows_each_file_at_its_path)
{
	char kernel[256], image[256], rw[256], snap[256], mem[256], real[4096], sock[256], ovl[256];
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j = new_jail();
	const char *snapshot = snap;
	const struct jail_mount *m;

	base_config(&c, kernel, image, rw);
	snprintf(snap, sizeof(snap), "%s/snap", tmp);
	ck_assert_int_eq(mkdir(snap, 0700), 0);
	make_file(mem, sizeof(mem), "snap/mem", 512 << 20);
	snprintf(ovl, sizeof(ovl), "%s/kept.ovl", tmp);
	c.drives[0].overlay_path = ovl;
	snprintf(sock, sizeof(sock), "%s/vm.sock", tmp);
	c.vsock_uds = sock;
	ck_assert_msg(jail_plan_vm(j, &c, &snapshot, NULL, &e) == 0, "%s", e.msg);

	ck_assert_ptr_nonnull(realpath(kernel, real));
	ck_assert_str_eq(c.kernel_path, real);
	ck_assert_ptr_nonnull(m = find_mount(j, real));
	ck_assert_str_eq(m->host, real);
	ck_assert_uint_eq(m->flags, 0); /* read-only file */
	ck_assert_ptr_nonnull(realpath(image, real));
	ck_assert_str_eq(c.drives[0].path, real);
	ck_assert_uint_eq(find_mount(j, real)->flags & JAIL_M_RW, 0); /* copy-on-write: never written */
	ck_assert_ptr_nonnull(realpath(rw, real));
	ck_assert_uint_eq(find_mount(j, real)->flags & JAIL_M_RW, JAIL_M_RW); /* written in place */
	ck_assert_ptr_nonnull(realpath(snap, real));
	ck_assert_str_eq(snapshot, real);
	ck_assert_uint_eq(find_mount(j, real)->flags, JAIL_M_DIR);
	/* The kept overlay: made in a stage beside its target, /run/overlay0 in the jail. */
	ck_assert_str_eq(c.drives[0].overlay_path, JAIL_RUN_DIR "/overlay0/kept.ovl");
	ck_assert_uint_eq(j->nst, 1);
	ck_assert_ptr_nonnull(realpath(tmp, real));
	strcat(real, "/kept.ovl");
	ck_assert_str_eq(j->st[0].target, real);
	m = &j->m[j->st[0].mount];
	ck_assert_str_eq(m->path, JAIL_RUN_DIR "/overlay0");
	ck_assert_uint_eq(m->flags, JAIL_M_DIR | JAIL_M_RW | JAIL_M_STAGE);
	ck_assert_ptr_nonnull(strstr(m->host, "/.tinyvmm-jail-"));
	/* The socket is the jail's; the user's path becomes a link to it. */
	ck_assert_str_eq(c.vsock_uds, JAIL_VSOCK_PATH);
	ck_assert_str_eq(j->link, sock);
	ck_assert_ptr_nonnull(find_mount(j, "/dev/kvm"));
	ck_assert_uint_eq(find_mount(j, "/dev/kvm")->flags, JAIL_M_DEV);
	ck_assert_ptr_nonnull(find_mount(j, "/dev/urandom"));
	ck_assert_ptr_null(find_mount(j, "/dev/net/tun")); /* no network */
	ck_assert_int_ne(c.quirks, TVM_QUIRKS_AUTO);
	/* FSIZE: the largest of the image (whole 4 KiB blocks), memory, snapshot memory. */
	ck_assert_uint_eq(j->fsize, 512ULL << 20);
	jail_free(j);
}
END_TEST

START_TEST(plan_sizes_and_devices)
{
	char kernel[256], image[256], rw[256];
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j = new_jail();

	base_config(&c, kernel, image, rw);
	c.net.enabled = 1;
	c.serial_out_fd = 7;
	ck_assert_msg(jail_plan_vm(j, &c, NULL, NULL, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(j->fsize, (300ULL << 20) + 4096); /* the image, rounded up to a block */
	ck_assert_ptr_nonnull(find_mount(j, "/dev/net/tun"));
	ck_assert_uint_eq(j->nkeep, 1);
	ck_assert_int_eq(j->keep[0], 7);
	jail_free(j);
}
END_TEST

/* jail_plan_vm on c with one thing changed must fail with code and a
 * message holding want. */
static void plan_fails(struct tvm_config *c, const char **snapshot, int code, const char *want)
{
	struct tvm_err e = { 0 };
	struct jail *j = new_jail();

	ck_assert_int_eq(jail_plan_vm(j, c, snapshot, NULL, &e), -code);
	ck_assert_msg(strstr(e.msg, want), "'%s' lacks '%s'", e.msg, want);
	ck_assert_ptr_null(strchr(e.msg, '\n'));
	jail_free(j);
}

START_TEST(plan_refusals_name_the_file)
{
	char kernel[256], image[256], rw[256], path[256];
	struct tvm_config c;
	const char *snapshot;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	base_config(&c, kernel, image, rw);
	c.kernel_path = "/nonexistent/vmlinux";
	plan_fails(&c, NULL, ENOENT, "jail: kernel /nonexistent/vmlinux: No such file");
	base_config(&c, kernel, image, rw);
	c.initrd_path = "/proc/self/status";
	plan_fails(&c, NULL, EINVAL, "under /proc");
	base_config(&c, kernel, image, rw);
	c.drives[0].overlay_path = rw; /* exists */
	plan_fails(&c, NULL, EEXIST, "a kept overlay is a new file");
	base_config(&c, kernel, image, rw);
	snapshot = "/tmp";
	plan_fails(&c, &snapshot, EINVAL, "the jail makes its own /tmp");
	/* A drive written in place inside a directory shown read-only. */
	base_config(&c, kernel, image, rw);
	snapshot = tmp;
	plan_fails(&c, &snapshot, EINVAL, "overlaps");
	/* A live socket at --vsock-uds is another VM's. */
	base_config(&c, kernel, image, rw);
	snprintf(path, sizeof(path), "%s/live.sock", tmp);
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	c.vsock_uds = path;
	plan_fails(&c, NULL, EADDRINUSE, "address in use");
	close(fd); /* now stale: replaced */
	base_config(&c, kernel, image, rw);
	c.vsock_uds = path;
	{
		struct tvm_err e = { 0 };
		struct jail *j = new_jail();

		ck_assert_msg(jail_plan_vm(j, &c, NULL, NULL, &e) == 0, "%s", e.msg);
		jail_free(j);
	}
}
END_TEST

START_TEST(plan_read_only_file_inside_shown_directory)
{
	char kernel[256], image[256], rw[256], snap[256], inside[256], real[4096];
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j = new_jail();
	const char *snapshot = snap, *p;
	unsigned nm;

	base_config(&c, kernel, image, rw);
	c.nr_drives = 1;
	snprintf(snap, sizeof(snap), "%s/snap", tmp);
	ck_assert_int_eq(mkdir(snap, 0700), 0);
	make_file(inside, sizeof(inside), "snap/input.txt", 10);
	ck_assert_msg(jail_plan_vm(j, &c, &snapshot, NULL, &e) == 0, "%s", e.msg);
	nm = j->nm;
	ck_assert_ptr_nonnull(p = jail_add_file(j, "--put", inside, &e));
	ck_assert_ptr_nonnull(realpath(inside, real));
	ck_assert_str_eq(p, real);
	ck_assert_uint_eq(j->nm, nm + 1);
	ck_assert_uint_eq(j->m[nm].flags, JAIL_M_SEEN); /* seen through the directory: not mounted again */
	jail_free(j);
	/* The other order: a read-only drive first, then its directory. */
	base_config(&c, kernel, image, rw);
	c.nr_drives = 1;
	c.drives[0].path = make_file(inside, sizeof(inside), "snap/disk.img", 4096);
	snapshot = snap;
	j = new_jail();
	ck_assert_msg(jail_plan_vm(j, &c, &snapshot, NULL, &e) == 0, "%s", e.msg);
	ck_assert_ptr_nonnull(realpath(inside, real));
	ck_assert_str_eq(c.drives[0].path, real);
	ck_assert_uint_eq(find_mount(j, real)->flags, JAIL_M_SEEN);
	jail_free(j);
}
END_TEST

/* Run fn in a forked child; returns its exit status (or 100 + signal). */
static int in_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(fn(arg));
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static int rlimits_child(void *arg)
{
	struct jail_limits l = { .nofile = 100, .fsize = 1 << 20, .nproc = 50, .core = 0 };
	char big[8192] = { 0 };
	struct rlimit r;
	int fd;

	(void)arg;
	if (jail_set_rlimits(&l, NULL))
		return 1;
	if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur != 100 || r.rlim_max != 100)
		return 2;
	if (getrlimit(RLIMIT_NPROC, &r) || r.rlim_cur != 50 || r.rlim_max != 50)
		return 3;
	if (getrlimit(RLIMIT_CORE, &r) || r.rlim_cur != 0 || r.rlim_max != 0)
		return 4;
	signal(SIGXFSZ, SIG_IGN);
	fd = open(tmp, O_TMPFILE | O_RDWR, 0600);
	if (fd < 0)
		return 5;
	if (pwrite(fd, big, sizeof(big), (1 << 20) - 4096) != 4096) /* cut at the limit */
		return 6;
	if (pwrite(fd, big, 1, 1 << 20) >= 0 || errno != EFBIG)
		return 7;
	return 0;
}

START_TEST(rlimits_are_set)
{
	ck_assert_int_eq(in_child(rlimits_child, NULL), 0);
}
END_TEST

static int drop_child(void *arg)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	const char *secret = arg;
	gid_t groups[4] = { 1234, 5678 };
	struct tvm_err e = { 0 };

	/* Something of each to drop: groups, an inheritable capability. */
	if (setgroups(2, groups) || syscall(SYS_capget, &h, d))
		return 8;
	d[0].inheritable = 1u << CAP_CHOWN;
	if (syscall(SYS_capset, &h, d))
		return 9;
	if (jail_drop_privileges(JAIL_UID, JAIL_GID, &e))
		return 1;
	if (getuid() != JAIL_UID || geteuid() != JAIL_UID || getgid() != JAIL_GID || getegid() != JAIL_GID)
		return 2;
	if (getgroups(4, groups) != 0)
		return 3;
	if (syscall(SYS_capget, &h, d) || d[0].effective || d[0].permitted || d[0].inheritable || d[1].effective ||
	    d[1].permitted || d[1].inheritable)
		return 4;
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0)
			return 5;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 6;
	if (setuid(0) == 0 || open(secret, O_RDONLY) >= 0 || errno != EACCES)
		return 7;
	return 0;
}

START_TEST(privileges_are_dropped)
{
	char secret[256];
	struct tvm_err e = { 0 };

	if (geteuid() != 0)
		return; /* needs root */
	make_file(secret, sizeof(secret), "secret", 10);
	ck_assert_int_eq(chmod(tmp, 0755), 0);
	ck_assert_int_eq(in_child(drop_child, secret), 0);
	ck_assert_int_eq(jail_drop_privileges(0, JAIL_GID, &e), -EINVAL); /* refused before anything */
	ck_assert_ptr_nonnull(strstr(e.msg, "jail: uid/gid"));
}
END_TEST

static int landlock_child(void *arg)
{
	char a[256], b[256], f[256], p[300];
	struct jail_ll_rule rules[2] = { { a, JAIL_LL_WRITE }, { f, JAIL_LL_READ } };
	int fd;

	(void)arg;
	snprintf(a, sizeof(a), "%s/a", tmp);
	snprintf(b, sizeof(b), "%s/b", tmp);
	snprintf(f, sizeof(f), "%s/f", tmp);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || jail_landlock(rules, 2, NULL))
		return 1;
	snprintf(p, sizeof(p), "%s/new", a);
	if ((fd = open(p, O_WRONLY | O_CREAT, 0600)) < 0)
		return 2;
	close(fd);
	if (unlink(p) < 0)
		return 3;
	snprintf(p, sizeof(p), "%s/dir", a);
	if (mkdir(p, 0700) == 0 || errno != EACCES) /* not granted */
		return 4;
	snprintf(p, sizeof(p), "%s/new", b);
	if (open(p, O_WRONLY | O_CREAT, 0600) >= 0 || errno != EACCES)
		return 5;
	snprintf(p, sizeof(p), "%s/old", b);
	if (open(p, O_RDONLY) >= 0 || errno != EACCES)
		return 6;
	if ((fd = open(f, O_RDONLY)) < 0)
		return 7;
	close(fd);
	if (open(f, O_WRONLY) >= 0 || errno != EACCES)
		return 8;
	if (jail_landlock_abi() >= 3 && (truncate(f, 0) == 0 || errno != EACCES))
		return 9; /* read-only: not truncated either */
	return 0;
}

START_TEST(landlock_limits_the_file_system)
{
	char p[256];

	if (!jail_landlock_abi())
		return; /* kernel without Landlock: jail_landlock does nothing */
	snprintf(p, sizeof(p), "%s/a", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/b", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	make_file(p, sizeof(p), "b/old", 1);
	make_file(p, sizeof(p), "f", 1);
	ck_assert_int_eq(in_child(landlock_child, NULL), 0);
}
END_TEST

START_TEST(parses_owner_and_stat)
{
	unsigned long long start;
	pid_t pid;

	ck_assert_int_eq(jail_parse_owner("1234 987654\n", &pid, &start), 0);
	ck_assert_int_eq(pid, 1234);
	ck_assert_uint_eq(start, 987654);
	ck_assert_int_eq(jail_parse_owner("1234\n", &pid, &start), -EINVAL);
	ck_assert_int_eq(jail_parse_owner("-5 1\n", &pid, &start), -EINVAL);
	ck_assert_int_eq(jail_parse_owner("12 x\n", &pid, &start), -EINVAL);
	/* The command name may hold spaces and parentheses. */
	ck_assert_int_eq(jail_parse_stat_start("42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
					       "5555 1000 10\n",
					       &start),
			 0);
	ck_assert_uint_eq(start, 5555);
	ck_assert_int_eq(jail_parse_stat_start("42 (a) S 1 2 3\n", &start), -EINVAL);
	ck_assert_int_eq(jail_owner_alive(getpid(), 0), 1);
}
END_TEST

/* base/name with an owner file "pid start" (none when pid is 0). */
static void fake_jail(const char *base, const char *name, pid_t pid, unsigned long long start)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", base, name);
	ck_assert_int_eq(mkdir(p, 0711), 0);
	snprintf(p, sizeof(p), "%s/%s/root", base, name);
	ck_assert_int_eq(mkdir(p, 0711), 0);
	snprintf(p, sizeof(p), "%s/%s/root/run", base, name);
	ck_assert_int_eq(mkdir(p, 0711), 0);
	if (!pid)
		return;
	snprintf(p, sizeof(p), "%s/%s/owner", base, name);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f, "%d %llu\n", (int)pid, start);
	fclose(f);
}

static unsigned removed_count;

static void count_removed(const char *dir)
{
	(void)dir;
	removed_count++;
}

static int exists(const char *fmt, const char *a, const char *b)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), fmt, a, b);
	return lstat(p, &st) == 0;
}

START_TEST(gc_removes_only_jails_whose_owner_is_gone)
{
	char base[256], p[512], q[512], name[64];
	unsigned long long start;
	pid_t dead = fork();
	struct tvm_err e = { 0 };
	FILE *f;

	if (dead == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
	{
		char stat[1024];
		FILE *s = fopen("/proc/self/stat", "r");

		ck_assert_ptr_nonnull(fgets(stat, sizeof(stat), s));
		fclose(s);
		ck_assert_int_eq(jail_parse_stat_start(stat, &start), 0);
	}
	snprintf(base, sizeof(base), "%s/jails", tmp);
	ck_assert_int_eq(mkdir(base, 0711), 0);
	fake_jail(base, "dead", dead, 0);
	fake_jail(base, "reused", getpid(), start + 1); /* our pid, another start: reused */
	fake_jail(base, "alive", getpid(), start);
	snprintf(name, sizeof(name), "%d-9", (int)getpid());
	fake_jail(base, name, 0, 0); /* no owner file yet: the pid in its name */
	snprintf(name, sizeof(name), "%d-3", (int)dead);
	fake_jail(base, name, 0, 0);
	snprintf(p, sizeof(p), "%s/other", base);
	ck_assert_int_eq(mkdir(p, 0700), 0); /* not a jail */
	/* What "dead" made outside: a link into it, a stage, and a link elsewhere. */
	snprintf(p, sizeof(p), "%s/vm.sock", tmp);
	snprintf(q, sizeof(q), "%s/dead/root/run/vsock", base);
	ck_assert_int_eq(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/.tinyvmm-jail-dead-0", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	make_file(q, sizeof(q), ".tinyvmm-jail-dead-0/half.ovl", 100);
	snprintf(p, sizeof(p), "%s/mine.sock", tmp);
	ck_assert_int_eq(symlink("/elsewhere", p), 0);
	/* Inside it, a link to a host file: removed, never followed. */
	make_file(q, sizeof(q), "victim", 5);
	snprintf(p, sizeof(p), "%s/dead/root/run/evil", base);
	ck_assert_int_eq(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/dead/extra", base);
	ck_assert_ptr_nonnull(f = fopen(p, "w"));
	fprintf(f, "link %s/vm.sock\nstage %s/.tinyvmm-jail-dead-0\nlink %s/mine.sock\nbogus line\n", tmp, tmp, tmp);
	fclose(f);

	removed_count = 0;
	ck_assert_int_eq(jail_gc(base, count_removed, &e), 3);
	ck_assert_uint_eq(removed_count, 3);
	ck_assert(!exists("%s/%s", base, "dead"));
	ck_assert(!exists("%s/%s", base, "reused"));
	snprintf(name, sizeof(name), "%d-3", (int)dead);
	ck_assert(!exists("%s/%s", base, name));
	ck_assert(exists("%s/%s", base, "alive"));
	snprintf(name, sizeof(name), "%d-9", (int)getpid());
	ck_assert(exists("%s/%s", base, name));
	ck_assert(exists("%s/%s", base, "other"));
	ck_assert(!exists("%s/%s", tmp, "vm.sock"));
	ck_assert(!exists("%s/%s", tmp, ".tinyvmm-jail-dead-0"));
	ck_assert(exists("%s/%s", tmp, "mine.sock")); /* not into that jail: not ours */
	ck_assert(exists("%s/%s", tmp, "victim"));
	ck_assert_int_eq(jail_gc(base, NULL, &e), 0);
	snprintf(p, sizeof(p), "%s/none", tmp);
	ck_assert_int_eq(jail_gc(p, NULL, &e), 0); /* no directory: nothing stale */
}
END_TEST

static int mount_child(void *arg)
{
	char p[256];
	int fd;

	(void)arg;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 1;
	snprintf(p, sizeof(p), "%s/x/m", tmp);
	if (mount("tmpfs", p, "tmpfs", 0, NULL))
		return 2;
	snprintf(p, sizeof(p), "%s/x/m/keep", tmp);
	if ((fd = open(p, O_WRONLY | O_CREAT, 0600)) < 0)
		return 3;
	close(fd);
	fd = open(tmp, O_RDONLY | O_DIRECTORY);
	if (jail_remove_tree(fd, "x") != -EXDEV)
		return 4;
	if (access(p, F_OK)) /* the mount's content is untouched */
		return 5;
	return 0;
}

/* A path from a cwd on another mount (the daemon's cwd is / of its own
 * view): the tree's own mount is its parent's, not the cwd's. */
static int cwd_child(void *arg)
{
	char p[256];

	(void)arg;
	if (chdir("/proc"))
		return 1;
	snprintf(p, sizeof(p), "%s/y", tmp);
	if (jail_remove_tree(AT_FDCWD, p) || !access(p, F_OK))
		return 2;
	snprintf(p, sizeof(p), "%s/z", tmp);
	if (jail_remove_path(p) || !access(p, F_OK))
		return 3;
	return jail_remove_path(p) == 0 && jail_remove_path("z") == -EINVAL ? 0 : 4; /* gone: done */
}

START_TEST(remove_tree_of_a_path_stays_on_its_mount)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/y", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/y/d", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/y/d/f", tmp);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/z", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(in_child(cwd_child, NULL), 0);
}
END_TEST

START_TEST(remove_tree_never_enters_a_mount)
{
	char p[256];

	if (geteuid() != 0)
		return;
	snprintf(p, sizeof(p), "%s/x", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/x/m", tmp);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(in_child(mount_child, NULL), 0);
}
END_TEST

/* ---- whole jails, as root ---- */

struct seen {
	const char *kernel;  /* a file shown in the jail */
	const char *overlay; /* written in the jail's stage */
	const char *out;     /* snapshot directory (in the jail) */
	int crash;
};

/* The body, in the jail: each check that fails returns its number. */
static int body(void *ctx, struct jail *j)
{
	struct seen *s = ctx;
	struct tvm_err e = { 0 };
	char host[64], p[4200];
	extern char **environ;
	int fd;

	if (s->crash) { /* a VMM bug: a fault kills even PID 1 */
		int *volatile bad = (int *)(uintptr_t)16;

		signal(SIGSEGV, SIG_DFL);
		*bad = 0;
	}
	if (getpid() != 1)
		return 10;
	if (environ && environ[0])
		return 11;
	if (gethostname(host, sizeof(host)) || strcmp(host, "tinyvmm"))
		return 12;
	if (access("/etc/passwd", F_OK) == 0 || access(s->kernel, R_OK) || access("/dev/kvm", F_OK))
		return 13;
	if (open(s->kernel, O_WRONLY) >= 0 || errno != EROFS) /* shown read-only, even to root */
		return 22;
	if (mkdir("/new", 0700) == 0 || errno != EROFS) /* so is the root */
		return 23;
	/* The old root is gone, not just out of sight: the classic chroot
	 * escape (root may chroot again) finds nothing. */
	if (!fork()) {
		if (chroot(JAIL_RUN_DIR) == 0)
			for (int i = 0; i < 64; i++)
				if (chdir(".."))
					break;
		_exit(chroot(".") == 0 && access("/etc/passwd", F_OK) == 0);
	}
	if (wait(&fd) < 0 || !WIFEXITED(fd) || WEXITSTATUS(fd))
		return 21;
	/* Nothing inherited but 0..2 (the life pipe is the jail's own). */
	for (fd = 3; fd < 64; fd++)
		if (fcntl(fd, F_GETFD) >= 0 && fd != j->life_fd)
			return 14;
	if (jail_lockdown(j, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 15;
	}
	if (getuid() != JAIL_UID || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 16;
	/* Changing uid cleared it: the VMM must still die with its parent. */
	if (prctl(PR_GET_PDEATHSIG, &fd, 0, 0, 0) || fd != SIGKILL)
		return 24;
	if (jail_landlock_abi() && (open(s->kernel, O_RDONLY) >= 0 || errno != EACCES))
		return 17; /* shown, but not reopened after the lockdown */
	if ((fd = open(JAIL_RUN_DIR "/staged", O_WRONLY | O_CREAT, 0600)) < 0)
		return 18;
	close(fd);
	if (s->overlay && ((fd = open(s->overlay, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0 || write(fd, "ov", 2) != 2))
		return 19;
	snprintf(p, sizeof(p), "%s/state", s->out ? s->out : "/");
	if (s->out && ((fd = open(p, O_WRONLY | O_CREAT, 0600)) < 0 || write(fd, "st", 2) != 2))
		return 20;
	return 7;
}

/* A jail for c with a snapshot output tmp/snap (*outp: its path in the
 * jail); base: where the jail is made. */
static struct jail *plan_with_out(struct tvm_config *c, char out[256], const char **outp, char base[PATH_MAX])
{
	struct tvm_err e = { 0 };
	struct jail *j;

	snprintf(out, 256, "%s/snap", tmp);
	ck_assert_int_eq(mkdir(out, 0700), 0);
	*outp = out;
	j = new_jail();
	snprintf(base, PATH_MAX, "%s", j->base);
	ck_assert_msg(jail_plan_vm(j, c, NULL, outp, &e) == 0, "%s", e.msg);
	return j;
}

static int jail_entries(const char *base)
{
	char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", base);
	return system(cmd) == 0 ? 0 : 1;
}

START_TEST(runs_a_body_jailed_and_cleans_up)
{
	char kernel[256], image[256], rw[256], ovl[256], out[256], p[512], base[PATH_MAX];
	struct seen s = { 0 };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j;
	const char *outp;
	struct stat st;

	if (geteuid() != 0)
		return;
	ck_assert_int_eq(chmod(tmp, 0755), 0); /* the jail uid reaches the stages */
	base_config(&c, kernel, image, rw);
	snprintf(ovl, sizeof(ovl), "%s/kept.ovl", tmp);
	c.drives[0].overlay_path = ovl;
	j = plan_with_out(&c, out, &outp, base);
	s.kernel = c.kernel_path;
	s.overlay = c.drives[0].overlay_path;
	s.out = outp;
	ck_assert_int_ge(open("/dev/null", O_RDONLY), 3); /* inherited: must not reach the jail */
	ck_assert_int_eq(jail_run(j, body, &s, &e), 7);
	ck_assert_int_eq(e.code, 0);
	ck_assert_int_eq(jail_finish(j, 1, &e), 0);
	jail_free(j);
	ck_assert_int_eq(jail_entries(base), 0); /* the jail is gone */
	ck_assert_int_eq(stat(ovl, &st), 0);     /* the kept overlay published */
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_int_eq((int)st.st_size, 2);
	snprintf(p, sizeof(p), "%s/state", out);
	ck_assert_int_eq(stat(p, &st), 0); /* the snapshot too */
	ck_assert_uint_eq(st.st_uid, geteuid());
	snprintf(p, sizeof(p), "ls -A '%s' | grep -q tinyvmm-jail", tmp);
	ck_assert_int_ne(system(p), 0); /* no stage left */
}
END_TEST

START_TEST(a_crash_is_reported_and_cleaned_and_a_failed_snapshot_not_published)
{
	char kernel[256], image[256], rw[256], out[256], p[512], base[PATH_MAX];
	struct seen s = { .crash = 1 };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j;
	const char *outp;

	if (geteuid() != 0)
		return;
	base_config(&c, kernel, image, rw);
	j = plan_with_out(&c, out, &outp, base);
	s.kernel = c.kernel_path;
	ck_assert_int_eq(jail_run(j, body, &s, &e), 128 + SIGSEGV);
	ck_assert_msg(strstr(e.msg, "killed by signal 11"), "%s", e.msg);
	ck_assert_int_eq(jail_finish(j, 0, &e), 0);
	jail_free(j);
	ck_assert_int_eq(jail_entries(base), 0);
	snprintf(p, sizeof(p), "%s/state", out);
	ck_assert_int_ne(access(p, F_OK), 0);
	ck_assert_int_eq(jail_entries(out), 0); /* its stage removed */
}
END_TEST

/* jail_on_start: the hook sees the child before it enters the jail (still
 * in our mount namespace) and may refuse, which ends the run unentered. */
struct start_seen {
	pid_t pid;
	int same_mnt_ns, refuse;
};

static int on_start(void *ctx, pid_t pid, struct tvm_err *e)
{
	struct start_seen *ss = ctx;
	char path[64], theirs[64] = "", ours[64] = "";

	ss->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (readlink(path, theirs, sizeof(theirs) - 1) > 0 && readlink("/proc/self/ns/mnt", ours, sizeof(ours) - 1) > 0)
		ss->same_mnt_ns = !strcmp(theirs, ours);
	return ss->refuse ? tvm_errf(e, EPERM, "cgroup: refused for the test") : 0;
}

static int quick_body(void *ctx, struct jail *j)
{
	(void)ctx;
	(void)j;
	return getpid() == 1 ? 5 : 6;
}

START_TEST(on_start_runs_before_the_child_enters)
{
	char kernel[256], image[256], rw[256];
	struct start_seen ss = { 0 };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j;

	if (geteuid() != 0)
		return;
	for (int refuse = 0; refuse < 2; refuse++) {
		ss = (struct start_seen){ .refuse = refuse };
		base_config(&c, kernel, image, rw);
		j = new_jail();
		ck_assert_msg(jail_plan_vm(j, &c, NULL, NULL, &e) == 0, "%s", e.msg);
		jail_on_start(j, on_start, &ss);
		if (!refuse) {
			ck_assert_int_eq(jail_run(j, quick_body, NULL, &e), 5);
		} else {
			ck_assert_int_eq(jail_run(j, quick_body, NULL, &e), -EPERM);
			ck_assert_str_eq(e.msg, "cgroup: refused for the test");
			ck_assert_int_ne(kill(ss.pid, 0), 0); /* killed and reaped */
		}
		ck_assert_int_gt(ss.pid, 0);
		ck_assert_msg(ss.same_mnt_ns, "the child had entered before on_start");
		ck_assert_int_eq(jail_finish(j, 0, &e), 0);
		jail_free(j);
		unlink(kernel);
		unlink(image);
		unlink(rw);
	}
}
END_TEST

START_TEST(a_step_that_fails_is_named)
{
	char kernel[256], image[256], rw[256], bad[256];
	struct seen s = { 0 };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j;

	if (geteuid() != 0)
		return;
	base_config(&c, kernel, image, rw);
	j = new_jail();
	j->o.netns = make_file(bad, sizeof(bad), "not-a-netns", 1);
	ck_assert_msg(jail_plan_vm(j, &c, NULL, NULL, &e) == 0, "%s", e.msg);
	s.kernel = c.kernel_path;
	ck_assert_int_eq(jail_run(j, body, &s, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "jail: namespaces: --netns"), "%s", e.msg);
	ck_assert_int_eq(jail_finish(j, 0, &e), 0);
	jail_free(j);
}
END_TEST

/* A file swapped for another between the plan and the jail (the window a
 * host user who owns its directory could use): the jail is refused, the
 * replaced file named, and nothing is left. */
START_TEST(a_file_replaced_after_the_plan_is_refused)
{
	char kernel[256], image[256], rw[256], other[256], base[PATH_MAX];
	struct seen s = { 0 };
	struct tvm_config c;
	struct tvm_err e = { 0 };
	struct jail *j;

	if (geteuid() != 0)
		return;
	base_config(&c, kernel, image, rw);
	j = new_jail();
	snprintf(base, sizeof(base), "%s", j->base);
	ck_assert_msg(jail_plan_vm(j, &c, NULL, NULL, &e) == 0, "%s", e.msg);
	make_file(other, sizeof(other), "other", 4096);
	ck_assert_int_eq(rename(other, kernel), 0);
	s.kernel = c.kernel_path;
	ck_assert_int_eq(jail_run(j, body, &s, &e), -ESTALE);
	ck_assert_msg(strstr(e.msg, "vmlinux is no longer the file that was checked"), "%s", e.msg);
	ck_assert_int_eq(jail_finish(j, 0, &e), 0);
	jail_free(j);
	ck_assert_int_eq(jail_entries(base), 0);
}
END_TEST

static int not_root_child(void *arg)
{
	struct jail *j = arg;
	struct tvm_err e = { 0 };

	if (setresuid(65534, 65534, 65534))
		return 1;
	return jail_run(j, body, NULL, &e) == -EPERM && strstr(e.msg, "needs root") ? 0 : 2;
}

START_TEST(needs_root)
{
	struct jail *j = new_jail();

	if (geteuid() == 0)
		ck_assert_int_eq(in_child(not_root_child, j), 0);
	jail_free(j);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jail");
	TCase *plan = tcase_create("plan"), *lock = tcase_create("lockdown"), *gc = tcase_create("gc"),
	      *run = tcase_create("run");

	/* A VM's jail shows /dev/kvm: a machine without one cannot plan it. */
	bool kvm = access("/dev/kvm", F_OK) == 0;

	if (!kvm)
		printf("test_jail: SKIPPED: the plan tests and the run tests that plan a VM's jail: no /dev/kvm "
		       "on this machine\n");
	tcase_add_checked_fixture(plan, setup, teardown);
	if (kvm) {
		tcase_add_test(plan, plan_shows_each_file_at_its_path);
		tcase_add_test(plan, plan_sizes_and_devices);
		tcase_add_test(plan, plan_refusals_name_the_file);
		tcase_add_test(plan, plan_read_only_file_inside_shown_directory);
	}
	tcase_add_checked_fixture(lock, setup, teardown);
	tcase_add_test(lock, rlimits_are_set);
	tcase_add_test(lock, privileges_are_dropped);
	tcase_add_test(lock, landlock_limits_the_file_system);
	tcase_add_checked_fixture(gc, setup, teardown);
	tcase_add_test(gc, parses_owner_and_stat);
	tcase_add_test(gc, gc_removes_only_jails_whose_owner_is_gone);
	tcase_add_test(gc, remove_tree_never_enters_a_mount);
	tcase_add_test(gc, remove_tree_of_a_path_stays_on_its_mount);
	tcase_add_checked_fixture(run, setup, teardown);
	if (kvm) {
		tcase_add_test(run, runs_a_body_jailed_and_cleans_up);
		tcase_add_test(run, a_crash_is_reported_and_cleaned_and_a_failed_snapshot_not_published);
		tcase_add_test(run, a_step_that_fails_is_named);
		tcase_add_test(run, on_start_runs_before_the_child_enters);
		tcase_add_test(run, a_file_replaced_after_the_plan_is_refused);
	}
	tcase_add_test(run, needs_root);
	suite_add_tcase(s, plan);
	suite_add_tcase(s, lock);
	suite_add_tcase(s, gc);
	suite_add_tcase(s, run);
	return tvm_run_suite(s);
}
