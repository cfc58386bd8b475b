// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Issue 16.10: a QP in pass-through costs what a stock QP costs.  Against
 * the fake adapter: no resize_cq system call for a QP that stays in
 * pass-through, under 1 KiB of the layer's heap per such QP (counted with
 * mallinfo2, not timed), the CQ's QP table and headroom hold only the QPs
 * that left pass-through, and leaving pass-through allocates the QP's
 * queue then: a post that needs it and cannot get it fails with ENOMEM, as
 * stock does when it has no room, and the QP stays in pass-through.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cq_int.h"
#include "cu_run.h"
#include "fake.h"
#include "qp_int.h"

#define NQP 1000 /* pass-through QPs of the memory test */

/* the QPs of the tests sized for eight (the fake has more slots) */
#define PT_QPS 8

static struct sverbs_config cfg;
static struct sverbs_cq *scq;

static void pt_cfg(uint32_t headroom)
{
	sverbs_config_defaults(&cfg);
	cfg.passthrough = true;
	cfg.slice_always = false;
	cfg.small_msg_bytes = 0;
	cfg.batch_budget_us = 0;
	cfg.cq_headroom = headroom;
}

static void setup(int app_cqe)
{
	fk_init(app_cqe + (int)cfg.cq_headroom);
	scq = sverbs_cq_create(&fk_adapter, fk_cq(), &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scq);
}

static struct sverbs_qp *mkqp(struct ibv_qp *qp, uint32_t cap)
{
	struct ibv_qp_init_attr_ex a = {};

	a.cap.max_send_wr = cap;
	a.cap.max_send_sge = 4;
	a.cap.max_inline_data = 64;
	a.qp_type = IBV_QPT_RC;
	a.send_cq = fk_cq();
	return sverbs_qp_create(&fk_adapter, qp, scq, &a, &cfg);
}

static void destroy(struct sverbs_qp *q)
{
	sverbs_qp_destroy_pre(q);
	sverbs_qp_destroy_post(q, 0);
}

static int post1(struct sverbs_qp *q, uint64_t id, unsigned int flags,
		 struct ibv_send_wr **bad)
{
	struct ibv_sge sge = { .addr = 0x1000, .length = 64, .lkey = 7 };
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = flags | IBV_SEND_SIGNALED,
	};

	*bad = NULL;
	return sverbs_post_send(q, &wr, bad);
}

static int poll_all(struct ibv_wc *wc, int max)
{
	int n, tot = 0;

	do {
		n = sverbs_poll_cq(scq, max - tot, wc + tot);
		CU_ASSERT_FATAL(n >= 0);
		tot += n;
	} while (n > 0 && tot < max);
	return tot;
}

/*
 * Many QPs in pass-through on one CQ: no resize_cq, an empty QP table, no
 * headroom taken; the first WR with a priority registers its QP (and only
 * then may the CQ grow), and the WR completes as usual.
 */
static void test_pt_no_resize(void)
{
	struct sverbs_qp *q[PT_QPS];
	struct ibv_send_wr *bad;
	struct ibv_wc wc[16];
	unsigned int seen = 0;
	int i, n, r;

	pt_cfg(4);
	setup(64);
	for (i = 0; i < PT_QPS; i++) {
		q[i] = mkqp(fk_qp(i, IBV_QPT_RC, 16, false), 16);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q[i]);
	}
	CU_ASSERT_EQUAL(fk->resize_calls, 0);
	CU_ASSERT_EQUAL(scq->nqp, 0);
	CU_ASSERT_EQUAL(scq->wr_capacity, 0);
	for (i = 0; i < PT_QPS; i++)
		CU_ASSERT_EQUAL(post1(q[i], 10 + i, 0, &bad), 0);
	CU_ASSERT_EQUAL(fk->resize_calls, 0);
	/* three QPs leave pass-through */
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(post1(q[i], 20 + i, SVERBS_PRIO(2), &bad), 0);
	CU_ASSERT_EQUAL(scq->nqp, 3);
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 3);
	CU_ASSERT(fk->resize_calls <= 2);
	/* (the layer's WQEs may wait for pass-through's: two rounds) */
	for (n = 0, r = 0; r < 2; r++) {
		for (i = 0; i < PT_QPS; i++)
			fk_complete(i, -1);
		n += poll_all(wc + n, 16 - n);
	}
	CU_ASSERT_EQUAL(n, PT_QPS + 3);
	for (i = 0; i < n; i++) {
		CU_ASSERT(wc[i].wr_id >= 10 && wc[i].wr_id < 23);
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		seen |= 1u << (wc[i].wr_id - 10);
	}
	CU_ASSERT_EQUAL(seen, 0xffu | 0x7u << 10);
	for (i = 0; i < PT_QPS; i++)
		destroy(q[i]);
	CU_ASSERT_EQUAL(scq->nqp, 0);
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	sverbs_cq_destroy(scq);
	fk_fini();
}

/* A CQ the provider polls without a lock is never resized, even later. */
static void test_pt_lockless_no_resize(void)
{
	struct sverbs_qp *q[PT_QPS];
	struct ibv_send_wr *bad;
	int i;

	pt_cfg(4);
	setup(64);
	fk->cq_lockless = true;
	for (i = 0; i < PT_QPS; i++) {
		q[i] = mkqp(fk_qp(i, IBV_QPT_RC, 16, false), 16);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q[i]);
	}
	/* headroom 4 (a reserved CQE each, one shared): three QPs leave
	 * pass-through, the others stay there, stock */
	for (i = 0; i < PT_QPS; i++)
		CU_ASSERT_EQUAL(post1(q[i], 10 + i, SVERBS_PRIO(2), &bad), 0);
	CU_ASSERT_EQUAL(fk->resize_calls, 0);
	CU_ASSERT_EQUAL(scq->nqp, 3);
	for (i = 0; i < PT_QPS; i++)
		CU_ASSERT_EQUAL(atomic_load(&q[i]->fast.pt), i >= 3);
	CU_ASSERT_TRUE(atomic_load(&q[3]->fast.stock));
	for (i = 0; i < PT_QPS; i++)
		destroy(q[i]);
	sverbs_cq_destroy(scq);
	fk_fini();
}

/* QP i of an array of NQP fake QPs (beyond the fake's FK_QPS) */
static struct sverbs_qp *mkqp_nth(struct ibv_qp *qps, int i, uint32_t cap)
{
	qps[i].context = &fk->ctx;
	qps[i].qp_num = 0x1000 + (uint32_t)i;
	qps[i].qp_type = IBV_QPT_RC;
	qps[i].send_cq = fk_cq();
	return mkqp(&qps[i], cap);
}

static void many_fini(struct ibv_qp *qps, struct sverbs_qp **q)
{
	int i;

	for (i = 0; i < NQP; i++)
		destroy(q[i]);
	sverbs_cq_destroy(scq);
	fk_fini();
	free(q);
	free(qps);
}

/* The layer's heap per QP in pass-through: under 1 KiB. */
static void test_pt_memory(void)
{
	struct ibv_qp *qps = calloc(NQP, sizeof(*qps));
	struct sverbs_qp **q = calloc(NQP, sizeof(*q));
	struct mallinfo2 before, after;
	size_t per_qp;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(qps);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	pt_cfg(64);
	setup(4096);
	before = mallinfo2();
	for (i = 0; i < NQP; i++) {
		q[i] = mkqp_nth(qps, i, 256);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q[i]);
		CU_ASSERT_TRUE(atomic_load(&q[i]->fast.pt));
	}
	after = mallinfo2();
	per_qp = (after.uordblks - before.uordblks) / NQP;
	printf("\n    pass-through QP: %zu B of heap each (%d QPs, "
	       "max_send_wr 256) ",
	       per_qp, NQP);
	CU_ASSERT(per_qp < 1024);
	CU_ASSERT_EQUAL(fk->resize_calls, 0);
	many_fini(qps, q);
}

/*
 * Leaving pass-through needs the QP's queue; when it cannot be allocated
 * (here: max_send_wr 2^30), the post fails with ENOMEM and bad_wr at its
 * first WR, nothing reaches the provider, and the QP stays in pass-through.
 */
static void test_pt_leave_enomem(void)
{
	struct sverbs_qp *q;
	struct ibv_send_wr *bad;
	struct ibv_wc wc[4];

	pt_cfg(16);
	setup(64);
	q = mkqp(fk_qp(0, IBV_QPT_RC, 16, false), 1u << 30);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL(post1(q, 1, SVERBS_PRIO(1), &bad), ENOMEM);
	CU_ASSERT_PTR_NOT_NULL(bad);
	if (bad)
		CU_ASSERT_EQUAL(bad->wr_id, 1);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 0);
	CU_ASSERT_TRUE(atomic_load(&q->fast.pt));
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	/* pass-through goes on */
	CU_ASSERT_EQUAL(post1(q, 2, 0, &bad), 0);
	fk_complete(0, -1);
	CU_ASSERT_EQUAL(poll_all(wc, 4), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 2);
	destroy(q);
	sverbs_cq_destroy(scq);
	fk_fini();
}

/*
 * A post from inside an extended-CQ poll loop (start_poll holds the CQ
 * lock until end_poll) that ends pass-through on a QP of that CQ: leaving
 * needs the CQ lock and must not take it again (a hang otherwise: the
 * meson timeout fails the test).
 */
static void test_pt_leave_in_ex_poll(void)
{
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cx;
	struct ibv_send_wr *bad;
	struct sverbs_qp *q;
	struct ibv_wc wc[4];
	int ret;

	pt_cfg(16);
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	q = mkqp(fk_qp(0, IBV_QPT_RC, 16, false), 16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL(post1(q, 1, 0, &bad), 0);
	fk_complete(0, -1);
	ret = cx->start_poll(cx, &pa);
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	CU_ASSERT_EQUAL(cx->wr_id, 1);
	CU_ASSERT_EQUAL(post1(q, 2, SVERBS_PRIO(1), &bad), 0);
	CU_ASSERT_EQUAL(cx->next_poll(cx), ENOENT);
	cx->end_poll(cx);
	CU_ASSERT_FALSE(atomic_load(&q->fast.pt));
	CU_ASSERT_EQUAL(scq->nqp, 1);
	fk_complete(0, -1);
	CU_ASSERT_EQUAL(cx->start_poll(cx, &pa), 0);
	CU_ASSERT_EQUAL(cx->wr_id, 2);
	CU_ASSERT_EQUAL(cx->status, IBV_WC_SUCCESS);
	cx->end_poll(cx);
	CU_ASSERT_EQUAL(poll_all(wc, 4), 0);
	destroy(q);
	sverbs_cq_destroy(scq);
	fk_fini();
}

/*
 * The CQ grows by cq_headroom per QP that registers, from the size the
 * application asked for: not from the provider's rounded-up size, which on
 * rxe (2^n - 1) doubled the CQ at every QP that left pass-through.
 */
static void test_cq_growth_linear(void)
{
	struct sverbs_qp *q[PT_QPS];
	struct ibv_send_wr *bad;
	int i;

	pt_cfg(4);
	setup(60);
	fk->resize_round = true;
	for (i = 0; i < PT_QPS; i++) {
		q[i] = mkqp(fk_qp(i, IBV_QPT_RC, 16, false), 16);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q[i]);
		CU_ASSERT_EQUAL(post1(q[i], 10 + i, SVERBS_PRIO(2), &bad), 0);
	}
	CU_ASSERT_EQUAL(scq->nqp, PT_QPS);
	/* 60 asked + 8 x 4 of headroom: 92, rounded up to 127 */
	printf("\n    CQ of 60 + headroom 4, %d QPs registered: %d CQEs ",
	       PT_QPS, fk_cq()->cqe);
	CU_ASSERT(fk_cq()->cqe <= 127);
	for (i = 0; i < PT_QPS; i++)
		destroy(q[i]);
	sverbs_cq_destroy(scq);
	fk_fini();
}

/*
 * QPs that start out of pass-through (SVERBS_PASSTHROUGH=off) each add
 * their max_send_wr to the ready ring's capacity.  The ring must grow
 * geometrically: grown by exactly what each QP adds, it was reallocated
 * and copied at every registration, O(QPs^2) bytes (10,000 QPs of 64:
 * ~150 GB zeroed and copied; ptmem-10k's queue phase never finished).
 * Counted, not timed: the reallocations while NQP QPs register.
 */
static void test_ring_growth_geometric(void)
{
	struct ibv_qp *qps = calloc(NQP, sizeof(*qps));
	struct sverbs_qp **q = calloc(NQP, sizeof(*q));
	struct ibv_wc *ring;
	uint32_t rcap;
	int i, moves = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(qps);
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	pt_cfg(4);
	cfg.passthrough = false;
	setup(256);
	ring = scq->ready;
	rcap = scq->rcap;
	for (i = 0; i < NQP; i++) {
		q[i] = mkqp_nth(qps, i, 64);
		CU_ASSERT_PTR_NOT_NULL_FATAL(q[i]);
		if (scq->ready != ring || scq->rcap != rcap)
			moves++;
		ring = scq->ready;
		rcap = scq->rcap;
	}
	printf("\n    %d QPs of 64 registered: %u QPs in the table, the ready "
	       "ring (%u entries) reallocated %d times ",
	       NQP, scq->nqp, scq->rcap, moves);
	CU_ASSERT_EQUAL(scq->nqp, NQP);
	CU_ASSERT(scq->rcap >= scq->wr_capacity);
	/* doubling: log2(64,000 / 256) + 1 = 9; linear: 1,000 */
	CU_ASSERT(moves <= 16);
	many_fini(qps, q);
}

int main(void)
{
	static const struct fk_cu_test tests[] = {
		{ "16.10 pass-through QPs: no resize_cq, not in the table",
		  test_pt_no_resize },
		{ "16.10 lockless CQ: never resized, QPs beyond the headroom "
		  "stay in pass-through",
		  test_pt_lockless_no_resize },
		{ "16.10 a pass-through QP costs < 1 KiB", test_pt_memory },
		{ "16.10 leaving pass-through without memory: ENOMEM",
		  test_pt_leave_enomem },
		{ "16.10 leaving pass-through inside an extended-CQ poll",
		  test_pt_leave_in_ex_poll },
		{ "16.10 the CQ grows linearly with the QPs that register",
		  test_cq_growth_linear },
		{ "16.10 the ready ring grows geometrically with the QPs",
		  test_ring_growth_geometric },
	};

	return fk_cu_run("ptmem", tests, sizeof(tests) / sizeof(tests[0]));
}
