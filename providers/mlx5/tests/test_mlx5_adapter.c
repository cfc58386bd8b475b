// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The mlx5 adapter without hardware.  A struct mlx5_qp / mlx5_cq / mlx5_context
 * are built in plain memory: the send queue buffer, the doorbell record, the
 * BlueFlame register and the CQ buffer are ordinary allocations.  The sverbs
 * CQ and QP are made by the glue's own hooks (mlx5_sv_cq_created,
 * mlx5_sv_qp_created), so the adapter is the real one of sverbs_mlx5.c:
 * stock mlx5_post_send (counted through ld's --wrap) and mlx5_poll_cq.
 * Work is posted through sverbs_post_send() and the tests read back what
 * mlx5 wrote: control segments (opcode, WQE index, QP number, DS count,
 * signal bits, immediate), remote address segments, data and inline
 * segments, the doorbell record, the doorbell / BlueFlame writes and the
 * number of rings.  A fake HCA executes the SQ up to the doorbell record and
 * writes requester CQEs for signaled WQEs, which the layer polls through
 * stock mlx5_poll_cq.
 *
 * The configuration is the process-wide one of the glue: set from SVERBS_*
 * variables in main() before the first hook runs (fixed 4 KiB slices, a
 * window that never limits these tests, no size-based priority).
 */
#include <CUnit/Basic.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/sverbs.h>

#include "../../libibverbs/ibverbs.h"
#include "mlx5.h"
#include "wqe.h"
#include "sverbs_fast.h"
#include "sverbs_mlx5.h"
#include "sverbs_sched.h"

#define SL	   4096 /* slice_bytes */
#define WQE_CNT	   128	/* SQ size in 64-byte basic blocks */
#define MAX_POST   64	/* WRs: two BBs per WQE of MAX_SGE SGEs */
#define MAX_SGE	   4
#define MAX_INLINE 64
#define NCQE	   256
#define QPN	   0x0abcde
#define BF_SIZE	   256 /* bf->buf_size: half a 512-byte BlueFlame register */
#define RADDR	   0x7f0012340000ull
#define RKEY	   0x1357
#define LADDR	   0x100000000ull
#define LKEY	   0x2468
#define BF_FILL	   0xa5

/* ------------------------------------------------------------ the fakes */

struct fake {
	struct ibv_device dev;
	struct mlx5_context *ctx;
	struct mlx5_cq *cq;
	struct mlx5_qp *qp;
	struct mlx5_bf bf;
	uint8_t *sq_buf; /* WQE_CNT * MLX5_SEND_WQE_BB */
	__be32 *qp_db;	 /* [MLX5_RCV_DBR], [MLX5_SND_DBR] */
	uint8_t *cq_buf; /* NCQE * 64 */
	__be32 *cq_db;
	uint8_t *bf_reg; /* 2 * BF_SIZE */
	uint32_t hw_sq;	 /* fake HCA: next BB it executes */
	uint32_t hw_cq;	 /* fake HCA: CQEs written */
	int hw_cqes;
	uint32_t uidx; /* CQE version 1: the QP's user index */
};

static struct fake f;
/*
 * The context's CQE version for the next setup(): 0, or 1 as rdma-core asks
 * of every current ConnectX (CQEs name the QP by its user index, not its
 * number; mlx5 polls them with another function)
 */
static int fx_cqe_ver;
/*
 * The next setup()'s QP posts without a lock, as mlx5 makes a QP of a
 * thread domain (mlx5_spinlock_init_pd()) or of a single-threaded context
 */
static bool fx_sq_lockless;

static struct ibv_cq *ibcq(void)
{
	return &f.cq->verbs_cq.cq;
}

static void *xalloc(size_t size)
{
	void *p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	memset(p, 0, size);
	return p;
}

static void fake_cq_init(void)
{
	struct mlx5_cq *cq = calloc(1, sizeof(*cq));
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
	f.cq = cq;
	f.cq_buf = xalloc(NCQE * 64);
	f.cq_db = xalloc(2 * sizeof(__be32));
	for (i = 0; i < NCQE; i++)
		((struct mlx5_cqe64 *)(f.cq_buf + i * 64))->op_own =
			MLX5_CQE_INVALID << 4;
	cq->verbs_cq.cq.context = &f.ctx->ibv_ctx.context;
	cq->verbs_cq.cq.cqe = NCQE - 1; /* as mlx5: the index mask */
	cq->buf_a.buf = f.cq_buf;
	cq->active_buf = &cq->buf_a;
	cq->cqe_sz = 64;
	cq->dbrec = f.cq_db;
	cq->cqn = 0x77;
	mlx5_spinlock_init(&cq->lock, 1);
	/*
	 * as mlx5_create_cq(): the size hook first, which grants the headroom
	 * (the size it returns is not used: the fake CQ's buffer is fixed)
	 */
	mlx5_sv_cq_size(&f.ctx->ibv_ctx.context, NCQE - 1);
	mlx5_sv_cq_created(&cq->verbs_cq.cq_ex, false, 0);
}

static void fake_qp_init(bool sig_all)
{
	struct ibv_qp_init_attr_ex attr = {};
	struct mlx5_qp *qp = calloc(1, sizeof(*qp));
	struct ibv_qp *q;

	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	f.qp = qp;
	q = &qp->verbs_qp.qp;
	f.sq_buf = xalloc(WQE_CNT * MLX5_SEND_WQE_BB);
	f.qp_db = xalloc(2 * sizeof(__be32));
	f.bf_reg = xalloc(2 * BF_SIZE);
	memset(f.bf_reg, BF_FILL, 2 * BF_SIZE);

	q->context = &f.ctx->ibv_ctx.context;
	q->qp_num = QPN;
	q->qp_type = IBV_QPT_RC;
	q->state = IBV_QPS_RTS;
	q->send_cq = ibcq();
	q->recv_cq = ibcq();
	qp->ibv_qp = q;
	qp->rsc.type = MLX5_RSC_TYPE_QP;
	qp->rsc.rsn = QPN;
	qp->buf.buf = f.sq_buf;
	qp->sq_start = f.sq_buf;
	qp->sq.qend = f.sq_buf + WQE_CNT * MLX5_SEND_WQE_BB;
	qp->sq.wqe_cnt = WQE_CNT;
	qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	qp->sq.max_post = MAX_POST;
	qp->sq.max_gs = MAX_SGE;
	qp->sq.qp_state_max_gs = MAX_SGE; /* RTS */
	qp->sq.wrid = calloc(WQE_CNT, sizeof(*qp->sq.wrid));
	qp->sq.wqe_head = calloc(WQE_CNT, sizeof(*qp->sq.wqe_head));
	qp->sq.wr_data = calloc(WQE_CNT, sizeof(*qp->sq.wr_data));
	CU_ASSERT_FATAL(qp->sq.wrid && qp->sq.wqe_head && qp->sq.wr_data);
	mlx5_spinlock_init(&qp->sq.lock, !fx_sq_lockless);
	mlx5_spinlock_init(&qp->rq.lock, 1);
	qp->db = f.qp_db;
	qp->max_inline_data = MAX_INLINE;
	qp->sq_signal_bits = sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;

	f.bf.reg = f.bf_reg;
	f.bf.buf_size = BF_SIZE;
	f.bf.uuarn = 1; /* a BlueFlame-capable register */
	f.bf.need_lock = 0;
	mlx5_spinlock_init(&f.bf.lock, 0);
	qp->bf = &f.bf;
	if (f.ctx->cqe_version) {
		/* as mlx5's create_qp() for a version-1 context */
		int32_t uidx = mlx5_store_uidx(f.ctx, qp);

		CU_ASSERT_FATAL(uidx >= 0);
		f.uidx = (uint32_t)uidx;
		qp->rsc.rsn = f.uidx;
	} else {
		CU_ASSERT_EQUAL_FATAL(mlx5_store_qp(f.ctx, QPN, qp), 0);
	}

	attr.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr.send_cq = ibcq();
	attr.recv_cq = ibcq();
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = sig_all;
	attr.cap.max_send_wr = MAX_POST; /* what mlx5 reports */
	attr.cap.max_send_sge = MAX_SGE;
	attr.cap.max_inline_data = MAX_INLINE;
	mlx5_sv_qp_created(q, &attr);
}

static void setup(bool sig_all, bool prefer_bf)
{
	memset(&f, 0, sizeof(f));
	strcpy(f.dev.name, "mlx5_fake");
	f.ctx = calloc(1, sizeof(*f.ctx));
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.ctx);
	f.ctx->ibv_ctx.context.device = &f.dev;
	/* a verbs_context, as every provider's (verbs_log() of the layer) */
	f.ctx->ibv_ctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	f.ctx->dbg_fp = stderr;
	f.ctx->prefer_bf = prefer_bf;
	f.ctx->shut_up_bf = 0;
	f.ctx->cqe_version = fx_cqe_ver;
	pthread_mutex_init(&f.ctx->uidx_table_mutex, NULL);
	fake_cq_init();
	fake_qp_init(sig_all);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.cq->sv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.qp->sv);
}

static void teardown(void)
{
	sverbs_qp_destroy_pre(f.qp->sv);
	sverbs_qp_destroy_post(f.qp->sv, 0);
	sverbs_cq_destroy(f.cq->sv);
	if (f.ctx->cqe_version)
		mlx5_clear_uidx(f.ctx, f.uidx);
	else
		mlx5_clear_qp(f.ctx, QPN);
	free(f.qp->sq.wrid);
	free(f.qp->sq.wqe_head);
	free(f.qp->sq.wr_data);
	free(f.qp);
	free(f.cq);
	free(f.ctx);
	free(f.sq_buf);
	free(f.qp_db);
	free(f.cq_buf);
	free(f.cq_db);
	free(f.bf_reg);
}

/* ------------------------------------------------------------ WQE access */

/* The n-th 16-byte unit of the WQE that starts at BB bb (wraps at qend). */
static void *seg16(uint32_t bb, unsigned int n)
{
	size_t off = ((size_t)bb * MLX5_SEND_WQE_BB + n * 16) %
		     (WQE_CNT * MLX5_SEND_WQE_BB);

	return f.sq_buf + off;
}

static struct mlx5_wqe_ctrl_seg *ctrl_at(uint32_t bb)
{
	return seg16(bb, 0);
}

static unsigned int ds_of(uint32_t bb)
{
	return be32toh(ctrl_at(bb)->qpn_ds) & 0x3f;
}

static uint32_t bbs_of(uint32_t bb)
{
	return (ds_of(bb) * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
}

static uint8_t mlx5_op(enum ibv_wr_opcode op)
{
	if (op == MLX5_SV_WR_NOP)
		return MLX5_OPCODE_NOP;
	switch (op) {
	case IBV_WR_RDMA_WRITE:
		return MLX5_OPCODE_RDMA_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return MLX5_OPCODE_RDMA_WRITE_IMM;
	case IBV_WR_SEND:
		return MLX5_OPCODE_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return MLX5_OPCODE_SEND_IMM;
	case IBV_WR_RDMA_READ:
		return MLX5_OPCODE_RDMA_READ;
	default:
		return 0xff;
	}
}

/* ------------------------------------------------------------ the adapter */

#define REC_MAX 1024

/* What the layer handed to mlx5_post_send, WQE by WQE. */
struct rec_wr {
	struct ibv_send_wr wr;
	struct ibv_sge sge[MAX_SGE];
	uint32_t bb; /* where mlx5 put its WQE */
	int call;    /* which adapter call carried it */
};

static struct {
	bool count; /* --count: no checks, no records (count_run()) */
	int fails;  /* stock post_send calls expected to fail */
	int calls;  /* rings: adapter post_send calls */
	int n;	    /* WQEs recorded */
	struct rec_wr w[REC_MAX];
} rec;

int __real_mlx5_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr);
int __wrap_mlx5_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr);

/*
 * The adapter's post_send, around the stock one: records the chain, then
 * checks what mlx5 made of it: one WQE per WR at cur_post, the signal bit
 * of each WQE as the WR asked (no sverbs priority bit anywhere), wrid[],
 * the doorbell record (the new producer index) and the doorbell write (the
 * first 8 bytes of the last WQE's control segment, at the current half of
 * the BlueFlame register, which then flips).
 */
static __attribute__((noinline)) int rec_post_send(struct ibv_qp *qp,
						   struct ibv_send_wr *wr,
						   struct ibv_send_wr **bad_wr)
{
	struct mlx5_qp *mqp = to_mqp(qp);
	unsigned int head0 = mqp->sq.head, off0 = mqp->bf->offset;
	uint32_t bb = mqp->sq.cur_post, last = 0;
	struct ibv_send_wr *w;
	int first = rec.n, i, k, ret;
	uint8_t want;

	rec.calls++;
	for (w = wr; w; w = w->next) {
		struct rec_wr *r = &rec.w[rec.n % REC_MAX];

		CU_ASSERT_EQUAL(w->send_flags & SVERBS_PRIO_MASK, 0);
		memset(r, 0, sizeof(*r));
		r->wr = *w;
		r->wr.next = NULL;
		for (i = 0; i < w->num_sge && i < MAX_SGE; i++)
			r->sge[i] = w->sg_list[i];
		r->wr.sg_list = r->sge;
		r->call = rec.calls;
		rec.n++;
	}
	ret = __real_mlx5_post_send(qp, wr, bad_wr);
	if (ret && rec.fails) {
		rec.fails--;
		rec.n = first;
		return ret;
	}
	CU_ASSERT_EQUAL(ret, 0);
	if (ret)
		return ret;

	CU_ASSERT_EQUAL(mqp->sq.head - head0, (unsigned int)(rec.n - first));
	for (k = first; k < rec.n; k++) {
		struct rec_wr *r = &rec.w[k % REC_MAX];
		struct mlx5_wqe_ctrl_seg *c = ctrl_at(bb);
		unsigned int idx = bb & (WQE_CNT - 1);

		r->bb = bb;
		want = (r->wr.send_flags & IBV_SEND_SIGNALED) ||
				       mqp->sq_signal_bits
			       ? MLX5_WQE_CTRL_CQ_UPDATE
			       : 0;
		CU_ASSERT_EQUAL(c->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE, want);
		CU_ASSERT_EQUAL(be32toh(c->opmod_idx_opcode),
				((bb & 0xffff) << 8) | mlx5_op(r->wr.opcode));
		CU_ASSERT_EQUAL(be32toh(c->qpn_ds) >> 8, QPN);
		CU_ASSERT_EQUAL(mqp->sq.wrid[idx], r->wr.wr_id);
		CU_ASSERT_EQUAL(mqp->sq.wqe_head[idx],
				head0 + (unsigned int)(k - first));
		last = bb;
		bb += bbs_of(bb);
	}
	CU_ASSERT_EQUAL(mqp->sq.cur_post, bb);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR],
			htobe32(mqp->sq.cur_post & 0xffff));
	CU_ASSERT_EQUAL(memcmp(f.bf_reg + off0, ctrl_at(last), 8), 0);
	CU_ASSERT_EQUAL(mqp->bf->offset, off0 ^ BF_SIZE);
	return ret;
}

/* --count: straight to mlx5, counting the rings (the adapter's calls) */
int __wrap_mlx5_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr)
{
	if (rec.count) {
		rec.calls++;
		return __real_mlx5_post_send(qp, wr, bad_wr);
	}
	return rec_post_send(qp, wr, bad_wr);
}

/* ------------------------------------------------------------ helpers */

static int post_chain(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	return sverbs_post_send(f.qp->sv, wr, &bad);
}

static void mkwr(struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t id,
		 enum ibv_wr_opcode op, uint32_t len, unsigned int flags)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = LADDR + id * 0x100000;
	sge->length = len;
	sge->lkey = LKEY;
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = flags;
	wr->wr.rdma.remote_addr = RADDR + id * 0x100000;
	wr->wr.rdma.rkey = RKEY;
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND_WITH_IMM)
		wr->imm_data = htobe32(0xfeed0000 | (uint32_t)id);
}

static void check_ctrl(uint32_t bb, uint8_t opcode, unsigned int ds,
		       uint8_t fm_ce_se, __be32 imm)
{
	struct mlx5_wqe_ctrl_seg *c = ctrl_at(bb);

	CU_ASSERT_EQUAL(be32toh(c->opmod_idx_opcode),
			((bb & 0xffff) << 8) | opcode);
	CU_ASSERT_EQUAL(be32toh(c->qpn_ds), ((uint32_t)QPN << 8) | ds);
	CU_ASSERT_EQUAL(c->fm_ce_se, fm_ce_se);
	CU_ASSERT_EQUAL(c->imm, imm);
	CU_ASSERT_EQUAL(c->signature, 0);
}

static void check_raddr(uint32_t bb, uint64_t addr, uint32_t rkey)
{
	struct mlx5_wqe_raddr_seg *r = seg16(bb, 1);

	CU_ASSERT_EQUAL(be64toh(r->raddr), addr);
	CU_ASSERT_EQUAL(be32toh(r->rkey), rkey);
}

static void check_dseg(uint32_t bb, unsigned int n, uint64_t addr, uint32_t len,
		       uint32_t lkey)
{
	struct mlx5_wqe_data_seg *d = seg16(bb, n);

	CU_ASSERT_EQUAL(be64toh(d->addr), addr);
	CU_ASSERT_EQUAL(be32toh(d->byte_count), len);
	CU_ASSERT_EQUAL(be32toh(d->lkey), lkey);
}

static void reset_rec(void)
{
	memset(&rec, 0, sizeof(rec));
}

/* ------------------------------------------------------------ slicing */

/*
 * A signaled WRITE of 3 slices + 100 bytes, with a priority: one ring, four
 * WQEs at BBs 0..3, remote and local addresses advancing by the slice, only
 * the last slice signaled, no priority bit in any WQE.
 */
static void test_write_slices(void)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	uint32_t k, len;

	setup(false, false);
	reset_rec();
	mkwr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, 3 * SL + 100,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(6));
	CU_ASSERT_EQUAL(post_chain(&wr), 0);

	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 4);
	for (k = 0; k < 4; k++) {
		len = k < 3 ? SL : 100;
		CU_ASSERT_EQUAL(rec.w[k].bb, k);
		check_ctrl(k, MLX5_OPCODE_RDMA_WRITE, 3,
			   k == 3 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
		check_raddr(k, wr.wr.rdma.remote_addr + k * SL, RKEY);
		check_dseg(k, 2, sge.addr + k * SL, len, LKEY);
		/* the layer's own wr_ids, one per WQE, in order */
		CU_ASSERT_EQUAL(f.qp->sq.wrid[k], rec.w[0].wr.wr_id + k);
	}
	CU_ASSERT_NOT_EQUAL(f.qp->sq.wrid[3], 1);
	CU_ASSERT_EQUAL(f.qp->sq.cur_post, 4);
	CU_ASSERT_EQUAL(f.qp->sq.head, 4);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR], htobe32(4));
	/* a chain: the 8-byte doorbell of WQE 3, nothing else in the BF */
	CU_ASSERT_EQUAL(memcmp(f.bf_reg, ctrl_at(3), 8), 0);
	CU_ASSERT_EQUAL(f.bf_reg[8], BF_FILL);
	CU_ASSERT_EQUAL(f.bf.offset, BF_SIZE);
	teardown();
}

/*
 * A READ over three SGEs (1000 + 5000 + 3000 bytes): the slices straddle
 * the SGEs, so the first two WQEs carry two data segments each.
 */
static void test_read_multi_sge(void)
{
	struct ibv_sge sge[3] = {
		{ .addr = 0x10000, .length = 1000, .lkey = 11 },
		{ .addr = 0x200000, .length = 5000, .lkey = 22 },
		{ .addr = 0x3000000, .length = 3000, .lkey = 33 },
	};
	struct ibv_send_wr wr = {
		.wr_id = 7,
		.sg_list = sge,
		.num_sge = 3,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = RADDR, .rkey = RKEY },
	};

	setup(false, false);
	reset_rec();
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 3);

	/* slice 0: sge0 whole + 3096 of sge1 */
	check_ctrl(0, MLX5_OPCODE_RDMA_READ, 4, 0, 0);
	check_raddr(0, RADDR, RKEY);
	check_dseg(0, 2, 0x10000, 1000, 11);
	check_dseg(0, 3, 0x200000, 3096, 22);
	/* slice 1: the rest of sge1 (1904) + 2192 of sge2 */
	check_ctrl(1, MLX5_OPCODE_RDMA_READ, 4, 0, 0);
	check_raddr(1, RADDR + SL, RKEY);
	check_dseg(1, 2, 0x200000 + 3096, 1904, 22);
	check_dseg(1, 3, 0x3000000, 2192, 33);
	/* slice 2: the last 808 bytes of sge2, signaled */
	check_ctrl(2, MLX5_OPCODE_RDMA_READ, 3, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	check_raddr(2, RADDR + 2 * SL, RKEY);
	check_dseg(2, 2, 0x3000000 + 2192, 808, 33);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR], htobe32(3));
	teardown();
}

/*
 * WRITE_WITH_IMM cut in three: only the last WQE is WRITE_IMM and carries
 * the immediate; the others are plain WRITEs.  The application did not ask
 * for a completion: the last slice is signaled anyway (the layer must see
 * the WR retire), the others are not.
 */
static void test_write_imm(void)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	setup(false, false);
	reset_rec();
	mkwr(&wr, &sge, 3, IBV_WR_RDMA_WRITE_WITH_IMM, 2 * SL + 1, 0);
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 3);
	check_ctrl(0, MLX5_OPCODE_RDMA_WRITE, 3, 0, 0);
	check_ctrl(1, MLX5_OPCODE_RDMA_WRITE, 3, 0, 0);
	check_ctrl(2, MLX5_OPCODE_RDMA_WRITE_IMM, 3, MLX5_WQE_CTRL_CQ_UPDATE,
		   wr.imm_data);
	check_raddr(2, wr.wr.rdma.remote_addr + 2 * SL, RKEY);
	check_dseg(2, 2, sge.addr + 2 * SL, 1, LKEY);
	teardown();
}

/* ------------------------------------------------------------ chains */

/*
 * Three WRs in one ibv_post_send: an unsignaled small WRITE, a signaled
 * SEND (not sliced: 8 KiB in one WQE), an unsignaled 2-slice WRITE.  One
 * ring for the four WQEs; the doorbell record is 4 and the register got
 * the 8-byte doorbell of the last WQE.
 */
static void test_one_chain_one_ring(void)
{
	struct ibv_send_wr wr[3];
	struct ibv_sge sge[3];

	setup(false, false);
	reset_rec();
	mkwr(&wr[0], &sge[0], 1, IBV_WR_RDMA_WRITE, 100, 0);
	mkwr(&wr[1], &sge[1], 2, IBV_WR_SEND, 2 * SL, IBV_SEND_SIGNALED);
	mkwr(&wr[2], &sge[2], 3, IBV_WR_RDMA_WRITE, 2 * SL, 0);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	CU_ASSERT_EQUAL(post_chain(wr), 0);

	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 4);
	CU_ASSERT(rec.w[0].call == 1 && rec.w[3].call == 1);
	check_ctrl(0, MLX5_OPCODE_RDMA_WRITE, 3, 0, 0);
	check_raddr(0, wr[0].wr.rdma.remote_addr, RKEY);
	check_dseg(0, 2, sge[0].addr, 100, LKEY);
	check_ctrl(1, MLX5_OPCODE_SEND, 2, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	check_dseg(1, 1, sge[1].addr, 2 * SL, LKEY);
	check_ctrl(2, MLX5_OPCODE_RDMA_WRITE, 3, 0, 0);
	check_raddr(2, wr[2].wr.rdma.remote_addr, RKEY);
	check_dseg(2, 2, sge[2].addr, SL, LKEY);
	check_ctrl(3, MLX5_OPCODE_RDMA_WRITE, 3, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	check_raddr(3, wr[2].wr.rdma.remote_addr + SL, RKEY);
	check_dseg(3, 2, sge[2].addr + SL, SL, LKEY);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR], htobe32(4));
	CU_ASSERT_EQUAL(memcmp(f.bf_reg, ctrl_at(3), 8), 0);
	teardown();
}

/*
 * Priorities: a low-priority 3-slice WRITE and a high-priority SEND in one
 * post.  The SEND's WQE comes first; the levels show only in the order,
 * never in the WQEs (fm_ce_se holds exactly the signal bit).
 */
static void test_priority_order(void)
{
	struct ibv_send_wr wr[2];
	struct ibv_sge sge[2];
	uint32_t k;

	setup(false, false);
	reset_rec();
	mkwr(&wr[0], &sge[0], 1, IBV_WR_RDMA_WRITE, 3 * SL,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(7));
	mkwr(&wr[1], &sge[1], 2, IBV_WR_SEND, 64,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(0));
	wr[0].next = &wr[1];
	CU_ASSERT_EQUAL(post_chain(wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 4);
	check_ctrl(0, MLX5_OPCODE_SEND, 2, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	check_dseg(0, 1, sge[1].addr, 64, LKEY);
	for (k = 1; k < 4; k++) {
		check_ctrl(k, MLX5_OPCODE_RDMA_WRITE, 3,
			   k == 3 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 0);
		check_raddr(k, RADDR + 0x100000 + (k - 1) * SL, RKEY);
	}
	teardown();
}

/*
 * Issue 16.2: mlx5 returns ENOMEM for a WR posted while the QP is not in RTS
 * (qp_state_max_gs is -1), which is not "send queue full".  With a signaled
 * WQE of the layer in flight, a "full" WR would stay queued for the next
 * completion (and, refused again and again, never complete): the adapter's
 * sq_full says it is not full, so the post fails at once with ENOMEM and
 * bad_wr at the WR, as stock.  In RTS the same WR goes.
 */
static void test_not_rts_refused(void)
{
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3];

	setup(false, false);
	reset_rec();
	mkwr(&wr[0], &sge[0], 1, IBV_WR_SEND, 64,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	CU_ASSERT_EQUAL(post_chain(&wr[0]), 0);
	CU_ASSERT_EQUAL(f.qp->sq.head, 1);
	f.qp->sq.qp_state_max_gs = -1; /* e.g. back through RESET */
	mkwr(&wr[1], &sge[1], 2, IBV_WR_SEND, 64,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	mkwr(&wr[2], &sge[2], 3, IBV_WR_SEND, 64,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	wr[1].next = &wr[2];
	rec.fails = 1;
	CU_ASSERT_EQUAL(sverbs_post_send(f.qp->sv, &wr[1], &bad), ENOMEM);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL(f.qp->sq.head, 1);
	f.qp->sq.qp_state_max_gs = MAX_SGE; /* RTS */
	rec.fails = 0;
	CU_ASSERT_EQUAL(post_chain(&wr[1]), 0);
	CU_ASSERT_EQUAL(f.qp->sq.head, 3);
	teardown();
}

/*
 * A WR beyond the QP's limits (more SGEs than max_send_sge, more inline data
 * than max_inline_data) fails the post with the errno stock mlx5_post_send
 * gives the same WR (ENOMEM), bad_wr at it, nothing written.
 */
static void test_limits_stock_errno(void)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge[MAX_SGE + 1];
	static uint8_t data[MAX_INLINE + 1];
	int i, stock;

	setup(false, false);
	reset_rec();
	mkwr(&wr, &sge[0], 1, IBV_WR_SEND, 64, IBV_SEND_SIGNALED);
	for (i = 1; i <= MAX_SGE; i++)
		sge[i] = sge[0];
	wr.num_sge = MAX_SGE + 1;
	rec.fails = 1;
	stock = __real_mlx5_post_send(&f.qp->verbs_qp.qp, &wr, &bad);
	rec.fails = 0;
	CU_ASSERT_EQUAL(stock, ENOMEM);
	bad = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(f.qp->sv, &wr, &bad), stock);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	wr.num_sge = 1;
	sge[0].addr = (uintptr_t)data;
	sge[0].length = MAX_INLINE + 1;
	wr.send_flags |= IBV_SEND_INLINE;
	stock = __real_mlx5_post_send(&f.qp->verbs_qp.qp, &wr, &bad);
	CU_ASSERT_EQUAL(stock, ENOMEM);
	bad = NULL;
	CU_ASSERT_EQUAL(sverbs_post_send(f.qp->sv, &wr, &bad), stock);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	CU_ASSERT_EQUAL(f.qp->sq.head, 0);
	CU_ASSERT_EQUAL(rec.calls, 0);
	teardown();
}

/* sq_sig_all: mlx5's sq_signal_bits put CQ_UPDATE in every WQE. */
static void test_sig_all(void)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	uint32_t k;

	setup(true, false);
	reset_rec();
	mkwr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, 3 * SL, 0);
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 3);
	for (k = 0; k < 3; k++)
		check_ctrl(k, MLX5_OPCODE_RDMA_WRITE, 3,
			   MLX5_WQE_CTRL_CQ_UPDATE, 0);
	teardown();
}

/* ------------------------------------------------------------ BlueFlame */

/*
 * A lone small WR still goes by BlueFlame: an inline SEND (prefer_bf off)
 * is copied whole (64 bytes) into the register's current half; a lone
 * non-inline WRITE then only rings the 8-byte doorbell in the other half;
 * with prefer_bf the same WRITE is copied too.
 */
static void test_blueflame(void)
{
	uint8_t data[20], *half;
	struct mlx5_wqe_inline_seg *inl;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int i;

	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (uint8_t)(0x30 + i);
	setup(false, false);
	reset_rec();

	/* inline SEND: ctrl + 4-byte inline header + 20 bytes = 3 DS */
	mkwr(&wr, &sge, 1, IBV_WR_SEND, sizeof(data),
	     IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	sge.addr = (uintptr_t)data;
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_EQUAL_FATAL(rec.n, 1);
	check_ctrl(0, MLX5_OPCODE_SEND, 3, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	inl = seg16(0, 1);
	CU_ASSERT_EQUAL(be32toh(inl->byte_count),
			sizeof(data) | MLX5_INLINE_SEG);
	CU_ASSERT_EQUAL(memcmp(inl + 1, data, sizeof(data)), 0);
	CU_ASSERT_EQUAL(memcmp(f.bf_reg, ctrl_at(0), 64), 0);
	CU_ASSERT_EQUAL(f.bf_reg[64], BF_FILL);
	CU_ASSERT_EQUAL(f.bf_reg[BF_SIZE], BF_FILL);
	CU_ASSERT_EQUAL(f.bf.offset, BF_SIZE);

	/* lone WRITE, not inline, prefer_bf off: doorbell only */
	mkwr(&wr, &sge, 2, IBV_WR_RDMA_WRITE, 512, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 2);
	half = f.bf_reg + BF_SIZE;
	check_ctrl(1, MLX5_OPCODE_RDMA_WRITE, 3, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	CU_ASSERT_EQUAL(memcmp(half, ctrl_at(1), 8), 0);
	CU_ASSERT_EQUAL(half[8], BF_FILL);
	CU_ASSERT_EQUAL(half[63], BF_FILL);
	CU_ASSERT_EQUAL(f.bf.offset, 0);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR], htobe32(2));

	/* prefer_bf: the lone WRITE is copied whole into half 0 */
	f.ctx->prefer_bf = 1;
	memset(f.bf_reg, BF_FILL, 2 * BF_SIZE);
	mkwr(&wr, &sge, 3, IBV_WR_RDMA_WRITE, 512, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 3);
	CU_ASSERT_EQUAL(memcmp(f.bf_reg, ctrl_at(2), 64), 0);
	CU_ASSERT_EQUAL(f.bf_reg[64], BF_FILL);
	CU_ASSERT_EQUAL(f.bf.offset, BF_SIZE);

	/* prefer_bf, but a chain (a 2-slice WRITE): doorbell only */
	memset(f.bf_reg, BF_FILL, 2 * BF_SIZE);
	mkwr(&wr, &sge, 4, IBV_WR_RDMA_WRITE, 2 * SL, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL(rec.calls, 4);
	half = f.bf_reg + BF_SIZE;
	CU_ASSERT_EQUAL(memcmp(half, ctrl_at(4), 8), 0);
	CU_ASSERT_EQUAL(half[8], BF_FILL);
	CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR], htobe32(5));
	teardown();
}

/* ------------------------------------------------------------ completions */

/*
 * The fake HCA: execute the SQ up to the doorbell record.  Each WQE's index
 * must be where it sits; a signaled one produces a requester CQE (opcode,
 * QP number, WQE counter) with the owner bit of the CQ's current pass.
 */
static void hw_run_n(uint32_t max)
{
	uint32_t prod = be32toh(f.qp_db[MLX5_SND_DBR]);
	struct mlx5_cqe64 *cqe, tmp;
	struct mlx5_wqe_ctrl_seg *c;
	uint32_t op_idx;

	for (; max && (f.hw_sq & 0xffff) != prod; max--) {
		c = ctrl_at(f.hw_sq);
		op_idx = be32toh(c->opmod_idx_opcode);
		CU_ASSERT_EQUAL_FATAL((op_idx >> 8) & 0xffff, f.hw_sq & 0xffff);
		CU_ASSERT_EQUAL_FATAL(be32toh(c->qpn_ds) >> 8, QPN);
		CU_ASSERT_FATAL(ds_of(f.hw_sq) >= 2 ||
				(op_idx & 0xff) == MLX5_OPCODE_NOP);
		if (c->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) {
			cqe = (struct mlx5_cqe64 *)(f.cq_buf +
						    (f.hw_cq & (NCQE - 1)) *
							    64);
			memset(&tmp, 0, sizeof(tmp));
			tmp.sop_drop_qpn = htobe32((op_idx & 0xff) << 24 | QPN);
			tmp.srqn_uidx = htobe32(f.uidx);
			tmp.wqe_counter = htobe16(f.hw_sq & 0xffff);
			tmp.op_own = MLX5_CQE_INVALID << 4;
			memcpy(cqe, &tmp, sizeof(tmp));
			udma_to_device_barrier();
			cqe->op_own =
				MLX5_CQE_REQ << 4 |
				((f.hw_cq & NCQE) ? MLX5_CQE_OWNER_MASK : 0);
			f.hw_cq++;
			f.hw_cqes++;
		}
		f.hw_sq += bbs_of(f.hw_sq);
	}
}

static void hw_run(void)
{
	hw_run_n(UINT32_MAX);
}

static int poll_all(struct ibv_wc *wc, int max)
{
	int n, tot = 0;

	do {
		n = sverbs_poll_cq(f.cq->sv, max - tot, wc + tot);
		CU_ASSERT_FATAL(n >= 0);
		tot += n;
	} while (n > 0 && tot < max);
	return tot;
}

/*
 * 16.6: the no-op the layer posts (here after an unsignaled tail when the QP
 * goes to ERR, so that a completion retires it; a refused WR's placeholder
 * is the same) is mlx5's NOP WQE: the control segment only (1 DS),
 * signaled, no remote address, no data; the fake HCA's CQE for it retires
 * the tail through stock mlx5_poll_cq, and mlx5's SQ tail follows.
 */
static void test_err_nop(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[4];

	setup(false, false);
	reset_rec();
	mkwr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, 512, SVERBS_PRIO(3));
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL_FATAL(f.qp->sq.head, 1);
	CU_ASSERT_FATAL(!(ctrl_at(0)->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE));
	sverbs_qp_modify_post(f.qp->sv, &attr, IBV_QP_STATE, 0);
	CU_ASSERT_EQUAL_FATAL(f.qp->sq.head, 2);
	CU_ASSERT_EQUAL_FATAL(rec.n, 2);
	CU_ASSERT_EQUAL(rec.w[1].wr.opcode, MLX5_SV_WR_NOP);
	CU_ASSERT_EQUAL(rec.w[1].wr.num_sge, 0);
	check_ctrl(1, MLX5_OPCODE_NOP, 1, MLX5_WQE_CTRL_CQ_UPDATE, 0);
	CU_ASSERT_EQUAL(f.qp->sq.cur_post, 2);
	hw_run();
	CU_ASSERT_EQUAL(f.hw_cqes, 1);
	/* the unsignaled WRITE reports nothing; both WQEs are retired */
	CU_ASSERT_EQUAL(poll_all(wc, 4), 0);
	CU_ASSERT_EQUAL(f.qp->sq.tail, 2);
	teardown();
}

/*
 * The layer's private opcode is the layer's alone: an application that
 * posts MLX5_SV_WR_NOP itself, to stock mlx5_post_send (as in pass-through
 * or with the layer off), gets stock's EINVAL, not a NOP WQE (before: a
 * NOP, whoever posted it).
 */
static void test_nop_opcode_private(void)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;

	setup(false, false);
	reset_rec();
	mkwr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, 0, 0);
	wr.opcode = MLX5_SV_WR_NOP;
	wr.num_sge = 0;
	wr.send_flags = IBV_SEND_SIGNALED;
	CU_ASSERT_EQUAL(__real_mlx5_post_send(&f.qp->verbs_qp.qp, &wr, &bad),
			EINVAL);
	CU_ASSERT_PTR_EQUAL(bad, &wr);
	CU_ASSERT_EQUAL(f.qp->sq.head, 0);
	teardown();
}

/*
 * The fake HCA: a responder error CQE (a receive flushed) for the receive
 * WQE wqe_counter of the QP, as the hardware writes one.
 */
static void hw_resp_err(uint16_t wqe_counter)
{
	struct mlx5_cqe64 *cqe, tmp;
	struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)&tmp;

	cqe = (struct mlx5_cqe64 *)(f.cq_buf + (f.hw_cq & (NCQE - 1)) * 64);
	memset(&tmp, 0, sizeof(tmp));
	e->syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
	e->s_wqe_opcode_qpn = htobe32(QPN);
	e->srqn = htobe32(f.uidx);
	e->wqe_counter = htobe16(wqe_counter);
	e->op_own = MLX5_CQE_INVALID << 4;
	memcpy(cqe, &tmp, sizeof(tmp));
	udma_to_device_barrier();
	cqe->op_own = MLX5_CQE_RESP_ERR << 4 |
		      ((f.hw_cq & NCQE) ? MLX5_CQE_OWNER_MASK : 0);
	f.hw_cq++;
}

/*
 * 16.9: a receive completion in error whose wr_id (the application's) is
 * the layer's internal wr_id of a WQE in flight, on the CQ the QP uses for
 * both sides: patched mlx5 gives it opcode IBV_WC_RECV, the adapter says
 * it is a receive, and the layer hands it on untouched, whatever its
 * wr_id; the layer's WQE completes later, as usual.
 */
static void test_recv_err_internal_wr_id(void)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[4];
	uint64_t base;

	setup(false, false);
	reset_rec();
	f.qp->rq.wqe_cnt = 8;
	f.qp->rq.wrid = calloc(8, sizeof(*f.qp->rq.wrid));
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.qp->rq.wrid);
	mkwr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, 512,
	     IBV_SEND_SIGNALED | SVERBS_PRIO(3));
	CU_ASSERT_EQUAL(post_chain(&wr), 0);
	CU_ASSERT_EQUAL_FATAL(rec.n, 1);
	base = rec.w[0].wr.wr_id; /* the layer's wr_id of its WQE */
	CU_ASSERT(base != 1);
	f.qp->rq.wrid[0] = base; /* the application's receive: the same */
	hw_resp_err(0);
	CU_ASSERT_EQUAL_FATAL(poll_all(wc, 4), 1);
	CU_ASSERT(wc[0].wr_id == base && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		  wc[0].opcode == IBV_WC_RECV && wc[0].qp_num == QPN);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(poll_all(wc, 4), 1);
	CU_ASSERT(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	free(f.qp->rq.wrid);
	f.qp->rq.wrid = NULL;
	teardown();
}

/*
 * Rounds of three WRs (an unsignaled WRITE, a signaled 4-SGE SEND of two
 * BBs, a signaled 3-slice WRITE): 6 BBs a round, so in round 21 the SEND
 * starts in the last BB and its data segments wrap to the start of the SQ;
 * 300 CQEs wrap the 256-entry CQ.  Each round is one ring; the fake HCA
 * executes it and writes CQEs; sverbs_poll_cq() (through mlx5_poll_cq) returns
 * one completion per signaled WR with its own wr_id, and mlx5's SQ tail
 * follows, so the SQ never overflows.
 */
#define ROUNDS 150

static void test_completions_wrap(void)
{
	struct ibv_sge s4[4] = {
		{ .addr = 0x5000, .length = 50, .lkey = 5 },
		{ .addr = 0x6000, .length = 60, .lkey = 6 },
		{ .addr = 0x7000, .length = 70, .lkey = 7 },
		{ .addr = 0x8000, .length = 80, .lkey = 8 },
	};
	struct ibv_send_wr wr[3];
	struct ibv_sge sge[3];
	struct ibv_wc wc[8];
	uint32_t send_bb;
	bool wrapped = false;
	int r, n, calls;

	setup(false, false);
	reset_rec();
	for (r = 0; r < ROUNDS; r++) {
		mkwr(&wr[0], &sge[0], r * 10 + 1, IBV_WR_RDMA_WRITE, 100, 0);
		mkwr(&wr[1], &sge[1], r * 10 + 2, IBV_WR_SEND, 0,
		     IBV_SEND_SIGNALED);
		wr[1].sg_list = s4;
		wr[1].num_sge = 4;
		mkwr(&wr[2], &sge[2], r * 10 + 3, IBV_WR_RDMA_WRITE, 2 * SL + 7,
		     IBV_SEND_SIGNALED);
		wr[0].next = &wr[1];
		wr[1].next = &wr[2];
		calls = rec.calls;
		CU_ASSERT_EQUAL_FATAL(post_chain(wr), 0);
		CU_ASSERT_EQUAL(rec.calls, calls + 1);
		CU_ASSERT_EQUAL(f.qp_db[MLX5_SND_DBR],
				htobe32((uint32_t)(r + 1) * 6));

		/* the SEND: ctrl + 4 data segments = 5 DS, two BBs */
		send_bb = rec.w[(rec.n - 4) % REC_MAX].bb;
		CU_ASSERT_EQUAL(send_bb, (uint32_t)r * 6 + 1);
		check_ctrl(send_bb, MLX5_OPCODE_SEND, 5,
			   MLX5_WQE_CTRL_CQ_UPDATE, 0);
		check_dseg(send_bb, 1, 0x5000, 50, 5);
		check_dseg(send_bb, 2, 0x6000, 60, 6);
		check_dseg(send_bb, 3, 0x7000, 70, 7);
		check_dseg(send_bb, 4, 0x8000, 80, 8);
		if ((send_bb & (WQE_CNT - 1)) + bbs_of(send_bb) > WQE_CNT)
			wrapped = true;

		hw_run();
		n = poll_all(wc, 8);
		CU_ASSERT_EQUAL_FATAL(n, 2);
		CU_ASSERT_EQUAL(wc[0].wr_id, (uint64_t)r * 10 + 2);
		CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc[0].opcode, IBV_WC_SEND);
		CU_ASSERT_EQUAL(wc[0].byte_len, 260);
		CU_ASSERT_EQUAL(wc[0].qp_num, QPN);
		CU_ASSERT_EQUAL(wc[1].wr_id, (uint64_t)r * 10 + 3);
		CU_ASSERT_EQUAL(wc[1].status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc[1].opcode, IBV_WC_RDMA_WRITE);
		CU_ASSERT_EQUAL(wc[1].byte_len, 2 * SL + 7);
		CU_ASSERT_EQUAL(wc[1].qp_num, QPN);
		/* everything retired: mlx5's tail caught up */
		CU_ASSERT_EQUAL(f.qp->sq.tail, f.qp->sq.head);
		CU_ASSERT_EQUAL(f.cq_db[MLX5_CQ_SET_CI],
				htobe32(f.cq->cons_index & 0xffffff));
	}
	CU_ASSERT(wrapped);
	CU_ASSERT_EQUAL(f.hw_sq, ROUNDS * 6);
	CU_ASSERT_EQUAL(f.hw_cqes, ROUNDS * 2); /* the SEND, the last slice */
	CU_ASSERT_EQUAL(rec.calls, ROUNDS);
	CU_ASSERT(f.cq->cons_index > NCQE); /* the CQ wrapped too */
	teardown();
}

/* ------------------------------------------------------------ the glue */

/*
 * test_mlx5_adapter --glue: the context's entry points (mlx5_sv_ops(): mlx5's
 * own post_send and poll_cq with the layer's tests inside, patch 0003) with
 * the QP in pass-through (the default configuration): mlx5 builds the
 * application's WRs itself, with their wr_ids, no call to the adapter, until
 * a WR states a priority: that one and the rest of its list go to the layer
 * (its queue, internal wr_ids at the hardware, through the adapter's
 * mlx5_post_send) after the WRs before it went as stock, and the
 * completions come back with the application's wr_ids.
 */
static bool glue_pt(void)
{
	return atomic_load(&((struct sverbs_qp_fast *)f.qp->sv)->pt);
}

/* The wr_id mlx5 keeps for the WQE k posts before its producer index. */
static uint64_t glue_wrid(unsigned int back)
{
	return f.qp->sq.wrid[(f.qp->sq.cur_post - back) & (WQE_CNT - 1)];
}

static void glue_passthrough(int cqe_ver)
{
	const struct verbs_context_ops *ops = mlx5_sv_ops();
	int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
	struct ibv_qp *qp;
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3];
	struct ibv_wc wc[4];
	unsigned int head;
	int n, k;

	/* the context's poll entry for its version (the next test checks it) */
	poll_cq = cqe_ver ? mlx5_sv_poll_cq_v1 : ops->poll_cq;
	fx_cqe_ver = cqe_ver;
	setup(false, false);
	fx_cqe_ver = 0;
	reset_rec();
	qp = &f.qp->verbs_qp.qp;
	CU_ASSERT_TRUE_FATAL(glue_pt());
	mkwr(&wr[0], &sge[0], 11, IBV_WR_RDMA_WRITE, 64, 0);
	mkwr(&wr[1], &sge[1], 12, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	wr[0].next = &wr[1];
	head = f.qp->sq.head;
	CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, wr, &bad), 0);
	/* mlx5 built the application's chain itself: no adapter call */
	CU_ASSERT_EQUAL(rec.calls, 0);
	CU_ASSERT_EQUAL(f.qp->sq.head - head, 2);
	CU_ASSERT_EQUAL(glue_wrid(2), 11);
	CU_ASSERT_EQUAL(glue_wrid(1), 12);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(poll_cq(ibcq(), 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 12);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_TRUE(glue_pt());

	/*
	 * A stated priority in the middle of a list: the WR before it goes
	 * as stock, it and the rest to the layer's queue, from now on.
	 */
	mkwr(&wr[0], &sge[0], 21, IBV_WR_RDMA_WRITE, 64, 0);
	mkwr(&wr[1], &sge[1], 22, IBV_WR_RDMA_WRITE, 64,
	     SVERBS_PRIO(3) | IBV_SEND_SIGNALED);
	mkwr(&wr[2], &sge[2], 23, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	head = f.qp->sq.head;
	CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, wr, &bad), 0);
	CU_ASSERT_FALSE(glue_pt());
	/* 21 by mlx5 itself, then 22 through the adapter, internal wr_id */
	CU_ASSERT_EQUAL_FATAL(rec.n, 1);
	CU_ASSERT_EQUAL(rec.w[0].bb, head + 1);
	CU_ASSERT_EQUAL(f.qp->sq.wrid[head & (WQE_CNT - 1)], 21);
	CU_ASSERT_NOT_EQUAL(rec.w[0].wr.wr_id, 22);
	/*
	 * 23 waits for 22's completion (one WQE of the layer's in flight
	 * while pass-through's may still be ahead of it)
	 */
	for (n = 0, k = 0; n < 2 && k < 8; k++) {
		hw_run();
		n += poll_cq(ibcq(), 4 - n, wc + n);
	}
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL_FATAL(rec.n, 2);
	CU_ASSERT_NOT_EQUAL(rec.w[1].wr.wr_id, 23);
	CU_ASSERT_EQUAL(wc[0].wr_id, 22);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[1].wr_id, 23);
	CU_ASSERT_EQUAL(wc[1].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(poll_cq(ibcq(), 4, wc), 0);

	/* out of pass-through, a plain WR takes the queue too */
	mkwr(&wr[0], &sge[0], 31, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, wr, &bad), 0);
	CU_ASSERT_EQUAL_FATAL(rec.n, 3);
	CU_ASSERT_NOT_EQUAL(rec.w[2].wr.wr_id, 31);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(poll_cq(ibcq(), 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 31);
	teardown();
}

static void test_glue_passthrough(void)
{
	glue_passthrough(0);
}

/*
 * The same with a CQE-version-1 context: the pass-through poll is
 * mlx5_sv_poll_cq_v1 (mlx5's version-1 parse, the QP found by its user
 * index), and so is the adapter's once the layer polls.
 */
static void test_glue_passthrough_v1(void)
{
	glue_passthrough(1);
}

/*
 * A wr_id of the layer's range fails in pass-through as in the queue: the
 * WRs before it go as stock, it is the bad WR, nothing after it is posted.
 */
static void test_glue_reserved_wr_id(void)
{
	const struct verbs_context_ops *ops = mlx5_sv_ops();
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3];
	struct ibv_wc wc[4];
	unsigned int head;

	setup(false, false);
	reset_rec();
	mkwr(&wr[0], &sge[0], 41, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	mkwr(&wr[1], &sge[1], SVERBS_WR_ID_RESERVED_MIN + 5, IBV_WR_RDMA_WRITE,
	     64, IBV_SEND_SIGNALED);
	mkwr(&wr[2], &sge[2], 43, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	head = f.qp->sq.head;
	CU_ASSERT_NOT_EQUAL(ops->post_send(&f.qp->verbs_qp.qp, wr, &bad), 0);
	CU_ASSERT_PTR_EQUAL(bad, &wr[1]);
	CU_ASSERT_EQUAL(f.qp->sq.head - head, 1);
	CU_ASSERT_EQUAL(glue_wrid(1), 41);
	CU_ASSERT_EQUAL(rec.n, 0);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(ops->poll_cq(ibcq(), 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 41);
	CU_ASSERT_EQUAL(ops->poll_cq(ibcq(), 4, wc), 0);
	teardown();
}

/*
 * mlx5 chooses its poll_cq by the context's CQE version at init, and so
 * must the glue: its pass-through poll is mlx5's own, and a version-1
 * context (what rdma-core asks of every current ConnectX) polled by version
 * 0's function misreads its CQEs.
 */
static void test_glue_cqe_version(void)
{
	int (*poll[2])(struct ibv_cq *, int, struct ibv_wc *);
	struct verbs_ex_private priv;
	struct mlx5_context *ctx;
	int v;

	ctx = calloc(1, sizeof(*ctx));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (v = 0; v <= 1; v++) {
		memset(ctx, 0, sizeof(*ctx));
		memset(&priv, 0, sizeof(priv));
		ctx->ibv_ctx.priv = &priv;
		ctx->cqe_version = v;
		mlx5_sv_context_init(&ctx->ibv_ctx);
		poll[v] = ctx->ibv_ctx.context.ops.poll_cq;
		CU_ASSERT_PTR_EQUAL(priv.ops.poll_cq, poll[v]);
	}
	/* version 0: the table the other glue tests use; 1: another entry */
	CU_ASSERT_PTR_EQUAL(poll[0], mlx5_sv_ops()->poll_cq);
	CU_ASSERT_PTR_NOT_NULL(poll[1]);
	CU_ASSERT_PTR_NOT_EQUAL(poll[1], poll[0]);
	/* both with the layer's tests, not mlx5's stock (the layer is on) */
	CU_ASSERT_PTR_EQUAL(poll[0], mlx5_sv_poll_cq);
	CU_ASSERT_PTR_EQUAL(poll[1], mlx5_sv_poll_cq_v1);
	free(ctx);
}

struct cu_test {
	const char *name;
	CU_TestFunc fn;
};

/* One CUnit suite of n tests, verbose; 0 when every test passed. */
static int run_suite(const char *name, const struct cu_test *t, size_t n)
{
	unsigned int fails;
	CU_pSuite s;
	size_t i;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite(name, NULL, NULL);
	for (i = 0; i < n; i++)
		if (!s || !CU_add_test(s, t[i].name, t[i].fn))
			return 1;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

static int glue_main(void)
{
	static const struct cu_test tests[] = {
		{ "glue: pass-through, then a priority leaves",
		  test_glue_passthrough },
		{ "glue: the same with CQE version 1",
		  test_glue_passthrough_v1 },
		{ "glue: a reserved wr_id fails in pass-through",
		  test_glue_reserved_wr_id },
		{ "glue: the poll entry of the context's CQE version",
		  test_glue_cqe_version },
	};

	setenv("SVERBS_SLICE_ALWAYS", "0", 1);
	return run_suite("mlx5 glue", tests, sizeof(tests) / sizeof(tests[0]));
}

/*
 * test_mlx5_adapter --budget: a budget of 1 s configured (its own
 * process: the configuration is read once).  A thread domain's QP (its
 * send queue's lock off; mlx5 gives the domain one BlueFlame register, which
 * its QPs share without a lock) gets none: the timer thread that rings held
 * WRs would ring that register beside the domain's one thread.  A QP with
 * its lock keeps the budget.
 */
static void test_budget_thread_domain(void)
{
	struct sverbs_qp_stats st;

	fx_sq_lockless = true;
	setup(false, false);
	fx_sq_lockless = false;
	sverbs_qp_get_stats(f.qp->sv, &st);
	CU_ASSERT_EQUAL(st.batch_budget_ns, 0);
	teardown();
	setup(false, false);
	sverbs_qp_get_stats(f.qp->sv, &st);
	CU_ASSERT_EQUAL(st.batch_budget_ns, 1000ull * 1000 * 1000);
	teardown();
}

/*
 * Deferred doorbells on mlx5 (sched/watch.c; patch 0003's
 * mlx5_sv_post_nodb() and mlx5_sv_ring()): posts of a watched QP that run
 * ahead of their completions are written by mlx5 itself, with the
 * application's wr_ids, but the doorbell record and the doorbell register
 * wait; the fake HCA runs nothing beyond the record.  The layer rings at
 * the batch target (at most half of the 64-WR queue), and the budget's
 * timer rings the rest (1 s here: budget_main()): the record then says
 * cur_post and the register holds the last WQE's control segment (a
 * doorbell, no BlueFlame copy).  Every signaled WR completes once through
 * mlx5's own poll, its own wr_id.  The next burst's tail is rung by the
 * poll that waits for it.  A ring after a stock post's doorbell rings
 * nothing.
 */
static void test_budget_defer(void)
{
	const struct verbs_context_ops *ops = mlx5_sv_ops();
	struct ibv_send_wr wr, *bad = NULL;
	struct sverbs_qp_stats st;
	struct ibv_wc wc[64];
	struct ibv_sge sge;
	struct ibv_qp *qp;
	uint32_t last, rec_db;
	int i, n, k;

	setup(false, false);
	reset_rec();
	qp = &f.qp->verbs_qp.qp;
	for (i = 0; i < 40; i++) {
		mkwr(&wr, &sge, 100 + (uint64_t)i, IBV_WR_RDMA_WRITE, 64,
		     i % 4 == 3 ? IBV_SEND_SIGNALED : 0);
		CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, &wr, &bad), 0);
	}
	/*
	 * mlx5 wrote all 40, with their own wr_ids; the layer queued none
	 * (the first went through the adapter's stock post: no gap yet)
	 */
	CU_ASSERT_EQUAL(rec.calls, 1);
	CU_ASSERT_TRUE(glue_pt());
	CU_ASSERT_EQUAL(f.qp->sq.head, 40);
	CU_ASSERT_EQUAL(glue_wrid(1), 139);
	sverbs_qp_get_stats(f.qp->sv, &st);
	CU_ASSERT(st.flags & SVERBS_QP_STATS_DEFERRED);
	CU_ASSERT(st.wqes > 0 && st.doorbells < st.wqes);
	rec_db = be32toh(f.qp_db[MLX5_SND_DBR]);
	CU_ASSERT(rec_db < f.qp->sq.cur_post);
	/* the fake HCA runs up to the record only */
	hw_run();
	CU_ASSERT_EQUAL(f.hw_sq, rec_db);
	/* liveness, not speed: the budget (1 s), then up to 10 s more */
	for (k = 0; k < 11000 && be32toh(f.qp_db[MLX5_SND_DBR]) !=
					 (f.qp->sq.cur_post & 0xffff);
	     k++)
		usleep(1000);
	CU_ASSERT_EQUAL_FATAL(be32toh(f.qp_db[MLX5_SND_DBR]),
			      f.qp->sq.cur_post & 0xffff);
	CU_ASSERT_PTR_NULL(f.qp->sv_db_ctrl);
	/* the doorbell: the last WQE's first 8 bytes, in the half rung */
	last = f.qp->sq.cur_post - 1; /* a 64 B WRITE: 3 DS, one BB */
	CU_ASSERT_EQUAL(
		memcmp(f.bf_reg + (f.bf.offset ^ BF_SIZE), ctrl_at(last), 8),
		0);
	hw_run();
	n = 0;
	for (k = 0; k < 8 && n < 10; k++)
		n += ops->poll_cq(ibcq(), 64 - n, wc + n);
	CU_ASSERT_EQUAL_FATAL(n, 10);
	for (i = 0; i < 10; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, 100 + 4 * (uint64_t)i + 3);
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
	}
	/* the next burst's tail: rung by the poll that waits for it */
	for (i = 0; i < 8; i++) {
		mkwr(&wr, &sge, 150 + (uint64_t)i, IBV_WR_RDMA_WRITE, 64,
		     i == 7 ? IBV_SEND_SIGNALED : 0);
		CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, &wr, &bad), 0);
	}
	CU_ASSERT_NOT_EQUAL(be32toh(f.qp_db[MLX5_SND_DBR]),
			    f.qp->sq.cur_post & 0xffff);
	CU_ASSERT_EQUAL(ops->poll_cq(ibcq(), 64, wc), 0);
	CU_ASSERT_EQUAL(be32toh(f.qp_db[MLX5_SND_DBR]),
			f.qp->sq.cur_post & 0xffff);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(ops->poll_cq(ibcq(), 64, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 157);
	/* a stock post's doorbell covers the QP: a ring then rings nothing */
	mkwr(&wr, &sge, 200, IBV_WR_RDMA_WRITE, 64, 0);
	CU_ASSERT_EQUAL(mlx5_sv_post_nodb(qp, &wr, &bad), 0);
	CU_ASSERT_PTR_NOT_NULL(f.qp->sv_db_ctrl);
	mkwr(&wr, &sge, 201, IBV_WR_RDMA_WRITE, 64, IBV_SEND_SIGNALED);
	CU_ASSERT_EQUAL(mlx5_post_send(qp, &wr, &bad), 0);
	memset(f.bf_reg, BF_FILL, 2 * BF_SIZE);
	CU_ASSERT_EQUAL(mlx5_sv_ring(qp), 0);
	CU_ASSERT_PTR_NULL(f.qp->sv_db_ctrl);
	CU_ASSERT_EQUAL(f.bf_reg[0], BF_FILL);
	CU_ASSERT_EQUAL(f.bf_reg[BF_SIZE], BF_FILL);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(ops->poll_cq(ibcq(), 64, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 201);
	teardown();
}

/*
 * A poll inside an ibv_wr_* batch of a QP with deferred WQEs: mlx5's
 * wr_start takes the send queue's lock and holds it until wr_complete or
 * wr_abort, and the poll rings what the QP deferred.  mlx5_sv_ring() must
 * not wait for that lock (its own thread holds it: a hang): it answers
 * EBUSY, the poll returns, and the WQEs are rung after the batch.  The
 * lock is taken here as wr_start takes it; alarm() turns a hang into a
 * failure.
 */
static void test_budget_defer_batch_open(void)
{
	const struct verbs_context_ops *ops = mlx5_sv_ops();
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc[16];
	struct ibv_sge sge;
	struct ibv_qp *qp;
	int i;

	setup(false, false);
	reset_rec();
	qp = &f.qp->verbs_qp.qp;
	for (i = 0; i < 8; i++) {
		mkwr(&wr, &sge, 100 + (uint64_t)i, IBV_WR_RDMA_WRITE, 64,
		     i == 7 ? IBV_SEND_SIGNALED : 0);
		CU_ASSERT_EQUAL_FATAL(ops->post_send(qp, &wr, &bad), 0);
	}
	CU_ASSERT_NOT_EQUAL_FATAL(be32toh(f.qp_db[MLX5_SND_DBR]),
				  f.qp->sq.cur_post & 0xffff);
	CU_ASSERT_EQUAL_FATAL(mlx5_spin_lock(&f.qp->sq.lock), 0);
	alarm(20);
	CU_ASSERT_EQUAL(ops->poll_cq(ibcq(), 16, wc), 0);
	CU_ASSERT_EQUAL(mlx5_sv_ring(qp), EBUSY);
	alarm(0);
	CU_ASSERT_NOT_EQUAL(be32toh(f.qp_db[MLX5_SND_DBR]),
			    f.qp->sq.cur_post & 0xffff);
	mlx5_spin_unlock(&f.qp->sq.lock);
	/* after the batch: the next poll rings them (or the timer did) */
	CU_ASSERT_EQUAL(ops->poll_cq(ibcq(), 16, wc), 0);
	CU_ASSERT_EQUAL(be32toh(f.qp_db[MLX5_SND_DBR]),
			f.qp->sq.cur_post & 0xffff);
	hw_run();
	CU_ASSERT_EQUAL_FATAL(ops->poll_cq(ibcq(), 16, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 107);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	teardown();
}

static int budget_main(void)
{
	static const struct cu_test tests[] = {
		{ "budget: none for a thread domain's QP",
		  test_budget_thread_domain },
		{ "18.3 budget: deferred doorbells, rung by target and timer",
		  test_budget_defer },
		{ "18.3 budget: a poll inside a wr_* batch does not wait for "
		  "it",
		  test_budget_defer_batch_open },
	};

	/* 1 s: every gap between the tests' posts is short enough to batch */
	setenv("SVERBS_BATCH_BUDGET_US", "1000000", 1);
	/* QPs start in pass-through, watched (the budget's deferral) */
	setenv("SVERBS_SLICE_ALWAYS", "0", 1);
	return run_suite("mlx5 budget", tests,
			 sizeof(tests) / sizeof(tests[0]));
}

/* ------------------------------------------------------------ counting */

/*
 * test_mlx5_adapter --count MODE PATTERN N [SLICE_BYTES [WINDOW_SLICES
 * [WINDOW_SIGNALS]]] (default 4096, 2, 2): no test, the instructions the
 * provider and the layer spend per WR, counted by callgrind
 * (perf/run-insns.sh: --toggle-collect='insn_*', so the fake HCA is not
 * counted).  MODE: stock (mlx5_post_send / mlx5_poll_cq on the QP, as a
 * context without the layer calls them), pt (the layer in pass-through),
 * queue (passthrough off), budget (a 50 us budget, which takes the queue).
 * PATTERN: lat (post one signaled 64 B WRITE, run the HCA, poll it),
 * burst16 (16 posts of one WR, the 16th signaled, then run and poll),
 * list16 (the same 16 WRs in one post call: --post_list 16) or
 * mib (one signaled 1 MiB WRITE, SVERBS_PRIO(7) through the layer: 4 KiB
 * slices, the default window of 2; the HCA runs and the CQ is polled until
 * it completes) or mib1 (the same, the HCA executing one WQE between two
 * polls: a serial wire, completions one by one, as on rxe).  Each post goes
 * through insn_post(), each poll through insn_poll(), which call the entry
 * point ibv_post_send() / ibv_poll_cq() would reach through the context's ops:
 * stock mlx5_post_send / mlx5_poll_cq, or the layer's (mlx5_sv_ops(): mlx5's
 * own with the layer's tests, patch 0003), whose dispatch is counted.  Both
 * through a function pointer, as ibv_post_send() calls them.  The layer's
 * own posts, through the adapter, pass this test's recording wrapper
 * (__wrap_mlx5_post_send: in this mode a test, the count of rings and a
 * jump per call, counted); stock calls mlx5_post_send itself.
 */
static int (*count_post)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad);
static int (*count_poll)(struct ibv_cq *cq, int ne, struct ibv_wc *wc);

static __attribute__((noinline)) int insn_post(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	return count_post(&f.qp->verbs_qp.qp, wr, &bad);
}

static __attribute__((noinline)) int insn_poll(struct ibv_wc *wc, int ne)
{
	return count_poll(ibcq(), ne, wc);
}

static struct {
	const char *mode, *pattern;
	/* NULL: 4096, 2 and 2 (the default window and its signals) */
	const char *slice, *window, *signals;
	long n;
	int rc;
} count_arg;

static int count_env(const char *mode)
{
	setenv("SVERBS_SLICE_ALWAYS", "0", 1);
	setenv("SVERBS_SLICE_BYTES", count_arg.slice ? count_arg.slice : "4096",
	       1);
	setenv("SVERBS_WINDOW_SLICES",
	       count_arg.window ? count_arg.window : "2", 1);
	setenv("SVERBS_WINDOW_SIGNALS",
	       count_arg.signals ? count_arg.signals : "2", 1);
	if (!strcmp(mode, "stock") || !strcmp(mode, "pt"))
		return 0;
	if (!strcmp(mode, "queue")) {
		setenv("SVERBS_PASSTHROUGH", "off", 1);
		return 0;
	}
	if (!strcmp(mode, "budget")) {
		setenv("SVERBS_BATCH_BUDGET_US", "50", 1);
		return 0;
	}
	return -1;
}

/* A CUnit test, for the fakes' assertions: count_arg.rc says how it went. */
static void count_run(void)
{
	const char *mode = count_arg.mode, *pattern = count_arg.pattern;
	long n = count_arg.n;
	bool mib1 = !strcmp(pattern, "mib1");
	bool mib = mib1 || !strcmp(pattern, "mib");
	uint32_t len = mib ? 1u << 20 : 64;
	unsigned int flags = mib && strcmp(mode, "stock") ? SVERBS_PRIO(7) : 0;
	bool list = !strcmp(pattern, "list16");
	int burst = !strcmp(pattern, "burst16") || list ? 16 : 1;
	struct ibv_send_wr wr[16];
	struct ibv_sge sge[16];
	struct ibv_wc wc[16];
	long i, got;
	int k, r, cqes, calls0;
	__be32 db0;

	if (count_env(mode) || (burst == 1 && !mib && strcmp(pattern, "lat")) ||
	    n <= 0) {
		fprintf(stderr, "usage: --count stock|pt|queue|budget "
				"lat|burst16|list16|mib|mib1 N [SLICE_BYTES "
				"[WINDOW_SLICES [WINDOW_SIGNALS]]]\n");
		count_arg.rc = 2;
		return;
	}
	if (!strcmp(mode, "stock")) {
		/* mlx5's own, not this test's recording wrapper around it */
		count_post = __real_mlx5_post_send;
		count_poll = mlx5_poll_cq;
	} else {
		count_post = mlx5_sv_ops()->post_send;
		count_poll = mlx5_sv_ops()->poll_cq;
	}
	rec.count = true;
	setup(false, false);
	for (i = 0; i < n; i++) {
		for (k = 0; k < burst; k++) {
			mkwr(&wr[k], &sge[k], (uint64_t)k, IBV_WR_RDMA_WRITE,
			     len,
			     flags | (k == burst - 1 ? IBV_SEND_SIGNALED : 0));
			if (list && k < burst - 1) {
				wr[k].next = &wr[k + 1];
				continue;
			}
			calls0 = rec.calls;
			db0 = f.qp_db[MLX5_SND_DBR];
			if (insn_post(list ? &wr[0] : &wr[k])) {
				fprintf(stderr, "count: post failed\n");
				count_arg.rc = 1;
				return;
			}
			/*
			 * mlx5's own post (stock, pass-through) or the layer's
			 * ring of deferred WQEs: the doorbell record moved
			 */
			if (rec.calls == calls0 && f.qp_db[MLX5_SND_DBR] != db0)
				rec.calls++;
		}
		/*
		 * A budget's deferred tail is rung by the first poll (counted;
		 * sched/watch.c), or by its timer thread if that came first
		 * (not counted): the doorbell record moved either way.
		 */
		for (got = 0, r = 0; !got; r++) {
			db0 = f.qp_db[MLX5_SND_DBR];
			if (r > 100000) {
				fprintf(stderr, "count: no completion\n");
				count_arg.rc = 1;
				return;
			}
			hw_run_n(mib1 ? 1 : UINT32_MAX);
			got = insn_poll(wc, 16);
			if (f.qp_db[MLX5_SND_DBR] != db0)
				rec.calls++;
			if (got < 0 ||
			    (got && wc[0].status != IBV_WC_SUCCESS)) {
				fprintf(stderr, "count: poll failed\n");
				count_arg.rc = 1;
				return;
			}
		}
	}
	cqes = f.hw_cqes;
	teardown();
	printf("count %s %s %ld WRs %d doorbells %d cqes\n", mode, pattern,
	       n * burst, rec.calls, cqes);
}

static int count_main(int argc, char **argv)
{
	unsigned int fails;
	CU_pSuite s;

	count_arg.mode = argv[2];
	count_arg.pattern = argv[3];
	count_arg.n = atol(argv[4]);
	count_arg.slice = argc > 5 ? argv[5] : NULL;
	count_arg.window = argc > 6 ? argv[6] : NULL;
	count_arg.signals = argc > 7 ? argv[7] : NULL;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("count", NULL, NULL);
	if (!s || !CU_add_test(s, "count", count_run))
		return 1;
	CU_basic_set_mode(CU_BRM_SILENT);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : count_arg.rc;
}

/* ------------------------------------------------------------ main */

extern char **environ;

static void config_env(void)
{
	char name[256];
	char **e;
	size_t n;

again:
	for (e = environ; *e; e++) {
		if (strncmp(*e, "SVERBS", 6))
			continue;
		n = strcspn(*e, "=");
		if (n >= sizeof(name))
			continue;
		memcpy(name, *e, n);
		name[n] = 0;
		unsetenv(name);
		goto again;
	}
	setenv("SVERBS_CONF", "/nonexistent/sverbs.conf", 1);
	setenv("SVERBS", "on", 1);
	setenv("SVERBS_SLICE_BYTES", "4096", 1);
	setenv("SVERBS_WINDOW_SLICES", "1024", 1);
	setenv("SVERBS_SLICE_ALWAYS", "1", 1);
	setenv("SVERBS_SMALL_MSG_BYTES", "0", 1);
	setenv("SVERBS_DEFAULT_PRIO", "4", 1);
	setenv("SVERBS_CQ_HEADROOM", "256", 1);
	setenv("SVERBS_BATCH", "1", 1);
	setenv("SVERBS_BATCH_BUDGET_US", "0", 1);
}

int main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "write slices: ctrl, raddr, dseg, signal",
		  test_write_slices },
		{ "read over 3 SGEs: slices straddle SGEs",
		  test_read_multi_sge },
		{ "write with imm: only the last slice", test_write_imm },
		{ "one chain, one ring, one doorbell",
		  test_one_chain_one_ring },
		{ "priority: order only, no bits", test_priority_order },
		{ "sq_sig_all", test_sig_all },
		{ "limits: the errno of stock mlx5_post_send",
		  test_limits_stock_errno },
		{ "16.2 ENOMEM before RTS fails the post",
		  test_not_rts_refused },
		{ "BlueFlame copy of a lone small WR", test_blueflame },
		{ "CQEs through mlx5_poll_cq, SQ and CQ wrap",
		  test_completions_wrap },
		{ "16.6 the layer's no-op is a NOP WQE", test_err_nop },
		{ "16.6 the private NOP opcode is the layer's alone",
		  test_nop_opcode_private },
		{ "16.9 a receive error with an internal wr_id",
		  test_recv_err_internal_wr_id },
	};

	config_env();
	if (argc >= 5 && argc <= 8 && !strcmp(argv[1], "--count"))
		return count_main(argc, argv);
	if (argc == 2 && !strcmp(argv[1], "--glue"))
		return glue_main();
	if (argc == 2 && !strcmp(argv[1], "--budget"))
		return budget_main();
	return run_suite("mlx5 adapter", tests,
			 sizeof(tests) / sizeof(tests[0]));
}
