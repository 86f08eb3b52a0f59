/* tinyvmm exec: one job in a VM run by another process, through its hybrid
 * vsock Unix socket. */
#include "vmm/cli/cli.h"

#define EXEC_WAIT_S 120 /* seconds to wait for a booting VM's agent */

static int exec_job(struct cli_args *a, int argc, char **argv)
{
	struct tvm_err err = { 0 };
	struct tvm_agent *agent;
	int r;

	a->job.uid = a->job.gid = TVM_ID_DEFAULT;
	a->c.seccomp = TVM_SECCOMP_KILL; /* as run's (vmm/tinyvmm.h) */
	r = cli_parse_args(argc, argv, a);

	if (r)
		return r;
	if (a->jail) {
		fprintf(stderr, "tinyvmm: --jail: exec runs no VM (jail the `run` that started it)\n");
		return EXIT_USAGE;
	}
	if (!a->c.vsock_uds || !a->job.argv) {
		fprintf(stderr, "tinyvmm: exec needs --vsock-uds PATH and -- CMD\n");
		return EXIT_USAGE;
	}
	cli_report_stage(a->job.report, CLI_ST_AGENT);
	/* Confined before the first byte from the guest's agent is read. */
	r = cli_confine(&a->c, SC_EXEC);
	if (r)
		return r;
	/* A VM started just before may still be booting: its socket not there
	 * yet, CONNECT unanswered until the guest's vsock driver is up, the
	 * port refused until the agent listens. Wait for it, within reason.
	 * No SEED: exec cannot tell a VM just booted or restored from one
	 * seeded already. */
	r = tvm_agent_connect(&(struct tvm_agent_addr){ .uds_path = a->c.vsock_uds }, EXEC_WAIT_S * 1000, 0, &agent,
			      &err);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	r = cli_job_run(&a->job, agent);
	tvm_agent_close(agent);
	return r;
}

int cli_cmd_exec(int argc, char **argv, uint64_t t0_ns)
{
	struct cli_args a = { .job.report = cli_report_new(argc, argv, t0_ns) };
	int r = exec_job(&a, argc, argv);

	if (r < 0) { /* --help */
		cli_report_cancel(a.job.report);
		return 0;
	}
	return cli_report_finish(a.job.report, r, NULL, &a.job);
}
