/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The pass-through fast paths of post_send and poll_cq, inlined into each
 * provider's own post_send and poll_cq (patches 0002, 0003) and into
 * sched/'s generic entry points.  C11 only (atomics): sverbs_sched.h, which
 * C++ test and bench code includes, does not include this.
 */
#ifndef SVERBS_SVERBS_FAST_H
#define SVERBS_SVERBS_FAST_H

#include <stdatomic.h>

#include "sverbs_sched.h"

/*
 * Pass-through fast paths.  The provider's post_send and poll_cq test these
 * inline and, while the layer has nothing to do, go on as stock (below, "The
 * tests a provider's own post_send / poll_cq make"): no call into sched/, no
 * adapter function pointer.  They are the first member of struct
 * sverbs_qp / struct sverbs_cq (sched/qp_int.h, cq_int.h, which own them),
 * so a pointer to the object is one to them (C11 6.7.2.1).
 */
/* struct sverbs_qp_fast.pt */
enum {
	SVERBS_PT_OFF = 0,   /* the layer's queue */
	SVERBS_PT_ON = 1,    /* pass-through */
	SVERBS_PT_WATCH = 2, /* pass-through with a batch budget (watch.c) */
};

struct sverbs_qp_fast {
	/*
	 * pt: WRs go to the provider as the application posted them and
	 * complete untouched (docs/semantics.md).  Read without the lock on
	 * the post path; cleared once, under it, never set again (WATCH may
	 * become ON first: a QP that stays stock watches no more).  WATCH:
	 * the post is stock too while its poster waits for completions (the
	 * glue's test, sverbs_watch_waits()); any other takes sched/'s path,
	 * which watches whether a batch would form (sched/watch.c).
	 * stock: the QP's CQ had no headroom when it tried to leave
	 * pass-through: it stays there, as a QP the layer does not manage
	 * (set once, under the CQ lock).
	 */
	atomic_uchar pt;
	atomic_bool stock;
	/*
	 * WATCH (sched/watch.c): the send CQ's completion count at the QP's
	 * previous post, and that post's return (0: none to count a gap
	 * from).  Relaxed: unlocked posts race on them, a heuristic.
	 */
	_Atomic uint32_t consumed;
	_Atomic uint64_t last_ns;
	/*
	 * WATCH with the adapter's post_send_nodb: WQEs the provider wrote
	 * without their doorbell since the last one (sched/watch.c,
	 * "Deferred doorbells").  Whoever takes it from nonzero to 0 rings.
	 */
	_Atomic uint32_t deferred;
	/*
	 * layered: whether a post goes to the layer (pt is not ON), kept
	 * with pt (sv_qp_set_pt()) where the provider's post_send tests it:
	 * a byte of the provider's own QP once the glue gave one
	 * (sverbs_qp_use_layered_byte()), so that its test is one load of
	 * the object it already has, not a pointer and then the state.
	 */
	atomic_uchar *layered;
	atomic_uchar own_layered;
};

/* struct sverbs_cq_fast.state: its low bits count the layered QPs */
#define SVERBS_CQ_LAYERED 0x1fffffffu
#define SVERBS_CQ_DEFER	  0x20000000u
#define SVERBS_CQ_BACKLOG 0x40000000u
#define SVERBS_CQ_EX	  0x80000000u

struct sverbs_cq_fast {
	/*
	 * One word, so that the pass-through poll tests it once.  While no
	 * registered QP has left pass-through (the count in LAYERED) and
	 * nothing waits in the ready ring or the stale list (BACKLOG), a
	 * poll is the provider's own.  DEFER: a watched QP on the CQ wrote
	 * WQEs without their doorbell (sched/watch.c); the next poll or arm
	 * rings them first.  EX: an extended CQ, always polled
	 * through sched/.  The count and the bits change by atomic add, sub,
	 * or and and, never by a store of the whole word.  It is own_state,
	 * or a word of the provider's own CQ once the glue gave one
	 * (sverbs_cq_use_state_word()): the provider's poll then tests a
	 * field of the object it already has.
	 */
	atomic_uint *state;
	atomic_uint own_state;
};

/*
 * The glue's, right after the QP / CQ was registered and before the
 * application has it: from now on the word the provider's own post_send /
 * poll_cq tests is the provider's (a field of its QP / CQ, zeroed: a QP
 * or CQ the layer did not register reads as pass-through).  It takes the
 * current value.
 */
static inline void sverbs_qp_use_layered_byte(struct sverbs_qp *sqp,
					      atomic_uchar *byte)
{
	struct sverbs_qp_fast *f = (struct sverbs_qp_fast *)sqp;

	atomic_store(byte, atomic_load(f->layered));
	f->layered = byte;
}

static inline void sverbs_cq_use_state_word(struct sverbs_cq *scq,
					    atomic_uint *word)
{
	struct sverbs_cq_fast *f = (struct sverbs_cq_fast *)scq;

	atomic_store(word, atomic_load(f->state));
	f->state = word;
}

/* What a scan of a post's list found (sverbs_list_scan()). */
enum {
	SVERBS_SCAN_PRIO = 1 << 0,     /* a WR states a priority */
	SVERBS_SCAN_RESERVED = 1 << 1, /* a WR's wr_id is the layer's */
};

/*
 * One pass over the list: whether a WR states a priority, and whether one
 * uses a wr_id of the layer's range (the scan stops there: that WR fails).
 */
static inline unsigned int sverbs_list_scan(const struct ibv_send_wr *wr)
{
	unsigned int found = 0;

	for (; wr; wr = wr->next) {
		if (wr->send_flags & SVERBS_PRIO_MASK)
			found |= SVERBS_SCAN_PRIO;
		if (sverbs_wr_id_reserved(wr->wr_id))
			return found | SVERBS_SCAN_RESERVED;
	}
	return found;
}

/* Whether a WR of a send or receive list uses a wr_id of the layer's. */
static inline bool sverbs_send_list_reserved(const struct ibv_send_wr *wr)
{
	for (; wr; wr = wr->next)
		if (sverbs_wr_id_reserved(wr->wr_id))
			return true;
	return false;
}

static inline bool sverbs_recv_list_reserved(const struct ibv_recv_wr *wr)
{
	for (; wr; wr = wr->next)
		if (sverbs_wr_id_reserved(wr->wr_id))
			return true;
	return false;
}

/* Whether a WR states no priority and uses no wr_id of the layer's range. */
static inline bool sverbs_wr_plain(const struct ibv_send_wr *wr)
{
	return !(wr->send_flags & SVERBS_PRIO_MASK) &&
	       !sverbs_wr_id_reserved(wr->wr_id);
}

/*
 * Whether every WR of the list is plain: one test per WR, all the
 * pass-through post pays (a lone WR, the latency case, first).
 */
static inline bool sverbs_list_plain(const struct ibv_send_wr *wr)
{
	if (wr && !wr->next)
		return sverbs_wr_plain(wr);
	for (; wr; wr = wr->next)
		if (!sverbs_wr_plain(wr))
			return false;
	return true;
}

/* Whether the QP is in pass-through, not watched (SVERBS_PT_ON). */
static inline bool sverbs_qp_pt(const struct sverbs_qp *sqp)
{
	const struct sverbs_qp_fast *f = (const struct sverbs_qp_fast *)sqp;

	return atomic_load_explicit(&f->pt, memory_order_acquire) ==
	       SVERBS_PT_ON;
}

/*
 * Whether a post of wr goes to the provider as it is (pass-through: no lock,
 * no copy, the application's wr_ids).  Any other takes sched/'s path, which
 * scans the list again (sverbs_list_scan()): the QP's first WR that states a
 * priority leaves pass-through (unless the QP stays stock: then it posts
 * stock too), and a list with a reserved wr_id is refused from it on.  A
 * watched QP's posts are not stock here (sverbs_qp_watched(),
 * sverbs_watch_waits()).
 */
static inline bool sverbs_post_is_stock(const struct sverbs_qp *sqp,
					const struct ibv_send_wr *wr)
{
	return sverbs_qp_pt(sqp) && sverbs_list_plain(wr);
}

/*
 * The tests a provider's own post_send / poll_cq make while the layer is on
 * (patches 0002, 0003: rxe's and mlx5's post_send and poll_cq with an sv
 * flag), so that pass-through costs them and nothing else: no call in
 * front of the provider's, no second look at the CQ after its poll.
 *
 * A QP out of pass-through (queued or watched) posts through the layer:
 * the whole list goes to the glue's sv_post_layered().  The test reads the
 * provider QP's own byte (sverbs_qp_use_layered_byte()): 0 for a QP the
 * layer did not register, which posts as stock.
 */
static inline bool sverbs_qp_layered(const atomic_uchar *layered)
{
	return atomic_load_explicit(layered, memory_order_acquire);
}

/*
 * A WR that states a priority or uses a wr_id of the layer's is the
 * layer's, with the rest of its list: the WRs before it are posted as
 * stock, then sv_post_layered() takes it (as a pass-through QP's next post
 * would).
 */
static inline bool sverbs_wr_layered(const struct ibv_send_wr *wr)
{
	return !sverbs_wr_plain(wr);
}

/* Whether the QP is watched (SVERBS_PT_WATCH, sched/watch.c). */
static inline bool sverbs_qp_watched(const struct sverbs_qp *sqp)
{
	const struct sverbs_qp_fast *f = (const struct sverbs_qp_fast *)sqp;

	return atomic_load_explicit(&f->pt, memory_order_acquire) ==
	       SVERBS_PT_WATCH;
}

/*
 * Whether the send CQ's count (consumed: the adapter's, now) moved since
 * the watched QP's previous post, which then waited for completions; the
 * count is kept, and no gap is counted from that post (sched/watch.c).
 * The post then goes stock; its doorbell sends what was deferred too, but
 * the deferred count stays for the timer or a poll to ring again (a
 * refused stock post may ring nothing: mlx5 with no WQE written).
 */
static inline bool sverbs_watch_took(struct sverbs_qp *sqp, uint32_t consumed)
{
	struct sverbs_qp_fast *f = (struct sverbs_qp_fast *)sqp;

	if (consumed ==
	    atomic_load_explicit(&f->consumed, memory_order_relaxed))
		return false;
	atomic_store_explicit(&f->consumed, consumed, memory_order_relaxed);
	atomic_store_explicit(&f->last_ns, 0, memory_order_relaxed);
	return true;
}

/*
 * A watched QP's post whose poster took a completion since its previous
 * post waits for its completions: no batch would form, so it goes to the
 * provider as it is, as in pass-through, with no call into sched/ and no
 * clock read (sched/watch.c has the rest of the rule).
 */
static inline bool sverbs_watch_waits(struct sverbs_qp *sqp,
				      const struct ibv_send_wr *wr,
				      uint32_t consumed)
{
	return sverbs_list_plain(wr) && sverbs_watch_took(sqp, consumed);
}

/*
 * A watched QP's post: stock when its poster waits (consumed: the send CQ's
 * count, now), else sched/'s, which may defer its doorbell.  The glue and
 * sverbs_post_send() both route through here; post is the provider's own
 * post_send (a constant in the glue: a direct call).
 */
static inline int
sverbs_post_watch_route(struct sverbs_qp *sqp, struct ibv_qp *qp,
			struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr,
			uint32_t consumed, sverbs_post_send_fn post)
{
	if (sverbs_watch_waits(sqp, wr, consumed))
		return post(qp, wr, bad_wr);
	return sverbs_post_watched(sqp, wr, bad_wr);
}

/* Whether a poll is the provider's own (see sverbs_poll_fixup()). */
static inline bool sverbs_poll_is_stock(const struct sverbs_cq *scq)
{
	const struct sverbs_cq_fast *f = (const struct sverbs_cq_fast *)scq;

	return !atomic_load_explicit(f->state, memory_order_relaxed);
}

/*
 * A CQ with a QP out of pass-through (or with a backlog, or extended) is
 * polled by the layer.  Tested under the provider's CQ lock: the layer
 * counts a QP that leaves pass-through, then takes and drops that lock (the
 * adapter's cq_sync) before its first WQE, so a poll that found the count 0
 * is over before any layer WQE can complete (sched/cq.c, sv_cq_layered()).
 * It reads the provider CQ's own word (sverbs_cq_use_state_word()): 0 for
 * a CQ the layer did not register, which polls as stock.
 */
static inline bool sverbs_cq_layered(const atomic_uint *state)
{
	return atomic_load_explicit(state, memory_order_relaxed);
}

/*
 * After a provider's own poll that returned n: whether a QP on the CQ left
 * pass-through meanwhile, so that any of the n may be one of its internal
 * WQEs (a layer WQE is posted only after the count went up).
 */
static inline bool sverbs_poll_needs_fixup(const struct sverbs_cq *scq, int n)
{
	const struct sverbs_cq_fast *f = (const struct sverbs_cq_fast *)scq;

	return n > 0 && (atomic_load(f->state) & SVERBS_CQ_LAYERED);
}

#endif /* SVERBS_SVERBS_FAST_H */
