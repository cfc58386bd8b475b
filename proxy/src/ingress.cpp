// Ingress role: HTTP/1.1 front end on io_uring, routing, admission, dynamic batching,
// and the channel to the egress hosts.  This file: configuration, start, the event loop and
// drain (the phases: ingress_impl.hpp).
#include <spdlog/spdlog.h>

#include "ingress_impl.hpp"

namespace sv::ingress_detail {

static BatchParams batch_params(const UpstreamConfig& u) {
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

void Client::on_data(StreamConn&, std::string_view data) {
    w.on_client_data(*this, data);
}
void Client::on_closed(StreamConn&) {
    w.on_client_closed(*this);
}
void Client::on_drained(StreamConn&) {
    w.on_client_drained(*this);
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
        m_.rdma = true;
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

}  // namespace sv::ingress_detail

namespace sv {

int run_ingress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done) {
    ingress_detail::Ingress w(std::move(ctx));
    if (auto st = w.init(); !st) {
        ready(st.error().message, nullptr);
        return 1;
    }
    int rc = w.run(ready);
    done();  // before w is destroyed: the main thread forgets the handle first
    return rc;
}

}  // namespace sv
