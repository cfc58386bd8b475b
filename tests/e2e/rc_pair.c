// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* See rc_pair.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/sverbs.h>

#include "rc_pair.h"

#define GID_INDEX 1

const char *rc_prog = "e2e";

void rc_fail(const char *what, int err)
{
	fprintf(stderr, "%s: FAIL: %s: %s\n", rc_prog, what, strerror(err));
	exit(1);
}

void rc_open_dev(struct rc_dev *d, const char *name)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int i, n;

	memset(d, 0, sizeof(*d));
	d->name = name;
	list = ibv_get_device_list(&n);
	if (!list)
		rc_fail("ibv_get_device_list", errno);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		rc_fail(name, ENODEV);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_port(d->ctx, 1, &pa) ||
	    ibv_query_gid(d->ctx, 1, GID_INDEX, &d->gid))
		rc_fail("alloc_pd / query_port / query_gid", EIO);
	d->mtu = pa.active_mtu;
}

void rc_close_dev(struct rc_dev *d)
{
	ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(qp, a, mask);

	if (ret)
		rc_fail("ibv_modify_qp", ret);
}

void rc_connect(struct rc_dev *d, struct ibv_qp *qp, struct rc_dev *pd,
		struct ibv_qp *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags =
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu < pd->mtu ? d->mtu : pd->mtu;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = peer->qp_num & 0xffffff;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = pd->gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		       IBV_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	/* ~4 s: the TCG guest can be slower than a short ACK timeout */
	a.timeout = 20;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = qp->qp_num & 0xffffff;
	a.max_rd_atomic = 1;
	modify(qp, &a,
	       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC);
}

void rc_post_write(struct ibv_qp *qp, struct ibv_mr *mr, struct ibv_mr *rmr,
		   uint64_t id, uint32_t len, unsigned int prio, bool signaled)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
			       .length = len,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags =
			(signaled ? IBV_SEND_SIGNALED : 0) | SVERBS_PRIO(prio),
		.wr.rdma = { .remote_addr = (uintptr_t)rmr->addr,
			     .rkey = rmr->rkey },
	};
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(qp, &wr, &bad);

	if (ret)
		rc_fail("ibv_post_send", ret);
}
