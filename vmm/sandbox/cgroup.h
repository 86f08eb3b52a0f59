/* Host cgroups for a VM: one cgroup per VM that holds the whole VMM
 * process while the VM exists, with its CPU, memory and task limits.
 *
 * Both kinds of host are served: cgroup v2 (one hierarchy whose
 * cgroup.controllers lists what it offers) and cgroup v1 (one hierarchy per
 * controller, e.g. /sys/fs/cgroup/cpu, /sys/fs/cgroup/memory). The v2
 * hierarchy is used when it offers every controller needed, else the v1
 * ones. The VM's cgroup is, in every hierarchy used:
 *   MOUNT/OWN/PARENT/PID   parent relative ("tinyvmm", the default)
 *   MOUNT/PARENT/PID       parent absolute ("/tinyvmm")
 * where OWN is the cgroup the process was started in (/proc/self/cgroup).
 * A relative parent keeps the VMM inside that cgroup, so whatever limits
 * and accounting hold there still hold. On v2 the controllers are enabled
 * (cgroup.subtree_control) from the first directory down; cgroup v2 allows
 * that only where no process lives ("no internal processes"), so a
 * process in a non-root v2 cgroup needs an absolute parent or one
 * delegated to it.
 *
 * Files written (v2 / v1): cpu.max / cpu.cfs_quota_us + cpu.cfs_period_us
 * (period 100 ms), cpuset.cpus (v1 also cpuset.mems, copied from the
 * parent), memory.max / memory.limit_in_bytes, pids.max, then cgroup.procs.
 * A cgroup left by a VMM that died (SIGKILL) is empty and named after a
 * pid that no longer exists: the next cg_create under the same parent
 * removes it. (A pid is looked up in this process's pid namespace: a
 * directory of a VMM in another one may look stale, and is removed only
 * if it is empty, as rmdir requires.)
 */
#ifndef TVM_CGROUP_H
#define TVM_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#include "vmm/core/tvm_types.h"

enum cg_ctrl { CG_CPU, CG_MEMORY, CG_PIDS, CG_CPUSET, CG_NR_CTRL };

#define CG_PATH_MAX 1024     /* mount point, cgroup path, or both joined */
#define CG_MAX_HIER 8        /* hierarchies remembered by detection */
#define CG_PERIOD_US 100000u /* CPU quota period */

/* One mounted cgroup hierarchy that holds a controller we use. */
struct cg_hier {
	int v2;
	unsigned ctrls;        /* 1u << enum cg_ctrl, those it offers to this process */
	char mnt[CG_PATH_MAX]; /* mount point */
	char own[CG_PATH_MAX]; /* the process's cgroup below mnt: "" (mnt itself) or "/a/b" */
};

/* What detection found on this host. */
struct cg_host {
	struct cg_hier h[CG_MAX_HIER];
	unsigned n;
};

/* The files detection reads; a NULL field is the real one
 * (/proc/self/mountinfo, /proc/self/cgroup). Unit tests give fakes; a
 * /proc/PID/cgroup finds another process's cgroups. */
struct cg_sources {
	const char *mountinfo;
	const char *proc_cgroup;
};

/* Find the cgroup hierarchies mounted here that offer cpu, memory, pids or
 * cpuset, and this process's cgroup in each. A host with none is not an
 * error (h->n == 0). Returns 0, or -errno when a file cannot be read. */
int cg_detect(const struct cg_sources *src, struct cg_host *h, struct tvm_err *e);

/* The limits of one VM's cgroup; a zero field sets nothing. */
struct cg_limits {
	uint32_t cpu_quota_mcpu; /* CPU time per period, thousandths of a core (500: half a core) */
	const char *cpuset;      /* host CPUs the VMM may run on, "0-1,3" */
	uint64_t mem_max;        /* bytes */
	uint32_t pids_max;       /* tasks (threads) */
};

/* Check a parent path ("a/b" or "/a/b": letters, digits, ._@:+- in each
 * component, no . or .. component, at most 255 bytes) and the limits'
 * syntax and ranges (quota 10..1000000 thousandths; cpuset digits, ',' and
 * '-'), touching nothing. Returns 0 or -EINVAL with one line naming the
 * value. */
int cg_check(const char *parent, const struct cg_limits *l, struct tvm_err *e);

/* The controllers the limits need: memory and pids always (the VM's
 * memory peak is reported even without a limit), cpu with a quota, cpuset
 * with a CPU list. */
unsigned cg_needed(const struct cg_limits *l);

struct cgroup;

/* Make the VM's cgroup under parent in every hierarchy needed (stale ones
 * of dead VMMs removed first), write the limits and move process pid into
 * it. Returns 0 and *out, or -errno with one line: -ENOTSUP when the host
 * has no usable hierarchy for a controller needed, -EACCES/-EROFS when the
 * cgroup file system may not be written, -EBUSY when the cgroup exists and
 * holds processes, or the failed write's error. On failure nothing is
 * left: the process is back where it was. */
int cg_create(const struct cg_host *h, const char *parent, const struct cg_limits *l, pid_t pid, struct cgroup **out,
	      struct tvm_err *e);

/* Move the process back to the cgroups it came from, remove the VM's
 * cgroup directories and free cg (NULL allowed). */
void cg_destroy(struct cgroup *cg);

enum cg_stat {
	CG_MEM_PEAK,         /* bytes: memory.peak / memory.max_usage_in_bytes */
	CG_MEM_MAX,          /* bytes: the memory limit as the kernel holds it */
	CG_CPU_THROTTLED_US, /* time the quota held the cgroup back (cpu.stat) */
	CG_MEM_OOM_KILLS,    /* processes the memory limit's OOM killer ended (memory.events / memory.oom_control) */
};

/* Read one figure of the live cgroup. Returns 0, -ENOENT when the kernel
 * does not provide it (e.g. memory.peak before Linux 5.19, no cpu
 * controller used), or another -errno. */
int cg_stat(const struct cgroup *cg, enum cg_stat s, uint64_t *out);

/* The cgroup's directory holding controller c, NULL when c is not used. */
const char *cg_dir(const struct cgroup *cg, enum cg_ctrl c);

/* 2 or 1. */
int cg_version(const struct cgroup *cg);

#endif
