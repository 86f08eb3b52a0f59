/* The VM's host cgroup (cfg.cgroup; vmm/sandbox/cgroup.h): made first in
 * vm_build, before guest RAM is mapped and any thread exists, so the whole
 * VM is charged to it; removed last by tvm_vm_destroy, whichever way the
 * VM ended. Its figures go into the metrics JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/cgroup.h"
#include "vmm/vm_impl.h"

#define DEFAULT_PARENT "tinyvmm"
#define MAX_ALLOWANCE_MIB (1u << 20) /* 1 TiB */

/* pid into the cgroup c asks for (*out; NULL when there is none). */
static int enter(const struct tvm_config *c, pid_t pid, struct cgroup **out, struct tvm_err *e)
{
	const struct tvm_cgroup *g = &c->cgroup;
	const char *parent = g->parent ? g->parent : DEFAULT_PARENT;
	uint32_t allowance = g->mem_allowance_mib ? g->mem_allowance_mib : TVM_CGROUP_MEM_ALLOWANCE_MIB;
	struct tvm_err why = { 0 };
	struct cg_limits l;
	struct cg_host *host;
	int r;

	*out = NULL;
	if (g->mode == TVM_CGROUP_OFF)
		return 0;
	if (g->mode != TVM_CGROUP_ON && g->mode != TVM_CGROUP_AUTO)
		return tvm_errf(e, EINVAL, "cgroup: mode %d is not off, on or auto", (int)g->mode);
	if (allowance > MAX_ALLOWANCE_MIB)
		return tvm_errf(e, EINVAL, "cgroup: memory allowance %u MiB is out of range 1..%u MiB", allowance,
				MAX_ALLOWANCE_MIB);
	/* mem_mib was checked (at most 1 TiB): the sum cannot overflow. */
	l = (struct cg_limits){
		.cpu_quota_mcpu = g->cpu_quota_mcpu,
		.cpuset = g->cpuset,
		.mem_max = ((uint64_t)c->mem_mib + allowance) << 20,
		.pids_max = g->pids_max ? g->pids_max : TVM_CGROUP_PIDS_BASE + c->cpus,
	};
	/* A wrong value is the caller's mistake whatever the mode. */
	r = cg_check(parent, &l, e);
	if (r)
		return r;
	host = malloc(sizeof(*host));
	r = host ? cg_detect(NULL, host, &why) : tvm_errf(&why, ENOMEM, "cgroup: out of memory");
	if (!r)
		r = cg_create(host, parent, &l, pid, out, &why);
	free(host);
	if (r && g->mode == TVM_CGROUP_ON)
		return tvm_errf(e, -r, "%s", why.msg);
	/* auto: a host without controllers, or that does not let us, runs the
	 * VM as before, quietly; any other refusal is worth a line. */
	if (r && r != -ENOTSUP && r != -EACCES && r != -EPERM && r != -EROFS && c->log_fd >= 0)
		dprintf(c->log_fd, "tinyvmm: %s; running without a cgroup\n", why.msg);
	return 0;
}

int vm_cgroup_enter(struct tvm_vm *vm, struct tvm_err *e)
{
	return enter(&vm->cfg, getpid(), &vm->cgroup, e);
}

struct tvm_host_cgroup {
	struct cgroup *cg;
	uint32_t cpu_quota_mcpu;
};

int tvm_cgroup_attach(const struct tvm_config *c, pid_t pid, struct tvm_host_cgroup **out, struct tvm_err *e)
{
	struct tvm_host_cgroup *h;
	int r;

	*out = NULL;
	if (pid <= 0)
		return tvm_errf(e, EINVAL, "cgroup: pid %d is not a process", (int)pid);
	/* mem_mib and cpus bound the limits written. */
	r = vm_check_config(c, false, e);
	if (r)
		return r;
	h = calloc(1, sizeof(*h));
	if (!h)
		return tvm_errf(e, ENOMEM, "cgroup: out of memory");
	h->cpu_quota_mcpu = c->cgroup.cpu_quota_mcpu;
	r = enter(c, pid, &h->cg, e);
	if (r || !h->cg) {
		free(h);
		return r;
	}
	*out = h;
	return 0;
}

void tvm_cgroup_release(struct tvm_host_cgroup *h)
{
	if (!h)
		return;
	cg_destroy(h->cg);
	free(h);
}

int tvm_cgroup_oom_kills(const struct tvm_host_cgroup *h, uint64_t *n)
{
	*n = 0;
	return h ? cg_stat(h->cg, CG_MEM_OOM_KILLS, n) : -ENOENT;
}

void vm_cgroup_leave(struct tvm_vm *vm)
{
	cg_destroy(vm->cgroup);
	vm->cgroup = NULL;
}

/* A cgroup path as a JSON string: mount points may hold any byte. */
static void json_path(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\' || ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void figure(const struct cgroup *cg, FILE *f, const char *key, enum cg_stat s)
{
	uint64_t v;

	if (cg_stat(cg, s, &v) == 0 && v != UINT64_MAX)
		fprintf(f, ",\"%s\":%llu", key, (unsigned long long)v);
	else
		fprintf(f, ",\"%s\":null", key);
}

/* The cgroup's figures as one JSON value: an object, or null. */
static void cgroup_json(const struct cgroup *cg, uint32_t cpu_quota_mcpu, FILE *f)
{
	if (!cg) {
		fprintf(f, "null");
		return;
	}
	fprintf(f, "{\"version\":%d,\"memory_dir\":", cg_version(cg));
	json_path(f, cg_dir(cg, CG_MEMORY));
	figure(cg, f, "memory_max_bytes", CG_MEM_MAX);
	figure(cg, f, "memory_peak_bytes", CG_MEM_PEAK);
	figure(cg, f, "memory_oom_kills", CG_MEM_OOM_KILLS);
	if (cg_dir(cg, CG_CPU)) {
		fprintf(f, ",\"cpu_quota_mcpu\":%u", cpu_quota_mcpu);
		figure(cg, f, "cpu_throttled_us", CG_CPU_THROTTLED_US);
	}
	fprintf(f, "}");
}

void vm_cgroup_write_metrics(const struct tvm_vm *vm, FILE *f)
{
	fprintf(f, ",\"cgroup\":");
	cgroup_json(vm->cgroup, vm->cfg.cgroup.cpu_quota_mcpu, f);
}

int tvm_cgroup_metrics(const struct tvm_host_cgroup *h, char *buf, size_t cap)
{
	FILE *f = cap ? fmemopen(buf, cap, "w") : NULL;
	long n;

	if (!f)
		return cap ? -errno : -ENOSPC;
	cgroup_json(h ? h->cg : NULL, h ? h->cpu_quota_mcpu : 0, f);
	fflush(f);
	n = ftell(f);
	bool bad = ferror(f);
	fclose(f);
	/* fmemopen keeps the last byte for the NUL: a full buffer is a cut one. */
	return bad || n < 0 || (size_t)n >= cap - 1 ? -ENOSPC : (int)n;
}
