/* A 16550A-compatible UART (8250 family), enough for Linux's 8250 driver
 * with console=ttyS0: divisor latch, IER/IIR/FCR/LCR/MCR/LSR/MSR/SCR,
 * a receive FIFO, THR-empty and receive-data interrupts, loopback bits.
 * Transmit is immediate: every THR write goes to out_fd at once.
 *
 * Register map: National Semiconductor PC16550D datasheet. COM1 is ports
 * 0x3f8..0x3ff, IRQ 4.
 */
#ifndef TVM_UART_8250_H
#define TVM_UART_8250_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/legacy/irq.h"
#include "vmm/core/err.h"

#define UART_COM1_PORT 0x3f8
#define UART_COM1_IRQ 4
#define UART_NR_REGS 8
#define UART_RX_FIFO 64 /* bytes buffered for the guest; more input waits */

struct uart_8250; /* devices/legacy/uart_impl.h */

struct uart_8250_opts {
	int out_fd;                       /* transmitted bytes go here (borrowed); -1: dropped */
	struct irq_line irq;              /* the interrupt line (COM1: UART_COM1_IRQ) */
	void (*on_first_byte)(void *ctx); /* NULL, or called once on the first THR write */
	void *cb_ctx;
};

/* Build a UART with its registers at their power-on values. Returns 0 and
 * *out (free with uart_8250_close), or -ENOMEM with e set. */
int uart_8250_open(struct uart_8250 **out, const struct uart_8250_opts *o, struct tvm_err *e);
/* Free u (NULL: nothing). No handler may run any more. */
void uart_8250_close(struct uart_8250 *u);

/* Bus handler (vmm/kvm/bus.h bus_io_fn) for the 8 registers; accesses wider than
 * a byte use the first byte. */
void uart_8250_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

/* Queue host input for the guest. Returns how many bytes were taken (fewer
 * than n when the receive FIFO is full). */
size_t uart_8250_push_rx(struct uart_8250 *u, const uint8_t *buf, size_t n);

/* Free space in the receive FIFO, in bytes. */
size_t uart_8250_rx_room(struct uart_8250 *u);

/* Snapshot (devices/legacy/uart_persist.c): the registers a snapshot
 * keeps (the receive FIFO is host input and is not kept). irq_level is the
 * line level the irqchip state already holds. */
struct uart_8250_regs {
	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
	uint8_t thre_pending, irq_level; /* 0 or 1 */
};

/* Save hook: u's registers into r. */
void uart_8250_save(struct uart_8250 *u, struct uart_8250_regs *r);
/* Restore hook: load r (values taken as bytes; flags normalised to 0/1)
 * without touching the interrupt line. */
void uart_8250_restore(struct uart_8250 *u, const struct uart_8250_regs *r);

/* Encoded registers: ier, lcr, mcr, scr, dll, dlm, fcr, thre_pending,
 * irq_level, one byte each. */
#define UART_8250_REGS_LEN 9
void uart_8250_regs_encode(const struct uart_8250_regs *r, uint8_t out[UART_8250_REGS_LEN]);
/* Decode the len bytes at p into r. Returns 0, or -EINVAL (not
 * UART_8250_REGS_LEN bytes, a flag other than 0 or 1) with r untouched. */
int uart_8250_regs_decode(const uint8_t *p, size_t len, struct uart_8250_regs *r);

#endif
