/* tinyvmm snapshot create: boot, wait for the agent, warm up, save. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/clock.h"
#include "vmm/core/err.h"

struct snap_make {
	const struct tvm_config *c;
	struct cli_job *warmup;
	const char *out, *diff_from, *metrics;
	uint64_t t0_ns;
	int quiet;
};

static int snapshot_vm(void *ctx, struct jail *j)
{
	struct snap_make *x = ctx;
	const struct tvm_config *c = x->c;
	struct cli_job *warmup = x->warmup;
	const char *out = x->out, *metrics = x->metrics;
	uint64_t t0_ns = x->t0_ns;
	int quiet = x->quiet;
	struct tvm_err err = { 0 };
	struct tvm_agent *agent;
	struct tvm_vm *vm;
	uint64_t ready = 0, warm = 0, saved = 0;
	int connected, r = x->diff_from ? tvm_vm_restore(c, x->diff_from, &vm, &err) : tvm_vm_create(c, &vm, &err);

	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	/* Jailed: built, nothing of the guest has run, one thread. */
	if (cli_jail_lockdown(j, warmup)) {
		tvm_vm_destroy(vm);
		return EXIT_VM_FAILED;
	}
	r = tvm_vm_start(vm, &err);
	/* Every thread exists now (the event loop is restarted by the
	 * snapshot: SC_SNAPSHOT allows that one thread). The process ends
	 * with this VM: a template's is a child of its own. */
	if (!r && cli_confine(c, SC_SNAPSHOT))
		r = tvm_errf(&err, EPERM, "seccomp: the main thread is not confined");
	/* SEED, so the warm-up runs with the host's clock (every restore is
	 * seeded again). */
	if (!r)
		r = tvm_agent_connect(&(struct tvm_agent_addr){ .vm = vm }, CLI_BOOT_TIMEOUT_MS, TVM_AGENT_SEED, &agent,
				      &err);
	connected = !r;
	ready = clock_mono_ns();
	if (!r && warmup && warmup->argv) {
		/* Warm-up: what the job touches (binaries, page cache) is in
		 * the snapshot, so restored VMs start it faster. */
		int status = cli_job_run(warmup, agent);

		if (status)
			r = tvm_errf(&err, EIO, "warm-up command %s: exit status %d", warmup->argv[0], status);
	}
	if (connected)
		tvm_agent_close(agent);
	warm = clock_mono_ns();
	if (!r)
		r = x->diff_from ? tvm_vm_snapshot_diff(vm, out, NULL, &err) : tvm_vm_snapshot(vm, out, &err);
	saved = clock_mono_ns();
	if (!r && !quiet)
		fprintf(stderr,
			"tinyvmm: snapshot %s: agent ready %.1f s after start, warm-up %.1f s, saved in %.0f ms\n", out,
			(double)(ready - t0_ns) / 1e9, (double)(warm - ready) / 1e9, (double)(saved - warm) / 1e6);
	else if (r)
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
	tvm_vm_stop(vm);
	tvm_vm_wait(vm, &err);
	if (metrics && tvm_vm_write_metrics(vm, metrics, &err))
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
	tvm_vm_destroy(vm);
	return r ? EXIT_VM_FAILED : 0;
}

/* A template made before a run's own VM: its main thread must end
 * confined (it runs the agent client of a guest that has run), but the run
 * needs an unconfined main thread afterwards, and a filter cannot be taken
 * off. So the template's VM lives in a child of its own, confined as
 * `snapshot create` is, which dies with us (a stop signal's handler here
 * ends tinyvmm with the run's report). */
static int snapshot_confined(struct snap_make *x)
{
	static const int stop[] = { SIGINT, SIGTERM, SIGHUP };
	pid_t parent = getpid(), pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "tinyvmm: template snapshot: fork: %s\n", strerror(errno));
		return EXIT_VM_FAILED;
	}
	if (pid == 0) {
		for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
			signal(stop[i], SIG_DFL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(EXIT_VM_FAILED);
		st = snapshot_vm(x, NULL);
		fflush(stdout);
		fflush(stderr);
		_exit(st);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "tinyvmm: template snapshot: waitpid: %s\n", strerror(errno));
			return EXIT_VM_FAILED;
		}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	fprintf(stderr, "tinyvmm: template snapshot: its process was killed by signal %d\n", WTERMSIG(st));
	return EXIT_VM_FAILED;
}

int cli_snapshot_make(const struct tvm_config *c, struct cli_job *warmup, const char *out, const char *diff_from,
		      const char *metrics, uint64_t t0_ns, int quiet, const struct jail_opts *jail)
{
	struct snap_make x = { .c = c,
			       .warmup = warmup,
			       .out = out,
			       .diff_from = diff_from,
			       .metrics = metrics,
			       .t0_ns = t0_ns,
			       .quiet = quiet };
	struct tvm_config jc;

	if (!jail && !quiet)
		return snapshot_vm(&x, NULL);
	if (!jail)
		return snapshot_confined(&x);
	jc = *c;
	x.c = &jc;
	return cli_jail_vm(jail, &jc, diff_from ? &x.diff_from : NULL, &x.out, &x.metrics, warmup, snapshot_vm, &x);
}

/* Boot, wait for the agent, run the warm-up command if any, snapshot,
 * stop. No connection stays open across the snapshot: the restored guest
 * would only see it reset. */
int cli_cmd_snapshot_create(int argc, char **argv, uint64_t t0_ns)
{
	struct cli_args a = { 0 };
	int r = cli_setup_vm(argc, argv, t0_ns, &a, 1);

	if (r)
		return r < 0 ? 0 : r;
	return cli_snapshot_make(&a.c, &a.job, a.out, a.diff_from, a.metrics, t0_ns, 0, a.jail ? &a.jail_opts : NULL);
}
