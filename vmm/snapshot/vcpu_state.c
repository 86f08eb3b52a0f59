#include "vmm/snapshot/vcpu_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_BATCH_HDR sizeof(struct kvm_msrs)

_Static_assert(sizeof(struct kvm_xsave) == sizeof(((struct vcpu_state *)0)->xsave), "KVM_GET_XSAVE size");

int vcpu_msr_list(struct kvm_sys *k, uint32_t **idx, uint32_t *n, struct tvm_err *e)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *l;

	*idx = NULL;
	*n = 0;
	/* The first call fails with E2BIG and says how many there are. */
	if (ioctl(k->sys_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return tvm_errf(e, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
	if (probe.nmsrs > VCPU_STATE_MAX_MSRS)
		probe.nmsrs = VCPU_STATE_MAX_MSRS;
	l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(uint32_t));
	if (!l)
		return tvm_errf(e, ENOMEM, "KVM_GET_MSR_INDEX_LIST: out of memory");
	l->nmsrs = probe.nmsrs;
	if (ioctl(k->sys_fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		free(l);
		return tvm_errf(e, errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
	}
	*idx = malloc((l->nmsrs ? l->nmsrs : 1) * sizeof(uint32_t));
	if (!*idx) {
		free(l);
		return tvm_errf(e, ENOMEM, "KVM_GET_MSR_INDEX_LIST: out of memory");
	}
	memcpy(*idx, l->indices, l->nmsrs * sizeof(uint32_t));
	*n = l->nmsrs;
	free(l);
	return 0;
}

/* KVM_GET_MSRS over the list, dropping each MSR it refuses (it stops at the
 * first one and returns how many it read). */
static int save_msrs(struct vcpu *v, const uint32_t *idx, uint32_t n, struct vcpu_state *s, struct tvm_err *e)
{
	struct kvm_msrs *m = calloc(1, MSR_BATCH_HDR + VCPU_STATE_MAX_MSRS * sizeof(struct kvm_msr_entry));
	uint32_t done = 0;

	if (!m)
		return tvm_errf(e, ENOMEM, "vcpu %d: out of memory", v->index);
	if (n > VCPU_STATE_MAX_MSRS)
		n = VCPU_STATE_MAX_MSRS;
	s->nmsrs = 0;
	while (done < n) {
		int r;

		m->nmsrs = n - done;
		for (uint32_t i = 0; i < m->nmsrs; i++)
			m->entries[i] = (struct kvm_msr_entry){ .index = idx[done + i] };
		r = ioctl(v->fd, KVM_GET_MSRS, m);
		if (r < 0) {
			free(m);
			return tvm_errf(e, errno, "vcpu %d: KVM_GET_MSRS: %s", v->index, strerror(errno));
		}
		memcpy(&s->msrs[s->nmsrs], m->entries, (size_t)r * sizeof(m->entries[0]));
		s->nmsrs += (uint32_t)r;
		done += (uint32_t)r + 1; /* skip the refused one */
	}
	free(m);
	return 0;
}

/* ioctl helper: "vcpu N: NAME: reason". */
static int vio(struct vcpu *v, unsigned long req, void *arg, const char *name, struct tvm_err *e)
{
	if (ioctl(v->fd, req, arg) < 0)
		return tvm_errf(e, errno, "vcpu %d: %s: %s", v->index, name, strerror(errno));
	return 0;
}

#define VIO(v, req, arg, e) vio(v, req, arg, #req, e)

int vcpu_state_save(struct vcpu *v, struct kvm_sys *k, const uint32_t *msrs, uint32_t nmsrs, struct vcpu_state *s,
		    struct tvm_err *e)
{
	int r, khz;

	memset(s, 0, sizeof(*s));
	r = VIO(v, KVM_GET_REGS, &s->regs, e);
	if (!r)
		r = VIO(v, KVM_GET_SREGS, &s->sregs, e);
	if (!r && ioctl(k->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE) > 0) {
		s->flags |= VCPU_HAS_XSAVE;
		r = VIO(v, KVM_GET_XSAVE, s->xsave, e);
	} else if (!r) {
		r = VIO(v, KVM_GET_FPU, &s->fpu, e);
	}
	if (!r && ioctl(k->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_XCRS) > 0) {
		s->flags |= VCPU_HAS_XCRS;
		r = VIO(v, KVM_GET_XCRS, &s->xcrs, e);
	}
	if (!r)
		r = VIO(v, KVM_GET_LAPIC, &s->lapic, e);
	if (!r)
		r = save_msrs(v, msrs, nmsrs, s, e);
	if (!r && ioctl(k->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_DEBUGREGS) > 0) {
		s->flags |= VCPU_HAS_DEBUGREGS;
		r = VIO(v, KVM_GET_DEBUGREGS, &s->dregs, e);
	}
	if (!r)
		r = VIO(v, KVM_GET_VCPU_EVENTS, &s->events, e);
	if (!r)
		r = VIO(v, KVM_GET_MP_STATE, &s->mp, e);
	if (r)
		return r;
	khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	s->tsc_khz = khz > 0 ? (uint32_t)khz : 0;
	return 0;
}

static int restore_msrs(struct vcpu *v, const struct vcpu_state *s, struct tvm_err *e)
{
	struct kvm_msrs *m = calloc(1, MSR_BATCH_HDR + (s->nmsrs + 1) * sizeof(struct kvm_msr_entry));
	int r;

	if (!m)
		return tvm_errf(e, ENOMEM, "vcpu %d: out of memory", v->index);
	m->nmsrs = s->nmsrs;
	memcpy(m->entries, s->msrs, s->nmsrs * sizeof(s->msrs[0]));
	r = ioctl(v->fd, KVM_SET_MSRS, m);
	if (r < 0)
		r = tvm_errf(e, errno, "vcpu %d: KVM_SET_MSRS: %s", v->index, strerror(errno));
	else if ((uint32_t)r != s->nmsrs)
		r = tvm_errf(e, EINVAL, "vcpu %d: KVM_SET_MSRS: MSR 0x%x refused", v->index, s->msrs[r].index);
	else
		r = 0;
	free(m);
	return r;
}

static int restore_tsc_khz(struct vcpu *v, const struct vcpu_state *s, struct tvm_err *e)
{
	int now = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);

	if (!s->tsc_khz || now == (int)s->tsc_khz)
		return 0;
	if (ioctl(v->fd, KVM_SET_TSC_KHZ, (unsigned long)s->tsc_khz) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_TSC_KHZ %u (host %d): %s", v->index, s->tsc_khz, now,
				strerror(errno));
	return 0;
}

int vcpu_state_restore(struct vcpu *v, struct kvm_sys *k, const struct vcpu_state *s, struct tvm_err *e)
{
	struct kvm_vcpu_events ev = s->events;
	struct kvm_mp_state mp = s->mp;
	int r = restore_tsc_khz(v, s, e);

	(void)k;
	if (!r)
		r = VIO(v, KVM_SET_SREGS, (void *)&s->sregs, e);
	if (!r)
		r = VIO(v, KVM_SET_REGS, (void *)&s->regs, e);
	if (!r && (s->flags & VCPU_HAS_XSAVE))
		r = VIO(v, KVM_SET_XSAVE, (void *)s->xsave, e);
	else if (!r)
		r = VIO(v, KVM_SET_FPU, (void *)&s->fpu, e);
	if (!r && (s->flags & VCPU_HAS_XCRS))
		r = VIO(v, KVM_SET_XCRS, (void *)&s->xcrs, e);
	if (!r)
		r = VIO(v, KVM_SET_LAPIC, (void *)&s->lapic, e);
	if (!r)
		r = restore_msrs(v, s, e);
	if (!r && (s->flags & VCPU_HAS_DEBUGREGS))
		r = VIO(v, KVM_SET_DEBUGREGS, (void *)&s->dregs, e);
	/* Pending NMI and SIPI vector are only taken when flagged valid. */
	ev.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR;
	if (!r)
		r = VIO(v, KVM_SET_VCPU_EVENTS, &ev, e);
	if (!r)
		r = VIO(v, KVM_SET_MP_STATE, &mp, e);
	return r;
}

void vcpu_state_write(struct snap_w *w, uint32_t index, const struct vcpu_state *s)
{
	snap_w_begin(w, SNAP_VCPU, index);
	snap_w_u32(w, s->flags);
	snap_w_u32(w, s->tsc_khz);
	snap_w_bytes(w, &s->regs, sizeof(s->regs));
	snap_w_bytes(w, &s->sregs, sizeof(s->sregs));
	if (s->flags & VCPU_HAS_XSAVE)
		snap_w_bytes(w, s->xsave, sizeof(s->xsave));
	else
		snap_w_bytes(w, &s->fpu, sizeof(s->fpu));
	if (s->flags & VCPU_HAS_XCRS)
		snap_w_bytes(w, &s->xcrs, sizeof(s->xcrs));
	snap_w_bytes(w, &s->lapic, sizeof(s->lapic));
	snap_w_bytes(w, &s->events, sizeof(s->events));
	snap_w_u32(w, s->mp.mp_state);
	if (s->flags & VCPU_HAS_DEBUGREGS)
		snap_w_bytes(w, &s->dregs, sizeof(s->dregs));
	snap_w_u32(w, s->nmsrs);
	for (uint32_t i = 0; i < s->nmsrs; i++) {
		snap_w_u32(w, s->msrs[i].index);
		snap_w_u64(w, s->msrs[i].data);
	}
	snap_w_end(w);
}

int vcpu_state_read(const struct snap_section *sec, struct vcpu_state *s, struct tvm_err *e)
{
	struct snap_r r;

	memset(s, 0, sizeof(*s));
	snap_r_init(&r, sec);
	s->flags = snap_r_u32(&r);
	if (s->flags & ~(uint32_t)(VCPU_HAS_XSAVE | VCPU_HAS_XCRS | VCPU_HAS_DEBUGREGS))
		snap_r_fail(&r);
	s->tsc_khz = snap_r_u32(&r);
	snap_r_copy(&r, &s->regs, sizeof(s->regs));
	snap_r_copy(&r, &s->sregs, sizeof(s->sregs));
	if (s->flags & VCPU_HAS_XSAVE)
		snap_r_copy(&r, s->xsave, sizeof(s->xsave));
	else
		snap_r_copy(&r, &s->fpu, sizeof(s->fpu));
	if (s->flags & VCPU_HAS_XCRS)
		snap_r_copy(&r, &s->xcrs, sizeof(s->xcrs));
	snap_r_copy(&r, &s->lapic, sizeof(s->lapic));
	snap_r_copy(&r, &s->events, sizeof(s->events));
	s->mp.mp_state = snap_r_u32(&r);
	if (s->mp.mp_state > 10) /* KVM_MP_STATE_SUSPENDED, the last one */
		snap_r_fail(&r);
	if (s->flags & VCPU_HAS_DEBUGREGS)
		snap_r_copy(&r, &s->dregs, sizeof(s->dregs));
	s->nmsrs = snap_r_u32(&r);
	if (s->nmsrs > VCPU_STATE_MAX_MSRS) {
		snap_r_fail(&r);
		s->nmsrs = 0;
	}
	for (uint32_t i = 0; i < s->nmsrs; i++) {
		s->msrs[i].index = snap_r_u32(&r);
		s->msrs[i].data = snap_r_u64(&r);
	}
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "vcpu %u state: malformed section", sec ? sec->index : 0);
	return 0;
}
