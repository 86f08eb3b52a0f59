/* Per-job cgroups (cgroup v2, Documentation/admin-guide/cgroup-v2.rst):
 * each job runs in its own child of the root cgroup, so that its timeout or
 * a kill ends every process it started (cgroup.kill reaches processes that
 * left its process group with setsid), and optional memory.max and pids.max
 * hold it. What hit a limit is read back from memory.events and pids.events
 * for the RESULT's flags.
 *
 * Only the agent as the guest's init sets this up (jobcg_setup); without a
 * cgroup2 file system (a kernel built without CONFIG_CGROUPS, or test mode)
 * jobs run as before and a job that asks for limits is refused. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"
/* Cgroups of ended jobs that still held processes (a setsid'd child that
 * outlived its job normally): removed once empty. Bounded: past it the
 * oldest is forgotten (it stays, empty or not, costing a few KiB). */
#define CG_LINGER_MAX 64

static bool cg_ready, cg_memory, cg_pids;
static uint64_t cg_seq;
static uint64_t linger[CG_LINGER_MAX]; /* their seq */
static unsigned nlinger;

static int write_str(const char *dir, const char *file, const char *val)
{
	char path[96];
	int fd, rc = 0;
	size_t n = strlen(val);

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		rc = errno ? -errno : -EIO;
	close(fd);
	return rc;
}

/* The value of key in a flat-keyed file (memory.events, pids.events); 0 if
 * absent or unreadable. */
static uint64_t read_key(const char *dir, const char *file, const char *key)
{
	char path[96], buf[512], *p;
	size_t klen = strlen(key);
	uint64_t v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, klen) && p[klen] == ' ')
			v = strtoull(p + klen + 1, NULL, 10);
	return v;
}

void jobcg_setup(void)
{
	char ctl[128];
	int fd;
	ssize_t n;

	if (mount("cgroup2", CG_ROOT, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		/* ENODEV, ENOENT: a kernel without cgroups (a job asking for limits is told) */
		if (errno != ENODEV && errno != ENOENT)
			agent_log("mount %s: %s", CG_ROOT, strerror(errno));
		return;
	}
	fd = open(CG_ROOT "/cgroup.controllers", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, ctl, sizeof(ctl) - 1) : -1;
	if (fd >= 0)
		close(fd);
	ctl[n > 0 ? n : 0] = 0;
	cg_memory = strstr(ctl, "memory") && write_str(CG_ROOT, "cgroup.subtree_control", "+memory") == 0;
	cg_pids = strstr(ctl, "pids") && write_str(CG_ROOT, "cgroup.subtree_control", "+pids") == 0;
	cg_ready = true;
}

static void dir_of(const struct job_cg *cg, char *dir, size_t len)
{
	snprintf(dir, len, CG_ROOT "/job-%" PRIu64, cg->seq);
}

int jobcg_create(struct job_cg *cg, uint64_t mem_max, uint32_t pids_max, const char **what)
{
	char dir[64], val[24];
	int rc;

	*cg = (struct job_cg){ .procs_fd = -1 };
	*what = "cgroup";
	if (!cg_ready)
		return (mem_max || pids_max) ? -EOPNOTSUPP : 0;
	if ((mem_max && !cg_memory) || (pids_max && !cg_pids))
		return -EOPNOTSUPP;
	/* A root job may have made the next names itself: skip past them. */
	for (int tries = 0;; tries++) {
		cg->seq = ++cg_seq;
		dir_of(cg, dir, sizeof(dir));
		if (mkdir(dir, 0755) == 0)
			break;
		if (errno != EEXIST || tries == 64)
			return -errno;
	}
	cg->made = true;
	if (mem_max) {
		*what = "memory.max";
		snprintf(val, sizeof(val), "%" PRIu64, mem_max);
		if ((rc = write_str(dir, "memory.max", val)) < 0)
			goto fail;
		/* No swap in the guest, but say so: the limit is the job's RAM. */
		write_str(dir, "memory.swap.max", "0");
	}
	if (pids_max) {
		*what = "pids.max";
		snprintf(val, sizeof(val), "%" PRIu32, pids_max);
		rc = write_str(dir, "pids.max", val);
		/* Past the kernel's own most tasks (PID_MAX_LIMIT, 32768 for
		 * this small kernel) a limit can never be reached: none. */
		if (rc == -EINVAL)
			rc = write_str(dir, "pids.max", "max");
		if (rc < 0)
			goto fail;
	}
	*what = "cgroup.procs";
	strncat(dir, "/cgroup.procs", sizeof(dir) - strlen(dir) - 1);
	cg->procs_fd = open(dir, O_WRONLY | O_CLOEXEC);
	if (cg->procs_fd < 0) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	jobcg_release(cg);
	return rc;
}

void jobcg_started(struct job_cg *cg)
{
	if (cg->procs_fd >= 0)
		close(cg->procs_fd);
	cg->procs_fd = -1;
}

void jobcg_kill(const struct job_cg *cg)
{
	char dir[64];

	if (!cg->made)
		return;
	dir_of(cg, dir, sizeof(dir));
	write_str(dir, "cgroup.kill", "1");
}

uint8_t jobcg_result_flags(const struct job_cg *cg)
{
	char dir[64];
	uint8_t f = 0;

	if (!cg->made)
		return 0;
	dir_of(cg, dir, sizeof(dir));
	if (cg_memory && read_key(dir, "memory.events", "oom_kill"))
		f |= TVP_RESULT_OOM_KILLED;
	if (cg_pids && read_key(dir, "pids.events", "max"))
		f |= TVP_RESULT_PIDS_LIMITED;
	return f;
}

void jobcg_release(struct job_cg *cg)
{
	char dir[64];

	jobcg_started(cg);
	if (!cg->made)
		return;
	cg->made = false;
	dir_of(cg, dir, sizeof(dir));
	if (rmdir(dir) == 0 || errno != EBUSY)
		return;
	if (nlinger == CG_LINGER_MAX) {
		memmove(linger, linger + 1, sizeof(linger[0]) * (CG_LINGER_MAX - 1));
		nlinger--;
	}
	linger[nlinger++] = cg->seq;
}

unsigned jobcg_sweep(void)
{
	unsigned k = 0;
	char dir[64];

	for (unsigned i = 0; i < nlinger; i++) {
		dir_of(&(struct job_cg){ .seq = linger[i] }, dir, sizeof(dir));
		if (rmdir(dir) < 0 && errno == EBUSY)
			linger[k++] = linger[i];
	}
	nlinger = k;
	return k;
}
