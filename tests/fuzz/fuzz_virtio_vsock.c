/* libFuzzer target: a hostile driver and hostile host clients against
 * virtio-mmio + virtqueue + virtio-vsock. The input is a program for a
 * small interpreter: queue sizes, then operations that poke guest memory,
 * write descriptors and vsock packets, post and notify on the three
 * queues, and act on the host side (in-process connects, hybrid clients
 * with any CONNECT line, reads, writes, shutdowns and closes of host
 * sockets, accepting the guest's connections to host port 1) and run the
 * fd callbacks. Guest RAM is 256 KiB.
 *
 * Beyond crashes (ASan/UBSan) it checks that the fd callbacks always
 * settle (no busy loop on a ready fd), that the device never holds more
 * than VSOCK_BUF_ALLOC bytes per connection nor a guest buffer between
 * calls, and that closing the device unwatches and closes every fd it had.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/virtio_vsock.h"
#include "tests/test_virtio_vsock_loop.h"
#include "tests/fuzz/fuzz_input.h"

#define RAM (256 * 1024)
#define RING(q) (0x3000u * (q)) /* desc, avail +0x1000, used +0x2000 */
#define BUFS 0x10000u           /* packet buffers from here on */
#define TX_SLOT 0x10100u        /* a tx slot: header + 64 KiB + room; two of them */
#define RX_BUFS (BUFS + 2 * TX_SLOT)
#define NHOST 8 /* host sockets the fuzzer holds */
#define CID 3

static uint8_t *ram;
static char dir[64], uds[96];
static int guest_listener = -1; /* uds_1: where the guest's connections to port 1 land */

static void init_once(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	ram = aligned_alloc(4096, RAM);
	snprintf(dir, sizeof(dir), "/tmp/fuzz-vsock-%d", (int)getpid());
	snprintf(uds, sizeof(uds), "%s/v", dir);
	if (!ram || (mkdir(dir, 0700) && errno != EEXIST))
		abort();
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_1", uds);
	unlink(a.sun_path);
	guest_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (guest_listener < 0 || bind(guest_listener, (struct sockaddr *)&a, sizeof(a)) || listen(guest_listener, 64))
		abort();
}

struct fz {
	struct virtio_mmio t;
	struct virtio_vsock *v;
	struct tw w;
	uint16_t qsize[3];
	uint16_t avail_idx[3];
	int host[NHOST];
	unsigned next_host;
};

static void reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
	virtio_mmio_io(t, off, b, 4, true);
}

static void driver_init(struct fz *f)
{
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

	reg(&f->t, VIRTIO_MMIO_STATUS, 0);
	reg(&f->t, VIRTIO_MMIO_STATUS, s);
	reg(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	reg(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, 1); /* VERSION_1 */
	reg(&f->t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg(&f->t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)f->t.offered);
	s |= VIRTIO_CONFIG_S_FEATURES_OK;
	reg(&f->t, VIRTIO_MMIO_STATUS, s);
	for (unsigned q = 0; q < 3; q++) {
		reg(&f->t, VIRTIO_MMIO_QUEUE_SEL, q);
		reg(&f->t, VIRTIO_MMIO_QUEUE_NUM, f->qsize[q]);
		reg(&f->t, VIRTIO_MMIO_QUEUE_DESC_LOW, RING(q));
		reg(&f->t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, RING(q) + 0x1000);
		reg(&f->t, VIRTIO_MMIO_QUEUE_USED_LOW, RING(q) + 0x2000);
		reg(&f->t, VIRTIO_MMIO_QUEUE_READY, 1);
		f->avail_idx[q] = 0;
	}
	reg(&f->t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
}

static void poke(uint64_t gpa, const void *src, size_t len)
{
	if (gpa < RAM && len <= RAM - gpa)
		memcpy(ram + gpa, src, len);
}

static void desc(struct fz *f, unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	struct vring_desc d = { addr, len, flags, next };

	if (f->qsize[q])
		poke(RING(q) + 16ull * (i % f->qsize[q]), &d, sizeof(d));
}

static void post(struct fz *f, unsigned q, uint16_t head)
{
	if (!f->qsize[q])
		return;
	poke(RING(q) + 0x1000 + 4 + 2ull * (f->avail_idx[q] % f->qsize[q]), &head, 2);
	f->avail_idx[q]++;
	poke(RING(q) + 0x1000 + 2, &f->avail_idx[q], 2);
}

/* Mostly plausible values, sometimes anything. */
static uint32_t port(struct in *in)
{
	static const uint32_t common[] = {
		1, 2, 80, 1024, VSOCK_HOST_PORT_BASE, VSOCK_HOST_PORT_BASE + 1, 0xffffffff, 0
	};
	uint8_t k = take(in, 1);

	return k < 0xf0 ? common[k % 8] : (uint32_t)take(in, 4);
}

static void vsock_hdr(struct in *in, struct virtio_vsock_hdr *h)
{
	uint8_t pick = take(in, 1);

	h->src_cid = pick & 1 ? take(in, 8) : CID;
	h->dst_cid = pick & 2 ? take(in, 8) : VSOCK_HOST_CID;
	h->src_port = port(in);
	h->dst_port = port(in);
	h->len = pick & 4 ? (uint32_t)take(in, 4) : (uint32_t)take(in, 2);
	h->type = pick & 8 ? take(in, 2) : VIRTIO_VSOCK_TYPE_STREAM;
	h->op = take(in, 1) % 9;
	h->flags = take(in, 1) & 7;
	h->buf_alloc = pick & 16 ? (uint32_t)take(in, 4) : (uint32_t)take(in, 1) << 10;
	h->fwd_cnt = pick & 32 ? (uint32_t)take(in, 4) : (uint32_t)take(in, 2);
}

/* A whole tx packet: header (+ payload) in one or two descriptors. */
static void tx_packet(struct fz *f, struct in *in)
{
	struct virtio_vsock_hdr h;
	uint16_t head = take(in, 1), split = take(in, 1);
	uint32_t plen = split & 0x80 ? (uint32_t)take(in, 2) + 1 : (uint32_t)take(in, 1);
	uint32_t at = BUFS + (head % 2) * TX_SLOT;

	vsock_hdr(in, &h);
	poke(at, &h, sizeof(h));
	memset(ram + at + sizeof(h), (int)take(in, 1), plen);
	if (split % 3 == 0 || !f->qsize[1]) {
		desc(f, 1, head, at, sizeof(h) + plen, 0, 0);
	} else {
		uint32_t cut = split % 3 == 1 ? sizeof(h) : split % sizeof(h);
		desc(f, 1, head, at, cut, VRING_DESC_F_NEXT, (head + 1) % f->qsize[1]);
		desc(f, 1, head + 1, at + cut, sizeof(h) + plen - cut, 0, 0);
	}
	post(f, 1, head % (f->qsize[1] ? f->qsize[1] : 1));
	virtio_mmio_notify(&f->t, VSOCK_TXQ);
}

static void rx_buffer(struct fz *f, struct in *in)
{
	uint16_t head = take(in, 1), len = take(in, 2) % 4200;

	desc(f, 0, head, RX_BUFS + (head % 8) * 0x1100u, len, VRING_DESC_F_WRITE, 0);
	post(f, 0, head % (f->qsize[0] ? f->qsize[0] : 1));
	virtio_mmio_notify(&f->t, VSOCK_RXQ);
}

static void keep_host(struct fz *f, int fd)
{
	unsigned k = f->next_host++ % NHOST;

	if (fd < 0)
		return;
	if (f->host[k] >= 0)
		close(f->host[k]);
	f->host[k] = fd;
}

static void host_action(struct fz *f, struct in *in)
{
	static uint8_t buf[70000];
	unsigned k = take(in, 1) % NHOST;
	uint8_t what = take(in, 1);
	size_t n = (size_t)take(in, 2) * ((what & 0x80) ? 1 : 0) + 1;
	int fd = f->host[k];

	if (fd < 0)
		return;
	switch (what % 5) {
	case 0:
		memset(buf, 'h', n);
		if (send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* full or gone: fine */
		}
		break;
	case 1:
		if (recv(fd, buf, n, MSG_DONTWAIT) < 0) {
			/* nothing there: fine */
		}
		break;
	case 2: shutdown(fd, what & 4 ? SHUT_RDWR : SHUT_WR); break;
	case 3:
		close(fd);
		f->host[k] = -1;
		break;
	case 4: /* take everything there is, so the device can flush */
		while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		break;
	}
}

static void hybrid_client(struct fz *f, struct in *in)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char line[48];
	uint8_t kind = take(in, 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int n;

	if (fd < 0)
		return;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", uds);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return;
	}
	if (kind & 1) {
		n = snprintf(line, sizeof(line), "CONNECT %u\n", port(in));
	} else {
		n = take(in, 1) % sizeof(line);
		for (int i = 0; i < n; i++)
			line[i] = (char)take(in, 1);
	}
	if (n > 0 && send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* the device may have closed it already */
	}
	keep_host(f, fd);
}

/* Run the fd callbacks until nothing is ready; the device must get there. */
static void pump(struct fz *f)
{
	int fd;

	while ((fd = accept4(guest_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
		keep_host(f, fd);
	for (int i = 0; i < 1000; i++)
		if (tw_round(&f->w, 0) == 0)
			return;
	abort(); /* a callback keeps firing: the device spins on a ready fd */
}

/* After every step: memory within VSOCK_BUF_ALLOC per connection, and
 * every chain popped from a sound queue given back (the device holds no
 * guest buffer between calls). */
static void check_invariants(struct fz *f)
{
	struct vsock_stats s;

	virtio_vsock_stats(f->v, &s);
	if (s.conns > VSOCK_MAX_CONNS || s.buffered > (size_t)s.conns * VSOCK_BUF_ALLOC ||
	    s.buffer_mem > (size_t)s.conns * VSOCK_BUF_ALLOC)
		abort();
	for (unsigned q = 0; q < 3; q++)
		if (!f->t.vqs[q].broken && f->t.vqs[q].last_avail != f->t.vqs[q].used_idx)
			abort();
}

static void step(struct fz *f, struct in *in)
{
	uint8_t op = take(in, 1);

	switch (op % 12) {
	case 0: { /* raw bytes anywhere */
		uint32_t at = (uint32_t)take(in, 3) % RAM;
		uint8_t len = take(in, 1) % 33, b[32];
		for (unsigned i = 0; i < len; i++)
			b[i] = take(in, 1);
		poke(at, b, len);
		break;
	}
	case 1: { /* a descriptor */
		unsigned q = take(in, 1) % 3, i = take(in, 1);
		uint64_t addr = take(in, 1) & 0x80 ? take(in, 8) : take(in, 3) % RAM;
		uint32_t len = take(in, 1) & 0x80 ? take(in, 4) : take(in, 2);
		uint16_t flags = take(in, 1) & 7, next = take(in, 1);
		desc(f, q, i, addr, len, flags, next);
		break;
	}
	case 2: { /* a vsock header somewhere */
		struct virtio_vsock_hdr h;
		uint32_t at = BUFS + (uint32_t)take(in, 2) % (RAM - BUFS - sizeof(h));
		vsock_hdr(in, &h);
		poke(at, &h, sizeof(h));
		break;
	}
	case 3: {
		unsigned q = take(in, 1) % 3;
		post(f, q, take(in, 1) & 0x80 ? take(in, 2) : take(in, 1));
		break;
	}
	case 4: virtio_mmio_notify(&f->t, take(in, 1) % 4); break;
	case 5: tx_packet(f, in); break;
	case 6: rx_buffer(f, in); break;
	case 7: host_action(f, in); break;
	case 8: {
		int fd;
		if (virtio_vsock_connect(f->v, port(in), &fd, NULL) == 0)
			keep_host(f, fd);
		break;
	}
	case 9: hybrid_client(f, in); break;
	case 10: pump(f); break;
	case 11:
		switch (take(in, 1) % 4) {
		case 0: virtio_vsock_transport_reset(f->v); break;
		case 1: reg(&f->t, VIRTIO_MMIO_STATUS, 0); break;
		case 2: driver_init(f); break;
		case 3:
			reg(&f->t, VIRTIO_MMIO_QUEUE_SEL, take(in, 1) % 3);
			reg(&f->t, VIRTIO_MMIO_QUEUE_READY, 0);
			break;
		}
		break;
	}
	check_invariants(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f;
	struct in in = { data, size };
	struct guest_mem mem;
	struct vsock_opts o = { .guest_cid = CID, .uds_path = uds };
	int steps = 0, probe;

	if (!ram)
		init_once();
	probe = dup(0);
	close(probe);
	memset(ram, 0, RAM);
	memset(&f, 0, sizeof(f));
	for (int i = 0; i < NHOST; i++)
		f.host[i] = -1;
	if (gm_init_buffer(&mem, ram, RAM, NULL))
		abort();
	for (unsigned q = 0; q < 3; q++) {
		uint8_t b = take(&in, 1);
		f.qsize[q] = b < 0xf0 ? 1u << (b % 9) : b & 0xf;
	}
	f.w.t = &f.t;
	o.io = (struct fd_watch_ops){ tw_watch, tw_unwatch, tw_kick, &f.w };
	if (virtio_vsock_open(&f.v, &o, NULL))
		abort();
	if (virtio_mmio_init(&f.t, &virtio_vsock_ops, f.v, &mem, NULL, NULL, NULL))
		abort();
	driver_init(&f);
	while (in.n && steps++ < 400)
		step(&f, &in);
	pump(&f);
	virtio_mmio_destroy(&f.t);
	virtio_vsock_close(f.v);
	if (f.w.n != 0)
		abort(); /* an fd left watched after close */
	for (int i = 0; i < NHOST; i++)
		if (f.host[i] >= 0)
			close(f.host[i]);
	for (int fd; (fd = accept4(guest_listener, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
		close(fd);
	{
		int after = dup(0);

		close(after);
		if (after != probe)
			abort(); /* an fd leaked */
	}
	return 0;
}
