// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// report.hpp - a run's results (per flow and in total) and their JSON, CSV and
// terminal forms.  No verbs here.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config.hpp"
#include "stats.hpp"

namespace flowgen {

struct FlowResult {
    uint32_t id = 0, user = 0, service = 0;
    FlowSpec spec;
    uint32_t qpn = 0, peer_qpn = 0;
    uint16_t cm_sport = 0, udp_sport = 0;
    uint64_t bytes = 0, ops = 0, errors = 0;
    uint64_t posted_bytes = 0;  // offered: posted while the run was posting
    uint64_t pace_resets = 0;   // open loop: times the flow dropped debt (Pacer::due)
    std::string error;          // the first completion error, if any
    Histogram lat;              // ns, post to completion
};

struct TimePoint {
    double t = 0, gbps = 0, jain = 0;
};

struct RunResult {
    std::string label, mode, device;
    uint32_t users = 0, services = 0, threads = 0;
    double seconds = 0;       // measured, first post to last completion
    double post_seconds = 0;  // measured, first post to the end of posting
    bool alloc = false;
    double link_mbps = 0;
    std::vector<double> user_weights;
    std::vector<FlowResult> flows;
    std::vector<TimePoint> timeline;
    std::map<std::string, uint64_t> hw_counters;  // deltas over the run
    double rss_per_flow = 0, sys_per_flow = 0;    // bytes
    uint64_t rss_before = 0, rss_after = 0;
    double connect_seconds = 0;
    bool aborted = false;
    std::string abort_reason, sport_rule;
};

// per-flow Gbit/s over seconds
double gbps(uint64_t bytes, double seconds);
nlohmann::json to_json(const RunResult& r);
std::string to_csv(const RunResult& r);
std::string summary(const RunResult& r);

}  // namespace flowgen
