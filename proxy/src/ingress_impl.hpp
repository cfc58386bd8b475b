// Ingress role, shared by its files (one per phase):
//   ingress.cpp         configuration, start, the event loop, drain
//   ingress_accept.cpp  accepting clients, reading and parsing requests, routing, admission
//   ingress_batch.cpp   batching per upstream and sending batches over the channels
//   ingress_answer.cpp  answers from the channel to the clients, timeouts, metrics
#pragma once

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <deque>

#include "batching.hpp"
#include "frame.hpp"
#include "http.hpp"
#include "simple_server.hpp"
#include "transport.hpp"
#include "uring.hpp"
#include "worker.hpp"

namespace sv::ingress_detail {

struct QEntry {
    uint32_t conn;
    uint64_t id;
    int64_t arrival;
};

struct Upstream {
    std::string name;
    int priority = 4;
    std::vector<std::string> egress;  // allowed egress host names (empty = all)
    BatchPolicy policy;
    std::deque<QEntry> queue;
    std::vector<size_t> channels;  // indexes into Ingress::channels_
    size_t rr = 0;
    std::vector<uint32_t> batch_remaining;
    std::vector<uint32_t> batch_size;  // requests in the batch when it left
    std::vector<int64_t> batch_sent;   // when it left (batch service time for the model)
    std::vector<uint32_t> batch_free;
    uint32_t sent = 0;  // requests of this upstream in flight
    uint32_t inflight_batches = 0;
    bool stalled = false;
    UpstreamMetrics* m = nullptr;
};

class Ingress;

struct Client final : StreamConn::Events {
    enum class Phase { Reading, Queued, Sent };
    Client(Ingress& w, uint32_t i, Ring& ring, HttpLimits lim)
        : w(w), index(i), s(ring, *this), parser(HttpParser::Mode::Request, lim) {}
    void on_data(StreamConn&, std::string_view data) override;
    void on_closed(StreamConn&) override;
    void on_drained(StreamConn&) override;

    Ingress& w;
    uint32_t index;
    StreamConn s;
    HttpParser parser;
    std::string in;  // input received while a request is being answered (pipelining)
    Phase phase = Phase::Reading;
    uint64_t id = 0;
    int upstream = -1;
    uint32_t batch = UINT32_MAX;
    uint32_t channel_id = 0;
    uint64_t channel_epoch = 0;
    int64_t req_start = 0, last_active = 0, arrival = 0;
    size_t accounted = 0;  // bytes counted in Ingress::buffered_
    bool keep_alive = true, head = false, sent_continue = false;
    // Its answers waiting to go out fill connection_buffer_bytes: the next pipelined request
    // waits in `in` until they have gone (on_drained).
    bool out_full = false;
    std::string peer;
};

class Ingress final : public ChannelEvents, public WorkerBase {
  public:
    explicit Ingress(WorkerContext ctx) : ctx_(std::move(ctx)), cfg_(ctx_.cfg), m_(*ctx_.metrics) {}
    ~Ingress() override {
        stop_control();
        ring_.shutdown();
    }

    Status init();
    int run(const ReadyFn& ready);

    // ChannelEvents
    void on_channel_up(Channel& ch) override;
    void on_channel_down(Channel& ch) override;
    void on_frame(Channel& ch, const FrameHeader& h, std::string_view payload) override;
    void on_writable(Channel&) override {}

    void on_client_data(Client& c, std::string_view data);
    void on_client_closed(Client& c);
    void on_client_drained(Client& c);

  private:
    void accept(int fd);
    size_t process(Client& c, std::string_view data);
    void dispatch(Client& c);
    void respond(Client& c, int status, std::string_view headers, std::string_view body);
    void respond_local(Client& c, int status, std::string_view body, std::string_view extra = {});
    void after_response(Client& c);
    void take_pending(Client& c);
    void end_waiting(Client& c, bool answered = false);
    void flush_upstream(Upstream& u, int64_t now);
    size_t batch_bytes(const Upstream& u, uint32_t target, uint32_t max_frame) const;
    template <class Builder>
    uint32_t build_batch(Upstream& u, Builder& fb, const Channel& ch, uint32_t batch,
                         uint32_t target, uint32_t max_frame, int64_t now);
    Channel* pick_channel(Upstream& u, bool& any_up);
    void fail_queue(Upstream& u, int status, std::string_view why);
    bool queued_valid(const QEntry& e) const;
    void sweep(int64_t now);
    void update_metrics();
    void on_reload(std::shared_ptr<const Config> cfg) override;
    void on_drain(int64_t now) override;
    void account(Client& c);
    bool over_memory(Client& c);
    void apply_config(std::shared_ptr<const Config> cfg, bool initial);
    void log_access(const Client& c, int status, size_t bytes);

    WorkerContext ctx_;
    std::shared_ptr<const Config> cfg_;
    WorkerMetrics& m_;
    Ring ring_;
    std::unique_ptr<Transport> transport_;
    std::vector<std::unique_ptr<Channel>> channels_;
    std::vector<ChannelMetrics*> channel_metrics_;
    std::vector<Upstream> ups_;
    std::vector<int> cfg_to_local_;  // config upstream index -> ups_ index
    std::vector<std::unique_ptr<Client>> clients_;
    std::vector<uint32_t> free_;
    size_t open_ = 0;
    uint32_t inflight_ = 0;
    uint32_t next_seq_ = 1;
    std::unique_ptr<Acceptor> acceptor_;
    std::unique_ptr<SimpleServer> metrics_srv_;
    size_t buffered_ = 0;  // request bytes held by all connections (memory_limit_bytes)
    int64_t next_sweep_ = 0;
    std::string frame_;
    HttpLimits limits_;
};

}  // namespace sv::ingress_detail
