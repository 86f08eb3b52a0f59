/* What the jail's files share (vmm/sandbox/jail*.c); see jail.h. */
#ifndef TVM_JAIL_IMPL_H
#define TVM_JAIL_IMPL_H

#include "vmm/sandbox/jail.h"

#define JAIL_OWNER "owner"                 /* <dir>/<id>/owner: "pid starttime" of the process outside */
#define JAIL_EXTRA "extra"                 /* <dir>/<id>/extra: "link PATH" / "stage PATH" made outside */
#define JAIL_STAGE_PREFIX ".tinyvmm-jail-" /* stage directories: <prefix><id>-<n> */
#define JAIL_EXIT_ENTER 125                /* the child's status when the jail could not be entered */

/* Bind-mount src at dst, nosuid and noexec; nodev unless JAIL_M_DEV,
 * read-only unless JAIL_M_RW. 0 or -errno with e set (jail_enter.c). */
int jail_bind(const char *src, const char *dst, unsigned flags, struct tvm_err *e);

/* In the child: namespaces, mounts, pivot_root (jail_enter.c). */
int jail_enter(struct jail *j, struct tvm_err *e);

/* Whether the process holding the other end of the pipe fd is gone. */
int jail_parent_gone(int fd);

/* Remove the tree at an absolute path (its parent opened, then
 * jail_remove_tree). Returns 0 or -errno; a missing path is 0. */
int jail_remove_path(const char *path);

/* This process's start time (field 22 of /proc/self/stat). */
int jail_self_start(unsigned long long *start);

#endif
