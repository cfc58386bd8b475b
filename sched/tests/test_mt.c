// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Concurrency through the queue path (run it under TSan: scripts/sanitize.sh):
 *  - several threads post to one QP while another thread completes the
 *    fake hardware's WQEs and polls the CQ;
 *  - several threads post, each to its own QP, all QPs on one CQ;
 * each with and without a batching budget (then the timer thread rings
 * held WRs too), and with a budget in pass-through, no WR stating a
 * priority: QPs watched (sched/watch.c) leave pass-through while other
 * threads post to them stock; and QPs of one CQ that all leave
 * pass-through at once (the adapter's cq_sync on several threads); and
 * posters that build ibv_wr_* batches on one QP and poll the CQ inside
 * them, beside posters of ibv_post_send(); and watched QPs on an adapter
 * that splits post and doorbell (fk_adapter_defer): posters defer
 * doorbells on one QP or several while the poller's polls and arms and the
 * timer thread ring them (sched/watch.c).  Every
 * signaled WR completes exactly once, with success.  The fake adapter
 * serializes its "hardware" with a mutex, as a real provider does with its
 * SQ and CQ locks.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define POSTERS 4
#define PER	3000 /* WRs per poster */
#define DEPTH	64

static struct sverbs_config cfg;
static struct sverbs_cq *scq;
static struct sverbs_qp *sqp[POSTERS];
static int nqp;
static atomic_int count[POSTERS][PER];
/* each poster's WRs polled: it keeps at most DEPTH unpolled, as verbs asks */
static atomic_int polled[POSTERS];
static atomic_int delivered, bad_status, unknown;
static atomic_bool posters_done;
static bool marks;    /* posters state priorities on half their WRs */
static bool together; /* pass-through QPs of one CQ leave it at once */
static bool batches;  /* odd posters build ibv_wr_* batches, polling in them */
static struct ibv_qp_ex qpx[POSTERS]; /* one per QP, as verbs has it */
/* fk_adapter, or fk_adapter_defer (deferred doorbells) */
static const struct sverbs_adapter *ad = &fk_adapter;
static pthread_barrier_t start;

struct poster {
	int t;
	struct sverbs_qp *q;
};

/* Count the completions taken (the poller's, or a batch poster's). */
static void tally(const struct ibv_wc *wc, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint64_t t = wc[i].wr_id >> 32, j = wc[i].wr_id & 0xffffffff;

		if (wc[i].status != IBV_WC_SUCCESS)
			atomic_fetch_add(&bad_status, 1);
		if (t >= POSTERS || j >= PER)
			atomic_fetch_add(&unknown, 1);
		else
			atomic_fetch_add(&count[t][j], 1);
		if (t < POSTERS)
			atomic_fetch_add(&polled[t], 1);
		atomic_fetch_add(&delivered, 1);
	}
}

/*
 * One WR as an ibv_wr_* batch of its own; the CQ polled inside the batch
 * (the QP's own completions among them).
 */
static int post_batch(struct ibv_qp_ex *qx, const struct ibv_send_wr *wr)
{
	struct ibv_wc wc[4];

	ibv_wr_start(qx);
	qx->wr_id = wr->wr_id;
	qx->wr_flags = wr->send_flags;
	if (wr->opcode == IBV_WR_RDMA_WRITE)
		ibv_wr_rdma_write(qx, wr->wr.rdma.rkey,
				  wr->wr.rdma.remote_addr);
	else
		ibv_wr_send(qx);
	ibv_wr_set_sge(qx, wr->sg_list->lkey, wr->sg_list->addr,
		       wr->sg_list->length);
	tally(wc, sverbs_poll_cq(scq, 4, wc));
	return ibv_wr_complete(qx);
}

static void *poster(void *arg)
{
	struct poster *p = arg;
	unsigned int seed = 77u + (unsigned int)p->t;
	int i;

	if (together)
		pthread_barrier_wait(&start);
	for (i = 0; i < PER;) {
		struct ibv_sge sge = { .addr = 0x10000000ull + (uint64_t)i * 64,
				       .length = rand_r(&seed) % 3
							 ? 64
							 : 3 * 4096 + 100,
				       .lkey = 7 };
		struct ibv_send_wr wr = {}, *bad = NULL;
		int ret;

		/*
		 * No more unpolled WRs than the send queue's depth: a QP in
		 * pass-through is the provider's, whose room comes back at
		 * completion (rxe, the fake), not at the poll, and the CQ holds
		 * DEPTH per poster (a CQ overflow is the application's error)
		 */
		if (i - atomic_load(&polled[p->t]) >= DEPTH) {
			sched_yield();
			continue;
		}
		wr.wr_id = (uint64_t)p->t << 32 | (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = rand_r(&seed) % 2 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (rand_r(&seed) % 2 && marks)
			wr.send_flags |= SVERBS_PRIO(rand_r(&seed) % 8);
		if (together && !i) /* each QP's first WR ends pass-through */
			wr.send_flags |= SVERBS_PRIO(1);
		wr.wr.rdma.remote_addr = 0x20000000ull;
		wr.wr.rdma.rkey = 9;
		if (batches && p->t % 2)
			ret = post_batch(&qpx[p->q == sqp[0] ? 0 : p->t], &wr);
		else
			ret = sverbs_post_send(p->q, &wr, &bad);
		if (ret == ENOMEM) { /* every slot taken: wait for the poller */
			sched_yield();
			continue;
		}
		CU_ASSERT_EQUAL(ret, 0);
		if (ret)
			break;
		i++;
	}
	return NULL;
}

static void *poller(void *arg)
{
	struct ibv_wc wc[16];
	int total = *(int *)arg, n, k, rounds = 0;

	while (atomic_load(&delivered) < total) {
		for (k = 0; k < nqp; k++)
			fk_complete(k, 5);
		n = sverbs_poll_cq(scq, 1 + rounds % 16, wc);
		tally(wc, n);
		if (++rounds % 64 == 0)
			sverbs_req_notify_cq(scq, 0);
		if (!n)
			sched_yield();
		if (rounds > 50000000) /* a hang: fail, do not wait forever */
			break;
	}
	return NULL;
}

static void run(bool shared_qp, uint32_t budget_us, bool watched)
{
	struct ibv_qp_init_attr_ex a = {};
	struct poster p[POSTERS];
	pthread_t th[POSTERS], pt;
	int total = POSTERS * PER, i, j;

	sverbs_config_defaults(&cfg);
	cfg.passthrough = watched; /* else the queue path */
	marks = !watched;
	cfg.slice_bytes = 4096;
	cfg.window_slices = 2;
	cfg.cq_headroom = 32;
	cfg.batch_budget_us = budget_us;
	nqp = shared_qp ? 1 : POSTERS;
	fk_init(nqp * DEPTH * 2 + (int)cfg.cq_headroom);
	scq = sverbs_cq_create(ad, fk_cq(), &cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(scq);
	for (i = 0; i < nqp; i++) {
		struct ibv_qp *qp = fk_qp(i, IBV_QPT_RC, DEPTH, false);

		a.cap.max_send_wr = DEPTH;
		a.cap.max_send_sge = 2;
		a.cap.max_inline_data = 64;
		a.qp_type = IBV_QPT_RC;
		a.send_cq = fk_cq();
		sqp[i] = sverbs_qp_create(ad, qp, scq, &a, &cfg);
		CU_ASSERT_PTR_NOT_NULL_FATAL(sqp[i]);
	}
	memset(count, 0, sizeof(count));
	memset(polled, 0, sizeof(polled));
	atomic_store(&delivered, 0);
	atomic_store(&bad_status, 0);
	atomic_store(&unknown, 0);
	atomic_store(&posters_done, false);
	pthread_create(&pt, NULL, poller, &total);
	if (together)
		pthread_barrier_init(&start, NULL, POSTERS);
	for (i = 0; i < nqp && batches; i++) {
		memset(&qpx[i], 0, sizeof(qpx[i]));
		CU_ASSERT_TRUE_FATAL(sverbs_qp_install_wr_ops(
			sqp[i], &qpx[i],
			IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND));
	}
	for (i = 0; i < POSTERS; i++) {
		p[i].t = i;
		p[i].q = sqp[shared_qp ? 0 : i];
		pthread_create(&th[i], NULL, poster, &p[i]);
	}
	for (i = 0; i < POSTERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&posters_done, true);
	pthread_join(pt, NULL);
	if (together)
		pthread_barrier_destroy(&start);
	CU_ASSERT_EQUAL(atomic_load(&delivered), total);
	CU_ASSERT_EQUAL(atomic_load(&bad_status), 0);
	CU_ASSERT_EQUAL(atomic_load(&unknown), 0);
	for (i = 0; i < POSTERS; i++)
		for (j = 0; j < PER; j++)
			if (atomic_load(&count[i][j]) != 1) {
				CU_FAIL("a WR did not complete exactly once");
				fprintf(stderr,
					"mt: WR %d/%d completed %d times\n", i,
					j, atomic_load(&count[i][j]));
				i = POSTERS;
				break;
			}
	CU_ASSERT_FALSE(fk->cq_overflow);
	CU_ASSERT_EQUAL(fk->leaks, 0);
	/*
	 * Posters run ahead of the poller (their send queues fill): the
	 * step out of pass-through was taken under the race (a QP may,
	 * by scheduling, never see two posts without a poll between).
	 */
	for (i = 0, j = 0; i < nqp && watched; i++)
		j += atomic_load(&sqp[i]->fast.pt) == SVERBS_PT_OFF;
	if (watched && !together && ad == &fk_adapter)
		CU_ASSERT(j > 0);
	/* deferring: none left, and the posters' doorbells were deferred */
	if (ad == &fk_adapter_defer) {
		struct sverbs_qp_stats st;
		uint64_t deferred = 0;

		CU_ASSERT_EQUAL(j, 0);
		for (i = 0; i < nqp; i++) {
			sverbs_qp_get_stats(sqp[i], &st);
			deferred += st.wqes;
		}
		CU_ASSERT(deferred > 0);
	}
	if (together)
		CU_ASSERT_EQUAL(j, nqp);
	for (i = 0; i < nqp; i++) {
		sverbs_qp_destroy_pre(sqp[i]);
		sverbs_qp_destroy_post(sqp[i], 0);
	}
	sverbs_cq_destroy(scq);
	fk_fini();
}

static void test_one_qp(void)
{
	run(true, 0, false);
}

static void test_one_qp_budget(void)
{
	run(true, 100, false);
}

static void test_qps_one_cq(void)
{
	run(false, 0, false);
}

static void test_qps_one_cq_budget(void)
{
	run(false, 100, false);
}

static void test_one_qp_watched(void)
{
	run(true, 100, true);
}

static void test_qps_one_cq_watched(void)
{
	run(false, 100, true);
}

static void test_one_qp_deferred(void)
{
	ad = &fk_adapter_defer;
	run(true, 100, true);
	ad = &fk_adapter;
}

static void test_qps_one_cq_deferred(void)
{
	ad = &fk_adapter_defer;
	run(false, 100, true);
	ad = &fk_adapter;
}

/*
 * Every QP of one CQ states its first priority at once, so they leave
 * pass-through together: sv_cq_layered() and the adapter's cq_sync on
 * several threads, no lock in common but the provider's CQ lock.
 */
static void test_one_qp_wr_batches(void)
{
	batches = true;
	run(true, 0, false);
	batches = false;
}

static void test_qps_one_cq_wr_batches(void)
{
	batches = true;
	run(false, 0, false);
	batches = false;
}

static void test_qps_one_cq_leave_together(void)
{
	int round;

	together = true;
	for (round = 0; round < 3; round++) /* TSan: a race shows most times */
		run(false, 0, true);
	together = false;
}

int main(void)
{
	unsigned int fails;
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("mt", NULL, NULL);
	CU_add_test(s, "posters_one_qp", test_one_qp);
	CU_add_test(s, "posters_one_qp_budget", test_one_qp_budget);
	CU_add_test(s, "posters_qps_one_cq", test_qps_one_cq);
	CU_add_test(s, "posters_qps_one_cq_budget", test_qps_one_cq_budget);
	CU_add_test(s, "posters_one_qp_watched", test_one_qp_watched);
	CU_add_test(s, "posters_qps_one_cq_watched", test_qps_one_cq_watched);
	CU_add_test(s, "posters_one_qp_deferred", test_one_qp_deferred);
	CU_add_test(s, "posters_qps_one_cq_deferred", test_qps_one_cq_deferred);
	CU_add_test(s, "posters_one_qp_wr_batches", test_one_qp_wr_batches);
	CU_add_test(s, "posters_qps_one_cq_wr_batches",
		    test_qps_one_cq_wr_batches);
	CU_add_test(s, "posters_qps_one_cq_leave_together",
		    test_qps_one_cq_leave_together);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
