/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sverbs.h - what an application may tell the sverbs layer beneath
 * ibv_post_send() and the ibv_wr_*() API.  Nothing here needs a new symbol:
 * a priority is carried in the high bits of send_flags (ibv_post_send) or of
 * qpx->wr_flags (ibv_wr_*), and the provider strips those bits before
 * anything reaches the hardware or the kernel.
 *
 * Levels: SVERBS_NUM_PRIO levels, 0 is the highest.  A WR without a
 * priority gets one from the configuration (docs/configuration.md):
 * small_msg_bytes (messages at or below it go to level 0) and default_prio.
 *
 *	wr.send_flags = IBV_SEND_SIGNALED | SVERBS_PRIO(0);
 *	qpx->wr_flags = IBV_SEND_SIGNALED | SVERBS_PRIO(7);
 */
#ifndef INFINIBAND_SVERBS_H
#define INFINIBAND_SVERBS_H

#define SVERBS_NUM_PRIO	    8
#define SVERBS_PRIO_HIGHEST 0
#define SVERBS_PRIO_LOWEST  (SVERBS_NUM_PRIO - 1)

/* Bits 24..27 of send_flags: 0 = not stated, n + 1 = level n. */
#define SVERBS_PRIO_SHIFT 24
#define SVERBS_PRIO_MASK  (0xfu << SVERBS_PRIO_SHIFT)
#define SVERBS_PRIO(n)	  ((((unsigned int)(n)&7u) + 1u) << SVERBS_PRIO_SHIFT)

/* The level stated in flags, or -1 if none. */
static inline int sverbs_prio_of(unsigned int flags)
{
	unsigned int v = (flags & SVERBS_PRIO_MASK) >> SVERBS_PRIO_SHIFT;

	return v ? (int)(v - 1) : -1;
}

#include <stdbool.h>
#include <stdint.h>

/*
 * wr_ids the layer keeps for itself: the internal wr_ids of the WQEs it
 * hands to the provider (a per-QP sequence number from
 * SVERBS_WR_ID_RESERVED_MIN).  While the layer is on, a post that uses one
 * (ibv_post_send, ibv_post_recv, ibv_post_srq_recv, qpx->wr_id in an
 * ibv_wr_*() batch) fails with EINVAL at that WR, whatever the QP, so that a
 * completion that carries one is the layer's without doubt: the layer
 * never reads an application's completion as its own (docs/semantics.md).
 * The range is no pointer (non-canonical on x86-64, beyond a 52-bit user
 * address on AArch64) and no counter an application reaches.
 */
#define SVERBS_WR_ID_RESERVED_MIN 0x5356000000000000ull
#define SVERBS_WR_ID_RESERVED_MAX 0x5356ffffffffffffull

static inline bool sverbs_wr_id_reserved(uint64_t wr_id)
{
	return (wr_id >> 48) == (SVERBS_WR_ID_RESERVED_MIN >> 48);
}

struct ibv_qp;

/*
 * Per-QP counters of the layer.  wqes / doorbells is the mean batch: WQEs
 * handed to the provider per doorbell (slices count as WQEs).
 */
struct sverbs_qp_stats {
	uint64_t wrs;		  /* WRs the application posted */
	uint64_t wqes;		  /* WQEs handed to the provider */
	uint64_t doorbells;	  /* chains handed to it: one doorbell each */
	uint64_t held_wrs;	  /* WQEs that waited for a bigger batch */
	uint64_t held_p99_ns;	  /* p99 of the delay holding added: first
				   * hold decision to doorbell (upper edge
				   * of a power-of-2 bucket) */
	uint64_t batch_budget_ns; /* the QP's batching budget (0: none) */
	uint32_t slice_bytes;	  /* the current slice size */
	uint32_t flags;		  /* SVERBS_QP_STATS_* */
};

/*
 * The QP is in pass-through: its WRs go to the provider untouched and the
 * counters above stay still (docs/configuration.md, passthrough).
 */
#define SVERBS_QP_STATS_PASSTHROUGH (1u << 0)
/*
 * A QP in pass-through with a batch budget deferred doorbells (the
 * provider's WQEs written, one doorbell for a batch): wqes counts the WQEs
 * written without one, doorbells those the layer rang for them (a stock
 * post's own doorbell, which sends them too, is not counted).
 */
#define SVERBS_QP_STATS_DEFERRED (1u << 1)

/*
 * Fill *stats for qp.  Returns 0, or ENOENT when the layer does not manage
 * qp (layer off, another provider, a QP type it leaves stock).  Link with
 * -lsverbs (the prefix's lib/).
 */
int sverbs_query_qp_stats(struct ibv_qp *qp, struct sverbs_qp_stats *stats);

#endif /* INFINIBAND_SVERBS_H */
