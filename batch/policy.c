// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The batching policy: see sverbs_batch.h for the rule. */
#include <string.h>

#include "sverbs_batch.h"

/* EWMA weight of a new inter-arrival sample: 1/8. */
#define GAP_SHIFT 3

void sverbs_batch_init(struct sverbs_batch *b, uint32_t budget_us)
{
	memset(b, 0, sizeof(*b));
	b->budget_ns = (uint64_t)budget_us * 1000;
	/* the arrival rate limits the batch first; AIMD corrects overshoots */
	b->target = SVERBS_BATCH_MAX_TARGET;
}

uint64_t sverbs_batch_gap_ewma(uint64_t budget_ns, uint64_t ewma_ns,
			       uint64_t gap_ns)
{
	/*
	 * A gap of a budget or more says only "no batch would have formed":
	 * counted as one budget, a pause between bursts does not drown the
	 * burst's rate, and sparse arrivals still pull the estimate to the
	 * budget, i.e. a target of 1.
	 */
	if (gap_ns > budget_ns)
		gap_ns = budget_ns;
	if (!ewma_ns)
		return gap_ns;
	return ewma_ns - (ewma_ns >> GAP_SHIFT) + (gap_ns >> GAP_SHIFT);
}

void sverbs_batch_arrival(struct sverbs_batch *b, uint64_t now_ns)
{
	if (!b->budget_ns)
		return;
	if (b->last_arrival_ns && now_ns >= b->last_arrival_ns)
		b->gap_ns = sverbs_batch_gap_ewma(b->budget_ns, b->gap_ns,
						  now_ns - b->last_arrival_ns);
	b->last_arrival_ns = now_ns;
}

void sverbs_batch_returned(struct sverbs_batch *b, uint64_t now_ns)
{
	if (b->budget_ns && now_ns > b->last_arrival_ns)
		b->last_arrival_ns = now_ns;
}

uint32_t sverbs_batch_gap_target(uint64_t budget_ns, uint64_t gap_ns)
{
	uint64_t n;

	if (!gap_ns)
		return 1; /* no rate known yet: do not wait */
	n = budget_ns / gap_ns;
	if (n < 1)
		return 1;
	return n > SVERBS_BATCH_MAX_TARGET ? SVERBS_BATCH_MAX_TARGET
					   : (uint32_t)n;
}

static uint32_t rate_target(const struct sverbs_batch *b)
{
	return sverbs_batch_gap_target(b->budget_ns, b->gap_ns);
}

bool sverbs_batch_could_form(uint64_t budget_ns, uint64_t gap_ns)
{
	return budget_ns && sverbs_batch_gap_target(budget_ns, gap_ns) > 1;
}

void sverbs_batch_seed(struct sverbs_batch *b, uint64_t gap_ns,
		       uint64_t last_ns)
{
	if (!b->budget_ns)
		return;
	b->gap_ns = gap_ns;
	b->last_arrival_ns = last_ns;
}

static uint32_t effective_target(const struct sverbs_batch *b)
{
	uint32_t r = rate_target(b);

	return r < b->target ? r : b->target;
}

enum sverbs_batch_verdict
sverbs_batch_decide(struct sverbs_batch *b, enum sverbs_batch_reason why,
		    unsigned int pending, bool holdable, uint64_t oldest_ns,
		    uint64_t now_ns, uint64_t *deadline_ns)
{
	uint64_t waited, deadline;

	if (!pending || !b->budget_ns || !holdable || why != SVERBS_BATCH_POST)
		return SVERBS_BATCH_RING;
	if (pending >= effective_target(b))
		return SVERBS_BATCH_RING;
	waited = now_ns > oldest_ns ? now_ns - oldest_ns : 0;
	/* one more arrival would come too late for the oldest WR */
	if (waited + b->gap_ns >= b->budget_ns)
		return SVERBS_BATCH_RING;
	deadline = oldest_ns + b->budget_ns;
	if (deadline_ns)
		*deadline_ns = deadline;
	return SVERBS_BATCH_HOLD;
}

static unsigned int log2_bucket(uint64_t v)
{
	unsigned int i = 0;

	while (v > 1 && i < SVERBS_BATCH_HIST_BUCKETS - 1) {
		v >>= 1;
		i++;
	}
	return i;
}

void sverbs_batch_rang(struct sverbs_batch *b, unsigned int n, bool held,
		       uint64_t oldest_ns, uint64_t now_ns)
{
	uint64_t waited = now_ns > oldest_ns ? now_ns - oldest_ns : 0;

	b->stats.wrs += n;
	b->stats.doorbells++;
	if (!b->budget_ns)
		return;
	if (!held) {
		/* rung at once: grow back towards what the rate allows */
		if (b->target < rate_target(b))
			b->target++;
		return;
	}
	b->stats.held_wrs += n;
	b->stats.held_hist[log2_bucket(waited)]++;
	/* AIMD on the batch target */
	if (waited > b->budget_ns - b->budget_ns / 4) {
		n = effective_target(b);
		b->target = n > 1 ? n / 2 : 1;
	} else if (n >= effective_target(b) &&
		   b->target < SVERBS_BATCH_MAX_TARGET) {
		b->target++;
	}
}

uint64_t sverbs_batch_held_quantile(const struct sverbs_batch_stats *s,
				    double fraction)
{
	uint64_t total = 0, seen = 0, want;
	unsigned int i;

	for (i = 0; i < SVERBS_BATCH_HIST_BUCKETS; i++)
		total += s->held_hist[i];
	if (!total)
		return 0;
	want = (uint64_t)(fraction * (double)total);
	if (want < 1)
		want = 1;
	for (i = 0; i < SVERBS_BATCH_HIST_BUCKETS; i++) {
		seen += s->held_hist[i];
		if (seen >= want)
			return (2ull << i) - 1; /* upper edge of the bucket */
	}
	return ~0ull;
}
