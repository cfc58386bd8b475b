// Egress role: receives request batches over the channel, forwards the requests to the
// unmodified service over a pool of keep-alive connections (up to `pipeline` requests
// pipelined on one connection: one write for all of them, answers parsed in order from the
// same reads), returns responses in batches (everything completed in one event-loop turn
// leaves in one frame per channel).
#include <spdlog/spdlog.h>

#include <deque>
#include <unordered_map>

#include "frame.hpp"
#include "http.hpp"
#include "simple_server.hpp"
#include "transport.hpp"
#include "uring.hpp"
#include "worker.hpp"

namespace sv {

namespace {

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

bool idempotent_method(std::string_view m) {
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
    std::string cur;  // frame being built
    uint16_t count = 0;
    std::deque<std::string> ready;  // finished frames waiting for credit
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

void ServiceConn::on_data(StreamConn&, std::string_view d) {
    w.conn_data(*this, d);
}
void ServiceConn::on_connect(StreamConn&, int err) {
    w.conn_connect(*this, err);
}
void ServiceConn::on_closed(StreamConn&) {
    w.conn_closed(*this);
}

Status Egress::init() {
    if (auto st = ring_.init(4096, 1024, 16384); !st) return st;
    svc_limits_ = HttpLimits{64 * 1024, cfg_->channel.max_frame_bytes - 128 * 1024};
    for (auto& u : cfg_->upstreams) {
        if (!u.service) continue;
        auto& s = services_.emplace_back();
        s.name = u.name;
        s.cfg = u;
    }
    for (auto& s : services_) {
        auto a = resolve(*s.cfg.service);
        if (!a) return make_error(fmt::format("upstream '{}': {}", s.name, a.error().message));
        s.addr = a.value();
        s.resolved = true;
    }
    m_.channels.emplace_back();
    cm_ = &m_.channels.back();
    cm_->peer = "ingress";
    cm_->transport = cfg_->channel.transport == TransportKind::Rdma ? "rdma" : "tcp";
    TransportOptions to;
    to.channel = cfg_->channel;
    to.local_name = fmt::format("egress-{}-w{}", getpid(), ctx_.index);
    to.role = 2;
    to.listen_fd = ctx_.listen_fd;
    if (cfg_->channel.transport == TransportKind::Rdma) {
        auto t = make_rdma_transport(ring_, to);
        if (!t) return t.error();
        transport_ = std::move(t.value());
    } else {
        transport_ = make_tcp_transport(ring_, to);
    }
    start_control(ring_);
    if (auto st = transport_->listen(cfg_->egress.listen, *this); !st) return st;
    if (ctx_.index == 0 && cfg_->egress.metrics_listen) {
        metrics_srv_ = std::make_unique<SimpleServer>(
            ring_, HttpLimits{8192, 0}, 30000, [](const HttpParser& r, SimpleResponse& resp) {
                if (r.path() == "/metrics") {
                    resp.content_type = "text/plain; version=0.0.4";
                    resp.body = metrics_registry().render();
                } else if (r.path() == "/healthz") {
                    resp.body = "ok\n";
                } else {
                    resp.status = 404;
                    resp.body = "not found\n";
                }
            });
        if (auto st = metrics_srv_->listen(*cfg_->egress.metrics_listen, false); !st) return st;
    }
    return {};
}

void Egress::on_reload(std::shared_ptr<const Config> r) {
    {
        for (auto& s : services_) {
            auto* u = r->upstream(s.name);
            if (!u || !u->service) continue;
            if (u->service->text != s.cfg.service->text) {
                auto a = resolve(*u->service);
                if (!a) {
                    spdlog::warn("reload: upstream '{}': {} (keeping old address)", s.name,
                                 a.error().message);
                    continue;
                }
                s.addr = a.value();
                for (auto* c : s.idle) c->s.close();  // idle connections go to the old address
            }
            s.cfg = *u;
        }
        cfg_ = std::move(r);
        if (ctx_.index == 0) spdlog::info("configuration reloaded");
    }
}

void Egress::on_drain(int64_t now) {
    drain_deadline_ = now + cfg_->egress.drain_timeout_ms * kMs;
    transport_->stop_listening();
    if (metrics_srv_) metrics_srv_->stop();
    // Goodbye: ingress stops sending new batches here; outstanding ones still finish.
    for (auto& [id, o] : outs_) o.ch->goodbye();
    if (ctx_.index == 0) spdlog::info("draining: {} requests in progress", jobs_live_);
}

void Egress::release_hold(Job* j) {
    if (j->hold == UINT32_MAX) return;
    auto& h = holds_[j->hold];
    uint32_t idx = std::exchange(j->hold, UINT32_MAX);
    if (--h.remaining > 0 || !h.armed) return;
    auto it = live_.find(h.channel_id);
    if (it != live_.end() && it->second->epoch == h.epoch) it->second->release_credit();
    h.armed = false;
    holds_free_.push_back(idx);
}

Job* Egress::new_job() {
    if (job_free_.empty()) {
        job_pool_.push_back(std::make_unique<Job>());
        job_free_.push_back(job_pool_.back().get());
    }
    Job* j = job_free_.back();
    job_free_.pop_back();
    j->attempts = 0;
    j->request.clear();
    j->hold = UINT32_MAX;
    j->head = j->idempotent = false;
    j->batch.clear();
    j->svc = nullptr;
    jobs_live_++;
    return j;
}

void Egress::free_job(Job* j) {
    release_hold(j);
    if (j->request.capacity() > 64 * 1024) std::string().swap(j->request);
    job_free_.push_back(j);
    jobs_live_--;
}

void Egress::on_channel_up(Channel& ch) {
    auto& o = outs_[ch.id];
    o.ch = &ch;
    o.epoch = ch.epoch;
    o.cur.clear();
    o.count = 0;
    o.ready.clear();
    live_[ch.id] = &ch;
    if (draining_) ch.goodbye();
}

void Egress::on_channel_down(Channel& ch) {
    const auto& s = ch.stats();
    dead_stats_.bytes_tx += s.bytes_tx;
    dead_stats_.bytes_rx += s.bytes_rx;
    dead_stats_.frames_tx += s.frames_tx;
    dead_stats_.frames_rx += s.frames_rx;
    dead_stats_.credit_stalls += s.credit_stalls;
    dead_stats_.connects += s.connects;
    dead_stats_.disconnects += 1;
    outs_.erase(ch.id);
    live_.erase(ch.id);
    // Jobs of this channel keep running; their answers are dropped (the ingress has
    // already answered 502).
}

void Egress::on_frame(Channel& ch, const FrameHeader& h, std::string_view payload) {
    if (h.type != FrameType::Requests) {
        spdlog::warn("channel {}: unexpected frame type {}", ch.name, static_cast<int>(h.type));
        return;
    }
    RecordReader rr(payload, h.count);
    auto up = rr.upstream();
    if (!up) {
        spdlog::warn("channel {}: {}", ch.name, up.error().message);
        return;
    }
    Service* svc = nullptr;
    for (auto& s : services_)
        if (s.name == up.value()) svc = &s;
    RequestRecord r;
    int64_t now = now_ns();
    uint32_t hold;
    if (!holds_free_.empty()) {
        hold = holds_free_.back();
        holds_free_.pop_back();
    } else {
        hold = static_cast<uint32_t>(holds_.size());
        holds_.emplace_back();
    }
    holds_[hold] = Hold{ch.id, ch.epoch, 0, false};
    while (true) {
        auto more = rr.next(r);
        if (!more) {
            spdlog::warn("channel {}: {}", ch.name, more.error().message);
            break;
        }
        if (!more.value()) break;
        m_.requests.inc();
        Job* j = new_job();
        j->channel_id = ch.id;
        j->channel_epoch = ch.epoch;
        j->id = r.id;
        j->start = now;
        j->head = r.method == "HEAD";
        j->idempotent = idempotent_method(r.method);
        j->hold = hold;
        holds_[hold].remaining++;
        if (!svc) {
            fail(j, 502, fmt::format("egress has no service for upstream '{}'\n", up.value()));
            continue;
        }
        auto& q = j->request;
        q.append(r.method).append(" ").append(r.url).append(" HTTP/1.1\r\n");
        q.append(r.headers);
        // Host is mandatory in HTTP/1.1; the client's is forwarded when present.
        if (!has_header(r.headers, "host"))
            q.append("Host: ").append(svc->cfg.service->text).append("\r\n");
        if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH")
            q.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
        q.append("\r\n");
        q.append(r.body);
        svc->queue.push_back(j);
    }
    if (holds_[hold].remaining > 0) {
        holds_[hold].armed = true;
        ch.hold_credit();  // returned when the last of these requests is answered
    } else {
        holds_free_.push_back(hold);
    }
    if (svc) dispatch(*svc);
}

void Egress::dispatch(Service& s) {
    const size_t depth = std::max<uint32_t>(1, s.cfg.pipeline);
    while (!s.queue.empty()) {
        ServiceConn* c = nullptr;
        if (!s.idle.empty()) {
            c = s.idle.back();
            s.idle.pop_back();
        } else if (s.open < s.cfg.pool) {
            size_t idx;
            if (!s.free_slots.empty()) {
                idx = s.free_slots.back();
                s.free_slots.pop_back();
            } else {
                idx = s.conns.size();
                s.conns.emplace_back();
            }
            s.conns[idx] = std::make_unique<ServiceConn>(*this, s, idx, ring_, svc_limits_);
            c = s.conns[idx].get();
            s.open++;
            m_.service_connections.add(1);
            c->connect_start = now_ns();
            if (auto st = c->s.connect(s.addr); !st) {
                // socket() failed (EMFILE...): no operation is in flight on c, so it never
                // reports on_closed -- give its pool slot back here, or the upstream would
                // stay at `pool` open connections and answer 504 for good.
                spdlog::warn("service {}: {}", s.name, st.error().message);
                s.conns[idx].reset();
                s.free_slots.push_back(idx);
                s.open--;
                m_.service_connections.add(-1);
                m_.service_errors.inc();
                Job* j = s.queue.front();
                s.queue.pop_front();
                fail(j, 502, "service connection failed\n");
                continue;
            }
        } else if (depth > 1) {
            // Every connection is busy and the pool is full: pipeline behind the least
            // loaded one that has room.
            for (auto& cp : s.conns)
                if (cp && !cp->s.closing() && cp->jobs.size() < depth &&
                    (!c || cp->jobs.size() < c->jobs.size()))
                    c = cp.get();
            if (!c) break;
        } else {
            break;
        }
        assign(*c, s, std::min(depth - std::min(depth, c->jobs.size()), s.queue.size()));
    }
    m_.service_queue.set(0);
    for (auto& x : services_) m_.service_queue.add(static_cast<int64_t>(x.queue.size()));
}

// The next n queued jobs go to c: their requests leave in one write.
void Egress::assign(ServiceConn& c, Service& s, size_t n) {
    const bool was_empty = c.jobs.empty();
    for (size_t k = 0; k < n && !s.queue.empty(); ++k) {
        Job* j = take(s);
        c.s.out().append(j->request);
        c.jobs.push_back(j);
        j->attempts++;
        m_.service_requests.inc();
    }
    if (n == 0) return;
    if (was_empty) start_answer(c);
    c.s.flush();
    m_.service_writes.inc();
}

// The next job for the service.  With a batch endpoint (batch_path), the client requests at
// the head of the queue go together as one POST whose body is their HTTP/1.1 pipeline
// (application/http, RFC 9112 10.1); the service answers with the pipeline of their answers.
// HEAD stays out (its answer has no body to delimit); a re-queued batch goes as it was.
Job* Egress::take(Service& s) {
    auto batchable = [](const Job* j) { return j->batch.empty() && !j->head; };
    Job* j = s.queue.front();
    s.queue.pop_front();
    if (s.cfg.batch_path.empty() || s.batch_off || !batchable(j) || s.queue.empty() ||
        !batchable(s.queue.front()))
        return j;
    Job* b = new_job();
    b->svc = &s;
    b->start = j->start;
    b->idempotent = true;
    std::string body;
    const size_t max_count = std::max<uint32_t>(2, s.cfg.max_batch);
    const uint64_t max_bytes = svc_limits_.max_body_bytes;
    while (true) {
        b->batch.push_back(j);
        b->idempotent = b->idempotent && j->idempotent;
        body.append(j->request);
        if (s.queue.empty() || b->batch.size() >= max_count || !batchable(s.queue.front()) ||
            body.size() + s.queue.front()->request.size() > max_bytes)
            break;
        j = s.queue.front();
        s.queue.pop_front();
    }
    auto& q = b->request;
    q.append("POST ").append(s.cfg.batch_path).append(" HTTP/1.1\r\n");
    q.append("Host: ").append(s.cfg.service->text).append("\r\n");
    q.append("Content-Type: application/http; msgtype=request\r\n");
    q.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n\r\n");
    q.append(body);
    m_.service_batches.inc();
    return b;
}

// The answer to a batch request: each of its requests gets its own answer out of it.
void Egress::complete_batch(Job* b, int status, std::string_view headers, std::string_view body) {
    auto subs = std::exchange(b->batch, {});
    Service& s = *b->svc;
    free_job(b);
    if (status == 404 || status == 405 || status == 501) {
        // No batch endpoint there: forward one by one from now on.  The service did not
        // process these requests, so they go again, first in line.
        spdlog::warn("service {}: {} answered {}: batching off", s.name, s.cfg.batch_path, status);
        s.batch_off = true;
        for (auto it = subs.rbegin(); it != subs.rend(); ++it) s.queue.push_front(*it);
        return;
    }
    size_t i = 0;
    if (status == 200) {
        if (!batch_parser_)
            batch_parser_ = std::make_unique<HttpParser>(HttpParser::Mode::Response, svc_limits_);
        auto& p = *batch_parser_;
        p.reset();
        while (i < subs.size() && !body.empty()) {
            auto pr = p.feed(body);
            if (pr.state != HttpParser::State::Complete) break;
            body.remove_prefix(std::min(pr.consumed, body.size()));
            complete(subs[i++], p.status, p.headers, p.body);
            p.next();
        }
        // Processed or not is unknown for the rest: answered, never sent again.
        for (; i < subs.size(); ++i) {
            m_.service_errors.inc();
            fail(subs[i], 502, "batch answer from the service is short or malformed\n");
        }
        p.release_buffers();
        return;
    }
    for (Job* j : subs) complete(j, status, headers, body);
}

// The parser is set up for the answer to jobs.front().
void Egress::start_answer(ServiceConn& c) {
    c.got_bytes = false;
    c.parser.next();
    c.parser.expect_no_body(c.jobs.front()->head);
}

// The connection ends with jobs still on it: jobs.front() (already handled by the caller)
// is gone; the rest were written but not answered, so the service may have executed them.
// Only what may safely run twice goes back to the head of the queue, in order, for a fresh
// connection, once (RFC 9110 9.2.2, 9112 9.3.1): an idempotent method, or any request when the
// service said it would not process them (Connection: close, RFC 9112 9.6), which costs no
// attempt.  The rest is answered 502: a POST is never executed twice.
void Egress::requeue_or_fail(ServiceConn& c, bool not_processed) {
    while (!c.jobs.empty()) {
        Job* j = c.jobs.back();
        c.jobs.pop_back();
        if (not_processed) j->attempts--;
        if (j->attempts < 2 && (not_processed || j->idempotent)) {
            m_.service_retries.inc();
            c.svc.queue.push_front(j);
        } else {
            m_.service_errors.inc();
            fail(j, 502, "service closed the connection\n");
        }
    }
}

void Egress::conn_connect(ServiceConn& c, int err) {
    if (!err) return;
    m_.service_errors.inc();
    auto why =
        fmt::format("service {} unavailable: {}\n", c.svc.cfg.service->text, std::strerror(err));
    while (!c.jobs.empty()) {
        Job* j = c.jobs.front();
        c.jobs.pop_front();
        fail(j, 502, why);
    }
}

void Egress::conn_data(ServiceConn& c, std::string_view data) {
    while (true) {
        if (c.jobs.empty()) {
            c.s.close();  // unsolicited bytes: this connection is out of sync
            return;
        }
        c.got_bytes = true;
        auto p = c.parser.feed(data);
        data.remove_prefix(std::min(p.consumed, data.size()));
        if (p.state == HttpParser::State::Incomplete) return;
        Job* j = c.jobs.front();
        c.jobs.pop_front();
        if (p.state == HttpParser::State::Error) {
            m_.service_errors.inc();
            fail(j, 502, fmt::format("bad response from service: {}\n", c.parser.error_name()));
            requeue_or_fail(c, false);
            c.s.close();
            return;
        }
        if (j->head && c.parser.content_length())  // HEAD: the length a GET would have
            c.parser.headers.append(
                fmt::format("Content-Length: {}\r\n", *c.parser.content_length()));
        complete(j, c.parser.status, c.parser.headers, c.parser.body);
        if (!c.parser.keep_alive()) {
            // The service closes after this answer: what was pipelined behind it was not
            // processed and goes to another connection.
            requeue_or_fail(c, true);
            c.s.close();
            return;
        }
        if (c.jobs.empty()) {
            if (!data.empty() || draining_) {
                c.s.close();
                return;
            }
            c.reused = true;
            c.idle_since = now_ns();
            c.svc.idle.push_back(&c);
            dispatch(c.svc);
            return;
        }
        start_answer(c);
        if (data.empty()) return;
    }
}

void Egress::conn_closed(ServiceConn& c) {
    Service& s = c.svc;
    if (!c.jobs.empty()) {
        Job* j = c.jobs.front();
        c.jobs.pop_front();
        auto p = c.parser.feed_eof();
        if (p.state == HttpParser::State::Complete) {
            complete(j, c.parser.status, c.parser.headers, c.parser.body);
            requeue_or_fail(c, false);
        } else if (c.reused && !c.got_bytes && j->attempts < 2 && j->idempotent) {
            // The service closed a keep-alive connection as we reused it: an idempotent
            // request is retried once (a POST may have been executed: 502).
            c.jobs.push_front(j);
            requeue_or_fail(c, false);
        } else {
            m_.service_errors.inc();
            fail(j, 502, "service closed the connection\n");
            requeue_or_fail(c, false);
        }
    }
    std::erase(s.idle, &c);
    size_t idx = c.index;
    s.conns[idx].reset();  // destroys c
    s.free_slots.push_back(idx);
    s.open--;
    m_.service_connections.add(-1);
    dispatch(s);
}

void Egress::complete(Job* j, int status, std::string_view headers, std::string_view body) {
    if (!j->batch.empty()) {
        complete_batch(j, status, headers, body);
        return;
    }
    if (status >= 0 && status < 600) m_.status[static_cast<size_t>(status)].inc();
    auto it = outs_.find(j->channel_id);
    if (it != outs_.end() && it->second.epoch == j->channel_epoch) {
        auto& o = it->second;
        ResponseRecord r{j->id, static_cast<uint16_t>(status), headers, body};
        size_t sz = FrameBuilder::response_size(r);
        if (o.count > 0 &&
            (o.cur.size() + sz > cfg_->channel.max_frame_bytes || o.count == 65535)) {
            FrameBuilder fb(o.cur);
            // finish() needs the builder's count: rebuild header in place.
            FrameHeader h;
            h.type = FrameType::Responses;
            h.count = o.count;
            h.length = static_cast<uint32_t>(o.cur.size() - kFrameHeaderBytes);
            encode_header(o.cur.data(), h);
            o.ready.push_back(std::move(o.cur));
            o.cur.clear();
            o.count = 0;
        }
        if (o.count == 0) {
            FrameBuilder fb(o.cur);
            fb.begin(FrameType::Responses);
        }
        FrameBuilder fb(o.cur);
        fb.add_response(r);
        o.count++;
    }
    free_job(j);
}

void Egress::fail(Job* j, int status, std::string_view why) {
    complete(j, status, "Content-Type: text/plain\r\n", why);
}

void Egress::flush_out() {
    for (auto it = outs_.begin(); it != outs_.end();) {
        const uint32_t id = it->first;
        ChanOut& o = it->second;
        ++it;  // a failed send() may take the channel down: on_channel_down erases o
        if (o.count > 0) {
            FrameHeader h;
            h.type = FrameType::Responses;
            h.count = o.count;
            h.length = static_cast<uint32_t>(o.cur.size() - kFrameHeaderBytes);
            encode_header(o.cur.data(), h);
            o.count = 0;
            if (o.ready.empty() && o.ch->can_send()) {
                auto st = o.ch->send(o.cur, 0);
                if (!outs_.contains(id)) continue;  // channel lost: the ingress answers 502
                if (st) {
                    o.cur.clear();
                    continue;
                }
            }
            // No credit (or, on RDMA, no room in the peer's large-frame ring): keep it.
            o.ready.push_back(std::move(o.cur));
            o.cur.clear();
        }
        while (!o.ready.empty() && o.ch->can_send()) {
            auto st = o.ch->send(o.ready.front(), 0);
            if (!outs_.contains(id)) break;
            if (!st) break;  // wait for credits / ring space
            o.ready.pop_front();
        }
    }
}

void Egress::sweep(int64_t now) {
    for (auto& s : services_) {
        for (auto& cp : s.conns) {
            if (!cp || cp->s.closing()) continue;
            auto& c = *cp;
            if (!c.jobs.empty() && !c.s.connected() &&
                now - c.connect_start > s.cfg.service_connect_timeout_ms * kMs) {
                m_.service_errors.inc();
                for (Job* j : std::exchange(c.jobs, {})) fail(j, 502, "service connect timeout\n");
                c.s.close();
            } else if (!c.jobs.empty() &&
                       now - c.jobs.front()->start > s.cfg.service_timeout_ms * kMs) {
                // The oldest answer is overdue; everything pipelined behind it waits on it.
                for (Job* j : std::exchange(c.jobs, {})) {
                    m_.timeouts.inc();
                    fail(j, 504, "service did not answer in time\n");
                }
                c.s.close();
            } else if (c.jobs.empty() && draining_) {
                c.s.close();
            }
        }
        while (!s.queue.empty() && now - s.queue.front()->start > s.cfg.service_timeout_ms * kMs) {
            Job* j = s.queue.front();
            s.queue.pop_front();
            m_.timeouts.inc();
            fail(j, 504, "service did not answer in time\n");
        }
    }
    if (metrics_srv_) metrics_srv_->sweep(now);
    // Channel counters: closed channels plus the live ones.
    ChannelStats t = dead_stats_;
    int64_t up = 0, avail = 0, owed = 0;
    for (auto& [id, ch] : live_) {
        const auto& s = ch->stats();
        t.bytes_tx += s.bytes_tx;
        t.bytes_rx += s.bytes_rx;
        t.frames_tx += s.frames_tx;
        t.frames_rx += s.frames_rx;
        t.credit_stalls += s.credit_stalls;
        t.connects += s.connects;
        up += ch->up() ? 1 : 0;
        avail += ch->credits_available();
        owed += ch->credits_owed();
    }
    cm_->up.set(up);
    cm_->credits_available.set(avail);
    cm_->credits_owed.set(owed);
    cm_->bytes_tx.v.store(t.bytes_tx);
    cm_->bytes_rx.v.store(t.bytes_rx);
    cm_->frames_tx.v.store(t.frames_tx);
    cm_->frames_rx.v.store(t.frames_rx);
    cm_->credit_stalls.v.store(t.credit_stalls);
    cm_->connects.v.store(t.connects);
    cm_->disconnects.v.store(t.disconnects);
    m_.inflight.set(static_cast<int64_t>(jobs_live_));
}

int Egress::run(const ReadyFn& ready) {
    ready("", this);
    next_sweep_ = now_ns();
    while (true) {
        int64_t now = refresh_loop_clock();
        int64_t next = std::min(next_sweep_, transport_->tick(now));
        ring_.run_once(std::max<int64_t>(0, next - now));
        flush_out();
        now = now_ns();
        if (now >= next_sweep_) {
            sweep(now);
            next_sweep_ = now + (draining_ ? 20 : 100) * kMs;
        }
        if (draining_) {
            bool pending = jobs_live_ > 0;
            for (auto& [id, o] : outs_) pending = pending || !o.ready.empty() || o.count > 0;
            if ((!pending && transport_->passive_count() == 0) || now > drain_deadline_) break;
            if (!pending)
                for (auto& [id, o] : outs_) o.ch->close();
        }
    }
    return 0;
}

}  // namespace

int run_egress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done) {
    Egress w(std::move(ctx));
    if (auto st = w.init(); !st) {
        ready(st.error().message, nullptr);
        return 1;
    }
    int rc = w.run(ready);
    done();  // before w is destroyed: the main thread forgets the handle first
    return rc;
}

}  // namespace sv
