/* Snapshot and restore end to end (issue: start every sandbox by
 * restoring): the real guest boots once with the base image as a
 * copy-on-write root and is snapshotted when its agent is ready; then it is
 * restored TINYVMM_IT_RESTORES times in a row (default 20) and 4 times at
 * once, each restore running a job that shows it is fresh and separate
 * (a file written by one is absent in the next, /dev/urandom differs, the
 * clock is the host's after SEED); a restored VM snapshotted again keeps
 * its files; damaged snapshots are refused with a clear error; and the
 * sequential restores leave no descriptors behind.
 *
 * With TINYVMM_IT_JAIL=1 the snapshot is made by `./tinyvmm snapshot create
 * --jail` and every restore is a `./tinyvmm run --jail --snapshot` reached
 * through its --vsock-uds socket (the host walls issue: "the snapshot suite
 * also passes under --jail"); a snapshot of a restore is its --pause-to;
 * a refusal is its one line and exit status 125. What only the library can
 * be asked (its diff calls' own refusals, one process's descriptors and
 * memory over a hundred restores) is checked in-process only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/it_common.h"
#include "tests/integration/it_jail.h"
#include "vmm/tinyvmm.h"

#define BOOT_MS 600000
#define AGENT_MS 120000
#define PAR 4
#define DIFF_WRITE_MIB_S "4194304" /* DIFF_WRITE_MIB in bytes, for the shell */

static char snap_dir[64];
static struct it_jail jail;

/* A restored VM: in-process, or (jailed) a tinyvmm process. */
struct vm {
	struct tvm_vm *vm;
	pid_t pid;
	char uds[108];
	int seeded; /* jailed: the first connection sent SEED */
};

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void cfg_base(struct tvm_config *c)
{
	tvm_config_init(c);
	c->seccomp = TVM_SECCOMP_KILL;
	c->serial_out_fd = -1;
	c->ttl_ms = 1800000; /* whatever happens to the test, the VM goes */
}

/* Run `sh -c cmd` as root in v through a new agent connection (the first
 * to a jailed VM seeds it, as the library does for one of its own).
 * Makes no check call, so a thread may use it (in check's no-fork mode a
 * failed assertion longjmps into the test's own thread): 0, or -1 with
 * why set. */
static int try_run(struct vm *v, const char *cmd, struct it_out *o, struct tvm_job_result *r, char *why, size_t n)
{
	const char *argv[] = { "sh", "-c", cmd, NULL };
	struct tvm_job j = { .argv = argv, .uid = TVM_ID_ROOT, .gid = TVM_ID_ROOT, .on_output = it_collect, .ctx = o };
	struct tvm_agent_addr to =
		v->vm ? (struct tvm_agent_addr){ .vm = v->vm } : (struct tvm_agent_addr){ .uds_path = v->uds };
	struct tvm_agent *a;
	struct tvm_err e = { 0 };

	if (tvm_agent_connect(&to, AGENT_MS, v->vm || v->seeded ? 0 : TVM_AGENT_SEED, &a, &e)) {
		snprintf(why, n, "agent: %s", e.msg);
		return -1;
	}
	v->seeded = 1;
	if (tvm_agent_exec(a, &j, r, &e)) {
		snprintf(why, n, "exec: %s", e.msg);
		tvm_agent_close(a);
		return -1;
	}
	tvm_agent_close(a);
	return 0;
}

static struct tvm_job_result run(struct vm *v, const char *cmd, struct it_out *o)
{
	struct tvm_job_result r;
	char why[320];

	ck_assert_msg(try_run(v, cmd, o, &r, why, sizeof(why)) == 0, "%s", why);
	return r;
}

/* Restore the snapshot in dir and start it; jailed, pause_to (or NULL) is
 * its --pause-to, which pause() saves into. The caller ends it with
 * destroy(). */
static struct vm *try_restore_to(const char *dir, const char *pause_to, char *why, size_t n)
{
	static int seq;
	struct vm *v = calloc(1, sizeof(*v));
	struct tvm_config c;
	struct tvm_err e = { 0 };

	if (!v) {
		snprintf(why, n, "calloc: out of memory");
		return NULL;
	}
	if (jail.on) {
		char *argv[16] = { "tinyvmm",     "run",  "--jail", jail.opt, "--snapshot",   (char *)dir,
				   "--vsock-uds", v->uds, "--ttl",  "1800",   "--serial-out", "/dev/null" };

		snprintf(v->uds, sizeof(v->uds), "%s-%d.sock", snap_dir, __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
		if (pause_to) {
			argv[12] = "--pause-to";
			argv[13] = (char *)pause_to;
		}
		v->pid = it_jail_try_spawn(argv);
		if (v->pid > 0)
			return v;
		snprintf(why, n, "fork: %s", strerror(errno));
	} else {
		cfg_base(&c);
		if (tvm_vm_restore(&c, dir, &v->vm, &e) == 0) {
			if (tvm_vm_start(v->vm, &e) == 0)
				return v;
			tvm_vm_destroy(v->vm);
			snprintf(why, n, "start: %s", e.msg);
		} else {
			snprintf(why, n, "restore: %s", e.msg);
		}
	}
	free(v);
	return NULL;
}

static struct vm *restore_to(const char *dir, const char *pause_to)
{
	char why[320];
	struct vm *v = try_restore_to(dir, pause_to, why, sizeof(why));

	ck_assert_msg(v, "%s", why);
	return v;
}

static struct vm *restore(const char *dir)
{
	return restore_to(dir, NULL);
}

/* Stop v and free it (jailed: SIGTERM, which a VM ends with 128 + 15). */
static void destroy(struct vm *v)
{
	if (v->vm)
		tvm_vm_destroy(v->vm);
	else
		ck_assert_int_eq(it_jail_end(&v->pid, SIGTERM), 143);
	free(v);
}

/* Save v into out and end it: a full snapshot in-process, and jailed its
 * --pause-to (out, given to restore_to: a diff against what it was
 * restored from). */
static void pause_into(struct vm *v, const char *out)
{
	struct tvm_err e = { 0 };

	if (v->vm) {
		ck_assert_msg(tvm_vm_snapshot(v->vm, out, &e) == 0, "snapshot: %s", e.msg);
		tvm_vm_destroy(v->vm);
	} else {
		ck_assert_int_eq(it_jail_end(&v->pid, SIGUSR1), 0);
	}
	free(v);
}

/* The job every restore runs: what the last one left (nothing, if it is
 * fresh), then leave a mark; 16 random bytes; the guest's clock. */
#define FRESH_JOB                                                                 \
	"cat /root/mark 2>/dev/null || echo absent; echo $$ > /root/mark; sync; " \
	"head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; date +%s"
#define WARMUP_JOB "cat /root/none 2>/dev/null; sync; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; date +%s"

static void setup(void)
{
	struct it_out o = { 0 };
	struct tvm_config c;
	struct tvm_vm *vm;
	struct tvm_agent *a;
	struct tvm_err e = { 0 };

	snprintf(snap_dir, sizeof(snap_dir), "/tmp/tinyvmm-it-snap-%d", getpid());
	it_jail_init(&jail, "snapshot");
	if (jail.on) {
		char *argv[] = { "tinyvmm",
				 "snapshot",
				 "create",
				 IT_JAIL_BOOT(&jail),
				 getenv("TINYVMM_ROOTFS"),
				 "--out",
				 snap_dir,
				 "--",
				 "sh",
				 "-c",
				 WARMUP_JOB,
				 NULL };
		pid_t pid = it_jail_spawn(argv);

		ck_assert_int_eq(it_jail_end(&pid, 0), 0);
		return;
	}
	cfg_base(&c);
	c.kernel_path = it_guest("vmlinux");
	c.cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
	c.drives[0] = (struct tvm_drive){ .path = getenv("TINYVMM_ROOTFS"), .cow = 1 };
	c.nr_drives = 1;
	c.root_drive = 1;
	ck_assert_msg(c.drives[0].path, "TINYVMM_ROOTFS is not set (run through make integration)");
	ck_assert_msg(tvm_vm_create(&c, &vm, &e) == 0, "create: %s", e.msg);
	ck_assert_msg(tvm_vm_start(vm, &e) == 0, "start: %s", e.msg);
	ck_assert_msg(tvm_vm_agent_connect(vm, BOOT_MS, &a, &e) == 0, "agent: %s", e.msg);
	tvm_agent_close(a);
	/* Warm-up: the job's programs are in the snapshot's page cache (each
	 * first exec costs seconds on the emulated guest). No mark written. */
	run(&(struct vm){ .vm = vm }, WARMUP_JOB, &o);
	it_out_free(&o);
	/* run() closed its connection: none is open across the snapshot. */
	ck_assert_msg(tvm_vm_snapshot(vm, snap_dir, &e) == 0, "snapshot: %s", e.msg);
	tvm_vm_destroy(vm);
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'-*", snap_dir, snap_dir);
	ck_assert_int_eq(system(cmd), 0);
	it_jail_done(&jail);
}

struct fresh {
	char random[64];
	long guest_time;
	time_t before, after;
};

/* Run FRESH_JOB in vm and check what it printed into f; no check call
 * (threads use it): 0, or -1 with why set. */
static int try_fresh_job(struct vm *vm, struct fresh *f, char *why, size_t n)
{
	struct it_out o = { 0 };
	struct tvm_job_result r;
	char mark[32];
	int rc = -1;

	f->before = time(NULL);
	if (try_run(vm, FRESH_JOB, &o, &r, why, n))
		goto out;
	f->after = time(NULL);
	if (r.exit_code != 0)
		snprintf(why, n, "job: exit %d: %s", r.exit_code, it_str(&o, 2));
	else if (sscanf(it_str(&o, 1), "%31s %63s %ld", mark, f->random, &f->guest_time) != 3)
		snprintf(why, n, "output: %s", it_str(&o, 1));
	else if (strcmp(mark, "absent"))
		snprintf(why, n, "a file from another VM is visible: %s", mark);
	else if (strlen(f->random) != 32)
		snprintf(why, n, "random is %zu hex digits, not 32: %s", strlen(f->random), f->random);
	/* SEED set the clock: within 1 s of the host's during the job. */
	else if (f->guest_time < f->before - 1 || f->guest_time > f->after + 1)
		snprintf(why, n, "guest time %ld, host %ld..%ld", f->guest_time, (long)f->before, (long)f->after);
	else
		rc = 0;
out:
	it_out_free(&o);
	return rc;
}

static void fresh_job(struct vm *vm, struct fresh *f)
{
	char why[320];

	ck_assert_msg(try_fresh_job(vm, f, why, sizeof(why)) == 0, "%s", why);
}

static int restores(void)
{
	const char *s = getenv("TINYVMM_IT_RESTORES");

	return s && atoi(s) > 0 ? atoi(s) : 20;
}

START_TEST(sequential_restores_are_fresh_and_leak_nothing)
{
	int n = restores(), fds_before = -1;
	struct fresh *f = calloc((size_t)n, sizeof(*f));

	for (int i = 0; i < n; i++) {
		struct vm *vm = restore(snap_dir);

		fresh_job(vm, &f[i]);
		destroy(vm);
		if (i == 0) /* after the first: lazy one-time setup is done */
			fds_before = count_fds();
		for (int k = 0; k < i; k++)
			ck_assert_msg(strcmp(f[k].random, f[i].random), "restores %d and %d read the same random bytes",
				      k, i);
	}
	ck_assert_int_eq(count_fds(), fds_before);
	free(f);
}
END_TEST

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	long kib = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

START_TEST(hundred_restores_leak_no_fds_or_memory)
{
	const char *s = getenv("TINYVMM_IT_RESTORE_LOOP");
	int n = s && atoi(s) > 10 ? atoi(s) : 100, fds = -1;
	long rss = -1;
	struct tvm_err e = { 0 };

	if (jail.on) { /* one process's own leaks: the library's */
		printf("hundred_restores_leak_no_fds_or_memory: in-process only\n");
		return;
	}
	/* Restore, run, stop, destroy, in one process: every fd and every
	 * mapping must go with the VM. Measured after 10 rounds, when the
	 * one-time setup (allocator pools, ASan's own) is done. */
	for (int i = 0; i < n; i++) {
		struct vm *v = restore(snap_dir);

		tvm_vm_stop(v->vm);
		ck_assert_msg(tvm_vm_wait(v->vm, &e) == 0, "round %d: %s", i, e.msg);
		destroy(v);
		if (i == 9) {
			fds = count_fds();
			rss = rss_kib();
		}
	}
	ck_assert_int_eq(count_fds(), fds);
	/* 90 more rounds: 8 MiB would be ~90 KiB per restore. */
	ck_assert_msg(rss_kib() - rss < 8 * 1024, "RSS grew from %ld to %ld KiB over %d restores", rss, rss_kib(),
		      n - 10);
}
END_TEST

struct par {
	struct fresh f;
	struct vm *vm;
	int rc;
	char why[320];
};

/* A thread's restore and job; what went wrong is asserted on by the test's
 * own thread. */
static void *par_restore(void *arg)
{
	struct par *p = arg;

	p->rc = -1;
	p->vm = try_restore_to(snap_dir, NULL, p->why, sizeof(p->why));
	if (p->vm)
		p->rc = try_fresh_job(p->vm, &p->f, p->why, sizeof(p->why));
	return NULL;
}

START_TEST(four_at_once)
{
	struct par p[PAR] = { 0 };
	pthread_t t[PAR];

	for (int i = 0; i < PAR; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, par_restore, &p[i]), 0);
	for (int i = 0; i < PAR; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < PAR; i++) {
		if (p[i].rc)
			fprintf(stderr, "four_at_once: VM %d of %d: %s\n", i, PAR, p[i].why);
		if (p[i].vm)
			destroy(p[i].vm);
	}
	for (int i = 0; i < PAR; i++) {
		ck_assert_msg(p[i].rc == 0, "VM %d of %d: %s", i, PAR, p[i].why);
		for (int k = 0; k < i; k++)
			ck_assert_str_ne(p[k].f.random, p[i].f.random);
	}
}
END_TEST

START_TEST(snapshot_of_a_restore_keeps_its_files)
{
	char second[96];
	struct it_out o = { 0 };
	struct vm *vm;

	snprintf(second, sizeof(second), "%s-second", snap_dir);
	vm = restore_to(snap_dir, second);
	run(vm, "echo kept-on-disk > /root/chain; echo kept-in-ram > /tmp/chain; sync", &o);
	it_out_free(&o);
	pause_into(vm, second);
	vm = restore(second);
	run(vm, "cat /root/chain /tmp/chain", &o);
	ck_assert_str_eq(it_str(&o, 1), "kept-on-disk\nkept-in-ram\n");
	it_out_free(&o);
	destroy(vm);
	/* The first snapshot is unchanged by all this. */
	vm = restore(snap_dir);
	run(vm, "cat /root/chain 2>/dev/null || echo absent", &o);
	ck_assert_str_eq(it_str(&o, 1), "absent\n");
	it_out_free(&o);
	destroy(vm);
}
END_TEST

/* A copy of the snapshot whose state file is damaged by fn. */
static void damaged_copy(const char *tag, const char *shell_fix, char *dir, size_t len)
{
	char cmd[512];

	snprintf(dir, len, "%s-%s", snap_dir, tag);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s' && cd '%s' && %s", dir, snap_dir, dir, dir,
		 shell_fix);
	ck_assert_int_eq(system(cmd), 0);
}

/* A restore of dir is refused with -code (jailed: tinyvmm's status 125),
 * and one line that names dir and says words. */
static void refused_net(const char *dir, int code, const char *words, int net)
{
	struct tvm_config c;
	struct tvm_vm *vm = (struct tvm_vm *)1;
	struct tvm_err e = { 0 };

	if (jail.on) {
		char out[128], err[128], *msg;
		char *argv[] = { "tinyvmm", "run",  "--jail", jail.opt, "--snapshot", (char *)dir,
				 "--",      "true", NULL,     NULL,     NULL };

		if (net) {
			argv[6] = "--net";
			argv[7] = "tap=tvm-none";
			argv[8] = "--";
			argv[9] = "true";
		}

		it_tmp(out, sizeof(out), "out");
		it_tmp(err, sizeof(err), "err");
		ck_assert_int_eq(it_run_cli(argv, out, err, 600), 125);
		msg = it_slurp(err);
		/* One line says it, and names dir (the host's quirks
		 * notice may come before it). */
		char *w = strstr(msg, words), *bol = w, *eol = w ? strchr(w, '\n') : NULL;

		while (bol && bol > msg && bol[-1] != '\n')
			bol--;
		ck_assert_msg(w && eol, "stderr: %s", msg);
		*eol = 0;
		ck_assert_msg(strstr(bol, dir), "the line does not name %s: %s", dir, bol);
		free(msg);
		unlink(out);
		unlink(err);
		return;
	}
	cfg_base(&c);
	if (net)
		c.net = (struct tvm_net){ .enabled = 1, .tap = "tvm-none" };
	ck_assert_int_eq(tvm_vm_restore(&c, dir, &vm, &e), -code);
	ck_assert_ptr_null(vm);
	ck_assert_msg(strstr(e.msg, words) && strstr(e.msg, dir), "message: %s", e.msg);
	ck_assert_ptr_null(strchr(e.msg, '\n'));
}

static void refused(const char *dir, int code, const char *words)
{
	refused_net(dir, code, words, 0);
}

START_TEST(damaged_snapshots_refused)
{
	char dir[128];

	damaged_copy("trunc", "truncate -s -100 state", dir, sizeof(dir));
	refused(dir, EINVAL, "truncated");
	damaged_copy("flip", "printf '\\x5a' | dd of=state bs=1 seek=3000 conv=notrunc status=none", dir, sizeof(dir));
	refused(dir, EINVAL, "checksum mismatch");
	damaged_copy("memsize", "truncate -s -4096 mem", dir, sizeof(dir));
	refused(dir, EINVAL, "memory file");
	damaged_copy("nomem", "rm mem", dir, sizeof(dir));
	refused(dir, ENOENT, "mem");
	snprintf(dir, sizeof(dir), "%s-absent", snap_dir);
	refused(dir, ENOENT, "state");
}
END_TEST

/* Diff snapshots (tvm_vm_snapshot_diff). */

#define DIFF_WRITE_MIB 4

static struct stat stat_of(const char *dir, const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
	return st;
}

/* The page count in a diff memory file's header. */
static uint64_t diff_pages(const char *dir)
{
	char path[256];
	uint64_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/mem", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &n, 8, 24), 8);
	close(fd);
	return n;
}

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* Restore the full snapshot, write DIFF_WRITE_MIB MiB into the guest's
 * RAM (tmpfs) and a file on its disk, take a diff into out against base. */
static void make_diff(const char *base, const char *out, char *md5, size_t md5_len)
{
	struct it_out o = { 0 };
	struct tvm_err e = { 0 };
	struct vm *vm = restore_to(base, out);
	struct tvm_job_result r;

	r = run(vm,
		"head -c " DIFF_WRITE_MIB_S " /dev/urandom > /tmp/big && md5sum /tmp/big | cut -c1-32 && "
		"echo diff-on-disk > /root/diff && sync",
		&o);
	ck_assert_msg(r.exit_code == 0, "job: %s", it_str(&o, 2));
	snprintf(md5, md5_len, "%s", it_str(&o, 1));
	it_out_free(&o);
	if (jail.on) { /* a restored VM's pause is a diff against its base */
		pause_into(vm, out);
		return;
	}
	ck_assert_msg(tvm_vm_snapshot_diff(vm->vm, out, base, &e) == 0, "diff snapshot: %s", e.msg);
	destroy(vm);
}

START_TEST(diff_snapshot_holds_only_what_changed)
{
	char diff[96], diff2[96], diff3[96], md5[64];
	struct it_out o = { 0 };
	struct tvm_err e = { 0 };
	struct vm *vm;
	struct stat full, dm;
	uint64_t n;

	snprintf(diff, sizeof(diff), "%s-diff", snap_dir);
	snprintf(diff2, sizeof(diff2), "%s-diff2", snap_dir);
	snprintf(diff3, sizeof(diff3), "%s-diff3", snap_dir);
	make_diff(snap_dir, diff, md5, sizeof(md5));
	full = stat_of(snap_dir, "mem");
	dm = stat_of(diff, "mem");
	n = diff_pages(diff);
	printf("diff snapshot: %d MiB written in the guest, %llu pages dirtied (%.1f MiB), diff mem %lld bytes "
	       "(%lld allocated), RAM %lld MiB (full snapshot's mem: %lld bytes allocated)\n",
	       DIFF_WRITE_MIB, (unsigned long long)n, n * 4096.0 / (1 << 20), (long long)dm.st_size,
	       (long long)dm.st_blocks * 512, (long long)full.st_size >> 20, (long long)full.st_blocks * 512);
	fflush(stdout);
	/* At least the tmpfs file's pages, and far below the RAM's size. */
	ck_assert_uint_ge(n * 4096, DIFF_WRITE_MIB << 20);
	ck_assert_int_le(dm.st_blocks * 512, full.st_size / 4);
	ck_assert_int_le(n * 4096, (uint64_t)full.st_size / 4);

	/* Restored: what was written, in RAM and on disk. */
	vm = restore_to(diff, diff2);
	run(vm, "md5sum /tmp/big | cut -c1-32; cat /root/diff; echo second > /tmp/second", &o);
	ck_assert_msg(strncmp(it_str(&o, 1), md5, 32) == 0, "md5 %s, written %s", it_str(&o, 1), md5);
	ck_assert_msg(strstr(it_str(&o, 1), "\ndiff-on-disk\n"), "output: %s", it_str(&o, 1));
	it_out_free(&o);
	if (jail.on) {
		pause_into(vm, diff2); /* against the diff's base: never a chain */
	} else {
		/* No chains: a diff of a VM restored from a diff is against
		 * that diff's base, never the diff itself... */
		ck_assert_int_eq(tvm_vm_snapshot_diff(vm->vm, diff2, diff, &e), -EINVAL);
		ck_assert_msg(strstr(e.msg, "restored from a diff") && !strchr(e.msg, '\n'), "message: %s", e.msg);
		/* ...and holds the old diff's pages (not written again since:
		 * the pages of /tmp/big) with the new ones. */
		ck_assert_msg(tvm_vm_snapshot_diff(vm->vm, diff2, NULL, &e) == 0, "diff of a diff's restore: %s",
			      e.msg);
		destroy(vm);
	}
	ck_assert_uint_ge(diff_pages(diff2), n);
	rename(diff, diff3); /* not needed by diff2 */
	vm = restore(diff2);
	run(vm, "md5sum /tmp/big | cut -c1-32; cat /root/diff /tmp/second", &o);
	ck_assert_msg(strncmp(it_str(&o, 1), md5, 32) == 0, "md5 %s, written %s", it_str(&o, 1), md5);
	ck_assert_msg(strstr(it_str(&o, 1), "\ndiff-on-disk\nsecond\n"), "output: %s", it_str(&o, 1));
	it_out_free(&o);
	destroy(vm);
	rename(diff3, diff);
	if (jail.on) /* the library's own refusals, below */
		return;

	/* Only against the snapshot the VM was restored from, never over it. */
	vm = restore(snap_dir);
	ck_assert_int_eq(tvm_vm_snapshot_diff(vm->vm, diff2, diff2, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "base is ") && !strchr(e.msg, '\n'), "message: %s", e.msg);
	ck_assert_int_eq(tvm_vm_snapshot_diff(vm->vm, snap_dir, snap_dir, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "its own base"), "message: %s", e.msg);
	destroy(vm);
}
END_TEST

/* A diff refuses damage of its own and a base that is gone or changed. */
START_TEST(diff_with_damage_or_changed_base_refused)
{
	char base[96], diff[96], dir[128], md5[64];

	snprintf(base, sizeof(base), "%s-base", snap_dir);
	snprintf(diff, sizeof(diff), "%s-basediff", snap_dir);
	sh("rm -rf '%1$s' && cp -a '%2$s' '%1$s'", base, snap_dir); /* a base of its own */
	make_diff(base, diff, md5, sizeof(md5));

	/* The diff's own files. */
	snprintf(dir, sizeof(dir), "%s-t", diff);
#define DAMAGED(what) "rm -rf '%1$s' && cp -r '%2$s' '%1$s' && cd '%1$s' && " what
	sh(DAMAGED("truncate -s -4096 mem"), dir, diff);
	refused(dir, EINVAL, "truncated");
	sh(DAMAGED("printf '\\x5a' | dd of=mem bs=1 seek=70 conv=notrunc status=none"), dir, diff);
	refused(dir, EINVAL, "checksum mismatch");
	sh(DAMAGED("printf 'XX' | dd of=mem bs=1 seek=0 conv=notrunc status=none"), dir, diff);
	refused(dir, EINVAL, "bad magic");
	sh(DAMAGED("truncate -s 10 mem"), dir, diff);
	refused(dir, EINVAL, "diff memory file");
#undef DAMAGED

	/* The base: touched; changed, its size and time put back (another
	 * file, made while the old one still holds its inode number: a copy
	 * of the same bytes could take it back and rightly be accepted);
	 * removed. */
	sh("touch '%1$s/mem'%2$s", base, "");
	refused(diff, ESTALE, "modification time");
	sh("cd '%1$s' && touch -r '%2$s/mem' mem && cp -a mem mem.new && "
	   "printf X | dd of=mem.new bs=1 seek=8192 conv=notrunc status=none && touch -r mem mem.new && mv mem.new mem",
	   base, snap_dir);
	refused(diff, ESTALE, "inode");
	sh("rm '%1$s/mem'%2$s", base, "");
	refused(diff, ENOENT, "-base/mem");
	sh("rm -rf '%1$s'%2$s", base, "");
	refused(diff, ENOENT, "-base");
}
END_TEST

/* The snapshot's guest has no NIC: a restore cannot plug one in. */
START_TEST(restore_cannot_add_a_network)
{
	refused_net(snap_dir, EINVAL, "no network device", 1);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");

	/* One snapshot for all tests, no fork (threads do not survive fork),
	 * generous timeouts for the emulated guest kernel. */
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 1800);
	tcase_add_test(tc, damaged_snapshots_refused);
	tcase_add_test(tc, restore_cannot_add_a_network);
	tcase_add_test(tc, diff_snapshot_holds_only_what_changed);
	tcase_add_test(tc, diff_with_damage_or_changed_base_refused);
	tcase_add_test(tc, snapshot_of_a_restore_keeps_its_files);
	tcase_add_test(tc, four_at_once);
	tcase_add_test(tc, sequential_restores_are_fresh_and_leak_nothing);
	tcase_add_test(tc, hundred_restores_leak_no_fds_or_memory);
	suite_add_tcase(su, tc);
	return it_run_suite(su);
}
