// Egress: dispatch to the service over a pool of keep-alive connections (pipelining, the
// batch endpoint), reading its answers, and what happens when a connection ends.
#include <spdlog/spdlog.h>

#include "egress_impl.hpp"

namespace sv::egress_detail {

void Egress::dispatch(Service& s) {
    const size_t depth = std::max<uint32_t>(1, s.cfg.pipeline);
    while (!s.queue.empty()) {
        ServiceConn* c = nullptr;
        // An idle connection being closed (bytes nobody asked for, a drain) stays listed until
        // its on_closed: a request written to it would never be sent (a POST answered 502).
        while (!s.idle.empty() && s.idle.back()->s.closing()) s.idle.pop_back();
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
            m_.count_copy(CopyStage::Parse, p.headers.size() + p.body.size());
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
        m_.count_copy(CopyStage::Parse, c.parser.headers.size() + c.parser.body.size());
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
            m_.count_copy(CopyStage::Parse, c.parser.headers.size() + c.parser.body.size());
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

}  // namespace sv::egress_detail
