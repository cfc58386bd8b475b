// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A managed QP's lifetime: create (what is allocated, whether it starts in
 * pass-through), modify (RESET and ERR), destroy (the flush of what is
 * outstanding, the CQ's record), the batching timer, statistics.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qp_int.h"

/* The layer's per-QP state: what a QP in pass-through does without. */
static void queue_free(struct sverbs_qp *sqp)
{
	free(sqp->batch);
	free(sqp->chain_sge);
	free(sqp->chain);
	free(sqp->ring);
	if (sqp->slots) {
		free(sqp->slots[0].sge);
		free(sqp->slots[0].inl);
	}
	free(sqp->slots);
	sqp->batch = NULL;
	sqp->chain_sge = NULL;
	sqp->chain = NULL;
	sqp->ring = NULL;
	sqp->slots = NULL;
}

static void qp_free(struct sverbs_qp *sqp)
{
	queue_free(sqp);
	free(sqp->raw_qpx);
	pthread_spin_destroy(&sqp->wr_lock);
	pthread_spin_destroy(&sqp->lock);
	free(sqp);
}

static int queue_alloc(struct sverbs_qp *sqp)
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
	sqp->batch = calloc(1, sizeof(*sqp->batch));
	sge = calloc((size_t)sqp->cap * sqp->max_sge, sizeof(*sge));
	if (sqp->max_inline)
		inl = malloc((size_t)sqp->cap * sqp->max_inline);
	if (!sqp->ring || !sqp->slots || !sqp->chain || !sqp->chain_sge ||
	    !sqp->batch || !sge || (sqp->max_inline && !inl)) {
		free(sge);
		free(inl);
		queue_free(sqp);
		return ENOMEM;
	}
	sqp->free_head = SV_NONE;
	for (i = sqp->cap; i-- > 0;) {
		sqp->slots[i].sge = sge + (size_t)i * sqp->max_sge;
		sqp->slots[i].inl =
			inl ? inl + (size_t)i * sqp->max_inline : NULL;
		sv_slot_free(sqp, i);
	}
	sverbs_batch_init(sqp->batch, sqp->cfg.batch_budget_us);
	return 0;
}

static void qp_timer_fire(void *arg);

/*
 * The budget's timer entry; no timer (no thread): never hold.  A watched
 * QP (watch.c) adds it only when it leaves pass-through, so a program whose
 * QPs never batch never gets the thread: a second thread alone makes every
 * system call of the process dearer (glibc's cancellable wrappers: rxe's
 * post_send doorbell took 45 more instructions per call).
 */
static void timer_setup(struct sverbs_qp *sqp)
{
	uint64_t budget_ns = (uint64_t)sqp->cfg.batch_budget_us * 1000;

	if (!budget_ns || sqp->timer_on)
		return;
	if (sverbs_timer_add(&sqp->timer, qp_timer_fire, sqp,
			     sqp->cfg.batch_linger ? budget_ns : 0))
		sqp->cfg.batch_budget_us = 0;
	else
		sqp->timer_on = true;
}

/*
 * The queue and the CQ's registration, made (CQ lock held) when the QP is
 * created out of pass-through, or when it leaves it.  0, ENOMEM, or EAGAIN:
 * no CQ headroom for it (it stays stock).
 */
static int queue_setup(struct sverbs_qp *sqp)
{
	int ret = queue_alloc(sqp);

	if (ret)
		return ret;
	ret = sv_cq_register(sqp->scq, sqp);
	if (ret) {
		queue_free(sqp);
		return ret;
	}
	sv_watch_seed(sqp);
	return 0;
}

/*
 * A QP in pass-through is about to leave it (before the QP lock: the CQ
 * lock comes first).  Not on the post path of pass-through: once per QP,
 * at its first WR with a priority.  Returns 0 when the queue is there;
 * ENOMEM (the post fails as stock's does without room; the QP stays in
 * pass-through and may try again); EAGAIN: the CQ has no headroom for one
 * more QP, so this one stays in pass-through for good (fast.stock), as a QP
 * the layer does not manage; EBUSY: the QP stays in pass-through for now,
 * and a later post tries again: a post from inside another CQ's extended
 * poll loop, while a thread's loop holds this CQ's lock (waiting could
 * deadlock, cq.c), or no CQ headroom free at this moment and a CQ that
 * cannot grow (pt_stays counts these; the units come back as other QPs'
 * WQEs complete).
 */
/*
 * Another thread's pass-through wr_* batch holds the provider's send queue:
 * the queue's pump would wait for it with the QP lock held, which a poll
 * inside that batch needs.  Wait for its end here, holding nothing (stock's
 * post waits for that lock too); a batch that starts meanwhile sees
 * pt_leaving and goes through the layer's queue.  Not for this thread's own
 * batch (stock's post there waits for itself as well).  Returns whether it
 * marked the QP: a leave that fails takes its mark back (pt_leave_failed()).
 */
static bool pt_batches_wait(struct sverbs_qp *sqp)
{
	if (sv_wr_pt_batch_mine(sqp))
		return false;
	atomic_fetch_add(&sqp->pt_leaving, 1);
	while (atomic_load(&sqp->pt_batch_open))
		sched_yield();
	return true;
}

/* It stays in pass-through: batches may hold the send queue again, unless
 * another thread's leave is still under way. */
static void pt_leave_failed(struct sverbs_qp *sqp, bool marked)
{
	if (marked)
		atomic_fetch_sub(&sqp->pt_leaving, 1);
}

int sv_qp_leave_prepare(struct sverbs_qp *sqp)
{
	bool locked, marked;
	int ret = 0;

	/* what the QP deferred goes before the queue's first WR (watch.c) */
	sv_watch_ring(sqp, SV_RING_STATE);
	marked = pt_batches_wait(sqp);
	/* (a post from an extended-CQ poll loop holds the CQ lock) */
	if (sv_cq_lock_nowait(sqp->scq, &locked)) {
		pt_leave_failed(sqp, marked);
		return EBUSY;
	}

	pthread_spin_lock(&sqp->lock);
	if (atomic_load(&sqp->fast.stock))
		ret = EAGAIN;
	else if (sqp->registered)
		ret = 0;
	else if (sqp->pt_stays && !sv_cq_unit_free(sqp->scq))
		ret = EBUSY; /* none free still: no allocation, no resize */
	else {
		/* before the queue: nothing can be held without the timer */
		timer_setup(sqp);
		ret = queue_setup(sqp);
	}
	if (ret == EAGAIN) {
		atomic_store(&sqp->fast.stock, true);
		/* a QP that stays stock watches for nothing more */
		if (atomic_load(&sqp->fast.pt) == SVERBS_PT_WATCH)
			sv_qp_set_pt(sqp, SVERBS_PT_ON);
	} else if (ret == EBUSY) {
		if (!sqp->pt_stays++)
			sv_log(sqp->ad, sqp->qp->context, SVERBS_LOG_WARN,
			       "sverbs: no CQ headroom free and the CQ cannot "
			       "grow: QP %u stays in pass-through until a "
			       "later post finds some",
			       sqp->qp_num);
	}
	pthread_spin_unlock(&sqp->lock);
	sv_cq_unlock(sqp->scq, locked);
	if (ret)
		pt_leave_failed(sqp, marked);
	return ret;
}

/*
 * A watched QP's first post that would batch: whether it may defer its
 * doorbell (watch.c), i.e. the adapter splits post and doorbell and the
 * budget's timer is there to ring what a poster leaves.  Once per QP
 * under the lock; a lone atomic load after.
 */
bool sv_qp_defer_ready(struct sverbs_qp *sqp)
{
	bool ready;

	if (atomic_load_explicit(&sqp->watch.timer_ready, memory_order_acquire))
		return true;
	/* (the level a pass-through WR has: default_prio) */
	if (!sqp->ad->post_send_nodb || !sqp->ad->ring ||
	    !sqp->cfg.batch_defer || !sqp->cfg.batch ||
	    !(sqp->cfg.batch_prio_mask & (1u << sqp->cfg.default_prio)))
		return false;
	pthread_spin_lock(&sqp->lock);
	timer_setup(sqp);
	ready = sqp->timer_on;
	pthread_spin_unlock(&sqp->lock);
	if (ready) {
		sv_watch_join(sqp);
		atomic_store_explicit(&sqp->watch.timer_ready, true,
				      memory_order_release);
	}
	return ready;
}

/*
 * The budget expired for WRs held on this QP (batch/timer.c's thread), or
 * for WQEs a watched QP's posts left without their doorbell (watch.c): they
 * go first, whatever the QP's state now (a post may have deferred while
 * another left pass-through).  A QP still in pass-through holds nothing
 * else.
 */
#define SV_TIMER_RETRY_NS (5 * 1000)

static void qp_timer_fire(void *arg)
{
	struct sverbs_qp *sqp = arg;

	sv_watch_ring_late(sqp, SV_RING_TIMER);
	if (atomic_load(&sqp->fast.pt))
		return;
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
	sv_cq_kick(sqp->scq);
}

/* SVERBS_STATS: QPs still alive at exit print their counters then. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sverbs_qp *live_head;
static bool live_atexit;

/* Who rang a watched QP's deferred WQEs: doorbells/WQEs by sv_ring_why. */
static void print_rung(struct sverbs_qp *sqp, char *buf, size_t len)
{
	static const char *const why[SV_RING_NWHY] = {
		[SV_RING_TARGET] = "target", [SV_RING_REFUSED] = "refused",
		[SV_RING_POLL] = "poll",     [SV_RING_TIMER] = "timer",
		[SV_RING_STATE] = "state",
	};
	size_t at;
	int i;

	at = snprintf(buf, len, "; rung by (doorbells/WQEs):");
	for (i = 0; i < SV_RING_NWHY && at < len; i++)
		at += snprintf(
			buf + at, len - at, "%s %s %llu/%llu", i ? "," : "",
			why[i],
			(unsigned long long)atomic_load(&sqp->watch.rings[i]),
			(unsigned long long)atomic_load(
				&sqp->watch.rung_wqes[i]));
}

static void print_stats(struct sverbs_qp *sqp)
{
	struct sverbs_qp_stats st;
	char rung[160] = "";

	sverbs_qp_get_stats(sqp, &st);
	if (st.flags & SVERBS_QP_STATS_DEFERRED)
		print_rung(sqp, rung, sizeof(rung));
	fprintf(stderr,
		"sverbs: QP %u: %llu WRs, %llu WQEs, %llu doorbells "
		"(%.2f WQEs/doorbell), %llu held, held p99 %.1f us, "
		"slice %u B%s%s\n",
		sqp->qp_num, (unsigned long long)st.wrs,
		(unsigned long long)st.wqes, (unsigned long long)st.doorbells,
		st.doorbells ? (double)st.wqes / (double)st.doorbells : 0.0,
		(unsigned long long)st.held_wrs, st.held_p99_ns / 1000.0,
		st.slice_bytes,
		st.flags & SVERBS_QP_STATS_DEFERRED
			? " (pass-through, deferred doorbells: WQEs and "
			  "doorbells count those)"
		: st.flags & SVERBS_QP_STATS_PASSTHROUGH
			? " (pass-through: its WRs are not counted)"
			: "",
		rung);
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
	if (sqp->batch) {
		st->wqes = sqp->batch->stats.wrs;
		st->doorbells = sqp->batch->stats.doorbells;
		st->held_wrs = sqp->batch->stats.held_wrs;
		st->held_p99_ns =
			sverbs_batch_held_quantile(&sqp->batch->stats, 0.99);
		st->batch_budget_ns = sqp->batch->budget_ns;
	} else {
		/* pass-through: the budget a watched QP batches with */
		st->batch_budget_ns = (uint64_t)sqp->cfg.batch_budget_us * 1000;
	}
	st->slice_bytes = sv_slice_bytes(&sqp->slicer);
	if (atomic_load(&sqp->fast.pt))
		st->flags |= SVERBS_QP_STATS_PASSTHROUGH;
	if (atomic_load(&sqp->watch.wqes)) {
		st->flags |= SVERBS_QP_STATS_DEFERRED;
		st->wqes += atomic_load(&sqp->watch.wqes);
		st->doorbells += sv_watch_rings(sqp);
	}
	pthread_spin_unlock(&sqp->lock);
}

/*
 * Whether the QP starts in pass-through: only a WR's stated priority will
 * need the layer.  Not when the configuration schedules WRs that state
 * nothing (slice_always, the size policy).  With a batching budget it
 * starts in pass-through watched (watch.c): until its posts would form a
 * batch.
 */
static unsigned char start_state(const struct sverbs_qp *sqp)
{
	if (!sqp->cfg.passthrough || sqp->cfg.slice_always ||
	    sqp->cfg.small_msg_bytes)
		return SVERBS_PT_OFF;
	return sqp->cfg.batch_budget_us ? SVERBS_PT_WATCH : SVERBS_PT_ON;
}

struct sverbs_qp *sverbs_qp_create(const struct sverbs_adapter *ad,
				   struct ibv_qp *qp, struct sverbs_cq *send_cq,
				   const struct ibv_qp_init_attr_ex *attr,
				   const struct sverbs_config *cfg)
{
	struct sverbs_qp *sqp;
	bool taken;
	int l, ret;

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
	    (attr->send_ops_flags & SV_UNCARRIED_SEND_OPS))
		return NULL;

	sqp = calloc(1, sizeof(*sqp));
	if (!sqp)
		return NULL;
	pthread_spin_init(&sqp->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&sqp->wr_lock, PTHREAD_PROCESS_PRIVATE);
	sqp->ad = ad;
	sqp->qp = qp;
	sqp->scq = send_cq;
	sqp->cfg = *cfg;
	/*
	 * A provider that takes no locks (mlx5's MLX5_SINGLE_THREADED: its CQ
	 * is lockless; a thread domain's QP: its send queue and doorbell) was
	 * promised one thread: the budget's timer thread would post beside it.
	 * No budget then.
	 */
	if (sqp->cfg.batch_budget_us &&
	    (sv_cq_lockless(send_cq) ||
	     (ad->qp_lockless && ad->qp_lockless(qp)))) {
		sv_log(ad, qp->context, SVERBS_LOG_INFO,
		       "sverbs: QP %u: no batch budget, the provider takes no "
		       "locks for it (single-threaded or a thread domain)",
		       qp->qp_num);
		sqp->cfg.batch_budget_us = 0;
	}
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
	sqp->cfg.batch_prio_mask &= ~(1u << SVERBS_PRIO_HIGHEST);
	sqp->fast.layered = &sqp->fast.own_layered;
	atomic_init(&sqp->fast.pt, start_state(sqp));
	atomic_init(sqp->fast.layered,
		    atomic_load(&sqp->fast.pt) != SVERBS_PT_ON);
	atomic_init(&sqp->fast.stock, false);
	sv_watch_init(sqp);
	/* in pass-through: nothing more until it leaves (16.10) */
	if (atomic_load(&sqp->fast.pt)) {
		live_add(sqp);
		return sqp;
	}
	timer_setup(sqp);
	taken = sv_cq_lock(send_cq);
	ret = queue_setup(sqp);
	sv_cq_unlock(send_cq, taken);
	if (ret == EBUSY)
		sv_log(sqp->ad, qp->context, SVERBS_LOG_WARN,
		       "sverbs: no CQ headroom free and the CQ cannot grow: "
		       "QP %u stays stock",
		       qp->qp_num);
	if (ret) {
		if (sqp->timer_on)
			sverbs_timer_del(&sqp->timer);
		qp_free(sqp);
		return NULL;
	}
	sv_cq_layered(send_cq);
	live_add(sqp);
	/* a take the registration made fail meanwhile waits (hr_fund) */
	sv_cq_kick(send_cq);
	return sqp;
}

/*
 * Before a destroy's or a reset's flush (QP and CQ locks held): the headroom
 * of the WQEs in flight stays taken, for the CQEs the provider may have left
 * in the raw CQ (sv_cq_late_units()).  Returns the shared units among them;
 * *reserved: the WQE of the QP's reserved CQE is one.
 */
static uint32_t inflight_units_keep(struct sverbs_qp *sqp, bool *reserved)
{
	struct sv_wqe *q;
	uint32_t n = 0;
	uint64_t seq;

	*reserved = false;
	for (seq = sqp->seq_head; seq < sqp->seq_next; seq++) {
		q = sv_wqe_at(sqp, seq);
		n += q->cost;
		*reserved = *reserved || q->reserved;
		q->cost = false; /* (its release gives nothing back) */
	}
	return n;
}

void sverbs_qp_modify_pre(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			  int attr_mask)
{
	bool taken;

	/* what a watched QP deferred goes as stock's went, before */
	if (attr_mask & IBV_QP_STATE)
		sv_watch_ring(sqp, SV_RING_STATE);
	/*
	 * Keep real completions the reset would discard (mlx5 cleans the
	 * CQ); a QP in pass-through behaves as stock.
	 */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET &&
	    !atomic_load(&sqp->fast.pt)) {
		taken = sv_cq_lock(sqp->scq);
		sv_cq_drain(sqp->scq);
		sv_cq_unlock(sqp->scq, taken);
	}
}

void sverbs_qp_modify_post(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			   int attr_mask, int ret)
{
	struct sv_emit e = { .scq = sqp->scq };
	bool taken, reserved, late;
	uint32_t units;

	if (ret || !(attr_mask & IBV_QP_STATE))
		return;
	/* below RTS a watched QP defers nothing (watch.c) */
	atomic_store_explicit(&sqp->watch.unready, attr->qp_state < IBV_QPS_RTS,
			      memory_order_relaxed);
	if (attr->qp_state == IBV_QPS_RESET) {
		taken = sv_cq_lock(sqp->scq);
		pthread_spin_lock(&sqp->lock);
		units = inflight_units_keep(sqp, &reserved);
		sv_qp_flush_all(sqp, &e);
		late = sv_cq_late_units(sqp->scq, units, reserved);
		sqp->dead = false;
		sqp->hw_err = false;
		sqp->nop_owed = false;
		pthread_spin_unlock(&sqp->lock);
		if (late)
			sv_cq_drain(sqp->scq);
		sv_cq_headroom_back(sqp->scq);
		sv_cq_unlock(sqp->scq, taken);
		return;
	}
	pthread_spin_lock(&sqp->lock);
	if (attr->qp_state == IBV_QPS_ERR && !sqp->hw_err) {
		/* the hardware flushes what is in flight; queued WRs follow */
		sqp->hw_err = true;
		sv_post_nop(sqp);
	}
	sv_qp_pump(sqp, SV_PUMP_FLUSH);
	pthread_spin_unlock(&sqp->lock);
}

void sverbs_qp_destroy_pre(struct sverbs_qp *sqp)
{
	struct sverbs_cq *scq = sqp->scq;
	bool taken;

	/* no timer may pump a QP the provider is about to destroy */
	if (sqp->timer_on)
		sverbs_timer_del(&sqp->timer);
	/* ... nor a poll ring it */
	sv_watch_leave(sqp);
	taken = sv_cq_lock(scq);
	/* in pass-through, stock: the provider cleans its completions */
	if (!atomic_load(&sqp->fast.pt))
		sv_cq_drain(scq);
	pthread_spin_lock(&sqp->lock);
	sv_cq_unlink(scq, sqp);
	pthread_spin_unlock(&sqp->lock);
	sv_cq_unlock(scq, taken);
}

void sverbs_qp_destroy_post(struct sverbs_qp *sqp, int ret)
{
	struct sverbs_cq *scq = sqp->scq;
	struct sv_emit e = { .scq = scq };
	bool taken, reserved, late;
	uint32_t units;

	if (ret) {
		/*
		 * The timer first: the relink translates what polls took
		 * meanwhile and pumps the QP, which may hold WRs (an add
		 * clears the entry's deadline).
		 */
		if (sqp->timer_on &&
		    sverbs_timer_add(&sqp->timer, qp_timer_fire, sqp,
				     sqp->timer.tick_ns)) {
			/* no timer: never hold, as at creation */
			sqp->timer_on = false;
			sqp->cfg.batch_budget_us = 0;
			if (sqp->batch)
				sqp->batch->budget_ns = 0;
			if (atomic_load(&sqp->fast.pt) == SVERBS_PT_WATCH)
				sv_qp_set_pt(sqp, SVERBS_PT_ON);
		}
		taken = sv_cq_lock(scq);
		sv_cq_relink(scq, sqp);
		sv_cq_unlock(scq, taken);
		if (atomic_load(&sqp->watch.timer_ready))
			sv_watch_join(sqp);
		/*
		 * What it deferred lost its timer and the poll's trigger
		 * while the provider tried (the next posts join its batch
		 * and arm nothing): it goes now, as stock's went at its post.
		 */
		sv_watch_ring_late(sqp, SV_RING_STATE);
		return;
	}
	live_del(sqp);
	taken = sv_cq_lock(scq);
	pthread_spin_lock(&sqp->lock);
	sv_qp_unhold(sqp);
	units = inflight_units_keep(sqp, &reserved);
	sv_qp_flush_all(sqp, &e);
	late = sv_cq_late_units(scq, units, reserved);
	sv_cq_unregister(scq, sqp);
	pthread_spin_unlock(&sqp->lock);
	if (late)
		sv_cq_drain(scq);
	sv_cq_headroom_back(scq);
	sv_cq_unlock(scq, taken);
	if (sqp->qpx)
		sv_objmap_remove(sqp->qpx);
	qp_free(sqp);
}
