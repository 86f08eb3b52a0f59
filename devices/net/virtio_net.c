/* virtio-net device: the transport callbacks, open/close, and the backend
 * fd's watch state (see virtio_net.h). */
#include "devices/net/virtio_net.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/if_tun.h>
#include <linux/virtio_ids.h>

#include "devices/net/net_impl.h"
#include "devices/net/net_offload.h"
#include "devices/net/net_tap.h"

#define F(bit) (1ULL << (bit))
#define NET_FEATURES (F(VIRTIO_NET_F_MAC) | F(VIRTIO_NET_F_STATUS) | F(VIRTIO_NET_F_MRG_RXBUF) | F(VIRTIO_NET_F_MTU))
/* Configuration space up to and including mtu (spec 5.1.4). */
#define NET_CONFIG_SIZE (offsetof(struct virtio_net_config, mtu) + sizeof(((struct virtio_net_config *)0)->mtu))

/* Event-loop thread, no lock held: the backend is readable. Unwatch (the
 * rx run watches again when it has read everything) and run rx. */
static void fd_cb(void *arg, uint32_t events)
{
	struct virtio_net *n = arg;

	(void)events;
	pthread_mutex_lock(&n->lock);
	if (n->watching) {
		n->io.unwatch(n->io.ctx, n->fd);
		n->watching = false;
	}
	pthread_mutex_unlock(&n->lock);
	n->io.kick(n->io.ctx, NET_RXQ);
}

void net_watch(struct virtio_net *n)
{
	pthread_mutex_lock(&n->lock);
	/* A failed watch leaves rx to the guest's next rx notification. */
	if (!n->watching && !n->dead && n->io.watch(n->io.ctx, n->fd, EPOLLIN, fd_cb, n) == 0)
		n->watching = true;
	pthread_mutex_unlock(&n->lock);
}

static void unwatch(struct virtio_net *n)
{
	pthread_mutex_lock(&n->lock);
	if (n->watching)
		n->io.unwatch(n->io.ctx, n->fd);
	n->watching = false;
	pthread_mutex_unlock(&n->lock);
}

void net_backend_down(struct virtio_net *n)
{
	unwatch(n);
	pthread_mutex_lock(&n->lock);
	n->dead = true;
	pthread_mutex_unlock(&n->lock);
	__atomic_store_n(&n->st.backend_down, true, __ATOMIC_RELAXED);
}

static uint64_t net_features(void *dev)
{
	struct virtio_net *n = dev;

	return NET_FEATURES | (n->offload ? NET_OFFLOAD_FEATURES : 0);
}

static void net_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, (const uint8_t *)&((struct virtio_net *)dev)->cfg + off, len);
}

static int net_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	struct virtio_net *n = dev;

	/* What the TAP may hand us is what the guest can take. */
	if (n->tap_offload && ioctl(n->fd, TUNSETOFFLOAD, net_offload_tun_flags(features)) < 0)
		return -errno;
	n->vqs = vqs;
	n->features = features;
	n->mrg = features & F(VIRTIO_NET_F_MRG_RXBUF);
	return vq_throttle_activate(&n->thr);
}

static void net_reset(void *dev)
{
	struct virtio_net *n = dev;

	unwatch(n);
	net_rx_forget(n);
	vq_throttle_reset(&n->thr);
	n->vqs = NULL;
	n->features = 0;
	/* Until the next driver says what it takes: plain frames only. */
	if (n->tap_offload)
		ioctl(n->fd, TUNSETOFFLOAD, 0UL);
}

/* Snapshot (transport lock held, before the transport saves its queue
 * positions): the limiters' state, and the rx chains the device holds go
 * back to the guest so the saved queue state does not lose them. The
 * backend and its offload flags belong to the VM that restores. */
static long net_save(void *dev, void *buf, size_t cap)
{
	struct virtio_net *n = dev;

	if (n->vqs)
		net_rx_return_held(n, &n->vqs[NET_RXQ]);
	return vq_throttle_save(&n->thr, buf, cap);
}

static int net_restore(void *dev, const void *buf, size_t len)
{
	return vq_throttle_restore(&((struct virtio_net *)dev)->thr, buf, len);
}

static struct vq_throttle *net_throttle(void *dev)
{
	return &((struct virtio_net *)dev)->thr;
}

static int net_notify(void *dev, unsigned queue)
{
	struct virtio_net *n = dev;

	if (!n->vqs)
		return 0;
	if (queue == NET_TXQ)
		return net_tx_run(n, &n->vqs[NET_TXQ]);
	if (queue == NET_RXQ)
		return net_rx_run(n, &n->vqs[NET_RXQ]);
	return 0;
}

const struct virtio_dev_ops virtio_net_ops = {
	.device_id = VIRTIO_ID_NET,
	.num_queues = 2,
	.queue_max = NET_QUEUE_MAX,
	.config_size = NET_CONFIG_SIZE,
	.features = net_features,
	.config_read = net_config_read,
	.activate = net_activate,
	.reset = net_reset,
	.notify = net_notify,
	.save = net_save,
	.restore = net_restore,
	.throttle = net_throttle,
};

void net_mac_from_id(uint32_t id, uint8_t mac[6])
{
	const uint8_t m[6] = { 0x02, 0x74, 0x76, (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id };

	memcpy(mac, m, 6);
}

char *net_mac_format(const uint8_t mac[6], char out[NET_MAC_STR])
{
	snprintf(out, NET_MAC_STR, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
	return out;
}

static int check_opts(const struct net_opts *o, struct tvm_err *e)
{
	static const uint8_t zero[6];
	char mac[NET_MAC_STR];

	if (!o->io.watch || !o->io.unwatch || !o->io.kick)
		return tvm_errf(e, EINVAL, "net: watch, unwatch and kick ops are required");
	if (o->mtu && (o->mtu < NET_MIN_MTU || o->mtu > NET_MAX_MTU))
		return tvm_errf(e, EINVAL, "net: mtu %u: must be %d..%d", o->mtu, NET_MIN_MTU, NET_MAX_MTU);
	if (memcmp(o->mac, zero, 6) && (o->mac[0] & 1))
		return tvm_errf(e, EINVAL, "net: mac %s: multicast", net_mac_format(o->mac, mac));
	return 0;
}

int virtio_net_open(struct virtio_net **out, const struct net_opts *o, struct tvm_err *e)
{
	static const uint8_t zero[6];
	struct vq_limit lim[NET_LIM_NR];
	struct virtio_net *n;
	int r = check_opts(o, e);

	*out = NULL;
	if (r)
		return r;
	n = calloc(1, sizeof(*n));
	if (!n || !(n->scratch = malloc(NET_RX_SCRATCH))) {
		free(n);
		return tvm_errf(e, ENOMEM, "net: out of memory");
	}
	lim[NET_LIM_RX] = (struct vq_limit){ NET_RXQ, "rx", o->rx_limit };
	lim[NET_LIM_TX] = (struct vq_limit){ NET_TXQ, "tx", o->tx_limit };
	r = vq_throttle_init(&n->thr, lim, NET_LIM_NR, &o->io, o->clock, "net", e);
	if (r)
		goto fail;
	if (o->fd >= 0) {
		r = net_tap_adopt(o->fd, n->ifname, e);
		if (r < 0)
			goto fail;
		n->fd = o->fd;
		fcntl(n->fd, F_SETFL, fcntl(n->fd, F_GETFL) | O_NONBLOCK);
		n->tap_offload = r == 1;
		n->offload = !o->no_offload && (n->tap_offload || o->fd_offload);
	} else {
		n->fd = net_tap_open(o->tap_name, n->ifname, e);
		if (n->fd < 0) {
			r = n->fd;
			goto fail;
		}
		n->tap_offload = true;
		n->offload = !o->no_offload;
	}
	pthread_mutex_init(&n->lock, NULL);
	net_rx_forget(n);
	n->io = o->io;
	n->mtu = o->mtu ? o->mtu : NET_DEFAULT_MTU;
	n->max_frame = n->mtu + NET_ETH_HLEN + NET_VLAN_HLEN;
	if (memcmp(o->mac, zero, 6))
		memcpy(n->mac, o->mac, 6);
	else
		net_mac_from_id(o->id, n->mac);
	if (o->policy)
		n->policy = *o->policy;
	else
		net_policy_init(&n->policy);
	n->ingress.replies_only = o->ingress_replies;
	memcpy(n->cfg.mac, n->mac, 6);
	n->cfg.status = htole16(VIRTIO_NET_S_LINK_UP);
	n->cfg.mtu = htole16(n->mtu);
	*out = n;
	return 0;
fail:
	vq_throttle_close(&n->thr);
	free(n->scratch);
	free(n);
	return r;
}

void virtio_net_close(struct virtio_net *n)
{
	if (!n)
		return;
	vq_throttle_close(&n->thr);
	close(n->fd);
	pthread_mutex_destroy(&n->lock);
	free(n->scratch);
	free(n);
}

const char *virtio_net_ifname(const struct virtio_net *n)
{
	return n->ifname;
}

void virtio_net_mac(const struct virtio_net *n, uint8_t mac[6])
{
	memcpy(mac, n->mac, 6);
}

void virtio_net_stats(struct virtio_net *n, struct net_stats *s)
{
	/* Field by field: the counters change under us. */
	s->tx_frames = __atomic_load_n(&n->st.tx_frames, __ATOMIC_RELAXED);
	s->tx_bytes = __atomic_load_n(&n->st.tx_bytes, __ATOMIC_RELAXED);
	s->rx_frames = __atomic_load_n(&n->st.rx_frames, __ATOMIC_RELAXED);
	s->rx_bytes = __atomic_load_n(&n->st.rx_bytes, __ATOMIC_RELAXED);
	s->tx_gso = __atomic_load_n(&n->st.tx_gso, __ATOMIC_RELAXED);
	s->rx_gso = __atomic_load_n(&n->st.rx_gso, __ATOMIC_RELAXED);
	s->rx_dropped = __atomic_load_n(&n->st.rx_dropped, __ATOMIC_RELAXED);
	for (int i = 0; i < NET_VERDICT_NR; i++)
		s->drops[i] = __atomic_load_n(&n->st.drops[i], __ATOMIC_RELAXED);
	s->backend_down = __atomic_load_n(&n->st.backend_down, __ATOMIC_RELAXED);
}
