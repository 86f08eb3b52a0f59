#include "vmm/snapshot/snapshot_config.h"

#include <errno.h>
#include <string.h>

#define MAX_CPUS 64
#define MIN_MEM_MIB 16
#define MAX_MEM_MIB (1u << 20)

void snap_config_write(struct snap_w *w, const struct tvm_config *c, bool quirks, const char *cmdline,
		       const uint64_t *drive_size)
{
	snap_w_begin(w, SNAP_CONFIG, 0);
	snap_w_u32(w, c->mem_mib);
	snap_w_u32(w, c->cpus);
	snap_w_u32(w, quirks);
	snap_w_u32(w, c->vsock_cid);
	snap_w_u32(w, c->nr_drives);
	snap_w_u32(w, c->root_drive != 0);
	snap_w_str(w, c->kernel_path);
	snap_w_str(w, cmdline);
	for (unsigned i = 0; i < c->nr_drives; i++) {
		const struct tvm_drive *d = &c->drives[i];

		snap_w_str(w, d->path);
		snap_w_str(w, d->id);
		snap_w_u32(w, d->read_only != 0);
		snap_w_u32(w, d->cow != 0);
		snap_w_u64(w, d->overlay_limit);
		snap_w_u64(w, drive_size[i]);
	}
	snap_w_end(w);
}

static bool flag_ok(uint32_t v)
{
	return v <= 1;
}

void snap_net_write(struct snap_w *w, const struct tvm_net *n, const char *mac)
{
	snap_w_begin(w, SNAP_NET, 0);
	snap_w_u32(w, n->mtu);
	snap_w_u32(w, n->no_offload != 0);
	snap_w_str(w, mac);
	snap_w_end(w);
}

int snap_net_read(const struct snap_section *sec, struct snap_config *s, struct tvm_err *e)
{
	struct snap_net *n = &s->net;
	struct snap_r r;

	memset(n, 0, sizeof(*n));
	snap_r_init(&r, sec);
	n->mtu = snap_r_u32(&r);
	n->no_offload = snap_r_u32(&r);
	if (!snap_r_str(&r, n->mac, sizeof(n->mac)) || strlen(n->mac) != 17)
		snap_r_fail(&r);
	if (!snap_r_done(&r) || n->mtu > 65535 || !flag_ok(n->no_offload))
		return tvm_errf(e, EINVAL, "net: malformed section");
	n->present = true;
	return 0;
}

/* The restored VM's network: see snap_config_apply. */
static int apply_net(const struct snap_net *s, const struct tvm_config *o, struct tvm_net *c, struct tvm_err *e)
{
	const struct tvm_net *on = o ? &o->net : NULL;
	bool asked = on && on->enabled;

	if (asked && !s->present)
		return tvm_errf(e, EINVAL, "net: the snapshot has no network device; a restore cannot add one");
	if (s->present && !asked)
		return tvm_errf(e, EINVAL,
				"net: the snapshot has a network device: give it a TAP and its egress "
				"policy (--net TAP|auto, --net-allow ...)");
	if (!s->present)
		return 0;
	if (on->guest_ip || on->guest_gw || on->mtu || on->no_offload)
		return tvm_errf(e, EINVAL,
				"net: address, route, MTU and offloads come from the snapshot "
				"(the guest already has them)");
	/* The policy is the caller's only: a state file never widens it. A
	 * MAC of its own is the caller's too (a fork's child, whose guest is
	 * then told: the agent's NET), else the snapshot's: frames from
	 * another source are dropped as spoofed. */
	*c = *on;
	c->mac = on->mac ? on->mac : s->mac;
	c->mtu = s->mtu;
	c->no_offload = (int)s->no_offload;
	return 0;
}

int snap_config_read(const struct snap_section *sec, struct snap_config *s, struct tvm_err *e)
{
	struct snap_r r;

	memset(s, 0, sizeof(*s));
	snap_r_init(&r, sec);
	s->mem_mib = snap_r_u32(&r);
	s->cpus = snap_r_u32(&r);
	s->quirks = snap_r_u32(&r);
	s->vsock_cid = snap_r_u32(&r);
	s->nr_drives = snap_r_u32(&r);
	s->root_drive = snap_r_u32(&r);
	if (s->mem_mib < MIN_MEM_MIB || s->mem_mib > MAX_MEM_MIB || s->cpus < 1 || s->cpus > MAX_CPUS ||
	    !flag_ok(s->quirks) || !flag_ok(s->root_drive) || s->nr_drives > TVM_MAX_DRIVES ||
	    (s->vsock_cid && (s->vsock_cid < 3 || s->vsock_cid == UINT32_MAX)))
		return tvm_errf(e, EINVAL, "config: memory %u MiB, %u cpus, %u drives or CID %u out of range",
				s->mem_mib, s->cpus, s->nr_drives, s->vsock_cid);
	snap_r_str(&r, s->kernel, sizeof(s->kernel));
	snap_r_str(&r, s->cmdline, sizeof(s->cmdline));
	for (unsigned i = 0; i < s->nr_drives; i++) {
		struct snap_drive *d = &s->d[i];

		if (!snap_r_str(&r, d->path, sizeof(d->path)) || !d->path[0])
			snap_r_fail(&r);
		d->has_id = snap_r_str(&r, d->id, sizeof(d->id)) != NULL;
		d->read_only = snap_r_u32(&r);
		d->cow = snap_r_u32(&r);
		d->overlay_limit = snap_r_u64(&r);
		d->size = snap_r_u64(&r);
		if (!flag_ok(d->read_only) || !flag_ok(d->cow) || (d->read_only && d->cow))
			snap_r_fail(&r);
	}
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "config: malformed section");
	return 0;
}

int snap_config_apply(const struct snap_config *s, const struct tvm_config *o, struct tvm_config *c, struct tvm_err *e)
{
	tvm_config_init(c);
	if (o) {
		c->serial_out_fd = o->serial_out_fd;
		c->serial_in_fd = o->serial_in_fd;
		c->log_fd = o->log_fd;
		c->ttl_ms = o->ttl_ms;
		c->idle_ms = o->idle_ms;
		c->seccomp = o->seccomp; /* how the new VM's threads are confined */
		c->cgroup = o->cgroup;   /* the host's limits belong to the new VM */
		c->t0_ns = o->t0_ns;
		c->vsock_uds = o->vsock_uds;
		c->no_inplace_drives = o->no_inplace_drives;
		if (o->nr_drives && o->nr_drives != s->nr_drives)
			return tvm_errf(e, EINVAL, "drives: the snapshot has %u, %u given", s->nr_drives, o->nr_drives);
	}
	c->mem_mib = s->mem_mib;
	c->cpus = s->cpus;
	c->quirks = s->quirks ? TVM_QUIRKS_ON : TVM_QUIRKS_OFF;
	c->vsock_cid = s->vsock_cid;
	c->kernel_path = s->kernel;
	c->cmdline = s->cmdline;
	c->nr_drives = s->nr_drives;
	c->root_drive = (int)s->root_drive;
	for (unsigned i = 0; i < s->nr_drives; i++) {
		const struct tvm_drive *od = o && o->nr_drives ? &o->drives[i] : NULL;
		struct tvm_drive *d = &c->drives[i];

		*d = (struct tvm_drive){ .path = s->d[i].path,
					 .id = s->d[i].has_id ? s->d[i].id : NULL,
					 .read_only = (int)s->d[i].read_only,
					 .cow = (int)s->d[i].cow,
					 .overlay_limit = s->d[i].overlay_limit };
		/* A restore keeps each drive's mode (its device was set up
		 * so); a caller asking read-only of a writable one would
		 * otherwise get it writable, silently. */
		if (od && od->read_only && !d->read_only)
			return tvm_errf(
				e, EINVAL,
				"drive %u: given read-only, but the snapshot has it writable (a restore keeps a "
				"drive's mode)",
				i);
		if (od && od->path)
			d->path = od->path;
		if (od) /* the device keeps its saved limits when these are none */
			d->limit = od->limit;
		/* A copy-on-write drive may be larger than its image (its
		 * file system grown into the rest): the same size again. */
		if (d->cow)
			d->size = s->d[i].size;
		if (od && d->cow) {
			d->overlay_path = od->overlay_path;
			if (od->overlay_limit)
				d->overlay_limit = od->overlay_limit;
		}
	}
	return apply_net(&s->net, o, &c->net, e);
}
