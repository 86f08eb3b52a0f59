/* The VM object's insides, shared by the vm*.c files: vm.c (lifecycle) and
 * the parts it is built from, vm_snapshot.c and vm_restore.c. Not part of
 * the public API. */
#ifndef TVM_VM_IMPL_H
#define TVM_VM_IMPL_H

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "boot/boot.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/uart_8250.h"
#include "devices/vsock/virtio_vsock.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/kvm/bus.h"
#include "vmm/kvm/event_loop.h"
#include "vmm/core/guest_mem.h"
#include "vmm/kvm/kvm.h"
#include "vmm/core/metrics.h"
#include "vmm/tinyvmm.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vcpu_pause.h"
#include "vmm/vdev.h"

struct tvm_vm {
	struct tvm_config cfg; /* strings point into cfg_strings */
	char *cfg_strings;
	char cmdline[BOOT_CMDLINE_MAX]; /* composed guest command line */
	bool quirks;
	struct kvm_sys kvm;
	struct guest_mem mem;
	struct bus pio, mmio;
	struct metrics metrics;
	struct vcpu_host host;
	struct vdev_host vdev_host; /* what vdev_attach wires each virtio device to */
	struct vcpu *vcpus;
	int nr_vcpus;           /* created so far */
	struct uart_8250 *uart; /* COM1, NULL until vm_add_pio */
	struct i8042 *kbd;
	struct event_loop loop;
	struct vdev vdevs[VDEV_MAX];
	unsigned nr_vdevs;
	struct virtio_vsock *vsock; /* owned by its vdev */
	struct vdev *vsock_dev;
	struct vdev *net_dev;  /* NULL without a network */
	bool net_restricted;   /* its egress policy is an allow-list */
	int ttl_fd;            /* timerfd for cfg.ttl_ms, -1 when none */
	int idle_fd;           /* timerfd ticking each second for cfg.idle_ms, -1 when none */
	uint64_t busy_ns;      /* CLOCK_MONOTONIC when a vsock connection was last seen open or begun */
	uint64_t idle_opened;  /* the vsock device's opened count at the last idle tick */
	struct cgroup *cgroup; /* host cgroup holding the process, NULL without (vm_cgroup.c) */

	atomic_bool stopping;
	pthread_mutex_t lock;
	pthread_cond_t ended;
	enum tvm_exit exit_reason;
	char exit_msg[256];
	bool started;

	struct vcpu_pause pause; /* snapshot: parks the vCPU threads */
	bool restored;           /* built from a snapshot: tvm_vm_start resets vsock */
	atomic_bool needs_seed;  /* restored: the first agent connection sends SEED */
	/* Restored: the full snapshot a diff of this VM is taken against
	 * (resolved directory, memory and state files as they were then):
	 * the snapshot itself, or for a diff (restored_diff) the diff's base,
	 * with laid_pages[n_laid] the pages the diff laid over it. */
	bool has_base, restored_diff;
	struct snap_base base;
	uint64_t *laid_pages, n_laid;
	int base_mem_fd; /* the base's mem, opened at restore (a jailed user may not search its directory), or -1 */
	int pagemap_fd;  /* /proc/self/pagemap, opened at restore (before any jail or filter), or -1 */

	int input_stop_fd; /* eventfd that ends the serial input thread */
	pthread_t input_thread;
	bool input_started;
};

/* Build a VM from c without loading a guest: its host cgroup first
 * (cfg.cgroup: the process moves into it), memory (anonymous, or the
 * snapshot memory file mem_path mapped private), irqchip, PIT, vCPUs with
 * their boot CPUID/MSRs/LAPIC, devices, drives, vsock. need_kernel: check
 * that c names a kernel. On failure nothing is left. */
int vm_build(const struct tvm_config *c, const char *mem_path, bool need_kernel, struct tvm_vm **out,
	     struct tvm_err *e);

/* End the VM (ctx: the struct tvm_vm): the first reason (enum tvm_exit)
 * and message are kept; every vCPU is kicked, tvm_vm_wait wakes. */
void vm_end(void *ctx, int reason, const char *msg);

/* Called by tvm_vm_start on a restored VM once its threads run
 * (vm_restore.c): every queue kicked and the vsock transport reset. */
void vm_restored_started(struct tvm_vm *vm);

/* Device fd watching on the VM's event loop, for devices' injected
 * struct fd_watch_ops (ctx is the VM). */
int vm_watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg);
void vm_unwatch(void *ctx, int fd);

/* Attach the virtio-net device described by vm->cfg.net, if enabled
 * (vmm/vm_net.c). */
int vm_add_net(struct tvm_vm *vm, struct tvm_err *e);
/* The network settings of n (rules, resolvers, MTU, guest addresses, MAC)
 * checked, before anything is built: -EINVAL with the one bad value named. */
int vm_check_net(const struct tvm_net *n, struct tvm_err *e);
/* With a network device and a log fd: one line naming its TAP, the TAP's
 * MAC and whether egress is restricted. */
void vm_net_announce(const struct tvm_vm *vm);
/* With a network device: append ,"net":{counters} to the metrics JSON. */
void vm_net_write_metrics(const struct tvm_vm *vm, FILE *f);

/* vm_config.c: refuse a config the VM cannot be built from (-EINVAL and
 * a line naming the setting); need_kernel: it must name a kernel. */
int vm_check_config(const struct tvm_config *c, bool need_kernel, struct tvm_err *e);
/* c->no_inplace_drives: each drive copy-on-write or read-only; 0, or
 * -EPERM with e naming the drive. */
int vm_check_inplace(const struct tvm_config *c, struct tvm_err *e);
/* Whether host quirks apply under setting q on this host. */
bool vm_quirks_apply(enum tvm_quirks q);

/* vm_cmdline.c: append " word" to the guest command line; -E2BIG when it
 * is full. */
int vm_cmdline_add(struct tvm_vm *vm, const char *word, struct tvm_err *e);
/* Start the guest command line from vm->cfg: base line, quirk words, root
 * device, then the user's additions. */
int vm_compose_cmdline(struct tvm_vm *vm, struct tvm_err *e);

/* vm_pio.c: build COM1 (output to cfg.serial_out_fd, IRQ through KVM)
 * and the i8042 (its reset ends the VM), and put them and the POST/DMA
 * page port sink on the port-I/O bus. */
int vm_add_pio(struct tvm_vm *vm, struct tvm_err *e);

/* vm_devices.c: attach cfg's drives (virtio-blk), then its vsock device
 * when cfg.vsock_cid is set. A half-attached device is still counted in
 * nr_vdevs, so tvm_vm_destroy cleans it up. */
int vm_add_drives(struct tvm_vm *vm, struct tvm_err *e);
int vm_add_vsock(struct tvm_vm *vm, struct tvm_err *e);

/* vm_vcpus.c: create cfg.cpus vCPUs (nr_vcpus counts the ones to clean
 * up, a half-made one included). */
int vm_create_vcpus(struct tvm_vm *vm, struct tvm_err *e);

/* vm_kernel.c: load cfg's kernel and initrd into guest memory, write the
 * boot structures and set the boot vCPU's registers. */
int vm_load_guest(struct tvm_vm *vm, struct tvm_err *e);

/* vm_ttl.c: with cfg.ttl_ms, arm the timer that ends the VM with
 * TVM_EXIT_TTL; with cfg.idle_ms and a vsock device, the one that ends it
 * with TVM_EXIT_IDLE (both on the event loop; their fds are closed by
 * destroy). */
int vm_arm_ttl(struct tvm_vm *vm, struct tvm_err *e);

/* vm_cgroup.c: with cfg.cgroup on (or auto, and the host allows it), make
 * the VM's cgroup and move the process into it; leave: move back, remove
 * it. Metrics: append ,"cgroup":{...} or ,"cgroup":null. */
int vm_cgroup_enter(struct tvm_vm *vm, struct tvm_err *e);
void vm_cgroup_leave(struct tvm_vm *vm);
void vm_cgroup_write_metrics(const struct tvm_vm *vm, FILE *f);

/* vm_seccomp.c: with cfg.seccomp, check that the kernel can and have every
 * thread the VM starts confine itself (vCPUs, the event loop); the serial
 * input thread calls vm_seccomp_serial (nonzero: it must end, the VM was
 * ended). */
int vm_seccomp_prepare(struct tvm_vm *vm, struct tvm_err *e);
int vm_seccomp_serial(struct tvm_vm *vm);

/* vm_serial.c: with cfg.serial_in_fd, start the thread feeding it to COM1
 * (stopped through input_stop_fd, which destroy closes); join it. */
int vm_serial_input_start(struct tvm_vm *vm, struct tvm_err *e);
void vm_serial_input_join(struct tvm_vm *vm);

#endif
