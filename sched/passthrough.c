// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * TEMPORARY pass-through implementation of sverbs_sched.h: every hook goes straight
 * to the provider's stock entry point.  Replaced by the scheduler.
 */
#include <stdlib.h>

#include "sverbs_sched.h"

struct sverbs_cq {
	const struct sverbs_adapter *ad;
	struct ibv_cq *cq;
};

struct sverbs_qp {
	const struct sverbs_adapter *ad;
	struct ibv_qp *qp;
};

struct sverbs_cq *sverbs_cq_create(const struct sverbs_adapter *ad,
				   struct ibv_cq *cq,
				   const struct sverbs_config *cfg)
{
	struct sverbs_cq *scq = calloc(1, sizeof(*scq));

	(void)cfg;
	if (scq) {
		scq->ad = ad;
		scq->cq = cq;
	}
	return scq;
}

bool sverbs_cq_install_ex_ops(struct sverbs_cq *scq, struct ibv_cq_ex *cq_ex,
			      uint64_t app_wc_flags)
{
	(void)scq;
	(void)cq_ex;
	(void)app_wc_flags;
	return true;
}

void sverbs_cq_destroy(struct sverbs_cq *scq)
{
	free(scq);
}

int sverbs_poll_cq(struct sverbs_cq *scq, int ne, struct ibv_wc *wc)
{
	return scq->ad->poll_cq(scq->cq, ne, wc);
}

int sverbs_req_notify_cq(struct sverbs_cq *scq, int solicited_only)
{
	return scq->ad->req_notify_cq(scq->cq, solicited_only);
}

struct sverbs_qp *sverbs_qp_create(const struct sverbs_adapter *ad,
				   struct ibv_qp *qp, struct sverbs_cq *send_cq,
				   const struct ibv_qp_init_attr_ex *attr,
				   const struct sverbs_config *cfg)
{
	struct sverbs_qp *sqp = calloc(1, sizeof(*sqp));

	(void)send_cq;
	(void)attr;
	(void)cfg;
	if (sqp) {
		sqp->ad = ad;
		sqp->qp = qp;
	}
	return sqp;
}

bool sverbs_qp_install_wr_ops(struct sverbs_qp *sqp, struct ibv_qp_ex *qpx,
			      uint64_t send_ops_flags)
{
	(void)sqp;
	(void)qpx;
	(void)send_ops_flags;
	return true;
}

int sverbs_post_send(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	return sqp->ad->post_send(sqp->qp, wr, bad_wr);
}

void sverbs_qp_modify_pre(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			  int attr_mask)
{
	(void)sqp;
	(void)attr;
	(void)attr_mask;
}

void sverbs_qp_modify_post(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			   int attr_mask, int ret)
{
	(void)sqp;
	(void)attr;
	(void)attr_mask;
	(void)ret;
}

void sverbs_qp_destroy_pre(struct sverbs_qp *sqp)
{
	(void)sqp;
}

void sverbs_qp_destroy_post(struct sverbs_qp *sqp, int ret)
{
	if (!ret)
		free(sqp);
}
