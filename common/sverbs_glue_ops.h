/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The verbs entry points a provider's glue installs when the layer is on.
 * Included once by providers/<name>/sverbs_<name>.c after it defines:
 *
 *   SV_ADAPTER             its struct sverbs_adapter (stock post/poll/arm)
 *   SV_QP(ibqp), SV_CQ(ibcq)   the struct sverbs_qp * / sverbs_cq * slot of
 *                          the provider's QP / CQ (NULL: stock object)
 *   SV_STOCK_DESTROY_CQ, SV_STOCK_MODIFY_QP, SV_STOCK_DESTROY_QP
 *   SV_POST_SEND, SV_POLL_CQ   the provider's own post_send and poll_cq
 *                          with the layer's tests inside (sverbs_fast.h,
 *                          "The tests a provider's own post_send / poll_cq
 *                          make"), which hand what is the layer's to
 *   SV_POST_LAYERED, SV_POLL_LAYERED   the names under which this file
 *                          defines the functions that take it
 *
 * and defines sv_ops, the table to merge with verbs_set_ops(), and
 * sv_query_qp_stats, to register with libsverbs.
 */
#ifndef SVERBS_GLUE_OPS_H
#define SVERBS_GLUE_OPS_H

#include <errno.h>

#include "sverbs_fast.h"
#include "sverbs_register.h"
#include "sverbs_sched.h"

/*
 * A watched QP (a budget in pass-through): a post whose poster waits for
 * its completions still goes as stock (sverbs_watch_waits()), any other is
 * sched/'s.  Out of line, so that the pass-through and queue paths' frame
 * stays what it was.
 */
static __attribute__((noinline)) int
sv_post_watched(struct ibv_qp *ibqp, struct sverbs_qp *sv,
		struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	return sverbs_post_watch_route(sv, ibqp, wr, bad_wr,
				       SV_ADAPTER.cq_consumed(ibqp->send_cq),
				       SV_ADAPTER.post_send);
}

/*
 * What the provider's post_send hands over: the whole post of a QP out of
 * pass-through, or the rest of a list from its first WR that states a
 * priority or uses a wr_id of the layer's (the WRs before it went as
 * stock).
 */
int SV_POST_LAYERED(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	struct sverbs_qp *sv = SV_QP(ibqp);

	if (sv) {
		if (SV_ADAPTER.cq_consumed && sverbs_qp_watched(sv))
			return sv_post_watched(ibqp, sv, wr, bad_wr);
		return sverbs_post_queued(sv, wr, bad_wr);
	}
	/* a QP the layer leaves stock: still no wr_id of the layer's */
	if (!sverbs_send_list_reserved(wr))
		return SV_ADAPTER.post_send(ibqp, wr, bad_wr);
	return sverbs_post_send_checked(ibqp, wr, bad_wr, SV_ADAPTER.post_send);
}

/* What the provider's poll_cq hands over: a CQ the layer polls. */
int SV_POLL_LAYERED(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	return sverbs_poll_cq(SV_CQ(ibcq), ne, wc);
}

/*
 * Receives: a wr_id of the layer's range fails (sverbs.h), so that a
 * receive completion in error, whose opcode verbs leaves undefined, is
 * never read as one of the layer's send completions by its wr_id (16.9).
 */
static int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	if (!sverbs_recv_list_reserved(wr))
		return SV_ADAPTER.post_recv(ibqp, wr, bad_wr);
	return sverbs_post_recv_checked(ibqp, wr, bad_wr, SV_ADAPTER.post_recv);
}

static int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad_wr)
{
	if (!sverbs_recv_list_reserved(wr))
		return SV_ADAPTER.post_srq_recv(srq, wr, bad_wr);
	return sverbs_post_srq_recv_checked(srq, wr, bad_wr,
					    SV_ADAPTER.post_srq_recv);
}

static int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sverbs_cq *sv = SV_CQ(ibcq);

	if (sv)
		return sverbs_req_notify_cq(sv, solicited_only);
	return SV_ADAPTER.req_notify_cq(ibcq, solicited_only);
}

static int sv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sverbs_cq *sv = SV_CQ(ibcq);

	if (sv)
		return sverbs_cq_resize(sv, cqe);
	return SV_ADAPTER.resize_cq(ibcq, cqe);
}

static int sv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sverbs_cq *sv = SV_CQ(ibcq);
	int ret;

	ret = SV_STOCK_DESTROY_CQ(ibcq);
	if (!ret && sv)
		sverbs_cq_destroy(sv);
	return ret;
}

static int sv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			int attr_mask)
{
	struct sverbs_qp *sv = SV_QP(ibqp);
	int ret;

	if (sv)
		sverbs_qp_modify_pre(sv, attr, attr_mask);
	ret = SV_STOCK_MODIFY_QP(ibqp, attr, attr_mask);
	if (sv)
		sverbs_qp_modify_post(sv, attr, attr_mask, ret);
	return ret;
}

static int sv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sverbs_qp *sv = SV_QP(ibqp);
	int ret;

	if (sv)
		sverbs_qp_destroy_pre(sv);
	ret = SV_STOCK_DESTROY_QP(ibqp);
	if (sv)
		sverbs_qp_destroy_post(sv, ret);
	return ret;
}

/* libsverbs' sverbs_query_qp_stats() for this provider's QPs. */
static int sv_query_qp_stats(struct ibv_qp *qp, struct sverbs_qp_stats *st)
{
	struct sverbs_qp *sv;

	/* a QP of this provider, in a context where the layer is on */
	if (qp->context->ops.post_send != SV_POST_SEND)
		return ENOENT;
	sv = SV_QP(qp);
	if (!sv)
		return ENOENT;
	sverbs_qp_get_stats(sv, st);
	return 0;
}

static const struct verbs_context_ops sv_ops = {
	.post_send = SV_POST_SEND,
	.post_recv = sv_post_recv,
	.post_srq_recv = sv_post_srq_recv,
	.poll_cq = SV_POLL_CQ,
	.req_notify_cq = sv_req_notify_cq,
	.resize_cq = sv_resize_cq,
	.destroy_cq = sv_destroy_cq,
	.modify_qp = sv_modify_qp,
	.destroy_qp = sv_destroy_qp,
};

#endif /* SVERBS_GLUE_OPS_H */
