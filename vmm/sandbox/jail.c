/* The jail on the host side: what it shows (planning), its directory, the
 * fork into it and the wait outside, and what is left to do after (see
 * jail.h for the whole life of a jail). */
#include "vmm/sandbox/jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/kvm/host_quirks.h"
#include "vmm/kvm/kvm.h"
#include "vmm/sandbox/jail_impl.h"

#define BLOCK 4096ULL

struct jail *jail_new(const struct jail_opts *o, struct tvm_err *e)
{
	static unsigned seq; /* one process may make several jails (a template, then the run) */
	struct jail *j;
	const char *base = o->dir && *o->dir ? o->dir : JAIL_DEFAULT_DIR;
	int n;

	if (base[0] != '/' || strchr(base, '\n')) {
		tvm_errf(e, EINVAL, "jail: --jail-dir %s: must be an absolute path", base);
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		tvm_errf(e, ENOMEM, "jail: out of memory");
		return NULL;
	}
	j->o = *o;
	j->o.dir = j->base;
	if (!j->o.uid)
		j->o.uid = JAIL_DEFAULT_ID;
	if (!j->o.gid)
		j->o.gid = JAIL_DEFAULT_ID;
	j->life_fd = -1;
	snprintf(j->id, sizeof(j->id), "%d-%u", (int)getpid(), seq++);
	n = snprintf(j->base, sizeof(j->base), "%s", base);
	if (n > 0 && n < (int)sizeof(j->base))
		n = snprintf(j->dir, sizeof(j->dir), "%s/%s", j->base, j->id);
	if (n > 0 && n < (int)sizeof(j->dir))
		n = snprintf(j->root, sizeof(j->root), "%s/root", j->dir);
	if (n < 0 || n + 64 >= (int)sizeof(j->root)) {
		free(j);
		tvm_errf(e, ENAMETOOLONG, "jail: --jail-dir %s: too long", base);
		return NULL;
	}
	return j;
}

void jail_free(struct jail *j)
{
	free(j);
}

int jail_keep_fd(struct jail *j, int fd, struct tvm_err *e)
{
	if (fd <= 2)
		return 0;
	for (unsigned i = 0; i < j->nkeep; i++)
		if (j->keep[i] == fd)
			return 0;
	if (j->nkeep == JAIL_MAX_KEEP)
		return tvm_errf(e, ENOSPC, "jail: more than %d descriptors to keep", JAIL_MAX_KEEP);
	j->keep[j->nkeep++] = fd;
	return 0;
}

int jail_outside(const struct jail *j, const char *in_jail, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s%s", j->root, in_jail);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Whether path is dir or lies beneath it. */
static int beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n] || (n == 1 && dir[0] == '/'));
}

/* The jail's own directories: a directory shown from the host may not be
 * one of them nor hold one. */
static const char *const own_dirs[] = { "/dev", "/proc", "/tmp", JAIL_RUN_DIR };

/* Whether a mount only shows a host directory read-only (what lies
 * beneath it in the jail is what lies beneath it on the host). */
static int plain_ro_dir(unsigned flags)
{
	return (flags & (JAIL_M_DIR | JAIL_M_RW | JAIL_M_STAGE | JAIL_M_SEEN)) == JAIL_M_DIR;
}

/* Show host (resolved) at path in the jail. Two things at one path must be
 * the same; read-only things inside a read-only directory shown need no
 * mount of their own (JAIL_M_SEEN), whichever came first; other overlaps
 * are refused (one would hide the other). Returns the mount's index or
 * -errno. */
static int add_mount(struct jail *j, const char *what, const char *host, const char *path, unsigned flags,
		     struct tvm_err *e)
{
	struct jail_mount *m;

	if (flags & JAIL_M_DIR)
		for (unsigned i = 0; i < sizeof(own_dirs) / sizeof(own_dirs[0]); i++)
			if (beneath(own_dirs[i], path))
				return tvm_errf(e, EINVAL, "jail: %s %s: the jail makes its own %s", what, host,
						own_dirs[i]);
	if (beneath(path, "/proc"))
		return tvm_errf(e, EINVAL, "jail: %s %s: the jail cannot show files under /proc", what, host);
	for (unsigned i = 0; i < j->nm; i++) {
		m = &j->m[i];
		if (!strcmp(m->path, path) && !strcmp(m->host, host) &&
		    (m->flags & JAIL_M_DIR) == (flags & JAIL_M_DIR) && !((m->flags | flags) & JAIL_M_STAGE)) {
			m->flags |= flags & JAIL_M_RW;
			return (int)i;
		}
		if (plain_ro_dir(m->flags) && beneath(path, m->path) && !(flags & (JAIL_M_RW | JAIL_M_STAGE))) {
			flags |= JAIL_M_SEEN;
			break;
		}
		if (plain_ro_dir(flags) && beneath(m->path, path) && !(m->flags & (JAIL_M_RW | JAIL_M_STAGE)))
			m->flags |= JAIL_M_SEEN;
		if (!((m->flags | flags) & JAIL_M_SEEN) && (beneath(path, m->path) || beneath(m->path, path)))
			return tvm_errf(e, EINVAL, "jail: %s %s overlaps %s, also shown in the jail", what, host,
					m->host);
	}
	if (j->nm == JAIL_MAX_MOUNTS)
		return tvm_errf(e, ENOSPC, "jail: %s %s: more than %d files to show", what, host, JAIL_MAX_MOUNTS);
	m = &j->m[j->nm];
	snprintf(m->host, sizeof(m->host), "%s", host);
	snprintf(m->path, sizeof(m->path), "%s", path);
	m->flags = flags;
	return (int)j->nm++;
}

/* Resolve a path; flags say what it must be: a directory (JAIL_M_DIR), a
 * device node (JAIL_M_DEV), else a file (or a block device, for a drive). */
static int resolve(const char *what, const char *path, unsigned flags, char out[PATH_MAX], struct stat *st,
		   struct tvm_err *e)
{
	mode_t m;

	if (!realpath(path, out) || stat(out, st) < 0)
		return tvm_errf(e, errno, "jail: %s %s: %s", what, path, strerror(errno));
	if (strchr(out, '\n'))
		return tvm_errf(e, EINVAL, "jail: %s %s: a newline in the path", what, path);
	m = st->st_mode;
	if ((flags & JAIL_M_DIR) ? !S_ISDIR(m) : (flags & JAIL_M_DEV) ? !S_ISCHR(m) : !(S_ISREG(m) || S_ISBLK(m)))
		return tvm_errf(e, EINVAL, "jail: %s %s: not a %s", what, path,
				(flags & JAIL_M_DIR)   ? "directory"
				: (flags & JAIL_M_DEV) ? "device"
						       : "file");
	return 0;
}

/* A host file shown at its own resolved path; returns the mount index. */
static int show(struct jail *j, const char *what, const char *path, unsigned flags, uint64_t *size, struct tvm_err *e)
{
	char real[PATH_MAX];
	struct stat st;
	int r = resolve(what, path, flags, real, &st, e);

	if (r)
		return r;
	if (S_ISBLK(st.st_mode))
		flags |= JAIL_M_DEV;
	if (size)
		*size = (uint64_t)st.st_size;
	r = add_mount(j, what, real, real, flags, e);
	if (r >= 0) {
		j->m[r].dev = (uint64_t)st.st_dev;
		j->m[r].ino = (uint64_t)st.st_ino;
	}
	return r;
}

/* The same for an optional path the VM is given: *path becomes the jail's. */
static int show_path(struct jail *j, const char *what, const char **path, unsigned flags, struct tvm_err *e)
{
	int k = *path ? show(j, what, *path, flags, NULL, e) : 0;

	if (k < 0)
		return k;
	if (*path)
		*path = j->m[k].path;
	return 0;
}

const char *jail_add_file(struct jail *j, const char *what, const char *path, struct tvm_err *e)
{
	int k = show(j, what, path, 0, NULL, e);

	return k < 0 ? NULL : j->m[k].path;
}

static void grow_fsize(struct jail *j, uint64_t bytes)
{
	/* Overlays and snapshot disks hold whole 4 KiB blocks at the image's
	 * offsets. */
	bytes = (bytes + BLOCK - 1) / BLOCK * BLOCK;
	if (bytes > j->fsize)
		j->fsize = bytes;
}

/* A file that may not exist yet: its directory resolved, *file the
 * absolute path, *dir that directory, *name its last part. */
static int resolve_new(const char *what, const char *path, char file[PATH_MAX], char dir[PATH_MAX], const char **name,
		       struct tvm_err *e)
{
	const char *slash = strrchr(path, '/');
	char d[PATH_MAX];
	struct stat st;
	int r;

	*name = slash ? slash + 1 : path;
	if (!**name || !strcmp(*name, ".") || !strcmp(*name, "..") || strchr(*name, '\n'))
		return tvm_errf(e, EINVAL, "jail: %s %s: not a file name", what, path);
	snprintf(d, sizeof(d), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
	if ((r = resolve(what, d, JAIL_M_DIR, dir, &st, e)))
		return r;
	if (snprintf(file, PATH_MAX, "%s/%s", strcmp(dir, "/") ? dir : "", *name) >= PATH_MAX)
		return tvm_errf(e, ENAMETOOLONG, "jail: %s %s: path too long", what, path);
	return 0;
}

/* A stage directory for target, made by jail_run: beside it (a kept
 * overlay: in the jail /run/overlayN) or inside it (a snapshot directory,
 * shown at its own path). */
static int add_stage(struct jail *j, const char *target, int snapshot, char *in_jail, size_t cap, struct tvm_err *e)
{
	char dir[PATH_MAX], host[PATH_MAX];
	const char *name = NULL;
	struct jail_stage *s;
	struct stat st;
	int k, r;

	if (j->nst == JAIL_MAX_STAGES)
		return tvm_errf(e, ENOSPC, "jail: too many stage directories");
	s = &j->st[j->nst];
	if (snapshot) {
		if ((r = resolve("snapshot directory", target, JAIL_M_DIR, s->target, &st, e)))
			return r;
		snprintf(dir, sizeof(dir), "%s", s->target);
	} else {
		if ((r = resolve_new("overlay", target, s->target, dir, &name, e)))
			return r;
		if (lstat(s->target, &st) == 0)
			return tvm_errf(e, EEXIST, "jail: overlay %s: exists (a kept overlay is a new file)", target);
	}
	if (snprintf(host, sizeof(host), "%s/" JAIL_STAGE_PREFIX "%s-%u", strcmp(dir, "/") ? dir : "", j->id, j->nst) >=
	    (int)sizeof(host))
		return tvm_errf(e, ENAMETOOLONG, "jail: %s: path too long", target);
	if (snapshot)
		k = add_mount(j, "snapshot directory", host, s->target, JAIL_M_DIR | JAIL_M_RW | JAIL_M_STAGE, e);
	else {
		char path[64];

		snprintf(path, sizeof(path), JAIL_RUN_DIR "/overlay%u", j->nst);
		k = add_mount(j, "overlay", host, path, JAIL_M_DIR | JAIL_M_RW | JAIL_M_STAGE, e);
		if (k >= 0 && snprintf(in_jail, cap, "%s/%s", path, name) >= (int)cap)
			return tvm_errf(e, ENAMETOOLONG, "jail: overlay %s: name too long", target);
	}
	if (k < 0)
		return k;
	s->mount = (unsigned)k;
	s->snapshot = snapshot;
	j->nst++;
	return 0;
}

/* Whether a Unix socket answers at path (through a symlink too). */
static int socket_answers(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	if (strlen(path) >= sizeof(a.sun_path))
		return 0;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	r = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return r;
}

/* --vsock-uds PATH: the socket is made in the jail; PATH becomes a symlink
 * to it, so host clients reach it as before. A stale socket or symlink is
 * replaced (by jail_run), a live one refused. */
static int plan_vsock(struct jail *j, struct tvm_config *c, struct tvm_err *e)
{
	char dir[PATH_MAX];
	const char *name;
	struct stat st;
	int r;

	/* Absolute: gc finds it from anywhere. */
	if ((r = resolve_new("--vsock-uds", c->vsock_uds, j->link, dir, &name, e)))
		return r;
	if (lstat(c->vsock_uds, &st) == 0) {
		if (!S_ISSOCK(st.st_mode) && !S_ISLNK(st.st_mode))
			return tvm_errf(e, EEXIST, "jail: --vsock-uds %s: exists and is not a socket", c->vsock_uds);
		if (socket_answers(c->vsock_uds))
			return tvm_errf(e, EADDRINUSE, "jail: --vsock-uds %s: address in use (a VM answers there)",
					c->vsock_uds);
	}
	c->vsock_uds = JAIL_VSOCK_PATH;
	return 0;
}

static int plan_drives(struct jail *j, struct tvm_config *c, struct tvm_err *e)
{
	uint64_t size;

	for (unsigned i = 0; i < c->nr_drives && i < TVM_MAX_DRIVES; i++) {
		struct tvm_drive *d = &c->drives[i];
		int in_place = tvm_drive_in_place(d), k;
		char what[16];

		if (!d->path)
			continue;
		snprintf(what, sizeof(what), "drive %u", i);
		k = show(j, what, d->path, in_place ? JAIL_M_RW : 0, &size, e);
		if (k < 0)
			return k;
		d->path = j->m[k].path;
		grow_fsize(j, size);
		grow_fsize(j, d->size); /* an overlay larger than its image */
		if (d->cow && d->overlay_path) {
			unsigned n = j->nst;
			int r = add_stage(j, d->overlay_path, 0, j->st[n].in_jail, sizeof(j->st[n].in_jail), e);

			if (r)
				return r;
			d->overlay_path = j->st[n].in_jail;
		}
	}
	return 0;
}

int jail_plan_vm(struct jail *j, struct tvm_config *c, const char **snapshot, const char **out, struct tvm_err *e)
{
	static const char *const devs[] = { "/dev/kvm", "/dev/urandom", "/dev/net/tun" };
	int k, r = 0;

	grow_fsize(j, j->o.min_fsize);
	grow_fsize(j, (uint64_t)c->mem_mib << 20);
	if ((r = show_path(j, "kernel", &c->kernel_path, 0, e)) ||
	    (r = show_path(j, "initrd", &c->initrd_path, 0, e)) || (r = plan_drives(j, c, e)) ||
	    (snapshot && (r = show_path(j, "snapshot", snapshot, JAIL_M_DIR, e))))
		return r;
	if (snapshot && *snapshot) {
		char mem[PATH_MAX + 8];
		struct stat st;

		/* Its memory and its drives' overlays (a drive may be larger
		 * than its image): the files a restore writes as large. */
		snprintf(mem, sizeof(mem), "%s/mem", *snapshot);
		if (stat(mem, &st) == 0)
			grow_fsize(j, (uint64_t)st.st_size);
		for (unsigned i = 0; i < TVM_MAX_DRIVES; i++) {
			snprintf(mem, sizeof(mem), "%s/disk%u", *snapshot, i);
			if (stat(mem, &st) == 0)
				grow_fsize(j, (uint64_t)st.st_size);
		}
	}
	if (out && *out) {
		if ((r = add_stage(j, *out, 1, NULL, 0, e)))
			return r;
		*out = j->st[j->nst - 1].target;
	}
	if (c->vsock_uds && (r = plan_vsock(j, c, e)))
		return r;
	for (unsigned i = 0; i < sizeof(devs) / sizeof(devs[0]) && !r; i++) {
		if (i == 2 && !c->net.enabled)
			break;
		if (i == 0 && access(devs[0], F_OK) < 0 && errno == ENOENT)
			return tvm_errf(e, ENOENT, "jail: device /dev/kvm: %s%s", strerror(ENOENT),
					kvm_open_hint(ENOENT));
		k = show(j, "device", devs[i], JAIL_M_DEV, NULL, e);
		r = k < 0 ? k : 0;
	}
	if (!r && j->o.netns && access(j->o.netns, R_OK) < 0)
		r = tvm_errf(e, errno, "jail: --netns %s: %s", j->o.netns, strerror(errno));
	if (c->quirks == TVM_QUIRKS_AUTO) /* decided here: the jail has no /sys */
		c->quirks = host_quirks_detect() ? TVM_QUIRKS_ON : TVM_QUIRKS_OFF;
	if (!r)
		r = jail_keep_fd(j, c->serial_out_fd, e);
	if (!r)
		r = jail_keep_fd(j, c->serial_in_fd, e);
	if (!r)
		r = jail_keep_fd(j, c->log_fd, e);
	return r;
}

/* ---- the directory on the host ---- */

/* mkdir -p, for the part of path after its first from bytes (which
 * exist). */
static int mkdirs(const char *path, size_t from, mode_t mode)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + (from ? from : 1); *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, mode) < 0 && errno != EEXIST ? -errno : 0;
}

static int record(const struct jail *j, const char *kind, const char *path, struct tvm_err *e)
{
	char name[PATH_MAX + 8];
	int fd, r = 0;

	snprintf(name, sizeof(name), "%s/" JAIL_EXTRA, j->dir);
	fd = open(name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || dprintf(fd, "%s %s\n", kind, path) < 0)
		r = tvm_errf(e, errno, "jail: directory: %s: %s", name, strerror(errno));
	if (fd >= 0)
		close(fd);
	return r;
}

/* Where m appears under the jail's root, made empty (a mount point). */
static int placeholder(const struct jail *j, const struct jail_mount *m, struct tvm_err *e)
{
	char p[PATH_MAX * 2];
	char *slash;
	int fd, r;

	snprintf(p, sizeof(p), "%s%s", j->root, m->path);
	slash = strrchr(p, '/');
	*slash = 0;
	r = mkdirs(p, strlen(j->root), 0711);
	*slash = '/';
	if (!r && (m->flags & JAIL_M_DIR))
		r = mkdir(p, 0711) < 0 && errno != EEXIST ? -errno : 0;
	else if (!r) {
		fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		r = fd < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
	}
	return r ? tvm_errf(e, -r, "jail: directory: %s: %s", p, strerror(-r)) : 0;
}

static int make_dir(struct jail *j, struct tvm_err *e)
{
	static const struct {
		const char *name;
		mode_t mode;
		int jail_owned;
	} skel[] = { { "dev", 0711, 0 }, { "proc", 0555, 0 }, { "tmp", 0711, 0 }, { &JAIL_RUN_DIR[1], 0711, 1 } };
	unsigned long long start = 0;
	char p[PATH_MAX * 2];
	int fd, r;

	if ((r = mkdirs(j->base, 0, 0711)))
		return tvm_errf(e, -r, "jail: directory %s: %s", j->base, strerror(-r));
	jail_gc(j->base, NULL, NULL); /* what a crashed run left */
	if (mkdir(j->dir, 0711) < 0)
		return tvm_errf(e, errno, "jail: directory %s: %s", j->dir, strerror(errno));
	j->made = 1;
	jail_self_start(&start);
	snprintf(p, sizeof(p), "%s/" JAIL_OWNER, j->dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || dprintf(fd, "%d %llu\n", (int)getpid(), start) < 0 || close(fd) < 0)
		return tvm_errf(e, errno, "jail: directory: %s: %s", p, strerror(errno));
	if (mkdir(j->root, 0711) < 0)
		return tvm_errf(e, errno, "jail: directory %s: %s", j->root, strerror(errno));
	for (unsigned i = 0; i < sizeof(skel) / sizeof(skel[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", j->root, skel[i].name);
		if (mkdir(p, skel[i].mode) < 0 || chmod(p, skel[i].mode) < 0 ||
		    (skel[i].jail_owned && chown(p, j->o.uid, j->o.gid) < 0))
			return tvm_errf(e, errno, "jail: directory %s: %s", p, strerror(errno));
	}
	for (unsigned i = 0; i < j->nst; i++) {
		const char *stage = j->m[j->st[i].mount].host;

		if ((r = record(j, "stage", stage, e)))
			return r;
		if (mkdir(stage, 0700) < 0 || chown(stage, j->o.uid, j->o.gid) < 0)
			return tvm_errf(e, errno, "jail: stage directory %s: %s", stage, strerror(errno));
	}
	for (unsigned i = 0; i < j->nm; i++)
		if (!(j->m[i].flags & JAIL_M_SEEN) && (r = placeholder(j, &j->m[i], e)))
			return r;
	if (j->link[0]) {
		if ((r = record(j, "link", j->link, e)))
			return r;
		snprintf(p, sizeof(p), "%s" JAIL_VSOCK_PATH, j->root);
		unlink(j->link); /* stale (a live one was refused when planned) */
		if (symlink(p, j->link) < 0)
			return tvm_errf(e, errno, "jail: --vsock-uds %s: %s", j->link, strerror(errno));
	}
	return 0;
}

/* ---- the fork ---- */

int jail_parent_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0; /* the parent never writes: any event is its end closing */
}

static void exit_on_signal(int sig)
{
	_exit(128 + sig);
}

/* Close every inherited fd above 2 but the kept ones. */
static void close_others(const struct jail *j)
{
	int keep[JAIL_MAX_KEEP + 1], n = 0, from = 3;

	for (unsigned i = 0; i < j->nkeep; i++)
		keep[n++] = j->keep[i];
	for (int a = 0; a < n; a++) /* a few: insertion sort */
		for (int b = a; b > 0 && keep[b] < keep[b - 1]; b--) {
			int t = keep[b];
			keep[b] = keep[b - 1];
			keep[b - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		if (keep[i] > from)
			close_range((unsigned)from, (unsigned)keep[i] - 1, 0);
		if (keep[i] >= from)
			from = keep[i] + 1;
	}
	close_range((unsigned)from, ~0u, 0);
}

void jail_on_start(struct jail *j, int (*fn)(void *ctx, pid_t pid, struct tvm_err *e), void *ctx)
{
	j->on_start = fn;
	j->on_start_ctx = ctx;
}

/* The child: PID 1 of its PID namespace. Never returns. go_fd: one byte
 * from the parent once its on_start is done (-1: none to wait for). */
static void child(struct jail *j, int life_fd, int err_fd, int go_fd, const sigset_t *mask,
		  int (*body)(void *ctx, struct jail *j), void *ctx)
{
	struct sigaction sa = { .sa_handler = exit_on_signal };
	struct tvm_err e = { 0 };
	char go;
	int status;

	/* PID 1 ignores signals it has no handler for: these end it as they
	 * would end any process (body may take them over). */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || jail_parent_gone(life_fd))
		_exit(JAIL_EXIT_ENTER);
	if (go_fd >= 0) {
		ssize_t n;

		while ((n = read(go_fd, &go, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			_exit(JAIL_EXIT_ENTER); /* the parent's on_start failed */
		close(go_fd);
	}
	j->in_child = 1;
	j->life_fd = life_fd;
	jail_keep_fd(j, life_fd, NULL);
	jail_keep_fd(j, err_fd, NULL);
	close_others(j);
	clearenv();
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (jail_enter(j, &e)) {
		if (write(err_fd, &e, sizeof(e)) < 0)
			_exit(JAIL_EXIT_ENTER);
		_exit(JAIL_EXIT_ENTER);
	}
	close(err_fd);
	status = body(ctx, j);
	fflush(NULL);
	_exit(status & 0xff);
}

/* Outside: forward the stopping signals and SIGUSR1 (run --pause-to's
 * "pause now"; PID 1 without a handler ignores it otherwise), wait for the
 * child. */
static int wait_child(pid_t pid, const sigset_t *set, struct tvm_err *e)
{
	int st, sig;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return tvm_errf(e, errno, "jail: waiting for the VMM: %s", strerror(errno));
		sig = sigwaitinfo(set, NULL);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGUSR1)
			kill(pid, sig);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	tvm_errf(e, EINTR, "jail: the VMM was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	return 128 + WTERMSIG(st);
}

int jail_run(struct jail *j, int (*body)(void *ctx, struct jail *j), void *ctx, struct tvm_err *e)
{
	int life[2] = { -1, -1 }, err[2] = { -1, -1 }, go[2] = { -1, -1 }, pidns = -1, r, status;
	struct tvm_err child_err = { 0 };
	sigset_t fwd, old;
	pid_t pid;

	if (geteuid() != 0)
		return tvm_errf(e, EPERM, "jail: privileges: needs root (mounts, namespaces, another uid)");
	if ((r = make_dir(j, e)))
		return r;
	if (pipe2(life, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || (j->on_start && pipe2(go, O_CLOEXEC) < 0)) {
		r = tvm_errf(e, errno, "jail: pipe: %s", strerror(errno));
		goto out;
	}
	/* The child is PID 1 of a new PID namespace; this process stays in its
	 * own (its later children too: the namespace for children is set back). */
	pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (pidns < 0 || unshare(CLONE_NEWPID) < 0) {
		r = tvm_errf(e, errno, "jail: namespaces: new PID namespace: %s", strerror(errno));
		goto out;
	}
	sigemptyset(&fwd);
	sigaddset(&fwd, SIGINT);
	sigaddset(&fwd, SIGTERM);
	sigaddset(&fwd, SIGHUP);
	sigaddset(&fwd, SIGUSR1);
	sigaddset(&fwd, SIGCHLD);
	sigprocmask(SIG_BLOCK, &fwd, &old);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(life[1]);
		close(err[0]);
		if (go[1] >= 0)
			close(go[1]);
		child(j, life[0], err[1], go[0], &old, body, ctx);
	}
	r = pid < 0 ? -errno : 0;
	setns(pidns, CLONE_NEWPID);
	close(life[0]);
	close(err[1]);
	life[0] = err[1] = -1;
	if (r) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		r = tvm_errf(e, -r, "jail: fork: %s", strerror(-r));
		goto out;
	}
	if (j->on_start) {
		r = j->on_start(j->on_start_ctx, pid, e);
		if (!r && write(go[1], "g", 1) != 1)
			r = tvm_errf(e, errno, "jail: starting the child: %s", strerror(errno));
		if (r) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			sigprocmask(SIG_SETMASK, &old, NULL);
			goto out;
		}
	}
	status = wait_child(pid, &fwd, e);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (read(err[0], &child_err, sizeof(child_err)) == (ssize_t)sizeof(child_err) && child_err.code) {
		child_err.msg[sizeof(child_err.msg) - 1] = 0;
		status = tvm_errf(e, child_err.code, "%s", child_err.msg);
	}
	r = status;
out:
	for (int i = 0; i < 2; i++) {
		if (life[i] >= 0)
			close(life[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	if (pidns >= 0)
		close(pidns);
	return r;
}

/* ---- after ---- */

/* The caller's again: what the jail uid wrote becomes root's (or whoever
 * runs tinyvmm), as it would have been without the jail. */
static int move_in(int fromfd, const char *name, int tofd, int noreplace)
{
	struct stat st;

	if (fstatat(fromfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (fchownat(fromfd, name, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW) < 0 ||
	    renameat2(fromfd, name, tofd, name, noreplace ? RENAME_NOREPLACE : 0) < 0)
		return -errno;
	return 0;
}

/* A snapshot: every file (not the temporaries) into the target, "state"
 * last, the directory synced; a kept overlay: its one file. */
static int publish(const struct jail_stage *s, const char *stage, struct tvm_err *e)
{
	const char *slash = strrchr(s->target, '/');
	int len = s->snapshot ? (int)strlen(s->target) : slash == s->target ? 1 : (int)(slash - s->target);
	char dir[PATH_MAX];
	int from, to, r = 0;

	snprintf(dir, sizeof(dir), "%.*s", len, s->target);
	from = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	to = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (from < 0 || to < 0)
		r = -errno;
	if (!r && !s->snapshot) {
		r = move_in(from, slash + 1, to, 1);
		if (r == -ENOENT)
			r = 0; /* the VM failed before making it */
	} else if (!r) {
		DIR *d = fdopendir(dup(from));
		struct dirent *de;

		while (d && (de = readdir(d)) && !r)
			if (de->d_name[0] != '.' && strcmp(de->d_name, "state"))
				r = move_in(from, de->d_name, to, 0);
		if (d)
			closedir(d);
		if (!r)
			r = move_in(from, "state", to, 0);
		if (!r && fsync(to) < 0)
			r = -errno;
	}
	if (from >= 0)
		close(from);
	if (to >= 0)
		close(to);
	return r ? tvm_errf(e, -r, "jail: %s %s: %s", s->snapshot ? "snapshot" : "overlay", s->target, strerror(-r))
		 : 0;
}

int jail_finish(struct jail *j, int ok, struct tvm_err *e)
{
	char p[PATH_MAX * 2];
	int r = 0;

	if (!j || !j->made)
		return 0;
	for (unsigned i = 0; i < j->nst; i++) {
		const char *stage = j->m[j->st[i].mount].host;
		int k = ok || !j->st[i].snapshot ? publish(&j->st[i], stage, e) : 0;

		r = r ? r : k;
		jail_remove_path(stage);
	}
	if (j->link[0]) {
		ssize_t n = readlink(j->link, p, sizeof(p) - 1);

		if (n > 0 && (size_t)n == strlen(j->root) + strlen(JAIL_VSOCK_PATH) &&
		    !strncmp(p, j->root, strlen(j->root)))
			unlink(j->link); /* still ours */
	}
	jail_remove_path(j->dir);
	j->made = 0;
	return r;
}
