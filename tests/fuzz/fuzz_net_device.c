/* libFuzzer target: a hostile driver and backend against virtio-mmio +
 * virtqueue + virtio-net. The input is a program for a small interpreter:
 * a header choosing the policy, features and ring layout of both queues,
 * then operations that poke guest memory, write descriptors, post chains
 * on either queue, notify, access registers, make the backend (a
 * SOCK_SEQPACKET socketpair standing in for the TAP) send a frame, and run
 * the fd callbacks. Guest RAM is 64 KiB.
 *
 * Beyond crashes (ASan/UBSan), it checks every frame that reaches the
 * backend: the virtio-net header is all zero, the frame is 14..MTU+18
 * bytes, and under an allow-list its source MAC is the device's and the
 * filter passes it (nothing the guest does gets a denied frame out).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/virtio_net.h"
#include "tests/test_virtio_vsock_loop.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_mmio.h"

#define RAM (64 * 1024)

static uint8_t *ram;
static struct net_policy pol[2];

static void init_once(void)
{
	ram = aligned_alloc(4096, RAM);
	if (!ram)
		abort();
	net_policy_init(&pol[0]);
	net_policy_init(&pol[1]);
	net_policy_add_rule(&pol[1], "10.0.0.0/8:53/udp", NULL);
	net_policy_add_rule(&pol[1], "[2001:db8::/32]:443", NULL);
}

struct ring {
	uint16_t qsize;
	uint32_t desc, avail, used; /* GPAs chosen by the input */
	uint16_t avail_idx;
};

struct drv {
	struct virtio_mmio *t;
	struct ring q[2];
	int peer;
	const struct net_policy *p;
	uint8_t mac[6];
};

static void reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };

	virtio_mmio_io(t, off, b, 4, true);
}

static uint32_t reg_rd(struct virtio_mmio *t, uint64_t off)
{
	uint8_t b[4];

	virtio_mmio_io(t, off, b, 4, false);
	return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The driver init sequence of spec 3.1.1 with the input's choices. */
static void driver_init(struct drv *d, uint64_t features)
{
	struct virtio_mmio *t = d->t;
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

	uint64_t offered;

	reg(t, VIRTIO_MMIO_STATUS, 0);
	reg(t, VIRTIO_MMIO_STATUS, s);
	/* Mostly what a driver does: ack a subset of the offer. */
	reg(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	offered = (uint64_t)reg_rd(t, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
	reg(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	offered |= reg_rd(t, VIRTIO_MMIO_DEVICE_FEATURES);
	if (!(features & (1ULL << 39)))
		features &= offered;
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES, features >> 32);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	reg(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK);
	for (unsigned q = 0; q < 2; q++) {
		reg(t, VIRTIO_MMIO_QUEUE_SEL, q);
		reg(t, VIRTIO_MMIO_QUEUE_NUM, d->q[q].qsize);
		reg(t, VIRTIO_MMIO_QUEUE_DESC_LOW, d->q[q].desc);
		reg(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, d->q[q].avail);
		reg(t, VIRTIO_MMIO_QUEUE_USED_LOW, d->q[q].used);
		reg(t, VIRTIO_MMIO_QUEUE_READY, 1);
		d->q[q].avail_idx = 0;
	}
	reg(t, VIRTIO_MMIO_STATUS, reg_rd(t, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* Write bytes into guest RAM the way the guest would, clipped to RAM. */
static void poke(uint64_t gpa, const void *src, size_t len)
{
	if (gpa < RAM && len <= RAM - gpa)
		memcpy(ram + gpa, src, len);
}

/* Every frame the device sent to the backend obeys the policy. */
static void check_sent(struct drv *d)
{
	static uint8_t buf[NET_HDR_LEN + 65536];
	static const uint8_t zero[NET_HDR_LEN];
	ssize_t n;

	while ((n = recv(d->peer, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
		size_t len = (size_t)n - NET_HDR_LEN;

		if ((size_t)n < NET_HDR_LEN || memcmp(buf, zero, NET_HDR_LEN) || len < NET_ETH_HLEN ||
		    len > NET_DEFAULT_MTU + NET_ETH_HLEN + NET_VLAN_HLEN)
			abort();
		if (d->p->restricted &&
		    (memcmp(buf + NET_HDR_LEN + 6, d->mac, 6) || net_filter(d->p, buf + NET_HDR_LEN, len, len) != NET_PASS))
			abort();
	}
}

/* A frame for the guest's tx: header (mostly zero), then an Ethernet
 * frame from our MAC, mostly IPv4 UDP towards 10.x, tail from the input. */
static void tx_frame(struct drv *d, struct in *in)
{
	uint8_t buf[256] = { 0 };
	uint16_t at = take(in, 2);
	uint8_t len = take(in, 1), mode = take(in, 1);
	uint8_t *f = buf + NET_HDR_LEN;

	if (mode & 1)
		buf[take(in, 1) % NET_HDR_LEN] = take(in, 1);
	memset(f, 0xff, 6);
	memcpy(f + 6, d->mac, 6);
	f[12] = 0x08;
	f[14] = 0x45;
	f[16] = 0;
	f[17] = 28;
	f[23] = 17;
	f[30] = 10;
	f[36] = 0;
	f[37] = 53;
	f[39] = 8;
	for (unsigned i = NET_HDR_LEN + 14 + (mode & 2 ? 0 : 28); i < sizeof(buf) && in->n && (mode & 4); i++)
		buf[i] = take(in, 1);
	poke(at, buf, len);
}

static void step(struct drv *d, struct in *in, uint64_t features, struct tw *w)
{
	uint8_t op = take(in, 1);

	switch (op % 10) {
	case 0: { /* raw bytes */
		uint16_t at = take(in, 2);
		uint8_t len = take(in, 1) % 33, buf[32];

		for (unsigned i = 0; i < len; i++)
			buf[i] = take(in, 1);
		poke(at, buf, len);
		break;
	}
	case 1: { /* descriptor i of a queue's table; addresses mostly in RAM */
		struct ring *r = &d->q[take(in, 1) & 1];
		uint16_t i = take(in, 1);
		struct vring_desc v;

		v.addr = take(in, 1) & 0x80 ? take(in, 8) : take(in, 2);
		v.len = take(in, 1) & 0x80 ? take(in, 4) : take(in, 2) % 2048;
		v.flags = take(in, 1) & 7;
		v.next = take(in, 1);
		poke(r->desc + 16ull * i, &v, sizeof(v));
		break;
	}
	case 2:
		tx_frame(d, in);
		break;
	case 3: { /* post a head */
		struct ring *r = &d->q[take(in, 1) & 1];
		uint16_t head = take(in, 1) & 0x80 ? take(in, 2) : take(in, 1) % (r->qsize ? r->qsize : 1);

		if (r->qsize) {
			poke(r->avail + 4 + 2ull * (r->avail_idx % r->qsize), &head, 2);
			r->avail_idx++;
			poke(r->avail + 2, &r->avail_idx, 2);
		}
		break;
	}
	case 4:
		virtio_mmio_notify(d->t, take(in, 1) % 3);
		break;
	case 5: /* any register access, any width */
		fuzz_mmio_access(in, d->t);
		break;
	case 6:
		driver_init(d, features);
		break;
	case 7: { /* the backend sends a frame */
		static uint8_t buf[NET_HDR_LEN + 4096];
		uint16_t len = take(in, 2) % sizeof(buf);

		memset(buf, take(in, 1), len);
		for (unsigned i = 0; i < 16 && i < len; i++)
			buf[i] = take(in, 1);
		(void)!send(d->peer, buf, len, MSG_DONTWAIT);
		break;
	}
	case 8:
		tw_round(w, 0);
		break;
	case 9: { /* event index fields and flags */
		struct ring *r = &d->q[take(in, 1) & 1];
		uint16_t v = take(in, 2);

		if (r->qsize)
			poke(r->avail + 4 + 2ull * r->qsize, &v, 2);
		poke(r->avail, &v, 2);
		break;
	}
	}
	check_sent(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct guest_mem mem;
	struct virtio_mmio t;
	struct virtio_net *n;
	struct drv d = { .t = &t };
	struct net_opts o = { .id = 7 };
	static struct tw w;
	uint64_t features;
	uint8_t mode;
	int sv[2], steps = 0;

	if (!ram)
		init_once();
	memset(ram, 0, RAM);
	memset(&w, 0, sizeof(w));
	if (gm_init_buffer(&mem, ram, RAM, NULL) || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		abort();
	mode = take(&in, 1);
	d.p = &pol[mode & 1];
	for (unsigned q = 0; q < 2; q++) {
		uint8_t qs = take(&in, 1);

		d.q[q].qsize = qs < 0xf0 ? 1u << (qs % 9) : qs & 0xf;
		d.q[q].desc = take(&in, 2);
		d.q[q].avail = take(&in, 2);
		d.q[q].used = take(&in, 2);
	}
	features = (uint32_t)take(&in, 4) | ((uint64_t)take(&in, 1) << 32);
	o.fd = sv[0];
	o.policy = d.p;
	o.io = (struct vsock_watch_ops){ tw_watch, tw_unwatch, tw_kick, &w };
	d.peer = sv[1];
	net_mac_from_id(7, d.mac);
	if (virtio_net_open(&n, &o, NULL))
		abort();
	w.t = &t;
	if (virtio_mmio_init(&t, &virtio_net_ops, n, &mem, NULL, NULL, NULL))
		abort();
	driver_init(&d, features);
	while (in.n && steps++ < 512)
		step(&d, &in, features, &w);
	virtio_mmio_destroy(&t);
	virtio_net_close(n);
	close(sv[1]);
	return 0;
}
