/* The tinyvmm command: argument parsing, terminal handling, exit codes.
 * Everything else is the library's (vmm/tinyvmm.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "vmm/tinyvmm.h"
#include "vmm/core/err.h"

#include "vmm/cli/cli_job.h"

#define BOOT_TIMEOUT_MS 600000 /* agent ready after boot: minutes on the emulated-CPL0 host */
#define EXEC_WAIT_S 120 /* exec: seconds to wait for a booting VM's agent */
#define JOB_CMDLINE "console=ttyS0 reboot=k panic=-1 quiet"

static const char usage[] =
	"usage: tinyvmm run --kernel PATH [VM options] [job options] [-- CMD ARGS...]\n"
	"       tinyvmm run --snapshot DIR [--rootfs/--drive, --vsock-uds, --serial-out, --metrics,\n"
	"                   --ttl, --console, --net NAME|auto, --net-allow/--net-dns/--net-deny-all]\n"
	"                   [job options] [-- CMD ARGS...]\n"
	"       tinyvmm snapshot create --out DIR --kernel PATH [VM options] [-- WARMUP CMD...]\n"
	"       tinyvmm exec --vsock-uds PATH [job options] -- CMD ARGS...\n"
	"       tinyvmm host      print the host quirks and the default guest command line\n"
	"Without CMD, `run` boots the guest and shows its console until it ends.\n"
	"With CMD, the guest's agent runs it: its output is ours, its exit status ours.\n"
	"VM options:\n"
	"  --kernel PATH          ELF vmlinux or bzImage\n"
	"  --initrd PATH          initramfs (cpio, optionally gzip'd)\n"
	"  --cmdline STR          guest command line (default: \"%s\")\n"
	"  --cmdline-append STR   words added after the command line\n"
	"  --mem MIB              guest RAM in MiB (default 256)\n"
	"  --cpus N               vCPUs (default 1)\n"
	"  --rootfs SPEC          root file system drive (/dev/vda), copy-on-write by default\n"
	"  --drive SPEC           another virtio-blk drive (/dev/vdb, ...), writable by default\n"
	"      SPEC: [path=]FILE[,ro][,rw][,cow][,overlay=FILE][,overlay-limit=MIB][,id=SERIAL]\n"
	"      cow: FILE is never written; guest writes go to a private overlay, discarded\n"
	"      at exit unless overlay=FILE (a new file) keeps it\n"
	"  --serial-out FILE      write the guest console to FILE instead of stdout\n"
	"  --metrics FILE         write boot timestamps, exit counts and network counters as JSON\n"
	"                         at exit\n"
	"  --quirks auto|on|off   nested kvm_pvm host workarounds (default auto)\n"
	"  --vsock-cid N          guest CID of the vsock device (default 3; 0: no device)\n"
	"  --vsock-uds PATH       Firecracker-style hybrid vsock socket\n"
	"  --ttl SECONDS          stop the VM this long after it started, whatever happens\n"
	"  --net [tap=]NAME|auto[,mac=MAC][,mtu=BYTES]\n"
	"                         virtio-net on the TAP NAME (created if missing) or on a new\n"
	"                         one (auto); no network at all without it\n"
	"  --net-allow RULE       egress allow-list entry CIDR[:PORT[/tcp|udp]] (repeatable;\n"
	"                         IPv6 with a port: [2001:db8::/32]:443); everything else dropped\n"
	"  --net-dns ADDR         allow DNS to this resolver (alone: deny all but DNS)\n"
	"  --net-deny-all         an allow-list even without rules (then only ARP/ND pass);\n"
	"                         without any of these three, egress is unrestricted\n"
	"  --net-mac MAC, --net-mtu BYTES\n"
	"  --net-no-offload       offer no checksum/TCP segmentation offload (slower; fewer\n"
	"                         host-kernel paths for guest frames)\n"
	"  --net-ip ADDR/PREFIX   the guest's eth0 address (IPv4; set by the agent)\n"
	"  --net-gw ADDR          the guest's default route; the first --net-dns is its resolver\n"
	"  --console              job mode: show the guest console on stderr\n"
	"  --snapshot DIR         restore the VM saved in DIR instead of booting (its memory,\n"
	"                         vCPUs, command line and drive modes); --rootfs/--drive re-point\n"
	"                         its drives (same images, same count), each gets a fresh overlay;\n"
	"                         a snapshot with a network needs --net (its TAP) and gets the\n"
	"                         allow-list given here (--net-allow/--net-dns/--net-deny-all)\n"
	"  --out DIR              snapshot create: boot, wait for the agent, run the warm-up\n"
	"                         command if given, save the VM into DIR\n"
	"job options:\n"
	"  -e, --env NAME=VALUE   environment for the job (repeatable)\n"
	"  --workdir DIR          working directory in the guest\n"
	"  --timeout SECONDS      kill the job's process group after this long\n"
	"  --put LOCAL:GUEST      copy a file into the guest before the job (repeatable)\n"
	"  --get GUEST:LOCAL      copy a file out of the guest after the job (repeatable)\n"
	"  -i, --stdin            read our stdin to EOF and give it to the job\n"
	"  --output-cap BYTES     output kept per stream (default 1 MiB)\n"
	"  --json                 print one JSON result object instead of the output\n"
	"exit status: without CMD, 0 when the guest ended itself; with CMD, the job's\n"
	"(128+N if killed by signal N); %d job timed out, %d tinyvmm failed (usage,\n"
	"files, VM, agent), %d command could not run, %d command not found\n";

static struct termios saved_tio;
static int tio_saved;

static void restore_terminal(void)
{
	if (tio_saved)
		tcsetattr(0, TCSANOW, &saved_tio);
}

/* Raw input so keys reach the guest as typed (the guest echoes), but keep
 * ISIG so Ctrl-C still stops the VMM. */
static void raw_terminal(void)
{
	struct termios t;

	if (tcgetattr(0, &saved_tio) < 0)
		return;
	tio_saved = 1;
	atexit(restore_terminal);
	t = saved_tio;
	t.c_iflag &= ~(unsigned)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
	t.c_lflag &= ~(unsigned)(ECHO | ECHONL | ICANON | IEXTEN);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	tcsetattr(0, TCSANOW, &t);
}

static void print_usage(FILE *f)
{
	fprintf(f, usage, tvm_default_cmdline(), EXIT_TIMED_OUT, EXIT_VM_FAILED, EXIT_CANNOT_RUN, EXIT_NOT_FOUND);
}

static int parse_u32(const char *flag, const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > UINT32_MAX || s[0] == '-') {
		fprintf(stderr, "tinyvmm: %s: '%s' is not a number\n", flag, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* Parse a --drive/--rootfs SPEC into d; cow is the default mode. */
static int parse_drive(const char *flag, const char *spec, struct tvm_drive *d, int cow)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	uint32_t mib;

	*d = (struct tvm_drive){ .cow = cow };
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "path=", 5))
			d->path = tok + 5;
		else if (!strcmp(tok, "ro"))
			d->read_only = 1, d->cow = 0;
		else if (!strcmp(tok, "rw"))
			d->read_only = 0, d->cow = 0;
		else if (!strcmp(tok, "cow"))
			d->cow = 1, d->read_only = 0;
		else if (!strncmp(tok, "overlay=", 8))
			d->overlay_path = tok + 8;
		else if (!strncmp(tok, "overlay-limit=", 14)) {
			if (parse_u32(flag, tok + 14, &mib))
				return -1;
			d->overlay_limit = (uint64_t)mib << 20;
		} else if (!strncmp(tok, "id=", 3))
			d->id = tok + 3;
		else if (!d->path && !strchr(tok, '='))
			d->path = tok;
		else {
			fprintf(stderr, "tinyvmm: %s %s: unknown option '%s'\n", flag, spec, tok);
			return -1;
		}
	}
	if (!d->path || !*d->path) {
		fprintf(stderr, "tinyvmm: %s %s: no image path\n", flag, spec);
		return -1;
	}
	if (d->overlay_path && !d->cow) {
		fprintf(stderr, "tinyvmm: %s %s: overlay= needs copy-on-write mode\n", flag, spec);
		return -1;
	}
	return 0;
}

/* --net SPEC: [tap=]NAME|auto[,mac=MAC][,mtu=BYTES]. A bare word is the
 * TAP's name; "auto" (or no name) has tinyvmm create one. */
static int parse_net(const char *spec, struct tvm_net *n)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	const char *name = NULL;

	if (!copy) {
		fprintf(stderr, "tinyvmm: --net: out of memory\n");
		return -1;
	}
	n->enabled = 1;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "tap=", 4) && !name)
			name = tok + 4;
		else if (!strncmp(tok, "mac=", 4))
			n->mac = tok + 4;
		else if (!strncmp(tok, "mtu=", 4)) {
			if (parse_u32("--net mtu", tok + 4, &n->mtu))
				return -1;
		} else if (!name && !strchr(tok, '='))
			name = tok;
		else {
			fprintf(stderr, "tinyvmm: --net %s: unknown option '%s' (tap=, mac=, mtu=)\n", spec, tok);
			return -1;
		}
	}
	if (name && !*name) {
		fprintf(stderr, "tinyvmm: --net %s: empty TAP name\n", spec);
		return -1;
	}
	n->tap = name && strcmp(name, "auto") ? name : NULL;
	return 0;
}

struct stopper {
	struct tvm_vm *vm;
	sigset_t set;
	int sig;
};

static void *signal_waiter(void *arg)
{
	struct stopper *s = arg;

	if (sigwait(&s->set, &s->sig) == 0) {
		tvm_vm_stop(s->vm);
	}
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum {
	O_KERNEL = 1, O_INITRD, O_CMDLINE, O_APPEND, O_MEM, O_CPUS, O_SERIAL, O_METRICS, O_QUIRKS, O_HELP,
	O_ROOTFS, O_DRIVE, O_VSOCK_CID, O_VSOCK_UDS, O_TTL, O_CONSOLE, O_STDIN, O_JSON, O_CAP, O_JOB,
	O_SNAPSHOT, O_OUT, O_NET, O_NET_ALLOW, O_NET_DNS, O_NET_DENY, O_NET_MAC, O_NET_MTU, O_NET_IP, O_NET_GW,
	O_NET_NO_OFFLOAD,
};

static const struct option run_opts[] = {
	{ "kernel", required_argument, 0, O_KERNEL },	  { "initrd", required_argument, 0, O_INITRD },
	{ "cmdline", required_argument, 0, O_CMDLINE },	  { "cmdline-append", required_argument, 0, O_APPEND },
	{ "mem", required_argument, 0, O_MEM },		  { "cpus", required_argument, 0, O_CPUS },
	{ "serial-out", required_argument, 0, O_SERIAL }, { "metrics", required_argument, 0, O_METRICS },
	{ "quirks", required_argument, 0, O_QUIRKS },	  { "help", no_argument, 0, O_HELP },
	{ "rootfs", required_argument, 0, O_ROOTFS },	  { "drive", required_argument, 0, O_DRIVE },
	{ "vsock-cid", required_argument, 0, O_VSOCK_CID }, { "vsock-uds", required_argument, 0, O_VSOCK_UDS },
	{ "ttl", required_argument, 0, O_TTL },		  { "console", no_argument, 0, O_CONSOLE },
	{ "stdin", no_argument, 0, O_STDIN },		  { "json", no_argument, 0, O_JSON },
	{ "output-cap", required_argument, 0, O_CAP },	  { "env", required_argument, 0, O_JOB },
	{ "workdir", required_argument, 0, O_JOB },	  { "timeout", required_argument, 0, O_JOB },
	{ "put", required_argument, 0, O_JOB },		  { "get", required_argument, 0, O_JOB },
	{ "net", required_argument, 0, O_NET },		  { "net-allow", required_argument, 0, O_NET_ALLOW },
	{ "net-dns", required_argument, 0, O_NET_DNS },	  { "net-deny-all", no_argument, 0, O_NET_DENY },
	{ "net-mac", required_argument, 0, O_NET_MAC },	  { "net-mtu", required_argument, 0, O_NET_MTU },
	{ "net-ip", required_argument, 0, O_NET_IP },	  { "net-gw", required_argument, 0, O_NET_GW },
	{ "net-no-offload", no_argument, 0, O_NET_NO_OFFLOAD },
	{ "snapshot", required_argument, 0, O_SNAPSHOT }, { "out", required_argument, 0, O_OUT },
	{ 0, 0, 0, 0 },
};

struct run_args {
	struct tvm_config c;
	struct cli_job job;
	struct tvm_drive root, drives[TVM_MAX_DRIVES];
	unsigned nr_drives;
	int have_root, console;
	const char *metrics, *serial_out;
	const char *snapshot, *out; /* --snapshot DIR (restore), --out DIR (snapshot create) */
	const char *boot_only;      /* the last option given that a restore takes from the snapshot */
};

/* The option getopt_long just refused: a short one by its letter (it may
 * sit in a group like -ix), else the argument itself ("--bogus"). */
static const char *bad_option(char **argv)
{
	static char shortopt[3];

	if (optopt > ' ' && optopt < 127) {
		snprintf(shortopt, sizeof(shortopt), "-%c", optopt);
		return shortopt;
	}
	return argv[optind - 1];
}

/* Parse argv into a; returns 0, or an exit status for a usage error or --help. */
static int parse_run(int argc, char **argv, struct run_args *a)
{
	int o, idx;

	optind = 1;
	/* '+': stop at the first non-option, so CMD's own flags stay its. */
	/* ':' first: a missing value is reported apart, and by us (opterr = 0):
	 * one line naming the option, not getopt's "run: ..." and the usage. */
	opterr = 0;
	while ((o = getopt_long(argc, argv, "+:e:i", run_opts, &idx)) != -1) {
		if (o == O_KERNEL || o == O_INITRD || o == O_CMDLINE || o == O_APPEND || o == O_MEM || o == O_CPUS ||
		    o == O_VSOCK_CID || o == O_QUIRKS)
			a->boot_only = run_opts[idx].name;
		switch (o) {
		case O_KERNEL: a->c.kernel_path = optarg; break;
		case O_INITRD: a->c.initrd_path = optarg; break;
		case O_CMDLINE: a->c.cmdline = optarg; break;
		case O_APPEND: a->c.cmdline_append = optarg; break;
		case O_MEM: if (parse_u32("--mem", optarg, &a->c.mem_mib)) return EXIT_VM_FAILED; break;
		case O_CPUS: if (parse_u32("--cpus", optarg, &a->c.cpus)) return EXIT_VM_FAILED; break;
		case O_VSOCK_CID: if (parse_u32("--vsock-cid", optarg, &a->c.vsock_cid)) return EXIT_VM_FAILED; break;
		case O_CAP: if (parse_u32("--output-cap", optarg, &a->job.output_cap)) return EXIT_VM_FAILED; break;
		case O_TTL: if (cli_job_seconds("ttl", optarg, &a->c.ttl_ms)) return EXIT_VM_FAILED; break;
		case O_VSOCK_UDS: a->c.vsock_uds = optarg; break;
		case O_NET: if (parse_net(optarg, &a->c.net)) return EXIT_VM_FAILED; break;
		case O_NET_ALLOW:
			if (a->c.net.nr_allow == TVM_MAX_NET_RULES) {
				fprintf(stderr, "tinyvmm: --net-allow: at most %d rules\n", TVM_MAX_NET_RULES);
				return EXIT_VM_FAILED;
			}
			a->c.net.allow[a->c.net.nr_allow++] = optarg;
			break;
		case O_NET_DNS:
			if (a->c.net.nr_dns == TVM_MAX_NET_DNS) {
				fprintf(stderr, "tinyvmm: --net-dns: at most %d resolvers\n", TVM_MAX_NET_DNS);
				return EXIT_VM_FAILED;
			}
			a->c.net.dns[a->c.net.nr_dns++] = optarg;
			break;
		case O_NET_DENY: a->c.net.deny_all = 1; break;
		case O_NET_NO_OFFLOAD: a->c.net.no_offload = 1; break;
		case O_NET_MAC: a->c.net.mac = optarg; break;
		case O_NET_IP: a->c.net.guest_ip = optarg; break;
		case O_NET_GW: a->c.net.guest_gw = optarg; break;
		case O_NET_MTU: if (parse_u32("--net-mtu", optarg, &a->c.net.mtu)) return EXIT_VM_FAILED; break;
		case O_SERIAL: a->serial_out = optarg; break;
		case O_SNAPSHOT: a->snapshot = optarg; break;
		case O_OUT: a->out = optarg; break;
		case O_METRICS: a->metrics = optarg; break;
		case O_CONSOLE: a->console = 1; break;
		case O_STDIN: case 'i': a->job.forward_stdin = 1; break;
		case O_JSON: a->job.json = 1; break;
		case 'e': if (cli_job_option(&a->job, "env", optarg) < 0) return EXIT_VM_FAILED; break;
		case O_JOB: if (cli_job_option(&a->job, run_opts[idx].name, optarg) < 0) return EXIT_VM_FAILED; break;
		case O_QUIRKS:
			if (!strcmp(optarg, "auto")) a->c.quirks = TVM_QUIRKS_AUTO;
			else if (!strcmp(optarg, "on")) a->c.quirks = TVM_QUIRKS_ON;
			else if (!strcmp(optarg, "off")) a->c.quirks = TVM_QUIRKS_OFF;
			else {
				fprintf(stderr, "tinyvmm: --quirks: '%s' is not auto, on or off\n", optarg);
				return EXIT_VM_FAILED;
			}
			break;
		case O_ROOTFS:
			if (a->have_root) {
				fprintf(stderr, "tinyvmm: --rootfs given twice\n");
				return EXIT_VM_FAILED;
			}
			if (parse_drive("--rootfs", optarg, &a->root, 1))
				return EXIT_VM_FAILED;
			a->have_root = 1;
			break;
		case O_DRIVE:
			if (a->nr_drives + 1 >= TVM_MAX_DRIVES) {
				fprintf(stderr, "tinyvmm: --drive: at most %d drives\n", TVM_MAX_DRIVES - 1);
				return EXIT_VM_FAILED;
			}
			if (parse_drive("--drive", optarg, &a->drives[a->nr_drives], 0))
				return EXIT_VM_FAILED;
			a->nr_drives++;
			break;
		case O_HELP:
			print_usage(stdout);
			return -1;
		case ':':
			fprintf(stderr, "tinyvmm: %s needs a value\n", bad_option(argv));
			return EXIT_VM_FAILED;
		default:
			fprintf(stderr, "tinyvmm: unknown option %s (see tinyvmm --help)\n", bad_option(argv));
			return EXIT_VM_FAILED;
		}
	}
	if (!a->c.net.enabled && (a->c.net.nr_allow || a->c.net.nr_dns || a->c.net.deny_all || a->c.net.mac ||
				  a->c.net.mtu || a->c.net.guest_ip || a->c.net.guest_gw || a->c.net.no_offload)) {
		/* Without --net the VM has no network at all: a policy or
		 * address for it would be silently meaningless. */
		fprintf(stderr, "tinyvmm: --net-* options need --net TAP|auto (without it the VM has no network)\n");
		return EXIT_VM_FAILED;
	}
	if (optind < argc && strcmp(argv[optind - 1], "--")) {
		fprintf(stderr, "tinyvmm: unexpected argument '%s' (put the command after --)\n", argv[optind]);
		return EXIT_VM_FAILED;
	}
	a->job.argv = optind < argc ? argv + optind : NULL;
	return 0;
}

/* A kept overlay or a writable image wants the guest's caches written out:
 * ask the agent to sync and reset instead of pulling the plug. */
static int wants_clean_shutdown(const struct tvm_config *c)
{
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (c->drives[i].overlay_path || (!c->drives[i].cow && !c->drives[i].read_only))
			return 1;
	return 0;
}

static int run_job_in_vm(struct run_args *a, struct tvm_vm *vm, uint64_t t0)
{
	struct tvm_agent *agent;
	struct tvm_err err = { 0 };
	int status;

	if (tvm_vm_agent_connect(vm, BOOT_TIMEOUT_MS, &agent, &err)) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	/* A restored VM was seeded by tvm_vm_agent_connect already. */
	if (!a->snapshot && tvm_agent_seed(agent, &err))
		fprintf(stderr, "tinyvmm: warning: %s\n", err.msg);
	status = cli_job_run(&a->job, agent, t0);
	if (wants_clean_shutdown(&a->c) && !tvm_agent_shutdown(agent, &err)) {
		tvm_agent_close(agent);
		return status; /* the guest resets itself; tvm_vm_wait sees it */
	}
	tvm_agent_close(agent);
	tvm_vm_stop(vm);
	return status;
}

/* Parse the arguments of run / snapshot create (create: 1) into a: config,
 * drives, console. Returns 0, -1 after --help, or an exit status. */
static int setup_run(int argc, char **argv, uint64_t t0, struct run_args *a, int create)
{
	int r;

	tvm_config_init(&a->c);
	a->job.uid = a->job.gid = TVM_ID_DEFAULT; /* jobs run unprivileged unless asked */
	a->c.t0_ns = t0;
	r = parse_run(argc, argv, a);
	if (!r && cli_job_check_puts(&a->job))
		r = EXIT_VM_FAILED;
	if (r)
		return r;
	if (!a->c.kernel_path && !a->snapshot) {
		fprintf(stderr, "tinyvmm: --kernel (or --snapshot) is required\n");
		return EXIT_VM_FAILED;
	}
	if (a->snapshot && a->boot_only) {
		fprintf(stderr, "tinyvmm: --%s: a restore takes kernel, command line, memory, vCPUs, vsock CID and "
				"quirks from the snapshot\n", a->boot_only);
		return EXIT_VM_FAILED;
	}
	if (!a->out != !create || (create && a->snapshot)) {
		fprintf(stderr, "tinyvmm: %s\n", create ? "snapshot create needs --out DIR and boots (no --snapshot)"
						    : "--out belongs to `tinyvmm snapshot create`");
		return EXIT_VM_FAILED;
	}
	/* The root drive is /dev/vda, then the others in order. */
	if (a->have_root)
		a->c.drives[a->c.nr_drives++] = a->root;
	a->c.root_drive = a->have_root;
	for (unsigned i = 0; i < a->nr_drives; i++)
		a->c.drives[a->c.nr_drives++] = a->drives[i];
	if (a->job.argv || create) {
		/* Job mode: the console is not the job's output. */
		a->c.serial_out_fd = a->console ? 2 : -1;
		if (!a->c.cmdline)
			a->c.cmdline = JOB_CMDLINE;
	} else if (isatty(0)) {
		a->c.serial_in_fd = 0;
		raw_terminal();
	}
	if (a->serial_out) {
		/* Append, never truncate: the user's file keeps what it had. */
		FILE *f = fopen(a->serial_out, "ae");
		if (!f) {
			fprintf(stderr, "tinyvmm: --serial-out %s: %s\n", a->serial_out, strerror(errno));
			return EXIT_VM_FAILED;
		}
		a->c.serial_out_fd = fileno(f);
	}

	return 0;
}

static int cmd_run(int argc, char **argv, uint64_t t0)
{
	struct run_args a = { 0 };
	struct tvm_err err = { 0 };
	struct tvm_vm *vm;
	struct stopper stop = { 0 };
	pthread_t waiter;
	int r, status;

	r = setup_run(argc, argv, t0, &a, 0);
	if (r)
		return r < 0 ? 0 : r;

	/* SIGINT/SIGTERM stop the VM from a thread of our own, so that every
	 * other thread (the library's) runs with them blocked. */
	sigemptyset(&stop.set);
	sigaddset(&stop.set, SIGINT);
	sigaddset(&stop.set, SIGTERM);
	sigaddset(&stop.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop.set, NULL);

	r = a.snapshot ? tvm_vm_restore(&a.c, a.snapshot, &vm, &err) : tvm_vm_create(&a.c, &vm, &err);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	stop.vm = vm;
	pthread_create(&waiter, NULL, signal_waiter, &stop);
	r = tvm_vm_start(vm, &err);
	status = 0;
	if (!r && a.job.argv)
		status = run_job_in_vm(&a, vm, t0);
	if (!r)
		r = tvm_vm_wait(vm, &err);
	if (r) {
		fprintf(stderr, "tinyvmm: guest failed: %s\n", err.msg);
		status = r == -ETIME ? EXIT_TIMED_OUT : EXIT_VM_FAILED;
	}
	pthread_cancel(waiter);
	pthread_join(waiter, NULL);
	if (stop.sig)
		status = 128 + stop.sig;
	if (a.metrics && tvm_vm_write_metrics(vm, a.metrics, &err)) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		status = status ? status : EXIT_VM_FAILED;
	}
	tvm_vm_destroy(vm);
	return status;
}

/* Boot, wait for the agent, run the warm-up command if any, snapshot,
 * stop. No connection stays open across the snapshot: the restored guest
 * would only see it reset. */
static int cmd_snapshot_create(int argc, char **argv, uint64_t t0)
{
	struct run_args a = { 0 };
	struct tvm_err err = { 0 };
	struct tvm_agent *agent;
	struct tvm_vm *vm;
	uint64_t ready = 0, warm = 0, saved = 0;
	int connected, r = setup_run(argc, argv, t0, &a, 1);

	if (r)
		return r < 0 ? 0 : r;
	r = tvm_vm_create(&a.c, &vm, &err);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	r = tvm_vm_start(vm, &err);
	if (!r)
		r = tvm_vm_agent_connect(vm, BOOT_TIMEOUT_MS, &agent, &err);
	connected = !r;
	ready = now_ns();
	if (!r && a.job.argv) {
		/* Warm-up: what the job touches (binaries, page cache) is in
		 * the snapshot, so restored VMs start it faster. */
		int status = cli_job_run(&a.job, agent, t0);

		if (status)
			r = tvm_errf(&err, EIO, "warm-up command %s: exit status %d", a.job.argv[0], status);
	}
	if (connected)
		tvm_agent_close(agent);
	warm = now_ns();
	if (!r)
		r = tvm_vm_snapshot(vm, a.out, &err);
	saved = now_ns();
	if (!r)
		fprintf(stderr, "tinyvmm: snapshot %s: agent ready %.1f s after start, warm-up %.1f s, saved in %.0f ms\n",
			a.out, (double)(ready - t0) / 1e9, (double)(warm - ready) / 1e9, (double)(saved - warm) / 1e6);
	else
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
	tvm_vm_stop(vm);
	tvm_vm_wait(vm, &err);
	if (a.metrics && tvm_vm_write_metrics(vm, a.metrics, &err))
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
	tvm_vm_destroy(vm);
	return r ? EXIT_VM_FAILED : 0;
}

static int cmd_exec(int argc, char **argv, uint64_t t0)
{
	struct run_args a = { 0 };
	struct tvm_err err = { 0 };
	struct tvm_agent *agent;
	int r;

	a.job.uid = a.job.gid = TVM_ID_DEFAULT;
	r = parse_run(argc, argv, &a);

	if (r)
		return r < 0 ? 0 : r;
	if (!a.c.vsock_uds || !a.job.argv) {
		fprintf(stderr, "tinyvmm: exec needs --vsock-uds PATH and -- CMD\n");
		return EXIT_VM_FAILED;
	}
	/* A VM started just before may still be booting: its guest refuses
	 * the port until the agent listens. Wait for it, within reason. */
	for (int tries = 0;; tries++) {
		r = tvm_agent_connect_uds(a.c.vsock_uds, TVM_AGENT_PORT, 10000, &agent, &err);
		/* The socket itself appears as the VM starts: a few seconds
		 * for that, then only a refusing guest is waited for. */
		if (!r || tries >= EXEC_WAIT_S || (r != -ECONNREFUSED && !(r == -ENOENT && tries < 5)))
			break;
		sleep(1);
	}
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	r = cli_job_run(&a.job, agent, t0);
	tvm_agent_close(agent);
	return r;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns();

	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1, t0);
	if (argc >= 3 && !strcmp(argv[1], "snapshot") && !strcmp(argv[2], "create"))
		return cmd_snapshot_create(argc - 2, argv + 2, t0);
	if (argc >= 2 && !strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1, t0);
	if (argc == 2 && !strcmp(argv[1], "host")) {
		/* What this host makes tinyvmm add to every guest (benchmarks
		 * give other VMMs the same words). */
		const char *q = tvm_quirk_cmdline(TVM_QUIRKS_AUTO);
		printf("quirks: %s\ncmdline: %s%s%s\n", *q ? "kvm_pvm" : "none", tvm_default_cmdline(), *q ? " " : "", q);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		print_usage(stdout);
		return 0;
	}
	if (argc >= 2)
		fprintf(stderr, "tinyvmm: unknown command '%s%s%s' (run, snapshot create, exec, host; see tinyvmm --help)\n",
			argv[1], argc >= 3 && !strcmp(argv[1], "snapshot") ? " " : "",
			argc >= 3 && !strcmp(argv[1], "snapshot") ? argv[2] : "");
	else
		print_usage(stderr);
	return EXIT_VM_FAILED;
}
