#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vmm/core/tvm_types.h"

#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102
#define MSR_IA32_TSC 0x10

#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

static void kick_handler(int sig)
{
	(void)sig;
}

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void install_kick_handler(void)
{
	struct sigaction sa = { .sa_handler = kick_handler };

	/* No SA_RESTART: KVM_RUN must return EINTR. */
	sigemptyset(&sa.sa_mask);
	sigaction(TVM_KICK_SIGNAL, &sa, NULL);
}

const char *vcpu_exit_kind_name(enum vcpu_exit_kind k)
{
	static const char *const names[VEXIT_COUNT] = {
		"io", "mmio", "hlt", "intr", "shutdown", "system_event", "internal_error", "fail_entry", "other",
	};
	return names[k];
}

static int set_msrs(struct vcpu *v, struct tvm_err *e)
{
	/* clang-format off */
	static const struct {
		uint32_t index;
		uint64_t value;
	} boot_msrs[] = {
		{ MSR_IA32_SYSENTER_CS, 0 }, { MSR_IA32_SYSENTER_ESP, 0 }, { MSR_IA32_SYSENTER_EIP, 0 },
		{ MSR_STAR, 0 },             { MSR_LSTAR, 0 },             { MSR_CSTAR, 0 },
		{ MSR_SYSCALL_MASK, 0 },     { MSR_KERNEL_GS_BASE, 0 },    { MSR_IA32_TSC, 0 },
		{ MSR_IA32_MISC_ENABLE, 1 }, /* fast string operations */
		{ MSR_MTRR_DEF_TYPE, (1u << 11) | 6 }, /* MTRRs on, default write-back */
	};
	/* clang-format on */
	enum { N = sizeof(boot_msrs) / sizeof(boot_msrs[0]) };
	union {
		struct kvm_msrs hdr;
		uint8_t raw[sizeof(struct kvm_msrs) + N * sizeof(struct kvm_msr_entry)];
	} m;
	struct kvm_msr_entry *ent = m.hdr.entries;
	int r;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = N;
	for (int i = 0; i < N; i++) {
		ent[i].index = boot_msrs[i].index;
		ent[i].data = boot_msrs[i].value;
	}
	r = ioctl(v->fd, KVM_SET_MSRS, &m);
	if (r < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_MSRS: %s", v->index, strerror(errno));
	if (r != N) /* KVM stops at the first MSR it refuses */
		return tvm_errf(e, EINVAL, "vcpu %d: KVM_SET_MSRS: MSR 0x%x refused", v->index, ent[r].index);
	return 0;
}

static int set_lapic(struct vcpu *v, struct tvm_err *e)
{
	struct kvm_lapic_state l;
	uint32_t lvt;

	if (ioctl(v->fd, KVM_GET_LAPIC, &l) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_GET_LAPIC: %s", v->index, strerror(errno));
	/* LINT0 carries the PIC's ExtINT, LINT1 the NMI, as on a PC. */
	memcpy(&lvt, &l.regs[APIC_LVT_LINT0], 4);
	lvt = (lvt & ~0x700u) | (APIC_MODE_EXTINT << 8);
	memcpy(&l.regs[APIC_LVT_LINT0], &lvt, 4);
	memcpy(&lvt, &l.regs[APIC_LVT_LINT1], 4);
	lvt = (lvt & ~0x700u) | (APIC_MODE_NMI << 8);
	memcpy(&l.regs[APIC_LVT_LINT1], &lvt, 4);
	if (ioctl(v->fd, KVM_SET_LAPIC, &l) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_LAPIC: %s", v->index, strerror(errno));
	return 0;
}

int vcpu_create(struct vcpu *v, struct kvm_sys *k, int index, const struct kvm_cpuid2 *cpuid,
		const struct vcpu_host *host, struct tvm_err *e)
{
	struct kvm_fpu fpu = { .fcw = 0x37f, .mxcsr = 0x1f80 };
	int r;

	memset(v, 0, sizeof(*v));
	v->index = index;
	v->host = host;
	v->fd = ioctl(k->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (v->fd < 0) {
		v->fd = -1;
		return tvm_errf(e, errno, "vcpu %d: KVM_CREATE_VCPU: %s", index, strerror(errno));
	}
	v->run_size = k->run_mmap_size;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		return tvm_errf(e, errno, "vcpu %d: mmap kvm_run: %s", index, strerror(errno));
	}
	if (ioctl(v->fd, KVM_SET_CPUID2, cpuid) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_CPUID2: %s", index, strerror(errno));
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_FPU: %s", index, strerror(errno));
	r = set_msrs(v, e);
	if (!r)
		r = set_lapic(v, e);
	return r;
}

int vcpu_get_sregs(struct vcpu *v, struct kvm_sregs *s, struct tvm_err *e)
{
	if (ioctl(v->fd, KVM_GET_SREGS, s) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_GET_SREGS: %s", v->index, strerror(errno));
	return 0;
}

int vcpu_set_sregs(struct vcpu *v, const struct kvm_sregs *s, struct tvm_err *e)
{
	if (ioctl(v->fd, KVM_SET_SREGS, s) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_SREGS: %s", v->index, strerror(errno));
	return 0;
}

int vcpu_set_regs(struct vcpu *v, const struct kvm_regs *r, struct tvm_err *e)
{
	if (ioctl(v->fd, KVM_SET_REGS, r) < 0)
		return tvm_errf(e, errno, "vcpu %d: KVM_SET_REGS: %s", v->index, strerror(errno));
	return 0;
}

static void log_unhandled(struct vcpu *v, const char *space, uint64_t addr, uint32_t len, bool write)
{
	uint64_t key = addr | (space[0] == 'p' ? 1ULL << 63 : 0);
	char msg[160];

	/* Each address once; a guest probing much absent hardware gets a
	 * bounded number of lines. */
	for (unsigned i = 0; i < v->unhandled_logged && i < VCPU_UNHANDLED_LOG; i++)
		if (v->unhandled_seen[i] == key)
			return;
	if (v->unhandled_logged > VCPU_UNHANDLED_LOG)
		return;
	if (v->unhandled_logged == VCPU_UNHANDLED_LOG)
		snprintf(msg, sizeof(msg), "vcpu %d: further unhandled addresses are not logged", v->index);
	else
		snprintf(msg, sizeof(msg), "vcpu %d: unhandled %s %s at 0x%llx (%u bytes), ignored", v->index, space,
			 write ? "write" : "read", (unsigned long long)addr, len);
	if (v->unhandled_logged < VCPU_UNHANDLED_LOG)
		v->unhandled_seen[v->unhandled_logged] = key;
	v->unhandled_logged++;
	v->host->log(v->host->ctx, msg);
}

static void handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint64_t bytes = (uint64_t)run->io.size * run->io.count;
	uint8_t *p = (uint8_t *)run + run->io.data_offset;
	bool write = run->io.direction == KVM_EXIT_IO_OUT;

	if (run->io.data_offset > v->run_size || bytes > v->run_size - run->io.data_offset)
		return;
	for (uint32_t i = 0; i < run->io.count; i++, p += run->io.size)
		if (bus_dispatch(v->host->pio, run->io.port, p, run->io.size, write) < 0 && i == 0)
			log_unhandled(v, "port", run->io.port, run->io.size, write);
}

static void handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint32_t len = run->mmio.len <= 8 ? run->mmio.len : 8;

	if (bus_dispatch(v->host->mmio, run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write) < 0)
		log_unhandled(v, "mmio", run->mmio.phys_addr, len, run->mmio.is_write);
}

/* Describe a KVM_EXIT_INTERNAL_ERROR with the guest RIP and the code bytes
 * around it, which is what is needed to find an unemulated instruction. */
static void report_internal_error(struct vcpu *v)
{
	struct kvm_regs regs;
	struct kvm_translation tr = { 0 };
	char msg[256], *p = msg, *end = msg + sizeof(msg);

	p += snprintf(p, (size_t)(end - p), "vcpu %d: KVM_EXIT_INTERNAL_ERROR suberror %u", v->index,
		      v->run->internal.suberror);
	if (ioctl(v->fd, KVM_GET_REGS, &regs) == 0) {
		p += snprintf(p, (size_t)(end - p), " rip 0x%llx", (unsigned long long)regs.rip);
		tr.linear_address = regs.rip;
		if (ioctl(v->fd, KVM_TRANSLATE, &tr) == 0 && tr.valid) {
			const uint8_t *code = gm_ptr(v->host->mem, tr.physical_address, 16);
			p += snprintf(p, (size_t)(end - p),
				      " (gpa 0x%llx) code:", (unsigned long long)tr.physical_address);
			for (int i = 0; code && i < 16 && p < end - 4; i++)
				p += snprintf(p, (size_t)(end - p), " %02x", code[i]);
		}
	}
	v->host->on_end(v->host->ctx, TVM_EXIT_INTERNAL_ERROR, msg);
}

/* Handle one exit; false when the VM must end. */
static bool handle_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	const struct vcpu_host *h = v->host;
	char msg[160];

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		atomic_fetch_add(&v->exits[VEXIT_IO], 1);
		handle_io(v);
		return true;
	case KVM_EXIT_MMIO:
		atomic_fetch_add(&v->exits[VEXIT_MMIO], 1);
		handle_mmio(v);
		return true;
	case KVM_EXIT_HLT: /* only without an in-kernel LAPIC; nothing to wait for */
		atomic_fetch_add(&v->exits[VEXIT_HLT], 1);
		h->on_end(h->ctx, TVM_EXIT_RESET, "guest halted");
		return false;
	case KVM_EXIT_SHUTDOWN:
		atomic_fetch_add(&v->exits[VEXIT_SHUTDOWN], 1);
		snprintf(msg, sizeof(msg), "vcpu %d: KVM_EXIT_SHUTDOWN (triple fault)", v->index);
		h->on_end(h->ctx, TVM_EXIT_SHUTDOWN, msg);
		return false;
	case KVM_EXIT_SYSTEM_EVENT:
		atomic_fetch_add(&v->exits[VEXIT_SYSTEM_EVENT], 1);
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET ||
		    run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN) {
			h->on_end(h->ctx, TVM_EXIT_RESET, "guest reset");
		} else {
			snprintf(msg, sizeof(msg), "vcpu %d: system event %u", v->index, run->system_event.type);
			h->on_end(h->ctx, TVM_EXIT_SHUTDOWN, msg);
		}
		return false;
	case KVM_EXIT_INTERNAL_ERROR:
		atomic_fetch_add(&v->exits[VEXIT_INTERNAL_ERROR], 1);
		report_internal_error(v);
		return false;
	case KVM_EXIT_FAIL_ENTRY:
		atomic_fetch_add(&v->exits[VEXIT_FAIL_ENTRY], 1);
		snprintf(msg, sizeof(msg), "vcpu %d: KVM_EXIT_FAIL_ENTRY, hardware reason 0x%llx", v->index,
			 (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		h->on_end(h->ctx, TVM_EXIT_FAIL_ENTRY, msg);
		return false;
	default:
		atomic_fetch_add(&v->exits[VEXIT_OTHER], 1);
		snprintf(msg, sizeof(msg), "vcpu %d: unexpected KVM exit reason %u", v->index, run->exit_reason);
		h->on_end(h->ctx, TVM_EXIT_VMM_ERROR, msg);
		return false;
	}
}

static uint64_t cpu_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	const struct vcpu_host *h = v->host;
	sigset_t set;
	char msg[160];

	/* Only the kick reaches this thread; SIGINT and friends go to the
	 * embedding program's threads. */
	sigfillset(&set);
	sigdelset(&set, TVM_KICK_SIGNAL);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	if (h->thread_init && h->thread_init(h->ctx))
		return NULL;

	while (!atomic_load(h->stopping)) {
		metrics_mark(h->metrics, MARK_FIRST_KVM_RUN);
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				atomic_fetch_add(&v->exits[VEXIT_INTR], 1);
				v->run->immediate_exit = 0;
				/* Only here: no exit is left half-done. */
				if (h->pause)
					vcpu_pause_point(h->pause, h->stopping);
				continue;
			}
			snprintf(msg, sizeof(msg), "vcpu %d: KVM_RUN: %s", v->index, strerror(errno));
			h->on_end(h->ctx, TVM_EXIT_VMM_ERROR, msg);
			break;
		}
		if (!handle_exit(v))
			break;
	}
	/* Its CPU clock dies with the thread: keep what it used for metrics. */
	atomic_store(&v->cpu_ns_at_end, cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID));
	atomic_store(&v->ended, true);
	return NULL;
}

uint64_t vcpu_cpu_ns(struct vcpu *v)
{
	clockid_t id;
	uint64_t ns;

	if (!v->thread_started || atomic_load(&v->ended) || pthread_getcpuclockid(v->thread, &id))
		return atomic_load(&v->cpu_ns_at_end);
	ns = cpu_clock_ns(id);
	/* Read while it still ran (it sets ended before exiting), else the
	 * clock may already have named another thread. */
	return atomic_load(&v->ended) ? atomic_load(&v->cpu_ns_at_end) : ns;
}

int vcpu_start(struct vcpu *v, struct tvm_err *e)
{
	int r;

	pthread_once(&kick_once, install_kick_handler);
	r = pthread_create(&v->thread, NULL, vcpu_thread, v);
	if (r)
		return tvm_errf(e, r, "vcpu %d: pthread_create: %s", v->index, strerror(r));
	v->thread_started = true;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (!v->thread_started || !v->run)
		return;
	/* immediate_exit covers a kick that lands just before KVM_RUN. */
	v->run->immediate_exit = 1;
	pthread_kill(v->thread, TVM_KICK_SIGNAL);
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->thread_started) {
		vcpu_kick(v);
		pthread_join(v->thread, NULL);
		v->thread_started = false;
	}
	if (v->run)
		munmap(v->run, v->run_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}
