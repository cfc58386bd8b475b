// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "util.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <numeric>
#include <sstream>
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

namespace {

// The CPU (user + system, seconds) of this process's threads named name:
// /proc/self/task/<tid>/comm and the utime and stime of .../stat.
double named_threads_cpu(const std::string& name) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/task"), closedir);
    if (!dir) return 0;
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    double total = 0;
    while (const dirent* d = readdir(dir.get())) {
        if (d->d_name[0] == '.') continue;
        const std::string task = std::string("/proc/self/task/") + d->d_name;
        std::ifstream comm(task + "/comm");
        std::string c;
        if (!std::getline(comm, c) || c != name) continue;
        std::ifstream stat(task + "/stat");
        std::string line;
        if (!std::getline(stat, line)) continue;
        // after "(comm)": state is field 3, utime 14, stime 15
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream in(line.substr(close + 2));
        std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
        if (f.size() < 13) continue;
        total += (std::stod(f[11]) + std::stod(f[12])) / tick;
    }
    return total;
}

}  // namespace

CpuTimes cpu_times() {
    std::ifstream f("/proc/stat");
    std::string line;
    if (!f || !std::getline(f, line) || line.rfind("cpu ", 0) != 0)
        throw std::runtime_error("cannot read the cpu line of /proc/stat");
    // cpu user nice system idle iowait irq softirq steal guest guest_nice
    std::istringstream in(line.substr(4));
    std::vector<double> v;
    for (double x; in >> x;) v.push_back(x);
    if (v.size() < 7) throw std::runtime_error("short cpu line in /proc/stat: " + line);
    v.resize(8, 0);
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    CpuTimes t;
    t.user = (v[0] + v[1]) / tick;
    t.system = v[2] / tick;
    t.idle = (v[3] + v[4]) / tick;
    t.irq = v[5] / tick;
    t.softirq = v[6] / tick;
    t.steal = v[7] / tick;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto sec = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    t.proc_user = sec(ru.ru_utime);
    t.proc_system = sec(ru.ru_stime);
    t.timer_thread = named_threads_cpu("sverbs-timer");
    return t;
}

nlohmann::json cpu_json(const CpuTimes& a, const CpuTimes& b) {
    auto r = [](double x) { return std::round(x * 1000.0) / 1000.0; };
    return {{"user_s", r(b.user - a.user)},
            {"system_s", r(b.system - a.system)},
            {"irq_s", r(b.irq - a.irq)},
            {"softirq_s", r(b.softirq - a.softirq)},
            {"idle_s", r(b.idle - a.idle)},
            {"steal_s", r(b.steal - a.steal)},
            {"proc_user_s", r(b.proc_user - a.proc_user)},
            {"proc_system_s", r(b.proc_system - a.proc_system)},
            {"timer_thread_s", r(b.timer_thread - a.timer_thread)}};
}

}  // namespace perf
