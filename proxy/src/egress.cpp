// Egress role: receives request batches over the channel, forwards the requests to the
// unmodified service over a pool of keep-alive connections (up to `pipeline` requests
// pipelined on one connection: one write for all of them, answers parsed in order from the
// same reads), returns responses in batches (everything completed in one event-loop turn
// leaves in one frame per channel).
// This file: configuration, start, the event loop, drain, the job pool and the sweep (the
// phases: egress_impl.hpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "egress_impl.hpp"

namespace sv::egress_detail {

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
    // A service's answer goes back in one Responses frame: its headers get a quarter of the
    // frame (at most 64 KiB), its body what is left less as much again (the frame header
    // and its record fit in that), so a frame of any size the config allows (>= 4096) holds it.
    const uint64_t frame = cfg_->channel.max_frame_bytes;
    const uint64_t head = std::min<uint64_t>(64 * 1024, frame / 4);
    svc_limits_ = HttpLimits{static_cast<size_t>(head), frame - 2 * head};
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
        m_.rdma = true;
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

// f on every live channel.  f may take a channel down (an RDMA post that fails inside
// goodbye() or close()), and on_channel_down erases it from outs_: not a walk over outs_.
template <class F>
void Egress::each_channel(F&& f) {
    std::vector<std::pair<uint32_t, Channel*>> chans;
    chans.reserve(outs_.size());
    for (auto& [id, o] : outs_) chans.emplace_back(id, o.ch);
    for (auto [id, ch] : chans) {
        auto it = outs_.find(id);
        if (it != outs_.end() && it->second.ch == ch) f(*ch);
    }
}

void Egress::on_drain(int64_t now) {
    drain_deadline_ = now + cfg_->egress.drain_timeout_ms * kMs;
    transport_->stop_listening();
    if (metrics_srv_) metrics_srv_->stop();
    // Goodbye: ingress stops sending new batches here; outstanding ones still finish.
    each_channel([](Channel& ch) { ch.goodbye(); });
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
        t.add(ch->stats());
        up += ch->up() ? 1 : 0;
        avail += ch->credits_available();
        owed += ch->credits_owed();
    }
    cm_->up.set(up);
    cm_->credits_available.set(avail);
    cm_->credits_owed.set(owed);
    cm_->store(t);
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
            if (!pending) each_channel([](Channel& ch) { ch.close(); });
        }
    }
    return 0;
}

}  // namespace sv::egress_detail

namespace sv {

int run_egress_worker(WorkerContext ctx, const ReadyFn& ready, const DoneFn& done) {
    egress_detail::Egress w(std::move(ctx));
    if (auto st = w.init(); !st) {
        ready(st.error().message, nullptr);
        return 1;
    }
    int rc = w.run(ready);
    done();  // before w is destroyed: the main thread forgets the handle first
    return rc;
}

}  // namespace sv
