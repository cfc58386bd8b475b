// Ingress role: HTTP/1.1 front end on io_uring, routing, admission, dynamic batching,
// and the channel to the egress hosts.
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

namespace sv {

namespace {

BatchParams batch_params(const UpstreamConfig& u) {
    BatchParams p;
    p.max_batch = u.max_batch;
    p.initial_batch = u.initial_batch;
    p.max_delay_ns = u.max_delay_us * kUs;
    p.initial_delay_ns = u.initial_delay_us * kUs;
    p.slo_ns = static_cast<int64_t>(u.slo_p99_ms * 1e6);
    p.adaptive = u.adaptive;
    p.eager_when_idle = u.eager_when_idle;
    p.max_inflight_batches = u.max_inflight_batches;
    p.model = u.model;
    p.shed = u.shed;
    return p;
}

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
    std::vector<uint32_t> batch_size;     // requests in the batch when it left
    std::vector<int64_t> batch_sent;      // when it left (batch service time for the model)
    std::vector<uint32_t> batch_free;
    uint32_t sent = 0;                    // requests of this upstream in flight
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

  private:
    void accept(int fd);
    size_t process(Client& c, std::string_view data);
    void dispatch(Client& c);
    void respond(Client& c, int status, std::string_view headers, std::string_view body);
    void respond_local(Client& c, int status, std::string_view body, std::string_view extra = {});
    void after_response(Client& c);
    void end_waiting(Client& c, bool answered = false);
    void flush_upstream(Upstream& u, int64_t now);
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

void Client::on_data(StreamConn&, std::string_view data) {
    w.on_client_data(*this, data);
}
void Client::on_closed(StreamConn&) {
    w.on_client_closed(*this);
}

void Ingress::apply_config(std::shared_ptr<const Config> cfg, bool initial) {
    cfg_ = std::move(cfg);
    const auto& in = cfg_->ingress;
    limits_ = HttpLimits{in.max_header_bytes, in.max_body_bytes};
    for (auto& c : clients_)
        if (c) c->parser.set_limits(limits_);
    cfg_to_local_.assign(cfg_->upstreams.size(), -1);
    for (size_t i = 0; i < cfg_->upstreams.size(); ++i) {
        const auto& uc = cfg_->upstreams[i];
        int local = -1;
        for (size_t j = 0; j < ups_.size(); ++j)
            if (ups_[j].name == uc.name) local = static_cast<int>(j);
        if (local < 0) {
            if (!initial) {
                if (ctx_.index == 0)
                    spdlog::warn("reload: new upstream '{}' needs a restart; its routes answer 404",
                                 uc.name);
                continue;
            }
            Upstream u;
            u.name = uc.name;
            u.policy.reset(batch_params(uc));
            ups_.push_back(std::move(u));
            local = static_cast<int>(ups_.size() - 1);
        } else {
            ups_[local].policy.update_params(batch_params(uc));
        }
        ups_[local].priority = uc.priority;
        ups_[local].egress = uc.egress;
        cfg_to_local_[i] = local;
    }
}

Status Ingress::init() {
    if (auto st = ring_.init(4096, 1024, 16384); !st) return st;
    apply_config(cfg_, true);
    for (auto& u : ups_) {
        m_.upstreams.emplace_back();
        u.m = &m_.upstreams.back();
        u.m->name = u.name;
        u.m->priority.set(u.priority);
    }
    TransportOptions to;
    to.channel = cfg_->channel;
    to.local_name = fmt::format("ingress-{}-w{}", getpid(), ctx_.index);
    to.role = 1;
    if (cfg_->channel.transport == TransportKind::Rdma) {
        auto t = make_rdma_transport(ring_, to);
        if (!t) return t.error();
        transport_ = std::move(t.value());
    } else {
        transport_ = make_tcp_transport(ring_, to);
    }
    for (auto& h : cfg_->ingress.egress) {
        for (uint32_t k = 0; k < h.connections; ++k) {
            auto ch = transport_->dial(h.address, h.source_ep, h.name, *this);
            ch->user_index = channels_.size();
            m_.channels.emplace_back();
            auto* cm = &m_.channels.back();
            cm->peer = fmt::format("{}#{}", h.name, k);
            cm->transport = std::string(ch->transport_name());
            channel_metrics_.push_back(cm);
            channels_.push_back(std::move(ch));
        }
    }
    for (auto& u : ups_)
        for (size_t i = 0; i < channels_.size(); ++i)
            if (u.egress.empty() ||
                std::find(u.egress.begin(), u.egress.end(), channels_[i]->name) != u.egress.end())
                u.channels.push_back(i);
    start_control(ring_);
    if (ctx_.index == 0 && cfg_->ingress.metrics_listen) {
        // /metrics only on its own listener, never on the client port.
        std::string path = cfg_->ingress.metrics_path;
        metrics_srv_ = std::make_unique<SimpleServer>(
            ring_, HttpLimits{8192, 0}, 30000, [path](const HttpParser& r, SimpleResponse& resp) {
                if (r.path() == path) {
                    resp.content_type = "text/plain; version=0.0.4";
                    resp.body = metrics_registry().render();
                } else if (r.path() == "/healthz") {
                    resp.body = "ok\n";
                } else {
                    resp.status = 404;
                    resp.body = "not found\n";
                }
            });
        if (auto st = metrics_srv_->listen(*cfg_->ingress.metrics_listen, false); !st) return st;
    }
    acceptor_ = std::make_unique<Acceptor>(ring_, [this](int fd) { accept(fd); });
    if (ctx_.listen_fd >= 0) return acceptor_->adopt(ctx_.listen_fd, true);
    return acceptor_->listen(cfg_->ingress.listen, true);
}

void Ingress::on_reload(std::shared_ptr<const Config> cfg) {
    apply_config(std::move(cfg), false);
    if (ctx_.index == 0) spdlog::info("configuration reloaded");
}

void Ingress::on_drain(int64_t now) {
    drain_deadline_ = now + cfg_->ingress.drain_timeout_ms * kMs;
    acceptor_->stop();
    if (metrics_srv_) metrics_srv_->stop();
    if (ctx_.index == 0)
        spdlog::info("draining: {} connections, {} requests in flight", open_, inflight_);
}

// Memory held for a connection's requests: pipelined input and the request being read.
static size_t usage(const Client& c) {
    return c.in.capacity() + c.parser.body.capacity() + c.parser.headers.capacity() +
           c.parser.url.capacity();
}

void Ingress::account(Client& c) {
    size_t u = usage(c);
    buffered_ = buffered_ + u - c.accounted;
    c.accounted = u;
}

// Over the worker's memory_limit_bytes: a connection still reading its request is shed with
// 503 + Retry-After (it has no other answer pending), so the total stays bounded.
bool Ingress::over_memory(Client& c) {
    account(c);
    if (buffered_ <= cfg_->ingress.memory_limit_bytes) return false;
    if (c.phase != Client::Phase::Reading || c.s.closing()) return false;
    m_.admission_rejects.inc();
    m_.requests.inc();
    c.keep_alive = false;
    c.in.clear();
    c.in.shrink_to_fit();
    respond_local(c, 503, "proxy memory limit reached\n",
                  fmt::format("Retry-After: {}\r\n", cfg_->ingress.retry_after_s));
    c.parser.release_buffers();
    account(c);
    return true;
}

void Ingress::accept(int fd) {
    m_.connections_accepted.inc();
    uint32_t i;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        i = static_cast<uint32_t>(clients_.size());
        clients_.emplace_back();
    }
    clients_[i] = std::make_unique<Client>(*this, i, ring_, limits_);
    auto& c = *clients_[i];
    open_++;
    m_.connections_open.set(static_cast<int64_t>(open_));
    c.last_active = now_ns();
    if (ctx_.access_log) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        char buf[INET6_ADDRSTRLEN] = "-";
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
            if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
            else if (ss.ss_family == AF_INET6)
                inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf,
                          sizeof buf);
        }
        c.peer = buf;
    }
    c.s.attach(fd);
    if (open_ > cfg_->ingress.max_connections || draining_) {
        c.keep_alive = false;
        m_.admission_rejects.inc();
        respond_local(c, 503, "too many connections\n",
                      fmt::format("Retry-After: {}\r\n", cfg_->ingress.retry_after_s));
        c.s.close_after_flush(true);
    }
}

void Ingress::on_client_data(Client& c, std::string_view data) {
    c.last_active = now_ns();
    if (c.s.closing() || c.s.lingering_since()) return;
    if (c.phase != Client::Phase::Reading || !c.in.empty()) {
        c.in.append(data);
        // A client pipelining ahead of its answers: stop reading from it (back-pressure)
        // until its answers have gone out, instead of buffering without bound.
        if (c.in.size() > cfg_->ingress.connection_buffer_bytes) c.s.pause_recv(true);
        if (c.phase == Client::Phase::Reading) {
            size_t used = process(c, c.in);
            c.in.erase(0, used);
        }
    } else {
        size_t used = process(c, data);
        if (used < data.size() && !c.s.closing()) c.in.assign(data.substr(used));
    }
    over_memory(c);
}

size_t Ingress::process(Client& c, std::string_view data) {
    size_t used = 0;
    while (used < data.size() && c.phase == Client::Phase::Reading && !c.s.closing()) {
        if (!c.parser.started()) c.req_start = c.last_active;
        auto p = c.parser.feed(data.substr(used));
        used += p.consumed;
        if (p.state == HttpParser::State::Error) {
            m_.requests.inc();
            m_.bad_requests.inc();
            c.keep_alive = false;
            respond_local(c, p.status, fmt::format("{}\n", http_reason(p.status)));
            c.s.close_after_flush(true);
            return data.size();
        }
        if (p.state == HttpParser::State::Incomplete) {
            if (c.parser.headers_complete() && c.parser.expect_continue() && !c.sent_continue) {
                c.sent_continue = true;
                c.s.out().append("HTTP/1.1 100 Continue\r\n\r\n");
                c.s.flush();
            }
            break;
        }
        dispatch(c);
    }
    return used;
}

void Ingress::dispatch(Client& c) {
    m_.requests.inc();
    c.keep_alive = c.parser.keep_alive();
    c.head = c.parser.method == "HEAD";
    auto path = c.parser.path();
    int r = cfg_->route(path);
    int local = r < 0 ? -1 : cfg_to_local_[cfg_->routes[static_cast<size_t>(r)].upstream_index];
    if (local < 0) {
        respond_local(c, 404, "no route\n");
        return;
    }
    if (draining_ || inflight_ >= cfg_->ingress.admission_limit) {
        m_.admission_rejects.inc();
        respond_local(c, 503, "overloaded\n",
                      fmt::format("Retry-After: {}\r\n", cfg_->ingress.retry_after_s));
        return;
    }
    auto& u = ups_[static_cast<size_t>(local)];
    const int64_t now = now_ns();
    u.policy.on_arrival(now);
    if (u.policy.should_shed(u.queue.size() + u.sent, now)) {
        // The model says this request would miss the p99 target: shed it now (USPS).
        m_.admission_rejects.inc();
        u.m->shed.inc();
        respond_local(c, 503, "over the latency objective\n",
                      fmt::format("Retry-After: {}\r\n", cfg_->ingress.retry_after_s));
        return;
    }
    bool any_up = false;
    for (auto i : u.channels)
        any_up = any_up || (channels_[i]->up() && !channels_[i]->peer_draining());
    if (!any_up) {
        u.m->requests.inc();
        u.m->failures.inc();
        respond_local(c, 502, "no channel to an egress host\n");
        return;
    }
    c.phase = Client::Phase::Queued;
    c.id = (static_cast<uint64_t>(c.index) << 32) | next_seq_++;
    c.upstream = local;
    c.arrival = now_ns();
    u.queue.push_back({c.index, c.id, c.arrival});
    u.m->requests.inc();
    inflight_++;
}

void Ingress::respond(Client& c, int status, std::string_view headers, std::string_view body) {
    bool keep = c.keep_alive && !draining_;
    write_response(c.s.out(), status, headers, body, keep, c.head, c.parser.http10());
    c.s.flush();
    if (status >= 0 && status < 600) m_.status[static_cast<size_t>(status)].inc();
    if (ctx_.access_log) log_access(c, status, body.size());
}

void Ingress::respond_local(Client& c, int status, std::string_view body, std::string_view extra) {
    std::string hdr = "Content-Type: text/plain\r\n";
    hdr.append(extra);
    bool was_waiting = c.phase != Client::Phase::Reading;
    if (was_waiting) end_waiting(c);
    respond(c, status, hdr, body);
    after_response(c);
}

void Ingress::after_response(Client& c) {
    c.parser.next();
    c.parser.release_buffers();  // a large body's buffer is not kept by an idle connection
    c.sent_continue = false;
    if (!c.keep_alive || draining_) {
        c.s.close_after_flush(true);
        account(c);
        return;
    }
    if (!c.in.empty() && !c.s.closing()) {
        std::string pending;
        pending.swap(c.in);
        size_t used = process(c, pending);
        if (used < pending.size()) c.in.insert(0, pending.substr(used));
    }
    if (c.in.size() <= cfg_->ingress.connection_buffer_bytes / 2) {
        if (c.in.empty()) c.in.shrink_to_fit();
        c.s.pause_recv(false);
    }
    account(c);
}

void Ingress::end_waiting(Client& c, bool answered) {
    if (c.phase == Client::Phase::Sent && c.upstream >= 0) {
        auto& u = ups_[static_cast<size_t>(c.upstream)];
        u.sent--;
        if (c.batch < u.batch_remaining.size() && --u.batch_remaining[c.batch] == 0) {
            if (answered) {
                int64_t now = now_ns();
                u.policy.on_batch(u.batch_size[c.batch], now - u.batch_sent[c.batch], now);
            }
            u.batch_free.push_back(c.batch);
            u.inflight_batches--;
        }
    }
    if (c.phase != Client::Phase::Reading) inflight_--;
    c.phase = Client::Phase::Reading;
    c.batch = UINT32_MAX;
}

void Ingress::log_access(const Client& c, int status, size_t bytes) {
    double ms = c.arrival ? (now_ns() - c.arrival) / 1e6 : 0.0;
    ctx_.access_log->info("{} \"{} {}\" {} {} {:.3f}ms", c.peer, c.parser.method, c.parser.url,
                          status, bytes, ms);
}

void Ingress::on_client_closed(Client& c) {
    if (c.phase != Client::Phase::Reading) end_waiting(c);  // the answer, if any, is dropped
    buffered_ -= c.accounted;
    uint32_t i = c.index;
    clients_[i].reset();  // destroys c
    free_.push_back(i);
    open_--;
    m_.connections_open.set(static_cast<int64_t>(open_));
}

bool Ingress::queued_valid(const QEntry& e) const {
    if (e.conn >= clients_.size() || !clients_[e.conn]) return false;
    const auto& c = *clients_[e.conn];
    return c.id == e.id && c.phase == Client::Phase::Queued;
}

Channel* Ingress::pick_channel(Upstream& u, bool& any_up) {
    any_up = false;
    size_t n = u.channels.size();
    for (size_t k = 0; k < n; ++k) {
        auto& ch = channels_[u.channels[(u.rr + k) % n]];
        if (!ch->up() || ch->peer_draining()) continue;
        any_up = true;
        if (ch->can_send()) {
            u.rr = (u.rr + k + 1) % n;
            return ch.get();
        }
    }
    return nullptr;
}

void Ingress::fail_queue(Upstream& u, int status, std::string_view why) {
    while (!u.queue.empty()) {
        QEntry e = u.queue.front();
        u.queue.pop_front();
        if (!queued_valid(e)) continue;
        u.m->failures.inc();
        respond_local(*clients_[e.conn], status, why);
    }
}

void Ingress::flush_upstream(Upstream& u, int64_t now) {
    u.stalled = false;
    const uint32_t max_frame = cfg_->channel.max_frame_bytes;
    while (!u.queue.empty()) {
        while (!u.queue.empty() && !queued_valid(u.queue.front())) u.queue.pop_front();
        if (u.queue.empty()) break;
        if (!u.policy.should_flush(u.queue.size(), u.queue.front().arrival, now,
                                   u.inflight_batches))
            break;
        bool any_up = false;
        Channel* ch = pick_channel(u, any_up);
        if (!ch) {
            if (!any_up)
                fail_queue(u, 502, "channel to egress lost\n");
            else
                u.stalled = true;  // wait for credits (on_writable wakes the loop)
            break;
        }
        FrameBuilder fb(frame_);
        fb.begin_requests(u.name);
        uint32_t batch;
        if (!u.batch_free.empty()) {
            batch = u.batch_free.back();
            u.batch_free.pop_back();
        } else {
            batch = static_cast<uint32_t>(u.batch_remaining.size());
            u.batch_remaining.push_back(0);
            u.batch_size.push_back(0);
            u.batch_sent.push_back(0);
        }
        uint32_t n = 0;
        size_t ways = 0;
        for (auto i : u.channels)
            ways += channels_[i]->up() && !channels_[i]->peer_draining() ? 1 : 0;
        const uint32_t target = u.policy.take(u.queue.size(), ways);
        while (!u.queue.empty() && n < target && n < 65535) {
            QEntry e = u.queue.front();
            if (!queued_valid(e)) {
                u.queue.pop_front();
                continue;
            }
            auto& c = *clients_[e.conn];
            RequestRecord rec{c.id,
                              static_cast<uint8_t>(u.priority),
                              c.parser.method,
                              c.parser.url,
                              c.parser.headers,
                              c.parser.body};
            size_t sz = FrameBuilder::request_size(rec);
            if (n > 0 && fb.size() + sz > max_frame) break;
            u.queue.pop_front();
            if (fb.size() + sz > max_frame) {
                u.m->failures.inc();
                respond_local(c, 502, "request does not fit in a channel frame\n");
                continue;
            }
            fb.add_request(rec);
            c.phase = Client::Phase::Sent;
            c.batch = batch;
            c.channel_id = ch->id;
            c.channel_epoch = ch->epoch;
            u.m->queue_delay.observe((now - c.arrival) / 1e9);
            u.sent++;
            ++n;
        }
        if (n == 0) {
            u.batch_free.push_back(batch);
            continue;
        }
        u.batch_remaining[batch] = n;
        u.batch_size[batch] = n;
        u.batch_sent[batch] = now;
        u.inflight_batches++;
        u.m->batches.inc();
        u.m->batch_size.observe(n);
        if (auto st = ch->send(fb.finish(), u.priority); !st) {
            // The channel failed and went down: on_channel_down answered the batch (502) and
            // released it.  Try the next channel.
            if (!ch->up()) continue;
            // A transport without room (RDMA large-frame ring) gets here: put the batch
            // back in arrival order and wait for credits.
            std::vector<Client*> back;
            for (auto& cl : clients_)
                if (cl && cl->phase == Client::Phase::Sent && cl->batch == batch &&
                    &ups_[static_cast<size_t>(cl->upstream)] == &u)
                    back.push_back(cl.get());
            std::sort(back.begin(), back.end(),
                      [](Client* a, Client* b) { return a->arrival > b->arrival; });
            for (Client* cl : back) {
                u.sent--;
                cl->phase = Client::Phase::Queued;
                cl->batch = UINT32_MAX;
                u.queue.push_front({cl->index, cl->id, cl->arrival});
            }
            u.batch_remaining[batch] = 0;
            u.batch_free.push_back(batch);
            u.inflight_batches--;
            u.stalled = true;
            break;
        }
    }
    u.m->queued.set(static_cast<int64_t>(u.queue.size()));
}

void Ingress::on_channel_up(Channel& ch) {
    channel_metrics_[ch.user_index]->up.set(1);
}

void Ingress::on_channel_down(Channel& ch) {
    channel_metrics_[ch.user_index]->up.set(0);
    for (auto& c : clients_) {
        if (!c || c->phase != Client::Phase::Sent) continue;
        if (c->channel_id == ch.id && c->channel_epoch == ch.epoch) {
            ups_[static_cast<size_t>(c->upstream)].m->failures.inc();
            respond_local(*c, 502, "channel to egress lost\n");
        }
    }
}

void Ingress::on_frame(Channel& ch, const FrameHeader& h, std::string_view payload) {
    if (h.type != FrameType::Responses) {
        spdlog::warn("channel {}: unexpected frame type {}", ch.name, static_cast<int>(h.type));
        return;
    }
    RecordReader rr(payload, h.count);
    ResponseRecord r;
    int64_t now = now_ns();
    while (true) {
        auto more = rr.next(r);
        if (!more) {
            spdlog::warn("channel {}: {}", ch.name, more.error().message);
            break;
        }
        if (!more.value()) break;
        uint32_t idx = static_cast<uint32_t>(r.id >> 32);
        if (idx >= clients_.size() || !clients_[idx]) continue;
        auto& c = *clients_[idx];
        if (c.id != r.id || c.phase != Client::Phase::Sent) continue;  // timed out / gone
        auto& u = ups_[static_cast<size_t>(c.upstream)];
        u.m->responses.inc();
        int64_t lat = now - c.arrival;
        u.m->latency.observe(lat / 1e9);
        u.policy.on_latency(lat, now);
        // The egress's own 502/503/504 (service down, timed out) are no service time: they
        // would teach the model a service as slow as service_timeout_ms.
        end_waiting(c, r.status != 502 && r.status != 503 && r.status != 504);
        respond(c, r.status, r.headers, r.body);
        after_response(c);
    }
}

void Ingress::sweep(int64_t now) {
    const auto& in = cfg_->ingress;
    if (metrics_srv_) metrics_srv_->sweep(now);
    for (auto& cp : clients_) {
        if (!cp || cp->s.closing()) continue;
        auto& c = *cp;
        if (c.s.lingering_since()) {
            if (now - c.s.lingering_since() > 2000 * kMs) c.s.close();
            continue;
        }
        if (c.s.send_started_ns() && now - c.s.send_started_ns() > in.send_timeout_ms * kMs) {
            m_.timeouts.inc();
            c.s.close();  // a client that does not read its answers
            continue;
        }
        switch (c.phase) {
            case Client::Phase::Reading:
                if (c.parser.started() || !c.in.empty()) {
                    if (now - c.req_start > in.client_timeout_ms * kMs) {
                        m_.timeouts.inc();
                        c.keep_alive = false;
                        respond_local(c, 408, "request not received in time\n");
                    }
                } else if (now - c.last_active > in.idle_timeout_ms * kMs ||
                           (draining_ && c.s.unsent() == 0)) {
                    c.s.close();
                }
                break;
            case Client::Phase::Queued:
            case Client::Phase::Sent:
                if (now - c.arrival > in.request_timeout_ms * kMs) {
                    m_.timeouts.inc();
                    ups_[static_cast<size_t>(c.upstream)].m->failures.inc();
                    respond_local(c, 504, "upstream did not answer in time\n");
                }
                break;
        }
    }
    update_metrics();
}

void Ingress::update_metrics() {
    m_.inflight.set(inflight_);
    for (auto& u : ups_) {
        u.m->size_target.set(u.policy.size_target());
        u.m->model_alpha_ns.set(static_cast<int64_t>(u.policy.slo().alpha_ns()));
        u.m->model_beta_ns.set(static_cast<int64_t>(u.policy.slo().beta_ns()));
        u.m->model_rate.set(static_cast<int64_t>(u.policy.slo().rate_per_s(now_ns())));
        u.m->delay_budget_ns.set(u.policy.delay_budget_ns());
        u.m->last_p99_ns.set(u.policy.stats().last_p99_ns);
        u.m->windows.v.store(u.policy.stats().windows, std::memory_order_relaxed);
        u.m->increases.v.store(u.policy.stats().increases, std::memory_order_relaxed);
        u.m->decreases.v.store(u.policy.stats().decreases, std::memory_order_relaxed);
        u.m->inflight_batches.set(u.inflight_batches);
        u.m->priority.set(u.priority);
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        auto& ch = *channels_[i];
        auto& cm = *channel_metrics_[i];
        const auto& s = ch.stats();
        cm.up.set(ch.up() ? 1 : 0);
        cm.credits_available.set(ch.credits_available());
        cm.credits_owed.set(ch.credits_owed());
        cm.bytes_tx.v.store(s.bytes_tx, std::memory_order_relaxed);
        cm.bytes_rx.v.store(s.bytes_rx, std::memory_order_relaxed);
        cm.frames_tx.v.store(s.frames_tx, std::memory_order_relaxed);
        cm.frames_rx.v.store(s.frames_rx, std::memory_order_relaxed);
        cm.credit_stalls.v.store(s.credit_stalls, std::memory_order_relaxed);
        cm.connects.v.store(s.connects, std::memory_order_relaxed);
        cm.disconnects.v.store(s.disconnects, std::memory_order_relaxed);
        cm.large_frames.v.store(s.large_frames, std::memory_order_relaxed);
    }
}

int Ingress::run(const ReadyFn& ready) {
    ready("", this);
    next_sweep_ = now_ns();
    while (true) {
        int64_t now = refresh_loop_clock();
        int64_t next = std::min(next_sweep_, transport_->tick(now));
        for (auto& u : ups_)
            if (!u.queue.empty() && !u.stalled)
                next = std::min(next, u.policy.deadline(u.queue.front().arrival));
        ring_.run_once(std::max<int64_t>(0, next - now));
        now = now_ns();
        for (auto& u : ups_)
            if (!u.queue.empty()) flush_upstream(u, now);
        if (now >= next_sweep_) {
            sweep(now);
            next_sweep_ = now + (draining_ ? 20 : 100) * kMs;
        }
        if (draining_ && ((open_ == 0 && inflight_ == 0) || now > drain_deadline_)) break;
    }
    // Orderly goodbye on every channel, then give the sends a moment.
    for (auto& ch : channels_) ch->close();
    int64_t until = now_ns() + 200 * kMs;
    while (now_ns() < until) {
        bool busy = false;
        for (auto& ch : channels_) busy = busy || ch->up();
        if (!busy) break;
        ring_.run_once(10 * kMs);
        transport_->tick(now_ns());
    }
    return 0;
}

}  // namespace

int run_ingress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done) {
    Ingress w(std::move(ctx));
    if (auto st = w.init(); !st) {
        ready(st.error().message, nullptr);
        return 1;
    }
    int rc = w.run(ready);
    done();  // before w is destroyed: the main thread forgets the handle first
    return rc;
}

}  // namespace sv
