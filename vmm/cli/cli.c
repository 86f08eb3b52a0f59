/* The tinyvmm command: which subcommand runs (the parts are listed in
 * vmm/cli/cli.h), and `tinyvmm host`. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/cli/cli.h"
#include "vmm/core/clock.h"
#include "vmm/core/version.h"
#include "vmm/kvm/kvm.h"
#include "vmm/sandbox/cgroup.h"
#include "vmm/serve/serve.h"

/* What this host makes tinyvmm add to every guest (benchmarks give other
 * VMMs the same words). */
static int cmd_host(void)
{
	const char *q = tvm_quirk_cmdline(TVM_QUIRKS_AUTO);

	struct cg_host *h = malloc(sizeof(*h));
	static const char *const names[CG_NR_CTRL] = { "cpu", "memory", "pids", "cpuset" };

	/* what every VM needs first: said before the rest, and in the exit
	 * status (a readiness check needs no parsing) */
	int kvm = access("/dev/kvm", R_OK | W_OK) == 0 ? 0 : errno;

	if (kvm)
		printf("kvm: /dev/kvm: %s: no VM can start here%s\n", strerror(kvm), kvm_open_hint(kvm));
	else
		printf("kvm: /dev/kvm usable\n");
	printf("quirks: %s\ncmdline: %s%s%s\n", *q ? "kvm_pvm" : "none", tvm_default_cmdline(), *q ? " " : "", q);
	/* The hierarchies a VM's cgroup would use (vmm/sandbox/cgroup.h). */
	printf("cgroup:");
	for (unsigned i = 0; h && !cg_detect(NULL, h, NULL) && i < h->n; i++)
		for (int c = 0; c < CG_NR_CTRL; c++)
			if (h->h[i].ctrls & (1u << c))
				printf(" %s=v%d:%s%s", names[c], h->h[i].v2 ? 2 : 1, h->h[i].mnt, h->h[i].own);
	printf("%s\n", h && h->n ? "" : " none");
	free(h);
	return kvm ? EXIT_VM_FAILED : 0;
}

int main(int argc, char **argv)
{
	uint64_t t0 = clock_mono_ns();

	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cli_cmd_run(argc - 1, argv + 1, t0);
	if (argc >= 3 && !strcmp(argv[1], "snapshot") && !strcmp(argv[2], "create"))
		return cli_cmd_snapshot_create(argc - 2, argv + 2, t0);
	if (argc >= 3 && !strcmp(argv[1], "image") && !strcmp(argv[2], "build"))
		return cli_cmd_image_build(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "exec"))
		return cli_cmd_exec(argc - 1, argv + 1, t0);
	if (argc == 2 && !strcmp(argv[1], "host"))
		return cmd_host();
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "gc"))
		return cli_cmd_gc(argc - 1, argv + 1);
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("tinyvmm %s\n", TVM_VERSION);
		return 0;
	}
	/* --help after a command word that has no parser of its own: host's
	 * own, image's is image build's, snapshot's the usage (which covers
	 * snapshot create). */
	if (argc >= 2 && (!strcmp(argv[argc - 1], "--help") || !strcmp(argv[argc - 1], "-h")) &&
	    (argc == 2 ||
	     (argc == 3 && (!strcmp(argv[1], "host") || !strcmp(argv[1], "snapshot") || !strcmp(argv[1], "image"))))) {
		if (argc == 3 && !strcmp(argv[1], "image"))
			return cli_cmd_image_build(argc - 1, argv + 1);
		(argc == 3 && !strcmp(argv[1], "host") ? cli_usage_host : cli_usage)(stdout);
		return 0;
	}
	/* A known word used wrongly is said as such, not as unknown. */
	bool two = argc >= 2 && (!strcmp(argv[1], "snapshot") || !strcmp(argv[1], "image"));
	const char *sub = two && !strcmp(argv[1], "image") ? "build" : "create";

	if (two && argc == 2)
		fprintf(stderr, "tinyvmm: %s needs a subcommand: tinyvmm %s %s (see tinyvmm %s %s --help)\n", argv[1],
			argv[1], sub, argv[1], sub);
	else if (argc >= 3 && !strcmp(argv[1], "host"))
		fprintf(stderr, "tinyvmm: host takes no arguments (it prints what this host offers)\n");
	else if (argc >= 2)
		fprintf(stderr,
			"tinyvmm: unknown command '%s%s%s' (run, snapshot create, exec, serve, image build, host, gc, version; see tinyvmm --help)\n",
			argv[1], two ? " " : "", two ? argv[2] : "");
	else
		cli_usage(stderr);
	return EXIT_USAGE;
}
