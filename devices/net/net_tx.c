/* Frames from the guest to the backend (spec 5.1.6.2), through the
 * egress filter. */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#include "devices/virtio/iov.h"
#include "devices/net/net_impl.h"
#include "devices/net/net_offload.h"

_Static_assert(VQ_MAX_SEGS <= IOV_MAX, "a chain's buffers plus the copied head fit one writev");

/* Check and send the frame in chain c; the verdict is what to count. */
static enum net_verdict tx_frame(struct virtio_net *n, const struct vq_chain *c)
{
	struct virtio_net_hdr_v1 h, out;
	uint8_t *frame = n->tx_copy + NET_HDR_LEN;
	uint32_t len, cap, limit;
	enum net_verdict v;
	ssize_t w;
	int k;

	if (c->n != c->nreadable || c->readable_len < NET_HDR_LEN)
		return NET_DROP_BAD_CHAIN;
	len = c->readable_len - NET_HDR_LEN;
	if (len < NET_ETH_HLEN)
		return NET_DROP_RUNT;
	if (len > NET_GSO_MAX_FRAME)
		return NET_DROP_OVERSIZE;
	/* From here on only the copy is looked at (the guest may rewrite its
	 * buffers at any time) and it is the copy that gets sent. */
	cap = len < NET_INSPECT_MAX ? len : NET_INSPECT_MAX;
	iov_to_buf(c->iov, c->nreadable, 0, n->tx_copy, NET_HDR_LEN + cap);
	memcpy(&h, n->tx_copy, sizeof(h));
	limit = n->max_frame - (frame[12] == 0x81 && frame[13] == 0x00 ? 0 : NET_VLAN_HLEN);
	v = net_offload_check_tx(&h, n->features, frame, cap, len, limit, &out);
	if (v != NET_PASS)
		return v;
	if (n->policy.restricted && memcmp(frame + 6, n->mac, 6))
		return NET_DROP_SPOOF;
	v = net_filter(&n->policy, frame, cap, len);
	if (v != NET_PASS)
		return v;
	if (n->ingress.replies_only) { /* its UDP flows: what may answer it */
		struct net_flow fl;

		if (net_frame_parse(frame, cap, len, &fl) == NET_PASS)
			net_ingress_note(&n->ingress, &fl, n->thr.clock());
	}
	memcpy(n->tx_copy, &out, NET_HDR_LEN); /* the checked header: what the TAP reads is all ours */
	n->tx_iov[0] = (struct iovec){ n->tx_copy, NET_HDR_LEN + cap };
	k = 0;
	if (len > cap) {
		k = iov_slice(c->iov, c->nreadable, NET_HDR_LEN + cap, len - cap, n->tx_iov + 1, VQ_MAX_SEGS - 1);
		if (k < 0)
			return NET_DROP_BAD_CHAIN;
	}
	do
		w = writev(n->fd, n->tx_iov, k + 1);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)(NET_HDR_LEN + len))
		return NET_DROP_BACKEND;
	net_count(&n->st.tx_frames, 1);
	net_count(&n->st.tx_bytes, len);
	if (out.gso_type != VIRTIO_NET_HDR_GSO_NONE)
		net_count(&n->st.tx_gso, 1);
	return NET_PASS;
}

int net_tx_run(struct virtio_net *n, struct virtqueue *vq)
{
	int r;

	while ((r = vq_pop(vq, &n->chain)) > 0) {
		const struct vq_chain *c = &n->chain;
		enum net_verdict v;

		/* Costed by the chain's lengths (read once by vq_pop), before
		 * anything is checked: a dropped frame costs as much. */
		if (vq_throttle_admit(&n->thr, NET_LIM_TX,
				      c->readable_len > NET_HDR_LEN ? c->readable_len - NET_HDR_LEN : 0, 1)) {
			vq_unpop(vq, 1); /* back on the ring; the limiter's timer runs tx again */
			return 0;
		}
		v = tx_frame(n, c);

		if (v != NET_PASS)
			net_count(&n->st.drops[v], 1);
		vq_push(vq, n->chain.head, 0);
	}
	return r;
}
