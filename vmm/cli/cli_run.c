/* tinyvmm run: boot or restore a VM, then show its console until it ends,
 * or run one job in it through its agent. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/clock.h"

/* SIGINT/SIGTERM/SIGHUP stop the VM; the signal is kept for the exit
 * status. TVM_KICK_SIGNAL, blocked like them, ends the wait when the VM
 * ended otherwise: the one signal besides SIGABRT that our seccomp
 * filters let a thread send. */
struct stopper {
	struct tvm_vm *vm;
	const struct tvm_config *c;
	struct cli_report *report;
	const char *pause_to; /* --pause-to: SIGUSR1 saves the VM there, then stops it */
	int diff;             /* restored: the pause is a diff against the VM's base */
	sigset_t set;
	int sig;
	int unconfined; /* its filter could not be loaded: the VM is stopped */
};

/* SIGUSR1 with --pause-to: the VM saved while it runs (tvm_vm_snapshot
 * parks the vCPUs), then stopped. A restored VM saves a diff against its
 * base snapshot (the pages it changed), a booted one all its memory. A
 * failed save leaves it running, as it was: the sandbox is not lost. 1
 * when paused. */
static int pause_vm(struct stopper *s)
{
	struct tvm_err e = { 0 };
	uint64_t t0 = clock_mono_ns();

	if (s->diff ? tvm_vm_snapshot_diff(s->vm, s->pause_to, NULL, &e) : tvm_vm_snapshot(s->vm, s->pause_to, &e)) {
		fprintf(stderr, "tinyvmm: pause: %s (the VM runs on)\n", e.msg);
		return 0;
	}
	fprintf(stderr, "tinyvmm: paused into %s (%s) in %.0f ms\n", s->pause_to,
		s->diff ? "a diff against its base" : "full", (double)(clock_mono_ns() - t0) / 1e6);
	tvm_vm_stop(s->vm);
	return 1;
}

static void *signal_waiter(void *arg)
{
	struct stopper *s = arg;
	int sig;

	if (cli_confine(s->c, s->pause_to ? SC_PAUSER : SC_SIGNALS)) {
		s->unconfined = 1;
		tvm_vm_stop(s->vm);
		return NULL;
	}
	while (sigwait(&s->set, &sig) == 0 && sig != TVM_KICK_SIGNAL) {
		if (sig == SIGUSR1) {
			if (pause_vm(s))
				break;
			continue;
		}
		s->sig = sig;
		cli_report_signal(s->report, sig);
		tvm_vm_stop(s->vm);
		break;
	}
	return NULL;
}

/* A kept overlay or a writable image wants the guest's caches written out:
 * ask the agent to sync and reset instead of pulling the plug. */
static int wants_clean_shutdown(const struct tvm_config *c)
{
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (c->drives[i].overlay_path || tvm_drive_in_place(&c->drives[i]))
			return 1;
	return 0;
}

static int run_job_in_vm(struct cli_args *a, struct tvm_vm *vm)
{
	struct tvm_agent *agent;
	struct tvm_err err = { 0 };
	int status;

	/* SEED: the booted guest gets the host's clock and entropy (a
	 * restored one gets them whatever flags say). */
	if (tvm_agent_connect(&(struct tvm_agent_addr){ .vm = vm }, CLI_BOOT_TIMEOUT_MS, TVM_AGENT_SEED, &agent,
			      &err)) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	status = cli_job_run(&a->job, agent);
	cli_report_stage(a->job.report, CLI_ST_END);
	if (wants_clean_shutdown(&a->c) && !tvm_agent_shutdown(agent, &err)) {
		tvm_agent_close(agent);
		return status; /* the guest resets itself; tvm_vm_wait sees it */
	}
	tvm_agent_close(agent);
	tvm_vm_stop(vm);
	return status;
}

/* Build the VM of a (jailed: in the jail, then locked down before it
 * runs), run it and its job, and return the exit status. */
static int run_vm(void *ctx, struct jail *j)
{
	struct cli_args *a = ctx;
	struct tvm_err err = { 0 };
	struct tvm_vm *vm;
	struct stopper stop = { 0 };
	pthread_t waiter;
	int r, status;

	/* SIGINT/SIGTERM stop the VM from a thread of our own, so that every
	 * other thread (the library's) runs with them blocked. */
	sigemptyset(&stop.set);
	sigaddset(&stop.set, SIGINT);
	sigaddset(&stop.set, SIGTERM);
	sigaddset(&stop.set, SIGHUP);
	sigaddset(&stop.set, TVM_KICK_SIGNAL);
	if (a->pause_to)
		sigaddset(&stop.set, SIGUSR1);
	stop.pause_to = a->pause_to;
	stop.diff = a->snapshot != NULL;
	pthread_sigmask(SIG_BLOCK, &stop.set, NULL);

	r = a->snapshot ? tvm_vm_restore(&a->c, a->snapshot, &vm, &err) : tvm_vm_create(&a->c, &vm, &err);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		cli_report_no_vm(a->job.report); /* jailed, this child's: the report is shared */
		return EXIT_VM_FAILED;
	}
	/* Jailed: built, nothing of the guest has run, one thread. */
	if (cli_jail_lockdown(j, &a->job)) {
		tvm_vm_destroy(vm);
		return EXIT_VM_FAILED;
	}
	stop.vm = vm;
	stop.c = &a->c;
	stop.report = a->job.report;
	pthread_create(&waiter, NULL, signal_waiter, &stop);
	r = tvm_vm_start(vm, &err);
	status = 0;
	/* Every thread exists now: the last filter, ours. */
	if (!r && cli_confine(&a->c, SC_MAIN)) {
		tvm_vm_stop(vm);
		status = EXIT_VM_FAILED;
	} else if (!r && a->job.argv) {
		cli_report_stage(a->job.report, CLI_ST_AGENT);
		status = run_job_in_vm(a, vm);
	}
	if (!r)
		r = tvm_vm_wait(vm, &err);
	if (r == -ETIME) {
		fprintf(stderr, "tinyvmm: VM stopped: its --ttl of %.1f s expired\n", a->c.ttl_ms / 1000.0);
		status = EXIT_TIMED_OUT;
	} else if (!r && tvm_vm_exit_reason(vm) == TVM_EXIT_IDLE) {
		fprintf(stderr, "tinyvmm: VM stopped: no vsock connection for its --idle-timeout of %.1f s\n",
			a->c.idle_ms / 1000.0);
	} else if (r) {
		fprintf(stderr, "tinyvmm: guest failed: %s\n", err.msg);
		status = EXIT_VM_FAILED;
	}
	pthread_kill(waiter, TVM_KICK_SIGNAL);
	pthread_join(waiter, NULL);
	if (stop.sig)
		status = 128 + stop.sig;
	if (stop.unconfined)
		status = EXIT_VM_FAILED;
	if (a->metrics && tvm_vm_write_metrics(vm, a->metrics, &err)) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		status = status ? status : EXIT_VM_FAILED;
	}
	tvm_vm_destroy(vm);
	return status;
}

/* Drive i of c that would write its host file in place (neither
 * copy-on-write nor read-only): said, EXIT_VM_FAILED; else 0. */
static int inplace_said(const struct tvm_config *c, const char *whose)
{
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (tvm_drive_in_place(&c->drives[i])) {
			fprintf(stderr,
				"tinyvmm: --no-inplace-drives: drive %u (%s) of %s would be written in place on the host\n",
				i, c->drives[i].path ? c->drives[i].path : "?", whose);
			return EXIT_VM_FAILED;
		}
	return 0;
}

/* --no-inplace-drives: no drive of the VM writes its host file in place,
 * neither one given nor one its --snapshot names (a restore takes each
 * drive's copy-on-write and read-only flags from the snapshot). Jailed and
 * with no drive given, the snapshot's are put into the config here, so
 * the jail mounts the very drives checked (a copy-on-write one read-only:
 * a state file changed since cannot make it writable). tinyvmm serve gives
 * it: a snapshot in its state dir is the daemon's writing and must not
 * name a host file for the VMM to write. */
static int inplace_refused(struct cli_args *a)
{
	static struct tvm_config sc;
	struct tvm_err e = { 0 };
	struct tvm_config *into = a->jail && !a->c.nr_drives ? &a->c : &sc;

	if (a->snapshot) {
		sc = a->c;
		sc.nr_drives = 0;
		if (cli_snapshot_drives(a->snapshot, into, &e)) {
			fprintf(stderr, "tinyvmm: --no-inplace-drives: %s\n", e.msg);
			return EXIT_VM_FAILED;
		}
		if (inplace_said(into, a->snapshot))
			return EXIT_VM_FAILED;
	}
	return inplace_said(&a->c, "the command line");
}

static int run_cmd(struct cli_args *a, int argc, char **argv, uint64_t t0_ns)
{
	int r = cli_setup_vm(argc, argv, t0_ns, a, 0);

	if (r)
		return r;
	if (a->die_with_parent) {
		/* SIGTERM stops the VM like a user's; a parent gone before the
		 * prctl is caught by the second look. (Jailed, it is forwarded.) */
		pid_t parent = getppid();
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent) {
			fprintf(stderr, "tinyvmm: --die-with-parent: the parent process has ended\n");
			return EXIT_VM_FAILED;
		}
	}
	cli_report_stage(a->job.report, CLI_ST_TEMPLATE);
	if ((r = cli_template_use(a, t0_ns)))
		return r;
	if (a->no_inplace && (r = inplace_refused(a)))
		return r;
	a->job.started = a->snapshot ? "restore" : "boot";
	a->job.snapshot = a->snapshot;
	cli_report_config(a->job.report, &a->c, &a->job);
	cli_report_stage(a->job.report, CLI_ST_VM);
	if (!a->jail)
		return run_vm(a, NULL);
	struct stat st;
	int made = a->pause_to && stat(a->pause_to, &st) < 0;

	r = cli_jail_vm(&a->jail_opts, &a->c, &a->snapshot, a->pause_to ? &a->pause_to : NULL, &a->metrics, &a->job,
			run_vm, a);
	/* The jail stages the pause's snapshot in the DIR it makes first:
	 * never paused, an empty DIR it made is removed. */
	if (made)
		rmdir(a->pause_to);
	return r;
}

int cli_cmd_run(int argc, char **argv, uint64_t t0_ns)
{
	struct cli_args a = { .job.report = cli_report_new(argc, argv, t0_ns) };
	int r = run_cmd(&a, argc, argv, t0_ns);

	if (r < 0) { /* --help */
		cli_report_cancel(a.job.report);
		return 0;
	}
	return cli_report_finish(a.job.report, r, r == EXIT_USAGE ? NULL : &a.c, &a.job);
}
