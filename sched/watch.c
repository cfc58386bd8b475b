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
#include <errno.h>
#include <string.h>

#include "cq_int.h"
#include "qp_int.h"

/*
 * The gap per post call over the time since last_ns: a batch's first post
 * counts it from the first post of the batch before (posts that join a
 * batch read no clock, sv_watch_post_joined()), so the time spans them all.
 */
static uint64_t gap_sample(struct sverbs_qp *sqp, uint64_t span)
{
	uint32_t since =
		atomic_load_explicit(&sqp->watch.since, memory_order_relaxed);

	return since > 1 ? span / since : span;
}

/* The next gap counts from now (ns), over one post call so far. */
static void watch_mark(struct sverbs_qp *sqp, uint64_t now)
{
	atomic_store_explicit(&sqp->fast.last_ns, now, memory_order_relaxed);
	atomic_store_explicit(&sqp->watch.since, 1, memory_order_relaxed);
}

/* A post joined the batch: one more gap in the next sample (racy: a hint) */
static void watch_joined(struct sverbs_qp *sqp)
{
	uint32_t since =
		atomic_load_explicit(&sqp->watch.since, memory_order_relaxed);

	atomic_store_explicit(&sqp->watch.since, since + 1,
			      memory_order_relaxed);
}

/*
 * A watched post begins.  A poster that took a completion since its
 * previous post is waiting for them: no batch, and no clock read (the gap
 * to its next post says nothing about batches).  Otherwise the clock is
 * read here and at the post's return (*timed), and the gap decides.
 */
bool sv_watch_leaves(struct sverbs_qp *sqp, uint64_t *timed, bool counted)
{
	uint64_t budget = (uint64_t)sqp->cfg.batch_budget_us * 1000;
	uint64_t now, last, gap;
	uint32_t target;

	*timed = 0;
	if (!counted && sqp->ad->cq_consumed &&
	    sverbs_watch_took(sqp, sqp->ad->cq_consumed(sqp->scq->cq)))
		return false;
	now = sverbs_now_ns();
	*timed = now;
	last = atomic_load_explicit(&sqp->fast.last_ns, memory_order_relaxed);
	gap = atomic_load_explicit(&sqp->watch.gap_ns, memory_order_relaxed);
	if (last && now >= last) {
		gap = sverbs_batch_gap_ewma(budget, gap,
					    gap_sample(sqp, now - last));
		atomic_store_explicit(&sqp->watch.gap_ns, gap,
				      memory_order_relaxed);
	}
	/* (sverbs_batch_could_form(), keeping the target for a deferral) */
	target = sverbs_batch_gap_target(budget, gap);
	atomic_store_explicit(&sqp->watch.target, target, memory_order_relaxed);
	return budget && target > 1;
}

/*
 * A timed post went stock (and rang what was deferred) or was deferred:
 * the next gap counts from its return.
 */
void sv_watch_returned(struct sverbs_qp *sqp)
{
	watch_mark(sqp, sverbs_now_ns());
}

/* The queue's batching starts from the estimate (queue set up, locked). */
void sv_watch_seed(struct sverbs_qp *sqp)
{
	sverbs_batch_seed(
		sqp->batch,
		atomic_load_explicit(&sqp->watch.gap_ns, memory_order_relaxed),
		atomic_load_explicit(&sqp->fast.last_ns, memory_order_relaxed));
}

/*
 * Deferred doorbells: a watched QP batches without the layer's queue where
 * the adapter can write WQEs without ringing (post_send_nodb) and ring
 * later (ring).  A post that would leave pass-through for the queue (its
 * poster runs ahead, its posts come within the budget) instead goes to the
 * provider as it is, its own wr_ids, its CQ still polled as stock, and
 * only its doorbell waits: the WQEs wait in the send queue itself, and one
 * doorbell later tells the hardware of them all (rxe: one system call;
 * the kernel runs the requester over every WQE written; mlx5: the doorbell
 * record and one doorbell write).  No copy, no
 * slot, no translation of completions.
 *
 * fast.deferred counts the WQEs written since the last doorbell.  Whoever
 * takes it from nonzero to 0 rings after (an exchange: every WQE counted
 * was written before its count was added, so the doorbell covers it):
 *  - the post that brings it to the batch target (the batch size that
 *    posts this far apart reach within the budget, sverbs_batch.h; at
 *    most half the send queue, which deferred WQEs must not fill);
 *  - a post the provider refused a WR of (stock rings the WRs before it);
 *  - any stock post of the QP (a poster that waits for its completions, a
 *    gap too long to batch) sends them with its own doorbell, but leaves
 *    the count: a refused stock post may ring nothing (mlx5 rings only
 *    for WQEs it wrote), and a count erased then would strand them, so
 *    the timer or a poll rings again, for nothing new at worst;
 *  - a poll or an arm of its send CQ: the post that took the count from 0
 *    sets SVERBS_CQ_DEFER in the CQ's state word, which the provider's
 *    own poll tests (any bit sends it to sverbs_poll_cq()), and the
 *    layer's poll or arm rings every QP on the CQ's deferring list
 *    first: a poster that waits for a completion of a deferred WQE does
 *    not wait for the budget;
 *  - the budget's timer, armed by the post that took the count from 0
 *    (lifetime.c, qp_timer_fire()), for a poster that stops and neither
 *    polls nor arms;
 *  - a modify of the QP's state, and the QP leaving pass-through (a WR
 *    that states a priority), before its first WR of the queue.
 * A completion is never held: only WQEs not yet sent wait, at most the
 * budget.
 */
#define SV_RING_RETRY_NS (5 * 1000)

/*
 * The send queue was busy (the adapter's ring answered EBUSY): a post of
 * another thread, or an ibv_wr_* batch, maybe of the caller's own thread
 * (a poll or an arm inside it: waiting would never end).  The n WQEs go
 * back to the count, as if it had never been taken, with both triggers:
 * the next poll or arm, and the timer soon.  (mlx5: a post's own doorbell
 * or the batch's wr_complete tells the hardware of them anyway, and the
 * ring that comes later finds nothing to do.)
 */
static void ring_later(struct sverbs_qp *sqp, uint32_t n)
{
	atomic_fetch_add(&sqp->fast.deferred, n);
	atomic_fetch_or(sqp->scq->fast.state, SVERBS_CQ_DEFER);
	sverbs_timer_arm(&sqp->timer, sverbs_now_ns() + SV_RING_RETRY_NS);
}

int sv_watch_ring(struct sverbs_qp *sqp, enum sv_ring_why why)
{
	uint32_t n;
	int ret;

	if (!atomic_load_explicit(&sqp->fast.deferred, memory_order_relaxed))
		return 0;
	n = atomic_exchange(&sqp->fast.deferred, 0);
	if (!n)
		return 0;
	ret = sqp->ad->ring(sqp->qp);
	if (ret == EBUSY) {
		ring_later(sqp, n);
		return 0;
	}
	atomic_fetch_add_explicit(&sqp->watch.rings[why], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&sqp->watch.rung_wqes[why], n,
				  memory_order_relaxed);
	return ret;
}

/* The doorbells rung for deferred WQEs, whoever rang them. */
uint64_t sv_watch_rings(struct sverbs_qp *sqp)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < SV_RING_NWHY; i++)
		n += atomic_load_explicit(&sqp->watch.rings[i],
					  memory_order_relaxed);
	return n;
}

/*
 * A ring no post waits for (the timer's, a poll's): its failure is logged;
 * the WQEs stay in the send queue for the next doorbell, or are flushed
 * with the QP, as stock's are after a failed doorbell.
 */
void sv_watch_ring_late(struct sverbs_qp *sqp, enum sv_ring_why why)
{
	int err = sv_watch_ring(sqp, why);

	if (err)
		sv_log(sqp->ad, sqp->qp->context, SVERBS_LOG_INFO,
		       "sverbs: QP %u: a deferred doorbell failed (%s); its "
		       "WQEs go with the QP's next one",
		       sqp->qp_num, strerror(err));
}

/* A QP that may defer joins its send CQ's deferring list, once. */
void sv_watch_join(struct sverbs_qp *sqp)
{
	struct sverbs_cq *scq = sqp->scq;

	pthread_spin_lock(&scq->defer_lock);
	if (!sqp->watch.listed) {
		sqp->watch.next = scq->deferring;
		scq->deferring = sqp;
		sqp->watch.listed = true;
	}
	pthread_spin_unlock(&scq->defer_lock);
}

/* ... and leaves it before the provider destroys the QP. */
void sv_watch_leave(struct sverbs_qp *sqp)
{
	struct sverbs_cq *scq = sqp->scq;
	struct sverbs_qp **p;

	pthread_spin_lock(&scq->defer_lock);
	for (p = &scq->deferring; sqp->watch.listed && *p;
	     p = &(*p)->watch.next)
		if (*p == sqp) {
			*p = sqp->watch.next;
			sqp->watch.listed = false;
			break;
		}
	pthread_spin_unlock(&scq->defer_lock);
}

void sv_cq_ring_deferred_all(struct sverbs_cq *scq)
{
	struct sverbs_qp *sqp;

	/* cleared first: a post that defers after this sets it again */
	atomic_fetch_and(scq->fast.state, ~SVERBS_CQ_DEFER);
	pthread_spin_lock(&scq->defer_lock);
	for (sqp = scq->deferring; sqp; sqp = sqp->watch.next)
		sv_watch_ring_late(sqp, SV_RING_POLL);
	pthread_spin_unlock(&scq->defer_lock);
}

/* How many WRs of the list the provider took (up to bad; ret: its error). */
static uint32_t wrs_taken(const struct ibv_send_wr *wr,
			  const struct ibv_send_wr *bad, int ret)
{
	uint32_t n = 0;

	for (; wr && !(ret && wr == bad); wr = wr->next)
		n++;
	return n;
}

/*
 * now: the post's start, read by sv_watch_leaves() for the batch's first
 * post; 0 for a post that joins the batch (sv_watch_post_joined()), which
 * reads the clock only if it has the timer to arm (the batch was rung
 * meanwhile).
 */
int sv_watch_post_deferred(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr, uint64_t now)
{
	uint64_t budget = (uint64_t)sqp->cfg.batch_budget_us * 1000;
	uint32_t n, before = 0, target, max = sqp->cap / 2;
	int ret, err;

	ret = sqp->ad->post_send_nodb(sqp->qp, wr, bad_wr);
	n = wrs_taken(wr, *bad_wr, ret);
	if (n) {
		before = atomic_fetch_add(&sqp->fast.deferred, n);
		atomic_fetch_add_explicit(&sqp->watch.wqes, n,
					  memory_order_relaxed);
	}
	/* what sv_watch_leaves() found for this post, or a racing one's */
	target = atomic_load_explicit(&sqp->watch.target, memory_order_relaxed);
	if (target > max)
		target = max;
	if (ret || before + n >= target) {
		err = sv_watch_ring(sqp,
				    ret ? SV_RING_REFUSED : SV_RING_TARGET);
		if (!ret)
			ret = err;
		/* the next gap counts from the return, not the doorbell */
		sv_watch_returned(sqp);
		return ret;
	} else if (!before || sverbs_timer_orphaned() ||
		   !sverbs_timer_armed(&sqp->timer)) {
		/*
		 * The batch's first post, or one that finds the batch without
		 * a deadline: a fork() that came between another thread's
		 * count and its arm, or a timer that fired before this count
		 */
		sverbs_timer_arm(&sqp->timer,
				 (now ? now : sverbs_now_ns()) + budget);
		/* after the count: a poll that clears it rings this WQE */
		if (!(atomic_load_explicit(sqp->scq->fast.state,
					   memory_order_relaxed) &
		      SVERBS_CQ_DEFER))
			atomic_fetch_or(sqp->scq->fast.state, SVERBS_CQ_DEFER);
	}
	/*
	 * No doorbell: the post's own cost is a WQE, so the next gap may
	 * count from its start (no second clock read); a joined post adds
	 * one more to the gaps the next sample spans
	 */
	if (now)
		watch_mark(sqp, now);
	else
		watch_joined(sqp);
	return ret;
}

/*
 * A watched post while a batch is open (fast.deferred nonzero) whose poster
 * took no completion since its previous post (the glue's test,
 * sverbs_watch_waits()): it joins the batch.  The batch's first post read
 * the clock, measured the gap and set the target; those that join read no
 * clock and compute nothing: a WQE, the count, and the doorbell at the
 * target.  The budget's timer, armed by the first, bounds the wait; a post
 * that finds the batch rung meanwhile arms it again.  The next batch's
 * first post measures the gap over all of this one's posts (gap_sample()).
 */
int sv_watch_post_joined(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	return sv_watch_post_deferred(sqp, wr, bad_wr, 0);
}

/* The CQ's count as the QP starts (creation). */
void sv_watch_init(struct sverbs_qp *sqp)
{
	int i;

	atomic_init(&sqp->watch.gap_ns, 0);
	atomic_init(&sqp->watch.target, 1);
	atomic_init(&sqp->watch.since, 1);
	atomic_init(&sqp->watch.wqes, 0);
	for (i = 0; i < SV_RING_NWHY; i++) {
		atomic_init(&sqp->watch.rings[i], 0);
		atomic_init(&sqp->watch.rung_wqes[i], 0);
	}
	atomic_init(&sqp->watch.timer_ready, false);
	atomic_init(&sqp->watch.unready, false);
	sqp->watch.listed = false;
	sqp->watch.next = NULL;
	atomic_init(&sqp->fast.deferred, 0);
	atomic_init(&sqp->fast.last_ns, 0);
	atomic_init(&sqp->fast.consumed,
		    sqp->ad->cq_consumed ? sqp->ad->cq_consumed(sqp->scq->cq)
					 : 0);
}
