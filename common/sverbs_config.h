/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * sverbs configuration: <prefix>/etc/sverbs.conf (key = value), overridden by
 * SVERBS_* environment variables.  docs/configuration.md lists every key.
 */
#ifndef SVERBS_CONFIG_H
#define SVERBS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/sverbs.h>

enum sverbs_mode {
	SVERBS_MODE_DEFAULT, /* nothing said: the layer is on */
	SVERBS_MODE_ON,
	SVERBS_MODE_OFF,
};

struct sverbs_config {
	enum sverbs_mode mode;	   /* enable / SVERBS: on|off */
	unsigned int default_prio; /* default_prio: level of unmarked WRs */
	uint32_t small_msg_bytes;  /* small_msg_bytes: <= this -> level 0; 0 off
				    */
	uint32_t slice_bytes;	   /* slice_bytes: 0 adaptive, else fixed */
	uint32_t slice_min_bytes;  /* slice_min_bytes */
	uint32_t slice_max_bytes;  /* slice_max_bytes */
	uint32_t hol_target_us;	 /* hol_target_us: target wait behind slices */
	uint32_t window_slices;	 /* window_slices: slices in flight */
	uint32_t window_signals; /* window_signals: signaled WQEs a window */
	uint32_t slice_grow_windows; /* slice_grow_windows: calm windows per
				      * doubling of the slice; 0 off */
	bool slice_always;	     /* slice_always: slice + window from the
				      * first WR, not once a QP mixes levels */
	bool passthrough;	     /* passthrough: a QP hands WRs straight to
				      * the provider until it needs the layer */
	uint32_t cq_headroom;	  /* cq_headroom: extra CQEs for internal use */
	bool batch;		  /* batch: zero-delay doorbell batching */
	uint32_t batch_budget_us; /* batch_budget_us: 0 = never hold */
	uint32_t batch_prio_mask; /* batch_levels: levels that may be held */
	bool batch_linger;	  /* batch_linger: the timer thread ticks
				   * between holds that come often
				   * (batch/timer.c) */
	bool batch_defer;	  /* batch_defer: a budgeted QP in
				   * pass-through batches by deferring the
				   * provider's doorbell (sched/watch.c) */
	bool stats;		  /* stats / SVERBS_STATS */
};

/* Called once per problem found; msg is a full sentence without newline. */
typedef void (*sverbs_config_report_fn)(void *arg, const char *msg);

void sverbs_config_defaults(struct sverbs_config *cfg);

/*
 * Parse a file's text into cfg (on top of what it holds).  Each bad line is
 * reported once and leaves that key at its previous value.  Returns the
 * number of problems reported.
 */
int sverbs_config_parse_text(struct sverbs_config *cfg, const char *text,
			     const char *origin, sverbs_config_report_fn report,
			     void *arg);

/* Apply one key; origin names where it came from (for messages). */
int sverbs_config_set(struct sverbs_config *cfg, const char *key,
		      const char *value, const char *origin,
		      sverbs_config_report_fn report, void *arg);

/*
 * Load: defaults, then the file (a missing file is not an error), then the
 * SVERBS_* environment.  path may be NULL (no file).
 */
int sverbs_config_load(struct sverbs_config *cfg, const char *path,
		       char *const *envp, sverbs_config_report_fn report,
		       void *arg);

static inline bool sverbs_config_enabled(const struct sverbs_config *cfg)
{
	return cfg->mode != SVERBS_MODE_OFF;
}

#endif /* SVERBS_CONFIG_H */
