/* The tinyvmm command, one concept per file:
 *   cli.c           main: which subcommand; `tinyvmm host`
 *   cli_usage.c     the usage text
 *   cli_term.c      the terminal in raw mode for an interactive console
 *   cli_spec.c      option values: numbers, --rootfs/--drive and --net SPECs
 *   cli_opts.c      the option table, parsed into struct cli_args and the
 *                   VM's config
 *   cli_run.c       tinyvmm run
 *   cli_snapshot.c  tinyvmm snapshot create
 *   cli_exec.c      tinyvmm exec
 *   cli_image.c     tinyvmm image build
 *   cli_guest.c     the default kernel and base image
 *   cli_template.c  template snapshots made for the user
 *   cli_job.c       job options and running one job (cli_job.h)
 *   cli_report.c    the one JSON object of a --json run (cli_report.h)
 *   cli_jail.c      --jail around any command that runs a VM; tinyvmm gc
 * Everything else is the library's (vmm/tinyvmm.h). */
#ifndef TVM_CLI_H
#define TVM_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "vmm/tinyvmm.h"
#include "vmm/cli/cli_job.h"
#include "vmm/cli/cli_report.h"
#include "vmm/sandbox/seccomp.h"
#include "vmm/sandbox/jail.h"

#define CLI_BOOT_TIMEOUT_MS 600000 /* agent ready after boot: minutes on the emulated-CPL0 host */

/* Print the usage text (with the default command line and the exit
 * statuses) to f. */
void cli_usage(FILE *f);
/* The usage of one command alone: exec's (its job options), host's. */
void cli_usage_exec(FILE *f);
void cli_usage_host(FILE *f);

/* Put the terminal on stdin in raw mode, so keys reach the guest as typed;
 * it is restored at exit. Nothing happens when stdin is no terminal. */
void cli_term_raw(void);

/* Parse the decimal number s given to flag into *out. Returns 0, or -1
 * after printing "tinyvmm: FLAG: 'S' is not a number". */
int cli_parse_u32(const char *flag, const char *s, uint32_t *out);

/* Parse the count s given to flag into *out: decimal, optionally followed
 * by K, M or G (either case: times 2^10, 2^20, 2^30), e.g. "2M". Returns 0,
 * or -1 after printing "tinyvmm: FLAG: 'S' is not a number ...". */
int cli_parse_size(const char *flag, const char *s, uint64_t *out);

/* Parse a --drive/--rootfs SPEC (flag names which) into d; cow: whether
 * copy-on-write is the default mode. d's strings point into a copy of spec
 * that lives as long as the process. Returns 0, or -1 after printing what
 * is wrong. */
int cli_parse_drive(const char *flag, const char *spec, struct tvm_drive *d, int cow);

/* Parse a --net SPEC into n (enabled; its strings point into a copy of
 * spec that lives as long as the process). Returns 0, or -1 after printing
 * what is wrong. */
int cli_parse_net(const char *spec, struct tvm_net *n);

/* What the command line asks for; run, snapshot create and exec share one
 * option table. */
struct cli_args {
	struct tvm_config c;
	struct cli_job job;
	struct tvm_drive root, drives[TVM_MAX_DRIVES];
	unsigned nr_drives;
	int have_root, console;
	const char *metrics, *serial_out;
	const char *snapshot, *out; /* --snapshot DIR (restore), --out DIR (snapshot create) */
	const char *pause_to;       /* --pause-to DIR (run --vsock-uds): SIGUSR1 saves the VM there, then ends it */
	const char *
		diff_from; /* snapshot create --diff-from DIR: restored from DIR (also a->snapshot), diffed against it */
	const char *boot_only;      /* the last option given that a restore takes from the snapshot */
	int no_snapshot;            /* --no-snapshot: boot cold, no template snapshot */
	uint64_t disk_size;         /* --disk-size in bytes; 0: not given */
	int default_root;           /* the root drive is the default base image */
	int die_with_parent;        /* --die-with-parent: stop the VM when our parent process ends */
	int no_inplace;             /* --no-inplace-drives: every drive copy-on-write or read-only */
	int no_cgroup;              /* --no-cgroup */
	const char *cgroup_flag;    /* the last cgroup limit option given (then a cgroup is required) */
	int user_cmdline;           /* --cmdline was given */
	char template_dir[4096];    /* the template snapshot a->snapshot points to, if any */
	int jail;                   /* --jail: the VM runs jailed (cli_jail.c) */
	struct jail_opts jail_opts; /* --jail-dir, --jail-uid, --jail-gid, --netns */
	const char *jail_flag;      /* the last of those given (they need --jail) */
	const char *json;           /* "--json" or "--json-out" when given (cli_report.h) */
};

/* Parse argv (argv[0]: the subcommand) into a. Returns 0, -1 after --help
 * (the usage printed on stdout), or an exit status after printing one
 * line saying what is wrong. */
int cli_parse_args(int argc, char **argv, struct cli_args *a);

/* For run and snapshot create (create: 1): a's config initialized, argv
 * parsed and checked, then the drives put in order (the root drive first),
 * the console and the serial output set up. t0_ns: when tinyvmm started.
 * Returns 0, -1 after --help, or an exit status after printing why. */
int cli_setup_vm(int argc, char **argv, uint64_t t0_ns, struct cli_args *a, int create);

/* Boot a VM from c (or with diff_from, restore it from that snapshot
 * directory), wait for its agent (seeded), run warmup if it has a command,
 * snapshot it into out (with diff_from: a diff against it), stop it.
 * metrics: NULL or a file for the VM's metrics. quiet: a template made
 * before a run's own VM: no success line, and (unjailed) the VM runs in a
 * child process, whose main thread ends confined as `snapshot create`'s.
 * jail: NULL, or run the VM jailed with these options. Returns 0 or
 * EXIT_VM_FAILED after printing why. */
int cli_snapshot_make(const struct tvm_config *c, struct cli_job *warmup, const char *out, const char *diff_from,
		      const char *metrics, uint64_t t0_ns, int quiet, const struct jail_opts *jail);

/* Run body(ctx, j) in a jail with options o for the VM of c (cli_jail.c):
 * c, *snapshot (restore directory; may be NULL), *out (snapshot output; may
 * be NULL), *metrics (may be NULL) and job's --put/--get (job may be NULL)
 * are rewritten to the jail's for body, which must call jail_lockdown(j)
 * once the VM is built (and cli_job_open_puts before it); afterwards the
 * staged outputs are moved to the host paths and the jail removed. Returns
 * body's exit status, or EXIT_VM_FAILED after printing why. */
int cli_jail_vm(const struct jail_opts *o, struct tvm_config *c, const char **snapshot, const char **out,
		const char **metrics, struct cli_job *job, int (*body)(void *ctx, struct jail *j), void *ctx);

/* In body(), once the VM is built: job's --put files opened (job may be
 * NULL), then jail_lockdown. j NULL (not jailed): nothing. Returns 0, or -1
 * after printing why. */
int cli_jail_lockdown(struct jail *j, struct cli_job *job);

/* Without --kernel (and no --snapshot) use the guest kernel found next to
 * tinyvmm; for a job without --rootfs/--initrd (or with neither --kernel)
 * the base image too. Where: $TINYVMM_DATA_DIR alone when set, else
 * <dir of tinyvmm>/build/guest (a build tree), then
 * <dir of tinyvmm>/../share/tinyvmm (installed): the first that holds
 * vmlinux (rootfs.ext4 beside it). Returns 0, or EXIT_VM_FAILED after saying
 * where it looked. */
int cli_guest_defaults(struct cli_args *a);

/* For a job that would boot the default way (copy-on-write root drive, no
 * network, no extra drive, kernel command line and initrd not given, no
 * --no-snapshot): point a->snapshot at a template snapshot of this kernel,
 * image and VM shape, making it first if missing (cached under
 * $TINYVMM_CACHE/templates, keyed by the files' identities, tinyvmm's
 * binary and version, memory, vCPUs, vsock CID, quirks and network device;
 * safe when runs race). Does nothing when not eligible; on failure says so
 * in one line and leaves a to boot cold. 0, or the exit status of a run
 * stopped by a signal while its template was made (it must not boot). */
int cli_template_use(struct cli_args *a, uint64_t t0_ns);

/* Confine the calling thread as role (vmm/sandbox/seccomp.h) for the VM
 * built from c, as c->seccomp says (off: nothing). Returns 0, or
 * EXIT_VM_FAILED after printing why. */
int cli_confine(const struct tvm_config *c, enum sc_role role);

/* The subcommands: argv[0] is the subcommand's name, t0_ns when tinyvmm
 * started (CLOCK_MONOTONIC). Each returns the exit status (README.md). */
int cli_cmd_run(int argc, char **argv, uint64_t t0_ns);
int cli_cmd_snapshot_create(int argc, char **argv, uint64_t t0_ns);
int cli_cmd_exec(int argc, char **argv, uint64_t t0_ns);
int cli_cmd_gc(int argc, char **argv); /* tinyvmm gc [--jail-dir DIR]: remove stale jails */
/* --jail-dir DIR of run, snapshot create and gc: an absolute path, else
 * one line and EXIT_USAGE (a wrong command line); 0 when it is one. */
int cli_jail_dir_check(const char *dir);

/* The drives snapshot dir's VM had, into c (their paths live as long as the
 * process), as a restore without --rootfs/--drive opens them. 0, or -errno
 * with e naming the file. */
int cli_snapshot_drives(const char *dir, struct tvm_config *c, struct tvm_err *e);
/* tinyvmm image build (argv[0] "build"): runs tools/build-rootfs.sh. */
int cli_cmd_image_build(int argc, char **argv);

#endif
