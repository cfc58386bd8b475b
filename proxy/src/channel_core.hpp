// Transport-independent per-connection channel state: handshake, credit windows,
// heartbeat bookkeeping.  Used by the TCP and RDMA channels alike.
#pragma once

#include <algorithm>

#include "credits.hpp"
#include "frame.hpp"

namespace sv {

class ChannelCore {
  public:
    enum class Action { Deliver, Hello, Ping, Pong, Credit, Goodbye };

    void reset(uint32_t my_window) {
        my_window_ = my_window;
        send.reset(0);
        ret.reset(my_window);
        hello_done = false;
        peer_draining = false;
    }
    void on_peer_hello(const Hello& h) {
        send.reset(h.credits);
        hello_done = true;
    }

    // Applies the credits a received header returns, checks the peer respected our window.
    Result<Action> on_header(const FrameHeader& h) {
        if (h.type == FrameType::Hello) {
            if (hello_done) return make_error("second hello");
            return Action::Hello;
        }
        if (!hello_done) return make_error("frame before hello");
        if (auto st = send.grant(h.credits); !st) return st.error();
        switch (h.type) {
            case FrameType::Requests:
            case FrameType::Responses:
                if (ret.owed() + ret.held() >= my_window_)
                    return make_error("peer sent a data frame without credit");
                return Action::Deliver;
            case FrameType::Ping:
                return Action::Ping;
            case FrameType::Pong:
                return Action::Pong;
            case FrameType::Credit:
                return Action::Credit;
            case FrameType::Goodbye:
                peer_draining = true;
                return Action::Goodbye;
            default:
                return make_error("unexpected frame type");
        }
    }

    // Deliver a data frame to `deliver(hold)`; its credit is returned now unless the
    // receiver asked to hold it (Channel::hold_credit), then on release().  The frame counts
    // as held while the receiver looks at it: a release it makes in there (its work failed
    // at once) finds the credit, instead of being lost before the hold is counted.
    template <class Fn>
    void deliver(Fn&& fn) {
        bool hold = false;
        ret.hold(1);
        fn(hold);
        if (!hold) ret.release(1);
    }

    // Fill the credit field of an outgoing header; spends a send credit for data frames.
    bool prepare_outgoing(char* hdr) {
        auto t = static_cast<FrameType>(hdr[4]);
        if (frame_uses_credit(t) && !send.consume()) return false;
        put_le<uint32_t>(hdr + 12, ret.take());
        return true;
    }

    // Heartbeat, for both transports: Ping after `hb` without sending; the peer is lost after
    // 3 silent periods.  A Ping that could not leave at once (RDMA: every send slot waits for
    // its completion; it is queued) still counts as asked for, so the next one is due a
    // period later -- the deadline never lies in the past, the loop never spins on it.
    enum class Beat { Quiet, Ping, Lost };
    void mark_up(int64_t now) { last_rx_ = last_tx_ = last_ping_ = now; }
    void sent(int64_t now) { last_tx_ = now; }
    void received(int64_t now) { last_rx_ = now; }
    // What an up channel must do at `now`; `next` = when to look again (> now).
    Beat heartbeat(int64_t now, int64_t hb, int64_t& next) {
        if (now - last_rx_ > 3 * hb) {
            next = now + hb;
            return Beat::Lost;
        }
        Beat b = Beat::Quiet;
        if (now - std::max(last_tx_, last_ping_) >= hb) {
            last_ping_ = now;
            b = Beat::Ping;
        }
        next = std::min(std::max(last_tx_, last_ping_) + hb, last_rx_ + 3 * hb + 1);
        return b;
    }
    // heartbeat() acted on: `lost()` when the peer fell silent, `ping()` when a Ping is due;
    // returns when to look again.
    template <class Lost, class Ping>
    int64_t beat(int64_t now, int64_t hb, Lost&& lost, Ping&& ping) {
        int64_t next = 0;
        switch (heartbeat(now, hb, next)) {
            case Beat::Lost:
                lost();
                break;
            case Beat::Ping:
                ping();
                break;
            case Beat::Quiet:
                break;
        }
        return next;
    }

    SendWindow send;
    ReturnWindow ret;
    bool hello_done = false;
    bool peer_draining = false;

  private:
    uint32_t my_window_ = 0;
    int64_t last_rx_ = 0, last_tx_ = 0, last_ping_ = 0;
};

inline void encode_control(char* p, FrameType t) {
    FrameHeader h;
    h.type = t;
    encode_header(p, h);
}

}  // namespace sv
