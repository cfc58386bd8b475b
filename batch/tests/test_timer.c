// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * CUnit tests of the budget's timer thread (batch/timer.c) under an injected
 * clock: deterministic, no sleeps, no wall-clock timing.
 *
 * timer.c is compiled into this file with its clock and its sleeps renamed:
 * clock_gettime() reads fake_ns, and the thread's waits wake only when it is
 * signalled (an arm, or the test moving the clock).  settle() returns once
 * the thread has looked at the current fake time and gone back to sleep,
 * so "nothing fired" is a fact, not the absence of an event for a while.
 */
#define _GNU_SOURCE /* timer.c's pthread_setname_np() */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int fake_clock_gettime(clockid_t id, struct timespec *ts);
static int fake_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
static int fake_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
			       const struct timespec *abs);
#define clock_gettime	       fake_clock_gettime
#define pthread_cond_wait      fake_cond_wait
#define pthread_cond_timedwait fake_cond_timedwait
#include "../timer.c"
#undef clock_gettime
#undef pthread_cond_wait
#undef pthread_cond_timedwait

#define US 1000ull

static _Atomic uint64_t fake_ns = 1000000000ull;
/* under timer_lock: */
static pthread_cond_t settled = PTHREAD_COND_INITIALIZER;
static uint64_t kick_gen, slept_gen;
static bool asleep;

static int fake_clock_gettime(clockid_t id, struct timespec *ts)
{
	uint64_t ns = atomic_load(&fake_ns);

	(void)id;
	ts->tv_sec = ns / 1000000000ull;
	ts->tv_nsec = ns % 1000000000ull;
	return 0;
}

/* the thread goes to sleep (timer_lock held): tell settle() */
static void going_to_sleep(void)
{
	asleep = true;
	slept_gen = kick_gen;
	pthread_cond_broadcast(&settled);
}

static int fake_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	int ret;

	if (c != &timer_cond) /* sverbs_timer_del waiting for a fire() */
		return pthread_cond_wait(c, m);
	going_to_sleep();
	ret = pthread_cond_wait(c, m);
	asleep = false;
	return ret;
}

static int fake_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
			       const struct timespec *abs)
{
	uint64_t until =
		(uint64_t)abs->tv_sec * 1000000000ull + (uint64_t)abs->tv_nsec;

	if (atomic_load(&fake_ns) >= until)
		return ETIMEDOUT;
	/* a fake deadline passes only when the test moves the clock, which
	 * signals timer_cond: wait for a signal, the thread re-evaluates */
	fake_cond_wait(c, m);
	return atomic_load(&fake_ns) >= until ? ETIMEDOUT : 0;
}

/* The thread has seen the current clock and every arm so far, and sleeps. */
static void settle(void)
{
	uint64_t want;

	pthread_mutex_lock(&timer_lock);
	want = ++kick_gen;
	pthread_cond_broadcast(&timer_cond);
	while (!(asleep && slept_gen == want))
		pthread_cond_wait(&settled, &timer_lock);
	pthread_mutex_unlock(&timer_lock);
}

static void advance(uint64_t ns)
{
	atomic_fetch_add(&fake_ns, ns);
	settle();
}

/* what fired, in order */
static int fired[16], nfired;

static void on_fire(void *arg)
{
	if (nfired < 16)
		fired[nfired] = (int)(intptr_t)arg;
	nfired++;
}

static void reset(void)
{
	settle();
	nfired = 0;
}

static void test_fires_in_deadline_order(void)
{
	struct sverbs_timer_entry e1, e2, e3;
	uint64_t t0;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e1, on_fire, (void *)1, 0), 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e2, on_fire, (void *)2, 0), 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e3, on_fire, (void *)3, 0), 0);
	reset();
	t0 = sverbs_now_ns();
	sverbs_timer_arm(&e1, t0 + 2000 * US);
	/* an earlier deadline armed later still fires first */
	sverbs_timer_arm(&e2, t0 + 100 * US);
	sverbs_timer_arm(&e3, t0 + 700 * US);
	advance(99 * US);
	CU_ASSERT_EQUAL(nfired, 0); /* not before its deadline */
	advance(1 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	CU_ASSERT_EQUAL(fired[0], 2);
	advance(600 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 2);
	CU_ASSERT_EQUAL(fired[1], 3);
	advance(1299 * US);
	CU_ASSERT_EQUAL(nfired, 2);
	advance(1 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 3);
	CU_ASSERT_EQUAL(fired[2], 1);
	/* fired entries are disarmed: nothing more, however late */
	CU_ASSERT_EQUAL(atomic_load(&e1.deadline_ns), 0);
	advance(10000 * US);
	CU_ASSERT_EQUAL(nfired, 3);
	sverbs_timer_del(&e1);
	sverbs_timer_del(&e2);
	sverbs_timer_del(&e3);
}

static void test_del_and_disarm_never_fire(void)
{
	struct sverbs_timer_entry e1, e2;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e1, on_fire, (void *)1, 0), 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e2, on_fire, (void *)2, 0), 0);
	reset();
	sverbs_timer_arm(&e1, sverbs_now_ns() + 1000 * US);
	sverbs_timer_arm(&e2, sverbs_now_ns() + 1000 * US);
	settle();
	sverbs_timer_del(&e1);	  /* removed while armed */
	sverbs_timer_disarm(&e2); /* disarmed, still registered */
	advance(5000 * US);
	CU_ASSERT_EQUAL(nfired, 0);
	/* re-armed, it fires again */
	sverbs_timer_arm(&e2, sverbs_now_ns() + 10 * US);
	advance(10 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	CU_ASSERT_EQUAL(fired[0], 2);
	sverbs_timer_del(&e2);
}

/* Ticks the thread lingers before it sleeps until signalled. */
static int ticks_until_idle(uint64_t tick)
{
	int i;

	for (i = 0; i <= SV_LINGER_TICKS && atomic_load(&planned_wake) != NEVER;
	     i++)
		advance(tick);
	return i;
}

/*
 * Lingering: after a deadline fired, an entry with a tick keeps the thread
 * waking every tick for a while (how long: test_linger_adapts), so arming
 * the next hold wakes no one (no system call on the poster's path); after
 * that, or without a tick, the idle thread must be woken by the arm.
 */
static void test_linger(void)
{
	const uint64_t tick = 10000 * US;
	struct sverbs_timer_entry e;
	uint64_t w;
	int i;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, (void *)1, tick),
			      0);
	reset();
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	/* lingering: the thread plans to wake a tick later; a later hold
	 * is a store */
	w = sverbs_timer_wakeups();
	sverbs_timer_arm(&e, sverbs_now_ns() + 3 * tick);
	CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 0);
	advance(3 * tick);
	CU_ASSERT_EQUAL_FATAL(nfired, 2); /* and it still fires */
	/* it keeps lingering over idle ticks: arms stay stores */
	for (i = 0; i < SV_LINGER_TICKS / 2; i++) {
		w = sverbs_timer_wakeups();
		sverbs_timer_arm(&e, sverbs_now_ns() + 2 * tick);
		CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 0);
		sverbs_timer_disarm(&e);
		advance(tick);
	}
	/* and stops within SV_LINGER_TICKS ticks of the last hold it saw:
	 * then the next arm must wake it (one wake-up) */
	CU_ASSERT(ticks_until_idle(tick) <= SV_LINGER_TICKS);
	CU_ASSERT_EQUAL(atomic_load(&planned_wake), NEVER);
	w = sverbs_timer_wakeups();
	sverbs_timer_arm(&e, sverbs_now_ns() + 3 * tick);
	CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 1);
	advance(3 * tick);
	CU_ASSERT_EQUAL(nfired, 3);
	sverbs_timer_del(&e);
}

/*
 * Lingering adapts: a lone hold (one that had to wake the idle thread) is
 * followed by SV_LINGER_MIN ticks only, so holds that come seldom cost a
 * tick or two each, not SV_LINGER_TICKS; a hold armed while the thread
 * ticks (holds come often: it cost its poster no wake) makes it linger
 * SV_LINGER_TICKS again.  Red: every hold was followed by SV_LINGER_TICKS.
 */
static void test_linger_adapts(void)
{
	const uint64_t tick = 10000 * US;
	struct sverbs_timer_entry e;
	uint64_t w;
	int n;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, (void *)1, tick),
			      0);
	reset();
	/* a lone hold: woken, fired, then a short linger */
	ticks_until_idle(tick);
	w = sverbs_timer_wakeups();
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 1);
	settle();
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	n = ticks_until_idle(tick);
	CU_ASSERT(n <= SV_LINGER_MIN);
	CU_ASSERT_EQUAL(atomic_load(&planned_wake), NEVER);
	/* holds that come while it ticks: a store each, and a long linger
	 * (settle(): the woken thread sees the deadline before it passes) */
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	settle();
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 2);
	w = sverbs_timer_wakeups();
	sverbs_timer_arm(&e, sverbs_now_ns() + 2 * tick);
	advance(2 * tick);
	CU_ASSERT_EQUAL_FATAL(nfired, 3);
	CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 0);
	n = ticks_until_idle(tick);
	CU_ASSERT(n > SV_LINGER_MIN && n <= SV_LINGER_TICKS);
	/* and a lone hold after that idles short again */
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	settle();
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 4);
	CU_ASSERT(ticks_until_idle(tick) <= SV_LINGER_MIN);
	sverbs_timer_del(&e);
}

/*
 * Holds that come seldom while it ticks (each after more than
 * SV_LINGER_DENSE idle ticks: a deferred batch's one arm on a slow wire)
 * keep the linger short: the ticks between them would cost the thread
 * more wake-ups than the one wake each arm then costs.
 */
static void test_linger_sparse(void)
{
	const uint64_t tick = 10000 * US;
	struct sverbs_timer_entry e;
	int i, n;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, (void *)1, tick),
			      0);
	reset();
	ticks_until_idle(tick);
	/* a lone hold, then one while it ticks, soon: the long linger */
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	settle();
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	sverbs_timer_arm(&e, sverbs_now_ns() + 2 * tick);
	advance(2 * tick);
	CU_ASSERT_EQUAL_FATAL(nfired, 2);
	/* idle ticks, more than SV_LINGER_DENSE, then a hold: a store */
	for (i = 0; i < SV_LINGER_DENSE + 2; i++)
		advance(tick);
	CU_ASSERT_NOT_EQUAL_FATAL(atomic_load(&planned_wake), NEVER);
	sverbs_timer_arm(&e, sverbs_now_ns() + 2 * tick);
	advance(2 * tick);
	CU_ASSERT_EQUAL_FATAL(nfired, 3);
	/* it came seldom: the linger after it is short */
	n = ticks_until_idle(tick);
	CU_ASSERT(n <= SV_LINGER_MIN + 1);
	CU_ASSERT_EQUAL(atomic_load(&planned_wake), NEVER);
	sverbs_timer_del(&e);
}

static void test_no_tick_no_linger(void)
{
	struct sverbs_timer_entry e;
	uint64_t w;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, (void *)1, 0), 0);
	reset();
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	advance(100 * US);
	CU_ASSERT_EQUAL_FATAL(nfired, 1);
	CU_ASSERT_EQUAL(atomic_load(&planned_wake), NEVER);
	w = sverbs_timer_wakeups();
	sverbs_timer_arm(&e, sverbs_now_ns() + 30000 * US);
	CU_ASSERT_EQUAL(sverbs_timer_wakeups() - w, 1);
	advance(30000 * US);
	CU_ASSERT_EQUAL(nfired, 2);
	sverbs_timer_del(&e);
}

/* How many of this process's threads have the timer thread's name. */
static int named_threads(void)
{
	char path[300], comm[32];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	FILE *f;
	int n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = '\0';
			n += !strcmp(comm, SVERBS_TIMER_THREAD_NAME);
		}
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* top -H, perf and the benchmarks' per-thread CPU find it by its name */
static void test_thread_named(void)
{
	struct sverbs_timer_entry e;

	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, (void *)1, 0), 0);
	reset();
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	advance(100 * US); /* the thread has run: it named itself first */
	CU_ASSERT_EQUAL(nfired, 1);
	CU_ASSERT_EQUAL(named_threads(), 1);
	sverbs_timer_del(&e);
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("timer (injected clock)", NULL, NULL);
	CU_add_test(s, "fires in deadline order, not before",
		    test_fires_in_deadline_order);
	CU_add_test(s, "del and disarm never fire",
		    test_del_and_disarm_never_fire);
	CU_add_test(s, "no tick: the idle thread is woken",
		    test_no_tick_no_linger);
	CU_add_test(s, "lingers with a tick, then stops", test_linger);
	CU_add_test(s,
		    "lingers briefly after a lone hold, long while holds come",
		    test_linger_adapts);
	CU_add_test(s, "lingers briefly after holds that come seldom",
		    test_linger_sparse);
	CU_add_test(s, "the thread is named " SVERBS_TIMER_THREAD_NAME,
		    test_thread_named);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
