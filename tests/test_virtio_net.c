/* virtio-net device through the transport, the test playing the guest
 * driver, with the TAP replaced by a SOCK_SEQPACKET socketpair (one frame
 * with its 12-byte header per message, as a TAP with IFF_VNET_HDR).
 * Guest RAM: rx rings at 0x10000, tx rings at 0x20000, rx buffers from
 * RXBUFS (RXSTRIDE apart), tx buffers from TXBUFS. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/if_tun.h>

#include "devices/net/net_offload.h"
#include "devices/net/virtio_net.h"
#include "vmm/kvm/event_loop.h"
#include "tests/test_net_frames.h"
#include "tests/test_throttle.h"
#include "tests/test_virtio_driver.h"
#include "tests/test_virtio_vsock.h" /* tw_* poll loop standing in for the event loop, tw_settle */
#include "tests/unit.h"

#define NQ 64
#define RXBUFS 0x100000ull
#define RXSTRIDE 0x1000ull
#define TXBUFS 0x200000ull
#define TXSTRIDE 0x1000ull
#define MRG (1ULL << VIRTIO_NET_F_MRG_RXBUF)
#define ALL_FEATURES (~0ULL)

struct tn {
	struct td d;
	struct tw w;
	struct virtio_mmio t;
	struct virtio_net *n;
	int peer;  /* the "TAP" side */
	int devfd; /* the device's end (owned by the device) */
	struct td_vq rx, tx;
	unsigned tx_next; /* next tx descriptor/slot */
	uint8_t mac[6];
};

static struct tn g;
static struct tvm_rate_limit rx_lim, tx_lim; /* the next device's limits (on the fake clock tt_now) */
static bool next_replies_only;               /* the next device's ingress: replies only */

static void tn_driver_start(struct tn *x, uint64_t features)
{
	uint32_t s;

	td_wr(&x->t, VIRTIO_MMIO_STATUS, 0);
	memset(x->d.ram + 0x10000, 0, 0x13000); /* fresh rings */
	td_vq_init(&x->rx, 0x10000, NQ);
	td_vq_init(&x->tx, 0x20000, NQ);
	x->tx_next = 0;
	s = td_negotiate(&x->t, features & td_device_features(&x->t));
	ck_assert_uint_eq(s & VIRTIO_CONFIG_S_FEATURES_OK, VIRTIO_CONFIG_S_FEATURES_OK);
	td_vq_setup(&x->t, NET_RXQ, &x->rx);
	td_vq_setup(&x->t, NET_TXQ, &x->tx);
	td_wr(&x->t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(td_rd(&x->t, VIRTIO_MMIO_STATUS), s | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* The device over a socketpair, or over a new TAP when tap (peer and
 * devfd are -1 then). */
static void tn_start_backend(struct tn *x, const struct net_policy *p, uint64_t features, bool tap)
{
	struct net_opts o = { .fd = -1, .id = 1, .policy = p };
	struct tvm_err e = { 0 };
	int sv[2] = { -1, -1 };

	memset(x, 0, sizeof(*x));
	td_init(&x->d, NQ);
	x->w.t = &x->t;
	if (!tap)
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	o.fd = x->devfd = sv[0];
	x->peer = sv[1];
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &x->w };
	o.rx_limit = rx_lim;
	o.tx_limit = tx_lim;
	o.ingress_replies = next_replies_only;
	o.clock = tt_clock;
	ck_assert_msg(virtio_net_open(&x->n, &o, &e) == 0, "%s", e.msg);
	net_mac_from_id(1, x->mac);
	ck_assert_int_eq(virtio_mmio_init(&x->t, &virtio_net_ops, x->n, &x->d.mem, td_count_irq, &x->d, NULL), 0);
	tn_driver_start(x, features);
}

static void tn_start(struct tn *x, const struct net_policy *p, uint64_t features)
{
	tn_start_backend(x, p, features, false);
}

static void tn_stop(struct tn *x)
{
	virtio_mmio_destroy(&x->t);
	virtio_net_close(x->n);
	if (x->peer >= 0)
		close(x->peer);
	td_fini(&x->d);
}

static void teardown(void)
{
	if (g.n)
		tn_stop(&g);
	g.n = NULL;
	rx_lim = tx_lim = (struct tvm_rate_limit){ 0 };
	tt_now = 0;
}

static struct net_stats stats(void)
{
	struct net_stats s;

	virtio_net_stats(g.n, &s);
	return s;
}

/* ---- tx ---- */

/* Post a tx chain: the 12-byte header hdr, then the frame split into
 * nseg descriptors (header in its own descriptor when split_hdr), and run
 * the tx queue. */
static void tx_post(const struct virtio_net_hdr_v1 *hdr, const uint8_t *f, size_t len, unsigned nseg, bool split_hdr)
{
	uint64_t gpa = TXBUFS + (uint64_t)(g.tx_next % NQ) * TXSTRIDE * 2;
	uint8_t *p = td_ptr(&g.d, gpa);
	size_t total = NET_HDR_LEN + len, at = 0;
	unsigned head = (g.tx_next * 8) % NQ, i = 0;
	unsigned parts = nseg + (split_hdr ? 1 : 0);

	memcpy(p, hdr, NET_HDR_LEN);
	memcpy(p + NET_HDR_LEN, f, len);
	for (unsigned k = 0; k < parts; k++) {
		size_t n;

		if (split_hdr && k == 0)
			n = NET_HDR_LEN;
		else if (k == parts - 1)
			n = total - at;
		else
			n = (total - (split_hdr ? NET_HDR_LEN : 0)) / nseg;
		i = (head + k) % NQ;
		td_vq_desc(&g.d, &g.tx, i, gpa + at, (uint32_t)n, k + 1 < parts ? VRING_DESC_F_NEXT : 0,
			   (uint16_t)((i + 1) % NQ));
		at += n;
	}
	g.tx_next++;
	td_vq_post(&g.d, &g.tx, (uint16_t)head);
	virtio_mmio_notify(&g.t, NET_TXQ);
}

static const struct virtio_net_hdr_v1 zero_hdr;

static void tx(const uint8_t *f, size_t len)
{
	tx_post(&zero_hdr, f, len, 1, false);
}

/* The next message on the peer, or -1 when there is none. */
static ssize_t peer_recv(uint8_t *buf, size_t cap)
{
	return recv(g.peer, buf, cap, MSG_DONTWAIT);
}

static void expect_nothing_sent(void)
{
	uint8_t buf[64];

	ck_assert_int_eq(peer_recv(buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EAGAIN);
}

/* Every posted tx chain was completed with used length 0. */
static void expect_tx_completed(void)
{
	uint32_t id, len;
	unsigned n = 0;

	while (td_vq_take(&g.d, &g.tx, &id, &len)) {
		ck_assert_uint_eq(len, 0);
		n++;
	}
	ck_assert_uint_eq(g.tx.last_used, g.tx.avail_idx);
	(void)n;
}

static void expect_arrives(const uint8_t *f, size_t len)
{
	uint8_t buf[NET_HDR_LEN + 2048];
	static const uint8_t zero[NET_HDR_LEN];
	ssize_t n = peer_recv(buf, sizeof(buf));

	ck_assert_int_eq(n, (ssize_t)(NET_HDR_LEN + len));
	ck_assert_mem_eq(buf, zero, NET_HDR_LEN);
	ck_assert_mem_eq(buf + NET_HDR_LEN, f, len);
}

/* A UDP frame from our MAC of exactly len bytes. */
static size_t udp_frame(uint8_t *b, size_t len)
{
	size_t n = tf_udp4(b, "10.0.0.1", 53, len - 42);

	memcpy(b + 6, g.mac, 6);
	return n;
}

START_TEST(config_space)
{
	uint64_t f;
	uint8_t cfg[12];

	tn_start(&g, NULL, ALL_FEATURES);
	ck_assert_uint_eq(td_rd(&g.t, VIRTIO_MMIO_DEVICE_ID), 1);
	f = td_device_features(&g.t);
	ck_assert(f & (1ULL << VIRTIO_NET_F_MAC));
	ck_assert(f & (1ULL << VIRTIO_NET_F_STATUS));
	ck_assert(f & MRG);
	ck_assert(f & (1ULL << VIRTIO_NET_F_MTU));
	ck_assert(!(f & (1ULL << VIRTIO_NET_F_CSUM)));
	ck_assert(!(f & (1ULL << VIRTIO_NET_F_GUEST_CSUM)));
	ck_assert(!(f & (1ULL << VIRTIO_NET_F_HOST_TSO4)));
	ck_assert(!(f & (1ULL << VIRTIO_NET_F_CTRL_VQ)));
	for (unsigned i = 0; i < sizeof(cfg); i++)
		virtio_mmio_io(&g.t, 0x100 + i, &cfg[i], 1, false);
	ck_assert_mem_eq(cfg, g.mac, 6);
	ck_assert_uint_eq(cfg[6] | cfg[7] << 8, VIRTIO_NET_S_LINK_UP);
	ck_assert_uint_eq(cfg[10] | cfg[11] << 8, 1500);
	ck_assert_str_eq(virtio_net_ifname(g.n), "");
}
END_TEST

START_TEST(tx_good_frames_byte_exact)
{
	uint8_t f[TF_MAX];
	size_t sizes[] = { 14, 60, 300, 1514 };

	tn_start(&g, NULL, ALL_FEATURES);
	for (unsigned s = 0; s < 4; s++) {
		size_t n = sizes[s];

		for (size_t i = 0; i < n; i++)
			f[i] = (uint8_t)(i * 7 + s);
		tx_post(&zero_hdr, f, n, 1, false);
		expect_arrives(f, n);
		tx_post(&zero_hdr, f, n, 1, true);
		expect_arrives(f, n);
		tx_post(&zero_hdr, f, n, n >= 7 ? 7 : 1, true);
		expect_arrives(f, n);
		tx_post(&zero_hdr, f, n, n >= 5 ? 5 : 1, false); /* header and frame mixed in buffers */
		expect_arrives(f, n);
	}
	/* num_buffers is ignored on tx and not passed on. */
	{
		struct virtio_net_hdr_v1 h = { .num_buffers = htole16(3) };

		tx_post(&h, f, 60, 1, false);
		expect_arrives(f, 60);
	}
	expect_tx_completed();
	ck_assert_uint_eq(stats().tx_frames, 17);
	ck_assert_uint_eq(stats().tx_bytes, 4 * (14 + 60 + 300 + 1514) + 60);
	ck_assert_int_gt(g.d.irqs, 0);
}
END_TEST

START_TEST(tx_size_limits)
{
	uint8_t f[TF_MAX];
	struct net_stats s;

	tn_start(&g, NULL, ALL_FEATURES);
	memset(f, 0x5a, sizeof(f));
	tf_eth(f, ETH_P_IP, false);
	tx(f, 13);
	tx(f, 0);
	tx(f, 1515);
	expect_nothing_sent();
	tf_eth(f, ETH_P_IP, true);
	tx(f, 1518); /* with a VLAN tag: 4 more */
	expect_arrives(f, 1518);
	tx(f, 1519);
	expect_nothing_sent();
	expect_tx_completed();
	s = stats();
	ck_assert_uint_eq(s.drops[NET_DROP_RUNT], 2);
	ck_assert_uint_eq(s.drops[NET_DROP_OVERSIZE], 2);
	ck_assert_uint_eq(s.tx_frames, 1);
}
END_TEST

/* Over a socket no offload is offered, so the header may ask for none. */
START_TEST(tx_bad_vnet_header)
{
	uint8_t f[TF_MAX];
	struct virtio_net_hdr_v1 h[4];

	tn_start(&g, NULL, ALL_FEATURES);
	ck_assert(!(td_device_features(&g.t) & NET_OFFLOAD_FEATURES));
	udp_frame(f, 100);
	memset(h, 0, sizeof(h));
	h[0].flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	h[0].csum_start = htole16(34);
	h[0].csum_offset = htole16(6);
	h[1].gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	h[2].flags = VIRTIO_NET_HDR_F_DATA_VALID; /* rx only */
	h[3].gso_type = VIRTIO_NET_HDR_GSO_UDP;
	for (unsigned i = 0; i < 4; i++)
		tx_post(&h[i], f, 100, 2, i & 1);
	expect_nothing_sent();
	expect_tx_completed();
	ck_assert_uint_eq(stats().drops[NET_DROP_VNET_HDR], 4);
	ck_assert_uint_eq(stats().tx_frames, 0);
}
END_TEST

/* Fields that mean nothing without NEEDS_CSUM or GSO go no further: the
 * backend gets an all-zero header. */
START_TEST(tx_unused_header_fields_not_passed_on)
{
	uint8_t f[TF_MAX];
	struct virtio_net_hdr_v1 h[4];

	tn_start(&g, NULL, ALL_FEATURES);
	udp_frame(f, 100);
	memset(h, 0, sizeof(h));
	h[0].hdr_len = htole16(54);
	h[1].gso_size = htole16(1448);
	h[2].csum_start = htole16(34);
	h[3].csum_offset = htole16(6);
	for (unsigned i = 0; i < 4; i++) {
		tx_post(&h[i], f, 100, 2, i & 1);
		expect_arrives(f, 100);
	}
	expect_tx_completed();
	ck_assert_uint_eq(stats().tx_frames, 4);
}
END_TEST

START_TEST(tx_policy_drops)
{
	struct net_policy p;
	uint8_t f[TF_MAX];
	size_t n;
	struct net_stats s;

	net_policy_init(&p);
	ck_assert_int_eq(net_policy_add_rule(&p, "10.0.0.1:53/udp", NULL), 0);
	tn_start(&g, &p, ALL_FEATURES);
	n = udp_frame(f, 100);
	tx(f, n);
	expect_arrives(f, n);
	n = tf_tcp4(f, "10.0.0.1", 53); /* tcp: not allowed */
	memcpy(f + 6, g.mac, 6);
	tx(f, n);
	n = tf_udp4(f, "10.0.0.2", 53, 10); /* other host */
	memcpy(f + 6, g.mac, 6);
	tx(f, n);
	n = udp_frame(f, 100);
	f[11] ^= 1; /* spoofed source MAC */
	tx(f, n);
	n = tf_ip4(f, tf_eth(f, ETH_P_IP, false), IPPROTO_UDP, "10.0.0.1", 5, 8, 0x2000) + 8; /* fragment */
	memcpy(f + 6, g.mac, 6);
	tx(f, n);
	n = udp_frame(f, 100);
	f[14] = 0x44; /* IHL 4 */
	tx(f, n);
	n = tf_arp(f);
	memcpy(f + 6, g.mac, 6);
	tx(f, n);
	expect_arrives(f, n);
	expect_nothing_sent();
	expect_tx_completed();
	s = stats();
	ck_assert_uint_eq(s.drops[NET_DROP_POLICY], 2);
	ck_assert_uint_eq(s.drops[NET_DROP_SPOOF], 1);
	ck_assert_uint_eq(s.drops[NET_DROP_FRAGMENT], 1);
	ck_assert_uint_eq(s.drops[NET_DROP_MALFORMED], 1);
	ck_assert_uint_eq(s.tx_frames, 2);
}
END_TEST

/* The filter looks at a copy and the copy is sent: a header the guest
 * changes after posting cannot differ between check and send. Here the
 * frame is longer than the inspected window, so the tail comes from guest
 * memory and the head from the copy. */
START_TEST(tx_long_frame_split_head)
{
	struct net_policy p;
	uint8_t f[TF_MAX];
	size_t n;

	net_policy_init(&p);
	ck_assert_int_eq(net_policy_add_rule(&p, "10.0.0.1:53/udp", NULL), 0);
	tn_start(&g, &p, ALL_FEATURES);
	n = udp_frame(f, 1514);
	for (size_t i = 42; i < n; i++)
		f[i] = (uint8_t)i;
	tx_post(&zero_hdr, f, n, 9, true);
	expect_arrives(f, n);
}
END_TEST

START_TEST(tx_hostile_chains)
{
	uint8_t f[TF_MAX];
	size_t n = udp_frame(f, 100);
	uint64_t gpa = TXBUFS;

	tn_start(&g, NULL, ALL_FEATURES);
	memcpy(td_ptr(&g.d, gpa), &zero_hdr, NET_HDR_LEN);
	memcpy(td_ptr(&g.d, gpa + NET_HDR_LEN), f, n);
	/* A writable buffer in a tx chain. */
	td_vq_desc(&g.d, &g.tx, 0, gpa, (uint32_t)(NET_HDR_LEN + n), VRING_DESC_F_NEXT, 1);
	td_vq_desc(&g.d, &g.tx, 1, gpa + 0x800, 100, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.tx, 0);
	/* Shorter than the header; empty. */
	td_vq_desc(&g.d, &g.tx, 2, gpa, 11, 0, 0);
	td_vq_post(&g.d, &g.tx, 2);
	td_vq_desc(&g.d, &g.tx, 3, gpa, 0, 0, 0);
	td_vq_post(&g.d, &g.tx, 3);
	virtio_mmio_notify(&g.t, NET_TXQ);
	expect_nothing_sent();
	expect_tx_completed();
	ck_assert_uint_eq(stats().drops[NET_DROP_BAD_CHAIN], 3);
	/* A loop breaks the queue: NEEDS_RESET, nothing sent, no crash. */
	td_vq_desc(&g.d, &g.tx, 4, gpa, 20, VRING_DESC_F_NEXT, 5);
	td_vq_desc(&g.d, &g.tx, 5, gpa, 20, VRING_DESC_F_NEXT, 4);
	td_vq_post(&g.d, &g.tx, 4);
	virtio_mmio_notify(&g.t, NET_TXQ);
	ck_assert(td_rd(&g.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	expect_nothing_sent();
	/* The driver resets and starts again: works. */
	tn_driver_start(&g, ALL_FEATURES);
	tx(f, n);
	expect_arrives(f, n);
}
END_TEST

/* ---- rx ---- */

/* Post rx buffer i of len bytes (one writable descriptor, as Linux does). */
static void rx_post(unsigned i, uint32_t len)
{
	ck_assert_uint_le(len, RXSTRIDE);
	td_vq_desc(&g.d, &g.rx, i, RXBUFS + i * RXSTRIDE, len, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, (uint16_t)i);
}

/* The peer ("TAP") sends frame f with a header full of junk the device
 * must not pass on. */
static void peer_send(const uint8_t *f, size_t len)
{
	uint8_t buf[NET_HDR_LEN + 65536];

	memset(buf, 0xee, NET_HDR_LEN);
	memcpy(buf + NET_HDR_LEN, f, len);
	ck_assert_int_eq(send(g.peer, buf, NET_HDR_LEN + len, 0), (ssize_t)(NET_HDR_LEN + len));
}

/* Take the next used rx entry: its id and length. */
static bool rx_take(uint32_t *id, uint32_t *len)
{
	return td_vq_take(&g.d, &g.rx, id, len);
}

/* The frame in buffers ids (in order) with used lengths lens. */
static void expect_rx_frame(const uint8_t *f, size_t len, unsigned nbuf)
{
	uint8_t got[NET_HDR_LEN + 65536];
	size_t at = 0;
	uint32_t id, ulen;
	struct virtio_net_hdr_v1 h;

	for (unsigned k = 0; k < nbuf; k++) {
		ck_assert_msg(rx_take(&id, &ulen), "buffer %u of %u missing", k, nbuf);
		ck_assert_uint_le(ulen, RXSTRIDE);
		memcpy(got + at, td_ptr(&g.d, RXBUFS + id * RXSTRIDE), ulen);
		at += ulen;
	}
	ck_assert_uint_eq(at, NET_HDR_LEN + len);
	memcpy(&h, got, sizeof(h));
	ck_assert_uint_eq(h.flags, 0);
	ck_assert_uint_eq(h.gso_type, VIRTIO_NET_HDR_GSO_NONE);
	ck_assert_uint_eq(h.hdr_len, 0);
	ck_assert_uint_eq(h.gso_size, 0);
	ck_assert_uint_eq(h.csum_start, 0);
	ck_assert_uint_eq(h.csum_offset, 0);
	ck_assert_uint_eq(le16toh(h.num_buffers), nbuf);
	ck_assert_mem_eq(got + NET_HDR_LEN, f, len);
}

static void pattern(uint8_t *f, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		f[i] = (uint8_t)(i * 13 + seed);
}

/* Snapshot save: held rx chains go back to the ring (the saved queue
 * position must not skip them), and the running device takes them again. */
START_TEST(save_unpops_held_rx_chains)
{
	uint8_t f[100];
	uint32_t id, len;

	tn_start(&g, NULL, ALL_FEATURES);
	pattern(f, sizeof(f), 3);
	rx_post(0, 1536);
	rx_post(1, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert_uint_eq(g.t.vqs[NET_RXQ].last_avail, 1); /* chain 0 held */
	ck_assert_int_eq(virtio_net_ops.save(g.n, NULL, 0), 0);
	ck_assert_uint_eq(g.t.vqs[NET_RXQ].last_avail, 0);
	ck_assert(!rx_take(&id, &len));
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	ck_assert(rx_take(&id, &len));
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, NET_HDR_LEN + sizeof(f));
}
END_TEST

/* With a bad chain completed between two held ones they cannot be
 * un-popped: they are completed empty instead (the driver drops buffers
 * shorter than a header). */
START_TEST(save_completes_held_chains_around_a_bad_one)
{
	uint32_t id, len;

	tn_start(&g, NULL, ALL_FEATURES);
	rx_post(0, 512);
	td_vq_desc(&g.d, &g.rx, 1, RXBUFS + RXSTRIDE, 64, 0, 0); /* device-readable: bad */
	td_vq_post(&g.d, &g.rx, 1);
	rx_post(2, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert_uint_eq(g.t.vqs[NET_RXQ].last_avail, 3);
	ck_assert(rx_take(&id, &len) && id == 1 && len == 0);
	ck_assert(!rx_take(&id, &len));
	ck_assert_int_eq(virtio_net_ops.save(g.n, NULL, 0), 0);
	ck_assert_uint_eq(g.t.vqs[NET_RXQ].last_avail, 3);
	ck_assert(rx_take(&id, &len) && id == 0 && len == 0);
	ck_assert(rx_take(&id, &len) && id == 2 && len == 0);
	ck_assert(!rx_take(&id, &len));
}
END_TEST

START_TEST(rx_frame_delivered)
{
	uint8_t f[1514];
	uint32_t id, len;

	tn_start(&g, NULL, ALL_FEATURES);
	pattern(f, sizeof(f), 1);
	rx_post(0, 1536); /* Linux's mergeable buffer: 12 + 1518 rounded up */
	rx_post(1, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert(tw_watched(&g.w, g.devfd, NULL)); /* found it empty: waits on it */
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	expect_rx_frame(f, sizeof(f), 1);
	peer_send(f, 60);
	tw_settle(&g.w);
	expect_rx_frame(f, 60, 1);
	ck_assert(!rx_take(&id, &len));
	ck_assert_uint_eq(stats().rx_frames, 2);
	ck_assert_uint_eq(stats().rx_bytes, 1514 + 60);
	ck_assert_int_gt(g.d.irqs, 0);
}
END_TEST

/* Replies only: the host's SYN to the guest is dropped (its buffers wait
 * for the next frame), a SYN-ACK and a UDP answer to what the guest sent
 * arrive. */
START_TEST(rx_replies_only)
{
	uint8_t f[TF_MAX], a[TF_MAX];
	uint32_t id, len;
	size_t n;

	next_replies_only = true;
	tn_start(&g, NULL, ALL_FEATURES);
	next_replies_only = false;
	rx_post(0, 1536);
	rx_post(1, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	n = tf_tcp4(f, "10.0.0.2", 22);
	f[14 + 20 + 13] = 0x02; /* SYN */
	peer_send(f, n);
	tw_settle(&g.w);
	ck_assert(!rx_take(&id, &len));
	ck_assert_uint_eq(stats().drops[NET_DROP_INGRESS], 1);
	ck_assert_uint_eq(stats().rx_frames, 0);
	f[14 + 20 + 13] = 0x12; /* SYN ACK */
	peer_send(f, n);
	tw_settle(&g.w);
	expect_rx_frame(f, n, 1);
	/* UDP: only once the guest has sent to that port */
	n = udp_frame(f, 60);
	memcpy(a, f, n);
	memcpy(a + 14 + 12, f + 14 + 16, 4); /* its answer: addresses and ports swapped */
	memcpy(a + 14 + 16, f + 14 + 12, 4);
	memcpy(a + 34, f + 34 + 2, 2);
	memcpy(a + 34 + 2, f + 34, 2);
	peer_send(a, n);
	tw_settle(&g.w);
	ck_assert(!rx_take(&id, &len));
	ck_assert_uint_eq(stats().drops[NET_DROP_INGRESS], 2);
	tx(f, n);
	expect_arrives(f, n);
	peer_send(a, n);
	tw_settle(&g.w);
	expect_rx_frame(a, n, 1);
	ck_assert_uint_eq(stats().rx_frames, 2);
}
END_TEST

START_TEST(rx_no_buffers_no_read)
{
	uint8_t f[100];
	uint32_t ev;
	int avail = 0;

	tn_start(&g, NULL, ALL_FEATURES);
	pattern(f, sizeof(f), 2);
	peer_send(f, sizeof(f));
	virtio_mmio_notify(&g.t, NET_RXQ);
	virtio_mmio_notify(&g.t, NET_TXQ);
	tw_settle(&g.w);
	ck_assert_int_eq(g.w.n, 0); /* not watched */
	/* Still queued at the device's end: nothing was read (or dropped). */
	ck_assert_int_eq(ioctl(g.devfd, FIONREAD, &avail), 0);
	ck_assert_int_eq(avail, NET_HDR_LEN + sizeof(f));
	ck_assert_uint_eq(stats().rx_frames, 0);
	ck_assert_uint_eq(stats().rx_dropped, 0);
	/* A buffer too small for a full frame is held but not read into:
	 * with MRG_RXBUF the device waits until the guest posts enough. */
	rx_post(0, 100);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert_int_eq(g.w.n, 0);
	ck_assert_uint_eq(stats().rx_frames, 0);
	/* Enough posted: delivered into the held buffer first, then the new one. */
	rx_post(1, 1500);
	virtio_mmio_notify(&g.t, NET_RXQ);
	expect_rx_frame(f, sizeof(f), 2);
	/* Both buffers used: nothing to read into, so not watched; a new one
	 * makes the device wait on the backend. */
	ck_assert_int_eq(g.w.n, 0);
	rx_post(2, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert(g.w.n == 1 && tw_watched(&g.w, g.devfd, &ev) && (ev & EPOLLIN));
}
END_TEST

START_TEST(rx_mergeable_spans_buffers)
{
	uint8_t f[1514];

	tn_start(&g, NULL, ALL_FEATURES);
	for (unsigned i = 0; i < 4; i++)
		rx_post(i, 512);
	virtio_mmio_notify(&g.t, NET_RXQ);
	pattern(f, sizeof(f), 3);
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	/* 12 + 1514 = 512 + 512 + 502 */
	expect_rx_frame(f, sizeof(f), 3);
	/* One 512-byte buffer is held; the next frame waits for more. */
	peer_send(f, 100);
	tw_settle(&g.w);
	ck_assert_uint_eq(stats().rx_frames, 1);
	for (unsigned i = 4; i < 8; i++)
		rx_post(i, 512);
	virtio_mmio_notify(&g.t, NET_RXQ);
	expect_rx_frame(f, 100, 1);
	ck_assert_uint_eq(stats().rx_frames, 2);
}
END_TEST

START_TEST(rx_without_mrg)
{
	uint8_t f[1514];
	uint32_t id, len;

	tn_start(&g, NULL, ALL_FEATURES & ~MRG);
	pattern(f, sizeof(f), 4);
	rx_post(0, 200); /* too small for a full frame: read into anyway */
	virtio_mmio_notify(&g.t, NET_RXQ);
	peer_send(f, sizeof(f)); /* dropped: does not fit */
	tw_settle(&g.w);
	ck_assert_uint_eq(stats().rx_dropped, 1);
	ck_assert(!rx_take(&id, &len));
	peer_send(f, 150); /* fits */
	tw_settle(&g.w);
	expect_rx_frame(f, 150, 1);
	rx_post(1, 1526);
	virtio_mmio_notify(&g.t, NET_RXQ);
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	expect_rx_frame(f, sizeof(f), 1);
}
END_TEST

START_TEST(rx_size_limits)
{
	uint8_t f[2000];

	tn_start(&g, NULL, ALL_FEATURES);
	for (unsigned i = 0; i < 4; i++)
		rx_post(i, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	pattern(f, sizeof(f), 8);
	peer_send(f, 1519); /* over MTU + 18 */
	peer_send(f, 13);   /* under an Ethernet header */
	peer_send(f, 0);
	peer_send(f, 1518);
	tw_settle(&g.w);
	ck_assert_uint_eq(stats().rx_dropped, 3);
	expect_rx_frame(f, 1518, 1);
}
END_TEST

START_TEST(rx_tiny_buffers)
{
	uint8_t f[1514];

	tn_start(&g, NULL, ALL_FEATURES);
	/* More than NET_RX_MAX_CHAINS buffers of 16 bytes: 64 are held
	 * (1024 bytes), then the device reads anyway. */
	for (unsigned i = 0; i < NQ; i++)
		rx_post(i, 16);
	virtio_mmio_notify(&g.t, NET_RXQ);
	pattern(f, sizeof(f), 5);
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	ck_assert_uint_eq(stats().rx_dropped, 1);
	peer_send(f, 60); /* 72 bytes: 5 buffers */
	tw_settle(&g.w);
	expect_rx_frame(f, 60, 5);
}
END_TEST

START_TEST(rx_hostile_chains)
{
	uint8_t f[100];
	uint32_t id, len;

	tn_start(&g, NULL, ALL_FEATURES);
	/* Readable rx buffer, and one shorter than the header: returned
	 * unused. */
	td_vq_desc(&g.d, &g.rx, 0, RXBUFS, 1536, 0, 0);
	td_vq_post(&g.d, &g.rx, 0);
	td_vq_desc(&g.d, &g.rx, 1, RXBUFS + RXSTRIDE, 11, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, 1);
	/* A chain of many 1-byte buffers. */
	for (unsigned i = 2; i < 40; i++)
		td_vq_desc(&g.d, &g.rx, i, RXBUFS + 2 * RXSTRIDE + (i - 2), 1, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT,
			   (uint16_t)(i + 1));
	td_vq_desc(&g.d, &g.rx, 40, RXBUFS + 3 * RXSTRIDE, 1536, VRING_DESC_F_WRITE, 0);
	td_vq_post(&g.d, &g.rx, 2);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert(rx_take(&id, &len) && id == 0 && len == 0);
	ck_assert(rx_take(&id, &len) && id == 1 && len == 0);
	ck_assert_uint_eq(stats().drops[NET_DROP_BAD_CHAIN], 2);
	pattern(f, sizeof(f), 6);
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	ck_assert(rx_take(&id, &len) && id == 2 && len == NET_HDR_LEN + sizeof(f));
	/* 38 one-byte buffers take the header and f[0..26), the last the rest. */
	ck_assert_uint_eq(le16toh(((struct virtio_net_hdr_v1 *)td_ptr(&g.d, RXBUFS + 2 * RXSTRIDE))->num_buffers), 1);
	ck_assert_mem_eq((uint8_t *)td_ptr(&g.d, RXBUFS + 2 * RXSTRIDE) + NET_HDR_LEN, f, 26);
	ck_assert_mem_eq(td_ptr(&g.d, RXBUFS + 3 * RXSTRIDE), f + 26, sizeof(f) - 26);
	/* A loop in the rx ring: NEEDS_RESET, no crash, fd not spinning. */
	td_vq_desc(&g.d, &g.rx, 50, RXBUFS, 20, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 51);
	td_vq_desc(&g.d, &g.rx, 51, RXBUFS, 20, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 50);
	td_vq_post(&g.d, &g.rx, 50);
	virtio_mmio_notify(&g.t, NET_RXQ);
	peer_send(f, sizeof(f));
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	ck_assert(td_rd(&g.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	tw_settle(&g.w);
}
END_TEST

START_TEST(reset_drops_held_and_unwatches)
{
	uint8_t f[60];

	tn_start(&g, NULL, ALL_FEATURES);
	rx_post(0, 100);
	rx_post(1, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert_int_eq(g.w.n, 1);
	td_wr(&g.t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_int_eq(g.w.n, 0);
	tn_driver_start(&g, ALL_FEATURES);
	rx_post(0, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	pattern(f, sizeof(f), 7);
	peer_send(f, sizeof(f));
	tw_settle(&g.w);
	expect_rx_frame(f, sizeof(f), 1);
}
END_TEST

/* ---- rate limits ---- */

static struct vq_throttle *thr(void)
{
	return virtio_net_ops.throttle(g.n);
}

/* Two frames per second out: the third stays on the tx ring (not popped)
 * until the timer runs tx again; the frames go out in order. */
START_TEST(tx_limit_holds_frames_on_ring)
{
	uint8_t f[4][TF_MAX];
	struct vq_throttle_stats st;

	tx_lim = (struct tvm_rate_limit){ .ops = { .size = 2 } };
	tn_start(&g, NULL, ALL_FEATURES);
	for (unsigned i = 0; i < 4; i++) {
		udp_frame(f[i], 100);
		f[i][60] = (uint8_t)i;
		tx(f[i], 100);
	}
	expect_arrives(f[0], 100);
	expect_arrives(f[1], 100);
	expect_nothing_sent();
	ck_assert_uint_eq(g.t.vqs[NET_TXQ].last_avail, 2);
	ck_assert(tt_armed(thr()));
	tt_now = 500 * TT_MS;
	tt_fire(&g.w, thr());
	expect_arrives(f[2], 100);
	expect_nothing_sent();
	tt_now = 1000 * TT_MS;
	tt_fire(&g.w, thr());
	expect_arrives(f[3], 100);
	expect_tx_completed();
	vq_throttle_stats(thr(), NET_TXQ, &st);
	ck_assert_str_eq(st.name, "tx");
	ck_assert_uint_eq(st.throttled, 2);
	ck_assert_uint_eq(st.throttled_ns, 1000 * TT_MS);
	vq_throttle_stats(thr(), NET_RXQ, &st);
	ck_assert(!st.active);
}
END_TEST

/* 1000 bytes per second in: a frame is paid for once read (its size is
 * not known before), so the second one leaves the limiter in debt and the
 * third stays in the backend, neither read nor watched (no spinning on a
 * readable fd), until the timer runs rx. */
START_TEST(rx_limit_defers_reading)
{
	uint8_t f[3][600];

	rx_lim = (struct tvm_rate_limit){ .bytes = { .size = 1000 } };
	tn_start(&g, NULL, ALL_FEATURES);
	for (unsigned i = 0; i < 4; i++)
		rx_post(i, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	for (unsigned i = 0; i < 3; i++) {
		pattern(f[i], sizeof(f[i]), i);
		peer_send(f[i], sizeof(f[i]));
	}
	tw_settle(&g.w);
	expect_rx_frame(f[0], 600, 1);
	expect_rx_frame(f[1], 600, 1);
	ck_assert_uint_eq(stats().rx_frames, 2);
	ck_assert(!tw_watched(&g.w, g.devfd, NULL));
	tt_now = 200 * TT_MS; /* 200 bytes owed and 1 to go: 201 ms */
	tt_fire(&g.w, thr());
	ck_assert_uint_eq(stats().rx_frames, 2);
	tt_now = 201 * TT_MS;
	tt_fire(&g.w, thr());
	expect_rx_frame(f[2], 600, 1);
	ck_assert(!tw_watched(&g.w, g.devfd, NULL)); /* in debt again: 599 bytes and 1 */
	tt_now = 801 * TT_MS;
	tt_fire(&g.w, thr());
	ck_assert(tw_watched(&g.w, g.devfd, NULL)); /* read it empty: waits on it again */
}
END_TEST

/* A driver that breaks its tx ring behind a held frame: the timer sends the
 * frame, the broken chain breaks tx only; rx goes on. */
START_TEST(tx_broken_chain_under_throttling)
{
	uint8_t f[TF_MAX];

	tx_lim = (struct tvm_rate_limit){ .ops = { .size = 1 } };
	tn_start(&g, NULL, ALL_FEATURES);
	udp_frame(f, 100);
	tx(f, 100);
	tx(f, 100);
	expect_arrives(f, 100);
	expect_nothing_sent();
	td_vq_post(&g.d, &g.tx, NQ + 5); /* head out of the table */
	virtio_mmio_notify(&g.t, NET_TXQ);
	ck_assert(!g.t.vqs[NET_TXQ].broken);
	tt_now = 1 * TT_S;
	tt_fire(&g.w, thr());
	expect_arrives(f, 100);
	ck_assert(g.t.vqs[NET_TXQ].broken);
	ck_assert(!g.t.vqs[NET_RXQ].broken);
	ck_assert(td_rd(&g.t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	rx_post(0, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	pattern(f, 60, 9);
	peer_send(f, 60);
	tw_settle(&g.w);
	expect_rx_frame(f, 60, 1);
}
END_TEST

/* The limiters' state goes into the device's blob; a device given no
 * limits adopts them (the debt too). */
START_TEST(limits_saved_and_restored)
{
	uint8_t f[TF_MAX], blob[512];
	struct virtio_net *n2;
	struct net_opts o = { .id = 1, .io = { tw_watch, tw_unwatch, tw_kick, &g.w }, .clock = tt_clock };
	int sv[2];
	long len;

	tn_start(&g, NULL, ALL_FEATURES);
	ck_assert_int_eq(virtio_net_ops.save(g.n, blob, sizeof(blob)), 0);
	tn_stop(&g);
	tx_lim = (struct tvm_rate_limit){ .bytes = { .size = 100 } };
	tn_start(&g, NULL, ALL_FEATURES);
	udp_frame(f, 300);
	tx(f, 300); /* 200 bytes owed: 2 s */
	expect_arrives(f, 300);
	len = virtio_net_ops.save(g.n, blob, sizeof(blob));
	ck_assert_int_eq(len, 8 + 2 * LIMITER_STATE_LEN);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	o.fd = sv[0];
	ck_assert_int_eq(virtio_net_open(&n2, &o, NULL), 0);
	ck_assert_int_eq(virtio_net_ops.restore(n2, blob, (size_t)len), 0);
	ck_assert_int_eq(virtio_net_ops.restore(n2, blob, (size_t)len - 8), -EINVAL);
	ck_assert_uint_eq(virtio_net_ops.throttle(n2)->lim[NET_TXQ].bytes.debt, 200);
	ck_assert(virtio_net_ops.throttle(n2)->fd >= 0);
	virtio_net_close(n2);
	close(sv[1]);
}
END_TEST

START_TEST(backend_eof)
{
	uint8_t f[60];

	tn_start(&g, NULL, ALL_FEATURES);
	rx_post(0, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	close(g.peer);
	g.peer = -1;
	tw_settle(&g.w);
	ck_assert(stats().backend_down);
	ck_assert_int_eq(g.w.n, 0);
	memset(f, 0, sizeof(f));
	memcpy(f + 6, g.mac, 6);
	tx(f, sizeof(f));
	ck_assert_uint_eq(stats().drops[NET_DROP_BACKEND], 1);
	expect_tx_completed();
}
END_TEST

START_TEST(open_errors)
{
	struct net_opts o = { .fd = -1 };
	struct virtio_net *n = (void *)1;
	struct tvm_err e = { 0 };
	struct tw w = { 0 };

	ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
	ck_assert_ptr_null(n);
	ck_assert_str_eq(e.msg, "net: watch, unwatch and kick ops are required");
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &w };
	o.mtu = 67;
	ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "net: mtu 67: must be 68..9000");
	o.mtu = 0;
	o.mac[0] = 0x03;
	ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "net: mac 03:00:00:00:00:00: multicast");
	o.mac[0] = 0;
	o.tap_name = "a-name-much-too-long-for-ifnamsiz";
	ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "net tap a-name-much-too-long-for-ifnamsiz: name must be 1..15 characters");
	if (access("/dev/net/tun", R_OK | W_OK) == 0) {
		o.tap_name = "lo"; /* exists, not a TAP */
		ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
		ck_assert_str_eq(e.msg,
				 "net tap lo: TUNSETIFF: Invalid argument (an existing device that is not a TAP?)");
	}
}
END_TEST

START_TEST(mac_and_mtu_options)
{
	struct net_opts o = { .fd = -1, .mac = { 0x52, 0x54, 0, 1, 2, 3 }, .mtu = 9000 };
	struct virtio_net *n;
	struct virtio_mmio t;
	struct td d;
	struct tw w = { 0 };
	uint8_t cfg[12], mac[6];
	int sv[2];

	net_mac_from_id(0x01020304, mac);
	ck_assert_mem_eq(mac, ((uint8_t[]){ 0x02, 0x74, 0x76, 0x02, 0x03, 0x04 }), 6);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	o.fd = sv[0];
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &w };
	ck_assert_int_eq(virtio_net_open(&n, &o, NULL), 0);
	td_init(&d, NQ);
	ck_assert_int_eq(virtio_mmio_init(&t, &virtio_net_ops, n, &d.mem, td_count_irq, &d, NULL), 0);
	for (unsigned i = 0; i < sizeof(cfg); i++)
		virtio_mmio_io(&t, 0x100 + i, &cfg[i], 1, false);
	ck_assert_mem_eq(cfg, o.mac, 6);
	ck_assert_uint_eq(cfg[10] | cfg[11] << 8, 9000);
	virtio_mmio_destroy(&t);
	virtio_net_close(n);
	close(sv[1]);
	td_fini(&d);
}
END_TEST

/* ---- threads: the real event loop runs the device while this thread is
 * the guest on a vCPU (posting, notifying, reaping) ---- */

#define NFRAMES 3000

struct loop_ctx {
	struct event_loop l;
	struct virtio_mmio *t;
};

static int loop_watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg)
{
	return ev_add(&((struct loop_ctx *)ctx)->l, fd, events, cb, arg, NULL);
}

static void loop_unwatch(void *ctx, int fd)
{
	ev_del(&((struct loop_ctx *)ctx)->l, fd);
}

static void loop_kick(void *ctx, unsigned q)
{
	virtio_mmio_notify(((struct loop_ctx *)ctx)->t, q);
}

/* The "TAP" sends NFRAMES numbered frames, blocking when the device does
 * not read. */
static void *sender(void *arg)
{
	uint8_t f[NET_HDR_LEN + 200] = { 0 };

	(void)arg;
	for (uint32_t i = 0; i < NFRAMES; i++) {
		size_t len = NET_HDR_LEN + 60 + i % 140;

		memcpy(f + NET_HDR_LEN + 14, &i, sizeof(i));
		if (send(g.peer, f, len, 0) != (ssize_t)len)
			return (void *)1;
	}
	return NULL;
}

/* Guest-side ring accesses with the barriers a driver uses (the device
 * runs on another thread). */
static void post_fenced(struct td_vq *q, uint16_t head)
{
	td_put16(&g.d, q->avail + 4 + 2ull * (q->avail_idx % q->size), head);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	td_put16(&g.d, q->avail + 2, ++q->avail_idx);
}

static bool take_fenced(struct td_vq *q, uint32_t *id, uint32_t *len)
{
	if (__atomic_load_n((uint16_t *)td_ptr(&g.d, q->used + 2), __ATOMIC_ACQUIRE) == q->last_used)
		return false;
	td_used_at(&g.d, q->used, q->size, q->last_used++, id, len);
	return true;
}

START_TEST(threads_event_loop)
{
	static struct loop_ctx c;
	struct net_opts o = { .id = 1 };
	pthread_t th;
	void *ret;
	uint32_t next = 0, id, len;
	uint8_t f[TF_MAX];
	size_t n;
	int sv[2];

	memset(&g, 0, sizeof(g));
	td_init(&g.d, NQ);
	ck_assert_int_eq(ev_init(&c.l, NULL), 0);
	c.t = &g.t;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	o.fd = g.devfd = sv[0];
	g.peer = sv[1];
	o.io = (struct fd_watch_ops){ loop_watch, loop_unwatch, loop_kick, &c };
	ck_assert_int_eq(virtio_net_open(&g.n, &o, NULL), 0);
	net_mac_from_id(1, g.mac);
	ck_assert_int_eq(virtio_mmio_init(&g.t, &virtio_net_ops, g.n, &g.d.mem, td_count_irq, &g.d, NULL), 0);
	tn_driver_start(&g, ALL_FEATURES);
	ck_assert_int_eq(ev_start(&c.l, NULL), 0);
	for (unsigned i = 0; i < 16; i++) {
		td_vq_desc(&g.d, &g.rx, i, RXBUFS + i * RXSTRIDE, 1536, VRING_DESC_F_WRITE, 0);
		post_fenced(&g.rx, (uint16_t)i);
	}
	virtio_mmio_notify(&g.t, NET_RXQ);
	ck_assert_int_eq(pthread_create(&th, NULL, sender, NULL), 0);
	n = udp_frame(f, 60);
	memcpy(td_ptr(&g.d, TXBUFS), &zero_hdr, NET_HDR_LEN);
	memcpy(td_ptr(&g.d, TXBUFS + NET_HDR_LEN), f, n);
	for (int spins = 0; next < NFRAMES && spins < 20000000; spins++) {
		if (!take_fenced(&g.rx, &id, &len)) {
			if (spins % 64 == 0) { /* now and then a tx frame, from this "vCPU" */
				td_vq_desc(&g.d, &g.tx, 0, TXBUFS, (uint32_t)(NET_HDR_LEN + n), 0, 0);
				post_fenced(&g.tx, 0);
				virtio_mmio_notify(&g.t, NET_TXQ);
			}
			sched_yield();
			continue;
		}
		ck_assert_uint_eq(len, NET_HDR_LEN + 60 + next % 140);
		ck_assert_mem_eq(td_ptr(&g.d, RXBUFS + id * RXSTRIDE + NET_HDR_LEN + 14), &next, sizeof(next));
		next++;
		post_fenced(&g.rx, (uint16_t)id);
		virtio_mmio_notify(&g.t, NET_RXQ);
	}
	ck_assert_uint_eq(next, NFRAMES);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	ev_stop(&c.l);
	ck_assert_uint_eq(stats().rx_frames, NFRAMES);
	ck_assert_uint_eq(stats().rx_dropped, 0);
	ev_destroy(&c.l);
	tn_stop(&g);
	g.n = NULL;
}
END_TEST

/* ---- a real TAP in a network namespace of our own ---- */

static uint16_t ip_csum(const uint8_t *p, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Address, netmask and up for ifname: the host side of the link. */
static void host_if_setup(const char *ifname, uint8_t hwaddr[6])
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(s, 0);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "10.9.0.1", &sin->sin_addr);
	ck_assert_int_eq(ioctl(s, SIOCSIFADDR, &ifr), 0);
	inet_pton(AF_INET, "255.255.255.0", &sin->sin_addr);
	ck_assert_int_eq(ioctl(s, SIOCSIFNETMASK, &ifr), 0);
	ck_assert_int_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	ck_assert_int_eq(ioctl(s, SIOCSIFFLAGS, &ifr), 0);
	ck_assert_int_eq(ioctl(s, SIOCGIFHWADDR, &ifr), 0);
	memcpy(hwaddr, ifr.ifr_hwaddr.sa_data, 6);
	close(s);
}

/* A UDP datagram 10.9.0.2 -> 10.9.0.1:port from the guest's MAC to dst. */
static size_t host_udp_frame(uint8_t *f, const uint8_t dst[6], uint16_t port, const char *payload)
{
	size_t plen = strlen(payload), n = tf_udp4(f, "10.9.0.1", port, plen);

	memcpy(f, dst, 6);
	memcpy(f + 6, g.mac, 6);
	inet_pton(AF_INET, "10.9.0.2", f + 14 + 12);
	tf_be16(f + 14 + 10, 0);
	tf_be16(f + 14 + 10, ip_csum(f + 14, 20));
	memcpy(f + 42, payload, plen);
	return n;
}

/* Tcp OutRsts of this network namespace (/proc/net/snmp). */
static long tcp_out_rsts(void)
{
	char names[1024], vals[1024], *ns, *vs, *n, *v;
	FILE *f = fopen("/proc/net/snmp", "r");
	long r = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(names, sizeof(names), f) && fgets(vals, sizeof(vals), f)) {
		if (strncmp(names, "Tcp:", 4))
			continue;
		for (n = strtok_r(names, " \n", &ns), v = strtok_r(vals, " \n", &vs); n && v;
		     n = strtok_r(NULL, " \n", &ns), v = strtok_r(NULL, " \n", &vs))
			if (!strcmp(n, "OutRsts"))
				r = atol(v);
	}
	fclose(f);
	ck_assert_int_ge(r, 0);
	return r;
}

/* Over a real TAP the offloads are offered, and what the guest may ask of
 * them reaches the host: a UDP checksum left to the host (NEEDS_CSUM) and
 * a 3000-byte TCP send for the host to cut into segments (GSO). s is a UDP
 * socket bound to 10.9.0.1:5000, hw the TAP's MAC. */
static void tap_offloads(int s, const uint8_t hw[6])
{
	struct virtio_net_hdr_v1 h = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
				       .csum_start = htole16(34),
				       .csum_offset = htole16(6) };
	static uint8_t f[3000];
	uint8_t got[16];
	size_t l4;

	long rsts;

	ck_assert_uint_eq(td_device_features(&g.t) & NET_OFFLOAD_FEATURES, NET_OFFLOAD_FEATURES);
	/* A checksum field no host would accept as complete: it arrives only
	 * if NEEDS_CSUM reached the TAP. */
	l4 = host_udp_frame(f, hw, 5000, "sum");
	tf_be16(f + 34 + 6, 0x1234);
	tx_post(&h, f, l4, 1, false);
	ck_assert_int_eq(recv(s, got, sizeof(got), 0), 3);
	ck_assert_mem_eq(got, "sum", 3);

	l4 = tf_ip4(f, tf_eth(f, ETH_P_IP, false), IPPROTO_TCP, "10.9.0.1", 5, sizeof(f) - 34, 0x4000);
	tf_tcp(f, l4, 7, 5);
	memcpy(f, hw, 6);
	memcpy(f + 6, g.mac, 6);
	inet_pton(AF_INET, "10.9.0.2", f + 14 + 12);
	tf_be16(f + 14 + 10, ip_csum(f + 14, 20));
	h = (struct virtio_net_hdr_v1){ .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
					.gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
					.hdr_len = htole16(54),
					.gso_size = htole16(1000),
					.csum_start = htole16(34),
					.csum_offset = htole16(16) };
	/* Port 7 has no listener: the host's TCP answers the segment with a
	 * reset, which it does only if it took the (unfilled) checksum as
	 * the offload header said. */
	rsts = tcp_out_rsts();
	tx_post(&h, f, sizeof(f), 3, false);
	for (int i = 0; i < 100 && tcp_out_rsts() == rsts; i++)
		usleep(20000);
	ck_assert_int_eq(tcp_out_rsts(), rsts + 1);
	ck_assert_uint_eq(stats().drops[NET_DROP_BACKEND], 0);
	ck_assert_uint_eq(stats().drops[NET_DROP_VNET_HDR], 0);
	ck_assert_uint_eq(stats().tx_frames, 3); /* hello, sum, and the TCP send */
	ck_assert_uint_eq(stats().tx_bytes, 42 + 5 + 42 + 3 + sizeof(f));
}

/* A TAP opened elsewhere must carry 12-byte virtio-net headers: one
 * without IFF_VNET_HDR would have the kernel read the frame from where the
 * header is, bytes the filter never looked at. */
START_TEST(given_tap_fd_checked)
{
	struct net_opts o = { .id = 1, .io = { tw_watch, tw_unwatch, tw_kick, &g.w } };
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
	struct tvm_err e = { 0 };
	struct virtio_net *n;
	int fd;

	if (unshare(CLONE_NEWNET) != 0) {
		fprintf(stderr, "given_tap_fd_checked: skipped (unshare(CLONE_NEWNET): %s)\n", strerror(errno));
		return;
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	strcpy(ifr.ifr_name, "tvmplain0");
	ck_assert_int_eq(ioctl(fd, TUNSETIFF, &ifr), 0);
	o.fd = fd;
	ck_assert_int_eq(virtio_net_open(&n, &o, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "IFF_VNET_HDR"));
	close(fd);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	ifr = (struct ifreq){ .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	strcpy(ifr.ifr_name, "tvmgood0");
	ck_assert_int_eq(ioctl(fd, TUNSETIFF, &ifr), 0);
	o.fd = fd;
	ck_assert_msg(virtio_net_open(&n, &o, &e) == 0, "%s", e.msg);
	ck_assert_str_eq(virtio_net_ifname(n), "tvmgood0");
	virtio_net_close(n);
}
END_TEST

START_TEST(real_tap_in_netns)
{
	struct net_policy p;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(5000) };
	struct timeval tv = { .tv_sec = 2 };
	uint8_t f[TF_MAX], hw[6], got[64];
	bool arp = false;
	int s;

	if (unshare(CLONE_NEWNET) != 0) {
		fprintf(stderr, "real_tap_in_netns: skipped (unshare(CLONE_NEWNET): %s)\n", strerror(errno));
		return;
	}
	net_policy_init(&p);
	ck_assert_int_eq(net_policy_add_rule(&p, "10.9.0.1:5000/udp", NULL), 0);
	ck_assert_int_eq(net_policy_add_rule(&p, "10.9.0.1:7/tcp", NULL), 0);
	tn_start_backend(&g, &p, ALL_FEATURES, true);
	ck_assert_str_eq(virtio_net_ifname(g.n), "tvm0");
	host_if_setup("tvm0", hw);
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	inet_pton(AF_INET, "10.9.0.1", &a.sin_addr);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	/* Guest -> host: the allowed datagram arrives, the other port does not. */
	tx(f, host_udp_frame(f, hw, 5001, "denied"));
	tx(f, host_udp_frame(f, hw, 5000, "hello"));
	ck_assert_int_eq(recv(s, got, sizeof(got), 0), 5);
	ck_assert_mem_eq(got, "hello", 5);
	ck_assert_uint_eq(stats().drops[NET_DROP_POLICY], 1);
	tap_offloads(s, hw);
	/* Host -> guest: a datagram to 10.9.0.2 makes the host ARP for it. */
	for (unsigned i = 0; i < 8; i++)
		rx_post(i, 1536);
	virtio_mmio_notify(&g.t, NET_RXQ);
	a.sin_addr.s_addr = htonl(0x0a090002);
	a.sin_port = htons(6000);
	ck_assert_int_eq(sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
	/* The host's own IPv6 autoconfiguration (MLD, DAD) may come first:
	 * give those buffers back and wait for the ARP request. */
	for (int i = 0; i < 100 && !arp; i++) {
		uint32_t id, len;

		tw_round(&g.w, 20);
		while (!arp && rx_take(&id, &len)) {
			const uint8_t *b = td_ptr(&g.d, RXBUFS + id * RXSTRIDE);

			ck_assert_uint_ge(len, NET_HDR_LEN + NET_ETH_HLEN);
			ck_assert_mem_eq(b + NET_HDR_LEN + 6, hw, 6);
			arp = (b[NET_HDR_LEN + 12] << 8 | b[NET_HDR_LEN + 13]) == ETH_P_ARP;
			if (arp)
				ck_assert_uint_ge(len, NET_HDR_LEN + 42);
			rx_post(id, 1536);
			virtio_mmio_notify(&g.t, NET_RXQ);
		}
	}
	ck_assert_msg(arp, "no ARP request from the host");
	close(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtio_net");
	TCase *tc = tcase_create("virtio_net");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, config_space);
	tcase_add_test(tc, tx_good_frames_byte_exact);
	tcase_add_test(tc, tx_size_limits);
	tcase_add_test(tc, tx_bad_vnet_header);
	tcase_add_test(tc, tx_unused_header_fields_not_passed_on);
	tcase_add_test(tc, tx_policy_drops);
	tcase_add_test(tc, tx_long_frame_split_head);
	tcase_add_test(tc, tx_hostile_chains);
	tcase_add_test(tc, rx_frame_delivered);
	tcase_add_test(tc, rx_replies_only);
	tcase_add_test(tc, save_unpops_held_rx_chains);
	tcase_add_test(tc, save_completes_held_chains_around_a_bad_one);
	tcase_add_test(tc, rx_no_buffers_no_read);
	tcase_add_test(tc, rx_mergeable_spans_buffers);
	tcase_add_test(tc, rx_without_mrg);
	tcase_add_test(tc, rx_size_limits);
	tcase_add_test(tc, rx_tiny_buffers);
	tcase_add_test(tc, rx_hostile_chains);
	tcase_add_test(tc, reset_drops_held_and_unwatches);
	tcase_add_test(tc, backend_eof);
	tcase_add_test(tc, tx_limit_holds_frames_on_ring);
	tcase_add_test(tc, rx_limit_defers_reading);
	tcase_add_test(tc, tx_broken_chain_under_throttling);
	tcase_add_test(tc, limits_saved_and_restored);
	tcase_add_test(tc, open_errors);
	tcase_add_test(tc, mac_and_mtu_options);
	tcase_add_test(tc, threads_event_loop);
	tcase_add_test(tc, real_tap_in_netns);
	tcase_add_test(tc, given_tap_fd_checked);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
