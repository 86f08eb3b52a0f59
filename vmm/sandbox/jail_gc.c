/* Jails whose owner is gone: the owner record, the liveness check, and a
 * tree removal that never follows a symlink nor enters another mount (a
 * stale jail's directories are plain ones on the host: its mounts lived in
 * its own mount namespace; but nothing here trusts that). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/core/file_open.h"
#include "vmm/sandbox/jail_impl.h"

#define TREE_DEPTH 32 /* deeper than anything a jail makes */
#define SMALL_FILE 65536

/* Field 22 (starttime) counts from field 1; fields 3.. follow the last ')'
 * (the command name, field 2, may hold spaces and parentheses). */
int jail_parse_stat_start(const char *stat, unsigned long long *start)
{
	const char *p = strrchr(stat, ')');
	char *end;

	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field < 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		while (*p && *p != ' ')
			p++;
	}
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	*start = strtoull(p, &end, 10);
	if (errno || (*end && *end != ' ' && *end != '\n'))
		return -EINVAL;
	return 0;
}

int jail_parse_owner(const char *s, pid_t *pid, unsigned long long *start)
{
	char *end;
	long p;

	errno = 0;
	p = strtol(s, &end, 10);
	if (errno || end == s || *end != ' ' || p <= 0 || p > 4194304)
		return -EINVAL;
	s = end + 1;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	*start = strtoull(s, &end, 10);
	if (errno || (*end && *end != '\n'))
		return -EINVAL;
	*pid = (pid_t)p;
	return 0;
}

static int stat_start(const char *statpath, unsigned long long *start)
{
	char buf[1024];
	ssize_t n = file_read_small(AT_FDCWD, statpath, 0, buf, sizeof(buf));

	return n < 0 ? (int)n : jail_parse_stat_start(buf, start);
}

int jail_self_start(unsigned long long *start)
{
	return stat_start("/proc/self/stat", start);
}

ssize_t jail_pid_stat(pid_t pid, char *buf, size_t cap)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return file_read_small(AT_FDCWD, path, 0, buf, cap);
}

int jail_pid_start(pid_t pid, unsigned long long *start)
{
	char buf[1024];
	ssize_t n = jail_pid_stat(pid, buf, sizeof(buf));

	return n < 0 ? (int)n : jail_parse_stat_start(buf, start);
}

int jail_owner_alive(pid_t pid, unsigned long long start)
{
	unsigned long long now;
	int r = jail_pid_start(pid, &now);

	if (r == -ENOENT || r == -ESRCH)
		return 0;
	/* Unreadable for another reason: not ours to judge, keep it. Out of
	 * fds or memory says nothing of the process (and a confined caller,
	 * tinyvmm serve, may signal nothing: no kill(0) for it). */
	if (r == -EMFILE || r == -ENFILE || r == -ENOMEM)
		return 1;
	if (r)
		return kill(pid, 0) == 0 || errno == EPERM;
	return !start || now == start; /* another start time: the pid was reused */
}

/* The mount a directory entry lies on (0: the kernel does not say). */
static uint64_t mount_id(int dirfd, const char *name)
{
	struct statx sx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	return sx.stx_mnt_id;
}

static int remove_at(int at, const char *name, uint64_t mnt, int depth)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int fd, r = 0;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (mount_id(at, name) != mnt)
		return -EXDEV; /* a mount point (even of the same file system): never enter */
	if (depth > TREE_DEPTH)
		return -ELOOP;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		int k;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		k = remove_at(dirfd(d), de->d_name, mnt, depth + 1);
		if (k && !r)
			r = k;
	}
	closedir(d);
	if (unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !r)
		r = -errno;
	return r;
}

int jail_remove_tree(int dirfd, const char *name)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(name, '/');
	int fd, r;

	if (dirfd != AT_FDCWD && !slash)
		return remove_at(dirfd, name, mount_id(dirfd, ""), 0);
	/* The mount to stay on is that of name's own parent, not the
	 * cwd's (AT_FDCWD: a daemon's cwd is / or anywhere). */
	if ((slash && !slash[1]) || !*name || path_parent(name, parent, sizeof(parent)))
		return -EINVAL;
	fd = openat(dirfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	r = remove_at(fd, slash ? slash + 1 : name, mount_id(fd, ""), 0);
	close(fd);
	return r;
}

int jail_remove_path(const char *path)
{
	return strchr(path, '/') ? jail_remove_tree(AT_FDCWD, path) : -EINVAL;
}

/* Undo what jail <base>/<name> made outside its directory, as listed in its
 * extra file: a symlink (only if it still points into this jail) and stage
 * directories (only if named as ours). */
static void remove_extras(int basefd, const char *base, const char *name)
{
	char buf[SMALL_FILE], path[PATH_MAX + 16], prefix[PATH_MAX], link[PATH_MAX];
	char *line, *save = NULL;

	snprintf(path, sizeof(path), "%s/" JAIL_EXTRA, name);
	if (file_read_small(basefd, path, O_NOFOLLOW, buf, sizeof(buf)) <= 0)
		return;
	snprintf(prefix, sizeof(prefix), "%s/%s/", base, name);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "link /", 6)) {
			ssize_t n = readlink(line + 5, link, sizeof(link) - 1);

			if (n > 0 && (link[n] = 0, !strncmp(link, prefix, strlen(prefix))))
				unlink(line + 5);
		} else if (!strncmp(line, "stage /", 7)) {
			const char *b = strrchr(line, '/') + 1;

			snprintf(path, sizeof(path), JAIL_STAGE_PREFIX "%s-", name);
			if (!strncmp(b, path, strlen(path)))
				jail_remove_path(line + 6);
		}
	}
}

/* Whether jail <name> under basefd belongs to a process that is gone. Its
 * name starts with the owner's pid, for a jail caught before its owner
 * file was written. */
static int stale(int basefd, const char *name)
{
	char buf[128], path[PATH_MAX];
	unsigned long long start = 0;
	pid_t pid;
	char *end;
	long p;

	snprintf(path, sizeof(path), "%s/" JAIL_OWNER, name);
	if (file_read_small(basefd, path, O_NOFOLLOW, buf, sizeof(buf)) > 0 && jail_parse_owner(buf, &pid, &start) == 0)
		return !jail_owner_alive(pid, start);
	p = strtol(name, &end, 10);
	if (end == name || *end != '-' || p <= 0 || p > 4194304)
		return 0; /* not a jail of ours */
	return !jail_owner_alive((pid_t)p, 0);
}

int jail_gc(const char *dir, void (*on_removed)(const char *jail_dir), struct tvm_err *e)
{
	const char *base = dir ? dir : JAIL_DEFAULT_DIR;
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return errno == ENOENT ? 0 : tvm_errf(e, errno, "jail gc: %s: %s", base, strerror(errno));
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return tvm_errf(e, errno, "jail gc: %s: %s", base, strerror(errno));
	}
	while ((de = readdir(d))) {
		char path[PATH_MAX];

		if (de->d_name[0] == '.' || de->d_type != DT_DIR || !stale(fd, de->d_name))
			continue;
		remove_extras(fd, base, de->d_name);
		if (jail_remove_tree(fd, de->d_name))
			continue;
		n++;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		if (on_removed)
			on_removed(path);
	}
	closedir(d);
	return n;
}
