// One channel state machine for every transport (eRPC's shape: the session logic sits
// above, the transport beneath implements a few link hooks).
//
//   Idle --link_connect--> Connecting --link_established--> Handshake --peer Hello--> Up
//     ^                        |                                |                      |
//     +--- backoff (dialled) --+------------ link_lost ---------+----------------------+
//                                                               (accepted: --> Dead)
//
// The state machine owns reconnect with jittered exponential backoff, the connect and
// handshake deadline, the heartbeat, the credit windows (ChannelCore), the Hello/Goodbye
// handling and the ChannelEvents upcalls.  A transport moves bytes: it starts a connect,
// breaks a link, sends a control frame and reports what arrived and when the link is gone.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "channel_core.hpp"
#include "transport.hpp"

namespace sv {

class ChannelFsm : public Channel {
  public:
    enum class State { Idle, Connecting, Handshake, Up, Dead };

    ChannelFsm(ChannelEvents& ev, const TransportOptions& o, bool active, std::mt19937& rng);

    bool up() const override { return state_ == State::Up; }
    bool can_send() const override {
        return up() && !core_.peer_draining && core_.send.can_send() && link_ready();
    }
    void goodbye() override;
    uint32_t credits_available() const override { return core_.send.available(); }
    uint32_t credits_owed() const override { return core_.ret.owed(); }
    const ChannelStats& stats() const override { return stats_; }
    bool peer_draining() const override { return core_.peer_draining; }
    void release_credit() override;

    // Timers: reconnect, connect/handshake deadline, heartbeat.  Returns the next deadline.
    int64_t tick(int64_t now);
    bool dead() const { return state_ == State::Dead; }

  protected:
    // ---- what a transport implements ----
    // Start dialling (active side).  False: it failed at once; retried after the backoff.
    virtual bool link_connect(int64_t now) = 0;
    // Break the link because of `why`; the transport calls link_lost() once it is gone
    // (at once or later, from its own event).
    virtual void link_abort(const std::string& why) = 0;
    // Send a control frame (Hello, Ping, Pong, Credit, Goodbye) outside the credit rule.
    virtual void send_control(FrameType t) = 0;
    // Transport-specific room to send (RDMA: a free send slot kept for control frames).
    virtual bool link_ready() const { return true; }
    // The peer's Hello, before the channel goes up: check it against our settings and take
    // what the transport needs from it.  An error fails the channel.
    virtual Status link_hello(const Hello&) { return {}; }
    // Up-state work of the transport that replaces the heartbeat while it lasts (RDMA:
    // waiting for send completions before disconnecting); returns its deadline.
    virtual std::optional<int64_t> link_tick_up(int64_t) { return std::nullopt; }

    // ---- what a transport calls ----
    // A connect is under way: the connect/handshake deadline starts now.
    void link_connecting(int64_t now);
    // The byte stream / queue pair is established: the handshake starts (send Hello).
    void link_established(int64_t now);
    // The link is gone: a dialled channel backs off and redials, an accepted one is Dead;
    // the owner hears on_channel_down if it was up.
    void link_lost();
    // A frame arrived: credits, Hello, data, Ping/Pong, Goodbye.  False: the channel failed
    // (link_abort was called) and the transport must stop parsing.
    bool on_frame(const FrameHeader& h, std::string_view payload);
    // A frame of ours left: counters and the heartbeat's idle clock.
    void counted_tx(size_t bytes) {
        stats_.frames_tx++;
        stats_.bytes_tx += bytes;
        core_.sent(now_ns());
    }
    void fail(const std::string& why) { link_abort(why); }
    bool connecting_or_up() const { return state_ == State::Handshake || state_ == State::Up; }
    // Orderly close, shared part: true when the transport should close its link now
    // (false: already closing, or no link to close -- then the channel is Dead).
    bool begin_close(bool has_link);

    const TransportOptions& opts_;
    ChannelEvents& ev_;
    const bool active_;
    State state_ = State::Idle;
    ChannelCore core_;
    ChannelStats stats_;
    bool shutting_down_ = false;
    bool said_goodbye_ = false;

  private:
    void schedule_redial(int64_t now);

    std::mt19937& rng_;
    int64_t backoff_ms_ = 0, next_connect_ = 0, deadline_ = 0;
};

}  // namespace sv
