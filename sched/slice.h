/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Slice size of one QP: fixed (slice_bytes) or adapted to the measured SQ
 * drain rate, and optionally grown while no higher level arrives
 * (slice_grow_windows).  See slice.c for the rules.
 */
#ifndef SVERBS_SLICE_H
#define SVERBS_SLICE_H

#include <stdbool.h>
#include <stdint.h>

#include "sverbs_config.h"

struct sv_slicer {
	bool adaptive;
	uint32_t min;
	uint32_t max;
	uint32_t hol_us;
	uint32_t cur;	    /* the slice size in use */
	double rate;	    /* bytes per microsecond (EWMA); 0: none yet */
	bool stamped;	    /* the SQ has been busy since stamp_ns */
	uint64_t stamp_ns;  /* CLOCK_MONOTONIC */
	uint64_t acc_bytes; /* bytes retired since stamp_ns */
	uint64_t (*clock_ns)(void); /* CLOCK_MONOTONIC; tests replace it */
	/* growth (slice_grow_windows; 0 slices: off) */
	uint32_t grow_slices; /* calm cuts per doubling */
	uint32_t calm;	      /* calm cuts since the last doubling */
	uint8_t shift;	      /* the slice is cur << shift */
	uint8_t grow_prio;    /* the level whose cuts grow it */
};

void sv_slicer_init(struct sv_slicer *s, const struct sverbs_config *cfg);
/* A pump round put bytes into an SQ that was empty. */
void sv_slicer_busy(struct sv_slicer *s, uint64_t bytes);
/*
 * A signaled completion retired bytes; inflight_bytes are still in the SQ
 * after it.
 */
void sv_slicer_retired(struct sv_slicer *s, uint64_t bytes,
		       uint64_t inflight_bytes);
/* The SQ went idle or the QP was reset: the next sample starts afresh. */
void sv_slicer_idle(struct sv_slicer *s);
/* A slice of the size in use was cut from a WR of level prio. */
void sv_slicer_cut(struct sv_slicer *s, uint8_t prio);

/*
 * A WR of level prio was accepted: one of a higher level than the grown
 * slices' shrinks the slice back at once (the slices already in flight stay
 * as they are).
 */
static inline void sv_slicer_arrive(struct sv_slicer *s, uint8_t prio)
{
	if (s->shift && prio < s->grow_prio) {
		s->shift = 0;
		s->calm = 0;
	}
}

static inline uint32_t sv_slice_bytes(const struct sv_slicer *s)
{
	uint64_t v = (uint64_t)s->cur << s->shift;

	if (!s->shift)
		return s->cur;
	return v < s->max ? (uint32_t)v : s->max;
}

#endif /* SVERBS_SLICE_H */
