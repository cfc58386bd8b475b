/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sched/ internals shared by the QP side (admit.c, pump.c, complete.c,
 * lifetime.c, wr_api.c: qp_int.h) and the CQ side (cq.c: cq_int.h).  The
 * QP side knows the CQ only through the functions below; the CQ side reads
 * the QP object (it retires WQEs and pumps QPs), never the other way round.
 * The contract with the glue is sverbs_sched.h.  Nothing outside sched/
 * (and its tests) includes this.
 */
#ifndef SVERBS_SCHED_INT_H
#define SVERBS_SCHED_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "sverbs_batch.h"
#include "sverbs_sched.h"

#define SV_NONE UINT32_MAX

/*
 * Where translated completions go during one poll: straight into the
 * caller's array (compacting in place over the raw entries already read)
 * while order allows, else to the ready ring.
 */
struct sv_emit {
	struct sverbs_cq *scq;
	struct ibv_wc *wc; /* NULL: ready ring only */
	int out;
	int limit; /* entries of wc[] free for output: < limit */
	bool spill;
};

/* objmap.c: verbs object -> sverbs object, for the ex-CQ and wr_* ops */
bool sv_objmap_insert(const void *key, void *val);
void *sv_objmap_lookup(const void *key);
void sv_objmap_remove(const void *key);

/* cq.c; register/unlink/relink/unregister/drain with the CQ lock held */
int sv_cq_register(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_unlink(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_relink(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_unregister(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_drain(struct sverbs_cq *scq);
bool sv_cq_lock(struct sverbs_cq *scq);
/*
 * The same, or EBUSY: this thread is inside another CQ's extended poll loop
 * and another thread holds this CQ's lock across its own (cq.c).
 */
int sv_cq_lock_nowait(struct sverbs_cq *scq, bool *taken);
/* This thread's pass-through wr_* batch is the QP's (wr_api.c). */
bool sv_wr_pt_batch_mine(const struct sverbs_qp *sqp);
void sv_cq_unlock(struct sverbs_cq *scq, bool taken);
void sv_cq_layered(struct sverbs_cq *scq);
void sv_cq_held(struct sverbs_cq *scq, struct sverbs_qp *sqp, bool held);
void sv_emit(struct sv_emit *e, const struct ibv_wc *wc);
bool sv_hr_take(struct sverbs_cq *scq);
void sv_hr_give(struct sverbs_cq *scq, unsigned int n);
void sv_hr_wait(struct sverbs_cq *scq, struct sverbs_qp *sqp);
bool sv_hr_take_or_wait(struct sverbs_cq *scq, struct sverbs_qp *sqp);
void sv_cq_headroom_back(struct sverbs_cq *scq);
bool sv_cq_late_units(struct sverbs_cq *scq, uint32_t units, bool reserved);
bool sv_cq_unit_free(struct sverbs_cq *scq);
/* headroom given back outside a poll reaches its waiters (no lock held) */
void sv_cq_kick(struct sverbs_cq *scq);
bool sv_cq_lockless(const struct sverbs_cq *scq);
void sv_log(const struct sverbs_adapter *ad, struct ibv_context *ctx,
	    enum sverbs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Why a pump round runs (for the batching decision, see pump.c). */
enum sv_pump_why {
	SV_PUMP_POST,  /* ibv_post_send / wr_complete */
	SV_PUMP_POLL,  /* completions freed room */
	SV_PUMP_ARM,   /* req_notify_cq */
	SV_PUMP_FLUSH, /* modify_qp */
	SV_PUMP_TIMER, /* the batching budget expired */
};

/* The QP side, for cq.c; with the QP lock held (see qp_int.h) */
void sv_qp_pump(struct sverbs_qp *sqp, enum sv_pump_why why);
bool sv_qp_owns(const struct sverbs_qp *sqp, uint64_t wr_id);
void sv_qp_complete(struct sverbs_qp *sqp, const struct ibv_wc *raw,
		    struct sv_emit *e);
void sv_qp_flush_all(struct sverbs_qp *sqp, struct sv_emit *e);

#endif /* SVERBS_SCHED_INT_H */
