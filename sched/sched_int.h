/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sched/ internals: the per-QP software send queue, the in-flight WQE ring,
 * the per-CQ completion state, and the functions the sched/ files share (the
 * contract with the glue is sverbs_sched.h). Nothing outside sched/ includes
 * this.
 *
 * Objects, all allocated when a QP or CQ registers (never on post/poll):
 *
 *   struct sv_wr     one application WR (a "slot"): a copy of its
 *                    ibv_send_wr with its SGE list (max_send_sge entries)
 *                    and, for IBV_SEND_INLINE, its data (max_inline_data
 *                    bytes); a WR that took the lone-WR path (post_direct)
 *                    keeps only what its completion needs.  max_send_wr
 *                    slots per QP: a slot is the application's capacity,
 *                    held from post until the WR's completion is reported
 *                    or a later completion retires it.
 *   level FIFOs      SVERBS_NUM_PRIO singly linked FIFOs of queued slots.
 *   struct sv_wqe    one WQE handed to the hardware, indexed by its internal
 *                    wr_id (a per-QP sequence number) in a power-of-two ring
 *                    larger than the hardware SQ.
 *   struct sverbs_cq the ready ring (completions sverbs delivers before the
 *                    raw CQ), a qp_num -> sverbs_qp table, the headroom
 *                    counter, the extended-CQ state.
 */
#ifndef SVERBS_SCHED_INT_H
#define SVERBS_SCHED_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sverbs_batch.h"
#include "sverbs_sched.h"
#include "slice.h"

#define SV_NONE UINT32_MAX

/*
 * Internal wr_ids: WQE sequence numbers start here, so that an internal
 * wr_id is recognisable (an error CQE does not say whether it is a send or
 * a receive completion; a wr_id in [seq_base, next seq) of a managed QP
 * is a send).  A QP that reuses the number of a destroyed one starts where
 * that one ended, so that the stale CQEs of its predecessor, below its
 * seq_base, are told apart.
 */
#define SV_SEQ_BASE 0x5356000000000000ull

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
	bool firm;    /* batching may not hold it (see wr_firm()) */
	bool refused; /* the provider refused it for good (see refuse()) */
	bool quiet;   /* its post failed at the doorbell: no made-up flush */
};

struct sv_wqe {
	uint32_t slot; /* SV_NONE: a nop, or a WR already completed */
	uint32_t bytes;
	struct sv_cursor start; /* the WR's cursor before this WQE (rollback) */
	bool final;		/* last WQE of its WR */
	bool signaled;
	bool cost;	/* holds a unit of CQ headroom */
	bool spare;	/* signaled with the QP's spare headroom unit */
	bool dequeued;	/* completing it removed its WR from its FIFO */
	bool fence_pop; /* ... and from the fence FIFO */
	bool windowed;	/* counted in windowed_bytes */
};

struct sv_fifo {
	uint32_t head;
	uint32_t tail;
};

struct sverbs_qp {
	pthread_spinlock_t lock;
	const struct sverbs_adapter *ad;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx; /* set when the ibv_wr_* API is installed */
	/* ... and the provider's wr_* ops, for pass-through batches */
	struct ibv_qp_ex raw_qpx;
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
	uint32_t queued;      /* WRs in the level FIFOs */
	uint32_t queued_firm; /* ... of which batching may not hold */
	uint64_t arrival_ns;  /* clock of the last WR queued, until a pump */
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
	 * Pass-through (see sverbs_post_send()): WRs go to the provider as
	 * the application posted them and complete untouched.  Read without
	 * the lock on the post path; cleared once, under it, never set again.
	 */
	atomic_bool pt;
	bool pt_tail; /* WQEs posted in pass-through may still be in flight */
	/*
	 * The provider took WQEs but its doorbell failed (rxe in INIT/RTR):
	 * they run only when a later doorbell rings, so nothing may wait for
	 * their completion to post (pt_tail) until one rang.
	 */
	bool db_owed;
	uint8_t levels_seen; /* bit per level a WR has been queued at */
	uint32_t inflight_sig;
	uint32_t unsig_wqes; /* since the last signaled WQE */
	uint64_t unsig_bytes;
	bool spare_busy;

	/* the chain of one pump round, handed to the adapter at once */
	struct ibv_send_wr *chain;
	struct ibv_sge *chain_sge;

	bool hw_err;	   /* hardware QP is in ERR: hand WRs over unsliced */
	bool dead;	   /* an error was reported: everything else flushes */
	bool hr_wait;	   /* waiting for CQ headroom */
	bool warned;	   /* adapter failure logged */
	uint32_t refusals; /* WRs the provider refused for good */
	uint64_t mark;	   /* poll round that touched it (CQ lock) */

	struct sv_slicer slicer;

	/* batching (batch/): when a pump round rings */
	struct sverbs_batch batch;
	struct sverbs_timer_entry timer; /* armed while WRs are held */
	bool timer_on;
	bool held;	       /* the queued WRs waited for a bigger batch */
	uint64_t hold_since;   /* arrival of the oldest WR queued (budget) */
	uint64_t held_at;      /* the first HOLD verdict of the current hold */
	uint64_t arm_deadline; /* timer to arm at the post's unlock; 0: none */
	uint64_t held_wait;    /* 1 + how long the hold that ended lasted */
	uint64_t app_wrs;      /* WRs the application posted */
	struct sverbs_qp *live_next; /* the live-QP list (SVERBS_STATS) */

	/*
	 * The post call in progress (ibv_post_send, wr_complete): what the
	 * provider refuses of its WRs at once fails the call, as stock (see
	 * sv_call_begin()).
	 */
	bool call_open;
	bool call_sync;	       /* refusals of its WRs still fail the call */
	uint64_t call_seq;     /* post_seq of its first WR */
	uint64_t call_bad_seq; /* its first WR refused; UINT64_MAX: none */
	int call_err;	       /* the error it returns */

	/* ibv_wr_* API: WRs built since wr_start */
	struct sv_fifo build;
	uint32_t build_cur;
	int build_err;
};

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
 * is next polled empty, or passes to a new QP with the same number.
 */
struct sv_grave {
	uint32_t qp_num;
	bool sealed;
	uint64_t seq_end;
};

#define SV_GRAVES 8

struct sverbs_cq {
	pthread_spinlock_t lock;
	const struct sverbs_adapter *ad;
	struct ibv_cq *cq;
	struct sverbs_config cfg;

	/* QPs whose send CQ this is: open addressing on qp_num */
	struct sverbs_qp **tab;
	uint32_t tab_mask;
	uint32_t nqp;
	uint32_t wr_capacity; /* sum of the registered QPs' max_send_wr */
	struct sv_grave graves[SV_GRAVES];
	uint32_t ngraves;

	/* completions to deliver before the raw CQ */
	struct ibv_wc *ready;
	uint32_t rcap;
	uint32_t rhead;
	uint32_t rcount;
	uint64_t dropped; /* never, unless the app overran its CQ */

	/*
	 * Headroom: hr_total CQEs beyond the application's.  Each registered
	 * QP owns one (its spare); the rest, hr_limit, is shared through
	 * hr_used, taken on the post path without the CQ lock.
	 */
	uint32_t hr_total;
	atomic_uint hr_limit;
	atomic_uint hr_used;
	atomic_uint hr_waiters;
	atomic_uint held_qps; /* QPs holding WRs for a bigger batch */
	/*
	 * The fast path (sverbs_poll_cq()): while no registered QP has left
	 * pass-through (layered) and nothing waits in the ready ring or the
	 * graves (backlog), a poll is the provider's own.
	 */
	atomic_uint layered;
	atomic_bool backlog;

	uint64_t mark;

	/* extended CQ */
	struct ibv_cq_ex *cq_ex;
	struct sv_ex_ops raw;
	uint64_t raw_flags; /* wc_flags the provider's CQ was created with */
	struct ibv_wc cur;  /* the completion the getters describe */
};

/*
 * Where translated completions go during one poll: straight into the
 * caller's array (compacting in place over the raw entries already read)
 * while order allows, else to the ready ring.
 */
struct sv_emit {
	struct sverbs_cq *scq;
	struct ibv_wc *wc; /* NULL: ready ring only */
	int out;
	int limit; /* entries of wc[] free for output: < limit */
	bool spill;
};

/* objmap.c: verbs object -> sverbs object, for the ex-CQ and wr_* ops */
bool sv_objmap_insert(const void *key, void *val);
void *sv_objmap_lookup(const void *key);
void sv_objmap_remove(const void *key);

/* cq.c; register/unregister/drain with the CQ lock held except register */
bool sv_cq_register(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_unlink(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_relink(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_unregister(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_drain(struct sverbs_cq *scq);
void sv_emit(struct sv_emit *e, const struct ibv_wc *wc);
bool sv_hr_take(struct sverbs_cq *scq);
void sv_hr_give(struct sverbs_cq *scq, unsigned int n);
void sv_hr_wait(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_log(const struct sverbs_adapter *ad, struct ibv_context *ctx,
	    enum sverbs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Why a pump round runs (for the batching decision, see qp.c). */
enum sv_pump_why {
	SV_PUMP_POST,  /* ibv_post_send / wr_complete */
	SV_PUMP_POLL,  /* completions freed room */
	SV_PUMP_ARM,   /* req_notify_cq */
	SV_PUMP_FLUSH, /* modify_qp */
	SV_PUMP_TIMER, /* the batching budget expired */
};

/* qp.c: with the QP lock held */
void sv_qp_pump(struct sverbs_qp *sqp, enum sv_pump_why why);
void sv_qp_post_unlock(struct sverbs_qp *sqp);
bool sv_qp_owns(const struct sverbs_qp *sqp, uint64_t wr_id);
void sv_qp_complete(struct sverbs_qp *sqp, const struct ibv_wc *raw,
		    struct sv_emit *e);
void sv_qp_flush_all(struct sverbs_qp *sqp, struct sv_emit *e);
uint32_t sv_slot_alloc(struct sverbs_qp *sqp);
void sv_slot_free(struct sverbs_qp *sqp, uint32_t s);
void sv_wr_commit(struct sverbs_qp *sqp, uint32_t s);
void sv_qp_leave_passthrough(struct sverbs_qp *sqp);
void sv_call_begin(struct sverbs_qp *sqp);
int sv_call_end(struct sverbs_qp *sqp, uint64_t *bad_idx);

#endif /* SVERBS_SCHED_INT_H */
