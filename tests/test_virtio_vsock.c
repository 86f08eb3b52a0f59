/* virtio-vsock: connections both ways over the hybrid Unix-socket backend
 * and the in-process backend, data, shutdown, reset, the event queue. The
 * guest is played through the transport (tests/test_virtio_vsock.h). */
#include <check.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tests/test_virtio_vsock.h"
#include "tests/unit.h"

static struct tg g;

static void setup_hybrid(void)
{
	tg_start(&g, true, QSZ);
}

static void teardown(void)
{
	if (g.v)
		tg_stop(&g);
}

static int guest_connect(uint32_t gp, uint32_t hp)
{
	return tg_guest_connect(&g, gp, hp, VSOCK_BUF_ALLOC);
}

static int host_connect(uint32_t gp, uint32_t *hp)
{
	return tg_host_connect(&g, gp, hp);
}

START_TEST(config_space)
{
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_DEVICE_ID), 19);
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_CONFIG), GUEST_CID);
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_CONFIG + 4), 0);
	ck_assert(td_device_features(&g.t) & 1);    /* VIRTIO_VSOCK_F_STREAM */
	ck_assert(!(td_device_features(&g.t) & 2)); /* no SEQPACKET */
}
END_TEST

START_TEST(guest_to_host_uds)
{
	char buf[64];
	struct tpkt r;
	int fd = guest_connect(5000, 1234);

	tg_send(&g, VIRTIO_VSOCK_OP_RW, 5000, 1234, "hello", 5);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 5);
	ck_assert(memcmp(buf, "hello", 5) == 0);
	write_all(fd, "world!", 6);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 6);
	ck_assert(memcmp(r.data, "world!", 6) == 0);
	ck_assert_uint_eq(r.src_port, 1234);
	ck_assert_uint_eq(r.dst_port, 5000);
	ck_assert_uint_eq(r.fwd_cnt, 5); /* "hello" went to the host */
	tg_expect_none(&g);
	close(fd);
}
END_TEST

START_TEST(guest_to_nobody)
{
	struct tpkt r;

	tg_send(&g, VIRTIO_VSOCK_OP_REQUEST, 5000, 999, NULL, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(r.src_port, 999);
	ck_assert_uint_eq(r.dst_port, 5000);
	tg_expect_none(&g);
}
END_TEST

START_TEST(host_connect_hybrid)
{
	uint32_t hp, hp2;
	char buf[64];
	struct tpkt r;
	int fd = host_connect(52, &hp), fd2;

	ck_assert_uint_eq(hp, HOST_PORT0);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 52, hp, "ping", 4);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 4);
	ck_assert(memcmp(buf, "ping", 4) == 0);
	write_all(fd, "pong", 4);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 4);
	ck_assert(memcmp(r.data, "pong", 4) == 0);
	ck_assert_uint_eq(r.dst_port, 52);
	ck_assert_uint_eq(r.src_port, hp);
	/* A second client to the same guest port gets its own host port. */
	fd2 = host_connect(52, &hp2);
	ck_assert_uint_eq(hp2, HOST_PORT0 + 1);
	close(fd);
	close(fd2);
}
END_TEST

/* Bytes the client sends right after its CONNECT line reach the guest
 * after the guest accepted, not before. */
START_TEST(host_connect_early_data)
{
	const char msg[] = "CONNECT 7\nearly bytes";
	char buf[32];
	struct tpkt r;
	int fd = unix_connect(g.path);

	write_all(fd, msg, sizeof(msg) - 1);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	tg_expect_none(&g);
	tg_send(&g, VIRTIO_VSOCK_OP_RESPONSE, 7, r.src_port, NULL, 0);
	tg_rx_kick(&g);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 11);
	ck_assert(memcmp(r.data, "early bytes", 11) == 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 14); /* "OK 1073741824\n" */
	close(fd);
}
END_TEST

START_TEST(host_connect_refused)
{
	char buf[8];
	struct tpkt r;
	int fd = unix_connect(g.path);

	write_all(fd, "CONNECT 80\n", 11);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	tg_send(&g, VIRTIO_VSOCK_OP_RST, 80, r.src_port, NULL, 0);
	set_nonblock(fd);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0); /* closed, nothing written */
	close(fd);
	tg_expect_none(&g);
}
END_TEST

static void bad_line(const char *line, size_t len)
{
	struct vsock_stats s;
	char buf[8];
	int fd = unix_connect(g.path);
	long n;

	write_all(fd, line, len);
	tw_settle(&g.w);
	set_nonblock(fd);
	/* Closed; with unread bytes left, Unix sockets say ECONNRESET. */
	n = read_now(fd, buf, sizeof(buf));
	ck_assert_msg(n == 0 || n == -ECONNRESET, "line \"%.*s\" not refused: %ld", (int)len, line, n);
	close(fd);
	tg_expect_none(&g);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
}

START_TEST(host_connect_bad_lines)
{
	char longline[64];

	bad_line("CONNECT x\n", 10);
	bad_line("CONNECT \n", 9);
	bad_line("CONNECT 12 \n", 12);
	bad_line("connect 12\n", 11);
	bad_line("CONNECT 4294967296\n", 19);
	bad_line("CONNECT 99999999999999999999\n", 29);
	bad_line("CONNECT -1\n", 11);
	memset(longline, '1', sizeof(longline));
	memcpy(longline, "CONNECT ", 8);
	bad_line(longline, sizeof(longline)); /* no newline within the cap */
	/* EOF before the newline. */
	{
		int fd = unix_connect(g.path);
		char b;
		write_all(fd, "CONNECT 5", 9);
		shutdown(fd, SHUT_WR);
		tw_settle(&g.w);
		ck_assert_int_eq(read(fd, &b, 1), 0);
		close(fd);
	}
	tg_expect_none(&g);
}
END_TEST

/* The line may come a byte at a time; the largest port works. */
START_TEST(host_connect_slow_line)
{
	const char *line = "CONNECT 4294967295\n";
	struct tpkt r;
	int fd = unix_connect(g.path);

	for (const char *c = line; *c; c++) {
		write_all(fd, c, 1);
		tw_settle(&g.w);
		if (c[1])
			tg_expect_none(&g);
	}
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, 4294967295u);
	close(fd);
}
END_TEST

/* A line already there when the client is accepted is read at once: the
 * REQUEST goes out in the same loop round, so a client that writes at once
 * never waits as a handshake (where newcomers could evict it). */
START_TEST(host_connect_line_read_at_accept)
{
	struct tpkt r;
	int fd = unix_connect(g.path);

	write_all(fd, "CONNECT 77\n", 11);
	ck_assert_int_eq(tw_round(&g.w, 0), 1); /* the listener's callback only */
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, 77);
	close(fd);
}
END_TEST

START_TEST(in_process)
{
	char buf[64];
	struct tpkt r;
	int fd;

	ck_assert_int_eq(virtio_vsock_connect(g.v, 1024, &fd, NULL), 0);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, 1024);
	ck_assert_uint_eq(r.src_port, HOST_PORT0);
	write_all(fd, "before", 6); /* buffered in the socket until accepted */
	tw_settle(&g.w);
	tg_expect_none(&g);
	tg_send(&g, VIRTIO_VSOCK_OP_RESPONSE, 1024, r.src_port, NULL, 0);
	tg_rx_kick(&g);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 6);
	ck_assert(memcmp(r.data, "before", 6) == 0);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 1024, r.src_port, "reply", 5);
	set_nonblock(fd);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 5); /* no "OK" line in process */
	ck_assert(memcmp(buf, "reply", 5) == 0);
	close(fd);
}
END_TEST

START_TEST(in_process_refused)
{
	char buf[8];
	struct tpkt r;
	int fd;

	ck_assert_int_eq(virtio_vsock_connect(g.v, 9, &fd, NULL), 0);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	tg_send(&g, VIRTIO_VSOCK_OP_RST, 9, r.src_port, NULL, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0);
	close(fd);
}
END_TEST

/* The guest half-closes first; the host still answers; then the host
 * closes and the connection ends with an RST. */
START_TEST(shutdown_guest_first)
{
	char buf[64];
	struct tpkt r;
	int fd = guest_connect(6000, 80);

	tg_send(&g, VIRTIO_VSOCK_OP_RW, 6000, 80, "GET", 3);
	{
		struct virtio_vsock_hdr h = tg_hdr(VIRTIO_VSOCK_OP_SHUTDOWN, 6000, 80, 0);
		h.flags = htole32(VIRTIO_VSOCK_SHUTDOWN_SEND);
		tg_send_hdr(&g, &h, NULL, 0);
	}
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 3);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0); /* EOF: the guest will send no more */
	write_all(fd, "200 OK", 6);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 6);
	tg_rx_kick(&g);
	close(fd);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST); /* both directions done */
	ck_assert_uint_eq(r.dst_port, 6000);
	tg_expect_none(&g);
	/* Late packets for it get an RST. */
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 6000, 80, "x", 1);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
}
END_TEST

/* The host half-closes first: the guest gets SHUTDOWN(SEND); the guest
 * closes (both flags) and the host sees EOF; the device ends with RST. */
START_TEST(shutdown_host_first)
{
	char buf[64];
	struct tpkt r;
	uint32_t hp;
	int fd = host_connect(33, &hp);
	struct virtio_vsock_hdr h = tg_hdr(VIRTIO_VSOCK_OP_SHUTDOWN, 33, hp, 0);

	write_all(fd, "last words", 10);
	shutdown(fd, SHUT_WR);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.len, 10);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_SHUTDOWN);
	ck_assert_uint_eq(r.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	tg_rx_kick(&g);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 33, hp, "ack", 3); /* the guest may still send */
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 3);
	h.flags = htole32(VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV);
	tg_send_hdr(&g, &h, NULL, 0);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0);
	close(fd);
}
END_TEST

START_TEST(guest_rst_closes_host)
{
	char buf[8];
	int fd = guest_connect(6001, 81);
	struct vsock_stats s;

	tg_send(&g, VIRTIO_VSOCK_OP_RST, 6001, 81, NULL, 0);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0);
	tg_expect_none(&g); /* no RST answers an RST */
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
	close(fd);
}
END_TEST

/* Host closing without the guest having shut down: SHUTDOWN(SEND), and a
 * guest write afterwards fails on the closed socket: RST. */
START_TEST(host_close_then_guest_writes)
{
	struct tpkt r;
	int fd = guest_connect(6002, 82);

	close(fd);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_SHUTDOWN);
	tg_rx_kick(&g);
	tg_send(&g, VIRTIO_VSOCK_OP_RW, 6002, 82, "data", 4);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
}
END_TEST

START_TEST(transport_reset)
{
	struct vsock_stats s;
	uint32_t hp, id, len, ev;
	char buf[8];
	int a = guest_connect(7000, 70), b = host_connect(71, &hp), c;

	ck_assert_int_eq(virtio_vsock_connect(g.v, 72, &c, NULL), 0);
	tw_settle(&g.w);
	virtio_vsock_transport_reset(g.v);
	ck_assert(td_vq_take(&g.d, &g.ev, &id, &len));
	ck_assert_uint_eq(len, 4);
	memcpy(&ev, td_ptr(&g.d, EV_BUFS + 16ull * id), 4);
	ck_assert_uint_eq(le32toh(ev), VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
	ck_assert(!td_vq_take(&g.d, &g.ev, &id, &len)); /* exactly one */
	ck_assert_int_eq(read_now(a, buf, sizeof(buf)), 0);
	ck_assert_int_eq(read_now(b, buf, sizeof(buf)), 0);
	ck_assert_int_eq(read(c, buf, sizeof(buf)), 0);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
	close(a);
	close(b);
	close(c);
}
END_TEST

/* The event is posted once the driver gives an event buffer. */
START_TEST(transport_reset_waits_for_buffer)
{
	uint32_t id, len;

	/* Use up the 4 event buffers. */
	for (int i = 0; i < 4; i++) {
		virtio_vsock_transport_reset(g.v);
		ck_assert(td_vq_take(&g.d, &g.ev, &id, &len));
	}
	virtio_vsock_transport_reset(g.v);
	ck_assert(!td_vq_take(&g.d, &g.ev, &id, &len));
	tg_post_ev(&g, 0);
	virtio_mmio_notify(&g.t, VSOCK_EVQ);
	ck_assert(td_vq_take(&g.d, &g.ev, &id, &len));
	ck_assert_uint_eq(len, 4);
}
END_TEST

/* Host connections made after a reset was posted reach the guest only
 * once its driver gives an event buffer back, i.e. has handled the reset,
 * which drops every connected socket: a restored guest cut the agent
 * connection of a `tinyvmm exec` that had connected at once. */
START_TEST(transport_reset_holds_new_connections)
{
	uint32_t id, len, ports[2];
	uint16_t old;
	struct tpkt r;
	char want[32], line[32];
	int c, fd;

	virtio_vsock_transport_reset(g.v);
	ck_assert(td_vq_take(&g.d, &g.ev, &id, &len));
	ck_assert_int_eq(virtio_vsock_connect(g.v, 72, &c, NULL), 0);
	fd = unix_connect(g.path);
	write_all(fd, "CONNECT 73\n", 11);
	tw_settle(&g.w);
	tg_expect_none(&g);
	virtio_mmio_notify(&g.t, VSOCK_EVQ); /* a notify without a new buffer is no answer */
	tg_expect_none(&g);
	old = g.ev.avail_idx;
	tg_post_ev(&g, id);
	/* Linux gives the buffer back with EVENT_IDX: it notifies only if asked */
	ck_assert(td_vq_needs_notify(&g.d, &g.ev, old));
	virtio_mmio_notify(&g.t, VSOCK_EVQ);
	tw_settle(&g.w);
	for (int i = 0; i < 2; i++) {
		tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
		ports[i] = r.dst_port;
		tg_send(&g, VIRTIO_VSOCK_OP_RESPONSE, r.dst_port, r.src_port, NULL, 0);
		if (r.dst_port == 73)
			snprintf(want, sizeof(want), "OK %u\n", r.src_port);
	}
	ck_assert_uint_eq(ports[0] * ports[1], 72 * 73); /* one REQUEST each */
	set_nonblock(fd);
	ck_assert_int_eq(read_now(fd, line, sizeof(line)), (long)strlen(want));
	ck_assert(memcmp(line, want, strlen(want)) == 0);
	tg_expect_none(&g);
	close(c);
	close(fd);
}
END_TEST

/* Clients that leave while their REQUEST is held behind a transport
 * reset free their slots at once, and the guest never hears of them
 * (a flood of departed clients would otherwise reach it all at once);
 * one that left after its REQUEST went gets an RST to the guest. */
START_TEST(departed_clients_free_their_slots)
{
	struct vsock_stats st;
	uint32_t id, len;
	struct tpkt r;
	int c, fd, gone;

	virtio_vsock_transport_reset(g.v);
	ck_assert(td_vq_take(&g.d, &g.ev, &id, &len));
	gone = unix_connect(g.path);
	write_all(gone, "CONNECT 74\n", 11);
	ck_assert_int_eq(virtio_vsock_connect(g.v, 75, &c, NULL), 0);
	fd = unix_connect(g.path);
	write_all(fd, "CONNECT 76\n", 11);
	tw_settle(&g.w);
	virtio_vsock_stats(g.v, &st);
	ck_assert_uint_eq(st.conns, 3);
	close(gone);
	close(c);
	tw_settle(&g.w);
	virtio_vsock_stats(g.v, &st);
	ck_assert_uint_eq(st.conns, 1);
	tg_post_ev(&g, id);
	virtio_mmio_notify(&g.t, VSOCK_EVQ);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, 76);
	tg_expect_none(&g);
	/* Its REQUEST has gone: the guest is told the client left. */
	close(fd);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(r.dst_port, 76);
	tg_expect_none(&g);
	virtio_vsock_stats(g.v, &st);
	ck_assert_uint_eq(st.conns, 0);
}
END_TEST

START_TEST(device_reset_drops_all)
{
	struct vsock_stats s;
	char buf[8];
	int fd = guest_connect(7100, 71);

	td_wr(&g.t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 0);
	virtio_vsock_stats(g.v, &s);
	ck_assert_uint_eq(s.conns, 0);
	close(fd);
}
END_TEST

/* Buffers may be any layout (spec 2.6.4): split over descriptors even
 * inside the header, on tx and on rx. */
START_TEST(any_layout)
{
	struct virtio_vsock_hdr hd = tg_hdr(VIRTIO_VSOCK_OP_RW, 8000, 90, 7);
	uint32_t id, len;
	struct tpkt r;
	char buf[64];
	uint8_t *h;
	int fd;

	tg_stop(&g);
	tg_start(&g, true, 0);
	h = td_ptr(&g.d, TX_BUFS);
	/* rx buffer 0: 20 + 4076 bytes; buffer 2: header, then data. */
	td_vq_desc(&g.d, &g.rx, 0, RX_BUFS, 20, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	td_vq_desc(&g.d, &g.rx, 1, RX_BUFS + 20, RXB - 20, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, 0);
	td_vq_desc(&g.d, &g.rx, 2, RX_BUFS + 2 * RXB, HDR, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 3);
	td_vq_desc(&g.d, &g.rx, 3, RX_BUFS + 2 * RXB + HDR, RXB - HDR, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, 2);
	fd = guest_connect(8000, 90); /* RESPONSE lands in buffer 0 */

	/* tx: 10 header bytes, then the rest of the header and the payload. */
	memcpy(h, &hd, HDR);
	memcpy(h + HDR, "layout!", 7);
	td_vq_desc(&g.d, &g.tx, 0, TX_BUFS, 10, VRING_DESC_F_NEXT, 1);
	td_vq_desc(&g.d, &g.tx, 1, TX_BUFS + 10, HDR - 10 + 7, 0, 0);
	td_vq_post(&g.d, &g.tx, 0);
	virtio_mmio_notify(&g.t, VSOCK_TXQ);
	ck_assert(td_vq_take(&g.d, &g.tx, &id, &len));
	ck_assert_int_eq(read_now(fd, buf, sizeof(buf)), 7);
	ck_assert(memcmp(buf, "layout!", 7) == 0);

	write_all(fd, "split rx", 8);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_RW);
	ck_assert_uint_eq(r.used, HDR + 8);
	ck_assert(memcmp(r.data, "split rx", 8) == 0);
	close(fd);
}
END_TEST

/* Out of fds, the listener stops being watched (rather than waking the
 * loop forever) until a connection closes. */
START_TEST(listener_out_of_fds)
{
	struct rlimit old, lim;
	struct tpkt r;
	int in, fd, spare;

	ck_assert_int_eq(virtio_vsock_connect(g.v, 5, &in, NULL), 0);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_int_eq(g.w.n, 3); /* eventfd, listener, the connection (for a hang-up) */
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	spare = dup(0);
	close(spare);
	lim = old;
	lim.rlim_cur = (rlim_t)spare + 1; /* room for one more fd: the client's */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	fd = unix_connect(g.path);
	tw_settle(&g.w); /* accept fails: EMFILE */
	ck_assert_int_eq(g.w.n, 2);
	tg_send(&g, VIRTIO_VSOCK_OP_RST, 5, r.src_port, NULL, 0); /* frees the device's end */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	write_all(fd, "CONNECT 6\n", 10);
	tw_settle(&g.w);
	tg_expect(&g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, 6);
	close(fd);
	close(in);
}
END_TEST

/* ---- the socket path: never take over a live VM's, never delete another's ---- */

/* A second device (no transport) listening at path. */
static int open_second(struct virtio_vsock **v, struct tw *w, const char *path, struct tvm_err *e)
{
	struct vsock_opts o = { .guest_cid = GUEST_CID, .uds_path = path };

	memset(w, 0, sizeof(*w));
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, w };
	return virtio_vsock_open(v, &o, e);
}

static bool is_socket(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* A path where a VM listens is refused, and that VM keeps its socket. */
START_TEST(uds_live_path_refused)
{
	struct virtio_vsock *v2 = (struct virtio_vsock *)&v2;
	struct tw w2;
	struct tvm_err e = { 0 };
	char want[200];
	uint32_t hp;
	int fd;

	ck_assert_int_eq(open_second(&v2, &w2, g.path, &e), -EADDRINUSE);
	ck_assert_ptr_null(v2);
	ck_assert_int_eq(w2.n, 0);
	snprintf(want, sizeof(want), "vsock-uds %s: address in use (another VM listens there)", g.path);
	ck_assert_str_eq(e.msg, want);
	ck_assert(is_socket(g.path));
	tw_settle(&g.w); /* the probe: a client that left before its line */
	fd = host_connect(1024, &hp);
	close(fd);
}
END_TEST

/* A socket file nobody listens on (its VM died) is replaced; the device
 * removes it when it closes. */
START_TEST(uds_stale_path_replaced)
{
	struct virtio_vsock *v2;
	struct tw w2;
	struct tvm_err e = { 0 };
	char path[160];
	struct vsock_stats s;

	snprintf(path, sizeof(path), "%s/stale.sock", g.dir);
	close(unix_listen(path)); /* the file stays, nobody listens */
	ck_assert(is_socket(path));
	ck_assert_msg(open_second(&v2, &w2, path, &e) == 0, "%s", e.msg);
	close(unix_connect(path)); /* it is the device's now */
	tw_settle(&w2);
	virtio_vsock_stats(v2, &s);
	ck_assert_uint_eq(s.conns, 0);
	virtio_vsock_close(v2);
	ck_assert_int_eq(w2.n, 0);
	ck_assert(!is_socket(path));
}
END_TEST

/* A socket file put at the path after ours (the user removed ours and
 * another VM or program listens there now) is not the device's to delete. */
START_TEST(uds_replaced_path_kept)
{
	struct virtio_vsock *v2;
	struct tw w2;
	struct tvm_err e = { 0 };
	char path[160];
	int l;

	snprintf(path, sizeof(path), "%s/other.sock", g.dir);
	ck_assert_msg(open_second(&v2, &w2, path, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(unlink(path), 0);
	l = unix_listen(path);
	virtio_vsock_close(v2);
	ck_assert(is_socket(path));
	close(unix_connect(path)); /* still the newcomer's */
	close(l);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("virtio_vsock");
	TCase *tc = tcase_create("hybrid");

	tcase_add_checked_fixture(tc, setup_hybrid, teardown);
	tcase_add_test(tc, config_space);
	tcase_add_test(tc, guest_to_host_uds);
	tcase_add_test(tc, guest_to_nobody);
	tcase_add_test(tc, host_connect_hybrid);
	tcase_add_test(tc, host_connect_early_data);
	tcase_add_test(tc, host_connect_refused);
	tcase_add_test(tc, host_connect_bad_lines);
	tcase_add_test(tc, host_connect_slow_line);
	tcase_add_test(tc, host_connect_line_read_at_accept);
	tcase_add_test(tc, in_process);
	tcase_add_test(tc, in_process_refused);
	tcase_add_test(tc, shutdown_guest_first);
	tcase_add_test(tc, shutdown_host_first);
	tcase_add_test(tc, guest_rst_closes_host);
	tcase_add_test(tc, host_close_then_guest_writes);
	tcase_add_test(tc, transport_reset);
	tcase_add_test(tc, transport_reset_waits_for_buffer);
	tcase_add_test(tc, transport_reset_holds_new_connections);
	tcase_add_test(tc, departed_clients_free_their_slots);
	tcase_add_test(tc, device_reset_drops_all);
	tcase_add_test(tc, any_layout);
	tcase_add_test(tc, listener_out_of_fds);
	tcase_add_test(tc, uds_live_path_refused);
	tcase_add_test(tc, uds_stale_path_replaced);
	tcase_add_test(tc, uds_replaced_path_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
