#include "http.hpp"

#include <strings.h>

#include <algorithm>
#include <array>
#include <climits>

namespace sv {

namespace {

bool ieq(std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool hop_by_hop(std::string_view name) {
    static constexpr std::array<std::string_view, 9> names = {
        "connection", "keep-alive", "proxy-connection", "transfer-encoding",
        "te",         "trailer",    "upgrade",          "content-length",
        "expect"};
    for (auto n : names)
        if (ieq(name, n)) return true;
    return false;
}

std::string lower(std::string_view v) {
    std::string o(v);
    for (auto& ch : o)
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return o;
}

// A field name is a token (RFC 9110 5.1, 5.6.2): no whitespace, in particular none before
// the colon (RFC 9112 5.1), which http-parser lets through into the name.
bool token(std::string_view v) {
    if (v.empty()) return false;
    for (unsigned char ch : v) {
        bool ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= 'A' && ch <= 'Z') ||
                  std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(ch)) !=
                      std::string_view::npos;
        if (!ok) return false;
    }
    return true;
}

std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

HttpParser* self(http_parser* p) {
    return static_cast<HttpParser*>(p->data);
}

}  // namespace

HttpParser::HttpParser(Mode mode, HttpLimits limits) : mode_(mode), limits_(limits) {
    s_.on_message_begin = cb_begin;
    s_.on_url = cb_url;
    s_.on_status = cb_status;
    s_.on_header_field = cb_field;
    s_.on_header_value = cb_value;
    s_.on_headers_complete = cb_headers_complete;
    s_.on_body = cb_body;
    s_.on_message_complete = cb_complete;
    reset();
}

void HttpParser::reset() {
    http_parser_init(&p_, mode_ == Mode::Request ? HTTP_REQUEST : HTTP_RESPONSE);
    p_.data = this;
    next();
}

void HttpParser::next() {
    auto e = HTTP_PARSER_ERRNO(&p_);
    if (e == HPE_PAUSED) {
        http_parser_pause(&p_, 0);
    } else if (e != HPE_OK) {
        // After an error the parser cannot continue (the connection is being closed).
        http_parser_init(&p_, mode_ == Mode::Request ? HTTP_REQUEST : HTTP_RESPONSE);
        p_.data = this;
    }
    method.clear();
    url.clear();
    headers.clear();
    body.clear();
    field_.clear();
    value_.clear();
    status = 0;
    in_value_ = false;
    header_bytes_ = 0;
    error_status_ = 0;
    started_ = headers_done_ = complete_ = expect_continue_ = false;
    keep_alive_ = true;
    http10_ = false;
    content_length_.reset();
    conn_tokens_.clear();
    if (mode_ == Mode::Response) {
        // Each response follows exactly one request: start clean.
        http_parser_init(&p_, HTTP_RESPONSE);
        p_.data = this;
    }
}

void HttpParser::release_buffers() {
    constexpr size_t keep = 16 * 1024;
    auto shrink = [](std::string& x) {
        if (x.capacity() > keep) std::string().swap(x);
    };
    shrink(body);
    shrink(headers);
    shrink(url);
    shrink(field_);
    shrink(value_);
}

bool has_header(std::string_view headers, std::string_view name) {
    size_t at = 0;
    while (at < headers.size()) {
        size_t eol = headers.find('\n', at);
        auto line = headers.substr(at, eol == std::string_view::npos ? eol : eol - at);
        auto colon = line.find(':');
        if (colon != std::string_view::npos && ieq(trim(line.substr(0, colon)), name)) return true;
        if (eol == std::string_view::npos) break;
        at = eol + 1;
    }
    return false;
}

std::string_view HttpParser::path() const {
    std::string_view u(url);
    auto q = u.find_first_of("?#");
    return q == std::string_view::npos ? u : u.substr(0, q);
}

const char* HttpParser::error_name() const {
    return http_errno_name(static_cast<http_errno>(HTTP_PARSER_ERRNO(&p_)));
}

bool HttpParser::count_header_bytes(size_t n) {
    header_bytes_ += n;
    if (header_bytes_ > limits_.max_header_bytes) {
        error_status_ = mode_ == Mode::Request ? 431 : 502;
        return false;
    }
    return true;
}

bool HttpParser::commit_header() {
    if (field_.empty()) return true;
    if (!token(field_)) {
        error_status_ = mode_ == Mode::Request ? 400 : 502;
        return false;
    }
    if (ieq(field_, "expect")) {
        if (ieq(value_, "100-continue")) expect_continue_ = true;
    } else if (ieq(field_, "connection")) {
        // The headers it names are hop-by-hop as well (RFC 9110 7.6.1).
        std::string_view v(value_);
        while (!v.empty()) {
            auto comma = v.find(',');
            auto tok = trim(v.substr(0, comma));
            if (!tok.empty()) conn_tokens_.append(",").append(lower(tok)).append(",");
            if (comma == std::string_view::npos) break;
            v.remove_prefix(comma + 1);
        }
    } else if (!hop_by_hop(field_)) {
        headers.append(field_);
        headers.append(": ");
        headers.append(value_);
        headers.append("\r\n");
    }
    field_.clear();
    value_.clear();
    in_value_ = false;
    return true;
}

int HttpParser::cb_begin(http_parser* p) {
    self(p)->started_ = true;
    return 0;
}

int HttpParser::cb_url(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (!s->count_header_bytes(n)) return -1;
    if (s->url.size() + n > kMaxUrlBytes) {
        s->error_status_ = 414;
        return -1;
    }
    s->url.append(at, n);
    return 0;
}

int HttpParser::cb_status(http_parser* p, const char*, size_t n) {
    return self(p)->count_header_bytes(n) ? 0 : -1;
}

int HttpParser::cb_field(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (!s->count_header_bytes(n + 4)) return -1;
    if (s->headers_done_) return 0;  // a chunked message's trailer: dropped, not a header
    if (s->in_value_ && !s->commit_header()) return -1;
    s->field_.append(at, n);
    return 0;
}

int HttpParser::cb_value(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (!s->count_header_bytes(n)) return -1;
    if (s->headers_done_) return 0;
    s->value_.append(at, n);
    s->in_value_ = true;
    return 0;
}

int HttpParser::cb_headers_complete(http_parser* p) {
    auto* s = self(p);
    if (!s->commit_header()) return -1;
    s->headers_done_ = true;
    if (!s->conn_tokens_.empty()) {
        std::string kept;
        std::string_view h(s->headers);
        while (!h.empty()) {
            size_t eol = h.find('\n');
            auto line = h.substr(0, eol == std::string_view::npos ? h.size() : eol + 1);
            auto name = lower(trim(line.substr(0, line.find(':'))));
            if (s->conn_tokens_.find("," + name + ",") == std::string::npos) kept.append(line);
            h.remove_prefix(line.size());
        }
        s->headers.swap(kept);
    }
    if (s->mode_ == Mode::Request) {
        if (p->method == HTTP_CONNECT) {
            // A tunnel is not served; http-parser would end the message here and read what
            // follows (a body) as the next request.
            s->error_status_ = 501;
            return -1;
        }
        s->method = http_method_str(static_cast<http_method>(p->method));
    } else {
        s->status = p->status_code;
    }
    s->keep_alive_ = http_should_keep_alive(p) != 0;
    s->http10_ = p->http_major == 1 && p->http_minor == 0;
    // content_length is ULLONG_MAX when absent.
    if (p->content_length != ULLONG_MAX) s->content_length_ = p->content_length;
    if (p->content_length != ULLONG_MAX && p->content_length > s->limits_.max_body_bytes) {
        s->error_status_ = s->mode_ == Mode::Request ? 413 : 502;
        return -1;
    }
    if (p->content_length != ULLONG_MAX && p->content_length > 0)
        // Not the whole declared length: a client could claim 1 MiB and send 1 byte.
        s->body.reserve(static_cast<size_t>(std::min<uint64_t>(p->content_length, 16 * 1024)));
    if (s->mode_ == Mode::Response && s->no_body_) return 1;  // HEAD: skip body
    return 0;
}

int HttpParser::cb_body(http_parser* p, const char* at, size_t n) {
    auto* s = self(p);
    if (s->body.size() + n > s->limits_.max_body_bytes) {
        s->error_status_ = s->mode_ == Mode::Request ? 413 : 502;
        return -1;
    }
    s->body.append(at, n);
    return 0;
}

int HttpParser::cb_complete(http_parser* p) {
    auto* s = self(p);
    if (s->mode_ == Mode::Response && p->status_code / 100 == 1 && p->status_code != 101) {
        // Interim response (100 Continue): discard and wait for the final one.
        s->headers.clear();
        s->headers_done_ = false;
        s->header_bytes_ = 0;
        s->content_length_.reset();
        return 0;
    }
    s->complete_ = true;
    s->keep_alive_ = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1);
    return 0;
}

HttpParser::Progress HttpParser::result(size_t n) {
    Progress r;
    r.consumed = n;
    auto err = HTTP_PARSER_ERRNO(&p_);
    if (complete_) {
        r.state = State::Complete;
        return r;
    }
    if (err == HPE_OK || err == HPE_PAUSED) return r;
    r.state = State::Error;
    if (error_status_)
        r.status = error_status_;
    else if (err == HPE_HEADER_OVERFLOW)
        r.status = mode_ == Mode::Request ? 431 : 502;
    else
        r.status = mode_ == Mode::Request ? 400 : 502;
    return r;
}

HttpParser::Progress HttpParser::feed(std::string_view data) {
    if (complete_) return result(0);
    size_t n = http_parser_execute(&p_, &s_, data.data(), data.size());
    return result(n);
}

HttpParser::Progress HttpParser::feed_eof() {
    if (complete_) return result(0);
    http_parser_execute(&p_, &s_, nullptr, 0);
    auto r = result(0);
    if (r.state == State::Incomplete) {
        r.state = State::Error;
        r.status = mode_ == Mode::Request ? 400 : 502;
    }
    return r;
}

const char* http_reason(int s) {
    switch (s) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 301:
            return "Moved Permanently";
        case 302:
            return "Found";
        case 304:
            return "Not Modified";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 413:
            return "Payload Too Large";
        case 414:
            return "URI Too Long";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        default:
            return "Unknown";
    }
}

}  // namespace sv
