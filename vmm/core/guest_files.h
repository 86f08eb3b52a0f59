/* The default guest (kernel and base image) a VMM uses when it is given
 * none: where it is looked for. The CLI's zero-flag run takes it from
 * here, and tinyvmm serve says here whether its VMMs will find one. */
#ifndef TVM_GUEST_FILES_H
#define TVM_GUEST_FILES_H

#include <limits.h>
#include <stddef.h>

#define GUEST_KERNEL "vmlinux"
#define GUEST_IMAGE "rootfs.ext4"
#define GUEST_DIRS_MAX 2

/* The data directories looked in, in order, into dirs: $TINYVMM_DATA_DIR
 * alone when it is set (an explicit choice), else the running binary's
 * build/guest and ../share/tinyvmm. Their count. */
unsigned guest_data_dirs(char dirs[GUEST_DIRS_MAX][PATH_MAX]);

/* Whether the first of those directories that has a readable kernel also
 * has a readable base image: 0, or -ENOENT with the directories looked in
 * ("A, B") in looked (cap bytes). */
int guest_files_found(char *looked, size_t cap);

#endif
