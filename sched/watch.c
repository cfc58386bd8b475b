// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A budgeted QP in pass-through (SVERBS_PT_WATCH).  A batch budget pays
 * off only where WRs pile up: a poster that runs ahead of its completions.
 * A program that waits for each completion before it posts again (a closed
 * loop: ping-pong, perftest's latency tests, an RPC client) never forms a
 * batch, and the layer's queue would only cost it time.  So a QP with a
 * budget starts in pass-through, its posts stock (no lock, no copy, its own
 * wr_ids), and watches each post for the two signs that a batch would form:
 *
 *  - nothing was taken from its send CQ since its previous post (the
 *    adapter's cq_consumed; the poster is not waiting for completions), and
 *  - its posts come fast enough that two or more fall within the budget
 *    (batch/'s arrival-gap EWMA, from the return of one post to the start
 *    of the next, as on the queue).
 *
 * A post of a poster that waits reads no clock, and the providers' glue
 * sees it without calling sched/ (sverbs_watch_waits(), inline): in a
 * closed loop a watched post costs the count's read and a few tests over
 * pass-through (perf/results/insns-watch.md).  The first post that sees
 * both signs leaves pass-through for the queue, for good
 * (sv_qp_leave_prepare(), as a priority does), and the batching policy
 * starts from the gap measured here.  A completion of another QP on the same
 * CQ also counts as taken: the QP then keeps posting stock, which costs
 * nothing and batches nothing.  Posts race on the estimate without a lock
 * (relaxed atomics): it is a heuristic, and any outcome is a correct QP.
 */
#include "cq_int.h"
#include "qp_int.h"

/*
 * A watched post begins.  A poster that took a completion since its
 * previous post is waiting for them: no batch, and no clock read (the gap
 * to its next post says nothing about batches).  Otherwise the clock is
 * read here and at the post's return (*timed), and the gap decides.
 */
bool sv_watch_leaves(struct sverbs_qp *sqp, bool *timed)
{
	uint64_t budget = (uint64_t)sqp->cfg.batch_budget_us * 1000;
	uint64_t now, last, gap;

	*timed = false;
	if (sqp->ad->cq_consumed &&
	    sverbs_watch_took(sqp, sqp->ad->cq_consumed(sqp->scq->cq)))
		return false;
	*timed = true;
	now = sverbs_now_ns();
	last = atomic_load_explicit(&sqp->fast.last_ns, memory_order_relaxed);
	gap = atomic_load_explicit(&sqp->watch.gap_ns, memory_order_relaxed);
	if (last && now >= last) {
		gap = sverbs_batch_gap_ewma(budget, gap, now - last);
		atomic_store_explicit(&sqp->watch.gap_ns, gap,
				      memory_order_relaxed);
	}
	return sverbs_batch_could_form(budget, gap);
}

/* A timed post went stock: the next gap counts from its return. */
void sv_watch_returned(struct sverbs_qp *sqp)
{
	atomic_store_explicit(&sqp->fast.last_ns, sverbs_now_ns(),
			      memory_order_relaxed);
}

/* The queue's batching starts from the estimate (queue set up, locked). */
void sv_watch_seed(struct sverbs_qp *sqp)
{
	sverbs_batch_seed(
		sqp->batch,
		atomic_load_explicit(&sqp->watch.gap_ns, memory_order_relaxed),
		atomic_load_explicit(&sqp->fast.last_ns, memory_order_relaxed));
}

/* The CQ's count as the QP starts (creation). */
void sv_watch_init(struct sverbs_qp *sqp)
{
	atomic_init(&sqp->watch.gap_ns, 0);
	atomic_init(&sqp->fast.last_ns, 0);
	atomic_init(&sqp->fast.consumed,
		    sqp->ad->cq_consumed ? sqp->ad->cq_consumed(sqp->scq->cq)
					 : 0);
}
