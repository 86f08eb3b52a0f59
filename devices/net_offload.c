#include "devices/net_offload.h"

#include <endian.h>
#include <string.h>

#include <linux/if_tun.h>
#include <netinet/in.h>

#define F(bit) (1ULL << (bit))

static bool has(uint64_t features, unsigned bit)
{
	return features & F(bit);
}

unsigned long net_offload_tun_flags(uint64_t features)
{
	unsigned long fl = 0;

	if (!has(features, VIRTIO_NET_F_GUEST_CSUM))
		return 0;
	fl |= TUN_F_CSUM;
	if (has(features, VIRTIO_NET_F_GUEST_TSO4))
		fl |= TUN_F_TSO4;
	if (has(features, VIRTIO_NET_F_GUEST_TSO6))
		fl |= TUN_F_TSO6;
	return fl;
}

uint32_t net_offload_rx_max(uint64_t features, uint32_t max_frame)
{
	return net_offload_tun_flags(features) & (TUN_F_TSO4 | TUN_F_TSO6) ? NET_GSO_MAX_FRAME : max_frame;
}

/* The GSO type h asks for is one the driver may use on this frame. */
static enum net_verdict gso_ok(uint8_t type, uint64_t features, const uint8_t *f, size_t cap, size_t len)
{
	struct net_flow fl;
	enum net_verdict v;
	unsigned family;

	if (type == VIRTIO_NET_HDR_GSO_TCPV4 && has(features, VIRTIO_NET_F_HOST_TSO4))
		family = 4;
	else if (type == VIRTIO_NET_HDR_GSO_TCPV6 && has(features, VIRTIO_NET_F_HOST_TSO6))
		family = 6;
	else
		return NET_DROP_VNET_HDR; /* UDP, ECN, unknown, or not negotiated */
	/* The host kernel segments by these headers: they must be what the
	 * type says, so the filter's verdict on them holds for every
	 * segment. */
	v = net_frame_parse(f, cap, len, &fl);
	if (v != NET_PASS)
		return v;
	if (fl.family != family || fl.proto != IPPROTO_TCP || !fl.has_l4 || fl.fragment)
		return NET_DROP_VNET_HDR;
	return NET_PASS;
}

enum net_verdict net_offload_check_tx(const struct virtio_net_hdr_v1 *h, uint64_t features, const uint8_t *f,
				      size_t cap, size_t len, uint32_t max_frame, struct virtio_net_hdr_v1 *out)
{
	uint32_t start = le16toh(h->csum_start), off = le16toh(h->csum_offset);
	bool csum = h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM;
	enum net_verdict v;

	memset(out, 0, sizeof(*out));
	if (h->flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM)
		return NET_DROP_VNET_HDR; /* DATA_VALID and RSC_INFO are rx-only */
	if (csum) {
		/* 32-bit sums of two 16-bit fields: no overflow. */
		if (!has(features, VIRTIO_NET_F_CSUM) || start + off + 2 > len)
			return NET_DROP_VNET_HDR;
		out->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
		out->csum_start = h->csum_start;
		out->csum_offset = h->csum_offset;
	}
	if (h->gso_type == VIRTIO_NET_HDR_GSO_NONE) {
		/* hdr_len and gso_size mean nothing here (5.1.6.2): not passed on. */
		out->gso_type = VIRTIO_NET_HDR_GSO_NONE;
		return len > max_frame ? NET_DROP_OVERSIZE : NET_PASS;
	}
	if (len > NET_GSO_MAX_FRAME)
		return NET_DROP_OVERSIZE;
	if (!csum || h->gso_size == 0 || le16toh(h->hdr_len) > len)
		return NET_DROP_VNET_HDR;
	v = gso_ok(h->gso_type, features, f, cap, len);
	if (v != NET_PASS)
		return v;
	out->gso_type = h->gso_type;
	out->hdr_len = h->hdr_len;
	out->gso_size = h->gso_size;
	return NET_PASS;
}

void net_offload_rx_hdr(struct virtio_net_hdr_v1 *h, uint64_t features)
{
	const uint8_t csum_flags = VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID;
	unsigned long tun = net_offload_tun_flags(features);
	bool gso = (h->gso_type == VIRTIO_NET_HDR_GSO_TCPV4 && (tun & TUN_F_TSO4)) ||
		   (h->gso_type == VIRTIO_NET_HDR_GSO_TCPV6 && (tun & TUN_F_TSO6));

	if (!(tun & TUN_F_CSUM) || (h->flags & ~csum_flags)) {
		h->flags = 0;
		gso = false;
	}
	if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		h->csum_start = h->csum_offset = 0;
	if (!gso) {
		h->gso_type = VIRTIO_NET_HDR_GSO_NONE;
		h->hdr_len = h->gso_size = 0;
	}
}
