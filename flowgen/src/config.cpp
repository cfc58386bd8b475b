// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "config.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace flowgen {

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

uint64_t parse_u64(const std::string& s, const std::string& what) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty())
        throw ConfigError(fmt::format("{}: '{}' is not a number", what, s));
    return v;
}

// "3" or "0-7" or "*": an inclusive range.
void parse_range(const std::string& s, uint32_t& lo, uint32_t& hi, const std::string& what) {
    if (s == "*" || s.empty()) {
        lo = 0;
        hi = UINT32_MAX;
        return;
    }
    auto dash = s.find('-');
    if (dash == std::string::npos) {
        lo = hi = static_cast<uint32_t>(parse_u64(s, what));
        return;
    }
    lo = static_cast<uint32_t>(parse_u64(s.substr(0, dash), what));
    hi = static_cast<uint32_t>(parse_u64(s.substr(dash + 1), what));
    if (lo > hi) throw ConfigError(fmt::format("{}: range '{}' is empty", what, s));
}

}  // namespace

Op parse_op(const std::string& s) {
    auto l = lower(s);
    if (l == "write") return Op::Write;
    if (l == "read") return Op::Read;
    if (l == "send") return Op::Send;
    if (l == "write_imm" || l == "write-imm" || l == "writeimm") return Op::WriteImm;
    throw ConfigError(fmt::format("unknown operation '{}' (write, read, send, write_imm)", s));
}

const char* op_name(Op op) {
    switch (op) {
        case Op::Write:
            return "write";
        case Op::Read:
            return "read";
        case Op::Send:
            return "send";
        case Op::WriteImm:
            return "write_imm";
    }
    return "?";
}

uint64_t parse_bytes(const std::string& s) {
    if (s.empty()) throw ConfigError("empty size");
    uint64_t mult = 1;
    std::string num = s;
    switch (std::tolower(static_cast<unsigned char>(s.back()))) {
        case 'k':
            mult = 1ull << 10;
            break;
        case 'm':
            mult = 1ull << 20;
            break;
        case 'g':
            mult = 1ull << 30;
            break;
        default:
            break;
    }
    if (mult != 1) num.pop_back();
    uint64_t v = parse_u64(num, "size");
    if (v > UINT64_MAX / mult) throw ConfigError(fmt::format("size '{}' is too large", s));
    return v * mult;
}

SizeDist SizeDist::parse(const std::string& s) {
    SizeDist d;
    auto colon = s.find(':');
    std::string kind = colon == std::string::npos ? "fixed" : lower(s.substr(0, colon));
    std::string arg = colon == std::string::npos ? s : s.substr(colon + 1);
    if (kind == "fixed") {
        d.kind = Kind::Fixed;
        d.lo = d.hi = parse_bytes(arg);
    } else if (kind == "uniform") {
        d.kind = Kind::Uniform;
        auto dash = arg.find('-');
        if (dash == std::string::npos)
            throw ConfigError(fmt::format("size '{}': uniform needs LO-HI", s));
        d.lo = parse_bytes(arg.substr(0, dash));
        d.hi = parse_bytes(arg.substr(dash + 1));
        if (d.lo > d.hi) throw ConfigError(fmt::format("size '{}': LO > HI", s));
    } else if (kind == "choice") {
        d.kind = Kind::Choice;
        std::stringstream ss(arg);
        std::string item;
        while (std::getline(ss, item, ',')) d.choices.push_back(parse_bytes(item));
        if (d.choices.empty()) throw ConfigError(fmt::format("size '{}': no choices", s));
        d.lo = *std::min_element(d.choices.begin(), d.choices.end());
        d.hi = *std::max_element(d.choices.begin(), d.choices.end());
    } else {
        throw ConfigError(
            fmt::format("size '{}': unknown distribution '{}' (fixed, uniform, choice)", s, kind));
    }
    if (d.lo == 0) throw ConfigError(fmt::format("size '{}': a message of 0 bytes", s));
    return d;
}

uint64_t SizeDist::max() const {
    return hi;
}

double SizeDist::mean() const {
    switch (kind) {
        case Kind::Fixed:
            return static_cast<double>(lo);
        case Kind::Uniform:
            return (static_cast<double>(lo) + static_cast<double>(hi)) / 2;
        case Kind::Choice: {
            double s = 0;
            for (auto c : choices) s += static_cast<double>(c);
            return s / static_cast<double>(choices.size());
        }
    }
    return 0;
}

uint64_t SizeDist::sample(std::mt19937_64& rng) const {
    switch (kind) {
        case Kind::Fixed:
            return lo;
        case Kind::Uniform:
            return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
        case Kind::Choice:
            return choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    }
    return lo;
}

std::string SizeDist::str() const {
    switch (kind) {
        case Kind::Fixed:
            return std::to_string(lo);
        case Kind::Uniform:
            return fmt::format("uniform:{}-{}", lo, hi);
        case Kind::Choice: {
            std::string s = "choice:";
            for (size_t i = 0; i < choices.size(); i++)
                s += (i ? "," : "") + std::to_string(choices[i]);
            return s;
        }
    }
    return "?";
}

namespace {

template <class T>
void toml_get(const toml::table& t, const char* key, T& out, const std::string& where) {
    auto node = t.get(key);
    if (!node) return;
    if constexpr (std::is_same_v<T, std::string>) {
        if (auto v = node->value<std::string>()) {
            out = *v;
            return;
        }
        if (auto v = node->value<int64_t>()) {  // size = 4096
            out = std::to_string(*v);
            return;
        }
    } else if constexpr (std::is_same_v<T, bool>) {
        if (auto v = node->value<bool>()) {
            out = *v;
            return;
        }
    } else if constexpr (std::is_floating_point_v<T>) {
        if (auto v = node->value<double>()) {
            out = static_cast<T>(*v);
            return;
        }
    } else {
        if (auto v = node->value<int64_t>()) {
            if (*v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                static_cast<uint64_t>(*v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
                throw ConfigError(fmt::format("{}: {} = {} is out of range", where, key, *v));
            out = static_cast<T>(*v);
            return;
        }
    }
    throw ConfigError(
        fmt::format("{}: line {}: '{}' has the wrong type", where, node->source().begin.line, key));
}

const char* const kTopKeys[] = {
    "mode",      "device",       "server",    "bind",           "port",          "users",
    "services",  "threads",      "op",        "size",           "depth",         "rate_mbps",
    "prio",      "duration",     "iters",     "connect_window", "drain_timeout", "json",
    "csv",       "label",        "progress",  "quiet",          "alloc",         "alloc_threshold",
    "link_gbps", "user_weights", "flows",     "procs",          "matrix",        "blas_threads",
    "block",     "comm",         "gid_index", "seed",           "verify"};
const char* const kFlowKeys[] = {"users", "services", "op", "size", "depth", "rate_mbps", "prio"};

}  // namespace

void apply_toml(Config& cfg, const std::string& text, const std::string& where) {
    toml::table t;
    try {
        t = toml::parse(text, where);
    } catch (const toml::parse_error& e) {
        throw ConfigError(fmt::format("{}: line {}: {}", where, e.source().begin.line,
                                      std::string(e.description())));
    }
    for (auto&& [k, v] : t) {
        (void)v;
        std::string key(k.str());
        if (std::none_of(std::begin(kTopKeys), std::end(kTopKeys),
                         [&](const char* n) { return key == n; }))
            throw ConfigError(fmt::format("{}: unknown key '{}'", where, key));
    }
    toml_get(t, "mode", cfg.mode, where);
    toml_get(t, "device", cfg.device, where);
    toml_get(t, "server", cfg.server, where);
    toml_get(t, "bind", cfg.bind, where);
    toml_get(t, "port", cfg.port, where);
    toml_get(t, "users", cfg.users, where);
    toml_get(t, "services", cfg.services, where);
    toml_get(t, "threads", cfg.threads, where);
    toml_get(t, "op", cfg.op, where);
    toml_get(t, "size", cfg.size, where);
    toml_get(t, "depth", cfg.depth, where);
    toml_get(t, "rate_mbps", cfg.rate_mbps, where);
    toml_get(t, "prio", cfg.prio, where);
    toml_get(t, "duration", cfg.duration, where);
    toml_get(t, "iters", cfg.iters, where);
    toml_get(t, "connect_window", cfg.connect_window, where);
    toml_get(t, "drain_timeout", cfg.drain_timeout, where);
    toml_get(t, "json", cfg.json, where);
    toml_get(t, "csv", cfg.csv, where);
    toml_get(t, "label", cfg.label, where);
    toml_get(t, "progress", cfg.progress, where);
    toml_get(t, "quiet", cfg.quiet, where);
    toml_get(t, "alloc", cfg.alloc, where);
    toml_get(t, "alloc_threshold", cfg.alloc_threshold, where);
    toml_get(t, "link_gbps", cfg.link_gbps, where);
    toml_get(t, "procs", cfg.procs, where);
    toml_get(t, "matrix", cfg.matrix, where);
    toml_get(t, "blas_threads", cfg.blas_threads, where);
    toml_get(t, "block", cfg.block, where);
    toml_get(t, "comm", cfg.comm, where);
    toml_get(t, "gid_index", cfg.gid_index, where);
    toml_get(t, "seed", cfg.seed, where);
    toml_get(t, "verify", cfg.verify, where);
    if (auto w = t.get("user_weights")) {
        auto arr = w->as_array();
        if (!arr) throw ConfigError(fmt::format("{}: user_weights must be an array", where));
        cfg.user_weights.clear();
        for (auto&& e : *arr) {
            auto d = e.value<double>();
            if (!d) throw ConfigError(fmt::format("{}: user_weights: not a number", where));
            cfg.user_weights.push_back(*d);
        }
    }
    if (auto f = t.get("flows")) {
        auto arr = f->as_array();
        if (!arr || !arr->is_array_of_tables())
            throw ConfigError(fmt::format("{}: flows must be [[flows]] tables", where));
        for (auto&& e : *arr) {
            const auto& ft = *e.as_table();
            for (auto&& [k, v] : ft) {
                (void)v;
                std::string key(k.str());
                if (std::none_of(std::begin(kFlowKeys), std::end(kFlowKeys),
                                 [&](const char* n) { return key == n; }))
                    throw ConfigError(fmt::format("{}: line {}: unknown key '{}' in [[flows]]",
                                                  where, ft.source().begin.line, key));
            }
            Override o;
            std::string users = "*", svcs = "*";
            toml_get(ft, "users", users, where);
            toml_get(ft, "services", svcs, where);
            parse_range(users, o.user_lo, o.user_hi, where + ": [[flows]] users");
            parse_range(svcs, o.svc_lo, o.svc_hi, where + ": [[flows]] services");
            std::string s;
            if (ft.contains("op")) toml_get(ft, "op", o.op.emplace(), where);
            if (ft.contains("size")) toml_get(ft, "size", o.size.emplace(), where);
            if (ft.contains("depth")) toml_get(ft, "depth", o.depth.emplace(), where);
            if (ft.contains("rate_mbps")) toml_get(ft, "rate_mbps", o.rate_mbps.emplace(), where);
            if (ft.contains("prio")) toml_get(ft, "prio", o.prio.emplace(), where);
            cfg.overrides.push_back(o);
        }
    }
}

Config parse_cli(const std::vector<std::string>& args, const Banner& banner) {
    Config cfg;
    // The TOML file first, so that flags override it.
    for (size_t i = 1; i < args.size(); i++) {
        std::string file;
        if ((args[i] == "--config" || args[i] == "-c") && i + 1 < args.size())
            file = args[i + 1];
        else if (args[i].rfind("--config=", 0) == 0)
            file = args[i].substr(9);
        if (file.empty()) continue;
        std::ifstream in(file);
        if (!in) throw ConfigError(fmt::format("cannot read config file '{}'", file));
        std::stringstream ss;
        ss << in.rdbuf();
        apply_toml(cfg, ss.str(), file);
    }
    CLI::App app{banner.name + ": " + banner.what, banner.name};
    std::string config_file, weights;
    app.add_option("-c,--config", config_file, "TOML file (flags override it)");
    app.add_option("--mode", cfg.mode, "client | server | bmr")
        ->check(CLI::IsMember({"client", "server", "bmr"}));
    app.add_option("-d,--device", cfg.device, "RDMA device (checked; default: as routed)");
    app.add_option("-s,--server", cfg.server, "client: server address; server: bind address");
    app.add_option("-b,--bind", cfg.bind, "client: local address");
    app.add_option("-p,--port", cfg.port, "rdma_cm port");
    app.add_option("-u,--users", cfg.users, "users");
    app.add_option("-S,--services", cfg.services, "services per user (flows = users x services)");
    app.add_option("-t,--threads", cfg.threads, "client threads driving the flows");
    app.add_option("-o,--op", cfg.op, "write | read | send | write_imm");
    app.add_option("--size", cfg.size, "bytes: 4096, 64k, uniform:1k-64k, choice:64,4k,64k");
    app.add_option("-D,--depth", cfg.depth, "WRs outstanding per flow");
    app.add_option("-r,--rate-mbps", cfg.rate_mbps, "per-flow open-loop rate (0: closed loop)");
    app.add_option("-P,--prio", cfg.prio, "sverbs priority 0..7 (-1: not stated)");
    app.add_option("-T,--duration", cfg.duration, "seconds");
    app.add_option("-n,--iters", cfg.iters, "ops per flow (ends the run early)");
    app.add_option("--connect-window", cfg.connect_window, "connections set up at once");
    app.add_option("--drain-timeout", cfg.drain_timeout, "seconds to wait for the last WRs");
    app.add_option("--json", cfg.json, "write the results as JSON here");
    app.add_option("--csv", cfg.csv, "write the per-flow results as CSV here");
    app.add_option("--label", cfg.label, "a label carried into the results");
    app.add_flag("--progress,!--no-progress", cfg.progress, "a live progress line on stderr");
    app.add_flag("-q,--quiet", cfg.quiet, "no summary table");
    app.add_option("--alloc", cfg.alloc, "bandwidth allocation: auto | on | off")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    app.add_option("--alloc-threshold", cfg.alloc_threshold, "auto: allocate above these flows");
    app.add_option("--link-gbps", cfg.link_gbps, "the link rate to share (0: the port's)");
    auto* wopt = app.add_option("--user-weights", weights, "comma-separated weight per user");
    app.add_option("--procs", cfg.procs, "bmr: processes (a square)");
    app.add_option("--matrix", cfg.matrix, "bmr: matrix order M");
    app.add_option("--blas-threads", cfg.blas_threads, "bmr: OpenBLAS threads");
    app.add_option("--block", cfg.block, "bmr: dgemm block above which blocks are cut");
    app.add_option("--comm", cfg.comm, "bmr: verbs (RDMA WRITE with immediate) | mpi")
        ->check(CLI::IsMember({"verbs", "mpi"}));
    app.add_option("--gid-index", cfg.gid_index, "bmr: the GID index (RoCE v2) of the QPs");
    app.add_option("--seed", cfg.seed, "bmr: seed of the matrices");
    app.add_flag("--verify,!--no-verify", cfg.verify, "bmr: check C against one dgemm");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::CallForHelp&) {
        throw ExitRequest{0, app.help()};
    } catch (const CLI::ParseError& e) {
        throw ConfigError(e.what());
    }
    if (wopt->count()) {
        cfg.user_weights.clear();
        std::stringstream ss(weights);
        std::string item;
        while (std::getline(ss, item, ',')) {
            try {
                size_t used = 0;
                cfg.user_weights.push_back(std::stod(item, &used));
                if (used != item.size()) throw std::invalid_argument(item);
            } catch (const std::exception&) {
                throw ConfigError(fmt::format("--user-weights: '{}' is not a number", item));
            }
        }
    }
    return cfg;
}

void check(const Config& cfg) {
    if (cfg.mode == "bmr") {
        auto r = static_cast<uint32_t>(std::lround(std::sqrt(static_cast<double>(cfg.procs))));
        if (cfg.procs == 0 || r * r != cfg.procs)
            throw ConfigError(fmt::format(
                "bmr: {} processes do not make a square grid (use 1, 4, 9, 16, ...)", cfg.procs));
        if (cfg.matrix == 0 || cfg.matrix % r != 0)
            throw ConfigError(fmt::format(
                "bmr: matrix order {} is not a multiple of the grid side {}", cfg.matrix, r));
        if (cfg.blas_threads == 0) throw ConfigError("bmr: blas_threads must be at least 1");
        if (cfg.block == 0) throw ConfigError("bmr: block must be at least 1");
        if (cfg.comm != "verbs" && cfg.comm != "mpi")
            throw ConfigError(fmt::format("bmr: comm '{}' is not verbs or mpi", cfg.comm));
        return;
    }
    if (cfg.users == 0 || cfg.services == 0)
        throw ConfigError("users and services must be at least 1");
    if (static_cast<uint64_t>(cfg.users) * cfg.services > UINT32_MAX / 2)
        throw ConfigError("users x services is too large");
    if (cfg.mode == "client") {
        if (cfg.server.empty()) throw ConfigError("client: no --server address");
        if (cfg.threads == 0) throw ConfigError("threads must be at least 1");
        if (cfg.threads > cfg.flows())
            throw ConfigError(fmt::format("{} threads for {} flows: some would have nothing to do",
                                          cfg.threads, cfg.flows()));
        if (cfg.duration <= 0 && cfg.iters == 0)
            throw ConfigError("neither a duration nor a number of iterations");
    }
    if (!cfg.user_weights.empty()) {
        if (cfg.user_weights.size() != cfg.users)
            throw ConfigError(
                fmt::format("{} user weights for {} users", cfg.user_weights.size(), cfg.users));
        for (double w : cfg.user_weights)
            if (!(w > 0)) throw ConfigError("user weights must be positive");
    }
    if (cfg.link_gbps < 0) throw ConfigError("link_gbps must not be negative");
    for (uint32_t u = 0; u < std::min<uint32_t>(cfg.users, 1); u++) flow_spec(cfg, u, 0);
    // every override is parsed once (each flow_spec() call parses what applies)
    for (const auto& o : cfg.overrides) {
        if (o.op) parse_op(*o.op);
        if (o.size) SizeDist::parse(*o.size);
        if (o.depth && *o.depth == 0) throw ConfigError("[[flows]]: depth 0");
        if (o.prio && (*o.prio < -1 || *o.prio > 7))
            throw ConfigError(fmt::format("[[flows]]: priority {} is not in 0..7", *o.prio));
        if (o.rate_mbps && *o.rate_mbps < 0) throw ConfigError("[[flows]]: negative rate");
        if (o.user_lo >= cfg.users && o.user_lo != 0)
            throw ConfigError(
                fmt::format("[[flows]]: user {} does not exist ({} users)", o.user_lo, cfg.users));
        if (o.svc_lo >= cfg.services && o.svc_lo != 0)
            throw ConfigError(fmt::format("[[flows]]: service {} does not exist ({} services)",
                                          o.svc_lo, cfg.services));
    }
}

FlowSpec flow_spec(const Config& cfg, uint32_t user, uint32_t service) {
    FlowSpec f;
    std::string op = cfg.op, size = cfg.size;
    f.depth = cfg.depth;
    f.rate_mbps = cfg.rate_mbps;
    f.prio = cfg.prio;
    for (const auto& o : cfg.overrides) {
        if (user < o.user_lo || user > o.user_hi || service < o.svc_lo || service > o.svc_hi)
            continue;
        if (o.op) op = *o.op;
        if (o.size) size = *o.size;
        if (o.depth) f.depth = *o.depth;
        if (o.rate_mbps) f.rate_mbps = *o.rate_mbps;
        if (o.prio) f.prio = *o.prio;
    }
    f.op = parse_op(op);
    f.size = SizeDist::parse(size);
    if (f.depth == 0) throw ConfigError("depth must be at least 1");
    if (f.prio < -1 || f.prio > 7)
        throw ConfigError(fmt::format("priority {} is not in 0..7 (or -1)", f.prio));
    if (f.rate_mbps < 0) throw ConfigError("negative rate");
    if (f.size.max() > UINT32_MAX)
        throw ConfigError(fmt::format("size {} is above 4 GiB - 1 (one SGE)", f.size.max()));
    return f;
}

void check_limits(const Config& cfg, const DeviceLimits& lim) {
    uint64_t flows = cfg.flows();
    if (lim.max_qp && flows > lim.max_qp)
        throw ConfigError(fmt::format("{} flows need {} QPs but device {} has max_qp {}", flows,
                                      flows, lim.name, lim.max_qp));
    if (lim.max_mr && flows > lim.max_mr)
        throw ConfigError(fmt::format("{} flows need {} MRs but device {} has max_mr {}", flows,
                                      flows, lim.name, lim.max_mr));
    for (uint32_t u = 0; u < cfg.users; u++)
        for (uint32_t s = 0; s < cfg.services; s++) {
            if (!cfg.overrides.empty() || (u == 0 && s == 0)) {
                auto f = flow_spec(cfg, u, s);
                if (lim.max_mr_size && f.size.max() > lim.max_mr_size)
                    throw ConfigError(fmt::format(
                        "flow {}.{}: message size {} is larger than device {}'s max_mr_size {}", u,
                        s, f.size.max(), lim.name, lim.max_mr_size));
                if (lim.max_qp_wr && f.depth > lim.max_qp_wr)
                    throw ConfigError(
                        fmt::format("flow {}.{}: depth {} is above device {}'s "
                                    "max_qp_wr {}",
                                    u, s, f.depth, lim.name, lim.max_qp_wr));
                if (lim.max_cqe && f.depth > lim.max_cqe)
                    throw ConfigError(fmt::format("flow {}.{}: depth {} is above max_cqe {}", u, s,
                                                  f.depth, lim.max_cqe));
            }
        }
}

bool alloc_active(const Config& cfg) {
    if (cfg.alloc == "on") return true;
    if (cfg.alloc == "off") return false;
    return cfg.flows() > cfg.alloc_threshold;
}

Allocation allocate(const Config& cfg, double link_mbps) {
    Allocation a;
    uint32_t n = cfg.flows();
    a.rate_mbps.resize(n);
    a.prio.resize(n);
    std::vector<double> w(cfg.users, 1.0);
    if (!cfg.user_weights.empty()) w = cfg.user_weights;
    double total = 0;
    for (double x : w) total += x * cfg.services;
    // levels by weight rank: distinct weights, heaviest first
    std::vector<double> distinct = w;
    std::sort(distinct.begin(), distinct.end(), std::greater<>());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (uint32_t u = 0; u < cfg.users; u++) {
        auto rank =
            static_cast<int>(std::find(distinct.begin(), distinct.end(), w[u]) - distinct.begin());
        for (uint32_t s = 0; s < cfg.services; s++) {
            uint32_t i = u * cfg.services + s;
            a.rate_mbps[i] = link_mbps * w[u] / total;
            a.prio[i] = distinct.size() > 1 ? std::min(rank, 7) : flow_spec(cfg, u, s).prio;
        }
    }
    return a;
}

}  // namespace flowgen
