// Egress role, shared by its files (one per phase):
//   egress.cpp          configuration, start, the event loop, drain, the job pool, the sweep
//   egress_channel.cpp  request batches in from the channels, answers out in batches
//   egress_service.cpp  dispatch to the service: pool, pipelining, batch endpoint, answers
#pragma once

#include <spdlog/spdlog.h>

#include <deque>
#include <unordered_map>

#include "frame.hpp"
#include "http.hpp"
#include "simple_server.hpp"
#include "transport.hpp"
#include "uring.hpp"
#include "worker.hpp"

namespace sv::egress_detail {

class Egress;
struct Service;

struct Job {
    uint32_t channel_id = 0;
    uint64_t channel_epoch = 0;
    uint64_t id = 0;
    std::string request;  // the whole HTTP/1.1 request as sent to the service
    bool head = false;
    bool idempotent = false;  // RFC 9110 9.2.2: may be sent again if the first try is unknown
    int attempts = 0;
    int64_t start = 0;
    uint32_t hold = UINT32_MAX;  // the request frame whose credit waits for this answer
    // A batch request to the service's batch endpoint: the requests it carries, in order
    // (they are answered from its answer); empty for a request of a client.
    std::vector<Job*> batch;
    Service* svc = nullptr;  // batch requests: where to re-queue them
};

// A request frame's credit, held until every request in it is answered (bounds the work
// queued at the egress to credits x batch, and makes the ingress wait -- back-pressure).
struct Hold {
    uint32_t channel_id = 0;
    uint64_t epoch = 0;
    uint32_t remaining = 0;
    bool armed = false;
};

inline bool idempotent_method(std::string_view m) {
    return m == "GET" || m == "HEAD" || m == "OPTIONS" || m == "TRACE" || m == "PUT" ||
           m == "DELETE";
}

struct ServiceConn final : StreamConn::Events {
    ServiceConn(Egress& w, Service& svc, size_t idx, Ring& ring, HttpLimits lim)
        : w(w), svc(svc), index(idx), s(ring, *this), parser(HttpParser::Mode::Response, lim) {}
    void on_data(StreamConn&, std::string_view data) override;
    void on_connect(StreamConn&, int err) override;
    void on_closed(StreamConn&) override;

    Egress& w;
    Service& svc;
    size_t index;
    StreamConn s;
    HttpParser parser;
    std::deque<Job*> jobs;   // sent (or being sent) on this connection, answers due in order
    bool reused = false;     // served a request before (stale keep-alive possible)
    bool got_bytes = false;  // for jobs.front()
    int64_t connect_start = 0, idle_since = 0;
};

struct Service {
    std::string name;
    UpstreamConfig cfg;
    SockAddr addr;
    bool resolved = false;
    std::vector<std::unique_ptr<ServiceConn>> conns;
    std::vector<size_t> free_slots;
    std::vector<ServiceConn*> idle;
    std::deque<Job*> queue;
    size_t open = 0;
    bool batch_off = false;  // the service answered its batch endpoint 404/405/501
};

struct ChanOut {
    Channel* ch = nullptr;
    uint64_t epoch = 0;
    std::string cur;          // frame being built (when not in the channel's registered chunk)
    SpanBuf reg{nullptr, 0};  // RDMA: the frame being built in a chunk lent by frame_buffer()
    bool in_reg = false;
    uint16_t count = 0;
    std::deque<std::string> ready;  // finished frames waiting for credit
    std::string_view frame() const { return in_reg ? std::string_view(reg) : cur; }
    char* frame_data() { return in_reg ? reg.data() : cur.data(); }
    // The frame moves from the chunk into `cur` (a copy: it could not stay there), and the
    // chunk goes back: kept by a channel that then stays idle, it could be the pool's last,
    // and the other channels' frames, which need one to be sent, would wait for it.
    void spill() {
        if (!in_reg) return;
        cur.assign(reg.data(), reg.size());
        in_reg = false;
        if (ch) ch->release_frame_buffer();
    }
    // Runs f on a frame builder over the frame being built, in the chunk or in `cur`.
    template <class F>
    void build(F&& f) {
        if (in_reg) {
            SpanFrameBuilder fb(reg);
            f(fb);
        } else {
            FrameBuilder fb(cur);
            f(fb);
        }
    }
    // Ends the frame being built: its header gets the length and count.
    void seal() {
        FrameHeader h;
        h.type = FrameType::Responses;
        h.count = count;
        h.length = static_cast<uint32_t>(frame().size() - kFrameHeaderBytes);
        encode_header(frame_data(), h);
        count = 0;
    }
    // Adds answer r (sz: FrameBuilder::response_size(r)) to the frame being built, starting
    // one if none is.  A frame starts in registered memory when the transport lends a chunk
    // (RDMA): it then leaves without a copy; one that outgrows the chunk spills out of it.
    void add(const ResponseRecord& r, size_t sz) {
        if (count == 0) {
            std::span<char> mem = ch->frame_buffer(kFrameHeaderBytes + sz);
            in_reg = !mem.empty();
            if (in_reg) reg = SpanBuf(mem.data(), mem.size());
            build([](auto& fb) { fb.begin(FrameType::Responses); });
        }
        if (in_reg && reg.size() + sz > reg.capacity()) spill();
        build([&r](auto& fb) { fb.add_response(r); });
        count++;
    }
    // A sealed frame that cannot go now waits in `ready` (out of the chunk).
    void park() {
        spill();
        ready.push_back(std::move(cur));
        cur.clear();
    }
};

class Egress final : public ChannelEvents, public WorkerBase {
  public:
    explicit Egress(WorkerContext ctx) : ctx_(std::move(ctx)), cfg_(ctx_.cfg), m_(*ctx_.metrics) {}
    ~Egress() override {
        stop_control();
        ring_.shutdown();
    }

    Status init();
    int run(const ReadyFn& ready);

    void on_channel_up(Channel& ch) override;
    void on_channel_down(Channel& ch) override;
    void on_frame(Channel& ch, const FrameHeader& h, std::string_view payload) override;
    void on_writable(Channel&) override {}

    void conn_data(ServiceConn& c, std::string_view data);
    void conn_connect(ServiceConn& c, int err);
    void conn_closed(ServiceConn& c);

  private:
    Job* new_job();
    void free_job(Job* j);
    void dispatch(Service& s);
    void assign(ServiceConn& c, Service& s, size_t n);
    Job* take(Service& s);
    void complete_batch(Job* b, int status, std::string_view headers, std::string_view body);
    void start_answer(ServiceConn& c);
    void requeue_or_fail(ServiceConn& c, bool not_processed);
    void on_reload(std::shared_ptr<const Config> cfg) override;
    void on_drain(int64_t now) override;
    void release_hold(Job* j);
    void complete(Job* j, int status, std::string_view headers, std::string_view body);
    void fail(Job* j, int status, std::string_view why);
    void flush_out();
    template <class F>
    void each_channel(F&& f);
    void sweep(int64_t now);

    WorkerContext ctx_;
    std::shared_ptr<const Config> cfg_;
    WorkerMetrics& m_;
    Ring ring_;
    std::unique_ptr<Transport> transport_;
    std::deque<Service> services_;  // stable addresses: connections point at their service
    std::unordered_map<uint32_t, ChanOut> outs_;
    std::vector<std::unique_ptr<Job>> job_pool_;
    std::vector<Job*> job_free_;
    size_t jobs_live_ = 0;
    std::vector<Hold> holds_;
    std::vector<uint32_t> holds_free_;
    std::unique_ptr<SimpleServer> metrics_srv_;
    int64_t next_sweep_ = 0;
    HttpLimits svc_limits_;
    std::unique_ptr<HttpParser> batch_parser_;  // splits a batch answer into its answers
    ChannelStats dead_stats_;
    ChannelMetrics* cm_ = nullptr;
    std::unordered_map<uint32_t, Channel*> live_;
};

}  // namespace sv::egress_detail
