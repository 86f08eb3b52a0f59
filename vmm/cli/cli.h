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
 * Everything else is the library's (vmm/tinyvmm.h). */
#ifndef TVM_CLI_H
#define TVM_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "vmm/tinyvmm.h"
#include "vmm/cli/cli_job.h"

#define CLI_BOOT_TIMEOUT_MS 600000 /* agent ready after boot: minutes on the emulated-CPL0 host */

/* Print the usage text (with the default command line and the exit
 * statuses) to f. */
void cli_usage(FILE *f);

/* Put the terminal on stdin in raw mode, so keys reach the guest as typed;
 * it is restored at exit. Nothing happens when stdin is no terminal. */
void cli_term_raw(void);

/* Parse the decimal number s given to flag into *out. Returns 0, or -1
 * after printing "tinyvmm: FLAG: 'S' is not a number". */
int cli_parse_u32(const char *flag, const char *s, uint32_t *out);

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
	const char *boot_only;      /* the last option given that a restore takes from the snapshot */
	int no_snapshot;            /* --no-snapshot: boot cold, no template snapshot */
	int die_with_parent;        /* --die-with-parent: stop the VM when our parent process ends */
	int user_cmdline;           /* --cmdline was given */
	char template_dir[4096];    /* the template snapshot a->snapshot points to, if any */
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

/* Boot a VM from c, wait for its agent (seeded), run warmup if it has a
 * command, snapshot it into out, stop it. metrics: NULL or a file for the
 * booted VM's metrics. quiet: no success line. Returns 0 or
 * EXIT_VM_FAILED after printing why. */
int cli_snapshot_make(const struct tvm_config *c, struct cli_job *warmup, const char *out, const char *metrics,
		      uint64_t t0_ns, int quiet);

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
 * binary and version, memory, vCPUs, vsock CID and quirks; safe when runs
 * race). Does nothing when not eligible; on failure says so in one line and
 * leaves a to boot cold. */
void cli_template_use(struct cli_args *a, uint64_t t0_ns);

/* The subcommands: argv[0] is the subcommand's name, t0_ns when tinyvmm
 * started (CLOCK_MONOTONIC). Each returns the exit status (README.md). */
int cli_cmd_run(int argc, char **argv, uint64_t t0_ns);
int cli_cmd_snapshot_create(int argc, char **argv, uint64_t t0_ns);
int cli_cmd_exec(int argc, char **argv, uint64_t t0_ns);
/* tinyvmm image build (argv[0] "build"): runs tools/build-rootfs.sh. */
int cli_cmd_image_build(int argc, char **argv);

#endif
