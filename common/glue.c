// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Provider-neutral halves of the glue: configuration loading and the
 * creation hooks.  Compiled into every provider that carries sverbs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* secure_getenv */
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "sverbs_fast.h"
#include "sverbs_glue.h"
#include "sverbs_sched.h"

#ifndef SVERBS_CONF_PATH
#define SVERBS_CONF_PATH "/etc/sverbs.conf"
#endif

extern char **environ;

struct report_ctx {
	struct ibv_context *ctx;
	const struct sverbs_adapter *ad;
};

static void report_problem(void *arg, const char *msg)
{
	struct report_ctx *r = arg;

	if (r->ad && r->ad->log && r->ctx)
		r->ad->log(r->ctx, SVERBS_LOG_WARN, msg);
	fprintf(stderr, "sverbs: %s\n", msg);
}

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sverbs_config config;
static bool config_loaded;

const struct sverbs_config *sverbs_glue_config(struct ibv_context *ctx,
					       const struct sverbs_adapter *ad)
{
	struct report_ctx r = { .ctx = ctx, .ad = ad };
	const char *path;
	bool secure;

	pthread_mutex_lock(&config_lock);
	if (!config_loaded) {
		/*
		 * A setuid / setgid program (AT_SECURE) takes nothing from
		 * its environment: neither the file's path nor SVERBS_*.
		 */
		secure = getauxval(AT_SECURE) != 0;
		path = secure_getenv("SVERBS_CONF");
		if (!path || !*path)
			path = SVERBS_CONF_PATH;
		sverbs_config_load(&config, path, secure ? NULL : environ,
				   report_problem, &r);
		config_loaded = true;
	}
	pthread_mutex_unlock(&config_lock);
	return sverbs_config_enabled(&config) ? &config : NULL;
}

/*
 * Whether the CQ being created on this thread got sverbs' headroom: set by
 * sverbs_glue_cq_size()/_attr(), read by sverbs_glue_cq_created() in the
 * same provider call.  A CQ without headroom stays stock.
 */
static __thread bool cq_headroom_added;

/* cqe plus the headroom, unless that passes the device's max_cqe. */
static int cq_size_with_headroom(struct ibv_context *ctx,
				 const struct sverbs_config *cfg, int cqe)
{
	struct ibv_device_attr attr;

	cq_headroom_added = false;
	if (!cfg)
		return cqe;
	/* rxe and mlx5 allow far more than 4096 CQEs: only a bigger CQ
	 * costs a device query */
	if ((int64_t)cqe + cfg->cq_headroom > 4096 &&
	    !ibv_query_device(ctx, &attr) && attr.max_cqe > 0 &&
	    (int64_t)cqe + cfg->cq_headroom > attr.max_cqe)
		return cqe; /* the application asked for (nearly) the max */
	cq_headroom_added = true;
	return cqe + (int)cfg->cq_headroom;
}

int sverbs_glue_cq_size(struct ibv_context *ctx,
			const struct sverbs_adapter *ad, int cqe)
{
	return cq_size_with_headroom(ctx, sverbs_glue_config(ctx, ad), cqe);
}

struct ibv_cq_init_attr_ex *
sverbs_glue_cq_attr(struct ibv_context *ctx, const struct sverbs_adapter *ad,
		    struct ibv_cq_init_attr_ex *attr,
		    struct ibv_cq_init_attr_ex *copy)
{
	const struct sverbs_config *cfg = sverbs_glue_config(ctx, ad);

	if (!cfg)
		return attr;
	*copy = *attr;
	copy->cqe = (uint32_t)cq_size_with_headroom(ctx, cfg, (int)attr->cqe);
	if (!cq_headroom_added)
		return attr;
	/* sverbs maps each completion to its QP and reports byte_len */
	copy->wc_flags |= IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_BYTE_LEN;
	return copy;
}

struct sverbs_cq *sverbs_glue_cq_created(const struct sverbs_adapter *ad,
					 struct ibv_cq *cq,
					 struct ibv_cq_ex *cq_ex,
					 uint64_t app_wc_flags,
					 atomic_uint *state)
{
	const struct sverbs_config *cfg = sverbs_glue_config(cq->context, ad);
	struct sverbs_cq *scq;

	if (!cfg || !cq_headroom_added)
		return NULL;
	cq_headroom_added = false;
	scq = sverbs_cq_create(ad, cq, cfg);
	if (scq && cq_ex &&
	    !sverbs_cq_install_ex_ops(scq, cq_ex, app_wc_flags)) {
		sverbs_cq_destroy(scq);
		scq = NULL;
	}
	if (scq)
		sverbs_cq_use_state_word(scq, state);
	return scq;
}

struct sverbs_qp *sverbs_glue_qp_created(const struct sverbs_adapter *ad,
					 struct ibv_qp *qp,
					 struct sverbs_cq *scq,
					 struct ibv_qp_init_attr_ex *attr,
					 atomic_uchar *layered)
{
	const struct sverbs_config *cfg = sverbs_glue_config(qp->context, ad);
	struct sverbs_qp *sqp;

	if (!cfg || !scq)
		return NULL;
	sqp = sverbs_qp_create(ad, qp, scq, attr, cfg);
	if (sqp && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    !sverbs_qp_install_wr_ops(sqp, ibv_qp_to_qp_ex(qp),
				      attr->send_ops_flags)) {
		sverbs_qp_destroy_pre(sqp);
		sverbs_qp_destroy_post(sqp, 0);
		sqp = NULL;
	}
	if (sqp)
		sverbs_qp_use_layered_byte(sqp, layered);
	return sqp;
}

void sverbs_qp_attr_from_legacy(struct ibv_qp_init_attr_ex *ex,
				const struct ibv_qp_init_attr *attr,
				struct ibv_pd *pd)
{
	memset(ex, 0, sizeof(*ex));
	ex->qp_context = attr->qp_context;
	ex->send_cq = attr->send_cq;
	ex->recv_cq = attr->recv_cq;
	ex->srq = attr->srq;
	ex->cap = attr->cap;
	ex->qp_type = attr->qp_type;
	ex->sq_sig_all = attr->sq_sig_all;
	ex->comp_mask = IBV_QP_INIT_ATTR_PD;
	ex->pd = pd;
}
