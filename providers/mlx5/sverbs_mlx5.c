// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sverbs glue for mlx5: maps mlx5's objects to the provider-neutral hooks.
 * mlx5_post_send() writes every WQE of a chain and rings the doorbell once
 * at the end (doorbell record + one MMIO, BlueFlame for a lone small WQE), so
 * a chain handed to it by sverbs is one batch.  QPs and CQs made through
 * mlx5dv_create_qp()/mlx5dv_create_cq() are never managed (their mlx5dv
 * send ops and CQE formats are mlx5's own).
 */
#include <errno.h>

#include "mlx5.h"
#include "sverbs_mlx5.h"
#include "sverbs_glue.h"

static void mlx5_sv_log(struct ibv_context *ctx, enum sverbs_log_level level,
			const char *msg)
{
	verbs_log(verbs_get_ctx(ctx), level, "%s\n", msg);
}

/* The stock poll_cq depends on the context's CQE version. */
static int mlx5_sv_stock_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	if (to_mctx(ibcq->context)->cqe_version == MLX5_CQE_VERSION_V1)
		return mlx5_poll_cq_v1(ibcq, ne, wc);
	return mlx5_poll_cq(ibcq, ne, wc);
}

/*
 * _mlx5_post_send() checks, per WR: the opcode (EINVAL), the work queue
 * overflow (ENOMEM: full), the SGE count against qp_state_max_gs (ENOMEM:
 * too many SGEs, or a QP not in RTS, where qp_state_max_gs is -1), then
 * builds the WQE (inline data too long: ENOMEM; others EINVAL).  So an
 * ENOMEM means full unless the WR fails the checks that follow the overflow
 * check.
 */
static bool mlx5_sv_sq_full(struct ibv_qp *ibqp, int err,
			    const struct ibv_send_wr *bad)
{
	struct mlx5_qp *qp = to_mqp(ibqp);
	uint64_t len = 0;
	int i;

	if (!bad || err != ENOMEM || bad->num_sge > qp->sq.qp_state_max_gs)
		return false;
	if (bad->send_flags & IBV_SEND_INLINE) {
		for (i = 0; i < bad->num_sge; i++)
			len += bad->sg_list[i].length;
		if (len > qp->max_inline_data)
			return false;
	}
	return true;
}

/* MLX5_SINGLE_THREADED: mlx5_poll_cq() takes no lock. */
static bool mlx5_sv_cq_lockless(struct ibv_cq *ibcq)
{
	return !to_mcq(ibcq)->lock.need_lock;
}

/*
 * A QP of a thread domain (its send queue's lock off, its BlueFlame
 * register the domain's, shared unlocked with the domain's other QPs) or
 * of a single-threaded context.
 */
static bool mlx5_sv_qp_lockless(struct ibv_qp *ibqp)
{
	return !to_mqp(ibqp)->sq.lock.need_lock;
}

/*
 * _mlx5_post_send(): more SGEs than sq.max_gs (max_send_sge) or inline data
 * beyond max_inline_data: ENOMEM; the wr_set_sge_list / wr_set_inline_data
 * builders say ENOMEM too.
 */
static int mlx5_sv_limit_err(enum sverbs_wr_limit what, bool wr_api)
{
	(void)what;
	(void)wr_api;
	return ENOMEM;
}

/* Marks the layer's no-op WR (never read: num_sge 0). */
struct ibv_sge mlx5_sv_nop_sge;

/* mlx5's NOP WQE (see MLX5_SV_WR_NOP; patch 0003's _mlx5_post_send). */
static void mlx5_sv_nop_wr(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	(void)qp;
	wr->opcode = MLX5_SV_WR_NOP;
	wr->sg_list = &mlx5_sv_nop_sge;
	wr->num_sge = 0;
}

/*
 * Patch 0003's mlx5 sets the opcode of a completion in error: IBV_WC_RECV
 * for a responder error CQE (MLX5_CQE_RESP_ERR), IBV_WC_SEND for a
 * requester one, in mlx5_parse_cqe() and mlx5_cq_read_wc_opcode().
 */
static bool mlx5_sv_wc_is_recv(const struct ibv_wc *wc)
{
	return wc->opcode == IBV_WC_RECV;
}

/*
 * mlx5_poll_cq() advances cons_index once per CQE it takes, under the CQ's
 * lock (none for a single-threaded context); read racing it, as the
 * adapter allows.
 */
static uint32_t mlx5_sv_cq_consumed(struct ibv_cq *cq)
{
	return __atomic_load_n(&to_mcq(cq)->cons_index, __ATOMIC_RELAXED);
}

/*
 * Patch 0003's poll_cq tests the layer's CQ state under the CQ's lock (none
 * for a single-threaded context, whose polls and posts never overlap).
 */
static void mlx5_sv_cq_sync(struct ibv_cq *ibcq)
{
	struct mlx5_cq *cq = to_mcq(ibcq);

	if (!cq->lock.need_lock)
		return;
	mlx5_spin_lock(&cq->lock);
	mlx5_spin_unlock(&cq->lock);
}

static const struct sverbs_adapter mlx5_adapter = {
	.name = "mlx5",
	.post_send = mlx5_post_send,
	.post_recv = mlx5_post_recv,
	.post_srq_recv = mlx5_post_srq_recv,
	.sq_full = mlx5_sv_sq_full,
	.cq_lockless = mlx5_sv_cq_lockless,
	.qp_lockless = mlx5_sv_qp_lockless,
	.limit_err = mlx5_sv_limit_err,
	.poll_cq = mlx5_sv_stock_poll_cq,
	.req_notify_cq = mlx5_arm_cq,
	.resize_cq = mlx5_resize_cq,
	.log = mlx5_sv_log,
	.nop_wr = mlx5_sv_nop_wr,
	.wc_is_recv = mlx5_sv_wc_is_recv,
	.cq_consumed = mlx5_sv_cq_consumed,
	.cq_sync = mlx5_sv_cq_sync,
	.post_send_nodb = mlx5_sv_post_nodb,
	.ring = mlx5_sv_ring,
};

#define SV_ADAPTER	    mlx5_adapter
#define SV_QP(ibqp)	    (to_mqp(ibqp)->sv)
#define SV_CQ(ibcq)	    (to_mcq(ibcq)->sv)
#define SV_STOCK_DESTROY_CQ mlx5_destroy_cq
#define SV_STOCK_MODIFY_QP  mlx5_modify_qp
#define SV_STOCK_DESTROY_QP mlx5_destroy_qp
#define SV_POST_SEND	    mlx5_sv_post_send
#define SV_POLL_CQ	    mlx5_sv_poll_cq
#define SV_POST_LAYERED	    mlx5_sv_post_layered
#define SV_POLL_LAYERED	    mlx5_sv_poll_layered
#include "sverbs_glue_ops.h"

/*
 * sv_ops polls with mlx5_sv_poll_cq, for CQE version 0; a context of
 * version 1 gets this one on top (as mlx5 itself sets its poll_cq at init).
 */
static const struct verbs_context_ops sv_ops_cqe_v1 = {
	.poll_cq = mlx5_sv_poll_cq_v1,
};

/* The layer's context ops (the adapter test counts through them). */
const struct verbs_context_ops *mlx5_sv_ops(void)
{
	return &sv_ops;
}

/* With the layer off nothing is replaced: the context is stock. */
void mlx5_sv_context_init(struct verbs_context *vctx)
{
	if (sverbs_glue_config(&vctx->context, &mlx5_adapter)) {
		verbs_set_ops(vctx, &sv_ops);
		if (to_mctx(&vctx->context)->cqe_version == MLX5_CQE_VERSION_V1)
			verbs_set_ops(vctx, &sv_ops_cqe_v1);
		sverbs_register_stats_fn(sv_query_qp_stats);
	}
}

int mlx5_sv_cq_size(struct ibv_context *ctx, int cqe)
{
	return sverbs_glue_cq_size(ctx, &mlx5_adapter, cqe);
}

struct ibv_cq_init_attr_ex *mlx5_sv_cq_attr(struct ibv_context *ctx,
					    struct ibv_cq_init_attr_ex *attr,
					    struct ibv_cq_init_attr_ex *copy)
{
	return sverbs_glue_cq_attr(ctx, &mlx5_adapter, attr, copy);
}

void mlx5_sv_cq_created(struct ibv_cq_ex *cq, bool extended,
			uint64_t app_wc_flags)
{
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(cq);

	to_mcq(ibcq)->sv = sverbs_glue_cq_created(
		&mlx5_adapter, ibcq, extended ? cq : NULL, app_wc_flags,
		&to_mcq(ibcq)->sv_state);
}

void mlx5_sv_qp_created(struct ibv_qp *qp, struct ibv_qp_init_attr_ex *attr)
{
	if (attr->send_cq)
		to_mqp(qp)->sv = sverbs_glue_qp_created(
			&mlx5_adapter, qp, to_mcq(attr->send_cq)->sv, attr,
			&to_mqp(qp)->sv_layered);
}
