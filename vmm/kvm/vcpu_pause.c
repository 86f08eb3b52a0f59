#include "vmm/kvm/vcpu_pause.h"

#include <errno.h>
#include <time.h>

#include "vmm/kvm/vcpu.h"

#define REKICK_MS 5

void vcpu_pause_init(struct vcpu_pause *p)
{
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	atomic_store(&p->requested, false);
	p->parked = 0;
}

void vcpu_pause_destroy(struct vcpu_pause *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
}

int vcpu_pause_all(struct vcpu_pause *p, struct vcpu *v, int n, atomic_bool *stopping, struct tvm_err *e)
{
	int r = 0;

	pthread_mutex_lock(&p->lock);
	atomic_store(&p->requested, true);
	while (p->parked < n) {
		struct timespec ts;

		if (atomic_load(stopping)) {
			r = tvm_errf(e, ECANCELED, "pause: the VM is ending");
			break;
		}
		/* A kick can be consumed by an EINTR the thread was already
		 * handling; kicking again until parked covers that race. */
		for (int i = 0; i < n; i++)
			vcpu_kick(&v[i]);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += REKICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	if (r) {
		atomic_store(&p->requested, false);
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

void vcpu_resume_all(struct vcpu_pause *p)
{
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->requested, false);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void vcpu_pause_wake(struct vcpu_pause *p)
{
	pthread_mutex_lock(&p->lock);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void vcpu_pause_point(struct vcpu_pause *p, atomic_bool *stopping)
{
	if (!atomic_load(&p->requested))
		return;
	pthread_mutex_lock(&p->lock);
	p->parked++;
	pthread_cond_broadcast(&p->cond);
	while (atomic_load(&p->requested) && !atomic_load(stopping))
		pthread_cond_wait(&p->cond, &p->lock);
	p->parked--;
	pthread_mutex_unlock(&p->lock);
}
