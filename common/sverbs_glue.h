/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by every provider's glue (providers/<name>/): the
 * process-wide configuration and the provider-neutral halves of the
 * creation hooks.  The glue itself only maps its provider's objects to
 * these.
 */
#ifndef SVERBS_GLUE_H
#define SVERBS_GLUE_H

#include <stdatomic.h>

#include "sverbs_adapter.h"
#include "sverbs_config.h"

struct sverbs_cq;
struct sverbs_qp;

/*
 * The configuration of this process if the layer is on, else NULL.  The
 * first call loads it (SVERBS_CONF or the prefix's etc/sverbs.conf, then
 * SVERBS_* variables) and reports each problem once: through ad->log on ctx
 * (rdma-core's verbs log) and on stderr.
 */
const struct sverbs_config *sverbs_glue_config(struct ibv_context *ctx,
					       const struct sverbs_adapter *ad);

/* CQ size to ask the provider for: cqe plus sverbs' headroom when on. */
int sverbs_glue_cq_size(struct ibv_context *ctx,
			const struct sverbs_adapter *ad, int cqe);
/*
 * ibv_create_cq_ex() attributes to hand the provider: attr itself when off,
 * else *copy with the headroom and the completion fields sverbs needs.
 */
struct ibv_cq_init_attr_ex *
sverbs_glue_cq_attr(struct ibv_context *ctx, const struct sverbs_adapter *ad,
		    struct ibv_cq_init_attr_ex *attr,
		    struct ibv_cq_init_attr_ex *copy);
/*
 * After the provider made a CQ: the sverbs CQ, or NULL (stock).  state: the
 * provider CQ's word its own poll_cq tests (sverbs_cq_layered()), zeroed.
 */
struct sverbs_cq *sverbs_glue_cq_created(const struct sverbs_adapter *ad,
					 struct ibv_cq *cq,
					 struct ibv_cq_ex *cq_ex,
					 uint64_t app_wc_flags,
					 atomic_uint *state);
/*
 * After the provider made a QP on send CQ scq: the sverbs QP, or NULL.
 * layered: the provider QP's byte its own post_send tests
 * (sverbs_qp_layered()), zeroed.
 */
struct sverbs_qp *sverbs_glue_qp_created(const struct sverbs_adapter *ad,
					 struct ibv_qp *qp,
					 struct sverbs_cq *scq,
					 struct ibv_qp_init_attr_ex *attr,
					 atomic_uchar *layered);

/* The ibv_create_qp() attributes as the ibv_create_qp_ex() ones. */
void sverbs_qp_attr_from_legacy(struct ibv_qp_init_attr_ex *ex,
				const struct ibv_qp_init_attr *attr,
				struct ibv_pd *pd);

#endif /* SVERBS_GLUE_H */
