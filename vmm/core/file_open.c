#include "vmm/core/file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/err.h"

/* "not a ... regular file ..." for the bounds, into buf. */
static const char *wanted(char *buf, size_t n, uint64_t min, uint64_t max)
{
	if (max == UINT64_MAX)
		return min ? "not a non-empty regular file" : "not a regular file";
	if (!min)
		snprintf(buf, n, "not a regular file of at most %llu bytes", (unsigned long long)max);
	else
		snprintf(buf, n, "not a regular file of %llu..%llu bytes", (unsigned long long)min,
			 (unsigned long long)max);
	return buf;
}

int file_open_regular(const char *what, const char *path, int flags, uint64_t min, uint64_t max, uint64_t *size,
		      struct tvm_err *e)
{
	const char *sep = what ? " " : "";
	struct stat st;
	char buf[80];
	int fd, r;

	if (!what)
		what = "";
	fd = open(path, flags | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return tvm_errf(e, errno, "%s%s%s: %s", what, sep, path, strerror(errno));
	if (fstat(fd, &st) < 0)
		r = tvm_errf(e, errno, "%s%s%s: fstat: %s", what, sep, path, strerror(errno));
	else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < min || (uint64_t)st.st_size > max)
		r = tvm_errf(e, EINVAL, "%s%s%s: %s", what, sep, path, wanted(buf, sizeof(buf), min, max));
	else {
		*size = (uint64_t)st.st_size;
		return fd;
	}
	close(fd);
	return r;
}

ssize_t file_read_small(int dirfd, const char *path, int flags, char *buf, size_t cap)
{
	int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

ssize_t file_read_whole(const char *path, int flags, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags);
	struct stat st;
	size_t got = 0;
	ssize_t r = 0;

	buf[0] = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode))
		r = -EINVAL;
	/* Read to EOF: a file that grew since the fstat is seen too. */
	while (!r) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		else if (n == 0)
			break;
		else if ((got += (size_t)n) == cap)
			r = -EFBIG;
	}
	close(fd);
	if (r)
		return r;
	buf[got] = 0;
	return (ssize_t)got;
}

int path_parent(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	int n = slash ? (slash == path ? 1 : (int)(slash - path)) : 1;

	return (size_t)snprintf(out, cap, "%.*s", n, slash ? path : ".") >= cap ? -ENAMETOOLONG : 0;
}
