#include "slo.hpp"

#include <algorithm>
#include <cmath>

namespace sv {

namespace {
constexpr double kDecay = 0.9;  // per batch, in the least-squares sums
constexpr int64_t kRateWindowNs = 50'000'000;
constexpr double kRateWeight = 0.3;  // of the newest window
}  // namespace

void SloController::reset(const Params& p) {
    *this = SloController{};
    p_ = p;
}

void SloController::on_arrival(int64_t now) {
    if (win_start_ < 0) win_start_ = now;
    ++win_count_;
    if (now - win_start_ >= kRateWindowNs) {
        double r = static_cast<double>(win_count_) * 1e9 / static_cast<double>(now - win_start_);
        lambda_ = lambda_ == 0 ? r : (1 - kRateWeight) * lambda_ + kRateWeight * r;
        win_start_ = now;
        win_count_ = 0;
    }
}

double SloController::rate_per_s(int64_t now) const {
    // A long silence lowers the estimate (no arrival closes the window).
    if (win_start_ >= 0 && now - win_start_ > 4 * kRateWindowNs) {
        double r = static_cast<double>(win_count_) * 1e9 / static_cast<double>(now - win_start_);
        return std::min(lambda_, r);
    }
    return lambda_;
}

void SloController::on_queue_delay(int64_t d) {
    qdelay_ = qdelay_ == 0 ? static_cast<double>(d) : 0.9 * qdelay_ + 0.1 * static_cast<double>(d);
}

void SloController::on_batch(uint32_t size, int64_t service_ns) {
    double b = size, s = static_cast<double>(service_ns);
    sw_ = kDecay * sw_ + 1;
    sb_ = kDecay * sb_ + b;
    ss_ = kDecay * ss_ + s;
    sbb_ = kDecay * sbb_ + b * b;
    sbs_ = kDecay * sbs_ + b * s;
    ++batches_;
    fit();
}

void SloController::fit() {
    double mb = sb_ / sw_, ms = ss_ / sw_;
    double var = sbb_ / sw_ - mb * mb;
    if (var > 1e-6) {
        beta_ = std::max(0.0, (sbs_ / sw_ - mb * ms) / var);
        alpha_ = std::max(0.0, ms - beta_ * mb);
    } else {
        // All batches the same size: no slope yet; charge the time to the batch as a whole.
        alpha_ = ms;
        beta_ = 0;
    }
}

double SloController::predicted_latency(double b, double lambda) const {
    double fill = lambda > 0 ? (b - 1) / lambda * 1e9 : 0;
    return fill + alpha_ + beta_ * b;
}

uint32_t SloController::target(int64_t now) const {
    if (!modelled()) return 1;
    const double lambda = rate_per_s(now);
    const double limit = p_.headroom * static_cast<double>(p_.slo_ns);
    uint32_t best_latency = 1;  // largest b within the target
    for (uint32_t b = 1; b <= p_.max_batch; ++b)
        if (predicted_latency(b, lambda) <= limit) best_latency = b;
    // Smallest b that carries the load: b / S(b) >= lambda.
    uint32_t need = p_.max_batch;
    for (uint32_t b = 1; b <= p_.max_batch; ++b) {
        double cap = b * 1e9 / std::max(1.0, alpha_ + beta_ * b);
        if (cap >= lambda) {
            need = b;
            break;
        }
    }
    // Prefer meeting the throughput (else queueing delay grows without bound); within that,
    // the largest batch the target allows (more work per frame and per service call).
    return std::max(need, best_latency);
}

int64_t SloController::fill_budget_ns(uint32_t target) const {
    double lambda = lambda_;
    if (lambda <= 0 || target <= 1) return 0;
    double slack = p_.headroom * static_cast<double>(p_.slo_ns) - (alpha_ + beta_ * target);
    double fill = (target - 1) / lambda * 1e9;
    return static_cast<int64_t>(std::max(0.0, std::min(fill, slack)));
}

bool SloController::should_shed(size_t ahead, int64_t now) const {
    // Nothing ahead: always admit.  An idle upstream must serve (work-conserving), and its
    // batches keep the model fresh -- shedding everything when S(1) alone is over the target
    // would starve the model of the measurements that could show the service recovered.
    if (!modelled() || ahead == 0) return false;
    const uint32_t b = p_.max_batch;
    const double s = alpha_ + beta_ * b;
    const double cap = b * 1e9 / std::max(1.0, s);  // requests per second at most
    (void)now;
    double wait = static_cast<double>(ahead) / cap * 1e9;
    return wait + alpha_ + beta_ * std::min<double>(b, static_cast<double>(ahead) + 1) >
           static_cast<double>(p_.slo_ns);
}

}  // namespace sv
