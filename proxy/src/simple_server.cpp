#include "simple_server.hpp"

#include <algorithm>
#include <charconv>

namespace sv {

void write_response(std::string& o, int status, std::string_view headers, std::string_view body,
                    bool keep_alive, bool head, bool http10) {
    char num[24];
    o.append("HTTP/1.1 ");
    auto r = std::to_chars(num, num + sizeof num, status);
    o.append(num, r.ptr);
    o.push_back(' ');
    o.append(http_reason(status));
    o.append("\r\n");
    o.append(headers);
    // 1xx, 204 and 304 have no body and, here, no Content-Length (RFC 9110 8.6).
    const bool bodiless = (status >= 100 && status < 200) || status == 204 || status == 304;
    bool length_given = bodiless;
    if (bodiless) head = true;
    if (head && !bodiless) {
        // Headers are "Name: value\r\n" lines; names are case-insensitive.
        constexpr std::string_view cl = "content-length:";
        for (size_t at = 0; at < headers.size() && !length_given;) {
            size_t eol = headers.find('\n', at);
            auto line = headers.substr(at, eol == std::string_view::npos ? eol : eol - at);
            length_given = line.size() >= cl.size() &&
                           std::equal(cl.begin(), cl.end(), line.begin(), [](char a, char b) {
                               return a == (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b);
                           });
            at = eol == std::string_view::npos ? headers.size() : eol + 1;
        }
    }
    if (!length_given) {
        o.append("Content-Length: ");
        r = std::to_chars(num, num + sizeof num, body.size());
        o.append(num, r.ptr);
        o.append("\r\n");
    }
    if (!keep_alive)
        o.append("Connection: close\r\n");
    else if (http10)
        o.append("Connection: keep-alive\r\n");
    o.append("\r\n");
    if (!head) o.append(body);
}

struct SimpleServer::Conn final : StreamConn::Events {
    SimpleServer& srv;
    size_t index;
    StreamConn s;
    HttpParser parser;
    SimpleResponse resp;
    int64_t last_active = 0, started = 0;
    bool closed = false;

    Conn(SimpleServer& sv, size_t i, int fd)
        : srv(sv), index(i), s(sv.ring_, *this), parser(HttpParser::Mode::Request, sv.limits_) {
        last_active = now_ns();
        s.attach(fd);
    }

    void on_data(StreamConn&, std::string_view data) override {
        last_active = now_ns();
        while (!data.empty() && !s.closing()) {
            if (!parser.started()) started = last_active;
            auto p = parser.feed(data);
            data.remove_prefix(p.consumed);
            if (p.state == HttpParser::State::Error) {
                write_response(s.out(), p.status, "Content-Type: text/plain\r\n",
                               std::string(http_reason(p.status)) + "\n", false);
                s.close_after_flush(true);
                return;
            }
            if (p.state == HttpParser::State::Incomplete) {
                if (parser.headers_complete() && parser.expect_continue() && parser.body.empty())
                    s.out().append("HTTP/1.1 100 Continue\r\n\r\n"), s.flush();
                break;
            }
            resp.status = 200;
            resp.content_type = "text/plain";
            resp.body.clear();
            resp.extra_headers.clear();
            srv.handler_(parser, resp);
            bool keep = parser.keep_alive() && !srv.stopping_;
            std::string hdr = "Content-Type: " + resp.content_type + "\r\n" + resp.extra_headers;
            write_response(s.out(), resp.status, hdr, resp.body, keep, parser.method == "HEAD",
                           parser.http10());
            parser.next();
            if (!keep) {
                s.close_after_flush(true);
                return;
            }
        }
        s.flush();
    }

    void on_closed(StreamConn&) override {
        // Defer destruction to the server: we are inside our own StreamConn's callback,
        // which permits destroying it.
        SimpleServer& server = srv;
        size_t i = index;
        server.conns_[i].reset();  // destroys *this; touch no member after this line
        server.free_.push_back(i);
        server.open_--;
    }
};

SimpleServer::SimpleServer(Ring& ring, HttpLimits limits, int64_t idle_timeout_ms, Handler h)
    : ring_(ring), limits_(limits), idle_ns_(idle_timeout_ms * kMs), handler_(std::move(h)) {}

SimpleServer::~SimpleServer() = default;

Status SimpleServer::listen(const Endpoint& ep, bool reuseport) {
    acceptor_ = std::make_unique<Acceptor>(ring_, [this](int fd) { on_accept(fd); });
    return acceptor_->listen(ep, reuseport);
}

void SimpleServer::on_accept(int fd) {
    size_t i;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        i = conns_.size();
        conns_.emplace_back();
    }
    conns_[i] = std::make_unique<Conn>(*this, i, fd);
    open_++;
}

void SimpleServer::stop() {
    stopping_ = true;
    if (acceptor_) acceptor_->stop();
    for (auto& c : conns_)
        if (c && !c->parser.started()) c->s.close_after_flush(true);
}

void SimpleServer::sweep(int64_t now) {
    for (auto& c : conns_) {
        if (!c || c->s.closing()) continue;
        if (c->s.lingering_since()) {
            if (now - c->s.lingering_since() > 2000 * kMs) c->s.close();
            continue;
        }
        bool idle = !c->parser.started() && now - c->last_active > idle_ns_;
        bool slow = c->parser.started() && now - c->started > idle_ns_;
        bool stuck = c->s.send_started_ns() && now - c->s.send_started_ns() > idle_ns_;
        if (idle || slow || stuck || (stopping_ && !c->parser.started() && c->s.unsent() == 0))
            c->s.close();
    }
}

}  // namespace sv
