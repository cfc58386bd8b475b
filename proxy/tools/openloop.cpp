// sverbs-openloop: open-loop HTTP/1.1 load at a constant offered rate, with coordinated-omission
// correction (what perf/proxy/openloop.py did, at a rate a Python event loop cannot offer).
//
// Requests are scheduled at fixed times: rate R over C keep-alive connections, connection i
// sends its k-th request at t0 + (i + k C) / R.  A request's latency is measured from its
// *scheduled* time, so a stall of the target shows as latency of every request that should
// have left meanwhile (as wrk2 does), not as a lower rate.  No pipelining: a connection with
// a request outstanding holds the next ones until the answer came.  One thread, io_uring
// (the proxy's Ring/StreamConn) and the proxy's HTTP parser.
//
//   sverbs-openloop URL --rate R --duration S [--connections C] [--method M] [--body B]
//                   [--steps "R1:S1,R2:S2"] [--timeout S] [--json F] [--series F]
//
// Prints one JSON line: offered, completed, errors, codes, rate, p50_ms/p99_ms/p99.9_ms;
// --series writes one line per 100 ms window of scheduled time (t_s, completed, p99_ms).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "http.hpp"
#include "uring.hpp"

using namespace sv;

namespace {

struct Step {
    double rate = 0, secs = 0;
};

struct Sample {
    double sched_s = 0;
    double lat_s = -1;  // < 0: error (connection failed, timed out or closed)
    int status = 0;
};

double pct(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return NAN;
    auto i =
        static_cast<long>(std::lround(p / 100.0 * static_cast<double>(sorted.size()) + 0.5)) - 1;
    i = std::clamp<long>(i, 0, static_cast<long>(sorted.size()) - 1);
    return sorted[static_cast<size_t>(i)];
}

class Generator;

// One keep-alive connection and its schedule.
struct Conn final : StreamConn::Events {
    Conn(Generator& g, size_t i)
        : g(g), index(i), parser(HttpParser::Mode::Response, {65536, 1u << 30}) {}
    void on_data(StreamConn&, std::string_view data) override;
    void on_connect(StreamConn&, int err) override;
    void on_closed(StreamConn&) override;

    Generator& g;
    size_t index;
    std::unique_ptr<StreamConn> s;
    HttpParser parser;
    std::deque<double> schedule;  // send times (s after t0) not sent yet
    bool busy = false;            // a request is outstanding
    double sent_sched = 0;        // scheduled time of the outstanding request
    bool dead = false;            // closed: reopen before the next send
};

class Generator {
  public:
    Generator(Ring& ring, SockAddr addr, std::string req, double timeout)
        : ring_(ring), addr_(addr), req_(std::move(req)), timeout_(timeout) {}

    void add_conns(std::vector<std::deque<double>> per) {
        for (size_t i = 0; i < per.size(); ++i) {
            conns_.push_back(std::make_unique<Conn>(*this, i));
            conns_.back()->schedule = std::move(per[i]);
        }
    }

    double now() const { return static_cast<double>(now_ns() - t0_) / 1e9; }

    void run(double total) {
        t0_ = now_ns() + 200 * kMs;
        while (true) {
            double t = now();
            double next = 1e18;
            bool pending = false;
            for (auto& c : conns_) {
                if (c->busy) {
                    pending = true;
                    if (t - c->sent_sched > timeout_)
                        fail(*c);  // latency counted from schedule
                    else
                        next = std::min(next, c->sent_sched + timeout_);
                    continue;
                }
                if (c->s && c->s->closing()) {
                    pending = true;
                    continue;
                }
                if (c->schedule.empty()) continue;
                pending = true;
                if (c->schedule.front() <= t)
                    send(*c);
                else
                    next = std::min(next, c->schedule.front());
            }
            if (!pending || t > total + timeout_ + 1) break;
            double wait = std::clamp(next - now(), 0.0, 0.05);
            ring_.run_once(static_cast<int64_t>(wait * 1e9));
        }
        for (auto& c : conns_) {
            for (double sched : c->schedule) samples.push_back({sched, -1, 0});
            c->schedule.clear();
            if (c->s && !c->s->closing()) c->s->close();
        }
        // Let the closes complete before the Ring goes.
        for (int i = 0; i < 100 && open_ > 0; ++i) ring_.run_once(10 * kMs);
    }

    void send(Conn& c) {
        if (!c.s) {
            c.s = std::make_unique<StreamConn>(ring_, c);
            if (auto st = c.s->connect(addr_); !st) {
                c.s.reset();
                samples.push_back({c.schedule.front(), -1, 0});
                c.schedule.pop_front();
                return;
            }
            open_++;
            c.parser.reset();
        }
        c.sent_sched = c.schedule.front();
        c.schedule.pop_front();
        c.busy = true;
        c.parser.next();
        c.s->out().append(req_);
        c.s->flush();
    }

    void answered(Conn& c, int status) {
        samples.push_back({c.sent_sched, now() - c.sent_sched, status});
        c.busy = false;
    }

    void fail(Conn& c) {
        if (c.busy) samples.push_back({c.sent_sched, -1, 0});
        c.busy = false;
        if (c.s && !c.s->closing()) c.s->close();
    }

    void closed(Conn& c) {
        if (c.busy) samples.push_back({c.sent_sched, -1, 0});
        c.busy = false;
        open_--;
        c.s.reset();
    }

    std::vector<Sample> samples;

  private:
    Ring& ring_;
    SockAddr addr_;
    std::string req_;
    double timeout_;
    int64_t t0_ = 0;
    size_t open_ = 0;
    std::vector<std::unique_ptr<Conn>> conns_;
};

void Conn::on_data(StreamConn&, std::string_view data) {
    if (!busy) {
        g.fail(*this);  // unsolicited bytes
        return;
    }
    auto p = parser.feed(data);
    if (p.state == HttpParser::State::Incomplete) return;
    if (p.state == HttpParser::State::Error) {
        g.fail(*this);
        return;
    }
    g.answered(*this, parser.status);
    if (!parser.keep_alive()) s->close();
}

void Conn::on_connect(StreamConn&, int err) {
    if (err) g.fail(*this);
}

void Conn::on_closed(StreamConn&) {
    g.closed(*this);
}

// steps -> per-connection send times; returns the schedule's length in seconds.
double build_schedule(const std::vector<Step>& steps, size_t conns,
                      std::vector<std::deque<double>>& per) {
    per.assign(conns, {});
    double t = 0;
    size_t k = 0;
    for (const auto& st : steps) {
        auto n = static_cast<size_t>(st.rate * st.secs);
        for (size_t j = 0; j < n; ++j, ++k)
            per[k % conns].push_back(t + static_cast<double>(j) / st.rate);
        t += st.secs;
    }
    return t;
}

Result<std::vector<Step>> parse_steps(const std::string& s) {
    std::vector<Step> out;
    size_t at = 0;
    while (at < s.size()) {
        size_t comma = s.find(',', at);
        std::string part =
            s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        Step st;
        if (std::sscanf(part.c_str(), "%lf:%lf", &st.rate, &st.secs) != 2 || st.rate <= 0 ||
            st.secs <= 0)
            return make_error(fmt::format("--steps: '{}' is not RATE:SECONDS", part));
        out.push_back(st);
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"sverbs-openloop: open-loop HTTP/1.1 load, coordinated-omission corrected"};
    std::string url, method = "GET", body, steps_s, json_path, series_path;
    double rate = 100, duration = 5, timeout = 10;
    size_t conns = 16;
    app.add_option("url", url, "http://host:port/path")->required();
    app.add_option("--rate", rate, "requests per second")->capture_default_str();
    app.add_option("--duration", duration, "seconds")->capture_default_str();
    app.add_option("--steps", steps_s, "RATE:SECONDS,... (instead of --rate/--duration)");
    app.add_option("--connections", conns, "keep-alive connections")
        ->check(CLI::Range(size_t{1}, size_t{100000}))
        ->capture_default_str();
    app.add_option("--method", method)->capture_default_str();
    app.add_option("--body", body);
    app.add_option("--timeout", timeout, "seconds an answer may take")->capture_default_str();
    app.add_option("--json", json_path, "also write the summary here");
    app.add_option("--series", series_path, "per-100-ms CSV (t_s,completed,p99_ms)");
    CLI11_PARSE(app, argc, argv);

    if (!url.starts_with("http://")) {
        fmt::print(stderr, "sverbs-openloop: only http:// URLs\n");
        return 2;
    }
    std::string rest = url.substr(7);
    auto slash = rest.find('/');
    std::string hostport = rest.substr(0, slash);
    std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (hostport.find(':') == std::string::npos) hostport += ":80";
    auto ep = parse_endpoint(hostport);
    if (!ep) {
        fmt::print(stderr, "sverbs-openloop: {}\n", ep.error().message);
        return 2;
    }
    auto addr = resolve(ep.value());
    if (!addr) {
        fmt::print(stderr, "sverbs-openloop: {} (numeric addresses only)\n", addr.error().message);
        return 2;
    }
    std::vector<Step> steps{{rate, duration}};
    if (!steps_s.empty()) {
        auto s = parse_steps(steps_s);
        if (!s) {
            fmt::print(stderr, "sverbs-openloop: {}\n", s.error().message);
            return 2;
        }
        steps = std::move(s.value());
    }
    std::string req = fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\n", method, target, hostport);
    if (!body.empty() || method == "POST" || method == "PUT")
        req += fmt::format("Content-Length: {}\r\n", body.size());
    req += "\r\n" + body;

    Ring ring;
    if (auto st = ring.init(4096, 1024, 16384); !st) {
        fmt::print(stderr, "sverbs-openloop: {}\n", st.error().message);
        return 1;
    }
    std::vector<std::deque<double>> per;
    const double total = build_schedule(steps, conns, per);
    uint64_t offered = 0;
    for (auto& p : per) offered += p.size();
    std::vector<Sample> samples;
    {
        Generator g(ring, addr.value(), req, timeout);
        g.add_conns(std::move(per));
        g.run(total);
        samples = std::move(g.samples);
    }
    ring.shutdown();

    std::vector<double> ok;
    std::map<int, uint64_t> codes;
    uint64_t errors = 0;
    for (const auto& s : samples) {
        codes[s.status]++;
        if (s.lat_s < 0)
            errors++;
        else if (s.status >= 200 && s.status < 300)
            ok.push_back(s.lat_s);
    }
    std::sort(ok.begin(), ok.end());
    nlohmann::json out;
    out["url"] = url;
    out["offered"] = offered;
    out["seconds"] = total;
    out["connections"] = conns;
    out["completed"] = samples.size() - errors;
    out["errors"] = errors;
    nlohmann::json jc = nlohmann::json::object();
    for (auto& [k, v] : codes) jc[std::to_string(k)] = v;
    out["codes"] = jc;
    out["rate"] = total > 0 ? static_cast<double>(samples.size() - errors) / total : 0.0;
    out["p50_ms"] = pct(ok, 50) * 1e3;
    out["p99_ms"] = pct(ok, 99) * 1e3;
    out["p999_ms"] = pct(ok, 99.9) * 1e3;
    std::string line = out.dump();
    fmt::print("{}\n", line);
    if (!json_path.empty()) {
        if (FILE* f = std::fopen(json_path.c_str(), "w")) {
            std::fputs(line.c_str(), f);
            std::fclose(f);
        }
    }
    if (!series_path.empty()) {
        std::map<long, std::vector<double>> win;
        for (const auto& s : samples)
            win[static_cast<long>(s.sched_s * 10)].push_back(s.lat_s < 0 ? INFINITY : s.lat_s);
        if (FILE* f = std::fopen(series_path.c_str(), "w")) {
            std::fputs("t_s,completed,p99_ms\n", f);
            for (auto& [w, v] : win) {
                std::sort(v.begin(), v.end());
                fmt::print(f, "{:.1f},{},{:.3f}\n", static_cast<double>(w) / 10, v.size(),
                           pct(v, 99) * 1e3);
            }
            std::fclose(f);
        }
    }
    return errors == 0 ? 0 : 1;
}
