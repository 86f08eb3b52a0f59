/* The job half of the tinyvmm command: the job options (given among the
 * VM options), and running one job through an agent connection. */
#ifndef TVM_CLI_JOB_H
#define TVM_CLI_JOB_H

#include <stdint.h>

#include "vmm/tinyvmm.h"

struct cli_report;

/* Exit statuses (README.md): the job's own, or these. */
#define EXIT_TIMED_OUT 124  /* the job's --timeout expired */
#define EXIT_VM_FAILED 125  /* tinyvmm failed: usage, files, VM, agent */
#define EXIT_CANNOT_RUN 126 /* the command exists but could not run */
#define EXIT_NOT_FOUND 127  /* the command was not found */
/* and EXIT_USAGE 64 (cli_report.h) for a wrong command line */

#define CLI_MAX_LIST 64
#define CLI_DEFAULT_OUTPUT_CAP (1u << 20) /* the agent's default per stream (guest/PROTOCOL.md) */
#define CLI_FILE_CAP (1ULL << 30)         /* largest file --put/--get moves */

struct cli_job {
	const char *env[CLI_MAX_LIST + 1];
	unsigned nenv;
	const char *puts[CLI_MAX_LIST]; /* LOCAL:GUEST */
	unsigned nput;
	const char *gets[CLI_MAX_LIST]; /* GUEST:LOCAL */
	unsigned nget;
	const char *workdir;
	uint32_t timeout_ms;
	uint64_t mem_max;  /* --job-mem: bytes; 0: no limit */
	uint32_t pids_max; /* --job-pids; 0: no limit */
	uint32_t uid, gid;
	uint32_t output_cap;       /* bytes per stream */
	struct cli_report *report; /* --json: the run's report (cli_report.h); NULL: output streamed */
	int quiet;                 /* without a report: the output is dropped */
	int forward_stdin;         /* read our stdin to EOF and give it to the job */
	char **argv;               /* the command, NULL-terminated */
	const char *started;       /* for --json: "boot" or "restore"; NULL: not known (exec) */
	const char *snapshot;      /* for --json: the snapshot restored from */
	int template_made;         /* for --json: this run made the template snapshot it restored */
	const char *get_stage;     /* --jail: --get i is written to <get_stage>/get<i>, moved out after */
	int put_fd[CLI_MAX_LIST];  /* --jail: --put files opened before the lockdown */
	int puts_open;             /* put_fd holds them */
};

/* Parse a number of seconds (fractions allowed) for --name into *ms.
 * Returns 0, or -1 after printing what is wrong. */
int cli_job_seconds(const char *name, const char *arg, uint32_t *ms);

/* Handle one job option (the long option's name and its argument). Returns
 * 1 if it was one, 0 if not, -1 on a bad value (message printed). */
int cli_job_option(struct cli_job *j, const char *name, const char *arg);

/* Check before the VM starts that every --put source can be read and every
 * guest path is one, so a typo costs no boot. Returns 0, or after printing
 * which and why EXIT_USAGE (a guest path that cannot be) or EXIT_VM_FAILED
 * (a local file that cannot be read). */
int cli_job_check_puts(const struct cli_job *j);

/* Open every --put file now (--jail: before the jailed VMM may open
 * nothing). Returns 0, or -1 after printing which and why. */
int cli_job_open_puts(struct cli_job *j);

/* After a jailed run: move each --get file staged as <host_stage>/get<i>
 * (see get_stage) to its LOCAL path, as a --get writes it. One missing was
 * not fetched (said by the run). Returns 0, or -1 after printing why. */
int cli_job_collect_gets(struct cli_job *j, const char *host_stage);

/* Move the file the jail wrote at staged (a regular file, never followed
 * through a symlink) to target, written next to it and renamed. Returns 0
 * or -errno (-ENOENT: nothing was staged). */
int cli_move_staged(const char *staged, const char *target);

/* Run the job over an open agent connection: files in, job, files out.
 * Its output goes to our stdout and stderr, or with a report (--json) into
 * it, with the result and each file's. Returns the exit status. */
int cli_job_run(struct cli_job *j, struct tvm_agent *a);

#endif
