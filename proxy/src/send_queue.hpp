// Send-queue accounting with selective signaling (RDMA transport).
//
// Not every send WR asks for a completion: a WR is signaled when it is the N-th since the
// last signaled one, when it must be (a control frame, a draining channel: the caller
// forces it), when it holds staging-ring space (a WRITE: the ring is small, and a WRITE that
// waits for ring space must find its release on the way), or when the slots run low (fewer
// than N send slots left after it, or the send queue would hold N or fewer free entries).  An RC
// send queue completes in order, so the completion of a signaled WR also completes every unsignaled
// WR posted before it: `completed()` reclaims them all, oldest first, each exactly once.
//
// Invariants (tests/unit/test_credits.cpp, "send queue wraps"):
//   * at most `depth` WRs are outstanding (posted, not yet reclaimed);
//   * at most N - 1 unsignaled WRs follow the last signaled one, and none follows it when
//     slots or queue entries are short, so what they hold always comes back with a
//     completion that is already on its way;
//   * `unreaped()` is false only when every posted WR has been reclaimed.
#pragma once

#include <cstdint>
#include <deque>

namespace sv {

class SendQueue {
  public:
    // What one posted WR holds until it is reclaimed.
    struct Entry {
        uint64_t seq = 0;
        uint32_t slot = UINT32_MAX;  // send slot (SEND from a slot), or UINT32_MAX
        uint64_t stage_units = 0;    // staging-ring units (WRITE WITH IMM), or 0
        bool signaled = false;
    };

    void reset(uint32_t depth, uint32_t every) {
        depth_ = depth;
        every_ = every == 0 ? 1 : every;
        q_.clear();
        run_ = 0;
        signaled_out_ = 0;
        // seq keeps counting across resets: a stale completion never matches a new entry
    }
    uint32_t depth() const { return depth_; }
    uint32_t every() const { return every_; }
    size_t outstanding() const { return q_.size(); }
    bool full() const { return q_.size() >= depth_; }
    bool unreaped() const { return !q_.empty(); }
    // Unsignaled WRs with no signaled WR after them: only a later signaled WR reclaims them.
    bool tail_unsignaled() const { return !q_.empty() && !q_.back().signaled; }
    uint32_t signaled_outstanding() const { return signaled_out_; }
    uint64_t next_seq() const { return next_seq_; }  // the next posted() returns this

    // Must the next WR be signaled?  free_slots: send slots free after this post;
    // stage_units: staging-ring units it holds.
    bool want_signal(bool force, size_t free_slots, uint64_t stage_units = 0) const {
        if (force || every_ <= 1 || stage_units > 0) return true;
        if (run_ + 1 >= every_) return true;
        if (free_slots < every_) return true;
        return depth_ - q_.size() <= every_;
    }

    // Record a posted WR; returns its sequence number (the wr_id's index).  The caller has
    // checked !full().
    uint64_t posted(uint32_t slot, uint64_t stage_units, bool signaled) {
        Entry e{next_seq_++, slot, stage_units, signaled};
        q_.push_back(e);
        if (signaled) {
            run_ = 0;
            signaled_out_++;
        } else {
            run_++;
        }
        return e.seq;
    }

    // The completion of signaled WR `seq`: fn(entry) for it and every WR before it, oldest
    // first.  False: no outstanding signaled WR has that sequence number (a duplicate or
    // stale completion); nothing is reclaimed then.
    template <class Fn>
    bool completed(uint64_t seq, Fn&& fn) {
        bool found = false;
        for (const auto& e : q_)
            if (e.seq == seq) {
                found = e.signaled;
                break;
            }
        if (!found) return false;
        while (!q_.empty()) {
            Entry e = q_.front();
            q_.pop_front();
            if (e.signaled) signaled_out_--;
            fn(e);
            if (e.seq == seq) break;
        }
        if (q_.empty()) run_ = 0;
        return true;
    }

    // The QP is gone (torn down): fn(entry) for every outstanding WR, oldest first, so what
    // they hold (pool chunks) goes back although no completion will come.
    template <class Fn>
    void abandon(Fn&& fn) {
        while (!q_.empty()) {
            Entry e = q_.front();
            q_.pop_front();
            fn(e);
        }
        run_ = 0;
        signaled_out_ = 0;
    }

  private:
    std::deque<Entry> q_;
    uint64_t next_seq_ = 1;
    uint32_t depth_ = 0, every_ = 1, run_ = 0, signaled_out_ = 0;
};

}  // namespace sv
