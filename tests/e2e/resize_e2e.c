// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * resize_e2e resize [ROUNDS] - issue 16.5 on rxe: an application that
 * resizes its CQ with ibv_resize_cq() to exactly what it needs, then fills
 * it, loses no completion.
 *
 * A sender QP on rxe0, connected to a target QP on rxe1; the sender's CQ is
 * created small and resized to CQE entries, what the application then
 * fills (127 = 2^7 - 1: rxe gives exactly that many, with no slack of its
 * own; cq->cqe is printed, not used: with the layer it counts the layer's
 * headroom too).  Each round posts,
 * without polling in between, a small signaled RDMA WRITE at level 0, one
 * large unsignaled WRITE at level 6 (levels now mix: the layer slices it
 * and signals its slices in flight for itself, completions stock would not
 * make) and CQE - 1 more small signaled WRITEs at level 0 (they
 * overtake the large one), so that exactly CQE application completions
 * are outstanding: what the verbs contract allows.  It then waits a moment
 * (no poll: the WQEs run and their CQEs land) and polls: each small WRITE's
 * wr_id once, status SUCCESS, never the unsignaled one's.  The layer's own
 * CQEs must fit in its headroom; if ibv_resize_cq were passed to the
 * provider as is, the headroom is gone, the CQ overruns, rxe reports
 * IBV_EVENT_CQ_ERR and drops a CQE: the test fails (on the event, or on a
 * completion missing after a hang guard of 30 s).  The first round of a QP
 * that starts in pass-through keeps one WQE in flight until a completion
 * (docs/semantics.md), so later rounds are the ones that fill the CQ.
 * Exit 0, or 1 with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <infiniband/sverbs.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rc_pair.h"

#define CQE    127 /* 2^n - 1: what rxe gives exactly */
#define BIG    (1u << 20)
#define SMALL  64
#define HANG_S 30
#define BIG_ID 1000000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An async event of the sender's device (non-blocking): CQ_ERR fails. */
static void check_async(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(ctx, &ev)) {
		fprintf(stderr, "resize_e2e: async event %s\n",
			ibv_event_type_str(ev.event_type));
		if (ev.event_type == IBV_EVENT_CQ_ERR)
			rc_fail("the CQ overran (IBV_EVENT_CQ_ERR)", EOVERFLOW);
		ibv_ack_async_event(&ev);
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 2;
	struct rc_dev s, t;
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4 * CQE,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp, *tqp;
	struct ibv_cq *cq, *tcq;
	struct ibv_mr *mr, *rmr;
	struct ibv_wc wc[16];
	int r, i, n, ret, want, got;
	uint8_t *seen;
	void *buf, *rbuf;
	double start;

	buf = aligned_alloc(4096, BIG);
	rbuf = aligned_alloc(4096, BIG);
	if (!buf || !rbuf)
		rc_fail("aligned_alloc", ENOMEM);
	memset(buf, 0x5a, BIG);
	rc_prog = "resize_e2e";
	rc_open_dev(&s, "rxe0");
	rc_open_dev(&t, "rxe1");
	if (fcntl(s.ctx->async_fd, F_SETFL,
		  fcntl(s.ctx->async_fd, F_GETFL) | O_NONBLOCK))
		rc_fail("fcntl async_fd", errno);
	mr = ibv_reg_mr(s.pd, buf, BIG, IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(t.pd, rbuf, BIG,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	cq = ibv_create_cq(s.ctx, 4, NULL, NULL, 0);
	tcq = ibv_create_cq(t.ctx, 16, NULL, NULL, 0);
	if (!mr || !rmr || !cq || !tcq)
		rc_fail("reg_mr / create_cq", errno);
	ret = ibv_resize_cq(cq, CQE);
	if (ret)
		rc_fail("ibv_resize_cq", ret);
	want = CQE;
	printf("resize_e2e: asked %d CQEs, cq->cqe says %d\n", CQE, cq->cqe);
	ia.send_cq = ia.recv_cq = cq;
	if ((int)ia.cap.max_send_wr < want + 64)
		ia.cap.max_send_wr = (uint32_t)want + 64;
	qp = ibv_create_qp(s.pd, &ia);
	ia.send_cq = ia.recv_cq = tcq;
	tqp = ibv_create_qp(t.pd, &ia);
	if (!qp || !tqp)
		rc_fail("ibv_create_qp", errno);
	rc_connect(&s, qp, &t, tqp);
	rc_connect(&t, tqp, &s, qp);
	seen = calloc((size_t)want, 1);
	if (!seen)
		rc_fail("calloc", ENOMEM);
	for (r = 0; r < rounds; r++) {
		memset(seen, 0, (size_t)want);
		/* small, large unsignaled (sliced by the layer), small ... */
		rc_post_write(qp, mr, rmr, 0, SMALL, 0, true);
		rc_post_write(qp, mr, rmr, BIG_ID, BIG, 6, false);
		for (i = 1; i < want; i++)
			rc_post_write(qp, mr, rmr, (uint64_t)i, SMALL, 0, true);
		/* no poll: let every WQE posted run and its CQE land */
		usleep(500 * 1000);
		got = 0;
		start = now_s();
		while (got < want) {
			n = ibv_poll_cq(cq, 16, wc);
			if (n < 0)
				rc_fail("ibv_poll_cq", EIO);
			for (i = 0; i < n; i++) {
				if (wc[i].status != IBV_WC_SUCCESS) {
					fprintf(stderr,
						"resize_e2e: wr_id %llu: %s\n",
						(unsigned long long)wc[i].wr_id,
						ibv_wc_status_str(
							wc[i].status));
					rc_fail("a completion failed", EIO);
				}
				if (wc[i].wr_id >= (uint64_t)want ||
				    seen[wc[i].wr_id]++) {
					fprintf(stderr,
						"resize_e2e: wr_id %llu\n",
						(unsigned long long)wc[i]
							.wr_id);
					rc_fail("unknown or repeated wr_id",
						EIO);
				}
			}
			got += n;
			check_async(s.ctx);
			if (now_s() - start > HANG_S) {
				fprintf(stderr,
					"resize_e2e: round %d: %d of %d "
					"completions after %d s\n",
					r, got, want, HANG_S);
				rc_fail("completions lost", ETIMEDOUT);
			}
		}
		check_async(s.ctx);
		printf("resize_e2e: round %d: %d of %d completions, each once, "
		       "success\n",
		       r, got, want);
	}
	ibv_destroy_qp(qp);
	ibv_destroy_qp(tqp);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(tcq);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(rmr);
	rc_close_dev(&s);
	rc_close_dev(&t);
	free(seen);
	free(buf);
	free(rbuf);
	return 0;
}
