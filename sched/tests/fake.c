// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct fk *fk;

/* The fake "hardware" is shared by the threads of the concurrency test. */
static pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;

static enum ibv_wc_opcode fk_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

int fk_qp_index(const struct ibv_qp *qp)
{
	return (int)(qp - fk->qp);
}

struct ibv_cq *fk_cq(void)
{
	return ibv_cq_ex_to_cq(&fk->cqx);
}

struct ibv_cq *fk_cq_b(void)
{
	return ibv_cq_ex_to_cq(&fk->cqx_b);
}

void fk_qp_on_b(int i)
{
	fk->qp[i].send_cq = fk_cq_b();
	fk->sq[i].on_b = true;
}

static void cq_push_b(const struct ibv_wc *wc)
{
	if (fk->cqb_n >= FK_CQ_B) {
		fk->cq_overflow = true;
		return;
	}
	fk->cqe_b[(fk->cqb_head + fk->cqb_n) % FK_CQ_B] = *wc;
	fk->cqb_n++;
}

static void cq_push(const struct ibv_wc *wc)
{
	if (wc->qp_num - 0x100 < FK_QPS && fk->sq[wc->qp_num - 0x100].on_b) {
		cq_push_b(wc);
		return;
	}
	if (fk->cq_n >= fk_cq()->cqe || fk->cq_n >= FK_CQ) {
		fk->cq_overflow = true;
		return;
	}
	fk->cqe[(fk->cq_head + fk->cq_n) % FK_CQ] = *wc;
	fk->cq_n++;
	if (fk->cq_n > fk->cq_max_n)
		fk->cq_max_n = fk->cq_n;
}

/* The doorbell: every WQE written so far may run. */
static void ring_locked(struct fk_sq *sq)
{
	for (; sq->rung < sq->posted; sq->rung++)
		sq->w[sq->rung % FK_HIST].doorbell = fk->doorbells;
}

/* db: stock, which rings for the WRs it took, even before a refused one */
static int fk_post_send_locked(struct ibv_qp *qp, struct ibv_send_wr *wr,
			       struct ibv_send_wr **bad_wr, bool db)
{
	struct fk_sq *sq = &fk->sq[fk_qp_index(qp)];
	struct fk_wqe *w;
	int i, ret = 0;

	if (db)
		fk->doorbells++;
	for (; wr; wr = wr->next) {
		if (fk->post_fail_at && sq->posted + 1 == fk->post_fail_at &&
		    fk->post_fail_err) {
			fk->post_fail_at = 0;
			*bad_wr = wr;
			ret = fk->post_fail_err;
			break;
		}
		if (sq->posted - sq->done >= sq->depth ||
		    (fk->post_fail_at && sq->posted + 1 == fk->post_fail_at)) {
			*bad_wr = wr;
			ret = ENOMEM;
			break;
		}
		if (wr->send_flags & SVERBS_PRIO_MASK)
			fk->leaks++;
		w = &sq->w[sq->posted++ % FK_HIST];
		memset(w, 0, sizeof(*w));
		w->wr = *wr;
		w->wr.next = NULL;
		w->doorbell = fk->doorbells;
		for (i = 0; i < wr->num_sge && i < FK_SGE; i++) {
			w->sge[i] = wr->sg_list[i];
			w->bytes += wr->sg_list[i].length;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge &&
		    w->bytes <= FK_INL)
			memcpy(w->inl, (void *)(uintptr_t)wr->sg_list[0].addr,
			       wr->sg_list[0].length);
		w->sg_in = wr->sg_list;
		w->wr.sg_list = w->sge;
		w->signaled =
			sq->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		sq->out_bytes += w->bytes;
		if (sq->out_bytes > sq->max_out_bytes)
			sq->max_out_bytes = sq->out_bytes;
		if (sq->posted - sq->done > sq->max_out)
			sq->max_out = sq->posted - sq->done;
	}
	if (!db)
		return ret;
	ring_locked(sq);
	return ret ? ret : fk->db_fail_err;
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr)
{
	void (*hook)(void) = fk->post_hook;
	int ret;

	if (hook) {
		fk->post_hook = NULL;
		hook();
	}
	pthread_mutex_lock(&fk_lock);
	ret = fk_post_send_locked(qp, wr, bad_wr, true);
	pthread_mutex_unlock(&fk_lock);
	return ret;
}

static int fk_post_send_nodb(struct ibv_qp *qp, struct ibv_send_wr *wr,
			     struct ibv_send_wr **bad_wr)
{
	void (*hook)(void) = fk->nodb_hook;
	int ret;

	if (hook) {
		fk->nodb_hook = NULL;
		hook();
	}
	pthread_mutex_lock(&fk_lock);
	ret = fk_post_send_locked(qp, wr, bad_wr, false);
	pthread_mutex_unlock(&fk_lock);
	return ret;
}

/* never waits for the send queue (an open batch holds it): EBUSY */
static int fk_ring(struct ibv_qp *qp)
{
	pthread_mutex_lock(&fk_lock);
	if (fk->sq[fk_qp_index(qp)].batch_open) {
		fk->ring_busy++;
		pthread_mutex_unlock(&fk_lock);
		return EBUSY;
	}
	fk->doorbells++;
	fk->rings++;
	ring_locked(&fk->sq[fk_qp_index(qp)]);
	pthread_mutex_unlock(&fk_lock);
	return fk->db_fail_err;
}

int fk_unrung(int i)
{
	int n;

	pthread_mutex_lock(&fk_lock);
	/* (a QP in error flushed them: not waiting for a doorbell) */
	n = fk->sq[i].posted -
	    (fk->sq[i].done > fk->sq[i].rung ? fk->sq[i].done : fk->sq[i].rung);
	pthread_mutex_unlock(&fk_lock);
	return n;
}

static void complete_one(int i, enum ibv_wc_status status)
{
	struct fk_sq *sq = &fk->sq[i];
	struct fk_wqe *w = &sq->w[sq->done++ % FK_HIST];
	struct ibv_wc wc = {};

	sq->out_bytes -= w->bytes;
	if (sq->err && status == IBV_WC_SUCCESS)
		status = IBV_WC_WR_FLUSH_ERR;
	if (status == IBV_WC_SUCCESS && !w->signaled)
		return;
	if (status == IBV_WC_WR_FLUSH_ERR && fk->flush_signaled_only &&
	    !w->signaled)
		return;
	wc.wr_id = w->wr.wr_id;
	wc.status = status;
	/*
	 * error CQEs carry no opcode (like stock mlx5): make it look like
	 * garbage; err_side: a send's says IBV_WC_SEND (patched mlx5)
	 */
	wc.opcode = status == IBV_WC_SUCCESS ? fk_wc_opcode(w->wr.opcode)
		    : fk->err_side	     ? IBV_WC_SEND
					     : (enum ibv_wc_opcode)0xff;
	wc.byte_len = (uint32_t)w->bytes;
	wc.qp_num = fk->qp[i].qp_num;
	wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x42;
	cq_push(&wc);
}

static int complete_locked(int i, int n)
{
	struct fk_sq *sq = &fk->sq[i];
	int k = 0;

	/* what was never rung runs only to be flushed (the QP in error) */
	while ((n < 0 || k < n) &&
	       sq->done < (sq->err ? sq->posted : sq->rung)) {
		complete_one(i, IBV_WC_SUCCESS);
		k++;
	}
	return k;
}

int fk_complete(int i, int n)
{
	int k;

	pthread_mutex_lock(&fk_lock);
	k = complete_locked(i, n);
	pthread_mutex_unlock(&fk_lock);
	return k;
}

int fk_fail_next(int i, enum ibv_wc_status status)
{
	struct fk_sq *sq = &fk->sq[i];
	int k = 0;

	pthread_mutex_lock(&fk_lock);
	if (sq->done < sq->rung) {
		complete_one(i, status);
		sq->err = true;
		k = 1 + complete_locked(i, -1);
	}
	pthread_mutex_unlock(&fk_lock);
	return k;
}

void fk_recv_cqe(int i, uint64_t wr_id, enum ibv_wc_status status)
{
	struct ibv_wc wc = {};

	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = status == IBV_WC_SUCCESS || fk->err_side
			    ? IBV_WC_RECV
			    : IBV_WC_SEND; /* as rxe's kernel leaves it: 0 */
	wc.qp_num = fk->qp[i].qp_num;
	pthread_mutex_lock(&fk_lock);
	cq_push(&wc);
	pthread_mutex_unlock(&fk_lock);
}

bool fk_wc_is_recv(const struct ibv_wc *wc)
{
	return wc->opcode == IBV_WC_RECV;
}

void fk_qp_error(int i)
{
	pthread_mutex_lock(&fk_lock);
	fk->sq[i].err = true;
	complete_locked(i, -1);
	pthread_mutex_unlock(&fk_lock);
}

int fk_outstanding(int i)
{
	int n;

	pthread_mutex_lock(&fk_lock);
	n = fk->sq[i].posted - fk->sq[i].done;
	pthread_mutex_unlock(&fk_lock);
	return n;
}

struct fk_wqe *fk_wqe(int i, int k)
{
	return &fk->sq[i].w[k % FK_HIST];
}

static int fk_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	void (*hook)(void) = fk->poll_hook;
	int n = 0;

	if (hook) {
		fk->poll_hook = NULL;
		hook();
	}
	pthread_mutex_lock(&fk_lock);
	if (cq == fk_cq_b()) {
		while (n < ne && fk->cqb_n) {
			wc[n++] = fk->cqe_b[fk->cqb_head];
			fk->cqb_head = (fk->cqb_head + 1) % FK_CQ_B;
			fk->cqb_n--;
		}
		atomic_fetch_add(&fk->cqb_consumed, (uint32_t)n);
		pthread_mutex_unlock(&fk_lock);
		return n;
	}
	while (n < ne && fk->cq_n) {
		wc[n++] = fk->cqe[fk->cq_head];
		fk->cq_head = (fk->cq_head + 1) % FK_CQ;
		fk->cq_n--;
	}
	atomic_fetch_add(&fk->cq_consumed, (uint32_t)n);
	pthread_mutex_unlock(&fk_lock);
	return n;
}

static uint32_t fk_cq_consumed(struct ibv_cq *cq)
{
	if (cq == fk_cq_b())
		return atomic_load(&fk->cqb_consumed);
	return atomic_load(&fk->cq_consumed);
}

static int fk_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	fk->notify_solicited = solicited_only;
	fk->notify_calls++;
	return 0;
}

/*
 * Under the fake's lock, as mlx5 and rxe resize under their CQ lock: the
 * layer grows the CQ from a posting thread while another polls it.
 */
static int fk_resize_cq(struct ibv_cq *cq, int cqe)
{
	int n = 1, ret = 0;

	pthread_mutex_lock(&fk_lock);
	fk->resize_calls++;
	if (fk->resize_fails) {
		ret = EINVAL;
	} else {
		while (fk->resize_round && n < cqe + 1)
			n <<= 1;
		cq->cqe = fk->resize_round ? n - 1 : cqe;
	}
	pthread_mutex_unlock(&fk_lock);
	return ret;
}

/*
 * Full: ENOMEM for a WR while the send queue is full, or while post_fail_at
 * fails WQEs without post_fail_err (a transient full queue).  An ENOMEM
 * injected through post_fail_err is a refusal (mlx5 before RTS).
 */
static bool fk_sq_full(struct ibv_qp *qp, int err,
		       const struct ibv_send_wr *bad)
{
	struct fk_sq *sq = &fk->sq[fk_qp_index(qp)];

	if (!bad || err != ENOMEM)
		return false;
	return sq->posted - sq->done >= sq->depth ||
	       (fk->post_fail_at && !fk->post_fail_err);
}

static bool fk_cq_lockless(struct ibv_cq *cq)
{
	(void)cq;
	return fk->cq_lockless;
}

static bool fk_qp_lockless(struct ibv_qp *qp)
{
	(void)qp;
	return fk->qp_lockless;
}

/* What the fake provider says for a WR beyond a limit (mlx5-like when set). */
static int fk_limit_err(enum sverbs_wr_limit what, bool wr_api)
{
	(void)what;
	(void)wr_api;
	return fk->limit_err ? fk->limit_err : EINVAL;
}

static void fk_log(struct ibv_context *ctx, enum sverbs_log_level level,
		   const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

static void fk_nop_wr(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	(void)qp;
	wr->opcode = FK_WR_NOP;
}

/*
 * The provider's CQ lock is fk_lock: taken and released, as a provider's
 * cq_sync does (QPs of one CQ leave pass-through on several threads at
 * once); counted under it.
 */
static void fk_cq_sync(struct ibv_cq *cq)
{
	(void)cq;
	pthread_mutex_lock(&fk_lock);
	fk->sync_calls++;
	pthread_mutex_unlock(&fk_lock);
	if (fk->sync_hook)
		fk->sync_hook();
}

/* The ops both fake adapters share. */
#define FK_ADAPTER_OPS                                                     \
	.post_send = fk_post_send, .sq_full = fk_sq_full,                  \
	.cq_lockless = fk_cq_lockless, .qp_lockless = fk_qp_lockless,      \
	.limit_err = fk_limit_err, .poll_cq = fk_poll_cq,                  \
	.req_notify_cq = fk_req_notify_cq, .resize_cq = fk_resize_cq,      \
	.log = fk_log, .nop_wr = fk_nop_wr, .cq_consumed = fk_cq_consumed, \
	.cq_sync = fk_cq_sync

const struct sverbs_adapter fk_adapter = {
	.name = "fake",
	FK_ADAPTER_OPS,
};

const struct sverbs_adapter fk_adapter_defer = {
	.name = "fake-defer",
	FK_ADAPTER_OPS,
	.post_send_nodb = fk_post_send_nodb,
	.ring = fk_ring,
};

void fk_init(int cq_cqe)
{
	fk = calloc(1, sizeof(*fk));
	fk->cqx.context = &fk->ctx;
	fk->cqx.cqe = cq_cqe;
	fk->cqx_b.context = &fk->ctx;
	fk->cqx_b.cqe = cq_cqe;
}

void fk_fini(void)
{
	int i;

	for (i = 0; i < FK_QPS; i++)
		free(fk->sq[i].w);
	free(fk);
	fk = NULL;
}

struct ibv_qp *fk_qp(int i, enum ibv_qp_type type, int depth, bool sig_all)
{
	struct ibv_qp *qp = &fk->qp[i];

	/* the WQE history of a QP index, when it is first used */
	if (!fk->sq[i].w)
		fk->sq[i].w = calloc(FK_HIST, sizeof(struct fk_wqe));

	qp->context = &fk->ctx;
	qp->qp_num = 0x100 + (uint32_t)i;
	qp->qp_type = type;
	qp->send_cq = fk_cq();
	fk->sq[i].depth = depth;
	fk->sq[i].sig_all = sig_all;
	return qp;
}

/* ------------------------------------------------------------ wr_* API */

/*
 * The provider's own ibv_wr_* ops (what a pass-through batch reaches):
 * WRs built from wr_id / wr_flags as given, posted as one chain by
 * wr_complete.  qp_base.qp_num names the fake QP.
 */
#define FK_BATCH 16

static struct {
	struct ibv_send_wr wr[FK_BATCH];
	struct ibv_sge sge[FK_BATCH];
	int n;
} fkb;

static struct ibv_send_wr *fkb_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct ibv_send_wr *w = &fkb.wr[fkb.n < FK_BATCH - 1 ? fkb.n++ : fkb.n];

	memset(w, 0, sizeof(*w));
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags;
	w->opcode = op;
	return w;
}

static void fkb_start(struct ibv_qp_ex *qx)
{
	fkb.n = 0;
	fk->sq[qx->qp_base.qp_num - 0x100].batch_open = true;
}

static void fkb_send(struct ibv_qp_ex *qx)
{
	fkb_new(qx, IBV_WR_SEND);
}

static void fkb_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	struct ibv_send_wr *w = fkb_new(qx, IBV_WR_RDMA_WRITE);

	w->wr.rdma.rkey = rkey;
	w->wr.rdma.remote_addr = addr;
}

static void fkb_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr,
			uint32_t length)
{
	int i = fkb.n - 1;

	(void)qx;
	if (i < 0)
		return;
	fkb.sge[i] = (struct ibv_sge){ .addr = addr,
				       .length = length,
				       .lkey = lkey };
	fkb.wr[i].sg_list = &fkb.sge[i];
	fkb.wr[i].num_sge = 1;
}

static int fkb_complete(struct ibv_qp_ex *qx)
{
	struct ibv_send_wr *bad = NULL;
	int i;

	fk->sq[qx->qp_base.qp_num - 0x100].batch_open = false;
	if (!fkb.n)
		return 0;
	for (i = 0; i + 1 < fkb.n; i++)
		fkb.wr[i].next = &fkb.wr[i + 1];
	fkb.wr[fkb.n - 1].next = NULL;
	fkb.n = 0;
	return fk_post_send(&fk->qp[qx->qp_base.qp_num - 0x100], fkb.wr, &bad);
}

static void fkb_abort(struct ibv_qp_ex *qx)
{
	fkb.n = 0;
	fk->sq[qx->qp_base.qp_num - 0x100].batch_open = false;
}

void fk_wr_install(struct ibv_qp_ex *qx, int i)
{
	memset(qx, 0, sizeof(*qx));
	qx->qp_base.qp_num = fk->qp[i].qp_num;
	qx->wr_start = fkb_start;
	qx->wr_complete = fkb_complete;
	qx->wr_abort = fkb_abort;
	qx->wr_send = fkb_send;
	qx->wr_rdma_write = fkb_rdma_write;
	qx->wr_set_sge = fkb_set_sge;
}

/* ------------------------------------------------------------ extended CQ */

/* the completion the getters of an extended CQ describe */
static struct ibv_wc *ex_cur(struct ibv_cq_ex *cq)
{
	return cq == &fk->cqx_b ? &fk->ex_cur_b : &fk->ex_cur;
}

static int ex_start(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct ibv_wc *cur = ex_cur(cq);

	(void)attr;
	if (!fk_poll_cq(ibv_cq_ex_to_cq(cq), 1, cur))
		return ENOENT;
	cq->wr_id = cur->wr_id;
	cq->status = cur->status;
	return 0;
}

static int ex_next(struct ibv_cq_ex *cq)
{
	return ex_start(cq, NULL);
}

static void ex_end(struct ibv_cq_ex *cq)
{
	(void)cq;
}

static enum ibv_wc_opcode ex_opcode(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->opcode;
}

static uint32_t ex_vendor_err(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->vendor_err;
}

static uint32_t ex_byte_len(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->byte_len;
}

static uint32_t ex_qp_num(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->qp_num;
}

static unsigned int ex_wc_flags(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->wc_flags;
}

static __be32 ex_imm(struct ibv_cq_ex *cq)
{
	return ex_cur(cq)->imm_data;
}

static void install_ex(struct ibv_cq_ex *cx)
{
	cx->start_poll = ex_start;
	cx->next_poll = ex_next;
	cx->end_poll = ex_end;
	cx->read_opcode = ex_opcode;
	cx->read_vendor_err = ex_vendor_err;
	cx->read_byte_len = ex_byte_len;
	cx->read_qp_num = ex_qp_num;
	cx->read_wc_flags = ex_wc_flags;
	cx->read_imm_data = ex_imm;
}

void fk_install_ex(void)
{
	install_ex(&fk->cqx);
}

void fk_install_ex_b(void)
{
	install_ex(&fk->cqx_b);
}
