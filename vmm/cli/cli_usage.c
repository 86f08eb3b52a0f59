/* The usage text: `tinyvmm --help`, and on stderr without a command. */
#include "vmm/cli/cli.h"

/* One "Usage:" line and "or:" lines, each whole on its line: the form
 * help2man turns into the man page's SYNOPSIS. */
static const char usage_head[] =
	"Usage: tinyvmm run [VM options] [job options] [-- CMD ARGS...]\n"
	"  or:  tinyvmm run --snapshot DIR [restore options] [job options] [-- CMD ARGS...]\n"
	"  or:  tinyvmm snapshot create --out DIR [VM options] [-- WARMUP CMD...]\n"
	"  or:  tinyvmm snapshot create --diff-from BASE --out DIR [restore options] [-- CMD...]\n"
	"  or:  tinyvmm exec --vsock-uds PATH [job options] -- CMD ARGS...\n"
	"  or:  tinyvmm serve [--socket PATH] [--state-dir DIR] [--config FILE] ...\n"
	"  or:  tinyvmm image build --out FILE [--packages a,b] [--pip x,y] [--npm z] [--copy L:G]...\n"
	"  or:  tinyvmm host\n"
	"  or:  tinyvmm gc [--jail-dir DIR]\n"
	"  or:  tinyvmm --version\n"
	"Without CMD, `run` boots the guest and shows its console until it ends.\n"
	"With CMD, the guest's agent runs it: its output is ours, its exit status ours.\n"
	"Without --kernel and --rootfs, the kernel and base image next to tinyvmm are used\n"
	"(build/guest in a build tree, ../share/tinyvmm when installed, or $TINYVMM_DATA_DIR),\n"
	"and a job (or a VM given --vsock-uds, for `exec`) is restored from a template\n"
	"snapshot of them, made on first use and cached in $TINYVMM_CACHE/templates\n"
	"(default /var/tmp/tinyvmm-cache).\n"
	"\n"
	"restore options: --rootfs/--drive, --vsock-uds, --serial-out, --metrics, --ttl,\n"
	"--console, --net NAME|auto, --net-allow/--net-dns/--net-deny-all, --net-ingress.\n"
	"serve: the sandbox service, an HTTP/JSON API on a Unix socket (tinyvmm serve --help).\n"
	"image build: the base image with packages and files added (tinyvmm image build --help).\n"
	"host: print the host quirks, the default guest command line and the cgroup\n"
	"controllers a VM would use. gc: remove jails whose tinyvmm process is gone.\n";

/* printf format: the default command line, the seccomp exit status, the
 * memory allowance, the pids base. */
static const char vm_options[] =
	"\n"
	"VM options:\n"
	"  --kernel PATH          ELF vmlinux or bzImage (default: the built or installed one)\n"
	"  --initrd PATH          initramfs (cpio, optionally gzip'd)\n"
	"  --cmdline STR          guest command line (default: \"%s\")\n"
	"  --cmdline-append STR   words added after the command line\n"
	"  --mem MIB              guest RAM in MiB (default 256)\n"
	"  --cpus N               vCPUs (default 1)\n"
	"  --rootfs SPEC          root file system drive (/dev/vda), copy-on-write by default\n"
	"                         (default with a job: the built or installed base image)\n"
	"  --disk-size SIZE       the copy-on-write root drive is SIZE bytes (K, M, G suffixes),\n"
	"                         larger than its image; the guest grows / into it at boot and\n"
	"                         host disk is used only for what it writes (default 2G for the\n"
	"                         base image, else the image's size)\n"
	"  --drive SPEC           another virtio-blk drive (/dev/vdb, ...), writable by default.\n"
	"                         SPEC: [path=]FILE[,ro][,rw][,cow][,overlay=FILE]\n"
	"                         [,overlay-limit=MIB][,id=SERIAL][,bw=BYTES/S][,iops=N].\n"
	"                         cow: FILE is never written; guest writes go to a private\n"
	"                         overlay, discarded at exit unless overlay=FILE (a new file)\n"
	"                         keeps it; the overlay holds at most the drive's size, or\n"
	"                         overlay-limit (then writes past it fail: EIO in the guest).\n"
	"                         bw, iops: rate limit of the drive's data bytes and requests\n"
	"                         per second (K, M, G suffixes: 2^10, 2^20, 2^30; bursts of up\n"
	"                         to a second's worth)\n"
	"  --serial-out FILE      write the guest console to FILE instead of stdout\n"
	"  --metrics FILE         write boot timestamps, exit counts and network counters as JSON\n"
	"                         when a VM that was made ends\n"
	"  --quirks auto|on|off   nested kvm_pvm host workarounds (default auto)\n"
	"  --vsock-cid N          guest CID of the vsock device (default 3; 0: no device)\n"
	"  --vsock-uds PATH       Firecracker-style hybrid vsock socket\n"
	"  --ttl SECONDS          stop the VM this long after it started, whatever happens (0: never)\n"
	"  --idle-timeout SECONDS\n"
	"                         stop the VM (exit 0) once no vsock connection (an exec, the agent's\n"
	"                         client) has been open this long: a VM left by a dead backend (0: never)\n"
	"  --pause-to DIR         with --vsock-uds: on SIGUSR1 save the VM into DIR (a snapshot;\n"
	"                         --snapshot DIR resumes it, files and processes as they were) and\n"
	"                         end (exit 0)\n"
	"  --net [tap=]NAME|auto[,OPTIONS]\n"
	"                         OPTIONS: mac=MAC, mtu=BYTES, rx-bw=BYTES/S, tx-bw=BYTES/S,\n"
	"                         rx-pps=N, tx-pps=N (comma-separated).\n"
	"                         virtio-net on the TAP NAME (created if missing) or on a new\n"
	"                         one (auto); no network at all without it; rx/tx rate limits\n"
	"                         of frame bytes and frames per second, as bw= of a drive\n"
	"  --net-allow RULE       egress allow-list entry CIDR[:PORT[/tcp|udp]] (repeatable;\n"
	"                         IPv6 with a port: [2001:db8::/32]:443); everything else dropped\n"
	"  --net-dns ADDR         allow DNS to this resolver (alone: deny all but DNS)\n"
	"  --net-deny-all         an allow-list even without rules (then only ARP/ND pass);\n"
	"                         without any of these three, egress is unrestricted\n"
	"  --net-ingress replies|all  replies: a TAP frame reaches the guest only as a reply\n"
	"                         to its own traffic (no connection into it, UDP only from where\n"
	"                         it sent, no ping; ARP, neighbour discovery, ICMP errors pass);\n"
	"                         all (default): every frame\n"
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
	"  --diff-from BASE       snapshot create: restore BASE (a full snapshot) instead of\n"
	"                         booting, run the command if given, and save into DIR a diff:\n"
	"                         only the memory pages changed since; restoring DIR needs BASE\n"
	"                         unchanged and in place (no diff of a diff)\n"
	"  --no-snapshot          boot cold instead of restoring the template snapshot\n"
	"  --die-with-parent      stop the VM when the process that started tinyvmm ends\n"
	"  --no-inplace-drives    refuse a drive (one --snapshot names too) that would write its\n"
	"                         host file in place: each copy-on-write or read-only\n"
	"  --seccomp kill|log|off\n"
	"                         every thread of tinyvmm confined to the system calls its role\n"
	"                         makes (default kill: any other kills the process); log: one\n"
	"                         line naming the thread and the call, then exit status %d\n"
	"  --no-seccomp           the same as --seccomp off (debugging only)\n"
	"  --jail                 run the VMM jailed (needs root): own mount/PID/IPC/UTS namespaces,\n"
	"                         only the VM's files, uid/gid 64100, no capabilities, Landlock\n"
	"  --jail-dir DIR         where jails are made (default /run/tinyvmm/jail)\n"
	"  --jail-uid N, --jail-gid N  the jailed VMM's ids (default 64100)\n"
	"  --netns PATH           jailed: join this network namespace (e.g. /run/netns/NAME)\n"
	"  --cpu-quota CPUS       host CPU time of the VM, in cores (0.5: half of one, 2: two)\n"
	"  --cpuset LIST          host CPUs the VM may run on (e.g. 0-1,3)\n"
	"  --mem-allowance MIB    host memory limit = --mem + this (default %d): the VMM's share\n"
	"  --pids-max N           threads the VMM may have (default %d + vCPUs)\n"
	"  --cgroup-parent PATH   the VM's cgroup is PATH/PID below tinyvmm's own cgroup, or below\n"
	"                         the hierarchy's root when PATH starts with / (default tinyvmm)\n"
	"  --no-cgroup            no cgroup. By default one is made when the host allows it (cgroup\n"
	"                         v2 or v1), holding the memory and thread limits; any of the five\n"
	"                         options above requires one\n";

static const char job_options[] =
	"\n"
	"job options:\n"
	"  -e, --env NAME=VALUE   environment for the job (repeatable); -e NAME takes our value\n"
	"  --env-file FILE        NAME=VALUE or NAME lines (# comments), as -e\n"
	"  --workdir DIR          working directory in the guest\n"
	"  --timeout SECONDS      kill the job's process group after this long (0: no timeout); a guest\n"
	"                         that does not answer is given up 5 s + 10% later (run then stops the VM)\n"
	"  --job-mem SIZE         memory of the job's own cgroup in the guest (K, M, G); past it the\n"
	"                         guest kernel kills a process of the job (oom_killed)\n"
	"  --job-pids N           processes and threads of the job at once (pids_limited when a\n"
	"                         fork fails at it)\n"
	"  --put LOCAL:GUEST      copy a file into the guest before the job (repeatable)\n"
	"  --get GUEST:LOCAL      copy a file out of the guest after the job (repeatable)\n"
	"  -i, --stdin            read our stdin to EOF and give it to the job\n"
	"  --output-cap BYTES     output kept per stream (default 1 MiB)\n"
	"  --json                 print one JSON object instead of the output, on every exit\n"
	"                         path, failures included (its JSON Schema: run-result.schema.json,\n"
	"                         installed in ../share/tinyvmm)\n"
	"  --json-out FILE        the same object into FILE (written whole, then renamed)\n"
	"  --id ID                the object's id (default $SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID,\n"
	"                         else random)\n"
	"  --output-encoding E    utf8 (default; bytes that are not UTF-8 become U+FFFD) or base64\n";

/* The exit statuses: a status (a number, or its form), what it means,
 * whether only run gives it (exec runs no VM of its own). */
static const struct {
	int code; /* -1: the form says it */
	const char *form, *what;
	bool run_only;
} exit_statuses[] = {
	{ 0, NULL, "without CMD: the guest ended itself", true },
	{ -1, "CMD's", "with CMD: the job's (128+N when signal N killed it)", false },
	{ EXIT_TIMED_OUT, NULL, "the job timed out (--timeout), or the VM (--ttl)", false },
	{ EXIT_VM_FAILED, NULL, "tinyvmm failed (files, VM, KVM, agent, --put/--get)", false },
	{ EXIT_CANNOT_RUN, NULL, "the command could not run", false },
	{ EXIT_NOT_FOUND, NULL, "the command was not found", false },
	{ EXIT_USAGE, NULL, "a wrong command line", false },
	{ -1, "128+N", "tinyvmm was stopped by signal N", false },
	{ TVM_SECCOMP_EXIT, NULL,
	  "a system call the seccomp filter forbids (--seccomp log;\n"
	  "                         with kill the shell shows the same)",
	  false },
	{ TVM_OOM_EXIT, NULL,
	  "with --jail: the VM went past its cgroup's memory limit (the\n"
	  "                         out-of-memory killer ended it)",
	  true },
};

static void print_exit_status(FILE *f, bool run)
{
	fputs("\nExit status:\n", f);
	for (size_t i = 0; i < sizeof(exit_statuses) / sizeof(exit_statuses[0]); i++) {
		char code[16];

		if (exit_statuses[i].run_only && !run)
			continue;
		if (exit_statuses[i].form)
			snprintf(code, sizeof(code), "%s", exit_statuses[i].form);
		else
			snprintf(code, sizeof(code), "%d", exit_statuses[i].code);
		fprintf(f, "  %-22s %s\n", code, exit_statuses[i].what);
	}
}

void cli_usage(FILE *f)
{
	fputs(usage_head, f);
	fprintf(f, vm_options, tvm_default_cmdline(), TVM_SECCOMP_EXIT, TVM_CGROUP_MEM_ALLOWANCE_MIB,
		TVM_CGROUP_PIDS_BASE);
	fputs(job_options, f);
	print_exit_status(f, true);
}

void cli_usage_exec(FILE *f)
{
	fputs("Usage: tinyvmm exec --vsock-uds PATH [job options] -- CMD ARGS...\n"
	      "Runs CMD in a VM another tinyvmm runs (`tinyvmm run --vsock-uds PATH`), through\n"
	      "its hybrid vsock socket, and waits up to 120 s for a booting VM's agent.\n"
	      "VM options are refused: give them to the run that started the VM.\n",
	      f);
	fputs(job_options, f);
	print_exit_status(f, false);
}

void cli_usage_host(FILE *f)
{
	fputs("Usage: tinyvmm host\n"
	      "Prints what a VM would get on this host: whether /dev/kvm is usable, the host\n"
	      "quirks, the default guest command line and the cgroup controllers.\n"
	      "Exit status: 0 when a VM can start here (/dev/kvm usable), 125 when not.\n",
	      f);
}
