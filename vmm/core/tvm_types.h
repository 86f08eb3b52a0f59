/* tinyvmm's public types: the error record, the VM configuration, how a VM
 * ended and the network counters. A public header: it includes only libc
 * headers, so it is installed beside tinyvmm.h (which includes it) and every
 * layer of the library may use it without reaching up to the library's face.
 */
#ifndef TVM_TYPES_H
#define TVM_TYPES_H

#include <signal.h>
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

enum tvm_quirks {
	TVM_QUIRKS_AUTO = 0, /* detect the nested kvm_pvm host (default) */
	TVM_QUIRKS_ON,       /* apply its quirks whatever the host */
	TVM_QUIRKS_OFF,      /* never apply them */
};

#define TVM_MAX_DRIVES 8

/* A virtio-blk drive backed by a raw image file (virtio 1.2 section 5.2). */
struct tvm_drive {
	const char *path;         /* image file, size a multiple of 512 bytes */
	const char *id;           /* serial (VIRTIO_BLK_T_GET_ID), <= 20 bytes; NULL: none */
	int read_only;            /* guest writes fail (VIRTIO_BLK_F_RO) */
	int cow;                  /* image opened read-only; writes go to a private overlay */
	const char *overlay_path; /* cow: keep the overlay in this new file; NULL: discard at exit */
	uint64_t overlay_limit;   /* cow: most bytes the overlay may hold; 0: no limit */
};

#define TVM_MAX_NET_RULES 32
#define TVM_MAX_NET_DNS 4

/* A virtio-net device over a TAP (virtio 1.2 section 5.1) with an egress
 * policy the VMM enforces on every frame the guest sends (see
 * devices/net_filter.h for what it does and does not see). */
struct tvm_net {
	int enabled;            /* 1: attach the device; 0: the VM has no network */
	const char *tap;        /* existing TAP interface; NULL: create one (needs CAP_NET_ADMIN) */
	const char *mac;        /* "xx:xx:xx:xx:xx:xx"; NULL: derived from the vsock CID */
	uint32_t mtu;           /* bytes; 0: 1500 */
	const char *allow[TVM_MAX_NET_RULES]; /* "CIDR[:PORT[/tcp|udp]]"; any rule means allow-list */
	unsigned nr_allow;
	const char *dns[TVM_MAX_NET_DNS];     /* resolvers DNS (port 53) may go to; allow-list too */
	unsigned nr_dns;
	int deny_all;           /* allow-list with nothing but the rules above (and ARP/ND) */
	const char *guest_ip;   /* "ADDR/PREFIX" (IPv4) the agent gives eth0; NULL: none */
	const char *guest_gw;   /* default route for the guest; NULL: none */
	int no_offload;         /* 1: offer the guest no checksum/TCP segmentation offload
				 * (fewer host-kernel paths for guest frames, slower) */
};

/* Why a frame was dropped: the index into tvm_net_stats.dropped. */
enum tvm_net_drop {
	TVM_NET_DROP_RUNT = 1,   /* shorter than an Ethernet header */
	TVM_NET_DROP_OVERSIZE,   /* over MTU + 14 (+ 4 with a VLAN tag); 64 KiB + 18 with TSO */
	TVM_NET_DROP_VNET_HDR,   /* virtio-net header asks for an offload not negotiated or out of bounds */
	TVM_NET_DROP_BAD_CHAIN,  /* descriptor chain of the wrong shape */
	TVM_NET_DROP_MALFORMED,  /* L2/L3/L4 headers truncated or inconsistent */
	TVM_NET_DROP_FRAGMENT,   /* IP fragment under an allow-list */
	TVM_NET_DROP_POLICY,     /* not allowed by the allow-list */
	TVM_NET_DROP_SPOOF,      /* source MAC (or ARP sender) not the guest's, under an allow-list */
	TVM_NET_DROP_BACKEND,    /* the TAP refused it */
	TVM_NET_DROP_COUNT
};

/* Counters of the VM's network device since it was created. Frames are
 * counted without the 12-byte virtio-net header; bytes likewise. */
struct tvm_net_stats {
	uint64_t tx_frames, tx_bytes;   /* guest -> TAP, sent */
	uint64_t rx_frames, rx_bytes;   /* TAP -> guest, delivered */
	uint64_t tx_gso, rx_gso;        /* of those, frames with TCP segmentation offload */
	uint64_t rx_dropped;            /* TAP frames the guest had no room for */
	uint64_t dropped[TVM_NET_DROP_COUNT]; /* guest frames dropped, by enum tvm_net_drop; [0] unused */
	int backend_down;               /* the TAP hit EOF or an error: no more rx */
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
	int root_drive;             /* 1: drives[0] is the root fs (root=/dev/vda) */
	uint32_t vsock_cid;         /* guest CID of the virtio-vsock device (default 3); 0: no device */
	const char *vsock_uds;      /* Firecracker-style hybrid vsock Unix socket path; NULL: none */
	uint32_t ttl_ms;            /* lifetime: the VM is stopped this long after start; 0: none */
	struct tvm_net net;         /* network: off unless net.enabled */
	uint64_t t0_ns;             /* CLOCK_MONOTONIC origin of metrics timestamps; 0: vm creation */
};

/* How a VM ended. */
enum tvm_exit {
	TVM_EXIT_NONE = 0,      /* still running */
	TVM_EXIT_RESET,         /* the guest reset itself (reboot, panic with panic=-1): clean end */
	TVM_EXIT_STOPPED,       /* the host called tvm_vm_stop() */
	TVM_EXIT_SHUTDOWN,      /* KVM_EXIT_SHUTDOWN (triple fault) */
	TVM_EXIT_INTERNAL_ERROR,/* KVM_EXIT_INTERNAL_ERROR: KVM could not emulate something */
	TVM_EXIT_FAIL_ENTRY,    /* KVM_EXIT_FAIL_ENTRY: invalid guest state */
	TVM_EXIT_VMM_ERROR,     /* an ioctl or the VMM itself failed */
	TVM_EXIT_TTL,           /* the VM's lifetime (ttl_ms) expired */
};

/* Fill c with the defaults documented in struct tvm_config. */
TVM_API void tvm_config_init(struct tvm_config *c);

#ifdef __cplusplus
}
#endif

#endif
