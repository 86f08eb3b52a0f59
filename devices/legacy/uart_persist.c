/* The UART's snapshot state (uart_8250.h "Snapshot"). */
#include <errno.h>
#include <string.h>

#include "devices/legacy/uart_impl.h"

void uart_8250_save(struct uart_8250 *u, struct uart_8250_regs *r)
{
	pthread_mutex_lock(&u->lock);
	*r = (struct uart_8250_regs){ .ier = u->ier,
				      .lcr = u->lcr,
				      .mcr = u->mcr,
				      .scr = u->scr,
				      .dll = u->dll,
				      .dlm = u->dlm,
				      .fcr = u->fcr,
				      .thre_pending = u->thre_pending,
				      .irq_level = u->irq_level };
	pthread_mutex_unlock(&u->lock);
}

void uart_8250_restore(struct uart_8250 *u, const struct uart_8250_regs *r)
{
	pthread_mutex_lock(&u->lock);
	u->ier = r->ier;
	u->lcr = r->lcr;
	u->mcr = r->mcr;
	u->scr = r->scr;
	u->dll = r->dll;
	u->dlm = r->dlm;
	u->fcr = r->fcr;
	u->thre_pending = r->thre_pending != 0;
	u->irq_level = r->irq_level != 0;
	u->rx_head = u->rx_len = 0;
	pthread_mutex_unlock(&u->lock);
}

void uart_8250_regs_encode(const struct uart_8250_regs *r, uint8_t out[UART_8250_REGS_LEN])
{
	const uint8_t b[UART_8250_REGS_LEN] = { r->ier, r->lcr, r->mcr,          r->scr,      r->dll,
						r->dlm, r->fcr, r->thre_pending, r->irq_level };

	memcpy(out, b, sizeof(b));
}

int uart_8250_regs_decode(const uint8_t *p, size_t len, struct uart_8250_regs *r)
{
	if (len != UART_8250_REGS_LEN || p[7] > 1 || p[8] > 1)
		return -EINVAL;
	*r = (struct uart_8250_regs){ .ier = p[0],
				      .lcr = p[1],
				      .mcr = p[2],
				      .scr = p[3],
				      .dll = p[4],
				      .dlm = p[5],
				      .fcr = p[6],
				      .thre_pending = p[7],
				      .irq_level = p[8] };
	return 0;
}
