// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibv_wr_* API of a managed QP, provider-neutral.  Like the providers
 * with their send queue's lock, wr_start takes the QP's wr_lock and
 * wr_complete / wr_abort release it; the QP lock is taken only for a slot
 * and to queue the batch, so that the building thread may poll and arm the
 * CQ meanwhile (stock allows it).  Each wr_<opcode> takes a slot (the
 * application's capacity) and builds a WR in it, with wr_id and flags from
 * qpx->wr_id and qpx->wr_flags (priority bits included); wr_set_* fill the
 * latest one.  wr_complete queues them all through the same path as
 * ibv_post_send() and pumps; on any error in the batch (no slot: ENOMEM; too
 * many SGEs, inline data too long: the provider's errno, see
 * sverbs_adapter.limit_err; an opcode the QP type cannot carry: EINVAL) it
 * posts nothing and returns the error, as the providers do.
 *
 * A batch started while the QP is in pass-through (docs/semantics.md) is
 * the provider's own from wr_start to wr_complete: every op goes to the
 * provider's (raw_qpx).  Such a batch holds the provider's lock, not the
 * layer's, so which batch is in pass-through is per thread (pt_batch): a
 * thread may build a batch on another QP meanwhile, or another thread a
 * queued one on this QP once it left pass-through.  Priority bits never
 * reach the provider: a builder that finds them in wr_flags holds them back
 * for the call, and the batch ends the QP's pass-through when it completes
 * (its own WRs go in posting order, unscheduled).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qp_int.h"

static struct sverbs_qp *to_sqp(struct ibv_qp_ex *qpx)
{
	return sv_objmap_lookup(qpx);
}

/*
 * Read by every wr_* op of a pass-through batch: initial-exec, one load
 * from the thread pointer, not a __tls_get_addr() call per op (a few bytes
 * of the static TLS that glibc keeps for dlopen()ed libraries).
 */
#define SV_TLS __thread __attribute__((tls_model("initial-exec")))

static SV_TLS struct sverbs_qp *pt_batch;
static SV_TLS bool pt_batch_prio; /* a WR of it stated a priority */
/* a WR of it used a reserved wr_id: the batch fails (EINVAL), all of it */
static SV_TLS bool pt_batch_refused;

bool sv_wr_pt_batch_mine(const struct sverbs_qp *sqp)
{
	return pt_batch == sqp;
}

static bool in_pt_batch(const struct ibv_qp_ex *qpx)
{
	return pt_batch && pt_batch->qpx == qpx;
}

/*
 * A builder of a pass-through batch with a reserved wr_id (sverbs.h): the
 * provider never sees it; from there the batch builds nothing more (the
 * setters that follow would fill the provider's previous WQE) and
 * wr_complete aborts it and fails, as a provider fails a batch with a WR
 * it refused.
 */
static bool pt_batch_refuses(const struct ibv_qp_ex *qpx)
{
	if (sverbs_wr_id_reserved(qpx->wr_id))
		pt_batch_refused = true;
	return pt_batch_refused;
}

/* In this thread's pass-through batch: the provider's builder op. */
#define PT_BUILD(qpx, op, ...)                                                \
	do {                                                                  \
		if (in_pt_batch(qpx)) {                                       \
			unsigned int flags_ = (qpx)->wr_flags;                \
                                                                              \
			if (pt_batch_refuses(qpx))                            \
				return;                                       \
			if (flags_ & SVERBS_PRIO_MASK) {                      \
				pt_batch_prio = true;                         \
				(qpx)->wr_flags = flags_ & ~SVERBS_PRIO_MASK; \
			}                                                     \
			pt_batch->raw_qpx->op((qpx), ##__VA_ARGS__);          \
			(qpx)->wr_flags = flags_;                             \
			return;                                               \
		}                                                             \
	} while (0)

/* In this thread's pass-through batch: the provider's setter op. */
#define PT_SET(qpx, op, ...)                                                 \
	do {                                                                 \
		if (in_pt_batch(qpx)) {                                      \
			if (!pt_batch_refused)                               \
				pt_batch->raw_qpx->op((qpx), ##__VA_ARGS__); \
			return;                                              \
		}                                                            \
	} while (0)

/* The end of this thread's pass-through batch (complete or abort). */
static int pt_batch_end(struct ibv_qp_ex *qpx, bool complete)
{
	struct sverbs_qp *sqp = pt_batch;
	bool prio = pt_batch_prio, refused = pt_batch_refused;
	uint64_t timed = 0;
	bool leave;
	unsigned char pt;
	int ret = 0;

	pt_batch = NULL;
	pt_batch_prio = false;
	pt_batch_refused = false;
	if (!complete || refused) {
		sqp->raw_qpx->wr_abort(qpx);
		atomic_store(&sqp->pt_batch_open, false);
		return refused ? EINVAL : 0;
	}
	/* a watched QP's batch is one post (watch.c) */
	pt = atomic_load_explicit(&sqp->fast.pt, memory_order_acquire);
	leave = prio || (pt == SVERBS_PT_WATCH && sv_watch_ready(sqp) &&
			 sv_watch_leaves(sqp, &timed, false));
	ret = sqp->raw_qpx->wr_complete(qpx);
	atomic_store(&sqp->pt_batch_open, false);
	if (timed)
		sv_watch_returned(sqp);
	/* without the layer's queue (no memory), pass-through goes on */
	if (leave && !sv_qp_leave_prepare(sqp)) {
		pthread_spin_lock(&sqp->lock);
		if (atomic_load(&sqp->fast.pt))
			sv_qp_leave_passthrough(sqp);
		pthread_spin_unlock(&sqp->lock);
	}
	return ret;
}

/* QP lock held. */
static void build_drop(struct sverbs_qp *sqp)
{
	uint32_t s = sqp->build.head, next;

	while (s != SV_NONE) {
		next = sqp->slots[s].next;
		sv_slot_free(sqp, s);
		s = next;
	}
	sqp->build.head = sqp->build.tail = SV_NONE;
	sqp->build_cur = SV_NONE;
}

static void sv_wr_start(struct ibv_qp_ex *qpx)
{
	struct sverbs_qp *sqp = to_sqp(qpx);
	int err = 0;

	/* one pass-through batch per thread; a second one is queued */
	if (!pt_batch &&
	    atomic_load_explicit(&sqp->fast.pt, memory_order_acquire)) {
		sqp->raw_qpx->wr_start(qpx);
		atomic_store(&sqp->pt_batch_open, true);
		if (!atomic_load(&sqp->pt_leaving)) {
			pt_batch = sqp;
			return;
		}
		/*
		 * Another thread's post takes the QP out of pass-through: its
		 * pump would wait for the send queue this batch holds, with
		 * the QP lock a poll inside this batch needs.  This batch
		 * goes through the layer's queue instead.
		 */
		atomic_store(&sqp->pt_batch_open, false);
		sqp->raw_qpx->wr_abort(qpx);
	}
	/* the layer's queue, if not yet there (else the batch fails) */
	if (atomic_load_explicit(&sqp->fast.pt, memory_order_acquire))
		err = sv_qp_leave_prepare(sqp);
	pthread_spin_lock(&sqp->wr_lock);
	pthread_spin_lock(&sqp->lock);
	/* internal wr_ids follow: the CQ must translate */
	if (!err && atomic_load_explicit(&sqp->fast.pt, memory_order_relaxed))
		sv_qp_leave_passthrough(sqp);
	pthread_spin_unlock(&sqp->lock);
	sqp->build.head = sqp->build.tail = SV_NONE;
	sqp->build_cur = SV_NONE;
	/* EBUSY: inside another CQ's extended poll (sv_qp_leave_prepare()) */
	sqp->build_err = err == EBUSY ? EBUSY : err ? ENOMEM : 0;
}

static int sv_wr_complete(struct ibv_qp_ex *qpx)
{
	struct sverbs_qp *sqp;
	uint32_t s, next;
	uint64_t idx;
	int err;

	if (in_pt_batch(qpx))
		return pt_batch_end(qpx, true);
	sqp = to_sqp(qpx);
	err = sqp->build_err;

	pthread_spin_lock(&sqp->lock);
	if (err) {
		build_drop(sqp);
	} else {
		sv_call_begin(sqp);
		sqp->call_whole = true; /* as the providers' wr_complete */
		for (s = sqp->build.head; s != SV_NONE; s = next) {
			next = sqp->slots[s].next;
			sv_wr_commit(sqp, s);
		}
		sqp->build.head = sqp->build.tail = SV_NONE;
		sqp->build_cur = SV_NONE;
		sv_qp_pump(sqp, SV_PUMP_POST);
		/* the provider refused the batch's first WR: nothing went */
		err = sv_call_end(sqp, &idx);
	}
	sv_qp_post_unlock(sqp);
	pthread_spin_unlock(&sqp->wr_lock);
	return err;
}

static void sv_wr_abort(struct ibv_qp_ex *qpx)
{
	struct sverbs_qp *sqp;

	if (in_pt_batch(qpx)) {
		pt_batch_end(qpx, false);
		return;
	}
	sqp = to_sqp(qpx);
	pthread_spin_lock(&sqp->lock);
	build_drop(sqp);
	pthread_spin_unlock(&sqp->lock);
	pthread_spin_unlock(&sqp->wr_lock);
}

/* A new WR of this batch, or NULL once the batch has failed. */
static struct sv_wr *wr_new(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op)
{
	struct sverbs_qp *sqp = to_sqp(qpx);
	struct sv_wr *w;
	uint32_t s;

	if (sqp->build_err)
		return NULL;
	/* the layer's own wr_ids (sverbs.h) */
	if (sverbs_wr_id_reserved(qpx->wr_id)) {
		sqp->build_err = EINVAL;
		return NULL;
	}
	if (sqp->qp_type != IBV_QPT_RC &&
	    (op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     op == IBV_WR_ATOMIC_FETCH_AND_ADD)) {
		sqp->build_err = EINVAL;
		return NULL;
	}
	pthread_spin_lock(&sqp->lock);
	s = sv_slot_alloc(sqp);
	pthread_spin_unlock(&sqp->lock);
	if (s == SV_NONE) {
		sqp->build_err = ENOMEM;
		return NULL;
	}
	w = &sqp->slots[s];
	memset(&w->wr, 0, sizeof(w->wr));
	w->wr.wr_id = qpx->wr_id;
	w->wr.send_flags = qpx->wr_flags & ~IBV_SEND_INLINE;
	w->wr.opcode = op;
	w->wr.sg_list = w->sge;
	w->len = 0;
	if (sqp->build.tail == SV_NONE)
		sqp->build.head = s;
	else
		sqp->slots[sqp->build.tail].next = s;
	sqp->build.tail = s;
	sqp->build_cur = s;
	return w;
}

/* The WR the wr_set_* calls apply to. */
static struct sv_wr *wr_cur(struct sverbs_qp *sqp)
{
	if (sqp->build_err || sqp->build_cur == SV_NONE)
		return NULL;
	return &sqp->slots[sqp->build_cur];
}

static void sv_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			     uint64_t remote_addr)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_rdma_write, rkey, remote_addr);
	w = wr_new(qpx, IBV_WR_RDMA_WRITE);
	if (w) {
		w->wr.wr.rdma.remote_addr = remote_addr;
		w->wr.wr.rdma.rkey = rkey;
	}
}

static void sv_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr, __be32 imm_data)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_rdma_write_imm, rkey, remote_addr, imm_data);
	w = wr_new(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (w) {
		w->wr.wr.rdma.remote_addr = remote_addr;
		w->wr.wr.rdma.rkey = rkey;
		w->wr.imm_data = imm_data;
	}
}

static void sv_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			    uint64_t remote_addr)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_rdma_read, rkey, remote_addr);
	w = wr_new(qpx, IBV_WR_RDMA_READ);
	if (w) {
		w->wr.wr.rdma.remote_addr = remote_addr;
		w->wr.wr.rdma.rkey = rkey;
	}
}

static void sv_wr_send(struct ibv_qp_ex *qpx)
{
	PT_BUILD(qpx, wr_send);
	wr_new(qpx, IBV_WR_SEND);
}

static void sv_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_send_imm, imm_data);
	w = wr_new(qpx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->wr.imm_data = imm_data;
}

static void sv_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_send_inv, invalidate_rkey);
	w = wr_new(qpx, IBV_WR_SEND_WITH_INV);
	if (w)
		w->wr.invalidate_rkey = invalidate_rkey;
}

static void sv_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr, uint64_t compare,
				 uint64_t swap)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_atomic_cmp_swp, rkey, remote_addr, compare, swap);
	w = wr_new(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->wr.wr.atomic.remote_addr = remote_addr;
		w->wr.wr.atomic.compare_add = compare;
		w->wr.wr.atomic.swap = swap;
		w->wr.wr.atomic.rkey = rkey;
	}
}

static void sv_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, uint64_t add)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_atomic_fetch_add, rkey, remote_addr, add);
	w = wr_new(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->wr.wr.atomic.remote_addr = remote_addr;
		w->wr.wr.atomic.compare_add = add;
		w->wr.wr.atomic.rkey = rkey;
	}
}

static void sv_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			  uint32_t rkey,
			  const struct ibv_mw_bind_info *bind_info)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_bind_mw, mw, rkey, bind_info);
	w = wr_new(qpx, IBV_WR_BIND_MW);
	if (w) {
		w->wr.bind_mw.mw = mw;
		w->wr.bind_mw.rkey = rkey;
		w->wr.bind_mw.bind_info = *bind_info;
	}
}

static void sv_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct sv_wr *w;

	PT_BUILD(qpx, wr_local_inv, invalidate_rkey);
	w = wr_new(qpx, IBV_WR_LOCAL_INV);
	if (w)
		w->wr.invalidate_rkey = invalidate_rkey;
}

static void sv_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
			  uint32_t length)
{
	struct sverbs_qp *sqp;
	struct sv_wr *w;

	PT_SET(qpx, wr_set_sge, lkey, addr, length);
	sqp = to_sqp(qpx);
	w = wr_cur(sqp);
	if (!w)
		return;
	if (!sqp->max_sge_app) {
		sqp->build_err = sv_limit_err(sqp, SVERBS_LIMIT_SGE, true);
		return;
	}
	w->sge[0].lkey = lkey;
	w->sge[0].addr = addr;
	w->sge[0].length = length;
	w->wr.num_sge = 1;
	w->wr.send_flags &= ~IBV_SEND_INLINE;
}

static void sv_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			       const struct ibv_sge *sg_list)
{
	struct sverbs_qp *sqp;
	struct sv_wr *w;

	PT_SET(qpx, wr_set_sge_list, num_sge, sg_list);
	sqp = to_sqp(qpx);
	w = wr_cur(sqp);
	if (!w)
		return;
	if (num_sge > sqp->max_sge_app) {
		sqp->build_err = sv_limit_err(sqp, SVERBS_LIMIT_SGE, true);
		return;
	}
	if (num_sge)
		memcpy(w->sge, sg_list, num_sge * sizeof(*sg_list));
	w->wr.num_sge = (int)num_sge;
	w->wr.send_flags &= ~IBV_SEND_INLINE;
}

static void sv_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				       const struct ibv_data_buf *buf_list)
{
	struct sverbs_qp *sqp;
	struct sv_wr *w;
	size_t i, len = 0;

	PT_SET(qpx, wr_set_inline_data_list, num_buf, buf_list);
	sqp = to_sqp(qpx);
	w = wr_cur(sqp);
	if (!w)
		return;
	for (i = 0; i < num_buf; i++)
		len += buf_list[i].length;
	if (len > sqp->max_inline) {
		sqp->build_err = sv_limit_err(sqp, SVERBS_LIMIT_INLINE, true);
		return;
	}
	len = 0;
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length)
			memcpy(w->inl + len, buf_list[i].addr,
			       buf_list[i].length);
		len += buf_list[i].length;
	}
	w->len = len;
	w->sge[0].addr = (uintptr_t)w->inl;
	w->sge[0].length = (uint32_t)len;
	w->sge[0].lkey = 0;
	w->wr.num_sge = len ? 1 : 0;
	w->wr.send_flags |= IBV_SEND_INLINE;
}

static void sv_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				  size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	PT_SET(qpx, wr_set_inline_data, addr, length);
	sv_wr_set_inline_data_list(qpx, 1, &buf);
}

static void sv_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			      uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct sv_wr *w;

	PT_SET(qpx, wr_set_ud_addr, ah, remote_qpn, remote_qkey);
	w = wr_cur(to_sqp(qpx));
	if (w) {
		w->wr.wr.ud.ah = ah;
		w->wr.wr.ud.remote_qpn = remote_qpn;
		w->wr.wr.ud.remote_qkey = remote_qkey;
	}
}

static void sv_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct sv_wr *w;

	PT_SET(qpx, wr_set_xrc_srqn, remote_srqn);
	w = wr_cur(to_sqp(qpx));
	if (w)
		w->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

bool sverbs_qp_install_wr_ops(struct sverbs_qp *sqp, struct ibv_qp_ex *qpx,
			      uint64_t send_ops_flags)
{
	if (send_ops_flags & SV_UNCARRIED_SEND_OPS)
		return false;
	/* the provider's ops, for pass-through (only the ops are used) */
	sqp->raw_qpx = malloc(sizeof(*sqp->raw_qpx));
	if (!sqp->raw_qpx)
		return false;
	if (!sv_objmap_insert(qpx, sqp)) {
		free(sqp->raw_qpx);
		sqp->raw_qpx = NULL;
		return false;
	}
	*sqp->raw_qpx = *qpx;
	sqp->qpx = qpx;
	qpx->wr_start = sv_wr_start;
	qpx->wr_complete = sv_wr_complete;
	qpx->wr_abort = sv_wr_abort;
	qpx->wr_rdma_write = sv_wr_rdma_write;
	qpx->wr_rdma_write_imm = sv_wr_rdma_write_imm;
	qpx->wr_rdma_read = sv_wr_rdma_read;
	qpx->wr_send = sv_wr_send;
	qpx->wr_send_imm = sv_wr_send_imm;
	qpx->wr_send_inv = sv_wr_send_inv;
	qpx->wr_atomic_cmp_swp = sv_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = sv_wr_atomic_fetch_add;
	qpx->wr_bind_mw = sv_wr_bind_mw;
	qpx->wr_local_inv = sv_wr_local_inv;
	qpx->wr_set_sge = sv_wr_set_sge;
	qpx->wr_set_sge_list = sv_wr_set_sge_list;
	qpx->wr_set_inline_data = sv_wr_set_inline_data;
	qpx->wr_set_inline_data_list = sv_wr_set_inline_data_list;
	qpx->wr_set_ud_addr = sv_wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = sv_wr_set_xrc_srqn;
	return true;
}
