// HTTP/1.1 message parsing on top of http-parser 2.9, with size limits and the
// hop-by-hop header filtering a proxy needs.  Buffers are reused across messages.
#pragma once

#include <http_parser.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sv {

// The longest request target carried: the channel frame's URL length is 16 bits
// (frame.hpp); a longer one is answered 414, never cut.
constexpr size_t kMaxUrlBytes = 65535;

struct HttpLimits {
    size_t max_header_bytes = 8192;  // request line / status line + all headers
    uint64_t max_body_bytes = 1u << 20;
};

class HttpParser {
  public:
    enum class Mode { Request, Response };
    enum class State { Incomplete, Complete, Error };
    struct Progress {
        State state = State::Incomplete;
        size_t consumed = 0;
        int status = 0;  // on Error: HTTP status to answer with (400, 413, 431) or 502
    };

    HttpParser(Mode mode, HttpLimits limits);
    HttpParser(const HttpParser&) = delete;
    HttpParser& operator=(const HttpParser&) = delete;

    void set_limits(HttpLimits l) { limits_ = l; }
    // Response mode: the request was HEAD, so no body follows.
    void expect_no_body(bool v) { no_body_ = v; }

    Progress feed(std::string_view data);
    // Response mode: the peer closed; completes a read-until-close body.
    Progress feed_eof();
    // Start over for the next message on the same connection.
    void next();
    // Forget everything (new connection).
    void reset();
    // Give back large buffers (after a big message) so an idle connection holds little.
    void release_buffers();

    bool started() const { return started_; }
    bool headers_complete() const { return headers_done_; }
    bool expect_continue() const { return expect_continue_; }
    bool keep_alive() const { return keep_alive_; }
    // HTTP/1.0 peer: keep-alive must be confirmed with "Connection: keep-alive".
    bool http10() const { return http10_; }
    // The message's Content-Length header, if it had one (a HEAD response keeps it).
    std::optional<uint64_t> content_length() const { return content_length_; }
    const char* error_name() const;

    // Parsed message.  `headers` holds the end-to-end headers as "Name: value\r\n" lines;
    // hop-by-hop headers and Content-Length are dropped (the proxy re-frames bodies).
    std::string method;
    std::string url;
    std::string headers;
    std::string body;
    int status = 0;
    std::string_view path() const;

  private:
    static int cb_begin(http_parser*);
    static int cb_url(http_parser*, const char*, size_t);
    static int cb_status(http_parser*, const char*, size_t);
    static int cb_field(http_parser*, const char*, size_t);
    static int cb_value(http_parser*, const char*, size_t);
    static int cb_headers_complete(http_parser*);
    static int cb_body(http_parser*, const char*, size_t);
    static int cb_complete(http_parser*);
    bool count_header_bytes(size_t n);
    bool commit_header();
    Progress result(size_t n);

    Mode mode_;
    HttpLimits limits_;
    http_parser p_{};
    http_parser_settings s_{};
    std::string field_, value_;
    bool in_value_ = false;
    size_t header_bytes_ = 0;
    int error_status_ = 0;
    bool started_ = false, headers_done_ = false, complete_ = false;
    bool expect_continue_ = false, keep_alive_ = true, no_body_ = false, http10_ = false;
    std::optional<uint64_t> content_length_;
    std::string conn_tokens_;  // ",name,name," from Connection: (lower case), stripped too
};

// Whether "Name: value\r\n" lines contain a header called `name` (case-insensitive, exact).
bool has_header(std::string_view headers, std::string_view name);

const char* http_reason(int status);

}  // namespace sv
