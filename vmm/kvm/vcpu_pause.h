/* Pausing every vCPU of a VM (for a snapshot) and letting them go again.
 *
 * vcpu_pause_all() sets the request and kicks each vCPU thread
 * (vcpu_kick: immediate_exit + TVM_KICK_SIGNAL), again every few ms until
 * all have parked. A vCPU thread parks only right after KVM_RUN returned
 * EINTR: with immediate_exit set, KVM first completes a pending PIO/MMIO
 * exit and then returns, so the vCPU's state is consistent (KVM API doc,
 * "immediate_exit"). Parked threads sleep on a condition variable outside
 * KVM_RUN; the state is then read by the pausing thread (KVM serialises
 * vCPU ioctls on the vCPU's own mutex, and the owner is not in KVM_RUN).
 */
#ifndef TVM_VCPU_PAUSE_H
#define TVM_VCPU_PAUSE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "vmm/core/err.h"

struct vcpu;

struct vcpu_pause {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_bool requested;
	int parked; /* threads asleep in vcpu_pause_point() */
};

void vcpu_pause_init(struct vcpu_pause *p);
void vcpu_pause_destroy(struct vcpu_pause *p);

/* Park the n vCPU threads in v (all started). Returns 0 once all are
 * parked, or -ECANCELED when the VM is ending (stopping set; the request
 * is withdrawn). */
int vcpu_pause_all(struct vcpu_pause *p, struct vcpu *v, int n, atomic_bool *stopping, struct tvm_err *e);

/* Withdraw the request and wake the parked threads. */
void vcpu_resume_all(struct vcpu_pause *p);

/* Wake parked threads so they see stopping (the VM is ending). */
void vcpu_pause_wake(struct vcpu_pause *p);

/* Called by a vCPU thread after KVM_RUN returned EINTR: sleep while a
 * pause is requested and the VM is not stopping. */
void vcpu_pause_point(struct vcpu_pause *p, atomic_bool *stopping);

#endif
