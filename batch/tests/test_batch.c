// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * CUnit tests of the batching policy under a simulated clock (the timer
 * thread: test_timer.c).
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sverbs_batch.h"

#define US 1000ull

static void test_zero_budget_never_holds(void)
{
	struct sverbs_batch b;
	uint64_t dl = 0;
	unsigned int i;

	sverbs_batch_init(&b, 0);
	for (i = 1; i < 100; i++) {
		sverbs_batch_arrival(&b, i * 100);
		CU_ASSERT_EQUAL(sverbs_batch_decide(&b, SVERBS_BATCH_POST, i,
						    true, 100, i * 100, &dl),
				SVERBS_BATCH_RING);
	}
}

static void test_every_flush_trigger_rings(void)
{
	static const enum sverbs_batch_reason reasons[] = {
		SVERBS_BATCH_POLL, SVERBS_BATCH_ARM, SVERBS_BATCH_TIMER,
		SVERBS_BATCH_FLUSH
	};
	struct sverbs_batch b;
	uint64_t dl;
	unsigned int i, t;

	sverbs_batch_init(&b, 100);
	/* a steady high rate: the policy wants to hold */
	for (t = 0; t < 50; t++)
		sverbs_batch_arrival(&b, t * US);
	CU_ASSERT_EQUAL(sverbs_batch_decide(&b, SVERBS_BATCH_POST, 2, true,
					    48 * US, 49 * US, &dl),
			SVERBS_BATCH_HOLD);
	CU_ASSERT_EQUAL(dl, 148 * US);
	for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		CU_ASSERT_EQUAL(sverbs_batch_decide(&b, reasons[i], 2, true,
						    48 * US, 49 * US, &dl),
				SVERBS_BATCH_RING);
	/* a level that may not be held (level 0, a fence) rings too */
	CU_ASSERT_EQUAL(sverbs_batch_decide(&b, SVERBS_BATCH_POST, 2, false,
					    48 * US, 49 * US, &dl),
			SVERBS_BATCH_RING);
}

struct sim_result {
	unsigned int rings;
	unsigned int wrs;
	uint64_t max_wait;
	uint64_t first_max_wait; /* first half of the run */
	uint64_t second_max_wait;
	double first_mean_batch;
	double second_mean_batch;
};

/*
 * Arrivals at gap1 for n/2 WRs, then gap2 for n/2.  The pump runs at every
 * arrival (POST) and at every deadline (TIMER), as the layer does.
 */
static struct sim_result simulate(uint32_t budget_us, uint64_t gap1,
				  uint64_t gap2, unsigned int n)
{
	struct sim_result r = { 0 };
	unsigned int pending = 0, rings[2] = { 0 }, wrs[2] = { 0 }, i = 0;
	uint64_t now = 1000 * US, next = now, oldest = 0, dl = 0, wait;
	struct sverbs_batch b;
	bool held = false;
	int half;

	sverbs_batch_init(&b, budget_us);
	while (i < n || pending) {
		enum sverbs_batch_reason why;

		if (i < n && (!pending || !held || next <= dl)) {
			now = next;
			next += i < n / 2 ? gap1 : gap2;
			sverbs_batch_arrival(&b, now);
			if (!pending)
				oldest = now;
			pending++;
			i++;
			why = SVERBS_BATCH_POST;
		} else {
			now = dl; /* the timer fires */
			why = i < n ? SVERBS_BATCH_TIMER : SVERBS_BATCH_FLUSH;
		}
		if (sverbs_batch_decide(&b, why, pending, true, oldest, now,
					&dl) == SVERBS_BATCH_HOLD) {
			held = true;
			continue;
		}
		wait = now - oldest;
		half = i <= n / 2 ? 0 : 1;
		if (wait > r.max_wait)
			r.max_wait = wait;
		if (!half && wait > r.first_max_wait)
			r.first_max_wait = wait;
		if (half && wait > r.second_max_wait)
			r.second_max_wait = wait;
		sverbs_batch_rang(&b, pending, held, oldest, now);
		rings[half]++;
		wrs[half] += pending;
		r.rings++;
		r.wrs += pending;
		pending = 0;
		held = false;
	}
	r.first_mean_batch = rings[0] ? (double)wrs[0] / rings[0] : 0;
	r.second_mean_batch = rings[1] ? (double)wrs[1] / rings[1] : 0;
	return r;
}

static void test_low_load_adds_no_delay(void)
{
	/* one WR every 200 us, budget 20 us: nothing is worth waiting for */
	struct sim_result r = simulate(20, 200 * US, 200 * US, 1000);

	CU_ASSERT_EQUAL(r.wrs, 1000);
	CU_ASSERT_EQUAL(r.rings, 1000);
	CU_ASSERT_EQUAL(r.max_wait, 0);
}

static void test_high_load_batches_within_budget(void)
{
	/* one WR every 500 ns, budget 20 us: batches of up to 40 possible */
	struct sim_result r = simulate(20, 500, 500, 20000);

	CU_ASSERT_EQUAL(r.wrs, 20000);
	CU_ASSERT_TRUE(r.max_wait <= 20 * US);
	CU_ASSERT_TRUE(r.first_mean_batch >= 8.0);
	CU_ASSERT_TRUE(r.rings < 20000 / 8);
}

static void test_adapts_to_falling_rate(void)
{
	/* high load, then the rate drops below one WR per budget */
	struct sim_result r = simulate(20, 1 * US, 100 * US, 4000);

	CU_ASSERT_EQUAL(r.wrs, 4000);
	CU_ASSERT_TRUE(r.max_wait <= 20 * US);
	CU_ASSERT_TRUE(r.first_mean_batch >= 4.0);
	/* at the low rate, batches fall back to single WRs with no wait
	 * (allow the transition's first few) */
	CU_ASSERT_TRUE(r.second_mean_batch < 1.1);
}

static void test_adapts_to_rising_rate(void)
{
	struct sim_result r = simulate(50, 100 * US, 1 * US, 4000);

	CU_ASSERT_TRUE(r.max_wait <= 50 * US);
	CU_ASSERT_TRUE(r.first_mean_batch < 1.1);
	CU_ASSERT_TRUE(r.second_mean_batch >= 8.0);
}

static void test_budget_never_exceeded_various(void)
{
	static const uint64_t gaps[] = { 100, 700, 3 * US, 9 * US, 31 * US };
	static const uint32_t budgets[] = { 5, 10, 30, 100 };
	unsigned int g, bu;

	for (g = 0; g < 5; g++)
		for (bu = 0; bu < 4; bu++) {
			struct sim_result r = simulate(budgets[bu], gaps[g],
						       gaps[4 - g], 3000);

			CU_ASSERT_EQUAL(r.wrs, 3000);
			CU_ASSERT_TRUE(r.max_wait <= budgets[bu] * US);
		}
}

static void test_aimd_cuts_on_overshoot(void)
{
	struct sverbs_batch b;
	uint32_t before;

	sverbs_batch_init(&b, 100);
	for (unsigned int t = 0; t < 100; t++)
		sverbs_batch_arrival(&b, t * US);
	before = b.target;
	/* a held batch whose oldest WR waited 90 us of a 100 us budget */
	sverbs_batch_rang(&b, 10, true, 0, 90 * US);
	CU_ASSERT_TRUE(b.target < before);
	CU_ASSERT_TRUE(b.target >= 1);
	before = b.target;
	/* a full batch well within the budget grows it again */
	sverbs_batch_rang(&b, before, true, 0, 10 * US);
	CU_ASSERT_EQUAL(b.target, before + 1);
}

/*
 * The post-a-burst-then-poll program (perftest, most RPC loops): 16 WRs a
 * microsecond apart, then a poll (which rings) and a long pause.  The pause
 * must not hide the burst's rate: after the first burst, each burst leaves
 * in few doorbells, and nothing waits past the budget.
 */
static void test_bursts_keep_their_rate(void)
{
	uint64_t now = 1000 * US, oldest = 0, dl, max_wait = 0;
	unsigned int burst, i, pending = 0, rings = 0;
	struct sverbs_batch b;

	sverbs_batch_init(&b, 50);
	for (burst = 0; burst < 100; burst++) {
		for (i = 0; i < 16; i++, now += US) {
			sverbs_batch_arrival(&b, now);
			if (!pending)
				oldest = now;
			pending++;
			if (sverbs_batch_decide(&b, SVERBS_BATCH_POST, pending,
						true, oldest, now,
						&dl) == SVERBS_BATCH_HOLD)
				continue;
			if (now - oldest > max_wait)
				max_wait = now - oldest;
			sverbs_batch_rang(&b, pending, false, oldest, now);
			rings += burst > 0;
			pending = 0;
		}
		if (pending) { /* the poll */
			CU_ASSERT_EQUAL(sverbs_batch_decide(
						&b, SVERBS_BATCH_POLL, pending,
						true, oldest, now, &dl),
					SVERBS_BATCH_RING);
			if (now - oldest > max_wait)
				max_wait = now - oldest;
			sverbs_batch_rang(&b, pending, true, oldest, now);
			rings += burst > 0;
			pending = 0;
		}
		now += 800 * US;
	}
	CU_ASSERT_TRUE(max_wait <= 50 * US);
	/* 99 bursts of 16: at most 3 doorbells each (stock: 16) */
	CU_ASSERT_TRUE(rings <= 99 * 3);
}

/* A target cut to 1 grows back once arrivals are dense again. */
static void test_aimd_recovers_from_one(void)
{
	struct sverbs_batch b;
	unsigned int t;

	sverbs_batch_init(&b, 100);
	for (t = 0; t < 100; t++)
		sverbs_batch_arrival(&b, t * US);
	while (b.target > 1)
		sverbs_batch_rang(&b, 1, true, 0, 99 * US);
	/* at target 1 nothing is held; the chains rung at once still count */
	for (t = 100; t < 200; t++) {
		sverbs_batch_arrival(&b, t * US);
		sverbs_batch_rang(&b, 1, false, t * US, t * US);
	}
	CU_ASSERT_TRUE(b.target >= 50);
}

static void test_stats_and_quantile(void)
{
	struct sverbs_batch b;
	unsigned int i;

	sverbs_batch_init(&b, 50);
	for (i = 0; i < 99; i++)
		sverbs_batch_rang(&b, 4, true, 0, 1000); /* 1 us */
	sverbs_batch_rang(&b, 4, true, 0, 40 * US);
	sverbs_batch_rang(&b, 3, false, 0, 0);
	CU_ASSERT_EQUAL(b.stats.wrs, 100 * 4 + 3);
	CU_ASSERT_EQUAL(b.stats.doorbells, 101);
	CU_ASSERT_EQUAL(b.stats.held_wrs, 400);
	/* p50 in the 1 us bucket, max in the 40 us one */
	CU_ASSERT_TRUE(sverbs_batch_held_quantile(&b.stats, 0.5) >= 1000);
	CU_ASSERT_TRUE(sverbs_batch_held_quantile(&b.stats, 0.5) < 2048);
	CU_ASSERT_TRUE(sverbs_batch_held_quantile(&b.stats, 1.0) >= 40 * US);
	CU_ASSERT_TRUE(sverbs_batch_held_quantile(&b.stats, 1.0) < 80 * US);
}

/*
 * The timer thread (batch/timer.c) is tested in test_timer.c under an
 * injected clock: deadline order, del/disarm, lingering - no sleeps.
 */

/*
 * Issue 16.9: a child of fork() has no timer thread (only the forking
 * thread survives).  Its held WRs were never rung by the budget's deadline
 * (and a fork while the thread held its lock left the child's lock taken).
 * The child arms an entry added before the fork: it must fire.  The child
 * reports through its exit status; alarm() bounds a hang (liveness, not a
 * timing figure).
 */
static atomic_int fired;

static void on_fire(void *arg)
{
	(void)arg;
	atomic_fetch_add(&fired, 1);
}

static void wait_fired(int want)
{
	int i;

	/* liveness, not speed: up to 5 s */
	for (i = 0; i < 5000 && atomic_load(&fired) < want; i++)
		usleep(1000);
}

static void test_timer_after_fork(void)
{
	struct sverbs_timer_entry e;
	int status = -1;
	pid_t pid;

	atomic_store(&fired, 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire, NULL, 0), 0);
	/*
	 * Let the parent's timer thread finish starting (one fire) before the
	 * fork.  GCC 12's ASan runtime does not lock its allocator across
	 * fork(): a fork while the new thread allocated in its start-up left
	 * the child's allocator lock taken, and the child's own timer thread
	 * then blocked in that lock (CI, sanitize-short; seen 7 in 40 runs on
	 * a loaded host, gdb: __asan::AsanThread::ThreadStart -> calloc ->
	 * Mutex::Lock).  glibc's malloc is locked across fork; plain builds
	 * never showed it.
	 */
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	wait_fired(1);
	CU_ASSERT_EQUAL_FATAL(atomic_load(&fired), 1);
	atomic_store(&fired, 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		alarm(10);
		sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
		wait_fired(1);
		_exit(atomic_load(&fired) == 1 ? 0 : 1);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	sverbs_timer_del(&e);
}

/*
 * A fork while the timer thread is inside an entry's fire(): the fire holds
 * a lock of its owner (a QP's, the provider's send queue's), and a child
 * forked meanwhile would inherit it taken, with no thread to release it.
 * fork() waits for the fire to return.  The fire here holds a mutex for
 * 300 ms; the child must be able to take it (alarm() bounds a hang).
 */
static pthread_mutex_t fire_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int in_fire;

static void on_fire_locked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&fire_mu);
	atomic_store(&in_fire, 1);
	usleep(300 * 1000);
	atomic_store(&in_fire, 0);
	pthread_mutex_unlock(&fire_mu);
	atomic_fetch_add(&fired, 1);
}

static void test_timer_fork_during_fire(void)
{
	struct sverbs_timer_entry e;
	int i, status = -1;
	pid_t pid;

	atomic_store(&fired, 0);
	CU_ASSERT_EQUAL_FATAL(sverbs_timer_add(&e, on_fire_locked, NULL, 0), 0);
	sverbs_timer_arm(&e, sverbs_now_ns() + 100 * US);
	for (i = 0; i < 5000 && !atomic_load(&in_fire); i++)
		usleep(1000);
	CU_ASSERT_FATAL(atomic_load(&in_fire));
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		alarm(10);
		pthread_mutex_lock(&fire_mu);
		pthread_mutex_unlock(&fire_mu);
		_exit(0);
	}
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	wait_fired(1);
	sverbs_timer_del(&e);
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("batch", NULL, NULL);
	CU_add_test(s, "zero budget never holds", test_zero_budget_never_holds);
	CU_add_test(s, "every flush trigger rings",
		    test_every_flush_trigger_rings);
	CU_add_test(s, "low load adds no delay", test_low_load_adds_no_delay);
	CU_add_test(s, "high load batches within budget",
		    test_high_load_batches_within_budget);
	CU_add_test(s, "adapts to falling rate", test_adapts_to_falling_rate);
	CU_add_test(s, "adapts to rising rate", test_adapts_to_rising_rate);
	CU_add_test(s, "budget never exceeded",
		    test_budget_never_exceeded_various);
	CU_add_test(s, "AIMD cuts on overshoot", test_aimd_cuts_on_overshoot);
	CU_add_test(s, "bursts keep their rate", test_bursts_keep_their_rate);
	CU_add_test(s, "AIMD recovers from 1", test_aimd_recovers_from_one);
	CU_add_test(s, "stats and quantile", test_stats_and_quantile);
	CU_add_test(s, "16.9 timer fires in a forked child",
		    test_timer_after_fork);
	CU_add_test(s, "fork while the timer thread fires",
		    test_timer_fork_during_fire);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
