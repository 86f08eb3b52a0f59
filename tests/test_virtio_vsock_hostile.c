/* virtio-vsock against a hostile or broken guest driver, and at its
 * limits: malformed headers and chains, credit violations in both
 * directions, the connection cap, concurrent in-process connects. */
#include <check.h>
#include <pthread.h>

#include "tests/test_virtio_vsock.h"
#include "tests/test_vlog.h"
#include "tests/unit.h"

static struct tg g;

static void setup(void)
{
	tg_start(&g, true, QSZ);
}

static void teardown(void)
{
	if (g.v)
		tg_stop(&g);
}

static int open_conn(uint32_t gp, uint32_t hp, uint32_t ba)
{
	return tg_guest_connect(&g, gp, hp, ba);
}

/* Send header h (payload plen bytes of 'x') and expect an RST to
 * (gp, hp) back, nothing else. */
static void expect_rst_for(const struct virtio_vsock_hdr *h, uint32_t plen, uint32_t gp, uint32_t hp)
{
	static uint8_t pay[VSOCK_MAX_PKT + 1];
	struct tpkt r;

	memset(pay, 'x', sizeof(pay));
	tg_send_hdr(&g, h, pay, plen);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(r.dst_port, gp);
	ck_assert_uint_eq(r.src_port, hp);
	tg_rx_kick(&g);
	tg_expect_none(&g);
}

/* Each bad header on an established connection resets it: RST to the
 * guest, the host socket closed with none of the payload. */
static void expect_conn_reset(struct virtio_vsock_hdr h, uint32_t plen)
{
	static uint32_t gp = 100;
	char buf[16];
	int fd;

	gp++;
	fd = open_conn(gp, 2000, VSOCK_BUF_ALLOC);
	h.src_port = htole32(gp);
	h.dst_port = htole32(2000);
	expect_rst_for(&h, plen, gp, 2000);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0);
	close(fd);
}

START_TEST(bad_headers_reset_connection)
{
	struct virtio_vsock_hdr h = tg_hdr(VIRTIO_VSOCK_OP_RW, 0, 0, 10);

	h.type = htole16(VIRTIO_VSOCK_TYPE_SEQPACKET);
	expect_conn_reset(h, 10);
	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 0, 0, 11); /* len beyond the chain */
	expect_conn_reset(h, 10);
	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 0, 0, 0xffffffff);
	expect_conn_reset(h, 10);
	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 0, 0, VSOCK_MAX_PKT + 1); /* present, but over the cap */
	expect_conn_reset(h, VSOCK_MAX_PKT + 1);
	h = tg_hdr(99, 0, 0, 0);
	expect_conn_reset(h, 0);
	h = tg_hdr(VIRTIO_VSOCK_OP_INVALID, 0, 0, 0);
	expect_conn_reset(h, 0);
	h = tg_hdr(VIRTIO_VSOCK_OP_REQUEST, 0, 0, 0); /* again, on an open connection */
	expect_conn_reset(h, 0);
	h = tg_hdr(VIRTIO_VSOCK_OP_RESPONSE, 0, 0, 0); /* the guest connected, not us */
	expect_conn_reset(h, 0);
}
END_TEST

START_TEST(unknown_connection_gets_rst)
{
	static const uint16_t ops[] = { VIRTIO_VSOCK_OP_RW,
					VIRTIO_VSOCK_OP_RESPONSE,
					VIRTIO_VSOCK_OP_SHUTDOWN,
					VIRTIO_VSOCK_OP_CREDIT_UPDATE,
					VIRTIO_VSOCK_OP_CREDIT_REQUEST,
					42 };

	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct virtio_vsock_hdr h = tg_hdr(ops[i], 4000 + i, 4444, ops[i] == VIRTIO_VSOCK_OP_RW ? 3 : 0);
		expect_rst_for(&h, ops[i] == VIRTIO_VSOCK_OP_RW ? 3 : 0, 4000 + i, 4444);
	}
	{
		struct virtio_vsock_hdr h = tg_hdr(VIRTIO_VSOCK_OP_RW, 4100, 4444, 0);
		h.type = htole16(7);
		expect_rst_for(&h, 0, 4100, 4444);
	}
	/* No RST for an RST. */
	tg_send(&g, VIRTIO_VSOCK_OP_RST, 4200, 4444, NULL, 0);
	tg_expect_none(&g);
}
END_TEST

/* Wrong CIDs: dropped without a word, the connection they name goes on. */
START_TEST(wrong_cids_dropped)
{
	struct virtio_vsock_hdr h;
	char buf[16];
	int fd = open_conn(300, 3000, VSOCK_BUF_ALLOC);

	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 300, 3000, 3);
	h.src_cid = htole64(GUEST_CID + 1);
	tg_send_hdr(&g, &h, "bad", 3);
	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 300, 3000, 3);
	h.src_cid = htole64(GUEST_CID | (1ull << 32)); /* same low 32 bits */
	tg_send_hdr(&g, &h, "bad", 3);
	h = tg_hdr(VIRTIO_VSOCK_OP_RW, 300, 3000, 3);
	h.dst_cid = htole64(1);
	tg_send_hdr(&g, &h, "bad", 3);
	h = tg_hdr(VIRTIO_VSOCK_OP_RST, 300, 3000, 0);
	h.dst_cid = htole64(GUEST_CID);
	tg_send_hdr(&g, &h, NULL, 0);
	tg_expect_none(&g);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), -EAGAIN);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 300, 3000, "good", 4);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 4);
	ck_assert(memcmp(buf, "good", 4) == 0);
	close(fd);
}
END_TEST

/* Chains without a whole readable header are completed and ignored. */
START_TEST(malformed_chains)
{
	struct virtio_vsock_hdr h = tg_hdr(VIRTIO_VSOCK_OP_REQUEST, 1, 2, 0);
	uint32_t id, len;

	memcpy(td_ptr(&g.d, TX_BUFS), &h, HDR);
	td_vq_desc(&g.d, &g.tx, 0, TX_BUFS, HDR - 1, 0, 0);              /* short header */
	td_vq_desc(&g.d, &g.tx, 1, TX_BUFS, HDR, VRING_DESC_F_WRITE, 0); /* writable only */
	td_vq_desc(&g.d, &g.tx, 2, TX_BUFS, 0, 0, 0);                    /* empty */
	for (uint16_t i = 0; i < 3; i++)
		td_vq_post(&g.d, &g.tx, i);
	virtio_mmio_notify(&g.t, VSOCK_TXQ);
	for (uint16_t i = 0; i < 3; i++) {
		ck_assert(td_vq_take(&g.d, &g.tx, &id, &len));
		ck_assert_uint_eq(id, i);
		ck_assert_uint_eq(len, 0);
	}
	tg_expect_none(&g);
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
}
END_TEST

/* A head outside the ring breaks the queue: NEEDS_RESET, one log line
 * naming the device, the queue and the reason, counted once. */
START_TEST(broken_queue_needs_reset)
{
	struct tlog l;

	tlog_open(&l);
	virtio_mmio_set_log(&g.t, "virtio-vsock", tlog_line, &l);
	td_vq_post(&g.d, &g.tx, QSZ + 5);
	virtio_mmio_notify(&g.t, VSOCK_TXQ);
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_str_eq(tlog_read(&l),
			 "tinyvmm: virtio-vsock: device needs reset: queue 1: the driver broke the ring format\n");
	ck_assert_uint_eq(virtio_mmio_needs_resets(&g.t), 1);
	/* Notified again, and the other queues run: nothing more logged. */
	virtio_mmio_notify(&g.t, VSOCK_TXQ);
	virtio_mmio_notify(&g.t, VSOCK_RXQ);
	ck_assert_str_eq(tlog_read(&l), "");
	ck_assert_uint_eq(virtio_mmio_needs_resets(&g.t), 1);
	tlog_close(&l);
}
END_TEST

/* rx buffers too small for a header are given back empty; the packet
 * goes into the next one. */
START_TEST(tiny_rx_buffers)
{
	uint32_t id, len;
	struct tpkt r;

	tg_stop(&g);
	tg_start(&g, true, 0);
	td_vq_desc(&g.d, &g.rx, 0, RX_BUFS, HDR - 1, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, 0);
	td_vq_desc(&g.d, &g.rx, 1, RX_BUFS, 8, 0, 0); /* readable only */
	td_vq_post(&g.d, &g.rx, 1);
	tg_post_rx(&g, 2);
	virtio_mmio_notify(&g.t, VSOCK_RXQ);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 1, 2, NULL, 0);
	ck_assert(td_vq_take(&g.d, &g.rx, &id, &len));
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, 0);
	ck_assert(td_vq_take(&g.d, &g.rx, &id, &len));
	ck_assert_uint_eq(id, 1);
	ck_assert_uint_eq(len, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
}
END_TEST

/* Replies owed with no rx buffer wait; RSTs for unknown connections are
 * bounded (the rest dropped), never queued without limit. */
START_TEST(rst_backlog_bounded)
{
	struct tpkt r;
	int n = 0;

	tg_stop(&g);
	tg_start(&g, true, 0);
	for (uint32_t i = 0; i < 200; i++)
		tg_send(&g, VIRTIO_VSOCK_OP_RW, i, 1, NULL, 0);
	for (unsigned i = 0; i < QSZ; i++)
		tg_post_rx(&g, i);
	tg_rx_kick(&g);
	while (tg_recv(&g, &r)) {
		ck_assert_uint_eq(r.op, VIRTIO_VSOCK_OP_RST);
		ck_assert_uint_eq(r.dst_port, (uint32_t)n);
		n++;
	}
	ck_assert_int_eq(n, 64); /* VSOCK_RST_RING */
}
END_TEST

/* A guest that sends beyond the credit it was given is reset; what the
 * device holds for the host stays within VSOCK_BUF_ALLOC. No rx buffer
 * after the RESPONSE, so no credit update can reach the guest: exactly
 * VSOCK_BUF_ALLOC bytes are allowed. */
START_TEST(guest_ignores_credit)
{
	static uint8_t pay[VSOCK_MAX_PKT];
	struct vsock_stats s;
	struct tpkt r;
	char p[128];
	int l, fd;

	tg_stop(&g);
	tg_start(&g, true, 1);
	snprintf(p, sizeof(p), "%s_%u", g.path, 5);
	l = unix_listen(p);
	tg_send(&g, VIRTIO_VSOCK_OP_REQUEST, 50, 5, NULL, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RESPONSE);
	g.rx.avail_idx--; /* tg_recv re-posted the buffer: take it back */
	td_put16(&g.d, g.rx.avail + 2, g.rx.avail_idx);
	fd = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	close(l);
	memset(pay, 'c', sizeof(pay));
	for (unsigned i = 0; i < VSOCK_BUF_ALLOC / VSOCK_MAX_PKT; i++) {
		tg_send(&g, VIRTIO_VSOCK_OP_RW, 50, 5, pay, VSOCK_MAX_PKT);
		virtio_vsock_stats(g.v, &s);
		ck_assert_uint_le(s.buffered, VSOCK_BUF_ALLOC);
	}
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 1);
	ck_assert_uint_gt(s.buffered, 0);               /* the host socket took only part */
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 50, 5, pay, 1); /* one byte too many */
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.buffered, 0);
	ck_assert_uint_eq(s.buffer_mem, 0);
	/* The host socket is closed: what it got, then EOF. */
	{
		long total = 0, n;
		static char buf[65536];
		while ((n = read_now(fd, buf, sizeof(buf))) > 0)
			total += n;
		ck_assert_int_eq(n, 0);
		ck_assert_int_le(total, VSOCK_BUF_ALLOC);
	}
	tg_post_rx(&g, 0);
	tg_rx_kick(&g);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(r.dst_port, 50);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
	close(fd);
}
END_TEST

/* A guest honouring credit moves any amount: the device sends credit
 * updates as the host drains, and never resets. */
START_TEST(guest_follows_credit)
{
	static uint8_t pay[VSOCK_MAX_PKT];
	uint64_t sent = 0, got = 0, total = 4u << 20;
	uint32_t peer_fwd = 0, updates = 0;
	static char buf[1 << 16];
	struct tpkt r;
	int fd = open_conn(60, 6, VSOCK_BUF_ALLOC);

	while (got < total) {
		uint32_t credit = VSOCK_BUF_ALLOC - (uint32_t)(sent - peer_fwd);
		uint32_t n = credit < VSOCK_MAX_PKT ? credit : VSOCK_MAX_PKT;
		long k;

		if (n > total - sent)
			n = (uint32_t)(total - sent);
		if (n) {
			for (uint32_t i = 0; i < n; i++)
				pay[i] = (uint8_t)((sent + i) * 7);
			tg_send(&g, VIRTIO_VSOCK_OP_RW, 60, 6, pay, n);
			sent += n;
		}
		while ((k = read_now(fd, buf, sizeof(buf))) > 0) {
			long bad = -1;

			/* One assertion per read: check logs every ck_assert. */
			for (long i = 0; i < k && bad < 0; i++)
				if ((uint8_t)buf[i] != (uint8_t)((got + (uint64_t)i) * 7))
					bad = i;
			ck_assert_msg(bad < 0, "byte %llu wrong", (unsigned long long)(got + (uint64_t)bad));
			got += (uint64_t)k;
		}
		tw_settle(&g.w);
		while (tg_recv(&g, &r)) {
			ck_assert_uint_eq(r.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
			ck_assert_uint_eq(r.buf_alloc, VSOCK_BUF_ALLOC);
			peer_fwd = r.fwd_cnt;
			updates++;
		}
		tg_rx_kick(&g);
		ck_assert_msg(n || k != -EAGAIN || got < sent, "stalled at %llu", (unsigned long long)got);
	}
	ck_assert_uint_eq(got, total);
	ck_assert_uint_gt(updates, 0);
	close(fd);
}
END_TEST

/* The host writes far more than the guest's credit: the device reads no
 * more than the credit, stops watching the socket, and goes on when the
 * guest reports progress. */
START_TEST(host_beyond_guest_credit)
{
	static uint8_t big[100000];
	uint32_t got = 0, ba = 8192;
	struct tpkt r;
	uint8_t acc[2 * 8192];
	int fd = open_conn(70, 7, ba);
	ssize_t w;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13);
	w = write(fd, big, sizeof(big));
	ck_assert_int_gt(w, 2 * ba);
	tw_settle(&g.w);
	while (tg_recv(&g, &r)) {
		ck_assert_uint_eq(r.op, VIRTIO_VSOCK_OP_RW);
		ck_assert_uint_le(r.len, RXB - HDR);
		ck_assert_uint_le(got + r.len, ba); /* never beyond the credit */
		memcpy(acc + got, r.data, r.len);
		got += r.len;
	}
	tg_rx_kick(&g);
	tg_expect_none(&g);
	ck_assert_uint_eq(got, ba);
	/* Out of credit, the device's socket is not watched at all: left
	 * are the device's eventfd and the hybrid listener. */
	ck_assert_int_eq(g.w.n, 2);
	/* The guest consumed it all: credit for another 8192. */
	tg_send_credit(&g, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 70, 7, ba, ba);
	while (tg_recv(&g, &r)) {
		ck_assert_uint_le(got + r.len, sizeof(acc));
		memcpy(acc + got, r.data, r.len);
		got += r.len;
	}
	ck_assert_uint_eq(got, 2 * ba);
	ck_assert(memcmp(acc, big, got) == 0); /* in order, nothing lost */
	tg_rx_kick(&g);
	tg_expect_none(&g);
	close(fd);
}
END_TEST

START_TEST(credit_request_answered)
{
	static uint8_t pay[1000];
	struct tpkt r;
	char buf[1000];
	int fd = open_conn(80, 8, VSOCK_BUF_ALLOC);

	tg_send(&g, VIRTIO_VSOCK_OP_RW, 80, 8, pay, sizeof(pay));
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 1000);
	tg_expect_none(&g); /* plenty of credit left: no update unasked */
	tg_send(&g, VIRTIO_VSOCK_OP_CREDIT_REQUEST, 80, 8, NULL, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(r.fwd_cnt, 1000);
	ck_assert_uint_eq(r.buf_alloc, VSOCK_BUF_ALLOC);
	ck_assert_uint_eq(r.src_port, 8);
	ck_assert_uint_eq(r.dst_port, 80);
	close(fd);
}
END_TEST

/* Host data is cut to the rx buffers' size. */
START_TEST(host_data_packetised)
{
	static uint8_t big[10000];
	uint32_t lens[3] = { RXB - HDR, RXB - HDR, 10000 - 2 * (RXB - HDR) };
	struct tpkt r;
	int fd = open_conn(90, 9, VSOCK_BUF_ALLOC);

	write_all(fd, big, sizeof(big));
	tw_settle(&g.w);
	for (int i = 0; i < 3; i++) {
		tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
		ck_assert_uint_eq(r.len, lens[i]);
	}
	tg_expect_none(&g);
	close(fd);
}
END_TEST

START_TEST(connection_cap)
{
	int fds[VSOCK_MAX_CONNS], fd, l;
	bool seen[VSOCK_MAX_CONNS] = { false };
	struct vsock_stats s;
	struct tpkt r;
	char p[128], b;

	for (int i = 0; i < VSOCK_MAX_CONNS; i++)
		ck_assert_int_eq(virtio_vsock_connect(g.v, 10, &fds[i], NULL), 0);
	ck_assert_int_eq(virtio_vsock_connect(g.v, 10, &fd, NULL), -EAGAIN);
	ck_assert_int_eq(fd, -1);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, VSOCK_MAX_CONNS);
	/* A hybrid client is closed at once. */
	fd = unix_connect(g.path);
	tw_settle(&g.w);
	ck_assert_int_eq(read(fd, &b, 1), 0);
	close(fd);
	/* Every REQUEST reaches the guest as rx buffers come back. */
	for (int n = 0; n < VSOCK_MAX_CONNS;) {
		if (tg_recv(&g, &r)) {
			ck_assert_uint_eq(r.op, VIRTIO_VSOCK_OP_REQUEST);
			ck_assert_uint_lt(r.src_port - HOST_PORT0, VSOCK_MAX_CONNS);
			ck_assert(!seen[r.src_port - HOST_PORT0]); /* each once */
			seen[r.src_port - HOST_PORT0] = true;
			n++;
		} else {
			tg_rx_kick(&g);
		}
	}
	tg_rx_kick(&g);
	tg_expect_none(&g);
	/* A guest connection is refused. */
	snprintf(p, sizeof(p), "%s_%u", g.path, 11);
	l = unix_listen(p);
	tg_send(&g, VIRTIO_VSOCK_OP_REQUEST, 1, 11, NULL, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(r.dst_port, 1);
	ck_assert_uint_eq(r.src_port, 11);
	/* One refused: room again. */
	tg_send(&g, VIRTIO_VSOCK_OP_RST, 10, HOST_PORT0, NULL, 0);
	ck_assert_int_eq(read(fds[0], &b, 1), 0);
	ck_assert_int_eq(virtio_vsock_connect(g.v, 10, &fd, NULL), 0);
	close(fd);
	close(l);
	for (int i = 0; i < VSOCK_MAX_CONNS; i++)
		close(fds[i]);
}
END_TEST

/* ---- hybrid clients that never finish their CONNECT line ---- */

/* A local client that connects and sends a line without its newline. */
static int half_open(void)
{
	int fd = unix_connect(g.path);

	write_all(fd, "CONNECT", 7);
	set_nonblock(fd);
	return fd;
}

/* Half-open clients in every slot: each newcomer (hybrid or in process)
 * takes the slot of the oldest of them instead of being closed. */
START_TEST(half_open_clients_evicted_oldest_first)
{
	int fds[VSOCK_MAX_CONNS], fd;
	struct vsock_stats s;
	struct tpkt r;
	uint32_t hp;
	char b;

	for (int i = 0; i < VSOCK_MAX_CONNS; i++) {
		fds[i] = half_open();
		tw_settle(&g.w);
	}
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, VSOCK_MAX_CONNS);
	tg_expect_none(&g);
	/* A normal client gets through (tg_host_connect checks REQUEST, OK)... */
	fd = tg_host_connect(&g, 1024, &hp);
	/* ...in the slot of the oldest, closed; the next one still waits. */
	ck_assert_int_eq(read_now(fds[0], &b, 1), 0);
	ck_assert_int_eq(read_now(fds[1], &b, 1), -EAGAIN);
	close(fd);
	/* So does an in-process connection. */
	ck_assert_int_eq(virtio_vsock_connect(g.v, 1024, &fd, NULL), 0);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_int_eq(read_now(fds[1], &b, 1), 0);
	ck_assert_int_eq(read_now(fds[2], &b, 1), -EAGAIN);
	close(fd);
	for (int i = 0; i < VSOCK_MAX_CONNS; i++)
		close(fds[i]);
}
END_TEST

/* Half-open clients are closed at their deadline (20 ms here); the timer
 * is unwatched once none is left, and clients connect as before. */
START_TEST(half_open_clients_time_out)
{
	int fds[16], fd;
	struct vsock_stats s;
	uint32_t hp;
	char b;

	tg_stop(&g);
	tg_start_opts(&g, true, QSZ, 20);
	for (int i = 0; i < 16; i++)
		fds[i] = half_open();
	/* No wall-clock assert: wait (up to a minute) until each has seen EOF. */
	for (int round = 0, closed = 0; closed < 16; round++) {
		ck_assert_msg(round < 600, "%d of 16 half-open clients closed", closed);
		tw_round(&g.w, 100);
		for (int i = 0; i < 16; i++)
			if (fds[i] >= 0 && read_now(fds[i], &b, 1) == 0) {
				close(fds[i]);
				fds[i] = -1;
				closed++;
			}
	}
	tw_settle(&g.w);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
	ck_assert_int_eq(g.w.n, 2); /* eventfd, listener: no timer while idle */
	tg_expect_none(&g);
	fd = tg_host_connect(&g, 1024, &hp);
	close(fd);
}
END_TEST

/* virtio_vsock_connect from another thread while the guest runs. */
static void *connector(void *arg)
{
	int *refused = arg;

	for (int i = 0; i < 100; i++) {
		char b;
		int fd;

		if (virtio_vsock_connect(g.v, 20, &fd, NULL) < 0)
			continue;
		if (read(fd, &b, 1) == 0)
			__atomic_fetch_add(refused, 1, __ATOMIC_RELAXED);
		close(fd);
	}
	return NULL;
}

START_TEST(connect_from_thread)
{
	int refused = 0, answered = 0;
	pthread_t th;
	struct tpkt r;

	ck_assert_int_eq(pthread_create(&th, NULL, connector, &refused), 0);
	while (answered < 100) {
		if (!tg_recv(&g, &r)) {
			tg_rx_kick(&g);
			continue;
		}
		ck_assert_uint_eq(r.op, VIRTIO_VSOCK_OP_REQUEST);
		tg_send(&g, VIRTIO_VSOCK_OP_RST, r.dst_port, r.src_port, NULL, 0);
		answered++;
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(refused, 100);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("virtio_vsock_hostile");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, bad_headers_reset_connection);
	tcase_add_test(tc, unknown_connection_gets_rst);
	tcase_add_test(tc, wrong_cids_dropped);
	tcase_add_test(tc, malformed_chains);
	tcase_add_test(tc, broken_queue_needs_reset);
	tcase_add_test(tc, tiny_rx_buffers);
	tcase_add_test(tc, rst_backlog_bounded);
	tcase_add_test(tc, guest_ignores_credit);
	tcase_add_test(tc, guest_follows_credit);
	tcase_add_test(tc, host_beyond_guest_credit);
	tcase_add_test(tc, credit_request_answered);
	tcase_add_test(tc, host_data_packetised);
	tcase_add_test(tc, connection_cap);
	tcase_add_test(tc, half_open_clients_evicted_oldest_first);
	tcase_add_test(tc, half_open_clients_time_out);
	tcase_add_test(tc, connect_from_thread);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
