// The registered buffer pool of the RDMA transport (ChunkPool): exhaustion, return, reuse,
// refused double releases, address lookup, and a run of several channels that post frames
// from pool chunks through SendQueue (selective signaling, completions polled late) and
// give every chunk back.
#include <deque>
#include <random>
#include <vector>

#include "chunk_pool.hpp"
#include "cunit_main.hpp"
#include "send_queue.hpp"

using namespace sv;

namespace {

void test_exhaustion_and_reuse() {
    std::vector<char> mem(4 * 64);
    ChunkPool p;
    p.reset(mem.data(), 64, 4);
    CU_ASSERT_EQUAL(p.capacity(), 4u);
    uint32_t got[4];
    for (auto& g : got) {
        g = p.acquire();
        CU_ASSERT_NOT_EQUAL(g, ChunkPool::kNone);
    }
    CU_ASSERT_EQUAL(p.in_use(), 4u);
    CU_ASSERT_EQUAL(p.acquire(), ChunkPool::kNone);  // empty: the caller waits
    CU_ASSERT_EQUAL(p.acquire(), ChunkPool::kNone);
    CU_ASSERT_EQUAL(p.exhausted(), 2u);
    CU_ASSERT_EQUAL(p.in_use(), 4u);  // a failed acquire takes nothing
    for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) CU_ASSERT_NOT_EQUAL(got[i], got[j]);
    CU_ASSERT_TRUE(p.release(got[2]));
    CU_ASSERT_EQUAL(p.available(), 1u);
    CU_ASSERT_EQUAL(p.acquire(), got[2]);  // the returned chunk is reused
    for (auto g : got) CU_ASSERT_TRUE(p.release(g));
    CU_ASSERT_EQUAL(p.in_use(), 0u);
    CU_ASSERT_EQUAL(p.high_water(), 4u);
}

void test_release_checks() {
    ChunkPool p;
    p.reset(nullptr, 64, 2);
    CU_ASSERT_FALSE(p.release(0));  // not out
    uint32_t a = p.acquire();
    CU_ASSERT_TRUE(p.release(a));
    CU_ASSERT_FALSE(p.release(a));  // twice: refused, the chunk is not free twice
    CU_ASSERT_FALSE(p.release(7));  // no such chunk
    CU_ASSERT_EQUAL(p.available(), 2u);
    uint32_t x = p.acquire(), y = p.acquire();
    CU_ASSERT_NOT_EQUAL(x, y);
    CU_ASSERT_EQUAL(p.acquire(), ChunkPool::kNone);
}

void test_chunk_of() {
    std::vector<char> mem(3 * 100);
    ChunkPool p;
    p.reset(mem.data(), 100, 3);
    CU_ASSERT_EQUAL(p.data(1), mem.data() + 100);
    CU_ASSERT_EQUAL(p.chunk_of(mem.data(), 100), 0u);
    CU_ASSERT_EQUAL(p.chunk_of(mem.data() + 150, 50), 1u);
    CU_ASSERT_EQUAL(p.chunk_of(mem.data() + 150, 51), ChunkPool::kNone);  // crosses a chunk
    CU_ASSERT_EQUAL(p.chunk_of(mem.data() + 299, 1), 2u);
    CU_ASSERT_EQUAL(p.chunk_of(mem.data() + 300, 1), ChunkPool::kNone);
    char other[8];
    CU_ASSERT_EQUAL(p.chunk_of(other, 8), ChunkPool::kNone);
}

// Three channels share one pool of 16 chunks: each posts frames (a chunk each, held until
// the send completes), signals selectively (every 4th, or when chunks run low), and its
// completions arrive late and in bursts.  A channel that finds the pool empty waits.  One
// channel is torn down half way: its outstanding chunks come back without completions.
// At the end every chunk is back, each frame's chunk was held by one frame at a time.
void test_channels_share_pool() {
    ChunkPool p;
    p.reset(nullptr, 64, 16);
    struct Ch {
        SendQueue sq;
        std::deque<uint64_t> done;  // signaled completions not yet polled
        bool alive = true;
        uint64_t sent = 0;
    };
    Ch ch[3];
    for (auto& c : ch) c.sq.reset(32, 4);
    std::vector<int> owner(16, -1);
    std::mt19937 rng(17);
    uint64_t waits = 0;
    auto reclaim = [&](int who, const SendQueue::Entry& e) {
        if (e.slot == UINT32_MAX) return;  // a control frame: no chunk
        CU_ASSERT_EQUAL(owner[e.slot], who);
        owner[e.slot] = -1;
        CU_ASSERT_TRUE(p.release(e.slot));
    };
    for (int step = 0; step < 20000; ++step) {
        int who = static_cast<int>(rng() % 3);
        auto& c = ch[who];
        if (!c.alive) continue;
        if (step >= 10000 && who == 1) {  // torn down mid-traffic: flushed, no completions
            // the transport gives back what a dead QP holds when it tears it down
            c.sq.abandon([&](const SendQueue::Entry& e) { reclaim(who, e); });
            CU_ASSERT_FALSE(c.sq.unreaped());
            c.done.clear();  // a dead QP's completions are never polled
            c.alive = false;
            continue;
        }
        if (rng() % 3 == 0 && !c.done.empty()) {  // a burst of late completions
            size_t n = 1 + rng() % c.done.size();
            for (size_t k = 0; k < n; ++k) {
                uint64_t seq = c.done.front();
                c.done.pop_front();
                CU_ASSERT_TRUE(
                    c.sq.completed(seq, [&](const SendQueue::Entry& e) { reclaim(who, e); }));
            }
            continue;
        }
        if (c.sq.full()) continue;
        uint32_t k = p.acquire();
        if (k == ChunkPool::kNone) {
            waits++;
            continue;
        }
        CU_ASSERT_EQUAL(owner[k], -1);
        owner[k] = who;
        bool sig = c.sq.want_signal(false, p.available(), 0);
        uint64_t seq = c.sq.posted(k, 0, sig);
        if (sig) c.done.push_back(seq);
        c.sent++;
    }
    // Close: a live channel says Goodbye (a control frame, signaled, no pool chunk), so the
    // unsignaled WRs at its tail complete too; then every completion is polled.
    for (int who = 0; who < 3; ++who) {
        auto& c = ch[who];
        if (c.alive && c.sq.tail_unsignaled()) c.done.push_back(c.sq.posted(UINT32_MAX, 0, true));
        while (!c.done.empty()) {
            uint64_t seq = c.done.front();
            c.done.pop_front();
            CU_ASSERT_TRUE(
                c.sq.completed(seq, [&](const SendQueue::Entry& e) { reclaim(who, e); }));
        }
        CU_ASSERT_FALSE(c.sq.unreaped());
        CU_ASSERT_TRUE(c.sent > 100);
    }
    CU_ASSERT_EQUAL(p.in_use(), 0u);  // no leak
    CU_ASSERT_EQUAL(p.available(), 16u);
    CU_ASSERT_EQUAL(p.high_water(), 16u);  // the pool did run dry ...
    CU_ASSERT_TRUE(waits > 0);             // ... and senders waited instead of growing it
    for (int o : owner) CU_ASSERT_EQUAL(o, -1);
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"pool exhaustion and reuse", test_exhaustion_and_reuse},
        {"pool refuses a double release", test_release_checks},
        {"pool address lookup", test_chunk_of},
        {"channels share the pool, every chunk returned", test_channels_share_pool},
    };
    return run_cunit_suite("pool", tests);
}
