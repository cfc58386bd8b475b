// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libsverbs: the calls sverbs.h declares.  Providers are loaded by
 * libibverbs with RTLD_LOCAL, so an application cannot reach them directly;
 * each provider that carries the layer registers its answer here.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "sverbs_register.h"

#define MAX_PROVIDERS 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sverbs_stats_fn stats_fns[MAX_PROVIDERS];
static int nstats_fns;

void sverbs_register_stats_fn(sverbs_stats_fn fn)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nstats_fns; i++)
		if (stats_fns[i] == fn)
			break;
	if (i == nstats_fns && nstats_fns < MAX_PROVIDERS)
		stats_fns[nstats_fns++] = fn;
	pthread_mutex_unlock(&lock);
}

int sverbs_query_qp_stats(struct ibv_qp *qp, struct sverbs_qp_stats *stats)
{
	sverbs_stats_fn fns[MAX_PROVIDERS];
	int i, n, ret;

	if (!qp || !stats)
		return EINVAL;
	pthread_mutex_lock(&lock);
	n = nstats_fns;
	for (i = 0; i < n; i++)
		fns[i] = stats_fns[i];
	pthread_mutex_unlock(&lock);
	for (i = 0; i < n; i++) {
		ret = fns[i](qp, stats);
		if (ret != ENOENT)
			return ret;
	}
	return ENOENT;
}
