/* The jail: one VM's tinyvmm process confined the way Firecracker's jailer
 * confines firecracker, in the same order, for a process that parses every
 * guest-controlled byte.
 *
 * Life of a jail (the CLI drives it, vmm/cli/cli_jail.c):
 *   jail_new        options checked, an id picked
 *   jail_plan_vm    the VM's config rewritten to what the jail shows (the
 *                   files it needs, each at its own resolved host path, bound
 *                   read-only unless written; the vsock socket, kept
 *                   overlays and snapshot output in the jail's own places)
 *   jail_run        on the host: gc of stale jails, the directory
 *                   <dir>/<id>/{owner,extra,root/} built; then fork. The
 *                   parent stays outside (root, no VM): it forwards
 *                   SIGINT/SIGTERM/SIGHUP, waits, and returns the child's
 *                   status. The child is PID 1 of a new PID namespace:
 *                   close inherited fds but the kept ones, clear the
 *                   environment, new mount/IPC/UTS (and --netns) namespaces,
 *                   bind mounts, /proc (this PID namespace only), pivot_root
 *                   into root/ and detach the old root; then body() runs.
 *   jail_lockdown   called by body() once the VM is built (files, /dev/kvm,
 *                   the TAP and the socket open) and before any vCPU runs,
 *                   while the process has one thread: rlimits, groups
 *                   dropped, uid/gid changed, capability bounding set
 *                   emptied, no capabilities, PR_SET_NO_NEW_PRIVS, not
 *                   dumpable, Landlock limited to /run, the snapshot output,
 *                   /proc (read) and /dev/urandom.
 *   jail_finish     on the host after the child: kept overlays and a
 *                   snapshot moved into place (root's again), the socket's
 *                   link and the whole directory removed.
 *
 * Why a fork and not the VMM as the process the user started: the new PID
 * namespace needs a new process anyway; and the cleanup must survive the
 * VMM whatever way it ends (reset, TTL, SIGTERM, a crash of the VMM itself),
 * which only a process outside it can do. The mounts are made in the
 * child's mount namespace, so they vanish with it; the host keeps only
 * plain directories and empty files, which `tinyvmm gc` (jail_gc) removes
 * when the owner recorded in <dir>/<id>/owner is gone, as does every
 * jail_run before it starts.
 *
 * Only for a process that runs one VM and owns its signals (the tinyvmm
 * binary); never called by the library. */
#ifndef TVM_JAIL_H
#define TVM_JAIL_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/core/tvm_types.h"

#define JAIL_DEFAULT_DIR "/run/tinyvmm/jail"          /* jails live in <dir>/<id>/root */
#define JAIL_DEFAULT_ID 64100                         /* uid and gid: no passwd entry, owns nothing on the host */
#define JAIL_RUN_DIR "/run"                           /* the jail's own writable directory (staged outputs, socket) */
#define JAIL_VSOCK_PATH JAIL_RUN_DIR "/vsock"         /* the hybrid vsock socket in the jail */
#define JAIL_NOFILE 2048                              /* RLIMIT_NOFILE: fds beyond a VM's few dozen */
#define JAIL_NPROC 4096                               /* RLIMIT_NPROC: counts every task of the jail uid */
#define JAIL_MAX_MOUNTS (2 * TVM_MAX_DRIVES + 64 + 8) /* drives and their overlays, 64 --put, the rest */
#define JAIL_MAX_KEEP 8                               /* inherited fds kept besides 0..2 */

struct jail_opts {
	const char *dir;    /* where jails are made; NULL: JAIL_DEFAULT_DIR */
	uint32_t uid, gid;  /* the VMM's ids once locked down; 0: JAIL_DEFAULT_ID */
	const char *netns;  /* network namespace file (/run/netns/NAME); NULL: the host's */
	uint64_t min_fsize; /* RLIMIT_FSIZE at least this (largest staged output), bytes */
};

/* One thing the jail shows. */
#define JAIL_M_DIR 1u   /* a directory (else a file or device node) */
#define JAIL_M_RW 2u    /* writable (else read-only) */
#define JAIL_M_DEV 4u   /* a device node (its mount keeps device access) */
#define JAIL_M_STAGE 8u /* host is a stage directory of ours, published or removed by jail_finish */
#define JAIL_M_SEEN 16u /* shown through a directory shown already: nothing to mount */

struct jail_mount {
	char host[PATH_MAX]; /* resolved host path */
	char path[PATH_MAX]; /* absolute path in the jail */
	unsigned flags;      /* JAIL_M_* */
	uint64_t dev, ino;   /* what host was when checked (ino 0: made by us); the bind
			      * mount must show the same file, or the jail is refused */
};

/* A stage directory: what the VM writes there goes to target at the end. */
#define JAIL_MAX_STAGES (TVM_MAX_DRIVES + 1)
struct jail_stage {
	unsigned mount;         /* its jail_mount */
	char target[PATH_MAX];  /* the kept overlay file, or the snapshot directory */
	char in_jail[PATH_MAX]; /* a kept overlay: the file's path in the jail */
	int snapshot;           /* every file goes into target, "state" last (else one file is target) */
};

struct jail {
	struct jail_opts o;
	char base[PATH_MAX]; /* o.dir resolved */
	char id[32];
	char dir[PATH_MAX];  /* base/id: owner, extra, root/ */
	char root[PATH_MAX]; /* dir/root: the jail's / */
	struct jail_mount m[JAIL_MAX_MOUNTS];
	unsigned nm;
	struct jail_stage st[JAIL_MAX_STAGES];
	unsigned nst;
	char link[PATH_MAX]; /* host path of the --vsock-uds symlink into the jail; "" none */
	int keep[JAIL_MAX_KEEP];
	unsigned nkeep;
	uint64_t fsize; /* RLIMIT_FSIZE */
	int made;       /* the directory exists (jail_finish removes it) */
	int life_fd;    /* child: read end, hung up when the parent is gone */
	int in_child;
	/* jail_on_start: called in the parent with the child's pid before the
	 * child enters the jail */
	int (*on_start)(void *ctx, pid_t pid, struct tvm_err *e);
	void *on_start_ctx;
};

/* A jail with options o (copied; strings borrowed). Returns NULL with e set
 * (-EINVAL: uid or gid 0, a relative --jail-dir; -ENOMEM). */
struct jail *jail_new(const struct jail_opts *o, struct tvm_err *e);
void jail_free(struct jail *j);

/* Show the VM of c in the jail: every file c names (kernel, initrd, drive
 * images, the restore directory *snapshot if not NULL) bound at its resolved
 * host path, read-only unless the VM writes it in place; a kept overlay in
 * a stage directory beside its target (in the jail
 * /run/overlayN/NAME); the snapshot output *out (created by the caller)
 * through a stage directory inside it; c->vsock_uds in the jail at
 * JAIL_VSOCK_PATH, the host path becoming a symlink to it; /dev/kvm,
 * /dev/urandom, and /dev/net/tun with a network. c's paths, *snapshot and
 * *out are rewritten to the jail's; quirks "auto" is decided here (the jail
 * has no /sys); c's console and log fds are kept. Returns 0, or -errno with
 * e naming the file and why (missing, under /proc or /dev, an overlay that
 * exists, a live socket at --vsock-uds). */
int jail_plan_vm(struct jail *j, struct tvm_config *c, const char **snapshot, const char **out, struct tvm_err *e);

/* Show one more file, read-only, at its resolved path (what = "--put" for
 * messages). Returns that path (owned by j) or NULL with e set. */
const char *jail_add_file(struct jail *j, const char *what, const char *path, struct tvm_err *e);

/* Keep fd open in the jail (besides 0..2). Returns 0 or -ENOSPC. */
int jail_keep_fd(struct jail *j, int fd, struct tvm_err *e);

/* Where the jail's absolute path in_jail lies on the host (only for what
 * the jail made itself, e.g. under JAIL_RUN_DIR). Returns 0 or
 * -ENAMETOOLONG. */
int jail_outside(const struct jail *j, const char *in_jail, char *buf, size_t cap);

/* Have jail_run call fn(ctx, child's pid, e) in the parent once the child
 * exists and before it enters the jail (it waits until fn returns): e.g.
 * to put it into a cgroup while the cgroup file system is still in reach
 * and before the VM's memory is charged anywhere. fn's -errno fails
 * jail_run with e (the child is killed first). */
void jail_on_start(struct jail *j, int (*fn)(void *ctx, pid_t pid, struct tvm_err *e), void *ctx);

/* Build the jail and run body(ctx, j) in it, in a child process. Needs
 * root. Returns body's exit status (0..255; 128+N when the child was killed
 * by signal N, and then e says so too), or -errno with e naming the step
 * that failed ("jail: STEP: reason"). The directory stays until
 * jail_finish. */
int jail_run(struct jail *j, int (*body)(void *ctx, struct jail *j), void *ctx, struct tvm_err *e);

/* In body(), after the VM is built and before it starts: lock the process
 * down (see the top). j NULL: nothing. Must be called while the process has
 * one thread. Returns 0 or -errno with e naming the step. */
int jail_lockdown(struct jail *j, struct tvm_err *e);

/* After jail_run, on the host: with ok, publish what was staged (kept
 * overlays always; a snapshot only with ok), then remove the symlink and
 * the directory. Returns 0 or -errno with e set (a stage that could not be
 * published). */
int jail_finish(struct jail *j, int ok, struct tvm_err *e);

/* Remove the jails under dir (NULL: JAIL_DEFAULT_DIR) whose owner process
 * is gone (pid and start time recorded in <id>/owner), with what they made
 * outside (symlink, stage directories). on_removed (may be NULL) is called
 * with each removed jail's directory. Returns how many were removed, or
 * -errno with e set (dir unreadable). A missing dir is 0. */
int jail_gc(const char *dir, void (*on_removed)(const char *jail_dir), struct tvm_err *e);

/* ---- the pieces, for tests ---- */

struct jail_limits {
	uint64_t nofile, fsize, nproc, core;
};

/* Set RLIMIT_NOFILE, FSIZE, NPROC and CORE (soft = hard). */
int jail_set_rlimits(const struct jail_limits *l, struct tvm_err *e);

/* Drop every privilege: capability bounding set and ambient set emptied,
 * supplementary groups dropped, real/effective/saved gid and uid set,
 * permitted/effective/inheritable capabilities zero, no new privileges, not
 * dumpable. Needs root; uid and gid not 0. */
int jail_drop_privileges(uint32_t uid, uint32_t gid, struct tvm_err *e);

/* One directory a view shows (jail_view): at its own path, read-only
 * unless flags has JAIL_M_RW. */
#define JAIL_VIEW_MAX 8
struct jail_view_dir {
	const char *path; /* absolute, not "/" */
	unsigned flags;
};

/* Give this process (its threads share the result: call it while it has
 * one) a view of the file system in a new mount namespace: an empty
 * read-only tmpfs as / with only the n directories of v, each bound at its
 * own path (a tmpfs is mounted over v[0].path, in this namespace only, to
 * hold it); all nosuid, nodev, noexec; the host's namespace sees nothing.
 * Needs CAP_SYS_ADMIN. 0, or -errno with e naming the step (a directory
 * missing, no namespace; -EBUSY: a mount beneath a read-write directory
 * that is not one of v's, which its view would hide). */
int jail_view(const struct jail_view_dir *v, unsigned n, struct tvm_err *e);

/* Keep only the capabilities of mask keep (bit N: capability N) in the
 * bounding, permitted and effective sets; inheritable and ambient
 * emptied; the uid stays. For a root process that must not exec (an exec
 * would not regain the rest: the bounding set). With fewer capabilities
 * than a process, another root one cannot reach its /proc/PID/root, cwd
 * or fds (ptrace access needs the target's permitted set within ours).
 * 0, or -errno with e set. */
int jail_keep_caps(uint64_t keep, struct tvm_err *e);

/* Landlock ABI of this kernel (0: none). */
int jail_landlock_abi(void);

/* One Landlock rule: what may be done beneath path (JAIL_LL_* bits). */
#define JAIL_LL_READ 1u   /* read files, list directories */
#define JAIL_LL_WRITE 2u  /* also create, write, truncate, remove regular files and sockets */
#define JAIL_LL_TREE 4u   /* also make and remove directories, link and rename across them */
#define JAIL_LL_REMOVE 8u /* remove files (only) */
struct jail_ll_rule {
	const char *path;
	unsigned access;
};

/* What jail_landlock_scoped may scope (Landlock ABI 6). */
#define JAIL_LL_SCOPE_ABSTRACT_UNIX 1u /* no abstract Unix socket outside the domain */
#define JAIL_LL_SCOPE_SIGNAL 2u        /* no signal to a process outside the domain */

/* Restrict this thread and its future children to rules (everything else
 * in the file system denied, execution included; TCP bind/connect denied
 * and abstract sockets and signals scoped where the kernel has it; no
 * ptrace or /proc/PID/mem of a process outside the domain). Needs
 * PR_SET_NO_NEW_PRIVS or CAP_SYS_ADMIN. A kernel without Landlock: 0,
 * nothing done. */
int jail_landlock(const struct jail_ll_rule *rules, unsigned n, struct tvm_err *e);
/* The same with only the scopes (JAIL_LL_SCOPE_*) asked. */
int jail_landlock_scoped(const struct jail_ll_rule *rules, unsigned n, unsigned scopes, struct tvm_err *e);

/* "pid starttime" of the owner file; starttime is field 22 of
 * /proc/PID/stat. Return 0 or -EINVAL. */
int jail_parse_owner(const char *s, pid_t *pid, unsigned long long *start);
int jail_parse_stat_start(const char *stat, unsigned long long *start);

/* /proc/PID/stat of process pid, NUL-terminated in buf (cap >= 1): its
 * length, or -errno (-ENOENT: no such process). Its fields from the third
 * on follow the last ')' (the command, field 2, may hold any byte). */
ssize_t jail_pid_stat(pid_t pid, char *buf, size_t cap);
/* The start time of process pid (field 22 of /proc/PID/stat, clock
 * ticks since boot): 0, or -errno (-ENOENT: no such process). */
int jail_pid_start(pid_t pid, unsigned long long *start);
/* Whether process pid with that start time (0: any) still exists. */
int jail_owner_alive(pid_t pid, unsigned long long start);

/* Remove name under dirfd (a path, with AT_FDCWD or a '/') and everything
 * beneath it, never following a symlink nor entering another mount than
 * that of name's parent directory. Returns 0 (a missing name too) or
 * -errno (-EXDEV: a mount point beneath was left). */
int jail_remove_tree(int dirfd, const char *name);

#endif
