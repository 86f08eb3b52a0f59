/* libFuzzer target: a hostile driver and backend against virtio-mmio +
 * virtqueue + virtio-net. The input is a program for a small interpreter:
 * a header choosing the policy, features and ring layout of both queues,
 * then operations that poke guest memory, write descriptors, post chains
 * on either queue, notify, access registers, make the backend (a
 * SOCK_SEQPACKET socketpair standing in for the TAP) send a frame, and run
 * the fd callbacks. Guest RAM is 64 KiB.
 *
 * Header byte 0: bit 0 picks the policy (allow all, or an allow-list),
 * bit 1 has the device offer checksum/segmentation offload as over a TAP,
 * bit 3 sets rx and tx rate limits (fuzz_limit, on the input's clock).
 *
 * Beyond crashes (ASan/UBSan), it checks every frame that reaches the
 * backend: its virtio-net header is one net_offload_check_tx passes
 * unchanged for the negotiated features (all zero without offloads), the
 * frame is 14..MTU+18 bytes (64 KiB + 18 with GSO), and under an
 * allow-list its source MAC is the device's and the filter passes it
 * (nothing the guest does gets a denied frame out).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/net/net_offload.h"
#include "devices/net/virtio_net.h"
#include "tests/test_virtio_vsock_loop.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_mmio.h"

static struct net_policy pol[2];

static void init_once(void)
{
	net_policy_init(&pol[0]);
	net_policy_init(&pol[1]);
	net_policy_add_rule(&pol[1], "10.0.0.0/8:53/udp", NULL);
	net_policy_add_rule(&pol[1], "[2001:db8::/32]:443", NULL);
}

struct drv {
	struct virtio_mmio *t;
	struct virtio_net *n;
	struct fuzz_ring q[2];
	int peer;
	const struct net_policy *p;
	uint8_t mac[6];
};

/* Every frame the device sent to the backend obeys the policy, and its
 * header is one the offload check passes unchanged (so: nothing the guest
 * did not negotiate, nothing pointing past the frame). */
static void check_sent(struct drv *d)
{
	static uint8_t buf[NET_HDR_LEN + NET_GSO_MAX_FRAME + 64];
	struct virtio_net_hdr_v1 h, again;
	ssize_t n;

	while ((n = recv(d->peer, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
		size_t len = (size_t)n - NET_HDR_LEN;
		const uint8_t *f = buf + NET_HDR_LEN;
		uint32_t limit;

		if ((size_t)n < NET_HDR_LEN + NET_ETH_HLEN)
			abort();
		limit = NET_DEFAULT_MTU + NET_ETH_HLEN + (f[12] == 0x81 && f[13] == 0 ? NET_VLAN_HLEN : 0);
		memcpy(&h, buf, sizeof(h));
		if (net_offload_check_tx(&h, d->t->acked, f, len < NET_INSPECT_MAX ? len : NET_INSPECT_MAX, len, limit,
					 &again) != NET_PASS ||
		    memcmp(&h, &again, sizeof(h)))
			abort();
		if (d->p->restricted && (memcmp(f + 6, d->mac, 6) || net_filter(d->p, f, len, len) != NET_PASS))
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
	fuzz_poke(at, buf, len);
}

static void step(struct drv *d, struct in *in, uint64_t features, struct tw *w)
{
	uint8_t op = take(in, 1);

	switch (op % 10) {
	case 0: fuzz_poke_raw(in); break;
	case 1: fuzz_poke_desc(in, d->q, 2, 2048); break;
	case 2: tx_frame(d, in); break;
	case 3: fuzz_post_head(in, d->q, 2); break;
	case 4: { /* notify (queue 2 does not exist), or time passes for the limiters */
		unsigned q = take(in, 1) % 3;
		const struct vq_throttle *th = virtio_net_ops.throttle(d->n);
		int i = 0;

		if (q < 2) {
			virtio_mmio_notify(d->t, q);
			break;
		}
		while (i < w->n && w->e[i].fd != th->fd)
			i++;
		fuzz_tick(in, th, i < w->n ? w->e[i].cb : NULL, i < w->n ? w->e[i].arg : NULL);
		break;
	}
	case 5: /* any register access, any width */ fuzz_mmio_access(in, d->t); break;
	case 6: fuzz_driver_init(d->t, features, d->q, 2); break;
	case 7: { /* the backend sends a frame */
		static uint8_t buf[NET_HDR_LEN + 4096];
		uint16_t len = take(in, 2) % sizeof(buf);

		memset(buf, take(in, 1), len);
		for (unsigned i = 0; i < 16 && i < len; i++)
			buf[i] = take(in, 1);
		(void)!send(d->peer, buf, len, MSG_DONTWAIT);
		break;
	}
	case 8: tw_round(w, 0); break;
	case 9: fuzz_event_idx(in, d->q, 2); break;
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

	if (!pol[1].nr)
		init_once();
	fuzz_ram_init();
	memset(&w, 0, sizeof(w));
	if (gm_init_buffer(&mem, fuzz_ram, FUZZ_RAM, NULL) || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		abort();
	mode = take(&in, 1);
	d.p = &pol[mode & 1];
	for (unsigned q = 0; q < 2; q++)
		fuzz_ring_take(&in, &d.q[q]);
	features = (uint32_t)take(&in, 4) | ((uint64_t)take(&in, 1) << 32);
	o.fd = sv[0];
	o.fd_offload = mode & 2; /* the socket takes offload headers, as a TAP would */
	o.policy = d.p;
	o.ingress_replies = mode & 16; /* rx frames looked at too */
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &w };
	if (mode & 8) {
		o.rx_limit = o.tx_limit = fuzz_limit;
		o.clock = fuzz_clock;
		fuzz_ns = 0;
	}
	d.peer = sv[1];
	net_mac_from_id(7, d.mac);
	if (virtio_net_open(&n, &o, NULL))
		abort();
	d.n = n;
	w.t = &t;
	if (virtio_mmio_init(&t, &virtio_net_ops, n, &mem, NULL, NULL, NULL))
		abort();
	fuzz_driver_init(&t, features, d.q, 2);
	while (in.n && steps++ < 512)
		step(&d, &in, features, &w);
	virtio_mmio_destroy(&t);
	virtio_net_close(n);
	close(sv[1]);
	return 0;
}
