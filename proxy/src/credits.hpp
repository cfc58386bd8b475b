// Credit-based flow control, identical for every transport.
//
// Each side tells the other in its Hello how many data frames (Requests/Responses) it can
// hold: `credits`.  A sender spends one credit per data frame and never sends without one,
// so on RDMA a receive is always posted for every SEND.  The receiver returns credits once
// it has consumed a frame: piggybacked in the header of any frame it sends, or in an
// explicit Credit frame when half the window is owed.  Control frames (Hello, Credit,
// Ping, Pong, Goodbye) do not spend credits; they land in a small reserve of receives
// (kControlReserve), enough because a side owes at most two explicit Credit frames at a
// time (each returns >= window/2, and the peer cannot trigger more without being repaid),
// plus at most one Pong and one Credit per Ping of the peer (a heartbeat, or a sender short of
// ring space asking, once per stall: RingAllocator::want_probe()).
//
// RDMA frames larger than a receive slot go by RDMA WRITE WITH IMMEDIATE into the peer's
// large-frame ring; the ring is accounted in 64-byte units by RingAllocator (sender) and
// RingReclaimer (receiver).  Frees are FIFO because RC delivers in order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "common.hpp"

namespace sv {

constexpr uint32_t kControlReserve = 8;
constexpr uint64_t kRingUnit = 64;

class SendWindow {
  public:
    void reset(uint32_t window) {
        window_ = window;
        avail_ = window;
    }
    bool can_send() const { return avail_ > 0; }
    uint32_t available() const { return avail_; }
    uint32_t window() const { return window_; }
    uint32_t in_flight() const { return window_ - avail_; }
    // Returns false (caller must not send) when no credit is left.
    bool consume() {
        if (avail_ == 0) return false;
        --avail_;
        return true;
    }
    // A peer returning more than it was given is a protocol error.
    Status grant(uint32_t n) {
        if (n > window_ - avail_) return make_error("peer returned more credits than outstanding");
        avail_ += n;
        return {};
    }

  private:
    uint32_t window_ = 0;
    uint32_t avail_ = 0;
};

class ReturnWindow {
  public:
    void reset(uint32_t window) {
        window_ = window;
        owed_ = 0;
        held_ = 0;
    }
    void consumed(uint32_t n = 1) { owed_ += n; }
    // A frame whose credit the receiver keeps until its work is done (the egress: until its
    // requests are answered), then release()s it: back-pressure reaches the sender.
    void hold(uint32_t n = 1) { held_ += n; }
    void release(uint32_t n = 1) {
        n = std::min(n, held_);
        held_ -= n;
        owed_ += n;
    }
    uint32_t held() const { return held_; }
    uint32_t owed() const { return owed_; }
    // Hand everything owed to an outgoing frame header.
    uint32_t take() { return std::exchange(owed_, 0); }
    // An explicit Credit frame is due when half the window is owed.
    bool explicit_due() const { return owed_ >= std::max<uint32_t>(1, window_ / 2); }

  private:
    uint32_t window_ = 0;
    uint32_t owed_ = 0;
    uint32_t held_ = 0;
};

inline uint64_t ring_round(uint64_t len) {
    return (len + kRingUnit - 1) / kRingUnit * kRingUnit;
}

// Sender side of the peer's large-frame ring: contiguous chunks, wrap by padding.
// A chunk is at most half the ring, so an empty ring always has room (pad < len).
class RingAllocator {
  public:
    void reset(uint64_t size) {
        size_ = size / kRingUnit * kRingUnit;
        head_ = tail_ = 0;
        probing_ = false;
    }
    uint64_t size() const { return size_; }
    uint64_t free_bytes() const { return size_ - (head_ - tail_); }
    uint64_t used_bytes() const { return head_ - tail_; }
    bool can_alloc(uint64_t len) const {
        uint64_t l = ring_round(len);
        if (l == 0 || l > size_ / 2) return false;
        uint64_t pos = head_ % size_;
        uint64_t pad = pos + l > size_ ? size_ - pos : 0;
        return pad + l <= free_bytes();
    }
    std::optional<uint64_t> alloc(uint64_t len) {
        if (!can_alloc(len)) return std::nullopt;
        uint64_t l = ring_round(len);
        uint64_t pos = head_ % size_;
        uint64_t pad = pos + l > size_ ? size_ - pos : 0;
        head_ += pad;
        uint64_t off = head_ % size_;
        head_ += l;
        return off;
    }
    Status release_units(uint64_t units) {
        uint64_t b = units * kRingUnit;
        if (b > head_ - tail_) return make_error("peer released more ring space than used");
        tail_ += b;
        if (units) probing_ = false;
        return {};
    }
    // A frame did not fit: true when the peer should be asked for the space it owes (a Ping),
    // once per stall: not again until the peer has returned some.
    bool want_probe() { return !std::exchange(probing_, true); }

  private:
    uint64_t size_ = 0, head_ = 0, tail_ = 0;
    bool probing_ = false;
};

// Receiver side: given each large frame's offset and length (in arrival order), how many
// units (frame plus any wrap padding) become free once it is consumed.
class RingReclaimer {
  public:
    void reset(uint64_t size) {
        size_ = size / kRingUnit * kRingUnit;
        expected_ = 0;
        owed_units_ = 0;
        waiting_ = false;
    }
    Result<uint64_t> on_frame(uint64_t offset, uint64_t len) {
        uint64_t pos = expected_ % size_;
        uint64_t pad = 0;
        if (offset != pos) {
            if (offset != 0) return make_error("large frame at unexpected ring offset");
            pad = size_ - pos;
        }
        uint64_t l = ring_round(len);
        if (offset + l > size_) return make_error("large frame overruns ring");
        expected_ += pad + l;
        uint64_t units = (pad + l) / kRingUnit;
        return units;
    }
    void consumed_units(uint64_t u) { owed_units_ += u; }
    uint32_t take_units() {
        uint32_t u = static_cast<uint32_t>(std::min<uint64_t>(owed_units_, UINT32_MAX));
        owed_units_ -= u;
        if (u) waiting_ = false;
        return u;
    }
    // Half the ring owed; or the peer asked and something is owed: a frame that needs the wrap
    // padding can need more than the free space while less than half is owed.
    bool explicit_due() const {
        return owed_units_ * kRingUnit >= size_ / 2 || (waiting_ && owed_units_ > 0);
    }
    // The peer asked (a Ping, which a sender short of ring space sends at once): the Pong
    // returns what is owed; if nothing is, the next units owed go back in a Credit frame.
    void peer_waits() { waiting_ = true; }

  private:
    uint64_t size_ = 0, expected_ = 0, owed_units_ = 0;
    bool waiting_ = false;
};

}  // namespace sv
