// HTTP parsing: requests, limits, hop-by-hop filtering, responses.
#include <string>

#include "cunit_main.hpp"
#include "http.hpp"
#include "simple_server.hpp"

using namespace sv;
using S = HttpParser::State;

namespace {

HttpLimits lim() {
    return HttpLimits{256, 100};
}

void test_simple_and_pipelined() {
    HttpParser p(HttpParser::Mode::Request, lim());
    std::string in =
        "GET /echo?x=1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nX-Y: z\r\n\r\n"
        "POST /m HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    auto r = p.feed(in);
    CU_ASSERT_FATAL(r.state == S::Complete);
    CU_ASSERT_EQUAL(p.method, std::string("GET"));
    CU_ASSERT_EQUAL(p.url, std::string("/echo?x=1"));
    CU_ASSERT_EQUAL(std::string(p.path()), std::string("/echo"));
    CU_ASSERT_EQUAL(p.headers, std::string("Host: a\r\nX-Y: z\r\n"));  // Connection dropped
    CU_ASSERT_TRUE(p.keep_alive());
    CU_ASSERT(r.consumed < in.size());
    std::string rest = in.substr(r.consumed);
    p.next();
    auto r2 = p.feed(rest);
    CU_ASSERT_FATAL(r2.state == S::Complete);
    CU_ASSERT_EQUAL(r2.consumed, rest.size());
    CU_ASSERT_EQUAL(p.method, std::string("POST"));
    CU_ASSERT_EQUAL(p.body, std::string("abc"));
    CU_ASSERT_EQUAL(p.headers, std::string("Host: a\r\n"));  // Content-Length dropped
}

void test_byte_by_byte_chunked() {
    HttpParser p(HttpParser::Mode::Request, lim());
    std::string in =
        "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
        "chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    HttpParser::Progress r;
    for (size_t i = 0; i < in.size(); ++i) {
        r = p.feed(std::string_view(in).substr(i, 1));
        CU_ASSERT_EQUAL(r.consumed, 1u);
        if (i + 1 < in.size()) CU_ASSERT(r.state == S::Incomplete);
    }
    CU_ASSERT_FATAL(r.state == S::Complete);
    CU_ASSERT_EQUAL(p.body, std::string("abcde"));
    CU_ASSERT_EQUAL(p.headers, std::string("Host: a\r\n"));
}

void test_limits() {
    {
        HttpParser p(HttpParser::Mode::Request, lim());
        std::string in = "GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n";
        auto r = p.feed(in);
        CU_ASSERT(r.state == S::Error);
        CU_ASSERT_EQUAL(r.status, 431);
    }
    {
        HttpParser p(HttpParser::Mode::Request, lim());
        auto r = p.feed("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
        CU_ASSERT(r.state == S::Error);
        CU_ASSERT_EQUAL(r.status, 413);
    }
    {
        HttpParser p(HttpParser::Mode::Request, lim());
        std::string in = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n" +
                         std::string(100, 'x') + "\r\n1\r\ny\r\n0\r\n\r\n";
        auto r = p.feed(in);
        CU_ASSERT(r.state == S::Error);
        CU_ASSERT_EQUAL(r.status, 413);
    }
    {
        HttpParser p(HttpParser::Mode::Request, lim());
        auto r = p.feed("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n");
        CU_ASSERT(r.state == S::Incomplete);  // exactly at the limit is fine
    }
}

void test_malformed() {
    const char* bad[] = {"BLAH / HTTP/1.1\r\n\r\n", "GET / HTTP/9.9x\r\n\r\n",
                         "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
                         "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"};
    for (auto* b : bad) {
        HttpParser p(HttpParser::Mode::Request, lim());
        auto r = p.feed(b);
        CU_ASSERT(r.state == S::Error);
        CU_ASSERT_EQUAL(r.status, 400);
        p.next();  // must not abort after an error
        p.reset();
        CU_ASSERT(p.feed("GET / HTTP/1.1\r\n\r\n").state == S::Complete);
    }
}

void test_expect_and_close() {
    HttpParser p(HttpParser::Mode::Request, lim());
    auto r = p.feed(
        "PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: "
        "2\r\n\r\n");
    CU_ASSERT(r.state == S::Incomplete);
    CU_ASSERT_TRUE(p.headers_complete());
    CU_ASSERT_TRUE(p.expect_continue());
    r = p.feed("hi");
    CU_ASSERT(r.state == S::Complete);
    CU_ASSERT_FALSE(p.keep_alive());
    CU_ASSERT(p.headers.empty());
    HttpParser q(HttpParser::Mode::Request, lim());
    CU_ASSERT(q.feed("GET / HTTP/1.0\r\n\r\n").state == S::Complete);
    CU_ASSERT_FALSE(q.keep_alive());
}

void test_responses() {
    HttpLimits l{4096, 1 << 20};
    HttpParser p(HttpParser::Mode::Response, l);
    auto r = p.feed(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: "
        "b\r\n\r\n4\r\nbody\r\n0\r\n\r\n");
    CU_ASSERT_FATAL(r.state == S::Complete);
    CU_ASSERT_EQUAL(p.status, 201);
    CU_ASSERT_EQUAL(p.body, std::string("body"));
    CU_ASSERT_EQUAL(p.headers, std::string("X-A: b\r\n"));
    CU_ASSERT_TRUE(p.keep_alive());
    // Read-until-close body completes at EOF.
    p.next();
    r = p.feed("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npartial");
    CU_ASSERT(r.state == S::Incomplete);
    r = p.feed_eof();
    CU_ASSERT(r.state == S::Complete);
    CU_ASSERT_EQUAL(p.body, std::string("partial"));
    // Truncated Content-Length body at EOF is an error (502).
    p.next();
    p.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    r = p.feed_eof();
    CU_ASSERT(r.state == S::Error);
    CU_ASSERT_EQUAL(r.status, 502);
    // HEAD: no body even with Content-Length.
    p.next();
    p.expect_no_body(true);
    r = p.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    CU_ASSERT(r.state == S::Complete);
    CU_ASSERT(p.body.empty());
    CU_ASSERT(p.content_length() == std::optional<uint64_t>(10));
    p.next();
    CU_ASSERT(!p.content_length().has_value());
}

void test_http10_and_head_answers() {
    HttpParser p(HttpParser::Mode::Request, lim());
    auto r = p.feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CU_ASSERT_FATAL(r.state == S::Complete);
    CU_ASSERT_TRUE(p.http10());
    CU_ASSERT_TRUE(p.keep_alive());
    std::string o;
    write_response(o, 200, "", "ab", true, false, true);
    CU_ASSERT_EQUAL(o, std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                   "Connection: keep-alive\r\n\r\nab"));
    p.next();
    r = p.feed("GET / HTTP/1.0\r\n\r\n");  // 1.0 without keep-alive: close
    CU_ASSERT_FATAL(r.state == S::Complete);
    CU_ASSERT_FALSE(p.keep_alive());
    p.next();
    r = p.feed("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    CU_ASSERT_FALSE(p.http10());
    o.clear();
    write_response(o, 200, "", "ab", true, false, false);
    CU_ASSERT_EQUAL(o, std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nab"));
    // HEAD: the service's Content-Length (forwarded in the headers) is kept, no body.
    o.clear();
    write_response(o, 200, "X: y\r\ncontent-length: 1234\r\n", "", true, true);
    CU_ASSERT_EQUAL(o, std::string("HTTP/1.1 200 OK\r\nX: y\r\ncontent-length: 1234\r\n\r\n"));
    o.clear();
    write_response(o, 404, "Content-Type: text/plain\r\n", "no route\n", false, true);
    CU_ASSERT_EQUAL(o, std::string("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
                                   "Content-Length: 9\r\nConnection: close\r\n\r\n"));
}

// Whitespace between a field name and its colon is refused (RFC 9112 5.1): a name like
// "Transfer-Encoding " would pass the hop-by-hop filter and reach the service, which may
// read the body as chunks and find a second, smuggled request in it.
void test_field_name_whitespace() {
    const char* bad[] = {
        "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n",
        "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc",
        "GET /f HTTP/1.1\r\nHost: a\r\nConnection\t: close\r\n\r\n",
        "GET /f HTTP/1.1\r\nX Y: z\r\n\r\n",
    };
    for (auto* b : bad) {
        HttpParser p(HttpParser::Mode::Request, HttpLimits{4096, 100});
        auto r = p.feed(b);
        CU_ASSERT(r.state == S::Error);
        CU_ASSERT_EQUAL(r.status, 400);
    }
    HttpParser q(HttpParser::Mode::Response, HttpLimits{4096, 100});
    auto r = q.feed("HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok");
    CU_ASSERT(r.state == S::Error);
    CU_ASSERT_EQUAL(r.status, 502);
}

// A chunked message's trailer fields are not headers: none is forwarded as one, and the
// headers before the body are kept whole.
void test_trailers_not_headers() {
    for (auto mode : {HttpParser::Mode::Request, HttpParser::Mode::Response}) {
        HttpParser p(mode, HttpLimits{4096, 100});
        std::string head = mode == HttpParser::Mode::Request ? "POST /f HTTP/1.1\r\nHost: a\r\n"
                                                             : "HTTP/1.1 200 OK\r\nX-A: b\r\n";
        auto r = p.feed(head +
                        "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
                        "X-Trailer-Host: evil\r\nX-Last: 1\r\n\r\n");
        CU_ASSERT_FATAL(r.state == S::Complete);
        CU_ASSERT_EQUAL(p.body, std::string("abc"));
        CU_ASSERT_EQUAL(p.headers, std::string(mode == HttpParser::Mode::Request ? "Host: a\r\n"
                                                                                 : "X-A: b\r\n"));
    }
}

// CONNECT is not served: http-parser ends the message at its headers (a tunnel follows), so
// a body would be read as a second request.  One answer (501), nothing after it parsed.
void test_connect_refused() {
    HttpParser p(HttpParser::Mode::Request, HttpLimits{4096, 100});
    std::string in =
        "CONNECT /f/x HTTP/1.1\r\nHost: a\r\nContent-Length: 18\r\n\r\nGET /f/admin "
        "HTTP/1.1\r\n\r\n";
    auto r = p.feed(in);
    CU_ASSERT(r.state == S::Error);
    CU_ASSERT_EQUAL(r.status, 501);
}

// A URL the channel's frame cannot carry whole (its length field is 16 bits) is refused with
// 414, never cut.
void test_url_too_long() {
    HttpParser p(HttpParser::Mode::Request, HttpLimits{1u << 20, 100});
    std::string url = "/f?" + std::string(65535, 'a');
    auto r = p.feed("GET " + url + " HTTP/1.1\r\nHost: a\r\n\r\n");
    CU_ASSERT(r.state == S::Error);
    CU_ASSERT_EQUAL(r.status, 414);
    HttpParser q(HttpParser::Mode::Request, HttpLimits{1u << 20, 100});
    url.resize(65535);
    r = q.feed("GET " + url + " HTTP/1.1\r\nHost: a\r\n\r\n");
    CU_ASSERT_FATAL(r.state == S::Complete);  // exactly at the limit is fine
    CU_ASSERT_EQUAL(q.url.size(), 65535u);
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"simple and pipelined", test_simple_and_pipelined},
        {"chunked, byte by byte", test_byte_by_byte_chunked},
        {"header and body limits", test_limits},
        {"malformed requests", test_malformed},
        {"expect-continue and close", test_expect_and_close},
        {"responses", test_responses},
        {"HTTP/1.0 keep-alive, HEAD lengths", test_http10_and_head_answers},
        {"whitespace before a field's colon", test_field_name_whitespace},
        {"trailers are not headers", test_trailers_not_headers},
        {"CONNECT refused", test_connect_refused},
        {"URL longer than a frame carries", test_url_too_long},
    };
    return run_cunit_suite("http", tests);
}
