/* Host cgroups (vmm/sandbox/cgroup.c) on a fake cgroup file system: a
 * temporary directory holds a mountinfo, a /proc/PID/cgroup and the
 * "mounted" hierarchies as plain directories with their control files.
 * Checked: detection of v1 and v2 hierarchies (the development host's
 * shape: v1 controllers and an empty v2), the process's own cgroup below a
 * mount's root, paths built from parent and pid, the values written (quota,
 * memory, pids, cpusets inherited on v1, controllers enabled on v2), stale
 * cgroups of dead pids removed, one-line errors, nothing left on failure.
 * (A plain directory holding files cannot be removed as a cgroup can, so
 * removal is checked on the paths that leave the directory empty.) */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit.h"
#include "vmm/core/err.h"
#include "vmm/sandbox/cgroup.h"

static char tmp[64];

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/tinyvmm-cg-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

/* tmp/PATH (printf-style) into buf. */
static const char *at(char *buf, const char *fmt, ...)
{
	char rel[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(buf, CG_PATH_MAX, "%s/%s", tmp, rel);
	return buf;
}

/* mkdir -p tmp/PATH */
static void dir(const char *rel)
{
	char cmd[CG_PATH_MAX + 32], p[CG_PATH_MAX];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", at(p, "%s", rel));
	ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *rel, const char *text)
{
	char p[CG_PATH_MAX];
	FILE *f = fopen(at(p, "%s", rel), "w");

	ck_assert_msg(f != NULL, "%s", p);
	fputs(text, f);
	fclose(f);
}

/* Contents of tmp/PATH, trailing newline dropped; "<missing>" if absent. */
static const char *get(const char *rel)
{
	static char buf[4096];
	char p[CG_PATH_MAX];
	FILE *f = fopen(at(p, "%s", rel), "r");
	size_t n;

	if (!f)
		return "<missing>";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return buf;
}

static int exists(const char *rel)
{
	char p[CG_PATH_MAX];
	struct stat st;

	return stat(at(p, "%s", rel), &st) == 0;
}

/* A mountinfo line for a cgroup mount of tmp/MNT. */
static void mount_line(FILE *f, int id, const char *root, const char *mnt, const char *fstype, const char *opts)
{
	fprintf(f, "%d 31 0:%d %s %s/%s rw,nosuid,nodev,noexec,relatime shared:%d - %s cgroup %s\n", id, id, root, tmp,
		mnt, id, fstype, opts);
}

static void detect(struct cg_host *h)
{
	char mi[CG_PATH_MAX], pc[CG_PATH_MAX];
	struct cg_sources src = { at(mi, "mountinfo"), at(pc, "proc_cgroup") };
	struct tvm_err e = { 0 };

	ck_assert_msg(cg_detect(&src, h, &e) == 0, "%s", e.msg);
}

/* This host's shape: v1 cpu (with cpuacct), memory (the process in a
 * cgroup of its own), pids, cpuset, devices, a named hierarchy, and an
 * empty v2. */
static void fake_v1_host(void)
{
	char p[CG_PATH_MAX];
	FILE *f = fopen(at(p, "mountinfo"), "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "25 1 0:23 / /proc rw,nosuid - proc proc rw\n");
	fprintf(f, "31 25 0:28 / %s rw,relatime - tmpfs tmpfs rw,mode=755\n", tmp);
	mount_line(f, 32, "/", "cpu,cpuacct", "cgroup", "rw,cpu,cpuacct");
	mount_line(f, 34, "/", "cpuset", "cgroup", "rw,cpuset");
	mount_line(f, 35, "/", "mem\\040ory", "cgroup", "rw,memory");
	mount_line(f, 36, "/", "devices", "cgroup", "rw,devices");
	mount_line(f, 39, "/", "pids", "cgroup", "rw,pids");
	mount_line(f, 40, "/", "systemd", "cgroup", "rw,xattr,name=systemd");
	mount_line(f, 41, "/", "unified", "cgroup2", "rw,nsdelegate");
	fclose(f);
	put("proc_cgroup", "9:name=systemd:/\n8:pids:/\n6:devices:/\n4:memory:/sess/abc\n3:cpuset:/\n"
			   "2:cpu,cpuacct:/\n0::/\n");
	dir("unified");
	put("unified/cgroup.controllers", "hugetlb\n");
	dir("cpu,cpuacct");
	dir("cpuset");
	dir("mem ory/sess/abc");
	dir("pids");
	put("cpu,cpuacct/cgroup.procs", "");
	put("cpuset/cgroup.procs", "");
	put("cpuset/cpuset.cpus", "0-3\n");
	put("cpuset/cpuset.mems", "0\n");
	put("mem ory/sess/abc/cgroup.procs", "");
	put("pids/cgroup.procs", "");
}

/* A v2 host, the process in /user.slice/s.scope. */
static void fake_v2_host(const char *offered)
{
	char p[CG_PATH_MAX];
	FILE *f = fopen(at(p, "mountinfo"), "w");

	ck_assert_ptr_nonnull(f);
	mount_line(f, 30, "/", "v2", "cgroup2", "rw,nsdelegate,memory_recursiveprot");
	fclose(f);
	put("proc_cgroup", "0::/user.slice/s.scope\n");
	dir("v2/user.slice/s.scope");
	put("v2/user.slice/s.scope/cgroup.controllers", offered);
	put("v2/user.slice/s.scope/cgroup.procs", "");
	put("v2/cgroup.subtree_control", "cpu memory pids\n");
}

START_TEST(detect_v1_and_empty_v2)
{
	struct cg_host h;
	char p[CG_PATH_MAX];

	fake_v1_host();
	detect(&h);
	/* cpu,cpuacct; cpuset; memory; pids: not devices, systemd, nor the v2
	 * that offers none of ours. */
	ck_assert_uint_eq(h.n, 4);
	ck_assert_int_eq(h.h[0].v2, 0);
	ck_assert_str_eq(h.h[0].mnt, at(p, "cpu,cpuacct"));
	ck_assert_uint_eq(h.h[0].ctrls, 1u << CG_CPU);
	ck_assert_str_eq(h.h[0].own, "");
	ck_assert_uint_eq(h.h[1].ctrls, 1u << CG_CPUSET);
	ck_assert_str_eq(h.h[2].mnt, at(p, "mem ory")); /* \040 decoded */
	ck_assert_uint_eq(h.h[2].ctrls, 1u << CG_MEMORY);
	ck_assert_str_eq(h.h[2].own, "/sess/abc");
	ck_assert_uint_eq(h.h[3].ctrls, 1u << CG_PIDS);
}
END_TEST

START_TEST(detect_v2)
{
	struct cg_host h;

	fake_v2_host("cpuset cpu io memory hugetlb pids rdma misc\n");
	detect(&h);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_int_eq(h.h[0].v2, 1);
	ck_assert_uint_eq(h.h[0].ctrls, 0xf);
	ck_assert_str_eq(h.h[0].own, "/user.slice/s.scope");
}
END_TEST

/* A mount showing a subtree (a container's): the process's path is made
 * relative to the mount's root; outside it, the mount is of no use. */
START_TEST(detect_mount_root)
{
	char p[CG_PATH_MAX];
	struct cg_host h;
	FILE *f = fopen(at(p, "mountinfo"), "w");

	mount_line(f, 35, "/docker/c1", "memory", "cgroup", "rw,memory");
	mount_line(f, 39, "/docker/c1", "pids", "cgroup", "rw,pids");
	fclose(f);
	put("proc_cgroup", "8:pids:/elsewhere\n4:memory:/docker/c1/job\n");
	detect(&h);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_str_eq(h.h[0].own, "/job");
	ck_assert_uint_eq(h.h[0].ctrls, 1u << CG_MEMORY);
	put("proc_cgroup", "4:memory:/docker/c10\n");
	detect(&h);
	ck_assert_uint_eq(h.n, 0); /* /docker/c10 is not below /docker/c1 */
}
END_TEST

START_TEST(detect_missing_files)
{
	struct cg_sources src = { "/nonexistent/mountinfo", "/proc/self/cgroup" };
	struct cg_host h;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(cg_detect(&src, &h, &e), -ENOENT);
	ck_assert_str_eq(e.msg, "cgroup: /nonexistent/mountinfo: No such file or directory");
}
END_TEST

static void assert_one_line(const struct tvm_err *e)
{
	ck_assert_uint_gt(strlen(e->msg), 0);
	ck_assert_ptr_null(strchr(e->msg, '\n'));
}

START_TEST(check_values)
{
	static const char *const good[] = { "tinyvmm", "/tinyvmm", "a/b.c/d-e_f@g:h+i", "/x/y" };
	static const char *const bad[] = { "", "/", "a//b", "a/", "a/../b", "..", "./a", "a b", "a\nb", "a/$x" };
	struct cg_limits l = { 0 };
	struct tvm_err e = { 0 };
	char long_name[300];

	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(cg_check(good[i], &l, &e) == 0, "%s: %s", good[i], e.msg);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(cg_check(bad[i], &l, &e) == -EINVAL, "'%s' passed", bad[i]);
		ck_assert_ptr_nonnull(strstr(e.msg, "cgroup parent"));
	}
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	ck_assert_int_eq(cg_check(long_name, &l, &e), -EINVAL);
	long_name[255] = 0;
	ck_assert_int_eq(cg_check(long_name, &l, &e), 0);

	l.cpu_quota_mcpu = 9;
	ck_assert_int_eq(cg_check("p", &l, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "cpu quota: 0.009 CPUs is out of range 0.01..1000");
	l.cpu_quota_mcpu = 10;
	ck_assert_int_eq(cg_check("p", &l, &e), 0);
	l.cpu_quota_mcpu = 1000000;
	ck_assert_int_eq(cg_check("p", &l, &e), 0);
	l.cpu_quota_mcpu = 1000001;
	ck_assert_int_eq(cg_check("p", &l, &e), -EINVAL);
	l.cpu_quota_mcpu = 0;

	static const char *const sets_ok[] = { "0", "0-1,3", "12" };
	static const char *const sets_bad[] = { "", "a", "-1", "0\n", "0 1", "0;1" };
	for (unsigned i = 0; i < sizeof(sets_ok) / sizeof(sets_ok[0]); i++) {
		l.cpuset = sets_ok[i];
		ck_assert_msg(cg_check("p", &l, &e) == 0, "%s: %s", sets_ok[i], e.msg);
	}
	for (unsigned i = 0; i < sizeof(sets_bad) / sizeof(sets_bad[0]); i++) {
		l.cpuset = sets_bad[i];
		ck_assert_msg(cg_check("p", &l, &e) == -EINVAL, "'%s' passed", sets_bad[i]);
		ck_assert_ptr_nonnull(strstr(e.msg, "cpuset"));
	}
}
END_TEST

/* The VM's directories made ahead, with the control files the kernel
 * would give them (a plain directory has none). */
static void fake_v1_vm_dirs(int pid)
{
	char p[256];
	static const char *const files[][2] = {
		{ "cpu,cpuacct/tinyvmm/%d", "cpu.cfs_quota_us" },
		{ "cpu,cpuacct/tinyvmm/%d", "cpu.cfs_period_us" },
		{ "cpuset/tinyvmm/%d", "cpuset.cpus" },
		{ "cpuset/tinyvmm/%d", "cpuset.mems" },
		{ "mem ory/sess/abc/tinyvmm/%d", "memory.limit_in_bytes" },
		{ "mem ory/sess/abc/tinyvmm/%d", "memory.max_usage_in_bytes" },
		{ "pids/tinyvmm/%d", "pids.max" },
	};

	put("cpuset/cgroup.procs", "");
	dir("cpuset/tinyvmm");
	put("cpuset/tinyvmm/cpuset.cpus", "\n");
	put("cpuset/tinyvmm/cpuset.mems", "");
	for (unsigned i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char d[128];

		snprintf(d, sizeof(d), files[i][0], pid);
		dir(d);
		snprintf(p, sizeof(p), "%s/%s", d, files[i][1]);
		put(p, "");
		snprintf(p, sizeof(p), "%s/cgroup.procs", d);
		put(p, "");
	}
}

START_TEST(create_v1)
{
	struct cg_limits l = { .cpu_quota_mcpu = 500, .cpuset = "1", .mem_max = 320ull << 20, .pids_max = 65 };
	struct cgroup *cg = NULL;
	struct tvm_err e = { 0 };
	struct cg_host h;
	char p[CG_PATH_MAX], f[128];
	uint64_t v;
	int pid = (int)getpid();

	fake_v1_host();
	fake_v1_vm_dirs(pid);
	dir("mem ory/sess/abc/tinyvmm/1");
	put("mem ory/sess/abc/tinyvmm/1/cgroup.procs", "1\n"); /* pid 1 lives: kept */
	detect(&h);
	ck_assert_msg(cg_create(&h, "tinyvmm", &l, pid, &cg, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(cg_version(cg), 1);
#define VM(ctrl, file) (snprintf(f, sizeof(f), ctrl "/tinyvmm/%d/" file, pid), get(f))
	ck_assert_str_eq(VM("cpu,cpuacct", "cpu.cfs_quota_us"), "50000");
	ck_assert_str_eq(VM("cpu,cpuacct", "cpu.cfs_period_us"), "100000");
	ck_assert_str_eq(VM("mem ory/sess/abc", "memory.limit_in_bytes"), "335544320");
	ck_assert_str_eq(VM("pids", "pids.max"), "65");
	ck_assert_str_eq(VM("cpuset", "cpuset.cpus"), "1");
	/* v1 cpuset: the parent made got the root's CPUs and nodes, the VM's
	 * the nodes of its parent. */
	ck_assert_str_eq(get("cpuset/tinyvmm/cpuset.cpus"), "0-3");
	ck_assert_str_eq(VM("cpuset", "cpuset.mems"), "0");
	/* The process moved in, in every hierarchy. */
	snprintf(p, sizeof(p), "%d", pid);
	ck_assert_str_eq(VM("cpu,cpuacct", "cgroup.procs"), p);
	ck_assert_str_eq(VM("mem ory/sess/abc", "cgroup.procs"), p);
	ck_assert_str_eq(VM("pids", "cgroup.procs"), p);
	ck_assert_str_eq(VM("cpuset", "cgroup.procs"), p);
	ck_assert_str_eq(cg_dir(cg, CG_MEMORY), at(p, "mem ory/sess/abc/tinyvmm/%d", pid));
	ck_assert_ptr_null(cg_dir(NULL, CG_CPU));
	VM("mem ory/sess/abc", "memory.max_usage_in_bytes");
	put(f, "123456789\n");
	ck_assert_int_eq(cg_stat(cg, CG_MEM_PEAK, &v), 0);
	ck_assert_uint_eq(v, 123456789);
	ck_assert_int_eq(cg_stat(cg, CG_MEM_MAX, &v), 0);
	ck_assert_uint_eq(v, 335544320);
	ck_assert_int_eq(cg_stat(cg, CG_CPU_THROTTLED_US, &v), -ENOENT); /* no cpu.stat file */
	VM("cpu,cpuacct", "cpu.stat");
	put(f, "nr_periods 9\nnr_throttled 3\nthrottled_time 4500000\n");
	ck_assert_int_eq(cg_stat(cg, CG_CPU_THROTTLED_US, &v), 0);
	ck_assert_uint_eq(v, 4500);
	/* v1 names the OOM kills in memory.oom_control, after oom_kill_disable */
	VM("mem ory/sess/abc", "memory.oom_control");
	put(f, "oom_kill_disable 7\nunder_oom 0\noom_kill 2\n");
	ck_assert_int_eq(cg_stat(cg, CG_MEM_OOM_KILLS, &v), 0);
	ck_assert_uint_eq(v, 2);
	cg_destroy(cg);
	/* Back home in every hierarchy (the own memory cgroup for memory). */
	snprintf(p, sizeof(p), "%d", pid);
	ck_assert_str_eq(get("mem ory/sess/abc/cgroup.procs"), p);
	ck_assert_str_eq(get("pids/cgroup.procs"), p);
	ck_assert_str_eq(get("cpu,cpuacct/cgroup.procs"), p);
	ck_assert_int_eq(exists("mem ory/sess/abc/tinyvmm/1"), 1);
#undef VM
}
END_TEST

START_TEST(create_v2)
{
	struct cg_limits l = { .cpu_quota_mcpu = 2000, .mem_max = 1ull << 30, .pids_max = 66 };
	struct cgroup *cg = NULL;
	struct tvm_err e = { 0 };
	struct cg_host h;
	char p[CG_PATH_MAX], d[128];
	int pid = (int)getpid();
	uint64_t v;

	fake_v2_host("cpuset cpu memory pids\n");
	/* Absolute parent: from the hierarchy's root, not the session scope. */
	dir("v2/vms/tinyvmm");
	put("v2/vms/cgroup.subtree_control", "memory\n");
	put("v2/vms/tinyvmm/cgroup.subtree_control", "");
	snprintf(d, sizeof(d), "v2/vms/tinyvmm/%d", pid);
	dir(d);
	static const char *const files[] = { "cpu.max", "memory.max", "pids.max", "cgroup.procs", "memory.peak" };
	for (unsigned i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		put(at(p, "%s/%s", d, files[i]) + strlen(tmp) + 1, "");
	detect(&h);
	ck_assert_msg(cg_create(&h, "/vms/tinyvmm", &l, pid, &cg, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(cg_version(cg), 2);
	ck_assert_str_eq(cg_dir(cg, CG_CPU), at(p, "%s", d));
	ck_assert_str_eq(cg_dir(cg, CG_PIDS), at(p, "%s", d));
	ck_assert_ptr_null(cg_dir(cg, CG_CPUSET)); /* not asked for */
	/* Controllers enabled from the root down, only those missing. */
	ck_assert_str_eq(get("v2/cgroup.subtree_control"), "cpu memory pids");
	ck_assert_str_eq(get("v2/vms/cgroup.subtree_control"), "+cpu +pids");
	ck_assert_str_eq(get("v2/vms/tinyvmm/cgroup.subtree_control"), "+cpu +memory +pids");
	ck_assert_str_eq(get(at(p, "%s/cpu.max", d) + strlen(tmp) + 1), "200000 100000");
	ck_assert_str_eq(get(at(p, "%s/memory.max", d) + strlen(tmp) + 1), "1073741824");
	ck_assert_str_eq(get(at(p, "%s/pids.max", d) + strlen(tmp) + 1), "66");
	put(at(p, "%s/memory.events", d) + strlen(tmp) + 1, "low 0\nhigh 0\nmax 9\noom 4\noom_kill 3\n");
	ck_assert_int_eq(cg_stat(cg, CG_MEM_OOM_KILLS, &v), 0);
	ck_assert_uint_eq(v, 3);
	cg_destroy(cg);
	/* Home is the session scope, whatever the parent. */
	snprintf(d, sizeof(d), "%d", pid);
	ck_assert_str_eq(get("v2/user.slice/s.scope/cgroup.procs"), d);
}
END_TEST

/* Empty cgroups of dead pids go; live ones, non-empty ones and other names
 * stay. Then a kernel that lacks a control file (here: a plain directory)
 * fails the create with one line, and the new directory is removed. */
START_TEST(stale_removed_and_failure_cleaned)
{
	struct cg_limits l = { .mem_max = 1 << 30, .pids_max = 10 };
	struct cgroup *cg = (struct cgroup *)&cg;
	struct tvm_err e = { 0 };
	struct cg_host h;
	char p[CG_PATH_MAX], name[CG_PATH_MAX];
	int pid = (int)getpid(), dead, st;

	dead = fork();
	if (!dead)
		_exit(0);
	ck_assert_int_eq(waitpid(dead, &st, 0), dead);
	fake_v1_host();
	snprintf(name, sizeof(name), "pids/tinyvmm/%d", dead);
	dir(name);
	dir("pids/tinyvmm/1");
	dir("pids/tinyvmm/0123");
	dir("pids/tinyvmm/notapid");
	snprintf(name, sizeof(name), "mem ory/sess/abc/tinyvmm/%d", dead);
	dir(name);
	put(at(p, "%s/x", name) + strlen(tmp) + 1, ""); /* not empty: kept */
	detect(&h);
	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, pid, &cg, &e), -ENOENT);
	ck_assert_ptr_null(cg);
	snprintf(name, sizeof(name), "cgroup %s/mem ory/sess/abc/tinyvmm/%d/memory.limit_in_bytes: ", tmp, pid);
	ck_assert_str_eq(e.msg, strcat(name, "No such file or directory"));
	assert_one_line(&e);
	snprintf(name, sizeof(name), "mem ory/sess/abc/tinyvmm/%d", pid);
	ck_assert_int_eq(exists(name), 0);
	snprintf(name, sizeof(name), "mem ory/sess/abc/tinyvmm/%d", dead);
	ck_assert_int_eq(exists(name), 1);
	/* The pids hierarchy comes after memory: its stale one is still there
	 * (creation stopped at memory); a create that reaches it removes it. */
	snprintf(name, sizeof(name), "mem ory/sess/abc/tinyvmm/%d", pid);
	dir(name);
	put(at(p, "%s/memory.limit_in_bytes", name) + strlen(tmp) + 1, "");
	put(at(p, "%s/cgroup.procs", name) + strlen(tmp) + 1, "");
	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, pid, &cg, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "pids.max"));
	snprintf(name, sizeof(name), "pids/tinyvmm/%d", dead);
	ck_assert_int_eq(exists(name), 0);
	ck_assert_int_eq(exists("pids/tinyvmm/1"), 1);
	ck_assert_int_eq(exists("pids/tinyvmm/0123"), 1);
	ck_assert_int_eq(exists("pids/tinyvmm/notapid"), 1);
	/* The memory one was entered before pids failed: moved back home. */
	snprintf(name, sizeof(name), "%d", pid);
	ck_assert_str_eq(get("mem ory/sess/abc/cgroup.procs"), name);
}
END_TEST

START_TEST(own_name_in_use)
{
	struct cg_limits l = { .mem_max = 1 << 30 };
	struct cgroup *cg = NULL;
	struct tvm_err e = { 0 };
	struct cg_host h;
	char name[64];
	int pid = (int)getpid();

	fake_v1_host();
	dir("mem ory/sess/abc/tinyvmm");
	snprintf(name, sizeof(name), "mem ory/sess/abc/tinyvmm/%d", pid);
	dir(name);
	strcat(name, "/cgroup.procs");
	put(name, "777\n");
	detect(&h);
	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, pid, &cg, &e), -EBUSY);
	ck_assert_ptr_nonnull(strstr(e.msg, "already exists and is in use"));
	assert_one_line(&e);
	ck_assert_str_eq(get(name), "777"); /* untouched */
}
END_TEST

START_TEST(no_usable_controller)
{
	struct cg_limits l = { .mem_max = 1 << 30 };
	struct cgroup *cg = NULL;
	struct tvm_err e = { 0 };
	struct cg_host h = { .n = 0 };
	char p[CG_PATH_MAX];
	FILE *f;

	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, 1, &cg, &e), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(e.msg, "no cgroup hierarchy"));
	/* memory mounted, pids nowhere, v2 offers only memory. */
	f = fopen(at(p, "mountinfo"), "w");
	mount_line(f, 35, "/", "memory", "cgroup", "rw,memory");
	mount_line(f, 41, "/", "unified", "cgroup2", "rw");
	fclose(f);
	put("proc_cgroup", "4:memory:/\n0::/\n");
	dir("unified");
	put("unified/cgroup.controllers", "memory\n");
	detect(&h);
	ck_assert_uint_eq(h.n, 2);
	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, 1, &cg, &e), -ENOTSUP);
	ck_assert_str_eq(e.msg, "cgroup: this host has no usable pids controller (not in cgroup v2's "
				"cgroup.controllers, no cgroup v1 hierarchy of it)");
	ck_assert_ptr_null(cg);
	/* A wrong value is refused before the host is looked at. */
	l.cpuset = "x";
	ck_assert_int_eq(cg_create(&h, "tinyvmm", &l, 1, &cg, &e), -EINVAL);
}
END_TEST

static Suite *cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("fake cgroupfs");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, detect_v1_and_empty_v2);
	tcase_add_test(tc, detect_v2);
	tcase_add_test(tc, detect_mount_root);
	tcase_add_test(tc, detect_missing_files);
	tcase_add_test(tc, check_values);
	tcase_add_test(tc, create_v1);
	tcase_add_test(tc, create_v2);
	tcase_add_test(tc, stale_removed_and_failure_cleaned);
	tcase_add_test(tc, own_name_in_use);
	tcase_add_test(tc, no_usable_controller);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(cgroup_suite());
}
