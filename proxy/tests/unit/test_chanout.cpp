// The egress's answer frames per channel (egress_detail::ChanOut) against a channel that
// lends registered memory (Channel::frame_buffer(), a pool of one chunk shared by two
// channels, as the RDMA transport's pool is shared by a device's channels): a frame that
// leaves the chunk (outgrown, or parked for want of credit) keeps its bytes and gives the
// chunk back, so a second channel can build in it while the first stays idle.
#include <string>
#include <vector>

#include "chunk_pool.hpp"
#include "cunit_main.hpp"
#include "egress_impl.hpp"

using namespace sv;
using sv::egress_detail::ChanOut;

namespace {

struct SharedPool {
    std::vector<char> mem = std::vector<char>(256);
    ChunkPool pool;
    SharedPool() { pool.reset(mem.data(), mem.size(), 1); }
};

class LendingChannel final : public Channel {
  public:
    explicit LendingChannel(SharedPool& p, bool lends = true) : p_(p), lends_(lends) {}
    ~LendingChannel() override { release_frame_buffer(); }
    bool up() const override { return true; }
    bool can_send() const override { return true; }
    Status send(std::string_view, int) override { return {}; }
    std::span<char> frame_buffer(size_t bytes) override {
        if (!lends_ || bytes > p_.mem.size()) return {};
        if (lent_ == ChunkPool::kNone) lent_ = p_.pool.acquire();
        if (lent_ == ChunkPool::kNone) return {};
        return {p_.pool.data(lent_), p_.mem.size()};
    }
    void release_frame_buffer() override {
        if (lent_ != ChunkPool::kNone) p_.pool.release(lent_);
        lent_ = ChunkPool::kNone;
    }
    void goodbye() override {}
    void close() override {}
    uint32_t credits_available() const override { return 1; }
    uint32_t credits_owed() const override { return 0; }
    const ChannelStats& stats() const override { return stats_; }
    std::string_view transport_name() const override { return "lending"; }
    bool peer_draining() const override { return false; }
    void release_credit() override {}
    bool holds_chunk() const { return lent_ != ChunkPool::kNone; }

  private:
    SharedPool& p_;
    bool lends_;
    uint32_t lent_ = ChunkPool::kNone;
    ChannelStats stats_;
};

void add(ChanOut& o, const ResponseRecord& r) {
    o.add(r, FrameBuilder::response_size(r));
}

// The same frame built in a std::string (a channel that lends nothing): what the chunk's
// frame must still be.
std::string reference(const std::vector<ResponseRecord>& rs) {
    SharedPool p;
    LendingChannel none(p, false);
    ChanOut o;
    o.ch = &none;
    for (const auto& r : rs) add(o, r);
    o.seal();
    return o.cur;
}

const std::string kBody(100, 'b');

void test_outgrown_frame_gives_chunk_back() {
    SharedPool p;
    LendingChannel a(p), b(p);
    ChanOut oa;
    oa.ch = &a;
    std::vector<ResponseRecord> rs{{1, 200, "", kBody}, {2, 200, "", kBody}, {3, 404, "", kBody}};
    add(oa, rs[0]);
    CU_ASSERT_TRUE(oa.in_reg);
    CU_ASSERT_TRUE(a.holds_chunk());
    for (size_t i = 1; i < rs.size(); ++i) add(oa, rs[i]);
    CU_ASSERT_FALSE(oa.in_reg);  // 3 answers of 100 B do not fit 256 B: spilled
    CU_ASSERT_FALSE(a.holds_chunk());
    CU_ASSERT_EQUAL(p.pool.available(), 1u);
    // a's frame is a copy: b builds in the chunk, and a's bytes stay as they were
    ChanOut ob;
    ob.ch = &b;
    add(ob, {9, 500, "", std::string(150, 'z')});
    CU_ASSERT_TRUE(ob.in_reg);
    oa.seal();
    CU_ASSERT_TRUE(oa.cur == reference(rs));
}

void test_parked_frame_gives_chunk_back() {
    SharedPool p;
    LendingChannel a(p), b(p);
    ChanOut oa;
    oa.ch = &a;
    std::vector<ResponseRecord> rs{{7, 200, "X-A: 1\r\n", "short"}};
    add(oa, rs[0]);
    CU_ASSERT_TRUE(oa.in_reg);  // fits: built in the chunk
    oa.seal();
    oa.park();  // no credit: waits in `ready`, out of the chunk
    CU_ASSERT_FALSE(a.holds_chunk());
    CU_ASSERT_EQUAL(oa.ready.size(), 1u);
    ChanOut ob;
    ob.ch = &b;
    add(ob, {8, 200, "", std::string(200, 'y')});
    CU_ASSERT_TRUE(ob.in_reg);  // the chunk a held is b's now
    CU_ASSERT_TRUE(oa.ready.front() == reference(rs));
}

void test_frame_in_chunk_is_kept_until_sent() {
    SharedPool p;
    LendingChannel a(p), b(p);
    ChanOut oa;
    oa.ch = &a;
    add(oa, {1, 200, "", "ok"});
    CU_ASSERT_TRUE(oa.in_reg);
    CU_ASSERT_TRUE(a.holds_chunk());  // still being built: not given back
    CU_ASSERT_TRUE(b.frame_buffer(64).empty());
    oa.spill();
    CU_ASSERT_FALSE(b.frame_buffer(64).empty());
    oa.spill();  // no frame in the chunk: nothing to give back twice
    CU_ASSERT_TRUE(b.holds_chunk());
    CU_ASSERT_EQUAL(p.pool.in_use(), 1u);
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"an outgrown frame gives its chunk back, its bytes intact",
         test_outgrown_frame_gives_chunk_back},
        {"a parked frame gives its chunk back, its bytes intact",
         test_parked_frame_gives_chunk_back},
        {"a frame being built keeps its chunk; given back once",
         test_frame_in_chunk_is_kept_until_sent},
    };
    return run_cunit_suite("proxy chanout", tests);
}
