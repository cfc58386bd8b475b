// Ingress: answers from the channel to the clients, local answers (errors, timeouts), channel
// up/down, the periodic sweep (timeouts) and the metrics.
#include <spdlog/spdlog.h>

#include "ingress_impl.hpp"

namespace sv::ingress_detail {

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
    c.head = false;  // the next request's (set by dispatch); a local error answer has a body
    c.parser.release_buffers();  // a large body's buffer is not kept by an idle connection
    c.sent_continue = false;
    if (!c.keep_alive || draining_) {
        c.s.close_after_flush(true);
        account(c);
        return;
    }
    // A client that does not read its answers gets no more of them than the buffer holds:
    // its next pipelined request waits until they have gone (on_client_drained).
    c.out_full = c.s.unsent() > cfg_->ingress.connection_buffer_bytes;
    take_pending(c);
}

// The pipelined input waiting in `in` is taken up (while the answers fit), and reading
// resumes once `in` has room.
void Ingress::take_pending(Client& c) {
    if (!c.in.empty() && !c.s.closing() && !c.out_full && c.phase == Client::Phase::Reading) {
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

void Ingress::on_client_drained(Client& c) {
    if (!c.out_full) return;
    c.out_full = false;
    take_pending(c);
    over_memory(c);
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
        m_.count_copy(CopyStage::Deliver, r.headers.size() + r.body.size());
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
                // (a request waiting for the answers before it to go out is not late: the
                // client is, and send_timeout_ms is its bound)
                if ((c.parser.started() || !c.in.empty()) && !c.out_full) {
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
        cm.up.set(ch.up() ? 1 : 0);
        cm.credits_available.set(ch.credits_available());
        cm.credits_owed.set(ch.credits_owed());
        cm.store(ch.stats());
    }
}

}  // namespace sv::ingress_detail
