/* Deep copy of a struct tvm_config's strings into one allocation, so a VM
 * can keep its config (a snapshot writes it) whatever the caller does with
 * its own strings afterwards. */
#ifndef TVM_CONFIG_COPY_H
#define TVM_CONFIG_COPY_H

#include "vmm/tinyvmm.h"

/* *dst = *src with every string pointing into *arena (malloc'd, caller
 * frees; NULL strings stay NULL). Returns 0 or -ENOMEM. */
int config_copy(struct tvm_config *dst, const struct tvm_config *src, char **arena);

#endif
