// SLO-driven batch sizing (USPS-style dynamic batching), pure logic with the clock passed in.
//
// Inputs, all measured by the ingress:
//   * the batch service time S(b): from a batch leaving to its last answer arriving, fitted
//     as S(b) = alpha + beta * b by exponentially weighted least squares over recent batches;
//   * the arrival rate lambda of the upstream (exponentially weighted, 50 ms windows);
//   * the queueing delay of requests (arrival -> batch leaves), exponentially weighted.
// Output: the batch size b* = the largest b <= max_batch whose predicted latency
//   fill(b) + S(b) = (b - 1) / lambda + alpha + beta * b
// stays within `headroom` x the p99 target, and at least the smallest b whose throughput
// b / S(b) carries lambda (else the queue grows without bound).  When no b satisfies both --
// the target cannot be met at this load -- the controller sheds: should_shed() is true while
// the predicted latency of a newly admitted request, (queued + in flight) / capacity + S, is
// over the target, and the ingress answers it 503 + Retry-After.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sv {

class SloController {
  public:
    struct Params {
        int64_t slo_ns = 50'000'000;
        uint32_t max_batch = 64;
        double headroom = 0.8;  // plan for this share of the target (p99 noise, the egress)
    };
    void reset(const Params& p);
    void update(const Params& p) { p_ = p; }

    void on_arrival(int64_t now_ns);
    void on_queue_delay(int64_t delay_ns);
    void on_batch(uint32_t size, int64_t service_ns);

    // The batch size to aim for now (1 until the model has data).
    uint32_t target(int64_t now_ns) const;
    // How long the oldest request may wait for a batch to fill.
    int64_t fill_budget_ns(uint32_t target) const;
    // Admission: a new request now would miss the target (queued + in flight ahead of it).
    bool should_shed(size_t ahead, int64_t now_ns) const;

    double alpha_ns() const { return alpha_; }
    double beta_ns() const { return beta_; }
    double rate_per_s(int64_t now_ns) const;
    double queue_delay_ns() const { return qdelay_; }
    bool modelled() const { return batches_ >= 4; }

  private:
    void fit();
    double predicted_latency(double b, double lambda) const;

    Params p_;
    // EW least squares sums of (b, S)
    double sw_ = 0, sb_ = 0, ss_ = 0, sbb_ = 0, sbs_ = 0;
    double alpha_ = 0, beta_ = 0;
    uint64_t batches_ = 0;
    // arrival rate
    int64_t win_start_ = -1;
    uint64_t win_count_ = 0;
    double lambda_ = 0;  // per second
    double qdelay_ = 0;
};

}  // namespace sv
