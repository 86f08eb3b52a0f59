/* libFuzzer target for the virtio-net offload checks (devices/net/net_offload.c):
 * the tx header check the device runs on every guest frame, and the rx
 * header rewrite.
 *
 * Input: a 12-byte struct virtio_net_hdr_v1, one byte of offload features
 * (bit i: the i-th feature of NET_OFFLOAD_FEATURES, low to high), three
 * bytes of extra frame length, two bytes the host's checksum fill-in
 * writes, then the frame's first bytes (at most NET_INSPECT_MAX are
 * inspected, from a buffer of exactly that size so ASan flags any read
 * past it). Beyond "no crash", checks that a header passed on asks for
 * nothing that was not negotiated, that whatever the host writes as the
 * checksum leaves the flow the filter saw unchanged, that GSO segments fit
 * the MTU, and that a rewritten rx header claims only negotiated offloads. */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "devices/net/net_offload.h"
#include "tests/fuzz/fuzz_input.h"

#define F(bit) (1ULL << (bit))
#define MAX_FRAME 1518u

static uint64_t pick_features(uint8_t sel)
{
	uint64_t all = NET_OFFLOAD_FEATURES, out = 0;

	for (unsigned i = 0; all; i++) {
		uint64_t low = all & -all;

		if (sel & (1u << i))
			out |= low;
		all &= ~low;
	}
	return out;
}

/* What the host's checksum fill-in may do: write 16 bits of its choosing
 * at csum_start + csum_offset. The filter must see the same flow after. */
static void check_fill_in(const struct virtio_net_hdr_v1 *out, const uint8_t *f, size_t cap, size_t len, uint16_t sum)
{
	size_t at = (size_t)le16toh(out->csum_start) + le16toh(out->csum_offset);
	struct net_flow a, b;
	uint8_t *g;

	if (net_frame_parse(f, cap, len, &a) != NET_PASS || at + 2 > len)
		abort();
	if (at + 2 > cap)
		return; /* beyond what the filter reads */
	g = malloc(cap);
	memcpy(g, f, cap);
	memcpy(g + at, &sum, 2);
	if (net_frame_parse(g, cap, len, &b) != NET_PASS || memcmp(&a, &b, sizeof(a)))
		abort();
	free(g);
}

static void check_tx(const struct virtio_net_hdr_v1 *h, uint64_t feat, const uint8_t *f, size_t cap, size_t len,
		     uint16_t sum)
{
	struct virtio_net_hdr_v1 out;
	enum net_verdict v = net_offload_check_tx(h, feat, f, cap, len, MAX_FRAME, &out);

	if (v != NET_PASS)
		return;
	if (out.num_buffers || (out.flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM))
		abort();
	if (out.flags && !(feat & F(VIRTIO_NET_F_CSUM)))
		abort();
	if (out.flags)
		check_fill_in(&out, f, cap, len, sum);
	if (!out.flags && (out.csum_start || out.csum_offset))
		abort();
	if (out.gso_type == VIRTIO_NET_HDR_GSO_NONE) {
		if (len > MAX_FRAME || out.hdr_len || out.gso_size)
			abort();
		return;
	}
	if (!(out.gso_type == VIRTIO_NET_HDR_GSO_TCPV4 && (feat & F(VIRTIO_NET_F_HOST_TSO4))) &&
	    !(out.gso_type == VIRTIO_NET_HDR_GSO_TCPV6 && (feat & F(VIRTIO_NET_F_HOST_TSO6))))
		abort();
	if (!out.flags || le16toh(out.gso_size) < NET_GSO_MIN_SIZE || le16toh(out.gso_size) > MAX_FRAME ||
	    le16toh(out.hdr_len) > len || len > NET_GSO_MAX_FRAME)
		abort();
}

static void check_rx(struct virtio_net_hdr_v1 h, uint64_t feat)
{
	net_offload_rx_hdr(&h, feat);
	if (h.flags && !(feat & F(VIRTIO_NET_F_GUEST_CSUM)))
		abort();
	if (h.flags & ~(VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID))
		abort();
	if (h.gso_type != VIRTIO_NET_HDR_GSO_NONE &&
	    !(h.gso_type == VIRTIO_NET_HDR_GSO_TCPV4 && (feat & F(VIRTIO_NET_F_GUEST_TSO4))) &&
	    !(h.gso_type == VIRTIO_NET_HDR_GSO_TCPV6 && (feat & F(VIRTIO_NET_F_GUEST_TSO6))))
		abort();
	if (h.gso_type == VIRTIO_NET_HDR_GSO_NONE && (h.hdr_len || h.gso_size))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct virtio_net_hdr_v1 h;
	uint64_t feat;
	uint16_t sum;
	size_t extra, cap, len;
	uint8_t *copy;

	h.flags = (uint8_t)take(&in, 1);
	h.gso_type = (uint8_t)take(&in, 1);
	h.hdr_len = (uint16_t)take(&in, 2);
	h.gso_size = (uint16_t)take(&in, 2);
	h.csum_start = (uint16_t)take(&in, 2);
	h.csum_offset = (uint16_t)take(&in, 2);
	h.num_buffers = (uint16_t)take(&in, 2);
	feat = pick_features((uint8_t)take(&in, 1));
	extra = take(&in, 3) % (NET_GSO_MAX_FRAME + 64);
	sum = (uint16_t)take(&in, 2);
	cap = in.n < NET_INSPECT_MAX ? in.n : NET_INSPECT_MAX;
	len = in.n + extra;
	copy = malloc(cap ? cap : 1);
	memcpy(copy, in.p, cap);
	check_tx(&h, feat, copy, cap, len, sum);
	check_rx(h, feat);
	free(copy);
	return 0;
}
