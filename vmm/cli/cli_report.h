/* The batch contract of `tinyvmm run --json` (and `exec --json`): exactly
 * one JSON object per run, on every exit path, failures included, in the
 * shape of vmm/cli/run-result.schema.json (JSON Schema 2020-12).
 *
 * The report lives in a shared anonymous mapping made before anything is
 * forked, so a jailed child (cli_jail.c) fills in the job's half and the
 * process that started tinyvmm writes the object once, at its end. While a
 * report exists, stderr is a stream that also keeps the lines written to it,
 * so a failure's message is the line the user sees, said once. */
#ifndef TVM_CLI_REPORT_H
#define TVM_CLI_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/tinyvmm.h"

/* Exit status for a wrong command line (sysexits.h EX_USAGE): unknown
 * option, bad value, conflicting options. */
#define EXIT_USAGE 64

/* How far a run got; a failure is reported at the stage it happened in. */
enum cli_stage {
	CLI_ST_ARGS,     /* the command line */
	CLI_ST_SETUP,    /* kernel, image, files named by options */
	CLI_ST_TEMPLATE, /* making or finding the template snapshot */
	CLI_ST_VM,       /* building or restoring the VM (jail included) */
	CLI_ST_AGENT,    /* waiting for the guest agent */
	CLI_ST_PUT,      /* --put files in */
	CLI_ST_JOB,      /* the job */
	CLI_ST_GET,      /* --get files out */
	CLI_ST_END,      /* stopping the VM, metrics, cleanup */
	CLI_ST_NR
};

struct cli_report;
struct cli_job;
struct tvm_config;

/* A report for this run when argv (the subcommand's: argv[0] is "run" or
 * "exec") asks for one with --json or --json-out; NULL otherwise, or with
 * one line said when the shared mapping cannot be made (then no report).
 * Looked for before the options are parsed, so a wrong command line is
 * reported too; --output-cap bounds the output kept. t0_ns: when tinyvmm
 * started. Replaces stderr (see above). */
struct cli_report *cli_report_new(int argc, char **argv, uint64_t t0_ns);

/* No object after all (--help): stderr restored, r freed. r may be NULL. */
void cli_report_cancel(struct cli_report *r);

/* The VM could not be made (tvm_vm_create or tvm_vm_restore failed): the
 * object's "started" is null, not how it was to start. From a jailed
 * run's child too (the state is shared). r may be NULL. */
void cli_report_no_vm(struct cli_report *r);
/* --json-out's file was refused at the start (said then): the object goes
 * to stdout without a second line saying so. r may be NULL. */
void cli_report_json_out_refused(struct cli_report *r);

/* The run reached stage s (the milestone's time is kept). r may be NULL. */
void cli_report_stage(struct cli_report *r, enum cli_stage s);

/* The job's output, kept up to the cap per stream (stream 1 or 2). */
void cli_report_output(struct cli_report *r, int stream, const void *buf, size_t len);

/* What the run is about to start: c and j as the command line gave them
 * (copied: the jail rewrites paths in them to its own). */
void cli_report_config(struct cli_report *r, const struct tvm_config *c, const struct cli_job *j);

/* The job started (end 0) or its result came (end 1). */
void cli_report_job_times(struct cli_report *r, int end);

/* The job's result, as the agent gave it. */
void cli_report_result(struct cli_report *r, const struct tvm_job_result *res);

/* --put (get 0) or --get (get 1) number i: bytes moved, or error (NULL: it
 * worked). A later call for the same file replaces the earlier one. */
void cli_report_file(struct cli_report *r, int get, unsigned i, uint64_t bytes, const char *error);

/* tinyvmm itself is being stopped by signal sig (the first one counts;
 * only memory is written, so any thread may say it). */
void cli_report_signal(struct cli_report *r, int sig);

/* Write the object (to --json-out's file, else stdout) for a run that ends
 * with exit status `status`, then restore stderr and free r. c and j:
 * what the command line asked for (NULL when it did not parse), unless
 * cli_report_config said it; started, snapshot and template_made come from
 * j. Returns status, or 125 when
 * the object could not be written (said in one line). r NULL: status. */
int cli_report_finish(struct cli_report *r, int status, const struct tvm_config *c, const struct cli_job *j);

#endif
