// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* CUnit tests of the sverbs configuration parser (common/config.c). */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sverbs_config.h"

#define MAX_MSGS 16

static char msgs[MAX_MSGS][512];
static int nmsgs;

static void collect(void *arg, const char *msg)
{
	(void)arg;
	if (nmsgs < MAX_MSGS)
		snprintf(msgs[nmsgs], sizeof(msgs[0]), "%s", msg);
	nmsgs++;
}

static void reset(void)
{
	nmsgs = 0;
	memset(msgs, 0, sizeof(msgs));
}

static int parse(struct sverbs_config *cfg, const char *text)
{
	reset();
	sverbs_config_defaults(cfg);
	return sverbs_config_parse_text(cfg, text, "test.conf", collect, NULL);
}

static void test_defaults(void)
{
	struct sverbs_config cfg;

	sverbs_config_defaults(&cfg);
	CU_ASSERT_EQUAL(cfg.mode, SVERBS_MODE_DEFAULT);
	CU_ASSERT_TRUE(sverbs_config_enabled(&cfg));
	CU_ASSERT_EQUAL(cfg.default_prio, 4);
	CU_ASSERT_EQUAL(cfg.small_msg_bytes, 0);
	CU_ASSERT_EQUAL(cfg.slice_bytes, 0);
	CU_ASSERT_EQUAL(cfg.window_slices, 2);
	CU_ASSERT_EQUAL(cfg.slice_grow_windows, 0);
	CU_ASSERT_FALSE(cfg.slice_always);
	CU_ASSERT_TRUE(cfg.passthrough);
	CU_ASSERT_TRUE(cfg.batch);
	CU_ASSERT_EQUAL(cfg.batch_budget_us, 0);
	CU_ASSERT_EQUAL(cfg.batch_prio_mask, 0xfe);
	CU_ASSERT_FALSE(cfg.stats);
}

static void test_valid(void)
{
	struct sverbs_config cfg;
	int n;

	n = parse(&cfg, "# a comment\n"
			"\n"
			"enable = off\n"
			"  default_prio=7   # trailing comment\n"
			"small_msg_bytes = 8k\n"
			"slice_bytes = 1MiB\n"
			"slice_min_bytes = 2048\n"
			"hol_target_us = 100\n"
			"window_slices = 4\n"
			"slice_grow_windows = 3\n"
			"slice_always = on\n"
			"passthrough = off\n"
			"batch = no\n"
			"batch_budget_us = 20\n"
			"batch_levels = 2-3,6\n"
			"stats = yes");
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(nmsgs, 0);
	CU_ASSERT_EQUAL(cfg.mode, SVERBS_MODE_OFF);
	CU_ASSERT_FALSE(sverbs_config_enabled(&cfg));
	CU_ASSERT_EQUAL(cfg.default_prio, 7);
	CU_ASSERT_EQUAL(cfg.small_msg_bytes, 8192);
	CU_ASSERT_EQUAL(cfg.slice_bytes, 1u << 20);
	CU_ASSERT_EQUAL(cfg.slice_min_bytes, 2048);
	CU_ASSERT_EQUAL(cfg.hol_target_us, 100);
	CU_ASSERT_EQUAL(cfg.window_slices, 4);
	CU_ASSERT_EQUAL(cfg.slice_grow_windows, 3);
	CU_ASSERT_TRUE(cfg.slice_always);
	CU_ASSERT_FALSE(cfg.passthrough);
	CU_ASSERT_FALSE(cfg.batch);
	CU_ASSERT_EQUAL(cfg.batch_budget_us, 20);
	CU_ASSERT_EQUAL(cfg.batch_prio_mask, (1u << 2) | (1u << 3) | (1u << 6));
	CU_ASSERT_TRUE(cfg.stats);
}

static void test_unknown_key(void)
{
	struct sverbs_config cfg;
	int n;

	n = parse(&cfg, "window_slices = 3\nslize_bytes = 64k\n");
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(nmsgs, 1);
	/* the message names the file, the line and the key */
	CU_ASSERT_PTR_NOT_NULL(strstr(msgs[0], "test.conf:2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msgs[0], "slize_bytes"));
	CU_ASSERT_EQUAL(cfg.window_slices, 3);
	CU_ASSERT_EQUAL(cfg.slice_bytes, 0);
}

static void test_bad_values(void)
{
	static const char *const bad[] = {
		"enable = maybe",
		"default_prio = 8",
		"default_prio = -1",
		"small_msg_bytes = 12q",
		"slice_bytes = lots",
		"slice_min_bytes = 10",
		"hol_target_us = 0",
		"window_slices = 0",
		"window_slices = 99999",
		"slice_grow_windows = 1025",
		"slice_grow_windows = -1",
		"batch = 2",
		"batch_levels = 3-9",
		"batch_levels = 5-2",
		"cq_headroom = 1",
		"slice_bytes = 99999999999",
		"stats = ",
		"just some words",
	};
	struct sverbs_config cfg, def;
	size_t i;

	sverbs_config_defaults(&def);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(parse(&cfg, bad[i]), 1);
		CU_ASSERT_EQUAL(nmsgs, 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(msgs[0], "test.conf:1"));
		/* a bad value leaves everything at its default */
		CU_ASSERT_EQUAL(memcmp(&cfg, &def, sizeof(cfg)), 0);
	}
}

static void test_empty(void)
{
	struct sverbs_config cfg, def;

	sverbs_config_defaults(&def);
	CU_ASSERT_EQUAL(parse(&cfg, ""), 0);
	CU_ASSERT_EQUAL(parse(&cfg, "\n\n   \n# only comments\n"), 0);
	CU_ASSERT_EQUAL(nmsgs, 0);
	CU_ASSERT_EQUAL(memcmp(&cfg, &def, sizeof(cfg)), 0);
}

static void test_missing_file(void)
{
	struct sverbs_config cfg, def;
	char *env[] = { NULL };

	sverbs_config_defaults(&def);
	reset();
	CU_ASSERT_EQUAL(sverbs_config_load(&cfg, "/nonexistent/sverbs.conf",
					   env, collect, NULL),
			0);
	CU_ASSERT_EQUAL(nmsgs, 0);
	CU_ASSERT_EQUAL(memcmp(&cfg, &def, sizeof(cfg)), 0);
}

static void test_file_and_env(void)
{
	char path[] = "/tmp/sverbs-conf-XXXXXX";
	char *env[] = { "HOME=/root",
			"SVERBS_WINDOW_SLICES=8",
			"SVERBS=off",
			"SVERBS_SLICE_BYTES=bogus",
			"SVERBS_NO_SUCH_KNOB=1",
			"SVERBS_CONF=/ignored",
			"SVERBS_VM_TIMEOUT=600",
			NULL };
	struct sverbs_config cfg;
	FILE *f;
	int fd, n;

	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs("window_slices = 3\nslice_bytes = 128k\nstats = on\n", f);
	fclose(f);

	reset();
	n = sverbs_config_load(&cfg, path, env, collect, NULL);
	unlink(path);
	/* the bogus value and the unknown variable, each reported once */
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(nmsgs, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(msgs[0], "SVERBS_SLICE_BYTES"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msgs[1], "no_such_knob"));
	CU_ASSERT_EQUAL(cfg.window_slices, 8);	      /* environment wins */
	CU_ASSERT_EQUAL(cfg.slice_bytes, 128u << 10); /* file value kept */
	CU_ASSERT_TRUE(cfg.stats);
	CU_ASSERT_EQUAL(cfg.mode, SVERBS_MODE_OFF);
}

static void test_env_on(void)
{
	char *env[] = { "SVERBS=on", NULL };
	struct sverbs_config cfg;

	reset();
	CU_ASSERT_EQUAL(sverbs_config_load(&cfg, NULL, env, collect, NULL), 0);
	CU_ASSERT_EQUAL(cfg.mode, SVERBS_MODE_ON);
	CU_ASSERT_TRUE(sverbs_config_enabled(&cfg));
}

static void test_min_above_max(void)
{
	char *env[] = { "SVERBS_SLICE_MIN_BYTES=2m",
			"SVERBS_SLICE_MAX_BYTES=1m", NULL };
	struct sverbs_config cfg;

	reset();
	CU_ASSERT_EQUAL(sverbs_config_load(&cfg, NULL, env, collect, NULL), 1);
	CU_ASSERT_EQUAL(cfg.slice_min_bytes, 1u << 20);
	CU_ASSERT_EQUAL(cfg.slice_max_bytes, 1u << 20);
}

static void test_long_line(void)
{
	char text[2048];
	struct sverbs_config cfg;

	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	CU_ASSERT_EQUAL(parse(&cfg, text), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msgs[0], "longer than"));
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("config", NULL, NULL);
	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "valid file", test_valid);
	CU_add_test(s, "unknown key", test_unknown_key);
	CU_add_test(s, "bad values", test_bad_values);
	CU_add_test(s, "empty file", test_empty);
	CU_add_test(s, "missing file", test_missing_file);
	CU_add_test(s, "file then environment", test_file_and_env);
	CU_add_test(s, "SVERBS=on", test_env_on);
	CU_add_test(s, "slice min above max", test_min_above_max);
	CU_add_test(s, "line too long", test_long_line);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	int failed =
		CU_get_number_of_failures() + CU_get_number_of_tests_failed();

	CU_cleanup_registry();
	return failed ? 1 : 0;
}
