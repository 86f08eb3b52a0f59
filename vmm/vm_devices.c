/* The virtio devices the config asks for: drives and vsock, each attached
 * to the MMIO bus through a vdev (vm_net.c attaches the network). */
#include <stdio.h>

#include "devices/blk/virtio_blk.h"
#include "devices/vsock/virtio_vsock.h"
#include "vmm/vdev.h"
#include "vmm/vm_impl.h"

static void close_blk(void *dev)
{
	virtio_blk_close(dev);
}

int vm_watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg)
{
	struct tvm_vm *vm = ctx;

	return ev_add(&vm->loop, fd, events, cb, arg, NULL);
}

void vm_unwatch(void *ctx, int fd)
{
	struct tvm_vm *vm = ctx;

	ev_del(&vm->loop, fd);
}

static void vsock_kick(void *ctx, unsigned queue)
{
	struct tvm_vm *vm = ctx;

	virtio_mmio_notify(&vm->vsock_dev->t, queue);
}

static void close_vsock(void *dev)
{
	virtio_vsock_close(dev);
}

int vm_add_vsock(struct tvm_vm *vm, struct tvm_err *e)
{
	struct vsock_opts o = {
		.guest_cid = vm->cfg.vsock_cid,
		.uds_path = vm->cfg.vsock_uds,
		.io = { .watch = vm_watch, .unwatch = vm_unwatch, .kick = vsock_kick, .ctx = vm },
	};
	int r;

	if (!vm->cfg.vsock_cid)
		return 0;
	r = virtio_vsock_open(&vm->vsock, &o, e);
	if (r)
		return r;
	vm->vsock_dev = &vm->vdevs[vm->nr_vdevs];
	r = vdev_attach(
		vm->vsock_dev, vm->nr_vdevs,
		&(struct vdev_spec){
			.name = "virtio-vsock", .ops = &virtio_vsock_ops, .dev = vm->vsock, .close_dev = close_vsock },
		&vm->vdev_host, e);
	vm->nr_vdevs++;
	return r;
}

int vm_add_drives(struct tvm_vm *vm, struct tvm_err *e)
{
	for (unsigned i = 0; i < vm->cfg.nr_drives; i++) {
		const struct tvm_drive *d = &vm->cfg.drives[i];
		struct blk_opts o = {
			.path = d->path,
			.id = d->id,
			.read_only = d->read_only,
			.cow = d->cow,
			.overlay_path = d->overlay_path,
			.overlay_limit = d->overlay_limit,
			.limit = d->limit,
			.size = d->size,
			.io = vdev_fd_watch(&vm->vdevs[vm->nr_vdevs]), /* the vdev it is attached as below */
		};
		struct virtio_blk *blk;
		char name[24];
		int r = virtio_blk_open(&blk, &o, e);

		if (r)
			return r;
		snprintf(name, sizeof(name), "virtio-blk%u", i);
		r = vdev_attach(
			&vm->vdevs[vm->nr_vdevs], vm->nr_vdevs,
			&(struct vdev_spec){
				.name = name, .unit = i, .ops = &virtio_blk_ops, .dev = blk, .close_dev = close_blk },
			&vm->vdev_host, e);
		vm->nr_vdevs++; /* destroy cleans up a half-attached one too */
		if (r)
			return r;
	}
	return 0;
}
