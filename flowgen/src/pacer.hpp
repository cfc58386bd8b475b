// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// pacer.hpp - the open-loop schedule of one flow: when its next message may
// be posted.  No clock and no verbs here: the caller passes the time (ns), so
// the unit tests drive it with a simulated clock.
#pragma once

#include <cstdint>

namespace flowgen {

class Pacer {
  public:
    // The debt a flow may catch up: the larger of these (see due()).
    static constexpr uint64_t kCatchUpNs = 1'000'000'000;
    static constexpr uint64_t kCatchUpMessages = 16;

    Pacer() = default;  // not paced: every message is due
    explicit Pacer(double rate_mbps) : ns_per_byte_(rate_mbps > 0 ? 8e3 / rate_mbps : 0) {}

    bool paced() const { return ns_per_byte_ > 0; }
    // The schedule starts at now + phase (0 <= phase < 1) of the first
    // message's interval.
    void start(uint64_t now, double phase, uint64_t size);
    // May the next message (of size bytes) be posted at now?  Counts a reset
    // when the flow is so far behind that it drops part of its debt.
    bool due(uint64_t now, uint64_t size);
    // A message of size bytes was posted.
    void sent(uint64_t size);
    uint64_t resets() const { return resets_; }
    uint64_t next_ns() const { return next_ns_; }

  private:
    uint64_t interval(uint64_t size) const {
        return static_cast<uint64_t>(ns_per_byte_ * static_cast<double>(size));
    }
    double ns_per_byte_ = 0;
    uint64_t next_ns_ = 0;
    uint64_t resets_ = 0;
};

}  // namespace flowgen
