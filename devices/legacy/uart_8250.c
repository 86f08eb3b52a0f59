#include "devices/legacy/uart_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RBR_THR = 0, IER = 1, IIR_FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6, SCR = 7 };

#define IER_RDI 0x01  /* receive data available */
#define IER_THRI 0x02 /* transmitter holding register empty */
#define IIR_NONE 0x01
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO 0xc0 /* FIFOs enabled: marks a 16550A */
#define FCR_ENABLE 0x01
#define FCR_CLEAR_RX 0x02
#define LCR_DLAB 0x80
#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MCR_LOOP 0x10
#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_DCD 0x80

void uart_8250_init(struct uart_8250 *u, int out_fd, struct irq_line irq)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	u->out_fd = out_fd;
	u->irq = irq;
	u->mcr = 0x08; /* OUT2: lets the PC's interrupt through */
	u->dll = 12;   /* 9600 baud */
}

void uart_8250_destroy(struct uart_8250 *u)
{
	pthread_mutex_destroy(&u->lock);
}

int uart_8250_open(struct uart_8250 **out, const struct uart_8250_opts *o, struct tvm_err *e)
{
	struct uart_8250 *u = malloc(sizeof(*u));

	*out = NULL;
	if (!u)
		return tvm_errf(e, ENOMEM, "serial: out of memory");
	uart_8250_init(u, o->out_fd, o->irq);
	u->on_first_byte = o->on_first_byte;
	u->cb_ctx = o->cb_ctx;
	*out = u;
	return 0;
}

void uart_8250_close(struct uart_8250 *u)
{
	if (!u)
		return;
	uart_8250_destroy(u);
	free(u);
}

static uint8_t iir(const struct uart_8250 *u)
{
	uint8_t fifo = (u->fcr & FCR_ENABLE) ? IIR_FIFO : 0;

	if ((u->ier & IER_RDI) && u->rx_len)
		return fifo | IIR_RDI;
	if ((u->ier & IER_THRI) && u->thre_pending)
		return fifo | IIR_THRI;
	return fifo | IIR_NONE;
}

/* The line follows "an interrupt is pending"; the in-kernel PIC/IOAPIC see
 * the 0->1 edges. */
static void update_irq(struct uart_8250 *u)
{
	bool level = !(iir(u) & IIR_NONE);

	if (level != u->irq_level) {
		u->irq_level = level;
		irq_line_set(&u->irq, level);
	}
}

static void transmit(struct uart_8250 *u, uint8_t c)
{
	if (u->mcr & MCR_LOOP) {
		if (u->rx_len < UART_RX_FIFO)
			u->rx[(u->rx_head + u->rx_len++) % UART_RX_FIFO] = c;
	} else if (u->out_fd >= 0) {
		/* A console that cannot keep up loses bytes rather than stalling
		 * the vCPU; EINTR is retried. */
		while (write(u->out_fd, &c, 1) < 0 && errno == EINTR)
			;
	}
	if (!u->seen_output) {
		u->seen_output = true;
		if (u->on_first_byte)
			u->on_first_byte(u->cb_ctx);
	}
	u->thre_pending = true;
}

static uint8_t read_reg(struct uart_8250 *u, unsigned reg)
{
	uint8_t v;

	switch (reg) {
	case RBR_THR:
		if (u->lcr & LCR_DLAB)
			return u->dll;
		if (!u->rx_len)
			return 0;
		v = u->rx[u->rx_head];
		u->rx_head = (u->rx_head + 1) % UART_RX_FIFO;
		u->rx_len--;
		return v;
	case IER: return (u->lcr & LCR_DLAB) ? u->dlm : u->ier;
	case IIR_FCR:
		v = iir(u);
		/* Reading IIR acknowledges a THR-empty interrupt it reports. */
		if ((v & 0x0f) == IIR_THRI)
			u->thre_pending = false;
		return v;
	case LCR: return u->lcr;
	case MCR: return u->mcr;
	case LSR: return LSR_THRE | LSR_TEMT | (u->rx_len ? LSR_DR : 0);
	case MSR:
		if (u->mcr & MCR_LOOP) /* DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD */
			return (uint8_t)(((u->mcr & 0x01) << 5) | ((u->mcr & 0x02) << 3) | ((u->mcr & 0x04) << 4) |
					 ((u->mcr & 0x08) << 4));
		return MSR_DCD | MSR_DSR | MSR_CTS;
	default: return u->scr;
	}
}

static void write_reg(struct uart_8250 *u, unsigned reg, uint8_t v)
{
	switch (reg) {
	case RBR_THR:
		if (u->lcr & LCR_DLAB)
			u->dll = v;
		else
			transmit(u, v);
		break;
	case IER:
		if (u->lcr & LCR_DLAB) {
			u->dlm = v;
			break;
		}
		/* Enabling THRI while the transmitter is empty raises it at once,
		 * which the Linux driver relies on to start transmitting. */
		if ((v & IER_THRI) && !(u->ier & IER_THRI))
			u->thre_pending = true;
		u->ier = v & 0x0f;
		break;
	case IIR_FCR:
		if (v & FCR_CLEAR_RX)
			u->rx_len = 0;
		u->fcr = v;
		break;
	case LCR: u->lcr = v; break;
	case MCR: u->mcr = v & 0x1f; break;
	case SCR: u->scr = v; break;
	default: /* LSR and MSR are read-only */ break;
	}
}

void uart_8250_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct uart_8250 *u = opaque;

	if (off >= UART_NR_REGS || len == 0)
		return;
	pthread_mutex_lock(&u->lock);
	if (is_write) {
		write_reg(u, (unsigned)off, data[0]);
	} else {
		memset(data, 0, len);
		data[0] = read_reg(u, (unsigned)off);
	}
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
}

size_t uart_8250_push_rx(struct uart_8250 *u, const uint8_t *buf, size_t n)
{
	size_t taken = 0;

	pthread_mutex_lock(&u->lock);
	while (taken < n && u->rx_len < UART_RX_FIFO) {
		u->rx[(u->rx_head + u->rx_len) % UART_RX_FIFO] = buf[taken++];
		u->rx_len++;
	}
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
	return taken;
}

size_t uart_8250_rx_room(struct uart_8250 *u)
{
	size_t room;

	pthread_mutex_lock(&u->lock);
	room = UART_RX_FIFO - u->rx_len;
	pthread_mutex_unlock(&u->lock);
	return room;
}
