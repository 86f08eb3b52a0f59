/* Inside the virtio-net device: its state and what its files share.
 * Files: virtio_net.c (ops, open/close, config, watch state), net_tx.c
 * (guest -> backend), net_rx.c (backend -> guest). Everything here runs
 * with the transport lock held unless said otherwise.
 */
#ifndef TVM_NET_IMPL_H
#define TVM_NET_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "devices/net/net_ingress.h"
#include "devices/net/virtio_net.h"
#include "devices/virtio/throttle.h"
#include "devices/virtio/virtqueue.h"

#define NET_RX_IOV (VQ_MAX_SEGS - 1) /* guest buffers per readv, one iovec left for scratch */
#define NET_RX_SCRATCH (65536 + 64)  /* catches the tail of a frame too big for the held buffers */

/* The device's limiters (struct virtio_net.thr): numbered as the queues
 * they gate (vq_throttle_stats of NET_RXQ is rx's). */
enum { NET_LIM_RX = NET_RXQ, NET_LIM_TX = NET_TXQ, NET_LIM_NR };

/* An rx chain popped and waiting for a frame; its buffers are niov
 * consecutive entries of rx_iov, in held order. */
struct net_held {
	uint16_t head;
	uint16_t niov;
	uint32_t len; /* bytes in those entries */
};

struct virtio_net {
	pthread_mutex_t lock; /* guards watching, dead (fd callback vs. rx) */
	bool watching;        /* fd registered with io.watch */
	bool dead;            /* backend hit EOF or a hard error */

	int fd; /* backend, non-blocking, owned */
	char ifname[IFNAMSIZ];
	uint16_t mtu;
	uint8_t mac[6];
	uint32_t max_frame; /* mtu + Ethernet header + one VLAN tag */
	struct net_policy policy;
	struct net_ingress ingress; /* what of the TAP's reaches the guest (replies only, or all) */
	struct fd_watch_ops io;
	struct virtio_net_config cfg; /* little endian, as the driver reads it */

	bool offload;          /* offer NET_OFFLOAD_FEATURES */
	bool tap_offload;      /* the backend takes TUNSETOFFLOAD */
	struct virtqueue *vqs; /* [2] while the driver runs the device, else NULL */
	uint64_t features;     /* negotiated, while vqs is set; else 0 */
	bool mrg;              /* VIRTIO_NET_F_MRG_RXBUF negotiated */
	struct vq_chain chain; /* the chain being popped, either queue */

	/* rx */
	struct net_held held[NET_RX_MAX_CHAINS];
	unsigned nheld;
	bool rx_contig; /* the held chains are the last nheld popped (no bad
					* chain completed in between): they can be un-popped */
	unsigned rx_niov;
	uint32_t rx_cap; /* bytes in rx_iov[0..rx_niov) */
	struct iovec rx_iov[VQ_MAX_SEGS];
	uint8_t *scratch; /* NET_RX_SCRATCH bytes */

	/* tx: header and inspected bytes copied out, then the rest in place */
	uint8_t tx_copy[NET_HDR_LEN + NET_INSPECT_MAX];
	struct iovec tx_iov[VQ_MAX_SEGS];

	struct net_stats st;    /* updated with __atomic builtins */
	struct vq_throttle thr; /* rate limits: [NET_LIM_RX] gates rx, [NET_LIM_TX] tx */
};

/* Add 1 to a counter (read by virtio_net_stats from any thread). */
static inline void net_count(uint64_t *c, uint64_t by)
{
	__atomic_fetch_add(c, by, __ATOMIC_RELAXED);
}

/* virtio_net.c */
/* Have the fd callback fire once the backend is readable. */
void net_watch(struct virtio_net *n);
/* The backend is gone (EOF or error): stop reading it for good. */
void net_backend_down(struct virtio_net *n);

/* net_tx.c: send every available tx chain. 0 or -EIO (broken queue). */
int net_tx_run(struct virtio_net *n, struct virtqueue *vq);

/* net_rx.c: deliver backend frames while guest buffers last. 0 or -EIO. */
int net_rx_run(struct virtio_net *n, struct virtqueue *vq);
/* Forget the held chains (device reset: the queue is gone). */
void net_rx_forget(struct virtio_net *n);
/* Give the held chains back to the guest before a snapshot: un-popped
 * when they are the last ones popped, else completed empty (the driver
 * drops a buffer shorter than a header, 5.1.6.4.1). */
void net_rx_return_held(struct virtio_net *n, struct virtqueue *vq);

#endif
