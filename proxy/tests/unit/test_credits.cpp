// Credit accounting: windows, explicit-return threshold, protocol errors, RDMA ring, RDMA
// send queue with selective signaling.
#include <deque>
#include <random>
#include <vector>

#include "channel_core.hpp"
#include "credits.hpp"
#include "cunit_main.hpp"
#include "send_queue.hpp"

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

// A frame the receiver holds (the egress: until its requests are answered) and releases
// while it still looks at it -- every request of it failed at once (socket() EMFILE: 502).
// Its credit must come back: before, the release found nothing held yet, the hold was
// counted after it, and the credit was lost for good (the channel's window shrank by one
// per such frame, then every request was answered 504).
void test_hold_released_inside_delivery() {
    ChannelCore b;
    b.reset(4);
    Hello peer;
    peer.credits = 4;
    b.on_peer_hello(peer);
    FrameHeader h;
    h.type = FrameType::Requests;
    for (int i = 0; i < 8; ++i) {  // twice the window: none may be lost
        CU_ASSERT_FATAL(b.on_header(h).ok());
        b.deliver([&](bool& hold) {
            hold = true;
            b.ret.release(1);
        });
        CU_ASSERT_EQUAL(b.ret.held(), 0u);
        CU_ASSERT_EQUAL(b.ret.owed(), 1u);
        b.ret.take();  // returned to the peer
    }
    // held, then released later; and a frame not held at all
    CU_ASSERT_FATAL(b.on_header(h).ok());
    b.deliver([&](bool& hold) { hold = true; });
    CU_ASSERT(b.ret.held() == 1u && b.ret.owed() == 0u);
    b.ret.release(1);
    CU_ASSERT(b.ret.held() == 0u && b.ret.owed() == 1u);
    CU_ASSERT_FATAL(b.on_header(h).ok());
    b.deliver([&](bool&) {});
    CU_ASSERT(b.ret.held() == 0u && b.ret.owed() == 2u);
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

// One side sends large frames into the other's ring and nothing comes back on its own (the
// peer's answers are slow): the only returns are explicit Credit frames, and the Pong that
// answers a Ping (every header carries the ring units owed).  A frame that needs the wrap
// padding can need more than the free space while less than half the ring is owed (no
// Credit due): without a way to ask, it waits for the heartbeat.  Frames arrive either at once
// or after the Ping (in flight while the sender probes).  Returns how many frames were sent
// before the sender found itself stuck with no way to get space back (all of them: none).
size_t simulate_ring_starvation(const std::vector<uint64_t>& lens, bool late_arrival) {
    RingAllocator a;
    RingReclaimer r;
    a.reset(4096);
    r.reset(4096);
    std::deque<std::pair<uint64_t, uint64_t>> wire;  // (offset, len) sent, not yet arrived
    auto arrive = [&] {
        while (!wire.empty()) {
            auto [off, len] = wire.front();
            wire.pop_front();
            auto u = r.on_frame(off, len);
            CU_ASSERT_FATAL(u.ok());
            r.consumed_units(u.value());
            if (r.explicit_due()) CU_ASSERT_TRUE(a.release_units(r.take_units()).ok());  // Credit
        }
    };
    size_t sent = 0;
    for (uint64_t len : lens) {
        auto off = a.alloc(len);
        if (!off) {
            if (!a.want_probe()) return sent;  // stuck until a heartbeat
            if (!late_arrival) arrive();
            r.peer_waits();                                        // the Ping
            CU_ASSERT_TRUE(a.release_units(r.take_units()).ok());  // its Pong
            arrive();
            off = a.alloc(len);
            if (!off) return sent;
        }
        wire.emplace_back(*off, len);
        if (!late_arrival) arrive();
        ++sent;
    }
    arrive();
    return sent;
}

void test_ring_starvation() {
    // 832 B at 0 (returned at once: 1856 = half the ring owed is not reached by it alone), then
    // 1856 B at 832 (owed 1856 < 2048: no Credit), then 1600 B: 2688 + 1600 > 4096, so it
    // needs 1408 B of padding + 1600 > 4096 - 1856 free.
    const std::vector<uint64_t> lens = {2000, 832, 1856, 1600, 2048, 100, 1999, 1024, 1700};
    CU_ASSERT_EQUAL(simulate_ring_starvation(lens, false), lens.size());
    CU_ASSERT_EQUAL(simulate_ring_starvation(lens, true), lens.size());
    // a probe is asked once per stall: none again before the peer returned space
    RingAllocator a;
    a.reset(4096);
    CU_ASSERT_TRUE(a.alloc(2000).has_value());
    CU_ASSERT_TRUE(a.alloc(2000).has_value());
    CU_ASSERT_FALSE(a.alloc(64).has_value());
    CU_ASSERT_TRUE(a.want_probe());
    CU_ASSERT_FALSE(a.want_probe());
    CU_ASSERT_TRUE(a.release_units(0).ok());  // a Pong with nothing: still asked
    CU_ASSERT_FALSE(a.want_probe());
    CU_ASSERT_TRUE(a.release_units(1).ok());
    CU_ASSERT_TRUE(a.want_probe());
    // the receiver: a Ping with nothing owed makes the next unit owed due at once
    RingReclaimer r;
    r.reset(4096);
    r.peer_waits();
    CU_ASSERT_FALSE(r.explicit_due());
    r.consumed_units(1);
    CU_ASSERT_TRUE(r.explicit_due());
    CU_ASSERT_EQUAL(r.take_units(), 1u);
    r.consumed_units(1);
    CU_ASSERT_FALSE(r.explicit_due());  // answered: not due again below half the ring
}

// A simulated RC send queue: WRs execute in order; only signaled ones produce a completion,
// which the owner polls some time later.  Posts mix slot SENDs, inline SENDs (no slot) and
// WRITEs (staging units from a small ring), some forced signaled (control frames).  The queue wraps
// over a thousand times.  Every WR is reclaimed exactly once, in posting order, with what it held;
// every signaled WR completes exactly once; at most `depth` WRs are outstanding; and
// whenever a post has to wait (no slot, queue full) a signaled WR is on its way to free
// room -- unsignaled WRs never hold the last resources.
// Returns how many WRs were signaled.
uint64_t simulate_send_queue(uint32_t nslots, uint32_t depth, uint32_t every, uint64_t& posted) {
    SendQueue sq;
    sq.reset(depth, every);
    const uint64_t stage_cap = 12;  // staging-ring units (a WRITE holds 1-5)
    std::mt19937 rng(17);
    std::vector<uint32_t> free_slots;
    for (uint32_t i = 0; i < nslots; ++i) free_slots.push_back(i);
    struct Hw {
        uint64_t seq;
        bool signaled;
    };
    std::deque<Hw> hw;          // posted, not yet executed
    std::deque<uint64_t> cqes;  // completions not yet polled
    std::vector<uint8_t> reclaimed(1, 0), signaled_seen(1, 0);
    std::vector<uint32_t> slot_of(1, UINT32_MAX);
    std::vector<uint64_t> units_of(1, 0);
    posted = 0;
    uint64_t next_reclaim = 0, first = 0, units_out = 0, stalls = 0;
    bool ok_order = true, ok_once = true, ok_held = true, ok_depth = true, ok_progress = true;
    auto reclaim = [&](const SendQueue::Entry& e) {
        if (e.seq >= reclaimed.size() || reclaimed[e.seq]++) ok_once = false;
        if (e.seq != next_reclaim) ok_order = false;
        next_reclaim = e.seq + 1;
        if (e.slot != slot_of[e.seq] || e.stage_units != units_of[e.seq]) ok_held = false;
        if (e.slot != UINT32_MAX) free_slots.push_back(e.slot);
        units_out -= e.stage_units;
    };
    auto post = [&](bool force, int kind) {  // kind 0: slot SEND, 1: inline, 2: WRITE
        if (sq.full() || (kind == 0 && free_slots.empty())) {
            stalls++;
            if (sq.signaled_outstanding() == 0) ok_progress = false;  // would wait forever
            return;
        }
        uint32_t slot = UINT32_MAX;
        if (kind == 0) {
            slot = free_slots.back();
            free_slots.pop_back();
        }
        uint64_t units = kind == 2 ? 1 + rng() % 5 : 0;
        if (units_out + units > stage_cap) {  // no staging-ring space: wait for a release
            stalls++;
            if (sq.signaled_outstanding() == 0) ok_progress = false;
            return;
        }
        bool sig = sq.want_signal(force, free_slots.size(), units);
        uint64_t seq = sq.posted(slot, units, sig);
        if (first == 0) first = next_reclaim = seq;
        if (seq >= reclaimed.size()) {
            reclaimed.resize(seq + 1, 0);
            signaled_seen.resize(seq + 1, 0);
            slot_of.resize(seq + 1, UINT32_MAX);
            units_of.resize(seq + 1, 0);
        }
        slot_of[seq] = slot;
        units_of[seq] = units;
        units_out += units;
        hw.push_back({seq, sig});
        posted++;
        if (sq.outstanding() > depth) ok_depth = false;
    };
    while (posted < 1000ull * depth && ok_progress) {
        uint32_t r = rng() % 100;
        if (r < 30) {
            post(rng() % 10 == 0, static_cast<int>(rng() % 3));
        } else if (r < 70) {
            if (!hw.empty()) {  // the HCA executes the oldest WR
                if (hw.front().signaled) cqes.push_back(hw.front().seq);
                hw.pop_front();
            }
        } else if (!cqes.empty()) {  // the owner polls one completion
            uint64_t s = cqes.front();
            cqes.pop_front();
            if (signaled_seen[s]++) ok_once = false;
            if (!sq.completed(s, reclaim)) ok_once = false;
            if (sq.completed(s, reclaim)) ok_once = false;  // a duplicate reclaims nothing
        }
    }
    if (!ok_progress) {
        CU_FAIL("stuck: no slot or queue entry free and no signaled WR outstanding");
        std::printf("\n    every %u, %u slots, depth %u: stuck after %llu WRs ", every, nslots,
                    depth, (unsigned long long)posted);
        return 0;
    }
    // Quiesce: a forced signaled WR (Goodbye) reclaims whatever unsignaled WRs are left.
    while (sq.full() || free_slots.empty()) {
        if (hw.empty() && cqes.empty()) {  // nothing on its way: the post would wait forever
            CU_FAIL("stuck: no slot or queue entry free and no signaled WR outstanding");
            return 0;
        }
        if (!hw.empty()) {
            if (hw.front().signaled) cqes.push_back(hw.front().seq);
            hw.pop_front();
        }
        while (!cqes.empty()) {
            CU_ASSERT_TRUE(sq.completed(cqes.front(), reclaim));
            cqes.pop_front();
        }
    }
    post(true, 0);
    while (!hw.empty()) {
        if (hw.front().signaled) cqes.push_back(hw.front().seq);
        hw.pop_front();
    }
    while (!cqes.empty()) {
        CU_ASSERT_TRUE(sq.completed(cqes.front(), reclaim));
        cqes.pop_front();
    }
    CU_ASSERT_TRUE(ok_order);
    CU_ASSERT_TRUE(ok_once);
    CU_ASSERT_TRUE(ok_held);
    CU_ASSERT_TRUE(ok_depth);
    CU_ASSERT_TRUE(ok_progress);
    CU_ASSERT_FALSE(sq.unreaped());
    CU_ASSERT_EQUAL(sq.signaled_outstanding(), 0u);
    CU_ASSERT_EQUAL(free_slots.size(), nslots);
    CU_ASSERT_EQUAL(units_out, 0u);
    CU_ASSERT_EQUAL(next_reclaim - first, posted);
    uint64_t n_signaled = 0;
    for (uint64_t s = first; s < first + posted; ++s) {
        CU_ASSERT_EQUAL_FATAL(reclaimed[s], 1);
        n_signaled += signaled_seen[s];
    }
    CU_ASSERT(stalls > 0);  // the run did press on the limits
    std::printf(
        "\n    %u slots, depth %u, every %u: %llu WRs (%llu x the queue), %llu signaled, "
        "%llu stalls ",
        nslots, depth, every, (unsigned long long)posted, (unsigned long long)(posted / depth),
        (unsigned long long)n_signaled, (unsigned long long)stalls);
    return n_signaled;
}

void test_send_queue_wraps() {
    uint64_t posted = 0;
    // Room to spare: most WRs go unsignaled.
    uint64_t sig = simulate_send_queue(16, 24, 4, posted);
    CU_ASSERT(sig * 2 < posted);
    // A signaling period longer than the slots and the queue: only the low-resource rule
    // keeps unsignaled WRs from holding every slot / queue entry with no completion coming.
    simulate_send_queue(6, 10, 8, posted);
    simulate_send_queue(32, 10, 16, posted);
}

void test_send_queue_every_one() {
    SendQueue sq;
    sq.reset(4, 1);  // selective signaling off: every WR signaled, as before
    for (int i = 0; i < 4; ++i) CU_ASSERT_TRUE(sq.want_signal(false, 100));
    uint64_t a = sq.posted(0, 0, true), b = sq.posted(1, 0, true);
    int n = 0;
    CU_ASSERT_TRUE(sq.completed(b, [&](const SendQueue::Entry&) { n++; }));
    CU_ASSERT_EQUAL(n, 2);  // b's completion implies a's
    CU_ASSERT_FALSE(sq.completed(a, [&](const SendQueue::Entry&) { n++; }));
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_FALSE(sq.unreaped());
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"send window", test_send_window},
        {"return window", test_return_window},
        {"two sides conserve credits", test_two_sides_conserve},
        {"a hold released inside its delivery returns the credit",
         test_hold_released_inside_delivery},
        {"protocol errors", test_protocol_errors},
        {"heartbeat", test_heartbeat},
        {"heartbeat dispatch", test_heartbeat_beat},
        {"RDMA ring allocator", test_ring_allocator},
        {"RDMA ring reclaimer matches allocator", test_ring_reclaimer_matches_allocator},
        {"RDMA ring: a sender short of space asks, the receiver returns it", test_ring_starvation},
        {"RDMA send queue wraps (selective signaling)", test_send_queue_wraps},
        {"RDMA send queue, every WR signaled", test_send_queue_every_one},
    };
    return run_cunit_suite("credits", tests);
}
