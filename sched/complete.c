// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion: retiring WQEs when their completions come back.
 *
 * Completions.  Each WQE's wr_id is its sequence number on the QP; RC
 * completes in order, so a completion for WQE s retires every WQE before s.
 * A WR is retired when its last WQE is; the application sees one completion
 * for it if it asked (wr_id, opcode, byte_len = the WR's length, status),
 * never one per slice.
 *
 * Errors.  The first completion with an error (any status, FLUSH_ERR
 * included) for WQE s: WQEs before s succeeded; the WR of s will complete
 * with that status (signaled or not); every other WR of the QP, in flight
 * or queued, signaled or not, with IBV_WC_WR_FLUSH_ERR.  Each WR still
 * completes when its last WQE retires, in order, exactly once: the
 * hardware's flush completions of non-final slices are absorbed, and WRs
 * still queued (or the rest of a WR cut short) are handed to the hardware
 * whole and signaled, which flushes them, so every completion comes from
 * the CQ (event-driven applications see events) and none occupies a CQE
 * the application has already reused.  If the WQEs in flight end
 * unsignaled, the provider's no-op follows them, signaled, so that their
 * space is reclaimed even if the hardware reports only signaled flushes.  A
 * modify to ERR does the same, except that WQEs in flight keep the status
 * the hardware gives them.  A modify to RESET and a destroy complete every
 * outstanding WR with IBV_WC_WR_FLUSH_ERR at once (the hardware forgets
 * them), through the CQ's ready ring.
 */
#include <string.h>

#include "qp_int.h"

bool sv_qp_owns(const struct sverbs_qp *sqp, uint64_t wr_id)
{
	return wr_id >= sqp->seq_base && wr_id < sqp->seq_next;
}

/* The application's completion of slot s; frees the slot. */
static void complete_wr(struct sverbs_qp *sqp, uint32_t s,
			enum ibv_wc_status status, const struct ibv_wc *raw,
			struct sv_emit *e)
{
	struct sv_wr *w = &sqp->slots[s];
	struct ibv_wc wc;

	if (w->state == SV_WR_QUEUED) {
		/* queued, or partly handed over: the head of its level */
		sv_level_out(sqp, s);
		if (sqp->fence.head == s)
			sv_fifo_pop(sqp, &sqp->fence, true);
	}
	if (raw)
		wc = *raw;
	else
		memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr.wr_id;
	wc.status = status;
	if (status != IBV_WC_SUCCESS && w->status == status)
		wc.vendor_err = w->vendor_err;
	wc.opcode = sv_op_rule(w->wr.opcode)->wc;
	wc.byte_len = (uint32_t)w->len;
	wc.qp_num = sqp->qp_num;
	sv_emit(e, &wc);
	sv_slot_free(sqp, s);
}

/*
 * How a WR ends when its QP is reset or destroyed: with the error it
 * already failed with (a WQE of it failed, or the provider refused it),
 * else as a flush.
 */
static enum ibv_wc_status flush_status(const struct sv_wr *w)
{
	return w->status != IBV_WC_SUCCESS ? w->status : IBV_WC_WR_FLUSH_ERR;
}

/* A WR flushed by a reset or destroy: its completion, unless no_flush. */
static void flush_wr(struct sverbs_qp *sqp, uint32_t s, struct sv_emit *e)
{
	struct sv_wr *w = &sqp->slots[s];

	if (!w->no_flush) {
		complete_wr(sqp, s, flush_status(w), NULL, e);
		return;
	}
	if (w->state == SV_WR_QUEUED) {
		sv_level_out(sqp, s);
		if (sqp->fence.head == s)
			sv_fifo_pop(sqp, &sqp->fence, true);
	}
	sv_slot_free(sqp, s);
}

/* Flush the WRs of the WQEs in flight, in order, and forget the WQEs. */
static void flush_inflight(struct sverbs_qp *sqp, struct sv_emit *e)
{
	struct sv_wqe *q;
	uint64_t seq;
	uint32_t s;

	for (seq = sqp->seq_head; seq < sqp->seq_next; seq++) {
		q = sv_wqe_at(sqp, seq);
		sv_wqe_release(sqp, q);
		s = q->slot;
		q->slot = SV_NONE;
		if (s == SV_NONE || sqp->slots[s].state == SV_WR_FREE)
			continue;
		flush_wr(sqp, s, e);
	}
	sqp->seq_head = sqp->seq_next;
}

/* Flush every WR still queued in software, in posting order. */
static void flush_queued(struct sverbs_qp *sqp, struct sv_emit *e)
{
	uint32_t s, best;
	int l;

	while (sqp->queued) {
		best = SV_NONE;
		for (l = 0; l < SVERBS_NUM_PRIO; l++) {
			s = sqp->level[l].head;
			if (s != SV_NONE && (best == SV_NONE ||
					     sqp->slots[s].post_seq <
						     sqp->slots[best].post_seq))
				best = s;
		}
		flush_wr(sqp, best, e);
	}
	sqp->fence.head = SV_NONE;
	sqp->fence.tail = SV_NONE;
}

/*
 * The first error: from now on the hardware flushes, and sverbs hands it
 * every queued WR (whole, signaled) so that each completes in order.
 */
static void enter_dead(struct sverbs_qp *sqp)
{
	sqp->dead = true;
	sqp->hw_err = true;
	sv_slicer_idle(&sqp->slicer);
	sv_post_nop(sqp);
}

/*
 * A completion of one of this QP's WQEs (CQ and QP locks held): retire every
 * WQE up to it, deliver what the application asked for.  A WR completes
 * when its last WQE retires; once the QP has failed, every WR does (the one
 * that failed with its own status, the others with IBV_WC_WR_FLUSH_ERR).
 */
void sv_qp_complete(struct sverbs_qp *sqp, const struct ibv_wc *raw,
		    struct sv_emit *e)
{
	uint64_t s = raw->wr_id, seq, bytes = 0;
	bool err = raw->status != IBV_WC_SUCCESS;
	struct sv_wqe *q;
	struct sv_wr *w;
	uint32_t slot;

	sqp->pt_inflight = false; /* in order: pass-through's WQEs are done */
	while (sqp->seq_head <= s) {
		seq = sqp->seq_head++;
		q = sv_wqe_at(sqp, seq);
		bytes += q->bytes;
		sv_wqe_release(sqp, q);
		slot = q->slot;
		w = slot == SV_NONE ? NULL : &sqp->slots[slot];
		if (seq == s && err && !sqp->dead) {
			if (w && !w->refused) {
				w->status = raw->status;
				w->vendor_err = raw->vendor_err;
			}
			enter_dead(sqp);
		}
		if (!w || !q->final)
			continue;
		if (sqp->dead)
			complete_wr(sqp, slot,
				    w->status != IBV_WC_SUCCESS
					    ? w->status
					    : IBV_WC_WR_FLUSH_ERR,
				    seq == s ? raw : NULL, e);
		else if (w->refused)
			complete_wr(sqp, slot, w->status, NULL, e);
		else if (w->app_signaled)
			complete_wr(sqp, slot, IBV_WC_SUCCESS,
				    seq == s ? raw : NULL, e);
		else
			sv_slot_free(sqp, slot);
	}
	if (!sqp->dead)
		sv_slicer_retired(&sqp->slicer, bytes, sqp->inflight_bytes);
}

/* RESET / destroy: every WR not yet completed flushes; nothing in flight. */
void sv_qp_flush_all(struct sverbs_qp *sqp, struct sv_emit *e)
{
	flush_inflight(sqp, e);
	flush_queued(sqp, e);
	sqp->pt_inflight = false;
	sqp->unsig_wqes = 0;
	sqp->unsig_bytes = 0;
	sv_slicer_idle(&sqp->slicer);
}
