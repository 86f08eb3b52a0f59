#include "vmm/core/guest_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned guest_data_dirs(char dirs[GUEST_DIRS_MAX][PATH_MAX])
{
	char exe[PATH_MAX];
	ssize_t n;
	const char *env = getenv("TINYVMM_DATA_DIR");
	char *slash;

	if (env && *env) {
		snprintf(dirs[0], PATH_MAX, "%s", env);
		return 1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	if (!(slash = strrchr(exe, '/')))
		return 0;
	*slash = 0;
	snprintf(dirs[0], PATH_MAX, "%.*s/build/guest", PATH_MAX - 16, exe);
	/* ../share/tinyvmm, spelt without "..": the path the kernel gives
	 * for our own file has no symlink left in it */
	slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(dirs[1], PATH_MAX, "%.*s/share/tinyvmm", PATH_MAX - 24, slash ? exe : "");
	return 2;
}

int guest_files_found(char *looked, size_t cap)
{
	char dirs[GUEST_DIRS_MAX][PATH_MAX], kernel[PATH_MAX + 16], image[PATH_MAX + 16];
	unsigned n = guest_data_dirs(dirs);

	/* as the run looks: the first directory with a kernel is the one */
	for (unsigned i = 0; i < n; i++) {
		snprintf(kernel, sizeof(kernel), "%.*s/" GUEST_KERNEL, PATH_MAX - 1, dirs[i]);
		snprintf(image, sizeof(image), "%.*s/" GUEST_IMAGE, PATH_MAX - 1, dirs[i]);
		if (access(kernel, R_OK) == 0)
			return access(image, R_OK) == 0 ? 0 : (snprintf(looked, cap, "%s", dirs[i]), -ENOENT);
	}
	snprintf(looked, cap, "%s%s%s", n > 0 ? dirs[0] : "", n > 1 ? ", " : "", n > 1 ? dirs[1] : "");
	return -ENOENT;
}
