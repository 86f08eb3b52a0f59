/* The VM's lifetime limits, both timerfds on the event loop: cfg.ttl_ms
 * ends the VM with TVM_EXIT_TTL so long after it started; cfg.idle_ms with
 * TVM_EXIT_IDLE once no vsock connection has been open for so long (a VM
 * serving `tinyvmm exec` whose backend died). */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/vm_impl.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void on_ttl(void *opaque, uint32_t events)
{
	struct tvm_vm *vm = opaque;
	uint64_t n;

	(void)events;
	if (read(vm->ttl_fd, &n, sizeof(n)) == (ssize_t)sizeof(n))
		vm_end(vm, TVM_EXIT_TTL, "VM lifetime expired");
}

/* Each second: busy while a vsock connection is open or one was begun
 * since the last tick. A guest that never closes its side keeps the VM
 * busy: the idle timeout serves a host whose client died, --ttl bounds a
 * hostile guest. */
static void on_idle_tick(void *opaque, uint32_t events)
{
	struct tvm_vm *vm = opaque;
	struct vsock_stats s = { 0 };
	uint64_t n, t = now_ns();

	(void)events;
	if (read(vm->idle_fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
		return;
	virtio_vsock_stats(vm->vsock, &s);
	/* A connection begun since the last tick counts even if it is
	 * gone: a client retrying through a booting guest (each try refused
	 * in milliseconds) or making short ones is not idle. */
	if (s.conns || s.opened != vm->idle_opened)
		vm->busy_ns = t;
	else if (t - vm->busy_ns >= (uint64_t)vm->cfg.idle_ms * 1000000ULL)
		vm_end(vm, TVM_EXIT_IDLE, "VM idle: no vsock connection for its idle timeout");
	vm->idle_opened = s.opened;
}

/* A periodic timerfd on the loop: fd_out set, closed by destroy. */
static int arm(struct tvm_vm *vm, int *fd_out, const struct itimerspec *its, void (*fn)(void *, uint32_t),
	       const char *what, struct tvm_err *e)
{
	*fd_out = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (*fd_out < 0)
		return tvm_errf(e, errno, "%s: timerfd_create: %s", what, strerror(errno));
	if (timerfd_settime(*fd_out, 0, its, NULL) < 0)
		return tvm_errf(e, errno, "%s: timerfd_settime: %s", what, strerror(errno));
	return ev_add(&vm->loop, *fd_out, EPOLLIN, fn, vm, e);
}

/* The limits run on the event loop, so they hold whatever the caller of
 * the library does. */
int vm_arm_ttl(struct tvm_vm *vm, struct tvm_err *e)
{
	struct itimerspec ttl = { .it_value = { .tv_sec = vm->cfg.ttl_ms / 1000,
						.tv_nsec = (long)(vm->cfg.ttl_ms % 1000) * 1000000 } };
	struct itimerspec tick = { .it_value = { .tv_sec = 1 }, .it_interval = { .tv_sec = 1 } };
	int r = 0;

	if (vm->cfg.ttl_ms)
		r = arm(vm, &vm->ttl_fd, &ttl, on_ttl, "ttl", e);
	if (!r && vm->cfg.idle_ms && vm->vsock) {
		vm->busy_ns = now_ns();
		r = arm(vm, &vm->idle_fd, &tick, on_idle_tick, "idle timeout", e);
	}
	return r;
}
