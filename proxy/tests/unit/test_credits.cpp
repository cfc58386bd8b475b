// Credit accounting: windows, explicit-return threshold, protocol errors, RDMA ring.
#include "channel_core.hpp"
#include "credits.hpp"
#include "cunit_main.hpp"

using namespace sv;

namespace {

void test_send_window() {
    SendWindow w;
    w.reset(3);
    CU_ASSERT_TRUE(w.consume());
    CU_ASSERT_TRUE(w.consume());
    CU_ASSERT_TRUE(w.consume());
    CU_ASSERT_FALSE(w.can_send());
    CU_ASSERT_FALSE(w.consume());  // never below zero
    CU_ASSERT_EQUAL(w.in_flight(), 3u);
    CU_ASSERT_TRUE(w.grant(2).ok());
    CU_ASSERT_EQUAL(w.available(), 2u);
    CU_ASSERT_FALSE(w.grant(2).ok());  // only 1 outstanding
    CU_ASSERT_EQUAL(w.available(), 2u);
}

void test_return_window() {
    ReturnWindow r;
    r.reset(8);
    r.consumed(3);
    CU_ASSERT_FALSE(r.explicit_due());
    r.consumed(1);
    CU_ASSERT_TRUE(r.explicit_due());  // half the window owed
    CU_ASSERT_EQUAL(r.take(), 4u);
    CU_ASSERT_EQUAL(r.owed(), 0u);
    CU_ASSERT_FALSE(r.explicit_due());
}

// Two cores talking: no data frame is ever sent without a receive slot, and credits
// always come back (no deadlock) with piggybacking plus explicit returns.
void test_two_sides_conserve() {
    ChannelCore a, b;
    a.reset(4);
    b.reset(4);
    Hello ha, hb;
    ha.credits = 4;
    hb.credits = 4;
    a.on_peer_hello(hb);
    b.on_peer_hello(ha);
    char hdr[kFrameHeaderBytes];
    uint32_t delivered = 0;
    for (int round = 0; round < 100; ++round) {
        // a sends as many requests as it may
        int sent = 0;
        while (true) {
            FrameHeader h;
            h.type = FrameType::Requests;
            encode_header(hdr, h);
            if (!a.prepare_outgoing(hdr)) break;
            auto d = decode_header(hdr, sizeof hdr, 1 << 20);
            CU_ASSERT_FATAL(d.ok());
            auto act = b.on_header(d.value());
            CU_ASSERT_FATAL(act.ok());
            CU_ASSERT(act.value() == ChannelCore::Action::Deliver);
            b.ret.consumed(1);
            ++delivered;
            ++sent;
            CU_ASSERT_FATAL(sent <= 4);
        }
        CU_ASSERT_EQUAL(sent, 4);
        CU_ASSERT_TRUE(b.ret.explicit_due());
        // b returns credits with an explicit Credit frame
        FrameHeader c;
        c.type = FrameType::Credit;
        encode_header(hdr, c);
        CU_ASSERT_TRUE(b.prepare_outgoing(hdr));  // control frames need no credit
        auto d = decode_header(hdr, sizeof hdr, 1 << 20);
        CU_ASSERT_FATAL(d.ok());
        CU_ASSERT_EQUAL(d->credits, 4u);
        auto act = a.on_header(d.value());
        CU_ASSERT_FATAL(act.ok());
        CU_ASSERT_EQUAL(a.send.available(), 4u);
    }
    CU_ASSERT_EQUAL(delivered, 400u);
}

void test_protocol_errors() {
    ChannelCore b;
    b.reset(2);
    FrameHeader h;
    h.type = FrameType::Requests;
    CU_ASSERT_FALSE(b.on_header(h).ok());  // before hello
    Hello peer;
    peer.credits = 2;
    b.on_peer_hello(peer);
    CU_ASSERT(b.on_header(h).ok());
    b.ret.consumed(1);
    CU_ASSERT(b.on_header(h).ok());
    b.ret.consumed(1);
    CU_ASSERT_FALSE(b.on_header(h).ok());  // third frame in a window of two
    FrameHeader g;
    g.type = FrameType::Ping;
    g.credits = 1;  // peer returns a credit we never spent
    CU_ASSERT_FALSE(b.on_header(g).ok());
    FrameHeader hello;
    hello.type = FrameType::Hello;
    CU_ASSERT_FALSE(b.on_header(hello).ok());  // second hello
}

void test_heartbeat() {
    ChannelCore c;
    const int64_t hb = 1000;
    int64_t next = 0;
    c.mark_up(0);
    CU_ASSERT(c.heartbeat(500, hb, next) == ChannelCore::Beat::Quiet);
    CU_ASSERT_EQUAL(next, 1000);
    c.sent(800);
    c.received(800);
    CU_ASSERT(c.heartbeat(1000, hb, next) == ChannelCore::Beat::Quiet);
    CU_ASSERT_EQUAL(next, 1800);
    CU_ASSERT(c.heartbeat(1800, hb, next) == ChannelCore::Beat::Ping);
    CU_ASSERT_EQUAL(next, 2800);
    // The Ping could not leave (no send slot): not due again before a period has passed,
    // and the deadline is never in the past.
    CU_ASSERT(c.heartbeat(1801, hb, next) == ChannelCore::Beat::Quiet);
    CU_ASSERT_EQUAL(next, 2800);
    CU_ASSERT(c.heartbeat(2800, hb, next) == ChannelCore::Beat::Ping);
    CU_ASSERT(next > 2800);
    // Silence: lost after 3 periods without receiving.
    CU_ASSERT(c.heartbeat(3801, hb, next) == ChannelCore::Beat::Lost);
    c.received(3801);
    CU_ASSERT(c.heartbeat(3802, hb, next) == ChannelCore::Beat::Ping);
    CU_ASSERT(next > 3802);
}

// beat(): the transports' dispatch of heartbeat() -- exactly one callback per verdict.
void test_heartbeat_beat() {
    ChannelCore c;
    const int64_t hb = 1000;
    int lost = 0, pings = 0;
    auto on_lost = [&] { lost++; };
    auto on_ping = [&] { pings++; };
    c.mark_up(0);
    CU_ASSERT_EQUAL(c.beat(500, hb, on_lost, on_ping), 1000);
    CU_ASSERT(lost == 0 && pings == 0);
    c.received(900);
    CU_ASSERT_EQUAL(c.beat(1000, hb, on_lost, on_ping), 2000);
    CU_ASSERT(lost == 0 && pings == 1);
    CU_ASSERT(c.beat(3901, hb, on_lost, on_ping) > 3901);
    CU_ASSERT(lost == 1 && pings == 1);
}

void test_ring_allocator() {
    RingAllocator a;
    a.reset(2048);
    auto x = a.alloc(100);  // 128 bytes at 0
    CU_ASSERT_FATAL(x.has_value());
    CU_ASSERT_EQUAL(*x, 0u);
    auto y = a.alloc(1000);  // 1024 at 128
    CU_ASSERT_FATAL(y.has_value());
    CU_ASSERT_EQUAL(*y, 128u);
    auto w = a.alloc(500);  // 512 at 1152
    CU_ASSERT_FATAL(w.has_value());
    CU_ASSERT_EQUAL(*w, 1152u);
    CU_ASSERT_EQUAL(a.free_bytes(), 384u);
    CU_ASSERT_FALSE(a.alloc(700).has_value());  // needs 384 pad + 704
    CU_ASSERT_TRUE(a.release_units(2).ok());    // x
    CU_ASSERT_FALSE(a.alloc(700).has_value());  // 1088 > 512
    CU_ASSERT_TRUE(a.release_units(16).ok());   // y
    auto z = a.alloc(700);                      // wraps to 0
    CU_ASSERT_FATAL(z.has_value());
    CU_ASSERT_EQUAL(*z, 0u);
    CU_ASSERT_EQUAL(a.free_bytes(), 1536u - 1088u);
    CU_ASSERT_FALSE(a.release_units(100).ok());  // more than used
    CU_ASSERT_FALSE(a.alloc(1025).has_value());  // more than half the ring
    CU_ASSERT_FALSE(a.alloc(0).has_value());
}

void test_ring_reclaimer_matches_allocator() {
    RingAllocator a;
    RingReclaimer r;
    a.reset(4096);
    r.reset(4096);
    uint64_t lens[] = {100, 1000, 2000, 700, 2048, 64, 65, 1900, 2047, 1, 1500, 2048, 3};
    uint64_t returned = 0;
    for (uint64_t len : lens) {
        auto off = a.alloc(len);
        if (!off) {
            CU_FAIL("allocation failed although everything was released");
            return;
        }
        auto units = r.on_frame(*off, len);
        CU_ASSERT_FATAL(units.ok());
        returned += units.value();
        // Receiver consumes at once: returning its units frees exactly what was used.
        CU_ASSERT_TRUE(a.release_units(units.value()).ok());
        CU_ASSERT_EQUAL(a.free_bytes(), 4096u);
    }
    CU_ASSERT(returned > 0);
    CU_ASSERT_FALSE(r.on_frame(128, 10).ok());  // not where the sender would put it
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"send window", test_send_window},
        {"return window", test_return_window},
        {"two sides conserve credits", test_two_sides_conserve},
        {"protocol errors", test_protocol_errors},
        {"heartbeat", test_heartbeat},
        {"heartbeat dispatch", test_heartbeat_beat},
        {"RDMA ring allocator", test_ring_allocator},
        {"RDMA ring reclaimer matches allocator", test_ring_reclaimer_matches_allocator},
    };
    return run_cunit_suite("credits", tests);
}
