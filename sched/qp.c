// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-QP scheduling beneath ibv_post_send(): the software queue, the slicer
 * and the pump that hands WQEs to the hardware, and retirement of WQEs when
 * their completions come back.
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
 *       half the window, or the unsignaled WQEs reach half the depth: so
 *       whenever the window or the SQ is full, a signaled WQE is in flight
 *       whose completion frees at least half of it;
 *   (c) it is the last slice of a WR cut into several;
 *   (d) it is the last WQE of a round after which work is still queued (a
 *       QP's one spare headroom unit pays for it if it costs one);
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
 * unsignaled, a signaled zero-length nop follows them so that their space
 * is reclaimed even if the hardware reports only signaled flushes.  A
 * modify to ERR does the same, except that WQEs in flight keep the status
 * the hardware gives them.  A modify to RESET and a destroy complete every
 * outstanding WR with IBV_WC_WR_FLUSH_ERR at once (the hardware forgets
 * them), through the CQ's ready ring.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define SV_UNSUPPORTED_SEND_OPS                      \
	(IBV_QP_EX_WITH_TSO | IBV_QP_EX_WITH_FLUSH | \
	 IBV_QP_EX_WITH_ATOMIC_WRITE)

/* ------------------------------------------------------------ slots, FIFOs */

uint32_t sv_slot_alloc(struct sverbs_qp *sqp)
{
	uint32_t s = sqp->free_head;

	if (s == SV_NONE)
		return SV_NONE;
	sqp->free_head = sqp->slots[s].next;
	sqp->nfree--;
	sqp->slots[s].next = SV_NONE;
	sqp->slots[s].fence_next = SV_NONE;
	sqp->slots[s].state = SV_WR_BUILD;
	return s;
}

void sv_slot_free(struct sverbs_qp *sqp, uint32_t s)
{
	sqp->slots[s].state = SV_WR_FREE;
	sqp->slots[s].next = sqp->free_head;
	sqp->free_head = s;
	sqp->nfree++;
}

static uint32_t *fifo_link(struct sverbs_qp *sqp, uint32_t s, bool fence)
{
	return fence ? &sqp->slots[s].fence_next : &sqp->slots[s].next;
}

static void fifo_push(struct sverbs_qp *sqp, struct sv_fifo *f, uint32_t s,
		      bool fence)
{
	*fifo_link(sqp, s, fence) = SV_NONE;
	if (f->tail == SV_NONE)
		f->head = s;
	else
		*fifo_link(sqp, f->tail, fence) = s;
	f->tail = s;
}

static void fifo_push_front(struct sverbs_qp *sqp, struct sv_fifo *f,
			    uint32_t s, bool fence)
{
	*fifo_link(sqp, s, fence) = f->head;
	f->head = s;
	if (f->tail == SV_NONE)
		f->tail = s;
}

static uint32_t fifo_pop(struct sverbs_qp *sqp, struct sv_fifo *f, bool fence)
{
	uint32_t s = f->head;

	if (s == SV_NONE)
		return SV_NONE;
	f->head = *fifo_link(sqp, s, fence);
	if (f->head == SV_NONE)
		f->tail = SV_NONE;
	return s;
}

/* A WR enters (front: back to the head of) or leaves its level FIFO. */
static void level_in(struct sverbs_qp *sqp, uint32_t s, bool front)
{
	struct sv_wr *w = &sqp->slots[s];

	if (front)
		fifo_push_front(sqp, &sqp->level[w->prio], s, false);
	else
		fifo_push(sqp, &sqp->level[w->prio], s, false);
	w->state = SV_WR_QUEUED;
	sqp->queued++;
	sqp->queued_firm += w->firm;
}

/* s is the head of its level: every level is FIFO and s leaves first */
static void level_out(struct sverbs_qp *sqp, uint32_t s)
{
	struct sv_wr *w = &sqp->slots[s];

	fifo_pop(sqp, &sqp->level[w->prio], false);
	sqp->queued--;
	sqp->queued_firm -= w->firm;
}

/* ------------------------------------------------------------ accepting WRs */

static bool opcode_ok(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return true;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return true; /* managed QPs are RC */
	default:
		return false;
	}
}

static uint64_t sge_total(const struct ibv_sge *sge, int n)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sge[i].length;
	return len;
}

/* Stock's synchronous checks: the same errors, at post time. */
static int wr_check(const struct sverbs_qp *sqp, const struct ibv_send_wr *wr)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > sqp->max_sge_app)
		return EINVAL;
	if (!opcode_ok(wr->opcode))
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    sge_total(wr->sg_list, wr->num_sge) > sqp->max_inline)
		return EINVAL;
	/*
	 * Atomics act on an aligned 8-byte word (IB spec 9.4.5): a WR that
	 * breaks this would be refused by the provider only when the layer
	 * hands it over, too late for the synchronous error stock gives.
	 */
	if ((wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) &&
	    ((wr->wr.atomic.remote_addr & 7) ||
	     sge_total(wr->sg_list, wr->num_sge) < 8))
		return EINVAL;
	return 0;
}

/* Copy an application WR into slot s (its SGEs, or its inline data). */
static void wr_load(struct sverbs_qp *sqp, uint32_t s,
		    const struct ibv_send_wr *wr)
{
	struct sv_wr *w = &sqp->slots[s];
	uint64_t off = 0;
	int i;

	w->wr = *wr;
	w->wr.next = NULL;
	w->wr.sg_list = w->sge;
	if (!(wr->send_flags & IBV_SEND_INLINE)) {
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list,
			       sizeof(*w->sge) * wr->num_sge);
		w->len = sge_total(w->sge, wr->num_sge);
		return;
	}
	for (i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		off += wr->sg_list[i].length;
	}
	w->len = off;
	w->sge[0].addr = (uintptr_t)w->inl;
	w->sge[0].length = (uint32_t)off;
	w->sge[0].lkey = 0;
	w->wr.num_sge = off ? 1 : 0;
}

/* The level a WR states, or the process default. */
static uint8_t wr_base_prio(const struct sverbs_qp *sqp, unsigned int flags)
{
	int p = sverbs_prio_of(flags);

	if (p >= 0)
		return (uint8_t)p;
	if (sqp->cfg.default_prio >= SVERBS_NUM_PRIO)
		return SVERBS_PRIO_LOWEST;
	return (uint8_t)sqp->cfg.default_prio;
}

/*
 * Whether the peer sees the WR arrive (a receive completion): it announces
 * the data written before it, so it must not overtake that data.
 */
static bool peer_visible(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_SEND_WITH_INV || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/*
 * The level it is scheduled at: the size policy lifts small unmarked WRs,
 * except those the peer sees (a SEND lifted past earlier WRITEs would let
 * the peer see the message before the data it announces).
 */
static uint8_t wr_prio(const struct sverbs_qp *sqp, enum ibv_wr_opcode op,
		       unsigned int flags, uint64_t len)
{
	if (sverbs_prio_of(flags) < 0 && sqp->cfg.small_msg_bytes &&
	    len <= sqp->cfg.small_msg_bytes && !peer_visible(op))
		return SVERBS_PRIO_HIGHEST;
	return wr_base_prio(sqp, flags);
}

/*
 * Whether budgeted batching must not hold the WR: its stated (or default)
 * level is not in batch_levels.  The size policy's lift to level 0 is about
 * overtaking queued bulk, not about urgency: small unmarked WRs are exactly
 * what batching is for, so they stay holdable at their base level.
 */
static bool wr_firm(const struct sverbs_qp *sqp, unsigned int flags)
{
	return !(sqp->cfg.batch_prio_mask & (1u << wr_base_prio(sqp, flags)));
}

/* Budgeted batching only: the clock is read per WR in that mode alone. */
static void batch_arrival(struct sverbs_qp *sqp)
{
	uint64_t now = sverbs_now_ns();

	sverbs_batch_arrival(&sqp->batch, now);
	if (!sqp->queued)
		sqp->hold_since = now;
	sqp->arrival_ns = now; /* the post's pump decides with it */
}

/*
 * Slicing and the window only help a WR overtake another of a lower level;
 * on a QP whose WRs all share one level (perftest, most bulk movers) they
 * would cost WQEs and pipelining for nothing.  So a QP schedules (slices,
 * windows) from the first WR that states a priority or the first WR at a
 * second level, for the rest of its life (or from its first WR with
 * slice_always).  What is in flight by then is not counted in the window:
 * it is already ahead of everything, and its unsignaled tail must not
 * block the window with no completion to come.
 */
static void note_level(struct sverbs_qp *sqp, uint8_t prio, bool stated)
{
	sqp->levels_seen |= (uint8_t)(1u << prio);
	if (stated || (sqp->levels_seen & (sqp->levels_seen - 1)))
		sqp->scheduled = true;
}

static bool wr_app_signaled(const struct sverbs_qp *sqp, unsigned int flags)
{
	return sqp->sig_all || (flags & IBV_SEND_SIGNALED);
}

/*
 * The state every accepted WR starts with, whichever way it goes: queued
 * (sv_wr_commit()) or the lone-WR path (post_direct()).
 */
static void wr_stamp(struct sverbs_qp *sqp, struct sv_wr *w, unsigned int flags,
		     uint8_t prio)
{
	w->prio = prio;
	w->firm = wr_firm(sqp, flags);
	w->app_signaled = wr_app_signaled(sqp, flags);
	w->fenced = flags & IBV_SEND_FENCE;
	w->post_seq = sqp->post_seq++;
	w->status = IBV_WC_SUCCESS;
	w->vendor_err = 0;
	w->refused = false;
	w->quiet = false;
	memset(&w->cur, 0, sizeof(w->cur));
	sqp->app_wrs++;
}

/*
 * Queue a loaded slot: its level, the priority bits stripped (and nothing
 * else), its place in posting order.  The length of a non-inline WR is
 * taken from its SGEs here.
 */
void sv_wr_commit(struct sverbs_qp *sqp, uint32_t s)
{
	struct sv_wr *w = &sqp->slots[s];
	unsigned int flags = w->wr.send_flags;

	if (!(flags & IBV_SEND_INLINE))
		w->len = sge_total(w->sge, w->wr.num_sge);
	wr_stamp(sqp, w, flags, wr_prio(sqp, w->wr.opcode, flags, w->len));
	if (!sqp->scheduled)
		note_level(sqp, w->prio, sverbs_prio_of(flags) >= 0);
	w->wr.send_flags = flags & ~SVERBS_PRIO_MASK;
	if (sqp->batch.budget_ns)
		batch_arrival(sqp);
	level_in(sqp, s, false);
	if (w->fenced)
		fifo_push(sqp, &sqp->fence, s, true);
}

static int post_direct(struct sverbs_qp *sqp, uint32_t s,
		       const struct ibv_send_wr *wr);

/* Whether a WR of the list states a priority. */
static bool list_states_prio(const struct ibv_send_wr *wr)
{
	for (; wr; wr = wr->next)
		if (wr->send_flags & SVERBS_PRIO_MASK)
			return true;
	return false;
}

/*
 * The QP's first WR that states a priority ends pass-through, for good:
 * from here every WR takes the queue.  WQEs posted in pass-through may
 * still be in flight, unknown to the depth and the window; until a WQE of
 * the layer completes (RC completes in order: all before it is done) the
 * layer keeps one WQE in flight, signaled (see build_wqe()).
 */
void sv_qp_leave_passthrough(struct sverbs_qp *sqp)
{
	sqp->pt_tail = true;
	/* before the first internal WQE: see sverbs_poll_cq()'s fast path */
	atomic_fetch_add(&sqp->scq->layered, 1);
	atomic_store(&sqp->pt, false);
}

/* The idx-th WR of a list. */
static struct ibv_send_wr *wr_nth(struct ibv_send_wr *wr, uint64_t idx)
{
	while (idx-- && wr)
		wr = wr->next;
	return wr;
}

int sverbs_post_send(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	struct ibv_send_wr *first = wr;
	uint64_t idx;
	uint32_t s;
	int err = 0, ret;

	/*
	 * Pass-through: nothing to schedule or hold, so the WRs go to the
	 * provider as they are, with their own wr_ids, no lock and no copy;
	 * the provider checks them and rings once, as stock.
	 */
	if (atomic_load_explicit(&sqp->pt, memory_order_acquire) &&
	    !list_states_prio(wr))
		return sqp->ad->post_send(sqp->qp, wr, bad_wr);
	pthread_spin_lock(&sqp->lock);
	if (atomic_load_explicit(&sqp->pt, memory_order_relaxed))
		sv_qp_leave_passthrough(sqp);
	sv_call_begin(sqp);
	for (; wr; wr = wr->next) {
		err = wr_check(sqp, wr);
		if (err)
			break;
		s = sv_slot_alloc(sqp);
		if (s == SV_NONE) {
			err = ENOMEM;
			break;
		}
		ret = !wr->next && !sqp->queued ? post_direct(sqp, s, wr) : -1;
		if (!ret)
			continue;
		if (ret > 0) {
			sv_slot_free(sqp, s);
			err = ret;
			break;
		}
		wr_load(sqp, s, wr);
		sv_wr_commit(sqp, s);
	}
	if (err)
		*bad_wr = wr;
	sv_qp_pump(sqp, SV_PUMP_POST);
	ret = sv_call_end(sqp, &idx);
	if (idx != UINT64_MAX) {
		/* the provider refused a WR of the list: it and the rest */
		err = ret;
		*bad_wr = wr_nth(first, idx);
	} else if (ret && !err) {
		/* the provider took them, then failed (rxe: the doorbell) */
		err = ret;
		*bad_wr = NULL;
	}
	sv_qp_post_unlock(sqp);
	return err;
}

/* ------------------------------------------------------------ the pump */

static uint64_t window_bytes(const struct sverbs_qp *sqp)
{
	uint32_t k = sqp->cfg.window_slices ? sqp->cfg.window_slices : 1;

	return (uint64_t)k * sv_slice_bytes(&sqp->slicer);
}

static uint32_t sig_every(const struct sverbs_qp *sqp)
{
	return sqp->depth / 2 ? sqp->depth / 2 : 1;
}

static bool sliceable(const struct sv_wr *w)
{
	if (w->wr.send_flags & IBV_SEND_INLINE)
		return false;
	return w->wr.opcode == IBV_WR_RDMA_WRITE ||
	       w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       w->wr.opcode == IBV_WR_RDMA_READ;
}

static struct sv_wqe *wqe_at(struct sverbs_qp *sqp, uint64_t seq)
{
	return &sqp->ring[seq & sqp->ring_mask];
}

static void wqe_account(struct sverbs_qp *sqp, const struct sv_wqe *q)
{
	sqp->inflight_wqes++;
	sqp->inflight_bytes += q->bytes;
	if (q->windowed)
		sqp->windowed_bytes += q->bytes;
	if (q->signaled) {
		sqp->inflight_sig++;
		sqp->unsig_wqes = 0;
		sqp->unsig_bytes = 0;
	} else {
		sqp->unsig_wqes++;
		sqp->unsig_bytes += q->bytes;
	}
}

static void wqe_release(struct sverbs_qp *sqp, struct sv_wqe *q)
{
	sqp->inflight_wqes--;
	sqp->inflight_bytes -= q->bytes;
	if (q->windowed)
		sqp->windowed_bytes -= q->bytes;
	if (q->signaled)
		sqp->inflight_sig--;
	if (q->cost)
		sv_hr_give(sqp->scq, 1);
	if (q->spare)
		sqp->spare_busy = false;
	q->cost = false;
	q->spare = false;
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
	struct sv_wqe *q = wqe_at(sqp, sqp->seq_next);

	memset(q, 0, sizeof(*q));
	q->slot = s;
	q->bytes = (uint32_t)bytes;
	q->start = sqp->slots[s].cur;
	q->final = final;
	q->signaled = sig;
	q->cost = cost;
	return q;
}

/*
 * A WR the provider refused at hand-over (see ring_doorbell()) goes as a
 * signaled zero-length RDMA WRITE in its place: a real completion, in
 * order, through the CQ (events included), which reports the WR's error.
 */
static bool build_refused(struct sverbs_qp *sqp, uint32_t s, uint32_t n)
{
	struct sv_wr *w = &sqp->slots[s];
	struct ibv_send_wr *c = &sqp->chain[n];
	bool cost = !w->app_signaled;
	struct sv_wqe *q;

	if (cost && !sv_hr_take(sqp->scq)) {
		sv_hr_wait(sqp->scq, sqp);
		return false;
	}
	memset(c, 0, sizeof(*c));
	c->wr_id = sqp->seq_next;
	c->opcode = IBV_WR_RDMA_WRITE;
	c->send_flags = IBV_SEND_SIGNALED;
	if (n)
		sqp->chain[n - 1].next = c;
	q = wqe_new(sqp, s, 0, true, true, cost);
	w->cur.off = w->len;
	wqe_dequeue(sqp, s, q);
	wqe_account(sqp, q);
	sqp->seq_next++;
	return true;
}

/* The final WQE of slot s is built: the WR leaves its FIFOs. */
static void wqe_dequeue(struct sverbs_qp *sqp, uint32_t s, struct sv_wqe *q)
{
	struct sv_wr *w = &sqp->slots[s];

	level_out(sqp, s);
	w->state = SV_WR_POSTED;
	q->dequeued = true;
	if (w->fenced && sqp->fence.head == s) {
		fifo_pop(sqp, &sqp->fence, true);
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
	    (sqp->pt_tail && sqp->inflight_wqes && !sqp->db_owed))
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
	sig = retire || sqp->pt_tail || sqp->sig_all || app_final ||
	      sqp->hw_err || (final && !first) ||
	      sqp->unsig_bytes + bytes >= window / 2 ||
	      sqp->unsig_wqes + 1 >= sig_every(sqp);
	cost = !final || (sig && !app_final);
	if (cost && !sv_hr_take(sqp->scq)) {
		sv_hr_wait(sqp->scq, sqp);
		return false;
	}

	q = wqe_new(sqp, s, bytes, final, sig, cost);
	q->windowed = window != UINT64_MAX;
	fill_wqe(sqp, n, w, bytes, sig);
	if (final)
		wqe_dequeue(sqp, s, q);
	wqe_account(sqp, q);
	sqp->seq_next++;
	return true;
}

/* Rule (d): the round leaves work queued; its last WQE must report. */
static void signal_last(struct sverbs_qp *sqp, uint32_t n)
{
	struct sv_wqe *q = wqe_at(sqp, sqp->seq_next - 1);

	if (q->signaled)
		return;
	if (!q->cost) {
		if (sqp->spare_busy)
			return; /* the spare's signaled WQE is in flight */
		sqp->spare_busy = true;
		q->spare = true;
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
		q = wqe_at(sqp, seq0 + i);
		w = &sqp->slots[q->slot];
		wqe_release(sqp, q);
		w->cur = q->start;
		if (q->dequeued)
			level_in(sqp, q->slot, true);
		if (q->fence_pop)
			fifo_push_front(sqp, &sqp->fence, q->slot, true);
	}
	sqp->seq_next = seq0 + k;
	sqp->unsig_wqes = unsig_wqes;
	sqp->unsig_bytes = unsig_bytes;
	for (i = 0; i < k; i++) {
		q = wqe_at(sqp, seq0 + i);
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
 * that may be held, and (as Nagle's rule for TCP) the QP still has WQEs in
 * flight.  A doorbell on an idle QP starts the wire at once, and a program
 * that waits for each WR before posting the next (ping-pong) would only
 * wait for nothing; while the QP is busy, a held WR mostly waits behind the
 * work ahead of it anyway.
 */
static bool holdable(const struct sverbs_qp *sqp)
{
	return sqp->fence.head == SV_NONE && !sqp->queued_firm &&
	       sqp->inflight_wqes && !sqp->hw_err && !sqp->dead;
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
}

static void unhold(struct sverbs_qp *sqp)
{
	if (sqp->held) {
		sqp->held = false;
		atomic_fetch_sub(&sqp->scq->held_qps, 1);
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

	if (!sqp->batch.budget_ns)
		return true;
	/* one clock read per posted WR: the post's pump reuses the arrival's */
	*now = why == SV_PUMP_POST && sqp->arrival_ns ? sqp->arrival_ns
						      : sverbs_now_ns();
	sqp->arrival_ns = 0;
	if (sverbs_batch_decide(&sqp->batch, batch_reason(why), sqp->queued,
				holdable(sqp), sqp->hold_since, *now,
				&deadline) == SVERBS_BATCH_RING) {
		/* the hold ends here, even if the window keeps WRs back */
		if (sqp->held && *now - sqp->held_at + 1 > sqp->held_wait)
			sqp->held_wait = *now - sqp->held_at + 1;
		unhold(sqp);
		return true;
	}
	if (!sqp->held) {
		/* the deadline stays put while the hold lasts */
		sqp->held = true;
		sqp->held_at = *now;
		atomic_fetch_add(&sqp->scq->held_qps, 1);
		sqp->arm_deadline = deadline; /* armed once the lock is free */
	}
	return false;
}

/* After a round rang n WQEs: batching state and counters. */
static void batch_rang(struct sverbs_qp *sqp, uint32_t n, uint64_t now)
{
	/* a held batch reports the delay holding added (not window waits) */
	sverbs_batch_rang(&sqp->batch, n, sqp->held_wait,
			  sqp->held_wait ? now - sqp->held_wait + 1
					 : sqp->hold_since,
			  now);
	sqp->held_wait = 0;
	if (!sqp->cfg.batch)
		sqp->batch.stats.doorbells += n - 1; /* one per WQE */
	unhold(sqp);
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
 * signaled or not, through a nop in its place (build_refused()); what it
 * had handed over already still completes first.
 */
static void refuse(struct sverbs_qp *sqp, uint32_t s, int ret)
{
	struct sv_wr *w;

	if (ret < 0)
		ret = -ret;
	if (s == SV_NONE)
		return;
	w = &sqp->slots[s];
	if (w->refused || w->status != IBV_WC_SUCCESS)
		return;
	w->refused = true;
	w->status = IBV_WC_LOC_QP_OP_ERR;
	w->vendor_err = (uint32_t)ret;
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
	const struct sv_wqe *q = wqe_at(sqp, sqp->seq_next - n + k);
	const struct sv_wr *w;
	uint32_t i, s;

	if (!sqp->call_open || !sqp->call_sync || q->slot == SV_NONE ||
	    q->start.off)
		return false;
	w = &sqp->slots[q->slot];
	if (w->refused || w->post_seq < sqp->call_seq)
		return false;
	for (i = 0; i < k; i++) {
		s = wqe_at(sqp, sqp->seq_next - n + i)->slot;
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
		s = *fifo_link(sqp, s, fence);
	}
	if (prev == SV_NONE)
		f->head = SV_NONE;
	else
		*fifo_link(sqp, prev, fence) = SV_NONE;
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
			sqp->queued_firm -= sqp->slots[s].firm;
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
static void call_quiet(struct sverbs_qp *sqp)
{
	uint32_t i;

	for (i = 0; i < sqp->cap; i++)
		if (sqp->slots[i].state != SV_WR_FREE &&
		    sqp->slots[i].state != SV_WR_BUILD &&
		    sqp->slots[i].post_seq >= sqp->call_seq)
			sqp->slots[i].quiet = true;
}

int sv_call_end(struct sverbs_qp *sqp, uint64_t *bad_idx)
{
	*bad_idx = UINT64_MAX;
	sqp->call_open = false;
	if (sqp->call_bad_seq == UINT64_MAX) {
		if (sqp->call_err)
			call_quiet(sqp);
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
	sqp->db_owed = false;
	if (!ret)
		return n;
	if (ret < 0)
		ret = -ret;
	/* no bad_wr: the provider took the WQEs (rxe: doorbell failed) */
	if (!bad || bad < sqp->chain || bad >= sqp->chain + n) {
		sqp->db_owed = true;
		/* the post call returns it; else only the log tells */
		if (!sqp->call_open)
			warn_post_failed(sqp, ret);
		else if (!sqp->call_err)
			sqp->call_err = ret;
		return n;
	}
	k = (uint32_t)(bad - sqp->chain);
	s = wqe_at(sqp, sqp->seq_next - n + k)->slot;
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

void sv_qp_pump(struct sverbs_qp *sqp, enum sv_pump_why why)
{
	uint32_t unsig_wqes = sqp->unsig_wqes, n = 0, s, refusals, rounds = 0;
	uint64_t unsig_bytes = sqp->unsig_bytes;
	uint64_t bytes0 = sqp->inflight_bytes, now = 0;
	bool idle = !sqp->inflight_wqes;

	if (!sqp->queued) {
		unhold(sqp);
		sqp->arrival_ns = 0;
		return;
	}
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
	if (why == SV_PUMP_POST && sqp->batch.budget_ns)
		sverbs_batch_returned(&sqp->batch, sverbs_now_ns());
	if (idle)
		sv_slicer_busy(&sqp->slicer, sqp->inflight_bytes - bytes0);
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
static int post_direct(struct sverbs_qp *sqp, uint32_t s,
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

	if (sqp->scheduled || sqp->batch.budget_ns || sqp->hw_err ||
	    sqp->pt_tail || sqp->inflight_wqes >= sqp->depth ||
	    (flags & IBV_SEND_FENCE) || sverbs_prio_of(flags) >= 0)
		return -1;
	len = sge_total(wr->sg_list, wr->num_sge);
	prio = wr_prio(sqp, wr->opcode, flags, len);
	seen = sqp->levels_seen | (uint8_t)(1u << prio);
	if (seen & (seen - 1))
		return -1; /* a second level: scheduling begins (queue) */
	app_sig = wr_app_signaled(sqp, flags);
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
	sqp->db_owed = ret != 0;
	if (ret && !sqp->call_err)
		sqp->call_err = ret < 0 ? -ret : ret;

	w->wr.wr_id = wr->wr_id;
	w->wr.opcode = wr->opcode;
	w->len = len;
	wr_stamp(sqp, w, flags, prio);
	w->state = SV_WR_POSTED;
	sqp->levels_seen = seen;

	q = wqe_new(sqp, s, len, true, sig, cost);
	w->cur.off = len;
	wqe_account(sqp, q);
	sqp->seq_next++;
	sverbs_batch_rang(&sqp->batch, 1, false, 0, 0);
	if (idle)
		sv_slicer_busy(&sqp->slicer, len);
	return 0;
}

/* ------------------------------------------------------------ completions */

bool sv_qp_owns(const struct sverbs_qp *sqp, uint64_t wr_id)
{
	return wr_id >= sqp->seq_base && wr_id < sqp->seq_next;
}

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	default:
		return IBV_WC_SEND;
	}
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
		level_out(sqp, s);
		if (sqp->fence.head == s)
			fifo_pop(sqp, &sqp->fence, true);
	}
	if (raw)
		wc = *raw;
	else
		memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr.wr_id;
	wc.status = status;
	if (status != IBV_WC_SUCCESS && w->status == status)
		wc.vendor_err = w->vendor_err;
	wc.opcode = wc_opcode(w->wr.opcode);
	wc.byte_len = (uint32_t)w->len;
	wc.qp_num = sqp->qp_num;
	sv_emit(e, &wc);
	sv_slot_free(sqp, s);
}

/* How a WR ends when its QP is reset or destroyed. */
static enum ibv_wc_status flush_status(const struct sv_wr *w)
{
	return w->refused ? w->status : IBV_WC_WR_FLUSH_ERR;
}

/* A WR flushed by a reset or destroy: its completion, unless quiet. */
static void flush_wr(struct sverbs_qp *sqp, uint32_t s, struct sv_emit *e)
{
	struct sv_wr *w = &sqp->slots[s];

	if (!w->quiet) {
		complete_wr(sqp, s, flush_status(w), NULL, e);
		return;
	}
	if (w->state == SV_WR_QUEUED) {
		level_out(sqp, s);
		if (sqp->fence.head == s)
			fifo_pop(sqp, &sqp->fence, true);
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
		q = wqe_at(sqp, seq);
		wqe_release(sqp, q);
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
 * The hardware QP is in error and the WQEs in flight end unsignaled: post a
 * signaled zero-length nop (flushed, never executed) so that a completion
 * retires them.
 */
static void post_nop(struct sverbs_qp *sqp)
{
	struct ibv_send_wr nop = {}, *bad = NULL;
	struct sv_wqe *q;
	bool spare = false;

	if (!sqp->inflight_wqes || sqp->inflight_wqes >= sqp->cap ||
	    wqe_at(sqp, sqp->seq_next - 1)->signaled)
		return;
	if (!sqp->spare_busy)
		spare = sqp->spare_busy = true;
	else if (!sv_hr_take(sqp->scq))
		return;
	nop.wr_id = sqp->seq_next;
	nop.opcode = IBV_WR_RDMA_WRITE;
	nop.send_flags = IBV_SEND_SIGNALED;
	if (sqp->ad->post_send(sqp->qp, &nop, &bad)) {
		if (spare)
			sqp->spare_busy = false;
		else
			sv_hr_give(sqp->scq, 1);
		return;
	}
	q = wqe_at(sqp, sqp->seq_next++);
	memset(q, 0, sizeof(*q));
	q->slot = SV_NONE;
	q->final = true;
	q->signaled = true;
	q->spare = spare;
	q->cost = !spare;
	wqe_account(sqp, q);
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
	post_nop(sqp);
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

	sqp->pt_tail = false; /* in order: pass-through's WQEs are done */
	while (sqp->seq_head <= s) {
		seq = sqp->seq_head++;
		q = wqe_at(sqp, seq);
		bytes += q->bytes;
		wqe_release(sqp, q);
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
	sqp->pt_tail = false;
	sqp->unsig_wqes = 0;
	sqp->unsig_bytes = 0;
	sv_slicer_idle(&sqp->slicer);
}

/* ------------------------------------------------------------ lifetime */

static void qp_free(struct sverbs_qp *sqp)
{
	free(sqp->chain_sge);
	free(sqp->chain);
	free(sqp->ring);
	if (sqp->slots) {
		free(sqp->slots[0].sge);
		free(sqp->slots[0].inl);
	}
	free(sqp->slots);
	pthread_spin_destroy(&sqp->lock);
	free(sqp);
}

static int qp_alloc(struct sverbs_qp *sqp)
{
	uint32_t i, ring = 1;
	struct ibv_sge *sge;
	uint8_t *inl = NULL;

	while (ring < sqp->cap + 2)
		ring <<= 1;
	sqp->ring_mask = ring - 1;
	sqp->ring = calloc(ring, sizeof(*sqp->ring));
	sqp->slots = calloc(sqp->cap, sizeof(*sqp->slots));
	sqp->chain = calloc(sqp->cap, sizeof(*sqp->chain));
	sqp->chain_sge = calloc((size_t)sqp->cap * sqp->max_sge,
				sizeof(*sqp->chain_sge));
	sge = calloc((size_t)sqp->cap * sqp->max_sge, sizeof(*sge));
	if (sqp->max_inline)
		inl = malloc((size_t)sqp->cap * sqp->max_inline);
	if (!sqp->ring || !sqp->slots || !sqp->chain || !sqp->chain_sge ||
	    !sge || (sqp->max_inline && !inl)) {
		free(sge);
		free(inl);
		return ENOMEM;
	}
	sqp->free_head = SV_NONE;
	for (i = sqp->cap; i-- > 0;) {
		sqp->slots[i].sge = sge + (size_t)i * sqp->max_sge;
		sqp->slots[i].inl =
			inl ? inl + (size_t)i * sqp->max_inline : NULL;
		sv_slot_free(sqp, i);
	}
	return 0;
}

/* ------------------------------------------------------------ lifetime */

/* The budget expired for WRs held on this QP (batch/timer.c's thread). */
#define SV_TIMER_RETRY_NS (5 * 1000)

static void qp_timer_fire(void *arg)
{
	struct sverbs_qp *sqp = arg;

	/*
	 * A busy lock is an application thread in this QP's post, poll,
	 * modify or destroy, each of which rings WRs held past their
	 * deadline; spinning here would only slow it down.  Look again soon
	 * in case the holder was something else (e.g. a stats query).
	 */
	if (pthread_spin_trylock(&sqp->lock)) {
		sverbs_timer_arm(&sqp->timer,
				 sverbs_now_ns() + SV_TIMER_RETRY_NS);
		return;
	}
	sv_qp_pump(sqp, SV_PUMP_TIMER);
	pthread_spin_unlock(&sqp->lock);
}

/* SVERBS_STATS: QPs still alive at exit print their counters then. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sverbs_qp *live_head;
static bool live_atexit;

static void print_stats(struct sverbs_qp *sqp)
{
	struct sverbs_qp_stats st;

	sverbs_qp_get_stats(sqp, &st);
	fprintf(stderr,
		"sverbs: QP %u: %llu WRs, %llu WQEs, %llu doorbells "
		"(%.2f WQEs/doorbell), %llu held, held p99 %.1f us, "
		"slice %u B%s\n",
		sqp->qp_num, (unsigned long long)st.wrs,
		(unsigned long long)st.wqes, (unsigned long long)st.doorbells,
		st.doorbells ? (double)st.wqes / (double)st.doorbells : 0.0,
		(unsigned long long)st.held_wrs, st.held_p99_ns / 1000.0,
		st.slice_bytes,
		st.flags & SVERBS_QP_STATS_PASSTHROUGH
			? " (pass-through: its WRs are not counted)"
			: "");
}

static void print_live_stats(void)
{
	struct sverbs_qp *sqp;

	pthread_mutex_lock(&live_lock);
	for (sqp = live_head; sqp; sqp = sqp->live_next)
		print_stats(sqp);
	pthread_mutex_unlock(&live_lock);
}

static void live_add(struct sverbs_qp *sqp)
{
	if (!sqp->cfg.stats)
		return;
	pthread_mutex_lock(&live_lock);
	if (!live_atexit)
		live_atexit = !atexit(print_live_stats);
	sqp->live_next = live_head;
	live_head = sqp;
	pthread_mutex_unlock(&live_lock);
}

static void live_del(struct sverbs_qp *sqp)
{
	struct sverbs_qp **p;

	if (!sqp->cfg.stats)
		return;
	pthread_mutex_lock(&live_lock);
	for (p = &live_head; *p; p = &(*p)->live_next)
		if (*p == sqp) {
			*p = sqp->live_next;
			break;
		}
	pthread_mutex_unlock(&live_lock);
	print_stats(sqp);
}

void sverbs_qp_get_stats(struct sverbs_qp *sqp, struct sverbs_qp_stats *st)
{
	pthread_spin_lock(&sqp->lock);
	memset(st, 0, sizeof(*st));
	st->wrs = sqp->app_wrs;
	st->wqes = sqp->batch.stats.wrs;
	st->doorbells = sqp->batch.stats.doorbells;
	st->held_wrs = sqp->batch.stats.held_wrs;
	st->held_p99_ns = sverbs_batch_held_quantile(&sqp->batch.stats, 0.99);
	st->slice_bytes = sv_slice_bytes(&sqp->slicer);
	st->batch_budget_ns = sqp->batch.budget_ns;
	if (atomic_load(&sqp->pt))
		st->flags |= SVERBS_QP_STATS_PASSTHROUGH;
	pthread_spin_unlock(&sqp->lock);
}

/*
 * Whether the QP starts in pass-through: only a WR's stated priority will
 * need the layer.  Not when the configuration schedules or holds WRs that
 * state nothing (slice_always, the size policy, a batching budget).
 */
static bool passthrough_ok(const struct sverbs_qp *sqp)
{
	return sqp->cfg.passthrough && !sqp->cfg.slice_always &&
	       !sqp->cfg.small_msg_bytes && !sqp->batch.budget_ns;
}

struct sverbs_qp *sverbs_qp_create(const struct sverbs_adapter *ad,
				   struct ibv_qp *qp, struct sverbs_cq *send_cq,
				   const struct ibv_qp_init_attr_ex *attr,
				   const struct sverbs_config *cfg)
{
	struct sverbs_qp *sqp;
	int l;

	if (!ad || !qp || !send_cq || !attr || !cfg ||
	    !sverbs_config_enabled(cfg) || !attr->cap.max_send_wr)
		return NULL;
	/*
	 * RC only.  The completion rules (in order, acknowledged: a CQE
	 * retires every earlier WQE) are RC's; UC loses a message silently,
	 * so a sliced UC WRITE_WITH_IMM could deliver its immediate without
	 * an earlier slice.  UC, like UD, stays stock (docs/semantics.md).
	 */
	if (qp->qp_type != IBV_QPT_RC)
		return NULL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & SV_UNSUPPORTED_SEND_OPS))
		return NULL;

	sqp = calloc(1, sizeof(*sqp));
	if (!sqp)
		return NULL;
	pthread_spin_init(&sqp->lock, PTHREAD_PROCESS_PRIVATE);
	sqp->ad = ad;
	sqp->qp = qp;
	sqp->scq = send_cq;
	sqp->cfg = *cfg;
	sqp->qp_num = qp->qp_num;
	sqp->qp_type = qp->qp_type;
	sqp->sig_all = attr->sq_sig_all;
	sqp->cap = attr->cap.max_send_wr;
	sqp->depth = sqp->cap > 1 ? sqp->cap - 1 : 1;
	sqp->max_sge_app = attr->cap.max_send_sge;
	sqp->max_sge = sqp->max_sge_app ? sqp->max_sge_app : 1;
	sqp->max_inline = attr->cap.max_inline_data;
	/* (sv_cq_register() sets seq_base: after a predecessor's wr_ids) */
	sqp->seq_base = sqp->seq_head = sqp->seq_next = SV_SEQ_BASE;
	for (l = 0; l < SVERBS_NUM_PRIO; l++)
		sqp->level[l].head = sqp->level[l].tail = SV_NONE;
	sqp->fence.head = sqp->fence.tail = SV_NONE;
	sqp->build.head = sqp->build.tail = SV_NONE;
	sqp->build_cur = SV_NONE;
	sv_slicer_init(&sqp->slicer, cfg);
	sqp->scheduled = cfg->slice_always;
	sverbs_batch_init(&sqp->batch, cfg->batch_budget_us);
	sqp->cfg.batch_prio_mask &= ~(1u << SVERBS_PRIO_HIGHEST);
	if (sqp->batch.budget_ns &&
	    sverbs_timer_add(&sqp->timer, qp_timer_fire, sqp,
			     cfg->batch_linger ? sqp->batch.budget_ns : 0))
		sqp->batch.budget_ns = 0; /* no timer: never hold */
	sqp->timer_on = sqp->batch.budget_ns != 0;
	atomic_init(&sqp->pt, passthrough_ok(sqp));
	if (qp_alloc(sqp) || !sv_cq_register(send_cq, sqp)) {
		if (sqp->timer_on)
			sverbs_timer_del(&sqp->timer);
		qp_free(sqp);
		return NULL;
	}
	if (!atomic_load(&sqp->pt))
		atomic_fetch_add(&send_cq->layered, 1);
	live_add(sqp);
	return sqp;
}

void sverbs_qp_modify_pre(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			  int attr_mask)
{
	/*
	 * Keep real completions the reset would discard (mlx5 cleans the
	 * CQ); a QP in pass-through behaves as stock.
	 */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET &&
	    !atomic_load(&sqp->pt)) {
		pthread_spin_lock(&sqp->scq->lock);
		sv_cq_drain(sqp->scq);
		pthread_spin_unlock(&sqp->scq->lock);
	}
}

void sverbs_qp_modify_post(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			   int attr_mask, int ret)
{
	struct sv_emit e = { .scq = sqp->scq };

	if (ret || !(attr_mask & IBV_QP_STATE))
		return;
	if (attr->qp_state == IBV_QPS_RESET) {
		pthread_spin_lock(&sqp->scq->lock);
		pthread_spin_lock(&sqp->lock);
		sv_qp_flush_all(sqp, &e);
		sqp->dead = false;
		sqp->hw_err = false;
		pthread_spin_unlock(&sqp->lock);
		pthread_spin_unlock(&sqp->scq->lock);
		return;
	}
	pthread_spin_lock(&sqp->lock);
	if (attr->qp_state == IBV_QPS_ERR && !sqp->hw_err) {
		/* the hardware flushes what is in flight; queued WRs follow */
		sqp->hw_err = true;
		post_nop(sqp);
	}
	sv_qp_pump(sqp, SV_PUMP_FLUSH);
	pthread_spin_unlock(&sqp->lock);
}

void sverbs_qp_destroy_pre(struct sverbs_qp *sqp)
{
	struct sverbs_cq *scq = sqp->scq;

	/* no timer may pump a QP the provider is about to destroy */
	if (sqp->timer_on)
		sverbs_timer_del(&sqp->timer);
	pthread_spin_lock(&scq->lock);
	/* in pass-through, stock: the provider cleans its completions */
	if (!atomic_load(&sqp->pt))
		sv_cq_drain(scq);
	pthread_spin_lock(&sqp->lock);
	sv_cq_unlink(scq, sqp);
	pthread_spin_unlock(&sqp->lock);
	pthread_spin_unlock(&scq->lock);
}

void sverbs_qp_destroy_post(struct sverbs_qp *sqp, int ret)
{
	struct sverbs_cq *scq = sqp->scq;
	struct sv_emit e = { .scq = scq };

	if (ret) {
		pthread_spin_lock(&scq->lock);
		sv_cq_relink(scq, sqp);
		pthread_spin_unlock(&scq->lock);
		if (sqp->timer_on &&
		    sverbs_timer_add(&sqp->timer, qp_timer_fire, sqp,
				     sqp->timer.tick_ns)) {
			sqp->timer_on = false;
			sqp->batch.budget_ns = 0;
		}
		return;
	}
	live_del(sqp);
	pthread_spin_lock(&scq->lock);
	pthread_spin_lock(&sqp->lock);
	unhold(sqp);
	sv_qp_flush_all(sqp, &e);
	sv_cq_unregister(scq, sqp);
	pthread_spin_unlock(&sqp->lock);
	pthread_spin_unlock(&scq->lock);
	if (sqp->qpx)
		sv_objmap_remove(sqp->qpx);
	qp_free(sqp);
}
