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

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/legacy/irq.h"

#define UART_COM1_PORT 0x3f8
#define UART_COM1_IRQ 4
#define UART_NR_REGS 8
#define UART_RX_FIFO 64 /* bytes buffered for the guest; more input waits */

struct uart_8250 {
	pthread_mutex_t lock; /* PIO from vCPU threads vs. input from the host */
	int out_fd;           /* -1: output dropped */
	struct irq_line irq;
	void (*on_first_byte)(void *ctx); /* called once on the first THR write */
	void *cb_ctx;
	bool seen_output;

	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
	bool thre_pending; /* THR-empty interrupt not yet acknowledged */
	bool irq_level;
	uint8_t rx[UART_RX_FIFO];
	size_t rx_head, rx_len;
};

/* Reset registers to their power-on values. out_fd is borrowed. */
void uart_8250_init(struct uart_8250 *u, int out_fd, struct irq_line irq);
void uart_8250_destroy(struct uart_8250 *u);

/* Bus handler (vmm/bus.h bus_io_fn) for the 8 registers; accesses wider than
 * a byte use the first byte. */
void uart_8250_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

/* Queue host input for the guest. Returns how many bytes were taken (fewer
 * than n when the receive FIFO is full). */
size_t uart_8250_push_rx(struct uart_8250 *u, const uint8_t *buf, size_t n);

/* Free space in the receive FIFO, in bytes. */
size_t uart_8250_rx_room(struct uart_8250 *u);

/* The registers a snapshot keeps (the receive FIFO is host input and is
 * not kept). irq_level is the line level the irqchip state already holds. */
struct uart_8250_regs {
	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
	uint8_t thre_pending, irq_level; /* 0 or 1 */
};

void uart_8250_save(struct uart_8250 *u, struct uart_8250_regs *r);
/* Load r (values taken as bytes; flags normalised to 0/1) without touching
 * the interrupt line. */
void uart_8250_restore(struct uart_8250 *u, const struct uart_8250_regs *r);

#endif
