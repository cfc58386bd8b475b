/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The CQ side of sched/ (cq.c): the ready ring (completions sverbs delivers
 * before the raw CQ), a qp_num -> sverbs_qp table, the headroom counter,
 * the records of destroyed QPs, the extended-CQ state.  Allocated when the
 * CQ is created, never on post/poll.  Only cq.c (and the unit tests)
 * include this; the QP side uses the functions of sched_int.h.
 */
#ifndef SVERBS_CQ_INT_H
#define SVERBS_CQ_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "sched_int.h"
#include "sverbs_fast.h"

/* The provider's extended-CQ polling functions, the raw source. */
struct sv_ex_ops {
	int (*start_poll)(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr);
	int (*next_poll)(struct ibv_cq_ex *cq);
	void (*end_poll)(struct ibv_cq_ex *cq);
	enum ibv_wc_opcode (*read_opcode)(struct ibv_cq_ex *cq);
	uint32_t (*read_vendor_err)(struct ibv_cq_ex *cq);
	uint32_t (*read_byte_len)(struct ibv_cq_ex *cq);
	__be32 (*read_imm_data)(struct ibv_cq_ex *cq);
	uint32_t (*read_qp_num)(struct ibv_cq_ex *cq);
	uint32_t (*read_src_qp)(struct ibv_cq_ex *cq);
	unsigned int (*read_wc_flags)(struct ibv_cq_ex *cq);
	uint32_t (*read_slid)(struct ibv_cq_ex *cq);
	uint8_t (*read_sl)(struct ibv_cq_ex *cq);
	uint8_t (*read_dlid_path_bits)(struct ibv_cq_ex *cq);
};

/*
 * A QP destroyed recently: its stale CQEs are absorbed, never delivered.
 * Made when its destroy begins, sealed once the provider destroyed it (no
 * CQE of it can come after that); a sealed record expires when the raw CQ
 * is next polled empty, or passes to a new QP with the same number.  Until
 * sealed, the CQEs a poll takes are parked: if the provider fails to
 * destroy the QP, they are its own still (sv_cq_relink()).
 */
struct sv_stale_qp {
	uint32_t qp_num;
	bool sealed;
	uint32_t npark;
	uint32_t park_cap;
	uint64_t seq_end;
	struct ibv_wc *park; /* [0, npark) of park_cap; NULL once sealed */
};

/* the stale list's first size; it doubles when more destroys overlap */
#define SV_STALE_QPS 8

struct sverbs_cq {
	/* the fast path's state (sverbs_poll_cq()): first (sverbs_fast.h) */
	struct sverbs_cq_fast fast;
	pthread_spinlock_t lock;
	const struct sverbs_adapter *ad;
	struct ibv_cq *cq;
	struct sverbs_config cfg;

	/* QPs whose send CQ this is: open addressing on qp_num */
	struct sverbs_qp **tab;
	uint32_t tab_mask;
	uint32_t nqp;
	uint32_t wr_capacity;	   /* sum of the registered QPs' max_send_wr */
	struct sv_stale_qp *stale; /* [0, nstale) of stale_cap */
	uint32_t nstale;
	uint32_t stale_cap;
	/*
	 * Headroom units of WQEs a QP had in flight when it was destroyed or
	 * reset: their CQEs may still be in the raw CQ (rxe leaves them; mlx5
	 * cleans it), so the units stay in hr_used until the raw CQ is next
	 * read to its end (sv_cq_late_units()).
	 */
	uint32_t hr_late;

	/* completions to deliver before the raw CQ */
	struct ibv_wc *ready;
	uint32_t rcap;
	uint32_t rhead;
	uint32_t rcount;
	uint64_t dropped; /* never, unless the app overran its CQ */

	/*
	 * Headroom: hr_total CQEs beyond the application's.  Each registered
	 * QP owns one (its reserved CQE); the rest, hr_limit, is shared through
	 * hr_used, taken on the post path without the CQ lock.
	 */
	uint32_t hr_total;
	/*
	 * The entries the application asked for (at creation: the
	 * provider's size less cq_headroom): the layer's resizes ask for this
	 * plus hr_total, never for the provider's rounded-up size plus more.
	 */
	uint32_t app_cqe;
	atomic_uint hr_limit;
	atomic_uint hr_used;
	atomic_uint hr_waiters;
	atomic_uint held_qps; /* QPs holding WRs for a bigger batch */
	/*
	 * The application's last arm, made while the CQ polled as stock,
	 * asked for solicited completions only: a QP that leaves
	 * pass-through arms it for every one (sv_cq_layered()).
	 */
	atomic_bool sol_armed;
	/*
	 * Headroom came back while a QP waited for it, outside a poll (a
	 * refused chain's rollback, a refused lone WR or no-op): the post
	 * that gave it pumps the waiting QPs once its QP lock is dropped
	 * (sv_cq_kick()), as a poll would; no completion of theirs may come.
	 */
	atomic_bool hr_kick;
	/*
	 * The QPs that began to wait for headroom or to hold WRs (hr_wait,
	 * held): what poll and req_notify_cq pump, found without walking
	 * the table (16.10).  Pushed on the post path under the QP lock, so
	 * a leaf lock of its own; taken off under the CQ lock.  An entry may
	 * outlive its reason (the walk skips it); a destroy removes it.
	 */
	pthread_spinlock_t wait_lock;
	struct sverbs_qp *waiting;
	/*
	 * Watched QPs that may defer doorbells (sched/watch.c), which a poll
	 * or an arm with SVERBS_CQ_DEFER set rings: joined once, left at the
	 * QP's destroy; a leaf lock of its own (a ring takes the provider's
	 * send queue lock inside it).
	 */
	pthread_spinlock_t defer_lock;
	struct sverbs_qp *deferring;

	uint64_t poll_gen;
	uint64_t qp_visits; /* QPs a walk for waiting work looked at (tests) */

	/* extended CQ */
	struct ibv_cq_ex *cq_ex;
	/*
	 * A thread's extended poll holds the lock from start_poll to
	 * end_poll, across the application's loop (ex_held); the thread's
	 * poll of another CQ it was nested in (ex_outer, that thread's
	 * only).  pump_asked: bits of enum sv_pump_why, a pump of the waiting
	 * QPs that an arm or a kick from inside another CQ's loop could not
	 * wait for the lock to do; the loop's end_poll does it.
	 */
	atomic_bool ex_held;
	struct sverbs_cq *ex_outer;
	atomic_uint pump_asked;
	struct sv_ex_ops raw;
	uint64_t raw_flags; /* wc_flags the provider's CQ was created with */
	struct ibv_wc cur;  /* the completion the getters describe */
};

/* sverbs_fast.h reads it through a pointer to the object */
_Static_assert(offsetof(struct sverbs_cq, fast) == 0, "fast: first");

/* watch.c: ring what the CQ's watched QPs deferred (SVERBS_CQ_DEFER) */
void sv_cq_ring_deferred_all(struct sverbs_cq *scq);

/* A poll or an arm of the CQ: deferred WQEs go first (watch.c). */
static inline void sv_cq_ring_deferred(struct sverbs_cq *scq)
{
	if (atomic_load_explicit(scq->fast.state, memory_order_relaxed) &
	    SVERBS_CQ_DEFER)
		sv_cq_ring_deferred_all(scq);
}

/* The fast word's parts (sverbs_fast.h): QPs out of pass-through, backlog. */
static inline unsigned int sv_cq_nlayered(struct sverbs_cq *scq)
{
	return atomic_load(scq->fast.state) & SVERBS_CQ_LAYERED;
}

static inline bool sv_cq_backlog(struct sverbs_cq *scq)
{
	return atomic_load(scq->fast.state) & SVERBS_CQ_BACKLOG;
}

#endif /* SVERBS_CQ_INT_H */
