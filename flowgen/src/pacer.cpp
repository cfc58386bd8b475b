// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "pacer.hpp"

#include <algorithm>

namespace flowgen {

void Pacer::start(uint64_t now, double phase, uint64_t size) {
    next_ns_ = now + static_cast<uint64_t>(phase * static_cast<double>(interval(size)));
}

// A flow that falls behind its schedule (depth-bound while its completions are
// late, or its thread late) keeps its debt and catches up, at most depth
// messages at a time; only a debt above max(1 s, 16 messages) is dropped, by
// whole intervals, so the flow keeps its phase and flows of one rate do not
// fall into lockstep after a common stall.
bool Pacer::due(uint64_t now, uint64_t size) {
    if (!paced()) return true;
    if (now < next_ns_) return false;
    uint64_t step = std::max<uint64_t>(interval(size), 1);
    uint64_t cap = std::max<uint64_t>(kCatchUpNs, kCatchUpMessages * step);
    if (now - next_ns_ > cap) {
        next_ns_ += ((now - next_ns_ - cap) / step + 1) * step;
        resets_++;
    }
    return true;
}

void Pacer::sent(uint64_t size) {
    if (paced()) next_ns_ += interval(size);
}

}  // namespace flowgen
