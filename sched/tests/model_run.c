// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The reference model and the randomized differential driver (model.h).
 *
 * Only sverbs_sched.h's API drives the layer; the fake adapter (fake.c) is
 * the hardware.  One global model (the adapter's ops take no argument):
 * its lock is taken by the adapter wrapper (which the layer may call from
 * the batching timer thread) and by the driver around what it does to the
 * fake, never while the driver is inside the layer.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "model.h"

#define MQ	  4  /* live QPs at most */
#define MAX_SGE	  3  /* the QPs' max_send_sge */
#define MAX_INL	  64 /* the QPs' max_inline_data */
#define WRID_BASE 0x0000a11c00000000ull
/* the first wr_ids above the layer's range (sverbs.h), which a post may not use
 */
#define WRID_INTERNAL (SVERBS_WR_ID_RESERVED_MAX + 1)
#define NONE	      UINT32_MAX
#define MIRROR	      256 /* > the deepest send queue (64): WQEs in flight */
#define LBASE	      0x100000000ull
#define RBASE	      0x7000000000ull

enum wr_state { W_PENDING, W_ACCEPTED, W_REJECTED };

struct mwr {
	uint64_t wr_id;
	uint32_t q; /* model QP (generation) index */
	uint32_t tag;
	enum ibv_wr_opcode op;
	uint64_t len;
	uint64_t raddr;
	struct ibv_sge sge[MAX_SGE + 1];
	int nsge;
	bool inl;
	uint8_t level;
	bool fenced, signaled, marked, invalid;
	bool reserved; /* posted with a wr_id of the layer's range: refused */
	uint64_t pseq;
	uint8_t st;
	/* the hardware's view */
	uint64_t hw_bytes;
	uint32_t nwqe;
	bool final_posted;
	uint64_t final_idx;
	bool hw_done; /* its last WQE retired successfully */
	bool hw_err;  /* one of its WQEs failed (a real error) */
	enum ibv_wc_status err_status;
	bool hw_flush;
	int refused_err;  /* the provider refused one of its WQEs (not full) */
	bool refused_now; /* ... during the current post call */
	bool refused_full;
	bool deliverable; /* its success CQE is in the CQ */
	bool after_err;	  /* posted to a QP in error */
	bool at_destroy;  /* outstanding when its QP was destroyed */
	bool err_early;	  /* it failed before its QP's destroy began (the
			   * layer sees the error: it keeps its status) */
	bool retired;	  /* unsignaled: a later completion proved it done */
	bool pt_posted;	  /* handed over while its QP may have been in
			   * pass-through: unknown to the layer */
	bool ambiguous;	  /* unsignaled, in flight at a modify to ERR on a
			   * provider that flushes signaled WQEs only: it
			   * may have succeeded, the layer cannot know */
	int reported;
	enum ibv_wc_status rep_status;
};

struct mwqe {
	uint32_t wr; /* NONE: a WQE of the layer's own (NOP) */
	bool final, sig;
};

struct mqp {
	int fi; /* fake QP index */
	struct sverbs_qp *sqp;
	uint32_t qp_num;
	uint32_t cap;
	enum ibv_qp_type type;
	bool sig_all;
	bool managed;
	bool alive;
	bool err;		/* in error (a failed WQE, modify to ERR) */
	bool pt_maybe;		/* may still be in pass-through (stock rules) */
	bool left_stock;	/* the layer left it stock for good (counted) */
	uint32_t stays_at_post; /* its sqp->pt_stays when the post began */
	int style;		/* 0: unmarked, 1: marked, 2: mixed */
	uint64_t pseq;
	uint32_t *live; /* unresolved WRs, posting order */
	uint32_t nlive, live_cap;
	struct mwqe *hw; /* a mirror of the fake's send queue */
	uint64_t hw_posted, hw_retired;
	uint64_t proven; /* WQEs below this index retired: the layer polled
			  * a CQE that says so */
	int refuse_err;	 /* armed: refuse the next WQE with this errno */
	bool full_idle;	 /* the provider said "full" (EAGAIN...): if no
			  * signaled WQE of this QP is in flight, nothing
			  * will retry it (MK_FULL_IDLE) */
};

struct mdl {
	pthread_mutex_t lock;
	struct sverbs_config cfg;
	struct sverbs_adapter ad;
	struct sverbs_cq *scq;
	const struct model_opts *o;
	struct model_result *res;
	uint64_t rng;
	const uint8_t *data;
	size_t size, pos;
	unsigned int known;
	bool flush_sig_only;
	int app_cqe;
	uint64_t wrid_base;
	struct mwr *wr;
	uint32_t nwr, wr_cap;
	struct mqp *qp;
	uint32_t nqp, qp_cap;
	int slot[FK_QPS]; /* fake index -> model QP, -1 free */
	uint32_t next_qpn;
	bool in_post;
	uint32_t post_q;
	uint8_t inl_buf[MAX_INL];
	/* the fake CQ's entries, mirrored: (QP, WQE index, success) */
	struct {
		uint32_t q;
		uint64_t idx;
		bool ok;
	} cqe[FK_CQ];
	uint32_t cqe_head, cqe_n;
};

static struct mdl *M;

#define TRACE(...)                                           \
	do {                                                 \
		if (M->o->verbose > 3)                       \
			fprintf(stderr, "  . " __VA_ARGS__); \
	} while (0)

/* ------------------------------------------------------------ reporting */

static void mismatch(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void mismatch(const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!M->res->mismatches)
		snprintf(M->res->first, sizeof(M->res->first), "%s", buf);
	M->res->mismatches++;
	if (M->o->verbose && M->res->mismatches <= 20)
		fprintf(stderr, "model: seed %llu: %s\n",
			(unsigned long long)M->o->seed, buf);
}

/* ------------------------------------------------------------ decisions */

static uint32_t rnd(uint32_t bound)
{
	uint64_t x;

	if (bound <= 1)
		return 0;
	if (M->data) {
		x = 0;
		if (M->pos < M->size)
			x = M->data[M->pos++];
		if (bound > 256 && M->pos < M->size)
			x = x << 8 | M->data[M->pos++];
		if (bound > 65536 && M->pos < M->size)
			x = x << 8 | M->data[M->pos++];
		return (uint32_t)(x % bound);
	}
	/* splitmix64 */
	x = (M->rng += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (uint32_t)(x % bound);
}

static bool chance(uint32_t pct)
{
	return rnd(100) < pct;
}

static bool out_of_data(void)
{
	return M->data && M->pos >= M->size;
}

/* ------------------------------------------------------------ model state */

static struct mwr *wr_at(uint32_t i)
{
	return &M->wr[i];
}

static void live_add(struct mqp *q, uint32_t i)
{
	if (q->nlive == q->live_cap) {
		q->live_cap = q->live_cap ? 2 * q->live_cap : 64;
		q->live = realloc(q->live, q->live_cap * sizeof(*q->live));
	}
	q->live[q->nlive++] = i;
}

static bool resolved(const struct mqp *q, const struct mwr *w)
{
	if (w->st != W_ACCEPTED)
		return true;
	if (w->reported)
		return true;
	if (w->signaled)
		return false;
	/* unsignaled: done once the layer saw it retire, nothing failed */
	return (w->retired || (w->hw_done && w->final_idx < q->proven)) &&
	       !w->hw_err && !w->refused_err && !(q->err && !w->hw_done) &&
	       !w->at_destroy;
}

static void live_compact(struct mqp *q)
{
	uint32_t i, n = 0;

	for (i = 0; i < q->nlive; i++)
		if (!resolved(q, wr_at(q->live[i])))
			q->live[n++] = q->live[i];
	q->nlive = n;
}

/* A must complete before B (both of one QP, A posted first). */
static bool must_precede(const struct mwr *a, const struct mwr *b)
{
	return a->level <= b->level || a->fenced || b->fenced;
}

/* WRs holding an application slot, at most (the layer may know more). */
static uint32_t held_upper(const struct mqp *q)
{
	uint32_t i, n = 0;

	for (i = 0; i < q->nlive; i++) {
		const struct mwr *w = wr_at(q->live[i]);

		if (w->st == W_ACCEPTED && !w->reported && !w->retired &&
		    !(w->hw_done && w->final_idx < q->proven))
			n++;
	}
	return n;
}

/* ------------------------------------------------------------ hardware */

static void hw_retire(struct mqp *q, enum ibv_wc_status st)
{
	uint64_t idx = q->hw_retired++;
	struct mwqe *e = &q->hw[idx % MIRROR];
	struct mwr *w = e->wr == NONE ? NULL : wr_at(e->wr);

	if (st == IBV_WC_SUCCESS && q->err)
		st = IBV_WC_WR_FLUSH_ERR;
	TRACE("qp %u: WQE %llu (wr %lld%s%s) retires, status %d\n", q->qp_num,
	      (unsigned long long)idx,
	      w ? (long long)(w->wr_id - M->wrid_base) : -1LL,
	      e->final ? " final" : "", e->sig ? " sig" : "", st);
	if ((st != IBV_WC_SUCCESS || e->sig) &&
	    !(st == IBV_WC_WR_FLUSH_ERR && M->flush_sig_only && !e->sig) &&
	    M->cqe_n < FK_CQ) {
		uint32_t k = (M->cqe_head + M->cqe_n++) % FK_CQ;

		M->cqe[k].q = (uint32_t)(q - M->qp);
		M->cqe[k].idx = idx;
		M->cqe[k].ok = st != IBV_WC_WR_FLUSH_ERR;
	}
	if (st == IBV_WC_SUCCESS) {
		if (w && e->final) {
			w->hw_done = true;
			/* an unsignaled WR's signaled WQE owes the app nothing
			 */
			if (e->sig && w->signaled && !q->err)
				w->deliverable = true;
		}
		return;
	}
	if (st != IBV_WC_WR_FLUSH_ERR) {
		q->err = true;
		if (w) {
			w->hw_err = true;
			w->err_status = st;
		}
		return;
	}
	if (w)
		w->hw_flush = true;
}

/* What the layer took from the fake CQ: the WQEs it proves retired. */
static void cq_sync(void)
{
	while (M->cqe_n > (uint32_t)fk->cq_n) {
		struct mqp *q = &M->qp[M->cqe[M->cqe_head].q];
		uint64_t idx = M->cqe[M->cqe_head].idx;

		/* an error CQE proves the WQEs before it, a success itself */
		idx += M->cqe[M->cqe_head].ok;
		if (idx > q->proven)
			q->proven = idx;
		M->cqe_head = (M->cqe_head + 1) % FK_CQ;
		M->cqe_n--;
	}
}

/* With M->lock held. */
static void hw_complete(struct mqp *q, int n)
{
	int k = fk_complete(q->fi, n);

	while (k-- > 0)
		hw_retire(q, IBV_WC_SUCCESS);
}

static void hw_fail(struct mqp *q, enum ibv_wc_status st)
{
	int k = fk_fail_next(q->fi, st);

	if (k <= 0)
		return;
	hw_retire(q, st);
	q->err = true;
	while (--k > 0)
		hw_retire(q, IBV_WC_WR_FLUSH_ERR);
}

static void hw_qp_error(struct mqp *q)
{
	int k = fk_outstanding(q->fi);
	uint64_t i;

	for (i = q->hw_retired; M->flush_sig_only && i < q->hw_posted; i++) {
		struct mwqe *e = &q->hw[i % MIRROR];

		if (e->wr != NONE && !wr_at(e->wr)->signaled)
			wr_at(e->wr)->ambiguous = true;
	}

	q->err = true;
	fk_qp_error(q->fi);
	while (k-- > 0)
		hw_retire(q, IBV_WC_WR_FLUSH_ERR);
}

static struct mqp *qp_of_fake(const struct ibv_qp *qp)
{
	int s = M->slot[fk_qp_index(qp)];

	return s < 0 ? NULL : &M->qp[s];
}

static bool opcode_rdma(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       op == IBV_WR_RDMA_READ;
}

/* Check one WQE the layer handed over against its WR; account it. */
static void wqe_check(struct mqp *q, const struct fk_wqe *fw, uint32_t wi)
{
	struct mwr *w = wr_at(wi);
	uint64_t off = w->hw_bytes, bytes = fw->bytes, pos;
	const struct ibv_send_wr *c = &fw->wr;
	bool final;
	int i, k;

	if (w->st == W_REJECTED)
		mismatch("qp %u: WR %llu reached the hardware after post_send "
			 "refused it",
			 q->qp_num, (unsigned long long)w->wr_id);
	/*
	 * an unmanaged QP (UC...) is stock: its WRs keep their bits; so does
	 * one the layer left stock, or in pass-through for now, when it could
	 * not leave pass-through (stock_for_good(), stayed_for_now())
	 */
	if (q->managed && !atomic_load(&q->sqp->fast.stock) &&
	    q->sqp->pt_stays == q->stays_at_post &&
	    (c->send_flags & SVERBS_PRIO_MASK))
		mismatch("qp %u: priority bits reached the provider",
			 q->qp_num);
	if (off + bytes > w->len || (w->final_posted && !q->err)) {
		mismatch("qp %u: WR %llu: WQE past its end (%llu+%llu of %llu)",
			 q->qp_num, (unsigned long long)w->wr_id,
			 (unsigned long long)off, (unsigned long long)bytes,
			 (unsigned long long)w->len);
		return;
	}
	final = off + bytes == w->len;
	if (final ? c->opcode != w->op
		  : c->opcode != (w->op == IBV_WR_RDMA_WRITE_WITH_IMM
					  ? IBV_WR_RDMA_WRITE
					  : w->op))
		mismatch("qp %u: WR %llu: WQE opcode %d (WR %d, final %d)",
			 q->qp_num, (unsigned long long)w->wr_id, c->opcode,
			 w->op, final);
	if (opcode_rdma(w->op) && c->wr.rdma.remote_addr != w->raddr + off)
		mismatch("qp %u: WR %llu: slice at %llu has remote address "
			 "+%lld",
			 q->qp_num, (unsigned long long)w->wr_id,
			 (unsigned long long)off,
			 (long long)(c->wr.rdma.remote_addr - w->raddr));
	if (w->fenced && !w->nwqe && !q->err &&
	    !(c->send_flags & IBV_SEND_FENCE))
		mismatch("qp %u: WR %llu: fenced WR's first WQE lost the fence",
			 q->qp_num, (unsigned long long)w->wr_id);
	if (w->inl) {
		for (i = 0; i < (int)bytes && i < FK_INL; i++)
			if (fw->inl[i] != (uint8_t)(w->tag + (uint32_t)i)) {
				mismatch("qp %u: WR %llu: inline byte %d "
					 "differs",
					 q->qp_num,
					 (unsigned long long)w->wr_id, i);
				break;
			}
	} else {
		/* the WQE's SGEs are the WR's bytes [off, off + bytes) */
		pos = 0;
		k = 0;
		for (i = 0; i < fw->wr.num_sge && i < FK_SGE; i++) {
			const struct ibv_sge *s = &fw->sge[i];
			uint64_t at = off + pos, base = 0;

			if (!s->length)
				continue;
			for (k = 0; k < w->nsge; k++) {
				if (at < base + w->sge[k].length)
					break;
				base += w->sge[k].length;
			}
			if (k == w->nsge ||
			    s->addr != w->sge[k].addr + (at - base) ||
			    s->lkey != w->sge[k].lkey ||
			    at + s->length > base + w->sge[k].length) {
				mismatch("qp %u: WR %llu: WQE SGE %d does not "
					 "match bytes at %llu",
					 q->qp_num,
					 (unsigned long long)w->wr_id, i,
					 (unsigned long long)at);
				break;
			}
			pos += s->length;
		}
		if (pos != bytes && i == fw->wr.num_sge)
			mismatch("qp %u: WR %llu: SGE bytes %llu != %llu",
				 q->qp_num, (unsigned long long)w->wr_id,
				 (unsigned long long)pos,
				 (unsigned long long)bytes);
	}
	if ((w->op == IBV_WR_RDMA_WRITE_WITH_IMM ||
	     w->op == IBV_WR_SEND_WITH_IMM) &&
	    final && c->imm_data != htobe32(w->tag))
		mismatch("qp %u: WR %llu: immediate changed", q->qp_num,
			 (unsigned long long)w->wr_id);

	/* scheduling at hand-over: strict priority, FIFO, fence */
	if (!q->err && !w->nwqe) {
		for (i = 0; i < (int)q->nlive; i++) {
			struct mwr *a = wr_at(q->live[i]);

			if (a->pseq >= w->pseq)
				break;
			if (a->st != W_ACCEPTED || a->final_posted ||
			    a->refused_err || a->after_err)
				continue;
			if (must_precede(a, w))
				mismatch("qp %u: WR %llu (level %d%s) handed "
					 "over before WR %llu (level %d%s)",
					 q->qp_num,
					 (unsigned long long)w->wr_id, w->level,
					 w->fenced ? ", fenced" : "",
					 (unsigned long long)a->wr_id, a->level,
					 a->fenced ? ", fenced" : "");
		}
	}
	if (!w->nwqe)
		w->pt_posted = q->pt_maybe;
	/* the provider refused a WQE of it before: the layer retried it */
	w->refused_err = 0;
	w->hw_bytes += bytes;
	w->nwqe++;
	if (final) {
		w->final_posted = true;
		w->final_idx = q->hw_posted;
	}
}

/*
 * The layer's post_send (db) or post_send_nodb, wrapped: record WQEs,
 * inject refusals.
 */
static int mdl_post(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr, bool db)
{
	struct ibv_send_wr *c, *cut = NULL, *prev = NULL;
	struct mqp *q;
	int before, after, ret = 0, i, err = 0;

	pthread_mutex_lock(&M->lock);
	q = qp_of_fake(qp);
	if (q && q->refuse_err) {
		for (c = wr; c; prev = c, c = c->next) {
			if (!c->imm_data)
				continue;
			cut = c;
			err = q->refuse_err;
			q->refuse_err = 0;
			break;
		}
	}
	before = fk->sq[fk_qp_index(qp)].posted;
	if (cut && prev)
		prev->next = NULL;
	if (!cut || prev)
		ret = db ? fk_adapter.post_send(qp, wr, bad_wr)
			 : fk_adapter_defer.post_send_nodb(qp, wr, bad_wr);
	if (cut && prev)
		prev->next = cut;
	after = fk->sq[fk_qp_index(qp)].posted;
	if (!ret && cut) {
		*bad_wr = cut;
		ret = err;
	}
	for (i = before; q && i < after; i++) {
		const struct fk_wqe *fw = fk_wqe(q->fi, i);
		uint32_t tag = be32toh(fw->wr.imm_data);
		struct mwqe *e = &q->hw[q->hw_posted % MIRROR];

		e->wr = NONE;
		e->final = false;
		e->sig = fw->signaled;
		if (tag) {
			if (tag > M->nwr ||
			    wr_at(tag - 1)->q != (uint32_t)(q - M->qp)) {
				mismatch("qp %u: a WQE with an unknown tag %u",
					 q->qp_num, tag);
			} else {
				struct mwr *w = wr_at(tag - 1);
				bool was = w->final_posted;

				wqe_check(q, fw, tag - 1);
				e->wr = tag - 1;
				e->final = w->final_posted && !was;
			}
		}
		TRACE("qp %u: WQE %llu tag %u bytes %llu%s%s op %d\n",
		      q->qp_num, (unsigned long long)q->hw_posted, tag,
		      (unsigned long long)fw->bytes, e->final ? " final" : "",
		      e->sig ? " sig" : "", fw->wr.opcode);
		q->hw_posted++;
		M->res->wqes++;
	}
	if (cut && ret == err && *bad_wr == cut) {
		struct mwr *w = NULL;
		uint32_t tag = be32toh(cut->imm_data);

		TRACE("qp %u: the provider refuses tag %u with %d\n",
		      q ? q->qp_num : 0, tag, err);
		if (tag && tag <= M->nwr)
			w = wr_at(tag - 1);
		if ((err == ENOMEM || err == EAGAIN || err == EBUSY) && q)
			q->full_idle = true;
		if (w && err == ENOMEM)
			w->refused_full = true;
		else if (w) {
			w->refused_err = err;
			w->refused_now = M->in_post &&
					 M->post_q == (uint32_t)(q - M->qp);
		}
	}
	pthread_mutex_unlock(&M->lock);
	return ret;
}

static int mdl_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	return mdl_post(qp, wr, bad_wr, true);
}

static int mdl_post_send_nodb(struct ibv_qp *qp, struct ibv_send_wr *wr,
			      struct ibv_send_wr **bad_wr)
{
	return mdl_post(qp, wr, bad_wr, false);
}

static int mdl_ring(struct ibv_qp *qp)
{
	int ret;

	pthread_mutex_lock(&M->lock);
	ret = fk_adapter_defer.ring(qp);
	M->res->rings++;
	pthread_mutex_unlock(&M->lock);
	return ret;
}

/*
 * What "the send queue is full" means is the adapter's (sq_full): here the
 * model's.  An ENOMEM it injects is a full queue, as the fake's own ENOMEM
 * for a queue at its depth; any other injected errno is a refusal.
 */
static bool mdl_sq_full(struct ibv_qp *qp, int err,
			const struct ibv_send_wr *bad)
{
	(void)qp;
	return err == ENOMEM && bad;
}

/* ------------------------------------------------------------ completions */

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
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
	default:
		return IBV_WC_SEND;
	}
}

static void on_wc(const struct ibv_wc *wc)
{
	uint64_t serial = wc->wr_id - M->wrid_base;
	struct mwr *w;
	struct mqp *q;
	uint32_t i;

	M->res->completions++;
	TRACE("wc qp %u wr %lld status %d\n", wc->qp_num,
	      (long long)(wc->wr_id - M->wrid_base), wc->status);
	if (wc->wr_id < M->wrid_base || serial >= M->nwr) {
		mismatch("completion with unknown wr_id %#llx (qp %u, status "
			 "%d)",
			 (unsigned long long)wc->wr_id, wc->qp_num, wc->status);
		return;
	}
	w = wr_at((uint32_t)serial);
	q = &M->qp[w->q];
	if (wc->qp_num != q->qp_num)
		mismatch("WR %llu: qp_num %u, posted on %u",
			 (unsigned long long)w->wr_id, wc->qp_num, q->qp_num);
	if (w->st != W_ACCEPTED)
		mismatch("qp %u: completion for WR %llu that post_send "
			 "refused",
			 q->qp_num, (unsigned long long)w->wr_id);
	if (w->reported) {
		mismatch("qp %u: WR %llu completed twice (status %d, then %d)",
			 q->qp_num, (unsigned long long)w->wr_id, w->rep_status,
			 wc->status);
		return;
	}
	w->reported = 1;
	w->rep_status = wc->status;

	switch (wc->status) {
	case IBV_WC_SUCCESS:
		if (!w->hw_done || w->hw_err)
			mismatch("qp %u: WR %llu reported success before its "
				 "last WQE retired (%llu of %llu bytes "
				 "handed over)",
				 q->qp_num, (unsigned long long)w->wr_id,
				 (unsigned long long)w->hw_bytes,
				 (unsigned long long)w->len);
		if (!w->signaled)
			mismatch("qp %u: unsignaled WR %llu reported success",
				 q->qp_num, (unsigned long long)w->wr_id);
		if (wc->opcode != wc_opcode(w->op))
			mismatch("qp %u: WR %llu: opcode %d, want %d",
				 q->qp_num, (unsigned long long)w->wr_id,
				 wc->opcode, wc_opcode(w->op));
		if (wc->byte_len != (uint32_t)w->len)
			mismatch("qp %u: WR %llu: byte_len %u, want %llu",
				 q->qp_num, (unsigned long long)w->wr_id,
				 wc->byte_len, (unsigned long long)w->len);
		break;
	case IBV_WC_WR_FLUSH_ERR:
		if (!q->err && !w->at_destroy)
			mismatch("qp %u: WR %llu flushed on a QP not in error",
				 q->qp_num, (unsigned long long)w->wr_id);
		else if (w->hw_done && w->signaled && !w->at_destroy)
			mismatch("qp %u: WR %llu succeeded in hardware, "
				 "reported as a flush",
				 q->qp_num, (unsigned long long)w->wr_id);
		else if (w->hw_err && (!w->at_destroy || w->err_early))
			mismatch("qp %u: WR %llu failed with %d, reported as a "
				 "flush",
				 q->qp_num, (unsigned long long)w->wr_id,
				 w->err_status);
		else if (w->retired)
			mismatch("qp %u: unsignaled WR %llu retired, then "
				 "flushed",
				 q->qp_num, (unsigned long long)w->wr_id);
		break;
	case IBV_WC_LOC_QP_OP_ERR:
		if (w->refused_err &&
		    wc->vendor_err == (uint32_t)w->refused_err)
			break;
		/* fall through */
	default:
		if (!w->hw_err || wc->status != w->err_status)
			mismatch("qp %u: WR %llu: status %d vendor_err %u "
				 "(failed: %d, refused: %d)",
				 q->qp_num, (unsigned long long)w->wr_id,
				 wc->status, wc->vendor_err,
				 w->hw_err ? w->err_status : 0, w->refused_err);
		break;
	}

	/* order: nothing it may not overtake is still unreported */
	for (i = 0; i < q->nlive; i++) {
		struct mwr *a = wr_at(q->live[i]);

		if (a == w)
			break;
		if (a->st != W_ACCEPTED || a->reported || !must_precede(a, w))
			continue;
		if (a->signaled && !a->at_destroy && !w->at_destroy)
			mismatch("qp %u: WR %llu (level %d, status %d) "
				 "completed before WR %llu (level %d%s)",
				 q->qp_num, (unsigned long long)w->wr_id,
				 w->level, wc->status,
				 (unsigned long long)a->wr_id, a->level,
				 a->fenced ? ", fenced" : "");
		else if (!a->signaled && wc->status == IBV_WC_SUCCESS) {
			if (!a->hw_done && !a->refused_err)
				mismatch("qp %u: WR %llu completed before "
					 "unsignaled WR %llu retired",
					 q->qp_num,
					 (unsigned long long)w->wr_id,
					 (unsigned long long)a->wr_id);
			a->retired = true;
		}
	}
	live_compact(q);
}

static int do_poll(int ne)
{
	struct ibv_wc wc[32];
	int n, i;

	n = sverbs_poll_cq(M->scq, ne, wc);
	if (n < 0 || n > ne) {
		mismatch("poll_cq returned %d for ne %d", n, ne);
		return 0;
	}
	pthread_mutex_lock(&M->lock);
	cq_sync();
	for (i = 0; i < n; i++)
		on_wc(&wc[i]);
	if (!n && (M->known & MK_POLL0)) {
		uint32_t k;

		for (k = 0; k < M->nwr; k++) {
			struct mwr *w = wr_at(k);

			if (w->deliverable && !w->reported) {
				mismatch("qp %u: poll_cq returned 0 with the "
					 "completion of WR %llu pending",
					 M->qp[w->q].qp_num,
					 (unsigned long long)w->wr_id);
				break;
			}
		}
	}
	if (fk->cq_overflow) {
		mismatch("the CQ overran");
		fk->cq_overflow = false;
	}
	pthread_mutex_unlock(&M->lock);
	return n;
}

/* ------------------------------------------------------------ QPs */

static struct mqp *live_qp(uint32_t k)
{
	uint32_t i, n = 0;

	for (i = 0; i < M->nqp; i++)
		if (M->qp[i].alive && n++ == k)
			return &M->qp[i];
	return NULL;
}

static uint32_t nlive_qps(void)
{
	uint32_t i, n = 0;

	for (i = 0; i < M->nqp; i++)
		n += M->qp[i].alive;
	return n;
}

static void qp_new(void)
{
	struct ibv_qp_init_attr_ex a = {};
	struct ibv_qp *qp;
	struct mqp *q;
	int fi;

	for (fi = 0; fi < FK_QPS && M->slot[fi] >= 0; fi++)
		;
	if (fi == FK_QPS || nlive_qps() >= MQ)
		return;
	pthread_mutex_lock(&M->lock);
	if (M->nqp == M->qp_cap) {
		M->qp_cap = M->qp_cap ? 2 * M->qp_cap : 8;
		M->qp = realloc(M->qp, M->qp_cap * sizeof(*M->qp));
	}
	q = &M->qp[M->nqp];
	memset(q, 0, sizeof(*q));
	q->fi = fi;
	q->cap = 4 + rnd(61);
	q->sig_all = chance(15);
	q->type = (M->known & MK_UC) && chance(30) ? IBV_QPT_UC : IBV_QPT_RC;
	q->style = (int)rnd(3);
	q->hw = calloc(MIRROR, sizeof(*q->hw));
	qp = fk_qp(fi, q->type, (int)q->cap, q->sig_all);
	if (!(M->known & MK_QPN_REUSE))
		qp->qp_num = M->next_qpn++;
	fk->sq[fi].posted = 0;
	fk->sq[fi].done = 0;
	fk->sq[fi].rung = 0;
	fk->sq[fi].err = false;
	fk->sq[fi].out_bytes = 0;
	q->qp_num = qp->qp_num;
	a.cap.max_send_wr = q->cap;
	a.cap.max_send_sge = MAX_SGE;
	a.cap.max_inline_data = MAX_INL;
	a.sq_sig_all = q->sig_all;
	a.qp_type = q->type;
	a.send_cq = fk_cq();
	M->slot[fi] = (int)M->nqp;
	M->nqp++;
	q->alive = true;
	pthread_mutex_unlock(&M->lock);
	q->sqp = sverbs_qp_create(&M->ad, qp, M->scq, &a, &M->cfg);
	q->managed = q->sqp != NULL;
	if (M->o->verbose > 1)
		fprintf(stderr,
			"model: qp %u: cap %u sig_all %d type %d style "
			"%d managed %d\n",
			q->qp_num, q->cap, q->sig_all, q->type, q->style,
			q->managed);
	/* with a budget: watched, until its posts would form a batch */
	q->pt_maybe =
		!q->managed || (M->cfg.passthrough && !M->cfg.small_msg_bytes &&
				!M->cfg.slice_always);
}

/*
 * A managed QP the layer left in pass-through for good when a WR stated a
 * priority: the CQ had no headroom for one more QP and could not grow
 * (sv_cq_register(), docs/semantics.md).  Its WRs follow stock's rules, as
 * an unmanaged QP's do.  The model does not track the CQ's
 * headroom units, so the QP says so; a QP the layer leaves in pass-through
 * without saying so is caught by its WRs' priority bits (wqe_check()).
 */
static bool stock_for_good(struct mqp *q)
{
	if (!atomic_load(&q->sqp->fast.stock))
		return false;
	if (!atomic_load(&q->sqp->fast.pt))
		mismatch("qp %u: left stock, yet out of pass-through",
			 q->qp_num);
	if (!q->left_stock)
		M->res->left_stock++;
	q->left_stock = true;
	return true;
}

/*
 * The post just made could not leave pass-through for want of CQ headroom
 * free at that moment (sv_qp_leave_prepare(): EBUSY): the QP stays there,
 * stock, until a later post leaves.  The QP says so, as for
 * stock_for_good(); it must still be in pass-through.
 */
static bool stayed_for_now(struct mqp *q)
{
	uint32_t n = q->sqp->pt_stays - q->stays_at_post;

	if (!n)
		return false;
	if (!atomic_load(&q->sqp->fast.pt))
		mismatch("qp %u: stayed in pass-through, yet out of it",
			 q->qp_num);
	M->res->pt_stays += n;
	q->stays_at_post = q->sqp->pt_stays;
	return true;
}

static int app_post(struct mqp *q, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad)
{
	if (q->managed)
		return sverbs_post_send(q->sqp, wr, bad);
	/* a QP the layer left stock: the provider's own post */
	return M->ad.post_send(&fk->qp[q->fi], wr, bad);
}

/* Poll until nothing comes (bounded). */
static void poll_dry(void)
{
	int k;

	for (k = 0; k < 10000; k++)
		if (!do_poll(16) && !fk->cq_n)
			return;
	mismatch("poll_cq never ran dry");
}

static void qp_destroy(struct mqp *q)
{
	uint32_t i;
	int late;

	pthread_mutex_lock(&M->lock);
	for (i = 0; i < q->nlive; i++) {
		struct mwr *w = wr_at(q->live[i]);

		if (w->st == W_ACCEPTED && !w->reported && !w->hw_done)
			w->at_destroy = true;
		w->err_early = w->hw_err;
	}
	pthread_mutex_unlock(&M->lock);
	if (q->managed)
		sverbs_qp_destroy_pre(q->sqp);
	/* WQEs may still complete between the drain and the destroy */
	late = (int)rnd(3);
	pthread_mutex_lock(&M->lock);
	hw_complete(q, late);
	for (i = 0; i < q->nlive; i++) {
		struct mwr *w = wr_at(q->live[i]);

		if (w->st == W_ACCEPTED && !w->reported)
			w->at_destroy = true;
	}
	pthread_mutex_unlock(&M->lock);
	if (q->managed)
		sverbs_qp_destroy_post(q->sqp, 0);
	pthread_mutex_lock(&M->lock);
	q->alive = false;
	q->err = true;
	M->slot[q->fi] = -1;
	/* the provider's QP is gone: its send queue with it */
	fk->sq[q->fi].done = fk->sq[q->fi].posted;
	fk->sq[q->fi].rung = fk->sq[q->fi].posted;
	pthread_mutex_unlock(&M->lock);
	/* an application collects a destroyed QP's completions (MK_QPN_REUSE:
	 * not before a new QP took its number) */
	if (!(M->known & MK_QPN_REUSE))
		poll_dry();
}

/*
 * ibv_destroy_qp() fails (MK_DESTROY_FAIL): completions arrive and another
 * thread polls while the provider tries; then the QP lives on, and every
 * WR of it must complete as if nothing had happened.
 */
static void qp_destroy_fails(struct mqp *q)
{
	if (q->managed)
		sverbs_qp_destroy_pre(q->sqp);
	pthread_mutex_lock(&M->lock);
	hw_complete(q, (int)rnd(3));
	pthread_mutex_unlock(&M->lock);
	do_poll(16);
	if (q->managed)
		sverbs_qp_destroy_post(q->sqp, EBUSY);
}

/* ------------------------------------------------------------ posting */

static uint64_t pick_len(void)
{
	uint32_t r = rnd(100);

	if (r < 8)
		return 0;
	if (r < 45)
		return 1 + rnd(256);
	if (r < 75)
		return 1 + rnd(64 << 10);
	if (r < 97 || M->data) /* the fuzzer: short runs, at most 1 MiB */
		return 1 + rnd(1 << 20);
	return 1 + rnd(8 << 20);
}

static enum ibv_wr_opcode pick_op(const struct mqp *q)
{
	static const enum ibv_wr_opcode rc[] = {
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ,
		IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM,
		IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	static const enum ibv_wr_opcode uc[] = {
		IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM,
	};

	if (q->type == IBV_QPT_UC)
		return uc[rnd(4)];
	return rc[rnd(8)];
}

static uint8_t level_of(const struct mwr *w, unsigned int flags)
{
	int p = sverbs_prio_of(flags);

	if (p >= 0)
		return (uint8_t)p;
	/* never a WR the peer sees: it would overtake the data it announces */
	if (M->cfg.small_msg_bytes && w->len <= M->cfg.small_msg_bytes &&
	    w->op != IBV_WR_SEND && w->op != IBV_WR_SEND_WITH_IMM &&
	    w->op != IBV_WR_SEND_WITH_INV &&
	    w->op != IBV_WR_RDMA_WRITE_WITH_IMM)
		return 0;
	return (uint8_t)M->cfg.default_prio;
}

/* A wr_id of the layer's range: its two ends, or one inside. */
static uint64_t pick_reserved_wr_id(void)
{
	if (chance(20))
		return SVERBS_WR_ID_RESERVED_MIN;
	if (chance(25))
		return SVERBS_WR_ID_RESERVED_MAX;
	return SVERBS_WR_ID_RESERVED_MIN + 1 +
	       ((uint64_t)rnd(UINT32_MAX) << 16);
}

/* Build one WR (its model record and its ibv_send_wr). */
static uint32_t make_wr(struct mqp *q, struct ibv_send_wr *wr,
			struct ibv_sge *sge)
{
	struct mwr *w;
	uint64_t left;
	unsigned int flags = 0;
	uint32_t i;
	int k;

	pthread_mutex_lock(&M->lock);
	if (M->nwr == M->wr_cap) {
		M->wr_cap = M->wr_cap ? 2 * M->wr_cap : 1024;
		M->wr = realloc(M->wr, M->wr_cap * sizeof(*M->wr));
	}
	i = M->nwr++;
	w = wr_at(i);
	memset(w, 0, sizeof(*w));
	w->st = W_PENDING;
	w->q = (uint32_t)(q - M->qp);
	pthread_mutex_unlock(&M->lock);
	w->q = (uint32_t)(q - M->qp);
	w->tag = i + 1;
	w->wr_id = M->wrid_base + i;
	w->op = pick_op(q);
	w->len = pick_len();
	w->raddr = RBASE + ((uint64_t)i << 24);
	if (w->op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		w->len = 8;
	if ((w->op == IBV_WR_SEND || w->op == IBV_WR_RDMA_WRITE) &&
	    w->len <= MAX_INL && w->len && chance(30))
		w->inl = true;
	/* SGEs: 1..3 pieces (some empty), or none for a zero-length WR */
	w->nsge = w->len ? 1 + (int)rnd(MAX_SGE) : (int)rnd(2);
	left = w->len;
	for (k = 0; k < w->nsge; k++) {
		uint64_t l = k == w->nsge - 1 ? left : rnd((uint32_t)left + 1);

		w->sge[k].addr = LBASE + ((uint64_t)i << 24) + 4096u * k;
		w->sge[k].length = (uint32_t)l;
		w->sge[k].lkey = 0x100 + i;
		left -= l;
	}
	if (w->inl) {
		w->nsge = 1;
		w->sge[0].addr = (uintptr_t)M->inl_buf;
		w->sge[0].length = (uint32_t)w->len;
		for (k = 0; k < (int)w->len; k++)
			M->inl_buf[k] = (uint8_t)(w->tag + (uint32_t)k);
		flags |= IBV_SEND_INLINE;
	}
	/* now and then a WR stock checks at post time would refuse */
	if (chance(2)) {
		w->invalid = true;
		if (chance(50) && !w->inl) {
			for (k = w->nsge; k < MAX_SGE; k++)
				w->sge[k].length = 0;
			w->nsge = MAX_SGE + 1;
			w->sge[MAX_SGE].length = 0;
			w->sge[MAX_SGE].addr = LBASE;
		} else {
			w->op = IBV_WR_ATOMIC_FETCH_AND_ADD;
			w->raddr |= 4; /* misaligned */
			w->inl = false;
			flags &= ~IBV_SEND_INLINE;
			w->len = 8;
			w->nsge = 1;
			w->sge[0].length = 8;
		}
	}
	if (chance(50) || q->sig_all)
		flags |= IBV_SEND_SIGNALED;
	w->signaled = (flags & IBV_SEND_SIGNALED) || q->sig_all;
	if (chance(5))
		flags |= IBV_SEND_FENCE;
	w->fenced = flags & IBV_SEND_FENCE;
	if (q->style == 1 || (q->style == 2 && chance(30))) {
		flags |= SVERBS_PRIO(rnd(8));
		w->marked = true;
	}
	w->level = level_of(w, flags);
	w->st = W_PENDING;

	/*
	 * now and then a wr_id of the layer's range (sverbs.h): refused with
	 * EINVAL at that WR on every path of a QP the layer manages (a QP it
	 * left stock posts to the provider directly here, see app_post)
	 */
	if (q->managed && chance(1))
		w->reserved = true;

	memset(wr, 0, sizeof(*wr));
	wr->wr_id = w->wr_id;
	if (w->reserved)
		wr->wr_id = pick_reserved_wr_id();
	wr->opcode = w->op;
	wr->send_flags = flags;
	wr->sg_list = sge;
	wr->num_sge = w->nsge;
	memcpy(sge, w->sge, sizeof(*sge) * (size_t)w->nsge);
	wr->imm_data = htobe32(w->tag);
	if (w->op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = w->raddr;
		wr->wr.atomic.rkey = 0x77;
		wr->wr.atomic.compare_add = 1;
	} else {
		wr->wr.rdma.remote_addr = w->raddr;
		wr->wr.rdma.rkey = 0x77;
	}
	return i;
}

static void __attribute__((unused)) dump_qp(struct mqp *q)
{
	uint32_t i;

	fprintf(stderr, "  qp %u: err %d proven %llu hw %llu/%llu nfree %u\n",
		q->qp_num, q->err, (unsigned long long)q->proven,
		(unsigned long long)q->hw_retired,
		(unsigned long long)q->hw_posted, q->sqp ? q->sqp->nfree : 0);
	for (i = 0; i < q->nlive; i++) {
		struct mwr *w = wr_at(q->live[i]);

		fprintf(stderr,
			"  wr %llu st %d sig %d lvl %d len %llu hw %llu done "
			"%d "
			"final_idx %llu rep %d ret %d err %d ref %d\n",
			(unsigned long long)(w->wr_id - M->wrid_base), w->st,
			w->signaled, w->level, (unsigned long long)w->len,
			(unsigned long long)w->hw_bytes, w->hw_done,
			(unsigned long long)w->final_idx, w->reported,
			w->retired, w->hw_err, w->refused_err);
	}
}

static void post_list(struct mqp *q)
{
	struct ibv_send_wr wr[3], *bad = NULL;
	struct ibv_sge sge[3][MAX_SGE + 1];
	uint32_t ids[3], held;
	int n = 1 + (int)rnd(3), k, bad_k, ret;
	bool stayed;

	/* an inline WR's buffer is shared: one inline WR per list */
	for (k = 0; k < n; k++) {
		ids[k] = make_wr(q, &wr[k], sge[k]);
		wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		if (wr_at(ids[k])->inl) {
			n = k + 1;
			wr[k].next = NULL;
		}
	}
	pthread_mutex_lock(&M->lock);
	for (k = 0; k < n; k++) {
		struct mwr *w = wr_at(ids[k]);

		w->pseq = q->pseq++;
		w->after_err = q->err;
		live_add(q, ids[k]);
	}
	cq_sync();
	held = held_upper(q);
	M->in_post = true;
	M->post_q = (uint32_t)(q - M->qp);
	pthread_mutex_unlock(&M->lock);

	for (k = 0; k < n; k++)
		TRACE("post qp %u wr %lld op %d len %llu sig %d lvl %d fence "
		      "%d "
		      "inl %d\n",
		      q->qp_num, (long long)(wr[k].wr_id - M->wrid_base),
		      wr[k].opcode, (unsigned long long)wr_at(ids[k])->len,
		      wr_at(ids[k])->signaled, wr_at(ids[k])->level,
		      wr_at(ids[k])->fenced, wr_at(ids[k])->inl);
	if (q->managed)
		q->stays_at_post = q->sqp->pt_stays;
	ret = app_post(q, wr, &bad);
	TRACE("post returned %d\n", ret);
	/* a watched QP that left pass-through with no WR stating a priority */
	if (q->managed && q->pt_maybe && !atomic_load(&q->sqp->fast.pt)) {
		for (k = 0; k < n && !wr_at(ids[k])->marked; k++)
			;
		if (k == n)
			M->res->watch_left++;
	}
	/* the application may reuse its buffers once post_send returned */
	memset(M->inl_buf, 0xee, sizeof(M->inl_buf));
	memset(sge, 0xee, sizeof(sge));

	pthread_mutex_lock(&M->lock);
	M->in_post = false;
	stayed = q->managed && stayed_for_now(q);
	bad_k = n;
	if (ret) {
		for (k = 0; k < n && bad != &wr[k]; k++)
			;
		if (k == n)
			mismatch("qp %u: post_send returned %d, *bad_wr not "
				 "in the list",
				 q->qp_num, ret);
		bad_k = k;
	}
	for (k = 0; k < n; k++) {
		struct mwr *w = wr_at(ids[k]);

		w->st = k < bad_k ? W_ACCEPTED : W_REJECTED;
		/* a provider that checks nothing: pass-through is stock */
		if (k < bad_k && w->invalid && q->pt_maybe)
			w->invalid = false;
		if (k < bad_k && w->invalid)
			mismatch("qp %u: post_send took WR %llu that stock "
				 "refuses (EINVAL)",
				 q->qp_num, (unsigned long long)w->wr_id);
		if (k < bad_k && w->reserved)
			mismatch("qp %u: post_send took WR %llu with a "
				 "reserved wr_id",
				 q->qp_num, (unsigned long long)w->wr_id);
		if (k >= bad_k && w->nwqe)
			mismatch("qp %u: post_send refused WR %llu, which "
				 "reached the hardware",
				 q->qp_num, (unsigned long long)w->wr_id);
		if (k < bad_k) {
			M->res->wrs++;
			/*
			 * A WR that states a priority ends pass-through, and
			 * so may a watched QP's post (sched/watch.c): the QP
			 * says which.
			 */
			if (q->managed &&
			    (w->marked || !atomic_load(&q->sqp->fast.pt)) &&
			    !stayed && !stock_for_good(q))
				q->pt_maybe = false;
		} else {
			M->res->rejected++;
		}
	}
	if (ret && bad_k < n) {
		struct mwr *w = wr_at(ids[bad_k]);
		bool full = held + (uint32_t)bad_k >= q->cap;

		if (w->reserved && ret == EINVAL)
			M->res->reserved++; /* the layer's wr_id range */
		else if (w->invalid && ret == EINVAL)
			; /* stock's check */
		else if (w->refused_err && w->refused_now &&
			 ret == w->refused_err)
			w->refused_err = 0; /* the provider's error, as stock */
		else if (ret == ENOMEM && (full || w->refused_full))
			; /* capacity (stock checks it before the WR) */
		else
			mismatch("qp %u: WR %llu: post_send returned %d "
				 "(invalid %d, provider said %d, %u of %u "
				 "slots held)",
				 q->qp_num, (unsigned long long)w->wr_id, ret,
				 w->invalid,
				 w->refused_now ? w->refused_err : 0,
				 held + (uint32_t)bad_k, q->cap);
	}
	for (k = 0; k < n; k++)
		wr_at(ids[k])->refused_now = false;
	live_compact(q);
	pthread_mutex_unlock(&M->lock);
}

/* ------------------------------------------------------------ faults */

static const int refuse_errnos[] = { ENOMEM, EAGAIN, EBUSY,  EINVAL,
				     EIO,    EPERM,  EFAULT, EOPNOTSUPP };

static void fault(struct mqp *q)
{
	struct ibv_qp_attr attr = {};
	uint64_t i;
	int k = 0;

	M->res->faults++;
	k = (int)rnd(6);
	TRACE("fault %d on qp %u\n", k, q->qp_num);
	switch (k) {
	case 0: /* a bad rkey: a WQE fails, mid-slice if one is in flight */
		if (q->err)
			break; /* in error, the hardware only flushes */
		k = 0;
		pthread_mutex_lock(&M->lock);
		for (i = q->hw_retired; i < q->hw_posted; i++, k++) {
			struct mwqe *e = &q->hw[i % MIRROR];

			if (e->wr != NONE && !e->final)
				break;
		}
		if (i == q->hw_posted)
			k = (int)rnd((uint32_t)(q->hw_posted - q->hw_retired) +
				     1);
		hw_complete(q, k);
		hw_fail(q, chance(50) ? IBV_WC_REM_ACCESS_ERR
				      : IBV_WC_RETRY_EXC_ERR);
		pthread_mutex_unlock(&M->lock);
		break;
	case 1: /* the application moves the QP to ERR */
		attr.qp_state = IBV_QPS_ERR;
		if (q->managed)
			sverbs_qp_modify_pre(q->sqp, &attr, IBV_QP_STATE);
		pthread_mutex_lock(&M->lock);
		hw_qp_error(q);
		pthread_mutex_unlock(&M->lock);
		if (q->managed)
			sverbs_qp_modify_post(q->sqp, &attr, IBV_QP_STATE, 0);
		break;
	case 2: /* destroy it with work queued, make a new one */
		if ((M->known & MK_DESTROY_FAIL) && chance(50)) {
			qp_destroy_fails(q);
			break;
		}
		qp_destroy(q);
		qp_new();
		if (M->known & MK_QPN_REUSE)
			poll_dry();
		break;
	case 3: /* the provider refuses a WQE */
		pthread_mutex_lock(&M->lock);
		q->refuse_err = refuse_errnos[rnd(8)];
		pthread_mutex_unlock(&M->lock);
		break;
	case 4: /* the application resizes its CQ (stock op, not hooked) */
		if (M->known & MK_RESIZE)
			M->ad.resize_cq(fk_cq(), M->app_cqe);
		break;
	default: /* another QP joins the CQ (the layer may resize it) */
		qp_new();
		break;
	}
}

/* ------------------------------------------------------------ the run */

static void random_config(struct sverbs_config *c, bool timing)
{
	static const uint32_t slices[] = { 4096, 16384, 65536, 262144,
					   1 << 20 };

	sverbs_config_defaults(c);
	c->mode = SVERBS_MODE_ON;
	c->passthrough = chance(50);
	c->slice_always = chance(30);
	c->slice_bytes = slices[rnd(5)];
	if (timing && chance(30))
		c->slice_bytes = 0;
	c->slice_min_bytes = 4096;
	c->window_slices = 1 + rnd(4);
	c->small_msg_bytes = chance(20) ? 512 : 0;
	c->default_prio = chance(70) ? 4 : rnd(8);
	c->cq_headroom = 16 + rnd(49);
	c->batch = chance(90);
	c->batch_budget_us = timing && chance(40) ? 20 + rnd(200) : 0;
	c->stats = false;
	/*
	 * One CQE per window in a quarter of the runs, derived from a draw
	 * above rather than drawn: a new draw would shift every seed's
	 * workload (the model-known-* tests replay seeds).
	 */
	c->window_signals = c->cq_headroom % 4 ? 2 : 1;
	/* growing slices in a third of the runs, derived the same way */
	c->slice_grow_windows = c->cq_headroom % 3 ? 0 : 1 + c->cq_headroom % 2;
}

static void drain(void)
{
	uint64_t last = UINT64_MAX;
	bool unrung = false;
	uint32_t i;
	int round, same = 0;

	for (round = 0; round < 100000 && same < 3; round++) {
		uint64_t sum = 0;

		pthread_mutex_lock(&M->lock);
		for (i = 0; i < M->nqp; i++)
			if (M->qp[i].alive)
				hw_complete(&M->qp[i], -1);
		pthread_mutex_unlock(&M->lock);
		poll_dry();
		if (round % 7 == 3)
			sverbs_req_notify_cq(M->scq, 0);
		pthread_mutex_lock(&M->lock);
		for (i = 0; i < M->nqp; i++) {
			sum += M->qp[i].hw_posted;
			/* deferred WQEs: the budget's timer rings them */
			if (M->qp[i].alive && fk_unrung(M->qp[i].fi))
				unrung = true;
		}
		sum += M->res->completions;
		pthread_mutex_unlock(&M->lock);
		same = sum == last && !unrung ? same + 1 : 0;
		unrung = false;
		last = sum;
	}
}

/* Every WR accepted is accounted for. */
static void final_check(void)
{
	uint32_t i;

	for (i = 0; i < M->nwr; i++) {
		struct mwr *w = wr_at(i);
		struct mqp *q = &M->qp[w->q];
		bool lax = ((q->pt_maybe || w->pt_posted) &&
			    (M->flush_sig_only || w->at_destroy)) ||
			   w->ambiguous;

		if (w->st != W_ACCEPTED || w->reported)
			continue;
		/* known (MK_FULL_IDLE): nothing retries the queue then */
		if (q->full_idle && !w->hw_done && !(M->known & MK_FULL_IDLE))
			continue;
		if (w->signaled) {
			/* stock: destroy discards what pass-through posted */
			if (!((q->pt_maybe || w->pt_posted) && w->at_destroy))
				mismatch("qp %u: signaled WR %llu (%s) never "
					 "completed",
					 q->qp_num,
					 (unsigned long long)w->wr_id,
					 w->hw_done ? "done in hardware"
					 : w->nwqe  ? "partly handed over"
						    : "never handed over");
			continue;
		}
		if (w->refused_err) {
			mismatch("qp %u: WR %llu, refused by the provider "
				 "(%d), never completed",
				 q->qp_num, (unsigned long long)w->wr_id,
				 w->refused_err);
			continue;
		}
		if (w->hw_done && !w->hw_err)
			continue;
		if (w->hw_err || q->err || w->at_destroy) {
			if (!lax)
				mismatch(
					"qp %u: unsignaled WR %llu (%s, level "
					"%d, %llu of %llu bytes handed "
					"over%s%s) "
					"got no completion after an error",
					q->qp_num, (unsigned long long)w->wr_id,
					w->hw_err ? "failed" : "flushed",
					w->level,
					(unsigned long long)w->hw_bytes,
					(unsigned long long)w->len,
					w->after_err ? ", posted in error" : "",
					w->at_destroy ? ", destroyed" : "");
			continue;
		}
		mismatch("qp %u: WR %llu stalled: %llu of %llu bytes handed "
			 "over",
			 q->qp_num, (unsigned long long)w->wr_id,
			 (unsigned long long)w->hw_bytes,
			 (unsigned long long)w->len);
	}
}

/*
 * fk_init(), or for the fuzzer (thousands of short runs) the fake of the
 * previous run, emptied: its WQE history is FK_QPS * FK_HIST entries.
 */
static void fake_init(int cqe, bool reuse)
{
	struct fk_wqe *w[FK_QPS];
	int i;

	if (!reuse || !fk) {
		if (fk)
			fk_fini();
		fk_init(cqe);
		return;
	}
	for (i = 0; i < FK_QPS; i++)
		w[i] = fk->sq[i].w;
	/* all but the CQ's ring (cq_n = 0 empties it) */
	memset(fk, 0, offsetof(struct fk, cqe));
	memset(&fk->cq_head, 0, sizeof(*fk) - offsetof(struct fk, cq_head));
	for (i = 0; i < FK_QPS; i++)
		fk->sq[i].w = w[i];
	fk->cqx.context = &fk->ctx;
	fk->cqx.cqe = cqe;
}

uint64_t model_run(const struct model_opts *o, struct model_result *res)
{
	static struct mdl m; /* its CQE mirror needs no clearing */
	uint64_t step, steps, target;
	uint32_t i, nq;

	memset(res, 0, sizeof(*res));
	memset(&m, 0, offsetof(struct mdl, cqe));
	m.cqe_head = 0;
	m.cqe_n = 0;
	pthread_mutex_init(&m.lock, NULL);
	M = &m;
	m.o = o;
	m.res = res;
	m.rng = o->seed;
	m.data = o->data;
	m.size = o->size;
	m.known = o->known;
	m.next_qpn = 0x1000;
	m.wrid_base = (o->known & MK_WRID) ? WRID_INTERNAL : WRID_BASE;
	for (i = 0; i < FK_QPS; i++)
		m.slot[i] = -1;
	random_config(&m.cfg, o->timing);
	m.ad = fk_adapter;
	m.ad.post_send = mdl_post_send;
	/*
	 * Deferred doorbells (sched/watch.c) in half the budgeted runs,
	 * derived from the budget's draw (a new draw would shift the seeds)
	 */
	if (m.cfg.batch_budget_us % 2) {
		m.ad.post_send_nodb = mdl_post_send_nodb;
		m.ad.ring = mdl_ring;
	}
	m.ad.sq_full = mdl_sq_full;
	/* room for the completions of MQ QPs of 64 and one destroyed set */
	m.app_cqe = 2 * MQ * 64;
	fake_init(m.app_cqe + (int)m.cfg.cq_headroom, o->data != NULL);
	m.flush_sig_only = chance(50);
	fk->flush_signaled_only = m.flush_sig_only;
	fk->resize_fails = chance(10);
	if (o->verbose > 1)
		fprintf(stderr,
			"model: seed %llu: passthrough %d slice_always %d "
			"slice %u window %u/%u grow %u small %u "
			"default_prio %u headroom %u batch %d budget %u "
			"flush_sig_only %d resize_fails %d\n",
			(unsigned long long)o->seed, m.cfg.passthrough,
			m.cfg.slice_always, m.cfg.slice_bytes,
			m.cfg.window_slices, m.cfg.window_signals,
			m.cfg.slice_grow_windows, m.cfg.small_msg_bytes,
			m.cfg.default_prio, m.cfg.cq_headroom, m.cfg.batch,
			m.cfg.batch_budget_us, m.flush_sig_only,
			fk->resize_fails);
	m.scq = sverbs_cq_create(&m.ad, fk_cq(), &m.cfg);
	if (!m.scq) {
		mismatch("sverbs_cq_create failed");
		goto out;
	}
	nq = 1 + rnd(MQ);
	for (i = 0; i < nq; i++)
		qp_new();

	target = o->wrs ? o->wrs : UINT64_MAX;
	steps = o->steps ? o->steps : (o->wrs ? 40 * o->wrs : 100000);
	for (step = 0; step < steps && res->wrs < target && !out_of_data();
	     step++) {
		uint32_t r = rnd(1000);
		struct mqp *q = live_qp(rnd(nlive_qps()));

		if (!q) {
			qp_new();
			continue;
		}
		if (r < 450) {
			post_list(q);
		} else if (r < 750) {
			pthread_mutex_lock(&M->lock);
			hw_complete(q, (int)rnd(8));
			pthread_mutex_unlock(&M->lock);
		} else if (r < 950) {
			do_poll(1 + (int)rnd(16));
		} else if (r < 990) {
			sverbs_req_notify_cq(m.scq, (int)rnd(2));
		} else {
			fault(q);
		}
	}
	drain();
	pthread_mutex_lock(&M->lock);
	final_check();
	pthread_mutex_unlock(&M->lock);
	for (i = 0; i < m.nqp; i++)
		if (m.qp[i].alive)
			qp_destroy(&m.qp[i]);
	sverbs_cq_destroy(m.scq);
out:
	if (!o->data)
		fk_fini();
	for (i = 0; i < m.nqp; i++) {
		free(m.qp[i].live);
		free(m.qp[i].hw);
	}
	free(m.qp);
	free(m.wr);
	pthread_mutex_destroy(&m.lock);
	M = NULL;
	return res->mismatches;
}
