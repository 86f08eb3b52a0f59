/* tvm_vm_restore: rebuild a VM from a snapshot directory. Every section is
 * parsed and checked before anything is created; then the VM is built as at
 * boot but on the private mapping of the memory file and without a kernel,
 * and drives, transports (queues re-validated), COM1, vCPUs and the
 * irqchip/PIT/clock get their state back, in that order. */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/blk/blk_persist.h"
#include "vmm/snapshot/dev_state.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/snapshot_io.h"
#include "vmm/snapshot/vcpu_state.h"
#include "vmm/vm_impl.h"
#include "vmm/snapshot/vm_state.h"

/* Everything decoded from the state file. */
struct restore {
	const char *dir;
	uint8_t *buf;
	size_t len;
	struct snap_file f;
	struct snap_config sc;
	struct tvm_config cfg;
	struct vcpu_state *vcpu; /* [sc.cpus] */
	struct vm_state vm;
	struct uart_8250_regs uart;
	unsigned nr_vdevs;
	struct virtio_mmio_state dev[VDEV_MAX];
	const uint8_t *blob[VDEV_MAX];
	size_t blob_len[VDEV_MAX];
	uint64_t *map[TVM_MAX_DRIVES];
	uint64_t nwords[TVM_MAX_DRIVES];
	bool is_diff;          /* a diff: memory is base.dir/mem with dir/mem laid over it */
	struct snap_base base; /* a diff's base; a full snapshot's own identity */
	bool has_id;           /* base is known and mem_fd is its memory file */
	int mem_fd;            /* base's mem (its identity), or -1 */
};

static void restore_free(struct restore *x)
{
	for (unsigned i = 0; i < TVM_MAX_DRIVES; i++)
		free(x->map[i]);
	if (x->mem_fd >= 0)
		close(x->mem_fd);
	free(x->vcpu);
	snap_file_free(&x->f);
	free(x->buf);
	free(x);
}

static const struct snap_section *need(struct restore *x, uint32_t type, uint32_t index, const char *what,
				       struct tvm_err *e)
{
	const struct snap_section *s = snap_find(&x->f, type, index);

	if (!s)
		tvm_errf(e, EINVAL, "%s/state: no %s %u section", x->dir, what, index);
	return s;
}

static int decode(struct restore *x, const struct tvm_config *o, struct tvm_err *e)
{
	const struct snap_section *s;
	char path[4096];
	int r = snap_path(path, sizeof(path), x->dir, SNAP_STATE_FILE, e);

	if (!r)
		r = snap_read_file(path, SNAP_MAX_FILE, &x->buf, &x->len, e);
	if (!r)
		r = snap_parse(x->buf, x->len, path, &x->f, e);
	if (r)
		return r;
	if (!(s = need(x, SNAP_CONFIG, 0, "config", e)))
		return -EINVAL;
	r = snap_config_read(s, &x->sc, e);
	if (!r && (s = snap_find(&x->f, SNAP_NET, 0)))
		r = snap_net_read(s, &x->sc, e);
	if (!r && (s = snap_find(&x->f, SNAP_BASE, 0))) {
		x->is_diff = true;
		if ((r = snap_base_read(s, &x->base, e)))
			tvm_err_prefix(e, "%s", x->dir);
	}
	/* The drives checked are the ones this read names: a state file
	 * swapped since a caller's own look cannot add an in-place one. */
	if (!r && ((r = snap_config_apply(&x->sc, o, &x->cfg, e)) || (r = vm_check_inplace(&x->cfg, e))))
		tvm_err_prefix(e, "restore %s", x->dir);
	if (r)
		return r;
	x->vcpu = calloc(x->sc.cpus, sizeof(*x->vcpu));
	if (!x->vcpu)
		return tvm_errf(e, ENOMEM, "restore: out of memory");
	for (uint32_t i = 0; i < x->sc.cpus; i++) {
		if (!(s = need(x, SNAP_VCPU, i, "vcpu", e)))
			return -EINVAL;
		if ((r = vcpu_state_read(s, &x->vcpu[i], e)))
			return r;
	}
	if (!(s = need(x, SNAP_VM, 0, "vm", e)) || (r = vm_state_read(s, &x->vm, e)))
		return s ? r : -EINVAL;
	if (!(s = need(x, SNAP_UART, 0, "serial", e)) || (r = dev_state_read_uart(s, &x->uart, e)))
		return s ? r : -EINVAL;
	x->nr_vdevs = x->sc.nr_drives + (x->sc.vsock_cid != 0) + x->sc.net.present;
	for (unsigned i = 0; i < x->nr_vdevs; i++) {
		if (!(s = need(x, SNAP_VIRTIO, i, "virtio device", e)))
			return -EINVAL;
		if ((r = dev_state_read_virtio(s, &x->dev[i], &x->blob[i], &x->blob_len[i], e)))
			return r;
	}
	for (unsigned i = 0; i < x->sc.nr_drives; i++) {
		if (!x->sc.d[i].cow)
			continue;
		if (!(s = need(x, SNAP_DISK, i, "drive map", e)))
			return -EINVAL;
		if ((r = dev_state_read_disk(s, blk_map_words(x->sc.d[i].size), &x->map[i], &x->nwords[i], e)))
			return r;
	}
	return 0;
}

/* The drives, found among the virtio devices by type: each must have the
 * snapshot's size, and a copy-on-write one gets its blocks back. */
static int restore_drives(struct tvm_vm *vm, struct restore *x, struct tvm_err *e)
{
	for (unsigned k = 0; k < vm->nr_vdevs; k++) {
		struct virtio_blk *b = virtio_blk_of(&vm->vdevs[k].t);
		unsigned i = vm->vdevs[k].unit;
		char name[16], path[4096];
		int fd, r;

		if (!b)
			continue;
		if (i >= x->sc.nr_drives)
			return tvm_errf(e, EINVAL, "drive %u: the snapshot has %u drives", i, x->sc.nr_drives);
		if (virtio_blk_size(b) != x->sc.d[i].size)
			return tvm_errf(e, EINVAL, "drive %u %s: %llu bytes, the snapshot's image had %llu", i,
					vm->cfg.drives[i].path, (unsigned long long)virtio_blk_size(b),
					(unsigned long long)x->sc.d[i].size);
		if (!x->sc.d[i].cow)
			continue;
		snprintf(name, sizeof(name), "disk%u", i);
		if ((r = snap_path(path, sizeof(path), x->dir, name, e)))
			return r;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
		if (fd < 0)
			return tvm_errf(e, errno, "%s: %s", path, strerror(errno));
		r = virtio_blk_restore_blocks(b, fd, x->map[i], x->nwords[i]);
		close(fd);
		if (r)
			return tvm_errf(e, -r, "%s: cannot load the drive's blocks: %s", path, strerror(-r));
	}
	return 0;
}

static int restore_devices(struct tvm_vm *vm, struct restore *x, struct tvm_err *e)
{
	if (vm->nr_vdevs != x->nr_vdevs)
		return tvm_errf(e, EINVAL, "restore: %u virtio devices built, the snapshot has %u", vm->nr_vdevs,
				x->nr_vdevs);
	for (unsigned i = 0; i < vm->nr_vdevs; i++) {
		struct virtio_mmio *t = &vm->vdevs[i].t;
		int r = 0;

		/* The device's own state first: activation may depend on it. */
		if (x->blob_len[i]) {
			r = t->ops->restore ? t->ops->restore(t->dev, x->blob[i], x->blob_len[i]) : -EINVAL;
			if (r)
				tvm_errf(e, -r, "device state blob refused: %s", strerror(-r));
		}
		if (!r)
			r = virtio_mmio_restore(t, &x->dev[i], e);
		if (r) {
			tvm_err_prefix(e, "%s", vm->vdevs[i].name);
			return r;
		}
	}
	uart_8250_restore(vm->uart, &x->uart);
	return 0;
}

static int restore_into(struct tvm_vm *vm, struct restore *x, struct tvm_err *e)
{
	int r = restore_drives(vm, x, e);

	if (!r)
		r = restore_devices(vm, x, e);
	for (int i = 0; !r && i < vm->nr_vcpus; i++)
		r = vcpu_state_restore(&vm->vcpus[i], &vm->kvm, &x->vcpu[i], e);
	if (!r)
		r = vm_state_restore(&vm->kvm, &x->vm, e);
	return r;
}

/* Open the base's memory file (x->base.dir resolved) into x->mem_fd. A
 * full snapshot (own) takes its identity from it, what a diff of the VM
 * will name as its base; a diff's base must still be the file the diff
 * names (just checked by path; this is the file kept). Without it the VM
 * cannot be diffed, nothing else changes. */
static void open_base_mem(struct restore *x, bool own)
{
	char path[PATH_MAX + 8];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/%s", x->base.dir, SNAP_MEM_FILE) >= (int)sizeof(path) ||
	    (x->mem_fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return;
	if (fstat(x->mem_fd, &st) < 0 || (!own && !snap_base_same_mem(&x->base, &st))) {
		close(x->mem_fd);
		x->mem_fd = -1;
		return;
	}
	if (own) {
		snap_base_set_mem(&x->base, &st);
		memcpy(&x->base.state_crc, x->buf + 24, 4); /* the header's CRC, checked by snap_parse */
	}
	x->has_id = true;
}

/* The memory to map: a full snapshot's own, or a diff's base's once it is
 * found unchanged (the diff's pages are laid over it after vm_build). */
static int memory_file(struct restore *x, char *mem, size_t cap, struct tvm_err *e)
{
	int r;

	if (!x->is_diff) {
		if (realpath(x->dir, x->base.dir))
			open_base_mem(x, true);
		return snap_path(mem, cap, x->dir, SNAP_MEM_FILE, e);
	}
	r = snap_base_check(&x->base, "the diff was taken", e);
	if (!r && x->base.mem_size != (uint64_t)x->cfg.mem_mib << 20)
		r = tvm_errf(e, EINVAL, "base %s: %llu bytes of memory, the diff's config says %u MiB", x->base.dir,
			     (unsigned long long)x->base.mem_size, x->cfg.mem_mib);
	if (!r)
		r = snap_path(mem, cap, x->base.dir, SNAP_MEM_FILE, e);
	if (!r)
		open_base_mem(x, false);
	if (r)
		tvm_err_prefix(e, "restore %s", x->dir);
	return r;
}

int tvm_vm_restore(const struct tvm_config *overrides, const char *dir, struct tvm_vm **out, struct tvm_err *e)
{
	struct restore *x = calloc(1, sizeof(*x));
	struct tvm_vm *vm = NULL;
	uint64_t called = metrics_now_ns(), *laid = NULL, n_laid = 0;
	char mem[PATH_MAX + 8];
	int r;

	*out = NULL;
	if (!x)
		return tvm_errf(e, ENOMEM, "restore: out of memory");
	x->dir = dir;
	x->mem_fd = -1;
	r = decode(x, overrides, e);
	if (!r)
		r = memory_file(x, mem, sizeof(mem), e);
	if (!r)
		r = vm_build(&x->cfg, mem, false, &vm, e);
	/* Before any device state: queues are checked against guest memory. */
	if (!r && x->is_diff && !(r = snap_path(mem, sizeof(mem), dir, SNAP_MEM_FILE, e)) &&
	    (r = snap_diff_load(mem, &vm->mem, &laid, &n_laid, e)))
		tvm_err_prefix(e, "restore %s", dir);
	if (!r && (r = restore_into(vm, x, e)))
		tvm_err_prefix(e, "restore %s", dir);
	if (!r) {
		vm->restored_diff = x->is_diff;
		vm->has_base = x->has_id;
		vm->base = x->base;
		vm->base_mem_fd = x->mem_fd;
		x->mem_fd = -1;
		vm->laid_pages = laid;
		vm->n_laid = n_laid;
		laid = NULL;
		/* Now, before the caller confines itself (seccomp, a jail
		 * without /proc): a diff of this VM reads it. */
		vm->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	}
	restore_free(x);
	free(laid);
	if (r) {
		tvm_vm_destroy(vm);
		return r;
	}
	metrics_mark_at(&vm->metrics, MARK_RESTORE_CALLED, called);
	metrics_mark(&vm->metrics, MARK_STATE_RESTORED);
	vm->restored = true;
	atomic_store(&vm->needs_seed, true);
	*out = vm;
	return 0;
}

void vm_restored_started(struct tvm_vm *vm)
{
	/* Work the driver queued just before the snapshot, and an interrupt
	 * that may not have reached the guest (the driver reads
	 * InterruptStatus, so a spurious one is harmless). */
	for (unsigned i = 0; i < vm->nr_vdevs; i++)
		vdev_kick(&vm->vdevs[i]);
	/* The guest's connections ended with the snapshot's process. The
	 * device holds back host connections until the guest has handled
	 * the reset (a client of the socket may connect already). */
	if (vm->vsock)
		virtio_vsock_transport_reset(vm->vsock);
}
