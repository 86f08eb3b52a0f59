#include "devices/net/net_offload.h"

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

/* The checksum the host is asked to fill in is the TCP or UDP checksum of
 * an unfragmented IP packet, nothing else: the host writes 16 bits of its
 * choosing at csum_start + csum_offset, and anywhere else that could
 * rewrite an address or port the filter has approved. */
static bool csum_is_l4(const struct virtio_net_hdr_v1 *h, const struct net_flow *fl)
{
	uint16_t want = fl->proto == IPPROTO_TCP ? 16 : 6;

	return fl->family && !fl->fragment && fl->has_l4 && (fl->proto == IPPROTO_TCP || fl->proto == IPPROTO_UDP) &&
	       le16toh(h->csum_start) == fl->l4_off && le16toh(h->csum_offset) == want;
}

/* TCP segmentation as negotiated, of the IP version the frame carries,
 * into segments no larger than the non-GSO limit. */
static bool gso_ok(const struct virtio_net_hdr_v1 *h, uint64_t features, const struct net_flow *fl, size_t len,
		   uint32_t max_frame)
{
	uint32_t size = le16toh(h->gso_size);
	bool v4 = h->gso_type == VIRTIO_NET_HDR_GSO_TCPV4 && has(features, VIRTIO_NET_F_HOST_TSO4) && fl->family == 4;
	bool v6 = h->gso_type == VIRTIO_NET_HDR_GSO_TCPV6 && has(features, VIRTIO_NET_F_HOST_TSO6) && fl->family == 6;

	return (v4 || v6) && fl->proto == IPPROTO_TCP && size >= NET_GSO_MIN_SIZE &&
	       (uint32_t)fl->l4_off + fl->l4_hlen + size <= max_frame && le16toh(h->hdr_len) <= len;
}

enum net_verdict net_offload_check_tx(const struct virtio_net_hdr_v1 *h, uint64_t features, const uint8_t *f,
				      size_t cap, size_t len, uint32_t max_frame, struct virtio_net_hdr_v1 *out)
{
	bool csum = h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM, gso = h->gso_type != VIRTIO_NET_HDR_GSO_NONE;
	struct net_flow fl;
	enum net_verdict v;

	memset(out, 0, sizeof(*out));
	out->gso_type = VIRTIO_NET_HDR_GSO_NONE;
	if (h->flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM)
		return NET_DROP_VNET_HDR; /* DATA_VALID and RSC_INFO are rx-only */
	if (len > (gso ? NET_GSO_MAX_FRAME : max_frame))
		return NET_DROP_OVERSIZE;
	if (!csum && !gso)
		return NET_PASS; /* hdr_len, gso_size, csum_* mean nothing here (5.1.6.2): not passed on */
	/* GSO needs NEEDS_CSUM (each segment gets its own checksum). */
	if (!csum || !has(features, VIRTIO_NET_F_CSUM))
		return NET_DROP_VNET_HDR;
	v = net_frame_parse(f, cap, len, &fl);
	if (v != NET_PASS)
		return v;
	if (!csum_is_l4(h, &fl) || (gso && !gso_ok(h, features, &fl, len, max_frame)))
		return NET_DROP_VNET_HDR;
	out->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	out->csum_start = h->csum_start;
	out->csum_offset = h->csum_offset;
	if (gso) {
		out->gso_type = h->gso_type;
		out->hdr_len = h->hdr_len;
		out->gso_size = h->gso_size;
	}
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
