/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sverbs glue for mlx5: the hooks mlx5's sources call (patches/0003).  The
 * stock entry points the glue calls back are mlx5.h's.  Only this folder
 * knows struct mlx5_qp / struct mlx5_cq.
 */
#ifndef SVERBS_MLX5_H
#define SVERBS_MLX5_H

#include <infiniband/driver.h>
#include <stdbool.h>

#include "sverbs_fast.h"

struct mlx5_cq;
struct mlx5_qp;

/*
 * The context's post_send and poll_cq while the layer is on: mlx5's own with
 * the layer's tests inside (patch 0003; sverbs_fast.h, "The tests a
 * provider's own post_send / poll_cq make").
 */
int mlx5_sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int mlx5_sv_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
int mlx5_sv_poll_cq_v1(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);
/* mlx5_post_send without its doorbell, and the doorbell alone (0003) */
int mlx5_sv_post_nodb(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int mlx5_sv_ring(struct ibv_qp *ibqp);
/* The glue (sverbs_mlx5.c): what those tests hand to the layer. */
int mlx5_sv_post_layered(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
int mlx5_sv_poll_layered(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);

/*
 * The layer's no-op (the adapter's nop_wr, 16.6): a private WR opcode,
 * beyond verbs' own, that _mlx5_post_send turns into a NOP WQE (control
 * segment only: touches no memory, completes in order).  Only the layer
 * posts it: its WR's sg_list is mlx5_sv_nop_sge, an object of this library
 * that no application can name, so an application that posts the opcode
 * itself gets stock's EINVAL ("bad opcode"), pass-through or not.
 */
#define MLX5_SV_WR_NOP ((enum ibv_wr_opcode)0x5356)

extern struct ibv_sge mlx5_sv_nop_sge;

static inline bool mlx5_sv_is_nop(const struct ibv_send_wr *wr)
{
	return wr->opcode == MLX5_SV_WR_NOP && wr->sg_list == &mlx5_sv_nop_sge;
}

/* Hooks.  Each is a no-op when the layer is off. */
void mlx5_sv_context_init(struct verbs_context *vctx);
int mlx5_sv_cq_size(struct ibv_context *ctx, int cqe);
struct ibv_cq_init_attr_ex *mlx5_sv_cq_attr(struct ibv_context *ctx,
					    struct ibv_cq_init_attr_ex *attr,
					    struct ibv_cq_init_attr_ex *copy);
void mlx5_sv_cq_created(struct ibv_cq_ex *cq, bool extended,
			uint64_t app_wc_flags);
void mlx5_sv_qp_created(struct ibv_qp *qp, struct ibv_qp_init_attr_ex *attr);
/* The context ops the layer installs (for the adapter test's counting). */
const struct verbs_context_ops *mlx5_sv_ops(void);

#endif /* SVERBS_MLX5_H */
