/* Inside the 8250 UART: its state, shared by uart_8250.c (registers,
 * FIFO) and uart_persist.c (snapshot state); tests embed one. */
#ifndef TVM_UART_IMPL_H
#define TVM_UART_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/legacy/uart_8250.h"

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

/* Set up u in place with its registers at their power-on values (what
 * uart_8250_open does for an allocated one). out_fd is borrowed. */
void uart_8250_init(struct uart_8250 *u, int out_fd, struct irq_line irq);
/* Undo uart_8250_init (u itself is the caller's). */
void uart_8250_destroy(struct uart_8250 *u);

#endif
