#include "vmm/snapshot/vm_state.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

static int vmio(struct kvm_sys *k, unsigned long req, void *arg, const char *name, struct tvm_err *e)
{
	if (ioctl(k->vm_fd, req, arg) < 0)
		return tvm_errf(e, errno, "%s: %s", name, strerror(errno));
	return 0;
}

#define VMIO(k, req, arg, e) vmio(k, req, arg, #req, e)

int vm_state_save(struct kvm_sys *k, struct vm_state *s, struct tvm_err *e)
{
	int r = 0;

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < 3 && !r; i++) {
		s->chip[i].chip_id = i;
		r = VMIO(k, KVM_GET_IRQCHIP, &s->chip[i], e);
	}
	if (!r)
		r = VMIO(k, KVM_GET_PIT2, &s->pit, e);
	if (!r)
		r = VMIO(k, KVM_GET_CLOCK, &s->clock, e);
	return r;
}

int vm_state_restore(struct kvm_sys *k, const struct vm_state *s, struct tvm_err *e)
{
	struct kvm_clock_data clock = { .clock = s->clock.clock }; /* no REALTIME: keep the saved value */
	struct kvm_pit_state2 pit = s->pit;
	int r = 0;

	for (unsigned i = 0; i < 3 && !r; i++) {
		struct kvm_irqchip c = s->chip[i];

		r = VMIO(k, KVM_SET_IRQCHIP, &c, e);
	}
	if (!r)
		r = VMIO(k, KVM_SET_PIT2, &pit, e);
	if (!r)
		r = VMIO(k, KVM_SET_CLOCK, &clock, e);
	return r;
}

void vm_state_write(struct snap_w *w, const struct vm_state *s)
{
	snap_w_begin(w, SNAP_VM, 0);
	for (unsigned i = 0; i < 3; i++)
		snap_w_bytes(w, &s->chip[i], sizeof(s->chip[i]));
	snap_w_bytes(w, &s->pit, sizeof(s->pit));
	snap_w_u64(w, s->clock.clock);
	snap_w_end(w);
}

int vm_state_read(const struct snap_section *sec, struct vm_state *s, struct tvm_err *e)
{
	struct snap_r r;

	memset(s, 0, sizeof(*s));
	snap_r_init(&r, sec);
	for (unsigned i = 0; i < 3; i++) {
		snap_r_copy(&r, &s->chip[i], sizeof(s->chip[i]));
		if (s->chip[i].chip_id != i)
			snap_r_fail(&r);
	}
	snap_r_copy(&r, &s->pit, sizeof(s->pit));
	s->clock.clock = snap_r_u64(&r);
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "VM state (irqchip, PIT, clock): malformed section");
	return 0;
}
