/* PUT_FILE / GET_FILE transfers.
 *
 * File system calls, reads and writes run with the requested uid:gid as
 * the effective ids (as_identity), so a job cannot turn a host request
 * into a root write or read through a link it planted. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PUT_TMP_LEN 32 /* ".tinyvmm-put-" and 16 hex digits */

struct xfer {
	struct xfer *next;
	uint32_t id;
	bool put;
	bool failed; /* PUT: error already reported, data is dropped until FILE_END */
	bool whole;  /* PUT: ended with its OK (else what it wrote is removed) */
	int fd;
	uint64_t done; /* bytes moved */
	uint64_t max;  /* GET: cap */
	uint32_t mode; /* GET: the file's mode bits */
	/* PUT: the directory held open, the name the file gets at its end
	 * (base), the new file it writes meanwhile (tmp, its dev/ino), by
	 * whom */
	int dirfd;
	char *base;
	char tmp[PUT_TMP_LEN];
	uint32_t uid, gid;
	dev_t dev;
	ino_t ino;
};

static struct xfer *xfer_find(struct conn *c, uint32_t id)
{
	for (struct xfer *x = c->xfers; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

/* File system calls as uid:gid (on), back as root (off); the agent is
 * single-threaded. As the effective ids, with only gid as group, not
 * setfsuid: /proc/sys and capability checks (CAP_NET_ADMIN for net
 * sysctls) look at the effective uid and capabilities, which a non-root
 * euid drops and 0 gets back (helper-68: a PUT as uid 1000 wrote a root
 * sysctl). 0, or -1 with errno when the identity cannot be taken (then
 * nothing is done as root instead: the caller fails). */
static int as_identity(uint32_t uid, uint32_t gid, bool on)
{
	static gid_t root_groups[32];
	static int nroot = -1;

	if (!ag.can_setuid)
		return 0;
	if (!on) {
		if (syscall(SYS_setresuid, -1, 0, -1) || syscall(SYS_setresgid, -1, 0, -1) ||
		    syscall(SYS_setgroups, nroot > 0 ? nroot : 0, root_groups))
			/* cannot happen (the saved uid is 0); were it to, later
			 * requests fail with fewer rights, never more */
			agent_log("file identity: cannot become root again: %s", strerror(errno));
		return 0;
	}
	if (nroot < 0)
		nroot = getgroups(32, root_groups);
	if (syscall(SYS_setgroups, 1, &gid) || syscall(SYS_setresgid, -1, gid, -1) ||
	    syscall(SYS_setresuid, -1, uid, -1)) {
		int err = errno;

		as_identity(uid, gid, false);
		errno = err;
		return -1;
	}
	return 0;
}

/* open(path, flags) without passing through a procfs magic link
 * (/proc/self/fd/N, /proc/PID/root, ...): the kernel lets a process
 * reopen its own open files through them whatever its ids, so a job's
 * link to /proc/self/fd/N would give a request as its identity another
 * transfer's file, past the permissions of that file's directories
 * (helper-69). openat2 RESOLVE_NO_MAGICLINKS (Linux 5.6): ELOOP. */
static int open_no_magic(const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)flags, .resolve = RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	return fd < 0 && errno == ENOSYS ? open(path, flags) : fd;
}

/* Whether tmp in dirfd is still the file dev/ino (a job may have put
 * another file, or a symlink, under the name meanwhile). */
static bool tmp_is(int dirfd, const char *tmp, dev_t dev, ino_t ino)
{
	struct stat st;

	return fstatat(dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* A PUT's new file that is not used (the PUT failed, or never got its
 * transfer) is removed, if its temporary name still is that file, as
 * the identity that made it, in the directory it was made in (held: a job
 * that swaps a directory of the path meanwhile cannot send the removal
 * elsewhere). The name it was for was never touched: what was there
 * stays, and so does what another PUT of it put there meanwhile. */
static void tmp_remove(int dirfd, const char *tmp, dev_t dev, ino_t ino, uint32_t uid, uint32_t gid)
{
	if (as_identity(uid, gid, true) == 0 && tmp_is(dirfd, tmp, dev, ino))
		unlinkat(dirfd, tmp, 0);
	as_identity(uid, gid, false);
}

/* The whole new file takes its name, in the directory it was made in, as
 * its identity (whatever is at the name now is replaced: another PUT's
 * file, a job's). -1 with errno; ESTALE: the temporary name is no longer
 * the file written (a job replaced it), nothing renamed. */
static int put_rename(const struct xfer *x)
{
	int rc, err;

	if (as_identity(x->uid, x->gid, true) < 0) {
		rc = -1;
		err = errno;
	} else if (!tmp_is(x->dirfd, x->tmp, x->dev, x->ino)) {
		rc = -1;
		err = ESTALE;
	} else {
		rc = renameat(x->dirfd, x->tmp, x->dirfd, x->base);
		err = errno;
		/* base a hard link to the new file: rename did nothing (and
		 * said 0); base holds the data, the temporary name goes */
		if (rc == 0 && tmp_is(x->dirfd, x->tmp, x->dev, x->ino))
			unlinkat(x->dirfd, x->tmp, 0);
	}
	as_identity(x->uid, x->gid, false);
	errno = err;
	return rc;
}

static void xfer_drop(struct conn *c, struct xfer *x)
{
	struct xfer **pp = &c->xfers;

	while (*pp != x)
		pp = &(*pp)->next;
	*pp = x->next;
	if (x->fd >= 0)
		close(x->fd);
	if (x->put && !x->whole && x->dirfd >= 0 && x->tmp[0])
		tmp_remove(x->dirfd, x->tmp, x->dev, x->ino, x->uid, x->gid);
	if (x->put && x->dirfd >= 0)
		close(x->dirfd);
	free(x->base);
	free(x);
}

/* mkdir -p of path's parents, with mode 0755. */
static int mkdir_parents(char *path)
{
	for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		int rc;

		*s = 0;
		rc = mkdir(path, 0755);
		*s = '/';
		if (rc < 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* How a PUT puts its file at a name. */
enum put_how {
	PUT_NEW,      /* nothing there (or a symlink, replaced): a new file beside it, renamed over */
	PUT_REPLACE,  /* a regular file: likewise, keeping its mode */
	PUT_IN_PLACE, /* a regular file that cannot be renamed over: written in place (O_TRUNC) */
};

/* The id of the mount fd is on (statx STATX_MNT_ID, Linux 5.8), 0 when
 * it cannot be told: a file bind-mounted on a name has another than its
 * directory (and the same st_dev when both are of one file system). */
static uint64_t mount_of(int fd)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	return sx.stx_mnt_id;
}

/* 0 when a PUT by uid may put a file at base in dirfd, and how (*how,
 * *mode: an existing file's mode without its set-id bits, as a write to
 * it would leave); else the errno an open of the name for writing would
 * give (a directory EISDIR, another kind of file that is not a symlink
 * EINVAL, a file uid may not write its errno). A symlink is replaced, not
 * followed. An existing regular file is opened for writing (no O_TRUNC:
 * that open is the permission check) and kept open in *wfd: written in
 * place, it is that file, whatever the name is by then (helper-66: a job
 * swapped a hard link in between a check and a second open). It is
 * written in place when it could not be renamed over: a mount point
 * (EBUSY), or in a sticky directory neither it nor the directory uid's
 * (EPERM). */
static int put_may_replace(int dirfd, const char *base, uid_t uid, mode_t *mode, enum put_how *how, int *wfd)
{
	struct stat st, dir;
	int fd;

	*how = PUT_NEW;
	*wfd = -1;
	if (!*base)
		return EISDIR;
	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (S_ISLNK(st.st_mode))
		return 0;
	if (!S_ISREG(st.st_mode))
		return EINVAL;
	fd = openat(dirfd, base, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || fstat(dirfd, &dir) < 0) {
		int err = errno && !S_ISREG(st.st_mode) ? EINVAL : errno;

		close(fd);
		return err ? err : EINVAL;
	}
	*wfd = fd;
	/* the identity's own file keeps its mode; another's (a job's 0666
	 * file that root replaces) gets the mode asked for (helper-68) */
	if (st.st_uid == uid)
		*mode = st.st_mode & 01777;
	*how = st.st_dev != dir.st_dev || mount_of(fd) != mount_of(dirfd) ||
			       ((dir.st_mode & S_ISVTX) && uid && st.st_uid != uid && dir.st_uid != uid)
		       ? PUT_IN_PLACE
		       : PUT_REPLACE;
	return 0;
}

/* A new file in dirfd under a temporary name of its own (tmp, made with
 * O_EXCL: nothing planted there is opened), mode exact when exact (else
 * the umask applies, as to any new file). -1 with errno. */
static int put_create(int dirfd, mode_t mode, bool exact, char tmp[PUT_TMP_LEN])
{
	static uint64_t seq;
	int fd = -1, err;

	for (int i = 0; i < 16 && fd < 0; i++) {
		uint64_t r;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = ++seq ^ (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() << 40;
		snprintf(tmp, PUT_TMP_LEN, ".tinyvmm-put-%016llx", (unsigned long long)r);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	if (fd >= 0 && exact && fchmod(fd, mode) < 0) {
		err = errno;
		close(fd);
		unlinkat(dirfd, tmp, 0);
		errno = err;
		return -1;
	}
	return fd;
}

/* A PUT's new file: the directory that holds path, held in *dirfd, and in
 * it a new file under a temporary name (tmp), which FILE_END renames over
 * the last component, so the name holds the old file or the whole new
 * one, never a part (put_may_replace says what may be replaced). Where no
 * file can be made beside an existing one, or it could not be renamed
 * over (a sticky directory), that one is opened to be written in place
 * (O_TRUNC), tmp "". -1 with errno, *dirfd -1. */
static int put_open(char *path, mode_t mode, uid_t uid, int *dirfd, char tmp[PUT_TMP_LEN])
{
	char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	enum put_how how;
	int fd = -1, wfd = -1, err;

	if (slash)
		*slash = 0;
	*dirfd = open_no_magic(!slash ? "." : slash == path ? "/" : path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (slash)
		*slash = '/';
	if (*dirfd < 0)
		return -1;
	err = put_may_replace(*dirfd, base, uid, &mode, &how, &wfd);
	if (!err && how != PUT_IN_PLACE && (fd = put_create(*dirfd, mode, how == PUT_REPLACE, tmp)) < 0) {
		err = errno;
		/* No new file can be made beside it (a directory the identity
		 * may not write, /proc, /sys): written in place, as a write
		 * to it would be. */
		if (how == PUT_REPLACE &&
		    (err == EACCES || err == EPERM || err == ENOENT || err == EROFS || err == EOPNOTSUPP))
			how = PUT_IN_PLACE;
	}
	if (how == PUT_IN_PLACE) {
		struct stat st;

		/* a file with another hard link may be anyone's (a job links
		 * root's file where root is to PUT, and removes the directory
		 * so no new file can be made: helper-68) */
		tmp[0] = 0;
		fd = fstat(wfd, &st) < 0      ? -1
		     : st.st_nlink != 1       ? (errno = EMLINK, -1)
		     : ftruncate(wfd, 0) == 0 ? wfd
					      : -1;
		err = errno;
		wfd = fd < 0 ? wfd : -1;
	}
	if (wfd >= 0)
		close(wfd);
	if (fd < 0) {
		close(*dirfd);
		*dirfd = -1;
		errno = err;
	}
	return fd;
}

/* Opens a regular file for a new transfer id with the requested identity:
 * a GET's file (dirfd NULL), or a PUT's new one (put_open: in the
 * directory held in *dirfd, under the temporary name tmp); reports errors
 * to the host and returns -1. */
static int xfer_open(struct conn *c, const struct tvp_msg *m, struct tvp_str p, uint32_t uid, uint32_t gid, mode_t mode,
		     struct stat *st, int *dirfd, char tmp[PUT_TMP_LEN])
{
	char path[TVP_MAX_PATH + 1];
	unsigned n = 0;
	bool st_ok = false;
	int fd, err;

	if (dirfd)
		*dirfd = -1;
	for (struct xfer *x = c->xfers; x; x = x->next)
		n++;
	if (xfer_find(c, m->id)) {
		conn_send_error(c, m->id, TVP_ERR_BUSY, 0, "transfer id %u is in use", m->id);
		return -1;
	}
	if (n >= AGENT_MAX_XFERS) {
		conn_send_error(c, m->id, TVP_ERR_LIMIT, 0, "too many transfers (%d)", AGENT_MAX_XFERS);
		return -1;
	}
	memcpy(path, p.p, p.len); /* parse checked: 0 < len <= TVP_MAX_PATH, no NUL */
	path[p.len] = 0;
	if (!agent_identity(&uid, &gid)) {
		conn_send_error(c, m->id, TVP_ERR_IO, EPERM, "open %s: not allowed as %u:%u", path, uid, gid);
		return -1;
	}
	if (as_identity(uid, gid, true) < 0) {
		fd = -1;
	} else {
		/* O_NONBLOCK: a FIFO planted at the path must not hang the agent. */
		fd = dirfd ? put_open(path, mode, uid, dirfd, tmp)
			   : open_no_magic(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0 && errno == ENOENT && dirfd && (m->flags & TVP_PUT_MKDIRS))
			fd = mkdir_parents(path) < 0 ? -1 : put_open(path, mode, uid, dirfd, tmp);
	}
	err = errno;
	as_identity(uid, gid, false);
	if (fd >= 0 && !(st_ok = fstat(fd, st) == 0)) {
		err = errno;
		close(fd);
		fd = -1;
	} else if (fd >= 0 && !S_ISREG(st->st_mode)) {
		err = EINVAL;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		if (dirfd && *dirfd >= 0) {
			if (tmp[0] && st_ok) /* made, then found unusable: not left behind */
				tmp_remove(*dirfd, tmp, st->st_dev, st->st_ino, uid, gid);
			close(*dirfd);
			*dirfd = -1;
		}
		conn_send_error(c, m->id, TVP_ERR_IO, err, "open %s: %s", path,
				err == EINVAL ? "not a regular file" : strerror(err));
		return -1;
	}
	if (m->type == TVP_GET_FILE && (uint64_t)st->st_size > m->get.max_bytes) {
		conn_send_error(c, m->id, TVP_ERR_TOO_BIG, EFBIG, "%s: %lld bytes over the cap of %llu", path,
				(long long)st->st_size, (unsigned long long)m->get.max_bytes);
		close(fd);
		return -1;
	}
	return fd;
}

static struct xfer *xfer_add(struct conn *c, const struct tvp_msg *m, int fd, uint64_t max, uint32_t mode)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x) {
		close(fd);
		conn_send_error(c, m->id, TVP_ERR_LIMIT, ENOMEM, "no memory for a transfer");
		return NULL;
	}
	*x = (struct xfer){ .next = c->xfers,
			    .id = m->id,
			    .put = m->type == TVP_PUT_FILE,
			    .fd = fd,
			    .dirfd = -1,
			    .max = max,
			    .mode = mode };
	c->xfers = x;
	return x;
}

void file_put(struct conn *c, const struct tvp_msg *m)
{
	struct stat st;
	struct xfer *x;
	const char *slash = memrchr(m->put.path.p, '/', m->put.path.len);
	size_t skip = slash ? (size_t)(slash - (const char *)m->put.path.p) + 1 : 0;
	char *base = strndup((const char *)m->put.path.p + skip, m->put.path.len - skip);
	uint32_t uid = m->put.uid, gid = m->put.gid;
	char tmp[PUT_TMP_LEN] = "";
	int dirfd = -1, fd = base ? xfer_open(c, m, m->put.path, uid, gid, m->put.mode & 07777, &st, &dirfd, tmp) : -1;

	if (!base)
		conn_send_error(c, m->id, TVP_ERR_LIMIT, ENOMEM, "no memory for a transfer");
	if (fd >= 0 && (x = xfer_add(c, m, fd, 0, 0))) {
		agent_identity(&uid, &gid); /* as xfer_open took them */
		x->dirfd = dirfd;
		x->base = base;
		memcpy(x->tmp, tmp, sizeof(x->tmp));
		x->uid = uid;
		x->gid = gid;
		x->dev = st.st_dev;
		x->ino = st.st_ino;
		return;
	}
	if (dirfd >= 0) { /* no memory for the transfer: its new file goes */
		agent_identity(&uid, &gid);
		if (tmp[0])
			tmp_remove(dirfd, tmp, st.st_dev, st.st_ino, uid, gid);
		close(dirfd);
	}
	free(base);
}

void file_get(struct conn *c, const struct tvp_msg *m)
{
	struct stat st;
	uint32_t uid = m->get.uid, gid = m->get.gid;
	int fd = xfer_open(c, m, m->get.path, uid, gid, 0, &st, NULL, NULL);
	struct xfer *x;

	if (fd >= 0 && (x = xfer_add(c, m, fd, m->get.max_bytes, st.st_mode & 07777))) {
		agent_identity(&uid, &gid); /* as xfer_open took them: its reads are theirs too */
		x->uid = uid;
		x->gid = gid;
	}
}

static struct xfer *put_find(struct conn *c, const struct tvp_msg *m)
{
	struct xfer *x = xfer_find(c, m->id);

	if (!x || !x->put) {
		conn_send_error(c, m->id, TVP_ERR_STATE, 0, "%s: no PUT_FILE %u in progress", tvp_type_name(m->type),
				m->id);
		return NULL;
	}
	return x;
}

void file_data(struct conn *c, const struct tvp_msg *m)
{
	struct xfer *x = put_find(c, m);
	const uint8_t *p = m->data.data.p;
	size_t left = m->data.data.len;
	ssize_t n;

	if (!x || x->failed)
		return;
	/* /proc and /sys check each write too: as the identity, as the open */
	if (as_identity(x->uid, x->gid, true) < 0) {
		conn_send_error(c, m->id, TVP_ERR_IO, errno, "write: %s", strerror(errno));
		x->failed = true;
		as_identity(x->uid, x->gid, false);
		return;
	}
	while (left) {
		n = write(x->fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : ENOSPC;

			as_identity(x->uid, x->gid, false);
			conn_send_error(c, m->id, TVP_ERR_IO, err, "write: %s", strerror(err));
			x->failed = true;
			return;
		}
		p += n;
		left -= (size_t)n;
		x->done += (uint64_t)n;
	}
	as_identity(x->uid, x->gid, false);
}

void file_end(struct conn *c, const struct tvp_msg *m)
{
	struct xfer *x = put_find(c, m);
	int rc;

	if (!x)
		return;
	if (!x->failed) {
		rc = close(x->fd);
		x->fd = -1;
		if (rc < 0)
			conn_send_error(c, m->id, TVP_ERR_IO, errno, "close: %s", strerror(errno));
		else if (m->file_end.size != x->done)
			conn_send_error(c, m->id, TVP_ERR_STATE, 0, "FILE_END says %llu bytes, %llu arrived",
					(unsigned long long)m->file_end.size, (unsigned long long)x->done);
		else if (x->tmp[0] && put_rename(x) < 0)
			conn_send_error(c, m->id, TVP_ERR_IO, errno, "rename to %s: %s", x->base,
					errno == ESTALE ? "its new file was replaced meanwhile" : strerror(errno));
		else {
			x->whole = true;
			conn_send_ok(c, m->id, TVP_PUT_FILE, x->done);
		}
	}
	xfer_drop(c, x);
}

bool file_pump(struct conn *c)
{
	struct xfer *x, *next;
	uint8_t *buf;
	ssize_t n;
	bool more = false;

	for (x = c->xfers; x && !c->dead; x = next) {
		next = x->next;
		if (x->put)
			continue;
		if (!conn_room(c))
			return true;
		buf = conn_data_begin(c, AGENT_FILE_CHUNK);
		/* as the identity: /proc checks each read too */
		n = buf && as_identity(x->uid, x->gid, true) == 0 ? read(x->fd, buf, AGENT_FILE_CHUNK) : -1;
		as_identity(x->uid, x->gid, false);
		if (n < 0 && errno == EINTR) {
			more = true;
		} else if (n < 0) {
			conn_send_error(c, x->id, TVP_ERR_IO, buf ? errno : ENOMEM, "read: %s",
					strerror(buf ? errno : ENOMEM));
			xfer_drop(c, x);
		} else if ((uint64_t)n > x->max - x->done) {
			conn_send_error(c, x->id, TVP_ERR_TOO_BIG, EFBIG, "file grew over the cap of %llu bytes",
					(unsigned long long)x->max);
			xfer_drop(c, x);
		} else if (n == 0) {
			struct tvp_msg end = { .type = TVP_FILE_END, .id = x->id, .file_end = { x->done, x->mode } };

			conn_send(c, &end);
			xfer_drop(c, x);
		} else {
			conn_data_end(c, TVP_FILE_DATA, x->id, (size_t)n);
			x->done += (uint64_t)n;
			more = true;
		}
	}
	return more;
}

void file_conn_gone(struct conn *c)
{
	while (c->xfers)
		xfer_drop(c, c->xfers);
}
