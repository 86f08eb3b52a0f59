/* Shared main() body for the check-based test programs. */
#ifndef TVM_TESTS_UNIT_H
#define TVM_TESTS_UNIT_H

#include <check.h>

/* Run every test case of s; returns the process exit status (0 = all passed). */
static inline int tvm_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}

#endif
