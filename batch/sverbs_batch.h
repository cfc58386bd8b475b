/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * batch/: when to ring the doorbell.  Provider-neutral and clock-neutral:
 * every call takes "now" in nanoseconds, so the policy runs the same under a
 * simulated clock (tests) and CLOCK_MONOTONIC (the layer).
 *
 * The scheduler's pump builds one chain per round and asks
 * sverbs_batch_decide() whether to hand it to the adapter now (one doorbell)
 * or to hold it.  Zero-delay batching needs no decision: whatever queued up
 * while the window was full or while another thread posted leaves as one
 * chain.  Budgeted batching (budget_ns > 0) may hold WRs of the levels in
 * the config's batch_levels, never level 0, never past the budget.
 *
 * The rule (USPS-style: the biggest batch that still meets the budget):
 *  - the target batch size is min(AIMD target, budget / mean inter-arrival
 *    gap): at low load the gap is long and the target falls to 1, i.e. no
 *    waiting; at high load batches grow until the budget binds;
 *  - the gap is an EWMA (1/8) of the application's gaps between posts (from
 *    the return of the previous post call, so a doorbell's own cost is not
 *    counted), each counted as at most the budget: a pause between bursts says
 * "no batch would form", not how fast the burst came, so a
 * post-a-burst-then-poll program keeps its burst rate, while sparse arrivals
 * pull the estimate to the budget;
 *  - AIMD (starting at the maximum, so the rate decides first): after each
 *    held batch, if its oldest WR waited more than budget * 3/4 the target
 *    halves (from the effective target); if it reached the effective
 *    target within that, the target grows by one; a chain rung without
 *    holding grows it by one while it is below the rate's target (so a
 *    target cut to 1 recovers);
 *  - a held chain is rung as soon as it reaches the target, or when waiting
 *    one more mean gap would take its oldest WR past the budget, or at the
 *    deadline (oldest arrival + budget) — checked on every post and poll and
 *    by the timer thread (batch/timer.c) for applications that post and then
 *    sleep.
 */
#ifndef SVERBS_BATCH_H
#define SVERBS_BATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The timer thread's name (/proc/PID/task/TID/comm), at most 15 chars */
#define SVERBS_TIMER_THREAD_NAME "sverbs-timer"

#define SVERBS_BATCH_MAX_TARGET	  64
#define SVERBS_BATCH_HIST_BUCKETS 40

struct sverbs_batch_stats {
	uint64_t wrs;	    /* WRs handed to the adapter */
	uint64_t doorbells; /* chains handed to the adapter */
	uint64_t held_wrs;  /* WRs that waited for a bigger batch */
	/* how long the oldest WR of each held batch waited: bucket i counts
	 * waits in [2^i, 2^(i+1)) ns */
	uint64_t held_hist[SVERBS_BATCH_HIST_BUCKETS];
};

struct sverbs_batch {
	uint64_t budget_ns; /* 0: zero-delay only, never hold */
	uint32_t target;    /* AIMD batch-size target, 1..MAX_TARGET */
	uint64_t gap_ns;    /* EWMA of the inter-arrival gap */
	uint64_t last_arrival_ns;
	struct sverbs_batch_stats stats;
};

enum sverbs_batch_verdict {
	SVERBS_BATCH_RING,
	SVERBS_BATCH_HOLD,
};

/* Why the pump runs; anything but POST must ring whatever is pending. */
enum sverbs_batch_reason {
	SVERBS_BATCH_POST,  /* ibv_post_send / wr_complete */
	SVERBS_BATCH_POLL,  /* poll_cq */
	SVERBS_BATCH_ARM,   /* req_notify_cq */
	SVERBS_BATCH_TIMER, /* the budget's deadline */
	SVERBS_BATCH_FLUSH, /* fence, urgent level, modify, destroy */
};

void sverbs_batch_init(struct sverbs_batch *b, uint32_t budget_us);

/*
 * The arrival-gap EWMA (1/8) after one more gap of gap_ns, each gap counted
 * as at most the budget (see the rule above); ewma_ns 0: none yet.
 */
uint64_t sverbs_batch_gap_ewma(uint64_t budget_ns, uint64_t ewma_ns,
			       uint64_t gap_ns);

/*
 * Whether arrivals gap_ns apart (an EWMA) would form a batch of two or more
 * within budget_ns: what a budgeted QP in pass-through waits for before it
 * takes the layer's queue (sched/watch.c).  A pass-through post is rung at
 * once, so the gap there also counts from the return of the previous post.
 */
bool sverbs_batch_could_form(uint64_t budget_ns, uint64_t gap_ns);

/*
 * The batch size that arrivals gap_ns apart reach within budget_ns,
 * 1..SVERBS_BATCH_MAX_TARGET (1 while no gap is known).
 */
uint32_t sverbs_batch_gap_target(uint64_t budget_ns, uint64_t gap_ns);

/*
 * Start the estimate from what was measured before the queue existed (the
 * gap EWMA, the return of the last post); nothing without a budget.
 */
void sverbs_batch_seed(struct sverbs_batch *b, uint64_t gap_ns,
		       uint64_t last_ns);

/* A WR entered the software queue at now_ns (feeds the arrival-gap EWMA). */
void sverbs_batch_arrival(struct sverbs_batch *b, uint64_t now_ns);

/*
 * A post call that rang a doorbell returns to the application at now_ns:
 * the next gap counts from here.  The gap measures how soon the application
 * posts again, so the doorbell's own cost (a system call on rxe) is left
 * out; counted in, a slow doorbell would make every gap look too long to
 * batch, and never batching would keep the doorbells slow.
 */
void sverbs_batch_returned(struct sverbs_batch *b, uint64_t now_ns);

/*
 * pending WRs are ready to go, the oldest queued since oldest_ns; holdable
 * says whether all of them are of levels that may be held.  *deadline_ns is
 * set when the verdict is HOLD: ring no later than then.
 */
enum sverbs_batch_verdict
sverbs_batch_decide(struct sverbs_batch *b, enum sverbs_batch_reason why,
		    unsigned int pending, bool holdable, uint64_t oldest_ns,
		    uint64_t now_ns, uint64_t *deadline_ns);

/*
 * A chain of n WRs was handed to the adapter with one doorbell; its oldest
 * WR had been queued since oldest_ns (held says it waited for batching).
 */
void sverbs_batch_rang(struct sverbs_batch *b, unsigned int n, bool held,
		       uint64_t oldest_ns, uint64_t now_ns);

/* The wait below which fraction (e.g. 0.99) of held batches fell, in ns. */
uint64_t sverbs_batch_held_quantile(const struct sverbs_batch_stats *s,
				    double fraction);

/*
 * The budget's timer: one thread per process, started by the first entry,
 * that calls fire(arg) once an armed deadline has passed.  Arming is a
 * lock-free store unless the new deadline is earlier than the thread's next
 * wake-up.  fire() runs without any timer lock held, so it may take a QP
 * lock; it must tolerate being called late or for a deadline since re-armed.
 */
struct sverbs_timer_entry {
	void (*fire)(void *arg);
	void *arg;
	_Atomic uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: not armed */
	uint64_t tick_ns;	      /* > 0: linger with this tick (timer.c) */
	struct sverbs_timer_entry *next;
};

uint64_t sverbs_now_ns(void);
/*
 * tick_ns > 0 lets the thread linger (keep waking every tick for a while
 * after the last deadline: arming then needs no wake-up); 0: it sleeps
 * until an arm wakes it.
 */
int sverbs_timer_add(struct sverbs_timer_entry *e, void (*fire)(void *arg),
		     void *arg, uint64_t tick_ns);
/* How many arms had to wake the timer thread (a system call each). */
uint64_t sverbs_timer_wakeups(void);
/* After it returns, e's fire is not running and will not run again. */
void sverbs_timer_del(struct sverbs_timer_entry *e);
void sverbs_timer_arm(struct sverbs_timer_entry *e, uint64_t deadline_ns);
/* Nothing to fire any more: a store; the thread's wake-up stays planned. */
void sverbs_timer_disarm(struct sverbs_timer_entry *e);
/* Whether e has a deadline (a load: not what the thread will do next). */
static inline bool sverbs_timer_armed(struct sverbs_timer_entry *e)
{
	return atomic_load_explicit(&e->deadline_ns, memory_order_relaxed);
}
/*
 * A child of fork() whose deadlines were armed in the parent has no timer
 * thread until something arms again: a hold that lasts across the fork must
 * be armed once more in the child (sched/pump.c).
 */
bool sverbs_timer_orphaned(void);

#endif /* SVERBS_BATCH_H */
