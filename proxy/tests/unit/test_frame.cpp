// Channel framing: round trips, header validation, truncation.
#include <string>
#include <vector>

#include "cunit_main.hpp"
#include "frame.hpp"

using namespace sv;

namespace {

void test_header_roundtrip() {
    char b[kFrameHeaderBytes];
    FrameHeader h;
    h.type = FrameType::Responses;
    h.count = 513;
    h.length = 123456;
    h.credits = 7;
    h.ring_units = 99;
    encode_header(b, h);
    auto d = decode_header(b, sizeof b, 1 << 20);
    CU_ASSERT_FATAL(d.ok());
    CU_ASSERT(d->type == FrameType::Responses);
    CU_ASSERT_EQUAL(d->count, 513);
    CU_ASSERT_EQUAL(d->length, 123456u);
    CU_ASSERT_EQUAL(d->credits, 7u);
    CU_ASSERT_EQUAL(d->ring_units, 99u);
}

void test_header_rejects() {
    char b[kFrameHeaderBytes];
    FrameHeader h;
    h.type = FrameType::Requests;
    h.length = 5000;
    encode_header(b, h);
    CU_ASSERT_FALSE(decode_header(b, sizeof b, 4999).ok());  // over limit
    CU_ASSERT_TRUE(decode_header(b, sizeof b, 5000).ok());
    CU_ASSERT_FALSE(decode_header(b, 10, 1 << 20).ok());  // short
    char bad[kFrameHeaderBytes];
    std::memcpy(bad, b, sizeof b);
    bad[0] ^= 1;
    CU_ASSERT_FALSE(decode_header(bad, sizeof bad, 1 << 20).ok());  // magic
    std::memcpy(bad, b, sizeof b);
    bad[4] = 42;
    CU_ASSERT_FALSE(decode_header(bad, sizeof bad, 1 << 20).ok());  // type
    h.type = FrameType::Ping;
    h.length = 1;
    encode_header(bad, h);
    CU_ASSERT_FALSE(decode_header(bad, sizeof bad, 1 << 20).ok());  // control with payload
}

void test_requests_roundtrip() {
    std::string buf;
    FrameBuilder fb(buf);
    fb.begin_requests("matmul");
    std::string body(70000, 'x');
    fb.add_request({0x0000000500000001ull, 0, "POST", "/matmul?n=4", "Host: a\r\n", body});
    fb.add_request({0x0000000700000002ull, 7, "GET", "/echo", "", ""});
    auto f = fb.finish();
    auto h = decode_header(f.data(), f.size(), 1 << 20);
    CU_ASSERT_FATAL(h.ok());
    CU_ASSERT_EQUAL(h->count, 2);
    CU_ASSERT_EQUAL(h->length, f.size() - kFrameHeaderBytes);
    RecordReader rr(f.substr(kFrameHeaderBytes), h->count);
    auto up = rr.upstream();
    CU_ASSERT_FATAL(up.ok());
    CU_ASSERT_EQUAL(std::string(up.value()), std::string("matmul"));
    RequestRecord r;
    auto m = rr.next(r);
    CU_ASSERT_FATAL(m.ok() && m.value());
    CU_ASSERT_EQUAL(r.id, 0x0000000500000001ull);
    CU_ASSERT_EQUAL(std::string(r.method), std::string("POST"));
    CU_ASSERT_EQUAL(std::string(r.url), std::string("/matmul?n=4"));
    CU_ASSERT_EQUAL(std::string(r.headers), std::string("Host: a\r\n"));
    CU_ASSERT_EQUAL(r.body.size(), 70000u);
    m = rr.next(r);
    CU_ASSERT_FATAL(m.ok() && m.value());
    CU_ASSERT_EQUAL(r.prio, 7);
    CU_ASSERT_EQUAL(std::string(r.method), std::string("GET"));
    CU_ASSERT(r.body.empty());
    m = rr.next(r);
    CU_ASSERT(m.ok() && !m.value());
    CU_ASSERT_FALSE(rr.trailing_garbage());
}

// A frame assembled in a fixed (registered) buffer is byte for byte the frame assembled in a
// std::string, its size is what request_size() said, and one that does not fit is flagged.
void test_span_builder() {
    RequestRecord r1{0x0000000500000001ull, 0, "POST", "/echo", "Host: a\r\n", "hello"};
    RequestRecord r2{0x0000000700000002ull, 7, "GET", "/x?y=1", "", ""};
    std::string s;
    FrameBuilder fb(s);
    fb.begin_requests("up");
    fb.add_request(r1);
    fb.add_request(r2);
    auto want = fb.finish();
    const size_t predicted = FrameBuilder::requests_overhead("up") +
                             FrameBuilder::request_size(r1) + FrameBuilder::request_size(r2);
    CU_ASSERT_EQUAL(want.size(), predicted);
    std::vector<char> mem(predicted);
    SpanBuf sb(mem.data(), mem.size());
    SpanFrameBuilder sfb(sb);
    sfb.begin_requests("up");
    sfb.add_request(r1);
    sfb.add_request(r2);
    auto got = sfb.finish();
    CU_ASSERT_FALSE(sb.overflowed());
    CU_ASSERT_EQUAL(got.data(), mem.data());  // in place: no copy of its own
    CU_ASSERT(got == want);
    SpanBuf small(mem.data(), predicted - 1);
    SpanFrameBuilder tight(small);
    tight.begin_requests("up");
    tight.add_request(r1);
    tight.add_request(r2);
    CU_ASSERT_TRUE(small.overflowed());
    CU_ASSERT_TRUE(small.size() < predicted);
}

void test_responses_and_truncation() {
    std::string buf;
    FrameBuilder fb(buf);
    fb.begin(FrameType::Responses);
    fb.add_response({42, 404, "Content-Type: text/plain\r\n", "nope"});
    auto f = std::string(fb.finish());
    RecordReader ok(std::string_view(f).substr(kFrameHeaderBytes), 1);
    ResponseRecord r;
    auto m = ok.next(r);
    CU_ASSERT_FATAL(m.ok() && m.value());
    CU_ASSERT_EQUAL(r.id, 42u);
    CU_ASSERT_EQUAL(r.status, 404);
    CU_ASSERT_EQUAL(std::string(r.body), std::string("nope"));
    // Every truncation is detected, none reads past the end.
    for (size_t cut = kFrameHeaderBytes; cut < f.size(); ++cut) {
        RecordReader t(std::string_view(f).substr(kFrameHeaderBytes, cut - kFrameHeaderBytes), 1);
        auto x = t.next(r);
        CU_ASSERT_FALSE(x.ok());
    }
    // A count larger than the records present is an error, not a hang.
    RecordReader more(std::string_view(f).substr(kFrameHeaderBytes), 2);
    CU_ASSERT(more.next(r).ok());
    CU_ASSERT_FALSE(more.next(r).ok());
}

void test_hello() {
    Hello h;
    h.role = 2;
    h.credits = 64;
    h.slot_bytes = 65536;
    h.max_frame = 1 << 24;
    h.ring_addr = 0x7f0000001000ull;
    h.ring_rkey = 0xabcdef;
    h.ring_bytes = 1 << 24;
    h.name = "egress-1";
    std::string f;
    encode_hello(f, h);
    auto hd = decode_header(f.data(), f.size(), 1 << 20);
    CU_ASSERT_FATAL(hd.ok());
    CU_ASSERT(hd->type == FrameType::Hello);
    auto d = decode_hello(std::string_view(f).substr(kFrameHeaderBytes));
    CU_ASSERT_FATAL(d.ok());
    CU_ASSERT_EQUAL(d->credits, 64u);
    CU_ASSERT_EQUAL(d->ring_addr, 0x7f0000001000ull);
    CU_ASSERT_EQUAL(d->ring_rkey, 0xabcdefu);
    CU_ASSERT_EQUAL(d->name, std::string("egress-1"));
    h.credits = 0;
    encode_hello(f, h);
    CU_ASSERT_FALSE(decode_hello(std::string_view(f).substr(kFrameHeaderBytes)).ok());
    CU_ASSERT_FALSE(decode_hello("short").ok());
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"header round trip", test_header_roundtrip},
        {"header validation", test_header_rejects},
        {"requests round trip", test_requests_roundtrip},
        {"responses and truncation", test_responses_and_truncation},
        {"frame assembled in a fixed buffer", test_span_builder},
        {"hello", test_hello},
    };
    return run_cunit_suite("frame", tests);
}
