// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The batching budget's timer thread (see sverbs_batch.h).  Entries are
 * added at QP creation and removed at destruction, never on the hot path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np() */
#endif
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "sverbs_batch.h"

#define NEVER UINT64_MAX

static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_cond;
static pthread_cond_t timer_idle; /* signalled when a fire() returns */
static struct sverbs_timer_entry *entries;
static struct sverbs_timer_entry *firing;
static _Atomic uint64_t planned_wake = NEVER;
static bool thread_started;
static bool atfork_set;
static bool forking; /* between fork()'s prepare and parent / child */
/* a child of fork() with a deadline armed and no thread yet */
static atomic_bool orphaned;

/*
 * Lingering: for a while after the last armed deadline the thread keeps
 * waking every tick (the smallest tick_ns of the entries) instead of
 * sleeping until signalled.  A hold armed meanwhile has its deadline at
 * least a tick after the thread's planned wake-up, so arming it is a store,
 * not a futex wake on the poster's path.  How long adapts: SV_LINGER_MIN
 * ticks after holds that had to wake the thread (they come seldom: a tick
 * or two each), SV_LINGER_TICKS once holds were armed while it ticked (they
 * come often: the ticks replace the wakes), counted again from each hold.
 * "Often" is within SV_LINGER_DENSE ticks of the hold before: a hold seen
 * after more idle ticks than that (a deferred batch's one arm, batches a
 * slow wire apart) ends the long linger, because the ticks between such
 * holds cost the thread more wake-ups than the one wake each hold then
 * costs (perf/results/bw-why-defer.md: ib_write_bw's client spent 8.5 µs
 * more CPU per WR with the long linger than without a budget, 1.9 µs
 * without the linger, at the same rate).
 */
#define SV_LINGER_TICKS 32
#define SV_LINGER_MIN	2
#define SV_LINGER_DENSE 4
static unsigned int linger;	/* ticks left */
static unsigned int linger_len; /* ticks to linger after a hold */
static bool ticked;		/* the thread's last sleep was a tick */
static unsigned int idle_ticks; /* ticks since the last hold seen */
static _Atomic uint64_t arms;	/* sverbs_timer_arm() calls */
static uint64_t arms_seen;
static _Atomic uint64_t wakeups;

uint64_t sverbs_timer_wakeups(void)
{
	return atomic_load(&wakeups);
}

uint64_t sverbs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Called with timer_lock held: the earliest armed deadline. */
static uint64_t earliest_deadline(void)
{
	struct sverbs_timer_entry *e;
	uint64_t min = NEVER, d;

	for (e = entries; e; e = e->next) {
		d = atomic_load(&e->deadline_ns);
		if (d && d < min)
			min = d;
	}
	return min;
}

/* Called with timer_lock held: the smallest tick, or NEVER. */
static uint64_t min_tick(void)
{
	struct sverbs_timer_entry *e;
	uint64_t min = NEVER;

	for (e = entries; e; e = e->next)
		if (e->tick_ns && e->tick_ns < min)
			min = e->tick_ns;
	return min;
}

/* Called with timer_lock held; drops it around each fire(). */
static void fire_expired(uint64_t now)
{
	struct sverbs_timer_entry *e;
	uint64_t d;

restart:
	for (e = entries; e && !forking; e = e->next) {
		d = atomic_load(&e->deadline_ns);
		if (!d || d > now)
			continue;
		if (!atomic_compare_exchange_strong(&e->deadline_ns, &d, 0))
			continue;
		firing = e;
		pthread_mutex_unlock(&timer_lock);
		e->fire(e->arg);
		pthread_mutex_lock(&timer_lock);
		firing = NULL;
		pthread_cond_broadcast(&timer_idle);
		goto restart; /* the list may have changed meanwhile */
	}
}

static void *timer_main(void *arg)
{
	struct timespec ts;
	uint64_t wake, now, tick, narms;

	(void)arg;
	/* its name in top -H, perf, /proc (a benchmark reads its CPU there) */
	pthread_setname_np(pthread_self(), SVERBS_TIMER_THREAD_NAME);
	pthread_mutex_lock(&timer_lock);
	for (;;) {
		now = sverbs_now_ns();
		fire_expired(now);
		/* 0 while computing: an arm meanwhile always signals */
		atomic_store(&planned_wake, 0);
		wake = earliest_deadline();
		narms = atomic_load_explicit(&arms, memory_order_relaxed);
		if (narms != arms_seen) {
			arms_seen = narms;
			/* armed while it ticked, soon: holds come often */
			if (ticked)
				linger_len = idle_ticks <= SV_LINGER_DENSE
						     ? SV_LINGER_TICKS
						     : SV_LINGER_MIN;
			else if (!linger_len)
				linger_len = SV_LINGER_MIN;
			linger = linger_len;
			idle_ticks = 0;
		}
		if (wake != NEVER) {
			ticked = false;
		} else if (linger && (tick = min_tick()) != NEVER) {
			linger--;
			idle_ticks++;
			wake = now + tick;
			ticked = true;
		} else {
			/* a linger without a hold: the next hold is lone */
			linger = 0;
			linger_len = SV_LINGER_MIN;
			ticked = false;
		}
		atomic_store(&planned_wake, wake);
		if (wake == NEVER) {
			pthread_cond_wait(&timer_cond, &timer_lock);
			continue;
		}
		ts.tv_sec = wake / 1000000000ull;
		ts.tv_nsec = wake % 1000000000ull;
		pthread_cond_timedwait(&timer_cond, &timer_lock, &ts);
	}
	return NULL;
}

/*
 * fork(): the child has no timer thread (only the forking thread goes on).
 * The lock is held across the fork, so the child's copy is consistent; the
 * child's next arm starts a thread of its own (planned_wake 0 sends it to
 * the locked path, sverbs_timer_arm()).  A fire in progress holds its
 * owner's locks (a QP's, the provider's send queue's), which the child
 * would inherit taken with no thread to release them: the fork waits for
 * it to return, and no fire starts until the fork is over.
 */
static void timer_prepare(void)
{
	pthread_mutex_lock(&timer_lock);
	forking = true;
	while (firing)
		pthread_cond_wait(&timer_idle, &timer_lock);
}

static void timer_parent(void)
{
	forking = false;
	pthread_cond_signal(&timer_cond); /* a deadline may have passed */
	pthread_mutex_unlock(&timer_lock);
}

static void timer_child(void)
{
	forking = false;
	thread_started = false;
	atomic_store(&orphaned, earliest_deadline() != NEVER);
	firing = NULL;
	linger = 0;
	linger_len = 0;
	ticked = false;
	idle_ticks = 0;
	atomic_store(&planned_wake, 0);
	pthread_mutex_unlock(&timer_lock);
}

/* Called with timer_lock held. */
static int start_thread(void)
{
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t thread;
	int ret;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&timer_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&timer_idle, NULL);
	if (!atfork_set)
		atfork_set = !pthread_atfork(timer_prepare, timer_parent,
					     timer_child);
	pthread_attr_init(&tattr);
	pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&thread, &tattr, timer_main, NULL);
	pthread_attr_destroy(&tattr);
	if (ret)
		return ret;
	thread_started = true;
	atomic_store(&orphaned, false);
	return 0;
}

bool sverbs_timer_orphaned(void)
{
	return atomic_load_explicit(&orphaned, memory_order_relaxed);
}

int sverbs_timer_add(struct sverbs_timer_entry *e, void (*fire)(void *arg),
		     void *arg, uint64_t tick_ns)
{
	int ret = 0;

	e->fire = fire;
	e->arg = arg;
	e->tick_ns = tick_ns;
	atomic_store(&e->deadline_ns, 0);
	pthread_mutex_lock(&timer_lock);
	if (!thread_started)
		ret = start_thread();
	if (!ret) {
		e->next = entries;
		entries = e;
	}
	pthread_mutex_unlock(&timer_lock);
	return ret;
}

void sverbs_timer_del(struct sverbs_timer_entry *e)
{
	struct sverbs_timer_entry **p;

	pthread_mutex_lock(&timer_lock);
	atomic_store(&e->deadline_ns, 0);
	while (firing == e)
		pthread_cond_wait(&timer_idle, &timer_lock);
	for (p = &entries; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&timer_lock);
}

void sverbs_timer_arm(struct sverbs_timer_entry *e, uint64_t deadline_ns)
{
	uint64_t planned;

	if (!deadline_ns)
		deadline_ns = 1;
	atomic_store(&e->deadline_ns, deadline_ns);
	atomic_fetch_add_explicit(&arms, 1, memory_order_relaxed);
	planned = atomic_load(&planned_wake);
	if (!planned || deadline_ns < planned) {
		atomic_fetch_add_explicit(&wakeups, 1, memory_order_relaxed);
		pthread_mutex_lock(&timer_lock);
		/* a child of fork() starts its own thread */
		if (!thread_started && entries)
			start_thread();
		pthread_cond_signal(&timer_cond);
		pthread_mutex_unlock(&timer_lock);
	}
}

void sverbs_timer_disarm(struct sverbs_timer_entry *e)
{
	atomic_store_explicit(&e->deadline_ns, 0, memory_order_relaxed);
}
