#include "metrics.hpp"

#include <fmt/format.h>

#include <map>

#include "transport.hpp"

namespace sv {

MetricsRegistry& metrics_registry() {
    static MetricsRegistry r;
    return r;
}

WorkerMetrics& MetricsRegistry::add_worker(std::string role, int index) {
    std::lock_guard lk(mu_);
    workers_.push_back(std::make_unique<WorkerMetrics>());
    workers_.back()->role = std::move(role);
    workers_.back()->worker = index;
    return *workers_.back();
}

namespace {

template <size_t N>
struct HistSum {
    std::array<uint64_t, N + 1> b{};
    uint64_t count = 0;
    double sum = 0;
    void add(const Histogram<N>& h) {
        for (size_t i = 0; i <= N; ++i) b[i] += h.buckets[i].get();
        count += h.count.get();
        sum += h.sum.load(std::memory_order_relaxed);
    }
};

template <size_t N>
void render_hist(std::string& out, const char* name, const std::string& labels,
                 const std::array<double, N>& bounds, const HistSum<N>& h) {
    uint64_t cum = 0;
    std::string sep = labels.empty() ? "" : ",";
    for (size_t i = 0; i < N; ++i) {
        cum += h.b[i];
        out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, bounds[i], cum);
    }
    cum += h.b[N];
    out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, cum);
    out += fmt::format("{}_sum{{{}}} {}\n", name, labels, h.sum);
    out += fmt::format("{}_count{{{}}} {}\n", name, labels, h.count);
}

}  // namespace

std::string MetricsRegistry::render() const {
    std::lock_guard lk(mu_);
    std::string o;
    o.reserve(16384);
    std::map<std::string, std::array<uint64_t, 600>> status;
    std::map<std::string, uint64_t> req, acc, rej, tmo, bad, svc_req, svc_err, svc_retry, svc_wr,
        svc_batch;
    std::map<std::string, int64_t> open, inflight, svc_conns, svc_queue;
    for (auto& w : workers_) {
        auto& s = status[w->role];
        for (size_t i = 0; i < 600; ++i) s[i] += w->status[i].get();
        req[w->role] += w->requests.get();
        acc[w->role] += w->connections_accepted.get();
        rej[w->role] += w->admission_rejects.get();
        tmo[w->role] += w->timeouts.get();
        bad[w->role] += w->bad_requests.get();
        open[w->role] += w->connections_open.get();
        inflight[w->role] += w->inflight.get();
        svc_req[w->role] += w->service_requests.get();
        svc_err[w->role] += w->service_errors.get();
        svc_retry[w->role] += w->service_retries.get();
        svc_wr[w->role] += w->service_writes.get();
        svc_batch[w->role] += w->service_batches.get();
        svc_conns[w->role] += w->service_connections.get();
        svc_queue[w->role] += w->service_queue.get();
    }
    auto emit = [&](const char* name, const char* type, const char* help, auto& m) {
        o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
        for (auto& [role, v] : m) o += fmt::format("{}{{role=\"{}\"}} {}\n", name, role, v);
    };
    emit("sverbs_proxy_requests_total", "counter",
         "HTTP requests received (ingress) or forwarded (egress).", req);
    o += "# HELP sverbs_proxy_responses_total Responses by HTTP status.\n# TYPE "
         "sverbs_proxy_responses_total counter\n";
    for (auto& [role, s] : status)
        for (size_t i = 0; i < 600; ++i)
            if (s[i])
                o += fmt::format("sverbs_proxy_responses_total{{role=\"{}\",code=\"{}\"}} {}\n",
                                 role, i, s[i]);
    emit("sverbs_proxy_connections_accepted_total", "counter", "Client connections accepted.", acc);
    emit("sverbs_proxy_connections_open", "gauge", "Client connections open.", open);
    emit("sverbs_proxy_admission_rejects_total", "counter",
         "Requests refused with 503 (admission limit).", rej);
    emit("sverbs_proxy_timeouts_total", "counter", "Client or upstream timeouts.", tmo);
    emit("sverbs_proxy_bad_requests_total", "counter", "Malformed or oversized requests.", bad);
    emit("sverbs_proxy_inflight_requests", "gauge", "Requests queued or in flight.", inflight);
    emit("sverbs_proxy_service_requests_total", "counter",
         "Requests sent to the compute service (egress).", svc_req);
    emit("sverbs_proxy_service_errors_total", "counter", "Service connection failures (egress).",
         svc_err);
    emit("sverbs_proxy_service_retries_total", "counter",
         "Requests retried on a fresh service connection.", svc_retry);
    emit("sverbs_proxy_service_writes_total", "counter",
         "Writes of requests to the service (egress); requests / writes = pipelining depth.",
         svc_wr);
    emit("sverbs_proxy_service_batches_total", "counter",
         "Batch requests to the service's batch endpoint (egress, batch_path).", svc_batch);
    emit("sverbs_proxy_service_connections", "gauge", "Open connections to the service (egress).",
         svc_conns);
    emit("sverbs_proxy_service_queue", "gauge",
         "Requests waiting for a service connection (egress).", svc_queue);

    // Per upstream (ingress), summed over workers; batching state per worker.
    std::map<std::string, HistSum<11>> bs;
    std::map<std::string, HistSum<14>> qd, lat;
    std::map<std::string, std::array<uint64_t, 4>> uc;
    for (auto& w : workers_)
        for (auto& u : w->upstreams) {
            bs[u.name].add(u.batch_size);
            qd[u.name].add(u.queue_delay);
            lat[u.name].add(u.latency);
            auto& a = uc[u.name];
            a[0] += u.requests.get();
            a[1] += u.responses.get();
            a[2] += u.failures.get();
            a[3] += u.batches.get();
        }
    if (!uc.empty()) {
        o += "# HELP sverbs_proxy_upstream_requests_total Requests routed to the upstream.\n# TYPE "
             "sverbs_proxy_upstream_requests_total counter\n";
        for (auto& [n, a] : uc)
            o += fmt::format("sverbs_proxy_upstream_requests_total{{upstream=\"{}\"}} {}\n", n,
                             a[0]);
        o += "# HELP sverbs_proxy_upstream_responses_total Responses received from the channel.\n# "
             "TYPE sverbs_proxy_upstream_responses_total counter\n";
        for (auto& [n, a] : uc)
            o += fmt::format("sverbs_proxy_upstream_responses_total{{upstream=\"{}\"}} {}\n", n,
                             a[1]);
        o += "# HELP sverbs_proxy_upstream_failures_total Requests answered locally with "
             "502/504.\n# TYPE sverbs_proxy_upstream_failures_total counter\n";
        for (auto& [n, a] : uc)
            o += fmt::format("sverbs_proxy_upstream_failures_total{{upstream=\"{}\"}} {}\n", n,
                             a[2]);
        o += "# HELP sverbs_proxy_batches_total Batches sent.\n# TYPE sverbs_proxy_batches_total "
             "counter\n";
        for (auto& [n, a] : uc)
            o += fmt::format("sverbs_proxy_batches_total{{upstream=\"{}\"}} {}\n", n, a[3]);
        o += "# HELP sverbs_proxy_batch_size Requests per batch.\n# TYPE sverbs_proxy_batch_size "
             "histogram\n";
        for (auto& [n, h] : bs)
            render_hist(o, "sverbs_proxy_batch_size", fmt::format("upstream=\"{}\"", n),
                        kBatchBuckets, h);
        o += "# HELP sverbs_proxy_queue_delay_seconds Time from arrival until the request's batch "
             "left.\n# TYPE sverbs_proxy_queue_delay_seconds histogram\n";
        for (auto& [n, h] : qd)
            render_hist(o, "sverbs_proxy_queue_delay_seconds", fmt::format("upstream=\"{}\"", n),
                        kDelayBuckets, h);
        o += "# HELP sverbs_proxy_request_duration_seconds Time from arrival until the response "
             "was ready.\n# TYPE sverbs_proxy_request_duration_seconds histogram\n";
        for (auto& [n, h] : lat)
            render_hist(o, "sverbs_proxy_request_duration_seconds",
                        fmt::format("upstream=\"{}\"", n), kLatencyBuckets, h);
        o += "# HELP sverbs_proxy_batch_size_target Adaptive batch size target.\n# TYPE "
             "sverbs_proxy_batch_size_target gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o += fmt::format(
                    "sverbs_proxy_batch_size_target{{upstream=\"{}\",worker=\"{}\"}} {}\n", u.name,
                    w->worker, u.size_target.get());
        o += "# HELP sverbs_proxy_slo_shed_total Requests answered 503 because the SLO model "
             "predicted they would miss the target.\n# TYPE sverbs_proxy_slo_shed_total counter\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o +=
                    fmt::format("sverbs_proxy_slo_shed_total{{upstream=\"{}\",worker=\"{}\"}} {}\n",
                                u.name, w->worker, u.shed.get());
        o += "# HELP sverbs_proxy_slo_model Batch service time model S(b) = alpha + beta b "
             "(seconds) and arrival rate (1/s).\n# TYPE sverbs_proxy_slo_model gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o += fmt::format(
                    "sverbs_proxy_slo_model{{upstream=\"{0}\",worker=\"{1}\",param=\"alpha\"}} "
                    "{2}\n"
                    "sverbs_proxy_slo_model{{upstream=\"{0}\",worker=\"{1}\",param=\"beta\"}} {3}\n"
                    "sverbs_proxy_slo_model{{upstream=\"{0}\",worker=\"{1}\",param=\"rate\"}} "
                    "{4}\n",
                    u.name, w->worker, u.model_alpha_ns.get() / 1e9, u.model_beta_ns.get() / 1e9,
                    u.model_rate.get());
        o += "# HELP sverbs_proxy_batch_delay_budget_seconds Adaptive batching delay budget.\n# "
             "TYPE sverbs_proxy_batch_delay_budget_seconds gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o += fmt::format(
                    "sverbs_proxy_batch_delay_budget_seconds{{upstream=\"{}\",worker=\"{}\"}} {}\n",
                    u.name, w->worker, u.delay_budget_ns.get() / 1e9);
        o += "# HELP sverbs_proxy_batch_window_p99_seconds p99 latency of the last adaptation "
             "window.\n# TYPE sverbs_proxy_batch_window_p99_seconds gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o += fmt::format(
                    "sverbs_proxy_batch_window_p99_seconds{{upstream=\"{}\",worker=\"{}\"}} {}\n",
                    u.name, w->worker, u.last_p99_ns.get() / 1e9);
        o += "# HELP sverbs_proxy_batch_adjustments_total Adaptation decisions.\n# TYPE "
             "sverbs_proxy_batch_adjustments_total counter\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams) {
                o += fmt::format(
                    "sverbs_proxy_batch_adjustments_total{{upstream=\"{}\",worker=\"{}\",direction="
                    "\"up\"}} {}\n",
                    u.name, w->worker, u.increases.get());
                o += fmt::format(
                    "sverbs_proxy_batch_adjustments_total{{upstream=\"{}\",worker=\"{}\",direction="
                    "\"down\"}} {}\n",
                    u.name, w->worker, u.decreases.get());
            }
        o += "# HELP sverbs_proxy_upstream_queued Requests waiting for a batch.\n# TYPE "
             "sverbs_proxy_upstream_queued gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                o += fmt::format(
                    "sverbs_proxy_upstream_queued{{upstream=\"{}\",worker=\"{}\"}} {}\n", u.name,
                    w->worker, u.queued.get());
        o += "# HELP sverbs_proxy_upstream_priority sverbs priority level used for the upstream (0 "
             "highest).\n# TYPE sverbs_proxy_upstream_priority gauge\n";
        for (auto& w : workers_)
            for (auto& u : w->upstreams)
                if (w->worker == 0)
                    o += fmt::format("sverbs_proxy_upstream_priority{{upstream=\"{}\"}} {}\n",
                                     u.name, u.priority.get());
    }

    // Copies of request and answer bytes on the RDMA path, by stage (CopyStage).
    bool rdma = false;
    for (auto& w : workers_) rdma = rdma || w->rdma;
    if (rdma) {
        static const char* const stages[] = {"parse", "frame", "deliver"};
        std::string c =
            "# HELP sverbs_proxy_rdma_copies_total RDMA path: user-space copies of "
            "request and answer bytes, by stage.\n# TYPE sverbs_proxy_rdma_copies_total "
            "counter\n";
        std::string b =
            "# HELP sverbs_proxy_rdma_copy_bytes_total RDMA path: bytes copied, by "
            "stage.\n# TYPE sverbs_proxy_rdma_copy_bytes_total counter\n";
        auto line = [&](const WorkerMetrics& w, const char* st, uint64_t n, uint64_t bytes) {
            auto lab =
                fmt::format("{{role=\"{}\",worker=\"{}\",stage=\"{}\"}}", w.role, w.worker, st);
            c += fmt::format("sverbs_proxy_rdma_copies_total{} {}\n", lab, n);
            b += fmt::format("sverbs_proxy_rdma_copy_bytes_total{} {}\n", lab, bytes);
        };
        for (auto& w : workers_) {
            if (!w->rdma) continue;
            for (size_t i = 0; i < std::size(stages); ++i)
                line(*w, stages[i], w->copies[i].get(), w->copy_bytes[i].get());
            uint64_t rc = 0, rb = 0, ic = 0, ib = 0;
            for (auto& ch : w->channels) {
                rc += ch.copies.get();
                rb += ch.copied_bytes.get();
                ic += ch.inline_sends.get();
                ib += ch.inline_bytes.get();
            }
            line(*w, "registered", rc, rb);
            line(*w, "inline", ic, ib);
        }
        o += c;
        o += b;
    }

    // Channels.
    bool any = false;
    for (auto& w : workers_) any = any || !w->channels.empty();
    if (any) {
        struct Def {
            const char* name;
            const char* type;
            const char* help;
            uint64_t (*get)(const ChannelMetrics&);
        };
        static const Def defs[] = {
            {"sverbs_proxy_channel_up", "gauge", "Channel connected and handshaken.",
             [](const ChannelMetrics& c) { return static_cast<uint64_t>(c.up.get()); }},
            {"sverbs_proxy_channel_credits_available", "gauge", "Send credits left.",
             [](const ChannelMetrics& c) {
                 return static_cast<uint64_t>(c.credits_available.get());
             }},
            {"sverbs_proxy_channel_credits_owed", "gauge", "Receive credits not yet returned.",
             [](const ChannelMetrics& c) { return static_cast<uint64_t>(c.credits_owed.get()); }},
            {"sverbs_proxy_channel_bytes_sent_total", "counter", "Bytes sent on the channel.",
             [](const ChannelMetrics& c) { return c.bytes_tx.get(); }},
            {"sverbs_proxy_channel_bytes_received_total", "counter",
             "Bytes received on the channel.",
             [](const ChannelMetrics& c) { return c.bytes_rx.get(); }},
            {"sverbs_proxy_channel_frames_sent_total", "counter", "Frames sent.",
             [](const ChannelMetrics& c) { return c.frames_tx.get(); }},
            {"sverbs_proxy_channel_frames_received_total", "counter", "Frames received.",
             [](const ChannelMetrics& c) { return c.frames_rx.get(); }},
            {"sverbs_proxy_channel_credit_stalls_total", "counter",
             "Sends deferred for lack of credit.",
             [](const ChannelMetrics& c) { return c.credit_stalls.get(); }},
            {"sverbs_proxy_channel_connects_total", "counter", "Successful (re)connections.",
             [](const ChannelMetrics& c) { return c.connects.get(); }},
            {"sverbs_proxy_channel_disconnects_total", "counter", "Connections lost.",
             [](const ChannelMetrics& c) { return c.disconnects.get(); }},
            {"sverbs_proxy_channel_large_frames_total", "counter",
             "Frames sent by RDMA WRITE WITH IMM.",
             [](const ChannelMetrics& c) { return c.large_frames.get(); }},
            {"sverbs_proxy_channel_ring_probes_total", "counter",
             "RDMA: Pings sent at once because a large frame found no room in the peer's "
             "ring (the peer returns what it owes).",
             [](const ChannelMetrics& c) { return c.ring_probes.get(); }},
            {"sverbs_proxy_channel_send_posts_total", "counter",
             "RDMA: ibv_post_send calls (a system call each on rxe).",
             [](const ChannelMetrics& c) { return c.send_posts.get(); }},
            {"sverbs_proxy_channel_signaled_total", "counter",
             "RDMA: send WRs that asked for a completion.",
             [](const ChannelMetrics& c) { return c.signaled.get(); }},
            {"sverbs_proxy_channel_inline_total", "counter",
             "RDMA: SENDs posted inline (not copied into a registered send slot).",
             [](const ChannelMetrics& c) { return c.inline_sends.get(); }},
            {"sverbs_proxy_channel_copies_total", "counter",
             "RDMA: frames copied into registered send memory.",
             [](const ChannelMetrics& c) { return c.copies.get(); }},
            {"sverbs_proxy_channel_copied_bytes_total", "counter",
             "RDMA: bytes copied into registered send memory.",
             [](const ChannelMetrics& c) { return c.copied_bytes.get(); }},
            {"sverbs_proxy_channel_recv_posts_total", "counter", "RDMA: ibv_post_recv calls.",
             [](const ChannelMetrics& c) { return c.recv_posts.get(); }},
            {"sverbs_proxy_channel_cq_polls_total", "counter", "RDMA: ibv_poll_cq calls.",
             [](const ChannelMetrics& c) { return c.cq_polls.get(); }},
            {"sverbs_proxy_channel_cq_events_total", "counter",
             "RDMA: completion-channel wake-ups (a read and an ibv_req_notify_cq each).",
             [](const ChannelMetrics& c) { return c.cq_events.get(); }},
        };
        for (auto& d : defs) {
            o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", d.name, d.help, d.name, d.type);
            for (auto& w : workers_)
                for (auto& c : w->channels)
                    o += fmt::format(
                        "{}{{role=\"{}\",worker=\"{}\",peer=\"{}\",transport=\"{}\"}} {}\n", d.name,
                        w->role, w->worker, c.peer, c.transport, d.get(c));
        }
    }
    return o;
}

void ChannelMetrics::store(const ChannelStats& s) {
    constexpr auto r = std::memory_order_relaxed;
    bytes_tx.v.store(s.bytes_tx, r);
    bytes_rx.v.store(s.bytes_rx, r);
    frames_tx.v.store(s.frames_tx, r);
    frames_rx.v.store(s.frames_rx, r);
    credit_stalls.v.store(s.credit_stalls, r);
    connects.v.store(s.connects, r);
    disconnects.v.store(s.disconnects, r);
    large_frames.v.store(s.large_frames, r);
    ring_probes.v.store(s.ring_probes, r);
    send_posts.v.store(s.send_posts, r);
    signaled.v.store(s.signaled, r);
    inline_sends.v.store(s.inline_sends, r);
    inline_bytes.v.store(s.inline_bytes, r);
    copies.v.store(s.copies, r);
    copied_bytes.v.store(s.copied_bytes, r);
    recv_posts.v.store(s.recv_posts, r);
    cq_polls.v.store(s.cq_polls, r);
    cq_events.v.store(s.cq_events, r);
}

}  // namespace sv
