// Dynamic batching policy for one upstream (pure logic, clock passed in; unit-tested).
//
// A batch leaves when
//   (1) the queue holds size_target requests, or
//   (2) the oldest queued request has waited delay_budget, or
//   (3) eager_when_idle and fewer than max_inflight_batches batches of this upstream are
//       outstanding (work-conserving: an idle pipe never waits for a batch to fill).
// Adaptation (AIMD on the observed p99, per window of completed requests):
//   window closes after 512 samples, or after 100 ms with at least 32 samples;
//   p99 > slo          -> delay_budget /= 2, size_target -= max(1, size_target / 4)
//   p99 < 0.8 * slo    -> delay_budget += max_delay / 16, size_target += max(1, max_batch / 16)
//   otherwise          -> hold
// bounded by [0, max_delay] and [1, max_batch].  Non-adaptive policies use max_batch and
// max_delay as fixed values.
// A batch that leaves takes up to take(queued, ways) requests: size_target, or when more are
// already queued, an equal share of them over the `ways` channels that can carry a batch, up
// to max_batch.  size_target is when to stop waiting, not a cap on what is already there:
// requests that have arrived would otherwise leave in more, smaller batches in the same loop
// turn, each paying a frame (and, at the egress, a service write) of its own -- under
// overload, when the objective is missed and the target shrinks, that made batches of one.
//
// controller = "slo" (model = true, the default in the configuration): the size target and
// the delay budget come from SloController (slo.hpp): measured batch service time S(b) and
// arrival rate against the p99 target; a batch takes at most the target; the eager rule only
// fires when nothing of this upstream is in flight; should_shed() says when a request cannot
// meet the target (503 + Retry-After).  "aimd" keeps the rule above.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "slo.hpp"

namespace sv {

struct BatchParams {
    uint32_t max_batch = 64;
    uint32_t initial_batch = 8;
    int64_t max_delay_ns = 1'000'000;
    int64_t initial_delay_ns = 200'000;
    int64_t slo_ns = 50'000'000;
    bool adaptive = true;
    bool eager_when_idle = true;
    uint32_t max_inflight_batches = 2;
    bool model = false;  // SloController instead of AIMD
    bool shed = true;    // model: answer 503 when the target cannot be met
};

class BatchPolicy {
  public:
    static constexpr size_t kMaxSamples = 512;
    static constexpr size_t kMinSamples = 32;
    static constexpr int64_t kWindowNs = 100'000'000;

    explicit BatchPolicy(const BatchParams& p = {}) { reset(p); }
    void reset(const BatchParams& p);
    // Keep the adapted state, clamp it into new bounds (config reload).
    void update_params(const BatchParams& p);

    bool should_flush(size_t queued, int64_t oldest_ns, int64_t now_ns, uint32_t inflight) const;
    int64_t deadline(int64_t oldest_ns) const { return oldest_ns + budget_ns_; }
    uint32_t size_target() const { return target_; }
    uint32_t take(size_t queued, size_t ways) const;
    int64_t delay_budget_ns() const { return budget_ns_; }
    const BatchParams& params() const { return p_; }

    // One completed request: time from arrival at the ingress to response ready.
    void on_latency(int64_t latency_ns, int64_t now_ns);
    // Model inputs: a request arrived; a batch of `size` was answered `service_ns` after it
    // left.
    void on_arrival(int64_t now_ns);
    void on_batch(uint32_t size, int64_t service_ns, int64_t now_ns);
    bool should_shed(size_t ahead, int64_t now_ns) const {
        return p_.model && p_.adaptive && p_.shed && slo_.should_shed(ahead, now_ns);
    }
    const SloController& slo() const { return slo_; }

    struct Stats {
        int64_t last_p99_ns = 0;
        uint64_t windows = 0, increases = 0, decreases = 0;
    };
    const Stats& stats() const { return stats_; }

  private:
    void close_window();
    void retarget(int64_t now_ns);

    BatchParams p_;
    SloController slo_;
    uint32_t target_ = 1;
    int64_t budget_ns_ = 0;
    std::array<int64_t, kMaxSamples> samples_{};
    size_t n_ = 0;
    int64_t window_start_ = -1;
    Stats stats_;
};

}  // namespace sv
