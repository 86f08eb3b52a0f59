/* Folders one may trust with what others must not change (a cache of
 * template snapshots, the sandbox service's state): not a symlink, owned
 * by our euid or root, writable by no one else; a folder above one may
 * be, when sticky (others then rename only their own entries), so no
 * other user can swap a checked folder for theirs. */
#ifndef TVM_DIR_TRUST_H
#define TVM_DIR_TRUST_H

#include <stdbool.h>
#include <stddef.h>

/* One folder: the trusted one itself (last), or one above it. 0, or
 * -errno (-ENOTDIR, -EPERM: another's, or others may write it). */
int dir_trusted(const char *path, bool last);

/* Every folder of path (made absolute with the working directory, no "."
 * or ".." allowed), from / down, the last as the trusted one: 0 and the
 * absolute path in out, or -errno with the folder that failed in out. */
int dir_path_trusted(const char *path, char *out, size_t cap);

#endif
