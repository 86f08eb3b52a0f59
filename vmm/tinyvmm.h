/* tinyvmm: the library's public face.
 *
 * A VM is built from a struct tvm_config, run on its own vCPU threads, and
 * destroyed by the caller. Nothing here exits the process or keeps global
 * state (except one no-op signal handler for TVM_KICK_SIGNAL, installed once,
 * used to kick vCPU threads out of KVM_RUN): one process can hold many VMs.
 * Errors are returned as -errno with a one-line message in struct tvm_err.
 */
#ifndef TINYVMM_H
#define TINYVMM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/tvm_types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tvm_vm;

/* The default guest command line. */
TVM_API const char *tvm_default_cmdline(void);

/* The guest command-line words that host quirks add under setting q on this
 * host ("" when no quirks apply). */
TVM_API const char *tvm_quirk_cmdline(enum tvm_quirks q);

/* Create a VM: open /dev/kvm and check the API version and capabilities,
 * map guest memory, create the irqchip, PIT and vCPUs, load the kernel and
 * initrd, write boot structures and register devices. Nothing runs yet.
 * Returns 0 and *out, or -errno (e.g. -ENOENT missing kernel, -ENOEXEC bad
 * image, -ENOSYS missing KVM capability; with cfg.cgroup on, the
 * cgroup's: -ENOTSUP no usable controller, -EACCES, -EBUSY) with e filled. */
TVM_API int tvm_vm_create(const struct tvm_config *c, struct tvm_vm **out, struct tvm_err *e);

/* Start one thread per vCPU. Returns 0 or -errno. */
TVM_API int tvm_vm_start(struct tvm_vm *vm, struct tvm_err *e);

/* Block until the VM ends; join its threads. Returns 0 when it ended with
 * TVM_EXIT_RESET or TVM_EXIT_STOPPED, -ETIME for TVM_EXIT_TTL, else -EIO,
 * with the reason in e. */
TVM_API int tvm_vm_wait(struct tvm_vm *vm, struct tvm_err *e);

/* tvm_vm_start() then tvm_vm_wait(). */
TVM_API int tvm_vm_run(struct tvm_vm *vm, struct tvm_err *e);

/* Ask a running VM to stop (thread-safe, returns at once). Its vsock
 * connections are reset, so calls blocked on the agent return -ECONNRESET. */
TVM_API void tvm_vm_stop(struct tvm_vm *vm);

/* The library's version ("MAJOR.MINOR.PATCH"), as `tinyvmm --version`. */
TVM_API const char *tvm_version(void);

/* Why the VM ended (TVM_EXIT_NONE while it runs). */
TVM_API enum tvm_exit tvm_vm_exit_reason(const struct tvm_vm *vm);

/* Resident memory of this process in KiB, not counting the VM's guest RAM
 * mapping (so: what the VMM itself uses). -1 if /proc is unreadable. */
TVM_API long tvm_vm_vmm_rss_kib(const struct tvm_vm *vm);

/* Write the metrics JSON object (timestamps in µs since t0, VM-exit counts
 * per vCPU, VMM RSS without guest RAM, CPU time of each vCPU thread
 * ("vcpu_cpu_us") and of the whole process ("process_cpu_us"), the host
 * cgroup's limits and memory peak as "cgroup" (null without one), with a
 * network device its counters as "net") to path. Returns 0 or -errno. */
TVM_API int tvm_vm_write_metrics(const struct tvm_vm *vm, const char *path, struct tvm_err *e);

/* Copy the network counters into *out (any thread, while the VM exists).
 * Returns 0, or -ENODEV when the VM has no network device. */
TVM_API int tvm_vm_net_stats(const struct tvm_vm *vm, struct tvm_net_stats *out);

/* Short label of a drop reason ("policy", "oversized", ...); "?" when out
 * of range. */
TVM_API const char *tvm_net_drop_name(unsigned reason);

/* Stop if running, free everything; with a host cgroup, move the process
 * back where it was and remove the cgroup. NULL is allowed. */
TVM_API void tvm_vm_destroy(struct tvm_vm *vm);

/* A host cgroup made by the caller for a VM that another process will run
 * (e.g. a jailed child that cannot see the cgroup file system): process
 * pid goes into the cgroup c->cgroup describes (mode, parent, limits; the
 * memory limit is c->mem_mib + the allowance, pids.max from c->cpus), as
 * tvm_vm_create would make it for itself; give that process's VM
 * TVM_CGROUP_OFF. 0 and *out (NULL when mode is TVM_CGROUP_AUTO and the
 * host gives no cgroup, or mode is TVM_CGROUP_OFF), or -errno with e as
 * tvm_vm_create's (vmm/sandbox/cgroup.h). tvm_cgroup_release, once the
 * process has ended, removes the cgroup and frees h (NULL allowed). */
struct tvm_host_cgroup;
TVM_API int tvm_cgroup_attach(const struct tvm_config *c, pid_t pid, struct tvm_host_cgroup **out, struct tvm_err *e);
TVM_API void tvm_cgroup_release(struct tvm_host_cgroup *h);
/* How many processes of h's cgroup its memory limit's OOM killer ended
 * (cgroup v2 memory.events, v1 memory.oom_control: "oom_kill"), into *n:
 * 0, or -errno (-ENOENT: no memory controller, or h NULL; *n is 0). Call
 * it before tvm_cgroup_release. */
TVM_API int tvm_cgroup_oom_kills(const struct tvm_host_cgroup *h, uint64_t *n);
/* h's figures as the metrics JSON's "cgroup" value (an object: version,
 * memory_dir, memory_max_bytes, memory_peak_bytes, memory_oom_kills, cpu_quota_mcpu,
 * cpu_throttled_us; "null" for NULL), NUL-terminated in buf, for a caller
 * whose VM ran in another process: its length, or -ENOSPC when cap bytes
 * do not hold it. Call it
 * before tvm_cgroup_release: the peak is read from the cgroup. */
TVM_API int tvm_cgroup_metrics(const struct tvm_host_cgroup *h, char *buf, size_t cap);

/* ---- Seccomp (struct tvm_config.seccomp) ----
 *
 * With TVM_SECCOMP_KILL or _LOG each thread the VM starts (every vCPU, the
 * event loop each time it starts, the serial input thread) confines itself
 * once its setup is done: PR_SET_NO_NEW_PRIVS and a seccomp filter that
 * allows only the system calls its role makes, with their arguments
 * checked where they matter (ioctl request numbers, Unix sockets only,
 * never PROT_EXEC, only TVM_KICK_SIGNAL or SIGABRT sent; ARCHITECTURE.md
 * lists them). Any other call kills the whole process (SIGSYS), or with
 * _LOG (for debugging a filter) writes one line naming the thread's role
 * and the call to cfg.log_fd (stderr if -1) and exits the process with
 * TVM_SECCOMP_EXIT; _LOG installs a SIGSYS handler, process wide. The
 * threads of the caller are never confined: the default is
 * TVM_SECCOMP_OFF, because the library must not restrict its host's
 * threads. tvm_vm_start fails with -ENOSYS when the kernel cannot filter.
 *
 * VMs that share one process share one trust domain: a guest that
 * compromises its VM's threads has the process, and so every other VM in
 * it and the caller's own threads, which are not confined. The tinyvmm
 * binary, one VM per process with its own threads confined too (its main
 * thread once every thread exists, its signal thread), is the hardened
 * form; run it for guests that must not reach one another. */

/* ---- Snapshots (ARCHITECTURE.md, "Restore") ---- */

/* Snapshot a running VM into directory dir (created if missing; files
 * "state", "mem", and "diskN" per copy-on-write drive are replaced
 * atomically, one by one). The vCPUs are parked and the device event loop
 * stopped while the state is saved, then the VM resumes and runs on.
 * Drives must be read-only or copy-on-write (-EINVAL for a drive written in
 * place); an agent connection should not be open across the snapshot (the
 * restored guest's side of it is reset). One snapshot at a time per VM.
 * Returns 0 or -errno with the file and reason in e (-ECANCELED: the VM
 * ended meanwhile). */
TVM_API int tvm_vm_snapshot(struct tvm_vm *vm, const char *dir, struct tvm_err *e);

/* A diff snapshot into dir: like tvm_vm_snapshot(), but dir/mem holds only
 * the guest pages that differ from the VM's base: written since vm was
 * restored (by the guest or by the VMM's devices; found in
 * /proc/self/pagemap, opened by tvm_vm_restore), about what the sandbox
 * touched rather than its RAM size. The base is the full snapshot vm was
 * restored from or, for a VM restored from a diff, that diff's base (the
 * new diff then also holds the pages the old one laid: no chains, each
 * diff needs its base alone). base_dir: NULL for the VM's base, or a
 * directory that must be it. dir/state names the base (resolved) with the
 * identity of its memory file (size, inode, modification time) and state
 * file (CRC-32C). tvm_vm_restore() of dir then maps the base's mem and
 * lays the diff's pages over it; it refuses a base that is missing or
 * changed since (copied elsewhere counts: the inode differs). The base
 * must stay where it is. Returns 0 or -errno with one line in e: -EINVAL
 * (vm booted, not restored; base_dir not its base; dir is the base),
 * -ESTALE (the base changed since the restore), or as tvm_vm_snapshot(). */
TVM_API int tvm_vm_snapshot_diff(struct tvm_vm *vm, const char *dir, const char *base_dir, struct tvm_err *e);

/* Build a VM from the snapshot in dir instead of booting: guest memory is
 * dir/mem mapped private (lazy, copy-on-write, page cache shared by every
 * VM restored from it; for a diff snapshot, its base's mem with the diff's
 * pages mapped over it, see tvm_vm_snapshot_diff()), devices and vCPUs get their saved state back; a
 * tampered or damaged snapshot is refused with an error, never run.
 * overrides (NULL: none) gives what belongs to the new VM, not to the
 * snapshot: serial_out_fd, serial_in_fd, log_fd, ttl_ms, cgroup, t0_ns, vsock_uds
 * (the snapshot's own is never reused), and, when nr_drives equals the
 * snapshot's, per drive a new path for the same image (same size),
 * overlay_path and overlay_limit. Every copy-on-write drive gets a fresh
 * private overlay holding the snapshot's blocks. Memory, vCPUs, command
 * line, vsock CID and drive modes come from the snapshot; other fields of
 * overrides are ignored. Then tvm_vm_start() runs it as a fresh VM: the
 * vsock device posts TRANSPORT_RESET and holds host connections back
 * until the guest has handled it (one that reached the guest before would
 * be dropped by it), and the first tvm_agent_connect() sends SEED
 * (fresh entropy, host wall clock). Returns 0 and *out, or
 * -errno: -EINVAL (damaged, truncated, inconsistent), -EPROTONOSUPPORT
 * (other format version), -ENOENT, -ESTALE (a diff's base changed), or a
 * KVM ioctl's error naming it. */
TVM_API int tvm_vm_restore(const struct tvm_config *overrides, const char *dir, struct tvm_vm **out, struct tvm_err *e);

/* ---- Jobs: talking to the guest agent (guest/PROTOCOL.md) ---- */

#define TVM_AGENT_PORT 1024        /* vsock port the guest agent listens on */
#define TVM_ID_DEFAULT 0xFFFFFFFFu /* uid/gid: the agent's default (unprivileged) user; so is 0 */
#define TVM_ID_ROOT 0xFFFFFFFEu    /* uid/gid: root (id 0), only ever when asked for this way */

struct tvm_agent;

/* One job. Start from tvm_job_init() or zero ({ .argv = argv } is a
 * complete job): every zero field is the safe default. Strings are
 * borrowed for the duration of tvm_agent_exec(). */
struct tvm_job {
	const char *const *argv; /* NULL-terminated, at least one entry */
	const char *const *env;  /* NULL-terminated "NAME=value" over the agent's env; NULL: none */
	const char *cwd;         /* NULL: "/" */
	/* Who the job runs as in the guest, uid and gid each on its own:
	 * 0 or TVM_ID_DEFAULT: the agent's default unprivileged user (uid and
	 * gid 1000 in the base image), so a zero-initialised job is never
	 * root; TVM_ID_ROOT: root (id 0); any other value: that id. */
	uint32_t uid, gid;
	/* 0: none. On expiry the agent SIGKILLs the job's process group. The
	 * host waits at most TVM_JOB_HOST_GRACE_MS(timeout_ms) more for the
	 * RESULT (a stopped guest, or one ignoring the timeout): then
	 * tvm_agent_exec returns with timed_out and host_timed_out set. */
	uint32_t timeout_ms;
	uint32_t stdout_cap, stderr_cap; /* bytes forwarded per stream; 0: 1 MiB */
	const void *stdin_data;          /* bytes fed to stdin, then EOF */
	size_t stdin_len;
	/* Output as it arrives: stream 1 = stdout, 2 = stderr. May be NULL. */
	void (*on_output)(void *ctx, int stream, const void *buf, size_t len);
	void *ctx;
	/* Interactive jobs. stdin_open: stdin stays open (stdin_data must
	 * be empty) for tvm_agent_job_stdin. on_control (may be NULL): while
	 * the job runs, control_fd is polled with the connection, and when it
	 * is readable on_control(ctx, a) is called, on the thread running
	 * tvm_agent_exec, which may then call tvm_agent_job_stdin and
	 * tvm_agent_job_signal (and must drain control_fd). control_fd is
	 * looked at only when on_control is set. */
	int stdin_open;
	int control_fd;
	void (*on_control)(void *ctx, struct tvm_agent *a);
	/* Limits of the job's own cgroup v2 in the guest (the agent runs every
	 * job in one; its timeout or a SIGKILL ends every process in it, also
	 * those that left its process group). 0: no limit. mem_max_bytes is
	 * memory.max (the kernel kills a process of the job past it:
	 * oom_killed), pids_max is pids.max (forks fail past it:
	 * pids_limited). A guest kernel without cgroups refuses a job with a
	 * limit (-EOPNOTSUPP). */
	uint64_t mem_max_bytes; /* 0 or at least TVM_JOB_MEM_MIN (else -EINVAL) */
	uint32_t pids_max;
};

/* The least memory limit of a job: below it no process could start. */
#define TVM_JOB_MEM_MIN (1ull << 20)

/* The host's grace beyond a job's timeout: 5 s + 10 %. */
#define TVM_JOB_HOST_GRACE_MS(timeout_ms) (5000 + (uint64_t)(timeout_ms) / 10)

struct tvm_job_result {
	int exit_code;      /* 0..255; 128 + signal when killed by a signal */
	int signal;         /* 0 when the process exited */
	int timed_out;      /* the timeout killed it */
	int host_timed_out; /* no RESULT by timeout + grace: the host stopped waiting (exit_code 137,
				* signal 9, wall_ms the host's) and shut down its sending side, so the
				* agent kills the job if it ever reads again; only close the connection */
	int stdout_truncated, stderr_truncated; /* output beyond the caps was dropped */
	uint64_t wall_ms, cpu_ms;               /* cpu: user + system */
	uint64_t max_rss_kib;
	int oom_killed;   /* the job's memory limit made the guest kernel kill a process of it */
	int pids_limited; /* a fork in the job failed at its pids limit */
};

/* Set *j to the defaults: no argv yet, no env, the default cwd, the
 * agent's default unprivileged user, no timeout, 1 MiB output caps, no
 * stdin, no output callback. Set argv, then what differs. */
TVM_API void tvm_job_init(struct tvm_job *j);

/* A connection to the guest agent over a connected stream socket. */
struct tvm_agent;

/* Take ownership of fd (connected to the agent's vsock port, in-process or
 * through the hybrid Unix socket after "OK") and wait up to timeout_ms for
 * the agent's READY. -ETIMEDOUT, -ECONNRESET, -EBUSY (the agent's
 * connections are all in use: it answered ERROR LIMIT) or -EPROTO with e
 * set. */
TVM_API int tvm_agent_open(int fd, int timeout_ms, struct tvm_agent **out, struct tvm_err *e);

/* Where tvm_agent_connect() finds the guest agent: exactly one of these. */
struct tvm_agent_addr {
	struct tvm_vm *vm;    /* a running VM of this process: its in-process vsock device */
	const char *uds_path; /* a VM of any process: its hybrid vsock Unix socket (--vsock-uds) */
};

#define TVM_AGENT_SEED 0x1u /* tvm_agent_connect: send SEED once connected (after a boot) */

/* Connect to the agent of a VM that may still be booting or restoring,
 * retrying for up to timeout_ms in all: while the socket path does not
 * exist yet or nothing listens on it (its first 5 s only: the VMM listens
 * as the VM is built, so a path missing or refusing longer is no VM, a
 * socket left by one that ended), while the guest refuses the port (the
 * agent does not listen yet), and while a
 * CONNECT or the agent's READY gets no answer (the guest's vsock driver is
 * not up yet), and while the agent has no connection to spare; a VM of
 * this process that stops ends the wait. Then SEED
 * (fresh entropy, host wall clock) when flags has TVM_AGENT_SEED, and
 * always on the first connection to a restored VM of this process; a
 * failed SEED fails the call. Returns 0 and *out (the caller closes it),
 * or -errno with e set: -ETIMEDOUT "agent: not ready within N ms: <last
 * attempt's error>", -ECONNREFUSED (the VM of this process ended, or no
 * VM listens at the socket), -ENOENT (no socket there),
 * -ENODEV (it has no vsock device), -EINVAL (not exactly one address),
 * -EPROTO (not an agent). */
TVM_API int tvm_agent_connect(const struct tvm_agent_addr *to, int timeout_ms, unsigned flags, struct tvm_agent **out,
			      struct tvm_err *e);

/* tvm_agent_connect() to vm's in-process vsock device, flags 0. */
TVM_API int tvm_vm_agent_connect(struct tvm_vm *vm, int timeout_ms, struct tvm_agent **out, struct tvm_err *e);

/* One attempt (no retry) to connect to the agent of a VM through its
 * hybrid vsock Unix socket (Firecracker protocol: "CONNECT <port>\n" ->
 * "OK <host port>\n"), timeout_ms for each answer: -ENOENT/-ECONNREFUSED
 * from the socket, -ECONNREFUSED (guest refused the port), -ETIMEDOUT (no
 * answer to CONNECT), -EPROTO, or tvm_agent_open()'s errors. */
TVM_API int tvm_agent_connect_uds(const char *uds_path, uint32_t port, int timeout_ms, struct tvm_agent **out,
				  struct tvm_err *e);

/* Run a job and wait for its result. Returns 0 (the job ran: see r), or
 * -errno when it could not be started or the connection failed. */
TVM_API int tvm_agent_exec(struct tvm_agent *a, const struct tvm_job *j, struct tvm_job_result *r, struct tvm_err *e);

/* From a job's on_control only (struct tvm_job): send len bytes to the
 * running job's stdin (len 0: close it; the job must have stdin_open), or
 * signal sig (1..64) to its process group (guest/PROTOCOL.md KILL).
 * -ESRCH when no job runs on a, -EINVAL for a bad signal or a job without
 * stdin_open, or the connection's -errno, with e set. */
TVM_API int tvm_agent_job_stdin(struct tvm_agent *a, const void *data, size_t len, struct tvm_err *e);
TVM_API int tvm_agent_job_signal(struct tvm_agent *a, int sig, struct tvm_err *e);

/* Write len bytes to guest file path (absolute; parents created) with mode. */
TVM_API int tvm_agent_put_file(struct tvm_agent *a, const char *path, uint32_t mode, const void *data, size_t len,
			       struct tvm_err *e);

/* Read guest file path, at most cap bytes (else -EFBIG); *data is malloc'd. */
TVM_API int tvm_agent_get_file(struct tvm_agent *a, const char *path, size_t cap, void **data, size_t *len,
			       struct tvm_err *e);

/* Streamed transfers (guest/PROTOCOL.md PUT_FILE/GET_FILE), for files
 * that need not fit in memory. uid: who the agent acts as (TVM_ID_DEFAULT,
 * TVM_ID_ROOT or an id, as struct tvm_job's; its gid the same). put:
 * read_fn(ctx, buf, cap) fills buf with up to cap bytes and returns how
 * many, 0 at the end, or -errno (then the connection must be closed:
 * the agent drops the transfer, keeping what it had written). get: write_fn(ctx, buf, len) takes each
 * piece in order and returns 0 or -errno (which ends the transfer); more
 * than max_bytes: -EFBIG. *size (may be NULL) gets the bytes moved. The
 * agent's refusals come back as its errno (-ENOENT, -EACCES, -ENOSPC,
 * -EISDIR...) with e saying why. */
TVM_API int tvm_agent_put_stream(struct tvm_agent *a, const char *path, uint32_t mode, uint32_t uid,
				 ssize_t (*read_fn)(void *ctx, void *buf, size_t cap), void *ctx, uint64_t *size,
				 struct tvm_err *e);
TVM_API int tvm_agent_get_stream(struct tvm_agent *a, const char *path, uint64_t max_bytes, uint32_t uid,
				 int (*write_fn)(void *ctx, const void *buf, size_t len), void *ctx, uint64_t *size,
				 struct tvm_err *e);

/* Send fresh entropy and the host's wall clock (tvm_agent_connect() does,
 * after a boot or a restore). */
TVM_API int tvm_agent_seed(struct tvm_agent *a, struct tvm_err *e);

/* Re-address the guest's eth0 (guest/PROTOCOL.md, NET): spec is
 * "ADDR/PREFIX[,gw=ADDR][,dns=ADDR][,mac=XX:XX:XX:XX:XX:XX]" (IPv4, at
 * most 127 bytes); its old address and default route go. For a VM
 * restored from another's snapshot (a template's, a fork's parent's) on a
 * link of its own. 0, or -errno
 * (-EINVAL: a spec the agent refuses) with e saying why. */
TVM_API int tvm_agent_net(struct tvm_agent *a, const char *spec, struct tvm_err *e);

/* Ask the agent to sync and reset the VM. */
TVM_API int tvm_agent_shutdown(struct tvm_agent *a, struct tvm_err *e);

/* Close the connection (NULL allowed). */
TVM_API void tvm_agent_close(struct tvm_agent *a);

#ifdef __cplusplus
}
#endif

#endif
