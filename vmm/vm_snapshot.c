/* tvm_vm_snapshot: park the vCPUs, stop the event loop, hold every
 * transport lock, save vCPU, VM and device state, the copy-on-write drives
 * and guest memory into a directory, then let the VM run on. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/blk/blk_persist.h"
#include "devices/net/virtio_net.h"
#include "vmm/snapshot/dev_state.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/snapshot_io.h"
#include "vmm/snapshot/vcpu_state.h"
#include "vmm/vm_impl.h"
#include "vmm/snapshot/vm_state.h"

/* What a snapshot cannot carry: drives written in place (many restores
 * would share them). */
static int check_snapshottable(const struct tvm_vm *vm, struct tvm_err *e)
{
	for (unsigned i = 0; i < vm->cfg.nr_drives; i++) {
		const struct tvm_drive *d = &vm->cfg.drives[i];

		if (tvm_drive_in_place(d))
			return tvm_errf(e, EINVAL,
					"snapshot: drive %u (%s) is written in place; snapshots need "
					"read-only or copy-on-write drives",
					i, d->path);
	}
	return 0;
}

/* The network as the guest knows it (the TAP belongs to the VM that
 * restores), with the device's actual MAC, derived or given. */
static void save_net_config(struct tvm_vm *vm, struct snap_w *w)
{
	uint8_t m[6];
	char mac[NET_MAC_STR];

	if (!vm->net_dev)
		return;
	virtio_net_mac(vm->net_dev->dev, m);
	snap_net_write(w, &vm->cfg.net, net_mac_format(m, mac));
}

static int save_vcpus(struct tvm_vm *vm, struct snap_w *w, struct tvm_err *e)
{
	struct vcpu_state *s = malloc(sizeof(*s));
	uint32_t *msrs = NULL, nmsrs = 0;
	int r;

	if (!s)
		return tvm_errf(e, ENOMEM, "snapshot: out of memory");
	r = vcpu_msr_list(&vm->kvm, &msrs, &nmsrs, e);
	for (int i = 0; !r && i < vm->nr_vcpus; i++) {
		r = vcpu_state_save(&vm->vcpus[i], &vm->kvm, msrs, nmsrs, s, e);
		if (!r)
			vcpu_state_write(w, (uint32_t)i, s);
	}
	free(msrs);
	free(s);
	return r;
}

static int save_devices(struct tvm_vm *vm, struct snap_w *w, struct tvm_err *e)
{
	struct virtio_mmio_state st;
	struct uart_8250_regs u;
	uint8_t *blob = NULL;

	for (unsigned i = 0; i < vm->nr_vdevs; i++) {
		struct virtio_mmio *t = &vm->vdevs[i].t;
		long n = 0;

		if (t->ops->save) {
			if (!blob && !(blob = malloc(DEV_STATE_MAX_BLOB)))
				return tvm_errf(e, ENOMEM, "snapshot: out of memory");
			n = t->ops->save(t->dev, blob, DEV_STATE_MAX_BLOB);
			if (n < 0) {
				free(blob);
				return tvm_errf(e, (int)-n, "snapshot: %s: save: %s", vm->vdevs[i].name,
						strerror((int)-n));
			}
		}
		/* After the device's save, which may have given chains back. */
		virtio_mmio_save(t, &st);
		dev_state_write_virtio(w, i, &st, blob, (size_t)n);
	}
	free(blob);
	uart_8250_save(vm->uart, &u);
	dev_state_write_uart(w, &u);
	return 0;
}

struct disk_ctx {
	struct virtio_blk *blk;
	const uint64_t *map;
	uint64_t nwords;
	unsigned index;
};

static int fill_disk(int fd, void *arg, struct tvm_err *e)
{
	struct disk_ctx *d = arg;
	int r = virtio_blk_save_blocks(d->blk, fd, &d->map, &d->nwords);

	if (r)
		return tvm_errf(e, -r, "drive %u overlay: %s", d->index, strerror(-r));
	return 0;
}

/* The copy-on-write drives' blocks, found among the virtio devices by
 * type: file "disk<drive>" and the block map's section, for each. */
static int save_disks(struct tvm_vm *vm, const char *dir, struct snap_w *w, struct tvm_err *e)
{
	for (unsigned i = 0; i < vm->nr_vdevs; i++) {
		struct disk_ctx d = { .blk = virtio_blk_of(&vm->vdevs[i].t), .index = vm->vdevs[i].unit };
		char name[16];
		int r;

		if (!d.blk || d.index >= vm->cfg.nr_drives || !vm->cfg.drives[d.index].cow)
			continue;
		snprintf(name, sizeof(name), "disk%u", d.index);
		r = snap_write_file(dir, name, fill_disk, &d, e);
		if (r)
			return r;
		dev_state_write_disk(w, d.index, d.map, d.nwords);
	}
	return 0;
}

static int fill_buf(int fd, void *arg, struct tvm_err *e)
{
	const struct snap_w *w = arg;
	size_t off = 0;

	while (off < w->len) {
		ssize_t n = write(fd, w->p + off, w->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return tvm_errf(e, n < 0 ? errno : EIO, "state file: write: %s",
					n < 0 ? strerror(errno) : "short write");
		off += (size_t)n;
	}
	return 0;
}

/* A diff's memory: the pages written since the restore (pagemap, read
 * now that nothing moves), and those a diff restored from laid over the
 * base (private file pages: pagemap does not tell them from the base's). */
static int save_diff_mem(struct tvm_vm *vm, const char *dir, struct tvm_err *e)
{
	struct snap_diff_src src = { .m = &vm->mem };
	uint64_t *written = NULL, *pages = NULL, nw = 0;
	int r = snap_diff_scan(vm->pagemap_fd, &vm->mem, &written, &nw, e);

	if (!r && snap_pages_union(written, nw, vm->laid_pages, vm->n_laid, &pages, &src.n))
		r = tvm_errf(e, ENOMEM, "snapshot: out of memory");
	src.pages = pages;
	if (!r)
		r = snap_write_file(dir, SNAP_MEM_FILE, snap_fill_diff, &src, e);
	free(written);
	free(pages);
	return r;
}

/* Everything, with the VM quiescent. State last: a directory whose state
 * file is complete has its memory and disks too. base: a diff against it
 * (its identity in the state file, only changed pages in mem). */
static int save_all(struct tvm_vm *vm, const char *dir, const struct snap_base *base, struct tvm_err *e)
{
	uint64_t sizes[TVM_MAX_DRIVES] = { 0 };
	struct vm_state vs;
	struct snap_w w;
	int r;

	for (unsigned i = 0; i < vm->nr_vdevs; i++) {
		struct virtio_blk *b = virtio_blk_of(&vm->vdevs[i].t);

		if (b && vm->vdevs[i].unit < TVM_MAX_DRIVES)
			sizes[vm->vdevs[i].unit] = virtio_blk_size(b);
	}
	snap_w_init(&w);
	snap_config_write(&w, &vm->cfg, vm->quirks, vm->cmdline, sizes);
	save_net_config(vm, &w);
	if (base)
		snap_base_write(&w, base);
	r = save_vcpus(vm, &w, e);
	if (!r)
		r = vm_state_save(&vm->kvm, &vs, e);
	if (!r) {
		vm_state_write(&w, &vs);
		r = save_devices(vm, &w, e);
	}
	if (!r)
		r = save_disks(vm, dir, &w, e);
	if (!r)
		r = base ? save_diff_mem(vm, dir, e) : snap_write_file(dir, SNAP_MEM_FILE, snap_fill_mem, &vm->mem, e);
	if (!r)
		r = snap_w_finish(&w, e);
	if (!r)
		r = snap_write_file(dir, SNAP_STATE_FILE, fill_buf, &w, e);
	if (!r)
		r = snap_sync_dir(dir, e);
	snap_w_free(&w);
	return r;
}

static int snapshot(struct tvm_vm *vm, const char *dir, const struct snap_base *base, struct tvm_err *e)
{
	struct tvm_err e2 = { 0 };
	int r;

	if (!vm->started || atomic_load(&vm->stopping))
		return tvm_errf(e, EINVAL, "snapshot %s: the VM is not running", dir);
	r = check_snapshottable(vm, e);
	if (!r)
		r = snap_mkdir(dir, e);
	if (!r)
		r = vcpu_pause_all(&vm->pause, vm->vcpus, vm->nr_vcpus, &vm->stopping, e);
	if (r)
		return r;
	/* Devices quiet: no event-loop callbacks, and no queue moves (a host
	 * thread's vsock kick waits for the transport lock). */
	ev_stop(&vm->loop);
	for (unsigned i = 0; i < vm->nr_vdevs; i++)
		pthread_mutex_lock(&vm->vdevs[i].t.lock);
	r = save_all(vm, dir, base, e);
	if (r)
		tvm_err_prefix(e, "snapshot %s", dir);
	for (unsigned i = vm->nr_vdevs; i-- > 0;)
		pthread_mutex_unlock(&vm->vdevs[i].t.lock);
	if (ev_start(&vm->loop, &e2)) {
		vm_end(vm, TVM_EXIT_VMM_ERROR, e2.msg);
		r = r ? r : tvm_errf(e, e2.code, "%s", e2.msg);
	}
	vcpu_resume_all(&vm->pause);
	return r;
}

int tvm_vm_snapshot(struct tvm_vm *vm, const char *dir, struct tvm_err *e)
{
	return snapshot(vm, dir, NULL, e);
}

/* dir/mem is the file open as fd (same device and inode). */
static bool is_file_of(const char *dir, int fd)
{
	char path[PATH_MAX + 8];
	struct stat a, b;

	return snprintf(path, sizeof(path), "%s/%s", dir, SNAP_MEM_FILE) < (int)sizeof(path) && stat(path, &a) == 0 &&
	       fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The base a diff of vm is taken against: the full snapshot vm was
 * restored from, or the base of the diff it was restored from; base_dir,
 * when given, must be that snapshot. Its memory file must be unchanged
 * since, and dir must not be the base. Known by its memory file's device
 * and inode alone: the caller may be confined (the snapshot thread's
 * seccomp filter has no readlink for realpath; a jailed process runs as a
 * user that may not search the base directory, so its mem is the
 * descriptor opened at the restore, the file actually mapped). The state
 * file's identity was taken at the restore and is checked again when the
 * diff is restored, as is mem's path. */
static int diff_base(struct tvm_vm *vm, const char *dir, const char *base_dir, struct tvm_err *e)
{
	struct stat st;

	if (!vm->has_base)
		return tvm_errf(e, EINVAL, "snapshot %s: a diff needs a VM restored from a snapshot%s%s", dir,
				base_dir ? ", its base " : "", base_dir ? base_dir : "");
	if (base_dir && stat(base_dir, &st) < 0)
		return tvm_errf(e, errno, "snapshot %s: base %s: %s", dir, base_dir, strerror(errno));
	if (base_dir && !is_file_of(base_dir, vm->base_mem_fd))
		return tvm_errf(e, EINVAL, "snapshot %s: the VM's base is %s, not %s%s", dir, vm->base.dir, base_dir,
				vm->restored_diff ? " (it was restored from a diff of that base)" : "");
	if (is_file_of(dir, vm->base_mem_fd))
		return tvm_errf(e, EINVAL, "snapshot %s: a diff cannot replace its own base", dir);
	/* The private mapping shows the base's memory as it was mapped: a
	 * file changed since would make the diff's unchanged pages wrong. */
	if (fstat(vm->base_mem_fd, &st) < 0)
		return tvm_errf(e, errno, "snapshot %s: base %s/%s: %s", dir, vm->base.dir, SNAP_MEM_FILE,
				strerror(errno));
	if (!snap_base_same_mem(&vm->base, &st))
		return tvm_errf(e, ESTALE, "snapshot %s: base %s/%s: changed since the VM was restored", dir,
				vm->base.dir, SNAP_MEM_FILE);
	return 0;
}

int tvm_vm_snapshot_diff(struct tvm_vm *vm, const char *dir, const char *base_dir, struct tvm_err *e)
{
	int r = diff_base(vm, dir, base_dir, e);

	return r ? r : snapshot(vm, dir, &vm->base, e);
}
