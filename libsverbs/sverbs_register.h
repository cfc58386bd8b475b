/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Between libsverbs (the application-facing calls of sverbs.h) and the
 * providers that carry the layer: each provider registers, once, the
 * function that answers for the QPs it manages.
 */
#ifndef SVERBS_REGISTER_H
#define SVERBS_REGISTER_H

#include <infiniband/sverbs.h>

/* Returns ENOENT for a QP the provider does not manage. */
typedef int (*sverbs_stats_fn)(struct ibv_qp *qp,
			       struct sverbs_qp_stats *stats);

void sverbs_register_stats_fn(sverbs_stats_fn fn);

#endif /* SVERBS_REGISTER_H */
