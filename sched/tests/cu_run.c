// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <CUnit/Basic.h>

#include "cu_run.h"

int fk_cu_run(const char *suite, const struct fk_cu_test *t, size_t n)
{
	unsigned int fails;
	CU_pSuite s;
	size_t i;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite(suite, NULL, NULL);
	for (i = 0; i < n; i++)
		CU_add_test(s, t[i].name, t[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
