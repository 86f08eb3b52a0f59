/* The VM object's lifecycle: build, create, start, wait, stop, destroy.
 * Data flow of a boot: config (vm_config.c) -> kvm_open -> guest memory ->
 * irqchip/PIT -> vCPUs (vm_vcpus.c) -> port-I/O devices (vm_pio.c), drives
 * and vsock (vm_devices.c), network (vm_net.c) -> kernel/initrd, zero page,
 * page tables, MP table in guest memory (vm_kernel.c) -> vCPU threads run,
 * with the TTL timer (vm_ttl.c) and serial input thread (vm_serial.c). */
#include "vmm/tinyvmm.h"
#include "vmm/core/err.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm/config_copy.h"
#include "vmm/kvm/event_loop.h"
#include "vmm/core/guest_mem.h"
#include "vmm/kvm/kvm.h"
#include "vmm/core/metrics.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/vdev.h"
#include "vmm/vm_impl.h"

static void vm_log(void *ctx, const char *msg)
{
	struct tvm_vm *vm = ctx;
	char line[512];
	int n;

	if (vm->cfg.log_fd < 0)
		return;
	/* One write(2) of the formatted line: callers include confined vCPU
	 * and event-loop threads, whose seccomp filters allow write but not
	 * the fstat that dprintf's stream makes first; a guest that pokes an
	 * absent port must get a log line, not a killed VMM. */
	n = snprintf(line, sizeof(line), "tinyvmm: %s\n", msg);
	if (n >= (int)sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (n > 0 && write(vm->cfg.log_fd, line, (size_t)n) < 0)
		return; /* nowhere left to say it */
}

/* First terminal event wins; every vCPU is then kicked out of KVM_RUN. */
void vm_end(void *ctx, int reason, const char *msg)
{
	struct tvm_vm *vm = ctx;

	pthread_mutex_lock(&vm->lock);
	if (vm->exit_reason == TVM_EXIT_NONE) {
		vm->exit_reason = (enum tvm_exit)reason;
		snprintf(vm->exit_msg, sizeof(vm->exit_msg), "%s", msg);
		metrics_mark(&vm->metrics, MARK_GUEST_END);
	}
	atomic_store(&vm->stopping, true);
	pthread_cond_broadcast(&vm->ended);
	pthread_mutex_unlock(&vm->lock);
	vcpu_pause_wake(&vm->pause);
	for (int i = 0; i < vm->nr_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	if (vm->input_stop_fd >= 0)
		eventfd_write(vm->input_stop_fd, 1);
	/* Host ends of vsock connections see EOF now, so a caller blocked on
	 * the agent (a job, a file transfer) returns instead of waiting on a
	 * guest that will never answer: --ttl and Ctrl-C hold in job mode. */
	if (vm->vsock)
		virtio_vsock_transport_reset(vm->vsock);
}

int vm_build(const struct tvm_config *c, const char *mem_path, bool need_kernel, struct tvm_vm **out, struct tvm_err *e)
{
	struct tvm_vm *vm;
	int r;

	*out = NULL;
	r = vm_check_config(c, need_kernel, e);
	if (r)
		return r;
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return tvm_errf(e, ENOMEM, "vm: out of memory");
	if (config_copy(&vm->cfg, c, &vm->cfg_strings)) {
		free(vm);
		return tvm_errf(e, ENOMEM, "vm: out of memory");
	}
	c = &vm->cfg; /* the VM's own copy from here on */
	vm->kvm.sys_fd = vm->kvm.vm_fd = -1;
	vm->input_stop_fd = -1;
	vm->loop.epfd = vm->loop.stop_fd = -1;
	vm->ttl_fd = -1;
	vm->idle_fd = -1;
	vm->pagemap_fd = -1;
	vm->base_mem_fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->ended, NULL);
	vcpu_pause_init(&vm->pause);
	metrics_init(&vm->metrics, c->t0_ns);
	vm->host = (struct vcpu_host){
		.pio = &vm->pio,
		.mmio = &vm->mmio,
		.mem = &vm->mem,
		.metrics = &vm->metrics,
		.stopping = &vm->stopping,
		.pause = &vm->pause,
		.on_end = vm_end,
		.log = vm_log,
		.ctx = vm,
	};
	vm->vdev_host = (struct vdev_host){
		.kvm = &vm->kvm,
		.mmio = &vm->mmio,
		.loop = &vm->loop,
		.mem = &vm->mem,
		.cmdline = vm->cmdline,
		.cmdline_cap = sizeof(vm->cmdline),
		.log = vm_log,
		.ctx = vm,
	};
	vm->quirks = vm_quirks_apply(c->quirks);

	r = vm_cgroup_enter(vm, e); /* first: all that follows is charged to it */
	if (!r)
		r = vm_compose_cmdline(vm, e);
	if (!r)
		r = ev_init(&vm->loop, e);
	if (!r)
		r = kvm_open(&vm->kvm, e);
	if (!r)
		r = mem_path ? gm_init_file(&vm->mem, mem_path, (uint64_t)c->mem_mib << 20, e)
			     : gm_init_anon(&vm->mem, (uint64_t)c->mem_mib << 20, e);
	for (int i = 0; !r && i < vm->mem.nr; i++)
		r = kvm_set_memory(&vm->kvm, (uint32_t)i, vm->mem.r[i].gpa, vm->mem.r[i].size, vm->mem.r[i].host, e);
	if (!r)
		r = kvm_create_irqchip(&vm->kvm, e);
	if (!r)
		r = kvm_create_pit(&vm->kvm, e);
	if (!r)
		r = vm_create_vcpus(vm, e);
	if (!r)
		r = vm_add_pio(vm, e);
	if (!r)
		r = vm_add_drives(vm, e);
	if (!r)
		r = vm_add_vsock(vm, e);
	if (!r)
		r = vm_add_net(vm, e);
	/* A restored guest booted long ago with the line its snapshot holds:
	 * that is what a snapshot of it saves again, not a line recomposed
	 * from it, which would grow by the quirk and device words each time
	 * (pause and resume ten times: over 4 KiB). */
	if (!r && mem_path && c->cmdline)
		snprintf(vm->cmdline, sizeof(vm->cmdline), "%s", c->cmdline);
	if (r) {
		tvm_vm_destroy(vm);
		return r;
	}
	metrics_mark(&vm->metrics, MARK_VM_CREATED);
	*out = vm;
	return 0;
}

int tvm_vm_create(const struct tvm_config *c, struct tvm_vm **out, struct tvm_err *e)
{
	struct tvm_vm *vm;
	int r = vm_build(c, NULL, true, &vm, e);

	*out = NULL;
	if (r)
		return r;
	r = vm_load_guest(vm, e);
	if (r) {
		tvm_vm_destroy(vm);
		return r;
	}
	*out = vm;
	return 0;
}

int tvm_vm_start(struct tvm_vm *vm, struct tvm_err *e)
{
	int r;

	if (vm->started)
		return tvm_errf(e, EALREADY, "vm: already started");
	vm->started = true;
	/* Said once the VM is sure to run, so a refused config or kernel is
	 * the user's one error line, not the last of several. */
	if (vm->quirks)
		vm_log(vm,
		       "kvm_pvm host: applying its quirks (CPUID CX16 and VMCALL features hidden, guest command line words added)");
	vm_net_announce(vm);
	r = vm_seccomp_prepare(vm, e);
	if (!r)
		r = vm_arm_ttl(vm, e);
	if (!r)
		r = ev_start(&vm->loop, e);
	if (r)
		return r;
	r = vm_serial_input_start(vm, e);
	if (r)
		return r;
	for (int i = 0; i < vm->nr_vcpus; i++) {
		r = vcpu_start(&vm->vcpus[i], e);
		if (r) {
			vm_end(vm, TVM_EXIT_VMM_ERROR, e->msg);
			return r;
		}
	}
	if (vm->restored)
		vm_restored_started(vm);
	return 0;
}

static void join_threads(struct tvm_vm *vm)
{
	for (int i = 0; i < vm->nr_vcpus; i++)
		vcpu_destroy(&vm->vcpus[i]);
	vm->nr_vcpus = 0;
	vm_serial_input_join(vm);
	/* After the vCPUs: no more notifications can arrive. */
	ev_stop(&vm->loop);
}

int tvm_vm_wait(struct tvm_vm *vm, struct tvm_err *e)
{
	enum tvm_exit reason;

	pthread_mutex_lock(&vm->lock);
	while (vm->exit_reason == TVM_EXIT_NONE)
		pthread_cond_wait(&vm->ended, &vm->lock);
	reason = vm->exit_reason;
	pthread_mutex_unlock(&vm->lock);
	join_threads(vm);
	if (reason == TVM_EXIT_RESET || reason == TVM_EXIT_STOPPED || reason == TVM_EXIT_IDLE)
		return 0;
	if (reason == TVM_EXIT_TTL)
		return tvm_errf(e, ETIME, "%s", vm->exit_msg);
	return tvm_errf(e, EIO, "%s", vm->exit_msg);
}

int tvm_vm_run(struct tvm_vm *vm, struct tvm_err *e)
{
	int r = tvm_vm_start(vm, e);

	if (r)
		return r;
	return tvm_vm_wait(vm, e);
}

void tvm_vm_stop(struct tvm_vm *vm)
{
	vm_end(vm, TVM_EXIT_STOPPED, "stopped by the host");
}

enum tvm_exit tvm_vm_exit_reason(const struct tvm_vm *vm)
{
	return vm->exit_reason;
}

void tvm_vm_destroy(struct tvm_vm *vm)
{
	if (!vm)
		return;
	if (vm->started)
		vm_end(vm, TVM_EXIT_STOPPED, "destroyed");
	join_threads(vm);
	for (unsigned i = 0; i < vm->nr_vdevs; i++)
		vdev_destroy(&vm->vdevs[i], &vm->loop);
	ev_destroy(&vm->loop);
	if (vm->ttl_fd >= 0)
		close(vm->ttl_fd);
	if (vm->idle_fd >= 0)
		close(vm->idle_fd);
	if (vm->pagemap_fd >= 0)
		close(vm->pagemap_fd);
	if (vm->base_mem_fd >= 0)
		close(vm->base_mem_fd);
	free(vm->laid_pages);
	free(vm->vcpus);
	if (vm->input_stop_fd >= 0)
		close(vm->input_stop_fd);
	uart_8250_close(vm->uart);
	i8042_close(vm->kbd);
	kvm_close(&vm->kvm);
	gm_destroy(&vm->mem);
	pthread_mutex_destroy(&vm->lock);
	pthread_cond_destroy(&vm->ended);
	vcpu_pause_destroy(&vm->pause);
	vm_cgroup_leave(vm); /* last: nothing of the VM is left in it */
	free(vm->cfg_strings);
	free(vm);
}
