// SLO controller under a simulated service and clock: S(b) = alpha + beta * b, arrivals at a
// fixed rate.  Directions and the model fit only; no wall-clock thresholds.
#include <initializer_list>

#include "cunit_main.hpp"
#include "slo.hpp"

using namespace sv;

namespace {

constexpr int64_t kMs = 1'000'000;

SloController::Params params() {
    SloController::Params p;
    p.slo_ns = 50 * kMs;
    p.max_batch = 64;
    p.headroom = 0.8;
    return p;
}

// rate requests/s for `secs` seconds, batches of the controller's target served by a service
// with S(b) = alpha + beta * b; returns the target at the end.
uint32_t drive(SloController& c, double rate, double secs, int64_t alpha, int64_t beta,
               int64_t& now) {
    const int64_t gap = static_cast<int64_t>(1e9 / rate);
    const int64_t end = now + static_cast<int64_t>(secs * 1e9);
    uint32_t pending = 0;
    while (now < end) {
        now += gap;
        c.on_arrival(now);
        if (++pending >= c.target(now)) {
            c.on_batch(pending, alpha + beta * pending);
            pending = 0;
        }
    }
    return c.target(now);
}

void test_fit() {
    SloController c;
    c.reset(params());
    for (uint32_t b : {1u, 4u, 8u, 16u, 2u, 32u, 8u, 64u}) c.on_batch(b, 2 * kMs + b * 100'000);
    CU_ASSERT(c.modelled());
    CU_ASSERT_DOUBLE_EQUAL(c.alpha_ns(), 2e6, 1e3);
    CU_ASSERT_DOUBLE_EQUAL(c.beta_ns(), 1e5, 1e2);
}

void test_no_model_no_batching() {
    SloController c;
    c.reset(params());
    CU_ASSERT_EQUAL(c.target(0), 1u);
    CU_ASSERT_FALSE(c.should_shed(100000, 0));
}

void test_grows_with_load() {
    // alpha 2 ms per batch, beta 0.1 ms per request: one-at-a-time carries 476/s.
    SloController c;
    c.reset(params());
    for (uint32_t b : {1u, 2u, 4u, 8u}) c.on_batch(b, 2 * kMs + b * 100'000);
    int64_t now = 0;
    uint32_t low = drive(c, 100, 2, 2 * kMs, 100'000, now);
    uint32_t high = drive(c, 3000, 2, 2 * kMs, 100'000, now);
    CU_ASSERT(low < high);
    CU_ASSERT(high * 1e9 / (2e6 + 1e5 * high) >= 3000 * 0.95);  // carries the load
    uint32_t back = drive(c, 100, 3, 2 * kMs, 100'000, now);
    CU_ASSERT(back < high);  // shrinks again when the load goes away
}

void test_latency_caps_target() {
    // Cheap service, low rate: no need to batch for throughput, and filling a big batch at
    // 200/s would take longer than the target.
    SloController c;
    c.reset(params());
    for (uint32_t b : {1u, 2u, 4u, 8u}) c.on_batch(b, 1 * kMs + b * 10'000);
    int64_t now = 0;
    uint32_t t = drive(c, 200, 2, 1 * kMs, 10'000, now);
    CU_ASSERT(t >= 1);
    CU_ASSERT((t - 1) / 200.0 * 1e9 + 1e6 + 1e4 * t <= 0.8 * 50e6);
}

void test_sheds_beyond_capacity() {
    // Capacity at 64: 64 / (2 + 6.4 ms) = 7,619/s.  A backlog of 1,000 waits ~131 ms > 50 ms.
    SloController c;
    c.reset(params());
    for (uint32_t b : {1u, 8u, 32u, 64u}) c.on_batch(b, 2 * kMs + b * 100'000);
    CU_ASSERT_FALSE(c.should_shed(10, 0));
    CU_ASSERT(c.should_shed(1000, 0));
    // A service slower than the target by itself: an idle upstream still admits (and keeps
    // measuring), what would queue behind is shed.
    SloController slow;
    slow.reset(params());
    for (uint32_t b : {1u, 2u, 4u, 8u}) slow.on_batch(b, 80 * kMs + b * 100'000);
    CU_ASSERT_FALSE(slow.should_shed(0, 0));
    CU_ASSERT(slow.should_shed(1, 0));
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"fits S(b) = alpha + beta b", test_fit},
        {"no model: no batching, no shedding", test_no_model_no_batching},
        {"batch grows with load and shrinks after", test_grows_with_load},
        {"the target caps the batch at low load", test_latency_caps_target},
        {"sheds what cannot meet the target", test_sheds_beyond_capacity},
    };
    return run_cunit_suite("slo", tests);
}
