// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sched/ unit tests against the fake adapter (fake.c): slicing arithmetic,
 * priority and FIFO order, window / depth / capacity bounds, fence, one
 * completion per WR, errors and flushes, modify / destroy, the extended CQ,
 * the ibv_wr_* API, CQ headroom and the adaptive slice size.
 */
#include <CUnit/Basic.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_run.h"
#include "fake.h"

#define SL    4096 /* the fixed slice size of most tests */
#define RADDR 0x20000000ull
#define LADDR 0x10000000ull

/* sched/cq.c, built with SV_TEST_HOOKS */
extern void (*sv_test_hr_gap)(struct sverbs_cq *scq);
extern void (*sv_test_hr_take_gap)(struct sverbs_cq *scq);
extern void (*sv_test_unregister_gap)(struct sverbs_cq *scq);

static struct sverbs_config cfg;
static struct sverbs_cq *scq;
static struct sverbs_qp *sqp[FK_QPS];
/* the adapter of setup() and mkqp(): fk_adapter unless a test says */
static const struct sverbs_adapter *test_ad = &fk_adapter;
static uint8_t inline_buf[256];
static struct ibv_qp_ex fake_qpx;

/* ------------------------------------------------------------ helpers */

static void cfg_default(void)
{
	sverbs_config_defaults(&cfg);
	cfg.slice_bytes = SL;
	cfg.slice_min_bytes = 1024;
	cfg.slice_max_bytes = 1 << 20;
	cfg.window_slices = 2;
	cfg.small_msg_bytes = 0;
	cfg.default_prio = 4;
	cfg.cq_headroom = 16;
	cfg.slice_always = true; /* most tests slice unmarked one-level WRs */
	/* most tests are about the queue; the pass-through tests turn it on */
	cfg.passthrough = false;
}

static void setup(int app_cqe)
{
	fk_init(app_cqe + (int)cfg.cq_headroom);
	scq = sverbs_cq_create(test_ad, fk_cq(), &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scq);
	memset(sqp, 0, sizeof(sqp));
}

static struct sverbs_qp *mkqp_type(int i, enum ibv_qp_type type, int cap,
				   int sge, int inl, bool sig_all)
{
	struct ibv_qp_init_attr_ex a = {};
	struct ibv_qp *qp = fk_qp(i, type, cap, sig_all);

	a.cap.max_send_wr = (uint32_t)cap;
	a.cap.max_send_sge = (uint32_t)sge;
	a.cap.max_inline_data = (uint32_t)inl;
	a.sq_sig_all = sig_all;
	a.qp_type = type;
	a.send_cq = fk_cq();
	sqp[i] = sverbs_qp_create(test_ad, qp, scq, &a, &cfg);
	return sqp[i];
}

static struct sverbs_qp *mkqp(int i, int cap, bool sig_all)
{
	return mkqp_type(i, IBV_QPT_RC, cap, 4, 64, sig_all);
}

static void teardown(void)
{
	int i;

	for (i = 0; i < FK_QPS; i++) {
		if (!sqp[i])
			continue;
		sverbs_qp_destroy_pre(sqp[i]);
		sverbs_qp_destroy_post(sqp[i], 0);
		sqp[i] = NULL;
	}
	sverbs_cq_destroy(scq);
	scq = NULL;
	fk_fini();
	test_ad = &fk_adapter;
}

static int post_sge(struct sverbs_qp *q, uint64_t id, enum ibv_wr_opcode op,
		    struct ibv_sge *sge, int nsge, unsigned int flags)
{
	struct ibv_send_wr wr = {}, *bad = NULL;

	wr.wr_id = id;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = RADDR;
	wr.wr.rdma.rkey = 9;
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_IMM)
		wr.imm_data = htobe32(0x1234);
	return sverbs_post_send(q, &wr, &bad);
}

static int post(struct sverbs_qp *q, uint64_t id, enum ibv_wr_opcode op,
		uint64_t len, unsigned int flags)
{
	struct ibv_sge sge = { .addr = LADDR,
			       .length = (uint32_t)len,
			       .lkey = 7 };

	if (flags & IBV_SEND_INLINE)
		sge.addr = (uintptr_t)inline_buf;
	return post_sge(q, id, op, &sge, len ? 1 : 0, flags);
}

/* Poll until the CQ, the ready ring and the raw CQ are empty. */
static int poll_all(struct ibv_wc *wc, int max)
{
	int n, tot = 0;

	do {
		n = sverbs_poll_cq(scq, max - tot < 16 ? max - tot : 16,
				   wc + tot);
		CU_ASSERT_FATAL(n >= 0);
		tot += n;
	} while ((n > 0 || fk->cq_n || scq->rcount) && tot < max);
	return tot;
}

/* While work is queued, some signaled WQE must be in flight. */
static void check_progress(const struct sverbs_qp *q)
{
	if (q->queued && !q->hw_err)
		CU_ASSERT(q->inflight_sig > 0 || q->hr_wait);
}

/* Complete everything of QP i and poll, until nothing is left. */
static int drain(int i, struct ibv_wc *wc, int max)
{
	int tot = 0, rounds = 0;

	do {
		fk_complete(i, -1);
		tot += poll_all(wc + tot, max - tot);
		check_progress(sqp[i]);
		CU_ASSERT_FATAL(++rounds < 100000);
	} while (sqp[i]->queued || fk_outstanding(i));
	return tot;
}

static bool internal_id(uint64_t id)
{
	return id >= SV_SEQ_BASE && id < SV_SEQ_BASE + (1ull << 40);
}

static void check_no_internal(const struct ibv_wc *wc, int n)
{
	int i;

	for (i = 0; i < n; i++)
		CU_ASSERT(!internal_id(wc[i].wr_id));
}

/* ------------------------------------------------------------ slicing */

/* Post one WRITE of len with a huge window; return the WQEs it became. */
static int slices_of(uint64_t len, enum ibv_wr_opcode op)
{
	int n;

	cfg_default();
	cfg.window_slices = 1000;
	setup(64);
	mkqp(0, 256, false);
	CU_ASSERT_EQUAL(post(sqp[0], 1, op, len, IBV_SEND_SIGNALED), 0);
	n = fk->sq[0].posted;
	return n;
}

static void check_slices(uint64_t len, int want)
{
	uint64_t off = 0;
	int i, n = slices_of(len, IBV_WR_RDMA_WRITE);

	CU_ASSERT_EQUAL(n, want);
	for (i = 0; i < n; i++) {
		struct fk_wqe *w = fk_wqe(0, i);

		CU_ASSERT_EQUAL(w->wr.opcode, IBV_WR_RDMA_WRITE);
		CU_ASSERT_EQUAL(w->wr.wr.rdma.remote_addr, RADDR + off);
		CU_ASSERT_EQUAL(w->wr.wr.rdma.rkey, 9);
		CU_ASSERT_EQUAL(w->sge[0].addr, LADDR + off);
		CU_ASSERT(w->bytes <= SL);
		off += w->bytes;
	}
	CU_ASSERT_EQUAL(off, len);
	/* only the last WQE reports (the WR is signaled) */
	CU_ASSERT(fk_wqe(0, n - 1)->signaled);
	teardown();
}

static void test_slice_boundaries(void)
{
	check_slices(1, 1);
	check_slices(SL - 1, 1);
	check_slices(SL, 1);
	check_slices(SL + 1, 2);
	check_slices(3 * SL - 1, 3);
	check_slices(3 * SL, 3);
	check_slices(3 * SL + 1, 4);
}

static void test_slice_multi_sge(void)
{
	struct ibv_sge sge[4] = {
		{ .addr = 0x1000, .length = 1000, .lkey = 1 },
		{ .addr = 0x100000, .length = 5000, .lkey = 2 },
		{ .addr = 0x200000, .length = 100, .lkey = 3 },
		{ .addr = 0x300000, .length = 3000, .lkey = 4 },
	};
	struct fk_wqe *w;

	cfg_default();
	cfg.window_slices = 1000;
	setup(64);
	mkqp(0, 64, false);
	CU_ASSERT_EQUAL(post_sge(sqp[0], 1, IBV_WR_RDMA_READ, sge, 4,
				 IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 3);
	/* slice 1: sge0 whole + 3096 of sge1 */
	w = fk_wqe(0, 0);
	CU_ASSERT_EQUAL(w->wr.opcode, IBV_WR_RDMA_READ);
	CU_ASSERT_EQUAL(w->wr.num_sge, 2);
	CU_ASSERT(w->sge[0].addr == 0x1000 && w->sge[0].length == 1000 &&
		  w->sge[0].lkey == 1);
	CU_ASSERT(w->sge[1].addr == 0x100000 && w->sge[1].length == 3096 &&
		  w->sge[1].lkey == 2);
	CU_ASSERT_EQUAL(w->wr.wr.rdma.remote_addr, RADDR);
	/* slice 2: rest of sge1, sge2, 2092 of sge3 */
	w = fk_wqe(0, 1);
	CU_ASSERT_EQUAL(w->wr.opcode, IBV_WR_RDMA_READ);
	CU_ASSERT_EQUAL(w->wr.num_sge, 3);
	CU_ASSERT(w->sge[0].addr == 0x100000 + 3096 &&
		  w->sge[0].length == 1904 && w->sge[0].lkey == 2);
	CU_ASSERT(w->sge[1].addr == 0x200000 && w->sge[1].length == 100);
	CU_ASSERT(w->sge[2].addr == 0x300000 && w->sge[2].length == 2092 &&
		  w->sge[2].lkey == 4);
	CU_ASSERT_EQUAL(w->wr.wr.rdma.remote_addr, RADDR + SL);
	/* slice 3: the last 908 bytes of sge3 */
	w = fk_wqe(0, 2);
	CU_ASSERT_EQUAL(w->wr.num_sge, 1);
	CU_ASSERT(w->sge[0].addr == 0x300000 + 2092 && w->sge[0].length == 908);
	CU_ASSERT_EQUAL(w->wr.wr.rdma.remote_addr, RADDR + 2 * SL);
	teardown();
}

static void test_slice_write_imm(void)
{
	struct ibv_wc wc[8];
	int i, n = slices_of(3 * SL, IBV_WR_RDMA_WRITE_WITH_IMM);

	CU_ASSERT_EQUAL_FATAL(n, 3);
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(fk_wqe(0, i)->wr.opcode, IBV_WR_RDMA_WRITE);
		CU_ASSERT(!(fk_wqe(0, i)->wr.send_flags & IBV_SEND_SOLICITED));
	}
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->wr.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->wr.imm_data, htobe32(0x1234));
	n = drain(0, wc, 8);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CU_ASSERT_EQUAL(wc[0].byte_len, 3 * SL);
	teardown();
}

static void test_not_sliced(void)
{
	cfg_default();
	cfg.window_slices = 1000;
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 1, IBV_WR_SEND, 10 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_SEND_WITH_IMM, 10 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_RDMA_WRITE, 0, IBV_SEND_SIGNALED);
	post(sqp[0], 4, IBV_WR_RDMA_WRITE, 60, IBV_SEND_INLINE);
	post(sqp[0], 5, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 5);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->bytes, 10 * SL);
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->wr.num_sge, 0);
	CU_ASSERT(fk_wqe(0, 3)->wr.send_flags & IBV_SEND_INLINE);
	teardown();
}

/* Inline data is copied at post: the application may reuse its buffer. */
static void test_inline_copied(void)
{
	struct fk_wqe *w;

	cfg_default();
	setup(64);
	mkqp(0, 8, false);
	/* fill the window so the inline WR stays queued */
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 4 * SL, 0);
	memset(inline_buf, 0xab, 32);
	post(sqp[0], 2, IBV_WR_SEND, 32, IBV_SEND_INLINE | IBV_SEND_SIGNALED);
	memset(inline_buf, 0, 32);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	fk_complete(0, -1);
	poll_all((struct ibv_wc[8]){}, 8);
	fk_complete(0, -1);
	poll_all((struct ibv_wc[8]){}, 8);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 5);
	w = fk_wqe(0, 4);
	CU_ASSERT_EQUAL(w->wr.opcode, IBV_WR_SEND);
	CU_ASSERT(w->inl[0] == 0xab && w->inl[31] == 0xab);
	teardown();
}

/* ------------------------------------------------------------ priority */

static void test_prio_bits_stripped(void)
{
	unsigned int f =
		IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | SVERBS_PRIO(3);

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, f);
	post(sqp[0], 2, IBV_WR_SEND, 100, SVERBS_PRIO(0));
	CU_ASSERT_EQUAL(fk->leaks, 0);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->wr.send_flags,
			IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	teardown();
}

/*
 * A large low-priority WRITE fills the window; a high-priority SEND posted
 * after it goes out before the WRITE's next slice; FIFO within a level.
 */
static void test_prio_overtakes(void)
{
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 8 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2); /* the window: 2 slices */
	post(sqp[0], 2, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	/* level 0: nothing can overtake it, so no window holds it back */
	post(sqp[0], 3, IBV_WR_SEND, 101, IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 3);
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->bytes, 101);
	post(sqp[0], 4, IBV_WR_SEND, 102, IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	CU_ASSERT_EQUAL(fk->sq[0].posted, 3);
	check_progress(sqp[0]);
	/* one slice leaves: the SENDs go before the WRITE's next slice */
	fk_complete(0, 1);
	poll_all(wc, 16);
	CU_ASSERT_FATAL(fk->sq[0].posted >= 6);
	CU_ASSERT_EQUAL(fk_wqe(0, 3)->bytes, 100);
	CU_ASSERT_EQUAL(fk_wqe(0, 4)->bytes, 102);
	CU_ASSERT_EQUAL(fk_wqe(0, 5)->wr.opcode, IBV_WR_RDMA_WRITE);
	CU_ASSERT_EQUAL(fk_wqe(0, 5)->wr.wr.rdma.remote_addr, RADDR + 2 * SL);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL(n, 4);
	/* nor is a level-0 WRITE sliced: one WQE, whatever the window */
	post(sqp[0], 5, IBV_WR_RDMA_WRITE, 8 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	post(sqp[0], 6, IBV_WR_RDMA_WRITE, 5 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	n = fk->sq[0].posted;
	CU_ASSERT_EQUAL(fk_wqe(0, n - 1)->bytes, 5 * SL);
	CU_ASSERT_EQUAL(fk_wqe(0, n - 1)->wr.wr.rdma.remote_addr, RADDR);
	n = drain(0, wc, 16);
	CU_ASSERT(n == 2 && wc[0].wr_id == 6 && wc[1].wr_id == 5);
	teardown();
}

static int find_wc(const struct ibv_wc *wc, int n, uint64_t id)
{
	int i;

	for (i = 0; i < n; i++)
		if (wc[i].wr_id == id)
			return i;
	return -1;
}

static void test_prio_completion_order(void)
{
	struct ibv_wc wc[32];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 8 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	post(sqp[0], 2, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	post(sqp[0], 3, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	post(sqp[0], 4, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	n = drain(0, wc, 32);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	check_no_internal(wc, n);
	/* level 0 first, FIFO within level 3, the large WRITE last */
	CU_ASSERT(find_wc(wc, n, 3) < find_wc(wc, n, 2));
	CU_ASSERT(find_wc(wc, n, 2) < find_wc(wc, n, 4));
	CU_ASSERT(find_wc(wc, n, 4) < find_wc(wc, n, 1));
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].byte_len, 8 * SL);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].opcode, IBV_WC_RDMA_WRITE);
	teardown();
}

static void test_prio_policy(void)
{
	struct ibv_wc wc[32];
	int n;

	cfg_default();
	cfg.small_msg_bytes = 256;
	cfg.default_prio = 5;
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_SEND, 1000, IBV_SEND_SIGNALED); /* default */
	post(sqp[0], 3, IBV_WR_RDMA_WRITE, 256, IBV_SEND_SIGNALED); /* small */
	post(sqp[0], 4, IBV_WR_SEND, 10, IBV_SEND_SIGNALED | SVERBS_PRIO(6));
	/* the small one, lifted to level 0, went at once past the window */
	CU_ASSERT_EQUAL(sqp[0]->level[0].head, SV_NONE);
	CU_ASSERT_EQUAL(fk_wqe(0, fk->sq[0].posted - 1)->bytes, 256);
	CU_ASSERT_EQUAL(sqp[0]->slots[sqp[0]->level[5].head].wr.wr_id, 1);
	CU_ASSERT_EQUAL(sqp[0]->slots[sqp[0]->level[6].head].wr.wr_id, 4);
	n = drain(0, wc, 32);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT(find_wc(wc, n, 3) < find_wc(wc, n, 2));
	CU_ASSERT(find_wc(wc, n, 2) < find_wc(wc, n, 4));
	teardown();
}

/* ------------------------------------------------------------ bounds */

static void test_window_bound(void)
{
	struct ibv_wc wc[64];
	int i, n;

	cfg_default();
	cfg.window_slices = 3;
	setup(64);
	mkqp(0, 64, false);
	for (i = 0; i < 4; i++)
		post(sqp[0], (uint64_t)i, IBV_WR_RDMA_WRITE, 10 * SL + 7,
		     IBV_SEND_SIGNALED);
	for (i = 0; i < 20; i++)
		post(sqp[0], 100 + (uint64_t)i, IBV_WR_SEND, 700,
		     IBV_SEND_SIGNALED);
	n = 0;
	while (sqp[0]->queued || fk_outstanding(0)) {
		/* bytes in flight: below the window plus one WQE */
		CU_ASSERT(fk->sq[0].out_bytes < 3 * SL + SL);
		check_progress(sqp[0]);
		fk_complete(0, 1);
		n += poll_all(wc + n, 64 - n);
	}
	CU_ASSERT(fk->sq[0].max_out_bytes < 4 * SL);
	CU_ASSERT_EQUAL(n, 24);
	teardown();
}

/*
 * window_signals: a WRITE of 8 slices, completed one WQE at a time (a
 * serial wire).  2 (the default): each slice signaled, a doorbell per
 * slice; 1: one signaled WQE per window of 2 slices, the window refilled
 * with one chain (one doorbell) when it drains.  Either way the WR
 * completes once, and the bytes in flight stay within the window.
 */
static void window_signals_run(uint32_t signals, int *sig, int *rings)
{
	struct ibv_wc wc[4];
	int i, n = 0, db0;

	cfg_default();
	cfg.window_signals = signals;
	setup(64);
	mkqp(0, 64, false);
	db0 = fk->doorbells;
	post(sqp[0], 9, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED);
	while (sqp[0]->queued || fk_outstanding(0)) {
		CU_ASSERT(fk->sq[0].out_bytes <= 2 * SL);
		check_progress(sqp[0]);
		fk_complete(0, 1);
		n += poll_all(wc + n, 4 - n);
	}
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 9);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 8);
	*sig = 0;
	for (i = 0; i < fk->sq[0].posted; i++)
		*sig += fk_wqe(0, i)->signaled;
	*rings = fk->doorbells - db0;
	teardown();
}

static void test_window_signals(void)
{
	int sig, rings;

	window_signals_run(2, &sig, &rings);
	CU_ASSERT_EQUAL(sig, 8);
	CU_ASSERT_EQUAL(rings, 7); /* the first two slices, then one each */
	window_signals_run(1, &sig, &rings);
	CU_ASSERT_EQUAL(sig, 4);
	CU_ASSERT_EQUAL(rings, 4);
}

/*
 * slice_grow_windows 1: slices cut in a row from one level double every
 * window (2 slices): 4, 4, 8, 8, 16, 16 KiB...  A WR of a higher level puts
 * the slice back to 4 KiB at once: the first slice cut after it is 4 KiB,
 * and the growth starts again.  Either way each WR completes once.
 */
static void test_slice_grow(void)
{
	struct ibv_wc wc[4];
	uint64_t want[] = { SL, SL, 2 * SL, 2 * SL, 4 * SL, 4 * SL };
	int i, k, n = 0, urgent_at = -1;
	bool posted_urgent = false;

	cfg_default();
	cfg.slice_grow_windows = 1;
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 9, IBV_WR_RDMA_WRITE, 256 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	while (sqp[0]->queued || fk_outstanding(0)) {
		if (!posted_urgent && fk->sq[0].posted >= 6) {
			post(sqp[0], 10, IBV_WR_SEND, 100,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(0));
			urgent_at = fk->sq[0].posted;
			posted_urgent = true;
		}
		check_progress(sqp[0]);
		fk_complete(0, 1);
		n += poll_all(wc + n, 4 - n);
	}
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(find_wc(wc, n, 9) >= 0 && find_wc(wc, n, 10) >= 0);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
	for (i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(fk_wqe(0, i)->bytes, want[i]);
	/* after the urgent WR: the next slice of the WRITE is back at 4 KiB */
	CU_ASSERT(urgent_at >= 6);
	for (k = urgent_at; k < fk->sq[0].posted; k++)
		if (fk_wqe(0, k)->wr.opcode == IBV_WR_RDMA_WRITE)
			break;
	CU_ASSERT(k < fk->sq[0].posted);
	CU_ASSERT_EQUAL(fk_wqe(0, k)->bytes, SL);
	/* and grows again */
	CU_ASSERT(fk->sq[0].posted > k + 2);
	CU_ASSERT_EQUAL(fk_wqe(0, k + 2)->bytes, 2 * SL);
	teardown();
}

/* slice_grow_windows 0 (the default): every slice is the slice size. */
static void test_slice_grow_off(void)
{
	struct ibv_wc wc[2];
	int i, n = 0;

	cfg_default();
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 9, IBV_WR_RDMA_WRITE, 32 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	while (sqp[0]->queued || fk_outstanding(0)) {
		fk_complete(0, 1);
		n += poll_all(wc + n, 2 - n);
	}
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 32);
	for (i = 0; i < fk->sq[0].posted; i++)
		CU_ASSERT_EQUAL(fk_wqe(0, i)->bytes, SL);
	teardown();
}

/*
 * The window shrinks (the adaptive slice fell) below the unsignaled tail an
 * earlier round left in flight: a WR posted then must still go out, with a
 * signaled WQE that retires the tail, not wait for a completion nothing in
 * flight will produce (seen on rxe: a QP stalled forever).
 */
static void test_window_shrink_unsignaled_tail(void)
{
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 64, false);
	/* window 2 x SL: one signaled WR, then an unsignaled tail of SL / 2 */
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, SL / 2, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, SL / 4, 0);
	post(sqp[0], 3, IBV_WR_RDMA_WRITE, SL / 4, 0);
	CU_ASSERT_EQUAL(fk_outstanding(0), 3);
	fk_complete(0, 1);
	n = poll_all(wc, 16);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(sqp[0]->inflight_sig, 0);
	/* the slice adapts down: the tail alone now fills the window */
	sqp[0]->slicer.cur = SL / 8;
	CU_ASSERT(sqp[0]->windowed_bytes >=
		  (uint64_t)cfg.window_slices * (SL / 8));
	post(sqp[0], 4, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED);
	check_progress(sqp[0]);
	CU_ASSERT_EQUAL(fk_outstanding(0), 3); /* the tail + one slice */
	CU_ASSERT_TRUE(fk->sq[0].w[3].signaled);
	n += drain(0, wc + n, 16 - n);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(wc[1].wr_id, 4);
	CU_ASSERT_EQUAL(wc[1].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[1].byte_len, 2 * SL);
	teardown();
}

static void test_depth_bound(void)
{
	struct ibv_wc wc[64];
	int i, n;

	cfg_default();
	cfg.window_slices = 1000;
	setup(64);
	mkqp(0, 16, false);
	for (i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(post(sqp[0], (uint64_t)i, IBV_WR_SEND, 8,
				     i % 4 == 3 ? IBV_SEND_SIGNALED : 0),
				0);
	CU_ASSERT_EQUAL(fk_outstanding(0), 15);
	check_progress(sqp[0]);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT(fk->sq[0].max_out <= 15);
	/* a large WRITE never exceeds the depth either */
	post(sqp[0], 99, IBV_WR_RDMA_WRITE, 100 * SL, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(fk_outstanding(0), 15);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT(fk->sq[0].max_out <= 15);
	teardown();
}

static void test_capacity(void)
{
	struct ibv_send_wr wr[10], *bad = NULL;
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 1 };
	struct ibv_wc wc[16];
	int i;

	cfg_default();
	setup(64);
	mkqp(0, 8, false);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 10; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = i == 7 ? IBV_SEND_SIGNALED : 0;
		wr[i].next = i < 9 ? &wr[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[8]);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 0);
	CU_ASSERT_EQUAL(fk_outstanding(0), 7); /* depth: max_send_wr - 1 */
	/* nothing completed: still full */
	poll_all(wc, 16);
	CU_ASSERT_EQUAL(post(sqp[0], 50, IBV_WR_SEND, 8, 0), ENOMEM);
	/* unsignaled WRs are retired by a later (maybe internal) completion */
	fk_complete(0, 1);
	poll_all(wc, 16);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 0);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 7);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 8);
	CU_ASSERT_EQUAL(post(sqp[0], 50, IBV_WR_SEND, 8, 0), 0);
	teardown();
}

static void test_validation(void)
{
	struct ibv_sge sge[6] = {};
	struct ibv_send_wr wr[3], *bad = NULL;
	int i;

	cfg_default();
	setup(64);
	mkqp_type(0, IBV_QPT_RC, 8, 4, 64, false);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	wr[1].num_sge = 5;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 7); /* wr[0] was taken */
	wr[1].num_sge = 1;
	sge[0].length = 65;
	sge[0].addr = (uintptr_t)inline_buf;
	wr[1].send_flags = IBV_SEND_INLINE;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr[1], &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	/* atomics: an unaligned remote address or a short SGE, at post time */
	wr[1].send_flags = 0;
	wr[1].next = NULL;
	wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	sge[0].length = 8;
	wr[1].wr.atomic.remote_addr = RADDR + 1;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr[1], &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	wr[1].wr.atomic.remote_addr = RADDR;
	sge[0].length = 4;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr[1], &bad), EINVAL);
	sge[0].length = 8;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr[1], &bad), 0);
	teardown();
}

/*
 * A WR beyond the QP's limits gets the provider's errno (the adapter's
 * limit_err), not the layer's own EINVAL: mlx5 says ENOMEM for too many
 * SGEs and for inline data too long, from post_send and from the ibv_wr_*
 * builders.
 */
static void test_limit_errno(void)
{
	struct ibv_qp_ex *qx = &fake_qpx;
	struct ibv_sge sge[6] = {};
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct ibv_data_buf db = { .addr = inline_buf, .length = 65 };

	cfg_default();
	setup(64);
	fk->limit_err = ENOMEM;
	mkqp_type(0, IBV_QPT_RC, 8, 4, 64, false);
	wr.wr_id = 1;
	wr.sg_list = sge;
	wr.num_sge = 5;
	wr.opcode = IBV_WR_SEND;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	wr.num_sge = 1;
	sge[0].length = 65;
	sge[0].addr = (uintptr_t)inline_buf;
	wr.send_flags = IBV_SEND_INLINE;
	bad = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 8);
	memset(qx, 0, sizeof(*qx));
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	ibv_wr_start(qx);
	qx->wr_id = 2;
	ibv_wr_send(qx);
	ibv_wr_set_sge_list(qx, 5, sge);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), ENOMEM);
	ibv_wr_start(qx);
	qx->wr_id = 3;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data_list(qx, 1, &db);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), ENOMEM);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 8);
	CU_ASSERT_EQUAL(fk_outstanding(0), 0);
	teardown();
}

static void test_qp_types(void)
{
	struct ibv_qp_init_attr_ex a = {};

	cfg_default();
	setup(64);
	CU_ASSERT_PTR_NULL(mkqp_type(0, IBV_QPT_UD, 8, 1, 0, false));
	CU_ASSERT_PTR_NULL(mkqp_type(1, IBV_QPT_XRC_SEND, 8, 1, 0, false));
	CU_ASSERT_PTR_NULL(mkqp_type(2, IBV_QPT_UC, 8, 1, 0, false));
	a.cap.max_send_wr = 8;
	a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_TSO;
	CU_ASSERT_PTR_NULL(sverbs_qp_create(
		&fk_adapter, fk_qp(3, IBV_QPT_RC, 8, false), scq, &a, &cfg));
	cfg.mode = SVERBS_MODE_OFF;
	CU_ASSERT_PTR_NULL(sverbs_cq_create(&fk_adapter, fk_cq(), &cfg));
	teardown();
}

/* ------------------------------------------------------------ completions */

static void test_one_completion_per_wr(void)
{
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	post(sqp[0], 0xabc, IBV_WR_RDMA_WRITE, 5 * SL + 3, IBV_SEND_SIGNALED);
	post(sqp[0], 0xabd, IBV_WR_RDMA_READ, 3 * SL, IBV_SEND_SIGNALED);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(wc[0].wr_id, 0xabc);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CU_ASSERT_EQUAL(wc[0].byte_len, 5 * SL + 3);
	CU_ASSERT_EQUAL(wc[0].qp_num, 0x100);
	CU_ASSERT_EQUAL(wc[1].wr_id, 0xabd);
	CU_ASSERT_EQUAL(wc[1].opcode, IBV_WC_RDMA_READ);
	CU_ASSERT_EQUAL(wc[1].byte_len, 3 * SL);
	CU_ASSERT(fk->sq[0].posted == 9);
	teardown();
}

static void test_unsignaled(void)
{
	struct ibv_wc wc[64];
	int i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	for (i = 0; i < 20; i++)
		post(sqp[0], (uint64_t)i, IBV_WR_RDMA_WRITE,
		     i % 3 ? 100 : 3 * SL, i == 19 ? IBV_SEND_SIGNALED : 0);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 19);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	teardown();
}

static void test_sig_all(void)
{
	struct ibv_wc wc[64];
	int i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, true);
	for (i = 0; i < 10; i++)
		post(sqp[0], (uint64_t)i, IBV_WR_RDMA_WRITE,
		     i % 2 ? 100 : 3 * SL, 0);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 10);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, (uint64_t)i);
		CU_ASSERT_EQUAL(wc[i].byte_len, i % 2 ? 100 : 3 * SL);
	}
	teardown();
}

/* Receive completions and completions of other QPs pass untouched. */
static void test_foreign_untouched(void)
{
	struct ibv_wc raw = {}, wc[8];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 8, false);
	raw.wr_id = 5;
	raw.opcode = IBV_WC_RECV;
	raw.byte_len = 77;
	raw.qp_num = 0x100;
	fk->cqe[0] = raw;
	raw.wr_id = 6;
	raw.status = IBV_WC_WR_FLUSH_ERR; /* error recv: no opcode */
	raw.opcode = 0xff;
	fk->cqe[1] = raw;
	raw.wr_id = SV_SEQ_BASE + 3; /* unmanaged QP: its wr_id is its own */
	raw.status = IBV_WC_SUCCESS;
	raw.opcode = IBV_WC_SEND;
	raw.qp_num = 0x999;
	fk->cqe[2] = raw;
	fk->cq_n = 3;
	n = poll_all(wc, 8);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(wc[0].wr_id == 5 && wc[0].byte_len == 77);
	CU_ASSERT(wc[1].wr_id == 6 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT(wc[2].wr_id == SV_SEQ_BASE + 3);
	teardown();
}

/* ------------------------------------------------------------ errors */

static void count_ids(const struct ibv_wc *wc, int n, int *count, int max)
{
	int i;

	for (i = 0; i < n; i++)
		if (wc[i].wr_id < (uint64_t)max)
			count[wc[i].wr_id]++;
}

static void error_mid_transfer(bool signaled_only)
{
	struct ibv_wc wc[64];
	int count[16] = {}, i, n;

	cfg_default();
	setup(64);
	fk->flush_signaled_only = signaled_only;
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 6 * SL, 0); /* unsignaled */
	post(sqp[0], 3, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 4, IBV_WR_SEND, 100, 0);
	/* 1 and the first slice of 2 succeed, the second slice fails */
	fk_complete(0, 2);
	n = poll_all(wc, 64);
	fk_fail_next(0, IBV_WC_REM_ACCESS_ERR);
	n += poll_all(wc + n, 64 - n);
	n += drain(0, wc + n, 64 - n);
	check_no_internal(wc, n);
	count_ids(wc, n, count, 16);
	for (i = 1; i <= 4; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 2)].status, IBV_WC_REM_ACCESS_ERR);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 2)].vendor_err, 0x42);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 3)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 4)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT(find_wc(wc, n, 2) < find_wc(wc, n, 3));
	CU_ASSERT(find_wc(wc, n, 3) < find_wc(wc, n, 4));
	/* later posts flush too, once each */
	post(sqp[0], 5, IBV_WR_RDMA_WRITE, 5 * SL, 0);
	post(sqp[0], 6, IBV_WR_SEND, 10, IBV_SEND_SIGNALED);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 5 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT(wc[1].wr_id == 6 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	CU_ASSERT_EQUAL(sqp[0]->inflight_wqes, 0);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

static void test_error_mid_transfer(void)
{
	error_mid_transfer(false);
}

static void test_error_flush_signaled_only(void)
{
	error_mid_transfer(true);
}

/*
 * The QP fails with an unsignaled WQE last in flight, on a provider that
 * flushes signaled WQEs only: the layer's signaled no-op must follow it, or
 * the WRs behind the last signaled WQE never complete.  Here the no-op finds
 * no CQ headroom at the error (the reserved CQE is busy, QP 1 holds the
 * shared units): it must go once QP 1's completions give the units back.
 */
static void test_nop_waits_for_headroom(void)
{
	struct ibv_send_wr l[2], *bad = NULL;
	struct ibv_sge sg[2];
	struct ibv_wc wc[64];
	int count[32] = { 0 }, i, k, n = 0;

	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 1000;
	setup(64);
	fk->resize_fails = true;
	fk->flush_signaled_only = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 8, false));
	/* QP 1's 2-slice WRITE: its first slice holds a unit */
	CU_ASSERT_EQUAL(
		post(sqp[1], 100, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED),
		0);
	/* QP 0: unsignaled SENDs (the layer signals one of them) */
	for (i = 1; i <= 12; i++)
		CU_ASSERT_EQUAL(post(sqp[0], (uint64_t)i, IBV_WR_SEND, 100, 0),
				0);
	/* 13 takes the reserved CQE, 14 goes unsignaled behind it */
	for (k = 0; k < 2; k++) {
		memset(&l[k], 0, sizeof(l[k]));
		sg[k].addr = LADDR;
		sg[k].length = 100;
		sg[k].lkey = 7;
		l[k].wr_id = 13 + (uint64_t)k;
		l[k].sg_list = &sg[k];
		l[k].num_sge = 1;
		l[k].opcode = IBV_WR_SEND;
		l[k].next = k ? NULL : &l[1];
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], l, &bad), 0);
	n += sverbs_poll_cq(scq, 16, wc + n);
	CU_ASSERT_FALSE(fk_wqe(0, fk->sq[0].posted - 1)->signaled);
	/* the first WQE fails: the rest is flushed, the signaled ones seen */
	fk_fail_next(0, IBV_WC_REM_ACCESS_ERR);
	for (k = 0; k < 20; k++) {
		n += sverbs_poll_cq(scq, 16, wc + n);
		fk_complete(0, -1);
		fk_complete(1, -1);
		CU_ASSERT_FATAL(n <= 32);
	}
	check_no_internal(wc, n);
	count_ids(wc, n, count, 32);
	for (i = 1; i <= 14; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	k = find_wc(wc, n, 1);
	CU_ASSERT(k >= 0 && wc[k].status == IBV_WC_REM_ACCESS_ERR);
	k = find_wc(wc, n, 14);
	CU_ASSERT(k >= 0 && wc[k].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(sqp[0]->inflight_wqes, 0);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	teardown();
}

static void test_modify_err(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[64];
	int count[16] = {}, i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 6 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_SEND, 100, 0);
	post(sqp[0], 4, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	fk_complete(0, 1); /* 1 succeeds */
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	fk_qp_error(0);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	n = drain(0, wc, 64);
	check_no_internal(wc, n);
	count_ids(wc, n, count, 16);
	for (i = 1; i <= 4; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].status, IBV_WC_SUCCESS);
	for (i = 2; i <= 4; i++)
		CU_ASSERT_EQUAL(wc[find_wc(wc, n, (uint64_t)i)].status,
				IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(n, 4);
	teardown();
}

static void test_modify_reset(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc[64];
	int count[16] = {}, i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 6 * SL, 0);
	post(sqp[0], 3, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	fk_complete(0, 1); /* 1's completion is in the CQ */
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	/* a reset discards the hardware queue and (mlx5) this QP's CQEs */
	fk->sq[0].done = fk->sq[0].posted;
	fk->cq_n = 0;
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	n = poll_all(wc, 64);
	count_ids(wc, n, count, 16);
	for (i = 1; i <= 3; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 2)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 3)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	/* usable again after reset */
	CU_ASSERT_EQUAL(post(sqp[0], 9, IBV_WR_SEND, 10, IBV_SEND_SIGNALED), 0);
	n = drain(0, wc, 64);
	CU_ASSERT(n == 1 && wc[0].wr_id == 9 && wc[0].status == IBV_WC_SUCCESS);
	teardown();
}

/*
 * ibv_destroy_qp() fails (the provider returns an error: the QP lives on).
 * Completions of its WQEs that a poll took while the destroy was under way
 * belong to it still: each WR completes once, with its own status, after
 * the failure, and the QP goes on.  Red: the poll between the two halves
 * dropped them as a destroyed QP's (the WRs never completed).
 */
static void test_destroy_fails(void)
{
	struct ibv_wc wc[64];
	int count[16] = {}, i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 6 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	sverbs_qp_destroy_pre(sqp[0]);
	/* another thread's poll while the provider tries */
	fk_complete(0, -1);
	n = poll_all(wc, 64);
	CU_ASSERT_EQUAL(n, 0);
	sverbs_qp_destroy_post(sqp[0], EBUSY);
	n = drain(0, wc, 64);
	check_no_internal(wc, n);
	count_ids(wc, n, count, 16);
	for (i = 1; i <= 3; i++) {
		CU_ASSERT_EQUAL(count[i], 1);
		if (count[i])
			CU_ASSERT_EQUAL(wc[find_wc(wc, n, i)].status,
					IBV_WC_SUCCESS);
	}
	CU_ASSERT_EQUAL(n, 3);
	CU_ASSERT_EQUAL(sqp[0]->queued, 0);
	/* the QP goes on */
	CU_ASSERT_EQUAL(post(sqp[0], 4, IBV_WR_SEND, 10, IBV_SEND_SIGNALED), 0);
	n = drain(0, wc, 64);
	CU_ASSERT(n == 1 && wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS);
	teardown();
}

static void test_destroy_with_queued(void)
{
	struct ibv_wc wc[64];
	int count[16] = {}, i, n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	mkqp(1, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 6 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_SEND, 100, 0);
	post(sqp[1], 10, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	fk_complete(0, 2); /* 1 done, 2's first slice done */
	fk_complete(1, -1);
	sverbs_qp_destroy_pre(sqp[0]);
	/* an in-flight WQE completes between drain and destroy */
	fk_complete(0, 1);
	sverbs_qp_destroy_post(sqp[0], 0);
	sqp[0] = NULL;
	n = poll_all(wc, 64);
	check_no_internal(wc, n);
	count_ids(wc, n, count, 16);
	for (i = 1; i <= 3; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(count[10], 1);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 1)].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 2)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 3)].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(wc[find_wc(wc, n, 10)].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(n, 4);
	teardown();
}

/* ------------------------------------------------------------ fence */

static void test_fence(void)
{
	struct ibv_wc wc[64];
	int n, k, f = -1;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 4 * SL, SVERBS_PRIO(7));
	post(sqp[0], 2, IBV_WR_RDMA_READ, 100,
	     IBV_SEND_SIGNALED | IBV_SEND_FENCE | SVERBS_PRIO(5));
	post(sqp[0], 3, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	/* 3 may not pass the fenced WR, nor 2 the large WRITE */
	for (k = 0; k < 100 && (sqp[0]->queued || fk_outstanding(0)); k++) {
		int i;

		check_progress(sqp[0]);
		if (f < 0) {
			for (i = 0; i < fk->sq[0].posted; i++) {
				if (fk_wqe(0, i)->wr.opcode != IBV_WR_RDMA_READ)
					continue;
				f = i;
				/* everything before it had completed */
				CU_ASSERT_EQUAL(fk->sq[0].done, i);
				CU_ASSERT(fk_wqe(0, i)->wr.send_flags &
					  IBV_SEND_FENCE);
			}
		}
		fk_complete(0, 1);
		poll_all(wc, 64);
	}
	CU_ASSERT_FATAL(f >= 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, f + 2);
	CU_ASSERT_EQUAL(fk_wqe(0, f + 1)->wr.opcode, IBV_WR_SEND);
	teardown();

	/* earlier WQEs all unsignaled and posted: the hardware fence orders */
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_SEND, 100, 0);
	post(sqp[0], 2, IBV_WR_SEND, 100, IBV_SEND_SIGNALED | IBV_SEND_FENCE);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	CU_ASSERT(fk_wqe(0, 1)->wr.send_flags & IBV_SEND_FENCE);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL(n, 1);
	teardown();
}

/*
 * One poll takes the completions of more QPs with queued work than its
 * touched list holds (32): a QP past the list is pumped at its own CQE.
 * QP 32's first CQE comes when the list is full, and its fenced WR cannot
 * go yet (its second SEND is in flight); its second CQE, in the same poll,
 * must pump it again, or the fenced WR waits for a post that never comes.
 */
static void test_touched_overflow(void)
{
	struct ibv_wc wc[128];
	int count[4 * FK_QPS] = { 0 };
	int i, n, nq = 33;

	CU_ASSERT_FATAL(nq <= FK_QPS);
	cfg_default();
	setup(128);
	for (i = 0; i < nq; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(i, 16, false));
	for (i = 0; i < nq - 1; i++) {
		post(sqp[i], 4 * i, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
		post(sqp[i], 4 * i + 1, IBV_WR_SEND, 100,
		     IBV_SEND_SIGNALED | IBV_SEND_FENCE);
	}
	post(sqp[i], 4 * i, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[i], 4 * i + 2, IBV_WR_SEND, 100, IBV_SEND_SIGNALED);
	post(sqp[i], 4 * i + 1, IBV_WR_SEND, 100,
	     IBV_SEND_SIGNALED | IBV_SEND_FENCE);
	for (i = 0; i < nq; i++) {
		CU_ASSERT_EQUAL(sqp[i]->queued, 1);
		fk_complete(i, -1);
	}
	n = sverbs_poll_cq(scq, 64, wc);
	CU_ASSERT_EQUAL(n, nq + 1);
	/* every fenced WR went to the provider: its WQEs before it are done */
	for (i = 0; i < nq; i++) {
		CU_ASSERT_EQUAL(sqp[i]->queued, 0);
		CU_ASSERT_EQUAL(fk->sq[i].posted, i == nq - 1 ? 3 : 2);
	}
	for (i = 0; i < nq; i++)
		fk_complete(i, -1);
	n += poll_all(wc + n, 128 - n);
	CU_ASSERT_EQUAL(n, 2 * nq + 1);
	count_ids(wc, n, count, 4 * FK_QPS);
	for (i = 0; i < nq; i++) {
		CU_ASSERT_EQUAL(count[4 * i], 1);
		CU_ASSERT_EQUAL(count[4 * i + 1], 1);
		CU_ASSERT_EQUAL(count[4 * i + 2], i == nq - 1);
	}
	teardown();
}

/* ------------------------------------------------------------ headroom */

/*
 * Many QPs on one CQ, the hardware completes everything before the
 * application polls: the CQ must never overflow, whatever sverbs signals
 * for itself.  Each QP has at most 2 signaled WRs outstanding; the
 * application sized its CQ for that.
 */
static void headroom_case(bool resize)
{
	struct ibv_wc wc[256];
	int i, q, round, n = 0, want = 0;

	cfg_default();
	cfg.cq_headroom = resize ? 4 : 12;
	cfg.window_slices = 8;
	setup(8 * 2);
	fk->resize_fails = !resize;
	for (q = 0; q < 8; q++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(q, 64, false));
	if (resize)
		CU_ASSERT_EQUAL(fk_cq()->cqe, 16 + 4 * 8);

	for (round = 0; round < 20; round++) {
		for (q = 0; q < 8; q++) {
			for (i = 0; i < 2; i++)
				post(sqp[q], (uint64_t)i, IBV_WR_RDMA_WRITE,
				     9 * SL, i ? IBV_SEND_SIGNALED : 0);
			want++;
		}
		while (1) {
			bool busy = false;

			for (q = 0; q < 8; q++) {
				fk_complete(q, -1);
				busy |= sqp[q]->queued || fk_outstanding(q);
			}
			CU_ASSERT_FALSE_FATAL(fk->cq_overflow);
			n += poll_all(wc, 256);
			for (q = 0; q < 8; q++)
				busy |= sqp[q]->queued || fk_outstanding(q);
			if (!busy)
				break;
		}
		CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 0);
	}
	CU_ASSERT_EQUAL(n, want);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

static void test_headroom_shared(void)
{
	headroom_case(false);
}

static void test_headroom_resize(void)
{
	headroom_case(true);
}

/*
 * A poster's take of headroom fails; before it joins the waiting list, a
 * polling thread gives the units back, finds no waiter, arms the CQ and
 * sleeps.  Nothing of the poster's QP is in flight, so no event would ever
 * pump it: the poster must find the units itself (sv_test_hr_gap runs the
 * other thread's poll in that gap).
 */
static int gap_polled;

static void gap_poller(struct sverbs_cq *c)
{
	struct ibv_wc wc[16];
	int n;

	sv_test_hr_gap = NULL;
	fk_complete(1, -1);
	while ((n = sverbs_poll_cq(c, 16, wc)) > 0)
		gap_polled += n;
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(c, 0), 0);
	CU_ASSERT_EQUAL(sverbs_poll_cq(c, 16, wc), 0);
}

/*
 * Two QPs on a CQ that cannot grow, 4 CQEs of headroom: one each reserved,
 * 2 shared, which one sliced WRITE's window takes.
 */
static void two_qps_tight_headroom(void)
{
	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 4;
	setup(64);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 16, false));
}

static void test_headroom_gap(void)
{
	struct ibv_wc wc[16];
	int n;

	two_qps_tight_headroom();
	/* QP 1's sliced WRITE holds the shared headroom */
	CU_ASSERT_EQUAL(
		post(sqp[1], 100, IBV_WR_RDMA_WRITE, 3 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used),
			atomic_load(&scq->hr_limit));
	gap_polled = 0;
	sv_test_hr_gap = gap_poller;
	CU_ASSERT_EQUAL(
		post(sqp[0], 1, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED),
		0);
	sv_test_hr_gap = NULL;
	CU_ASSERT_EQUAL(gap_polled, 1);
	/* the poster went on: a WQE of its QP is in flight, signaled */
	CU_ASSERT(fk_outstanding(0) > 0);
	CU_ASSERT(sqp[0]->inflight_sig > 0);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1);
	teardown();
}

/*
 * Headroom that a refused chain gives back, while another QP waits for it:
 * QP 1's round takes the shared units; in the provider's post (another
 * thread, in the fake's hook) QP 0's WRITE finds none and waits; then the
 * provider refuses QP 1's chain and the rollback gives them back.  Nothing
 * of either QP is in flight, so no completion would pump QP 0: an
 * application that armed the CQ and sleeps would wait for ever.  The post
 * that gave them back pumps the waiters once its QP lock is dropped.
 */
static void hr_refusal_waiter(void)
{
	CU_ASSERT_EQUAL(
		post(sqp[0], 1, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_TRUE(sqp[0]->hr_wait);
}

static void test_headroom_back_on_refusal(void)
{
	struct ibv_wc wc[16];
	int n;

	two_qps_tight_headroom();
	/* QP 1 has posted one WQE: the refusal is its second */
	CU_ASSERT_EQUAL(post(sqp[1], 50, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_EQUAL(drain(1, wc, 16), 1);
	fk->post_hook = hr_refusal_waiter;
	fk->post_fail_at = fk->sq[1].posted + 1;
	fk->post_fail_err = EINVAL;
	(void)post(sqp[1], 100, IBV_WR_RDMA_WRITE, 3 * SL, IBV_SEND_SIGNALED);
	CU_ASSERT_PTR_NULL(fk->post_hook);
	/* QP 0 went on, with no poll and no arm */
	CU_ASSERT(fk_outstanding(0) > 0);
	CU_ASSERT_FALSE(sqp[0]->hr_wait);
	n = drain(0, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	drain(1, wc, 16);
	teardown();
}

/*
 * A CQ that cannot grow (3 shared units), QP 0's sliced WRITE 100 of len
 * bytes holding used of them.
 */
static void hr_qp0_write(uint64_t len, unsigned int used)
{
	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 8;
	setup(64);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_EQUAL(
		post(sqp[0], 100, IBV_WR_RDMA_WRITE, len, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), used);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 3);
}

/*
 * A QP registers on a CQ that cannot grow while another QP's WQEs hold every
 * shared unit: its reserved CQE would come out of units in use (the limit
 * falls below what is taken), and the layer's CQEs could overrun the CQ by
 * it when the application's share is full.  It must stay stock instead, and
 * the limit must never be below what is in use.  Red: QP 1 registered, the
 * limit 2 under 3 in use.
 */
static void test_headroom_register_when_full(void)
{
	struct ibv_wc wc[16];
	int n;

	hr_qp0_write(6 * SL, 3); /* every shared unit */
	CU_ASSERT_PTR_NULL(mkqp(1, 16, false));
	CU_ASSERT(atomic_load(&scq->hr_used) <= atomic_load(&scq->hr_limit));
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 3);
	/* QP 0's WRITE completes once; then a QP registers as usual */
	n = drain(0, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 100 &&
		  wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 0);
	CU_ASSERT_PTR_NOT_NULL(mkqp(2, 16, false));
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 2);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/*
 * The same when a QP in pass-through leaves it at its first WR stating a
 * priority: no unit free at that moment is a passing state (QP 0's WQEs
 * hold them), so the QP stays in pass-through for now (that WR goes stock)
 * and a later post leaves once a unit is free.  Red: it stayed stock for
 * good (fast.stock), its later WRs' priorities ignored.
 */
static void test_headroom_leave_when_full(void)
{
	struct ibv_wc wc[16];
	int n;

	hr_qp0_write(6 * SL, 3); /* every shared unit */
	cfg.passthrough = true;
	cfg.slice_always = false;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 16, false));
	CU_ASSERT_EQUAL(atomic_load(&sqp[1]->fast.pt), SVERBS_PT_ON);
	/* QP 1's first WR with a priority: taken, stock */
	CU_ASSERT_EQUAL(post(sqp[1], 1, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(2)),
			0);
	CU_ASSERT_EQUAL(sqp[1]->pt_stays, 1);
	CU_ASSERT_NOT_EQUAL(atomic_load(&sqp[1]->fast.pt), 0);
	CU_ASSERT_FALSE(atomic_load(&sqp[1]->fast.stock));
	CU_ASSERT(atomic_load(&scq->hr_used) <= atomic_load(&scq->hr_limit));
	n = drain(1, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	/* QP 0's WRITE completes; QP 1's next priority leaves */
	n = drain(0, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 100);
	CU_ASSERT_EQUAL(post(sqp[1], 2, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(2)),
			0);
	CU_ASSERT_EQUAL(atomic_load(&sqp[1]->fast.pt), 0);
	CU_ASSERT(sqp[1]->registered);
	n = drain(1, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 2);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/*
 * A QP registers between a poster's check of the limit and its swap of the
 * count (sv_test_hr_take_gap runs the registration there): the registration
 * takes a unit, lowers the limit and gives the unit back, so the swap finds
 * the count it expected.  The take must not stand over the new limit.
 * Red: hr_used 3 over a limit of 2 (the CQ could overrun by one).
 */
static void take_gap_register(struct sverbs_cq *c)
{
	(void)c;
	sv_test_hr_take_gap = NULL;
	CU_ASSERT_PTR_NOT_NULL(mkqp(1, 16, false));
}

static void test_headroom_take_races_register(void)
{
	struct ibv_wc wc[16];

	/* QP 0's sliced WRITE takes 2 of the 3 shared units, ... */
	hr_qp0_write(3 * SL, 2);
	/* ... and the third take meets QP 1's registration */
	sv_test_hr_take_gap = take_gap_register;
	CU_ASSERT_EQUAL(
		post(sqp[0], 101, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED),
		0);
	sv_test_hr_take_gap = NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(sqp[1]);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 2);
	CU_ASSERT(atomic_load(&scq->hr_used) <= atomic_load(&scq->hr_limit));
	CU_ASSERT(drain(0, wc, 16) == 2 && wc[0].wr_id == 100 &&
		  wc[1].wr_id == 101);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 0);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/*
 * Fill the CQ's ready ring until fewer than two poll batches fit: QP q,
 * reset again and again with WRs outstanding, leaves one flush each there,
 * which the application does not poll (their ids: 300 up).  Resets, not
 * destroys: a destroyed QP's record would have the raw CQ read out anyway.
 */
static int fill_ready_ring(int q)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
	int rounds = 0, flushed = 0, i, k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(q, 128, false));
	while (scq->rcap - scq->rcount >= 64) {
		CU_ASSERT_FATAL(++rounds < 8);
		/* at most 40 free at the end, and none dropped */
		k = (int)(scq->rcap - scq->rcount) - 40;
		k = k < 120 ? k : 120;
		for (i = 0; i < k; i++)
			CU_ASSERT_EQUAL(post(sqp[q],
					     (uint64_t)(300 + flushed + i),
					     IBV_WR_SEND, 8, IBV_SEND_SIGNALED),
					0);
		sverbs_qp_modify_pre(sqp[q], &at, IBV_QP_STATE);
		fk->sq[q].done = fk->sq[q].posted; /* the hardware forgets */
		sverbs_qp_modify_post(sqp[q], &at, IBV_QP_STATE, 0);
		flushed += k;
	}
	CU_ASSERT_EQUAL(scq->nstale, 0);
	CU_ASSERT_EQUAL_FATAL(scq->rcount, (uint32_t)flushed);
	return flushed;
}

/*
 * A QP is destroyed (or reset) with WQEs in flight, and they complete while
 * the provider destroys it: rxe leaves their CQEs in the CQ (mlx5 cleans it).
 * Their headroom units must not be free for other QPs while those CQEs sit
 * there: with the application's share full, the layer's CQEs would overrun
 * the CQ by them (here when QP 1 fails and every WQE it has in flight makes
 * a CQE).  Red: the units came back at the destroy, QP 1's slices took
 * them, and the fake CQ overflowed.
 *
 * full: the ready ring has no room for the raw CQ's read at the destroy or
 * reset (sv_cq_drain() stops), so the units stay in use (hr_late) until a
 * later poll reads the raw CQ to its end, then come back.  Guards, each
 * seen red by breaking it: units given back at once (the CQ overflows), the
 * drain reading on regardless (the precondition fails), a poll that never
 * gives them back (reset: QP 1's WRITE waits for headroom for ever; a
 * destroy's record of the QP has its poll read out anyway).
 */
static void late_cqes_case(bool reset, bool full)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
	static struct ibv_wc wc[1200];
	int count[1300] = {}, i, n, k, flushed = 0;

	cfg_default();
	cfg.cq_headroom = full ? 7 : 6; /* (7: QP 2's reserved CQE too) */
	cfg.window_slices = 8;
	cfg.window_signals = 8; /* a CQE per slice */
	setup(8);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 16, false));
	if (full)
		flushed = fill_ready_ring(2);
	CU_ASSERT_EQUAL(
		post(sqp[0], 100, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 4);
	/* while the provider destroys or resets it, its WQEs complete (rxe) */
	if (reset) {
		sverbs_qp_modify_pre(sqp[0], &at, IBV_QP_STATE);
		k = fk_complete(0, -1);
		sverbs_qp_modify_post(sqp[0], &at, IBV_QP_STATE, 0);
	} else {
		sverbs_qp_destroy_pre(sqp[0]);
		k = fk_complete(0, -1);
		sverbs_qp_destroy_post(sqp[0], 0);
		sqp[0] = NULL;
	}
	CU_ASSERT(k > 0);
	if (full) {
		/* not read yet: the units wait for a poll that reads it */
		CU_ASSERT(fk->cq_n > 0);
		CU_ASSERT(scq->hr_late > 0);
		CU_ASSERT(atomic_load(&scq->hr_used) >= scq->hr_late);
	}
	/* the application's share full: QP 1's 8 CQEs, not polled yet */
	for (i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(post(sqp[1], (uint64_t)i, IBV_WR_SEND, 8,
				     IBV_SEND_SIGNALED),
				0);
	fk_complete(1, -1);
	/* QP 1's sliced WRITE takes every shared unit free now */
	CU_ASSERT_EQUAL(
		post(sqp[1], 200, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED),
		0);
	/* it fails: every WQE in flight makes a CQE (flushed) */
	fk_fail_next(1, IBV_WC_REM_ACCESS_ERR);
	CU_ASSERT_FALSE(fk->cq_overflow);
	n = drain(1, wc, 1200);
	count_ids(wc, n, count, 1300);
	for (i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	for (i = 300; i < 300 + flushed; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(count[100], 1);
	CU_ASSERT_EQUAL(count[200], 1);
	CU_ASSERT_EQUAL(n, 10 + flushed);
	CU_ASSERT_FALSE(fk->cq_overflow);
	CU_ASSERT_EQUAL(scq->dropped, 0);
	/* the raw CQ was read to its end: every unit is back */
	CU_ASSERT_EQUAL(scq->hr_late, 0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 0);
	teardown();
}

static void test_headroom_destroy_late_cqes(void)
{
	late_cqes_case(false, false);
}

static void test_headroom_reset_late_cqes(void)
{
	late_cqes_case(true, false);
}

static void test_headroom_destroy_late_cqes_deferred(void)
{
	late_cqes_case(false, true);
}

static void test_headroom_reset_late_cqes_deferred(void)
{
	late_cqes_case(true, true);
}

/*
 * A destroy whose QP has the WQE of its reserved CQE in flight: that CQE
 * may be in the raw CQ still, so its unit stays in use, and it must be in
 * use before the unregistration grows the shared limit by it.  Another
 * thread's lockless take just after the limit grew (sv_test_unregister_gap)
 * must find no unit.  Red (the unit counted after the unregistration): the
 * take got it, one more CQE than the CQ has room for.
 */
static bool unregister_took;

static void unregister_gap_take(struct sverbs_cq *c)
{
	sv_test_unregister_gap = NULL;
	unregister_took = sv_hr_take(c);
	if (unregister_took)
		sv_hr_give(c, 1);
}

static void test_headroom_destroy_reserved_before_limit(void)
{
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 7 };
	struct ibv_send_wr wr[12] = {}, *bad = NULL;
	int count[128] = {}, i, n;
	struct ibv_wc wc[64];
	bool reserved = false;
	uint64_t seq;

	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 8;
	cfg.window_signals = 8;
	setup(16);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 16, false));
	/* QP 1 takes both shared units */
	CU_ASSERT_EQUAL(
		post(sqp[1], 200, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 2);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 2);
	/*
	 * QP 0's 12 unsignaled SENDs in one call: the 7th would be signaled
	 * (every depth / 2), finds no unit and waits, so the round's last
	 * WQE (the 6th) reports, with the reserved CQE.
	 */
	for (i = 0; i < 12; i++) {
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i < 11 ? &wr[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), 0);
	for (seq = sqp[0]->seq_head; seq < sqp[0]->seq_next; seq++)
		reserved = reserved || sv_wqe_at(sqp[0], seq)->reserved;
	CU_ASSERT_FATAL(reserved);
	sverbs_qp_destroy_pre(sqp[0]);
	CU_ASSERT(fk_complete(0, -1) > 0);
	unregister_took = true;
	sv_test_unregister_gap = unregister_gap_take;
	sverbs_qp_destroy_post(sqp[0], 0);
	sqp[0] = NULL;
	CU_ASSERT_PTR_NULL(sv_test_unregister_gap);
	sv_test_unregister_gap = NULL;
	CU_ASSERT_FALSE(unregister_took);
	/* QP 0's 12 flushed (its WQEs' CQEs absorbed), QP 1's WRITE */
	n = drain(1, wc, 64);
	count_ids(wc, n, count, 128);
	CU_ASSERT_EQUAL(n, 13);
	for (i = 100; i < 112; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(find_wc(wc, n, 200) >= 0, true);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 0);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/*
 * test_headroom_register_when_full() on a CQ that can grow but need not
 * have (it grew for QPs since destroyed): the QP grows it and registers.
 * Red: it stayed stock.
 */
static void test_headroom_register_grows(void)
{
	struct ibv_wc wc[16];
	int q;

	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 16;
	setup(64);
	for (q = 0; q < 3; q++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(q, 16, false));
	for (q = 1; q < 3; q++) {
		sverbs_qp_destroy_pre(sqp[q]);
		sverbs_qp_destroy_post(sqp[q], 0);
		sqp[q] = NULL;
	}
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 11);
	/* QP 0's sliced WRITE takes the 11 shared units */
	CU_ASSERT_EQUAL(post(sqp[0], 100, IBV_WR_RDMA_WRITE, 14 * SL,
			     IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_used), 11);
	CU_ASSERT_PTR_NOT_NULL(mkqp(1, 16, false));
	CU_ASSERT(atomic_load(&scq->hr_used) <= atomic_load(&scq->hr_limit));
	CU_ASSERT_EQUAL(atomic_load(&scq->hr_limit), 14);
	CU_ASSERT_EQUAL(fk_cq()->cqe, 64 + 16);
	CU_ASSERT(drain(0, wc, 16) == 1 && wc[0].wr_id == 100);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/*
 * Headroom that a destroy or a RESET of another QP gives back reaches the
 * QPs that wait for it, with no poll: an application that armed the CQ and
 * sleeps would otherwise wait for an event that no WQE of the waiter can
 * raise (nothing of it is in flight).
 */
static void headroom_freed_case(bool reset)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	cfg.cq_headroom = 4;
	cfg.window_slices = 2;
	setup(64);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 16, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 16, false));
	CU_ASSERT_EQUAL(
		post(sqp[0], 1, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(
		post(sqp[1], 2, IBV_WR_RDMA_WRITE, 4 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[1].posted, 0);
	CU_ASSERT_TRUE(sqp[1]->hr_wait);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->sq[1].posted, 0);
	if (reset) {
		sverbs_qp_modify_pre(sqp[0], &at, IBV_QP_STATE);
		fk->sq[0].done = fk->sq[0].posted;
		sverbs_qp_modify_post(sqp[0], &at, IBV_QP_STATE, 0);
	} else {
		sverbs_qp_destroy_pre(sqp[0]);
		fk->sq[0].done = fk->sq[0].posted;
		sverbs_qp_destroy_post(sqp[0], 0);
		sqp[0] = NULL;
	}
	/* QP 1's first slice went when the units came back */
	CU_ASSERT(fk->sq[1].posted > 0);
	n = drain(1, wc, 16);
	CU_ASSERT(n >= 1 && wc[n - 1].wr_id == 2);
	teardown();
}

static void test_headroom_freed_by_destroy(void)
{
	headroom_freed_case(false);
}

static void test_headroom_freed_by_reset(void)
{
	headroom_freed_case(true);
}

/*
 * An arm for solicited completions only, on a CQ the layer polls: the
 * layer's own WQEs complete unsolicited, and a queued WR (here a solicited
 * SEND behind the send queue's depth) may need one of them to go.  The
 * provider's CQ is armed for every completion; a pass-through CQ's arm is
 * the application's own.
 */
static void pt_setup(int cap);

static void test_arm_solicited(void)
{
	cfg_default();
	setup(64);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 2, false));
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 100, 0), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 100,
			     IBV_SEND_SIGNALED | IBV_SEND_SOLICITED),
			0);
	CU_ASSERT_EQUAL(sqp[0]->queued, 1);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 1), 0);
	CU_ASSERT_EQUAL(fk->notify_solicited, 0);
	teardown();

	pt_setup(2);
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 100, 0), 0);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 1), 0);
	CU_ASSERT_EQUAL(fk->notify_solicited, 1);
	teardown();
}

/*
 * pt_setup(16), an arm (solicited_only), then three signaled SENDs at
 * level 3, which take QP 0 out of pass-through; returns the arms made
 * since the one here.
 */
static int arm_then_leave(int solicited_only)
{
	int calls, i;

	pt_setup(16);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, solicited_only), 0);
	CU_ASSERT_EQUAL(fk->notify_solicited, solicited_only);
	calls = fk->notify_calls;
	for (i = 1; i <= 3; i++)
		CU_ASSERT_EQUAL(post(sqp[0], i, IBV_WR_SEND, 8,
				     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
				0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	return fk->notify_calls - calls;
}

/*
 * A CQ armed solicited-only while every QP on it was in pass-through, then
 * a QP leaves it (an RPC server: it arms, polls, posts its replies, the
 * first with a priority, and sleeps): the leave keeps one WQE in flight
 * and queues the rest behind its completion, which is unsolicited.  The
 * CQ must be armed for every completion from then on, or the sleeper never
 * wakes and the queued WRs never go.  An arm for every completion, or none,
 * is left as it was.
 */
static void test_arm_solicited_then_leave(void)
{
	CU_ASSERT_EQUAL(arm_then_leave(1), 1);
	CU_ASSERT_EQUAL(sqp[0]->queued, 2);
	CU_ASSERT_EQUAL(fk_outstanding(0), 1);
	CU_ASSERT_EQUAL(fk->notify_solicited, 0);
	teardown();

	/* armed for every completion: no second arm */
	CU_ASSERT_EQUAL(arm_then_leave(0), 0);
	teardown();
}

/* No resize and no headroom left: the QP stays stock. */
static void test_headroom_refuse(void)
{
	cfg_default();
	cfg.cq_headroom = 4;
	setup(16);
	fk->resize_fails = true;
	CU_ASSERT_PTR_NOT_NULL(mkqp(0, 8, false));
	CU_ASSERT_PTR_NOT_NULL(mkqp(1, 8, false));
	CU_ASSERT_PTR_NOT_NULL(mkqp(2, 8, false));
	CU_ASSERT_PTR_NULL(mkqp(3, 8, false));
	CU_ASSERT_EQUAL(fk->resize_calls, 3);
	teardown();
}

/* ------------------------------------------------------------ ex CQ */

static void test_ex_cq(void)
{
	struct ibv_cq_ex *cx;
	struct ibv_poll_cq_attr pa = {};
	struct ibv_wc wc[8];
	uint64_t ids[8];
	int n = 0;

	cfg_default();
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_FALSE(sverbs_cq_install_ex_ops(
		scq, cx, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP));
	CU_ASSERT(cx->start_poll != NULL && cx->read_opcode != NULL);
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	CU_ASSERT_EQUAL(cx->start_poll(cx, &pa), ENOENT);
	post(sqp[0], 7, IBV_WR_RDMA_WRITE, 5 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 8, IBV_WR_SEND, 5, IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	while (sqp[0]->queued || fk_outstanding(0)) {
		int ret;

		fk_complete(0, -1);
		ret = cx->start_poll(cx, &pa);
		if (ret == ENOENT)
			continue;
		CU_ASSERT_EQUAL_FATAL(ret, 0);
		do {
			CU_ASSERT_FATAL(n < 8);
			ids[n] = cx->wr_id;
			CU_ASSERT_EQUAL(cx->status, IBV_WC_SUCCESS);
			CU_ASSERT_EQUAL(cx->read_qp_num(cx), 0x100);
			if (cx->wr_id == 7) {
				CU_ASSERT_EQUAL(cx->read_opcode(cx),
						IBV_WC_RDMA_WRITE);
				CU_ASSERT_EQUAL(cx->read_byte_len(cx), 5 * SL);
			} else {
				CU_ASSERT_EQUAL(cx->read_opcode(cx),
						IBV_WC_SEND);
			}
			n++;
		} while (!cx->next_poll(cx));
		cx->end_poll(cx);
	}
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(ids[0] == 7 && ids[1] == 8);
	/* ibv_poll_cq on the same CQ works too */
	post(sqp[0], 9, IBV_WR_SEND, 5, IBV_SEND_SIGNALED);
	n = drain(0, wc, 8);
	CU_ASSERT(n == 1 && wc[0].wr_id == 9);
	teardown();
}

/* ------------------------------------------------------------ wr_* API */

static void test_wr_api(void)
{
	struct ibv_qp_ex *qx = &fake_qpx;
	struct ibv_sge sl[2] = {
		{ .addr = 0x1000, .length = 2 * SL, .lkey = 3 },
		{ .addr = 0x9000, .length = SL, .lkey = 4 }
	};
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	memset(qx, 0, sizeof(*qx));
	CU_ASSERT_FALSE(sverbs_qp_install_wr_ops(sqp[0], qx,
						 IBV_QP_EX_WITH_ATOMIC_WRITE));
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));

	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED | SVERBS_PRIO(7);
	ibv_wr_rdma_write(qx, 5, RADDR);
	ibv_wr_set_sge_list(qx, 2, sl);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED | SVERBS_PRIO(0);
	ibv_wr_send(qx);
	memset(inline_buf, 0x5a, 16);
	ibv_wr_set_inline_data(qx, inline_buf, 16);
	memset(inline_buf, 0, 16);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 0); /* nothing before complete */
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	/* the level-0 SEND first, then the WRITE's slices */
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 3);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->wr.opcode, IBV_WR_SEND);
	CU_ASSERT(fk_wqe(0, 0)->wr.send_flags & IBV_SEND_INLINE);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->inl[15], 0x5a);
	CU_ASSERT_EQUAL(fk_wqe(0, 1)->wr.wr.rdma.rkey, 5);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 2 && wc[1].wr_id == 1);
	CU_ASSERT_EQUAL(wc[1].byte_len, 3 * SL);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1 + 3);

	/* abort posts nothing */
	ibv_wr_start(qx);
	qx->wr_id = 3;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x1000, 10);
	ibv_wr_abort(qx);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	/* an error in the batch: nothing posted, the error returned */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x1000, 10);
	ibv_wr_rdma_write(qx, 1, RADDR);
	ibv_wr_set_sge_list(qx, 5, sl);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), EINVAL);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 4);
	/* capacity: ENOMEM */
	ibv_wr_start(qx);
	for (n = 0; n < 17; n++) {
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, 1, 0x1000, 10);
	}
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), ENOMEM);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	teardown();
}

/*
 * ibv_wr_complete is all-or-nothing (mlx5: on an error nothing of the batch
 * is posted).  The provider refusing the batch's first WR fails the call
 * with nothing posted; refusing a later one, after earlier WRs of the batch
 * went to the hardware, cannot fail the call (they cannot be taken back):
 * the call returns 0, the whole batch is posted, and the refused WR
 * completes with IBV_WC_LOC_QP_OP_ERR (vendor_err: the errno).
 */
/*
 * Between ibv_wr_start() and ibv_wr_complete() the thread that builds the
 * batch may poll and arm the CQ (the providers hold only their send
 * queue's lock there, which poll does not take), and it may take a
 * completion of the very QP it builds on.  Red: the poll spins on the QP's
 * lock its own batch holds (the test hangs; meson's timeout ends it).
 */
/*
 * ibv_req_notify_cq() from inside an extended-CQ poll loop (between
 * start_poll and end_poll, which hold the layer's CQ lock): stock arms take
 * no CQ lock, so this works there.  Red: the arm spun on the lock its own
 * thread held (the test hangs; meson's timeout ends it).
 */
static void test_ex_cq_arm_inside(void)
{
	struct ibv_cq_ex *cx;
	struct ibv_poll_cq_attr pa = {};
	int calls;

	cfg_default();
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	CU_ASSERT_EQUAL(post(sqp[0], 7, IBV_WR_SEND, 5, IBV_SEND_SIGNALED), 0);
	fk_complete(0, -1);
	CU_ASSERT_EQUAL_FATAL(cx->start_poll(cx, &pa), 0);
	CU_ASSERT_EQUAL(cx->wr_id, 7);
	calls = fk->notify_calls;
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->notify_calls, calls + 1);
	CU_ASSERT_EQUAL(cx->next_poll(cx), ENOENT);
	cx->end_poll(cx);
	teardown();
}

/*
 * A QP created, reset and destroyed from inside an extended-CQ poll loop of
 * its send CQ: stock rxe takes no CQ lock for any of them (and stock mlx5
 * none to create), so a program may do so; the layer's CQ lock is this
 * thread's own there.  Red: each spun on that lock (alarm() ends the test).
 */
static void test_ex_cq_lifetime_inside(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
	struct ibv_cq_ex *cx;
	struct ibv_poll_cq_attr pa = {};
	struct ibv_wc wc[4];

	cfg_default();
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	cfg.passthrough = true;
	mkqp(1, 16, false);
	cfg.passthrough = false;
	CU_ASSERT_EQUAL(post(sqp[0], 7, IBV_WR_SEND, 5, IBV_SEND_SIGNALED), 0);
	fk_complete(0, -1);
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(cx->start_poll(cx, &pa), 0);
	CU_ASSERT_EQUAL(cx->wr_id, 7);
	/* a QP of the queue path (passthrough off), then its RESET */
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(2, 16, false));
	CU_ASSERT_FALSE(atomic_load(&sqp[2]->fast.pt));
	sverbs_qp_modify_pre(sqp[2], &attr, IBV_QP_STATE);
	sverbs_qp_modify_post(sqp[2], &attr, IBV_QP_STATE, 0);
	/* a destroy of either kind */
	sverbs_qp_destroy_pre(sqp[1]);
	sverbs_qp_destroy_post(sqp[1], 0);
	sqp[1] = NULL;
	sverbs_qp_destroy_pre(sqp[2]);
	sverbs_qp_destroy_post(sqp[2], 0);
	sqp[2] = NULL;
	CU_ASSERT_EQUAL(cx->next_poll(cx), ENOENT);
	cx->end_poll(cx);
	alarm(0);
	/* the CQ is whole: a new WR of QP 0 completes once */
	CU_ASSERT_EQUAL(post(sqp[0], 8, IBV_WR_SEND, 5, IBV_SEND_SIGNALED), 0);
	CU_ASSERT(drain(0, wc, 4) == 1 && wc[0].wr_id == 8);
	teardown();
}

/*
 * Two extended CQs: A (scq, fk->cqx) and B (scq_b, fk->cqx_b), each with
 * one QP of the queue path (QP 0 on A, QP 1 on B) and a receive CQE, so
 * that start_poll on either holds its lock.
 */
static struct sverbs_cq *scq_b;

/* QP i, send CQ B */
static struct sverbs_qp *mkqp_b(int i)
{
	struct ibv_qp_init_attr_ex a = {};
	struct ibv_qp *qp = fk_qp(i, IBV_QPT_RC, 32, false);

	fk_qp_on_b(i);
	a.cap.max_send_wr = 32;
	a.cap.max_send_sge = 4;
	a.cap.max_inline_data = 64;
	a.qp_type = IBV_QPT_RC;
	a.send_cq = fk_cq_b();
	sqp[i] = sverbs_qp_create(test_ad, qp, scq_b, &a, &cfg);
	return sqp[i];
}

static void two_ex_cqs(uint32_t budget_us)
{
	cfg_default();
	cfg.batch_budget_us = budget_us;
	setup(64);
	fk_install_ex();
	fk_install_ex_b();
	scq_b = sverbs_cq_create(test_ad, fk_cq_b(), &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scq_b);
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, &fk->cqx, IBV_WC_STANDARD_FLAGS));
	CU_ASSERT_TRUE_FATAL(sverbs_cq_install_ex_ops(scq_b, &fk->cqx_b,
						      IBV_WC_STANDARD_FLAGS));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 32, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp_b(1));
	fk_recv_cqe(0, 500, IBV_WC_SUCCESS);
	fk_recv_cqe(1, 501, IBV_WC_SUCCESS);
}

static void two_ex_cqs_done(void)
{
	int i;

	/* B's QPs before B */
	for (i = 0; i < FK_QPS; i++) {
		if (!sqp[i] || !fk->sq[i].on_b)
			continue;
		sverbs_qp_destroy_pre(sqp[i]);
		sverbs_qp_destroy_post(sqp[i], 0);
		sqp[i] = NULL;
	}
	sverbs_cq_destroy(scq_b);
	scq_b = NULL;
	teardown();
}

/*
 * B's extended poll nested in A's: after B's end_poll, A's loop is still
 * this thread's, and an arm of A inside it must not wait for A's lock.
 * Red: end_poll on B forgot A (the arm spun on A's lock; alarm() ends it).
 */
static void test_ex_cq_nested(void)
{
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *ca, *cb;

	two_ex_cqs(0);
	ca = &fk->cqx;
	cb = &fk->cqx_b;
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(ca->start_poll(ca, &pa), 0);
	CU_ASSERT_EQUAL(ca->wr_id, 500);
	CU_ASSERT_EQUAL_FATAL(cb->start_poll(cb, &pa), 0);
	CU_ASSERT_EQUAL(cb->wr_id, 501);
	CU_ASSERT_EQUAL(cb->next_poll(cb), ENOENT);
	cb->end_poll(cb);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(ca->next_poll(ca), ENOENT);
	ca->end_poll(ca);
	alarm(0);
	two_ex_cqs_done();
}

/*
 * Two threads, each inside one CQ's extended poll loop, post WRs to a QP of
 * the other's CQ and arm that CQ (stock takes no CQ lock for either):
 * neither may wait for the lock the other holds across its loop.  The WRs
 * are held for a bigger batch (a WR of the QP is in flight), and an arm
 * sends them: the arm that could not take the lock leaves that to the
 * loop's end_poll.  Red: each arm spun on the other's lock (alarm() ends
 * the test); without the end_poll's pump, the WRs stayed held.
 */
static _Atomic int cross_in[2], cross_armed[2];

static void cross_wait(_Atomic int *flag)
{
	while (!atomic_load(flag))
		sched_yield();
}

static void post_held(int q)
{
	int i;

	for (i = 1; i < 4; i++)
		CU_ASSERT_EQUAL(post(sqp[q], 100 + (uint64_t)i,
				     IBV_WR_RDMA_WRITE, 64,
				     IBV_SEND_SIGNALED | SVERBS_PRIO(7)),
				0);
}

/* me: 0 polls A and posts to QP 1 on B; 1 polls B, posts to QP 0 on A */
static void cross_poll(int me)
{
	struct ibv_cq_ex *mine = me ? &fk->cqx_b : &fk->cqx;
	struct ibv_poll_cq_attr pa = {};
	int other = !me;

	CU_ASSERT_EQUAL(mine->start_poll(mine, &pa), 0);
	/* the loop's last next_poll (it would pump the other's WRs) */
	CU_ASSERT_EQUAL(mine->next_poll(mine), ENOENT);
	atomic_store(&cross_in[me], 1);
	cross_wait(&cross_in[other]);
	post_held(other);
	CU_ASSERT_EQUAL(fk->sq[other].posted, 1);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(me ? scq : scq_b, 0), 0);
	atomic_store(&cross_armed[me], 1);
	cross_wait(&cross_armed[other]);
	mine->end_poll(mine);
}

static void *cross_thread(void *arg)
{
	(void)arg;
	cross_poll(1);
	return NULL;
}

/*
 * The same two loops, each posting the first WR with a priority to a QP in
 * pass-through on the other's CQ (QP 2 on A, QP 3 on B): leaving
 * pass-through takes the CQ's lock.  It must not wait for it there: the WR
 * goes as stock's would (the QP leaves at a later post).  Red: each post
 * spun on the other's lock.
 */
static void cross_leave(int me)
{
	struct ibv_cq_ex *mine = me ? &fk->cqx_b : &fk->cqx;
	struct ibv_poll_cq_attr pa = {};
	int other = !me;

	CU_ASSERT_EQUAL(mine->start_poll(mine, &pa), 0);
	CU_ASSERT_EQUAL(mine->next_poll(mine), ENOENT);
	atomic_store(&cross_in[me], 1);
	cross_wait(&cross_in[other]);
	CU_ASSERT_EQUAL(post(sqp[other + 2], 200, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(3)),
			0);
	CU_ASSERT_EQUAL(fk->sq[other + 2].posted, 1);
	atomic_store(&cross_armed[me], 1);
	cross_wait(&cross_armed[other]);
	mine->end_poll(mine);
}

static void *cross_leave_thread(void *arg)
{
	(void)arg;
	cross_leave(1);
	return NULL;
}

static void test_ex_cq_cross_leave(void)
{
	struct ibv_wc wc[4];
	pthread_t t;
	int q;

	two_ex_cqs(0);
	cfg.passthrough = true;
	cfg.slice_always = false;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(2, 32, false));
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp_b(3));
	CU_ASSERT_TRUE_FATAL(atomic_load(&sqp[2]->fast.pt) &&
			     atomic_load(&sqp[3]->fast.pt));
	memset(cross_in, 0, sizeof(cross_in));
	memset(cross_armed, 0, sizeof(cross_armed));
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(
		pthread_create(&t, NULL, cross_leave_thread, NULL), 0);
	cross_leave(0);
	pthread_join(t, NULL);
	alarm(0);
	/*
	 * each WR completes once, with its own wr_id, on its QP's CQ (its
	 * priority bits went to the provider as posted, as a stock QP's do
	 * and as with SVERBS=off: docs/semantics.md)
	 */
	for (q = 2; q < 4; q++) {
		fk_complete(q, -1);
		CU_ASSERT_EQUAL(sverbs_poll_cq(q == 2 ? scq : scq_b, 4, wc), 1);
		CU_ASSERT(wc[0].wr_id == 200 && wc[0].qp_num == 0x100u + q &&
			  wc[0].status == IBV_WC_SUCCESS);
	}
	/* outside the loops, the next one leaves pass-through */
	CU_ASSERT_EQUAL(post(sqp[2], 201, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(3)),
			0);
	CU_ASSERT_FALSE(atomic_load(&sqp[2]->fast.pt));
	fk_complete(2, -1);
	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 201);
	two_ex_cqs_done();
}

/*
 * Two posts take the same QP out of pass-through at once, and one of them
 * fails: thread B's leave waits for CQ A's lock, held across thread L's
 * extended poll loop on A; this thread, inside a loop on B, posts a
 * priority WR to the same QP and cannot wait for that lock (EBUSY: its WR
 * goes as stock's would).  B is still leaving: a pass-through wr_* batch
 * that started now would hold the send queue B's pump waits for, with the
 * QP lock a poll inside that batch needs.  Red: the failed leave cleared
 * the mark of B's (one flag, not a count).
 */
static _Atomic int pair_in, pair_done;

static void *pair_loop_thread(void *arg)
{
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *ca = &fk->cqx;

	(void)arg;
	CU_ASSERT_EQUAL(ca->start_poll(ca, &pa), 0);
	CU_ASSERT_EQUAL(ca->next_poll(ca), ENOENT);
	atomic_store(&pair_in, 1);
	cross_wait(&pair_done);
	ca->end_poll(ca);
	return NULL;
}

static void *pair_leave_thread(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(post(sqp[2], 301, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(3)),
			0);
	return NULL;
}

static void test_ex_cq_leave_pair(void)
{
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cb;
	struct ibv_wc wc[4];
	pthread_t tl, tb;
	int i, n, got = 0;

	two_ex_cqs(0);
	cfg.passthrough = true;
	cfg.slice_always = false;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(2, 32, false));
	CU_ASSERT_TRUE_FATAL(atomic_load(&sqp[2]->fast.pt));
	cb = &fk->cqx_b;
	atomic_store(&pair_in, 0);
	atomic_store(&pair_done, 0);
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&tl, NULL, pair_loop_thread, NULL),
			      0);
	cross_wait(&pair_in);
	CU_ASSERT_EQUAL_FATAL(
		pthread_create(&tb, NULL, pair_leave_thread, NULL), 0);
	/* B is leaving (it waits for A's lock) */
	while (!atomic_load(&sqp[2]->pt_leaving))
		sched_yield();
	CU_ASSERT_EQUAL(cb->start_poll(cb, &pa), 0);
	CU_ASSERT_EQUAL(cb->next_poll(cb), ENOENT);
	CU_ASSERT_EQUAL(post(sqp[2], 300, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(3)),
			0);
	CU_ASSERT_EQUAL(fk->sq[2].posted, 1);
	CU_ASSERT_TRUE(atomic_load(&sqp[2]->pt_leaving));
	cb->end_poll(cb);
	atomic_store(&pair_done, 1);
	pthread_join(tl, NULL);
	pthread_join(tb, NULL);
	alarm(0);
	/* B's post left pass-through; each WR completes once */
	CU_ASSERT_FALSE(atomic_load(&sqp[2]->fast.pt));
	fk_complete(2, -1);
	while ((n = sverbs_poll_cq(scq, 4, wc)) > 0) {
		for (i = 0; i < n; i++) {
			CU_ASSERT(wc[i].status == IBV_WC_SUCCESS);
			if (wc[i].wr_id == 300 || wc[i].wr_id == 301)
				got |= 1 << (wc[i].wr_id - 300);
			else
				got |= 4;
		}
	}
	CU_ASSERT_EQUAL(got, 3);
	two_ex_cqs_done();
}

static void test_ex_cq_cross_arm(void)
{
	pthread_t t;
	int q;

	two_ex_cqs(10 * 1000 * 1000);
	/* each QP's first WR goes at once (the QP is idle) */
	for (q = 0; q < 2; q++)
		CU_ASSERT_EQUAL(post(sqp[q], 100, IBV_WR_RDMA_WRITE, 64,
				     IBV_SEND_SIGNALED | SVERBS_PRIO(7)),
				0);
	CU_ASSERT(fk->sq[0].posted == 1 && fk->sq[1].posted == 1);
	memset(cross_in, 0, sizeof(cross_in));
	memset(cross_armed, 0, sizeof(cross_armed));
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, cross_thread, NULL), 0);
	cross_poll(0);
	pthread_join(t, NULL);
	alarm(0);
	/* each arm sent its CQ's held WRs, by itself or by the loop's end */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 4);
	CU_ASSERT_EQUAL(fk->sq[1].posted, 4);
	two_ex_cqs_done();
}

/*
 * A headroom kick outside any loop, while another thread holds the CQ
 * across its extended poll loop: thread Y's ibv_wr_complete() kicks (QPs
 * wait for headroom given back) with its batch's wr_lock held, and the
 * looping thread starts a wr_* batch on the same QP, which waits for that
 * wr_lock.  The kick must leave its pump to the loop's end_poll.  Red: the
 * kick spun on the CQ lock, the loop on the wr_lock (alarm() ends it).
 */
static _Atomic int kick_started;

static void *kick_batch_thread(void *arg)
{
	struct ibv_qp_ex *qx = arg;

	ibv_wr_start(qx);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x1000, 10);
	atomic_store(&kick_started, 1);
	usleep(20 * 1000); /* (either order hangs without the fix) */
	/* a give while a QP waited left the kick to the next post's unlock */
	atomic_store(&scq->hr_waiters, 1);
	atomic_store(&scq->hr_kick, true);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	return NULL;
}

static void test_ex_cq_kick_outside(void)
{
	struct ibv_qp_ex *qx = &fake_qpx;
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cx;
	struct ibv_wc wc[8];
	pthread_t t;

	cfg_default();
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	memset(qx, 0, sizeof(*qx));
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	fk_recv_cqe(0, 500, IBV_WC_SUCCESS);
	atomic_store(&kick_started, 0);
	alarm(20);
	CU_ASSERT_EQUAL_FATAL(cx->start_poll(cx, &pa), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, kick_batch_thread, qx),
			      0);
	while (!atomic_load(&kick_started))
		sched_yield();
	/* waits for Y's batch, as stock's wr_start waits for the SQ lock */
	ibv_wr_start(qx);
	qx->wr_id = 3;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x2000, 20);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(cx->next_poll(cx), ENOENT);
	cx->end_poll(cx);
	alarm(0);
	/* the loop's end did the kick's pump (nothing waited, in truth) */
	CU_ASSERT_EQUAL(atomic_load(&scq->pump_asked), 0);
	atomic_store(&scq->hr_waiters, 0);
	CU_ASSERT(drain(0, wc, 8) == 2 && wc[0].wr_id == 2 && wc[1].wr_id == 3);
	teardown();
}

/*
 * A QP reset and one destroyed inside an extended poll loop drain the raw
 * CQ through the provider's poll, which writes the application's cq_ex:
 * its wr_id and status must still be the loop's current completion's.
 * Red: they read the last raw CQE's (99, IBV_WC_REM_ACCESS_ERR).
 */
static void test_ex_cq_fields_kept(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cx;

	cfg_default();
	setup(64);
	fk_install_ex();
	cx = &fk->cqx;
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, cx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	mkqp(1, 16, false);
	CU_ASSERT_EQUAL(post(sqp[0], 7, IBV_WR_SEND, 5, IBV_SEND_SIGNALED), 0);
	fk_complete(0, -1);
	CU_ASSERT_EQUAL_FATAL(cx->start_poll(cx, &pa), 0);
	CU_ASSERT(cx->wr_id == 7 && cx->status == IBV_WC_SUCCESS);
	fk_recv_cqe(0, 98, IBV_WC_REM_ACCESS_ERR);
	sverbs_qp_modify_pre(sqp[1], &attr, IBV_QP_STATE);
	sverbs_qp_modify_post(sqp[1], &attr, IBV_QP_STATE, 0);
	CU_ASSERT(cx->wr_id == 7 && cx->status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(cx->read_opcode(cx), IBV_WC_SEND);
	fk_recv_cqe(0, 99, IBV_WC_REM_ACCESS_ERR);
	sverbs_qp_destroy_pre(sqp[1]);
	sverbs_qp_destroy_post(sqp[1], 0);
	sqp[1] = NULL;
	CU_ASSERT(cx->wr_id == 7 && cx->status == IBV_WC_SUCCESS);
	/* the receives come next, in order */
	CU_ASSERT_EQUAL(cx->next_poll(cx), 0);
	CU_ASSERT(cx->wr_id == 98 && cx->status == IBV_WC_REM_ACCESS_ERR);
	CU_ASSERT_EQUAL(cx->next_poll(cx), 0);
	CU_ASSERT_EQUAL(cx->wr_id, 99);
	CU_ASSERT_EQUAL(cx->next_poll(cx), ENOENT);
	cx->end_poll(cx);
	teardown();
}

static void test_wr_batch_poll_inside(void)
{
	struct ibv_qp_ex *qx = &fake_qpx;
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	memset(qx, 0, sizeof(*qx));
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 100, IBV_SEND_SIGNALED),
			0);
	fk_complete(0, -1);
	ibv_wr_start(qx);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x1000, 10);
	/* the completion of WR 1, taken inside the batch */
	n = sverbs_poll_cq(scq, 16, wc);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	qx->wr_id = 3;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x2000, 20);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	n = drain(0, wc, 16);
	CU_ASSERT(n == 2 && wc[0].wr_id == 2 && wc[1].wr_id == 3);
	/* an aborted batch with a poll inside: nothing posted, slots back */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 1, 0x1000, 10);
	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 16, wc), 0);
	ibv_wr_abort(qx);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 3);
	teardown();
}

static void test_wr_complete_all_or_nothing(void)
{
	struct ibv_qp_ex *qx = &fake_qpx;
	struct ibv_wc wc[16];
	uint64_t id;
	int n;

	cfg_default();
	cfg.slice_always = false;
	setup(64);
	mkqp(0, 16, false);
	memset(qx, 0, sizeof(*qx));
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	/* the first WR refused: the error, nothing posted */
	fk->post_fail_at = 1;
	fk->post_fail_err = EINVAL;
	ibv_wr_start(qx);
	for (id = 1; id <= 3; id++) {
		qx->wr_id = id;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, 1, 0x1000, 10);
	}
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), EINVAL);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 0);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	/* the second refused: 0, all of the batch completes, 5 in error */
	fk->post_fail_at = 2;
	fk->post_fail_err = EINVAL;
	ibv_wr_start(qx);
	for (id = 4; id <= 6; id++) {
		qx->wr_id = id;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, 1, 0x1000, 10);
	}
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT(wc[1].wr_id == 5 && wc[1].status == IBV_WC_LOC_QP_OP_ERR &&
		  wc[1].vendor_err == EINVAL);
	CU_ASSERT(wc[2].wr_id == 6 && wc[2].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	teardown();
}

/* ------------------------------------------------------------ adaptive */

static uint64_t fake_now;

static uint64_t fake_clock(void)
{
	return fake_now;
}

static void test_adaptive_slice(void)
{
	struct sv_slicer s = { .clock_ns = fake_clock };
	struct sverbs_config c;

	sverbs_config_defaults(&c);
	c.slice_bytes = 0;
	c.slice_min_bytes = 4096;
	c.slice_max_bytes = 1 << 20;
	c.hol_target_us = 50;
	sv_slicer_init(&s, &c);
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 64 * 1024);
	fake_now = 1000;
	sv_slicer_busy(&s, 128 * 1024);
	/* a burst: 64 KiB reaped 1 us after the start is no sample */
	fake_now += 1000;
	sv_slicer_retired(&s, 64 * 1024, 64 * 1024);
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 64 * 1024);
	/* 800 KiB in 200 us (4 * hol_target_us): 4096 B/us, slice 200 KiB */
	fake_now += 199000;
	sv_slicer_retired(&s, 736 * 1024, 64 * 1024);
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 4096 * 50);
	/* much slower samples pull it down, clamped at the minimum */
	for (int i = 0; i < 100; i++) {
		fake_now += 1000000000;
		sv_slicer_retired(&s, 200 * 1024, 64 * 1024);
	}
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 4096);
	/* an idle SQ stops the interval: no sample across idle time */
	sv_slicer_retired(&s, 10, 0);
	CU_ASSERT_FALSE(s.stamped);
	fake_now += 1000000000;
	sv_slicer_busy(&s, 100); /* too small to start an interval */
	CU_ASSERT_FALSE(s.stamped);
	/* fast again, clamped at the maximum */
	sv_slicer_busy(&s, 1 << 20);
	for (int i = 0; i < 100; i++) {
		fake_now += 10000; /* 1 MiB per 10 us */
		sv_slicer_retired(&s, 1 << 20, 1 << 20);
	}
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 1 << 20);
	/* fixed size: never changes */
	c.slice_bytes = 12345;
	sv_slicer_init(&s, &c);
	sv_slicer_busy(&s, 1 << 20);
	fake_now += 10;
	sv_slicer_retired(&s, 1 << 20, 0);
	CU_ASSERT_EQUAL(sv_slice_bytes(&s), 12345);
}

/* The slice size a QP uses follows its measured rate. */
static void test_adaptive_qp(void)
{
	struct ibv_wc wc[16];
	int i;

	cfg_default();
	cfg.slice_bytes = 0;
	cfg.slice_min_bytes = 4096;
	cfg.hol_target_us = 10;
	setup(64);
	mkqp(0, 64, false);
	sqp[0]->slicer.clock_ns = fake_clock;
	fake_now = 0;
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 1 << 20, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->bytes, 64 * 1024);
	/* the SQ drains 1000 B/us: slices of 10 000 bytes */
	for (i = 0; i < 40 && (sqp[0]->queued || fk_outstanding(0)); i++) {
		fake_now += (uint64_t)fk_wqe(0, fk->sq[0].done)->bytes;
		fk_complete(0, 1);
		poll_all(wc, 16);
	}
	CU_ASSERT_EQUAL(sv_slice_bytes(&sqp[0]->slicer), 10000);
	CU_ASSERT_EQUAL(fk_wqe(0, fk->sq[0].posted - 1)->bytes, 10000);
	drain(0, wc, 16);
	teardown();
}

/* ------------------------------------------------------------ misc */

static void test_doorbells(void)
{
	struct ibv_send_wr wr[8], *bad;
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 1 };
	int i;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 8; i++) {
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i < 7 ? &wr[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->doorbells, 1); /* one chain, one doorbell */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 8);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->notify_calls, 1);
	teardown();
}

/* The provider refuses a WQE: nothing is lost, it goes later. */
static void test_adapter_failure(void)
{
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	post(sqp[0], 1, IBV_WR_SEND, 8, IBV_SEND_SIGNALED);
	fk->post_fail_at = 3;
	post(sqp[0], 2, IBV_WR_SEND, 8, 0);
	post(sqp[0], 3, IBV_WR_SEND, 8, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	CU_ASSERT_EQUAL(sqp[0]->queued, 1);
	fk->post_fail_at = 0;
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 1 && wc[1].wr_id == 3);
	teardown();
}

/*
 * The provider refuses a WR for good at hand-over (an error other than a
 * full queue): it completes with IBV_WC_LOC_QP_OP_ERR, signaled or not, in
 * order, through a nop in its place; the QP goes on.
 */
static void test_adapter_refuses(void)
{
	struct ibv_wc wc[16];
	struct fk_wqe *w;
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	/* 1: 4 slices, 2 go now; 2 and 3 wait behind the window */
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 4 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_SEND, 8, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	/* the 5th WQE (2's) is refused once with EINVAL */
	fk->post_fail_at = 5;
	fk->post_fail_err = EINVAL;
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT(wc[1].wr_id == 2 && wc[1].status == IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT_EQUAL(wc[1].vendor_err, EINVAL);
	CU_ASSERT(wc[2].wr_id == 3 && wc[2].status == IBV_WC_SUCCESS);
	/* in 2's place the provider's no-op (16.6), signaled, no SGE */
	w = fk_wqe(0, 4);
	CU_ASSERT(w->wr.opcode == FK_WR_NOP && w->wr.num_sge == 0 &&
		  w->signaled);
	teardown();

	/* unsignaled, refused at its 2nd slice: reported all the same */
	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	fk->post_fail_at = 2;
	fk->post_fail_err = EINVAL;
	post(sqp[0], 4, IBV_WR_RDMA_WRITE, 3 * SL, 0);
	post(sqp[0], 5, IBV_WR_SEND, 8, IBV_SEND_SIGNALED);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 4 && wc[0].status == IBV_WC_LOC_QP_OP_ERR);
	CU_ASSERT(wc[1].wr_id == 5 && wc[1].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/* Poll everything there is: successes only, counted by wr_id (< 4096). */
static void poll_tally(int *count)
{
	struct ibv_wc wc[256];
	int i, n;

	n = poll_all(wc, 256);
	check_no_internal(wc, n);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		count[wc[i].wr_id & 4095]++;
	}
}

/*
 * Randomized: every WR completes exactly once, whatever happens.  marked:
 * WRs state random levels (the QPs schedule); else none does, the QPs never
 * schedule and lone WRs on an empty queue take the direct path.
 */
static void random_run(bool marked)
{
	static int count[4096];
	struct ibv_wc wc[256];
	unsigned int seed = 12345;
	uint64_t id = 0;
	int i, n, step;

	cfg_default();
	cfg.window_slices = 3;
	cfg.slice_always = marked;
	setup(64 * 2);
	mkqp(0, 64, false);
	mkqp(1, 64, true);
	memset(count, 0, sizeof(count));
	for (step = 0; step < 3000; step++) {
		int q = rand_r(&seed) % 2, r = rand_r(&seed) % 10;

		if (r < 5 && id < 4000) {
			enum ibv_wr_opcode op = rand_r(&seed) % 2
							? IBV_WR_RDMA_WRITE
							: IBV_WR_SEND;
			unsigned int fl = SVERBS_PRIO(rand_r(&seed) % 8) |
					  IBV_SEND_SIGNALED;

			if (!marked)
				fl &= ~SVERBS_PRIO_MASK;
			if (rand_r(&seed) % 7 == 0)
				fl |= IBV_SEND_FENCE;
			if (!post(sqp[q], id, op,
				  (uint64_t)(rand_r(&seed) % (5 * SL)), fl))
				id++;
		} else if (r < 9) {
			fk_complete(q, rand_r(&seed) % 4);
		}
		poll_tally(count);
		check_progress(sqp[0]);
		check_progress(sqp[1]);
		CU_ASSERT_FALSE(fk->cq_overflow);
	}
	n = drain(0, wc, 256);
	for (i = 0; i < n; i++)
		count[wc[i].wr_id]++;
	n = drain(1, wc, 256);
	for (i = 0; i < n; i++)
		count[wc[i].wr_id]++;
	for (i = 0; i < (int)id; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_EQUAL(sqp[0]->scheduled, marked);
	teardown();
}

static void test_random(void)
{
	random_run(true);
	random_run(false);
}

/*
 * What random_errors() saw, for the flush checks: per WR its status, per QP
 * how many WRs failed with the injected status and how many successes came
 * after the QP's first error completion (in poll order).
 */
static struct {
	int count[4096], bad[4096];
	enum ibv_wc_status status[4096];
	bool after_fail[4096]; /* posted once its QP had failed */
	bool seen_err[2];
	int n_injected[2], n_other_status, ok_after_err[2];
} re;

static void re_tally(const struct ibv_wc *wc, int n)
{
	int i, id, q;

	for (i = 0; i < n; i++) {
		id = wc[i].wr_id & 4095;
		q = (wc[i].wr_id >> 12) & 1;
		re.count[id]++;
		re.bad[id] += wc[i].status != 0;
		re.status[id] = wc[i].status;
		if (wc[i].status == IBV_WC_SUCCESS && re.seen_err[q])
			re.ok_after_err[q]++;
		if (wc[i].status == IBV_WC_RETRY_EXC_ERR)
			re.n_injected[q]++;
		else if (wc[i].status != IBV_WC_SUCCESS &&
			 wc[i].status != IBV_WC_WR_FLUSH_ERR)
			re.n_other_status++;
		if (wc[i].status != IBV_WC_SUCCESS)
			re.seen_err[q] = true;
	}
}

/*
 * The rest of a failed QP is flushed (docs/semantics.md, "Errors and
 * flushes"): the QP's one failed WR has the injected status, every other
 * error is IBV_WC_WR_FLUSH_ERR, no success follows the first error, and
 * every WR posted after the failure - signaled or not - gets exactly one
 * IBV_WC_WR_FLUSH_ERR.
 */
static void re_check_flushed(uint64_t nids)
{
	int q, flushed_after = 0, posted_after = 0;
	uint64_t i;

	for (q = 0; q < 2; q++) {
		CU_ASSERT_EQUAL(re.n_injected[q], 1);
		CU_ASSERT_EQUAL(re.ok_after_err[q], 0);
	}
	CU_ASSERT_EQUAL(re.n_other_status, 0);
	for (i = 0; i < nids; i++) {
		if (!re.after_fail[i])
			continue;
		posted_after++;
		flushed_after +=
			re.count[i] == 1 && re.status[i] == IBV_WC_WR_FLUSH_ERR;
	}
	CU_ASSERT(posted_after > 0);
	CU_ASSERT_EQUAL(flushed_after, posted_after);
}

/* Randomized with one failure per QP: every WR completes exactly once. */
static void random_errors(bool signaled_only, bool marked)
{
	static int count[4096], bad[4096];
	static bool sig[4096];
	struct ibv_wc wc[256];
	unsigned int seed = 777;
	uint64_t id = 0;
	bool failed[2] = { false, false };
	int i, n, step, q;

	cfg_default();
	cfg.window_slices = 3;
	cfg.slice_always = marked;
	setup(64 * 2);
	fk->flush_signaled_only = signaled_only;
	mkqp(0, 64, false);
	mkqp(1, 64, false);
	memset(count, 0, sizeof(count));
	memset(bad, 0, sizeof(bad));
	memset(sig, 0, sizeof(sig));
	memset(&re, 0, sizeof(re));
	for (step = 0; step < 3000; step++) {
		int r = rand_r(&seed) % 20;

		q = rand_r(&seed) % 2;
		if (r < 10 && id < 4000) {
			unsigned int fl = SVERBS_PRIO(rand_r(&seed) % 8);

			if (!marked)
				fl = 0;
			if (rand_r(&seed) % 2)
				fl |= IBV_SEND_SIGNALED;
			if (rand_r(&seed) % 9 == 0)
				fl |= IBV_SEND_FENCE;
			sig[id] = fl & IBV_SEND_SIGNALED;
			re.after_fail[id] = failed[q];
			if (!post(sqp[q], id | (uint64_t)q << 12,
				  rand_r(&seed) % 2 ? IBV_WR_RDMA_WRITE
						    : IBV_WR_SEND,
				  (uint64_t)(rand_r(&seed) % (5 * SL)), fl))
				id++;
		} else if (r < 19) {
			fk_complete(q, rand_r(&seed) % 4);
		} else if (!failed[q] && step > 1000 + 800 * q) {
			failed[q] = fk_fail_next(q, IBV_WC_RETRY_EXC_ERR) > 0;
		}
		n = poll_all(wc, 256);
		check_no_internal(wc, n);
		for (i = 0; i < n; i++) {
			count[wc[i].wr_id & 4095]++;
			bad[wc[i].wr_id & 4095] += wc[i].status != 0;
		}
		re_tally(wc, n);
		CU_ASSERT_FALSE(fk->cq_overflow);
	}
	for (q = 0; q < 2; q++) {
		n = drain(q, wc, 256);
		for (i = 0; i < n; i++) {
			count[wc[i].wr_id & 4095]++;
			bad[wc[i].wr_id & 4095] += wc[i].status != 0;
		}
		re_tally(wc, n);
		CU_ASSERT_EQUAL(sqp[q]->nfree, 64);
	}
	CU_ASSERT(failed[0] && failed[1]);
	/*
	 * Signaled WRs complete exactly once; unsignaled ones only if they
	 * failed (or flushed), then exactly once.
	 */
	for (i = 0; i < (int)id; i++) {
		if (sig[i])
			CU_ASSERT_EQUAL(count[i], 1);
		CU_ASSERT(count[i] <= 1);
		if (!sig[i] && count[i])
			CU_ASSERT_EQUAL(bad[i], 1);
	}
	re_check_flushed(id);
	teardown();
}

static void test_random_errors(void)
{
	random_errors(false, true);
	random_errors(true, true);
	random_errors(false, false);
	random_errors(true, false);
}

/* A poll whose first raw completions are all internal still returns. */
static void test_poll_skips_internal(void)
{
	struct ibv_wc wc[4];
	int i;

	cfg_default();
	cfg.window_slices = 1000;
	setup(256);
	mkqp(0, 256, false); /* an internal signal every 127 WQEs */
	for (i = 0; i < 254; i++)
		post(sqp[0], (uint64_t)i, IBV_WR_SEND, 8,
		     i == 253 ? IBV_SEND_SIGNALED : 0);
	fk_complete(0, -1);
	CU_ASSERT_EQUAL(fk->cq_n, 2);
	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 253);
	teardown();
}

/* One thread posts, one completes and polls: no deadlock, nothing lost. */
#define MT_WRS 20000
static _Atomic int mt_done;

static void *mt_poller(void *arg)
{
	struct ibv_wc wc[16];
	int n, i, *count = arg;

	while (atomic_load(&mt_done) < MT_WRS) {
		fk_complete(0, 3);
		n = sverbs_poll_cq(scq, 16, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_SUCCESS &&
			    wc[i].wr_id < MT_WRS)
				count[wc[i].wr_id]++;
			atomic_fetch_add(&mt_done, 1);
		}
		if (!(atomic_load(&mt_done) % 64))
			sverbs_req_notify_cq(scq, 0);
	}
	return NULL;
}

static void test_threads(void)
{
	static int count[MT_WRS];
	pthread_t th;
	int i;

	cfg_default();
	setup(1024);
	mkqp(0, 128, false);
	memset(count, 0, sizeof(count));
	atomic_store(&mt_done, 0);
	pthread_create(&th, NULL, mt_poller, count);
	for (i = 0; i < MT_WRS;) {
		if (!post(sqp[0], (uint64_t)i,
			  i % 3 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
			  i % 3 ? 64 : 3 * SL,
			  IBV_SEND_SIGNALED | SVERBS_PRIO(i % 8)))
			i++;
	}
	pthread_join(th, NULL);
	for (i = 0; i < MT_WRS; i++)
		CU_ASSERT_EQUAL(count[i], 1);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/* ------------------------------------------------------------ batching */

/* Post n WRs of 64 B, one per call, at level prio (-1: unmarked). */
static void post_each(int n, int prio, unsigned int extra)
{
	unsigned int flags = IBV_SEND_SIGNALED | extra;
	int i;

	if (prio >= 0)
		flags |= SVERBS_PRIO(prio);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(
			post(sqp[0], 100 + i, IBV_WR_RDMA_WRITE, 64, flags), 0);
}

/* batch = off: one doorbell per WQE even for a posted list. */
static void test_batch_off(void)
{
	struct ibv_sge sge = { .addr = LADDR, .length = 64, .lkey = 7 };
	struct ibv_send_wr wr[8] = {}, *bad = NULL;
	struct sverbs_qp_stats st;
	int i;

	cfg_default();
	cfg.batch = false;
	setup(64);
	mkqp(0, 16, false);
	for (i = 0; i < 8; i++) {
		wr[i].wr_id = i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 7 ? &wr[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 8);
	CU_ASSERT_EQUAL(fk->doorbells, 8);
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT_EQUAL(st.wrs, 8);
	CU_ASSERT_EQUAL(st.wqes, 8);
	CU_ASSERT_EQUAL(st.doorbells, 8);
	teardown();
}

/*
 * slice_always off (the default): a QP whose WRs share one level passes them
 * whole and unwindowed; the first WR at a second level (here by the size
 * policy) or with a stated priority starts slicing and the window, and what
 * was in flight by then does not count against the window.
 */
static void test_schedule_once_levels_mix(void)
{
	struct ibv_wc wc[64];
	int i;

	cfg_default();
	cfg.slice_always = false;
	cfg.small_msg_bytes = 256;
	setup(64);
	mkqp(0, 32, false);
	/* five unsignaled 6-slice WRITEs: whole, all in flight at once */
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(post(sqp[0], i, IBV_WR_RDMA_WRITE, 6 * SL, 0),
				0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 5);
	CU_ASSERT_EQUAL(fk->sq[0].out_bytes, 30 * SL);
	CU_ASSERT_FALSE(sqp[0]->scheduled);
	/* a small WR lifts to level 0: scheduling starts; it goes at once */
	CU_ASSERT_EQUAL(
		post(sqp[0], 10, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_TRUE(sqp[0]->scheduled);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 6);
	/* the next large WR is sliced and windowed (2 slices) */
	CU_ASSERT_EQUAL(
		post(sqp[0], 11, IBV_WR_RDMA_WRITE, 6 * SL, IBV_SEND_SIGNALED),
		0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 8);
	CU_ASSERT_EQUAL(fk->sq[0].w[6].bytes, SL);
	CU_ASSERT_EQUAL(drain(0, wc, 64), 2); /* 10 and 11 */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 12);
	teardown();

	/* a stated priority starts it too, on the first WR */
	cfg_default();
	cfg.slice_always = false;
	setup(64);
	mkqp(0, 32, false);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_RDMA_WRITE, 6 * SL,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(4)),
			0);
	CU_ASSERT_TRUE(sqp[0]->scheduled);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	CU_ASSERT_EQUAL(drain(0, wc, 64), 1);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 6);
	teardown();
}

/*
 * The lone-WR path: on a QP that does not schedule, a single WR posted to
 * an empty queue goes straight to the adapter; what reaches the hardware
 * and what the application sees are those of the queue's path.
 */
static void test_direct(void)
{
	struct ibv_sge sge[3] = { { LADDR, 100, 7 },
				  { LADDR + 4096, 0, 7 },
				  { LADDR + 8192, 28, 8 } };
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct ibv_wc wc[64];
	struct fk_wqe *w;
	int i, n;

	cfg_default();
	cfg.slice_always = false;
	setup(64);
	mkqp(0, 16, false);
	/* multi-SGE, signaled: one WQE, the app's SGEs, an internal wr_id */
	CU_ASSERT_EQUAL(post_sge(sqp[0], 1, IBV_WR_RDMA_WRITE, sge, 3,
				 IBV_SEND_SIGNALED | IBV_SEND_SOLICITED),
			0);
	CU_ASSERT_EQUAL(sqp[0]->queued, 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 1);
	w = fk_wqe(0, 0);
	CU_ASSERT(sv_qp_owns(sqp[0], w->wr.wr_id));
	CU_ASSERT_EQUAL(w->wr.num_sge, 3);
	CU_ASSERT_PTR_EQUAL(w->sg_in, sge); /* not a copy */
	CU_ASSERT(w->sge[2].addr == LADDR + 8192 && w->sge[2].lkey == 8);
	CU_ASSERT_EQUAL(w->wr.send_flags,
			IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
	CU_ASSERT_EQUAL(w->wr.wr.rdma.remote_addr, RADDR);
	/* inline: the provider copies the data at post time */
	memset(inline_buf, 0xcd, 40);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 40,
			     IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			0);
	memset(inline_buf, 0, 40);
	w = fk_wqe(0, 1);
	CU_ASSERT(w->inl[0] == 0xcd && w->inl[39] == 0xcd);
	n = drain(0, wc, 64);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 1 && wc[0].byte_len == 128 &&
		  wc[0].opcode == IBV_WC_RDMA_WRITE);
	CU_ASSERT(wc[1].wr_id == 2 && wc[1].byte_len == 40 &&
		  wc[1].opcode == IBV_WC_SEND);
	/* unsignaled ones: every depth / 2 = 7th WQE reports, unseen */
	for (i = 0; i < 14; i++)
		CU_ASSERT_EQUAL(post(sqp[0], 100 + i, IBV_WR_SEND, 8, 0), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 16);
	for (i = 0; i < 14; i++)
		CU_ASSERT_EQUAL(fk_wqe(0, 2 + i)->signaled, i % 7 == 6);
	CU_ASSERT_EQUAL(drain(0, wc, 64), 0);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	/* a list still leaves as one chain, one doorbell */
	n = fk->doorbells;
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 200 + i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->doorbells, n + 1);
	CU_ASSERT_EQUAL(drain(0, wc, 64), 3);
	/* refused by the provider: stock's error and bad_wr, nothing kept */
	fk->post_fail_at = fk->sq[0].posted + 1;
	wr[0].next = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[0]);
	CU_ASSERT(sqp[0]->queued == 0 && sqp[0]->nfree == 16);
	fk->post_fail_at = 0;
	CU_ASSERT_EQUAL(drain(0, wc, 64), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 300, IBV_WR_SEND, 8, IBV_SEND_SIGNALED),
			0);
	n = drain(0, wc, 64);
	CU_ASSERT(n == 1 && wc[0].wr_id == 300);
	CU_ASSERT_FALSE(sqp[0]->scheduled);
	/* sq_sig_all: every lone WR signaled, each completes once */
	mkqp(1, 8, true);
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(post(sqp[1], 400 + i, IBV_WR_SEND, 8, 0), 0);
	CU_ASSERT(fk_wqe(1, 0)->signaled && fk_wqe(1, 2)->signaled);
	n = drain(1, wc, 64);
	CU_ASSERT(n == 3 && wc[0].wr_id == 400 && wc[2].wr_id == 402);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/* ------------------------------------------------------------ pass-through */

static void pt_setup(int cap)
{
	cfg_default();
	cfg.slice_always = false;
	cfg.passthrough = true;
	setup(64);
	mkqp(0, cap, false);
}

/* A list of three WRITEs of sge, wr_ids 10..12; signaled: all, or the last. */
static void write_list3(struct ibv_send_wr *wr, struct ibv_sge *sge,
			bool all_signaled)
{
	int i;

	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 10 + i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = RADDR;
		wr[i].send_flags =
			all_signaled || i == 2 ? IBV_SEND_SIGNALED : 0;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
}

/*
 * Unmarked WRs on a QP in pass-through: the provider gets them as posted
 * (own wr_id, SGE array, signaling; one doorbell per call), refuses past
 * its depth itself, and the completions come back raw, without the CQ lock.
 */
static void test_pt_untouched(void)
{
	struct ibv_sge sge = { LADDR, 100, 7 };
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct sverbs_qp_stats st;
	struct ibv_wc wc[32];
	uint64_t mark;
	int i, n, db;

	pt_setup(16);
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	write_list3(wr, &sge, false);
	db = fk->doorbells;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->doorbells, db + 1);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 3);
	for (i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(fk_wqe(0, i)->wr.wr_id, (uint64_t)(10 + i));
		CU_ASSERT_PTR_EQUAL(fk_wqe(0, i)->sg_in, &sge);
		CU_ASSERT_EQUAL(fk_wqe(0, i)->signaled, i == 2);
	}
	/* unsignaled up to the depth: no internal signal; then ENOMEM */
	for (i = 0; i < 13; i++)
		CU_ASSERT_EQUAL(post(sqp[0], 100 + i, IBV_WR_SEND, 8, 0), 0);
	for (i = 3; i < 16; i++)
		CU_ASSERT_FALSE(fk_wqe(0, i)->signaled);
	wr[0].next = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[0]);
	/* the layer took and counted nothing: it has no slots yet (16.10) */
	CU_ASSERT_PTR_NULL(sqp[0]->slots);
	CU_ASSERT_EQUAL(sqp[0]->seq_next, SV_SEQ_BASE);
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT(st.flags & SVERBS_QP_STATS_PASSTHROUGH);
	CU_ASSERT(st.wrs == 0 && st.wqes == 0);
	mark = scq->poll_gen;
	fk_complete(0, -1);
	n = poll_all(wc, 32);
	CU_ASSERT(n == 1 && wc[0].wr_id == 12 &&
		  wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(scq->poll_gen, mark); /* the fast path: no poll round */
	db = fk->notify_calls;
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->notify_calls, db + 1);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * The first WR that states a priority ends pass-through mid-stream: while
 * pass-through's WQEs may be in flight, one WQE of the layer, signaled;
 * after its completion the layer's own rules; the QP never goes back.
 */
static void test_pt_leave(void)
{
	struct ibv_wc wc[32];
	struct fk_wqe *w;
	int i, n;

	pt_setup(16);
	for (i = 1; i <= 4; i++)
		CU_ASSERT_EQUAL(post(sqp[0], i, IBV_WR_SEND, 8,
				     i == 4 ? IBV_SEND_SIGNALED : 0),
				0);
	/* a 3-slice WRITE at level 1, unsignaled, then a signaled SEND */
	CU_ASSERT_EQUAL(
		post(sqp[0], 5, IBV_WR_RDMA_WRITE, 3 * SL, SVERBS_PRIO(1)), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 6, IBV_WR_SEND, 8,
			     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 1);
	CU_ASSERT_TRUE(sqp[0]->pt_inflight);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 5);
	w = fk_wqe(0, 4);
	CU_ASSERT(sv_qp_owns(sqp[0], w->wr.wr_id));
	CU_ASSERT(w->signaled && w->bytes == SL);
	CU_ASSERT_EQUAL(w->wr.send_flags & SVERBS_PRIO_MASK, 0);
	/* pass-through's WQEs complete: its completion as it was */
	fk_complete(0, 4);
	n = poll_all(wc, 32);
	CU_ASSERT(n == 1 && wc[0].wr_id == 4);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 5);
	/* the layer's first WQE completes: the tail is gone */
	fk_complete(0, 1);
	n = poll_all(wc, 32);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_FALSE(sqp[0]->pt_inflight);
	CU_ASSERT(fk->sq[0].posted > 5);
	n = drain(0, wc, 32);
	check_no_internal(wc, n);
	CU_ASSERT(n == 1 && wc[0].wr_id == 6 && wc[0].status == IBV_WC_SUCCESS);
	/* never back: an unmarked WR now takes the layer's path */
	CU_ASSERT_EQUAL(post(sqp[0], 7, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	CU_ASSERT(
		sv_qp_owns(sqp[0], fk_wqe(0, fk->sq[0].posted - 1)->wr.wr_id));
	n = drain(0, wc, 32);
	CU_ASSERT(n == 1 && wc[0].wr_id == 7);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * A provider that tests the CQ's state under its own CQ lock (mlx5's
 * poll_cq) is synced when a QP leaves pass-through: once, after the count
 * went up, before the layer's first WQE.  An extended CQ, never polled as
 * stock and maybe mid-poll (its lock held), is not.
 */
static int sync_layered, sync_posted;

static void sync_check(void)
{
	sync_layered = (int)sv_cq_nlayered(scq);
	sync_posted = fk->sq[0].posted;
}

static void test_pt_leave_sync(void)
{
	pt_setup(16);
	fk->sync_hook = sync_check;
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, 0), 0);
	CU_ASSERT_EQUAL(fk->sync_calls, 0);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 8,
			     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_EQUAL(fk->sync_calls, 1);
	CU_ASSERT_EQUAL(sync_layered, 1);
	CU_ASSERT_EQUAL(sync_posted, 1); /* the stock WQE, not the layer's */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	teardown();

	cfg_default();
	cfg.slice_always = false;
	cfg.passthrough = true;
	setup(64);
	fk_install_ex();
	CU_ASSERT_TRUE_FATAL(
		sverbs_cq_install_ex_ops(scq, &fk->cqx, IBV_WC_STANDARD_FLAGS));
	mkqp(0, 16, false);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 8,
			     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_EQUAL(fk->sync_calls, 0);
	teardown();
}

/*
 * Two threads post to one QP: one reads pass-through and goes to the
 * provider as stock while the other's priority WR makes the QP leave, so
 * the stock WRs land behind the layer's first WQE, unknown to its depth
 * and window.  Every completion still comes once, with its own wr_id: the
 * signaled stock WR's untouched (not of the QP's range), the layer's
 * translated, and the send queue the stock WRs took is waited for, not
 * overrun (the provider's full queue is retried after completions).
 */
static void test_pt_late_stock_post(void)
{
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 7 };
	struct ibv_wc wc[32];
	bool seen[300] = {};
	int i, n;

	pt_setup(8);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8,
			     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	/* the other thread's stock WRs, straight to the provider */
	for (i = 0; i < 4; i++) {
		wr.wr_id = 100 + i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = i == 3 ? IBV_SEND_SIGNALED : 0;
		CU_ASSERT_EQUAL(sqp[0]->ad->post_send(sqp[0]->qp, &wr, &bad),
				0);
	}
	/* the application's limit: max_send_wr (8) outstanding, 1 + 4 + 3 */
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(post(sqp[0], 200 + i, IBV_WR_SEND, 8,
				     IBV_SEND_SIGNALED),
				0);
	n = drain(0, wc, 32);
	CU_ASSERT_EQUAL(n, 5);
	check_no_internal(wc, n);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		CU_ASSERT_FATAL(wc[i].wr_id < 300);
		CU_ASSERT_FALSE(seen[wc[i].wr_id]);
		seen[wc[i].wr_id] = true;
	}
	CU_ASSERT_TRUE(seen[1] && seen[103]);
	for (i = 0; i < 3; i++)
		CU_ASSERT_TRUE(seen[200 + i]);
	teardown();
}

/*
 * A budgeted (watched) QP's CQ with one CQE of headroom: its QPs cannot
 * leave pass-through and stay stock (mkqp() next).
 */
static void watch_stock_setup(void)
{
	cfg_default();
	cfg.slice_always = false;
	cfg.passthrough = true;
	cfg.batch_budget_us = 10 * 1000 * 1000;
	cfg.cq_headroom = 1;
	setup(64);
}

/*
 * The words the provider's own post_send and poll_cq test are its own
 * fields once the glue gave them (sverbs_qp_use_layered_byte(),
 * sverbs_cq_use_state_word()): they take the current value and follow
 * every change after, the QP's byte with pt, the CQ's word with the count
 * and bits.
 */
static void test_pt_provider_words(void)
{
	atomic_uchar byte;
	atomic_uint word;
	struct ibv_wc wc[8];

	pt_setup(16);
	atomic_init(&byte, 0);
	atomic_init(&word, 0);
	sverbs_cq_use_state_word(scq, &word);
	sverbs_qp_use_layered_byte(sqp[0], &byte);
	CU_ASSERT_EQUAL(atomic_load(&byte), 0);
	CU_ASSERT_EQUAL(atomic_load(&word), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, 0), 0);
	CU_ASSERT_EQUAL(atomic_load(&byte), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 8,
			     SVERBS_PRIO(3) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_EQUAL(atomic_load(&byte), 1);
	CU_ASSERT_EQUAL(atomic_load(&word) & SVERBS_CQ_LAYERED, 1);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 1);
	teardown();

	/* a watched QP starts layered; one that stays stock posts as stock */
	watch_stock_setup();
	atomic_init(&word, 0);
	sverbs_cq_use_state_word(scq, &word);
	mkqp(0, 8, false);
	atomic_init(&byte, 0);
	sverbs_qp_use_layered_byte(sqp[0], &byte);
	CU_ASSERT_EQUAL(atomic_load(&byte), 1);
	post_each(3, -1, 0);
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.stock));
	CU_ASSERT_EQUAL(atomic_load(&byte), 0);
	CU_ASSERT_EQUAL(atomic_load(&word) & SVERBS_CQ_LAYERED, 0);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 3);
	teardown();
}

/*
 * The WR that ends pass-through is refused at post time (EINVAL): the QP
 * has left pass-through all the same, and the next unmarked lone WR takes
 * the queue under the tail rule (alone, signaled), not the lone-WR path.
 */
static void test_pt_leave_refused(void)
{
	struct ibv_sge sge[8] = {};
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct ibv_wc wc[8];
	int n;

	pt_setup(16);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, 0), 0);
	wr.wr_id = 2;
	wr.sg_list = sge;
	wr.num_sge = 8; /* max_send_sge is 4 */
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = SVERBS_PRIO(1) | IBV_SEND_SIGNALED;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_FALSE(sqp[0]->scheduled);
	CU_ASSERT_EQUAL(post(sqp[0], 3, IBV_WR_SEND, 8, 0), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 4, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 2);
	CU_ASSERT(sv_qp_owns(sqp[0], fk_wqe(0, 1)->wr.wr_id));
	CU_ASSERT(fk_wqe(0, 1)->signaled); /* WR 3: the tail rule's signal */
	CU_ASSERT_EQUAL(sqp[0]->queued, 1);
	n = drain(0, wc, 8);
	check_no_internal(wc, n);
	CU_ASSERT(n == 1 && wc[0].wr_id == 4);
	teardown();
}

/*
 * An application past its max_send_wr in pass-through, then a marked WR:
 * the provider's send queue is full and nothing of the layer's is in
 * flight to pump it later, so the post fails at once with the provider's
 * error and bad_wr, as stock (issue 16.2); once room is back it goes.
 */
static void test_pt_leave_sq_full(void)
{
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 7 };
	struct ibv_wc wc[32];
	int i, n;

	pt_setup(8);
	for (i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(post(sqp[0], i, IBV_WR_SEND, 8, 0), 0);
	wr.wr_id = 8;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = SVERBS_PRIO(2) | IBV_SEND_SIGNALED;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr, &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 8);
	CU_ASSERT(sqp[0]->queued == 0 && sqp[0]->nfree == 8);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	fk_complete(0, 8); /* unsignaled: no completion to see */
	CU_ASSERT_EQUAL(poll_all(wc, 32), 0);
	wr.wr_id = 9;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], &wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 9);
	n = drain(0, wc, 32);
	CU_ASSERT(n == 1 && wc[0].wr_id == 9);
	teardown();
}

static void pt_race_hook(void)
{
	/* a marked WR ends pass-through and its WQE completes at once */
	CU_ASSERT_EQUAL(post(sqp[0], 21, IBV_WR_SEND, 8,
			     SVERBS_PRIO(1) | IBV_SEND_SIGNALED),
			0);
	fk_complete(0, -1);
}

/*
 * A QP leaves pass-through between the fast path's check and its raw poll:
 * the internal completion that poll returns is translated all the same.
 */
static void test_pt_fast_poll_race(void)
{
	struct ibv_wc wc[16];
	int n;

	pt_setup(16);
	CU_ASSERT_EQUAL(post(sqp[0], 20, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	fk->poll_hook = pt_race_hook;
	n = sverbs_poll_cq(scq, 16, wc);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	check_no_internal(wc, n);
	CU_ASSERT(wc[0].wr_id == 20 && wc[1].wr_id == 21);
	CU_ASSERT(wc[1].opcode == IBV_WC_SEND && wc[1].byte_len == 8);
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 1);
	teardown();
}

/*
 * Which QPs start in pass-through, what each counts in layered, and the
 * destroy of a pass-through QP leaving nothing for the slow path.
 */
static void test_pt_config(void)
{
	struct ibv_qp_init_attr_ex a = {};

	pt_setup(8);
	cfg.slice_always = true;
	mkqp(1, 8, false);
	cfg.slice_always = false;
	cfg.small_msg_bytes = 256;
	mkqp(2, 8, false);
	cfg.small_msg_bytes = 0;
	cfg.passthrough = false;
	mkqp(3, 8, false);
	cfg.passthrough = true;
	a.cap.max_send_wr = 8;
	a.cap.max_send_sge = 1;
	a.qp_type = IBV_QPT_RC;
	a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND;
	sqp[4] = sverbs_qp_create(&fk_adapter, fk_qp(4, IBV_QPT_RC, 8, false),
				  scq, &a, &cfg);
	mkqp(5, 8, false);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sqp[4]);
	CU_ASSERT(atomic_load(&sqp[0]->fast.pt) &&
		  atomic_load(&sqp[5]->fast.pt));
	CU_ASSERT(!atomic_load(&sqp[1]->fast.pt) &&
		  !atomic_load(&sqp[2]->fast.pt) &&
		  !atomic_load(&sqp[3]->fast.pt));
	CU_ASSERT(atomic_load(&sqp[4]->fast.pt)); /* ibv_wr_* too */
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 3);
	/* destroying a pass-through QP leaves no grave, no backlog */
	CU_ASSERT_EQUAL(post(sqp[5], 1, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	sverbs_qp_destroy_pre(sqp[5]);
	sverbs_qp_destroy_post(sqp[5], 0);
	sqp[5] = NULL;
	CU_ASSERT_EQUAL(scq->nstale, 0);
	CU_ASSERT_FALSE(sv_cq_backlog(scq));
	/* destroying the others brings the CQ back to the fast path */
	sverbs_qp_destroy_pre(sqp[1]);
	sverbs_qp_destroy_post(sqp[1], 0);
	sqp[1] = NULL;
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 2);
	teardown();
}

static struct ibv_qp_ex pt_qx[2];

static void pt_wr_send(struct ibv_qp_ex *qx, uint64_t id, unsigned int flags)
{
	qx->wr_id = id;
	qx->wr_flags = flags;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 3, LADDR, 8);
}

/*
 * ibv_wr_* on a QP in pass-through: a batch is the provider's own (its
 * ops, the application's wr_ids); a WR stating a priority goes without
 * the bits, and its batch ends pass-through when it completes; a second
 * batch a thread opens meanwhile (another QP) takes the layer's path.
 */
static void test_pt_wr_api(void)
{
	struct ibv_qp_ex *qx = &pt_qx[0], *qy = &pt_qx[1];
	struct ibv_wc wc[16];
	int n;

	pt_setup(16);
	mkqp(1, 16, false);
	fk_wr_install(qx, 0);
	fk_wr_install(qy, 1);
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	CU_ASSERT_TRUE_FATAL(
		sverbs_qp_install_wr_ops(sqp[1], qy, IBV_QP_EX_WITH_SEND));
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.pt));
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = 0;
	ibv_wr_rdma_write(qx, 5, RADDR);
	ibv_wr_set_sge(qx, 3, LADDR, 100);
	pt_wr_send(qx, 2, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 2);
	CU_ASSERT(fk_wqe(0, 0)->wr.wr_id == 1 && !fk_wqe(0, 0)->signaled);
	CU_ASSERT(fk_wqe(0, 0)->wr.opcode == IBV_WR_RDMA_WRITE &&
		  fk_wqe(0, 0)->bytes == 100);
	CU_ASSERT(fk_wqe(0, 1)->wr.wr_id == 2 && fk_wqe(0, 1)->signaled);
	CU_ASSERT_PTR_NULL(sqp[0]->slots);
	/* abort: nothing */
	ibv_wr_start(qx);
	pt_wr_send(qx, 9, IBV_SEND_SIGNALED);
	ibv_wr_abort(qx);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	n = drain(0, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 2);
	/* a second batch opened meanwhile on another QP: the layer's */
	ibv_wr_start(qx);
	pt_wr_send(qx, 3, IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	CU_ASSERT_EQUAL(qx->wr_flags, IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	ibv_wr_start(qy);
	pt_wr_send(qy, 30, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qy), 0);
	CU_ASSERT_FALSE(atomic_load(&sqp[1]->fast.pt));
	CU_ASSERT(fk->sq[1].posted == 1 &&
		  sv_qp_owns(sqp[1], fk_wqe(1, 0)->wr.wr_id));
	/* the batch with the stated priority: no bits, then no pass-through */
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 3);
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->wr.wr_id, 3);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	/* from now on the layer's batches: internal wr_ids */
	ibv_wr_start(qx);
	pt_wr_send(qx, 4, IBV_SEND_SIGNALED | SVERBS_PRIO(2));
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 4);
	CU_ASSERT(sv_qp_owns(sqp[0], fk_wqe(0, 3)->wr.wr_id));
	n = drain(0, wc, 16);
	check_no_internal(wc, n);
	CU_ASSERT(n == 2 && wc[0].wr_id == 3 && wc[1].wr_id == 4);
	n = drain(1, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 30);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * Thread A's pass-through wr_* batch on QP 0 holds the provider's send
 * queue (the fake's post hook spins while it is open, as mlx5's and rxe's
 * post_send wait for that lock); thread B's priority post takes QP 0 out
 * of pass-through.  A polls inside its batch (allowed): a completion of
 * QP 0 is in the CQ.  Red: B's pump waited in the provider with QP 0's lock
 * held, and A's poll, translating QP 0's completion, waited for that lock
 * (alarm() ends it).  Now B waits for the batch's end holding nothing.
 */
static _Atomic int sq_hook_in, leave_posted;

static void sq_held_hook(void)
{
	atomic_store(&sq_hook_in, 1);
	while (*(volatile bool *)&fk->sq[0].batch_open)
		sched_yield();
}

static void *leave_poster(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(post(sqp[0], 20, IBV_WR_SEND, 8,
			     IBV_SEND_SIGNALED | SVERBS_PRIO(2)),
			0);
	atomic_store(&leave_posted, 1);
	return NULL;
}

static void test_pt_batch_meets_leave(void)
{
	struct ibv_qp_ex *qx = &pt_qx[0];
	struct ibv_wc wc[8];
	pthread_t t;
	int n;

	pt_setup(16);
	fk_wr_install(qx, 0);
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	/* WR 1's completion waits in the CQ */
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	fk_complete(0, -1);
	atomic_store(&sq_hook_in, 0);
	atomic_store(&leave_posted, 0);
	alarm(20);
	ibv_wr_start(qx);
	pt_wr_send(qx, 2, IBV_SEND_SIGNALED);
	fk->post_hook = sq_held_hook;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, leave_poster, NULL), 0);
	/* B is in the provider's post, or waits for the batch */
	while (!atomic_load(&sq_hook_in) && !atomic_load(&sqp[0]->pt_leaving))
		sched_yield();
	usleep(10 * 1000);
	n = sverbs_poll_cq(scq, 8, wc);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1);
	CU_ASSERT_FALSE(atomic_load(&leave_posted));
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	pthread_join(t, NULL);
	alarm(0);
	fk->post_hook = NULL;
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	/* the batch's WR, then B's, each once */
	n = drain(0, wc, 8);
	CU_ASSERT(n == 2 && wc[0].wr_id == 2 && wc[1].wr_id == 20);
	teardown();
}

/*
 * Randomized: QP 1 stays in pass-through; QP 0 leaves it mid-stream, with
 * its pass-through WQEs in flight.  Every signaled WR completes exactly
 * once with its own wr_id, no unsignaled one does, no internal one leaks.
 */
static void test_pt_random(void)
{
	static int count[4096];
	static bool sig[4096];
	struct ibv_wc wc[256];
	unsigned int seed = 4242;
	uint64_t id = 0;
	int i, n, step, q;

	pt_setup(32);
	mkqp(1, 32, false);
	memset(count, 0, sizeof(count));
	memset(sig, 0, sizeof(sig));
	for (step = 0; step < 3000; step++) {
		int r = rand_r(&seed) % 10;

		q = rand_r(&seed) % 2;
		if (r < 5 && id < 4000) {
			unsigned int fl = 0;

			if (q == 0 && step > 1000)
				fl = SVERBS_PRIO(rand_r(&seed) % 8);
			if (rand_r(&seed) % 3 == 0)
				fl |= IBV_SEND_SIGNALED;
			sig[id] = fl & IBV_SEND_SIGNALED;
			if (!post(sqp[q], id,
				  rand_r(&seed) % 2 ? IBV_WR_RDMA_WRITE
						    : IBV_WR_SEND,
				  (uint64_t)(rand_r(&seed) % (4 * SL)), fl))
				id++;
		} else if (r < 9) {
			fk_complete(q, rand_r(&seed) % 4);
		}
		poll_tally(count);
		if (sqp[0]->queued && !sqp[0]->pt_inflight)
			CU_ASSERT(sqp[0]->inflight_sig > 0 || sqp[0]->hr_wait);
	}
	for (q = 0; q < 2; q++) {
		n = drain(q, wc, 256);
		for (i = 0; i < n; i++)
			count[wc[i].wr_id & 4095]++;
	}
	for (i = 0; i < (int)id; i++)
		CU_ASSERT_EQUAL(count[i], sig[i] ? 1 : 0);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	CU_ASSERT_TRUE(atomic_load(&sqp[1]->fast.pt));
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	CU_ASSERT_FALSE(fk->cq_overflow);
	teardown();
}

/* A budget far above the test's duration: only triggers ring. */
static void budget_setup_qp(uint32_t budget_us, uint32_t small_msg,
			    unsigned int default_prio, bool watched)
{
	cfg_default();
	cfg.batch_budget_us = budget_us;
	cfg.small_msg_bytes = small_msg;
	cfg.default_prio = default_prio;
	if (watched) {
		cfg.slice_always = false;
		cfg.passthrough = true;
	}
	setup(64);
	mkqp(0, 32, false);
}

static void budget_setup_levels(uint32_t budget_us, uint32_t small_msg,
				unsigned int default_prio)
{
	budget_setup_qp(budget_us, small_msg, default_prio, false);
}

static void budget_setup(uint32_t budget_us)
{
	budget_setup_levels(budget_us, 0, 4);
}

/*
 * A fork while a QP holds WRs: the child has no timer thread, and its next
 * post joins the same hold (no new deadline is armed).  The child's timer
 * must still ring them by the deadline, with no poll or arm from it.
 */
static int posted_locked(int i)
{
	int n;

	pthread_spin_lock(&sqp[i]->lock);
	n = fk->sq[i].posted;
	pthread_spin_unlock(&sqp[i]->lock);
	return n;
}

/*
 * A provider that takes no locks (mlx5 with MLX5_SINGLE_THREADED, its CQ
 * lockless): the budget's timer thread would post beside the application's
 * only thread.  Such a QP never holds and gets no timer.
 */
static void test_budget_off_when_lockless(void)
{
	cfg_default();
	cfg.batch_budget_us = 10 * 1000 * 1000;
	setup(64);
	fk->cq_lockless = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 32, false));
	CU_ASSERT_FALSE(sqp[0]->timer_on);
	post_each(10, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 10);
	CU_ASSERT_FALSE(sqp[0]->held);
	teardown();
}

/*
 * A QP whose send queue the provider posts to without a lock (mlx5: a QP
 * of a thread domain, whose doorbell register its other QPs share, also
 * unlocked), on a CQ that has one: the application promised one thread for
 * the domain; the timer thread would ring that register beside it.  No
 * budget for it; a QP with a lock on the same CQ keeps its own.
 */
static void test_budget_off_when_qp_lockless(void)
{
	cfg_default();
	cfg.batch_budget_us = 10 * 1000 * 1000;
	setup(64);
	fk->qp_lockless = true;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(0, 32, false));
	fk->qp_lockless = false;
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(1, 32, false));
	CU_ASSERT_EQUAL(sqp[0]->cfg.batch_budget_us, 0);
	CU_ASSERT_FALSE(sqp[0]->timer_on);
	CU_ASSERT_TRUE(sqp[1]->timer_on);
	post_each(10, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 10);
	CU_ASSERT_FALSE(sqp[0]->held);
	teardown();
}

static atomic_int warm_fired;

static void warm_fire(void *arg)
{
	(void)arg;
	atomic_store(&warm_fired, 1);
}

static void test_budget_hold_across_fork(void)
{
	struct sverbs_timer_entry warm;
	int i, status = -1;
	pid_t pid;

	budget_setup(500 * 1000);
	/*
	 * The timer thread past its start-up before the fork (one fire):
	 * GCC 12's ASan does not lock its allocator across fork() (see
	 * batch/tests/test_batch.c, 16.9).
	 */
	atomic_store(&warm_fired, 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&warm, warm_fire, NULL, 0), 0);
	sverbs_timer_arm(&warm, sverbs_now_ns() + 1000);
	for (i = 0; i < 5000 && !atomic_load(&warm_fired); i++)
		usleep(1000);
	sverbs_timer_del(&warm);
	post_each(2, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1);
	CU_ASSERT_TRUE_FATAL(sqp[0]->held);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		alarm(20);
		post(sqp[0], 200, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
		/* liveness, not speed: the deadline is 0.5 s, wait up to 10 */
		for (i = 0; i < 10000 && posted_locked(0) < 3; i++)
			usleep(1000);
		_exit(posted_locked(0) == 3 ? 0 : 1);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	teardown();
}

/* Under load, WRs posted one per call leave in one chain; poll rings. */
static void test_budget_holds_until_poll(void)
{
	struct sverbs_qp_stats st;
	struct ibv_wc wc[16];
	int i;

	budget_setup(10 * 1000 * 1000);
	post_each(10, -1, 0);
	/* the first goes at once (no rate known yet), the rest are held */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1);
	CU_ASSERT_EQUAL(fk->doorbells, 1);
	CU_ASSERT_EQUAL(sqp[0]->queued, 9);
	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 16, wc), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 10);
	CU_ASSERT_EQUAL(fk->doorbells, 2); /* nine WQEs, one doorbell */
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT_EQUAL(st.wrs, 10);
	CU_ASSERT_EQUAL(st.wqes, 10);
	CU_ASSERT_EQUAL(st.doorbells, 2);
	CU_ASSERT_EQUAL(st.held_wrs, 9);
	CU_ASSERT_EQUAL(st.batch_budget_ns, 10ull * 1000 * 1000 * 1000);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 10);
	/* the held batch went out in post order: one QP completes in order */
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + i);
	/* nothing in flight: the next WR rings at once, the one after waits */
	post_each(2, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 11);
	CU_ASSERT_EQUAL(fk->doorbells, 3);
	CU_ASSERT_EQUAL(sqp[0]->queued, 1);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 2);
	CU_ASSERT(wc[0].wr_id == 100 && wc[1].wr_id == 101);
	teardown();
}

/* ------------------------------------- a budget's watched pass-through */

/* A budgeted QP with pass-through on: it starts watched (sched/watch.c). */
static void watch_setup(uint32_t budget_us)
{
	budget_setup_qp(budget_us, 0, 4, true);
}

/*
 * A program that waits for each completion before it posts again (post one,
 * poll it) forms no batch: its QP stays in pass-through, stock — its own
 * wr_ids, no slot, one doorbell per post — whatever the budget.  The budget
 * is 10 s, so every gap is short enough to batch: only "a completion was
 * taken since the previous post" keeps the QP there.
 */
static void test_watch_closed_loop(void)
{
	struct ibv_wc wc[4];
	int i;

	watch_setup(10 * 1000 * 1000);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_WATCH);
	for (i = 0; i < 40; i++) {
		CU_ASSERT_EQUAL(post(sqp[0], 100 + i, IBV_WR_RDMA_WRITE, 64,
				     IBV_SEND_SIGNALED),
				0);
		CU_ASSERT_EQUAL_FATAL(drain(0, wc, 4), 1);
		CU_ASSERT_EQUAL(wc[0].wr_id, 100 + (uint64_t)i);
	}
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_WATCH);
	CU_ASSERT_PTR_NULL(sqp[0]->slots);
	/* no timer entry either (its thread would make the process dearer) */
	CU_ASSERT_FALSE(sqp[0]->timer_on);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 40);
	CU_ASSERT_EQUAL(fk->doorbells, 40);
	for (i = 0; i < 40; i++)
		CU_ASSERT_EQUAL(fk_wqe(0, i)->wr.wr_id, 100 + (uint64_t)i);
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	teardown();
}

/*
 * Posts that run ahead of their completions would batch: the second post
 * (the first gap) leaves pass-through, and from there the queue holds what
 * comes until a poll.  Every WR completes once, in order, with its own
 * wr_id, the first one stock, the rest through the layer.
 */
static void test_watch_leaves(void)
{
	struct sverbs_qp_stats st;
	struct ibv_wc wc[16];
	int i;

	watch_setup(10 * 1000 * 1000);
	CU_ASSERT_EQUAL(
		post(sqp[0], 100, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_WATCH);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->wr.wr_id, 100);
	for (i = 1; i < 10; i++)
		CU_ASSERT_EQUAL(post(sqp[0], 100 + (uint64_t)i,
				     IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED),
				0);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_OFF);
	CU_ASSERT_PTR_NOT_NULL(sqp[0]->slots);
	CU_ASSERT_TRUE(sqp[0]->timer_on);
	/* the post that left went at once (nothing of the layer's in flight) */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	CU_ASSERT(sv_qp_owns(sqp[0], fk_wqe(0, 1)->wr.wr_id));
	CU_ASSERT_EQUAL(sqp[0]->queued, 8);
	CU_ASSERT_TRUE(sqp[0]->held);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 10);
	for (i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + (uint64_t)i);
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT_EQUAL(st.held_wrs, 8);
	CU_ASSERT_EQUAL(fk->doorbells, 3); /* 1, 1, then 8 at the poll */
	teardown();
}

/*
 * An adapter that cannot say whether completions were taken: the gap alone
 * decides, so even a closed loop leaves once its posts come within half the
 * budget.  An ibv_wr_* batch is one post: the second leaves.
 */
static void test_watch_no_count(void)
{
	static struct sverbs_adapter ad;
	struct ibv_qp_init_attr_ex a = {};
	struct ibv_qp_ex *qx = &pt_qx[0];
	struct ibv_wc wc[4];

	watch_setup(10 * 1000 * 1000);
	ad = fk_adapter;
	ad.cq_consumed = NULL;
	a.cap.max_send_wr = 8;
	a.cap.max_send_sge = 1;
	a.qp_type = IBV_QPT_RC;
	a.send_cq = fk_cq();
	sqp[1] = sverbs_qp_create(&ad, fk_qp(1, IBV_QPT_RC, 8, false), scq, &a,
				  &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sqp[1]);
	fk_wr_install(qx, 1);
	CU_ASSERT_TRUE_FATAL(
		sverbs_qp_install_wr_ops(sqp[1], qx, IBV_QP_EX_WITH_SEND));
	ibv_wr_start(qx);
	pt_wr_send(qx, 1, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_EQUAL(drain(1, wc, 4), 1);
	CU_ASSERT_EQUAL(atomic_load(&sqp[1]->fast.pt), SVERBS_PT_WATCH);
	ibv_wr_start(qx);
	pt_wr_send(qx, 2, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	/* the batch went stock; the QP takes the queue after it */
	CU_ASSERT_EQUAL(fk_wqe(1, 1)->wr.wr_id, 2);
	CU_ASSERT_EQUAL(atomic_load(&sqp[1]->fast.pt), SVERBS_PT_OFF);
	CU_ASSERT_EQUAL(drain(1, wc, 4), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 2);
	ibv_wr_start(qx);
	pt_wr_send(qx, 3, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT(sv_qp_owns(sqp[1], fk_wqe(1, 2)->wr.wr_id));
	CU_ASSERT_EQUAL(drain(1, wc, 4), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 3);
	teardown();
}

/*
 * A watched QP whose CQ has no headroom for it stays stock when it would
 * leave, and watches no more: plain pass-through from then on.
 */
static void test_watch_stays_stock(void)
{
	struct ibv_wc wc[16];

	watch_stock_setup();
	mkqp(0, 8, false);
	post_each(3, -1, 0);
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.stock));
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_ON);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 3);
	CU_ASSERT_EQUAL(fk_wqe(0, 2)->wr.wr_id, 102);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 3);
	teardown();
}

/*
 * A poster that has taken every slot of its QP must wait for a completion
 * before it can post again (a closed loop at its send queue's depth, as
 * perftest's bandwidth tests): its last WR rings at once with everything
 * held, without a poll and without the budget's timer.
 */
static void test_budget_no_hold_when_full(void)
{
	struct ibv_wc wc[32];

	budget_setup(10 * 1000 * 1000);
	post_each(31, -1, 0);
	/* the first goes at once, the rest wait: the poster could post more */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1);
	CU_ASSERT_EQUAL(sqp[0]->queued, 30);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 1);
	post_each(1, -1, 0);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 0);
	/* all it may have in flight: the QP's depth is max_send_wr - 1 */
	CU_ASSERT_EQUAL(fk->sq[0].posted, 31);
	CU_ASSERT_EQUAL(fk->doorbells, 2);
	CU_ASSERT_FALSE(sqp[0]->held);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 32);
	teardown();
}

/* Level 0 is never held; neither is a fence, and arm flushes. */
static void test_budget_urgent_and_triggers(void)
{
	struct ibv_wc wc[32];

	budget_setup(10 * 1000 * 1000);
	post_each(6, SVERBS_PRIO_HIGHEST, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 6);
	CU_ASSERT_EQUAL(fk->doorbells, 6);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 6);

	/* held low-priority WRs, then arming the CQ sends them */
	post_each(5, 7, 0);
	CU_ASSERT(fk->sq[0].posted < 11);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 11);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 5);

	/* held WRs, then a fenced WR: the held ones go, the fence waits */
	post_each(3, 7, 0);
	CU_ASSERT(fk->sq[0].posted < 14);
	post_each(1, 7, IBV_SEND_FENCE);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 14);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 4);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 15);
	teardown();
}

/*
 * The size policy lifts small unmarked WRs to level 0 for scheduling, but
 * batching holds them at their base level; a stated SVERBS_PRIO(0) and a
 * default level of 0 are never held.
 */
static void test_budget_size_policy_holdable(void)
{
	struct ibv_wc wc[32];

	budget_setup_levels(10 * 1000 * 1000, 4096, 4);
	post_each(8, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1);
	CU_ASSERT_EQUAL(sqp[0]->queued, 7);
	CU_ASSERT_EQUAL(sqp[0]->level[SVERBS_PRIO_HIGHEST].head != SV_NONE,
			true);
	/* a stated level 0 rings at once, taking the held ones along */
	post_each(1, SVERBS_PRIO_HIGHEST, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 9);
	CU_ASSERT_EQUAL(fk->doorbells, 2);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 9);
	teardown();

	budget_setup_levels(10 * 1000 * 1000, 0, 0);
	post_each(4, -1, 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 4);
	CU_ASSERT_EQUAL(fk->doorbells, 4);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 4);
	teardown();
}

/* ------------------------------------------ deferred doorbells (watch.c) */

/*
 * A watched QP on an adapter that splits post and doorbell (fk_adapter_defer:
 * rxe's post_send_nodb and ring).  Budget 10 s unless given: only the batch
 * target and the triggers ring.
 */
static void defer_setup(uint32_t budget_us)
{
	test_ad = &fk_adapter_defer;
	watch_setup(budget_us);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_WATCH);
}

/* n signaled 64 B WRITEs, wr_ids first.. */
static void post_ids(int i, uint64_t first, int n, unsigned int flags)
{
	int k;

	for (k = 0; k < n; k++)
		CU_ASSERT_EQUAL(post(sqp[i], first + (uint64_t)k,
				     IBV_WR_RDMA_WRITE, 64,
				     IBV_SEND_SIGNALED | flags),
				0);
}

/*
 * Four signaled WRITEs on a watched QP (budget 10 s): the first goes stock
 * (no gap yet), the other three wait for their doorbell, wr_ids 100..103.
 */
static void defer_four(void)
{
	defer_setup(10 * 1000 * 1000);
	post_ids(0, 100, 4, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 3);
}

/* Who rang QP i's deferred WQEs: doorbells, and the WQEs they sent. */
static uint64_t rung_by(int i, enum sv_ring_why why)
{
	return atomic_load(&sqp[i]->watch.rings[why]);
}

static uint64_t rung_wqes_by(int i, enum sv_ring_why why)
{
	return atomic_load(&sqp[i]->watch.rung_wqes[why]);
}

/* QP i's completions: n, successful, wr_ids first.. in order. */
static void drain_in_order(int i, uint64_t first, int n)
{
	struct ibv_wc wc[32];
	int k;

	CU_ASSERT_EQUAL_FATAL(drain(i, wc, 32), n);
	for (k = 0; k < n; k++) {
		CU_ASSERT_EQUAL(wc[k].wr_id, first + (uint64_t)k);
		CU_ASSERT_EQUAL(wc[k].status, IBV_WC_SUCCESS);
	}
}

/* Liveness, not speed: up to 5 s for the budget's timer to ring QP i. */
static void wait_rung(int i)
{
	int k;

	for (k = 0; k < 5000 && fk_unrung(i); k++)
		usleep(1000);
	CU_ASSERT_EQUAL(fk_unrung(i), 0);
}

/*
 * Posts that run ahead of their completions batch without the queue: the
 * WQEs are the provider's, with the application's own wr_ids, written at
 * once; one doorbell for each batch target (half the 32-deep queue here),
 * the rest waiting for a trigger.  The QP stays in pass-through, and a
 * poll of its CQ rings the rest before it polls (the poster may be
 * waiting for one of them); the next post of a poster that took a
 * completion goes stock, with its own doorbell.
 */
static void test_defer_batches(void)
{
	struct sverbs_qp_stats st;
	struct ibv_wc wc[32];
	int i, n;

	defer_setup(10 * 1000 * 1000);
	post_ids(0, 100, 21, 0);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_WATCH);
	CU_ASSERT_PTR_NULL(sqp[0]->slots);
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 21);
	for (i = 0; i < 21; i++)
		CU_ASSERT_EQUAL(fk_wqe(0, i)->wr.wr_id, 100 + (uint64_t)i);
	/* the first post went stock (no gap yet); 16 deferred rang once */
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(fk->doorbells, 2);
	CU_ASSERT_EQUAL(fk_unrung(0), 4);
	CU_ASSERT_EQUAL(fk_wqe(0, 16)->doorbell, 2);
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT(st.flags & SVERBS_QP_STATS_DEFERRED);
	CU_ASSERT(st.flags & SVERBS_QP_STATS_PASSTHROUGH);
	CU_ASSERT_EQUAL(st.wqes, 20);
	CU_ASSERT_EQUAL(st.doorbells, 1);
	/* who rang, and how many WQEs: the post that reached the target */
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_TARGET), 1);
	CU_ASSERT_EQUAL(rung_wqes_by(0, SV_RING_TARGET), 16);
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_POLL), 0);
	/* what was rung completes, stock; the 4 deferred do not run */
	CU_ASSERT_EQUAL(fk_complete(0, -1), 17);
	CU_ASSERT(atomic_load(scq->fast.state) & SVERBS_CQ_DEFER);
	n = poll_all(wc, 32);
	CU_ASSERT_EQUAL(n, 17);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + (uint64_t)i);
	/* the poll rang them first */
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 2);
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_POLL), 1);
	CU_ASSERT_EQUAL(rung_wqes_by(0, SV_RING_POLL), 4);
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_TARGET), 1);
	sverbs_qp_get_stats(sqp[0], &st);
	CU_ASSERT_EQUAL(st.doorbells, 2);
	CU_ASSERT_FALSE(atomic_load(scq->fast.state) & SVERBS_CQ_DEFER);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.deferred), 0);
	/* it took completions: its next post goes stock */
	post_ids(0, 121, 1, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 2);
	CU_ASSERT_EQUAL(fk->doorbells, 4);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 5);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 117 + (uint64_t)i);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * An arm of the CQ rings what was deferred (a program about to sleep on
 * its completion channel), as a poll does.
 */
static void test_defer_arm(void)
{
	struct ibv_wc wc[8];

	defer_four();
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 1);
	/* an arm counts as the poll's trigger */
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_POLL), 1);
	CU_ASSERT_EQUAL(rung_wqes_by(0, SV_RING_POLL), 3);
	CU_ASSERT_EQUAL(fk->notify_calls, 1);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 4);
	teardown();
}

/*
 * A poster that stops, and neither polls nor arms: the budget's timer
 * rings what it deferred.
 */
static void test_defer_timer(void)
{
	defer_setup(2000);
	post_ids(0, 100, 4, 0);
	CU_ASSERT_TRUE(sqp[0]->timer_on);
	wait_rung(0);
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_TIMER), 1);
	CU_ASSERT_EQUAL(rung_wqes_by(0, SV_RING_TIMER), 3);
	CU_ASSERT_EQUAL(fk->rings, 1);
	drain_in_order(0, 100, 4);
	teardown();
}

/*
 * A poll or an arm inside an ibv_wr_* batch of a QP with deferred WQEs:
 * the batch holds the provider's send queue (mlx5's lock, from wr_start to
 * wr_complete or wr_abort), so a ring there must not wait for it (it would
 * wait for its own thread): the adapter answers EBUSY.  Nothing is lost:
 * the WQEs stay counted, the next poll after the batch rings them, and so
 * does the budget's timer for a poster that neither polls nor arms.
 */
static void test_defer_ring_busy(void)
{
	struct ibv_qp_ex *qx = &pt_qx[0];
	struct ibv_wc wc[8];

	defer_setup(10 * 1000 * 1000);
	fk_wr_install(qx, 0);
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	post_ids(0, 100, 4, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 3);
	ibv_wr_start(qx);
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT(fk->ring_busy >= 2);
	CU_ASSERT_EQUAL(fk_unrung(0), 3);
	ibv_wr_abort(qx);
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	drain_in_order(0, 100, 4);
	teardown();

	/* nobody polls after the batch: the timer */
	defer_setup(2000);
	fk_wr_install(qx, 0);
	CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
		sqp[0], qx, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	post_ids(0, 100, 4, 0);
	ibv_wr_start(qx);
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	ibv_wr_abort(qx);
	wait_rung(0);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 4);
	teardown();
}

/*
 * Below RTS rxe refuses a doorbell (EINVAL): a stock post reports it, and
 * a deferred one would have reported a success whose doorbell then fails
 * (a ring that no post waits for: only logged) and whose WQEs wait for the
 * next doorbell.  So a QP the layer saw modified to INIT defers nothing
 * until it sees RTS.
 */
static void test_defer_waits_for_rts(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT };
	struct ibv_wc wc[16];

	defer_setup(10 * 1000 * 1000);
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	post_ids(0, 100, 4, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->doorbells, 4);
	attr.qp_state = IBV_QPS_RTR;
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	post_ids(0, 104, 2, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	attr.qp_state = IBV_QPS_RTS;
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	/* at RTS the posts that run ahead batch again */
	post_ids(0, 106, 4, 0);
	CU_ASSERT(fk_unrung(0) > 0);
	CU_ASSERT_EQUAL(drain(0, wc, 16), 10);
	teardown();
}

/*
 * A batch left without a deadline: a fork() that came between another
 * thread's count and its arm leaves the child a count, no deadline and no
 * DEFER bit (the state is made here by hand).  The child's next post joins
 * the batch; it must give the batch a deadline (and the bit), or its WQEs
 * wait for a batch target that a stopped poster never reaches.
 */
static void test_defer_joined_no_deadline(void)
{
	defer_setup(2000);
	post_ids(0, 100, 2, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 1);
	sverbs_timer_disarm(&sqp[0]->timer);
	atomic_fetch_and(scq->fast.state, ~SVERBS_CQ_DEFER);
	post_ids(0, 102, 1, 0);
	CU_ASSERT_TRUE(sverbs_timer_armed(&sqp[0]->timer));
	CU_ASSERT(atomic_load(scq->fast.state) & SVERBS_CQ_DEFER);
	wait_rung(0);
	drain_in_order(0, 100, 3);
	teardown();
}

/*
 * A destroy the provider refuses (EBUSY: a bound MW, an attached QP) with
 * WQEs deferred: the QP goes on, and so do they.  While the provider tried,
 * the QP was off its CQ's deferring list and had no timer, and a poll that
 * came then cleared the CQ's DEFER bit: without a ring at the refusal the
 * WQEs waited for a batch target that the next posts (which join the open
 * batch, arming nothing) might never reach.
 */
static void test_defer_destroy_fails(void)
{
	struct ibv_wc wc[8];

	defer_four();
	sverbs_qp_destroy_pre(sqp[0]);
	/* another thread's poll while the provider tries */
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	sverbs_qp_destroy_post(sqp[0], EBUSY);
	post_ids(0, 104, 1, 0);
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	drain_in_order(0, 100, 5);
	teardown();
}

/*
 * A modify of the QP's state rings what was deferred first, as stock had
 * rung it at its post: to ERR, every WQE is flushed, each once.
 */
static void test_defer_modify(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[8];
	int i;

	defer_four();
	sverbs_qp_modify_pre(sqp[0], &attr, IBV_QP_STATE);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(rung_by(0, SV_RING_STATE), 1);
	CU_ASSERT_EQUAL(rung_wqes_by(0, SV_RING_STATE), 3);
	fk_qp_error(0);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	CU_ASSERT_EQUAL(poll_all(wc, 8), 4);
	for (i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + (uint64_t)i);
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	teardown();
}

/*
 * A WR that states a priority leaves pass-through for the queue: the
 * deferred WQEs are rung before its first WQE, and every WR completes
 * once, in order, with its own wr_id.
 */
static void test_defer_then_prio(void)
{
	struct ibv_wc wc[16];
	int i;

	defer_four();
	post_ids(0, 104, 1, SVERBS_PRIO(2));
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.pt), SVERBS_PT_OFF);
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 5);
	CU_ASSERT(fk_wqe(0, 3)->doorbell < fk_wqe(0, 4)->doorbell);
	CU_ASSERT(sv_qp_owns(sqp[0], fk_wqe(0, 4)->wr.wr_id));
	CU_ASSERT_EQUAL(drain(0, wc, 16), 5);
	for (i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + (uint64_t)i);
	check_no_internal(wc, 5);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * The provider refuses a WR of a deferred post: the WRs before it are rung
 * at once (stock rings them before it returns the error), the error and
 * the bad WR are stock's, and nothing waits.
 */
static void test_defer_refused(void)
{
	struct ibv_sge sge = { .addr = LADDR, .length = 64, .lkey = 7 };
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct ibv_wc wc[8];
	int i;

	defer_setup(10 * 1000 * 1000);
	post_ids(0, 100, 2, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 1);
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 102 + (uint64_t)i;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = RADDR;
		wr[i].wr.rdma.rkey = 9;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	fk->post_fail_at = 4; /* the second WR of the list */
	fk->post_fail_err = EINVAL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 3);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 3);
	for (i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + (uint64_t)i);
	teardown();
}

/*
 * Posts that join an open batch (fast.deferred nonzero) read no clock: the
 * batch's first post measured the gap and set the target, and the return
 * it counts the next gap from (last_ns) stays its own; each one that joins
 * adds one post to the gaps the next sample spans (watch.since), and the
 * post that rings the batch counts the next gap from its return, over one.
 */
static void test_defer_joined(void)
{
	uint64_t first;
	int k;

	defer_setup(10 * 1000 * 1000);
	post_ids(0, 100, 2, 0); /* stock (no gap yet), then the batch's first */
	CU_ASSERT_EQUAL(fk_unrung(0), 1);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->watch.since), 1);
	first = atomic_load(&sqp[0]->fast.last_ns);
	CU_ASSERT(first != 0);
	for (k = 0; k < 5; k++) {
		usleep(10); /* a clock read here would move last_ns */
		post_ids(0, 102 + (uint64_t)k, 1, 0);
	}
	CU_ASSERT_EQUAL(fk_unrung(0), 6);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.last_ns), first);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->watch.since), 6);
	/* up to the target (half the 32-deep queue): one doorbell */
	post_ids(0, 107, 10, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->watch.since), 1);
	CU_ASSERT(atomic_load(&sqp[0]->fast.last_ns) > first);
	teardown();
}

/* A poller on another thread, as a hook: a poll that rings the batch. */
static void poll_rings(void)
{
	struct ibv_wc wc;

	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 1, &wc), 0);
}

/*
 * A post that joins a batch a poll rang meanwhile (between its test of
 * the count and its own WQE): its WQE starts a new batch, so it marks the
 * CQ for the next poll to ring and arms the timer, as a batch's first post
 * does; else the WQE would wait for a later post's doorbell.
 */
static void test_defer_joined_rung(void)
{
	struct ibv_wc wc[8];
	int k;

	defer_setup(10 * 1000 * 1000);
	post_ids(0, 100, 2, 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 1);
	fk->nodb_hook = poll_rings;
	post_ids(0, 102, 1, 0);
	CU_ASSERT_PTR_NULL(fk->nodb_hook);
	CU_ASSERT_EQUAL(fk->rings, 1);
	CU_ASSERT_EQUAL(fk_unrung(0), 1);
	CU_ASSERT_EQUAL(atomic_load(&sqp[0]->fast.deferred), 1);
	CU_ASSERT(atomic_load(scq->fast.state) & SVERBS_CQ_DEFER);
	CU_ASSERT(atomic_load(&sqp[0]->timer.deadline_ns) != 0);
	/* the next poll rings it (nothing has completed yet) */
	CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
	CU_ASSERT_EQUAL(fk_unrung(0), 0);
	CU_ASSERT_EQUAL(fk->rings, 2);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 3);
	for (k = 0; k < 3; k++)
		CU_ASSERT_EQUAL(wc[k].wr_id, 100 + (uint64_t)k);
	teardown();
}

/* A held WR is sent by the budget's timer when nobody polls. */
static void test_budget_timer(void)
{
	struct ibv_wc wc[8];
	int i;

	budget_setup(2000);
	post_each(2, -1, 0);
	/* liveness, not speed: wait up to 5 s for the timer thread */
	for (i = 0; i < 5000; i++) {
		pthread_spin_lock(&sqp[0]->lock);
		if (fk->sq[0].posted == 2) {
			pthread_spin_unlock(&sqp[0]->lock);
			break;
		}
		pthread_spin_unlock(&sqp[0]->lock);
		usleep(1000);
	}
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	CU_ASSERT_EQUAL(drain(0, wc, 8), 2);
	teardown();
}

/* ------------------------------------------------------------ issue 16 */

/*
 * 16.6: the nop that follows an unsignaled tail when the QP goes to ERR
 * (so that the hardware reports something that retires it) is the
 * provider's no-op (adapter nop_wr), signaled, never an RDMA WRITE.
 */
static void test_err_nop_is_providers(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[8];
	struct fk_wqe *w;
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 32, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 64, 0); /* unsignaled */
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 1);
	CU_ASSERT_FALSE_FATAL(fk_wqe(0, 0)->signaled);
	sverbs_qp_modify_post(sqp[0], &attr, IBV_QP_STATE, 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 2);
	w = fk_wqe(0, 1);
	CU_ASSERT(w->wr.opcode == FK_WR_NOP && w->wr.num_sge == 0 &&
		  w->signaled);
	/* it retires the tail; the unsignaled WR reports its flush */
	fk_qp_error(0);
	n = poll_all(wc, 8);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1 &&
		  wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(sqp[0]->inflight_wqes, 0);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	teardown();
}

/*
 * 16.9: an application wr_id inside the layer's internal range (equal to
 * the QP's first internal wr_id, with WQEs of that number in flight) on a
 * receive completion in error, on a CQ its QP uses for sends and receives.
 * An error completion's opcode is undefined in verbs; a provider that says
 * which side it is (adapter wc_is_recv: patched mlx5) has it classified by
 * that, never by its wr_id: the application sees its own completion, once,
 * with its wr_id and status, and the send side is untouched.
 */
static void test_wr_id_internal_recv_err(void)
{
	static struct sverbs_adapter ad;
	struct ibv_wc wc[32];
	uint64_t base;
	int n;

	ad = fk_adapter;
	ad.wc_is_recv = fk_wc_is_recv;
	cfg_default();
	fk_init(64 + (int)cfg.cq_headroom);
	fk->err_side = true;
	scq = sverbs_cq_create(&ad, fk_cq(), &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scq);
	memset(sqp, 0, sizeof(sqp));
	mkqp(0, 32, false);
	CU_ASSERT_EQUAL(
		post(sqp[0], 77, IBV_WR_RDMA_WRITE, 4 * SL, IBV_SEND_SIGNALED),
		0);
	base = sqp[0]->seq_base;
	CU_ASSERT_EQUAL_FATAL(sqp[0]->seq_head, base);
	CU_ASSERT_FATAL(sqp[0]->seq_next > base);

	fk_recv_cqe(0, base, IBV_WC_LOC_LEN_ERR);
	n = poll_all(wc, 32);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT(wc[0].wr_id == base && wc[0].status == IBV_WC_LOC_LEN_ERR &&
		  wc[0].qp_num == fk->qp[0].qp_num);
	CU_ASSERT_EQUAL(sqp[0]->seq_head, base);
	CU_ASSERT_FALSE(sqp[0]->dead);
	/* the WRITE completes once, as if nothing had happened */
	n = drain(0, wc, 32);
	CU_ASSERT(n == 1 && wc[0].wr_id == 77 &&
		  wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 32);
	teardown();
}

/*
 * 16.9, exact: a wr_id of the layer's range (sverbs.h) fails its post with
 * EINVAL at that WR, on every path, so that a completion carrying one is
 * the layer's by its value alone (before: a receive in error, or a WR
 * posted in pass-through, with the QP's first internal wr_id was read as
 * the layer's WQE on a provider whose error CQEs do not say their side).
 * ibv_post_send in pass-through: the WRs before it go, the QP stays in
 * pass-through; through the queue: the same; an ibv_wr_* batch, in
 * pass-through or queued: all of it fails, nothing goes; receives: the
 * ones before it go.
 */
static int rx_posted;
static uint64_t rx_ids[4];

static int rx_post(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next)
		rx_ids[rx_posted++ % 4] = wr->wr_id;
	return 0;
}

static void test_wr_id_reserved(void)
{
	struct ibv_sge sge = { LADDR, 100, 7 };
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct ibv_recv_wr rw[3] = {}, *rbad = NULL;
	struct ibv_qp_ex *qx = &pt_qx[1];
	struct ibv_wc wc[16];
	int i, n;

	pt_setup(16);
	write_list3(wr, &sge, true);
	/* the QP's first internal wr_id */
	wr[1].wr_id = sqp[0]->seq_base;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 1);
	CU_ASSERT_EQUAL(fk_wqe(0, 0)->wr.wr_id, 10);
	CU_ASSERT_TRUE(atomic_load(&sqp[0]->fast.pt));
	/* a priority before it: the queue's path, the same */
	wr[0].wr_id = 20;
	wr[0].send_flags |= SVERBS_PRIO(0);
	wr[1].wr_id = SVERBS_WR_ID_RESERVED_MAX;
	bad = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[0], wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_FALSE(atomic_load(&sqp[0]->fast.pt));
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 10 && wc[0].status == IBV_WC_SUCCESS);
	CU_ASSERT(wc[1].wr_id == 20 && wc[1].status == IBV_WC_SUCCESS);

	/* ibv_wr_*, in pass-through: the whole batch fails */
	mkqp(1, 16, false);
	fk_wr_install(qx, 1);
	CU_ASSERT_TRUE_FATAL(
		sverbs_qp_install_wr_ops(sqp[1], qx, IBV_QP_EX_WITH_SEND));
	ibv_wr_start(qx);
	pt_wr_send(qx, 30, IBV_SEND_SIGNALED);
	pt_wr_send(qx, SVERBS_WR_ID_RESERVED_MIN + 1, IBV_SEND_SIGNALED);
	pt_wr_send(qx, 31, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), EINVAL);
	CU_ASSERT_EQUAL(fk->sq[1].posted, 0);
	CU_ASSERT_TRUE(atomic_load(&sqp[1]->fast.pt));
	/* a batch with a priority takes the QP to the queue */
	ibv_wr_start(qx);
	pt_wr_send(qx, 32, IBV_SEND_SIGNALED | SVERBS_PRIO(1));
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), 0);
	CU_ASSERT_FALSE(atomic_load(&sqp[1]->fast.pt));
	/* queued: the same */
	ibv_wr_start(qx);
	pt_wr_send(qx, 33, IBV_SEND_SIGNALED);
	pt_wr_send(qx, SVERBS_WR_ID_RESERVED_MIN + 2, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(ibv_wr_complete(qx), EINVAL);
	n = drain(1, wc, 16);
	CU_ASSERT(n == 1 && wc[0].wr_id == 32 &&
		  wc[0].status == IBV_WC_SUCCESS);

	/* receives (the glue's post_recv and post_srq_recv) */
	for (i = 0; i < 3; i++) {
		rw[i].wr_id = 40 + i;
		rw[i].next = i < 2 ? &rw[i + 1] : NULL;
	}
	rx_posted = 0;
	CU_ASSERT_EQUAL(
		sverbs_post_recv_checked(sqp[0]->qp, rw, &rbad, rx_post), 0);
	CU_ASSERT_EQUAL(rx_posted, 3);
	rw[2].wr_id = SVERBS_WR_ID_RESERVED_MIN;
	rx_posted = 0;
	CU_ASSERT_EQUAL(
		sverbs_post_recv_checked(sqp[0]->qp, rw, &rbad, rx_post),
		EINVAL);
	CU_ASSERT_PTR_EQUAL(rbad, &rw[2]);
	CU_ASSERT(rx_posted == 2 && rx_ids[0] == 40 && rx_ids[1] == 41);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	teardown();
}

/*
 * 16.9 on a QP that stays stock: it leaves pass-through for the queue but
 * the CQ has no headroom left (no resize), so the QP stays stock
 * (sv_qp_leave_prepare: EAGAIN).  A reserved wr_id is refused there too,
 * the WRs before it reach the provider, and *bad_wr points at it.
 */
static void test_wr_id_reserved_stock_qp(void)
{
	struct ibv_sge sge = { LADDR, 100, 7 };
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct ibv_wc wc[16];
	int i, n;

	cfg_default();
	cfg.slice_always = false;
	cfg.passthrough = true;
	cfg.cq_headroom = 4;
	setup(16);
	fk->resize_fails = true;
	/* three QPs take the headroom (a priority takes each to the queue) */
	for (i = 0; i < 3; i++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(i, 8, false));
		CU_ASSERT_EQUAL(post(sqp[i], 1 + i, IBV_WR_SEND, 8,
				     IBV_SEND_SIGNALED | SVERBS_PRIO(0)),
				0);
		CU_ASSERT_FALSE(atomic_load(&sqp[i]->fast.pt));
		CU_ASSERT_EQUAL(drain(i, wc, 16), 1);
	}
	/* the fourth finds none: it stays stock */
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(3, 8, false));
	write_list3(wr, &sge, true);
	wr[0].send_flags |= SVERBS_PRIO(0);
	wr[1].wr_id = SVERBS_WR_ID_RESERVED_MIN + 7;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[3], wr, &bad), EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_TRUE(atomic_load(&sqp[3]->fast.stock));
	CU_ASSERT_EQUAL_FATAL(fk->sq[3].posted, 1);
	CU_ASSERT_EQUAL(fk_wqe(3, 0)->wr.wr_id, 10);
	/* the application's list is untouched (posted one WR at a time) */
	CU_ASSERT_PTR_EQUAL(wr[0].next, &wr[1]);
	/* WR 10's completion, the stock QP's own */
	n = drain(3, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT(wc[0].wr_id == 10 && wc[0].status == IBV_WC_SUCCESS);
	/* without the reserved wr_id the whole list goes, as stock */
	wr[1].wr_id = 11;
	bad = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(sqp[3], wr, &bad), 0);
	CU_ASSERT_EQUAL(fk->sq[3].posted, 4);
	CU_ASSERT_EQUAL(drain(3, wc, 16), 3);
	/* a stock QP's WRs go as posted, priority bits included, as with
	 * SVERBS=off (docs/semantics.md): WR 10, twice */
	CU_ASSERT_EQUAL(fk->leaks, 2);
	teardown();
}

/*
 * 16.10: arming is O(1) in the number of QPs.  QPs whose queued work waits
 * behind a signaled WQE in flight need nothing from the arm (that WQE's
 * completion raises the event); only QPs holding WRs for a bigger batch or
 * waiting for CQ headroom are pumped, and those are found without walking
 * the CQ's QPs (scq->qp_visits counts the QPs a walk looked at).
 */
static void test_arm_visits_no_qp(void)
{
	struct ibv_wc wc[256];
	uint64_t visits;
	int i, db, n;

	cfg_default();
	setup(256);
	for (i = 0; i < FK_QPS; i++) {
		mkqp(i, 32, false);
		/* three sliced WRITEs: the window keeps most of them queued */
		CU_ASSERT_EQUAL(post(sqp[i], 10 + i, IBV_WR_RDMA_WRITE, 4 * SL,
				     IBV_SEND_SIGNALED),
				0);
		CU_ASSERT_EQUAL(post(sqp[i], 20 + i, IBV_WR_RDMA_WRITE, 4 * SL,
				     IBV_SEND_SIGNALED),
				0);
		CU_ASSERT(sqp[i]->queued > 0);
		check_progress(sqp[i]);
	}
	visits = scq->qp_visits;
	db = fk->notify_calls;
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->notify_calls, db + 1);
	CU_ASSERT_EQUAL(scq->qp_visits, visits);
	/* every WR still completes, once */
	for (i = 0; i < FK_QPS; i++) {
		n = drain(i, wc, 256);
		CU_ASSERT_EQUAL(n, 2);
		CU_ASSERT(n == 2 && wc[0].wr_id == (uint64_t)(10 + i) &&
			  wc[1].wr_id == (uint64_t)(20 + i));
	}
	teardown();

	/* one QP of many holds WRs: the arm sends them, visiting only it */
	budget_setup(10 * 1000 * 1000);
	for (i = 1; i < FK_QPS; i++)
		mkqp(i, 32, false);
	post_each(10, -1, 0);
	CU_ASSERT(sqp[0]->held);
	CU_ASSERT(fk->sq[0].posted < 10);
	visits = scq->qp_visits;
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 10);
	CU_ASSERT_FALSE(sqp[0]->held);
	CU_ASSERT_EQUAL(scq->qp_visits, visits + 1);
	CU_ASSERT_EQUAL(drain(0, wc, 32), 10);
	teardown();
}

/*
 * Defect 1: 0 from poll_cq means no application completion is pending.
 * Six QPs each leave one internal completion (an unsignaled WR's third
 * WQE signals, rule (b)) ahead of QP 6's signaled SEND in the raw CQ; an
 * event-driven program polls with ne = 1 after its event: it must get the
 * SEND, not 0 (it would then arm and wait for an event that never comes).
 */
static void test_poll_zero_means_empty(void)
{
	struct ibv_wc wc[4];
	int i, k;

	cfg_default();
	setup(64);
	for (i = 0; i < 6; i++) {
		mkqp(i, 8, false);
		for (k = 0; k < 3; k++)
			CU_ASSERT_EQUAL(post(sqp[i], (uint64_t)(10 * i + k),
					     IBV_WR_SEND, 8, 0),
					0);
	}
	mkqp(6, 8, false);
	CU_ASSERT_EQUAL(post(sqp[6], 99, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	for (i = 0; i < 7; i++)
		fk_complete(i, -1);
	CU_ASSERT_EQUAL_FATAL(fk->cq_n, 7); /* 6 internal, then the SEND */
	/* the event came: arm, then poll until 0 */
	CU_ASSERT_EQUAL(sverbs_req_notify_cq(scq, 0), 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_poll_cq(scq, 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 99);
	CU_ASSERT_EQUAL(sverbs_poll_cq(scq, 1, wc), 0);
	CU_ASSERT_EQUAL(fk->cq_n, 0);
	teardown();
}

/* Post a list of n SENDs of 8 bytes (ids id0..); returns the error. */
static int post_list8(struct sverbs_qp *q, uint64_t id0, int n,
		      unsigned int flags, struct ibv_send_wr **bad)
{
	static struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 7 };
	static struct ibv_send_wr wr[8];
	int i;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		wr[i].wr_id = id0 + (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = flags;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	*bad = NULL;
	return sverbs_post_send(q, wr, bad);
}

/*
 * Defect 2, rxe: a QP in INIT or RTR.  rxe writes the WQEs, then its
 * doorbell system call fails (EINVAL) and it returns that error with no
 * bad_wr.  Through the queue and through the lone-WR path alike,
 * ibv_post_send returns it too (it returned 0).
 */
static void test_post_doorbell_error(void)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc[8];
	int direct;

	for (direct = 0; direct < 2; direct++) {
		cfg_default();
		cfg.slice_always = !direct; /* unscheduled: lone-WR path */
		setup(64);
		mkqp(0, 16, false);
		fk->db_fail_err = EINVAL;
		CU_ASSERT_EQUAL(
			post_list8(sqp[0], 1, 1, IBV_SEND_SIGNALED, &bad),
			EINVAL);
		CU_ASSERT_PTR_NULL(bad);
		CU_ASSERT_EQUAL(
			post_list8(sqp[0], 2, 3, IBV_SEND_SIGNALED, &bad),
			EINVAL);
		CU_ASSERT_PTR_NULL(bad);
		/* as with stock rxe, the WQEs are in the send queue */
		CU_ASSERT_EQUAL(fk->sq[0].posted, 4);
		fk->db_fail_err = 0;
		/* destroyed so: no completion for WRs whose post failed */
		sverbs_qp_destroy_pre(sqp[0]);
		sverbs_qp_destroy_post(sqp[0], 0);
		sqp[0] = NULL;
		CU_ASSERT_EQUAL(poll_all(wc, 8), 0);
		teardown();
	}
}

/*
 * Defect 2, mlx5: ENOMEM for a QP not yet in RTS is not "send queue full"
 * (only the adapter's sq_full says what is).  The post fails at once with
 * the provider's error and bad_wr at the refused WR; the WRs before it in
 * the list were taken and complete, it and the rest were not (their slots
 * are free again).  It returned 0 and the WRs never completed.
 */
static void test_post_refused_sync(void)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	fk->post_fail_at = 1;
	fk->post_fail_err = ENOMEM;
	CU_ASSERT_EQUAL(post_list8(sqp[0], 1, 1, IBV_SEND_SIGNALED, &bad),
			ENOMEM);
	CU_ASSERT_PTR_NOT_NULL(bad);
	CU_ASSERT(bad && bad->wr_id == 1);
	CU_ASSERT(sqp[0]->queued == 0 && sqp[0]->nfree == 16);
	/* the second WR of three is refused */
	fk->post_fail_at = 2;
	fk->post_fail_err = EINVAL;
	CU_ASSERT_EQUAL(post_list8(sqp[0], 10, 3, IBV_SEND_SIGNALED, &bad),
			EINVAL);
	CU_ASSERT(bad && bad->wr_id == 11);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 1);
	CU_ASSERT(sqp[0]->queued == 0 && sqp[0]->nfree == 15);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT(wc[0].wr_id == 10 && wc[0].status == IBV_WC_SUCCESS);
	/* the QP goes on */
	CU_ASSERT_EQUAL(post_list8(sqp[0], 20, 2, IBV_SEND_SIGNALED, &bad), 0);
	n = drain(0, wc, 16);
	CU_ASSERT(n == 2 && wc[0].wr_id == 20 && wc[1].wr_id == 21);
	CU_ASSERT_EQUAL(sqp[0]->nfree, 16);
	teardown();
}

/*
 * Defect 3: a WR accepted while the QP had just left pass-through, whose
 * hand-over then finds the send queue full of pass-through WQEs that raced
 * in behind the layer's first one (unsignaled: no completion will come).
 * The rollback left it queued with nothing to pump it: a program that
 * polls never saw it complete.  Now every poll retries it.
 */
static void test_rollback_no_stall(void)
{
	struct ibv_send_wr raw[7], *bad = NULL;
	struct ibv_sge sge = { .addr = LADDR, .length = 8, .lkey = 7 };
	struct ibv_wc wc[16];
	int i, n = 0, tries;

	pt_setup(8);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8,
			     SVERBS_PRIO(2) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT(sqp[0]->pt_inflight && sqp[0]->inflight_wqes == 1);
	/* another thread's pass-through post, begun before the change */
	memset(raw, 0, sizeof(raw));
	for (i = 0; i < 7; i++) {
		raw[i].wr_id = 100 + (uint64_t)i;
		raw[i].sg_list = &sge;
		raw[i].num_sge = 1;
		raw[i].opcode = IBV_WR_SEND;
		raw[i].next = i < 6 ? &raw[i + 1] : NULL;
	}
	CU_ASSERT_EQUAL(
		fk_adapter.post_send(fk_qp(0, IBV_QPT_RC, 8, false), raw, &bad),
		0);
	/* accepted: it waits behind the layer's WQE in flight */
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 8,
			     SVERBS_PRIO(2) | IBV_SEND_SIGNALED),
			0);
	CU_ASSERT_EQUAL(sqp[0]->queued, 1);
	fk_complete(0, 1);
	/* ... which posts one more into the room WR 1 left */
	raw[6].next = NULL;
	CU_ASSERT_EQUAL(fk_adapter.post_send(&fk->qp[0], &raw[6], &bad), 0);
	n = poll_all(wc, 16); /* WR 1; WR 2 finds the queue full */
	CU_ASSERT(n == 1 && wc[0].wr_id == 1);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 9);
	fk_complete(0, -1); /* the racing WQEs: unsignaled, no CQE */
	for (tries = 0, n = 0; tries < 10 && !n; tries++) {
		n = poll_all(wc, 16);
		fk_complete(0, -1);
	}
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 2);
	teardown();
}

/*
 * Defect 4: UC.  A sliced UC WRITE_WITH_IMM is not all-or-nothing (UC drops
 * a lost packet's message silently: the peer could see the immediate while
 * an earlier slice was lost), and the layer's completion rules assume RC's
 * in-order, acknowledged completions.  So a UC QP is never managed: the
 * glue posts its WRs to the provider as stock, whole, with the
 * application's wr_id, and its completions pass untouched.
 */
static void test_uc_stock(void)
{
	struct ibv_sge sge = { .addr = LADDR, .length = 4 * SL, .lkey = 7 };
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct ibv_wc wc[8];
	int n;

	cfg_default(); /* slice_always: an RC QP would slice this WR */
	setup(64);
	CU_ASSERT_PTR_NULL(mkqp_type(0, IBV_QPT_UC, 16, 4, 64, false));
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(0x1234);
	wr.wr.rdma.remote_addr = RADDR;
	wr.wr.rdma.rkey = 9;
	/* what the glue does: sverbs for a managed QP, else the provider */
	n = sqp[0] ? sverbs_post_send(sqp[0], &wr, &bad)
		   : fk_adapter.post_send(&fk->qp[0], &wr, &bad);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL_FATAL(fk->sq[0].posted, 1);
	CU_ASSERT(fk_wqe(0, 0)->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM &&
		  fk_wqe(0, 0)->wr.wr_id == 1 && fk_wqe(0, 0)->bytes == 4 * SL);
	fk_complete(0, -1);
	n = poll_all(wc, 8);
	CU_ASSERT(n == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	teardown();
}

/*
 * Defect 7: a destroyed QP's record (kept to absorb its stale internal
 * completions) expires once the raw CQ has been polled empty after the
 * destroy, and the CQ goes back to its fast path.  It never expired.
 */
static void test_stale_expires(void)
{
	struct ibv_wc wc[8];

	cfg_default();
	setup(64);
	mkqp(0, 8, false);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	sverbs_qp_destroy_pre(sqp[0]);
	fk_complete(0, -1); /* a late CQE, between drain and destroy */
	sverbs_qp_destroy_post(sqp[0], 0);
	sqp[0] = NULL;
	CU_ASSERT_EQUAL(poll_all(wc, 8), 1); /* WR 1 flushed by the destroy */
	CU_ASSERT(wc[0].wr_id == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(fk->cq_n, 0);
	CU_ASSERT_EQUAL(scq->nstale, 0);
	CU_ASSERT_FALSE(sv_cq_backlog(scq));
	CU_ASSERT_EQUAL(sv_cq_nlayered(scq), 0);
	teardown();
}

/*
 * Defect 7: a QP number reused while stale CQEs of the destroyed QP are
 * still in the CQ.  They carried internal wr_ids the new QP also uses and
 * retired its WQEs: its WRs were reported done before they were.
 */
/*
 * More QPs in their destroy at once than the stale list started with (8):
 * late CQEs of every one of them land meanwhile and are absorbed; none of
 * the layer's wr_ids reaches the application.
 */
static void test_stale_many_destroys(void)
{
	struct ibv_wc wc[64];
	int i, k, n, nq = 12;

	cfg_default();
	setup(256);
	for (i = 0; i < nq; i++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkqp(i, 16, false));
		CU_ASSERT_EQUAL(post(sqp[i], 100 + (uint64_t)i, IBV_WR_SEND,
				     100, IBV_SEND_SIGNALED),
				0);
	}
	for (i = 0; i < nq; i++)
		sverbs_qp_destroy_pre(sqp[i]);
	for (i = 0; i < nq; i++)
		fk_complete(i, -1);
	for (i = 0; i < nq; i++) {
		sverbs_qp_destroy_post(sqp[i], 0);
		sqp[i] = NULL;
	}
	for (k = 0; k < 4; k++) {
		n = sverbs_poll_cq(scq, 64, wc);
		CU_ASSERT(n >= 0);
		check_no_internal(wc, n);
	}
	CU_ASSERT_EQUAL(fk->cq_n, 0);
	teardown();
}

static void test_qpn_reuse_stale(void)
{
	struct ibv_wc wc[8];
	int n;

	cfg_default();
	setup(64);
	mkqp(0, 8, false);
	CU_ASSERT_EQUAL(post(sqp[0], 1, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 2, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	sverbs_qp_destroy_pre(sqp[0]);
	fk_complete(0, -1); /* late CQEs, between drain and destroy */
	sverbs_qp_destroy_post(sqp[0], 0);
	sqp[0] = NULL;
	/* the same QP number again, before anyone polled */
	mkqp(0, 8, false);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sqp[0]);
	CU_ASSERT_EQUAL(post(sqp[0], 3, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	CU_ASSERT_EQUAL(post(sqp[0], 4, IBV_WR_SEND, 8, IBV_SEND_SIGNALED), 0);
	n = poll_all(wc, 8);
	check_no_internal(wc, n);
	/* only the old QP's flushes: 3 and 4 have not completed */
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT(wc[0].wr_id == 1 && wc[1].wr_id == 2);
	CU_ASSERT_EQUAL(sqp[0]->inflight_wqes, 2);
	n = drain(0, wc, 8);
	CU_ASSERT(n == 2 && wc[0].wr_id == 3 && wc[1].wr_id == 4 &&
		  wc[0].status == IBV_WC_SUCCESS);
	teardown();
}

/*
 * Defect 8: the size policy lifts small unmarked WRs to level 0, but a WR
 * the peer sees (SEND, SEND_WITH_IMM, WRITE_WITH_IMM) must not overtake
 * earlier data of its QP: the peer would see the message before the data it
 * announces.  Only a small RDMA WRITE / READ / atomic is lifted.
 */
static void test_size_policy_no_overtake(void)
{
	struct ibv_wc wc[16];
	int n;

	cfg_default();
	cfg.small_msg_bytes = 256;
	setup(64);
	mkqp(0, 64, false);
	post(sqp[0], 1, IBV_WR_RDMA_WRITE, 8 * SL, IBV_SEND_SIGNALED);
	post(sqp[0], 2, IBV_WR_SEND, 64, IBV_SEND_SIGNALED);
	post(sqp[0], 3, IBV_WR_RDMA_WRITE_WITH_IMM, 64, IBV_SEND_SIGNALED);
	post(sqp[0], 4, IBV_WR_SEND_WITH_IMM, 64, IBV_SEND_SIGNALED);
	post(sqp[0], 5, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	n = drain(0, wc, 16);
	CU_ASSERT_EQUAL_FATAL(n, 5);
	/* the small plain WRITE overtakes; the peer-visible ones do not */
	CU_ASSERT(find_wc(wc, n, 5) < find_wc(wc, n, 1));
	CU_ASSERT(find_wc(wc, n, 1) < find_wc(wc, n, 2));
	CU_ASSERT(find_wc(wc, n, 2) < find_wc(wc, n, 3));
	CU_ASSERT(find_wc(wc, n, 3) < find_wc(wc, n, 4));
	teardown();
}

/*
 * Defect 5: the application's ibv_resize_cq().  The glue now routes it to
 * sverbs_cq_resize(): the provider's CQ gets the size asked for plus the
 * layer's headroom (the provider's resize to exactly that size dropped it:
 * the layer's internal completions could overrun the CQ), and the ready
 * ring grows with it.
 */
static void test_cq_resize_keeps_headroom(void)
{
	uint32_t hr;

	cfg_default();
	setup(64);
	mkqp(0, 16, false);
	mkqp(1, 16, false); /* the layer grew the CQ once */
	hr = scq->hr_total;
	CU_ASSERT_EQUAL(hr, 2 * cfg.cq_headroom);
	CU_ASSERT_EQUAL(sverbs_cq_resize(scq, 1000), 0);
	CU_ASSERT_EQUAL(fk_cq()->cqe, 1000 + (int)hr);
	CU_ASSERT_EQUAL(scq->hr_total, hr);
	CU_ASSERT(scq->rcap >= 1000 + hr + scq->wr_capacity);
	fk->resize_fails = true;
	CU_ASSERT_NOT_EQUAL(sverbs_cq_resize(scq, 2000), 0);
	CU_ASSERT_EQUAL(fk_cq()->cqe, 1000 + (int)hr);
	teardown();
}

/*
 * Defect 2 on rxe, the default mode: a WR stating a priority posted to a QP
 * in INIT ends pass-through; rxe takes its WQE, the doorbell fails, and the
 * post fails with EINVAL.  The WQE sits in rxe's queue until a doorbell
 * rings.  Once in RTS the next post must reach the provider (its doorbell
 * kicks both, as stock's next post does); the pass-through tail rule (one
 * WQE in flight) kept it queued forever.
 */
static void test_doorbell_error_then_rts(void)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc[8];
	int n;

	pt_setup(16);
	fk->db_fail_err = EINVAL;
	CU_ASSERT_EQUAL(post_list8(sqp[0], 1, 1,
				   IBV_SEND_SIGNALED | SVERBS_PRIO(2), &bad),
			EINVAL);
	CU_ASSERT_PTR_NULL(bad);
	fk->db_fail_err = 0; /* RTS */
	CU_ASSERT_EQUAL(post_list8(sqp[0], 2, 1,
				   IBV_SEND_SIGNALED | SVERBS_PRIO(2), &bad),
			0);
	CU_ASSERT_EQUAL(fk->sq[0].posted, 2);
	n = drain(0, wc, 8);
	CU_ASSERT(n == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2);
	teardown();
}

/*
 * Defect 5: the layer grew the CQ (resize_cq) when a QP registered, from
 * the creating thread, while a poller may be reading the CQ's buffer: with
 * a provider that polls without a lock (mlx5 single-threaded) the resize
 * could free it underneath.  On such a CQ the layer never resizes: a QP
 * beyond the headroom stays stock.
 */
static void test_no_resize_lockless_cq(void)
{
	cfg_default();
	cfg.cq_headroom = 4;
	setup(16);
	fk->cq_lockless = true;
	CU_ASSERT_PTR_NOT_NULL(mkqp(0, 8, false));
	CU_ASSERT_PTR_NOT_NULL(mkqp(1, 8, false));
	CU_ASSERT_PTR_NOT_NULL(mkqp(2, 8, false));
	CU_ASSERT_PTR_NULL(mkqp(3, 8, false));
	CU_ASSERT_EQUAL(fk->resize_calls, 0);
	teardown();
}

int main(void)
{
	static const struct fk_cu_test tests[] = {
		{ "slice boundaries", test_slice_boundaries },
		{ "slice multi-SGE READ", test_slice_multi_sge },
		{ "slice WRITE_WITH_IMM", test_slice_write_imm },
		{ "never sliced", test_not_sliced },
		{ "inline copied", test_inline_copied },
		{ "prio bits stripped", test_prio_bits_stripped },
		{ "prio overtakes between slices", test_prio_overtakes },
		{ "prio completion order", test_prio_completion_order },
		{ "prio policy", test_prio_policy },
		{ "window bound", test_window_bound },
		{ "window_signals: one CQE per window", test_window_signals },
		{ "slice_grow: calm slices grow, a higher level shrinks them",
		  test_slice_grow },
		{ "slice_grow off: every slice is the slice size",
		  test_slice_grow_off },
		{ "window shrinks below an unsignaled tail",
		  test_window_shrink_unsignaled_tail },
		{ "depth bound", test_depth_bound },
		{ "capacity ENOMEM bad_wr", test_capacity },
		{ "validation EINVAL", test_validation },
		{ "wr_complete is all-or-nothing",
		  test_wr_complete_all_or_nothing },
		{ "limits: the provider's errno (mlx5 ENOMEM)",
		  test_limit_errno },
		{ "QP types", test_qp_types },
		{ "one completion per WR", test_one_completion_per_wr },
		{ "unsignaled", test_unsignaled },
		{ "sq_sig_all", test_sig_all },
		{ "foreign completions untouched", test_foreign_untouched },
		{ "error mid-transfer", test_error_mid_transfer },
		{ "error, signaled flushes only",
		  test_error_flush_signaled_only },
		{ "no-op after an error waits for headroom",
		  test_nop_waits_for_headroom },
		{ "modify to ERR", test_modify_err },
		{ "modify to RESET", test_modify_reset },
		{ "destroy with queued WRs", test_destroy_with_queued },
		{ "destroy fails: completions taken meanwhile are kept",
		  test_destroy_fails },
		{ "fence", test_fence },
		{ "touched list overflow", test_touched_overflow },
		{ "headroom shared", test_headroom_shared },
		{ "headroom resize", test_headroom_resize },
		{ "headroom refuse", test_headroom_refuse },
		{ "headroom given back before the wait", test_headroom_gap },
		{ "headroom a refused chain gives back reaches its waiter",
		  test_headroom_back_on_refusal },
		{ "headroom: a QP registering when none is free stays stock",
		  test_headroom_register_when_full },
		{ "headroom: a leave of pass-through when none is free waits",
		  test_headroom_leave_when_full },
		{ "headroom: a QP registering when none is free grows the CQ",
		  test_headroom_register_grows },
		{ "headroom: a destroy's late CQEs keep their units",
		  test_headroom_destroy_late_cqes },
		{ "headroom: a reset's late CQEs keep their units",
		  test_headroom_reset_late_cqes },
		{ "headroom: a destroy's reserved CQE in use before the limit "
		  "grows",
		  test_headroom_destroy_reserved_before_limit },
		{ "headroom: a destroy's late CQEs, the ready ring full",
		  test_headroom_destroy_late_cqes_deferred },
		{ "headroom: a reset's late CQEs, the ready ring full",
		  test_headroom_reset_late_cqes_deferred },
		{ "headroom: a take racing a registration",
		  test_headroom_take_races_register },
		{ "headroom freed by a destroy",
		  test_headroom_freed_by_destroy },
		{ "headroom freed by a RESET", test_headroom_freed_by_reset },
		{ "arm for solicited completions", test_arm_solicited },
		{ "arm for solicited completions, then a QP leaves "
		  "pass-through",
		  test_arm_solicited_then_leave },
		{ "extended CQ", test_ex_cq },
		{ "extended CQ: arm inside the poll loop",
		  test_ex_cq_arm_inside },
		{ "extended CQ: QP create, reset, destroy inside the poll loop",
		  test_ex_cq_lifetime_inside },
		{ "extended CQ: an arm inside a loop another CQ's nested in",
		  test_ex_cq_nested },
		{ "extended CQ: two threads' loops arm each other's CQ",
		  test_ex_cq_cross_arm },
		{ "extended CQ: two threads' loops post to each other's QPs",
		  test_ex_cq_cross_leave },
		{ "extended CQ: a leave refused in a loop keeps another's mark",
		  test_ex_cq_leave_pair },
		{ "extended CQ: a kick outside the loop does not wait for it",
		  test_ex_cq_kick_outside },
		{ "a pass-through wr_* batch meets another thread's leave",
		  test_pt_batch_meets_leave },
		{ "extended CQ: a reset or destroy inside the loop keeps its "
		  "fields",
		  test_ex_cq_fields_kept },
		{ "wr_* API", test_wr_api },
		{ "wr_* batch: poll and arm inside it",
		  test_wr_batch_poll_inside },
		{ "adaptive slicer", test_adaptive_slice },
		{ "adaptive QP", test_adaptive_qp },
		{ "doorbells", test_doorbells },
		{ "adapter failure", test_adapter_failure },
		{ "adapter refuses a WR for good", test_adapter_refuses },
		{ "random", test_random },
		{ "random with errors", test_random_errors },
		{ "poll skips internal", test_poll_skips_internal },
		{ "threads", test_threads },
		{ "batch off: a doorbell per WQE", test_batch_off },
		{ "lone WR goes direct", test_direct },
		{ "pass-through: WRs and completions untouched",
		  test_pt_untouched },
		{ "pass-through ends at a stated priority", test_pt_leave },
		{ "pass-through: leaving syncs the provider's poll",
		  test_pt_leave_sync },
		{ "pass-through: the provider's own words follow",
		  test_pt_provider_words },
		{ "pass-through: a stock post lands after the leave",
		  test_pt_late_stock_post },
		{ "pass-through ends with the SQ full", test_pt_leave_sq_full },
		{ "pass-through ends at a refused WR", test_pt_leave_refused },
		{ "pass-through: fast poll races the end",
		  test_pt_fast_poll_race },
		{ "pass-through: which QPs, layered count", test_pt_config },
		{ "pass-through: ibv_wr_* batches", test_pt_wr_api },
		{ "pass-through: random", test_pt_random },
		{ "budget: held until poll", test_budget_holds_until_poll },
		{ "budget: none where the provider takes no locks",
		  test_budget_off_when_lockless },
		{ "budget: none for a QP the provider posts to without a lock",
		  test_budget_off_when_qp_lockless },
		{ "budget: a hold across fork() is rung in the child",
		  test_budget_hold_across_fork },
		{ "18.2 budget: a closed loop stays in pass-through",
		  test_watch_closed_loop },
		{ "18.2 budget: posts that run ahead leave pass-through",
		  test_watch_leaves },
		{ "18.2 budget: without a completion count, the gap decides",
		  test_watch_no_count },
		{ "18.2 budget: a watched QP that stays stock",
		  test_watch_stays_stock },
		{ "budget: no hold once the poster must wait",
		  test_budget_no_hold_when_full },
		{ "budget: level 0, arm, fence ring",
		  test_budget_urgent_and_triggers },
		{ "budget: timer sends held WRs", test_budget_timer },
		{ "18.3 deferred doorbells: batches without the queue",
		  test_defer_batches },
		{ "18.3 deferred doorbells: the timer rings a stopped poster",
		  test_defer_timer },
		{ "18.3 deferred doorbells: a refused destroy strands nothing",
		  test_defer_destroy_fails },
		{ "18.3 deferred doorbells: none below RTS",
		  test_defer_waits_for_rts },
		{ "18.3 deferred doorbells: a batch without a deadline gets "
		  "one",
		  test_defer_joined_no_deadline },
		{ "18.3 deferred doorbells: a poll inside a wr_* batch waits "
		  "for "
		  "nothing",
		  test_defer_ring_busy },
		{ "18.3 deferred doorbells: an arm rings first",
		  test_defer_arm },
		{ "18.3 deferred doorbells: a modify rings first",
		  test_defer_modify },
		{ "18.3 deferred doorbells: rung before a priority's queue",
		  test_defer_then_prio },
		{ "18.3 deferred doorbells: a refused WR rings the rest",
		  test_defer_refused },
		{ "18.3 deferred doorbells: joined posts read no clock",
		  test_defer_joined },
		{ "18.3 deferred doorbells: a batch rung under a joining post",
		  test_defer_joined_rung },
		{ "scheduling starts once levels mix",
		  test_schedule_once_levels_mix },
		{ "budget: size policy stays holdable",
		  test_budget_size_policy_holdable },
		{ "16.1 poll 0 means no completion pending",
		  test_poll_zero_means_empty },
		{ "16.2 doorbell error fails the post (rxe INIT/RTR)",
		  test_post_doorbell_error },
		{ "16.2 refused WR fails the post, bad_wr at it",
		  test_post_refused_sync },
		{ "16.2 after a doorbell error, the next post rings",
		  test_doorbell_error_then_rts },
		{ "16.3 no stall after a rollback", test_rollback_no_stall },
		{ "16.4 UC QPs stay stock, never sliced", test_uc_stock },
		{ "16.7 a destroyed QP's record expires", test_stale_expires },
		{ "16.7 QP number reuse with stale CQEs",
		  test_qpn_reuse_stale },
		{ "stale: more destroys at once than the list's start",
		  test_stale_many_destroys },
		{ "16.8 size policy: peer-visible WRs never overtake",
		  test_size_policy_no_overtake },
		{ "16.5 ibv_resize_cq keeps the headroom",
		  test_cq_resize_keeps_headroom },
		{ "16.5 no layer resize of a lockless CQ",
		  test_no_resize_lockless_cq },
		{ "16.10 arming visits no QP", test_arm_visits_no_qp },
		{ "16.9 a receive error with an internal wr_id",
		  test_wr_id_internal_recv_err },
		{ "16.9 a reserved wr_id fails its post, on every path",
		  test_wr_id_reserved },
		{ "16.9 a reserved wr_id on a QP that stays stock",
		  test_wr_id_reserved_stock_qp },
		{ "16.6 the error nop is the provider's no-op",
		  test_err_nop_is_providers },
	};

	return fk_cu_run("sched", tests, sizeof(tests) / sizeof(tests[0]));
}
