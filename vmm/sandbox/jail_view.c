/* A running process's own view of the file system: an empty, read-only
 * root with only the directories it names, each at its own absolute path
 * (so every path it already holds keeps working). For a process that
 * parses hostile bytes and lives on (tinyvmm serve's daemon), where a jail
 * (jail.h: a new PID namespace, a child) does not fit. What is not named
 * cannot be reached by path at all: no host file, and no named Unix socket
 * (a container runtime's), which Landlock cannot refuse a connect to. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/jail_impl.h"

/* mkdir -p of path's components after its first skip bytes (those exist). */
static int make_dirs(char *path, size_t skip)
{
	for (char *p = path + skip + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;

		*p = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*p = c;
			return -errno;
		}
		*p = c;
		if (!c)
			return 0;
	}
}

/* A mount point beneath one of v's read-write directories that is not
 * one of them: each is bound alone (not recursively), so its view would
 * show what is under that mount, not the mount (the daemon would write
 * where nobody else looks). Read-only ones may have them (/proc has
 * binfmt_misc): what they hide is only not seen. -EBUSY naming both, or 0. */
static int mounts_beneath(const struct jail_view_dir *v, unsigned n, struct tvm_err *e)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, mp[PATH_MAX];
	size_t cap = 0;
	int r = 0;

	if (!f)
		return tvm_errf(e, errno, "view: /proc/self/mountinfo: %s", strerror(errno));
	while (!r && getline(&line, &cap, f) > 0) {
		const char *p = line;
		size_t k = 0;

		/* the fifth field, octal escapes (\040 for a space) undone */
		for (int field = 0; field < 4 && p; field++)
			p = (p = strchr(p, ' ')) ? p + 1 : NULL;
		for (; p && *p && *p != ' ' && *p != '\n' && k < sizeof(mp) - 1; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
			    p[3] <= '7') {
				mp[k++] = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
				p += 3;
			} else {
				mp[k++] = *p;
			}
		}
		mp[k] = 0;
		for (unsigned i = 0; i < n && !r; i++) {
			size_t len = strlen(v[i].path);
			bool named = false;

			if (!(v[i].flags & JAIL_M_RW) || strncmp(mp, v[i].path, len) || mp[len] != '/')
				continue;
			for (unsigned j = 0; j < n; j++)
				named |= !strcmp(mp, v[j].path);
			if (!named)
				r = tvm_errf(e, EBUSY,
					     "view: %s has a mount beneath it (%s): its own view would hide it",
					     v[i].path, mp);
		}
	}
	free(line);
	fclose(f);
	return r;
}

int jail_view(const struct jail_view_dir *v, unsigned n, struct tvm_err *e)
{
	int fds[JAIL_VIEW_MAX], r = 0;
	unsigned opened = 0;
	char dst[2 * PATH_MAX], src[64];
	const char *root;

	if (!n || n > JAIL_VIEW_MAX)
		return tvm_errf(e, EINVAL, "view: %u directories (1 to %d)", n, JAIL_VIEW_MAX);
	for (unsigned i = 0; i < n; i++)
		if (v[i].path[0] != '/' || !v[i].path[1] || strlen(v[i].path) >= PATH_MAX)
			return tvm_errf(e, EINVAL, "view: %s: not an absolute path below /", v[i].path);
	if ((r = mounts_beneath(v, n, e)))
		return r;
	if (unshare(CLONE_NEWNS) < 0) {
		r = tvm_errf(e, errno, "view: a mount namespace: %s", strerror(errno));
		goto out;
	}
	/* Nothing mounted here reaches the host's namespace, nor back. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		r = tvm_errf(e, errno, "view: making / private: %s", strerror(errno));
		goto out;
	}
	/* Each one held before anything is mounted over it, and opened in
	 * this namespace: a bind takes a source of the caller's own only. */
	for (; opened < n; opened++) {
		fds[opened] = open(v[opened].path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fds[opened] < 0) {
			r = tvm_errf(e, errno, "view: %s: %s", v[opened].path, strerror(errno));
			goto out;
		}
	}
	/* The new root is a tmpfs over the first directory: it exists, and
	 * the view's copy of it comes from its descriptor. */
	root = v[0].path;
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0) {
		r = tvm_errf(e, errno, "view: tmpfs on %s: %s", root, strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < n && !r; i++) {
		snprintf(dst, sizeof(dst), "%s%s", root, v[i].path);
		snprintf(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
		if ((r = make_dirs(dst, strlen(root))) < 0 ||
		    (r = jail_bind(src, dst, JAIL_M_DIR | (v[i].flags & JAIL_M_RW), NULL)) < 0)
			r = tvm_errf(e, -r, "view: %s: %s", v[i].path, strerror(-r));
	}
	if (r)
		goto out;
	/* pivot_root(".", "."): the old root ends up on top of the new one,
	 * and is detached at once. */
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0) {
		r = tvm_errf(e, errno, "view: pivot_root into a tmpfs on %s: %s", root, strerror(errno));
		goto out;
	}
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		r = tvm_errf(e, errno, "view: read-only root: %s", strerror(errno));
out:
	while (opened)
		close(fds[--opened]);
	return r;
}
