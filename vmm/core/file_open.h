/* Opening a file the library reads whole (kernel, initrd, snapshot state,
 * snapshot memory) with the checks every such open needs. */
#ifndef TVM_FILE_OPEN_H
#define TVM_FILE_OPEN_H

#include <stdint.h>
#include <sys/types.h>

#include "vmm/core/tvm_types.h"

/* Open path with flags (O_CLOEXEC and O_NONBLOCK are added: a FIFO then
 * fails the check instead of blocking the open, and regular files ignore
 * O_NONBLOCK) and check that it is a regular file of min..max bytes.
 * Returns the fd (the caller closes it) with the file's size in *size, or
 * -errno with one line "[WHAT ]PATH: reason" in e (what may be NULL): the
 * open's error, or -EINVAL "not a regular file", "not a non-empty regular
 * file" (min 1), "not a regular file of at most MAX bytes" (min 0) or "not
 * a regular file of MIN..MAX bytes". */
int file_open_regular(const char *what, const char *path, int flags, uint64_t min, uint64_t max, uint64_t *size,
		      struct tvm_err *e);

/* Up to cap-1 bytes of the small file path (relative to dirfd, or
 * AT_FDCWD), read at once and NUL-terminated in buf (cap >= 1; flags are
 * added to O_RDONLY | O_NONBLOCK | O_CLOEXEC, e.g. O_NOFOLLOW). For
 * /proc, /sys and cgroup files and the jail's records. Returns the
 * bytes read or -errno. */
ssize_t file_read_small(int dirfd, const char *path, int flags, char *buf, size_t cap);

/* The whole of the regular file path, NUL-terminated in buf (cap >= 1):
 * its length, or -errno: -EINVAL not a regular file (a FIFO would block a
 * reader, a device never end), -EFBIG over cap - 1 bytes. flags are added
 * to O_RDONLY | O_NONBLOCK | O_CLOEXEC (e.g. O_NOFOLLOW). For the state,
 * config and record files a daemon reads back. */
ssize_t file_read_whole(const char *path, int flags, char *buf, size_t cap);

/* The folder path names its last entry in, into out: "a/b" gives "a",
 * "/b" gives "/", "b" gives ".". 0, or -ENAMETOOLONG (out too small). */
int path_parent(const char *path, char *out, size_t cap);

#endif
