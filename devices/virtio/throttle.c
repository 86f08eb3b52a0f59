#include "devices/virtio/throttle.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "vmm/core/clock.h"

#define BLOB_FORMAT 1
#define BLOB_HEAD 8

static uint64_t mono(void)
{
	return clock_mono_ns();
}

static int make_timer(struct vq_throttle *t)
{
	if (t->fd >= 0)
		return 0;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	return t->fd < 0 ? -errno : 0;
}

static void set_active(struct vq_throttle *t)
{
	t->active = false;
	for (unsigned i = 0; i < t->n; i++)
		t->active |= limiter_active(&t->lim[i]);
}

int vq_throttle_init(struct vq_throttle *t, const struct vq_limit *l, unsigned n, const struct fd_watch_ops *io,
		     uint64_t (*clock)(void), const char *what, struct tvm_err *e)
{
	char sub[192];
	int r;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	t->clock = clock ? clock : mono;
	if (n > VQ_THROTTLE_MAX)
		return tvm_errf(e, EINVAL, "%s: %u rate limiters, at most %d", what, n, VQ_THROTTLE_MAX);
	t->n = n;
	for (unsigned i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s %s limit", what, l[i].name);
		r = limiter_init(&t->lim[i], &l[i].limit, t->clock(), sub, e);
		if (r)
			return r;
		t->queue[i] = l[i].queue;
		t->name[i] = l[i].name;
	}
	set_active(t);
	t->given = t->active;
	if (io && io->watch && io->unwatch && io->kick)
		t->io = *io; /* kept for limits a restore may adopt */
	if (!t->active)
		return 0;
	if (!t->io.kick)
		return tvm_errf(e, EINVAL, "%s: a rate limit needs watch, unwatch and kick ops", what);
	r = make_timer(t);
	return r ? tvm_errf(e, -r, "%s: timerfd: %s", what, strerror(-r)) : 0;
}

void vq_throttle_close(struct vq_throttle *t)
{
	if (t->watching)
		t->io.unwatch(t->io.ctx, t->fd);
	t->watching = false;
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	pthread_mutex_destroy(&t->lock);
}

/* With the lock: set the timer to the earliest held queue's time (or
 * disarm it). Relative, so a test's fake clock still gives real waits. */
static void arm(struct vq_throttle *t, uint64_t now)
{
	struct itimerspec its = { 0 };
	uint64_t next = 0, in;

	for (unsigned i = 0; i < t->n; i++)
		if (t->due[i] && (!next || t->due[i] < next))
			next = t->due[i];
	if (next) {
		in = next > now ? next - now : 1;
		its.it_value.tv_sec = (time_t)(in / 1000000000u);
		its.it_value.tv_nsec = (long)(in % 1000000000u);
	}
	timerfd_settime(t->fd, 0, &its, NULL);
}

/* Event-loop thread, no lock held: run the queues whose time has come. */
static void on_timer(void *arg, uint32_t events)
{
	struct vq_throttle *t = arg;
	unsigned kick[VQ_THROTTLE_MAX], nk = 0;
	uint64_t ticks, now;

	(void)events;
	if (read(t->fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&t->lock);
	now = t->clock();
	for (unsigned i = 0; i < t->n; i++) {
		if (t->due[i] && t->due[i] <= now) {
			t->due[i] = 0;
			kick[nk++] = t->queue[i];
		}
	}
	arm(t, now);
	pthread_mutex_unlock(&t->lock);
	for (unsigned k = 0; k < nk; k++)
		t->io.kick(t->io.ctx, kick[k]);
}

int vq_throttle_activate(struct vq_throttle *t)
{
	int r = 0;

	pthread_mutex_lock(&t->lock);
	if (t->fd >= 0 && !t->watching) {
		r = t->io.watch(t->io.ctx, t->fd, EPOLLIN, on_timer, t);
		t->watching = r == 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Ask limiter i; take the tokens when it answers 0 and take is set, else
 * hold the queue until then. */
static uint64_t ask(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops, bool take)
{
	uint64_t now, w;

	if (!t->active || i >= t->n)
		return 0;
	pthread_mutex_lock(&t->lock);
	now = t->clock();
	w = limiter_wait_ns(&t->lim[i], bytes, ops, now);
	if (!w && take)
		limiter_take(&t->lim[i], bytes, ops, now);
	if (w) {
		t->due[i] = now + w < now ? UINT64_MAX : now + w;
		arm(t, now);
	}
	pthread_mutex_unlock(&t->lock);
	return w;
}

uint64_t vq_throttle_admit(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops)
{
	return ask(t, i, bytes, ops, true);
}

uint64_t vq_throttle_wait(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops)
{
	return ask(t, i, bytes, ops, false);
}

void vq_throttle_take(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops)
{
	if (!t->active || i >= t->n)
		return;
	pthread_mutex_lock(&t->lock);
	limiter_take(&t->lim[i], bytes, ops, t->clock());
	pthread_mutex_unlock(&t->lock);
}

void vq_throttle_reset(struct vq_throttle *t)
{
	if (!t->active)
		return;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n; i++) {
		t->due[i] = 0;
		limiter_forget_wait(&t->lim[i]);
	}
	arm(t, 0);
	pthread_mutex_unlock(&t->lock);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

long vq_throttle_save(struct vq_throttle *t, void *buf, size_t cap)
{
	uint8_t *p = buf;

	if (!t->active)
		return 0;
	if (cap < BLOB_HEAD + (size_t)t->n * LIMITER_STATE_LEN)
		return -ENOSPC;
	put32(p, BLOB_FORMAT);
	put32(p + 4, t->n);
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n; i++)
		limiter_encode(&t->lim[i], p + BLOB_HEAD + (size_t)i * LIMITER_STATE_LEN);
	pthread_mutex_unlock(&t->lock);
	return BLOB_HEAD + (long)t->n * LIMITER_STATE_LEN;
}

int vq_throttle_restore(struct vq_throttle *t, const void *buf, size_t len)
{
	struct limiter lim[VQ_THROTTLE_MAX];
	const uint8_t *p = buf;
	uint64_t now = t->clock();
	bool active = false;
	int r;

	if (len != BLOB_HEAD + (size_t)t->n * LIMITER_STATE_LEN || get32(p) != BLOB_FORMAT || get32(p + 4) != t->n)
		return -EINVAL;
	for (unsigned i = 0; i < t->n; i++) {
		struct limiter *l = &lim[i];

		if (limiter_decode(p + BLOB_HEAD + (size_t)i * LIMITER_STATE_LEN, l, now))
			return -EINVAL;
		/* The device's own limits win; their saved state only when
		 * the limits are the same. */
		if (t->given &&
		    !(bucket_same_config(&t->lim[i].bytes, &l->bytes) && bucket_same_config(&t->lim[i].ops, &l->ops)))
			*l = t->lim[i];
		active |= limiter_active(l);
	}
	/* Adopted limits without the ops to wake a queue cannot be kept. */
	if (active && !t->io.kick)
		return -EINVAL;
	if (active && (r = make_timer(t)))
		return r;
	memcpy(t->lim, lim, sizeof(lim[0]) * t->n);
	t->active = active;
	return 0;
}

void vq_throttle_stats(struct vq_throttle *t, unsigned i, struct vq_throttle_stats *s)
{
	const struct limiter *l;

	memset(s, 0, sizeof(*s));
	if (i >= t->n)
		return;
	l = &t->lim[i];
	pthread_mutex_lock(&t->lock);
	s->name = t->name[i];
	s->active = limiter_active(l);
	s->throttled = l->throttled;
	s->throttled_ns = l->throttled_ns;
	if (l->held) {
		uint64_t now = t->clock();

		s->throttled_ns += now > l->waiting_since ? now - l->waiting_since : 0;
	}
	pthread_mutex_unlock(&t->lock);
}
