// Batching policy under a simulated clock (no sleeping, no wall-clock thresholds).
#include "batching.hpp"
#include "cunit_main.hpp"

using namespace sv;

namespace {

BatchParams params() {
    BatchParams p;
    p.max_batch = 32;
    p.initial_batch = 8;
    p.max_delay_ns = 1'600'000;
    p.initial_delay_ns = 200'000;
    p.slo_ns = 10'000'000;
    p.adaptive = true;
    p.eager_when_idle = false;
    p.max_inflight_batches = 2;
    return p;
}

// Feed one full window (kMaxSamples) of identical latencies.
void window(BatchPolicy& b, int64_t latency, int64_t& now) {
    for (size_t i = 0; i < BatchPolicy::kMaxSamples; ++i) b.on_latency(latency, now += 1000);
}

void test_size_trigger() {
    BatchPolicy b(params());
    CU_ASSERT_EQUAL(b.size_target(), 8u);
    CU_ASSERT_FALSE(b.should_flush(0, 0, 1'000'000'000, 0));
    CU_ASSERT_FALSE(b.should_flush(7, 1000, 1000, 0));
    CU_ASSERT_TRUE(b.should_flush(8, 1000, 1000, 0));
    CU_ASSERT_TRUE(b.should_flush(9, 1000, 1000, 5));
}

void test_delay_trigger() {
    BatchPolicy b(params());
    const int64_t t0 = 5'000'000;
    CU_ASSERT_EQUAL(b.deadline(t0), t0 + 200'000);
    CU_ASSERT_FALSE(b.should_flush(1, t0, t0 + 199'999, 0));
    CU_ASSERT_TRUE(b.should_flush(1, t0, t0 + 200'000, 0));
}

void test_eager_when_idle() {
    auto p = params();
    p.eager_when_idle = true;
    BatchPolicy b(p);
    CU_ASSERT_TRUE(b.should_flush(1, 0, 0, 0));
    CU_ASSERT_TRUE(b.should_flush(1, 0, 0, 1));
    CU_ASSERT_FALSE(b.should_flush(1, 0, 0, 2));  // pipe full: wait for size or budget
    CU_ASSERT_TRUE(b.should_flush(1, 0, 200'000, 2));
}

void test_decrease_when_over_slo() {
    BatchPolicy b(params());
    int64_t now = 0;
    window(b, 20'000'000, now);  // p99 = 20 ms > 10 ms
    CU_ASSERT_EQUAL(b.stats().windows, 1u);
    CU_ASSERT_EQUAL(b.stats().decreases, 1u);
    CU_ASSERT_EQUAL(b.stats().last_p99_ns, 20'000'000);
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 100'000);
    CU_ASSERT_EQUAL(b.size_target(), 6u);  // 8 - 8/4
    for (int i = 0; i < 40; ++i) window(b, 20'000'000, now);
    CU_ASSERT_EQUAL(b.size_target(), 1u);  // floor
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 0);
}

void test_increase_when_under_slo() {
    BatchPolicy b(params());
    int64_t now = 0;
    window(b, 1'000'000, now);  // p99 = 1 ms < 0.8 * 10 ms
    CU_ASSERT_EQUAL(b.stats().increases, 1u);
    CU_ASSERT_EQUAL(b.size_target(), 10u);                    // + 32/16
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 200'000 + 100'000);  // + 1.6ms/16
    for (int i = 0; i < 100; ++i) window(b, 1'000'000, now);
    CU_ASSERT_EQUAL(b.size_target(), 32u);  // ceiling
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 1'600'000);
}

void test_hold_in_band() {
    BatchPolicy b(params());
    int64_t now = 0;
    window(b, 9'000'000, now);  // between 0.8 and 1.0 of the objective
    CU_ASSERT_EQUAL(b.stats().windows, 1u);
    CU_ASSERT_EQUAL(b.stats().increases + b.stats().decreases, 0u);
    CU_ASSERT_EQUAL(b.size_target(), 8u);
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 200'000);
}

void test_p99_uses_tail() {
    BatchPolicy b(params());
    int64_t now = 0;
    // 512 samples: 5 at 50 ms are 0.98% of the window -> p99 index 506 is 1 ms: increase.
    for (size_t i = 0; i < BatchPolicy::kMaxSamples; ++i)
        b.on_latency(i < 5 ? 50'000'000 : 1'000'000, now += 1000);
    CU_ASSERT_EQUAL(b.stats().last_p99_ns, 1'000'000);
    // 6 slow ones reach the p99 index: decrease.
    for (size_t i = 0; i < BatchPolicy::kMaxSamples; ++i)
        b.on_latency(i < 6 ? 50'000'000 : 1'000'000, now += 1000);
    CU_ASSERT_EQUAL(b.stats().last_p99_ns, 50'000'000);
    CU_ASSERT_EQUAL(b.stats().decreases, 1u);
}

void test_time_window() {
    BatchPolicy b(params());
    int64_t now = 1'000'000'000;
    // Fewer than kMinSamples never closes a window, however long it takes.
    for (size_t i = 0; i < BatchPolicy::kMinSamples - 1; ++i)
        b.on_latency(1'000'000, now += BatchPolicy::kWindowNs);
    CU_ASSERT_EQUAL(b.stats().windows, 0u);
    b.on_latency(1'000'000, now += BatchPolicy::kWindowNs);
    CU_ASSERT_EQUAL(b.stats().windows, 1u);
}

void test_take_what_is_queued() {
    int64_t now = 0;
    BatchPolicy b(params());               // target 8, max 32
    CU_ASSERT_EQUAL(b.take(3, 1), 8u);     // never less than the target
    CU_ASSERT_EQUAL(b.take(20, 1), 20u);   // everything already queued, in one batch
    CU_ASSERT_EQUAL(b.take(100, 1), 32u);  // up to max_batch
    CU_ASSERT_EQUAL(b.take(40, 2), 20u);   // shared over two channels
    CU_ASSERT_EQUAL(b.take(41, 2), 21u);
    CU_ASSERT_EQUAL(b.take(10, 4), 8u);
    CU_ASSERT_EQUAL(b.take(10, 0), 10u);  // no channel counted: as one
    // Over the objective the target shrinks to 1, but a batch still takes what is queued.
    for (int i = 0; i < 20; ++i) window(b, 50'000'000, now);
    CU_ASSERT_EQUAL(b.size_target(), 1u);
    CU_ASSERT_EQUAL(b.take(1, 1), 1u);
    CU_ASSERT_EQUAL(b.take(17, 1), 17u);
    CU_ASSERT_EQUAL(b.take(64, 1), 32u);
}

void test_non_adaptive_and_reload() {
    auto p = params();
    p.adaptive = false;
    BatchPolicy b(p);
    CU_ASSERT_EQUAL(b.size_target(), 32u);
    CU_ASSERT_EQUAL(b.delay_budget_ns(), 1'600'000);
    int64_t now = 0;
    window(b, 100'000'000, now);
    CU_ASSERT_EQUAL(b.size_target(), 32u);  // no adaptation
    // Reload to adaptive with a smaller ceiling: state clamps into new bounds.
    BatchPolicy a(params());
    for (int i = 0; i < 100; ++i) window(a, 1'000'000, now);
    CU_ASSERT_EQUAL(a.size_target(), 32u);
    auto q = params();
    q.max_batch = 16;
    q.max_delay_ns = 500'000;
    a.update_params(q);
    CU_ASSERT_EQUAL(a.size_target(), 16u);
    CU_ASSERT_EQUAL(a.delay_budget_ns(), 500'000);
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"size target triggers", test_size_trigger},
        {"delay budget triggers", test_delay_trigger},
        {"eager when the pipe is idle", test_eager_when_idle},
        {"multiplicative decrease over the objective", test_decrease_when_over_slo},
        {"additive increase under the objective", test_increase_when_under_slo},
        {"hold inside the band", test_hold_in_band},
        {"p99 is the tail", test_p99_uses_tail},
        {"time-closed windows need enough samples", test_time_window},
        {"fixed policy and reload", test_non_adaptive_and_reload},
        {"a batch takes what is queued", test_take_what_is_queued},
    };
    return run_cunit_suite("batching", tests);
}
