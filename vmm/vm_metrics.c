/* What the VM reports about itself: the VMM's resident set and the
 * --metrics JSON (boot milestones, per-vCPU exit counts, CPU time of the
 * vCPU threads and the process, the host cgroup's figures, exit reason,
 * network counters, NEEDS_RESET count per virtio device). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "vmm/core/err.h"
#include "vmm/core/metrics.h"
#include "vmm/core/version.h"
#include "vmm/vm_impl.h"

long tvm_vm_vmm_rss_kib(const struct tvm_vm *vm)
{
	return metrics_rss_kib_excluding(vm->mem.base, vm->mem.size);
}

/* CPU time of the whole process (every VM's threads and the caller's). */
static unsigned long long process_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (unsigned long long)ts.tv_sec * 1000000u + (unsigned long long)ts.tv_nsec / 1000;
}

int tvm_vm_write_metrics(const struct tvm_vm *vm, const char *path, struct tvm_err *e)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return tvm_errf(e, errno, "metrics %s: %s", path, strerror(errno));
	fprintf(f, "{\"version\":\"%s\",", TVM_VERSION);
	for (int i = 0; i < MARK_COUNT; i++)
		fprintf(f, "\"%s\":%llu,", metrics_mark_name(i),
			(unsigned long long)atomic_load(&vm->metrics.at_us[i]));
	fprintf(f, "\"vmm_rss_kib\":%ld,\"guest_mem_mib\":%u,\"exits\":[",
		metrics_rss_kib_excluding(vm->mem.base, vm->mem.size), vm->cfg.mem_mib);
	for (unsigned i = 0; i < vm->cfg.cpus && vm->vcpus; i++) {
		fprintf(f, "%s{\"vcpu\":%u", i ? "," : "", i);
		for (int k = 0; k < VEXIT_COUNT; k++)
			fprintf(f, ",\"%s\":%llu", vcpu_exit_kind_name(k),
				(unsigned long long)atomic_load(&vm->vcpus[i].exits[k]));
		fprintf(f, "}");
	}
	fprintf(f, "],\"vcpu_cpu_us\":[");
	for (unsigned i = 0; i < vm->cfg.cpus && vm->vcpus; i++)
		fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)(vcpu_cpu_ns(&vm->vcpus[i]) / 1000));
	fprintf(f, "],\"process_cpu_us\":%llu", process_cpu_us());
	vm_cgroup_write_metrics(vm, f);
	fprintf(f, ",\"exit_reason\":%d", (int)vm->exit_reason);
	vm_net_write_metrics(vm, f);
	vdev_write_metrics(vm->vdevs, vm->nr_vdevs, f);
	fprintf(f, "}\n");
	if (fclose(f) != 0)
		return tvm_errf(e, errno, "metrics %s: %s", path, strerror(errno));
	return 0;
}

const char *tvm_version(void)
{
	return TVM_VERSION;
}
