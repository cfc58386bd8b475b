/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * (Named sverbs_sched.h: a sched.h on the include path would shadow the
 * system's <sched.h>.)
 *
 * sverbs core API: what a provider's glue (providers/<name>/) calls from the
 * hooks that patches/ add to rdma-core.  Everything here is provider-neutral:
 * it sees verbs objects, the adapter (common/sverbs_adapter.h) and the
 * configuration, nothing else.
 *
 * Lock order: a CQ's lock before a QP's lock.  The post path takes only the
 * QP lock (and, inside the adapter, the provider's SQ lock); completions that
 * sverbs makes up itself (flushes) are produced only under the CQ lock.
 */
#ifndef SVERBS_SVERBS_SCHED_H
#define SVERBS_SVERBS_SCHED_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "sverbs_adapter.h"
#include "sverbs_config.h"

struct sverbs_cq;
struct sverbs_qp;

/*
 * CQ.  Called after the provider created cq with the CQE count the
 * application asked for plus cfg->cq_headroom (the glue adds it).  Returns
 * NULL when the layer is off for this CQ: the glue then stays on the stock
 * path for it and for every QP whose send CQ it is.
 */
struct sverbs_cq *sverbs_cq_create(const struct sverbs_adapter *ad,
				   struct ibv_cq *cq,
				   const struct sverbs_config *cfg);
/*
 * Extended CQ: replace the polling ops of cq_ex (start/next/end_poll and the
 * read_* getters) with sverbs' own, keeping the provider's as the raw source.
 * Returns false (and changes nothing) when the CQ asks for completion fields
 * that struct ibv_wc cannot carry (timestamps, flow tag, ...); the glue must
 * then destroy the sverbs_cq and stay stock.  The glue must have added
 * IBV_WC_EX_WITH_QP_NUM and IBV_WC_EX_WITH_BYTE_LEN to wc_flags at creation.
 */
bool sverbs_cq_install_ex_ops(struct sverbs_cq *scq, struct ibv_cq_ex *cq_ex,
			      uint64_t app_wc_flags);
void sverbs_cq_destroy(struct sverbs_cq *scq);

/*
 * resize_cq hook of a managed CQ: resizes the provider's CQ (adapter
 * resize_cq) to cqe plus the layer's headroom; 0 or the provider's error.
 */
int sverbs_cq_resize(struct sverbs_cq *scq, int cqe);

/* poll_cq and req_notify_cq hooks of a managed CQ. */
int sverbs_poll_cq(struct sverbs_cq *scq, int ne, struct ibv_wc *wc);
/*
 * The n completions a provider's own poll put in wc (sverbs_poll_is_stock()
 * was true), when sverbs_poll_needs_fixup(): the application's completions
 * among them, translated in wc[0..n); returns their count (at most n).
 */
int sverbs_poll_fixup(struct sverbs_cq *scq, struct ibv_wc *wc, int n);
int sverbs_req_notify_cq(struct sverbs_cq *scq, int solicited_only);

/*
 * QP.  Called after the provider created qp; attr holds the capabilities the
 * provider returned.  Returns NULL when the QP stays stock (layer off, QP
 * type not managed, send CQ not managed, send ops sverbs cannot carry).
 */
struct sverbs_qp *sverbs_qp_create(const struct sverbs_adapter *ad,
				   struct ibv_qp *qp, struct sverbs_cq *send_cq,
				   const struct ibv_qp_init_attr_ex *attr,
				   const struct sverbs_config *cfg);
/*
 * ibv_wr_* API: install sverbs' wr_start, wr_<opcode>, wr_complete and
 * wr_abort in qpx, for the opcodes of send_ops_flags.  Returns false if some
 * requested op cannot be carried (the glue then destroys the sverbs_qp and
 * stays stock).
 */
bool sverbs_qp_install_wr_ops(struct sverbs_qp *sqp, struct ibv_qp_ex *qpx,
			      uint64_t send_ops_flags);

int sverbs_post_send(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr);
/* sverbs_post_send() when !sverbs_post_is_stock(): the layer's queue. */
int sverbs_post_queued(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr);
/*
 * The same for a watched QP's post the glue found not waiting for its
 * completions (sverbs_watch_waits() false): the completion count is not
 * read again.
 */
int sverbs_post_watched(struct sverbs_qp *sqp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr);

/*
 * A post whose list holds a wr_id of the layer's range (sverbs.h): the WRs
 * before that one go to post, one at a time, and it fails with EINVAL
 * (*bad_wr at it), as a provider fails a WR it cannot take.  The same for a
 * list without one: post's result.  For the posts that do not take the
 * layer's queue: a stock QP's sends, receives, SRQ receives.
 */
typedef int (*sverbs_post_send_fn)(struct ibv_qp *qp, struct ibv_send_wr *wr,
				   struct ibv_send_wr **bad_wr);
typedef int (*sverbs_post_recv_fn)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
				   struct ibv_recv_wr **bad_wr);
typedef int (*sverbs_post_srq_recv_fn)(struct ibv_srq *srq,
				       struct ibv_recv_wr *wr,
				       struct ibv_recv_wr **bad_wr);
int sverbs_post_send_checked(struct ibv_qp *qp, struct ibv_send_wr *wr,
			     struct ibv_send_wr **bad_wr,
			     sverbs_post_send_fn post);
int sverbs_post_recv_checked(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr,
			     sverbs_post_recv_fn post);
int sverbs_post_srq_recv_checked(struct ibv_srq *srq, struct ibv_recv_wr *wr,
				 struct ibv_recv_wr **bad_wr,
				 sverbs_post_srq_recv_fn post);

/*
 * Around the provider's modify_qp: pre may pump; post, when ret == 0 and the
 * new state is ERR (or RESET), flushes every queued WR.
 */
void sverbs_qp_modify_pre(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			  int attr_mask);
void sverbs_qp_modify_post(struct sverbs_qp *sqp, struct ibv_qp_attr *attr,
			   int attr_mask, int ret);

/*
 * Around the provider's destroy_qp: pre drains the raw CQ for this QP;
 * post (ret == 0) completes everything still outstanding with
 * IBV_WC_WR_FLUSH_ERR, unregisters and frees sqp.  On ret != 0 nothing is
 * freed.
 */
void sverbs_qp_destroy_pre(struct sverbs_qp *sqp);
void sverbs_qp_destroy_post(struct sverbs_qp *sqp, int ret);

/* The QP's counters (sverbs.h's sverbs_query_qp_stats()). */
void sverbs_qp_get_stats(struct sverbs_qp *sqp, struct sverbs_qp_stats *st);

#endif /* SVERBS_SVERBS_SCHED_H */
