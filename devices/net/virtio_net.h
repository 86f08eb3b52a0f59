/* virtio network device (virtio 1.2 section 5.1), VMM side, over a TAP
 * with an egress allow-list (devices/net/net_filter.h) enforced here.
 *
 * Queues: rx 0, tx 1; no control queue. Offered features: MAC, STATUS
 * (link always up), MRG_RXBUF, MTU, and when the backend is a TAP (and
 * not no_offload) the checksum and TCP segmentation offloads of
 * devices/net/net_offload.h. Every header is struct virtio_net_hdr_v1 (12
 * bytes, VERSION_1).
 *
 * Tx (guest -> TAP), one chain per frame: readable buffers only; the
 * first 12 bytes are the header (net_offload_check_tx: offload fields only
 * as negotiated), the rest is the frame: 14 bytes at least, MTU + 14 at
 * most (+ 4 with an 802.1Q tag), NET_GSO_MAX_FRAME with GSO. The header
 * and the first NET_INSPECT_MAX frame bytes are copied out of guest memory
 * once; the header check, the source MAC check and the filter see only
 * that copy; the TAP gets a header rebuilt from the checked fields, then
 * the copied frame bytes, then the rest of the frame straight from guest
 * memory (writev). So a guest rewriting its buffer meanwhile cannot change
 * what was checked.
 * A frame that fails a check is dropped and counted (struct net_stats);
 * the chain is completed either way.
 *
 * Rx (TAP -> guest): chains are popped and held until they can take a
 * frame of MTU + 18 bytes (NET_GSO_MAX_FRAME with GUEST_TSO4/6; a guest
 * that posted less gets frames up to the MTU) plus the header (with
 * MRG_RXBUF, several chains, at most NET_RX_MAX_CHAINS; without it, one),
 * then one readv() puts the frame straight into them. The TAP only hands
 * us the offloads the driver took (TUNSETOFFLOAD at DRIVER_OK); the header
 * is rewritten to claim no more (net_offload_rx_hdr) with num_buffers =
 * chains used; each used chain is completed with the bytes it got; held
 * chains left over wait for the next frame. A frame larger
 * than the held buffers is read into a scratch area and dropped. When the
 * guest has posted too few buffers, the TAP fd is not read (nor watched)
 * until it posts more and notifies the rx queue; nothing is buffered in
 * the VMM.
 *
 * TAP watching: the fd is watched (EPOLLIN) only after a read found it
 * empty while buffers were held; the callback unwatches it and kicks the
 * rx queue, whose run reads until empty again. So a guest that stops
 * taking frames never makes the event loop spin.
 *
 * Threads and locks: the virtio_dev_ops run with the transport lock held;
 * the fd callback takes only the device's small mutex (which guards the
 * watch state) and kicks after dropping it. Lock order: transport, device.
 *
 * Rate limits (net_opts.rx_limit, tx_limit; devices/virtio/throttle.h),
 * each costing a frame one operation and its bytes without the virtio-net
 * header. Tx: a chain the limiter holds goes back on the ring (un-popped)
 * and the tx queue stops until the limiter's timer kicks it. Rx: before
 * each read the limiter must be out of debt with a token of each kind;
 * the frame read is then paid for in full (in debt when it cost more),
 * since its size is known only once read. While held, rx neither reads
 * nor watches the backend; the timer kicks the rx queue.
 *
 * Snapshots: the save hook gives the rx chains the device holds back to
 * the guest (un-popped when they were the last popped, else completed
 * empty), so the saved queue positions lose no buffer. The device's own
 * blob is its limiters' state (none without limits). Its MAC and MTU are
 * the VM's config (the snapshot's network section), the backend and its
 * offload flags belong to the VM that restores.
 */
#ifndef TVM_VIRTIO_NET_H
#define TVM_VIRTIO_NET_H

#include <stdbool.h>
#include <stdint.h>

#include <net/if.h>
#include <linux/virtio_net.h>

#include "devices/net/net_filter.h"
#include "devices/virtio/fd_watch.h"
#include "devices/virtio/virtio_mmio.h"
#include "vmm/core/err.h"

#define NET_HDR_LEN ((uint32_t)sizeof(struct virtio_net_hdr_v1)) /* 12 */
#define NET_DEFAULT_MTU 1500
#define NET_MIN_MTU 68 /* RFC 791 minimum */
#define NET_MAX_MTU 9000
#define NET_QUEUE_MAX 256    /* QueueNumMax of both queues */
#define NET_RX_MAX_CHAINS 64 /* chains one received frame may span (MRG_RXBUF) */

/* Queue indices (spec 5.1.2). */
enum { NET_RXQ = 0, NET_TXQ = 1 };

struct net_opts {
	const char *tap_name;                     /* TAP to attach to; NULL: create one ("tvm%d") */
	int fd;                                   /* >= 0: use this backend instead of opening a TAP: a TAP
				* opened by a privileged parent (IFF_TAP | IFF_NO_PI |
				* IFF_VNET_HDR, see net_tap_adopt), or for tests one frame
				* with its 12-byte header per read/write, e.g. a
				* SOCK_SEQPACKET socket. Owned by the device once open
				* succeeds. -1: open a TAP */
	uint8_t mac[6];                           /* guest MAC; all zero: net_mac_from_id(id) */
	uint32_t id;                              /* for the derived MAC (e.g. the VM's index or CID) */
	uint16_t mtu;                             /* 0: NET_DEFAULT_MTU; else NET_MIN_MTU..NET_MAX_MTU; should
				* match the TAP's MTU on the host */
	const struct net_policy *policy;          /* copied; NULL: allow all */
	bool ingress_replies;                     /* TAP frames reach the guest only as replies to its own
				* traffic (devices/net/net_ingress.h); false: all */
	bool no_offload;                          /* offer no checksum/segmentation offload even over a TAP */
	bool fd_offload;                          /* with fd: offer offloads although fd is no TAP (a test
				* backend taking and giving headers as a TAP would) */
	struct fd_watch_ops io;                   /* watch/unwatch the backend fd, kick a queue */
	struct tvm_rate_limit rx_limit, tx_limit; /* frame bytes (no header) and frames; zero: none */
	uint64_t (*clock)(void);                  /* for the limits; NULL: CLOCK_MONOTONIC (tests: a fake one) */
};

/* Counters since open. Frames are counted without the virtio-net header. */
struct net_stats {
	uint64_t tx_frames, tx_bytes;   /* written to the backend */
	uint64_t rx_frames, rx_bytes;   /* delivered to the guest */
	uint64_t tx_gso, rx_gso;        /* of those, frames with segmentation offload (TSO) */
	uint64_t rx_dropped;            /* backend frames dropped: larger than the held guest
					 * buffers or the MTU, or shorter than an Ethernet header */
	uint64_t drops[NET_VERDICT_NR]; /* tx frames (and bad rx chains) by reason; [NET_PASS] unused */
	bool backend_down;              /* the backend fd hit EOF or an error: no more rx */
};

struct virtio_net;

/* Locally administered unicast MAC 02:74:76:xx:xx:xx ("tv"), xx = the low
 * 24 bits of id, big endian. */
void net_mac_from_id(uint32_t id, uint8_t mac[6]);

/* Build the device: open or attach the TAP (net_tap_open) unless o->fd is
 * given. Returns 0 and *out (free with virtio_net_close), or -errno with
 * e set: -EINVAL for an MTU out of range, a multicast MAC, missing watch
 * ops, a given TAP fd set up otherwise; TAP errors from net_tap_open. */
int virtio_net_open(struct virtio_net **out, const struct net_opts *o, struct tvm_err *e);

/* Close the backend fd and free n. The caller must first make sure no fd
 * callback of n can run any more (event loop stopped, or fd unwatched) and
 * that the transport is gone. */
void virtio_net_close(struct virtio_net *n);

/* The TAP's interface name ("" with an injected fd), for the host-side
 * setup (address, routes, up). Valid until close. */
const char *virtio_net_ifname(const struct virtio_net *n);

#define NET_MAC_STR 18 /* "xx:xx:xx:xx:xx:xx" and its NUL */

/* mac as "xx:xx:xx:xx:xx:xx" into out; returns out. */
char *net_mac_format(const uint8_t mac[6], char out[NET_MAC_STR]);

/* The guest's MAC address (fixed at open). */
void virtio_net_mac(const struct virtio_net *n, uint8_t mac[6]);

/* Snapshot of the counters. Any thread. */
void virtio_net_stats(struct virtio_net *n, struct net_stats *s);

/* For virtio_mmio_init(&t, &virtio_net_ops, n, ...). */
extern const struct virtio_dev_ops virtio_net_ops;

#endif
