// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "util.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <numeric>
#include <stdexcept>

namespace perf {

uint64_t parse_size(const std::string& s) {
    size_t pos = 0;
    unsigned long long v = 0;
    try {
        v = std::stoull(s, &pos, 10);
    } catch (const std::exception&) {
        throw std::invalid_argument("not a size: '" + s + "'");
    }
    std::string suf = s.substr(pos);
    for (auto& c : suf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    uint64_t mul = 1;
    if (suf.empty() || suf == "b")
        mul = 1;
    else if (suf == "k" || suf == "kb" || suf == "kib")
        mul = 1ull << 10;
    else if (suf == "m" || suf == "mb" || suf == "mib")
        mul = 1ull << 20;
    else if (suf == "g" || suf == "gb" || suf == "gib")
        mul = 1ull << 30;
    else
        throw std::invalid_argument("bad size suffix in '" + s + "' (use K, M or G)");
    return v * mul;
}

std::string size_str(uint64_t b) {
    if (b && b % (1ull << 30) == 0) return fmt::format("{}G", b >> 30);
    if (b && b % (1ull << 20) == 0) return fmt::format("{}M", b >> 20);
    if (b && b % (1ull << 10) == 0) return fmt::format("{}K", b >> 10);
    return fmt::format("{}", b);
}

LatencyStats summarize(std::vector<double>& v) {
    LatencyStats s;
    s.count = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    auto rank = [&](double q) {
        // nearest rank: the smallest sample with at least q of them at or below it
        size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
        return v[std::clamp<size_t>(r, 1, v.size()) - 1];
    };
    s.p50 = rank(0.50);
    s.p99 = rank(0.99);
    s.p999 = rank(0.999);
    s.min = v.front();
    s.max = v.back();
    s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    return s;
}

nlohmann::json to_json(const LatencyStats& s) {
    auto r = [](double x) { return std::round(x * 100.0) / 100.0; };
    return {{"count", s.count},     {"p50_us", r(s.p50)}, {"p99_us", r(s.p99)},
            {"p999_us", r(s.p999)}, {"max_us", r(s.max)}, {"min_us", r(s.min)},
            {"mean_us", r(s.mean)}};
}

std::string sverbs_mode() {
    const char* v = std::getenv("SVERBS");
    return v && *v ? v : "default";
}

nlohmann::json run_header(const std::string& bench) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::time_t t = std::time(nullptr);
    char ts[32] = {};
    std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return {{"bench", bench}, {"sverbs", sverbs_mode()}, {"host", host}, {"time", ts}};
}

}  // namespace perf
