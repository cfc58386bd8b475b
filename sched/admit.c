// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Admission: what ibv_post_send does with an application WR before any
 * WQE is built.  The synchronous checks stock makes (same errors), the
 * copy into a slot, the WR's level (stated, default, or lifted by the size
 * policy), its place in the level FIFOs and the fence FIFO, and whether
 * the QP leaves pass-through.  Building WQEs from the queue is pump.c's.
 */
#include <errno.h>
#include <string.h>

#include "cq_int.h"
#include "qp_int.h"

/*
 * The opcode rules (see qp_int.h).  Managed QPs are RC: READ and the
 * atomics are carried.  TSO, FLUSH and ATOMIC_WRITE are not: a QP that may
 * post them stays stock.
 */
const struct sv_op_rule sv_op_rules[SV_WR_OPCODES] = {
	[IBV_WR_RDMA_WRITE] = { true, true, false, IBV_WC_RDMA_WRITE },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = { true, true, true, IBV_WC_RDMA_WRITE },
	[IBV_WR_SEND] = { true, false, true, IBV_WC_SEND },
	[IBV_WR_SEND_WITH_IMM] = { true, false, true, IBV_WC_SEND },
	[IBV_WR_SEND_WITH_INV] = { true, false, true, IBV_WC_SEND },
	[IBV_WR_RDMA_READ] = { true, true, false, IBV_WC_RDMA_READ },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = { true, false, false, IBV_WC_COMP_SWAP },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = { true, false, false,
					  IBV_WC_FETCH_ADD },
	[IBV_WR_LOCAL_INV] = { true, false, false, IBV_WC_LOCAL_INV },
	[IBV_WR_BIND_MW] = { true, false, false, IBV_WC_BIND_MW },
	[IBV_WR_TSO] = { false, false, false, IBV_WC_TSO },
	[IBV_WR_DRIVER1] = { false, false, false, IBV_WC_SEND },
	[IBV_WR_FLUSH] = { false, false, false, IBV_WC_FLUSH },
	[IBV_WR_ATOMIC_WRITE] = { false, false, false, IBV_WC_ATOMIC_WRITE },
};

/*
 * Stock's synchronous checks: the same errors, at post time.  Which errno a
 * WR beyond the QP's limits gets is the provider's (sv_limit_err()).
 */
static int wr_check(const struct sverbs_qp *sqp, const struct ibv_send_wr *wr)
{
	if (wr->num_sge < 0)
		return EINVAL;
	if ((uint32_t)wr->num_sge > sqp->max_sge_app)
		return sv_limit_err(sqp, SVERBS_LIMIT_SGE, false);
	if (!sv_op_rule(wr->opcode)->carried)
		return EINVAL;
	/* the layer's own wr_ids (sverbs.h) */
	if (sverbs_wr_id_reserved(wr->wr_id))
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    sv_sge_total(wr->sg_list, wr->num_sge) > sqp->max_inline)
		return sv_limit_err(sqp, SVERBS_LIMIT_INLINE, false);
	/*
	 * Atomics act on an aligned 8-byte word (IB spec 9.4.5): a WR that
	 * breaks this would be refused by the provider only when the layer
	 * hands it over, too late for the synchronous error stock gives.
	 */
	if ((wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) &&
	    ((wr->wr.atomic.remote_addr & 7) ||
	     sv_sge_total(wr->sg_list, wr->num_sge) < 8))
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
		w->len = sv_sge_total(w->sge, wr->num_sge);
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
 * The level it is scheduled at: the size policy lifts small unmarked WRs,
 * except those the peer sees (a SEND lifted past earlier WRITEs would let
 * the peer see the message before the data it announces).
 */
uint8_t sv_wr_prio(const struct sverbs_qp *sqp, enum ibv_wr_opcode op,
		   unsigned int flags, uint64_t len)
{
	if (sverbs_prio_of(flags) < 0 && sqp->cfg.small_msg_bytes &&
	    len <= sqp->cfg.small_msg_bytes && !sv_op_rule(op)->peer_visible)
		return SVERBS_PRIO_HIGHEST;
	return wr_base_prio(sqp, flags);
}

/*
 * Whether budgeted batching must not hold the WR: its stated (or default)
 * level is not in batch_levels.  The size policy's lift to level 0 is about
 * overtaking queued bulk, not about urgency: small unmarked WRs are exactly
 * what batching is for, so they stay holdable at their base level.
 */
static bool wr_no_hold(const struct sverbs_qp *sqp, unsigned int flags)
{
	return !(sqp->cfg.batch_prio_mask & (1u << wr_base_prio(sqp, flags)));
}

/* Budgeted batching only: the clock is read per WR in that mode alone. */
static void batch_arrival(struct sverbs_qp *sqp)
{
	uint64_t now = sverbs_now_ns();

	sverbs_batch_arrival(sqp->batch, now);
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

bool sv_wr_app_signaled(const struct sverbs_qp *sqp, unsigned int flags)
{
	return sqp->sig_all || (flags & IBV_SEND_SIGNALED);
}

/*
 * The state every accepted WR starts with, whichever way it goes: queued
 * (sv_wr_commit()) or the lone-WR path (sv_post_direct()).
 */
void sv_wr_stamp(struct sverbs_qp *sqp, struct sv_wr *w, unsigned int flags,
		 uint8_t prio)
{
	w->prio = prio;
	w->no_hold = wr_no_hold(sqp, flags);
	w->app_signaled = sv_wr_app_signaled(sqp, flags);
	w->fenced = flags & IBV_SEND_FENCE;
	w->post_seq = sqp->post_seq++;
	w->status = IBV_WC_SUCCESS;
	w->vendor_err = 0;
	w->refused = false;
	w->no_flush = false;
	memset(&w->cur, 0, sizeof(w->cur));
	sqp->app_wrs++;
	sv_slicer_arrive(&sqp->slicer, prio);
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
		w->len = sv_sge_total(w->sge, w->wr.num_sge);
	sv_wr_stamp(sqp, w, flags,
		    sv_wr_prio(sqp, w->wr.opcode, flags, w->len));
	if (!sqp->scheduled)
		note_level(sqp, w->prio, sverbs_prio_of(flags) >= 0);
	w->wr.send_flags = flags & ~SVERBS_PRIO_MASK;
	if (sqp->batch->budget_ns)
		batch_arrival(sqp);
	sv_level_in(sqp, s, false);
	if (w->fenced)
		sv_fifo_push(sqp, &sqp->fence, s, true);
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
	sqp->pt_inflight = true;
	/* before the first internal WQE: see sverbs_poll_cq()'s fast path */
	sv_cq_layered(sqp->scq);
	sv_qp_set_pt(sqp, SVERBS_PT_OFF);
}

/* The idx-th WR of a list. */
static struct ibv_send_wr *wr_nth(struct ibv_send_wr *wr, uint64_t idx)
{
	while (idx-- && wr)
		wr = wr->next;
	return wr;
}

/*
 * A post that stays in pass-through (a list with a reserved wr_id is
 * refused here, found by the scan); a timed watched post's next gap counts
 * from its return.
 */
static int post_stock(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr, unsigned int found,
		      uint64_t timed)
{
	int ret;

	if (found & SVERBS_SCAN_RESERVED)
		return sverbs_post_send_checked(sqp->qp, wr, bad_wr,
						sqp->ad->post_send);
	ret = sqp->ad->post_send(sqp->qp, wr, bad_wr);
	if (timed)
		sv_watch_returned(sqp);
	return ret;
}

/*
 * The queue's post: the WRs into slots and levels, the pump, the call's
 * outcome (pass-through pays for none of its frame).
 */
static int post_queue(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct ibv_send_wr *first = wr;
	uint64_t idx;
	uint32_t s;
	int err = 0, ret;

	pthread_spin_lock(&sqp->lock);
	if (atomic_load_explicit(&sqp->fast.pt, memory_order_relaxed))
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
		ret = !wr->next && !sqp->queued ? sv_post_direct(sqp, s, wr)
						: -1;
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

/*
 * A post in pass-through: stock, unless it leaves for the queue, made now,
 * unlocked: at a WR that states a priority, or (a watched QP) when its
 * posts would form a batch (watch.c).  True when the post is done (*ret:
 * its return); false: it takes the queue.
 */
static bool post_passthrough(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			     struct ibv_send_wr **bad_wr, unsigned char pt,
			     bool counted, int *ret)
{
	unsigned int found = sverbs_list_scan(wr);
	uint64_t timed = 0;
	bool stays;
	int err;

	if (found & SVERBS_SCAN_PRIO) /* unless the QP stays stock */
		stays = atomic_load_explicit(&sqp->fast.stock,
					     memory_order_relaxed);
	else
		stays = !(pt == SVERBS_PT_WATCH && !found &&
			  sv_watch_ready(sqp) &&
			  sv_watch_leaves(sqp, &timed, counted));
	if (stays) {
		*ret = post_stock(sqp, wr, bad_wr, found, timed);
		return true;
	}
	/* a batch would form: without the queue where the adapter can */
	if (!(found & SVERBS_SCAN_PRIO) && sv_qp_defer_ready(sqp)) {
		*ret = sv_watch_post_deferred(sqp, wr, bad_wr, timed);
		return true;
	}
	err = sv_qp_leave_prepare(sqp);
	/*
	 * A QP that stays stock (for now, EBUSY); a watched one whose queue
	 * found no memory posts stock (it asked for nothing), a priority
	 * fails as stock's post does without room.
	 */
	if (err == EAGAIN || err == EBUSY ||
	    (err && !(found & SVERBS_SCAN_PRIO))) {
		*ret = post_stock(sqp, wr, bad_wr, found, timed);
		return true;
	}
	if (err) {
		*bad_wr = wr;
		*ret = err;
		return true;
	}
	return false;
}

/* counted: the glue read the completion count already (a watched post) */
static int post_layered(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr, bool counted)
{
	unsigned char pt =
		atomic_load_explicit(&sqp->fast.pt, memory_order_acquire);
	int ret;

	if (pt && post_passthrough(sqp, wr, bad_wr, pt, counted, &ret))
		return ret;
	return post_queue(sqp, wr, bad_wr);
}

int sverbs_post_queued(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr)
{
	return post_layered(sqp, wr, bad_wr, false);
}

int sverbs_post_watched(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr)
{
	/* a batch is open: the post joins it (watch.c) */
	if (atomic_load_explicit(&sqp->fast.deferred, memory_order_relaxed) &&
	    sverbs_list_plain(wr))
		return sv_watch_post_joined(sqp, wr, bad_wr);
	return post_layered(sqp, wr, bad_wr, true);
}

/*
 * Posts that meet a reserved wr_id (sverbs_sched.h): the WRs before it go
 * one at a time, a copy each (no list of the application's is touched); an
 * error path, never the pass-through one.
 */
int sverbs_post_send_checked(struct ibv_qp *qp, struct ibv_send_wr *wr,
			     struct ibv_send_wr **bad_wr,
			     sverbs_post_send_fn post)
{
	struct ibv_send_wr one, *bad;
	int ret;

	if (!sverbs_send_list_reserved(wr))
		return post(qp, wr, bad_wr);
	for (; !sverbs_wr_id_reserved(wr->wr_id); wr = wr->next) {
		one = *wr;
		one.next = NULL;
		ret = post(qp, &one, &bad);
		if (ret) {
			*bad_wr = wr;
			return ret;
		}
	}
	*bad_wr = wr;
	return EINVAL;
}

/* The receives before the reserved wr_id: to qp (post) or to srq. */
static int recv_checked(struct ibv_qp *qp, struct ibv_srq *srq,
			struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr,
			sverbs_post_recv_fn post, sverbs_post_srq_recv_fn spost)
{
	struct ibv_recv_wr one, *bad, *list = wr;
	int ret = 0;

	if (!sverbs_recv_list_reserved(wr))
		return qp ? post(qp, list, bad_wr) : spost(srq, list, bad_wr);
	for (; !sverbs_wr_id_reserved(wr->wr_id); wr = wr->next) {
		one = *wr;
		one.next = NULL;
		ret = qp ? post(qp, &one, &bad) : spost(srq, &one, &bad);
		if (ret)
			break;
	}
	*bad_wr = wr;
	return ret ? ret : EINVAL;
}

int sverbs_post_recv_checked(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr,
			     sverbs_post_recv_fn post)
{
	return recv_checked(qp, NULL, wr, bad_wr, post, NULL);
}

int sverbs_post_srq_recv_checked(struct ibv_srq *srq, struct ibv_recv_wr *wr,
				 struct ibv_recv_wr **bad_wr,
				 sverbs_post_srq_recv_fn post)
{
	return recv_checked(NULL, srq, wr, bad_wr, NULL, post);
}

int sverbs_post_send(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	/*
	 * Pass-through: nothing to schedule or hold, so the WRs go to the
	 * provider as they are, with their own wr_ids, no lock and no copy;
	 * the provider checks them and rings once, as stock.  (The glue's
	 * entry point makes the same test and calls the provider itself.)
	 */
	if (sverbs_post_is_stock(sqp, wr))
		return sqp->ad->post_send(sqp->qp, wr, bad_wr);
	/* a watched QP: the glue's route (common/sverbs_glue_ops.h) */
	if (sqp->ad->cq_consumed && sverbs_qp_watched(sqp))
		return sverbs_post_watch_route(
			sqp, sqp->qp, wr, bad_wr,
			sqp->ad->cq_consumed(sqp->scq->cq), sqp->ad->post_send);
	return sverbs_post_queued(sqp, wr, bad_wr);
}
