/* Test harness for the vsock device: a tiny single-threaded poll loop
 * standing in for the event loop (the device's watch ops), and a guest
 * driver speaking vsock packets through the transport. Guest RAM layout
 * (td's 16 MiB): rx rings at 0x10000, tx at 0x20000, event at 0x30000;
 * rx buffers RXB bytes each from RX_BUFS, tx buffers from TX_BUFS, event
 * buffers from EV_BUFS. */
#ifndef TVM_TESTS_VIRTIO_VSOCK_H
#define TVM_TESTS_VIRTIO_VSOCK_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/virtio_vsock.h"
#include "tests/test_virtio_driver.h"
#include "tests/test_virtio_vsock_loop.h"

#define QSZ 64
#define RXB 4096 /* rx buffer bytes, header included (Linux: ~3.7 KiB) */
#define RX_BUFS 0x100000ull
#define TX_BUFS 0x200000ull
#define TX_SLOT 0x11000ull /* 64 KiB payload + header, rounded */
#define EV_BUFS 0x800000ull
#define GUEST_CID 3
#define HOST_PORT0 VSOCK_HOST_PORT_BASE
#define HDR ((uint32_t)sizeof(struct virtio_vsock_hdr))

/* Run rounds until nothing is ready. A device that keeps an fd ready
 * without consuming it would spin: that fails here. */
static inline void tw_settle(struct tw *w)
{
	for (int i = 0; i < 10000; i++)
		if (tw_round(w, 0) == 0)
			return;
	ck_abort_msg("fd callbacks never settle (device spinning on a ready fd)");
}

/* ---- the guest ---- */

struct tg {
	struct td d;
	struct virtio_mmio t;
	struct virtio_vsock *v;
	struct tw w;
	struct td_vq rx, tx, ev;
	unsigned tx_next; /* next tx slot */
	char path[108];   /* hybrid socket path, "" when none */
	char dir[64];
};

/* One packet the guest received. */
struct tpkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len, flags, buf_alloc, fwd_cnt;
	uint16_t type, op;
	uint32_t used; /* used length the device reported */
	uint8_t data[RXB];
};

static inline void tg_post_rx(struct tg *g, unsigned i)
{
	td_vq_desc(&g->d, &g->rx, i, RX_BUFS + (uint64_t)i * RXB, RXB, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g->d, &g->rx, (uint16_t)i);
}

static inline void tg_post_ev(struct tg *g, unsigned i)
{
	td_vq_desc(&g->d, &g->ev, i, EV_BUFS + 16ull * i, sizeof(struct virtio_vsock_event), VRING_DESC_F_WRITE, 0);
	td_vq_post(&g->d, &g->ev, (uint16_t)i);
}

/* Start the device (hybrid: listening in a new directory; handshake_ms:
 * vsock_opts') and the guest driver with rx_bufs rx buffers posted. */
static inline void tg_start_opts(struct tg *g, bool hybrid, unsigned rx_bufs, uint32_t handshake_ms)
{
	struct vsock_opts o = { .guest_cid = GUEST_CID, .handshake_ms = handshake_ms };
	struct tvm_err e = { 0 };
	uint32_t s;

	memset(g, 0, sizeof(*g));
	td_init(&g->d, QSZ);
	g->w.t = &g->t;
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &g->w };
	if (hybrid) {
		snprintf(g->dir, sizeof(g->dir), "/tmp/tvs-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(g->dir));
		snprintf(g->path, sizeof(g->path), "%s/v.sock", g->dir);
		o.uds_path = g->path;
	}
	ck_assert_msg(virtio_vsock_open(&g->v, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(virtio_mmio_init(&g->t, &virtio_vsock_ops, g->v, &g->d.mem, td_count_irq, &g->d, NULL), 0);
	td_vq_init(&g->rx, 0x10000, QSZ);
	td_vq_init(&g->tx, 0x20000, QSZ);
	td_vq_init(&g->ev, 0x30000, QSZ);
	td_wr(&g->t, VIRTIO_MMIO_STATUS, 0);
	s = td_negotiate(&g->t, td_device_features(&g->t));
	ck_assert_uint_eq(s & VIRTIO_CONFIG_S_FEATURES_OK, VIRTIO_CONFIG_S_FEATURES_OK);
	td_vq_setup(&g->t, VSOCK_RXQ, &g->rx);
	td_vq_setup(&g->t, VSOCK_TXQ, &g->tx);
	td_vq_setup(&g->t, VSOCK_EVQ, &g->ev);
	td_wr(&g->t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(td_rd(&g->t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_DRIVER_OK, VIRTIO_CONFIG_S_DRIVER_OK);
	for (unsigned i = 0; i < rx_bufs; i++)
		tg_post_rx(g, i);
	for (unsigned i = 0; i < 4; i++)
		tg_post_ev(g, i);
	virtio_mmio_notify(&g->t, VSOCK_RXQ);
	virtio_mmio_notify(&g->t, VSOCK_EVQ);
}

static inline void tg_start(struct tg *g, bool hybrid, unsigned rx_bufs)
{
	tg_start_opts(g, hybrid, rx_bufs, 0);
}

static inline void tg_stop(struct tg *g)
{
	virtio_mmio_destroy(&g->t);
	virtio_vsock_close(g->v);
	g->v = NULL;
	ck_assert_int_eq(g->w.n, 0); /* every fd unwatched */
	td_fini(&g->d);
	if (g->dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", g->dir);
		ck_assert_int_eq(system(cmd), 0);
	}
}

/* A header as the guest would write it; tests then break fields. */
static inline struct virtio_vsock_hdr tg_hdr(uint16_t op, uint32_t src_port, uint32_t dst_port, uint32_t len)
{
	return (struct virtio_vsock_hdr){
		.src_cid = htole64(GUEST_CID),
		.dst_cid = htole64(VSOCK_HOST_CID),
		.src_port = htole32(src_port),
		.dst_port = htole32(dst_port),
		.len = htole32(len),
		.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
		.op = htole16(op),
		.buf_alloc = htole32(VSOCK_BUF_ALLOC),
		.fwd_cnt = 0,
	};
}

/* Post header h and payload (plen bytes) as one tx chain: two
 * descriptors (header, payload) or, with one_desc, a single one. Returns
 * the chain's head. Does not notify. */
static inline uint16_t tg_queue_tx(struct tg *g, const struct virtio_vsock_hdr *h, const void *payload, uint32_t plen,
				   bool one_desc)
{
	unsigned slot = g->tx_next++ % (QSZ / 2);
	uint64_t at = TX_BUFS + slot * TX_SLOT;
	uint16_t head = (uint16_t)(2 * slot);

	ck_assert_uint_le(plen, TX_SLOT - HDR);
	memcpy(td_ptr(&g->d, at), h, HDR);
	if (plen)
		memcpy(td_ptr(&g->d, at + HDR), payload, plen);
	if (one_desc || !plen) {
		td_vq_desc(&g->d, &g->tx, head, at, HDR + plen, 0, 0);
	} else {
		td_vq_desc(&g->d, &g->tx, head, at, HDR, VRING_DESC_F_NEXT, head + 1);
		td_vq_desc(&g->d, &g->tx, head + 1, at + HDR, plen, 0, 0);
	}
	td_vq_post(&g->d, &g->tx, head);
	return head;
}

/* Send one packet (notify tx, let the loop run), check it was completed
 * with used length 0. */
static inline void tg_send_hdr(struct tg *g, const struct virtio_vsock_hdr *h, const void *payload, uint32_t plen)
{
	uint16_t head = tg_queue_tx(g, h, payload, plen, false);
	uint32_t id, len;

	virtio_mmio_notify(&g->t, VSOCK_TXQ);
	ck_assert(td_vq_take(&g->d, &g->tx, &id, &len));
	ck_assert_uint_eq(id, head);
	ck_assert_uint_eq(len, 0);
	tw_settle(&g->w);
}

static inline void tg_send(struct tg *g, uint16_t op, uint32_t src_port, uint32_t dst_port, const void *payload,
			   uint32_t plen)
{
	struct virtio_vsock_hdr h = tg_hdr(op, src_port, dst_port, plen);

	tg_send_hdr(g, &h, payload, plen);
}

/* Same with the credit fields set. */
static inline void tg_send_credit(struct tg *g, uint16_t op, uint32_t src_port, uint32_t dst_port, uint32_t buf_alloc,
				  uint32_t fwd_cnt)
{
	struct virtio_vsock_hdr h = tg_hdr(op, src_port, dst_port, 0);

	h.buf_alloc = htole32(buf_alloc);
	h.fwd_cnt = htole32(fwd_cnt);
	tg_send_hdr(g, &h, NULL, 0);
}

/* Take the next rx packet if there is one; its buffer goes back to the
 * device (not notified: call tg_rx_kick). */
static inline bool tg_recv(struct tg *g, struct tpkt *p)
{
	struct virtio_vsock_hdr h;
	uint32_t id, len;
	uint8_t *buf;

	if (!td_vq_take(&g->d, &g->rx, &id, &len))
		return false;
	ck_assert_uint_lt(id, QSZ);
	buf = td_ptr(&g->d, RX_BUFS + (uint64_t)id * RXB);
	memcpy(&h, buf, HDR);
	*p = (struct tpkt){
		.src_cid = le64toh(h.src_cid),
		.dst_cid = le64toh(h.dst_cid),
		.src_port = le32toh(h.src_port),
		.dst_port = le32toh(h.dst_port),
		.len = le32toh(h.len),
		.flags = le32toh(h.flags),
		.buf_alloc = le32toh(h.buf_alloc),
		.fwd_cnt = le32toh(h.fwd_cnt),
		.type = le16toh(h.type),
		.op = le16toh(h.op),
		.used = len,
	};
	/* What Linux checks before taking a packet. */
	ck_assert_uint_ge(len, HDR);
	ck_assert_uint_eq(p->len, len - HDR);
	ck_assert_uint_eq(p->src_cid, VSOCK_HOST_CID);
	ck_assert_uint_eq(p->dst_cid, GUEST_CID);
	ck_assert_uint_eq(p->type, VIRTIO_VSOCK_TYPE_STREAM);
	memcpy(p->data, buf + HDR, p->len);
	memset(buf, 0xee, HDR); /* stale headers must not pass for new ones */
	tg_post_rx(g, id);
	return true;
}

static inline void tg_rx_kick(struct tg *g)
{
	virtio_mmio_notify(&g->t, VSOCK_RXQ);
	tw_settle(&g->w);
}

/* The next packet, which must exist and have op op. */
static inline void tg_expect(struct tg *g, struct tpkt *p, uint16_t op)
{
	ck_assert_msg(tg_recv(g, p), "no packet, expected op %u", op);
	ck_assert_msg(p->op == op, "op %u, expected %u", p->op, op);
}

/* Nothing more comes, and the device holds no rx buffer it took (so a
 * snapshot loses none): every buffer popped was given back. */
static inline void tg_expect_none(struct tg *g)
{
	struct tpkt p;

	tw_settle(&g->w);
	ck_assert_msg(!tg_recv(g, &p), "unexpected packet op %u len %u", p.op, p.len);
	ck_assert_uint_eq(g->t.vqs[VSOCK_RXQ].last_avail, g->rx.last_used);
}

/* ---- host side helpers ---- */

static inline struct sockaddr_un unix_addr_of(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	ck_assert_uint_lt(strlen(path), sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path) + 1);
	return a;
}

static inline int unix_listen(const char *path)
{
	struct sockaddr_un a = unix_addr_of(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	return fd;
}

static inline int unix_connect(const char *path)
{
	struct sockaddr_un a = unix_addr_of(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static inline void set_nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* Read what is there now (fd non-blocking): bytes, 0 for EOF, -errno. */
static inline long read_now(int fd, void *buf, size_t cap)
{
	ssize_t r = read(fd, buf, cap);

	return r < 0 ? -errno : r;
}

static inline void write_all(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
}

/* ---- connections ---- */

/* The guest (port gp, buf_alloc ba) connects to host port hp, where a
 * test listener waits at "path_hp"; checks the RESPONSE. Returns the
 * host's accepted socket, non-blocking. */
static inline int tg_guest_connect(struct tg *g, uint32_t gp, uint32_t hp, uint32_t ba)
{
	char p[160];
	struct tpkt r;
	int l, fd;

	snprintf(p, sizeof(p), "%s_%u", g->path, hp);
	l = unix_listen(p);
	tg_send_credit(g, VIRTIO_VSOCK_OP_REQUEST, gp, hp, ba, 0);
	tg_expect(g, &r, VIRTIO_VSOCK_OP_RESPONSE);
	ck_assert_uint_eq(r.src_port, hp);
	ck_assert_uint_eq(r.dst_port, gp);
	ck_assert_uint_eq(r.buf_alloc, VSOCK_BUF_ALLOC);
	ck_assert_uint_eq(r.fwd_cnt, 0);
	ck_assert_uint_eq(r.len, 0);
	fd = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	ck_assert_int_ge(fd, 0);
	close(l);
	unlink(p);
	tg_rx_kick(g);
	return fd;
}

/* A hybrid client says "CONNECT gp", the guest accepts. Returns the
 * client socket (non-blocking) after checking "OK <port>\n", the host
 * port in *hp. */
static inline int tg_host_connect(struct tg *g, uint32_t gp, uint32_t *hp)
{
	char line[32], want[32];
	struct tpkt r;
	int fd = unix_connect(g->path);
	long n;

	snprintf(line, sizeof(line), "CONNECT %u\n", gp);
	write_all(fd, line, strlen(line));
	tw_settle(&g->w);
	tg_expect(g, &r, VIRTIO_VSOCK_OP_REQUEST);
	ck_assert_uint_eq(r.dst_port, gp);
	ck_assert_uint_ge(r.src_port, HOST_PORT0);
	ck_assert_uint_eq(r.buf_alloc, VSOCK_BUF_ALLOC);
	*hp = r.src_port;
	tg_send(g, VIRTIO_VSOCK_OP_RESPONSE, gp, *hp, NULL, 0);
	set_nonblock(fd);
	snprintf(want, sizeof(want), "OK %u\n", *hp);
	n = read_now(fd, line, sizeof(line));
	ck_assert_int_eq(n, (long)strlen(want));
	ck_assert(memcmp(line, want, (size_t)n) == 0);
	return fd;
}

#endif
