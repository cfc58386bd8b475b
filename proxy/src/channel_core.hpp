// Transport-independent per-connection channel state: handshake, credit windows,
// heartbeat bookkeeping.  Used by the TCP and RDMA channels alike.
#pragma once

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
                if (ret.owed() >= my_window_)
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

    // Fill the credit field of an outgoing header; spends a send credit for data frames.
    bool prepare_outgoing(char* hdr) {
        auto t = static_cast<FrameType>(hdr[4]);
        if (frame_uses_credit(t) && !send.consume()) return false;
        put_le<uint32_t>(hdr + 12, ret.take());
        return true;
    }

    SendWindow send;
    ReturnWindow ret;
    bool hello_done = false;
    bool peer_draining = false;

  private:
    uint32_t my_window_ = 0;
};

inline void encode_control(char* p, FrameType t) {
    FrameHeader h;
    h.type = t;
    encode_header(p, h);
}

}  // namespace sv
