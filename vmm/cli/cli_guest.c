/* The guest kernel and base image tinyvmm uses when none is given: found
 * next to the binary (a build tree's build/guest, or an install's
 * share/tinyvmm), so `tinyvmm run -- CMD` needs no flag. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/guest_files.h"

int cli_guest_defaults(struct cli_args *a)
{
	static char kernel[PATH_MAX], image[PATH_MAX];
	char dirs[GUEST_DIRS_MAX][PATH_MAX];
	/* The base image goes with a job (its agent runs it) or with the
	 * default kernel; a --kernel of one's own with neither keeps booting
	 * bare, as before. */
	int want_root = !a->have_root && !a->c.initrd_path && (a->job.argv || !a->c.kernel_path);
	unsigned n;

	if (a->snapshot || (a->c.kernel_path && !want_root))
		return 0;
	n = guest_data_dirs(dirs);
	for (unsigned i = 0; i < n; i++) {
		snprintf(kernel, sizeof(kernel), "%.*s/" GUEST_KERNEL, PATH_MAX - 16, dirs[i]);
		snprintf(image, sizeof(image), "%.*s/" GUEST_IMAGE, PATH_MAX - 16, dirs[i]);
		if (access(a->c.kernel_path ? image : kernel, R_OK))
			continue;
		if (!a->c.kernel_path)
			a->c.kernel_path = kernel;
		if (want_root) {
			if (access(image, R_OK)) {
				fprintf(stderr,
					"tinyvmm: no base image %s (give --rootfs, or run `bash tools/setup.sh`)\n",
					image);
				return EXIT_VM_FAILED;
			}
			/* As --rootfs IMAGE: copy-on-write, the image never written. */
			a->root = (struct tvm_drive){ .path = image, .cow = 1 };
			a->have_root = 1;
			a->default_root = 1;
		}
		return 0;
	}
	if (a->c.kernel_path)
		fprintf(stderr, "tinyvmm: a job needs a root file system with the agent: give --rootfs (no base image "
				"found; `bash tools/setup.sh` builds one)\n");
	else
		fprintf(stderr,
			"tinyvmm: no guest kernel: give --kernel, or build one (`make guest` in a build tree, "
			"`bash tools/setup.sh` to install one) (looked in %s%s%s)\n",
			n > 0 ? dirs[0] : "", n > 1 ? ", " : "", n > 1 ? dirs[1] : "");
	return EXIT_VM_FAILED;
}
