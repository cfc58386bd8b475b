/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A reference model of the completions the layer promises (IB spec +
 * docs/semantics.md), and a randomized differential driver that runs the
 * layer against the fake adapter (fake.c) with the model as its oracle.
 *
 * The model sees what the application posts and what the "hardware" (the
 * fake) does: an adapter wrapped around fk_adapter records every WQE the
 * layer hands over and maps it back to its application WR by a tag the
 * driver puts in each WR's imm_data (the layer copies the WR into each of
 * its WQEs).  So it knows, per WR, which bytes went to the hardware at
 * which remote address, when its last WQE retired, which WQE failed, and
 * checks every completion the layer reports:
 *
 *  - one completion per signaled WR, with its wr_id, opcode, byte_len,
 *    qp_num; success only once its last WQE retired, with no error;
 *  - order per QP: a WR posted after another of the same or a higher
 *    level (lower number), or across a fence, never completes first;
 *  - after an error (a failed WQE, modify to ERR, destroy): the failed WR
 *    reports the real status, every other WR that did not retire reports
 *    IBV_WC_WR_FLUSH_ERR, signaled or not, exactly once;
 *  - a WR the provider refuses: the error at post time (same errno,
 *    *bad_wr at it) or IBV_WC_LOC_QP_OP_ERR with vendor_err = errno;
 *  - hand-over: slices cover the WR's bytes in order (remote address and
 *    SGEs), WRITE_WITH_IMM only on the last slice, no priority bits reach
 *    the provider, strict priority / FIFO / fence at hand-over time;
 *  - capacity: ENOMEM only when the application's max_send_wr is used;
 *  - nothing stalls: after the hardware completes everything and the
 *    application polls, every WR has reached the hardware.
 *
 * Every mismatch is counted by category and printed (first few) with the
 * run's seed, so that `test_model --seed N` reproduces it.
 */
#ifndef SV_TEST_MODEL_H
#define SV_TEST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Known layer defects (issue 16, part 1) the driver can provoke; off by
 * default until their fixes land (see docs in model_run.c). */
enum model_known {
	MK_POLL0 = 1 << 0,     /* check: poll 0 while an app CQE is pending */
	MK_UC = 1 << 1,	       /* UC QPs among the random ones */
	MK_RESIZE = 1 << 2,    /* the application resizes its CQ (stock op) */
	MK_QPN_REUSE = 1 << 3, /* a destroyed QP's number comes back while
				* its late CQEs are in the CQ */
	MK_WRID = 1 << 4,      /* wr_ids next to the reserved range */
	MK_FULL_IDLE = 1 << 6, /* check: WRs complete after the provider
				* refused a WQE as "full" (ENOMEM, EAGAIN,
				* EBUSY) while nothing of the QP was in
				* flight (found by fuzz_wr: they stall) */
	MK_DESTROY_FAIL = 1 << 7, /* the provider fails a destroy, after a
				   * poll took CQEs of the QP meanwhile */
};

struct model_opts {
	uint64_t seed;
	uint64_t wrs;	     /* WRs to post in total (0: until steps) */
	uint64_t steps;	     /* driver steps at most (0: 40 * wrs) */
	unsigned int known;  /* enum model_known bits */
	bool timing;	     /* allow clock-dependent configs (budget,
			      * adaptive slices): not reproducible */
	const uint8_t *data; /* fuzzer: decisions come from these bytes */
	size_t size;
	int verbose; /* print mismatches (first 20) */
};

struct model_result {
	uint64_t wrs;	      /* WRs accepted by post_send */
	uint64_t rejected;    /* WRs post_send refused (expected) */
	uint64_t reserved;    /* posts refused at a reserved wr_id */
	uint64_t watch_left;  /* budgeted QPs that left pass-through unmarked */
	uint64_t left_stock;  /* QPs the layer left stock at a leave */
	uint64_t pt_stays;    /* leaves put off: no CQ headroom free then */
	uint64_t rings;	      /* deferred doorbells rung (the adapter's ring) */
	uint64_t completions; /* completions checked */
	uint64_t wqes;	      /* WQEs the layer handed to the fake */
	uint64_t faults;      /* faults injected */
	uint64_t mismatches;
	char first[256]; /* the first mismatch */
};

/* One run: a random configuration, QPs and sequence from opts->seed (or
 * opts->data).  Returns the number of mismatches. */
uint64_t model_run(const struct model_opts *opts, struct model_result *res);

#endif /* SV_TEST_MODEL_H */
