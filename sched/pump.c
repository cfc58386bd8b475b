// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The pump: handing queued WRs to the hardware as WQEs.
 *
 * Scheduling.  Strict priority across the SVERBS_NUM_PRIO levels (0 first),
 * FIFO within a level.  A pump round takes, while the hardware has room, the
 * next WQE of the highest non-empty level: a whole WR, or the next slice of
 * an RDMA WRITE / WRITE_WITH_IMM / READ longer than the slice size.  So a
 * high-priority WR overtakes a large WR between two of its slices.  Room:
 *   - WQEs in flight < depth (max_send_wr - 1; one slot stays free for the
 *     nop below);
 *   - bytes in flight < window = window_slices * slice size (a WQE may
 *     overshoot the window; the next one waits);
 *   - a WQE that may produce a completion the application did not ask for
 *     (see headroom) needs a unit of its CQ's headroom.
 * All WQEs of a round go to the adapter as one chain (one doorbell).
 *
 * Signaling.  A WQE is signaled when
 *   (a) it is the last WQE of a WR the application signaled (or sq_sig_all);
 *   (b) the unsignaled bytes since the last signaled WQE, with it, reach
 *       window / window_signals (default 2: half the window), or the
 *       unsignaled WQEs reach half the depth: so whenever the window or the
 *       SQ is full, a signaled WQE is in flight whose completion frees at
 *       least 1 / window_signals of it (window_signals = 1: one CQE per
 *       window, which then drains before it refills);
 *   (c) it is the last slice of a WR cut into several;
 *   (d) it is the last WQE of a round after which work is still queued (a
 *       QP's one reserved CQE pays for it if it costs one);
 *   (e) the hardware QP is in error (every WQE then reports).
 * (b)-(d) guarantee that while anything waits in software, a completion will
 * come (on this QP or, for headroom, on its CQ), so an application that only
 * polls, or arms and waits, never stalls.
 *
 * Headroom.  A WQE "costs" one CQE when it may produce a completion stock
 * would not: a signaled WQE that is not the final WQE of an application
 * signaled WR, and any non-final slice (a hardware flush reports every
 * WQE).  Costs are taken from the CQ's headroom counter and given back when
 * the WQE retires.
 *
 * Fence.  A WR posted with IBV_SEND_FENCE waits until every WR posted before
 * it on the QP (any level) has been handed to the hardware and every WQE in
 * flight has completed; WRs posted after it (any level) wait until it has
 * been handed over entirely.  It keeps IBV_SEND_FENCE (on its first WQE).
 * Rule (d) signals the WQE the fence waits for.  Only when the WQEs in
 * flight were all posted unsignaled before the fence arrived (no completion
 * will ever tell) does the fenced WR go right away: the hardware fence then
 * orders it, as stock.
 *
 */
#include <errno.h>
#include <string.h>

#include "qp_int.h"

static uint64_t window_bytes(const struct sverbs_qp *sqp)
{
	uint32_t k = sqp->cfg.window_slices ? sqp->cfg.window_slices : 1;

	return (uint64_t)k * sv_slice_bytes(&sqp->slicer);
}

/* Rule (b): the unsignaled bytes that make a WQE signaled. */
static uint64_t sig_bytes(const struct sverbs_qp *sqp, uint64_t window)
{
	uint32_t k = sqp->cfg.window_signals ? sqp->cfg.window_signals : 1;

	return window / k;
}

static uint32_t sig_every(const struct sverbs_qp *sqp)
{
	return sqp->depth / 2 ? sqp->depth / 2 : 1;
}

static bool sliceable(const struct sv_wr *w)
{
	return !(w->wr.send_flags & IBV_SEND_INLINE) &&
	       sv_op_rule(w->wr.opcode)->sliceable;
}

/*
 * The next WR to take a WQE from: the head of the highest level that was
 * posted before the oldest queued fenced WR; else that fenced WR once
 * everything before it has completed (see the fence rule above).
 */
static uint32_t pick(struct sverbs_qp *sqp, uint32_t n)
{
	uint64_t barrier = UINT64_MAX;
	uint32_t f = sqp->fence.head, s;
	int l;

	if (f != SV_NONE)
		barrier = sqp->slots[f].post_seq;
	for (l = 0; l < SVERBS_NUM_PRIO; l++) {
		s = sqp->level[l].head;
		if (s != SV_NONE && sqp->slots[s].post_seq < barrier)
			return s;
	}
	if (f == SV_NONE)
		return SV_NONE;
	if (sqp->slots[f].cur.off || sqp->hw_err || !sqp->inflight_wqes)
		return f;
	/* nothing in flight will ever report: rely on the hardware fence */
	if (!n && !sqp->inflight_sig)
		return f;
	return SV_NONE;
}

/* Fill chain[n] with the next WQE of w: bytes from its cursor. */
static void fill_wqe(struct sverbs_qp *sqp, uint32_t n, struct sv_wr *w,
		     uint64_t bytes, bool sig)
{
	struct ibv_send_wr *c = &sqp->chain[n];
	struct ibv_sge *sg = &sqp->chain_sge[(size_t)n * sqp->max_sge];
	struct sv_cursor *cur = &w->cur;
	bool first = !cur->off, final = cur->off + bytes == w->len;
	uint64_t left = bytes;
	int k = 0;

	*c = w->wr;
	c->wr_id = sqp->seq_next;
	c->next = NULL;
	if (n)
		sqp->chain[n - 1].next = c;
	c->send_flags &= ~IBV_SEND_SIGNALED;
	if (sig)
		c->send_flags |= IBV_SEND_SIGNALED;
	if (first && final) {
		cur->off = w->len;
		return;
	}
	if (!first)
		c->send_flags &= ~IBV_SEND_FENCE;
	if (!final) {
		c->send_flags &= ~IBV_SEND_SOLICITED;
		if (c->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
			c->opcode = IBV_WR_RDMA_WRITE;
	}
	c->wr.rdma.remote_addr += cur->off;
	while (left) {
		const struct ibv_sge *src = &w->sge[cur->sge];
		uint32_t take = src->length - cur->sge_off;

		if (take > left)
			take = (uint32_t)left;
		if (take) {
			sg[k].addr = src->addr + cur->sge_off;
			sg[k].length = take;
			sg[k].lkey = src->lkey;
			k++;
		}
		left -= take;
		cur->sge_off += take;
		if (cur->sge_off == src->length) {
			cur->sge++;
			cur->sge_off = 0;
		}
	}
	cur->off += bytes;
	c->sg_list = sg;
	c->num_sge = k;
}

static void wqe_dequeue(struct sverbs_qp *sqp, uint32_t s, struct sv_wqe *q);

/* The record of the next WQE, for slot s, from its cursor. */
static struct sv_wqe *wqe_new(struct sverbs_qp *sqp, uint32_t s, uint64_t bytes,
			      bool final, bool sig, bool cost)
{
	struct sv_wqe *q = sv_wqe_at(sqp, sqp->seq_next);

	memset(q, 0, sizeof(*q));
	q->slot = s;
	q->bytes = (uint32_t)bytes;
	q->start = sqp->slots[s].cur;
	q->final = final;
	q->signaled = sig;
	q->cost = cost;
	return q;
}

/* The provider's no-op (adapter nop_wr), signaled, as internal WQE seq. */
static void nop_wr(struct sverbs_qp *sqp, struct ibv_send_wr *wr, uint64_t seq)
{
	memset(wr, 0, sizeof(*wr));
	sqp->ad->nop_wr(sqp->qp, wr);
	wr->wr_id = seq;
	wr->send_flags |= IBV_SEND_SIGNALED;
}

/*
 * A WR the provider refused at hand-over (see ring_doorbell()) goes as the
 * provider's no-op in its place (16.6: never a WRITE with a made-up rkey,
 * which a real device may fail on): a real completion, in order, through
 * the CQ (events included), which reports the WR's error.
 */
static bool build_refused(struct sverbs_qp *sqp, uint32_t s, uint32_t n)
{
	struct sv_wr *w = &sqp->slots[s];
	struct ibv_send_wr *c = &sqp->chain[n];
	bool cost = !w->app_signaled;
	struct sv_wqe *q;

	if (cost && !sv_hr_take_or_wait(sqp->scq, sqp))
		return false;
	nop_wr(sqp, c, sqp->seq_next);
	if (n)
		sqp->chain[n - 1].next = c;
	q = wqe_new(sqp, s, 0, true, true, cost);
	w->cur.off = w->len;
	wqe_dequeue(sqp, s, q);
	sv_wqe_account(sqp, q);
	sqp->seq_next++;
	return true;
}

/* The final WQE of slot s is built: the WR leaves its FIFOs. */
static void wqe_dequeue(struct sverbs_qp *sqp, uint32_t s, struct sv_wqe *q)
{
	struct sv_wr *w = &sqp->slots[s];

	sv_level_out(sqp, s);
	w->state = SV_WR_POSTED;
	q->dequeued = true;
	if (w->fenced && sqp->fence.head == s) {
		sv_fifo_pop(sqp, &sqp->fence, true);
		q->fence_pop = true;
	}
}

/* Build the next WQE of slot s as chain[n], if the hardware has room. */
static bool build_wqe(struct sverbs_qp *sqp, uint32_t s, uint32_t n)
{
	struct sv_wr *w = &sqp->slots[s];
	uint64_t window = UINT64_MAX, rem = w->len - w->cur.off;
	uint64_t bytes = rem, slice = sv_slice_bytes(&sqp->slicer);
	bool first = !w->cur.off, final, app_final, sig, cost;
	bool retire = false;
	struct sv_wqe *q;

	if (sqp->inflight_wqes >= sqp->depth ||
	    (sqp->pt_inflight && sqp->inflight_wqes && !sqp->db_failed))
		return false;
	if (w->refused)
		return build_refused(sqp, s, n);
	/*
	 * Nothing overtakes the highest level (strict priority, FIFO within
	 * a level): slicing or windowing its WRs would only delay them.
	 */
	if (!sqp->hw_err && sqp->scheduled && w->prio != SVERBS_PRIO_HIGHEST) {
		window = window_bytes(sqp);
		/*
		 * A full window waits for a completion.  If nothing in flight
		 * is signaled, none will come: the window shrank (the slice
		 * adapted down) below the unsignaled tail an earlier round
		 * left, which was legal then.  Let one WQE through, signaled,
		 * to retire that tail.
		 */
		if (sqp->windowed_bytes >= window) {
			if (sqp->inflight_sig)
				return false;
			retire = true;
		}
		if (sliceable(w) && rem > slice)
			bytes = slice;
	}
	final = bytes == rem;
	app_final = final && w->app_signaled;
	sig = retire || sqp->pt_inflight || sqp->sig_all || app_final ||
	      sqp->hw_err || (final && !first) ||
	      sqp->unsig_bytes + bytes >= sig_bytes(sqp, window) ||
	      sqp->unsig_wqes + 1 >= sig_every(sqp);
	cost = !final || (sig && !app_final);
	if (cost && !sv_hr_take_or_wait(sqp->scq, sqp))
		return false;

	if (!final && window != UINT64_MAX)
		sv_slicer_cut(&sqp->slicer, w->prio);
	q = wqe_new(sqp, s, bytes, final, sig, cost);
	q->windowed = window != UINT64_MAX;
	fill_wqe(sqp, n, w, bytes, sig);
	if (final)
		wqe_dequeue(sqp, s, q);
	sv_wqe_account(sqp, q);
	sqp->seq_next++;
	return true;
}

/* Rule (d): the round leaves work queued; its last WQE must report. */
static void signal_last(struct sverbs_qp *sqp, uint32_t n)
{
	struct sv_wqe *q = sv_wqe_at(sqp, sqp->seq_next - 1);

	if (q->signaled)
		return;
	if (!q->cost) {
		if (sqp->reserved_busy)
			return; /* the reserved CQE's signaled WQE is in flight
				 */
		sqp->reserved_busy = true;
		q->reserved = true;
	}
	q->signaled = true;
	sqp->chain[n - 1].send_flags |= IBV_SEND_SIGNALED;
	sqp->inflight_sig++;
	sqp->unsig_wqes = 0;
	sqp->unsig_bytes = 0;
}

/* Undo chain[k..n): the adapter did not take them. */
static void rollback(struct sverbs_qp *sqp, uint32_t k, uint32_t n,
		     uint32_t unsig_wqes, uint64_t unsig_bytes)
{
	uint64_t seq0 = sqp->seq_next - n;
	struct sv_wqe *q;
	struct sv_wr *w;
	uint32_t i;

	for (i = n; i-- > k;) {
		q = sv_wqe_at(sqp, seq0 + i);
		w = &sqp->slots[q->slot];
		sv_wqe_release(sqp, q);
		w->cur = q->start;
		if (q->dequeued)
			sv_level_in(sqp, q->slot, true);
		if (q->fence_pop)
			sv_fifo_push_front(sqp, &sqp->fence, q->slot, true);
	}
	sqp->seq_next = seq0 + k;
	sqp->unsig_wqes = unsig_wqes;
	sqp->unsig_bytes = unsig_bytes;
	for (i = 0; i < k; i++) {
		q = sv_wqe_at(sqp, seq0 + i);
		if (q->signaled) {
			sqp->unsig_wqes = 0;
			sqp->unsig_bytes = 0;
		} else {
			sqp->unsig_wqes++;
			sqp->unsig_bytes += q->bytes;
		}
	}
}

static enum sverbs_batch_reason batch_reason(enum sv_pump_why why)
{
	switch (why) {
	case SV_PUMP_POST:
		return SVERBS_BATCH_POST;
	case SV_PUMP_POLL:
		return SVERBS_BATCH_POLL;
	case SV_PUMP_ARM:
		return SVERBS_BATCH_ARM;
	case SV_PUMP_TIMER:
		return SVERBS_BATCH_TIMER;
	default:
		return SVERBS_BATCH_FLUSH;
	}
}

/*
 * Whether the queued work may wait for a bigger batch: all of it of levels
 * that may be held, (as Nagle's rule for TCP) the QP still has WQEs in
 * flight, and the application can still post.  A doorbell on an idle QP
 * starts the wire at once, and a program that waits for each WR before
 * posting the next (ping-pong) would only wait for nothing; while the QP is
 * busy, a held WR mostly waits behind the work ahead of it anyway.  With
 * every slot taken the poster must wait for a completion before its next
 * WR (a closed loop at the send queue's depth): no bigger batch can form,
 * so holding would only stall it.
 */
static bool holdable(const struct sverbs_qp *sqp)
{
	return sqp->fence.head == SV_NONE && !sqp->queued_no_hold &&
	       sqp->inflight_wqes && sqp->nfree && !sqp->hw_err && !sqp->dead;
}

/*
 * The end of a post: unlock, then arm the budget's timer for a hold that
 * began.  Arming may wake the timer thread (a system call, a preemption
 * point); a poster preempted there while holding the QP lock would keep the
 * timer from ringing the held WRs until it ran again (milliseconds when
 * threads outnumber cores).
 */
void sv_qp_post_unlock(struct sverbs_qp *sqp)
{
	uint64_t deadline = sqp->arm_deadline;

	sqp->arm_deadline = 0;
	pthread_spin_unlock(&sqp->lock);
	if (deadline)
		sverbs_timer_arm(&sqp->timer, deadline);
	/* headroom this post gave back, while another QP waited for it */
	sv_cq_kick(sqp->scq);
}

void sv_qp_unhold(struct sverbs_qp *sqp)
{
	if (sqp->held) {
		sqp->held = false;
		sv_cq_held(sqp->scq, sqp, false);
		/* nothing for the timer thread to do: do not wake the lock */
		sqp->arm_deadline = 0;
		sverbs_timer_disarm(&sqp->timer);
	}
}

/*
 * Whether this round's chain goes to the hardware now (batch/ decides;
 * without a budget always).  Holding leaves the work queued: the timer is
 * armed for the deadline, and poll, arm and modify always ring.
 */
static bool sv_ring_now(struct sverbs_qp *sqp, enum sv_pump_why why,
			uint64_t *now)
{
	uint64_t deadline = 0;

	if (!sqp->batch->budget_ns)
		return true;
	/* one clock read per posted WR: the post's pump reuses the arrival's */
	*now = why == SV_PUMP_POST && sqp->arrival_ns ? sqp->arrival_ns
						      : sverbs_now_ns();
	sqp->arrival_ns = 0;
	if (sverbs_batch_decide(sqp->batch, batch_reason(why), sqp->queued,
				holdable(sqp), sqp->hold_since, *now,
				&deadline) == SVERBS_BATCH_RING) {
		/* the hold ends here, even if the window keeps WRs back */
		if (sqp->held && *now - sqp->held_at + 1 > sqp->held_wait)
			sqp->held_wait = *now - sqp->held_at + 1;
		sv_qp_unhold(sqp);
		return true;
	}
	if (!sqp->held) {
		/* the deadline stays put while the hold lasts */
		sqp->held = true;
		sqp->held_at = *now;
		sv_cq_held(sqp->scq, sqp, true);
		sqp->arm_deadline = deadline; /* armed once the lock is free */
	} else if (sverbs_timer_orphaned()) {
		/* a child of fork(): the hold's deadline has no thread yet */
		sqp->arm_deadline = deadline;
	}
	return false;
}

/* After a round rang n WQEs: batching state and counters. */
static void batch_rang(struct sverbs_qp *sqp, uint32_t n, uint64_t now)
{
	/* a held batch reports the delay holding added (not window waits) */
	sverbs_batch_rang(sqp->batch, n, sqp->held_wait,
			  sqp->held_wait ? now - sqp->held_wait + 1
					 : sqp->hold_since,
			  now);
	sqp->held_wait = 0;
	if (!sqp->cfg.batch)
		sqp->batch->stats.doorbells += n - 1; /* one per WQE */
	sv_qp_unhold(sqp);
	/* what the window kept back has waited since now */
	sqp->hold_since = now;
}

/*
 * The adapter's post_send for this round's chain: the whole chain with one
 * doorbell, or (batch = off) one doorbell per WQE, for comparison.
 */
static int adapter_post(struct sverbs_qp *sqp, uint32_t n,
			struct ibv_send_wr **bad)
{
	struct ibv_send_wr *next;
	uint32_t i;
	int ret = 0, err;

	if (sqp->cfg.batch)
		return sqp->ad->post_send(sqp->qp, sqp->chain, bad);
	for (i = 0; i < n; i++) {
		next = sqp->chain[i].next;
		sqp->chain[i].next = NULL;
		err = sqp->ad->post_send(sqp->qp, &sqp->chain[i], bad);
		sqp->chain[i].next = next;
		/* no bad_wr: this one was taken (its doorbell failed) */
		if (err && !ret)
			ret = err;
		if (err && *bad)
			break;
	}
	return ret;
}

/*
 * The provider refused for good (not a full send queue) the WQE of slot s
 * that the layer handed over, after the post call of its WR had returned
 * success.  The error would refuse it again forever and stall the QP behind
 * it: the WR completes with IBV_WC_LOC_QP_OP_ERR (vendor_err: the error),
 * signaled or not, through a placeholder in its place (build_refused());
 * what it had handed over already still completes first.  A WR that had
 * already failed (a WQE of it completed in error, and its rest is being
 * handed over to flush) keeps the error it failed with.
 */
static void refuse(struct sverbs_qp *sqp, uint32_t s, int ret)
{
	struct sv_wr *w;

	if (ret < 0)
		ret = -ret;
	if (s == SV_NONE)
		return;
	w = &sqp->slots[s];
	if (w->refused)
		return;
	w->refused = true;
	if (w->status == IBV_WC_SUCCESS) {
		w->status = IBV_WC_LOC_QP_OP_ERR;
		w->vendor_err = (uint32_t)ret;
	}
	sqp->refusals++;
}

static void warn_post_failed(struct sverbs_qp *sqp, int ret)
{
	if (sqp->warned)
		return;
	sqp->warned = true;
	sv_log(sqp->ad, sqp->qp->context, SVERBS_LOG_WARN,
	       "sverbs: QP %u: provider post_send failed (%d); WRs it did "
	       "not take stay queued",
	       sqp->qp_num, ret);
}

static bool sq_full(const struct sverbs_qp *sqp, int err,
		    const struct ibv_send_wr *bad)
{
	return sqp->ad->sq_full && sqp->ad->sq_full(sqp->qp, err, bad);
}

/*
 * Begin a post call.  While it lasts, a WR of the call that the provider
 * refuses when the call's pump hands it over fails the call, as stock
 * fails ibv_post_send: the provider's error, bad_wr at that WR, and that WR
 * and the rest of the list not taken (sv_call_end()).
 */
void sv_call_begin(struct sverbs_qp *sqp)
{
	sqp->call_open = true;
	sqp->call_sync = true;
	sqp->call_whole = false;
	sqp->call_seq = sqp->post_seq;
	sqp->call_bad_seq = UINT64_MAX;
	sqp->call_err = 0;
}

/*
 * Whether the WR of chain[k] (of n), which the provider refused, can fail
 * the post call in progress: it is one of the call's WRs, nothing of it
 * went, and no later WR of the call went ahead of it (a higher level's).
 */
static bool call_refuses(struct sverbs_qp *sqp, uint32_t k, uint32_t n)
{
	const struct sv_wqe *q = sv_wqe_at(sqp, sqp->seq_next - n + k);
	const struct sv_wr *w;
	uint32_t i, s;

	if (!sqp->call_open || !sqp->call_sync || q->slot == SV_NONE ||
	    q->start.off)
		return false;
	w = &sqp->slots[q->slot];
	if (w->refused || w->post_seq < sqp->call_seq)
		return false;
	/* all or nothing: once a WR of the batch went, none fails it */
	if (sqp->call_whole && w->post_seq != sqp->call_seq)
		return false;
	for (i = 0; i < k; i++) {
		s = sv_wqe_at(sqp, sqp->seq_next - n + i)->slot;
		if (s != SV_NONE && sqp->slots[s].post_seq > w->post_seq)
			return false;
	}
	return true;
}

/* Cut FIFO f before its first WR posted at seq or later. */
static uint32_t fifo_cut(struct sverbs_qp *sqp, struct sv_fifo *f, uint64_t seq,
			 bool fence)
{
	uint32_t s = f->head, prev = SV_NONE;

	while (s != SV_NONE && sqp->slots[s].post_seq < seq) {
		prev = s;
		s = *sv_fifo_link(sqp, s, fence);
	}
	if (prev == SV_NONE)
		f->head = SV_NONE;
	else
		*sv_fifo_link(sqp, prev, fence) = SV_NONE;
	f->tail = prev;
	return s;
}

/*
 * Take the WRs posted at seq or later back out of the queue: a post call
 * failed at the first of them.  None of them went to the hardware (see
 * call_refuses()); being the latest WRs, they are the tail of their FIFOs.
 */
static void unpost_from(struct sverbs_qp *sqp, uint64_t seq)
{
	uint32_t s, next;
	int l;

	fifo_cut(sqp, &sqp->fence, seq, true);
	for (l = 0; l < SVERBS_NUM_PRIO; l++) {
		for (s = fifo_cut(sqp, &sqp->level[l], seq, false);
		     s != SV_NONE; s = next) {
			next = sqp->slots[s].next;
			sqp->queued--;
			sqp->queued_no_hold -= sqp->slots[s].no_hold;
			sv_slot_free(sqp, s);
		}
	}
	sqp->app_wrs -= sqp->post_seq - seq;
	sqp->post_seq = seq;
}

/*
 * End a post call: the error it returns (0: none).  *bad_idx is the index
 * in the call of the first WR the provider refused (then taken back out,
 * with every later one), or UINT64_MAX when the provider took every WR it
 * was handed (an error then is the doorbell's, as rxe's for a QP not in
 * RTS: stock returns it with no bad_wr).
 */
/*
 * The call failed at the doorbell after the provider took its WRs: the
 * application holds them not posted.  As with stock, they run if a later
 * doorbell rings (and then complete), but a destroy or reset makes up no
 * flush completion for them.
 */
static void call_no_flush(struct sverbs_qp *sqp)
{
	uint32_t i;

	for (i = 0; i < sqp->cap; i++)
		if (sqp->slots[i].state != SV_WR_FREE &&
		    sqp->slots[i].state != SV_WR_BUILD &&
		    sqp->slots[i].post_seq >= sqp->call_seq)
			sqp->slots[i].no_flush = true;
}

int sv_call_end(struct sverbs_qp *sqp, uint64_t *bad_idx)
{
	*bad_idx = UINT64_MAX;
	sqp->call_open = false;
	if (sqp->call_bad_seq == UINT64_MAX) {
		if (sqp->call_err)
			call_no_flush(sqp);
		return sqp->call_err;
	}
	*bad_idx = sqp->call_bad_seq - sqp->call_seq;
	unpost_from(sqp, sqp->call_bad_seq);
	/* what the refused WR's round rolled back (earlier WRs) goes now */
	sv_qp_pump(sqp, SV_PUMP_POST);
	return sqp->call_err;
}

/* One chain, one doorbell.  Returns how many WQEs the provider took. */
static uint32_t ring_doorbell(struct sverbs_qp *sqp, uint32_t n,
			      uint32_t unsig_wqes, uint64_t unsig_bytes)
{
	struct ibv_send_wr *bad = NULL;
	bool full, sync;
	uint64_t seq;
	uint32_t k, s;
	int ret;

	ret = adapter_post(sqp, n, &bad);
	sqp->db_failed = false;
	if (!ret)
		return n;
	if (ret < 0)
		ret = -ret;
	/* no bad_wr: the provider took the WQEs (rxe: doorbell failed) */
	if (!bad || bad < sqp->chain || bad >= sqp->chain + n) {
		sqp->db_failed = true;
		/* the post call returns it; else only the log tells */
		if (!sqp->call_open)
			warn_post_failed(sqp, ret);
		else if (!sqp->call_err)
			sqp->call_err = ret;
		return n;
	}
	k = (uint32_t)(bad - sqp->chain);
	s = sv_wqe_at(sqp, sqp->seq_next - n + k)->slot;
	full = sq_full(sqp, ret, bad);
	sync = call_refuses(sqp, k, n);
	if (!full && !sync)
		refuse(sqp, s, ret);
	rollback(sqp, k, n, unsig_wqes, unsig_bytes);
	/*
	 * A full send queue with nothing of the layer's in flight that will
	 * report (what fills it was posted in pass-through, unsignaled): no
	 * completion of ours will pump the QP.  A WR of the post call fails
	 * it with the provider's error, as stock; a WR accepted before waits
	 * for the next poll of the CQ, which retries as when waiting for
	 * headroom.
	 */
	if (full && sqp->inflight_sig)
		sync = false;
	if (!sync)
		warn_post_failed(sqp, ret);
	if (sync) {
		seq = sqp->slots[s].post_seq;
		if (seq < sqp->call_bad_seq) {
			sqp->call_bad_seq = seq;
			sqp->call_err = ret;
		}
	} else if (full && !sqp->inflight_sig) {
		sv_hr_wait(sqp->scq, sqp);
	}
	return k;
}

#define SV_REFUSED_ROUNDS 4

/* The pump's rounds (an empty queue pays for none of their frame). */
static __attribute__((noinline)) void pump_queued(struct sverbs_qp *sqp,
						  enum sv_pump_why why)
{
	uint32_t unsig_wqes = sqp->unsig_wqes, n = 0, s, refusals, rounds = 0;
	uint64_t unsig_bytes = sqp->unsig_bytes;
	uint64_t bytes0 = sqp->inflight_bytes, now = 0;
	bool idle = !sqp->inflight_wqes;

	if (!sv_ring_now(sqp, why, &now))
		return;
round:
	refusals = sqp->refusals;
	while (sqp->queued) {
		s = pick(sqp, n);
		if (s == SV_NONE || !build_wqe(sqp, s, n))
			break;
		n++;
	}
	if (!n)
		return;
	if (sqp->queued)
		signal_last(sqp, n);
	n = ring_doorbell(sqp, n, unsig_wqes, unsig_bytes);
	if (n)
		batch_rang(sqp, n, now);
	/* a WR refused for good goes again at once, as its nop */
	if (sqp->refusals != refusals && rounds++ < SV_REFUSED_ROUNDS) {
		/* what went in the round before may follow a WR of the call */
		sqp->call_sync = false;
		unsig_wqes = sqp->unsig_wqes;
		unsig_bytes = sqp->unsig_bytes;
		n = 0;
		goto round;
	}
	if (why == SV_PUMP_POST && sqp->batch->budget_ns)
		sverbs_batch_returned(sqp->batch, sverbs_now_ns());
	if (idle)
		sv_slicer_busy(&sqp->slicer, sqp->inflight_bytes - bytes0);
}

void sv_qp_pump(struct sverbs_qp *sqp, enum sv_pump_why why)
{
	if (sqp->queued) {
		pump_queued(sqp, why);
		return;
	}
	if (sqp->nop_owed)
		sv_post_nop(sqp);
	sv_qp_unhold(sqp);
	sqp->arrival_ns = 0;
}

/*
 * The lone-WR path.  A single WR posted to an empty software queue of a QP
 * that neither schedules (no slicing, no window) nor batches with a budget
 * would leave in a pump round of its own, whole, at once.  It goes to the
 * adapter straight from the application's ibv_send_wr instead (the provider
 * copies its SGEs and inline data as stock does), and its slot keeps only
 * what its completion needs: the same WQE, wr_id and signaling as the pump
 * would give it, without copying the WR into the slot and again into the
 * chain.  Returns 0 when it went, -1 when it takes the queue instead, or
 * the provider's error when the provider refused it: then, as with stock,
 * ibv_post_send fails with that error and bad_wr pointing at it (a doorbell
 * that failed after the provider took the WQE counts as taken, as for a
 * chain; see ring_doorbell()).
 */
int sv_post_direct(struct sverbs_qp *sqp, uint32_t s,
		   const struct ibv_send_wr *wr)
{
	unsigned int flags = wr->send_flags;
	struct ibv_send_wr c, *bad = NULL;
	struct sv_wr *w = &sqp->slots[s];
	bool app_sig, sig, cost, idle = !sqp->inflight_wqes;
	uint64_t len;
	int ret;
	struct sv_wqe *q;
	uint8_t prio, seen;

	if (sqp->scheduled || sqp->batch->budget_ns || sqp->hw_err ||
	    sqp->pt_inflight || sqp->inflight_wqes >= sqp->depth ||
	    (flags & IBV_SEND_FENCE) || sverbs_prio_of(flags) >= 0)
		return -1;
	len = sv_sge_total(wr->sg_list, wr->num_sge);
	prio = sv_wr_prio(sqp, wr->opcode, flags, len);
	seen = sqp->levels_seen | (uint8_t)(1u << prio);
	if (seen & (seen - 1))
		return -1; /* a second level: scheduling begins (queue) */
	app_sig = sv_wr_app_signaled(sqp, flags);
	sig = app_sig || sqp->unsig_wqes + 1 >= sig_every(sqp);
	cost = sig && !app_sig;
	if (cost && !sv_hr_take(sqp->scq))
		return -1;

	c = *wr;
	c.next = NULL;
	c.wr_id = sqp->seq_next;
	c.send_flags = flags & ~(SVERBS_PRIO_MASK | IBV_SEND_SIGNALED);
	if (sig)
		c.send_flags |= IBV_SEND_SIGNALED;
	ret = sqp->ad->post_send(sqp->qp, &c, &bad);
	if (ret && bad) {
		if (cost)
			sv_hr_give(sqp->scq, 1);
		return ret < 0 ? -ret : ret;
	}
	/* taken, then the doorbell failed: the call returns it */
	sqp->db_failed = ret != 0;
	if (ret && !sqp->call_err)
		sqp->call_err = ret < 0 ? -ret : ret;

	w->wr.wr_id = wr->wr_id;
	w->wr.opcode = wr->opcode;
	w->len = len;
	sv_wr_stamp(sqp, w, flags, prio);
	w->state = SV_WR_POSTED;
	sqp->levels_seen = seen;

	q = wqe_new(sqp, s, len, true, sig, cost);
	w->cur.off = len;
	sv_wqe_account(sqp, q);
	sqp->seq_next++;
	sverbs_batch_rang(sqp->batch, 1, false, 0, 0);
	if (idle)
		sv_slicer_busy(&sqp->slicer, len);
	return 0;
}

/*
 * The hardware QP is in error and the WQEs in flight end unsignaled: post
 * the provider's no-op, signaled (flushed, never executed), so that a
 * completion retires them.
 */
void sv_post_nop(struct sverbs_qp *sqp)
{
	struct ibv_send_wr nop = {}, *bad = NULL;
	struct sv_wqe *q;
	bool reserved = false;

	sqp->nop_owed = false;
	if (!sqp->inflight_wqes || sv_wqe_at(sqp, sqp->seq_next - 1)->signaled)
		return;
	/*
	 * Without room or headroom it is owed: the QP's next pump posts it,
	 * when a completion makes room (its CQEs pump it: translate())
	 * or headroom comes back (the waiting list pumps it).
	 */
	sqp->nop_owed = true;
	if (sqp->inflight_wqes >= sqp->cap)
		return;
	if (!sqp->reserved_busy)
		reserved = sqp->reserved_busy = true;
	else if (!sv_hr_take_or_wait(sqp->scq, sqp))
		return;
	nop_wr(sqp, &nop, sqp->seq_next);
	if (sqp->ad->post_send(sqp->qp, &nop, &bad)) {
		if (reserved)
			sqp->reserved_busy = false;
		else
			sv_hr_give(sqp->scq, 1);
		return;
	}
	sqp->nop_owed = false;
	q = sv_wqe_at(sqp, sqp->seq_next++);
	memset(q, 0, sizeof(*q));
	q->slot = SV_NONE;
	q->final = true;
	q->signaled = true;
	q->reserved = reserved;
	q->cost = !reserved;
	sv_wqe_account(sqp, q);
}
