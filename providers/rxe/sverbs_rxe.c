// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sverbs glue for rxe: maps rxe's objects to the provider-neutral hooks.
 * rxe rings its doorbell with one post_send system call per call of its
 * post_send whatever the chain length, so the adapter is the stock entry
 * points: a chain handed to rxe_post_send() is one batch, one syscall.
 */
#include <errno.h>
#include <sys/mman.h>

#include "rxe.h"
#include "rxe_queue.h"
#include "sverbs_rxe.h"
#include "sverbs_glue.h"

static void rxe_sv_log(struct ibv_context *ctx, enum sverbs_log_level level,
		       const char *msg)
{
	verbs_log(verbs_get_ctx(ctx), level, "%s\n", msg);
}

/*
 * rxe_post_send() returns ENOMEM for a WR only when its send queue is full
 * (post_one_send(); a bad WR is EINVAL).  An error with no bad WR is the
 * doorbell system call failing after the WQEs were written (a QP not yet in
 * RTS: EINVAL): never "full".
 */
static bool rxe_sv_sq_full(struct ibv_qp *qp, int err,
			   const struct ibv_send_wr *bad)
{
	(void)qp;
	return bad && err == ENOMEM;
}

/*
 * validate_send_wr() (rxe_post_send): too many SGEs, inline data too long:
 * EINVAL; the wr_set_sge_list / wr_set_inline_data builders: ENOSPC.
 */
static int rxe_sv_limit_err(enum sverbs_wr_limit what, bool wr_api)
{
	(void)what;
	return wr_api ? ENOSPC : EINVAL;
}

/*
 * rxe has no no-op opcode; a zero-length RDMA WRITE is one.  The peer's
 * responder (the kernel's drivers/infiniband/sw/rxe/rxe_resp.c, check_rkey(),
 * in the guest's 6.1 as in later kernels: "A zero-byte op is not required to
 * set an addr or rkey", IBA C9-88) executes a READ or WRITE whose RETH
 * length is 0 without looking its rkey up, so rkey 0 cannot fail it; it
 * moves no data and, without an immediate, the peer sees nothing.  sg_list
 * points at an entry never read (num_sge 0): rxe_post_send's
 * init_send_wqe() copies num_sge entries from it, and a memcpy from NULL is
 * undefined even for 0 bytes.
 */
static void rxe_sv_nop_wr(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	static struct ibv_sge unused;

	(void)qp;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->sg_list = &unused;
	wr->num_sge = 0;
}

/*
 * rxe_poll_cq() advances the CQ ring's consumer index (an atomic in the
 * ring shared with the kernel) once per completion it takes.  Read under
 * the CQ's lock: rxe_resize_cq() unmaps the ring and maps another under it
 * (the application's resize, or the layer's when another QP leaves
 * pass-through), so an unlocked read could touch an unmapped ring.  A
 * failed remap leaves no ring: nothing is counted then.
 */
static uint32_t rxe_sv_cq_consumed(struct ibv_cq *ibcq)
{
	struct rxe_cq *cq = to_rcq(ibcq);
	struct rxe_queue_buf *q;
	uint32_t n = 0;

	pthread_spin_lock(&cq->lock);
	q = cq->queue;
	if (q && (void *)q != MAP_FAILED)
		n = atomic_load_explicit(consumer(q), memory_order_relaxed);
	pthread_spin_unlock(&cq->lock);
	return n;
}

/* Patch 0002's poll_cq tests the layer's CQ state under the CQ's lock. */
static void rxe_sv_cq_sync(struct ibv_cq *ibcq)
{
	struct rxe_cq *cq = to_rcq(ibcq);

	pthread_spin_lock(&cq->lock);
	pthread_spin_unlock(&cq->lock);
}

static const struct sverbs_adapter rxe_adapter = {
	.name = "rxe",
	.post_send = rxe_post_send,
	.post_recv = rxe_post_recv,
	.post_srq_recv = rxe_post_srq_recv,
	.sq_full = rxe_sv_sq_full,
	.limit_err = rxe_sv_limit_err,
	.poll_cq = rxe_poll_cq,
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = rxe_resize_cq,
	.log = rxe_sv_log,
	.nop_wr = rxe_sv_nop_wr,
	.cq_consumed = rxe_sv_cq_consumed,
	.cq_sync = rxe_sv_cq_sync,
	.post_send_nodb = rxe_sv_post_nodb,
	.ring = rxe_sv_ring,
};

#define SV_ADAPTER	    rxe_adapter
#define SV_QP(ibqp)	    (to_rqp(ibqp)->sv)
#define SV_CQ(ibcq)	    (to_rcq(ibcq)->sv)
#define SV_STOCK_DESTROY_CQ rxe_destroy_cq
#define SV_STOCK_MODIFY_QP  rxe_modify_qp
#define SV_STOCK_DESTROY_QP rxe_destroy_qp
#define SV_POST_SEND	    rxe_sv_post_send
#define SV_POLL_CQ	    rxe_sv_poll_cq
#define SV_POST_LAYERED	    rxe_sv_post_layered
#define SV_POLL_LAYERED	    rxe_sv_poll_layered
#include "sverbs_glue_ops.h"

/* With the layer off nothing is replaced: the context is stock. */
void rxe_sv_context_init(struct verbs_context *vctx)
{
	if (sverbs_glue_config(&vctx->context, &rxe_adapter)) {
		verbs_set_ops(vctx, &sv_ops);
		sverbs_register_stats_fn(sv_query_qp_stats);
	}
}

int rxe_sv_cq_size(struct ibv_context *ctx, int cqe)
{
	return sverbs_glue_cq_size(ctx, &rxe_adapter, cqe);
}

struct ibv_cq_init_attr_ex *rxe_sv_cq_attr(struct ibv_context *ctx,
					   struct ibv_cq_init_attr_ex *attr,
					   struct ibv_cq_init_attr_ex *copy)
{
	return sverbs_glue_cq_attr(ctx, &rxe_adapter, attr, copy);
}

void rxe_sv_cq_created(struct rxe_cq *cq, struct ibv_cq_ex *cq_ex,
		       uint64_t app_wc_flags)
{
	cq->sv = sverbs_glue_cq_created(&rxe_adapter, &cq->vcq.cq, cq_ex,
					app_wc_flags, &cq->sv_state);
}

void rxe_sv_qp_created(struct rxe_qp *qp, struct ibv_qp_init_attr_ex *attr)
{
	if (attr->send_cq)
		qp->sv = sverbs_glue_qp_created(&rxe_adapter, &qp->vqp.qp,
						to_rcq(attr->send_cq)->sv, attr,
						&qp->sv_layered);
}

void rxe_sv_qp_created_legacy(struct rxe_qp *qp, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;

	sverbs_qp_attr_from_legacy(&ex, attr, qp->vqp.qp.pd);
	rxe_sv_qp_created(qp, &ex);
}
