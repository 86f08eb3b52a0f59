#include "vmm/kvm/kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static const struct {
	int cap;
	const char *name;
} required_caps[] = {
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
	{ KVM_CAP_SET_IDENTITY_MAP_ADDR, "KVM_CAP_SET_IDENTITY_MAP_ADDR" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
};

const char *kvm_open_hint(int err)
{
	return err == ENOENT   ? " (no KVM on this machine: it needs hardware virtualization enabled and the kvm_intel "
				 "or kvm_amd module, or nested virtualization in a VM)"
	       : err == EACCES ? " (run as root or as a member of the group that owns /dev/kvm)"
			       : "";
}

int kvm_open(struct kvm_sys *k, struct tvm_err *e)
{
	int r, v;

	k->vm_fd = -1;
	k->sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (k->sys_fd < 0) { /* the usual first obstacle on a new host: say what to do */
		int err = errno;

		return tvm_errf(e, err, "/dev/kvm: %s%s", strerror(err), kvm_open_hint(err));
	}
	v = ioctl(k->sys_fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION) {
		r = tvm_errf(e, ENOSYS, "/dev/kvm: API version %d, need %d", v, KVM_API_VERSION);
		goto fail;
	}
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(required_caps[0]); i++) {
		if (ioctl(k->sys_fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0) {
			r = tvm_errf(e, ENOSYS, "/dev/kvm: missing capability %s", required_caps[i].name);
			goto fail;
		}
	}
	v = ioctl(k->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (v < (int)sizeof(struct kvm_run)) {
		r = tvm_errf(e, EIO, "KVM_GET_VCPU_MMAP_SIZE: %s", v < 0 ? strerror(errno) : "too small");
		goto fail;
	}
	k->run_mmap_size = (size_t)v;
	k->vm_fd = ioctl(k->sys_fd, KVM_CREATE_VM, 0);
	if (k->vm_fd < 0) {
		r = tvm_errf(e, errno, "KVM_CREATE_VM: %s", strerror(errno));
		goto fail;
	}
	if (ioctl(k->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_ADDR) < 0) {
		r = tvm_errf(e, errno, "KVM_SET_TSS_ADDR: %s", strerror(errno));
		goto fail;
	}
	uint64_t idmap = KVM_IDENTITY_MAP_ADDR;
	if (ioctl(k->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap) < 0) {
		r = tvm_errf(e, errno, "KVM_SET_IDENTITY_MAP_ADDR: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	kvm_close(k);
	return r;
}

int kvm_create_irqchip(struct kvm_sys *k, struct tvm_err *e)
{
	if (ioctl(k->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return tvm_errf(e, errno, "KVM_CREATE_IRQCHIP: %s", strerror(errno));
	return 0;
}

int kvm_create_pit(struct kvm_sys *k, struct tvm_err *e)
{
	/* The dummy speaker makes KVM handle port 0x61 itself. */
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	if (ioctl(k->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return tvm_errf(e, errno, "KVM_CREATE_PIT2: %s", strerror(errno));
	return 0;
}

int kvm_set_memory(struct kvm_sys *k, uint32_t slot, uint64_t gpa, uint64_t size, void *host, struct tvm_err *e)
{
	struct kvm_userspace_memory_region r = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uint64_t)(uintptr_t)host,
	};

	if (ioctl(k->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
		return tvm_errf(e, errno, "KVM_SET_USER_MEMORY_REGION slot %u at 0x%llx (%llu MiB): %s", slot,
				(unsigned long long)gpa, (unsigned long long)(size >> 20), strerror(errno));
	return 0;
}

int kvm_supported_cpuid(struct kvm_sys *k, struct kvm_cpuid2 **out, struct tvm_err *e)
{
	/* Grow until KVM stops saying E2BIG. */
	for (unsigned n = 64; n <= 4096; n *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));

		if (!c)
			return tvm_errf(e, ENOMEM, "KVM_GET_SUPPORTED_CPUID: out of memory");
		c->nent = n;
		if (ioctl(k->sys_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			*out = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG)
			return tvm_errf(e, errno, "KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
	}
	return tvm_errf(e, E2BIG, "KVM_GET_SUPPORTED_CPUID: more than 4096 entries");
}

int kvm_irq_line(struct kvm_sys *k, unsigned gsi, int level)
{
	struct kvm_irq_level l = { .irq = gsi, .level = (uint32_t)level };

	return ioctl(k->vm_fd, KVM_IRQ_LINE, &l) < 0 ? -errno : 0;
}

int kvm_ioeventfd(struct kvm_sys *k, uint64_t addr, uint32_t datamatch, int fd, struct tvm_err *e)
{
	struct kvm_ioeventfd io = {
		.datamatch = datamatch,
		.addr = addr,
		.len = 4,
		.fd = fd,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
	};

	if (ioctl(k->vm_fd, KVM_IOEVENTFD, &io) < 0)
		return tvm_errf(e, errno, "KVM_IOEVENTFD at 0x%llx: %s", (unsigned long long)addr, strerror(errno));
	return 0;
}

int kvm_irqfd(struct kvm_sys *k, unsigned gsi, int fd, struct tvm_err *e)
{
	struct kvm_irqfd irq = { .fd = (uint32_t)fd, .gsi = gsi };

	if (ioctl(k->vm_fd, KVM_IRQFD, &irq) < 0)
		return tvm_errf(e, errno, "KVM_IRQFD gsi %u: %s", gsi, strerror(errno));
	return 0;
}

void kvm_close(struct kvm_sys *k)
{
	if (k->vm_fd >= 0)
		close(k->vm_fd);
	if (k->sys_fd >= 0)
		close(k->sys_fd);
	k->vm_fd = k->sys_fd = -1;
}
