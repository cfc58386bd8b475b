/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The CUnit main of the scheduler's unit test programs. */
#ifndef SV_TEST_CU_RUN_H
#define SV_TEST_CU_RUN_H

#include <stddef.h>

/* One CUnit test of a test program's table. */
struct fk_cu_test {
	const char *name;
	void (*fn)(void);
};

/* Run the tests as CUnit suite `suite` (verbose); 1 if any failed. */
int fk_cu_run(const char *suite, const struct fk_cu_test *t, size_t n);

#endif /* SV_TEST_CU_RUN_H */
