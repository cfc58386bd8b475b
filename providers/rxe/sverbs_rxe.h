/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sverbs glue for rxe: the hooks rxe.c calls (patches/0002) and the stock
 * rxe entry points the glue calls back.  Only this folder knows struct
 * rxe_qp / struct rxe_cq.
 */
#ifndef SVERBS_RXE_H
#define SVERBS_RXE_H

#include <infiniband/driver.h>

#include "sverbs_fast.h"

struct rxe_cq;
struct rxe_qp;

/* Stock rxe entry points (rxe.c). */
int rxe_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr_list,
		  struct ibv_send_wr **bad_wr);
/* rxe_post_send without its doorbell, and the doorbell alone (0002) */
int rxe_sv_post_nodb(struct ibv_qp *ibqp, struct ibv_send_wr *wr_list,
		     struct ibv_send_wr **bad_wr);
int rxe_sv_ring(struct ibv_qp *ibqp);
int rxe_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *recv_wr,
		  struct ibv_recv_wr **bad_wr);
int rxe_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *recv_wr,
		      struct ibv_recv_wr **bad_recv_wr);
int rxe_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int rxe_resize_cq(struct ibv_cq *ibcq, int cqe);
int rxe_destroy_cq(struct ibv_cq *ibcq);
int rxe_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask);
int rxe_destroy_qp(struct ibv_qp *ibqp);

/*
 * The context's post_send and poll_cq while the layer is on: rxe's own with
 * the layer's tests inside (patch 0002; sverbs_fast.h, "The tests a
 * provider's own post_send / poll_cq make").
 */
int rxe_sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr_list,
		     struct ibv_send_wr **bad_wr);
int rxe_sv_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
/* The glue (sverbs_rxe.c): what those tests hand to the layer. */
int rxe_sv_post_layered(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr);
int rxe_sv_poll_layered(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);

/* Hooks.  Each is a no-op when the layer is off. */
void rxe_sv_context_init(struct verbs_context *vctx);
int rxe_sv_cq_size(struct ibv_context *ctx, int cqe);
struct ibv_cq_init_attr_ex *rxe_sv_cq_attr(struct ibv_context *ctx,
					   struct ibv_cq_init_attr_ex *attr,
					   struct ibv_cq_init_attr_ex *copy);
void rxe_sv_cq_created(struct rxe_cq *cq, struct ibv_cq_ex *cq_ex,
		       uint64_t app_wc_flags);
void rxe_sv_qp_created(struct rxe_qp *qp, struct ibv_qp_init_attr_ex *attr);
void rxe_sv_qp_created_legacy(struct rxe_qp *qp, struct ibv_qp_init_attr *attr);

#endif /* SVERBS_RXE_H */
