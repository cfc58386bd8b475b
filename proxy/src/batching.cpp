#include "batching.hpp"

#include <algorithm>

namespace sv {

void BatchPolicy::reset(const BatchParams& p) {
    p_ = p;
    if (p_.adaptive) {
        target_ = std::clamp<uint32_t>(p_.initial_batch, 1, std::max<uint32_t>(1, p_.max_batch));
        budget_ns_ = std::clamp<int64_t>(p_.initial_delay_ns, 0, p_.max_delay_ns);
    } else {
        target_ = std::max<uint32_t>(1, p_.max_batch);
        budget_ns_ = p_.max_delay_ns;
    }
    n_ = 0;
    window_start_ = -1;
    stats_ = {};
    slo_.reset({p_.slo_ns, std::max<uint32_t>(1, p_.max_batch), 0.8});
    if (p_.model && p_.adaptive) {
        target_ = 1;
        budget_ns_ = 0;
    }
}

void BatchPolicy::update_params(const BatchParams& p) {
    bool was_adaptive = p_.adaptive;
    p_ = p;
    if (!p_.adaptive || !was_adaptive) {
        auto keep = stats_;
        reset(p);
        stats_ = keep;
        return;
    }
    target_ = std::clamp<uint32_t>(target_, 1, std::max<uint32_t>(1, p_.max_batch));
    budget_ns_ = std::clamp<int64_t>(budget_ns_, 0, p_.max_delay_ns);
    slo_.update({p_.slo_ns, std::max<uint32_t>(1, p_.max_batch), 0.8});
}

void BatchPolicy::on_arrival(int64_t now) {
    if (!p_.model || !p_.adaptive) return;
    slo_.on_arrival(now);
}

void BatchPolicy::on_batch(uint32_t size, int64_t service_ns, int64_t now) {
    if (!p_.model || !p_.adaptive) return;
    slo_.on_batch(size, service_ns);
    retarget(now);
}

void BatchPolicy::retarget(int64_t now) {
    uint32_t t = slo_.target(now);
    if (t > target_)
        ++stats_.increases;
    else if (t < target_)
        ++stats_.decreases;
    target_ = std::clamp<uint32_t>(t, 1, std::max<uint32_t>(1, p_.max_batch));
    budget_ns_ = std::min(p_.max_delay_ns, slo_.fill_budget_ns(target_));
}

bool BatchPolicy::should_flush(size_t queued, int64_t oldest_ns, int64_t now_ns,
                               uint32_t inflight) const {
    if (queued == 0) return false;
    if (queued >= target_) return true;
    if (now_ns - oldest_ns >= budget_ns_) return true;
    if (p_.model && p_.adaptive) return p_.eager_when_idle && inflight == 0;
    return p_.eager_when_idle && inflight < p_.max_inflight_batches;
}

uint32_t BatchPolicy::take(size_t queued, size_t ways) const {
    if (p_.model && p_.adaptive) return target_;
    size_t share = (queued + std::max<size_t>(1, ways) - 1) / std::max<size_t>(1, ways);
    size_t cap = std::max<size_t>(target_, p_.max_batch);
    return static_cast<uint32_t>(std::max<size_t>(target_, std::min(share, cap)));
}

void BatchPolicy::on_latency(int64_t latency_ns, int64_t now_ns) {
    if (!p_.adaptive) return;
    if (window_start_ < 0) window_start_ = now_ns;
    samples_[n_++] = latency_ns;
    if (n_ >= kMaxSamples || (n_ >= kMinSamples && now_ns - window_start_ >= kWindowNs)) {
        close_window();
        window_start_ = now_ns;
    }
}

void BatchPolicy::close_window() {
    size_t idx = (n_ * 99 + 99) / 100 - 1;  // ceil(0.99 n) - 1
    std::nth_element(samples_.begin(), samples_.begin() + idx, samples_.begin() + n_);
    int64_t p99 = samples_[idx];
    n_ = 0;
    stats_.last_p99_ns = p99;
    ++stats_.windows;
    if (p_.model) return;  // the model sets the target (on_batch); p99 is reported only
    if (p99 > p_.slo_ns) {
        budget_ns_ /= 2;
        target_ = target_ > 1 ? target_ - std::max<uint32_t>(1, target_ / 4) : 1;
        ++stats_.decreases;
    } else if (p99 * 10 < p_.slo_ns * 8) {
        budget_ns_ =
            std::min(p_.max_delay_ns, budget_ns_ + std::max<int64_t>(1000, p_.max_delay_ns / 16));
        target_ = std::min(p_.max_batch, target_ + std::max<uint32_t>(1, p_.max_batch / 16));
        ++stats_.increases;
    }
}

}  // namespace sv
