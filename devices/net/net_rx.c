/* Frames from the backend to the guest (spec 5.1.6.3, 5.1.6.4). */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devices/virtio/iov.h"
#include "devices/net/net_impl.h"
#include "devices/net/net_offload.h"

#define RX_BUDGET 256 /* frames per run; a readable backend brings us back */

void net_rx_forget(struct virtio_net *n)
{
	n->nheld = 0;
	n->rx_niov = 0;
	n->rx_cap = 0;
	n->rx_contig = true;
}

void net_rx_return_held(struct virtio_net *n, struct virtqueue *vq)
{
	/* A broken queue is saved broken and the driver must reset it anyway
	 * (the pop that broke it may have moved last_avail): nothing to do. */
	if (!vq->broken && n->rx_contig)
		vq_unpop(vq, (uint16_t)n->nheld);
	else if (!vq->broken)
		for (unsigned i = 0; i < n->nheld; i++)
			vq_push(vq, n->held[i].head, 0);
	net_rx_forget(n);
}

/* Most chains one frame may use: several only with MRG_RXBUF (5.1.6.3.1). */
static unsigned max_chains(const struct virtio_net *n)
{
	return n->mrg ? NET_RX_MAX_CHAINS : 1;
}

/* Pop and hold rx chains until the held buffers take the largest frame,
 * or no more may be held. Returns 1 when a read may go ahead, 0 when the
 * guest must post more buffers first, -EIO for a broken queue. With
 * segmentation offload the largest frame is 64 KiB; a guest that posted
 * less still gets frames up to the MTU (a larger one is dropped). */
static int rx_fill(struct virtio_net *n, struct virtqueue *vq)
{
	const uint32_t need = NET_HDR_LEN + net_offload_rx_max(n->features, n->max_frame);
	struct vq_chain *c = &n->chain;

	while (n->rx_cap < need && n->nheld < max_chains(n) && n->rx_niov < NET_RX_IOV) {
		unsigned k;
		uint32_t len = 0;
		int r = vq_pop(vq, c);

		if (r == 0 && n->rx_cap >= NET_HDR_LEN + n->max_frame)
			return 1;
		if (r <= 0)
			return r;
		/* Rx buffers are device-writable only and hold at least the
		 * header (5.1.6.3.1); give anything else back unused. */
		if (c->nreadable || c->writable_len < NET_HDR_LEN) {
			net_count(&n->st.drops[NET_DROP_BAD_CHAIN], 1);
			vq_push(vq, c->head, 0);
			if (n->nheld)
				n->rx_contig = false;
			continue;
		}
		k = c->n;
		if (k > NET_RX_IOV - n->rx_niov)
			k = NET_RX_IOV - n->rx_niov; /* the rest of this chain stays unused */
		for (unsigned i = 0; i < k; i++) {
			n->rx_iov[n->rx_niov + i] = c->iov[i];
			len += (uint32_t)c->iov[i].iov_len;
		}
		n->held[n->nheld++] = (struct net_held){ c->head, (uint16_t)k, len };
		n->rx_niov += k;
		n->rx_cap += len;
	}
	return 1;
}

/* got bytes (header included) landed in the held buffers: rewrite the
 * header, complete the chains used and keep the others for later. */
static void deliver(struct virtio_net *n, struct virtqueue *vq, uint32_t got)
{
	struct virtio_net_hdr_v1 h;
	uint32_t left = got;
	unsigned used = 0, iovs = 0;

	while (left) {
		uint32_t take = left < n->held[used].len ? left : n->held[used].len;

		left -= take;
		iovs += n->held[used++].niov;
	}
	/* The backend's header, read back from the guest's buffer (only the
	 * guest itself can have changed it), claiming no more than the guest
	 * negotiated. */
	iov_to_buf(n->rx_iov, (int)n->rx_niov, 0, &h, sizeof(h));
	net_offload_rx_hdr(&h, n->features);
	h.num_buffers = htole16((uint16_t)used);
	iov_from_buf(n->rx_iov, (int)n->rx_niov, 0, &h, sizeof(h));
	left = got;
	for (unsigned i = 0; i < used; i++) {
		uint32_t take = left < n->held[i].len ? left : n->held[i].len;

		vq_push(vq, n->held[i].head, take);
		left -= take;
		n->rx_cap -= n->held[i].len;
	}
	n->nheld -= used;
	if (!n->nheld)
		n->rx_contig = true;
	n->rx_niov -= iovs;
	memmove(n->held, n->held + used, n->nheld * sizeof(n->held[0]));
	memmove(n->rx_iov, n->rx_iov + iovs, n->rx_niov * sizeof(n->rx_iov[0]));
	net_count(&n->st.rx_frames, 1);
	net_count(&n->st.rx_bytes, got - NET_HDR_LEN);
	if (h.gso_type != VIRTIO_NET_HDR_GSO_NONE)
		net_count(&n->st.rx_gso, 1);
}

/* Whether the len-byte frame just read into the held buffers may reach
 * the guest (net_ingress.h). Its first bytes are copied out first: they
 * sit in guest memory, which the guest may change meanwhile (it can only
 * open its own door that way). */
static bool rx_admitted(struct virtio_net *n, size_t len)
{
	uint8_t head[NET_INSPECT_MAX];
	size_t cap = len < sizeof(head) ? len : sizeof(head);

	iov_to_buf(n->rx_iov, (int)n->rx_niov, NET_HDR_LEN, head, cap);
	return net_ingress_check(&n->ingress, head, cap, len, n->thr.clock()) == NET_PASS;
}

int net_rx_run(struct virtio_net *n, struct virtqueue *vq)
{
	for (int budget = 0; budget < RX_BUDGET; budget++) {
		ssize_t got;
		int r = rx_fill(n, vq);

		if (r <= 0)
			return r; /* no watch: the guest's next rx notification brings us back */
		if (vq_throttle_wait(&n->thr, NET_LIM_RX, 1, 1))
			return 0; /* no read, no watch: the limiter's timer brings us back */
		n->rx_iov[n->rx_niov] = (struct iovec){ n->scratch, NET_RX_SCRATCH };
		got = readv(n->fd, n->rx_iov, (int)n->rx_niov + 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			net_watch(n);
			return 0;
		}
		if (got <= 0) {
			net_backend_down(n);
			return 0;
		}
		/* A frame the held buffers could not take whole, one over the
		 * MTU we announced (5.1.6.3.2: the TAP's may be larger), or a
		 * read shorter than header + Ethernet header is dropped; the
		 * buffers stay held for the next one. */
		if ((size_t)got > n->rx_cap ||
		    (size_t)got > NET_HDR_LEN + net_offload_rx_max(n->features, n->max_frame) ||
		    (size_t)got < NET_HDR_LEN + NET_ETH_HLEN) {
			net_count(&n->st.rx_dropped, 1);
			continue;
		}
		if (n->ingress.replies_only && !rx_admitted(n, (size_t)got - NET_HDR_LEN)) {
			net_count(&n->st.drops[NET_DROP_INGRESS], 1);
			continue; /* the held buffers take the next one */
		}
		deliver(n, vq, (uint32_t)got);
		vq_throttle_take(&n->thr, NET_LIM_RX, (uint64_t)got - NET_HDR_LEN, 1);
	}
	/* Budget used up with the backend maybe still readable. */
	net_watch(n);
	return 0;
}
