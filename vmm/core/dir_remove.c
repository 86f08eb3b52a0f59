#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/dir_remove.h"

void dir_remove_flat(const char *dir)
{
	/* O_NOFOLLOW: a symlink planted at dir's name is unlinked itself,
	 * never the folder it points to emptied. */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0) {
		struct stat st;

		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(dir);
		return;
	}
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	rmdir(dir);
}
