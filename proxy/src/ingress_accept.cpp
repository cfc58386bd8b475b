// Ingress: accepting clients, reading and parsing their requests, routing and admission
// (the request is queued for its upstream, or answered at once).
#include <spdlog/spdlog.h>

#include "ingress_impl.hpp"

namespace sv::ingress_detail {

static size_t usage(const Client& c) {
    return c.in.capacity() + c.parser.body.capacity() + c.parser.headers.capacity() +
           c.parser.url.capacity();
}

void Ingress::account(Client& c) {
    size_t u = usage(c);
    buffered_ = buffered_ + u - c.accounted;
    c.accounted = u;
}

// Over the worker's memory_limit_bytes: a connection still reading a request is shed with
// 503 + Retry-After (it has no other answer pending), so the total stays bounded.  One with
// no request under way (its last one was just answered, or it is closing after an answer)
// has nothing to answer: a 503 would be a second answer to its last request.
bool Ingress::over_memory(Client& c) {
    account(c);
    if (buffered_ <= cfg_->ingress.memory_limit_bytes) return false;
    if (c.phase != Client::Phase::Reading || c.s.closing() || c.s.closing_after_flush())
        return false;
    if (!c.parser.started() && c.in.empty()) return false;
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
    if (c.phase != Client::Phase::Reading || !c.in.empty() || c.out_full) {
        c.in.append(data);
        // A client pipelining ahead of its answers: stop reading from it (back-pressure)
        // until its answers have gone out, instead of buffering without bound.
        if (c.in.size() > cfg_->ingress.connection_buffer_bytes) c.s.pause_recv(true);
        if (c.phase == Client::Phase::Reading && !c.out_full) {
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
    m_.count_copy(CopyStage::Parse,
                  c.parser.url.size() + c.parser.headers.size() + c.parser.body.size());
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

void Ingress::on_client_closed(Client& c) {
    if (c.phase != Client::Phase::Reading) end_waiting(c);  // the answer, if any, is dropped
    buffered_ -= c.accounted;
    uint32_t i = c.index;
    clients_[i].reset();  // destroys c
    free_.push_back(i);
    open_--;
    m_.connections_open.set(static_cast<int64_t>(open_));
}

}  // namespace sv::ingress_detail
