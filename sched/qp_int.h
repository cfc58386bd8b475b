/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The QP side of sched/, one file per phase of a WR's life:
 *
 *   admit.c     checking an application WR, copying it into a slot, its
 *               level and its place in the level FIFOs; ibv_post_send
 *   pump.c      building WQEs from the queue (slicing, the window,
 *               signaling, headroom), batching, the doorbell, what the
 *               provider refuses (rollback, the post call's error), the
 *               lone-WR path, the NOP placeholder
 *   complete.c  retiring WQEs when their completions come back, the
 *               application's completions, errors and flushes
 *   lifetime.c  create, modify, destroy, the batching timer, statistics
 *   watch.c     a budgeted QP in pass-through: when a batch would form
 *   wr_api.c    the ibv_wr_* API on top of admit.c
 *
 * Objects, all allocated when a QP registers with its CQ (never on
 * post/poll): at creation, or, for a QP that starts in pass-through, when
 * its first WR with a priority ends pass-through (sv_qp_leave_prepare()).
 * A QP in pass-through has only struct sverbs_qp (under 1 KiB):
 *
 *   struct sv_wr     one application WR (a "slot"): a copy of its
 *                    ibv_send_wr with its SGE list (max_send_sge entries)
 *                    and, for IBV_SEND_INLINE, its data (max_inline_data
 *                    bytes); a WR that took the lone-WR path
 *                    (sv_post_direct) keeps only what its completion needs.
 *                    max_send_wr slots per QP: a slot is the application's
 *                    capacity, held from post until the WR's completion is
 *                    reported or a later completion retires it.
 *   level FIFOs      SVERBS_NUM_PRIO singly linked FIFOs of queued slots.
 *   struct sv_wqe    one WQE handed to the hardware, indexed by its internal
 *                    wr_id (a per-QP sequence number) in a power-of-two ring
 *                    larger than the hardware SQ.
 */
#ifndef SVERBS_QP_INT_H
#define SVERBS_QP_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "sched_int.h"
#include "slice.h"
#include "sverbs_fast.h"

/*
 * Internal wr_ids: WQE sequence numbers start here, in the range the layer
 * reserves (include/infiniband/sverbs.h: a post with such a wr_id fails),
 * so an internal wr_id is recognisable by value alone: no completion of
 * the application carries one, even an error CQE, which does not say
 * whether it is a send or a receive completion.  A QP that reuses the
 * number of a destroyed one starts where that one ended, so that the stale
 * CQEs of its predecessor, below its seq_base, are told apart.  (2^48 WQEs
 * per QP number stay in the range: three years at 3 million WQEs a second.)
 */
#define SV_SEQ_BASE SVERBS_WR_ID_RESERVED_MIN

enum sv_wr_state {
	SV_WR_FREE,
	SV_WR_BUILD,  /* being built by the ibv_wr_* API */
	SV_WR_QUEUED, /* in a level FIFO (maybe partly handed to hardware) */
	SV_WR_POSTED, /* wholly handed to hardware, not yet retired */
};

/* Position of the next byte of a WR to hand to the hardware. */
struct sv_cursor {
	uint64_t off;	  /* bytes already handed out */
	uint32_t sge;	  /* SGE index of the next byte */
	uint32_t sge_off; /* offset inside that SGE */
};

struct sv_wr {
	struct ibv_send_wr wr; /* prio bits stripped, sg_list = sge */
	struct ibv_sge *sge;
	uint8_t *inl;
	uint64_t len;
	uint64_t post_seq;
	struct sv_cursor cur;
	enum ibv_wc_status status; /* the error it failed with */
	uint32_t vendor_err;
	uint32_t next;	     /* level FIFO / free list / build list */
	uint32_t fence_next; /* FIFO of queued fenced WRs */
	uint8_t prio;
	uint8_t state;
	bool app_signaled;
	bool fenced;
	bool no_hold;  /* batching may not hold it (see wr_no_hold()) */
	bool refused;  /* the provider refused it for good (see refuse()) */
	bool no_flush; /* its post failed at the doorbell: no made-up flush */
};

struct sv_wqe {
	uint32_t slot; /* SV_NONE: a nop, or a WR already completed */
	uint32_t bytes;
	struct sv_cursor start; /* the WR's cursor before this WQE (rollback) */
	bool final;		/* last WQE of its WR */
	bool signaled;
	bool cost;	/* holds a unit of CQ headroom */
	bool reserved;	/* signaled with the QP's reserved CQE */
	bool dequeued;	/* completing it removed its WR from its FIFO */
	bool fence_pop; /* ... and from the fence FIFO */
	bool windowed;	/* counted in windowed_bytes */
};

struct sv_fifo {
	uint32_t head;
	uint32_t tail;
};

/*
 * Who rang a watched QP's deferred WQEs (watch.c): the post that reached
 * the batch target, a post the provider refused a WR of, a poll or arm of
 * its send CQ, the budget's timer, a change of the QP's state or its leave
 * for the queue.
 */
enum sv_ring_why {
	SV_RING_TARGET,
	SV_RING_REFUSED,
	SV_RING_POLL,
	SV_RING_TIMER,
	SV_RING_STATE,
	SV_RING_NWHY
};

/* What a budgeted QP in pass-through measures (watch.c): relaxed atomics. */
struct sv_watch {
	_Atomic uint64_t gap_ns; /* EWMA of the gaps between posts */
	_Atomic uint32_t target; /* the batch size that gap gives */
	/* post calls since last_ns: the gaps its next sample spans */
	_Atomic uint32_t since;
	/*
	 * deferred doorbells: WQEs written without one; doorbells rung and
	 * the WQEs each sent, by who rang (SVERBS_STATS prints them)
	 */
	_Atomic uint64_t wqes;
	_Atomic uint64_t rings[SV_RING_NWHY];
	_Atomic uint64_t rung_wqes[SV_RING_NWHY];
	atomic_bool timer_ready; /* the budget's timer is set up (lifetime.c) */
	/*
	 * The layer saw the QP modified below RTS (RESET, INIT, RTR), where
	 * rxe refuses a doorbell: its posts go stock, each with the error
	 * stock's gets, none deferred with a success it cannot keep
	 * (sverbs_qp_modify_post(); a QP whose modifies it never saw may
	 * defer)
	 */
	atomic_bool unready;
	/* on its CQ's deferring list (watch.c; the CQ's defer_lock) */
	bool listed;
	struct sverbs_qp *next;
	/* (the CQ's count and the last return: sverbs_qp_fast) */
};

struct sverbs_qp {
	/* pass-through (pt) and staying stock: first (sverbs_fast.h) */
	struct sverbs_qp_fast fast;
	pthread_spinlock_t lock;
	const struct sverbs_adapter *ad;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx; /* set when the ibv_wr_* API is installed */
	/* ... and the provider's wr_* ops, for pass-through batches */
	struct ibv_qp_ex *raw_qpx;
	struct sverbs_cq *scq;
	struct sverbs_config cfg;
	uint32_t qp_num;
	enum ibv_qp_type qp_type;
	bool sig_all;
	uint32_t cap;	      /* max_send_wr: app capacity and hw SQ depth */
	uint32_t depth;	      /* WQEs sverbs keeps in flight at most */
	uint32_t max_sge_app; /* max_send_sge */
	uint32_t max_sge;     /* entries per slot SGE array (>= 1) */
	uint32_t max_inline;

	/* software queue */
	struct sv_wr *slots;
	uint32_t free_head;
	uint32_t nfree;
	struct sv_fifo level[SVERBS_NUM_PRIO];
	uint32_t queued;	 /* WRs in the level FIFOs */
	uint32_t queued_no_hold; /* ... of which batching may not hold */
	uint64_t arrival_ns;	 /* clock of the last WR queued, until a pump */
	struct sv_fifo fence;
	uint64_t post_seq;

	/* hardware send queue, by WQE sequence number */
	struct sv_wqe *ring;
	uint32_t ring_mask;
	uint64_t seq_base; /* first internal wr_id: after a predecessor's */
	uint64_t seq_head; /* oldest WQE not retired */
	uint64_t seq_next; /* next WQE's sequence number = internal wr_id */
	uint32_t inflight_wqes;
	uint64_t inflight_bytes;
	uint64_t windowed_bytes; /* ... of WQEs posted once scheduling began */
	bool scheduled;		 /* slicing + window apply (see sv_wr_commit) */
	/*
	 * The slots, the ring, the chain and the batching state exist and
	 * the QP is in its CQ's table (CQ and QP locks to change; the CQ side
	 * reads it under the CQ lock).
	 */
	bool registered;
	bool pt_inflight; /* WQEs posted in pass-through may still be in flight
			   */
	/*
	 * The provider took WQEs but its doorbell failed (rxe in INIT/RTR):
	 * they run only when a later doorbell rings, so nothing may wait for
	 * their completion to post (pt_inflight) until one rang.
	 */
	bool db_failed;
	uint8_t levels_seen; /* bit per level a WR has been queued at */
	uint32_t inflight_sig;
	uint32_t unsig_wqes; /* since the last signaled WQE */
	uint64_t unsig_bytes;
	bool reserved_busy;

	/* the chain of one pump round, handed to the adapter at once */
	struct ibv_send_wr *chain;
	struct ibv_sge *chain_sge;

	bool hw_err;	   /* hardware QP is in ERR: hand WRs over unsliced */
	bool nop_owed;	   /* in ERR, the no-op after an unsignaled tail waits
			    * for headroom or room (sv_post_nop()) */
	bool dead;	   /* an error was reported: everything else flushes */
	bool hr_wait;	   /* waiting for CQ headroom */
	bool wait_listed;  /* on the CQ's waiting list (its wait_lock) */
	bool warned;	   /* adapter failure logged */
	uint32_t refusals; /* WRs the provider refused for good */
	uint64_t poll_gen; /* poll round that touched it (CQ lock) */

	struct sv_slicer slicer;

	/* batching (batch/): when a pump round rings; NULL until registered */
	struct sverbs_batch *batch;
	struct sverbs_timer_entry timer; /* armed while WRs are held */
	bool timer_on;
	bool held;	       /* the queued WRs waited for a bigger batch */
	uint64_t hold_since;   /* arrival of the oldest WR queued (budget) */
	uint64_t held_at;      /* the first HOLD verdict of the current hold */
	uint64_t arm_deadline; /* timer to arm at the post's unlock; 0: none */
	uint64_t held_wait;    /* 1 + how long the hold that ended lasted */
	uint64_t app_wrs;      /* WRs the application posted */
	struct sv_watch watch; /* SVERBS_PT_WATCH only */
	struct sverbs_qp *live_next; /* the live-QP list (SVERBS_STATS) */
	struct sverbs_qp *wait_next; /* the CQ's waiting list (cq.c) */

	/*
	 * The post call in progress (ibv_post_send, wr_complete): what the
	 * provider refuses of its WRs at once fails the call, as stock (see
	 * sv_call_begin()).
	 */
	bool call_open;
	bool call_sync;	       /* refusals of its WRs still fail the call */
	bool call_whole;       /* all or nothing (wr_complete): only its
				* first WR's refusal fails it */
	uint64_t call_seq;     /* post_seq of its first WR */
	uint64_t call_bad_seq; /* its first WR refused; UINT64_MAX: none */
	int call_err;	       /* the error it returns */

	/*
	 * ibv_wr_* API: WRs built since wr_start, in slots taken under the QP
	 * lock.  wr_lock is held from wr_start to wr_complete / wr_abort (as a
	 * provider holds its send queue's lock), the QP lock only to take or
	 * give back slots and to queue the batch: the thread that builds may
	 * poll and arm the CQ meanwhile, which takes the QP lock.
	 */
	pthread_spinlock_t wr_lock;
	/*
	 * A pass-through batch (the provider's own wr_start: it holds the
	 * send queue's lock until wr_complete or wr_abort) is open on some
	 * thread; a post of another thread is taking the QP out of
	 * pass-through (sv_qp_leave_prepare(): it waits for the batch's end,
	 * holding nothing, and a batch that starts meanwhile yields to it).
	 * pt_leaving counts such posts: one that fails takes back only its
	 * own mark while another's leave goes on.
	 */
	atomic_bool pt_batch_open;
	atomic_uint pt_leaving;
	/*
	 * Leaves of pass-through that found no CQ headroom free and a CQ
	 * that cannot grow: the QP stayed there for now (sv_qp_leave_prepare(),
	 * QP and CQ locks)
	 */
	uint32_t pt_stays;
	struct sv_fifo build;
	uint32_t build_cur;
	int build_err;
};

/* sverbs_fast.h reads it through a pointer to the object */
_Static_assert(offsetof(struct sverbs_qp, fast) == 0, "fast: first");

/*
 * The opcode rules, one table (admit.c) indexed by ibv_wr_opcode: which
 * opcodes a managed QP carries, the completion opcode, which may be sliced,
 * which the peer sees arrive.  A QP created with a send op the layer does
 * not carry (SV_UNCARRIED_SEND_OPS) stays stock.
 */
struct sv_op_rule {
	bool carried;
	bool sliceable;	   /* non-inline: may be cut into slices */
	bool peer_visible; /* the peer sees it arrive (a receive completion) */
	enum ibv_wc_opcode wc;
};

#define SV_WR_OPCODES (IBV_WR_ATOMIC_WRITE + 1)
#define SV_UNCARRIED_SEND_OPS                        \
	(IBV_QP_EX_WITH_TSO | IBV_QP_EX_WITH_FLUSH | \
	 IBV_QP_EX_WITH_ATOMIC_WRITE)

extern const struct sv_op_rule sv_op_rules[SV_WR_OPCODES];

/*
 * pt's every change after creation: the provider's byte (layered) follows
 * it at once, so a post that reads the byte sees what one reading pt would.
 */
static inline void sv_qp_set_pt(struct sverbs_qp *sqp, unsigned char pt)
{
	atomic_store(&sqp->fast.pt, pt);
	atomic_store(sqp->fast.layered, pt != SVERBS_PT_ON);
}

static inline const struct sv_op_rule *sv_op_rule(enum ibv_wr_opcode op)
{
	static const struct sv_op_rule none = { .wc = IBV_WC_SEND };

	return (unsigned int)op < SV_WR_OPCODES ? &sv_op_rules[op] : &none;
}

/* ------------------------------------------------ slots, FIFOs, WQE ring */

static inline uint32_t sv_slot_alloc(struct sverbs_qp *sqp)
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

static inline void sv_slot_free(struct sverbs_qp *sqp, uint32_t s)
{
	sqp->slots[s].state = SV_WR_FREE;
	sqp->slots[s].next = sqp->free_head;
	sqp->free_head = s;
	sqp->nfree++;
}

static inline uint32_t *sv_fifo_link(struct sverbs_qp *sqp, uint32_t s,
				     bool fence)
{
	return fence ? &sqp->slots[s].fence_next : &sqp->slots[s].next;
}

static inline void sv_fifo_push(struct sverbs_qp *sqp, struct sv_fifo *f,
				uint32_t s, bool fence)
{
	*sv_fifo_link(sqp, s, fence) = SV_NONE;
	if (f->tail == SV_NONE)
		f->head = s;
	else
		*sv_fifo_link(sqp, f->tail, fence) = s;
	f->tail = s;
}

static inline void sv_fifo_push_front(struct sverbs_qp *sqp, struct sv_fifo *f,
				      uint32_t s, bool fence)
{
	*sv_fifo_link(sqp, s, fence) = f->head;
	f->head = s;
	if (f->tail == SV_NONE)
		f->tail = s;
}

static inline uint32_t sv_fifo_pop(struct sverbs_qp *sqp, struct sv_fifo *f,
				   bool fence)
{
	uint32_t s = f->head;

	if (s == SV_NONE)
		return SV_NONE;
	f->head = *sv_fifo_link(sqp, s, fence);
	if (f->head == SV_NONE)
		f->tail = SV_NONE;
	return s;
}

/* A WR enters (front: back to the head of) or leaves its level FIFO. */
static inline void sv_level_in(struct sverbs_qp *sqp, uint32_t s, bool front)
{
	struct sv_wr *w = &sqp->slots[s];

	if (front)
		sv_fifo_push_front(sqp, &sqp->level[w->prio], s, false);
	else
		sv_fifo_push(sqp, &sqp->level[w->prio], s, false);
	w->state = SV_WR_QUEUED;
	sqp->queued++;
	sqp->queued_no_hold += w->no_hold;
}

/* s is the head of its level: every level is FIFO and s leaves first */
static inline void sv_level_out(struct sverbs_qp *sqp, uint32_t s)
{
	struct sv_wr *w = &sqp->slots[s];

	sv_fifo_pop(sqp, &sqp->level[w->prio], false);
	sqp->queued--;
	sqp->queued_no_hold -= w->no_hold;
}

static inline struct sv_wqe *sv_wqe_at(struct sverbs_qp *sqp, uint64_t seq)
{
	return &sqp->ring[seq & sqp->ring_mask];
}

static inline void sv_wqe_account(struct sverbs_qp *sqp, const struct sv_wqe *q)
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

static inline void sv_wqe_release(struct sverbs_qp *sqp, struct sv_wqe *q)
{
	sqp->inflight_wqes--;
	sqp->inflight_bytes -= q->bytes;
	if (q->windowed)
		sqp->windowed_bytes -= q->bytes;
	if (q->signaled)
		sqp->inflight_sig--;
	if (q->cost)
		sv_hr_give(sqp->scq, 1);
	if (q->reserved)
		sqp->reserved_busy = false;
	q->cost = false;
	q->reserved = false;
}

static inline uint64_t sv_sge_total(const struct ibv_sge *sge, int n)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sge[i].length;
	return len;
}

/* The provider's errno for a WR beyond a limit of the QP. */
static inline int sv_limit_err(const struct sverbs_qp *sqp,
			       enum sverbs_wr_limit what, bool wr_api)
{
	return sqp->ad->limit_err ? sqp->ad->limit_err(what, wr_api) : EINVAL;
}

/* admit.c; with the QP lock held */
void sv_wr_commit(struct sverbs_qp *sqp, uint32_t s);
void sv_wr_stamp(struct sverbs_qp *sqp, struct sv_wr *w, unsigned int flags,
		 uint8_t prio);
uint8_t sv_wr_prio(const struct sverbs_qp *sqp, enum ibv_wr_opcode op,
		   unsigned int flags, uint64_t len);
bool sv_wr_app_signaled(const struct sverbs_qp *sqp, unsigned int flags);
int sv_qp_leave_prepare(struct sverbs_qp *sqp);
void sv_qp_leave_passthrough(struct sverbs_qp *sqp);

/* watch.c; without the QP lock, but sv_watch_seed (with it) */
/* counted: the glue read the completion count for this post already */
bool sv_watch_leaves(struct sverbs_qp *sqp, uint64_t *timed, bool counted);
void sv_watch_returned(struct sverbs_qp *sqp);
/* whether a watched QP may batch: not below RTS (sv_watch.unready) */
static inline bool sv_watch_ready(struct sverbs_qp *sqp)
{
	return !atomic_load_explicit(&sqp->watch.unready, memory_order_relaxed);
}
int sv_watch_ring(struct sverbs_qp *sqp, enum sv_ring_why why);
void sv_watch_ring_late(struct sverbs_qp *sqp, enum sv_ring_why why);
uint64_t sv_watch_rings(struct sverbs_qp *sqp);
int sv_watch_post_joined(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
int sv_watch_post_deferred(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr, uint64_t now);
/* lifetime.c: whether a watched QP may defer its doorbells (timer set up) */
bool sv_qp_defer_ready(struct sverbs_qp *sqp);
void sv_watch_join(struct sverbs_qp *sqp);
void sv_watch_leave(struct sverbs_qp *sqp);
void sv_watch_seed(struct sverbs_qp *sqp);
void sv_watch_init(struct sverbs_qp *sqp);

/* pump.c; with the QP lock held */
void sv_qp_post_unlock(struct sverbs_qp *sqp);
void sv_qp_unhold(struct sverbs_qp *sqp);
int sv_post_direct(struct sverbs_qp *sqp, uint32_t s,
		   const struct ibv_send_wr *wr);
void sv_post_nop(struct sverbs_qp *sqp);
void sv_call_begin(struct sverbs_qp *sqp);
int sv_call_end(struct sverbs_qp *sqp, uint64_t *bad_idx);

#endif /* SVERBS_QP_INT_H */
