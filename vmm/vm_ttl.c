/* The VM's lifetime limit (cfg.ttl_ms): a timerfd on the event loop that
 * ends the VM with TVM_EXIT_TTL. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/vm_impl.h"

static void on_ttl(void *opaque, uint32_t events)
{
	struct tvm_vm *vm = opaque;
	uint64_t n;

	(void)events;
	if (read(vm->ttl_fd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		vm_end(vm, TVM_EXIT_TTL, "VM lifetime expired");
}

/* The lifetime runs on the event loop, so it holds whatever the caller of
 * the library does. */
int vm_arm_ttl(struct tvm_vm *vm, struct tvm_err *e)
{
	struct itimerspec its = { .it_value = { .tv_sec = vm->cfg.ttl_ms / 1000,
						 .tv_nsec = (long)(vm->cfg.ttl_ms % 1000) * 1000000 } };

	if (!vm->cfg.ttl_ms)
		return 0;
	vm->ttl_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (vm->ttl_fd < 0)
		return tvm_errf(e, errno, "ttl: timerfd_create: %s", strerror(errno));
	if (timerfd_settime(vm->ttl_fd, 0, &its, NULL) < 0)
		return tvm_errf(e, errno, "ttl: timerfd_settime: %s", strerror(errno));
	return ev_add(&vm->loop, vm->ttl_fd, EPOLLIN, on_ttl, vm, e);
}
