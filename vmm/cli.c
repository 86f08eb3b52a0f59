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

/* Exit statuses of `tinyvmm run` (also in README.md). */
#define EXIT_USAGE 2       /* bad flags or values */
#define EXIT_VM_FAILED 125 /* the VM could not be built or did not end cleanly */

static const char usage[] =
	"usage: tinyvmm run --kernel PATH [options]\n"
	"       tinyvmm host      print the host quirks and the default guest command line\n"
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
	"  --metrics FILE         write boot timestamps and exit counts as JSON at exit\n"
	"  --quirks auto|on|off   nested kvm_pvm host workarounds (default auto)\n"
	"exit status: 0 when the guest reset itself, %d when the VM failed, %d for usage errors\n";

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

static int cmd_run(int argc, char **argv, uint64_t t0)
{
	enum { O_KERNEL = 1, O_INITRD, O_CMDLINE, O_APPEND, O_MEM, O_CPUS, O_SERIAL, O_METRICS, O_QUIRKS, O_HELP,
	       O_ROOTFS, O_DRIVE };
	static const struct option opts[] = {
		{ "kernel", required_argument, 0, O_KERNEL },	{ "initrd", required_argument, 0, O_INITRD },
		{ "cmdline", required_argument, 0, O_CMDLINE }, { "cmdline-append", required_argument, 0, O_APPEND },
		{ "mem", required_argument, 0, O_MEM },		{ "cpus", required_argument, 0, O_CPUS },
		{ "serial-out", required_argument, 0, O_SERIAL }, { "metrics", required_argument, 0, O_METRICS },
		{ "quirks", required_argument, 0, O_QUIRKS },	{ "help", no_argument, 0, O_HELP },
		{ "rootfs", required_argument, 0, O_ROOTFS },	{ "drive", required_argument, 0, O_DRIVE },
		{ 0, 0, 0, 0 },
	};
	struct tvm_config c;
	struct tvm_err err = { 0 };
	struct tvm_vm *vm;
	struct stopper stop = { 0 };
	pthread_t waiter;
	const char *metrics = NULL, *serial_out = NULL;
	struct tvm_drive root = { 0 }, drives[TVM_MAX_DRIVES];
	unsigned nr_drives = 0;
	int have_root = 0;
	int o, r, status;

	tvm_config_init(&c);
	c.t0_ns = t0;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_KERNEL: c.kernel_path = optarg; break;
		case O_INITRD: c.initrd_path = optarg; break;
		case O_CMDLINE: c.cmdline = optarg; break;
		case O_APPEND: c.cmdline_append = optarg; break;
		case O_MEM: if (parse_u32("--mem", optarg, &c.mem_mib)) return EXIT_USAGE; break;
		case O_CPUS: if (parse_u32("--cpus", optarg, &c.cpus)) return EXIT_USAGE; break;
		case O_SERIAL: serial_out = optarg; break;
		case O_ROOTFS:
			if (have_root) {
				fprintf(stderr, "tinyvmm: --rootfs given twice\n");
				return EXIT_USAGE;
			}
			if (parse_drive("--rootfs", optarg, &root, 1))
				return EXIT_USAGE;
			have_root = 1;
			break;
		case O_DRIVE:
			if (nr_drives + 1 >= TVM_MAX_DRIVES) {
				fprintf(stderr, "tinyvmm: --drive: at most %d drives\n", TVM_MAX_DRIVES - 1);
				return EXIT_USAGE;
			}
			if (parse_drive("--drive", optarg, &drives[nr_drives], 0))
				return EXIT_USAGE;
			nr_drives++;
			break;
		case O_METRICS: metrics = optarg; break;
		case O_QUIRKS:
			if (!strcmp(optarg, "auto")) c.quirks = TVM_QUIRKS_AUTO;
			else if (!strcmp(optarg, "on")) c.quirks = TVM_QUIRKS_ON;
			else if (!strcmp(optarg, "off")) c.quirks = TVM_QUIRKS_OFF;
			else {
				fprintf(stderr, "tinyvmm: --quirks: '%s' is not auto, on or off\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case O_HELP:
			printf(usage, tvm_default_cmdline(), EXIT_VM_FAILED, EXIT_USAGE);
			return 0;
		default:
			fprintf(stderr, usage, tvm_default_cmdline(), EXIT_VM_FAILED, EXIT_USAGE);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tinyvmm: unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (!c.kernel_path) {
		fprintf(stderr, "tinyvmm: --kernel is required\n");
		return EXIT_USAGE;
	}
	/* The root drive is /dev/vda, then the others in order. */
	if (have_root)
		c.drives[c.nr_drives++] = root;
	c.root_drive = have_root;
	for (unsigned i = 0; i < nr_drives; i++)
		c.drives[c.nr_drives++] = drives[i];
	if (serial_out) {
		/* Append, never truncate: the user's file keeps what it had. */
		FILE *f = fopen(serial_out, "ae");
		if (!f) {
			fprintf(stderr, "tinyvmm: --serial-out %s: %s\n", serial_out, strerror(errno));
			return EXIT_USAGE;
		}
		c.serial_out_fd = fileno(f);
	}
	if (isatty(0)) {
		c.serial_in_fd = 0;
		raw_terminal();
	}

	/* SIGINT/SIGTERM stop the VM from a thread of our own, so that every
	 * other thread (the library's) runs with them blocked. */
	sigemptyset(&stop.set);
	sigaddset(&stop.set, SIGINT);
	sigaddset(&stop.set, SIGTERM);
	sigaddset(&stop.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop.set, NULL);

	r = tvm_vm_create(&c, &vm, &err);
	if (r) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		return EXIT_VM_FAILED;
	}
	stop.vm = vm;
	pthread_create(&waiter, NULL, signal_waiter, &stop);
	r = tvm_vm_run(vm, &err);
	status = r ? EXIT_VM_FAILED : 0;
	if (r)
		fprintf(stderr, "tinyvmm: guest failed: %s\n", err.msg);
	pthread_cancel(waiter);
	pthread_join(waiter, NULL);
	if (stop.sig)
		status = 128 + stop.sig;
	if (metrics && tvm_vm_write_metrics(vm, metrics, &err)) {
		fprintf(stderr, "tinyvmm: %s\n", err.msg);
		status = status ? status : EXIT_VM_FAILED;
	}
	tvm_vm_destroy(vm);
	return status;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns();

	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1, t0);
	if (argc == 2 && !strcmp(argv[1], "host")) {
		/* What this host makes tinyvmm add to every guest (benchmarks
		 * give other VMMs the same words). */
		const char *q = tvm_quirk_cmdline(TVM_QUIRKS_AUTO);
		printf("quirks: %s\ncmdline: %s%s%s\n", *q ? "kvm_pvm" : "none", tvm_default_cmdline(), *q ? " " : "", q);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf(usage, tvm_default_cmdline(), EXIT_VM_FAILED, EXIT_USAGE);
		return 0;
	}
	fprintf(stderr, usage, tvm_default_cmdline(), EXIT_VM_FAILED, EXIT_USAGE);
	return EXIT_USAGE;
}
