// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// hol_bench - head-of-line blocking of small high-priority messages behind a
// stream of large RDMA WRITEs on the SAME RC QP.
//
// One process opens two devices (default rxe1 -> rxe0), makes an RC QP on
// each and connects them directly.  Background: large RDMA WRITEs kept
// --depth deep at SVERBS_PRIO(7), re-posted as they complete.  Foreground:
// small (64 B) RDMA WRITEs or SENDs at SVERBS_PRIO(0), one every
// --interval-us on a fixed (open-loop) schedule, each signaled; latency =
// post -> its completion polled.  One thread busy-polls the sender's CQ and
// dispatches by wr_id.  --baseline drops the background stream.
// --stream-thread: a second thread re-posts the large WRITEs, so that a post
// that blocks (stock rxe sends a WRITE within its unacknowledged-packet limit
// whole inside the call) delays only the stream, not the small messages'
// schedule: what is left is the wait on the wire.
//
// "cpu": the machine's CPU time (/proc/stat) and the process's own
// (getrusage) over the measured window, by kind: on rxe most of what a
// stream costs is the kernel's, in system calls and softirq.  With
// --stream-thread also each thread's CPU time (its thread CPU clock: user
// and system as the kernel charges them to it): which thread the stream's
// protocol work runs on (perf/run-threads.sh).
//
// Output: one JSON line on stdout, one human line on stderr.  Any completion
// with an error status aborts (exit 1) naming the status.
#include <fmt/format.h>
#include <pthread.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <semaphore>
#include <thread>
#include <utility>

#include "util.hpp"
#include "verbs.hpp"

namespace {

using namespace perf;

constexpr uint64_t kLargeTag = 1ull << 63;

struct Options {
    std::string dev_a = "rxe1", dev_b = "rxe0";
    int gid_index = 1;
    int port = 1;
    std::string large_size = "1M";
    uint32_t depth = 2;
    bool baseline = false;
    std::string small_size = "64";
    std::string small_op = "write";
    uint32_t interval_us = 1000;
    double duration_s = 10.0;
    uint64_t count = 0;
    double warmup_s = 0.5;
    int small_prio = 0, large_prio = 7;
    bool no_prio = false;
    uint32_t small_cap = 8192;
    bool inject_error = false;
    bool stream_thread = false;
    bool small_inline = false;
    double stall_s = 30.0;
    int ack_timeout = 14;
    std::string label;
};

struct Result {
    LatencyStats small;
    LatencyStats small_sched;  // from the slot's scheduled time (counts posting delays)
    uint64_t small_posted = 0, small_skipped = 0, late_posts = 0;
    double max_post_lag_us = 0;
    // time spent inside ibv_post_send (on rxe the doorbell syscall runs the
    // kernel's requester, so a post can take long)
    double small_post_max_us = 0, large_post_max_us = 0, large_post_total_s = 0;
    uint64_t large_completed = 0, large_bytes = 0;
    double window_s = 0;
    // CPU over the measured window: from the first pass of the loop after
    // the warm-up to the end of posting (cpu_s: that interval's length)
    CpuTimes cpu0, cpu1;
    double cpu_s = 0;
    // --stream-thread: each thread's CPU over the same window (none when
    // a clock could not be read: the stream thread had ended on an error)
    std::optional<double> poll_thread_s, stream_thread_s;
};

// A thread's CPU time so far, in seconds (its CPU clock); none if unreadable.
static std::optional<double> thread_cpu_s(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return std::nullopt;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// b - a, when both were read.
static std::optional<double> minus(std::optional<double> b, std::optional<double> a) {
    if (!a || !b) return std::nullopt;
    return *b - *a;
}

class HolBench {
  public:
    explicit HolBench(const Options& o)
        : o_(o),
          large_bytes_(o.baseline ? 0 : parse_size(o.large_size)),
          small_bytes_(parse_size(o.small_size)),
          send_op_(o.small_op == "send"),
          da_(open_device(o.dev_a, static_cast<uint8_t>(o.port), o.gid_index)),
          db_(open_device(o.dev_b, static_cast<uint8_t>(o.port), o.gid_index)),
          // one slot per possible outstanding small message, both sides
          small_src_(small_bytes_),
          small_dst_(small_bytes_ * kSlots),
          large_src_(std::max<uint64_t>(large_bytes_, 1)),
          large_dst_(std::max<uint64_t>(large_bytes_, 1)),
          post_time_(o.small_cap),
          sched_time_(o.small_cap) {
        if (small_bytes_ == 0) throw Error("--small-size must be > 0");
        uint32_t sq = o.small_cap + (o.baseline ? 0 : o.depth);
        QpCaps ca{.max_send_wr = sq,
                  .max_recv_wr = 1,
                  .max_inline = o.small_inline ? static_cast<uint32_t>(small_bytes_) : 0};
        QpCaps cb{.max_send_wr = 1, .max_recv_wr = send_op_ ? o.small_cap : 1, .max_inline = 0};
        a_ = make_rc_endpoint(da_, static_cast<int>(sq + 16), 0, ca);
        b_ = make_rc_endpoint(db_, static_cast<int>(cb.max_recv_wr + 16), 0, cb);
        ConnectOpts co;
        co.timeout = static_cast<uint8_t>(o.ack_timeout);
        connect_pair(da_, a_, db_, b_, co);
        const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        small_src_mr_ = reg_mr(da_, small_src_, IBV_ACCESS_LOCAL_WRITE);
        small_dst_mr_ = reg_mr(db_, small_dst_, rw);
        large_src_mr_ = reg_mr(da_, large_src_, IBV_ACCESS_LOCAL_WRITE);
        large_dst_mr_ = reg_mr(db_, large_dst_, rw);
        std::memset(small_src_.data(), 0x5a, small_src_.size());
        std::memset(large_src_.data(), 0xa5, large_src_.size());
        if (send_op_)
            for (uint32_t i = 0; i < o.small_cap; i++) post_recv(i);
    }

    Result run();

    const Device& dev_a() const { return da_; }

  private:
    static constexpr uint32_t kSlots = 64;

    uint32_t prio_flags(int prio) const {
        return o_.no_prio ? 0u : static_cast<uint32_t>(SVERBS_PRIO(prio));
    }

    void post_recv(uint64_t i) {
        ibv_sge sge{
            .addr = reinterpret_cast<uintptr_t>(small_dst_.data()) + (i % kSlots) * small_bytes_,
            .length = static_cast<uint32_t>(small_bytes_),
            .lkey = small_dst_mr_->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_recv(b_.qp.get(), &wr, &bad); rc != 0)
            throw Error(fmt::format("ibv_post_recv: {}", std::strerror(rc)));
    }

    void post_large(uint64_t n) {
        ibv_sge sge{.addr = reinterpret_cast<uintptr_t>(large_src_.data()),
                    .length = static_cast<uint32_t>(large_bytes_),
                    .lkey = large_src_mr_->lkey};
        ibv_send_wr wr{};
        wr.wr_id = kLargeTag | n;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED | prio_flags(o_.large_prio);
        wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(large_dst_.data());
        wr.wr.rdma.rkey = large_dst_mr_->rkey;
        ibv_send_wr* bad = nullptr;
        if (int rc = ibv_post_send(a_.qp.get(), &wr, &bad); rc != 0)
            throw Error(fmt::format("ibv_post_send(large WRITE {}): {}", size_str(large_bytes_),
                                    std::strerror(rc)));
    }

    // a re-post of the stream, its time in the call counted from warm-up on
    // (r's large_post_* fields)
    void post_large_timed(uint64_t n, TimePoint t_warm, Result& r) {
        const TimePoint tp0 = Clock::now();
        post_large(n);
        if (tp0 >= t_warm) {
            const double d = us_between(tp0, Clock::now());
            r.large_post_max_us = std::max(r.large_post_max_us, d);
            r.large_post_total_s += d / 1e6;
        }
    }

    void post_small(uint64_t seq) {
        ibv_sge sge{.addr = reinterpret_cast<uintptr_t>(small_src_.data()),
                    .length = static_cast<uint32_t>(small_bytes_),
                    .lkey = small_src_mr_->lkey};
        ibv_send_wr wr{};
        wr.wr_id = seq;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED | prio_flags(o_.small_prio) |
                        (o_.small_inline ? static_cast<uint32_t>(IBV_SEND_INLINE) : 0u);
        if (send_op_) {
            wr.opcode = IBV_WR_SEND;
        } else {
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma.remote_addr =
                reinterpret_cast<uintptr_t>(small_dst_.data()) + (seq % kSlots) * small_bytes_;
            // --inject-error: a wrong rkey, to exercise the error path
            wr.wr.rdma.rkey = small_dst_mr_->rkey ^ (o_.inject_error ? 0x5a5a00u : 0u);
        }
        ibv_send_wr* bad = nullptr;
        if (int rc = ibv_post_send(a_.qp.get(), &wr, &bad); rc != 0)
            throw Error(fmt::format("ibv_post_send(small {}): {}", o_.small_op, std::strerror(rc)));
    }

    // --stream-thread: the poll loop counts each large completion as due for
    // a re-post (due()); the thread posts them (post_large_timed()).
    // finish() stops it once nothing is due and rethrows its error.
    class Streamer {
      public:
        Streamer(HolBench& b, uint64_t first, TimePoint t_warm, Result& r)
            : b_(b), next_(first), t_warm_(t_warm), r_(r), t_([this] { loop(); }) {}
        Streamer(const Streamer&) = delete;
        Streamer& operator=(const Streamer&) = delete;
        ~Streamer() {
            try {
                finish();
            } catch (...) {  // run() has already failed, or finish() threw
            }
        }
        void due() {
            due_.fetch_add(1);
            wake_.release();
        }
        // its post failed: finish() rethrows why (the poll loop asks each
        // turn, so the error is the post's, not a stall it leads to)
        bool failed() const { return failed_.load(); }
        // its CPU time so far (s); none once it has ended (its error is
        // finish()'s to report)
        std::optional<double> cpu_s() {
            clockid_t c;
            if (pthread_getcpuclockid(t_.native_handle(), &c) != 0) return std::nullopt;
            return thread_cpu_s(c);
        }
        void finish() {
            if (!t_.joinable()) return;
            stop_ = true;
            wake_.release();
            t_.join();
            if (err_) std::rethrow_exception(std::exchange(err_, nullptr));
        }

      private:
        // one wake per due() and one for stop: a wake that finds nothing
        // due can only be the stop's (due() counts before it wakes)
        void loop() {
            try {
                for (;;) {
                    wake_.acquire();
                    if (due_.load() == 0) {
                        if (stop_) return;
                        continue;
                    }
                    due_.fetch_sub(1);
                    b_.post_large_timed(next_++, t_warm_, r_);
                }
            } catch (...) {
                err_ = std::current_exception();
                failed_ = true;
            }
        }
        HolBench& b_;
        uint64_t next_;
        TimePoint t_warm_;
        Result& r_;  // its large_post_* fields: this thread's until finish()
        std::counting_semaphore<1 << 20> wake_{0};
        std::atomic<uint64_t> due_{0};
        std::atomic<bool> stop_{false};
        std::atomic<bool> failed_{false};
        std::exception_ptr err_;
        std::jthread t_;  // last: it starts once the rest is built
    };

    Options o_;
    uint64_t large_bytes_, small_bytes_;
    bool send_op_;
    // declaration order = reverse destruction order: MRs and QPs before PDs
    Device da_, db_;
    Buffer small_src_, small_dst_, large_src_, large_dst_;
    Endpoint a_, b_;
    MrPtr small_src_mr_, small_dst_mr_, large_src_mr_, large_dst_mr_;
    std::vector<TimePoint> post_time_;   // ring indexed by seq % small_cap
    std::vector<TimePoint> sched_time_;  // the open-loop slot each one was posted for
};

Result HolBench::run() {
    Result r;
    std::vector<double> lat, lat_sched;
    const auto interval = std::chrono::microseconds(o_.interval_us);
    const auto stall =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.stall_s));
    lat.reserve(o_.count ? o_.count
                         : static_cast<size_t>(o_.duration_s * 1e6 / o_.interval_us) + 16);

    const TimePoint t0 = Clock::now();
    const TimePoint t_warm = t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o_.warmup_s));
    const TimePoint t_stop = t_warm + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(o_.duration_s));
    std::optional<TimePoint> t_end;  // set when posting stops

    uint64_t large_posted = 0, large_out = 0;
    if (!o_.baseline)
        for (; large_posted < o_.depth; large_posted++, large_out++) post_large(large_posted);
    std::optional<Streamer> streamer;
    if (o_.stream_thread && !o_.baseline) streamer.emplace(*this, large_posted, t_warm, r);

    uint64_t seq = 0, small_out = 0, measured_posted = 0;
    std::optional<TimePoint> t_cpu0;
    TimePoint next_small = t0;
    TimePoint last_progress = t0;
    ibv_wc wc[32];

    for (;;) {
        TimePoint now = Clock::now();
        if (!t_cpu0 && now >= t_warm) {
            r.cpu0 = cpu_times();
            t_cpu0 = now;
            if (streamer) {
                r.poll_thread_s = thread_cpu_s(CLOCK_THREAD_CPUTIME_ID);
                r.stream_thread_s = streamer->cpu_s();
            }
        }
        if (!t_end) {
            bool done = o_.count ? measured_posted >= o_.count : now >= t_stop;
            if (done) {
                t_end = now;
                r.cpu1 = cpu_times();
                r.cpu_s = t_cpu0 ? s_between(*t_cpu0, now) : 0;
                if (streamer && t_cpu0) {
                    r.poll_thread_s = minus(thread_cpu_s(CLOCK_THREAD_CPUTIME_ID), r.poll_thread_s);
                    r.stream_thread_s = minus(streamer->cpu_s(), r.stream_thread_s);
                }
            } else if (now >= next_small) {
                const TimePoint slot = next_small;
                double lag = us_between(slot, now);
                if (now >= t_warm) {
                    r.max_post_lag_us = std::max(r.max_post_lag_us, lag);
                    if (lag > o_.interval_us) r.late_posts++;
                }
                next_small += interval;
                if (small_out >= o_.small_cap) {
                    // every SQ slot we reserved holds an unfinished small message
                    if (now >= t_warm) r.small_skipped++;
                } else {
                    sched_time_[seq % o_.small_cap] = slot;
                    post_time_[seq % o_.small_cap] = Clock::now();
                    post_small(seq);
                    if (now >= t_warm)
                        r.small_post_max_us =
                            std::max(r.small_post_max_us,
                                     us_between(post_time_[seq % o_.small_cap], Clock::now()));
                    if (now >= t_warm) {
                        // mark measured samples: only those posted after warm-up
                        measured_posted++;
                    }
                    seq++;
                    small_out++;
                }
            }
        }

        int n = ibv_poll_cq(a_.cq.get(), 32, wc);
        if (n < 0) throw Error("ibv_poll_cq failed on the sender CQ");
        if (n > 0) {
            TimePoint tc = Clock::now();
            last_progress = tc;
            for (int i = 0; i < n; i++) {
                const ibv_wc& w = wc[i];
                if (w.wr_id & kLargeTag) {
                    check_wc(w, "large RDMA WRITE");
                    large_out--;
                    if (tc > t_warm && (!t_end || tc <= *t_end)) {
                        r.large_completed++;
                        r.large_bytes += large_bytes_;
                    }
                    if (!t_end && streamer) {
                        streamer->due();  // outstanding from now: the thread posts it
                        large_out++;
                    } else if (!t_end) {
                        post_large_timed(large_posted++, t_warm, r);
                        large_out++;
                    }
                } else {
                    check_wc(w, send_op_ ? "small SEND" : "small RDMA WRITE");
                    small_out--;
                    TimePoint tp = post_time_[w.wr_id % o_.small_cap];
                    if (tp >= t_warm && (!t_end || tp < *t_end)) {
                        lat.push_back(us_between(tp, tc));
                        lat_sched.push_back(us_between(sched_time_[w.wr_id % o_.small_cap], tc));
                    }
                }
            }
        }
        if (send_op_) {
            int m = ibv_poll_cq(b_.cq.get(), 32, wc);
            if (m < 0) throw Error("ibv_poll_cq failed on the receiver CQ");
            for (int i = 0; i < m; i++) {
                check_wc(wc[i], "receive (of a small SEND)");
                post_recv(wc[i].wr_id);
            }
        }
        // at the end: posts what is due, then stops; before: a failed post
        if (streamer && (t_end || streamer->failed())) streamer->finish();
        if (t_end && small_out == 0 && large_out == 0) break;
        if ((small_out || large_out) && now - last_progress > stall)
            throw Error(
                fmt::format("no completion for {:.0f} s with {} small and {} large WRs outstanding",
                            o_.stall_s, small_out, large_out));
    }
    r.window_s = s_between(t_warm, *t_end);
    r.small_posted = seq;
    r.small = summarize(lat);
    r.small_sched = summarize(lat_sched);
    return r;
}

int run_main(const Options& o) {
    if (o.small_op != "write" && o.small_op != "send")
        throw Error("--small-op must be write or send");
    HolBench bench(o);
    Result r = bench.run();
    const uint64_t large = o.baseline ? 0 : parse_size(o.large_size);
    const double mbps = r.window_s > 0 ? static_cast<double>(r.large_bytes) / r.window_s / 1e6 : 0;

    nlohmann::json j = run_header("hol");
    j["label"] = o.label;
    j["baseline"] = o.baseline;
    j["dev_a"] = o.dev_a;
    j["dev_b"] = o.dev_b;
    j["gid_index"] = o.gid_index;
    j["mtu"] = mtu_str(bench.dev_a().active_mtu);
    j["large_bytes"] = large;
    j["large_size"] = o.baseline ? "none" : size_str(large);
    j["depth"] = o.baseline ? 0 : o.depth;
    j["small_bytes"] = parse_size(o.small_size);
    j["small_op"] = o.small_op;
    j["small_inline"] = o.small_inline;
    j["prio"] = o.no_prio ? nlohmann::json(nullptr)
                          : nlohmann::json{{"small", o.small_prio}, {"large", o.large_prio}};
    j["interval_us"] = o.interval_us;
    j["stream_thread"] = o.stream_thread;
    j["warmup_s"] = o.warmup_s;
    j["window_s"] = std::round(r.window_s * 1000.0) / 1000.0;
    j["small"] = to_json(r.small);
    j["small"]["posted_total"] = r.small_posted;
    j["small"]["skipped"] = r.small_skipped;
    j["small"]["late_posts"] = r.late_posts;
    j["small"]["max_post_lag_us"] = std::round(r.max_post_lag_us);
    j["small"]["post_call_max_us"] = std::round(r.small_post_max_us);
    j["small_from_schedule"] = to_json(r.small_sched);
    j["large"] = {
        {"completed", r.large_completed},
        {"bytes", r.large_bytes},
        {"mb_per_s", std::round(mbps * 100.0) / 100.0},
        {"post_call_max_us", std::round(r.large_post_max_us)},
        {"post_call_share",
         r.window_s > 0 ? std::round(r.large_post_total_s / r.window_s * 1000) / 1000 : 0.0}};
    j["cpu"] = cpu_json(r.cpu0, r.cpu1);
    j["cpu"]["interval_s"] = std::round(r.cpu_s * 1000.0) / 1000.0;
    if (r.poll_thread_s && r.stream_thread_s) {
        j["cpu"]["poll_thread_s"] = std::round(*r.poll_thread_s * 1000.0) / 1000.0;
        j["cpu"]["stream_thread_s"] = std::round(*r.stream_thread_s * 1000.0) / 1000.0;
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);

    fmt::print(stderr,
               "hol: sverbs={} bg={} small={}B {} every {}us: n={} p50={:.1f} p99={:.1f} "
               "p99.9={:.1f} max={:.1f} us (skipped {}, late {}); large {:.2f} MB/s ({} done)\n",
               sverbs_mode(), o.baseline ? "none" : fmt::format("{}x{}", size_str(large), o.depth),
               parse_size(o.small_size), o.small_op, o.interval_us, r.small.count, r.small.p50,
               r.small.p99, r.small.p999, r.small.max, r.small_skipped, r.late_posts, mbps,
               r.large_completed);
    if (r.small.count == 0) {
        fmt::print(stderr, "hol_bench: error: no small message was measured\n");
        return 1;
    }
    if (r.small_skipped)
        fmt::print(stderr,
                   "hol_bench: warning: {} small messages were not posted because {} were "
                   "already outstanding (--small-cap); latencies are optimistic\n",
                   r.small_skipped, o.small_cap);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"hol_bench: small high-priority RDMA messages behind large WRITEs on one RC QP"};
    app.add_option("--dev-a", o.dev_a, "sending device")->capture_default_str();
    app.add_option("--dev-b", o.dev_b, "target device")->capture_default_str();
    app.add_option("--gid-index,-x", o.gid_index, "GID index (1 = RoCE v2 IPv4 on rxe)")
        ->capture_default_str();
    app.add_option("--port", o.port, "port number")->capture_default_str();
    app.add_option("--large-size,-L", o.large_size, "background WRITE size (64K, 1M, 4M, 16M)")
        ->capture_default_str();
    app.add_option("--depth,-D", o.depth, "background WRITEs kept outstanding")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    app.add_flag("--baseline", o.baseline, "no background stream (unloaded latency)");
    app.add_option("--small-size", o.small_size, "foreground message size")->capture_default_str();
    app.add_option("--small-op", o.small_op, "foreground op: write or send")
        ->capture_default_str()
        ->check(CLI::IsMember({"write", "send"}));
    app.add_flag("--inline", o.small_inline, "post the small messages with IBV_SEND_INLINE");
    app.add_option("--interval-us,-i", o.interval_us, "small message period (open loop)")
        ->capture_default_str()
        ->check(CLI::Range(1u, 10000000u));
    app.add_option("--duration,-t", o.duration_s, "measured seconds (after warm-up)")
        ->capture_default_str();
    app.add_option("--count,-n", o.count, "measured small messages instead of a duration");
    app.add_option("--warmup", o.warmup_s, "seconds before measuring")->capture_default_str();
    app.add_option("--small-prio", o.small_prio, "SVERBS_PRIO of small messages")
        ->capture_default_str()
        ->check(CLI::Range(0, 7));
    app.add_option("--large-prio", o.large_prio, "SVERBS_PRIO of large WRITEs")
        ->capture_default_str()
        ->check(CLI::Range(0, 7));
    app.add_flag("--no-prio", o.no_prio, "do not mark WRs with SVERBS_PRIO (config decides)");
    app.add_option("--small-cap", o.small_cap, "max outstanding small messages (SQ slots)")
        ->capture_default_str()
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--stall-timeout", o.stall_s, "abort after this many seconds without a CQE")
        ->capture_default_str();
    app.add_option("--ack-timeout", o.ack_timeout, "QP local ACK timeout exponent")
        ->capture_default_str()
        ->check(CLI::Range(0, 31));
    app.add_option("--label", o.label, "free text copied into the JSON line");
    app.add_flag("--stream-thread", o.stream_thread,
                 "re-post the large WRITEs from a second thread (a blocking post then "
                 "delays only the stream)");
    app.add_flag("--inject-error", o.inject_error,
                 "post the small WRITEs with a wrong rkey (tests the error path)");
    CLI11_PARSE(app, argc, argv);
    try {
        parse_size(o.large_size);
        parse_size(o.small_size);
        return run_main(o);
    } catch (const std::exception& e) {
        fmt::print(stderr, "hol_bench: error: {}\n", e.what());
        return 1;
    }
}
