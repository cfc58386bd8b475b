/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A fake adapter for sched/ unit tests: an in-memory model of RC send
 * queues and one CQ.  post_send records WQEs (a deep copy: SGEs and inline
 * data) and counts doorbells; tests complete WQEs in order, inject errors,
 * and the fake CQ hands the raw completions back through poll_cq or the
 * extended-CQ ops.  A hardware QP in error flushes every WQE (like rxe), or
 * only signaled ones (flush_signaled_only).
 */
#ifndef SV_TEST_FAKE_H
#define SV_TEST_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "cq_int.h"
#include "qp_int.h"

/* more than a poll's touched list (SV_POLL_BATCH, 32) holds */
#define FK_QPS	40
#define FK_HIST 8192
#define FK_CQ	8192
#define FK_CQ_B 256
#define FK_SGE	8
#define FK_INL	256
/* the fake provider's no-op (adapter nop_wr): an opcode of its own */
#define FK_WR_NOP IBV_WR_DRIVER1

struct fk_wqe {
	struct ibv_send_wr wr;
	struct ibv_sge sge[FK_SGE];
	const struct ibv_sge *sg_in; /* the sg_list pointer as posted */
	uint8_t inl[FK_INL];
	uint64_t bytes;
	bool signaled;
	int doorbell; /* which post_send call carried it */
};

struct fk_sq {
	struct fk_wqe *w; /* the last FK_HIST WQEs posted (a ring) */
	int posted;
	int done;
	int rung; /* WQEs told of by doorbells: only those run */
	int depth;
	bool err;
	bool sig_all;
	/* an ibv_wr_* batch is open: it holds the send queue (mlx5's lock) */
	bool batch_open;
	bool on_b;	    /* its CQEs go to the second CQ (fk_qp_on_b()) */
	uint64_t out_bytes; /* bytes of WQEs posted, not completed */
	uint64_t max_out_bytes;
	int max_out;
};

struct fk {
	struct ibv_context ctx;
	struct ibv_qp qp[FK_QPS];
	struct fk_sq sq[FK_QPS];
	struct ibv_cq_ex cqx; /* cq: ibv_cq_ex_to_cq(&cqx) */
	struct ibv_wc cqe[FK_CQ];
	int cq_head;
	int cq_n;
	_Atomic uint32_t cq_consumed; /* CQEs polled (the adapter's count) */
	int cq_max_n;
	bool cq_overflow;
	struct ibv_wc ex_cur;
	/*
	 * A second CQ, B (fk_cq_b()): the CQEs of the QPs fk_qp_on_b() moved
	 * there; polled, resized and armed as the first, never overflowed
	 * (tests of two CQs polled one inside the other's loop).
	 */
	struct ibv_cq_ex cqx_b;
	struct ibv_wc cqe_b[FK_CQ_B];
	int cqb_head;
	int cqb_n;
	_Atomic uint32_t cqb_consumed;
	struct ibv_wc ex_cur_b;
	int doorbells;
	int rings;     /* the adapter's ring: doorbells without a post */
	int ring_busy; /* rings that found the send queue held: EBUSY */
	int leaks;     /* WQEs that carried sverbs priority bits */
	int notify_calls;
	int notify_solicited; /* solicited_only of the last arm */
	int resize_calls;
	bool resize_fails;
	bool resize_round; /* resize gives 2^n - 1 >= the size asked (rxe) */
	bool cq_lockless;  /* the provider polls the CQ without a lock */
	bool qp_lockless;  /* ... and posts without one (a thread domain) */
	int limit_err; /* errno for a WR beyond the QP's limits (0: EINVAL) */
	bool flush_signaled_only;
	int post_fail_at;  /* >0: fail the post_send of WQE number n (ENOMEM) */
	int post_fail_err; /* set: fail it once, with this error instead */
	int db_fail_err;   /* set: take every WR, then fail, bad_wr NULL (rxe's
			    * doorbell in INIT / RTR) */
	/*
	 * error completions say their side in opcode (IBV_WC_SEND or
	 * IBV_WC_RECV), as patched mlx5's do; else a send's is garbage and a
	 * receive's 0, as rxe's (adapters with wc_is_recv: fk_wc_is_recv)
	 */
	bool err_side;
	/* called once, then cleared, by the next poll_cq before it reads */
	void (*poll_hook)(void);
	/* the same for the next post_send_nodb, before it writes */
	void (*nodb_hook)(void);
	/* ... and for the next post_send */
	void (*post_hook)(void);
	int sync_calls;		 /* the adapter's cq_sync */
	void (*sync_hook)(void); /* called by each cq_sync */
};

extern struct fk *fk;
extern const struct sverbs_adapter fk_adapter;
/* fk_adapter with post_send_nodb and ring (deferred doorbells, watch.c) */
extern const struct sverbs_adapter fk_adapter_defer;

void fk_init(int cq_cqe);
void fk_fini(void);
struct ibv_cq *fk_cq(void);
/* the second CQ, and QP i's CQEs moved to it (after fk_qp()) */
struct ibv_cq *fk_cq_b(void);
void fk_qp_on_b(int i);
struct ibv_qp *fk_qp(int i, enum ibv_qp_type type, int depth, bool sig_all);
int fk_qp_index(const struct ibv_qp *qp);
/* Complete the next n WQEs of QP i (n < 0: all) with status (success, or
 * an error: the QP enters error and the rest flushes). */
int fk_complete(int i, int n);
int fk_fail_next(int i, enum ibv_wc_status status);
/* WQEs of QP i written without a doorbell since its last one. */
int fk_unrung(int i);
/* A receive completion of QP i (behind what the CQ holds). */
void fk_recv_cqe(int i, uint64_t wr_id, enum ibv_wc_status status);
/* The adapter's wc_is_recv for err_side (not in fk_adapter). */
bool fk_wc_is_recv(const struct ibv_wc *wc);
/* The hardware QP enters error (modify to ERR): outstanding WQEs flush. */
void fk_qp_error(int i);
/* Fill qx with the fake provider's own ibv_wr_* ops for fake QP i (send,
 * rdma_write, set_sge, start / complete / abort). */
void fk_wr_install(struct ibv_qp_ex *qx, int i);
/* outstanding WQEs of QP i */
int fk_outstanding(int i);
struct fk_wqe *fk_wqe(int i, int k);
/* Install fake extended-CQ ops in fk->cqx reading the fake CQ. */
void fk_install_ex(void);
/* ... and in fk->cqx_b, reading the second CQ. */
void fk_install_ex_b(void);

#endif /* SV_TEST_FAKE_H */
