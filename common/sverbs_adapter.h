/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The adapter: the only thing sverbs' provider-neutral core (sched/, batch/)
 * knows about a provider.  Each provider's glue (providers/<name>/) fills one
 * of these with its stock entry points; the core calls them to reach the
 * hardware queue and never includes a provider header.
 */
#ifndef SVERBS_ADAPTER_H
#define SVERBS_ADAPTER_H

#include <infiniband/verbs.h>
#include <stdbool.h>

/* A WR beyond a limit of its QP (see sverbs_adapter.limit_err). */
enum sverbs_wr_limit {
	SVERBS_LIMIT_SGE,    /* more SGEs than max_send_sge */
	SVERBS_LIMIT_INLINE, /* more inline data than max_inline_data */
};

enum sverbs_log_level {
	SVERBS_LOG_ERR = 1,
	SVERBS_LOG_WARN = 2,
	SVERBS_LOG_INFO = 3,
	SVERBS_LOG_DEBUG = 4,
};

struct sverbs_adapter {
	const char *name;
	/*
	 * Post a NULL-terminated chain of WRs to the hardware send queue with
	 * one doorbell: the provider's stock post_send.  The WRs never carry
	 * sverbs priority bits.  Called with the sverbs QP lock held; the
	 * provider takes its own SQ lock inside.
	 */
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	/* The provider's stock poll_cq, req_notify_cq and resize_cq. */
	int (*poll_cq)(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	/* Log through rdma-core's verbs logging (VERBS_LOG_LEVEL). */
	void (*log)(struct ibv_context *ctx, enum sverbs_log_level level,
		    const char *msg);
	/*
	 * Whether post_send's error err, for the WR bad (NULL when the
	 * provider took every WR and then failed, as rxe's doorbell does),
	 * means "send queue full": the WR may go again once completions free
	 * room.  Any other error refuses the WR for good.  Only the provider
	 * knows which of its errors mean full (mlx5 also returns ENOMEM for a
	 * QP not yet in RTS); NULL: no error means full.  (Last, so that
	 * positional initializers of the members above stay valid.)
	 */
	bool (*sq_full)(struct ibv_qp *qp, int err,
			const struct ibv_send_wr *bad);
	/*
	 * Whether the provider polls cq without a lock (mlx5 single-threaded):
	 * then nothing but the application's own poll may touch it, and the
	 * layer never resizes it on its own (a resize frees the buffer a
	 * lockless poll on another thread may be reading).  NULL: never.
	 */
	bool (*cq_lockless)(struct ibv_cq *cq);
	/*
	 * The errno the provider gives a WR beyond a limit of its QP: from
	 * post_send, or (wr_api) from an ibv_wr_* builder, returned by
	 * ibv_wr_complete.  The layer queues WRs and hands them over later, so
	 * it checks the limits itself at post time and returns what stock
	 * would (mlx5: ENOMEM; rxe: EINVAL from post_send, ENOSPC from its
	 * builders).  NULL: EINVAL.
	 */
	int (*limit_err)(enum sverbs_wr_limit what, bool wr_api);
	/*
	 * Make wr (zeroed; the layer sets wr_id and IBV_SEND_SIGNALED after)
	 * the provider's no-op: a WR that post_send takes on a QP of any
	 * state, touches no memory, local or remote, and completes in order
	 * with the WQEs around it.  The layer posts one in place of a WR the
	 * provider refused (its error is reported in order) and after an
	 * unsignaled tail when the QP fails (so that it retires).  mlx5: its
	 * NOP WQE; rxe: a zero-length RDMA WRITE (see sverbs_rxe.c).  NULL:
	 * the layer is off for the provider's CQs.
	 */
	void (*nop_wr)(struct ibv_qp *qp, struct ibv_send_wr *wr);
	/*
	 * For a completion in error polled from the provider's CQ (verbs
	 * leaves its opcode undefined): whether it is a receive's.  The layer
	 * then tells a receive from one of its own WQEs without looking at
	 * the wr_id, which the application chose (16.9).  mlx5: patch 0003
	 * sets IBV_WC_RECV on responder errors.  NULL: the provider cannot
	 * tell (rxe's kernel leaves every error completion's opcode 0); an
	 * error completion that carries one of the QP's internal wr_ids in
	 * flight is then a send's, without doubt, since no post may use a
	 * wr_id of the layer's range (sverbs.h, the glue's post_recv).
	 */
	bool (*wc_is_recv)(const struct ibv_wc *wc);
	/*
	 * The provider's stock post_recv and post_srq_recv: the glue calls
	 * them after refusing a wr_id of the layer's range (sverbs.h).
	 */
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	/*
	 * A count that moves whenever a poll takes a completion from cq (the
	 * provider's consumer index; it may wrap).  Read without the CQ's
	 * lock, racing a poll on another thread: only "moved since the last
	 * read" is used.  A budgeted QP in pass-through tells from it whether
	 * its poster waits for completions between posts (sched/watch.c).
	 * NULL: unknown; the arrival gap alone decides.
	 */
	uint32_t (*cq_consumed)(struct ibv_cq *cq);
	/*
	 * For a provider whose own poll_cq tests the layer's CQ state under
	 * its CQ lock (mlx5, rxe: patches 0003, 0002): take and drop that lock,
	 * so that a poll that read the state before it changed is over.
	 * NULL: the glue tests the state again after each poll instead
	 * (sverbs_poll_needs_fixup()).
	 */
	void (*cq_sync)(struct ibv_cq *cq);
	/*
	 * Whether the provider posts to qp's send queue without a lock (mlx5:
	 * a QP of a thread domain, whose doorbell register the domain's other
	 * QPs share, unlocked too; or single-threaded): the application
	 * promised one thread, so the layer adds none (no batch budget, whose
	 * timer thread would post).  NULL: never.
	 */
	bool (*qp_lockless)(struct ibv_qp *qp);
	/*
	 * A batch that needs no queue (sched/watch.c): post_send_nodb is
	 * post_send without its doorbell (the WQEs are written, the hardware
	 * is not told; a refused WR as post_send's), ring the doorbell alone,
	 * which tells the hardware of every WQE written before it.  ring may
	 * run on any thread, beside posts (the budget's timer thread rings
	 * what a poster left), and never waits for the send queue: EBUSY when
	 * something holds it (a post, an ibv_wr_* batch, perhaps of the
	 * calling thread, whose poll or arm inside the batch rings), having
	 * rung nothing; the layer rings again later.  NULL (either): a watched
	 * QP batches through the layer's queue.
	 */
	int (*post_send_nodb)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			      struct ibv_send_wr **bad_wr);
	int (*ring)(struct ibv_qp *qp);
};

#endif /* SVERBS_ADAPTER_H */
