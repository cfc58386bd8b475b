// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-CQ side of the scheduler: translating raw completions, the ready ring,
 * the table of QPs whose send CQ this is, CQ headroom, and the extended-CQ
 * polling ops.
 *
 * Poll.  Completions waiting in the ready ring go first.  Then raw
 * completions are polled straight into the caller's array and translated
 * in place: receive completions, completions of QPs sverbs does not manage
 * and send completions that do not carry an internal wr_id pass untouched;
 * a managed QP's send completion retires its WQEs and is replaced by the
 * application's completion, if any.  Translation never produces more than
 * one completion per raw one except when a QP fails (flushes); those, and
 * everything after them in the same poll, go through the ready ring so
 * that order is kept.  The QPs that saw completions are pumped before
 * returning, and so are QPs waiting for CQ headroom.
 *
 * Headroom.  The glue created the CQ with cq_headroom CQEs beyond the
 * application's.  Every registered QP owns one unit (its reserved CQE, used by
 * pump rule (d)); the rest is shared through an atomic counter that the
 * post path takes without the CQ lock.  A QP registers when it leaves
 * pass-through (or at creation, if it never was in it): a QP in
 * pass-through is not in the table and holds no headroom.  When a second
 * QP or more registers, the CQ is grown by cq_headroom (adapter resize_cq)
 * if the provider can.
 * A QP that finds no headroom waits; it is pumped by the next poll of the
 * CQ, which some completion will prompt: only WQEs that will report hold
 * headroom.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cq_int.h"
#include "qp_int.h"

#define SV_POLL_BATCH 32
#define SV_RING_SLACK 64
#define SV_UNSUPPORTED_WC_FLAGS                                       \
	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_CVLAN | \
	 IBV_WC_EX_WITH_FLOW_TAG | IBV_WC_EX_WITH_TM_INFO |           \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

void sv_log(const struct sverbs_adapter *ad, struct ibv_context *ctx,
	    enum sverbs_log_level level, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!ad || !ad->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ad->log(ctx, level, msg);
}

/* ------------------------------------------------------------ for the QP side
 */

/*
 * The extended CQs this thread polls (each between start_poll and end_poll,
 * its CQ lock held), innermost first, chained through ex_outer: a post, an
 * arm, a QP's create, reset or destroy from inside such a loop (stock rxe
 * allows each; stock mlx5 the first three) must not take the lock again.
 */
static __thread struct sverbs_cq *ex_polling;

static bool ex_polled_here(const struct sverbs_cq *scq)
{
	const struct sverbs_cq *p;

	for (p = ex_polling; p; p = p->ex_outer)
		if (p == scq)
			return true;
	return false;
}

/* The CQ lock; false: this thread holds it already (its extended poll). */
bool sv_cq_lock(struct sverbs_cq *scq)
{
	if (ex_polling && ex_polled_here(scq))
		return false;
	pthread_spin_lock(&scq->lock);
	return true;
}

/*
 * The CQ lock, unless another thread holds it across its extended poll loop
 * (EBUSY): waiting for it there may never end (that thread may wait for
 * something this one holds, or be arming this thread's CQ from inside its
 * loop).  loop_only: EBUSY only when this thread is inside another CQ's
 * loop itself (a caller that holds nothing may wait for the loop's end).
 * 0: locked (*taken) or this thread's already (!*taken).
 */
static int cq_lock_nowait(struct sverbs_cq *scq, bool *taken, bool loop_only)
{
	*taken = false;
	if (ex_polling && ex_polled_here(scq))
		return 0;
	if (!ex_polling && loop_only) {
		pthread_spin_lock(&scq->lock);
		*taken = true;
		return 0;
	}
	while (pthread_spin_trylock(&scq->lock)) {
		if (atomic_load(&scq->ex_held))
			return EBUSY;
		sched_yield();
	}
	*taken = true;
	return 0;
}

int sv_cq_lock_nowait(struct sverbs_cq *scq, bool *taken)
{
	return cq_lock_nowait(scq, taken, true);
}

/* taken: what sv_cq_lock() returned */
void sv_cq_unlock(struct sverbs_cq *scq, bool taken)
{
	if (taken)
		pthread_spin_unlock(&scq->lock);
}

/*
 * A QP left pass-through: before its first internal WQE (cq_fast()).  A
 * provider whose own poll tests the count under its CQ lock (cq_sync) is
 * made to see it: a poll that read the count before is over when cq_sync
 * returns, and could not have met a WQE posted after.
 */
void sv_cq_layered(struct sverbs_cq *scq)
{
	unsigned int was = atomic_fetch_add(scq->fast.state, 1);

	/* an extended CQ never polls as stock (and may be mid-poll here) */
	if (scq->ad->cq_sync && !(was & SVERBS_CQ_EX))
		scq->ad->cq_sync(scq->cq);
	/*
	 * A sleeper armed the CQ solicited-only while it polled as stock:
	 * the layer's WQEs complete unsolicited, and the WRs it queues wait
	 * for them (as in sverbs_req_notify_cq()).
	 */
	if (!(was & SVERBS_CQ_LAYERED) && atomic_load(&scq->sol_armed) &&
	    atomic_exchange(&scq->sol_armed, false))
		scq->ad->req_notify_cq(scq->cq, 0);
}

/* The ready ring or the stale list holds something (CQ lock held). */
static void backlog_set(struct sverbs_cq *scq)
{
	if (!sv_cq_backlog(scq))
		atomic_fetch_or(scq->fast.state, SVERBS_CQ_BACKLOG);
}

/*
 * The waiting list: a QP that begins to hold WRs or to wait for headroom
 * (QP lock held, the CQ lock maybe not) joins it once.
 */
static void wait_add(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	pthread_spin_lock(&scq->wait_lock);
	if (!sqp->wait_listed) {
		sqp->wait_listed = true;
		sqp->wait_next = scq->waiting;
		scq->waiting = sqp;
	}
	pthread_spin_unlock(&scq->wait_lock);
}

/* A destroy (CQ lock held: no walk has it in hand). */
static void wait_del(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	struct sverbs_qp **p;

	pthread_spin_lock(&scq->wait_lock);
	if (sqp->wait_listed) {
		for (p = &scq->waiting; *p && *p != sqp; p = &(*p)->wait_next)
			;
		if (*p)
			*p = sqp->wait_next;
		sqp->wait_listed = false;
	}
	pthread_spin_unlock(&scq->wait_lock);
}

/* A QP of this CQ begins (true) or ends holding WRs for a bigger batch. */
void sv_cq_held(struct sverbs_cq *scq, struct sverbs_qp *sqp, bool held)
{
	if (held) {
		atomic_fetch_add(&scq->held_qps, 1);
		wait_add(scq, sqp);
	} else {
		atomic_fetch_sub(&scq->held_qps, 1);
	}
}

/* The provider polls this CQ without a lock (single-threaded). */
bool sv_cq_lockless(const struct sverbs_cq *scq)
{
	return scq->ad->cq_lockless && scq->ad->cq_lockless(scq->cq);
}

/* ------------------------------------------------------------ headroom */

/*
 * The unit tests' hooks (built with SV_TEST_HOOKS): what another thread
 * does at a point of a race, here, if the test set one.
 */
#ifdef SV_TEST_HOOKS
#define TEST_HOOK(hook, scq)       \
	do {                       \
		if (hook)          \
			hook(scq); \
	} while (0)
/* between a take's check and CAS */
void (*sv_test_hr_take_gap)(struct sverbs_cq *scq);
/* between a take and a wait */
void (*sv_test_hr_gap)(struct sverbs_cq *scq);
/* a lockless take just after an unregistration grew the limit */
void (*sv_test_unregister_gap)(struct sverbs_cq *scq);
#else
#define TEST_HOOK(hook, scq) ((void)(scq))
#endif

bool sv_hr_take(struct sverbs_cq *scq)
{
	unsigned int used = atomic_load(&scq->hr_used);

	do {
		if (used + 1 > atomic_load(&scq->hr_limit))
			return false;
		TEST_HOOK(sv_test_hr_take_gap, scq);
	} while (!atomic_compare_exchange_weak(&scq->hr_used, &used, used + 1));
	/*
	 * A QP's registration may have lowered the limit between the check
	 * and the swap, taking a unit and giving it back (hr_fund_reserved()):
	 * the swap then succeeds on the count it restored.  The unit is not
	 * ours then; no CQE of it was promised yet.
	 */
	if (used + 1 > atomic_load(&scq->hr_limit)) {
		sv_hr_give(scq, 1); /* (a take it made fail meanwhile waits) */
		return false;
	}
	return true;
}

void sv_hr_give(struct sverbs_cq *scq, unsigned int n)
{
	atomic_fetch_sub(&scq->hr_used, n);
	/* after the give: a waiter that joins later takes again itself */
	if (atomic_load(&scq->hr_waiters))
		atomic_store(&scq->hr_kick, true);
}

/* QP lock held. */
void sv_hr_wait(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	TEST_HOOK(sv_test_hr_gap, scq);
	if (sqp->hr_wait)
		return;
	sqp->hr_wait = true;
	atomic_fetch_add(&scq->hr_waiters, 1);
	wait_add(scq, sqp);
}

/*
 * A unit of headroom, or the QP waits for one (QP lock held): it joins the
 * waiting list, which the poll that gives units back pumps.  A give that
 * came between a failed take and the join found no waiter, so the take is
 * tried again after the join; a give after the join finds the QP listed.
 */
bool sv_hr_take_or_wait(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	if (sv_hr_take(scq))
		return true;
	sv_hr_wait(scq, sqp);
	if (!sv_hr_take(scq))
		return false;
	/* listed still: the walk skips a QP that neither waits nor holds */
	sqp->hr_wait = false;
	atomic_fetch_sub(&scq->hr_waiters, 1);
	return true;
}

/* ------------------------------------------------------------ QP table */

static uint32_t qpn_hash(uint32_t qpn)
{
	return qpn * 0x9e3779b1u;
}

static struct sverbs_qp *tab_find(const struct sverbs_cq *scq, uint32_t qpn)
{
	uint32_t i = qpn_hash(qpn) & scq->tab_mask;
	struct sverbs_qp *sqp;

	while ((sqp = scq->tab[i])) {
		if (sqp->qp_num == qpn)
			return sqp;
		i = (i + 1) & scq->tab_mask;
	}
	return NULL;
}

static void tab_put(struct sverbs_qp **tab, uint32_t mask,
		    struct sverbs_qp *sqp)
{
	uint32_t i = qpn_hash(sqp->qp_num) & mask;

	while (tab[i])
		i = (i + 1) & mask;
	tab[i] = sqp;
}

static int tab_grow(struct sverbs_cq *scq)
{
	uint32_t size = (scq->tab_mask + 1) * 2, i;
	struct sverbs_qp **tab = calloc(size, sizeof(*tab));

	if (!tab)
		return ENOMEM;
	for (i = 0; i <= scq->tab_mask; i++)
		if (scq->tab[i])
			tab_put(tab, size - 1, scq->tab[i]);
	free(scq->tab);
	scq->tab = tab;
	scq->tab_mask = size - 1;
	return 0;
}

static void tab_del(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	uint32_t i = qpn_hash(sqp->qp_num) & scq->tab_mask;
	struct sverbs_qp *moved;

	while (scq->tab[i] && scq->tab[i] != sqp)
		i = (i + 1) & scq->tab_mask;
	if (!scq->tab[i])
		return;
	scq->tab[i] = NULL;
	/* re-place the rest of the cluster */
	for (i = (i + 1) & scq->tab_mask; scq->tab[i];
	     i = (i + 1) & scq->tab_mask) {
		moved = scq->tab[i];
		scq->tab[i] = NULL;
		tab_put(scq->tab, scq->tab_mask, moved);
	}
}

/* ------------------------------------------------------------ ready ring */

/*
 * At least cap entries.  A ring that must grow at least doubles: QPs
 * register one by one, each adding its max_send_wr, and growing by exactly
 * that reallocated and copied the ring at every registration (O(QPs^2)).
 */
static int ring_reserve(struct sverbs_cq *scq, uint32_t cap)
{
	struct ibv_wc *r;
	uint32_t i;

	if (cap <= scq->rcap)
		return 0;
	if (scq->rcap && scq->rcap <= UINT32_MAX / 2 && cap < 2 * scq->rcap)
		cap = 2 * scq->rcap;
	r = calloc(cap, sizeof(*r));
	if (!r)
		return ENOMEM;
	for (i = 0; i < scq->rcount; i++)
		r[i] = scq->ready[(scq->rhead + i) % scq->rcap];
	free(scq->ready);
	scq->ready = r;
	scq->rcap = cap;
	scq->rhead = 0;
	return 0;
}

static void ring_push(struct sverbs_cq *scq, const struct ibv_wc *wc)
{
	if (scq->rcount == scq->rcap) {
		if (!scq->dropped++)
			sv_log(scq->ad, scq->cq->context, SVERBS_LOG_ERR,
			       "sverbs: CQ overrun: completions lost (the "
			       "application exceeded its CQ size)");
		return;
	}
	scq->ready[(scq->rhead + scq->rcount) % scq->rcap] = *wc;
	scq->rcount++;
	backlog_set(scq);
}

static int ring_pop(struct sverbs_cq *scq, struct ibv_wc *wc, int ne)
{
	int n = 0;

	while (n < ne && scq->rcount) {
		wc[n++] = scq->ready[scq->rhead];
		scq->rhead = (scq->rhead + 1) % scq->rcap;
		scq->rcount--;
	}
	return n;
}

void sv_emit(struct sv_emit *e, const struct ibv_wc *wc)
{
	if (e->wc && !e->spill && e->out < e->limit) {
		e->wc[e->out++] = *wc;
		return;
	}
	e->spill = true;
	ring_push(e->scq, wc);
}

/* ------------------------------------------------------------ registration */

/*
 * Room for one more record: the list doubles (a destroy, not the data
 * path).  Without memory the oldest record is forgotten, and a late CQE of
 * that QP may then reach the application with a wr_id of the layer's.
 */
static void stale_room(struct sverbs_cq *scq)
{
	uint32_t cap = scq->stale_cap ? 2 * scq->stale_cap : SV_STALE_QPS;
	struct sv_stale_qp *s;

	if (scq->nstale < scq->stale_cap)
		return;
	s = realloc(scq->stale, cap * sizeof(*s));
	if (s) {
		scq->stale = s;
		scq->stale_cap = cap;
		return;
	}
	sv_log(scq->ad, scq->cq->context, SVERBS_LOG_WARN,
	       "sverbs: no memory for a destroyed QP's record: its late "
	       "completions may surface");
	if (!scq->nstale)
		return; /* no list at all: stale_add() keeps nothing */
	free(scq->stale[0].park);
	memmove(&scq->stale[0], &scq->stale[1],
		sizeof(scq->stale[0]) * (scq->nstale - 1));
	scq->nstale--;
}

/* Remember a destroyed QP. */
static void stale_add(struct sverbs_cq *scq, const struct sverbs_qp *sqp)
{
	uint32_t i;

	/* a QP that never left pass-through leaves no internal WQE behind */
	if (sqp->seq_next == sqp->seq_base)
		return;
	stale_room(scq);
	if (!scq->stale_cap)
		return;
	i = scq->nstale++;
	scq->stale[i].qp_num = sqp->qp_num;
	scq->stale[i].sealed = false;
	scq->stale[i].seq_end = sqp->seq_next;
	/*
	 * Room for every CQE its WQEs in flight can make (one each); without
	 * it, those a poll takes before a failed destroy are lost (logged).
	 */
	scq->stale[i].npark = 0;
	scq->stale[i].park_cap = sqp->inflight_wqes;
	scq->stale[i].park = NULL;
	if (sqp->inflight_wqes) {
		scq->stale[i].park =
			calloc(sqp->inflight_wqes, sizeof(struct ibv_wc));
		if (!scq->stale[i].park)
			scq->stale[i].park_cap = 0;
	}
	backlog_set(scq);
}

/*
 * Take QP number qpn's record out of the list into *rec (its parked CQEs
 * are the caller's to free).  false: there is none.
 */
static bool stale_pop(struct sverbs_cq *scq, uint32_t qpn,
		      struct sv_stale_qp *rec)
{
	uint32_t i;

	for (i = 0; i < scq->nstale; i++) {
		if (scq->stale[i].qp_num != qpn)
			continue;
		*rec = scq->stale[i];
		scq->stale[i] = scq->stale[--scq->nstale];
		return true;
	}
	return false;
}

static void stale_replay(struct sverbs_cq *scq, const struct sv_stale_qp *rec);

/* Forget QP number qpn's record; returns where its wr_ids ended. */
static uint64_t stale_del(struct sverbs_cq *scq, uint32_t qpn)
{
	struct sv_stale_qp rec;

	if (!stale_pop(scq, qpn, &rec))
		return SV_SEQ_BASE;
	free(rec.park);
	return rec.seq_end;
}

/* The provider destroyed it: what was parked is stale (flushed instead). */
static void stale_seal(struct sverbs_cq *scq, uint32_t qpn)
{
	uint32_t i;

	for (i = 0; i < scq->nstale; i++) {
		if (scq->stale[i].qp_num != qpn)
			continue;
		scq->stale[i].sealed = true;
		free(scq->stale[i].park);
		scq->stale[i].park = NULL;
		scq->stale[i].npark = 0;
	}
}

/*
 * The raw CQ was polled empty (CQ lock held): every CQE of a QP the
 * provider had destroyed by then has been read; its record can go.
 */
static void stale_expire(struct sverbs_cq *scq)
{
	uint32_t i = 0;

	while (i < scq->nstale) {
		if (scq->stale[i].sealed)
			scq->stale[i] = scq->stale[--scq->nstale];
		else
			i++;
	}
}

/*
 * The raw CQ was read to its end (CQ lock held): what QPs destroyed or
 * reset before left in it is gone, and so are the units it held.
 */
static void raw_read_out(struct sverbs_cq *scq)
{
	if (scq->nstale)
		stale_expire(scq);
	if (scq->hr_late) {
		sv_hr_give(scq, scq->hr_late);
		scq->hr_late = 0;
	}
}

/*
 * An internal completion of a destroyed QP (absorbed), or of one whose
 * destroy is under way (parked).
 */
static bool stale_absorbs(struct sverbs_cq *scq, const struct ibv_wc *wc)
{
	struct sv_stale_qp *r;
	uint32_t i;

	for (i = 0; i < scq->nstale; i++) {
		r = &scq->stale[i];
		if (r->qp_num != wc->qp_num || wc->wr_id < SV_SEQ_BASE ||
		    wc->wr_id >= r->seq_end)
			continue;
		if (r->sealed)
			return true;
		if (r->npark < r->park_cap)
			r->park[r->npark++] = *wc;
		else
			sv_log(scq->ad, scq->cq->context, SVERBS_LOG_WARN,
			       "sverbs: QP %u: no room to keep a completion "
			       "while it is destroyed; lost if that fails",
			       wc->qp_num);
		return true;
	}
	return false;
}

static void hr_set_limit(struct sverbs_cq *scq)
{
	atomic_store(&scq->hr_limit, scq->hr_total - scq->nqp);
}

/* cq_headroom more CQEs, if the provider can (CQ lock held) */
static bool hr_grow(struct sverbs_cq *scq)
{
	if (!scq->ad->resize_cq || sv_cq_lockless(scq) ||
	    scq->ad->resize_cq(scq->cq, (int)(scq->app_cqe + scq->hr_total +
					      scq->cfg.cq_headroom)))
		return false;
	scq->hr_total += scq->cfg.cq_headroom;
	hr_set_limit(scq);
	return true;
}

/*
 * A registering QP's reserved CQE comes out of the shared units (CQ lock
 * held): one is taken, which keeps hr_used within the limit, the limit is
 * lowered by it, and it is given back.  Lowering the limit below what posts
 * have taken would let the layer's CQEs overrun the CQ by that reserved
 * one.  False: every shared unit is in use.
 */
static bool hr_fund_reserved(struct sverbs_cq *scq)
{
	if (!sv_hr_take(scq))
		return false;
	atomic_fetch_sub(&scq->hr_limit, 1);
	sv_hr_give(scq, 1);
	return true;
}

/* A shared unit is free now (a registration could fund its reserved CQE). */
bool sv_cq_unit_free(struct sverbs_cq *scq)
{
	return atomic_load(&scq->hr_used) < atomic_load(&scq->hr_limit);
}

/*
 * A QP that leaves pass-through (or starts out of it) joins the table and
 * the headroom accounting (CQ lock held).  Returns 0; EAGAIN when the CQ
 * has no headroom for one more QP and cannot grow (the QP stays stock);
 * EBUSY when it has, but none is free now (other QPs' WQEs hold every
 * shared unit) and it cannot grow: a creation stays stock, a leave of
 * pass-through waits for a later post; or ENOMEM.  A QP in pass-through is
 * not here: it costs the CQ nothing, no resize, and no work in poll_cq or
 * req_notify_cq.
 */
int sv_cq_register(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	if (scq->nqp && scq->nqp >= scq->hr_total / scq->cfg.cq_headroom)
		hr_grow(scq);
	/* every QP's reserved CQE plus at least one shared unit */
	if (scq->hr_total < scq->nqp + 2) {
		sv_log(scq->ad, scq->cq->context, SVERBS_LOG_WARN,
		       "sverbs: CQ headroom exhausted: QP %u stays stock",
		       sqp->qp_num);
		return EAGAIN;
	}
	if ((scq->nqp + 1) * 2 > scq->tab_mask + 1 && tab_grow(scq))
		return ENOMEM;
	if (ring_reserve(scq, (uint32_t)scq->cq->cqe + scq->wr_capacity +
				      sqp->cap + SV_RING_SLACK))
		return ENOMEM;
	/* (after destroys, the CQ may hold more than its QPs asked for) */
	if (!hr_fund_reserved(scq) && !(hr_grow(scq) && hr_fund_reserved(scq)))
		return EBUSY;
	tab_put(scq->tab, scq->tab_mask, sqp);
	/* a predecessor's stale CQEs are below its wr_ids (translate()) */
	sqp->seq_base = stale_del(scq, sqp->qp_num);
	sqp->seq_head = sqp->seq_next = sqp->seq_base;
	sqp->registered = true;
	scq->nqp++;
	scq->wr_capacity += sqp->cap;
	return 0;
}

/*
 * A destroy begins (CQ and QP locks held): the QP leaves the table before
 * the provider destroys it, so that its number, free again once the
 * provider is done, cannot meet it there; its late CQEs are absorbed.
 */
void sv_cq_unlink(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	if (!sqp->registered)
		return;
	tab_del(scq, sqp);
	wait_del(scq, sqp);
	stale_add(scq, sqp);
}

/*
 * The provider failed to destroy it: back in the table, and the CQEs of it
 * that polls took meanwhile are its own (translated now, in their order;
 * nothing of it can be in the ready ring or the raw CQ before them).
 */
void sv_cq_relink(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	struct sv_stale_qp rec = { 0 };

	if (!sqp->registered)
		return;
	stale_pop(scq, sqp->qp_num, &rec);
	tab_put(scq->tab, scq->tab_mask, sqp);
	wait_add(scq, sqp); /* it may hold WRs or wait for headroom */
	if (rec.npark)
		stale_replay(scq, &rec);
	free(rec.park);
}

/* The provider destroyed it (unlinked already; CQ and QP locks held). */
void sv_cq_unregister(struct sverbs_cq *scq, struct sverbs_qp *sqp)
{
	if (!sqp->registered)
		return;
	sqp->registered = false;
	if (!atomic_load(&sqp->fast.pt))
		atomic_fetch_sub(scq->fast.state, 1);
	stale_seal(scq, sqp->qp_num);
	wait_del(scq, sqp);
	scq->nqp--;
	scq->wr_capacity -= sqp->cap;
	if (sqp->hr_wait) {
		sqp->hr_wait = false;
		atomic_fetch_sub(&scq->hr_waiters, 1);
	}
	hr_set_limit(scq);
	TEST_HOOK(sv_test_unregister_gap, scq);
}

struct sverbs_cq *sverbs_cq_create(const struct sverbs_adapter *ad,
				   struct ibv_cq *cq,
				   const struct sverbs_config *cfg)
{
	struct sverbs_cq *scq;

	/* no provider no-op: no placeholder for a refused WR (16.6) */
	if (!ad || !ad->nop_wr || !cq || !cfg || !sverbs_config_enabled(cfg))
		return NULL;
	scq = calloc(1, sizeof(*scq));
	if (!scq)
		return NULL;
	scq->fast.state = &scq->fast.own_state;
	pthread_spin_init(&scq->lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&scq->wait_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&scq->defer_lock, PTHREAD_PROCESS_PRIVATE);
	scq->ad = ad;
	scq->cq = cq;
	scq->cfg = *cfg;
	if (!scq->cfg.cq_headroom)
		scq->cfg.cq_headroom = 4;
	scq->hr_total = scq->cfg.cq_headroom;
	scq->app_cqe = cq->cqe > (int)scq->hr_total
			       ? (uint32_t)cq->cqe - scq->hr_total
			       : 1;
	hr_set_limit(scq);
	scq->poll_gen = 1; /* a new QP's poll_gen (0) is never current */
	scq->tab_mask = 15;
	scq->tab = calloc(scq->tab_mask + 1, sizeof(*scq->tab));
	if (!scq->tab ||
	    ring_reserve(scq, (cq->cqe > 0 ? (uint32_t)cq->cqe : 0) +
				      SV_RING_SLACK)) {
		sverbs_cq_destroy(scq);
		return NULL;
	}
	return scq;
}

/*
 * The application's ibv_resize_cq(): the provider's CQ gets the entries
 * asked for plus the layer's headroom (as at creation, and as grown since
 * for more QPs), and the ready ring grows with it.  Without this, the
 * provider's resize to exactly cqe dropped the headroom: the layer's own
 * completions could overrun the CQ and lose one of the application's.
 */
int sverbs_cq_resize(struct sverbs_cq *scq, int cqe)
{
	int ret;

	if (cqe <= 0)
		return EINVAL;
	pthread_spin_lock(&scq->lock);
	ret = ring_reserve(scq, (uint32_t)cqe + scq->hr_total +
					scq->wr_capacity + SV_RING_SLACK);
	if (!ret)
		ret = scq->ad->resize_cq(scq->cq, cqe + (int)scq->hr_total);
	if (!ret)
		scq->app_cqe = (uint32_t)cqe;
	pthread_spin_unlock(&scq->lock);
	return ret;
}

void sverbs_cq_destroy(struct sverbs_cq *scq)
{
	if (!scq)
		return;
	if (scq->cq_ex)
		sv_objmap_remove(scq->cq_ex);
	free(scq->ready);
	free(scq->tab);
	while (scq->nstale)
		free(scq->stale[--scq->nstale].park);
	free(scq->stale);
	pthread_spin_destroy(&scq->wait_lock);
	pthread_spin_destroy(&scq->defer_lock);
	pthread_spin_destroy(&scq->lock);
	free(scq);
}

/* ------------------------------------------------------------ raw source */

static void ex_read(struct sverbs_cq *scq, struct ibv_wc *wc)
{
	struct ibv_cq_ex *cx = scq->cq_ex;
	uint64_t f = scq->raw_flags;

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cx->wr_id;
	wc->status = cx->status;
	wc->opcode = scq->raw.read_opcode(cx);
	wc->vendor_err = scq->raw.read_vendor_err(cx);
	if (scq->raw.read_wc_flags)
		wc->wc_flags = scq->raw.read_wc_flags(cx);
	if ((f & IBV_WC_EX_WITH_BYTE_LEN) && scq->raw.read_byte_len)
		wc->byte_len = scq->raw.read_byte_len(cx);
	if ((f & IBV_WC_EX_WITH_QP_NUM) && scq->raw.read_qp_num)
		wc->qp_num = scq->raw.read_qp_num(cx);
	if ((f & IBV_WC_EX_WITH_IMM) && scq->raw.read_imm_data &&
	    (wc->wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)))
		wc->imm_data = scq->raw.read_imm_data(cx);
	if ((f & IBV_WC_EX_WITH_SRC_QP) && scq->raw.read_src_qp)
		wc->src_qp = scq->raw.read_src_qp(cx);
	if ((f & IBV_WC_EX_WITH_SLID) && scq->raw.read_slid)
		wc->slid = (uint16_t)scq->raw.read_slid(cx);
	if ((f & IBV_WC_EX_WITH_SL) && scq->raw.read_sl)
		wc->sl = scq->raw.read_sl(cx);
	if ((f & IBV_WC_EX_WITH_DLID_PATH_BITS) && scq->raw.read_dlid_path_bits)
		wc->dlid_path_bits = scq->raw.read_dlid_path_bits(cx);
}

/*
 * The provider's extended polling, drained into struct ibv_wc (not inlined
 * into raw_poll(): a CQ without it pays for none of its frame).
 */
static __attribute__((noinline)) int ex_raw_poll(struct sverbs_cq *scq, int ne,
						 struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = {};
	struct ibv_cq_ex *cx = scq->cq_ex;
	int ret, n = 0;

	ret = scq->raw.start_poll(cx, &attr);
	if (ret == ENOENT)
		return 0;
	if (ret)
		return -ret;
	do {
		ex_read(scq, &wc[n++]);
	} while (n < ne && !scq->raw.next_poll(cx));
	scq->raw.end_poll(cx);
	return n;
}

static int raw_poll(struct sverbs_cq *scq, int ne, struct ibv_wc *wc)
{
	if (scq->cq_ex)
		return ex_raw_poll(scq, ne, wc);
	return scq->ad->poll_cq(scq->cq, ne, wc);
}

/* ------------------------------------------------------------ translation */

/*
 * A receive's completion: its opcode says so, or, for one in error (whose
 * opcode verbs leaves undefined), the provider does (adapter wc_is_recv).
 * Never the wr_id, which the application chose (16.9).
 */
static bool wc_recv(const struct sverbs_cq *scq, const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS)
		return wc->opcode & IBV_WC_RECV;
	return scq->ad->wc_is_recv && scq->ad->wc_is_recv(wc);
}

/*
 * One of the layer's WQEs: a send completion (not wc_recv()) that carries
 * one of sqp's internal wr_ids in flight.  For an error completion of a
 * provider without wc_is_recv, the wr_id alone tells (docs/semantics.md).
 */
static bool is_send(const struct sverbs_qp *sqp, const struct ibv_wc *wc)
{
	return sv_qp_owns(sqp, wc->wr_id);
}

static void pump_qp(struct sverbs_qp *sqp)
{
	pthread_spin_lock(&sqp->lock);
	sv_qp_pump(sqp, SV_PUMP_POLL);
	pthread_spin_unlock(&sqp->lock);
}

/* QPs that saw completions in this poll, pumped once at its end. */
struct sv_touched {
	struct sverbs_qp *qp[SV_POLL_BATCH]; /* [0, n) are set */
	int n;
};

static void translate(struct sverbs_cq *scq, const struct ibv_wc *raw,
		      struct sv_emit *e, struct sv_touched *t)
{
	struct sverbs_qp *sqp;

	/* receive completions: no lookup, no QP lock */
	if (wc_recv(scq, raw)) {
		sv_emit(e, raw);
		return;
	}
	sqp = tab_find(scq, raw->qp_num);
	if (!sqp) {
		if (!scq->nstale || !stale_absorbs(scq, raw))
			sv_emit(e, raw);
		return;
	}
	pthread_spin_lock(&sqp->lock);
	if (!is_send(sqp, raw)) {
		pthread_spin_unlock(&sqp->lock);
		/* a stale CQE of a destroyed QP that had this number */
		if (raw->wr_id < SV_SEQ_BASE || raw->wr_id >= sqp->seq_base)
			sv_emit(e, raw);
		return;
	}
	sv_qp_complete(sqp, raw, e);
	/*
	 * The end of the poll pumps it, if anything waits to go.  Past the
	 * list's room it is pumped now, and not marked: a later CQE of it in
	 * this poll may open what this pump found closed (a fence, the
	 * window), and pumps it again.
	 */
	if ((sqp->queued || sqp->held || sqp->nop_owed) &&
	    sqp->poll_gen != scq->poll_gen) {
		if (t->n < SV_POLL_BATCH) {
			sqp->poll_gen = scq->poll_gen;
			t->qp[t->n++] = sqp;
		} else {
			sv_qp_pump(sqp, SV_PUMP_POLL);
		}
	}
	pthread_spin_unlock(&sqp->lock);
}

/*
 * Pump the QPs that wait for headroom or hold WRs for a bigger batch (CQ
 * lock held): poll_cq and req_notify_cq ring them.  They are the waiting
 * list's, so the cost is theirs, never the number of QPs on the CQ.  Each
 * leaves the list (its next read) before it is pumped; a pump that leaves
 * it waiting again puts it back.
 */
static void pump_waiting(struct sverbs_cq *scq, enum sv_pump_why why)
{
	struct sverbs_qp *sqp, *next;

	if (!atomic_load(&scq->hr_waiters) && !atomic_load(&scq->held_qps))
		return;
	/* a give after this wakes the next walk: sv_cq_kick() */
	if (atomic_load_explicit(&scq->hr_kick, memory_order_relaxed))
		atomic_store(&scq->hr_kick, false);
	pthread_spin_lock(&scq->wait_lock);
	sqp = scq->waiting;
	scq->waiting = NULL;
	pthread_spin_unlock(&scq->wait_lock);
	for (; sqp; sqp = next) {
		pthread_spin_lock(&scq->wait_lock);
		next = sqp->wait_next;
		sqp->wait_listed = false;
		pthread_spin_unlock(&scq->wait_lock);
		scq->qp_visits++;
		pthread_spin_lock(&sqp->lock);
		if (sqp->hr_wait) {
			sqp->hr_wait = false;
			atomic_fetch_sub(&scq->hr_waiters, 1);
			sv_qp_pump(sqp, why);
		} else if (sqp->held) {
			sv_qp_pump(sqp, why);
		}
		pthread_spin_unlock(&sqp->lock);
	}
}

/*
 * Headroom came back outside a poll (CQ lock held, no QP lock): a destroy or
 * a RESET retired another QP's WQEs.  The QPs that wait for it go now: no
 * completion of theirs would pump them, and a sleeper on the CQ's event
 * would wait for ever.
 */
void sv_cq_headroom_back(struct sverbs_cq *scq)
{
	pump_waiting(scq, SV_PUMP_FLUSH);
}

/*
 * A QP was destroyed or reset with WQEs in flight (CQ lock held): units is
 * how many of them had taken a shared unit, reserved whether its reserved
 * CQE's WQE was one (the QP's own CQE: at a destroy the limit has grown by
 * it, at a reset the QP may post another into it).  Their CQEs may be in
 * the raw CQ still, each in a place those units stand for: they stay in
 * use until the raw CQ is read to its end (the caller drains it when this
 * returns true: at once if the ready ring has room, else at a later poll).
 * At a destroy, before the unregistration grows the limit by the reserved
 * CQE: a take in between finds no unit (and waits), not that one.
 */
bool sv_cq_late_units(struct sverbs_cq *scq, uint32_t units, bool reserved)
{
	if (reserved) {
		atomic_fetch_add(&scq->hr_used, 1);
		units++;
	}
	if (!units)
		return false;
	scq->hr_late += units;
	backlog_set(scq);
	return true;
}

/*
 * pump_waiting() for an arm or a kick (no CQ lock held by the caller,
 * unless through its extended poll).  The CQ's lock may be held by a thread
 * inside its extended poll loop, which may be arming this thread's CQ from
 * there, destroying the QP whose timer kicks, or starting a wr_* batch on
 * the QP whose wr_complete kicks: the pump is left to that loop's end_poll
 * (pump_asked) rather than waited for.
 */
static void pump_waiting_asking(struct sverbs_cq *scq, enum sv_pump_why why)
{
	bool taken;

	while (cq_lock_nowait(scq, &taken, false)) {
		atomic_fetch_or(&scq->pump_asked, 1u << why);
		/* after the ask: its end_poll clears ex_held, then reads it */
		if (atomic_load(&scq->ex_held))
			return;
	}
	pump_waiting(scq, why);
	sv_cq_unlock(scq, taken);
}

/* end_poll (the CQ lock held): what arms and kicks left to it */
static void serve_asked(struct sverbs_cq *scq)
{
	unsigned int asked;

	atomic_store(&scq->ex_held, false);
	if (!atomic_load(&scq->pump_asked))
		return;
	asked = atomic_exchange(&scq->pump_asked, 0);
	if (asked)
		pump_waiting(scq, asked & (1u << SV_PUMP_ARM) ? SV_PUMP_ARM
							      : SV_PUMP_FLUSH);
}

/*
 * After a post or the timer's pump (no QP lock held): headroom given back
 * outside a poll while QPs waited for it reaches them now (hr_kick).
 */
void sv_cq_kick(struct sverbs_cq *scq)
{
	if (!atomic_load_explicit(&scq->hr_kick, memory_order_relaxed) ||
	    !atomic_exchange(&scq->hr_kick, false))
		return;
	/*
	 * Nobody waits (any more): no lock.  A waiter that joins after the
	 * exchange above takes again itself, or its giver kicks again.
	 */
	if (!atomic_load(&scq->hr_waiters) && !atomic_load(&scq->held_qps))
		return;
	pump_waiting_asking(scq, SV_PUMP_FLUSH);
}

static void finish_round(struct sverbs_cq *scq, struct sv_touched *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		pump_qp(t->qp[i]);
	t->n = 0;
	scq->poll_gen++;
	pump_waiting(scq, SV_PUMP_POLL);
	/* nothing left for the fast path to overtake */
	if (sv_cq_backlog(scq) && !scq->rcount && !scq->nstale && !scq->hr_late)
		atomic_fetch_and(scq->fast.state, ~SVERBS_CQ_BACKLOG);
}

/*
 * Drain the raw CQ into the ready ring (CQ lock held): the extended-CQ path,
 * and before a QP's destroy or reset.
 */
void sv_cq_drain(struct sverbs_cq *scq)
{
	struct sv_emit e = { .scq = scq };
	struct ibv_wc raw[SV_POLL_BATCH];
	struct sv_touched t;
	int got = -1, i; /* -1: the raw CQ was not read to its end */

	t.n = 0;
	do {
		if (scq->rcap - scq->rcount < 2 * SV_POLL_BATCH)
			break;
		got = raw_poll(scq, SV_POLL_BATCH, raw);
		for (i = 0; i < got; i++)
			translate(scq, &raw[i], &e, &t);
	} while (got == SV_POLL_BATCH);
	if (got >= 0 && got < SV_POLL_BATCH && (scq->nstale || scq->hr_late))
		raw_read_out(scq);
	finish_round(scq, &t);
	/*
	 * Inside this thread's extended poll of the CQ (a QP reset or
	 * destroyed in the loop): the provider's polls wrote the
	 * application's wr_id and status; they describe the loop's current
	 * completion again.
	 */
	if (scq->cq_ex && ex_polling && ex_polled_here(scq)) {
		scq->cq_ex->wr_id = scq->cur.wr_id;
		scq->cq_ex->status = scq->cur.status;
	}
}

/* A failed destroy's parked CQEs, translated (CQ lock held). */
static void stale_replay(struct sverbs_cq *scq, const struct sv_stale_qp *rec)
{
	struct sv_emit e = { .scq = scq };
	struct sv_touched t;
	uint32_t i;

	t.n = 0;
	for (i = 0; i < rec->npark; i++)
		translate(scq, &rec->park[i], &e, &t);
	finish_round(scq, &t);
}

/*
 * got raw completions in wc[n..n + got), translated in place (behind what
 * the ready ring holds, if anything).  Returns how many wc[] holds now.
 */
static int translate_polled(struct sverbs_cq *scq, int ne, struct ibv_wc *wc,
			    int n, int got, struct sv_touched *t)
{
	struct sv_emit e = { .scq = scq, .wc = wc, .out = n };
	struct ibv_wc raw;
	int i;

	e.spill = scq->rcount != 0;
	for (i = n; i < n + got; i++) {
		raw = wc[i];
		e.limit = i + 1;
		translate(scq, &raw, &e, t);
	}
	if (e.spill)
		return e.out + ring_pop(scq, wc + e.out, ne - e.out);
	return e.out;
}

/*
 * Raw completions polled straight into wc[n..ne) and translated in place.
 * Returns the new n; *more says the raw CQ may hold more.
 */
static int poll_round(struct sverbs_cq *scq, int ne, struct ibv_wc *wc, int n,
		      struct sv_touched *t, bool *more)
{
	bool full;
	int got;

	*more = false;
	got = raw_poll(scq, ne - n, wc + n);
	if (got < 0)
		return n ? n : got;
	full = got == ne - n;
	n = translate_polled(scq, ne, wc, n, got, t);
	/* the stale CQEs of destroyed QPs were all read: forget them */
	if (!full && (scq->nstale || scq->hr_late))
		raw_read_out(scq);
	/* what spilled to the ready ring is served first: no more rounds */
	*more = full && !scq->rcount;
	return n;
}

/* Every QP on the CQ posts in pass-through and nothing waits: poll raw. */
static bool cq_fast(struct sverbs_cq *scq)
{
	return !(atomic_load_explicit(scq->fast.state, memory_order_relaxed) &
		 (SVERBS_CQ_LAYERED | SVERBS_CQ_BACKLOG));
}

/*
 * The fast path's raw completions, in wc[0..got), when a QP on the CQ left
 * pass-through meanwhile: any of them may be one of its internal WQEs.
 */
static __attribute__((noinline)) int fast_fixup(struct sverbs_cq *scq, int ne,
						struct ibv_wc *wc, int got)
{
	struct sv_touched t;
	int n;

	t.n = 0;
	pthread_spin_lock(&scq->lock);
	n = translate_polled(scq, ne, wc, 0, got, &t);
	finish_round(scq, &t);
	pthread_spin_unlock(&scq->lock);
	return n;
}

/*
 * The poll of a CQ the layer translates (not inlined: its frame, with the
 * touched QPs' array to clear, is not the fast path's).
 */
static __attribute__((noinline)) int poll_layered(struct sverbs_cq *scq, int ne,
						  struct ibv_wc *wc)
{
	struct sv_touched t;
	bool more = true;
	int n;

	t.n = 0;
	pthread_spin_lock(&scq->lock);
	n = ring_pop(scq, wc, ne);
	/*
	 * A round whose raw completions were all internal yields nothing:
	 * poll on until the raw CQ is empty, so that 0 means no application
	 * completion is pending.  An event-driven program (arm, poll until
	 * 0, wait) would otherwise wait for an event that never comes: the
	 * completion it misses is already in the CQ.  Bounded: each round
	 * consumes raw CQEs, and only the end of the poll pumps new WQEs.
	 */
	while (n >= 0 && n < ne && more)
		n = poll_round(scq, ne, wc, n, &t, &more);
	finish_round(scq, &t);
	pthread_spin_unlock(&scq->lock);
	return n;
}

int sverbs_poll_cq(struct sverbs_cq *scq, int ne, struct ibv_wc *wc)
{
	int n;

	if (ne <= 0)
		return 0;
	sv_cq_ring_deferred(scq);
	if (!cq_fast(scq))
		return poll_layered(scq, ne, wc);
	n = raw_poll(scq, ne, wc);
	if (!sverbs_poll_needs_fixup(scq, n))
		return n;
	return fast_fixup(scq, ne, wc, n);
}

int sverbs_poll_fixup(struct sverbs_cq *scq, struct ibv_wc *wc, int n)
{
	/*
	 * Room for the n only (the glue keeps no more of its caller's frame):
	 * what translation adds beyond them (a flush's completions) waits in
	 * the ready ring for the next poll.
	 */
	return fast_fixup(scq, n, wc, n);
}

int sverbs_req_notify_cq(struct sverbs_cq *scq, int solicited_only)
{
	/* a sleeper's WQEs must not wait for the budget's timer */
	sv_cq_ring_deferred(scq);
	if (cq_fast(scq)) {
		int ret;

		/* before the arm: a QP that leaves after it sees the flag */
		atomic_store(&scq->sol_armed, solicited_only != 0);
		ret = scq->ad->req_notify_cq(scq->cq, solicited_only);
		/* a QP left meanwhile: every completion */
		if (ret || !solicited_only || !sv_cq_nlayered(scq))
			return ret;
		atomic_store(&scq->sol_armed, false);
		return scq->ad->req_notify_cq(scq->cq, 0);
	}
	atomic_store(&scq->sol_armed, false);
	pump_waiting_asking(scq, SV_PUMP_ARM);
	/*
	 * Armed for every completion: the layer's own WQEs complete
	 * unsolicited, and a queued WR may wait for one of them; a sleeper
	 * armed solicited-only would not wake for it.  Its poll may then find
	 * nothing solicited (as after internal completions: semantics.md).
	 */
	return scq->ad->req_notify_cq(scq->cq, 0);
}

/* ------------------------------------------------------------ extended CQ */

static struct sverbs_cq *ex_scq(struct ibv_cq_ex *cq)
{
	return sv_objmap_lookup(cq);
}

/* Serve the next completion, draining raw ones if the ring is empty. */
static int ex_next(struct sverbs_cq *scq)
{
	struct ibv_cq_ex *cx = scq->cq_ex;

	if (!scq->rcount)
		sv_cq_drain(scq);
	if (!ring_pop(scq, &scq->cur, 1))
		return ENOENT;
	cx->wr_id = scq->cur.wr_id;
	cx->status = scq->cur.status;
	return 0;
}

/* Like the provider's: the CQ lock is held from start_poll to end_poll. */
static int sv_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct sverbs_cq *scq = ex_scq(cq);
	int ret;

	(void)attr;
	sv_cq_ring_deferred(scq);
	pthread_spin_lock(&scq->lock);
	ret = ex_next(scq);
	if (ret) {
		pthread_spin_unlock(&scq->lock);
		return ret;
	}
	atomic_store(&scq->ex_held, true);
	scq->ex_outer = ex_polling;
	ex_polling = scq;
	return 0;
}

static int sv_next_poll(struct ibv_cq_ex *cq)
{
	return ex_next(ex_scq(cq));
}

static void sv_end_poll(struct ibv_cq_ex *cq)
{
	struct sverbs_cq *scq = ex_scq(cq), **p;

	/* out of this thread's chain (the loops may end in any order) */
	for (p = &ex_polling; *p; p = &(*p)->ex_outer)
		if (*p == scq) {
			*p = scq->ex_outer;
			break;
		}
	serve_asked(scq);
	pthread_spin_unlock(&scq->lock);
}

#define SV_EX_GETTER(name, type, field)                  \
	static type sv_read_##name(struct ibv_cq_ex *cq) \
	{                                                \
		return (type)ex_scq(cq)->cur.field;      \
	}

SV_EX_GETTER(opcode, enum ibv_wc_opcode, opcode)
SV_EX_GETTER(vendor_err, uint32_t, vendor_err)
SV_EX_GETTER(byte_len, uint32_t, byte_len)
SV_EX_GETTER(imm_data, __be32, imm_data)
SV_EX_GETTER(qp_num, uint32_t, qp_num)
SV_EX_GETTER(src_qp, uint32_t, src_qp)
SV_EX_GETTER(wc_flags, unsigned int, wc_flags)
SV_EX_GETTER(slid, uint32_t, slid)
SV_EX_GETTER(sl, uint8_t, sl)
SV_EX_GETTER(dlid_path_bits, uint8_t, dlid_path_bits)

bool sverbs_cq_install_ex_ops(struct sverbs_cq *scq, struct ibv_cq_ex *cq_ex,
			      uint64_t app_wc_flags)
{
	struct sv_ex_ops *raw = &scq->raw;

	if (app_wc_flags & SV_UNSUPPORTED_WC_FLAGS)
		return false;
	if (!cq_ex->start_poll || !cq_ex->next_poll || !cq_ex->end_poll ||
	    !cq_ex->read_opcode || !cq_ex->read_vendor_err ||
	    !cq_ex->read_qp_num || !cq_ex->read_byte_len)
		return false;
	if (!sv_objmap_insert(cq_ex, scq))
		return false;
	scq->raw_flags =
		app_wc_flags | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_BYTE_LEN;
	raw->start_poll = cq_ex->start_poll;
	raw->next_poll = cq_ex->next_poll;
	raw->end_poll = cq_ex->end_poll;
	raw->read_opcode = cq_ex->read_opcode;
	raw->read_vendor_err = cq_ex->read_vendor_err;
	raw->read_byte_len = cq_ex->read_byte_len;
	raw->read_imm_data = cq_ex->read_imm_data;
	raw->read_qp_num = cq_ex->read_qp_num;
	raw->read_src_qp = cq_ex->read_src_qp;
	raw->read_wc_flags = cq_ex->read_wc_flags;
	raw->read_slid = cq_ex->read_slid;
	raw->read_sl = cq_ex->read_sl;
	raw->read_dlid_path_bits = cq_ex->read_dlid_path_bits;

	cq_ex->start_poll = sv_start_poll;
	cq_ex->next_poll = sv_next_poll;
	cq_ex->end_poll = sv_end_poll;
	cq_ex->read_opcode = sv_read_opcode;
	cq_ex->read_vendor_err = sv_read_vendor_err;
	cq_ex->read_byte_len = sv_read_byte_len;
	cq_ex->read_imm_data = sv_read_imm_data;
	cq_ex->read_qp_num = sv_read_qp_num;
	cq_ex->read_src_qp = sv_read_src_qp;
	cq_ex->read_wc_flags = sv_read_wc_flags;
	cq_ex->read_slid = sv_read_slid;
	cq_ex->read_sl = sv_read_sl;
	cq_ex->read_dlid_path_bits = sv_read_dlid_path_bits;
	scq->cq_ex = cq_ex;
	atomic_fetch_or(scq->fast.state, SVERBS_CQ_EX);
	return true;
}
