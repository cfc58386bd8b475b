// Egress: request batches in from the channels (one job per request), answers back in
// batches (everything completed in one loop turn leaves in one frame per channel).
#include <spdlog/spdlog.h>

#include "egress_impl.hpp"

namespace sv::egress_detail {

void Egress::on_channel_up(Channel& ch) {
    auto& o = outs_[ch.id];
    o.ch = &ch;
    o.epoch = ch.epoch;
    o.cur.clear();
    o.in_reg = false;
    o.count = 0;
    o.ready.clear();
    live_[ch.id] = &ch;
    if (draining_) ch.goodbye();
}

void Egress::on_channel_down(Channel& ch) {
    dead_stats_.add(ch.stats());  // its disconnects count this loss
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
        m_.count_copy(CopyStage::Deliver, q.size());
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
            (o.frame().size() + sz > cfg_->channel.max_frame_bytes || o.count == 65535)) {
            o.seal();
            o.park();
        }
        o.add(r, sz);
        m_.count_copy(CopyStage::Frame, sz);
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
            o.seal();
            if (o.ready.empty() && o.ch->can_send()) {
                auto st = o.ch->send(o.frame(), 0);
                if (!outs_.contains(id)) continue;  // channel lost: the ingress answers 502
                if (st) {
                    o.cur.clear();
                    o.in_reg = false;
                    continue;
                }
            }
            // No credit (or, on RDMA, no room in the peer's large-frame ring): keep it.
            o.park();
        }
        while (!o.ready.empty() && o.ch->can_send()) {
            auto st = o.ch->send(o.ready.front(), 0);
            if (!outs_.contains(id)) break;
            if (!st) break;  // wait for credits / ring space
            o.ready.pop_front();
        }
    }
}

}  // namespace sv::egress_detail
