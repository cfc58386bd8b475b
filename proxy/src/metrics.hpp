// Prometheus text-format metrics.  Each worker thread owns its counters (single writer,
// relaxed atomics, no locked instructions on the hot path); a scrape sums over workers.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sv {

struct Counter {
    std::atomic<uint64_t> v{0};
    void inc(uint64_t n = 1) {
        v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

struct Gauge {
    std::atomic<int64_t> v{0};
    void set(int64_t x) { v.store(x, std::memory_order_relaxed); }
    void add(int64_t x) {
        v.store(v.load(std::memory_order_relaxed) + x, std::memory_order_relaxed);
    }
    int64_t get() const { return v.load(std::memory_order_relaxed); }
};

// Fixed bucket histogram; `bounds` are upper bounds in the observed unit.
template <size_t N>
struct Histogram {
    const std::array<double, N>* bounds;
    std::array<Counter, N + 1> buckets;  // last = +Inf
    Counter count;
    std::atomic<double> sum{0};
    explicit Histogram(const std::array<double, N>& b) : bounds(&b) {}
    void observe(double x) {
        size_t i = 0;
        while (i < N && x > (*bounds)[i]) ++i;
        buckets[i].inc();
        count.inc();
        sum.store(sum.load(std::memory_order_relaxed) + x, std::memory_order_relaxed);
    }
};

inline const std::array<double, 11> kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
inline const std::array<double, 14> kDelayBuckets = {10e-6,  25e-6, 50e-6,  100e-6, 250e-6,
                                                     500e-6, 1e-3,  2.5e-3, 5e-3,   10e-3,
                                                     25e-3,  50e-3, 100e-3, 1.0};
inline const std::array<double, 14> kLatencyBuckets = {50e-6,  100e-6, 250e-6, 500e-6, 1e-3,
                                                       2.5e-3, 5e-3,   10e-3,  25e-3,  50e-3,
                                                       100e-3, 250e-3, 1.0,    10.0};

struct UpstreamMetrics {
    std::string name;
    Counter requests, responses, failures, batches;
    Histogram<11> batch_size{kBatchBuckets};
    Histogram<14> queue_delay{kDelayBuckets};  // arrival at ingress -> batch leaves
    Histogram<14> latency{kLatencyBuckets};    // arrival -> response ready
    Gauge queued, inflight_batches;
    Gauge size_target, delay_budget_ns, last_p99_ns;
    Counter windows, increases, decreases;
    Counter shed;  // 503: the SLO model says the request would miss the target
    Gauge model_alpha_ns, model_beta_ns, model_rate;  // S(b) = alpha + beta b; arrivals/s
    Gauge priority;
};

struct ChannelStats;

// The RDMA path (issue 17): user-space copies of request and answer bytes, by stage.
//   parse      HTTP input (client request, service answer) into the parser's buffers
//   frame      a parsed request / answer into a frame under construction
//   registered a whole frame into registered send memory (slot or staging ring)
//   inline     a frame into the WQE by the provider (IBV_SEND_INLINE)
//   deliver    a record out of a receive slot (egress: the service request; ingress: the
//              client answer)
// registered and inline come from the channels' statistics; the rest are counted by the roles.
enum class CopyStage : size_t { Parse, Frame, Deliver, Count };

struct ChannelMetrics {
    std::string peer;
    std::string transport;
    Gauge up, credits_available, credits_owed;
    Counter bytes_tx, bytes_rx, frames_tx, frames_rx, credit_stalls, connects, disconnects,
        large_frames, ring_probes;
    Counter send_posts, signaled, inline_sends, inline_bytes, copies, copied_bytes, recv_posts,
        cq_polls, cq_events;
    void store(const ChannelStats& s);  // every counter from the channel's statistics
};

struct WorkerMetrics {
    std::string role;  // "ingress" / "egress"
    int worker = 0;
    std::array<Counter, 600> status{};
    Counter requests, connections_accepted, admission_rejects, timeouts, bad_requests;
    Gauge connections_open, inflight;
    // egress: requests forwarded to the service, its connections
    Counter service_requests, service_errors, service_retries, service_writes;
    Counter service_batches;  // batch requests to the service's batch endpoint
    Gauge service_connections, service_queue;
    // RDMA transport only (0 on TCP): copies by CopyStage
    bool rdma = false;
    std::array<Counter, static_cast<size_t>(CopyStage::Count)> copies{}, copy_bytes{};
    void count_copy(CopyStage s, uint64_t bytes) {
        if (!rdma) return;
        copies[static_cast<size_t>(s)].inc();
        copy_bytes[static_cast<size_t>(s)].inc(bytes);
    }
    std::deque<UpstreamMetrics> upstreams;  // deque: stable addresses
    std::deque<ChannelMetrics> channels;
};

class MetricsRegistry {
  public:
    WorkerMetrics& add_worker(std::string role, int index);
    std::string render() const;

  private:
    mutable std::mutex mu_;
    std::deque<std::unique_ptr<WorkerMetrics>> workers_;
};

MetricsRegistry& metrics_registry();

}  // namespace sv
