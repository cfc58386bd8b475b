// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Slice size.
 *
 * With slice_bytes set, every QP slices at exactly that size.  With
 * slice_bytes = 0 (the default) the size follows the QP's measured send
 * queue drain rate:
 *
 *	slice = clamp(rate * hol_target_us, slice_min_bytes, slice_max_bytes)
 *
 * so that one slice takes about hol_target_us to leave the hardware: a
 * high-priority WR posted behind a large transfer waits for at most the
 * window (window_slices slices) already in the SQ, i.e. about
 * window_slices * hol_target_us.
 *
 * rate (bytes per microsecond) is an EWMA (weight 1/8) of samples
 * bytes_retired / elapsed, taken only over intervals during which the SQ
 * never went empty (otherwise idle time would count as slow draining):
 *   - an interval starts when a pump round puts at least slice_min_bytes
 *     into an empty SQ, or when a signaled completion leaves at least
 *     slice_min_bytes in the SQ and no interval is running;
 *   - a sample is taken at a signaled completion once the interval has
 *     retired at least max(slice_min_bytes, slice / 2) bytes AND lasted at
 *     least 4 * hol_target_us: completions are reaped in bursts (one poll
 *     can retire several slices microseconds apart), and a short interval
 *     would read a burst as a huge rate; the next interval starts there;
 *   - the interval is dropped when the SQ empties.
 * CLOCK_MONOTONIC is read only at these points: a few times per slice, never
 * for a small WR unless it ends a sample.  Before the first sample the slice
 * is 64 KiB (clamped).
 *
 * Growth (slice_grow_windows = N > 0, on top of either size): every N
 * windows' worth of slices cut in a row from WRs of one level, with no WR
 * of a higher level accepted meanwhile, double the slice, up to
 * slice_max_bytes (a fixed size above it does not grow).  The first WR of a
 * higher level to be accepted puts it back at once (sv_slicer_arrive());
 * a cut from another level starts the count afresh at that level.  So a
 * stream that nothing overtakes pays for fewer, larger slices, and a high
 * priority WR waits behind the slices already in flight when it comes,
 * which may have grown: growth trades the first urgent WR's wait after a
 * calm spell for the stream's rate.
 */
#include "slice.h"
#include "sverbs_batch.h"

#define SV_SLICE_INITIAL (64u * 1024)
#define SV_EWMA_SHIFT	 3

static uint32_t clamp_slice(const struct sv_slicer *s, double v)
{
	if (v < s->min)
		return s->min;
	if (v > s->max)
		return s->max;
	return (uint32_t)v;
}

void sv_slicer_init(struct sv_slicer *s, const struct sverbs_config *cfg)
{
	s->adaptive = cfg->slice_bytes == 0;
	s->min = cfg->slice_min_bytes ? cfg->slice_min_bytes : 1;
	s->max = cfg->slice_max_bytes > s->min ? cfg->slice_max_bytes : s->min;
	s->hol_us = cfg->hol_target_us ? cfg->hol_target_us : 1;
	s->cur = s->adaptive ? clamp_slice(s, SV_SLICE_INITIAL)
			     : cfg->slice_bytes;
	s->rate = 0;
	s->stamped = false;
	s->acc_bytes = 0;
	if (!s->clock_ns)
		s->clock_ns = sverbs_now_ns;
	s->grow_slices = cfg->slice_grow_windows *
			 (cfg->window_slices ? cfg->window_slices : 1);
	s->calm = 0;
	s->shift = 0;
	s->grow_prio = UINT8_MAX;
}

static void start_interval(struct sv_slicer *s)
{
	s->stamp_ns = s->clock_ns();
	s->acc_bytes = 0;
	s->stamped = true;
}

void sv_slicer_busy(struct sv_slicer *s, uint64_t bytes)
{
	if (s->adaptive && !s->stamped && bytes >= s->min)
		start_interval(s);
}

static void take_sample(struct sv_slicer *s)
{
	uint64_t now = s->clock_ns();
	uint64_t dt = now - s->stamp_ns;
	double sample;

	if (!dt)
		return;
	sample = (double)s->acc_bytes * 1000.0 / (double)dt;
	if (s->rate == 0)
		s->rate = sample;
	else
		s->rate += (sample - s->rate) / (1 << SV_EWMA_SHIFT);
	s->cur = clamp_slice(s, s->rate * s->hol_us);
	s->stamp_ns = now;
	s->acc_bytes = 0;
}

/* The shortest interval a sample may cover, in ns. */
static uint64_t min_interval_ns(const struct sv_slicer *s)
{
	return (uint64_t)s->hol_us * 4000;
}

void sv_slicer_retired(struct sv_slicer *s, uint64_t bytes,
		       uint64_t inflight_bytes)
{
	uint64_t need;

	if (!s->adaptive)
		return;
	if (s->stamped) {
		s->acc_bytes += bytes;
		need = s->cur / 2 > s->min ? s->cur / 2 : s->min;
		if (s->acc_bytes >= need &&
		    s->clock_ns() - s->stamp_ns >= min_interval_ns(s))
			take_sample(s);
	}
	if (!inflight_bytes)
		s->stamped = false;
	else if (!s->stamped && inflight_bytes >= s->min)
		start_interval(s);
}

void sv_slicer_idle(struct sv_slicer *s)
{
	s->stamped = false;
}

void sv_slicer_cut(struct sv_slicer *s, uint8_t prio)
{
	if (!s->grow_slices)
		return;
	if (prio != s->grow_prio) {
		s->grow_prio = prio;
		s->shift = 0;
		s->calm = 0;
	}
	if (++s->calm < s->grow_slices)
		return;
	s->calm = 0;
	if (s->shift < 20 && ((uint64_t)s->cur << (s->shift + 1)) <= s->max)
		s->shift++;
}
