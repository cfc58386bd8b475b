// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the configuration parser (common/config.c).  The input
 * is parsed as a sverbs.conf text, and its lines as SVERBS_* environment
 * entries (sverbs_config_load()).  Beyond the sanitizers, it checks what the
 * parser promises: every problem reported once as a sentence, values in
 * range, the same text parses to the same configuration.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sverbs_config.h"

static int reports;

static void report(void *arg, const char *msg)
{
	(void)arg;
	if (!msg || !*msg || strlen(msg) > 4096 || strchr(msg, '\n'))
		abort(); /* a message is one non-empty line */
	reports++;
}

static void check(const struct sverbs_config *c)
{
	if (c->default_prio > 7 || c->window_slices == 0 ||
	    c->slice_min_bytes < 64 || c->slice_max_bytes < 64)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sverbs_config a, b;
	char *text, *envbuf, *envp[65], *p;
	int n, m, k = 0;

	if (size > 1 << 16)
		return 0;
	text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';

	sverbs_config_defaults(&a);
	reports = 0;
	n = sverbs_config_parse_text(&a, text, "fuzz.conf", report, NULL);
	if (n < 0 || n != reports)
		abort();
	check(&a);
	sverbs_config_defaults(&b);
	m = sverbs_config_parse_text(&b, text, "fuzz.conf", report, NULL);
	if (m != n || memcmp(&a, &b, sizeof(a)))
		abort(); /* deterministic */

	/* the same lines as SVERBS_<KEY>=value environment entries */
	envbuf = malloc(size + 1);
	memcpy(envbuf, text, size + 1);
	for (p = strtok(envbuf, "\n"); p && k < 64; p = strtok(NULL, "\n"))
		envp[k++] = p;
	envp[k] = NULL;
	reports = 0;
	n = sverbs_config_load(&a, NULL, envp, report, NULL);
	if (n < 0 || n != reports)
		abort();
	check(&a);
	if (a.slice_min_bytes > a.slice_max_bytes)
		abort(); /* load() reconciles them */
	free(envbuf);
	free(text);
	return 0;
}
