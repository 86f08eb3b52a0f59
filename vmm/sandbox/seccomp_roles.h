/* The allow-lists behind vmm/sandbox/seccomp.h: each role is a few sets
 * of rules, some only for a VM with a feature (SC_F_*). Shared by the
 * compiler (seccomp.c) and the tables (seccomp_roles.c) only. */
#ifndef TVM_SECCOMP_ROLES_H
#define TVM_SECCOMP_ROLES_H

#include "vmm/sandbox/seccomp.h"

#define SC_MAX_SETS 12

struct sc_set {
	const struct sc_rule *rules;
	unsigned n;
	unsigned needs; /* SC_F_* the VM must have for this set to apply; 0: always */
};

struct sc_role_def {
	const char *name;
	struct sc_set sets[SC_MAX_SETS]; /* in test order (hot calls first); ends at rules == NULL */
};

extern const struct sc_role_def sc_role_defs[SC_ROLE_COUNT];

#endif
