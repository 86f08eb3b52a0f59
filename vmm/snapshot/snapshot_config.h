/* The SNAP_CONFIG section: what a restore needs to rebuild the VM (memory
 * size, vCPUs, quirks, drives with their modes and image sizes, vsock CID)
 * plus the kernel and guest command line it booted with (informational);
 * and the SNAP_NET section: the network device as the guest saw it (MAC,
 * MTU, offloads). The TAP and the egress policy are the restoring
 * caller's, never the file's. */
#ifndef TVM_SNAPSHOT_CONFIG_H
#define TVM_SNAPSHOT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/snapshot/snapshot_format.h"
#include "vmm/core/tvm_types.h"

#define SNAP_CMDLINE_MAX 4096

struct snap_drive {
	char path[PATH_MAX];
	char id[24];
	bool has_id;
	uint32_t read_only, cow; /* 0 or 1 */
	uint64_t overlay_limit;  /* bytes, 0: none */
	uint64_t size;           /* image bytes at snapshot time */
};

struct snap_net {
	bool present;
	uint32_t mtu, no_offload;
	char mac[18]; /* "xx:xx:xx:xx:xx:xx" (NET_MAC_STR) */
};

struct snap_config {
	uint32_t mem_mib, cpus, quirks, vsock_cid, nr_drives, root_drive;
	char kernel[PATH_MAX];
	char cmdline[SNAP_CMDLINE_MAX]; /* the composed guest command line */
	struct snap_drive d[TVM_MAX_DRIVES];
	struct snap_net net; /* filled by snap_net_read */
};

/* Append the section. drive_size[i]: image size of drive i. */
void snap_config_write(struct snap_w *w, const struct tvm_config *c, bool quirks, const char *cmdline,
		       const uint64_t *drive_size);

/* Parse and range-check the section (cpus 1..64, memory 16 MiB..1 TiB,
 * drives <= TVM_MAX_DRIVES, flags 0/1, CID 0 or 3..2^32-2). */
int snap_config_read(const struct snap_section *sec, struct snap_config *s, struct tvm_err *e);

/* Append the SNAP_NET section for network n whose device has MAC mac
 * ("xx:xx:xx:xx:xx:xx"). */
void snap_net_write(struct snap_w *w, const struct tvm_net *n, const char *mac);

/* Parse the SNAP_NET section into s->net (present = true): flag 0/1,
 * MTU <= 65535, MAC string of 17 characters. The values themselves are
 * checked where the VM's network is built (vm_add_net), as a user's would
 * be. */
int snap_net_read(const struct snap_section *sec, struct snap_config *s, struct tvm_err *e);

/* The config of a restored VM: s, with from o (may be NULL) the serial and
 * log fds, ttl, t0, vsock_uds, and when o->nr_drives == s->nr_drives each
 * drive's path (if set), overlay_path, overlay_limit and rate limit. With
 * a network (s->net.present) o must enable one: the snapshot's MAC, MTU
 * and offload setting, with o's TAP (NULL: a new one), o's egress policy
 * (none: allow all, as at boot) and o's rate limits. (A device given no
 * rate limit takes back the one saved in its own state.) Strings point into s and o. Returns 0 or
 * -EINVAL: o has another number of drives, asks for a network the
 * snapshot has none of, gives none for one it has, or sets what the guest
 * already has (guest_ip, guest_gw, mac, mtu, no_offload). */
int snap_config_apply(const struct snap_config *s, const struct tvm_config *o, struct tvm_config *c, struct tvm_err *e);

#endif
