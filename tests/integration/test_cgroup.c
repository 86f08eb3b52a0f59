/* Host cgroups of `tinyvmm run` (issue 13) and the host's backstop for a
 * job's --timeout, on the real host and guest:
 *  - --cpu-quota 0.5: the VM's cgroup holds the quota, the memory limit
 *    (RAM + allowance) and pids.max, read back from the cgroup files while
 *    a busy loop runs in the guest; over 10 s the VMM's threads get at most
 *    60 % of one host core (their CPU time from /proc/PID/task/TID/stat,
 *    not wall time), while the same loop without a cgroup gets more;
 *  - the cgroup directory is gone after every way a VM ends: the job's
 *    timeout, --ttl, the guest job SIGKILLed, SIGTERM to tinyvmm; a stale
 *    one of a dead pid is removed by the next start;
 *  - `tinyvmm exec --timeout 10` to a VM whose VMM is stopped (SIGSTOP:
 *    the guest cannot answer) returns 124 once the grace has passed.
 * The VMM's cgroups are found from its /proc/PID/cgroup, the way any
 * operator would. Skipped on a host without cpu, memory and pids
 * controllers. Times are printed, never asserted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>

#include "tests/integration/it_common.h"
#include "vmm/sandbox/cgroup.h"

static char parent[64], out[128], err[128], metrics[128];
static int have_cgroups;

static void stop_running(void);

/* The directory of pid's cgroup holding ctrl ("" when it has none). */
static void vmm_dir(pid_t pid, enum cg_ctrl ctrl, char *buf)
{
	char proc[64];
	struct cg_sources src = { NULL, proc };
	struct cg_host h;
	struct tvm_err e = { 0 };

	*buf = 0;
	snprintf(proc, sizeof(proc), "/proc/%d/cgroup", (int)pid);
	if (cg_detect(&src, &h, &e))
		return;
	for (unsigned i = 0; i < h.n; i++)
		if ((h.h[i].ctrls & (1u << ctrl)) && (h.h[i].v2 || !*buf))
			snprintf(buf, CG_PATH_MAX, "%s%s", h.h[i].mnt, h.h[i].own);
}

/* Our own directory for ctrl, plus the test's parent. */
static void parent_dir(enum cg_ctrl ctrl, char *buf)
{
	vmm_dir(getpid(), ctrl, buf);
	strncat(buf, "/", CG_PATH_MAX - strlen(buf) - 1);
	strncat(buf, parent, CG_PATH_MAX - strlen(buf) - 1);
}

static void setup(void)
{
	struct cg_host h;
	struct tvm_err e = { 0 };
	unsigned all = 0;

	snprintf(parent, sizeof(parent), "tinyvmm-it-%d", (int)getpid());
	it_tmp(out, sizeof(out), "cg-out");
	it_tmp(err, sizeof(err), "cg-err");
	it_tmp(metrics, sizeof(metrics), "cg-metrics");
	ck_assert_int_eq(cg_detect(NULL, &h, &e), 0);
	for (unsigned i = 0; i < h.n; i++)
		all |= h.h[i].ctrls;
	have_cgroups = (all & 7) == 7 && geteuid() == 0;
	if (!have_cgroups)
		printf("cgroup: this host offers no cpu, memory and pids controllers to root: skipped\n");
}

static void teardown(void)
{
	char d[CG_PATH_MAX];

	stop_running();
	for (int c = 0; c < CG_NR_CTRL; c++) {
		parent_dir(c, d);
		rmdir(d);
	}
	unlink(out);
	unlink(err);
	unlink(metrics);
}

/* ./tinyvmm ARGS in the background, output to out/err; SIGALRM after
 * 900 s in case it hangs. */
static pid_t spawn(const char *const *args, const char *o, const char *e)
{
	char *argv[40] = { "tinyvmm" };
	int n = 1;
	pid_t pid;

	while (*args)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) { /* no check call here: see it_jail_spawn */
		if (!freopen("/dev/null", "r", stdin) || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
			_exit(99);
		alarm(900);
		execv("./tinyvmm", argv);
		_exit(98);
	}
	ck_assert_int_ge(pid, 0);
	return pid;
}

#define SPAWN(...) spawn((const char *const[]){ __VA_ARGS__, NULL }, out, err)

static int wait_exit(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait (at most 600 s) until file holds text; 0 if pid ended first. */
static int wait_text(const char *file, const char *text, pid_t pid)
{
	for (double end = now_s() + 600; now_s() < end; usleep(50000)) {
		char *s = it_slurp(file);
		int found = strstr(s, text) != NULL;

		free(s);
		if (found)
			return 1;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return 0;
	}
	return 0;
}

/* Wait until tinyvmm pid is in its own cgroup; its directory for ctrl in
 * buf. */
static void wait_cgroup(pid_t pid, enum cg_ctrl ctrl, char *buf)
{
	char tail[96];

	snprintf(tail, sizeof(tail), "/%s/%d", parent, (int)pid);
	for (int i = 0; i < 12000; i++, usleep(50000)) {
		vmm_dir(pid, ctrl, buf);
		if (strlen(buf) > strlen(tail) && !strcmp(buf + strlen(buf) - strlen(tail), tail))
			return;
	}
	ck_abort_msg("tinyvmm %d never entered a cgroup ending in %s (last: %s)", (int)pid, tail, buf);
}

static int gone(const char *dir)
{
	struct stat st;

	return stat(dir, &st) < 0 && errno == ENOENT;
}

/* A control file's first line (its size reads as 0: read to EOF). */
static void cg_file(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[CG_PATH_MAX + 64];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

static void assert_file(const char *dir, const char *file, const char *want)
{
	char s[256];

	cg_file(dir, file, s, sizeof(s));
	ck_assert_msg(!strcmp(s, want), "%s/%s: '%s', expected '%s'", dir, file, s, want);
}

/* tinyvmm processes a failed test left running. */
static pid_t running[2];

/* --cpu-quota 0.5 and the default memory limit of a 256 MiB guest, from
 * the kernel's files of the cgroup dirs cpu and mem. */
static void assert_half_core_limits(const char *cpu, const char *mem)
{
	char path[CG_PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/cpu.max", cpu);
	if (access(path, F_OK) == 0) { /* cgroup v2 */
		assert_file(cpu, "cpu.max", "50000 100000");
		assert_file(mem, "memory.max", "335544320");
	} else {
		assert_file(cpu, "cpu.cfs_quota_us", "50000");
		assert_file(cpu, "cpu.cfs_period_us", "100000");
		assert_file(mem, "memory.limit_in_bytes", "335544320"); /* 256 MiB RAM + 64 MiB */
	}
}

static void stop_running(void)
{
	for (int i = 0; i < 2; i++) {
		if (running[i] > 0 && waitpid(running[i], NULL, WNOHANG) == 0) {
			kill(running[i], SIGCONT);
			kill(running[i], SIGKILL);
			waitpid(running[i], NULL, 0);
		}
		running[i] = 0;
	}
}

/* Whether the host has a core to spare: the 1-minute load average below
 * its CPUs. */
static int host_idle_enough(void)
{
	double load = 99;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = 99;
		fclose(f);
	}
	printf("host load average %.2f on %ld CPUs\n", load, sysconf(_SC_NPROCESSORS_ONLN));
	return load + 1 <= (double)sysconf(_SC_NPROCESSORS_ONLN);
}

/* CPU time (user + system) of every thread of pid, in s. */
static double threads_cpu_s(pid_t pid)
{
	char path[320], line[1024];
	unsigned long long sum = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		unsigned long long ut, st;
		const char *p;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* the thread ended */
		if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
			sum += ut + st;
		fclose(f);
	}
	closedir(d);
	return (double)sum / (double)sysconf(_SC_CLK_TCK);
}

/* Share of one host core the VMM's threads used over 10 s. */
static double busy_share(pid_t pid)
{
	double c0 = threads_cpu_s(pid), t0 = now_s(), c1, t1;

	sleep(10);
	c1 = threads_cpu_s(pid);
	t1 = now_s();
	return (c1 - c0) / (t1 - t0);
}

/* A dead pid: a child that has exited. */
static int dead_pid(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return (int)p;
}

#define GUEST "--kernel", it_guest("vmlinux"), "--rootfs", getenv("TINYVMM_ROOTFS")
#define BUSY "sh", "-c", "echo go; while :; do :; done"
/* Two loops: one per vCPU of a --cpus 2 guest, which says how many CPUs it has. */
#define BUSY2 "sh", "-c", "echo go $(nproc); while :; do :; done & while :; do :; done"

/* Both vCPU threads of a --metrics file ran guest code: each has at least
 * a fifth of their CPU time (a guest kernel without SMP leaves the second
 * one idle). */
static void assert_both_vcpus_busy(const char *m)
{
	const char *p = strstr(m, "\"vcpu_cpu_us\":[");
	unsigned long long a = 0, b = 0;

	ck_assert_msg(p && sscanf(p, "\"vcpu_cpu_us\":[%llu,%llu]", &a, &b) == 2, "metrics: %s", m);
	printf("vCPU threads' CPU time: %.2f s and %.2f s\n", a / 1e6, b / 1e6);
	ck_assert_msg(a * 5 >= a + b && b * 5 >= a + b, "one vCPU did not run: %llu and %llu us", a, b);
}

/* First: the template snapshots of this kernel, image and tinyvmm, one
 * and two vCPUs, made without limits (later runs restore them). */
START_TEST(template_made)
{
	for (int cpus = 1; cpus <= 2; cpus++) {
		double t0 = now_s();
		pid_t pid = SPAWN("run", GUEST, "--cpus", cpus == 1 ? "1" : "2", "--", "true");
		int st = wait_exit(pid);
		char *e = it_slurp(err);

		ck_assert_msg(st == 0, "status %d: %s", st, e);
		printf("template of %d vCPUs ready (made or found) in %.1f s\n", cpus, now_s() - t0);
		free(e);
	}
}
END_TEST

START_TEST(cpu_quota_holds)
{
	char cpu[CG_PATH_MAX], mem[CG_PATH_MAX], pids[CG_PATH_MAX], stale[3][CG_PATH_MAX + 16], path[CG_PATH_MAX + 16];
	char *m, *e;
	static const enum cg_ctrl ctrls[3] = { CG_CPU, CG_MEMORY, CG_PIDS };
	int dead = dead_pid(), st;
	double share;
	pid_t pid;

	if (!have_cgroups)
		return;
	/* Empty cgroups a killed VMM would have left. */
	for (int i = 0; i < 3; i++) {
		char d[CG_PATH_MAX];

		parent_dir(ctrls[i], d);
		mkdir(d, 0755);
		snprintf(stale[i], sizeof(stale[i]), "%s/%d", d, dead);
		ck_assert_int_eq(mkdir(stale[i], 0755), 0);
	}
	pid = running[0] = SPAWN("run", GUEST, "--cpus", "2", "--cpu-quota", "0.5", "--cgroup-parent", parent,
				 "--metrics", metrics, "--timeout", "20", "--", BUSY2);
	wait_cgroup(pid, CG_CPU, cpu);
	vmm_dir(pid, CG_MEMORY, mem);
	vmm_dir(pid, CG_PIDS, pids);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(gone(stale[i]), "stale %s still there", stale[i]);
	ck_assert_msg(wait_text(out, "go", pid), "the job never started: %s", e = it_slurp(err));
	/* The limits, from the kernel's files, while the job runs. */
	assert_half_core_limits(cpu, mem);
	assert_file(pids, "pids.max", "66");
	share = busy_share(pid);
	cg_file(cpu, "cpu.stat", path, sizeof(path));
	printf("--cpu-quota 0.5, two vCPUs busy: the VMM's threads used %.2f of a host core over 10 s (cpu.stat: %s)\n",
	       share, path);
	ck_assert_msg(share <= 0.6, "%.2f of a core under --cpu-quota 0.5", share);
	st = wait_exit(pid);
	e = it_slurp(err);
	ck_assert_msg(st == 124, "status %d: %s", st, e);
	free(e);
	ck_assert_msg(gone(cpu) && gone(mem) && gone(pids), "%s, %s or %s left", cpu, mem, pids);
	m = it_slurp(metrics);
	ck_assert_msg(strstr(m, "\"cgroup\":{\"version\":") && strstr(m, "\"memory_max_bytes\":335544320,") &&
			      strstr(m, "\"cpu_quota_mcpu\":500,") && strstr(m, "\"vcpu_cpu_us\":["),
		      "metrics: %s", m);
	assert_both_vcpus_busy(m);
	printf("metrics: %s", m);
	free(m);
	m = it_slurp(out);
	ck_assert_str_eq(m, "go 2\n"); /* --cpus 2: nproc in the guest is 2 */
	free(m);
}
END_TEST

/* The same loops, no cgroup: they get more than the quota allowed (else
 * the test above proves nothing on this host), and no cgroup is made. */
START_TEST(no_cgroup_baseline)
{
	char ours[CG_PATH_MAX], its[CG_PATH_MAX], *e;
	double share;
	pid_t pid;

	if (!have_cgroups)
		return;
	pid = running[0] =
		SPAWN("run", GUEST, "--cpus", "2", "--no-cgroup", "--metrics", metrics, "--timeout", "18", "--", BUSY2);
	ck_assert_msg(wait_text(out, "go", pid), "the job never started: %s", e = it_slurp(err));
	vmm_dir(getpid(), CG_MEMORY, ours);
	vmm_dir(pid, CG_MEMORY, its);
	ck_assert_str_eq(its, ours);
	share = busy_share(pid);
	printf("--no-cgroup: the VMM's threads used %.2f of a host core over 10 s\n", share);
	ck_assert_int_eq(wait_exit(pid), 124);
	e = it_slurp(metrics);
	ck_assert_msg(strstr(e, "\"cgroup\":null"), "metrics: %s", e);
	assert_both_vcpus_busy(e);
	free(e);
	/* On a host busy with other work the loop gets less than the quota
	 * would allow anyway: then there is nothing to compare. */
	if (host_idle_enough())
		ck_assert_msg(share > 0.6, "only %.2f of a core without a quota", share);
	else
		printf("host too busy to compare with the quota's share\n");
}
END_TEST

/* Run ARGS, wait for its cgroup, then for its end: status; the cgroup
 * must be gone. */
static int ends_without_cgroup(const char *const *args, const char *what)
{
	char mem[CG_PATH_MAX], pids[CG_PATH_MAX], *e;
	pid_t pid = running[0] = spawn(args, out, err);
	int st;

	/* Both of the VM's own: read at once after the memory one, pids
	 * could still be the VMM's home (it enters them one by one, and a
	 * template made first enters and leaves them too), which is never
	 * gone. */
	wait_cgroup(pid, CG_MEMORY, mem);
	wait_cgroup(pid, CG_PIDS, pids);
	st = wait_exit(pid);
	e = it_slurp(err);
	printf("%s: status %d\n", what, st);
	ck_assert_msg(gone(mem) && gone(pids), "%s: %s or %s left; stderr: %s", what, mem, pids, e);
	free(e);
	return st;
}

START_TEST(gone_after_ttl)
{
	if (!have_cgroups)
		return;
	ck_assert_int_eq(ends_without_cgroup((const char *const[]){ "run", GUEST, "--cgroup-parent", parent, "--ttl",
								    "10", "--", "sleep", "1000", NULL },
					     "--ttl 10"),
			 124);
}
END_TEST

START_TEST(gone_after_job_sigkill)
{
	if (!have_cgroups)
		return;
	ck_assert_int_eq(ends_without_cgroup((const char *const[]){ "run", GUEST, "--cgroup-parent", parent, "--", "sh",
								    "-c", "kill -9 $$", NULL },
					     "job SIGKILLed"),
			 128 + SIGKILL);
}
END_TEST

/* A VM whose VMM is stopped cannot answer: exec gives up on its job at
 * timeout + grace (status 124); SIGTERM then ends the VM, and its cgroup. */
START_TEST(exec_backstop_and_sigterm)
{
	char sock[64], xout[128], xerr[128], mem[CG_PATH_MAX], *s;
	double t0;
	pid_t vm, ex;
	int st;

	if (!have_cgroups)
		return;
	snprintf(sock, sizeof(sock), "/tmp/tinyvmm-it-cg-%d.sock", (int)getpid());
	it_tmp(xout, sizeof(xout), "cg-xout");
	it_tmp(xerr, sizeof(xerr), "cg-xerr");
	vm = running[0] = SPAWN("run", GUEST, "--cgroup-parent", parent, "--vsock-uds", sock, "--ttl", "600", "--",
				"sh", "-c", "echo up; sleep 1000");
	wait_cgroup(vm, CG_MEMORY, mem);
	ck_assert_msg(wait_text(out, "up", vm), "the VM's job never started: %s", s = it_slurp(err));
	/* A timeout the slow guest cannot reach before we stop it. */
	ex = running[1] = spawn((const char *const[]){ "exec", "--vsock-uds", sock, "--timeout", "10", "--", "sh", "-c",
						       "echo started; sleep 100", NULL },
				xout, xerr);
	ck_assert_msg(wait_text(xout, "started", ex), "exec's job never started: %s", s = it_slurp(xerr));
	kill(vm, SIGSTOP);
	t0 = now_s();
	st = wait_exit(ex);
	s = it_slurp(xerr);
	printf("exec --timeout 10 against a VM stopped once the job ran: status %d %.1f s later\n", st, now_s() - t0);
	ck_assert_msg(st == 124, "exec status %d: %s", st, s);
	ck_assert_msg(strstr(s, "gave up on it"), "exec stderr: %s", s);
	free(s);
	kill(vm, SIGCONT);
	kill(vm, SIGTERM);
	st = wait_exit(vm);
	ck_assert_msg(st == 128 + SIGTERM, "tinyvmm run status %d", st);
	ck_assert_msg(gone(mem), "%s left after SIGTERM", mem);
	unlink(sock);
	unlink(xout);
	unlink(xerr);
}
END_TEST

/* Asked for a limit on a host (here: a cgroup parent) that refuses it:
 * one line, status 125, no VM; a wrong limit option: 64. */
START_TEST(refused_limit_is_one_line)
{
	char *e;
	pid_t pid;
	int st;

	pid = SPAWN("run", GUEST, "--cpuset", "0-1;", "--", "true");
	st = wait_exit(pid);
	e = it_slurp(err);
	ck_assert_msg(st == 125 && !strcmp(e, "tinyvmm: cpuset '0-1;': expected a CPU list like 0-1,3\n"),
		      "status %d: %s", st, e);
	free(e);
	pid = SPAWN("run", GUEST, "--cpu-quota", "0.5", "--no-cgroup", "--", "true");
	st = wait_exit(pid);
	e = it_slurp(err);
	ck_assert_msg(st == 64 && !strcmp(e, "tinyvmm: --cpu-quota needs a cgroup, --no-cgroup says none\n"),
		      "status %d: %s", st, e);
	free(e);
	pid = SPAWN("run", GUEST, "--cpu-quota", "0.0001", "--", "true");
	st = wait_exit(pid);
	e = it_slurp(err);
	ck_assert_msg(st == 64 && strstr(e, "--cpu-quota: '0.0001' is not a number of CPUs"), "status %d: %s", st, e);
	free(e);
}
END_TEST

/* The first child of pid (0 while it has none): a jailed run's VMM. */
static pid_t first_child(pid_t pid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	return (pid_t)atoi(buf);
}

/* A jailed VMM sees no cgroup file system: tinyvmm puts its jailed child
 * into the VM's cgroup from outside, before the child builds the VM, and
 * removes it after (named after the child's pid). */
START_TEST(jailed_vm_in_its_cgroup)
{
	char cpu[CG_PATH_MAX], mem[CG_PATH_MAX], path[CG_PATH_MAX + 16], *e, *m;
	pid_t pid, vmm = 0;
	int st;

	if (!have_cgroups)
		return;
	pid = running[0] = SPAWN("run", "--jail", GUEST, "--cpu-quota", "0.5", "--cgroup-parent", parent, "--metrics",
				 metrics, "--timeout", "15", "--", "sh", "-c", "echo go; sleep 600");
	ck_assert_msg(wait_text(out, "go", pid), "the job never started: %s", e = it_slurp(err));
	vmm = first_child(pid);
	ck_assert_msg(vmm > 0, "tinyvmm %d has no jailed child", (int)pid);
	wait_cgroup(vmm, CG_CPU, cpu);
	vmm_dir(vmm, CG_MEMORY, mem);
	vmm_dir(pid, CG_CPU, path); /* the process outside the jail stays where it was */
	ck_assert_msg(!strstr(path, parent), "tinyvmm itself moved into %s", path);
	assert_half_core_limits(cpu, mem);
	st = wait_exit(pid);
	e = it_slurp(err);
	ck_assert_msg(st == 124, "status %d: %s", st, e);
	free(e);
	ck_assert_msg(gone(cpu) && gone(mem), "%s or %s left after the jailed run", cpu, mem);
	/* The jailed child could not read them: tinyvmm outside the jail
	 * puts the cgroup's figures into its metrics. */
	m = it_slurp(metrics);
	ck_assert_msg(strstr(m, "\"cgroup\":{\"version\":") && strstr(m, "\"memory_max_bytes\":335544320,") &&
			      strstr(m, "\"cpu_quota_mcpu\":500,") && strstr(m, parent) &&
			      !strstr(m, "\"memory_peak_bytes\":null"),
		      "metrics of a jailed run: %s", m);
	free(m);
}
END_TEST

/* A jailed VMM that its cgroup's memory limit ends is reported as such
 * (the service's end_reason "oom"): here the limit is the parent's, 96 MiB,
 * and the job touches 160 MiB of the guest's 256. */
START_TEST(jailed_vm_past_its_memory_says_oom)
{
	char pmem[CG_PATH_MAX], lim[CG_PATH_MAX + 32], mem[CG_PATH_MAX + 16], *e;
	pid_t pid, vmm;
	FILE *f;
	int st;

	if (!have_cgroups)
		return;
	parent_dir(CG_MEMORY, pmem);
	mkdir(pmem, 0755);
	snprintf(lim, sizeof(lim), "%s/memory.max", pmem);
	if (access(lim, F_OK) != 0) /* cgroup v1 */
		snprintf(lim, sizeof(lim), "%s/memory.limit_in_bytes", pmem);
	f = fopen(lim, "w");
	ck_assert_msg(f && fprintf(f, "%d\n", 96 << 20) > 0 && fclose(f) == 0, "%s: %s", lim, strerror(errno));
	pid = running[0] = SPAWN("run", "--jail", GUEST, "--cgroup-parent", parent, "--", "python3", "-c",
				 "import time; time.sleep(1); b = b'x' * (160 << 20); print(len(b))");
	vmm = 0;
	for (int i = 0; i < 600 && vmm <= 0 && waitpid(pid, NULL, WNOHANG) == 0; i++, usleep(100000))
		vmm = first_child(pid);
	snprintf(mem, sizeof(mem), "%s/%d", pmem, (int)vmm); /* the VM's cgroup */
	st = wait_exit(pid);
	e = it_slurp(err);
	printf("a jailed VM past its memory: status %d: %s", st, e);
	ck_assert_msg(st == TVM_OOM_EXIT && strstr(e, "out-of-memory killer ended it"), "status %d: %s", st, e);
	ck_assert_msg(vmm <= 0 || gone(mem), "%s left", mem);
	free(e);
}
END_TEST

static Suite *cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *limits = tcase_create("limits"), *ends = tcase_create("ends");

	/* Each case starts with the template (CK_RUN_CASE runs one alone). */
	tcase_add_checked_fixture(limits, setup, teardown);
	tcase_set_timeout(limits, 1800);
	tcase_add_test(limits, template_made);
	tcase_add_test(limits, refused_limit_is_one_line);
	tcase_add_test(limits, cpu_quota_holds);
	tcase_add_test(limits, no_cgroup_baseline);
	tcase_add_test(limits, jailed_vm_in_its_cgroup);
	tcase_add_test(limits, jailed_vm_past_its_memory_says_oom);
	suite_add_tcase(s, limits);
	tcase_add_checked_fixture(ends, setup, teardown);
	tcase_set_timeout(ends, 1800);
	tcase_add_test(ends, template_made);
	tcase_add_test(ends, gone_after_ttl);
	tcase_add_test(ends, gone_after_job_sigkill);
	tcase_add_test(ends, exec_backstop_and_sigterm);
	suite_add_tcase(s, ends);
	return s;
}

int main(void)
{
	return it_run_suite(cgroup_suite());
}
