/* Folders one may trust with what others must not change: see
 * dir_trust.h. */
#include "vmm/core/dir_trust.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dir_trusted(const char *path, bool last)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st.st_mode & S_ISVTX))))
		return -EPERM;
	return 0;
}

int dir_path_trusted(const char *path, char *out, size_t cap)
{
	char full[PATH_MAX], cwd[PATH_MAX];
	size_t n = 0;
	int r;

	/* Relative: the working directory's folders are checked too. */
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return -errno;
	if ((size_t)snprintf(full, sizeof(full), "%s/%s", path[0] == '/' ? "" : cwd, path) >= sizeof(full))
		return -ENAMETOOLONG;
	for (const char *p = full; *p;) {
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);

		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return snprintf(out, cap, "%s", path), -EINVAL;
		if (len) {
			if (n + 1 + len >= cap)
				return -ENAMETOOLONG;
			out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
			out[n] = 0;
			if ((r = dir_trusted(out, !*e || !e[strspn(e, "/")])))
				return r;
		}
		p = *e ? e + 1 : e;
	}
	return n ? 0 : -EINVAL;
}
