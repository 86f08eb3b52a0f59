/* The VM's seccomp filters (cfg.seccomp, vmm/sandbox/seccomp.h): each of
 * its threads confines itself once its setup is done, first thing on the
 * thread (vCPUs, the event loop each time it starts, the serial input). */
#include "vmm/sandbox/seccomp.h"
#include "vmm/vm_impl.h"

/* A thread that cannot be confined must not run the guest's I/O: it ends
 * the VM and returns nonzero (then the thread ends). */
static int confine(struct tvm_vm *vm, enum sc_role role)
{
	struct tvm_err e = { 0 };
	int r = sc_confine(role, sc_features(&vm->cfg), vm->cfg.seccomp, vm->cfg.log_fd, &e);

	if (r)
		vm_end(vm, TVM_EXIT_VMM_ERROR, e.msg);
	return r;
}

static int vcpu_init(void *ctx)
{
	return confine(ctx, SC_VCPU);
}

static int loop_init(void *arg)
{
	return confine(arg, SC_EVLOOP);
}

int vm_seccomp_serial(struct tvm_vm *vm)
{
	return confine(vm, SC_SERIAL);
}

int vm_seccomp_prepare(struct tvm_vm *vm, struct tvm_err *e)
{
	int r;

	if (vm->cfg.seccomp == TVM_SECCOMP_OFF)
		return 0;
	r = sc_supported(vm->cfg.seccomp, e);
	if (r)
		return r;
	vm->host.thread_init = vcpu_init;
	vm->loop.thread_init = loop_init;
	vm->loop.thread_init_arg = vm;
	return 0;
}
