/* tinyvmm's public types: the error record, the VM configuration, how a VM
 * ended and the network counters. A public header: it includes only libc
 * headers, so it is installed beside tinyvmm.h (which includes it) and every
 * layer of the library may use it without reaching up to the library's face.
 */
#ifndef TVM_TYPES_H
#define TVM_TYPES_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Marks a function of the public API. The library is compiled with
 * -fvisibility=hidden and linked into one object whose hidden symbols are
 * made local, so only TVM_API functions are visible to a program that
 * links libtinyvmm.a (its own names cannot clash with the internals). */
#ifndef TVM_API
#if defined(__GNUC__)
#define TVM_API __attribute__((visibility("default")))
#else
#define TVM_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Last error of an operation: code is a positive errno value (0 = none),
 * msg a NUL-terminated single line without trailing newline. */
struct tvm_err {
	int code;
	char msg[256];
};

/* Signal used to interrupt vCPU threads blocked in KVM_RUN (see KVM API
 * doc, "immediate_exit"). Its handler does nothing. */
#define TVM_KICK_SIGNAL (SIGRTMIN + 3)

/* Seccomp filters on a VM's own threads (struct tvm_config.seccomp; see
 * vmm/tinyvmm.h, "Seccomp"). */
enum tvm_seccomp {
	TVM_SECCOMP_OFF = 0, /* no filter (the library's default: it must not confine its host's threads) */
	TVM_SECCOMP_KILL,    /* a call outside a thread's allow-list kills the process (SIGSYS) */
	TVM_SECCOMP_LOG,     /* debug: one line naming the thread and the call, then exit(TVM_SECCOMP_EXIT) */
};

/* Exit status of a process that TVM_SECCOMP_LOG ended: 128 + SIGSYS, what a
 * shell shows for TVM_SECCOMP_KILL's kill too. */
#define TVM_SECCOMP_EXIT 159

/* Exit status of `tinyvmm run --jail` whose VMM the out-of-memory killer
 * of the VM's host cgroup ended (guest RAM + allowance was not enough):
 * the process outside the jail sees it (without --jail the VMM itself is
 * killed: 128 + SIGKILL). */
#define TVM_OOM_EXIT 123

enum tvm_quirks {
	TVM_QUIRKS_AUTO = 0, /* detect the nested kvm_pvm host (default) */
	TVM_QUIRKS_ON,       /* apply its quirks whatever the host */
	TVM_QUIRKS_OFF,      /* never apply them */
};

#define TVM_MAX_DRIVES 8

/* A token bucket (Firecracker's rate-limiter model): it holds up to size
 * tokens (bytes, or operations) and refills at size tokens per refill_ms,
 * continuously; it starts full. A request waits (its buffers stay on the
 * ring, untouched) until the bucket holds what it costs; one costing more
 * than size passes at once and then nothing passes until the refill has
 * made up for what it overdrew. one_time_burst: extra tokens spent before
 * the bucket's, once, never refilled. All zero: no limit. */
struct tvm_bucket {
	uint64_t size;           /* tokens; 0: unlimited (then one_time_burst must be 0) */
	uint64_t one_time_burst; /* tokens, 0: none */
	uint32_t refill_ms;      /* ms to refill an empty bucket; 0: 1000 */
};

/* Limits of one direction of a device: bytes, and operations (virtio-blk
 * requests, network frames), each its own bucket; a request passes when
 * both allow it. */
struct tvm_rate_limit {
	struct tvm_bucket bytes, ops;
};

/* A virtio-blk drive backed by a raw image file (virtio 1.2 section 5.2). */
struct tvm_drive {
	const char *path;            /* image file, size a multiple of 512 bytes */
	const char *id;              /* serial (VIRTIO_BLK_T_GET_ID), <= 20 bytes; NULL: none */
	int read_only;               /* guest writes fail (VIRTIO_BLK_F_RO) */
	int cow;                     /* image opened read-only; writes go to a private overlay */
	const char *overlay_path;    /* cow: keep the overlay in this new file; NULL: discard at exit */
	uint64_t overlay_limit;      /* cow: most bytes the overlay may hold (whole 4 KiB blocks); 0: the
				   * drive's size. Writes past it fail with VIRTIO_BLK_S_IOERR (the
				   * guest sees EIO) */
	struct tvm_rate_limit limit; /* bytes (data moved) and requests; zero: unlimited. A restore
				      * that gives any replaces the snapshot's, else keeps them */
	uint64_t size;               /* cow: bytes the guest sees, a multiple of 512, at least the
				   * image's size (past its end: zeros until written, host disk
				   * used only for what is written); 0: the image's size. A
				   * restore keeps the snapshot's */
};

/* Whether the guest's writes reach d's host file itself (d neither
 * copy-on-write nor read-only): what a snapshot cannot carry and
 * tvm_config.no_inplace_drives refuses. */
static inline bool tvm_drive_in_place(const struct tvm_drive *d)
{
	return !d->cow && !d->read_only;
}

#define TVM_MAX_NET_RULES 32
#define TVM_MAX_NET_DNS 4

/* A virtio-net device over a TAP (virtio 1.2 section 5.1) with an egress
 * policy the VMM enforces on every frame the guest sends (see
 * devices/net_filter.h for what it does and does not see). */
struct tvm_net {
	int enabled;                          /* 1: attach the device; 0: the VM has no network */
	const char *tap;                      /* existing TAP interface; NULL: create one (needs CAP_NET_ADMIN) */
	const char *mac;                      /* "xx:xx:xx:xx:xx:xx"; NULL: derived from the vsock CID */
	uint32_t mtu;                         /* bytes; 0: 1500 */
	const char *allow[TVM_MAX_NET_RULES]; /* "CIDR[:PORT[/tcp|udp]]"; any rule means allow-list */
	unsigned nr_allow;
	const char *dns[TVM_MAX_NET_DNS]; /* resolvers DNS (port 53) may go to; allow-list too */
	unsigned nr_dns;
	int deny_all;                 /* allow-list with nothing but the rules above (and ARP/ND) */
	const char *guest_ip;         /* "ADDR/PREFIX" (IPv4) the agent gives eth0; NULL: none */
	const char *guest_gw;         /* default route for the guest; NULL: none */
	int no_offload;               /* 1: offer the guest no checksum/TCP segmentation offload
				 * (fewer host-kernel paths for guest frames, slower) */
	struct tvm_rate_limit rx, tx; /* TAP -> guest and guest -> TAP: frame bytes (without the
				       * virtio-net header) and frames; zero: unlimited. A restore
				       * that gives any (rx or tx) replaces both of the snapshot's,
				       * else keeps them */
	int ingress_replies;          /* 1: a TAP frame reaches the guest only as a reply to the guest's own
			      * traffic (no TCP connection opened into it, UDP only from where it sent,
			      * no ping; ARP, IPv6 neighbour discovery and ICMP errors pass): nothing on
			      * the host can reach a server in the guest. 0: every frame. Not saved in
			      * a snapshot: a restore takes it from its own config */
};

/* Why a frame was dropped: the index into tvm_net_stats.dropped. */
enum tvm_net_drop {
	TVM_NET_DROP_RUNT = 1,  /* shorter than an Ethernet header */
	TVM_NET_DROP_OVERSIZE,  /* over MTU + 14 (+ 4 with a VLAN tag); 64 KiB + 18 with TSO */
	TVM_NET_DROP_VNET_HDR,  /* virtio-net header asks for an offload not negotiated or out of bounds */
	TVM_NET_DROP_BAD_CHAIN, /* descriptor chain of the wrong shape */
	TVM_NET_DROP_MALFORMED, /* L2/L3/L4 headers truncated or inconsistent */
	TVM_NET_DROP_FRAGMENT,  /* IP fragment under an allow-list */
	TVM_NET_DROP_POLICY,    /* not allowed by the allow-list */
	TVM_NET_DROP_SPOOF,     /* source MAC (or ARP sender) not the guest's, under an allow-list */
	TVM_NET_DROP_BACKEND,   /* the TAP refused it */
	TVM_NET_DROP_INGRESS,   /* a TAP frame that is no reply to the guest (tvm_net.ingress_replies) */
	TVM_NET_DROP_COUNT
};

/* Counters of the VM's network device since it was created. Frames are
 * counted without the 12-byte virtio-net header; bytes likewise. */
struct tvm_net_stats {
	uint64_t tx_frames, tx_bytes;         /* guest -> TAP, sent */
	uint64_t rx_frames, rx_bytes;         /* TAP -> guest, delivered */
	uint64_t tx_gso, rx_gso;              /* of those, frames with TCP segmentation offload */
	uint64_t rx_dropped;                  /* TAP frames the guest had no room for */
	uint64_t dropped[TVM_NET_DROP_COUNT]; /* frames dropped, by enum tvm_net_drop (the guest's; TAP
					       * frames for INGRESS); [0] unused */
	int backend_down;                     /* the TAP hit EOF or an error: no more rx */
};

/* How a VM uses a host cgroup (one per VM: cgroup v2, or the v1 cpu,
 * memory, pids and cpuset hierarchies; vmm/sandbox/cgroup.h). The whole
 * calling process is moved into it from tvm_vm_create until
 * tvm_vm_destroy, which moves it back and removes it: so one VM with a
 * cgroup per process at a time (another gets -EBUSY). */
enum tvm_cgroup_mode {
	TVM_CGROUP_OFF = 0, /* no cgroup (the library's default) */
	TVM_CGROUP_ON,      /* required: tvm_vm_create fails with one line when the host has no usable
			     * controller (-ENOTSUP) or refuses (-EACCES, -EBUSY, ...) */
	TVM_CGROUP_AUTO,    /* when the host allows it, else the VM runs without (a refusal other than
			     * "no controllers" or "not permitted" is said on log_fd); tinyvmm's default */
};

#define TVM_CGROUP_MEM_ALLOWANCE_MIB 64 /* default VMM allowance over guest RAM */
#define TVM_CGROUP_PIDS_BASE 64         /* default pids.max: this + cpus */

struct tvm_cgroup {
	enum tvm_cgroup_mode mode;
	const char *parent;         /* "a/b": below the process's own cgroup (it stays inside it); "/a/b":
				     * from the hierarchy's root; NULL: "tinyvmm". The VM's is PARENT/PID */
	uint32_t cpu_quota_mcpu;    /* CPU time of the whole VMM in thousandths of a core per 100 ms period
				     * (500: half a core, 2000: two cores), 10..1000000; 0: no quota */
	const char *cpuset;         /* host CPUs the VMM may run on ("0-1,3"); NULL: any */
	uint32_t mem_allowance_mib; /* memory limit = mem_mib + this (VMM, page tables, buffers, page
				     * cache); 0: TVM_CGROUP_MEM_ALLOWANCE_MIB */
	uint32_t pids_max;          /* threads of the VMM process; 0: TVM_CGROUP_PIDS_BASE + cpus */
};

/* Everything needed to build a VM. Start from tvm_config_init(); strings are
 * borrowed (copied by tvm_vm_create where they must outlive the call). */
struct tvm_config {
	uint32_t mem_mib;           /* guest RAM in MiB, default 256 */
	uint32_t cpus;              /* vCPUs, 1..64, default 1 */
	const char *kernel_path;    /* ELF vmlinux or bzImage, required */
	const char *initrd_path;    /* initramfs, optional */
	const char *cmdline;        /* NULL: "console=ttyS0 reboot=k panic=-1" */
	const char *cmdline_append; /* appended after cmdline and quirk words */
	int serial_out_fd;          /* guest's COM1 output goes here; -1 drops it (default -1) */
	int serial_in_fd;           /* bytes read here go to COM1's receiver; -1 none (default) */
	int log_fd;                 /* VMM messages (quirks line, unhandled I/O); -1 none (default 2) */
	enum tvm_quirks quirks;
	struct tvm_drive drives[TVM_MAX_DRIVES]; /* become /dev/vda, /dev/vdb, ... */
	unsigned nr_drives;
	int root_drive;           /* 1: drives[0] is the root fs (root=/dev/vda) */
	uint32_t vsock_cid;       /* guest CID of the virtio-vsock device (default 3); 0: no device */
	const char *vsock_uds;    /* Firecracker-style hybrid vsock Unix socket path; NULL: none */
	uint32_t ttl_ms;          /* lifetime: the VM is stopped this long after start; 0: none */
	uint32_t idle_ms;         /* with vsock: the VM is stopped (TVM_EXIT_IDLE) once no vsock
				     * connection has been open for this long (checked each second,
				     * so up to a second later); 0: never */
	struct tvm_net net;       /* network: off unless net.enabled */
	uint64_t t0_ns;           /* CLOCK_MONOTONIC origin of metrics timestamps; 0: vm creation */
	enum tvm_seccomp seccomp; /* filters on the VM's threads; default TVM_SECCOMP_OFF */
	struct tvm_cgroup cgroup; /* host cgroup and its limits: none unless cgroup.mode says */
	/* Nonzero: every drive copy-on-write or read-only, none written in
	 * place on the host; a restore checks the drives its snapshot names
	 * (the bytes it uses) and answers -EPERM for one that is not. For a
	 * host that restores snapshots it does not trust (tinyvmm serve). */
	int no_inplace_drives;
};

/* How a VM ended. */
enum tvm_exit {
	TVM_EXIT_NONE = 0,       /* still running */
	TVM_EXIT_RESET,          /* the guest reset itself (reboot, panic with panic=-1): clean end */
	TVM_EXIT_STOPPED,        /* the host called tvm_vm_stop() */
	TVM_EXIT_SHUTDOWN,       /* KVM_EXIT_SHUTDOWN (triple fault) */
	TVM_EXIT_INTERNAL_ERROR, /* KVM_EXIT_INTERNAL_ERROR: KVM could not emulate something */
	TVM_EXIT_FAIL_ENTRY,     /* KVM_EXIT_FAIL_ENTRY: invalid guest state */
	TVM_EXIT_VMM_ERROR,      /* an ioctl or the VMM itself failed */
	TVM_EXIT_TTL,            /* the VM's lifetime (ttl_ms) expired */
	TVM_EXIT_IDLE,           /* no vsock connection for idle_ms: a clean end */
};

/* Fill c with the defaults documented in struct tvm_config. */
TVM_API void tvm_config_init(struct tvm_config *c);

#ifdef __cplusplus
}
#endif

#endif
