/* The serial input thread: host input (cfg.serial_in_fd) for the guest's
 * COM1. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/vm_impl.h"

/* Host input for COM1, paced by the receive FIFO's room. */
static void *input_thread(void *arg)
{
	struct tvm_vm *vm = arg;
	struct pollfd p[2] = { { .fd = vm->cfg.serial_in_fd, .events = POLLIN },
			       { .fd = vm->input_stop_fd, .events = POLLIN } };
	uint8_t buf[UART_RX_FIFO];

	if (vm_seccomp_serial(vm))
		return NULL;
	while (!atomic_load(&vm->stopping)) {
		size_t room = uart_8250_rx_room(vm->uart);
		ssize_t n;

		p[0].events = room ? POLLIN : 0;
		if (poll(p, 2, room ? -1 : 10) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(vm->cfg.serial_in_fd, buf, room);
		if (n <= 0)
			break;
		uart_8250_push_rx(vm->uart, buf, (size_t)n);
	}
	return NULL;
}

int vm_serial_input_start(struct tvm_vm *vm, struct tvm_err *e)
{
	int r;

	if (vm->cfg.serial_in_fd < 0)
		return 0;
	vm->input_stop_fd = eventfd(0, EFD_CLOEXEC);
	if (vm->input_stop_fd < 0)
		return tvm_errf(e, errno, "serial input: eventfd: %s", strerror(errno));
	r = pthread_create(&vm->input_thread, NULL, input_thread, vm);
	if (r)
		return tvm_errf(e, r, "serial input: pthread_create: %s", strerror(r));
	vm->input_started = true;
	return 0;
}

void vm_serial_input_join(struct tvm_vm *vm)
{
	if (vm->input_started) {
		eventfd_write(vm->input_stop_fd, 1);
		pthread_join(vm->input_thread, NULL);
		vm->input_started = false;
	}
}
