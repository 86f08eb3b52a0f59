/* Defaults of the public VM configuration (struct tvm_config). Kept in the
 * bottom layer because the snapshot layer rebuilds configurations too. */
#include <string.h>

#include "vmm/core/tvm_types.h"

void tvm_config_init(struct tvm_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mem_mib = 256;
	c->cpus = 1;
	c->serial_out_fd = -1; /* a library must not write to its host program's stdout */
	c->serial_in_fd = -1;
	c->log_fd = 2;
	c->quirks = TVM_QUIRKS_AUTO;
	c->vsock_cid = 3;
}
