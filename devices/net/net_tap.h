/* TAP backend of the virtio-net device: a /dev/net/tun fd in TAP mode,
 * no packet-info prefix, with 12-byte virtio-net headers (TUNSETVNETHDRSZ)
 * in front of every frame in both directions, no offloads, non-blocking.
 * One read() returns one frame, one write() sends one. */
#ifndef TVM_NET_TAP_H
#define TVM_NET_TAP_H

#include <net/if.h>

#include "vmm/core/err.h"

/* Attach to the TAP device name (it must exist, or be creatable by us:
 * CAP_NET_ADMIN), or create a new one named "tvm%d" when name is NULL
 * (it disappears when the fd is closed). The kernel's name for it goes to
 * ifname. Returns the fd (non-blocking, close-on-exec, owned by the caller)
 * or -errno with e = "net tap NAME: reason". */
int net_tap_open(const char *name, char ifname[IFNAMSIZ], struct tvm_err *e);

/* An fd opened elsewhere: if it is a TAP, check it is set up as above
 * (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR; else the frame would start where
 * the kernel does not expect it), set the 12-byte header size and no
 * offloads, and put its name in ifname. Returns 1 for a TAP, 0 for
 * anything else (a test backend: one frame with its header per message),
 * or -EINVAL with e for a TAP set up otherwise. */
int net_tap_adopt(int fd, char ifname[IFNAMSIZ], struct tvm_err *e);

#endif
