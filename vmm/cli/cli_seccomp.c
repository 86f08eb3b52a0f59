/* The tinyvmm binary confines its own threads too (the library's confine
 * themselves, cfg.seccomp): the signal waiter at once, the main thread
 * once every thread of its VM exists (vmm/sandbox/seccomp.h). */
#include "vmm/cli/cli.h"

int cli_confine(const struct tvm_config *c, enum sc_role role)
{
	struct tvm_err e = { 0 };

	/* Our log is stderr, whatever the VM's log fd. */
	if (sc_supported(c->seccomp, &e) || sc_confine(role, sc_features(c), c->seccomp, 2, &e)) {
		fprintf(stderr, "tinyvmm: %s (--no-seccomp runs without filters)\n", e.msg);
		return EXIT_VM_FAILED;
	}
	return 0;
}
