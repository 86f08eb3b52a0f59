/* Into the jail, in the child (already PID 1 of its PID namespace): new
 * mount, IPC and UTS namespaces (and the network namespace asked for),
 * the jail's root bound on itself and every planned file bound in it, a
 * /proc of this PID namespace only, then pivot_root and the old root
 * detached. Every mount is nosuid and noexec; only device nodes keep
 * device access; the root is read-only but for /tmp and /run. The mounts
 * live in this mount namespace only: nothing needs unmounting on the host
 * when the jail ends. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/jail_impl.h"

#define HOSTNAME "tinyvmm"

int jail_bind(const char *src, const char *dst, unsigned flags, struct tvm_err *e)
{
	unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC;

	if (!(flags & JAIL_M_DEV))
		f |= MS_NODEV;
	if (!(flags & JAIL_M_RW))
		f |= MS_RDONLY;
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0 || mount(NULL, dst, NULL, f, NULL) < 0)
		return tvm_errf(e, errno, "jail: mounts: %s: %s", src, strerror(errno));
	return 0;
}

/* A shown file, bind-mounted at dst: the mount pins what it shows, so
 * checking that against what was checked when the jail was planned closes
 * the window in which the host path could have been swapped (for a
 * symlink, another file) in between. */
static int bind_checked(const struct jail_mount *m, const char *dst, struct tvm_err *e)
{
	struct stat st;
	int r = jail_bind(m->host, dst, m->flags, e);

	if (r || !m->ino)
		return r;
	if (stat(dst, &st) < 0)
		return tvm_errf(e, errno, "jail: mounts: %s: %s", m->host, strerror(errno));
	if ((uint64_t)st.st_dev != m->dev || (uint64_t)st.st_ino != m->ino)
		return tvm_errf(e, ESTALE,
				"jail: mounts: %s is no longer the file that was checked (replaced meanwhile)",
				m->host);
	return 0;
}

static int in_root(const struct jail *j, const char *path, char *buf, size_t cap, struct tvm_err *e)
{
	if (snprintf(buf, cap, "%s%s", j->root, path) >= (int)cap)
		return tvm_errf(e, ENAMETOOLONG, "jail: mounts: %s: path too long", path);
	return 0;
}

static int mounts(const struct jail *j, struct tvm_err *e)
{
	char p[PATH_MAX * 2];
	int r;

	/* Nothing mounted here reaches the host's namespace, nor back. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return tvm_errf(e, errno, "jail: mounts: making / private: %s", strerror(errno));
	if (mount(j->root, j->root, NULL, MS_BIND, NULL) < 0) /* pivot_root wants a mount point */
		return tvm_errf(e, errno, "jail: mounts: %s: %s", j->root, strerror(errno));
	if ((r = in_root(j, "/tmp", p, sizeof(p), e)) || (r = jail_bind(p, p, JAIL_M_RW, e)) ||
	    (r = in_root(j, JAIL_RUN_DIR, p, sizeof(p), e)) || (r = jail_bind(p, p, JAIL_M_RW, e)))
		return r;
	for (unsigned i = 0; i < j->nm; i++)
		if (!(j->m[i].flags & JAIL_M_SEEN) &&
		    ((r = in_root(j, j->m[i].path, p, sizeof(p), e)) || (r = bind_checked(&j->m[i], p, e))))
			return r;
	if ((r = in_root(j, "/proc", p, sizeof(p), e)))
		return r;
	/* This PID namespace's processes only (subset=pid: no /proc/sys and
	 * the like); read-only, so not even /proc/self/mem is writable. */
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "subset=pid") < 0 &&
	    mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
		return tvm_errf(e, errno, "jail: mounts: /proc: %s", strerror(errno));
	if (mount(NULL, j->root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return tvm_errf(e, errno, "jail: mounts: read-only root: %s", strerror(errno));
	return 0;
}

int jail_enter(struct jail *j, struct tvm_err *e)
{
	int r;

	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
		return tvm_errf(e, errno, "jail: namespaces: new mount, IPC and UTS namespaces: %s", strerror(errno));
	if (j->o.netns) {
		int fd = open(j->o.netns, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
			r = errno;
			if (fd >= 0)
				close(fd);
			return tvm_errf(e, r, "jail: namespaces: --netns %s: %s", j->o.netns, strerror(r));
		}
		close(fd);
	}
	if (sethostname(HOSTNAME, strlen(HOSTNAME)) < 0)
		return tvm_errf(e, errno, "jail: namespaces: hostname: %s", strerror(errno));
	/* glibc loads the unwinder on the first pthread_cancel or
	 * pthread_exit, from a path the jail does not show: load it now (later
	 * loads find it by its name, opening nothing). Not fatal if absent. */
	dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
	if ((r = mounts(j, e)))
		return r;
	/* pivot_root(".", "."): the old root ends up on top of the new one,
	 * and is detached at once. */
	if (chdir(j->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return tvm_errf(e, errno, "jail: pivot_root into %s: %s", j->root, strerror(errno));
	return 0;
}
