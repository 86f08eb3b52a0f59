/* Inside the virtio-vsock device: its state and the functions its files
 * share. Everything here runs with v->lock held unless said otherwise.
 *
 * Files: virtio_vsock.c (device ops, public entry points, locking, event
 * queue), vsock_conn.c (connection table, states, host-fd watching, the
 * guest -> host byte path, credit), vsock_tx.c (packets from the guest),
 * vsock_rx.c (packets to the guest, host -> guest bytes), vsock_uds.c
 * (hybrid Unix-socket backend), vsock_buf.c (per-connection byte queue).
 */
#ifndef TVM_VSOCK_IMPL_H
#define TVM_VSOCK_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "devices/vsock/virtio_vsock.h"
#include "devices/virtio/virtqueue.h"
#include "devices/vsock/vsock_buf.h"

#define VSOCK_HDR ((uint32_t)sizeof(struct virtio_vsock_hdr)) /* 44 bytes */
#define VSOCK_RST_RING 64                                     /* RSTs owed for packets of unknown connections */
#define VSOCK_SHUT_BOTH (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND)

enum conn_state {
	CONN_FREE = 0,
	CONN_HANDSHAKE,  /* hybrid client whose "CONNECT <port>\n" is not complete */
	CONN_CONNECTING, /* host-initiated: REQUEST owed or sent, RESPONSE awaited */
	CONN_ESTABLISHED,
	CONN_CLOSED, /* host end closed; RST owed to the guest, slot freed once sent */
};

/* Packets a connection owes the guest (bits of vsock_conn.owe), sent in
 * this order of priority; data goes after RESPONSE and before SHUTDOWN. */
enum {
	OWE_RST = 1,
	OWE_REQUEST = 2,
	OWE_RESPONSE = 4,
	OWE_SHUTDOWN = 8,
	OWE_CREDIT = 16,
};

/* One connection. Slots live as long as the device, so a late fd
 * callback for a slot that was freed or reused finds a consistent (if
 * different) connection and at worst tries a read that would block. */
struct vsock_conn {
	struct virtio_vsock *v; /* back pointer for fd callbacks (fixed) */
	enum conn_state state;
	bool hybrid;       /* write "OK <host_port>\n" to fd when the guest accepts */
	int fd;            /* host end, non-blocking, owned; -1 when closed */
	uint32_t watching; /* epoll events registered for fd; 0: not watched */
	uint32_t guest_port, host_port;
	uint32_t owe; /* OWE_* */

	/* host -> guest */
	bool host_readable;      /* fd may have bytes or EOF: read while credit allows */
	bool host_eof;           /* fd's read side has ended */
	uint32_t tx_cnt;         /* payload bytes sent to the guest (wraps) */
	uint32_t peer_buf_alloc; /* the guest's buf_alloc and fwd_cnt, from its last header */
	uint32_t peer_fwd_cnt;

	/* guest -> host */
	uint32_t rx_cnt;       /* payload bytes taken from the guest (wraps) */
	uint32_t fwd_cnt;      /* of those, bytes the host fd took */
	uint32_t fwd_cnt_sent; /* fwd_cnt as last told to the guest */
	uint32_t peer_shut;    /* VIRTIO_VSOCK_SHUTDOWN_* flags the guest sent */
	bool wr_shut;          /* shutdown(fd, SHUT_WR) done */
	struct vsock_buf buf;  /* guest bytes fd has not taken yet */

	uint64_t deadline_ns; /* handshake: CLOCK_MONOTONIC time its line must be complete by */
	uint8_t line_len;     /* handshake: bytes in line */
	char line[VSOCK_LINE_MAX];
};

/* An RST for a packet that matched no connection. */
struct vsock_rst {
	uint32_t guest_port, host_port;
};

struct virtio_vsock {
	pthread_mutex_t lock; /* guards everything below */
	uint64_t guest_cid;
	struct virtio_vsock_config cfg; /* little endian, as the driver reads it */
	struct fd_watch_ops io;
	char *uds_path;     /* NULL without the hybrid backend */
	int listen_fd;      /* hybrid listener or -1 */
	bool listen_paused; /* unwatched while out of fds (see accept_cb) */
	bool uds_bound;     /* uds_dev/uds_ino name the socket file we bound */
	dev_t uds_dev;
	ino_t uds_ino;
	uint64_t handshake_ns; /* a hybrid client's time to send its CONNECT line */
	int hs_timer_fd;       /* timerfd for handshake deadlines, -1 without hybrid */
	bool hs_timer_watched;
	uint64_t hs_timer_at;  /* deadline it is armed for; 0: not armed */
	int kick_fd;           /* eventfd: rx work made inside transport callbacks */
	bool rx_wanted;        /* something may now be sendable on rx */
	struct virtqueue *vqs; /* [3] while the driver runs the device, else NULL */
	bool event_pending;    /* TRANSPORT_RESET not yet posted */
	bool reset_unacked;    /* posted, and the driver has not given a buffer back since */
	uint16_t reset_avail;  /* the event queue's avail->idx when it was posted */
	uint32_t next_host_port;
	unsigned rr;     /* rx round robin: slot to try first */
	unsigned nconns; /* slots not FREE */
	uint64_t opened; /* connections ever set up (slots taken), either way */
	struct vsock_rst rst[VSOCK_RST_RING];
	unsigned rst_head, rst_len;
	struct vq_chain chain;         /* the chain being served, any queue */
	struct iovec iov[VQ_MAX_SEGS]; /* payload slice scratch */
	struct vsock_conn conns[VSOCK_MAX_CONNS];
};

/* A guest packet's header, host byte order. */
struct vsock_pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len, flags, buf_alloc, fwd_cnt;
	uint16_t type, op;
};

/* virtio_vsock.c: drop v->lock, then kick rx if work was made for it. */
void vsock_unlock_kick_rx(struct virtio_vsock *v);

/* vsock_conn.c */
/* A free slot for fd (owned from now on) in state st. When VSOCK_MAX_CONNS
 * are in use, the oldest hybrid client still handshaking is closed for it;
 * NULL when none is. */
struct vsock_conn *vsock_conn_new(struct virtio_vsock *v, int fd, enum conn_state st);
/* The connection with these ports (not one still handshaking), or NULL. */
struct vsock_conn *vsock_conn_find(struct virtio_vsock *v, uint32_t guest_port, uint32_t host_port);
/* Host-initiated: c (HANDSHAKE or fresh) now wants guest port guest_port. */
void vsock_conn_start(struct virtio_vsock *v, struct vsock_conn *c, uint32_t guest_port);
/* Close the host end and free the slot; the guest is told nothing. */
void vsock_conn_drop(struct virtio_vsock *v, struct vsock_conn *c);
/* Close the host end and owe the guest an RST (or just drop when the
 * guest never heard of the connection). */
void vsock_conn_reset(struct virtio_vsock *v, struct vsock_conn *c);
/* Drop every connection and owed RST (device reset, transport reset). */
void vsock_conn_drop_all(struct virtio_vsock *v);
/* Register the fd events c needs now (reset c if that fails). */
void vsock_conn_watch(struct virtio_vsock *v, struct vsock_conn *c);
/* Bytes the guest can take now (spec 5.10.6.3). */
uint32_t vsock_conn_credit(const struct vsock_conn *c);
/* Whether c's host socket should be read now (open, readable as far as
 * we know, the guest receiving and giving credit). */
bool vsock_conn_can_read(const struct vsock_conn *c);
/* Guest payload bytes [skip, skip + len) of iov[0..n) for the host fd. */
void vsock_conn_write(struct virtio_vsock *v, struct vsock_conn *c, const struct iovec *iov, int n, size_t skip,
		      uint32_t len);
/* Send buffered guest bytes the host socket takes now. */
void vsock_conn_flush(struct virtio_vsock *v, struct vsock_conn *c);
/* The guest's SHUTDOWN flags (spec 5.10.6.5). */
void vsock_conn_guest_shutdown(struct virtio_vsock *v, struct vsock_conn *c, uint32_t flags);
/* Both directions finished: reset (the final RST closes the guest side). */
void vsock_conn_check_done(struct virtio_vsock *v, struct vsock_conn *c);
/* c owes the guest these OWE_* packets. */
void vsock_conn_owe(struct virtio_vsock *v, struct vsock_conn *c, uint32_t bits);
/* fd callback of a connection (arg: the slot). Event-loop thread, takes
 * v->lock itself and kicks rx after dropping it. */
void vsock_conn_cb(void *arg, uint32_t events);

/* vsock_tx.c: one chain from the tx queue. */
void vsock_tx_packet(struct virtio_vsock *v, const struct vq_chain *c);
/* Owe an RST for a packet matching no connection (dropped when full). */
void vsock_rst_unknown(struct virtio_vsock *v, uint32_t guest_port, uint32_t host_port);

/* vsock_rx.c: fill rx buffers while there is something to send. Returns 0
 * or -EIO (broken queue). */
int vsock_rx_run(struct virtio_vsock *v, struct virtqueue *vq);

/* vsock_uds.c */
/* Listen on v->uds_path and watch it (open time). 0 or -errno with e set. */
int vsock_uds_listen(struct virtio_vsock *v, struct tvm_err *e);
/* Stop listening and unlink the path if it is still our socket file. */
void vsock_uds_close(struct virtio_vsock *v);
/* An fd was closed: watch a listener paused for lack of fds again. */
void vsock_uds_resume(struct virtio_vsock *v);
/* Read the hybrid client's CONNECT line as far as it came. */
void vsock_uds_handshake(struct virtio_vsock *v, struct vsock_conn *c);
/* Connect to "uds_path_port": the fd, or -errno. */
int vsock_uds_dial(struct virtio_vsock *v, uint32_t port);
/* Tell a hybrid client "OK <host_port>\n": 0 or -errno. */
int vsock_uds_ok(struct vsock_conn *c);

#endif
