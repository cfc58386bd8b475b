// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the input bytes are the decisions of the randomized
 * differential driver (sched/tests/model_run.c): the configuration, the QPs,
 * each post (opcode, size 0 B-8 MiB, SGEs, inline, signaling, fence,
 * priority), hardware completions, polls, arming, and faults (a WQE failing
 * mid-slice, modify to ERR, destroy with work queued, the provider refusing
 * a WQE with an errno, new QPs on the CQ).  The layer runs against the fake
 * adapter; any mismatch with the reference model aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model_opts o = { .data = data, .size = size, .steps = 1500 };
	struct model_result r;

	if (model_run(&o, &r)) {
		fprintf(stderr, "fuzz_wr: %llu mismatches, first: %s\n",
			(unsigned long long)r.mismatches, r.first);
		abort();
	}
	return 0;
}
