/* The option table of run, snapshot create and exec, parsed into struct
 * cli_args and, for a VM, into its config. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/cli/cli.h"
#include "vmm/core/file_open.h"
#include "vmm/sandbox/cgroup.h"

/* The base image's drive without --disk-size: room for a few `pip install`s. */
#define DEFAULT_DISK_SIZE (2ULL << 30)
#define MAX_DISK_SIZE (1ULL << 40)

#define JOB_CMDLINE "console=ttyS0 reboot=k panic=-1 quiet"

/* getopt_long's values for the long options. Named OPT_*: O_* is
 * <fcntl.h>'s (O_APPEND was one). */
enum {
	OPT_KERNEL = 1,
	OPT_INITRD,
	OPT_CMDLINE,
	OPT_CMDLINE_APPEND,
	OPT_MEM,
	OPT_CPUS,
	OPT_SERIAL,
	OPT_METRICS,
	OPT_QUIRKS,
	OPT_HELP,
	OPT_ROOTFS,
	OPT_DRIVE,
	OPT_VSOCK_CID,
	OPT_VSOCK_UDS,
	OPT_TTL,
	OPT_CONSOLE,
	OPT_STDIN,
	OPT_JSON,
	OPT_JSON_OUT,
	OPT_ID,
	OPT_ENCODING,
	OPT_CAP,
	OPT_JOB,
	OPT_SNAPSHOT,
	OPT_OUT,
	OPT_DIFF_FROM,
	OPT_NET,
	OPT_NET_ALLOW,
	OPT_NET_DNS,
	OPT_NET_DENY,
	OPT_NET_INGRESS,
	OPT_NET_MAC,
	OPT_NET_MTU,
	OPT_NET_IP,
	OPT_NET_GW,
	OPT_NET_NO_OFFLOAD,
	OPT_NO_SNAPSHOT,
	OPT_DIE_WITH_PARENT,
	OPT_CPU_QUOTA,
	OPT_CPUSET,
	OPT_MEM_ALLOWANCE,
	OPT_PIDS_MAX,
	OPT_CGROUP_PARENT,
	OPT_NO_CGROUP,
	OPT_JAIL,
	OPT_JAIL_DIR,
	OPT_JAIL_UID,
	OPT_JAIL_GID,
	OPT_NETNS,
	OPT_SECCOMP,
	OPT_NO_SECCOMP,
	OPT_NO_INPLACE,
	OPT_DISK_SIZE,
	OPT_IDLE_TIMEOUT,
	OPT_PAUSE_TO, /* the last: exec_option's range ends here */
};

static const struct option opts[] = {
	{ "kernel", required_argument, 0, OPT_KERNEL },
	{ "initrd", required_argument, 0, OPT_INITRD },
	{ "cmdline", required_argument, 0, OPT_CMDLINE },
	{ "cmdline-append", required_argument, 0, OPT_CMDLINE_APPEND },
	{ "mem", required_argument, 0, OPT_MEM },
	{ "cpus", required_argument, 0, OPT_CPUS },
	{ "serial-out", required_argument, 0, OPT_SERIAL },
	{ "metrics", required_argument, 0, OPT_METRICS },
	{ "quirks", required_argument, 0, OPT_QUIRKS },
	{ "help", no_argument, 0, OPT_HELP },
	{ "rootfs", required_argument, 0, OPT_ROOTFS },
	{ "drive", required_argument, 0, OPT_DRIVE },
	{ "vsock-cid", required_argument, 0, OPT_VSOCK_CID },
	{ "vsock-uds", required_argument, 0, OPT_VSOCK_UDS },
	{ "ttl", required_argument, 0, OPT_TTL },
	{ "console", no_argument, 0, OPT_CONSOLE },
	{ "stdin", no_argument, 0, OPT_STDIN },
	{ "json", no_argument, 0, OPT_JSON },
	{ "json-out", required_argument, 0, OPT_JSON_OUT },
	{ "id", required_argument, 0, OPT_ID },
	{ "output-encoding", required_argument, 0, OPT_ENCODING },
	{ "output-cap", required_argument, 0, OPT_CAP },
	{ "env", required_argument, 0, OPT_JOB },
	{ "workdir", required_argument, 0, OPT_JOB },
	{ "timeout", required_argument, 0, OPT_JOB },
	{ "job-mem", required_argument, 0, OPT_JOB },
	{ "job-pids", required_argument, 0, OPT_JOB },
	{ "put", required_argument, 0, OPT_JOB },
	{ "get", required_argument, 0, OPT_JOB },
	{ "net", required_argument, 0, OPT_NET },
	{ "net-allow", required_argument, 0, OPT_NET_ALLOW },
	{ "net-dns", required_argument, 0, OPT_NET_DNS },
	{ "net-deny-all", no_argument, 0, OPT_NET_DENY },
	{ "net-ingress", required_argument, 0, OPT_NET_INGRESS },
	{ "net-mac", required_argument, 0, OPT_NET_MAC },
	{ "net-mtu", required_argument, 0, OPT_NET_MTU },
	{ "net-ip", required_argument, 0, OPT_NET_IP },
	{ "net-gw", required_argument, 0, OPT_NET_GW },
	{ "net-no-offload", no_argument, 0, OPT_NET_NO_OFFLOAD },
	{ "snapshot", required_argument, 0, OPT_SNAPSHOT },
	{ "out", required_argument, 0, OPT_OUT },
	{ "diff-from", required_argument, 0, OPT_DIFF_FROM },
	{ "env-file", required_argument, 0, OPT_JOB },
	{ "no-snapshot", no_argument, 0, OPT_NO_SNAPSHOT },
	{ "die-with-parent", no_argument, 0, OPT_DIE_WITH_PARENT },
	{ "cpu-quota", required_argument, 0, OPT_CPU_QUOTA },
	{ "cpuset", required_argument, 0, OPT_CPUSET },
	{ "mem-allowance", required_argument, 0, OPT_MEM_ALLOWANCE },
	{ "pids-max", required_argument, 0, OPT_PIDS_MAX },
	{ "cgroup-parent", required_argument, 0, OPT_CGROUP_PARENT },
	{ "no-cgroup", no_argument, 0, OPT_NO_CGROUP },
	{ "jail", no_argument, 0, OPT_JAIL },
	{ "jail-dir", required_argument, 0, OPT_JAIL_DIR },
	{ "jail-uid", required_argument, 0, OPT_JAIL_UID },
	{ "jail-gid", required_argument, 0, OPT_JAIL_GID },
	{ "netns", required_argument, 0, OPT_NETNS },
	{ "seccomp", required_argument, 0, OPT_SECCOMP },
	{ "no-seccomp", no_argument, 0, OPT_NO_SECCOMP },
	{ "no-inplace-drives", no_argument, 0, OPT_NO_INPLACE },
	{ "disk-size", required_argument, 0, OPT_DISK_SIZE },
	{ "idle-timeout", required_argument, 0, OPT_IDLE_TIMEOUT },
	{ "pause-to", required_argument, 0, OPT_PAUSE_TO },
	{ 0, 0, 0, 0 },
};

/* An output of ours (--json-out FILE, --metrics FILE, snapshot create's
 * --out DIR) can be written at the end: said now, not after the run. A
 * file: not a directory (an existing file that is not regular, such as
 * /dev/stdout, is written in place), its folder there and writable; a
 * directory: not another kind of file, itself (when there) or its folder
 * writable. 0, or -1 with one line said. */
static int out_path_ok(const char *flag, const char *path, bool dir)
{
	char parent[PATH_MAX] = "";
	const char *where = parent;
	struct stat st;
	int r = 0;

	if (!*path) {
		fprintf(stderr, "tinyvmm: %s: no %s named\n", flag, dir ? "directory" : "file");
		return -1;
	}
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode) != dir) {
			fprintf(stderr, "tinyvmm: %s %s: %s\n", flag, path,
				dir ? "exists and is not a directory" : "a directory, not a file");
			return -1;
		}
		if (!dir && !S_ISREG(st.st_mode))
			return 0;
		if (dir)
			where = path;
	}
	if (where == parent)
		r = path_parent(path, parent, sizeof(parent));
	if (!r && access(where, W_OK | X_OK) < 0)
		r = -errno;
	if (r) {
		fprintf(stderr, "tinyvmm: %s %s: %s%s%s: %s\n", flag, path, where == path ? "" : "its folder",
			where == path || !*parent ? "" : " ", where == path ? "" : parent, strerror(-r));
		return -1;
	}
	return 0;
}

/* What exec takes: the VM's socket, the job and its report. */
static bool exec_option(int o)
{
	switch (o) {
	case OPT_VSOCK_UDS:
	case OPT_JOB:
	case OPT_STDIN:
	case OPT_JSON:
	case OPT_JSON_OUT:
	case OPT_ID:
	case OPT_ENCODING:
	case OPT_CAP:
	case OPT_HELP:
	case OPT_SECCOMP:
	case OPT_NO_SECCOMP: return true;
	default: return false;
	}
}

/* The option getopt_long just refused: a short one by its letter (it may
 * sit in a group like -ix), else the argument itself ("--bogus"). */
static const char *bad_option(char **argv)
{
	static char shortopt[3];
	const char *last = optind > 0 ? argv[optind - 1] : NULL;

	/* A long option's optopt is its code (OPT_*, some of them
	 * printable): it is named as given ("--pause-to", not "-6"). */
	if (last && !strncmp(last, "--", 2) && last[2])
		return last;
	if (optopt > ' ' && optopt < 127) {
		snprintf(shortopt, sizeof(shortopt), "-%c", optopt);
		return shortopt;
	}
	return argv[optind - 1];
}

/* The options the --json report reads from argv itself (cli_report.c,
 * before this parser runs) must be spelled in full: getopt_long takes
 * "--json-o FILE" for --json-out, which the report would not see (no
 * object at all, or a utf8 one for "--output-enc base64"). */
static int spelled_out(int o, int idx, char **argv)
{
	const char *name, *arg;
	size_t n;

	/* idx is getopt_long's only for a long option it found. */
	if (o != OPT_JSON && o != OPT_JSON_OUT && o != OPT_ID && o != OPT_ENCODING && o != OPT_CAP)
		return 1;
	name = opts[idx].name;
	n = strlen(name);
	arg = opts[idx].has_arg == required_argument && optarg == argv[optind - 1] ? argv[optind - 2]
										   : argv[optind - 1];
	if (!strncmp(arg, "--", 2) && !strncmp(arg + 2, name, n) && (!arg[2 + n] || arg[2 + n] == '='))
		return 1;
	fprintf(stderr, "tinyvmm: %.*s: give the option's full name --%s\n", (int)strcspn(arg, "="), arg, name);
	return 0;
}

/* --cpu-quota CPUS: a decimal number of cores with at most 3 decimals
 * (0.5, 2, 1.25) into thousandths of a core; its range is the library's
 * to check. */
static int parse_quota(const char *s, uint32_t *mcpu)
{
	uint64_t v = 0, scale = 1000;
	const char *p = s;

	while (*p >= '0' && *p <= '9' && v <= UINT32_MAX)
		v = v * 10 + (uint64_t)(*p++ - '0');
	v *= 1000;
	if (p != s && *p == '.' && p[1])
		for (p++; *p >= '0' && *p <= '9' && scale > 1; p++)
			v += (uint64_t)(*p - '0') * (scale /= 10);
	if (p == s || *p || !v || v > UINT32_MAX) {
		fprintf(stderr,
			"tinyvmm: --cpu-quota: '%s' is not a number of CPUs like 0.5 or 2 (at most 3 decimals)\n", s);
		return -1;
	}
	*mcpu = (uint32_t)v;
	return 0;
}

int cli_parse_args(int argc, char **argv, struct cli_args *a)
{
	int o, idx = 0;

	optind = 1;
	/* '+': stop at the first non-option, so CMD's own flags stay its. */
	/* ':' first: a missing value is reported apart, and by us (opterr = 0):
	 * one line naming the option, not getopt's "run: ..." and the usage. */
	opterr = 0;
	while ((o = getopt_long(argc, argv, "+:e:i", opts, &idx)) != -1) {
		if (o == OPT_KERNEL || o == OPT_INITRD || o == OPT_CMDLINE || o == OPT_CMDLINE_APPEND || o == OPT_MEM ||
		    o == OPT_CPUS || o == OPT_VSOCK_CID || o == OPT_QUIRKS || o == OPT_DISK_SIZE)
			a->boot_only = opts[idx].name;
		if (!spelled_out(o, idx, argv))
			return EXIT_USAGE;
		/* exec runs a job in a VM another run started: its VM options
		 * would be taken and ignored (--jail is said below). */
		if (!strcmp(argv[0], "exec") && o >= OPT_KERNEL && o <= OPT_PAUSE_TO && o != OPT_JAIL &&
		    !exec_option(o)) {
			fprintf(stderr, "tinyvmm: --%s: exec runs no VM (give it to the `run` that started it)\n",
				opts[idx].name);
			return EXIT_USAGE;
		}
		switch (o) {
		case OPT_KERNEL: a->c.kernel_path = optarg; break;
		case OPT_INITRD: a->c.initrd_path = optarg; break;
		case OPT_CMDLINE:
			a->c.cmdline = optarg;
			a->user_cmdline = 1;
			break;
		case OPT_CMDLINE_APPEND: a->c.cmdline_append = optarg; break;
		case OPT_MEM:
			if (cli_parse_u32("--mem", optarg, &a->c.mem_mib))
				return EXIT_USAGE;
			break;
		case OPT_CPUS:
			if (cli_parse_u32("--cpus", optarg, &a->c.cpus))
				return EXIT_USAGE;
			break;
		case OPT_VSOCK_CID:
			if (cli_parse_u32("--vsock-cid", optarg, &a->c.vsock_cid))
				return EXIT_USAGE;
			break;
		case OPT_CAP:
			if (cli_parse_u32("--output-cap", optarg, &a->job.output_cap))
				return EXIT_USAGE;
			break;
		case OPT_TTL:
			if (cli_job_seconds("ttl", optarg, &a->c.ttl_ms))
				return EXIT_USAGE;
			break;
		case OPT_IDLE_TIMEOUT:
			if (cli_job_seconds("idle-timeout", optarg, &a->c.idle_ms))
				return EXIT_USAGE;
			break;
		case OPT_VSOCK_UDS: a->c.vsock_uds = optarg; break;
		case OPT_NET:
			if (cli_parse_net(optarg, &a->c.net))
				return EXIT_USAGE;
			break;
		case OPT_NET_ALLOW:
			if (a->c.net.nr_allow == TVM_MAX_NET_RULES) {
				fprintf(stderr, "tinyvmm: --net-allow: at most %d rules\n", TVM_MAX_NET_RULES);
				return EXIT_USAGE;
			}
			a->c.net.allow[a->c.net.nr_allow++] = optarg;
			break;
		case OPT_NET_DNS:
			if (a->c.net.nr_dns == TVM_MAX_NET_DNS) {
				fprintf(stderr, "tinyvmm: --net-dns: at most %d resolvers\n", TVM_MAX_NET_DNS);
				return EXIT_USAGE;
			}
			a->c.net.dns[a->c.net.nr_dns++] = optarg;
			break;
		case OPT_NET_DENY: a->c.net.deny_all = 1; break;
		case OPT_NET_INGRESS:
			if (strcmp(optarg, "replies") && strcmp(optarg, "all")) {
				fprintf(stderr, "tinyvmm: --net-ingress: '%s' is not replies or all\n", optarg);
				return EXIT_USAGE;
			}
			a->c.net.ingress_replies = !strcmp(optarg, "replies");
			break;
		case OPT_NET_NO_OFFLOAD: a->c.net.no_offload = 1; break;
		case OPT_NET_MAC: a->c.net.mac = optarg; break;
		case OPT_NET_IP: a->c.net.guest_ip = optarg; break;
		case OPT_NET_GW: a->c.net.guest_gw = optarg; break;
		case OPT_NET_MTU:
			if (cli_parse_u32("--net-mtu", optarg, &a->c.net.mtu))
				return EXIT_USAGE;
			break;
		case OPT_SERIAL: a->serial_out = optarg; break;
		case OPT_SNAPSHOT: a->snapshot = optarg; break;
		case OPT_OUT:
			if (out_path_ok("--out", optarg, true))
				return EXIT_USAGE;
			a->out = optarg;
			break;
		case OPT_PAUSE_TO: a->pause_to = optarg; break;
		case OPT_DIFF_FROM: a->diff_from = optarg; break;
		case OPT_NO_SNAPSHOT: a->no_snapshot = 1; break;
		case OPT_DISK_SIZE:
			if (cli_parse_size("--disk-size", optarg, &a->disk_size))
				return EXIT_USAGE;
			if (!a->disk_size || a->disk_size % 512) {
				fprintf(stderr, "tinyvmm: --disk-size %s: not a positive multiple of 512 bytes\n",
					optarg);
				return EXIT_USAGE;
			}
			/* The overlay may hold all of it (host disk), and its
			 * block map costs size / 32768 bytes of VMM memory. */
			if (a->disk_size > MAX_DISK_SIZE) {
				fprintf(stderr, "tinyvmm: --disk-size %s: more than %lluG\n", optarg,
					MAX_DISK_SIZE >> 30);
				return EXIT_USAGE;
			}
			break;
		case OPT_DIE_WITH_PARENT: a->die_with_parent = 1; break;
		case OPT_NO_CGROUP: a->no_cgroup = 1; break;
		case OPT_JAIL: a->jail = 1; break;
		case OPT_JAIL_DIR:
			if (cli_jail_dir_check(optarg))
				return EXIT_USAGE;
			a->jail_opts.dir = optarg;
			a->jail_flag = opts[idx].name;
			break;
		case OPT_NETNS:
			a->jail_opts.netns = optarg;
			a->jail_flag = opts[idx].name;
			break;
		case OPT_JAIL_UID:
		case OPT_JAIL_GID: {
			uint32_t *id = o == OPT_JAIL_UID ? &a->jail_opts.uid : &a->jail_opts.gid;

			if (cli_parse_u32(o == OPT_JAIL_UID ? "--jail-uid" : "--jail-gid", optarg, id))
				return EXIT_USAGE;
			if (!*id) {
				fprintf(stderr, "tinyvmm: --%s 0: the jail never keeps root's ids\n", opts[idx].name);
				return EXIT_USAGE;
			}
			a->jail_flag = opts[idx].name;
			break;
		}
		case OPT_CPU_QUOTA:
			if (parse_quota(optarg, &a->c.cgroup.cpu_quota_mcpu))
				return EXIT_USAGE;
			a->cgroup_flag = opts[idx].name;
			break;
		case OPT_CPUSET:
			a->c.cgroup.cpuset = optarg;
			a->cgroup_flag = opts[idx].name;
			break;
		case OPT_CGROUP_PARENT:
			a->c.cgroup.parent = optarg;
			a->cgroup_flag = opts[idx].name;
			break;
		case OPT_MEM_ALLOWANCE:
		case OPT_PIDS_MAX:
			if (cli_parse_u32(o == OPT_PIDS_MAX ? "--pids-max" : "--mem-allowance", optarg,
					  o == OPT_PIDS_MAX ? &a->c.cgroup.pids_max : &a->c.cgroup.mem_allowance_mib))
				return EXIT_USAGE;
			a->cgroup_flag = opts[idx].name;
			break;
		case OPT_NO_SECCOMP: a->c.seccomp = TVM_SECCOMP_OFF; break;
		case OPT_NO_INPLACE: a->no_inplace = a->c.no_inplace_drives = 1; break;
		case OPT_SECCOMP:
			if (!strcmp(optarg, "kill"))
				a->c.seccomp = TVM_SECCOMP_KILL;
			else if (!strcmp(optarg, "log"))
				a->c.seccomp = TVM_SECCOMP_LOG;
			else if (!strcmp(optarg, "off"))
				a->c.seccomp = TVM_SECCOMP_OFF;
			else {
				fprintf(stderr, "tinyvmm: --seccomp: '%s' is not kill, log or off\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_METRICS:
			if (out_path_ok("--metrics", optarg, false))
				return EXIT_USAGE;
			a->metrics = optarg;
			break;
		case OPT_CONSOLE: a->console = 1; break;
		case OPT_STDIN:
		case 'i': a->job.forward_stdin = 1; break;
		case OPT_JSON: a->json = "--json"; break;
		case OPT_JSON_OUT:
			if (out_path_ok("--json-out", optarg, false)) {
				cli_report_json_out_refused(a->job.report);
				return EXIT_USAGE;
			}
			a->json = "--json-out";
			break;
		case OPT_ID:
			if (!*optarg || strlen(optarg) > 128) {
				fprintf(stderr, "tinyvmm: --id: '%s' is not 1 to 128 characters\n", optarg);
				return EXIT_USAGE;
			}
			break; /* read by the report (cli_report.c) */
		case OPT_ENCODING:
			if (strcmp(optarg, "utf8") && strcmp(optarg, "base64")) {
				fprintf(stderr, "tinyvmm: --output-encoding: '%s' is not utf8 or base64\n", optarg);
				return EXIT_USAGE;
			}
			break; /* read by the report (cli_report.c) */
		case 'e':
			if (cli_job_option(&a->job, "env", optarg) < 0)
				return EXIT_USAGE;
			break;
		case OPT_JOB:
			if (cli_job_option(&a->job, opts[idx].name, optarg) < 0)
				return EXIT_USAGE;
			break;
		case OPT_QUIRKS:
			if (!strcmp(optarg, "auto"))
				a->c.quirks = TVM_QUIRKS_AUTO;
			else if (!strcmp(optarg, "on"))
				a->c.quirks = TVM_QUIRKS_ON;
			else if (!strcmp(optarg, "off"))
				a->c.quirks = TVM_QUIRKS_OFF;
			else {
				fprintf(stderr, "tinyvmm: --quirks: '%s' is not auto, on or off\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_ROOTFS:
			if (a->have_root) {
				fprintf(stderr, "tinyvmm: --rootfs given twice\n");
				return EXIT_USAGE;
			}
			if (cli_parse_drive("--rootfs", optarg, &a->root, 1))
				return EXIT_USAGE;
			a->have_root = 1;
			break;
		case OPT_DRIVE:
			if (a->nr_drives + 1 >= TVM_MAX_DRIVES) {
				fprintf(stderr, "tinyvmm: --drive: at most %d drives\n", TVM_MAX_DRIVES - 1);
				return EXIT_USAGE;
			}
			if (cli_parse_drive("--drive", optarg, &a->drives[a->nr_drives], 0))
				return EXIT_USAGE;
			a->nr_drives++;
			break;
		case OPT_HELP: (!strcmp(argv[0], "exec") ? cli_usage_exec : cli_usage)(stdout); return -1;
		case ':': fprintf(stderr, "tinyvmm: %s needs a value\n", bad_option(argv)); return EXIT_USAGE;
		default:
			fprintf(stderr, "tinyvmm: unknown option %s (see tinyvmm --help)\n", bad_option(argv));
			return EXIT_USAGE;
		}
	}
	if (!a->c.net.enabled &&
	    (a->c.net.nr_allow || a->c.net.nr_dns || a->c.net.deny_all || a->c.net.mac || a->c.net.mtu ||
	     a->c.net.guest_ip || a->c.net.guest_gw || a->c.net.no_offload || a->c.net.ingress_replies)) {
		/* Without --net the VM has no network at all: a policy or
		 * address for it would be silently meaningless. */
		fprintf(stderr, "tinyvmm: --net-* options need --net TAP|auto (without it the VM has no network)\n");
		return EXIT_USAGE;
	}
	if (!a->jail && a->jail_flag) {
		fprintf(stderr, "tinyvmm: --%s needs --jail\n", a->jail_flag);
		return EXIT_USAGE;
	}
	if (a->no_cgroup && a->cgroup_flag) {
		fprintf(stderr, "tinyvmm: --%s needs a cgroup, --no-cgroup says none\n", a->cgroup_flag);
		return EXIT_USAGE;
	}
	if (optind < argc && strcmp(argv[optind - 1], "--")) {
		fprintf(stderr, "tinyvmm: unexpected argument '%s' (put the command after --)\n", argv[optind]);
		return EXIT_USAGE;
	}
	a->job.argv = optind < argc ? argv + optind : NULL;
	if (a->json && (!a->job.argv || !strcmp(argv[0], "create"))) {
		/* One object per job: a console VM or a snapshot has none. */
		fprintf(stderr, "tinyvmm: %s reports a job of run or exec: %s\n", a->json,
			!strcmp(argv[0], "create") ? "snapshot create has none" : "give -- CMD");
		return EXIT_USAGE;
	}
	return 0;
}

/* The root drive's size: --disk-size, or for the default base image
 * DEFAULT_DISK_SIZE (room for `pip install`); the agent grows the image's
 * file system into it at boot. Only a copy-on-write drive can be larger
 * than its image; a restore keeps the snapshot's size. Returns 0 or -1
 * after saying why. */
static int disk_size(struct cli_args *a)
{
	struct stat st;
	uint64_t want = a->disk_size;

	if (!want && (!a->default_root || a->snapshot))
		return 0;
	if (stat(a->root.path, &st) < 0) {
		if (!want)
			return 0; /* said when the drive is opened */
		fprintf(stderr, "tinyvmm: --disk-size: root drive %s: %s\n", a->root.path, strerror(errno));
		return -1;
	}
	if (!want) {
		a->root.size = (uint64_t)st.st_size < DEFAULT_DISK_SIZE ? DEFAULT_DISK_SIZE : 0;
		return 0;
	}
	if (!a->root.cow || a->root.read_only) {
		fprintf(stderr,
			"tinyvmm: --disk-size: the root drive %s is not copy-on-write (only an overlay can "
			"be larger than its image)\n",
			a->root.path);
		return -1;
	}
	if (want < (uint64_t)st.st_size) {
		fprintf(stderr, "tinyvmm: --disk-size %llu bytes: smaller than the root image %s (%llu bytes)\n",
			(unsigned long long)want, a->root.path, (unsigned long long)st.st_size);
		return -1;
	}
	a->root.size = want;
	return 0;
}

int cli_setup_vm(int argc, char **argv, uint64_t t0_ns, struct cli_args *a, int create)
{
	int r;

	tvm_config_init(&a->c);
	a->c.seccomp = TVM_SECCOMP_KILL;          /* one VM per process: the hardened form (vmm/tinyvmm.h) */
	a->c.serial_out_fd = 1;                   /* the console is ours to show (the library's default is none) */
	a->job.uid = a->job.gid = TVM_ID_DEFAULT; /* jobs run unprivileged unless asked */
	a->c.t0_ns = t0_ns;
	r = cli_parse_args(argc, argv, a);
	if (!r)
		cli_report_stage(a->job.report, CLI_ST_SETUP);
	/* A cgroup when the host allows one; required once a limit is asked. */
	a->c.cgroup.mode = a->no_cgroup ? TVM_CGROUP_OFF : a->cgroup_flag ? TVM_CGROUP_ON : TVM_CGROUP_AUTO;
	if (!r)
		r = cli_job_check_puts(&a->job);
	if (!r && a->cgroup_flag) {
		/* Before a template snapshot is made with them: one line, once. */
		struct cg_limits l = { .cpu_quota_mcpu = a->c.cgroup.cpu_quota_mcpu, .cpuset = a->c.cgroup.cpuset };
		struct tvm_err e = { 0 };

		if (cg_check(a->c.cgroup.parent ? a->c.cgroup.parent : "tinyvmm", &l, &e)) {
			fprintf(stderr, "tinyvmm: %s\n", e.msg);
			r = EXIT_VM_FAILED;
		}
	}
	if (r)
		return r;
	if (a->diff_from) {
		/* A diff is taken of a VM restored from its base. */
		if (!create || a->snapshot) {
			fprintf(stderr, "tinyvmm: %s\n",
				create ? "--diff-from DIR is the snapshot restored (no --snapshot)"
				       : "--diff-from belongs to `tinyvmm snapshot create`");
			return EXIT_USAGE;
		}
		a->snapshot = a->diff_from;
	}
	r = cli_guest_defaults(a);
	if (r)
		return r;
	if (a->snapshot && a->boot_only) {
		fprintf(stderr,
			"tinyvmm: --%s: a restore takes kernel, command line, memory, vCPUs, vsock CID and "
			"quirks from the snapshot\n",
			a->boot_only);
		return EXIT_USAGE;
	}
	if (!a->out != !create || (create && a->snapshot && !a->diff_from)) {
		fprintf(stderr, "tinyvmm: %s\n",
			create ? "snapshot create needs --out DIR and boots (no --snapshot; --diff-from DIR restores)"
			       : "--out belongs to `tinyvmm snapshot create`");
		return EXIT_USAGE;
	}
	if (a->pause_to && (create || a->job.argv || !a->c.vsock_uds)) {
		fprintf(stderr, "tinyvmm: --pause-to belongs to `tinyvmm run --vsock-uds PATH` without a command "
				"(a VM that waits for execs)\n");
		return EXIT_USAGE;
	}
	if (a->have_root && disk_size(a))
		return EXIT_USAGE;
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
		cli_term_raw();
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
