// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// util.hpp - clock, size parsing, latency statistics and run metadata shared by
// the perf/ benchmarks.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace perf {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

inline double us_between(TimePoint a, TimePoint b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}
inline double s_between(TimePoint a, TimePoint b) {
    return std::chrono::duration<double>(b - a).count();
}

// "64", "64K", "1M", "4MiB", "16m" -> bytes (K/M/G are powers of 1024).
// Throws std::invalid_argument on anything else.
uint64_t parse_size(const std::string& s);
std::string size_str(uint64_t bytes);  // 65536 -> "64K", 1048576 -> "1M"

struct LatencyStats {
    uint64_t count = 0;
    double p50 = 0, p99 = 0, p999 = 0, max = 0, min = 0, mean = 0;  // microseconds
};
// Nearest-rank percentiles; sorts the samples in place.
LatencyStats summarize(std::vector<double>& samples_us);
nlohmann::json to_json(const LatencyStats& s);

// What the environment says about the sverbs layer: the value of $SVERBS
// ("off", "on", ...), or "default" when unset (the layer is on by default).
std::string sverbs_mode();

// CPU time over an interval: the whole machine's (/proc/stat's first line,
// summed over its CPUs) and this process's own (getrusage), in seconds.
// Soft-RoCE does its protocol in the kernel, partly in the posting system
// call (system), partly in softirq and kernel threads: what a benchmark's
// extra system calls cost shows here, not in its own user time.
struct CpuTimes {
    double user = 0, system = 0, irq = 0, softirq = 0, idle = 0, steal = 0;
    double proc_user = 0, proc_system = 0;
    // the layer's timer thread (named "sverbs-timer"), user + system; 0
    // when the process has none (stock, no budget)
    double timer_thread = 0;
};
// A reading now.  Throws std::runtime_error if /proc/stat cannot be read.
CpuTimes cpu_times();
// b - a, field by field, as JSON (seconds, 3 decimals).
nlohmann::json cpu_json(const CpuTimes& a, const CpuTimes& b);

// Common fields of every result line: bench name, sverbs mode, host name,
// a UTC timestamp.
nlohmann::json run_header(const std::string& bench);

}  // namespace perf
