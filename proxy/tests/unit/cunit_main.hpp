// Tiny glue: each test binary registers one or more CUnit suites and runs them.
#pragma once

#include <CUnit/Basic.h>

#include <cstdio>

struct CuTest {
    const char* name;
    void (*fn)();
};

template <size_t N>
int run_cunit_suite(const char* suite, const CuTest (&tests)[N]) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite(suite, nullptr, nullptr);
    if (!s) return 2;
    for (const auto& t : tests)
        if (!CU_add_test(s, t.name, t.fn)) return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run != N) {
        std::fprintf(stderr, "only %u of %zu tests ran\n", run, N);
        return 1;
    }
    return failed ? 1 : 0;
}
