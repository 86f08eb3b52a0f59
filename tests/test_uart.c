#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "devices/legacy/uart_impl.h"
#include "tests/unit.h"

static int levels[64], nlevels;

static void record_irq(void *ctx, unsigned gsi, int level)
{
	(void)ctx;
	ck_assert_uint_eq(gsi, UART_COM1_IRQ);
	if (nlevels < 64)
		levels[nlevels++] = level;
}

static struct uart_8250 u;
static int pipefd[2];

static void setup(void)
{
	nlevels = 0;
	ck_assert_int_eq(pipe2(pipefd, O_NONBLOCK), 0);
	uart_8250_init(&u, pipefd[1], (struct irq_line){ .set = record_irq, .gsi = UART_COM1_IRQ });
}

static void teardown(void)
{
	uart_8250_destroy(&u);
	close(pipefd[0]);
	close(pipefd[1]);
}

static uint8_t rd(unsigned reg)
{
	uint8_t v = 0xaa;
	uart_8250_io(&u, reg, &v, 1, false);
	return v;
}

static void wr(unsigned reg, uint8_t v)
{
	uart_8250_io(&u, reg, &v, 1, true);
}

START_TEST(transmit_goes_to_fd)
{
	char buf[8] = { 0 };

	wr(0, 'h');
	wr(0, 'i');
	ck_assert_int_eq(read(pipefd[0], buf, sizeof(buf)), 2);
	ck_assert_str_eq(buf, "hi");
	/* Transmitter always empty. */
	ck_assert_uint_eq(rd(5) & 0x60, 0x60);
	/* No interrupt enabled: the line never rose. */
	ck_assert_int_eq(nlevels, 0);
}
END_TEST

START_TEST(divisor_latch)
{
	char c;

	wr(3, 0x80); /* DLAB */
	wr(0, 0x01);
	wr(1, 0x02);
	ck_assert_uint_eq(rd(0), 0x01);
	ck_assert_uint_eq(rd(1), 0x02);
	wr(3, 0x03);
	ck_assert_uint_eq(rd(1), 0);                  /* IER untouched by the divisor writes */
	ck_assert_int_eq(read(pipefd[0], &c, 1), -1); /* nothing was transmitted */
}
END_TEST

START_TEST(thr_empty_interrupt)
{
	wr(1, 0x02); /* enable THRI while empty: raised at once */
	ck_assert_int_eq(nlevels, 1);
	ck_assert_int_eq(levels[0], 1);
	ck_assert_uint_eq(rd(2) & 0x0f, 0x02);
	ck_assert_int_eq(levels[nlevels - 1], 0); /* reading IIR acknowledged it */
	ck_assert_uint_eq(rd(2) & 0x0f, 0x01);
	wr(0, 'x'); /* the byte leaves at once and THR is empty again */
	ck_assert_int_eq(levels[nlevels - 1], 1);
	wr(1, 0); /* disabling drops the line */
	ck_assert_int_eq(levels[nlevels - 1], 0);
}
END_TEST

START_TEST(receive_and_fifo_limit)
{
	uint8_t big[UART_RX_FIFO + 10];

	memset(big, 'z', sizeof(big));
	ck_assert_uint_eq(rd(5) & 0x01, 0);
	wr(1, 0x01); /* receive interrupt */
	ck_assert_uint_eq(uart_8250_push_rx(&u, (const uint8_t *)"ab", 2), 2);
	ck_assert_int_eq(levels[nlevels - 1], 1);
	ck_assert_uint_eq(rd(2) & 0x0f, 0x04);
	ck_assert_uint_eq(rd(5) & 0x01, 1);
	ck_assert_uint_eq(rd(0), 'a');
	ck_assert_uint_eq(rd(0), 'b');
	ck_assert_uint_eq(rd(5) & 0x01, 0);
	ck_assert_int_eq(levels[nlevels - 1], 0);
	ck_assert_uint_eq(uart_8250_push_rx(&u, big, sizeof(big)), UART_RX_FIFO);
	ck_assert_uint_eq(uart_8250_rx_room(&u), 0);
	wr(2, 0x03); /* FCR: enable + clear receive FIFO */
	ck_assert_uint_eq(uart_8250_rx_room(&u), UART_RX_FIFO);
	ck_assert_uint_eq(rd(2) & 0xc0, 0xc0); /* FIFOs reported: a 16550A */
}
END_TEST

START_TEST(loopback)
{
	char c;

	wr(4, 0x10 | 0x03); /* loop + DTR + RTS */
	ck_assert_uint_eq(rd(6) & 0x30, 0x30);
	wr(0, 'L');
	ck_assert_int_eq(read(pipefd[0], &c, 1), -1); /* not on the wire */
	ck_assert_uint_eq(rd(5) & 0x01, 1);
	ck_assert_uint_eq(rd(0), 'L');
	wr(4, 0x08);
	ck_assert_uint_eq(rd(6), 0xb0);
	ck_assert_uint_eq(rd(7), 0);
	wr(7, 0x5c);
	ck_assert_uint_eq(rd(7), 0x5c);
}
END_TEST

START_TEST(out_of_range_offset_ignored)
{
	uint8_t v = 0x77;

	uart_8250_io(&u, 8, &v, 1, false);
	ck_assert_uint_eq(v, 0x77);
	uart_8250_io(&u, UINT64_MAX, &v, 1, true);
	ck_assert_int_eq(nlevels, 0);
}
END_TEST

/* The snapshot state: registers saved, encoded, decoded and restored into
 * another UART; malformed encodings refused. */
START_TEST(snapshot_state)
{
	struct uart_8250_regs r, back;
	uint8_t b[UART_8250_REGS_LEN], bad[UART_8250_REGS_LEN];
	struct uart_8250 *u2;

	wr(3, 0x80);
	wr(0, 0x01); /* divisor 0x0201 */
	wr(1, 0x02);
	wr(3, 0x03);
	wr(1, 0x02); /* THRI: thre_pending, line up */
	wr(7, 0x42);
	uart_8250_save(&u, &r);
	uart_8250_regs_encode(&r, b);
	ck_assert_mem_eq(b, ((uint8_t[]){ 0x02, 0x03, 0x08, 0x42, 0x01, 0x02, 0x00, 1, 1 }), sizeof(b));
	ck_assert_int_eq(uart_8250_regs_decode(b, sizeof(b), &back), 0);
	ck_assert_mem_eq(&back, &r, sizeof(r));
	ck_assert_int_eq(uart_8250_regs_decode(b, sizeof(b) - 1, &back), -EINVAL);
	memcpy(bad, b, sizeof(b));
	bad[8] = 2;
	ck_assert_int_eq(uart_8250_regs_decode(bad, sizeof(bad), &back), -EINVAL);

	ck_assert_int_eq(uart_8250_open(&u2, &(struct uart_8250_opts){ .out_fd = -1 }, NULL), 0);
	uart_8250_restore(u2, &back);
	uart_8250_save(u2, &r);
	ck_assert_mem_eq(&back, &r, sizeof(r));
	uart_8250_close(u2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("uart_8250");
	TCase *tc = tcase_create("uart");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, transmit_goes_to_fd);
	tcase_add_test(tc, divisor_latch);
	tcase_add_test(tc, thr_empty_interrupt);
	tcase_add_test(tc, receive_and_fifo_limit);
	tcase_add_test(tc, loopback);
	tcase_add_test(tc, out_of_range_offset_ignored);
	tcase_add_test(tc, snapshot_state);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
