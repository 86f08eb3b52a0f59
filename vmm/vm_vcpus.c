/* The vCPUs: each gets the host's supported CPUID, normalized for its
 * index (and the host quirks), before KVM creates it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/core/err.h"
#include "vmm/kvm/cpuid.h"
#include "vmm/kvm/host_quirks.h"
#include "vmm/vm_impl.h"

int vm_create_vcpus(struct tvm_vm *vm, struct tvm_err *e)
{
	struct kvm_cpuid2 *supported, *cpuid;
	size_t size;
	int r;

	r = kvm_supported_cpuid(&vm->kvm, &supported, e);
	if (r)
		return r;
	size = sizeof(*supported) + supported->nent * sizeof(supported->entries[0]);
	cpuid = malloc(size);
	vm->vcpus = calloc(vm->cfg.cpus, sizeof(*vm->vcpus));
	if (!cpuid || !vm->vcpus) {
		free(supported);
		free(cpuid);
		return tvm_errf(e, ENOMEM, "vcpus: out of memory");
	}
	for (unsigned i = 0; i < vm->cfg.cpus && !r; i++) {
		memcpy(cpuid, supported, size);
		cpuid_normalize(cpuid, i, vm->cfg.cpus);
		if (vm->quirks)
			host_quirks_cpuid(cpuid);
		r = vcpu_create(&vm->vcpus[i], &vm->kvm, (int)i, cpuid, &vm->host, e);
		vm->nr_vcpus = (int)i + 1; /* destroy must clean up a half-made one too */
	}
	free(supported);
	free(cpuid);
	return r;
}
