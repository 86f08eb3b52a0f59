/* For tests that run code under a seccomp role: the child's side of a
 * fork that confines itself. */
#ifndef TINYVMM_TESTS_TEST_CONFINE_H
#define TINYVMM_TESTS_TEST_CONFINE_H

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "vmm/sandbox/seccomp.h"

/* In a forked child: no core file (a SIGSYS would write one), then the
 * filter of role (mode, log_fd); a refused filter ends the child with 2
 * and its one line on stderr. */
static inline void confine_child(enum sc_role role, unsigned features, enum tvm_seccomp mode, int log_fd)
{
	struct rlimit no_core = { 0, 0 };
	struct tvm_err e = { 0 };

	setrlimit(RLIMIT_CORE, &no_core);
	if (sc_confine(role, features, mode, log_fd, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		_exit(2);
	}
}

#endif
