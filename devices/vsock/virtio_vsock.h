/* virtio socket device (virtio 1.2 section 5.10), VMM side: stream sockets
 * between the guest (CID guest_cid) and the host (CID 2), three queues
 * (rx 0, tx 1, event 2), feature VIRTIO_VSOCK_F_STREAM only.
 *
 * Every host end of a connection is a connected, non-blocking stream
 * socket. Two backends produce them:
 *  - hybrid Unix sockets, Firecracker compatible (uds_path set): a host
 *    client connects to uds_path and writes "CONNECT <port>\n"; the device
 *    asks the guest's port <port> and answers "OK <host_port>\n" once the
 *    guest accepted (the client socket is closed if it refused). A client
 *    has handshake_ms to send its line, and while every connection slot is
 *    in use the oldest client still sending it is closed to make room for a
 *    new connection, so idle local clients cannot lock the agent out. A
 *    guest connecting to CID 2 port P is connected to the Unix socket
 *    "uds_path_P" (RST if nobody listens there).
 *  - in process: virtio_vsock_connect() returns one end of a socketpair.
 *
 * Data moves straight between host sockets and guest buffers; the only
 * copies are guest bytes the host socket would not take yet, held per
 * connection up to the credit the device advertised (VSOCK_BUF_ALLOC). A
 * guest that sends beyond that credit gets its connection reset; a guest
 * that gives no credit stops the device reading that host socket. So the
 * device's memory is bounded by VSOCK_MAX_CONNS * VSOCK_BUF_ALLOC whatever
 * the guest or the host clients do.
 *
 * Threads and locks: the device has its own mutex. Its virtio_dev_ops run
 * with the transport lock held and take it (order: transport, then
 * device). The fd callbacks (event-loop thread), virtio_vsock_connect()
 * and virtio_vsock_transport_reset() (any thread) take only the device
 * mutex, and call io.kick() after dropping it. Work that transport
 * callbacks create for another queue (a reply owed on rx while serving tx)
 * goes through an eventfd watched like any other fd, whose callback kicks.
 */
#ifndef TVM_VIRTIO_VSOCK_H
#define TVM_VIRTIO_VSOCK_H

#include <stddef.h>
#include <stdint.h>

#include <linux/virtio_vsock.h>

#include "devices/virtio/fd_watch.h"
#include "devices/virtio/virtio_mmio.h"
#include "vmm/core/err.h"

#define VSOCK_HOST_CID 2 /* VMADDR_CID_HOST */
#define VSOCK_DEFAULT_GUEST_CID 3
#define VSOCK_MAX_CONNS 256             /* connections incl. hybrid clients still handshaking */
#define VSOCK_HANDSHAKE_MS 5000         /* default time a hybrid client has for its CONNECT line */
#define VSOCK_BUF_ALLOC (256u << 10)    /* bytes of receive credit advertised per connection */
#define VSOCK_MAX_PKT (64u << 10)       /* payload bytes per packet, either way */
#define VSOCK_HOST_PORT_BASE (1u << 30) /* first host port handed to host-initiated connections */
#define VSOCK_LINE_MAX 32               /* bytes of a "CONNECT <port>\n" line incl. '\n' */
#define VSOCK_QUEUE_MAX 256             /* QueueNumMax of each queue */

/* Queue indices (spec 5.10.2). */
enum { VSOCK_RXQ = 0, VSOCK_TXQ = 1, VSOCK_EVQ = 2 };

/* Device options. */
struct vsock_opts {
	uint64_t guest_cid;     /* 3..0xfffffffe; 0 means VSOCK_DEFAULT_GUEST_CID */
	const char *uds_path;   /* hybrid backend's listening socket; NULL: none */
	uint32_t handshake_ms;  /* a hybrid client's time for its CONNECT line; 0: VSOCK_HANDSHAKE_MS */
	struct fd_watch_ops io; /* devices/virtio/fd_watch.h */
};

/* Counters for tests and the VMM's metrics. */
struct vsock_stats {
	unsigned conns;    /* connection slots in use */
	uint64_t opened;   /* connections ever begun, either way (a host client's handshake
			    * counts, answered or not) */
	size_t buffered;   /* guest bytes held for host sockets, all connections */
	size_t buffer_mem; /* bytes of those buffers allocated */
};

struct virtio_vsock;

/* Build the device; with uds_path, also listen there: a stale socket file
 * at the path (connecting is refused: its VM is gone) is replaced, a live
 * one (it answers: another VM's) is refused with -EADDRINUSE, anything
 * else there is an error. Returns 0 and *out (free with
 * virtio_vsock_close), or -errno with e set: -EINVAL for a bad CID, a path
 * too long for "path_4294967295", missing watch ops. */
int virtio_vsock_open(struct virtio_vsock **out, const struct vsock_opts *o, struct tvm_err *e);

/* Close every host socket and the listener (its path is unlinked if it is
 * still the socket file we bound, not one put there since) and free v.
 * The caller must first make sure no callback of v can run any more
 * (event loop stopped or v's fds unwatched) and the transport is gone. */
void virtio_vsock_close(struct virtio_vsock *v);

/* In-process backend: connect to the guest's port guest_port. *fd_out gets
 * one end of a stream socketpair (blocking, close-on-exec, owned by the
 * caller); the device treats the other end like a hybrid client that has
 * sent its CONNECT line, except that nothing is ever written to it but the
 * guest's bytes. A refused connection shows as EOF (or ECONNRESET) on
 * *fd_out; bytes written before the guest accepted are delivered after.
 * Any thread. Returns 0, -EAGAIN when VSOCK_MAX_CONNS are in use and no
 * hybrid client is handshaking, or -errno from socketpair; e may be NULL. */
int virtio_vsock_connect(struct virtio_vsock *v, uint32_t guest_port, int *fd_out, struct tvm_err *e);

/* Drop every connection (host sockets closed, no RST sent) and post
 * VIRTIO_VSOCK_EVENT_TRANSPORT_RESET on the event queue (spec 5.10.6.7),
 * e.g. after a snapshot restore. Host connections made from then on
 * (virtio_vsock_connect, hybrid clients) reach the guest once its driver
 * has handled the event (has given an event buffer back), so the reset
 * cannot cut them. Any thread, no locks held. */
void virtio_vsock_transport_reset(struct virtio_vsock *v);

/* Snapshot of the counters. Any thread. */
void virtio_vsock_stats(struct virtio_vsock *v, struct vsock_stats *s);

/* For virtio_mmio_init(&t, &virtio_vsock_ops, v, ...). */
extern const struct virtio_dev_ops virtio_vsock_ops;

#endif
