/* virtio-net checksum and TCP segmentation offload (virtio 1.2 5.1.6.2,
 * 5.1.6.4): which features are offered over a TAP, the TUNSETOFFLOAD flags
 * that match what the driver took, and the one check of the
 * struct virtio_net_hdr_v1 a guest puts in front of every tx frame.
 *
 * Offered when the backend is a TAP: CSUM, GUEST_CSUM, HOST_TSO4/6,
 * GUEST_TSO4/6. Not offered: UFO/USO, ECN, GUEST_ANNOUNCE, RSS, hash
 * reports; so UDP segmentation and the ECN bit are refused on tx.
 */
#ifndef TVM_NET_OFFLOAD_H
#define TVM_NET_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include <linux/virtio_net.h>

#include "devices/net/net_frame.h"

#define NET_OFFLOAD_FEATURES                                                                                  \
	((1ULL << VIRTIO_NET_F_CSUM) | (1ULL << VIRTIO_NET_F_GUEST_CSUM) | (1ULL << VIRTIO_NET_F_HOST_TSO4) | \
	 (1ULL << VIRTIO_NET_F_HOST_TSO6) | (1ULL << VIRTIO_NET_F_GUEST_TSO4) | (1ULL << VIRTIO_NET_F_GUEST_TSO6))

/* Largest segmentation-offload frame either way: 64 KiB of IP packet
 * (the Linux default gso_max_size) + Ethernet header + one VLAN tag. */
#define NET_GSO_MAX_FRAME (65536 + NET_ETH_HLEN + NET_VLAN_HLEN)
/* Smallest gso_size (segment payload) taken on tx: Linux's own floor for
 * the MSS (tcp_min_snd_mss). Smaller ones only multiply the segments the
 * host must make (a 64 KiB frame into thousands). */
#define NET_GSO_MIN_SIZE 48

/* TUN_F_* flags for TUNSETOFFLOAD given the negotiated features: what
 * the TAP may hand us, and so the guest, on rx. TSO only with checksum
 * offload (spec 5.1.3.1 feature dependencies). */
unsigned long net_offload_tun_flags(uint64_t features);

/* Largest frame (without the virtio-net header) the guest may receive:
 * NET_GSO_MAX_FRAME with GUEST_TSO4/6 (and GUEST_CSUM), else max_frame. */
uint32_t net_offload_rx_max(uint64_t features, uint32_t max_frame);

/* Check the header h the guest sent with a len-byte frame whose first cap
 * bytes are f (a copy the guest cannot change), given the negotiated
 * features and the non-GSO frame limit max_frame (bytes, without the
 * header). On NET_PASS *out is the header to hand to the TAP: only the
 * fields the checks covered, num_buffers 0. Refused (NET_DROP_VNET_HDR):
 * flags other than NEEDS_CSUM; NEEDS_CSUM without CSUM, or on anything but
 * the TCP or UDP checksum of an unfragmented IPv4/IPv6 packet (csum_start
 * must be the L4 header's offset, csum_offset 16 or 6: the host writes
 * there, so nothing the filter read can change after it); a gso_type not
 * negotiated, with the ECN bit, or not TCP over the IP version it names;
 * GSO without NEEDS_CSUM, gso_size below NET_GSO_MIN_SIZE or making
 * segments over max_frame, hdr_len past the frame. NET_DROP_MALFORMED when
 * the headers of a frame asking for an offload do not parse.
 * NET_DROP_OVERSIZE for len over max_frame without GSO, over
 * NET_GSO_MAX_FRAME with it. Pure function of its arguments. */
enum net_verdict net_offload_check_tx(const struct virtio_net_hdr_v1 *h, uint64_t features, const uint8_t *f,
				      size_t cap, size_t len, uint32_t max_frame, struct virtio_net_hdr_v1 *out);

/* Rewrite the header the TAP gave with a received frame so it claims only
 * what the guest negotiated (5.1.6.4.1): checksum flags and fields with
 * GUEST_CSUM, a TCP GSO type with the matching GUEST_TSO feature; anything
 * else becomes flags 0 / GSO_NONE. num_buffers is left to the caller. */
void net_offload_rx_hdr(struct virtio_net_hdr_v1 *h, uint64_t features);

#endif
