// Ingress: batching per upstream (the batching rule decides when) and sending batches over
// the channels that have credit.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>

#include "ingress_impl.hpp"

namespace sv::ingress_detail {

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

// The bytes of the next batch's frame, as build_batch() will assemble it (the same rule).
size_t Ingress::batch_bytes(const Upstream& u, uint32_t target, uint32_t max_frame) const {
    size_t bytes = FrameBuilder::requests_overhead(u.name);
    uint32_t n = 0;
    for (const auto& e : u.queue) {
        if (n >= target || n >= 65535) break;
        if (!queued_valid(e)) continue;
        const auto& c = *clients_[e.conn];
        RequestRecord rec{c.id, 0, c.parser.method, c.parser.url, c.parser.headers, c.parser.body};
        size_t sz = FrameBuilder::request_size(rec);
        if (n > 0 && bytes + sz > max_frame) break;
        if (bytes + sz > max_frame) continue;  // answered 502, not in the frame
        bytes += sz;
        ++n;
    }
    return bytes;
}

// Moves up to `target` queued requests into the frame fb; returns how many.
template <class Builder>
uint32_t Ingress::build_batch(Upstream& u, Builder& fb, const Channel& ch, uint32_t batch,
                              uint32_t target, uint32_t max_frame, int64_t now) {
    fb.begin_requests(u.name);
    uint32_t n = 0;
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
        m_.count_copy(CopyStage::Frame, sz);
        c.phase = Client::Phase::Sent;
        c.batch = batch;
        c.channel_id = ch.id;
        c.channel_epoch = ch.epoch;
        u.m->queue_delay.observe((now - c.arrival) / 1e9);
        u.sent++;
        ++n;
    }
    return n;
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
        size_t ways = 0;
        for (auto i : u.channels)
            ways += channels_[i]->up() && !channels_[i]->peer_draining() ? 1 : 0;
        const uint32_t target = u.policy.take(u.queue.size(), ways);
        // Assemble the frame where the transport sends it from (RDMA: a chunk of its
        // registered pool, no copy when it leaves), else in our own buffer.
        const size_t bytes = batch_bytes(u, target, max_frame);
        std::span<char> reg = ch->frame_buffer(bytes);
        std::string_view frame;
        uint32_t n;
        if (!reg.empty()) {
            SpanBuf sb(reg.data(), reg.size());
            SpanFrameBuilder fb(sb);
            n = build_batch(u, fb, *ch, batch, target, max_frame, now);
            frame = fb.finish();
            if (sb.overflowed()) {  // batch_bytes() and build_batch() disagree: a bug
                spdlog::error("upstream {}: a batch overflowed its registered buffer", u.name);
                frame = {};
            }
        } else {
            FrameBuilder fb(frame_);
            n = build_batch(u, fb, *ch, batch, target, max_frame, now);
            frame = fb.finish();
        }
        if (n == 0) {
            if (!reg.empty()) ch->release_frame_buffer();  // nothing in it: back to the pool
            u.batch_free.push_back(batch);
            continue;
        }
        u.batch_remaining[batch] = n;
        u.batch_size[batch] = n;
        u.batch_sent[batch] = now;
        u.inflight_batches++;
        u.m->batches.inc();
        u.m->batch_size.observe(n);
        Status st = frame.empty() ? make_error(Errc::NoCredit, "batch overflowed its buffer")
                                  : ch->send(frame, u.priority);
        if (!st) {
            // Not posted: the batch is built again when it goes, and the chunk it was built
            // in goes back to the pool meanwhile (the other channels may need it).
            if (!reg.empty()) ch->release_frame_buffer();
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

}  // namespace sv::ingress_detail
