/* `tinyvmm run --jail` on the real guest (vmm/sandbox/jail.h): while a job
 * runs, every thread of the jailed VMM has no new privileges, a uid other
 * than 0 and no capabilities, its root is the jail and its mount namespace
 * not the host's, and no descriptor of it names a host file the jail does
 * not show; the job's output and status are right, its --vsock-uds socket
 * answers the host (`tinyvmm exec`), and the jail is gone after. A VMM
 * killed with SIGKILL is cleaned by the process outside it; when that one
 * is killed too, `tinyvmm gc` removes what was left. A snapshot made
 * jailed restores jailed, with --put, --get and --metrics, and so does a
 * diff of it made jailed (--diff-from). Needs root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>

#include "tests/integration/it_common.h"

#define WAIT_S 1800 /* a first run makes the template snapshot: minutes here */
/* The job: say it runs, then wait for a go from `tinyvmm exec`. */
#define HOLD_JOB "echo ready; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo done; exit 5"

static char dir[64], base[128], sock[128];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-it-jail-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	snprintf(base, sizeof(base), "%s/jails", dir);
	snprintf(sock, sizeof(sock), "%s/vm.sock", dir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* ./tinyvmm with argv, every standard stream a pipe (no host file among
 * its descriptors); returns the pid, *out and *err the read ends. */
static pid_t spawn(char *const argv[], int *out, int *err)
{
	int in[2], o[2], e[2];
	pid_t pid;

	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(o), 0);
	ck_assert_int_eq(pipe(e), 0);
	pid = fork();
	if (pid == 0) { /* no check call in the child: see it_jail_spawn */
		dup2(in[0], 0);
		dup2(o[1], 1);
		dup2(e[1], 2);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		alarm(WAIT_S);
		execv("./tinyvmm", argv);
		_exit(98);
	}
	ck_assert_int_ge(pid, 0);
	close(in[0]);
	close(in[1]);
	close(o[1]);
	close(e[1]);
	*out = o[0];
	*err = e[0];
	return pid;
}

struct buf {
	char s[65536];
	size_t n;
};

/* Read what is there from fd into b; returns 0 at EOF. */
static int drain(int fd, struct buf *b)
{
	ssize_t n = read(fd, b->s + b->n, sizeof(b->s) - 1 - b->n);

	if (n > 0) {
		b->n += (size_t)n;
		b->s[b->n] = 0;
	}
	return n > 0 || (n < 0 && errno == EINTR);
}

/* Read both streams until out holds want (want NULL: until both end). */
static void read_until(int out, int err, struct buf *o, struct buf *e, const char *want)
{
	int open_out = 1, open_err = 1;
	time_t end = time(NULL) + WAIT_S;

	while ((want ? !strstr(o->s, want) : open_out || open_err) && time(NULL) < end) {
		struct pollfd p[2] = { { .fd = open_out ? out : -1, .events = POLLIN },
				       { .fd = open_err ? err : -1, .events = POLLIN } };

		ck_assert_int_ge(poll(p, 2, 1000), 0);
		if (p[0].revents)
			open_out = drain(out, o);
		if (p[1].revents)
			open_err = drain(err, e);
		ck_assert_msg(!want || open_out, "stdout ended before '%s'; stderr: %s", want, e->s);
	}
	ck_assert_msg(!want || strstr(o->s, want), "no '%s' in time; stderr: %s", want, e->s);
}

/* The jailed VMM: the child of the tinyvmm process (the one left once the
 * job runs). */
static pid_t vmm_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) && !found) {
		char p[300], s[1024], *c;
		FILE *f;
		int ppid;

		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		if (fgets(s, sizeof(s), f) && (c = strrchr(s, ')')) && sscanf(c + 2, "%*c %d", &ppid) == 1 &&
		    ppid == parent)
			found = atoi(de->d_name);
		fclose(f);
	}
	closedir(d);
	ck_assert_msg(found > 0, "no child of %d", (int)parent);
	return found;
}

/* The one jail under base: its root directory. */
static void the_jail(char *root, size_t cap)
{
	DIR *d = opendir(base);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(root, cap, "%s/%.64s/root", base, de->d_name);
			n++;
		}
	closedir(d);
	ck_assert_int_eq(n, 1);
}

static int jails_left(void)
{
	DIR *d = opendir(base);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A /proc file whole (its size says 0): NUL-terminated, caller frees. */
static char *read_proc(const char *path)
{
	char *s = calloc(1, 16384);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	while ((n = read(fd, s + len, 16383 - (size_t)len)) > 0)
		len += n;
	close(fd);
	return s;
}

static const char *field(const char *status, const char *name)
{
	const char *p = strstr(status, name);

	ck_assert_msg(p, "no %s in %s", name, status);
	return p + strlen(name);
}

/* Every thread: no new privileges, seccomp filtering, not uid 0, no
 * effective capabilities. Returns how many threads. */
static int check_threads(pid_t pid)
{
	char p[128];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(p));
	while ((de = readdir(d))) {
		char path[300], *st;
		unsigned uid[4];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, de->d_name);
		st = read_proc(path);
		ck_assert_msg(!strncmp(field(st, "\nNoNewPrivs:"), "\t1\n", 3), "thread %s: %s", de->d_name, st);
		ck_assert_msg(!strncmp(field(st, "\nSeccomp:"), "\t2\n", 3), "thread %s: %s", de->d_name, st);
		ck_assert_msg(!strncmp(field(st, "\nCapEff:"), "\t0000000000000000\n", 18), "thread %s: %s", de->d_name,
			      st);
		ck_assert_int_eq(sscanf(field(st, "\nUid:"), "%u %u %u %u", &uid[0], &uid[1], &uid[2], &uid[3]), 4);
		for (int i = 0; i < 4; i++)
			ck_assert_msg(uid[i] == 64100, "thread %s: uid %u", de->d_name, uid[i]);
		free(st);
		n++;
	}
	closedir(d);
	return n;
}

/* Each descriptor that names a file names one the jail shows: the same
 * file is at that path under /proc/PID/root (a deleted one: its directory
 * is). Sockets, pipes and anonymous inodes name no file. */
static void check_fds(pid_t pid)
{
	char p[300], link[4096], in[4200];
	struct dirent *de;
	DIR *d;

	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(p));
	while ((de = readdir(d))) {
		struct stat a, b;
		ssize_t n;
		char *del;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/fd/%s", (int)pid, de->d_name);
		n = readlink(p, link, sizeof(link) - 1);
		if (n <= 0)
			continue; /* closed meanwhile */
		link[n] = 0;
		if (link[0] != '/')
			continue;
		if ((del = strstr(link, " (deleted)"))) {
			*del = 0;
			*strrchr(link, '/') = 0;
			snprintf(in, sizeof(in), "/proc/%d/root%s", (int)pid, link);
			ck_assert_msg(stat(in, &b) == 0, "fd %s: deleted file in %s, not in the jail", de->d_name,
				      link);
			continue;
		}
		snprintf(in, sizeof(in), "/proc/%d/root%s", (int)pid, link);
		ck_assert_int_eq(stat(p, &a), 0);
		ck_assert_msg(stat(in, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino,
			      "fd %s: %s is a host file the jail does not show", de->d_name, link);
	}
	closedir(d);
}

static void check_jailed(pid_t vmm)
{
	char root[256], p[64], ns[2][128];
	struct stat a, b;
	ssize_t n;

	printf("jailed VMM pid %d: %d threads checked\n", (int)vmm, check_threads(vmm));
	fflush(stdout);
	the_jail(root, sizeof(root));
	snprintf(p, sizeof(p), "/proc/%d/root", (int)vmm);
	ck_assert_int_eq(stat(p, &a), 0);
	ck_assert_int_eq(stat(root, &b), 0);
	ck_assert_msg(a.st_dev == b.st_dev && a.st_ino == b.st_ino, "the VMM's root is not %s", root);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)vmm);
	ck_assert_int_gt(n = readlink(p, ns[0], sizeof(ns[0]) - 1), 0);
	ns[0][n] = 0;
	ck_assert_int_gt(n = readlink("/proc/self/ns/mnt", ns[1], sizeof(ns[1]) - 1), 0);
	ns[1][n] = 0;
	ck_assert_str_ne(ns[0], ns[1]);
	check_fds(vmm);
}

static pid_t start_held(int *out, int *err, struct buf *o, struct buf *e)
{
	char *argv[] = { "tinyvmm",
			 "run",
			 "--jail",
			 "--jail-dir",
			 base,
			 "--kernel",
			 (char *)it_guest("vmlinux"),
			 "--rootfs",
			 getenv("TINYVMM_ROOTFS"),
			 "--vsock-uds",
			 sock,
			 "--ttl", /* a failed test leaves no VM behind for long */
			 "1800",
			 "--",
			 "sh",
			 "-c",
			 HOLD_JOB,
			 NULL };
	pid_t pid = spawn(argv, out, err);

	read_until(*out, *err, o, e, "ready\n");
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* ./tinyvmm with argv to its end: its output in *o and *e, its status. */
static int run_whole(char *const argv[], struct buf *o, struct buf *e)
{
	int out, err;
	pid_t pid = spawn(argv, &out, &err);

	read_until(out, err, o, e, NULL);
	close(out);
	close(err);
	return wait_status(pid);
}

START_TEST(jailed_job_is_confined_and_cleaned)
{
	static struct buf o, e, xo, xe;
	char *go[] = { "tinyvmm", "exec", "--vsock-uds", sock, "--", "touch", "/tmp/go", NULL };
	int out, err, st;
	struct stat lst;
	pid_t tvm, vmm;

	tvm = start_held(&out, &err, &o, &e);
	vmm = vmm_of(tvm);
	check_jailed(vmm);
	/* The socket is the jail's; the host reaches it at --vsock-uds. */
	ck_assert_int_eq(lstat(sock, &lst), 0);
	ck_assert(S_ISLNK(lst.st_mode));
	ck_assert_msg(run_whole(go, &xo, &xe) == 0, "exec: %s", xe.s);
	read_until(out, err, &o, &e, NULL);
	st = wait_status(tvm);
	ck_assert_msg(st == 5, "status %d, stderr: %s", st, e.s);
	ck_assert_str_eq(o.s, "ready\ndone\n");
	ck_assert_int_eq(jails_left(), 0);
	ck_assert_int_ne(lstat(sock, &lst), 0); /* the link went with the jail */
	close(out);
	close(err);
}
END_TEST

/* SIGKILL to the jailed VMM: the process outside cleans up. */
START_TEST(killed_vmm_is_cleaned_by_its_parent)
{
	static struct buf o, e;
	int out, err, st;
	pid_t tvm = start_held(&out, &err, &o, &e);

	ck_assert_int_eq(kill(vmm_of(tvm), SIGKILL), 0);
	read_until(out, err, &o, &e, NULL);
	st = wait_status(tvm);
	ck_assert_msg(st == 128 + SIGKILL, "status %d, stderr: %s", st, e.s);
	ck_assert_msg(strstr(e.s, "killed by signal 9"), "stderr: %s", e.s);
	ck_assert_int_eq(jails_left(), 0);
	close(out);
	close(err);
}
END_TEST

/* SIGKILL to tinyvmm itself: the VMM follows it (parent-death signal),
 * the jail stays until `tinyvmm gc`. */
START_TEST(gc_removes_what_a_killed_tinyvmm_left)
{
	static struct buf o, e, go, ge;
	char *gc[] = { "tinyvmm", "gc", "--jail-dir", base, NULL };
	int out, err;
	pid_t tvm = start_held(&out, &err, &o, &e), vmm = vmm_of(tvm);
	char p[64];
	struct stat lst;

	ck_assert_int_eq(kill(tvm, SIGKILL), 0);
	ck_assert_int_eq(wait_status(tvm), 1000 + SIGKILL);
	snprintf(p, sizeof(p), "/proc/%d", (int)vmm);
	for (int i = 0; i < 600 && access(p, F_OK) == 0; i++)
		usleep(100000);
	ck_assert_msg(access(p, F_OK) != 0, "the jailed VMM outlived tinyvmm");
	ck_assert_int_eq(jails_left(), 1);
	ck_assert_int_eq(lstat(sock, &lst), 0);
	ck_assert_msg(run_whole(gc, &go, &ge) == 0, "gc: %s", ge.s);
	ck_assert_msg(strstr(go.s, "removed ") && strstr(go.s, base), "gc said: %s", go.s);
	ck_assert_int_eq(jails_left(), 0);
	ck_assert_int_ne(lstat(sock, &lst), 0);
	close(out);
	close(err);
}
END_TEST

START_TEST(snapshot_create_and_restore_jailed)
{
	static struct buf o, e, o2, e2;
	char snap[128], in[128], got[128], metrics[128], put[300], get[300], p[300], *s;
	char *create[] = { "tinyvmm",    "snapshot",
			   "create",     "--jail",
			   "--jail-dir", base,
			   "--out",      snap,
			   "--kernel",   (char *)it_guest("vmlinux"),
			   "--rootfs",   getenv("TINYVMM_ROOTFS"),
			   "--",         "sh",
			   "-c",         "echo warm > /tmp/warm",
			   NULL };
	char *restore[] = { "tinyvmm",
			    "run",
			    "--jail",
			    "--jail-dir",
			    base,
			    "--snapshot",
			    snap,
			    "--rootfs",
			    getenv("TINYVMM_ROOTFS"),
			    "--metrics",
			    metrics,
			    "--put",
			    put,
			    "--get",
			    get,
			    "--",
			    "sh",
			    "-c",
			    "cat /tmp/in > /tmp/out; cat /tmp/warm; exit 4",
			    NULL };
	int st, fd;
	struct stat sst;

	snprintf(snap, sizeof(snap), "%s/snap", dir);
	snprintf(in, sizeof(in), "%s/in.txt", dir);
	snprintf(got, sizeof(got), "%s/out.txt", dir);
	snprintf(metrics, sizeof(metrics), "%s/m.json", dir);
	snprintf(put, sizeof(put), "%s:/tmp/in", in);
	snprintf(get, sizeof(get), "/tmp/out:%s", got);
	fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* root's alone: read before the lockdown */
	ck_assert_int_eq(write(fd, "payload\n", 8), 8);
	close(fd);

	st = run_whole(create, &o, &e);
	ck_assert_msg(st == 0, "create: status %d, stderr: %s", st, e.s);
	snprintf(p, sizeof(p), "%s/state", snap);
	ck_assert_int_eq(stat(p, &sst), 0);
	ck_assert_uint_eq(sst.st_uid, 0); /* written by the jail uid, handed back */
	snprintf(p, sizeof(p), "ls -A '%s' | grep -q tinyvmm-jail", snap);
	ck_assert_int_ne(system(p), 0); /* no stage left */
	ck_assert_int_eq(jails_left(), 0);

	st = run_whole(restore, &o2, &e2);
	ck_assert_msg(st == 4, "restore: status %d, stderr: %s", st, e2.s);
	ck_assert_str_eq(o2.s, "warm\n");
	s = it_slurp(got);
	ck_assert_str_eq(s, "payload\n");
	free(s);
	s = it_slurp(metrics);
	ck_assert_msg(strstr(s, "\"first_kvm_run_us\":") && !strstr(s, "\"restore_called_us\":0,"), "metrics: %s", s);
	free(s);
	ck_assert_int_eq(jails_left(), 0);

	/* A diff of it, made jailed (this failed: "the VM's base is S, not
	 * S"), restores jailed with both files. */
	static struct buf o3, e3, o4, e4;
	char diff[128];
	char *dcreate[] = { "tinyvmm", "snapshot", "create", "--jail", "--jail-dir", base, "--diff-from",
			    snap,      "--out",    diff,     "--",     "sh",         "-c", "echo diff > /tmp/diff",
			    NULL };
	char *drestore[] = { "tinyvmm", "run", "--jail", "--jail-dir", base,        "--snapshot",
			     diff,      "--",  "cat",    "/tmp/warm",  "/tmp/diff", NULL };

	snprintf(diff, sizeof(diff), "%s/diff", dir);
	st = run_whole(dcreate, &o3, &e3);
	ck_assert_msg(st == 0, "diff create: status %d, stderr: %s", st, e3.s);
	st = run_whole(drestore, &o4, &e4);
	ck_assert_msg(st == 0, "diff restore: status %d, stderr: %s", st, e4.s);
	ck_assert_str_eq(o4.s, "warm\ndiff\n");
	ck_assert_int_eq(jails_left(), 0);
}
END_TEST

/* SIGTERM to a jailed long-lived VM's tinyvmm (as `tinyvmm serve` runs
 * each sandbox: --vsock-uds, the default kernel and image) while it makes
 * the template snapshot: forwarded to the jailed maker, which ends, and
 * the run stops with it and boots nothing (it booted cold: a sandbox
 * deleted during its create ran on until the daemon's SIGKILL). */
START_TEST(stopped_while_making_its_template_boots_nothing)
{
	static struct buf o, e;
	char cache[] = "/tmp/tinyvmm-it-jcache-XXXXXX", data[] = "/tmp/tinyvmm-it-jdata-XXXXXX";
	char cmd[PATH_MAX * 2 + 200], pause_to[96], uds[96];
	char *argv[] = { "tinyvmm",    "run",    "--jail",       "--jail-dir", base,    "--vsock-uds", uds,
			 "--pause-to", pause_to, "--serial-out", "/dev/null",  "--ttl", "120",         NULL };
	char *saved[2] = { NULL, NULL };
	const char *names[2] = { "TINYVMM_CACHE", "TINYVMM_DATA_DIR" };
	int out, err, st;
	pid_t tvm;
	time_t end;

	ck_assert_ptr_nonnull(mkdtemp(cache));
	ck_assert_ptr_nonnull(mkdtemp(data));
	snprintf(cmd, sizeof(cmd), "ln -s '%s' '%s/vmlinux' && ln -s '%s' '%s/rootfs.ext4'", it_guest("vmlinux"), data,
		 getenv("TINYVMM_ROOTFS"), data);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(pause_to, sizeof(pause_to), "%s/paused", data);
	snprintf(uds, sizeof(uds), "%s/vsock.sock", data);
	/* no template in this cache yet: the run makes it */
	for (int i = 0; i < 2; i++) {
		saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
		setenv(names[i], i ? data : cache, 1);
	}
	tvm = spawn(argv, &out, &err);
	for (int i = 0; i < 2; i++) {
		saved[i] ? setenv(names[i], saved[i], 1) : unsetenv(names[i]);
		free(saved[i]);
	}
	for (end = time(NULL) + WAIT_S; !strstr(e.s, "to make a template snapshot") && time(NULL) < end;) {
		struct pollfd p = { .fd = err, .events = POLLIN };

		ck_assert_int_ge(poll(&p, 1, 1000), 0);
		ck_assert_msg(!p.revents || drain(err, &e), "stderr ended: %s", e.s);
	}
	ck_assert_msg(strstr(e.s, "to make a template snapshot"), "stderr: %s", e.s);
	sleep(5); /* into the build (the signal is forwarded from then on); here it takes 20 s or more */
	ck_assert_int_eq(kill(tvm, SIGTERM), 0);
	read_until(out, err, &o, &e, NULL);
	st = wait_status(tvm);
	ck_assert_msg(!strstr(e.s, "booting cold"), "stderr: %s", e.s);
	/* stopped while making it; or, on a host fast enough, after */
	snprintf(cmd, sizeof(cmd), "ls -d %s/templates/*/state >/dev/null 2>&1", cache);
	ck_assert_msg(st == 128 + SIGTERM && (strstr(e.s, "while making template snapshot") || system(cmd) == 0),
		      "status %d, stderr: %s", st, e.s);
	ck_assert_int_eq(jails_left(), 0);
	close(out);
	close(err);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", cache, data);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jail");
	TCase *tc = tcase_create("jail");

	if (geteuid() != 0) {
		printf("test_jail: needs root, skipped\n");
		return 0;
	}
	tcase_set_timeout(tc, 7200);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, jailed_job_is_confined_and_cleaned);
	tcase_add_test(tc, killed_vmm_is_cleaned_by_its_parent);
	tcase_add_test(tc, gc_removes_what_a_killed_tinyvmm_left);
	tcase_add_test(tc, snapshot_create_and_restore_jailed);
	tcase_add_test(tc, stopped_while_making_its_template_boots_nothing);
	suite_add_tcase(s, tc);
	return it_run_suite(s);
}
