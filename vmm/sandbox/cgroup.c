/* Host cgroups for a VM (cgroup.h): detection from mountinfo and
 * /proc/self/cgroup, one cgroup per VM made, filled, entered and removed.
 * Every path is built here, from the mount table, the process's own
 * cgroup and a parent checked by cg_check. */
#include "vmm/sandbox/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/core/err.h"

#define MAX_NAME 255           /* parent path and cpuset list, bytes */
#define MIN_QUOTA_MCPU 10      /* 1 ms per 100 ms period: the kernel's least quota */
#define MAX_QUOTA_MCPU 1000000 /* 1000 CPUs */
#define SMALL_FILE 16384       /* /proc/self/cgroup, cgroup control files */

static const char *const ctrl_name[CG_NR_CTRL] = { "cpu", "memory", "pids", "cpuset" };

/* The VM's cgroup in one hierarchy. */
struct cg_dir {
	int v2;
	unsigned ctrls;         /* the controllers used here */
	char path[CG_PATH_MAX]; /* the VM's cgroup */
	char home[CG_PATH_MAX]; /* the process's cgroup before: it goes back there */
	bool made, entered;
};

struct cgroup {
	struct cg_dir d[CG_NR_CTRL];
	unsigned n;
	pid_t pid;
};

/* ---- files ---- */

/* A small file, NUL-terminated in buf. Returns its length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "re");
	size_t n;
	int err;

	if (!f)
		return -errno;
	n = fread(buf, 1, cap - 1, f);
	err = ferror(f) ? errno : 0;
	fclose(f);
	buf[n] = 0;
	return err ? -err : (ssize_t)n;
}

static int join(char *out, const char *a, const char *b, const char *c)
{
	int n = snprintf(out, CG_PATH_MAX, "%s%s%s", a, b, c);

	return n < 0 || n >= CG_PATH_MAX ? -ENAMETOOLONG : 0;
}

static ssize_t read_in(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[CG_PATH_MAX];

	if (join(path, dir, "/", file))
		return -ENAMETOOLONG;
	return read_small(path, buf, cap);
}

/* Write val into the control file dir/file; the kernel answers a bad
 * value with the write's error. */
static int write_in(const char *dir, const char *file, const char *val, struct tvm_err *e)
{
	char path[CG_PATH_MAX];
	size_t len = strlen(val);
	ssize_t n;
	int fd, err;

	if (join(path, dir, "/", file))
		return tvm_errf(e, ENAMETOOLONG, "cgroup %s/%s: path too long", dir, file);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return tvm_errf(e, errno, "cgroup %s: %s", path, strerror(errno));
	n = write(fd, val, len);
	err = n < 0 ? errno : EIO;
	close(fd);
	if (n != (ssize_t)len)
		return tvm_errf(e, err, "cgroup %s: writing '%s': %s", path, val, strerror(err));
	return 0;
}

static bool blank(const char *s)
{
	return s[strspn(s, " \t\n")] == 0;
}

/* Whether word appears in s as a whole item of a list separated by any of
 * seps. */
static bool has_word(const char *s, const char *word, const char *seps)
{
	size_t n = strlen(word);

	while (*s) {
		size_t len = strcspn(s, seps);

		if (len == n && !strncmp(s, word, n))
			return true;
		s += len;
		s += strspn(s, seps);
	}
	return false;
}

static unsigned ctrls_in(const char *list, const char *seps)
{
	unsigned m = 0;

	for (int c = 0; c < CG_NR_CTRL; c++)
		if (has_word(list, ctrl_name[c], seps))
			m |= 1u << c;
	return m;
}

/* ---- detection ---- */

/* proc(5) escapes space, tab, newline and backslash in mountinfo as \ooo. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

/* One mountinfo line, "ID PARENT MAJ:MIN ROOT MOUNT OPTS [TAGS...] -
 * FSTYPE SOURCE SUPEROPTS", split in place. Returns 0, or -1 when it has
 * another shape. */
static int split_mountinfo(char *line, char **root, char **mnt, char **fstype, char **superopts)
{
	char *f[64], *save = NULL, *t;
	int n = 0, dash = -1;

	for (t = strtok_r(line, " \n", &save); t && n < 64; t = strtok_r(NULL, " \n", &save)) {
		if (dash < 0 && n >= 6 && !strcmp(t, "-"))
			dash = n;
		f[n++] = t;
	}
	if (dash < 0 || n < dash + 4)
		return -1;
	*root = f[3];
	*mnt = f[4];
	*fstype = f[dash + 1];
	*superopts = f[dash + 3];
	unescape(*root);
	unescape(*mnt);
	return 0;
}

/* The process's cgroup in a hierarchy, from /proc/PID/cgroup's
 * "ID:CONTROLLERS:PATH" lines: v2's is "0::PATH", a v1 one's lists ctrl. */
static const char *own_cgroup(char *text, int v2, const char *ctrl, char *out, size_t cap)
{
	for (char *line = text; line && *line;) {
		char *next = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2;

		if (next)
			*next = 0;
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2) {
			bool match;

			*c2 = 0;
			match = v2 ? (!strncmp(line, "0:", 2) && c2 == c1 + 1) : has_word(c1 + 1, ctrl, ",");
			*c2 = ':';
			if (match) {
				snprintf(out, cap, "%s", c2 + 1);
				if (next)
					*next = '\n';
				return out;
			}
		}
		if (next)
			*next = '\n';
		line = next ? next + 1 : NULL;
	}
	return NULL;
}

/* Fill hi from a cgroup mount: its mount point, the process's cgroup below
 * it (the mount may show only a subtree: root), what it offers. Returns
 * true when it offers a controller we use. */
static bool fill_hier(struct cg_hier *hi, int v2, const char *root, const char *mnt, const char *superopts,
		      char *proc_text)
{
	char own[CG_PATH_MAX], buf[SMALL_FILE];
	unsigned v1ctrls = v2 ? 0 : ctrls_in(superopts, ",");
	size_t rl = strlen(root);
	const char *rel;
	int c;

	if (!v2 && !v1ctrls)
		return false;
	for (c = 0; !v2 && !(v1ctrls & (1u << c)); c++)
		;
	if (!own_cgroup(proc_text, v2, v2 ? "" : ctrl_name[c], own, sizeof(own)))
		return false;
	if (!strcmp(root, "/"))
		rl = 0;
	if (strncmp(own, root, rl) || (own[rl] && own[rl] != '/'))
		return false; /* our cgroup is outside what this mount shows */
	rel = own + rl;
	if (!strcmp(rel, "/"))
		rel = "";
	memset(hi, 0, sizeof(*hi));
	hi->v2 = v2;
	if (join(hi->mnt, mnt, "", "") || join(hi->own, rel, "", ""))
		return false;
	if (!v2) {
		hi->ctrls = v1ctrls;
		return true;
	}
	/* v2: what the parent passed down to our cgroup. */
	if (join(own, hi->mnt, hi->own, "/cgroup.controllers") || read_small(own, buf, sizeof(buf)) < 0)
		return false;
	hi->ctrls = ctrls_in(buf, " \n");
	return hi->ctrls != 0;
}

int cg_detect(const struct cg_sources *src, struct cg_host *h, struct tvm_err *e)
{
	const char *mi = src && src->mountinfo ? src->mountinfo : "/proc/self/mountinfo";
	const char *pc = src && src->proc_cgroup ? src->proc_cgroup : "/proc/self/cgroup";
	char *proc_text = malloc(SMALL_FILE), *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	memset(h, 0, sizeof(*h));
	if (!proc_text)
		return tvm_errf(e, ENOMEM, "cgroup: out of memory");
	n = read_small(pc, proc_text, SMALL_FILE);
	if (n < 0) {
		free(proc_text);
		return tvm_errf(e, (int)-n, "cgroup: %s: %s", pc, strerror((int)-n));
	}
	f = fopen(mi, "re");
	if (!f) {
		int err = errno;
		free(proc_text);
		return tvm_errf(e, err, "cgroup: %s: %s", mi, strerror(err));
	}
	while (h->n < CG_MAX_HIER && getline(&line, &cap, f) >= 0) {
		char *root, *mnt, *fstype, *opts;
		int v2;

		if (split_mountinfo(line, &root, &mnt, &fstype, &opts))
			continue;
		v2 = !strcmp(fstype, "cgroup2");
		if ((v2 || !strcmp(fstype, "cgroup")) && fill_hier(&h->h[h->n], v2, root, mnt, opts, proc_text))
			h->n++;
	}
	free(line);
	fclose(f);
	free(proc_text);
	return 0;
}

/* ---- checks ---- */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._@:+-", c);
}

int cg_check(const char *parent, const struct cg_limits *l, struct tvm_err *e)
{
	size_t len = parent ? strlen(parent) : 0;
	const char *p = parent;

	if (!len || len > MAX_NAME)
		return tvm_errf(e, EINVAL, "cgroup parent '%s': empty or longer than %d bytes", parent ? parent : "",
				MAX_NAME);
	if (*p == '/')
		p++;
	for (;;) {
		size_t n = 0;

		while (p[n] && p[n] != '/' && name_char(p[n]))
			n++;
		if ((p[n] && p[n] != '/') || !n || (n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)))
			return tvm_errf(e, EINVAL,
					"cgroup parent '%s': each part must be a name of letters, digits and ._@:+- "
					"(no empty, . or .. part)",
					parent);
		if (!p[n])
			break;
		p += n + 1;
	}
	if (l->cpu_quota_mcpu && (l->cpu_quota_mcpu < MIN_QUOTA_MCPU || l->cpu_quota_mcpu > MAX_QUOTA_MCPU))
		return tvm_errf(e, EINVAL, "cpu quota: %u.%03u CPUs is out of range 0.01..%u", l->cpu_quota_mcpu / 1000,
				l->cpu_quota_mcpu % 1000, MAX_QUOTA_MCPU / 1000);
	if (l->cpuset && (!*l->cpuset || strlen(l->cpuset) > MAX_NAME || l->cpuset[0] < '0' || l->cpuset[0] > '9' ||
			  l->cpuset[strspn(l->cpuset, "0123456789,-")]))
		return tvm_errf(e, EINVAL, "cpuset '%s': expected a CPU list like 0-1,3", l->cpuset);
	return 0;
}

unsigned cg_needed(const struct cg_limits *l)
{
	return 1u << CG_MEMORY | 1u << CG_PIDS | (l->cpu_quota_mcpu ? 1u << CG_CPU : 0) |
	       (l->cpuset ? 1u << CG_CPUSET : 0);
}

/* ---- making the VM's cgroup ---- */

/* For each controller needed, the hierarchy that has it: the v2 one when it
 * has them all, else the v1 ones. */
static int pick(const struct cg_host *h, unsigned need, const struct cg_hier *use[CG_NR_CTRL], struct tvm_err *e)
{
	memset(use, 0, sizeof(*use) * CG_NR_CTRL);
	if (!h->n)
		return tvm_errf(e, ENOTSUP,
				"cgroup: this host has no cgroup hierarchy with a cpu, memory, pids or "
				"cpuset controller for this process");
	for (unsigned i = 0; i < h->n; i++) {
		if (h->h[i].v2 && (h->h[i].ctrls & need) == need) {
			for (int c = 0; c < CG_NR_CTRL; c++)
				use[c] = need & (1u << c) ? &h->h[i] : NULL;
			return 0;
		}
	}
	for (int c = 0; c < CG_NR_CTRL; c++) {
		for (unsigned i = 0; (need & (1u << c)) && !use[c] && i < h->n; i++)
			if (!h->h[i].v2 && (h->h[i].ctrls & (1u << c)))
				use[c] = &h->h[i];
		if ((need & (1u << c)) && !use[c])
			return tvm_errf(e, ENOTSUP,
					"cgroup: this host has no usable %s controller (not in cgroup v2's "
					"cgroup.controllers, no cgroup v1 hierarchy of it)",
					ctrl_name[c]);
	}
	return 0;
}

/* v2: let dir's children use the controllers ctrls (cgroup.subtree_control). */
static int enable_below(const char *dir, unsigned ctrls, struct tvm_err *e)
{
	char have[SMALL_FILE], add[64] = "";
	ssize_t n = read_in(dir, "cgroup.subtree_control", have, sizeof(have));

	if (n < 0)
		return tvm_errf(e, (int)-n, "cgroup %s/cgroup.subtree_control: %s", dir, strerror((int)-n));
	for (int c = 0; c < CG_NR_CTRL; c++)
		if ((ctrls & (1u << c)) && !has_word(have, ctrl_name[c], " \n"))
			snprintf(add + strlen(add), sizeof(add) - strlen(add), "%s+%s", *add ? " " : "", ctrl_name[c]);
	if (!*add)
		return 0;
	n = write_in(dir, "cgroup.subtree_control", add, e);
	if (n == -EBUSY)
		tvm_errf(e, EBUSY,
			 "cgroup %s: cannot enable %s below it: it holds processes (cgroup v2 allows "
			 "controllers only below a cgroup without any): give an absolute parent such as "
			 "/tinyvmm, or one delegated to you",
			 dir, add);
	return (int)n;
}

/* v1 cpuset: a new cgroup starts with no CPUs and no memory nodes (a
 * process cannot enter it); give it its parent's. */
static int inherit_cpuset(const char *dir, struct tvm_err *e)
{
	static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
	char up[CG_PATH_MAX], buf[SMALL_FILE];

	snprintf(up, sizeof(up), "%s", dir);
	*strrchr(up, '/') = 0;
	for (int i = 0; i < 2; i++) {
		ssize_t n = read_in(dir, files[i], buf, sizeof(buf));
		const char *from = dir;

		if (n >= 0 && !blank(buf))
			continue;
		if (n >= 0) {
			from = up;
			n = read_in(up, files[i], buf, sizeof(buf));
		}
		if (n < 0)
			return tvm_errf(e, (int)-n, "cgroup %s/%s: %s", from, files[i], strerror((int)-n));
		buf[strcspn(buf, "\n")] = 0;
		if ((n = write_in(dir, files[i], buf, e)))
			return (int)n;
	}
	return 0;
}

/* Empty cgroups under dir named after a pid that is gone: left by a VMM
 * that was killed. rmdir removes only empty ones. */
static void remove_stale(const char *dir, pid_t self)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long pid;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		errno = 0;
		pid = strtol(de->d_name, &end, 10);
		if (*end || errno || pid > INT_MAX || pid == self)
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static int write_limits(const struct cg_dir *d, const struct cg_limits *l, struct tvm_err *e)
{
	char v[64];
	int r = 0;

	if ((d->ctrls & (1u << CG_CPU)) && l->cpu_quota_mcpu) {
		unsigned quota = l->cpu_quota_mcpu * (CG_PERIOD_US / 1000);

		if (d->v2) {
			snprintf(v, sizeof(v), "%u %u", quota, CG_PERIOD_US);
			r = write_in(d->path, "cpu.max", v, e);
		} else {
			snprintf(v, sizeof(v), "%u", CG_PERIOD_US);
			r = write_in(d->path, "cpu.cfs_period_us", v, e);
			snprintf(v, sizeof(v), "%u", quota);
			r = r ? r : write_in(d->path, "cpu.cfs_quota_us", v, e);
		}
	}
	if (!r && (d->ctrls & (1u << CG_CPUSET)) && l->cpuset) {
		r = d->v2 ? 0 : inherit_cpuset(d->path, e);
		r = r ? r : write_in(d->path, "cpuset.cpus", l->cpuset, e);
	}
	if (!r && (d->ctrls & (1u << CG_MEMORY)) && l->mem_max) {
		snprintf(v, sizeof(v), "%" PRIu64, l->mem_max);
		r = write_in(d->path, d->v2 ? "memory.max" : "memory.limit_in_bytes", v, e);
	}
	if (!r && (d->ctrls & (1u << CG_PIDS)) && l->pids_max) {
		snprintf(v, sizeof(v), "%u", l->pids_max);
		r = write_in(d->path, "pids.max", v, e);
	}
	return r;
}

/* The directories from base down to base/parent, each made if missing
 * (and given controllers on v2, CPUs and memory nodes for v1 cpuset); dir
 * ends as base/parent. */
static int make_parents(struct cg_dir *d, const char *base, const char *parent, char *dir, struct tvm_err *e)
{
	const char *p = parent + (*parent == '/');
	int r = d->v2 ? enable_below(base, d->ctrls, e) : 0;

	snprintf(dir, CG_PATH_MAX, "%s", base);
	while (!r && *p) {
		size_t n = strcspn(p, "/"), len = strlen(dir);

		if (len + 1 + n >= CG_PATH_MAX)
			return tvm_errf(e, ENAMETOOLONG, "cgroup %s/%s: path too long", base, parent);
		dir[len] = '/';
		memcpy(dir + len + 1, p, n);
		dir[len + 1 + n] = 0;
		p += n + (p[n] == '/');
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return tvm_errf(e, errno, "cgroup %s: %s", dir, strerror(errno));
		if (!d->v2 && (d->ctrls & (1u << CG_CPUSET)))
			r = inherit_cpuset(dir, e);
		else if (d->v2)
			r = enable_below(dir, d->ctrls, e);
	}
	return r;
}

/* The VM's cgroup in hierarchy hi: made (or an empty one of our name
 * reused), limits written, the process moved in. */
static int make_one(struct cg_dir *d, const struct cg_hier *hi, const char *parent, const struct cg_limits *l,
		    pid_t pid, struct tvm_err *e)
{
	char base[CG_PATH_MAX], dir[CG_PATH_MAX], name[16], procs[SMALL_FILE];
	ssize_t n;
	int r;

	d->v2 = hi->v2;
	if (join(base, hi->mnt, *parent == '/' ? "" : hi->own, "") || join(d->home, hi->mnt, hi->own, ""))
		return tvm_errf(e, ENAMETOOLONG, "cgroup %s%s: path too long", hi->mnt, hi->own);
	r = make_parents(d, base, parent, dir, e);
	if (r)
		return r;
	remove_stale(dir, pid);
	snprintf(name, sizeof(name), "/%d", (int)pid);
	if (join(d->path, dir, name, ""))
		return tvm_errf(e, ENAMETOOLONG, "cgroup %s: path too long", dir);
	if (mkdir(d->path, 0755) < 0) {
		if (errno != EEXIST)
			return tvm_errf(e, errno, "cgroup %s: %s", d->path, strerror(errno));
		/* Ours by name: left empty by a VMM of this pid that died. */
		n = read_in(d->path, "cgroup.procs", procs, sizeof(procs));
		if (n < 0 || !blank(procs))
			return tvm_errf(e, EBUSY,
					"cgroup %s: already exists and is in use (one VM with a cgroup per "
					"process: the whole process is moved into it)",
					d->path);
	}
	d->made = true;
	r = write_limits(d, l, e);
	if (r)
		return r;
	snprintf(name, sizeof(name), "%d", (int)pid);
	r = write_in(d->path, "cgroup.procs", name, e);
	d->entered = !r;
	return r;
}

int cg_create(const struct cg_host *h, const char *parent, const struct cg_limits *l, pid_t pid, struct cgroup **out,
	      struct tvm_err *e)
{
	const struct cg_hier *use[CG_NR_CTRL];
	unsigned need = cg_needed(l);
	struct cgroup *cg;
	int r;

	*out = NULL;
	r = cg_check(parent, l, e);
	if (!r)
		r = pick(h, need, use, e);
	if (r)
		return r;
	cg = calloc(1, sizeof(*cg));
	if (!cg)
		return tvm_errf(e, ENOMEM, "cgroup: out of memory");
	cg->pid = pid;
	/* One directory per hierarchy: v1 may mount several controllers
	 * together (cpu,cpuacct), v2 holds them all. */
	for (int c = 0; c < CG_NR_CTRL; c++) {
		bool seen = false;

		for (int p = 0; p < c; p++)
			seen |= use[p] == use[c];
		if (!use[c] || seen)
			continue;
		for (int p = c; p < CG_NR_CTRL; p++)
			if (use[p] == use[c])
				cg->d[cg->n].ctrls |= 1u << p;
		r = make_one(&cg->d[cg->n++], use[c], parent, l, pid, e);
		if (r) {
			cg_destroy(cg);
			return r;
		}
	}
	*out = cg;
	return 0;
}

void cg_destroy(struct cgroup *cg)
{
	char pid[16];

	if (!cg)
		return;
	snprintf(pid, sizeof(pid), "%d", (int)cg->pid);
	for (unsigned i = cg->n; i-- > 0;) {
		struct cg_dir *d = &cg->d[i];

		/* Moved back, or gone (ESRCH: e.g. a jailed child that has
		 * ended); else still inside: rmdir would only fail. */
		if (d->entered) {
			int r = write_in(d->home, "cgroup.procs", pid, NULL);

			if (r && r != -ESRCH)
				continue;
		}
		/* Threads that just exited may keep a v2 cgroup busy briefly. */
		for (int tries = 0; d->made && tries < 50; tries++) {
			if (rmdir(d->path) == 0 || errno != EBUSY)
				break;
			nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
		}
	}
	free(cg);
}

/* ---- figures ---- */

static const struct cg_dir *dir_of(const struct cgroup *cg, enum cg_ctrl c)
{
	for (unsigned i = 0; cg && i < cg->n; i++)
		if (cg->d[i].ctrls & (1u << c))
			return &cg->d[i];
	return NULL;
}

const char *cg_dir(const struct cgroup *cg, enum cg_ctrl c)
{
	const struct cg_dir *d = dir_of(cg, c);

	return d ? d->path : NULL;
}

int cg_version(const struct cgroup *cg)
{
	return cg->n && cg->d[0].v2 ? 2 : 1;
}

/* The number after "key " on a line of a flat-keyed file (cpu.stat). */
static int keyed(const char *text, const char *key, uint64_t *out)
{
	size_t n = strlen(key);

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');

		if (!strncmp(p, key, n) && p[n] == ' ') {
			*out = strtoull(p + n + 1, NULL, 10);
			return 0;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return -ENOENT;
}

int cg_stat(const struct cgroup *cg, enum cg_stat s, uint64_t *out)
{
	const struct cg_dir *d = dir_of(cg, s == CG_CPU_THROTTLED_US ? CG_CPU : CG_MEMORY);
	bool oom = s == CG_MEM_OOM_KILLS;
	const char *file;
	char buf[SMALL_FILE];
	ssize_t n;
	int r;

	if (!d)
		return -ENOENT;
	if (s == CG_MEM_PEAK)
		file = d->v2 ? "memory.peak" : "memory.max_usage_in_bytes";
	else if (s == CG_MEM_MAX)
		file = d->v2 ? "memory.max" : "memory.limit_in_bytes";
	else if (oom)
		file = d->v2 ? "memory.events" : "memory.oom_control";
	else
		file = "cpu.stat";
	n = read_in(d->path, file, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (oom) /* both name it oom_kill (v1 since Linux 4.13) */
		return keyed(buf, "oom_kill", out);
	if (s != CG_CPU_THROTTLED_US) {
		*out = !strncmp(buf, "max", 3) ? UINT64_MAX : strtoull(buf, NULL, 10);
		return 0;
	}
	r = keyed(buf, d->v2 ? "throttled_usec" : "throttled_time", out);
	if (!r && !d->v2)
		*out /= 1000; /* v1 counts ns */
	return r;
}
