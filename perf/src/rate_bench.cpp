// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// rate_bench - message rate of small RDMA WRITEs, and latency at low load.
//
// rate mode (default): --threads T threads, each with its own RC QP pair
// (rxe1 -> rxe0 by default) and its own CQ, post 64 B RDMA WRITEs ONE per
// ibv_post_send() call (or --post-list K per call), unsignaled except every
// --signal-every'th (as perftest's cq_mod), keeping at most --tx-depth
// outstanding.  Reports WRs completed per second (aggregate and per thread).
// The count is exact: the wr_id of a signaled WR is its sequence number, so a
// completion retires every WR up to it.
//
// lat mode (--lat): one QP, post one signaled WRITE, busy-poll its completion,
// repeat; reports p50/p99/p99.9/max of post -> completion, and the polls
// per WR.  --settle-us U sleeps U us after each post before the first poll,
// so that the completion is there when it polls: then each WR costs one
// post and one poll, the same on every side, which is what the instruction
// counts of perf/guest/insns.sh need (the busy-wait's empty polls vary with
// timing); the latency then includes the sleep and means nothing.
//
// --iters N runs a fixed number of WRs per thread instead of a duration (what
// the syscall-counting run of run-rate.sh uses; N = 0 only sets up and tears
// down, for subtracting setup syscalls).
//
// Output: one JSON line on stdout, one human line on stderr.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <latch>
#include <optional>
#include <thread>

#include "util.hpp"
#include "verbs.hpp"

namespace {

using namespace perf;

struct Options {
    std::string dev_a = "rxe1", dev_b = "rxe0";
    int gid_index = 1;
    int port = 1;
    uint32_t threads = 1;
    uint32_t post_list = 1;
    uint32_t signal_every = 16;
    uint32_t tx_depth = 128;
    std::string size = "64";
    double duration_s = 5.0;
    double warmup_s = 0.5;
    int64_t iters = -1;  // per thread; -1: use the duration
    bool lat = false;
    uint32_t settle_us = 0;  // lat: sleep after each post before polling
    bool use_inline = false;
    int prio = -1;  // -1: do not mark
    double stall_s = 30.0;
    std::string label;
};

struct ThreadResult {
    uint64_t wrs = 0;    // completed in the measured window
    uint64_t posts = 0;  // ibv_post_send calls in the measured window
    double seconds = 0;  // measured window
    // thread 0 only: the machine's CPU (/proc/stat, every CPU) from its
    // window's start to when it stops posting, and that interval's length
    std::optional<CpuTimes> cpu0, cpu1;
    double cpu_s = 0;
    std::string error;
};

// One sender QP (+ its CQ) on device A and its peer on device B.
struct Flow {
    Endpoint a, b;
    Buffer src, dst;
    MrPtr src_mr, dst_mr;
    Flow(Device& da, Device& db, const Options& o, uint64_t bytes) : src(bytes), dst(bytes) {
        QpCaps ca{.max_send_wr = o.tx_depth,
                  .max_recv_wr = 1,
                  .max_inline = o.use_inline ? static_cast<uint32_t>(bytes) : 0};
        QpCaps cb{.max_send_wr = 1, .max_recv_wr = 1, .max_inline = 0};
        a = make_rc_endpoint(da, static_cast<int>(o.tx_depth + 16), 0, ca);
        b = make_rc_endpoint(db, 16, 0, cb);
        connect_pair(da, a, db, b);
        src_mr = reg_mr(da, src, IBV_ACCESS_LOCAL_WRITE);
        dst_mr = reg_mr(db, dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        std::memset(src.data(), 0x3c, src.size());
    }
};

class Poster {
  public:
    Poster(Flow& f, const Options& o, uint64_t bytes) : f_(f), o_(o), wrs_(o.post_list) {
        sge_ = {.addr = reinterpret_cast<uintptr_t>(f.src.data()),
                .length = static_cast<uint32_t>(bytes),
                .lkey = f.src_mr->lkey};
        for (size_t i = 0; i < wrs_.size(); i++) {
            ibv_send_wr& w = wrs_[i];
            w = {};
            w.sg_list = &sge_;
            w.num_sge = 1;
            w.opcode = IBV_WR_RDMA_WRITE;
            w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(f.dst.data());
            w.wr.rdma.rkey = f.dst_mr->rkey;
            w.next = i + 1 < wrs_.size() ? &wrs_[i + 1] : nullptr;
        }
        base_flags_ = (o.use_inline ? static_cast<uint32_t>(IBV_SEND_INLINE) : 0u) |
                      (o.prio >= 0 ? static_cast<uint32_t>(SVERBS_PRIO(o.prio)) : 0u);
    }

    // Post WRs number first+1 .. first+K in one call; WR n is signaled when
    // n % signal_every == 0 or force_last_signaled and it is the last one.
    void post(uint64_t first, bool force_last_signaled) {
        for (size_t i = 0; i < wrs_.size(); i++) {
            uint64_t n = first + i + 1;
            bool sig = n % o_.signal_every == 0 || (force_last_signaled && i + 1 == wrs_.size());
            wrs_[i].wr_id = n;
            wrs_[i].send_flags =
                base_flags_ | (sig ? static_cast<uint32_t>(IBV_SEND_SIGNALED) : 0u);
        }
        ibv_send_wr* bad = nullptr;
        if (int rc = ibv_post_send(f_.a.qp.get(), wrs_.data(), &bad); rc != 0)
            throw Error(fmt::format("ibv_post_send({} WRs): {}", wrs_.size(), std::strerror(rc)));
    }

    // Poll; returns the highest WR number known complete so far.
    uint64_t poll(uint64_t done) {
        ibv_wc wc[16];
        int n = ibv_poll_cq(f_.a.cq.get(), 16, wc);
        if (n < 0) throw Error("ibv_poll_cq failed");
        for (int i = 0; i < n; i++) {
            check_wc(wc[i], "RDMA WRITE");
            done = std::max<uint64_t>(done, wc[i].wr_id);
        }
        return done;
    }

  private:
    Flow& f_;
    const Options& o_;
    ibv_sge sge_{};
    std::vector<ibv_send_wr> wrs_;
    uint32_t base_flags_ = 0;
};

// Stream WRITEs on one flow.  Timing starts at the first completion after the
// warm-up; the window ends at the last completion seen.
// Not inlined: perf/guest/insns.sh counts instructions from its entry
// (callgrind --toggle-collect='*rate_thread*').
[[gnu::noinline]] ThreadResult rate_thread(Flow& f, const Options& o, uint64_t bytes,
                                           std::latch& go, bool cpu) {
    ThreadResult r;
    bool arrived = false;
    try {
        Poster p(f, o, bytes);
        const uint64_t K = o.post_list;
        const auto stall = std::chrono::duration<double>(o.stall_s);
        arrived = true;
        go.arrive_and_wait();
        const bool fixed = o.iters >= 0;
        const uint64_t limit = fixed ? static_cast<uint64_t>(o.iters) : UINT64_MAX;
        const TimePoint t0 = Clock::now();
        const TimePoint t_warm = t0 + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(fixed ? 0.0 : o.warmup_s));
        const TimePoint t_stop = t_warm + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(o.duration_s));
        uint64_t posted = 0, done = 0, calls = 0;
        uint64_t done_at_start = 0, calls_at_start = 0;
        bool started = false, stopping = false;
        TimePoint t_start = t0, t_last = t0, last_progress = t0;
        if (fixed) started = true;
        while (true) {
            if (!stopping) {
                while (posted + K <= limit && posted - done + K <= o.tx_depth) {
                    bool last = fixed && posted + 2 * K > limit;  // final call of a fixed run
                    p.post(posted, last);
                    posted += K;
                    calls++;
                }
            }
            uint64_t d = p.poll(done);
            TimePoint now = Clock::now();
            if (d != done) {
                done = d;
                last_progress = now;
                t_last = now;
                if (!started && now >= t_warm) {
                    started = true;
                    t_start = now;
                    done_at_start = done;
                    calls_at_start = calls;
                    if (cpu && !fixed) r.cpu0 = cpu_times();
                }
            } else if (posted != done && now - last_progress > stall) {
                throw Error(fmt::format("no completion for {:.0f} s ({} WRs outstanding)",
                                        o.stall_s, posted - done));
            }
            if (!stopping && (fixed ? posted + K > limit : now >= t_stop)) {
                stopping = true;
                if (r.cpu0) {
                    r.cpu1 = cpu_times();
                    r.cpu_s = s_between(t_start, Clock::now());
                }
            }
            // Unsignaled WRs after the last signaled one are never reported:
            // stop once everything signaled has completed.
            uint64_t last_sig = posted - posted % o.signal_every;
            if (fixed && posted > 0) last_sig = posted;  // its final WR was signaled
            if (stopping && done >= last_sig) break;
        }
        r.wrs = done - done_at_start;
        r.posts = calls - calls_at_start;
        r.seconds = s_between(t_start, t_last);
    } catch (const std::exception& e) {
        r.error = e.what();
        if (!arrived) go.count_down();  // do not leave the others waiting
    }
    return r;
}

int run_rate(const Options& o) {
    const uint64_t bytes = parse_size(o.size);
    if (o.signal_every % o.post_list != 0)
        throw Error(fmt::format("--signal-every ({}) must be a multiple of --post-list ({})",
                                o.signal_every, o.post_list));
    if (o.tx_depth < o.signal_every + o.post_list)
        throw Error(fmt::format("--tx-depth ({}) must be at least --signal-every + --post-list",
                                o.tx_depth));
    Device da = open_device(o.dev_a, static_cast<uint8_t>(o.port), o.gid_index);
    Device db = open_device(o.dev_b, static_cast<uint8_t>(o.port), o.gid_index);
    std::vector<std::unique_ptr<Flow>> flows;
    for (uint32_t i = 0; i < o.threads; i++)
        flows.push_back(std::make_unique<Flow>(da, db, o, bytes));

    std::vector<ThreadResult> res(o.threads);
    {
        std::latch go(o.threads);
        std::vector<std::jthread> th;
        for (uint32_t i = 0; i < o.threads; i++)
            th.emplace_back([&, i] { res[i] = rate_thread(*flows[i], o, bytes, go, i == 0); });
    }
    uint64_t wrs = 0, posts = 0;
    double max_s = 0, sum_rate = 0;
    nlohmann::json per = nlohmann::json::array();
    for (auto& r : res) {
        if (!r.error.empty()) throw Error(r.error);
        wrs += r.wrs;
        posts += r.posts;
        max_s = std::max(max_s, r.seconds);
        double kpps = r.seconds > 0 ? static_cast<double>(r.wrs) / r.seconds / 1e3 : 0;
        sum_rate += kpps;
        per.push_back(std::round(kpps * 100) / 100);
    }
    nlohmann::json j = run_header("rate");
    j["label"] = o.label;
    j["dev_a"] = o.dev_a;
    j["dev_b"] = o.dev_b;
    j["mtu"] = mtu_str(da.active_mtu);
    j["size"] = bytes;
    j["threads"] = o.threads;
    j["post_list"] = o.post_list;
    j["signal_every"] = o.signal_every;
    j["tx_depth"] = o.tx_depth;
    j["inline"] = o.use_inline;
    j["prio"] = o.prio >= 0 ? nlohmann::json(o.prio) : nlohmann::json(nullptr);
    j["iters"] = o.iters;
    j["wrs"] = wrs;
    j["post_calls"] = posts;
    j["seconds"] = std::round(max_s * 1e4) / 1e4;
    j["kpps"] = std::round(sum_rate * 100) / 100;
    j["mpps"] = std::round(sum_rate) / 1e3;
    j["per_thread_kpps"] = per;
    if (res[0].cpu0 && res[0].cpu1 && res[0].cpu_s > 0) {
        // the machine's CPU over thread 0's window; with more threads their
        // windows overlap it, their WRs in it estimated from their rates
        j["cpu"] = cpu_json(*res[0].cpu0, *res[0].cpu1);
        j["cpu"]["interval_s"] = std::round(res[0].cpu_s * 1000.0) / 1000.0;
        j["cpu"]["wrs"] = std::llround(sum_rate * 1e3 * res[0].cpu_s);
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    fmt::print(stderr,
               "rate: sverbs={} threads={} post_list={} signal_every={} size={}: {} WRs in {:.2f} "
               "s -> {:.2f} kpps ({:.4f} Mpps)\n",
               sverbs_mode(), o.threads, o.post_list, o.signal_every, bytes, wrs, max_s, sum_rate,
               sum_rate / 1e3);
    if (o.iters != 0 && wrs == 0) {
        fmt::print(stderr, "rate_bench: error: no WR completed\n");
        return 1;
    }
    return 0;
}

struct LatLoop {
    std::vector<double> lat;  // post -> completion, after the warm-up
    uint64_t wrs = 0, polls = 0;
};

// The lat mode's loop, on its own (not inlined): perf/guest/insns.sh counts
// only it (callgrind --toggle-collect='*lat_loop*'), not the setup nor the
// sort of the samples, whose cost depends on their order.
[[gnu::noinline]] void lat_loop(Poster& p, const Options& o, LatLoop& r) {
    const bool fixed = o.iters >= 0;
    const TimePoint t0 = Clock::now();
    const TimePoint t_warm = t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(fixed ? 0.0 : o.warmup_s));
    const TimePoint t_stop = t_warm + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(o.duration_s));
    const auto stall = std::chrono::duration<double>(o.stall_s);
    for (uint64_t n = 0;; n++) {
        TimePoint ts = Clock::now();
        if (fixed ? n >= static_cast<uint64_t>(o.iters) : ts >= t_stop) break;
        p.post(n, true);
        if (o.settle_us) std::this_thread::sleep_for(std::chrono::microseconds(o.settle_us));
        r.wrs++;
        uint64_t done = n;
        while (done < n + 1) {
            done = p.poll(done);
            r.polls++;
            if (done < n + 1 && Clock::now() - ts > stall)
                throw Error(fmt::format("no completion for {:.0f} s", o.stall_s));
        }
        TimePoint tc = Clock::now();
        if (ts >= t_warm) r.lat.push_back(us_between(ts, tc));
    }
}

int run_lat(const Options& o) {
    const uint64_t bytes = parse_size(o.size);
    Device da = open_device(o.dev_a, static_cast<uint8_t>(o.port), o.gid_index);
    Device db = open_device(o.dev_b, static_cast<uint8_t>(o.port), o.gid_index);
    Options lo = o;
    lo.post_list = 1;
    lo.signal_every = 1;
    Flow f(da, db, lo, bytes);
    Poster p(f, lo, bytes);
    LatLoop r;
    r.lat.reserve(o.iters > 0 ? static_cast<size_t>(o.iters) : 1 << 16);
    lat_loop(p, o, r);
    std::vector<double>& lat = r.lat;
    const uint64_t wrs = r.wrs, polls = r.polls;
    LatencyStats s = summarize(lat);
    nlohmann::json j = run_header("lat");
    j["label"] = o.label;
    j["dev_a"] = o.dev_a;
    j["dev_b"] = o.dev_b;
    j["mtu"] = mtu_str(da.active_mtu);
    j["size"] = bytes;
    j["inline"] = o.use_inline;
    j["prio"] = o.prio >= 0 ? nlohmann::json(o.prio) : nlohmann::json(nullptr);
    j["lat"] = to_json(s);
    j["settle_us"] = o.settle_us;
    j["polls_per_wr"] =
        wrs ? std::round(static_cast<double>(polls) / static_cast<double>(wrs) * 1000) / 1000 : 0.0;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    fmt::print(stderr,
               "lat: sverbs={} size={}: n={} p50={:.1f} p99={:.1f} p99.9={:.1f} max={:.1f} us\n",
               sverbs_mode(), bytes, s.count, s.p50, s.p99, s.p999, s.max);
    if (o.iters != 0 && s.count == 0) {
        fmt::print(stderr, "rate_bench: error: no latency sample\n");
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"rate_bench: small RDMA WRITE message rate (one WR per post) and latency"};
    app.add_option("--dev-a", o.dev_a, "sending device")->capture_default_str();
    app.add_option("--dev-b", o.dev_b, "target device")->capture_default_str();
    app.add_option("--gid-index,-x", o.gid_index, "GID index")->capture_default_str();
    app.add_option("--port", o.port, "port number")->capture_default_str();
    app.add_option("--threads,-T", o.threads, "threads, each with its own QP and CQ")
        ->capture_default_str()
        ->check(CLI::Range(1u, 256u));
    app.add_option("--post-list,-l", o.post_list, "WRs per ibv_post_send call")
        ->capture_default_str()
        ->check(CLI::Range(1u, 4096u));
    app.add_option("--signal-every,-c", o.signal_every, "one signaled WR every N")
        ->capture_default_str()
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--tx-depth", o.tx_depth, "max outstanding WRs per QP (SQ size)")
        ->capture_default_str()
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--size,-s", o.size, "message size")->capture_default_str();
    app.add_option("--duration,-t", o.duration_s, "measured seconds")->capture_default_str();
    app.add_option("--warmup", o.warmup_s, "seconds before measuring")->capture_default_str();
    app.add_option("--iters,-n", o.iters, "fixed WRs per thread instead of a duration");
    app.add_flag("--lat", o.lat, "latency at low load: post one, wait for it, repeat");
    app.add_option("--settle-us", o.settle_us,
                   "--lat: sleep this long after each post before polling (instruction "
                   "counts: one poll per WR; the latency then includes the sleep)")
        ->needs("--lat");
    app.add_flag("--inline", o.use_inline, "IBV_SEND_INLINE");
    app.add_option("--prio", o.prio, "mark WRs with SVERBS_PRIO(n) (default: unmarked)")
        ->check(CLI::Range(0, 7));
    app.add_option("--stall-timeout", o.stall_s, "abort after this many seconds without a CQE")
        ->capture_default_str();
    app.add_option("--label", o.label, "free text copied into the JSON line");
    CLI11_PARSE(app, argc, argv);
    try {
        return o.lat ? run_lat(o) : run_rate(o);
    } catch (const std::exception& e) {
        fmt::print(stderr, "rate_bench: error: {}\n", e.what());
        return 1;
    }
}
