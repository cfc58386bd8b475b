// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flowgen {

double gbps(uint64_t bytes, double seconds) {
    return seconds > 0 ? static_cast<double>(bytes) * 8 / seconds / 1e9 : 0;
}

namespace {

nlohmann::json lat_json(const Histogram& h) {
    return {{"count", h.count()},
            {"p50_us", h.percentile(0.50) / 1e3},
            {"p99_us", h.percentile(0.99) / 1e3},
            {"p999_us", h.percentile(0.999) / 1e3},
            {"mean_us", h.mean() / 1e3},
            {"max_us", h.max() / 1e3}};
}

}  // namespace

nlohmann::json to_json(const RunResult& r) {
    nlohmann::json j;
    Histogram all;
    uint64_t bytes = 0, ops = 0, errors = 0, resets = 0, posted = 0;
    std::vector<double> per_flow;
    std::map<uint32_t, double> per_user;
    for (const auto& f : r.flows) {
        all.merge(f.lat);
        bytes += f.bytes;
        ops += f.ops;
        errors += f.errors;
        resets += f.pace_resets;
        posted += f.posted_bytes;
        per_flow.push_back(gbps(f.bytes, r.seconds));
        per_user[f.user] += gbps(f.bytes, r.seconds);
    }
    std::vector<double> users;
    for (auto& [u, g] : per_user) users.push_back(g);
    j["tool"] = "sverbs-flowgen";
    j["label"] = r.label;
    j["mode"] = r.mode;
    j["device"] = r.device;
    j["users"] = r.users;
    j["services"] = r.services;
    j["flows"] = r.flows.size();
    j["threads"] = r.threads;
    j["seconds"] = r.seconds;
    j["post_seconds"] = r.post_seconds;
    j["connect_seconds"] = r.connect_seconds;
    j["aborted"] = r.aborted;
    if (r.aborted) j["abort_reason"] = r.abort_reason;
    j["alloc"] = {
        {"active", r.alloc}, {"link_mbps", r.link_mbps}, {"user_weights", r.user_weights}};
    j["total"] = {{"bytes", bytes},
                  {"ops", ops},
                  {"errors", errors},
                  {"gbps", gbps(bytes, r.seconds)},
                  {"mb_per_s", r.seconds > 0 ? bytes / r.seconds / 1e6 : 0},
                  {"mops", r.seconds > 0 ? ops / r.seconds / 1e6 : 0},
                  {"offered_gbps", gbps(posted, r.post_seconds)},
                  {"pace_resets", resets},
                  {"lat", lat_json(all)}};
    // the merged latency histogram, for plot-run.py's CDF: [upper edge us, count]
    j["total"]["lat"]["histogram"] = nlohmann::json::array();
    for (auto [upper, n] : all.buckets())
        j["total"]["lat"]["histogram"].push_back({upper / 1e3, n});
    j["jain"] = jain_index(per_flow);
    j["jain_users"] = jain_index(users);
    j["memory"] = {{"rss_per_flow_bytes", r.rss_per_flow},
                   {"sys_per_flow_bytes", r.sys_per_flow},
                   {"rss_before", r.rss_before},
                   {"rss_after", r.rss_after}};
    j["hw_counters"] = r.hw_counters;
    j["udp_sport_rule"] = r.sport_rule;
    j["timeline"] = nlohmann::json::array();
    for (const auto& p : r.timeline)
        j["timeline"].push_back({{"t", p.t}, {"gbps", p.gbps}, {"jain", p.jain}});
    j["per_flow"] = nlohmann::json::array();
    for (const auto& f : r.flows) {
        nlohmann::json fj = {{"id", f.id},
                             {"user", f.user},
                             {"service", f.service},
                             {"op", op_name(f.spec.op)},
                             {"size", f.spec.size.str()},
                             {"depth", f.spec.depth},
                             {"rate_mbps", f.spec.rate_mbps},
                             {"prio", f.spec.prio},
                             {"qpn", f.qpn},
                             {"peer_qpn", f.peer_qpn},
                             {"cm_sport", f.cm_sport},
                             {"udp_sport", f.udp_sport},
                             {"bytes", f.bytes},
                             {"ops", f.ops},
                             {"gbps", gbps(f.bytes, r.seconds)},
                             {"offered_gbps", gbps(f.posted_bytes, r.post_seconds)},
                             {"errors", f.errors},
                             {"pace_resets", f.pace_resets},
                             {"lat", lat_json(f.lat)}};
        if (!f.error.empty()) fj["error"] = f.error;
        j["per_flow"].push_back(std::move(fj));
    }
    return j;
}

std::string to_csv(const RunResult& r) {
    std::string s =
        "id,user,service,op,size,depth,rate_mbps,prio,qpn,peer_qpn,cm_sport,udp_sport,bytes,ops,"
        "gbps,p50_us,p99_us,p999_us,errors,error\n";
    for (const auto& f : r.flows) {
        std::string err = f.error;
        std::replace(err.begin(), err.end(), ',', ';');
        std::replace(err.begin(), err.end(), '"', '\'');
        s += fmt::format(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.3f},{:.3f},{:.3f},{},{}\n", f.id,
            f.user, f.service, op_name(f.spec.op), f.spec.size.str(), f.spec.depth,
            f.spec.rate_mbps, f.spec.prio, f.qpn, f.peer_qpn, f.cm_sport, f.udp_sport, f.bytes,
            f.ops, gbps(f.bytes, r.seconds), f.lat.percentile(0.5) / 1e3,
            f.lat.percentile(0.99) / 1e3, f.lat.percentile(0.999) / 1e3, f.errors, err);
    }
    return s;
}

std::string summary(const RunResult& r) {
    auto j = to_json(r);
    const auto& t = j["total"];
    const auto& l = t["lat"];
    std::vector<double> g;
    for (const auto& f : r.flows) g.push_back(gbps(f.bytes, r.seconds));
    std::sort(g.begin(), g.end());
    auto at = [&](double q) {
        return g.empty() ? 0.0 : g[std::min(g.size() - 1, static_cast<size_t>(q * g.size()))];
    };
    std::string s;
    s += fmt::format(
        "sverbs-flowgen {}{}: {} users x {} services = {} flows, {} threads, {:.2f} s\n", r.device,
        r.label.empty() ? "" : " [" + r.label + "]", r.users, r.services, r.flows.size(), r.threads,
        r.seconds);
    s += fmt::format("  {:<22} {:>14}\n", "total Gbit/s",
                     fmt::format("{:.4f}", t["gbps"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "total MB/s",
                     fmt::format("{:.2f}", t["mb_per_s"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "ops", t["ops"].get<uint64_t>());
    s += fmt::format("  {:<22} {:>14}\n", "errors", t["errors"].get<uint64_t>());
    s += fmt::format("  {:<22} {:>14}\n", "latency p50 us",
                     fmt::format("{:.1f}", l["p50_us"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "latency p99 us",
                     fmt::format("{:.1f}", l["p99_us"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "latency p99.9 us",
                     fmt::format("{:.1f}", l["p999_us"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "per-flow Gbit/s min", fmt::format("{:.4f}", at(0)));
    s += fmt::format("  {:<22} {:>14}\n", "per-flow Gbit/s p50", fmt::format("{:.4f}", at(0.5)));
    s += fmt::format("  {:<22} {:>14}\n", "per-flow Gbit/s max",
                     fmt::format("{:.4f}", g.empty() ? 0.0 : g.back()));
    s += fmt::format("  {:<22} {:>14}\n", "Jain (flows)",
                     fmt::format("{:.4f}", j["jain"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "Jain (users)",
                     fmt::format("{:.4f}", j["jain_users"].get<double>()));
    s += fmt::format("  {:<22} {:>14}\n", "allocation", r.alloc ? "on" : "off");
    s += fmt::format("  {:<22} {:>14}\n", "memory/flow (RSS) KiB",
                     fmt::format("{:.1f}", r.rss_per_flow / 1024));
    s += fmt::format("  {:<22} {:>14}\n", "memory/flow (sys) KiB",
                     fmt::format("{:.1f}", r.sys_per_flow / 1024));
    for (const auto& [k, v] : r.hw_counters)
        if (v) s += fmt::format("  hw {:<19} {:>14}\n", k, v);
    if (r.aborted) s += fmt::format("  ABORTED: {}\n", r.abort_reason);
    return s;
}

}  // namespace flowgen
