// A pool of fixed-size chunks carved out of one block of memory that the RDMA transport
// registers once (one ibv_mr for the whole pool, per device and worker).  A chunk is handed
// out (acquire), a frame is assembled in it or copied into it, it is posted, and it comes
// back (release) when its send completed.  The pool never grows: when it is empty, acquire()
// fails and the caller waits (back-pressure: a data frame waits for credits the same way).
//
// Accounting (tests/unit/test_pool.cpp): a chunk is either free or out, never both; a release
// of a chunk that is not out is refused (a double release would hand one chunk to two
// frames); in_use() == 0 once every user has given its chunks back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sv {

class ChunkPool {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;

    // base: chunks × chunk_bytes of memory (registered by the caller); nullptr for accounting
    // only (tests).
    void reset(char* base, size_t chunk_bytes, uint32_t chunks) {
        base_ = base;
        chunk_bytes_ = chunk_bytes;
        out_.assign(chunks, false);
        free_.clear();
        for (uint32_t i = chunks; i > 0; --i) free_.push_back(i - 1);  // chunk 0 first
        high_water_ = 0;
    }
    uint32_t capacity() const { return static_cast<uint32_t>(out_.size()); }
    size_t chunk_bytes() const { return chunk_bytes_; }
    uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
    uint32_t in_use() const { return capacity() - available(); }
    uint32_t high_water() const { return high_water_; }
    uint64_t exhausted() const { return exhausted_; }  // acquire() found the pool empty
    uint64_t acquired() const { return acquired_; }

    // A free chunk's index, or kNone (counted in exhausted()).
    uint32_t acquire() {
        if (free_.empty()) {
            exhausted_++;
            return kNone;
        }
        uint32_t i = free_.back();
        free_.pop_back();
        out_[i] = true;
        acquired_++;
        if (in_use() > high_water_) high_water_ = in_use();
        return i;
    }
    // False (and nothing changes) when i is not a chunk that is out.
    bool release(uint32_t i) {
        if (i >= out_.size() || !out_[i]) return false;
        out_[i] = false;
        free_.push_back(i);
        return true;
    }
    bool is_out(uint32_t i) const { return i < out_.size() && out_[i]; }
    char* data(uint32_t i) const { return base_ + static_cast<size_t>(i) * chunk_bytes_; }
    // The chunk that holds [p, p + n) entirely, or kNone.
    uint32_t chunk_of(const char* p, size_t n) const {
        if (!base_ || p < base_) return kNone;
        size_t off = static_cast<size_t>(p - base_);
        size_t i = off / chunk_bytes_;
        if (i >= out_.size() || off + n > (i + 1) * chunk_bytes_) return kNone;
        return static_cast<uint32_t>(i);
    }

  private:
    char* base_ = nullptr;
    size_t chunk_bytes_ = 0;
    std::vector<bool> out_;
    std::vector<uint32_t> free_;
    uint32_t high_water_ = 0;
    uint64_t exhausted_ = 0, acquired_ = 0;
};

}  // namespace sv
