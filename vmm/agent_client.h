/* What the library's own callers of the agent client (vm_agent.c) need
 * beyond vmm/tinyvmm.h. */
#ifndef TVM_AGENT_CLIENT_H
#define TVM_AGENT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/tinyvmm.h"

/* tvm_agent_connect_uds, also saying (no_vmm, may be NULL) whether the
 * socket itself refused or was missing: no VMM answers there (yet), as
 * opposed to the guest's refusal of the port. */
int agent_connect_uds(const char *uds_path, uint32_t port, int timeout_ms, struct tvm_agent **out, bool *no_vmm,
		      struct tvm_err *e);

#endif
