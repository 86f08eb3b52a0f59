/* The legacy PC devices on the port-I/O bus: COM1, the i8042 (its reset
 * line ends the VM) and a sink for the POST, DMA page and CMOS ports. */
#include <string.h>

#include "vmm/vm_impl.h"

static void on_guest_reset(void *ctx)
{
	vm_end(ctx, TVM_EXIT_RESET, "guest reset");
}

static void on_first_serial_byte(void *ctx)
{
	struct tvm_vm *vm = ctx;

	metrics_mark(&vm->metrics, MARK_FIRST_SERIAL_BYTE);
}

static void irq_set(void *ctx, unsigned gsi, int level)
{
	struct tvm_vm *vm = ctx;

	kvm_irq_line(&vm->kvm, gsi, level);
}

/* Port 0x80 is the PC's POST/delay port (Linux writes it to pause); 0x81..0x8f
 * are the DMA page registers, which Linux reads once at boot. No DMA here. */
static void io_sink(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	(void)opaque;
	(void)off;
	if (!is_write)
		memset(data, 0xff, len);
}

int vm_add_pio(struct tvm_vm *vm, struct tvm_err *e)
{
	const struct uart_8250_opts com1 = {
		.out_fd = vm->cfg.serial_out_fd,
		.irq = { .set = irq_set, .ctx = vm, .gsi = UART_COM1_IRQ },
		.on_first_byte = on_first_serial_byte,
		.cb_ctx = vm,
	};
	int r = uart_8250_open(&vm->uart, &com1, e);

	if (!r)
		r = i8042_open(&vm->kbd, on_guest_reset, vm, e);
	if (!r)
		r = bus_register(&vm->pio, UART_COM1_PORT, UART_NR_REGS, "serial COM1", uart_8250_io, vm->uart, e);
	if (!r)
		r = bus_register(&vm->pio, I8042_DATA_PORT, 1, "i8042 data", i8042_data_io, vm->kbd, e);
	if (!r)
		r = bus_register(&vm->pio, I8042_CMD_PORT, 1, "i8042 command", i8042_cmd_io, vm->kbd, e);
	if (!r)
		r = bus_register(&vm->pio, 0x80, 0x10, "POST port and DMA page registers", io_sink, NULL, e);
	/* No CMOS/RTC either: Linux writes the CMOS shutdown byte through the
	 * index and data ports when it wakes another CPU (warm-reset vector). */
	if (!r)
		r = bus_register(&vm->pio, 0x70, 0x2, "CMOS index and data", io_sink, NULL, e);
	return r;
}
