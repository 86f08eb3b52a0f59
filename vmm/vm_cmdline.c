/* The guest kernel command line: the default, the host quirks' words, the
 * root device and the user's words; devices append theirs as they attach. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vmm/core/err.h"
#include "vmm/kvm/host_quirks.h"
#include "vmm/vm_impl.h"

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1"

const char *tvm_default_cmdline(void)
{
	return DEFAULT_CMDLINE;
}

const char *tvm_quirk_cmdline(enum tvm_quirks q)
{
	return vm_quirks_apply(q) ? host_quirks_cmdline() : "";
}

/* Append " word" to the guest command line. */
int vm_cmdline_add(struct tvm_vm *vm, const char *word, struct tvm_err *e)
{
	size_t used = strlen(vm->cmdline);
	int n;

	if (!*word)
		return 0;
	n = snprintf(vm->cmdline + used, sizeof(vm->cmdline) - used, "%s%s", used ? " " : "", word);
	if (n < 0 || (size_t)n >= sizeof(vm->cmdline) - used)
		return tvm_errf(e, E2BIG, "guest command line: longer than %zu bytes", sizeof(vm->cmdline) - 1);
	return 0;
}

/* Base line, quirk words, root device, then the user's additions last so
 * they win over ours. Device words are appended when devices attach. */
int vm_compose_cmdline(struct tvm_vm *vm, struct tvm_err *e)
{
	const struct tvm_config *c = &vm->cfg;
	int r = vm_cmdline_add(vm, c->cmdline ? c->cmdline : DEFAULT_CMDLINE, e);

	if (!r && vm->quirks)
		r = vm_cmdline_add(vm, host_quirks_cmdline(), e);
	if (!r && c->root_drive && c->nr_drives)
		r = vm_cmdline_add(vm,
				   c->drives[0].read_only ? "root=/dev/vda rootfstype=ext4 ro"
							  : "root=/dev/vda rootfstype=ext4 rw",
				   e);
	if (!r && c->cmdline_append)
		r = vm_cmdline_add(vm, c->cmdline_append, e);
	return r;
}
