// The channel state machine shared by the TCP and RDMA transports (channel_fsm.hpp).
#include "channel_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace sv {

ChannelFsm::ChannelFsm(ChannelEvents& ev, const TransportOptions& o, bool active, std::mt19937& rng)
    : opts_(o), ev_(ev), active_(active), rng_(rng) {
    backoff_ms_ = o.channel.reconnect_min_ms;
}

void ChannelFsm::goodbye() {
    if (!said_goodbye_ && up()) send_control(FrameType::Goodbye);
    said_goodbye_ = true;
}

void ChannelFsm::release_credit() {
    if (!up()) return;
    core_.ret.release(1);
    if (core_.ret.explicit_due()) send_control(FrameType::Credit);
}

bool ChannelFsm::begin_close(bool has_link) {
    if (shutting_down_) return false;
    shutting_down_ = true;
    if (!has_link) {
        state_ = State::Dead;
        return false;
    }
    return true;
}

void ChannelFsm::link_connecting(int64_t now) {
    state_ = State::Connecting;
    core_.reset(opts_.channel.credits);
    deadline_ = now + opts_.channel.connect_timeout_ms * kMs;
}

void ChannelFsm::link_established(int64_t now) {
    // The passive RDMA side may have had the peer's Hello already (the completion channel
    // and the rdmacm channel are separate fds): then it is up and answered already.
    if (state_ == State::Up) return;
    if (state_ != State::Connecting) deadline_ = now + opts_.channel.connect_timeout_ms * kMs;
    if (state_ == State::Idle) core_.reset(opts_.channel.credits);
    state_ = State::Handshake;
    core_.mark_up(now);
    send_control(FrameType::Hello);
}

void ChannelFsm::schedule_redial(int64_t now) {
    std::uniform_int_distribution<int64_t> jitter(0, backoff_ms_ / 4 + 1);
    next_connect_ = now + (backoff_ms_ + jitter(rng_)) * kMs;
    backoff_ms_ = std::min(backoff_ms_ * 2, opts_.channel.reconnect_max_ms);
}

void ChannelFsm::link_lost() {
    bool was_up = state_ == State::Up;
    if (was_up) {
        stats_.disconnects++;
        spdlog::warn("channel {} down ({})", name, transport_name());
    }
    if (active_ && !shutting_down_) {
        state_ = State::Idle;
        schedule_redial(now_ns());
    } else {
        state_ = State::Dead;
    }
    if (was_up) ev_.on_channel_down(*this);
}

bool ChannelFsm::on_frame(const FrameHeader& h, std::string_view payload) {
    stats_.frames_rx++;
    auto act = core_.on_header(h);
    if (!act) {
        fail("protocol error: " + act.error().message);
        return false;
    }
    switch (act.value()) {
        case ChannelCore::Action::Hello: {
            auto hello = decode_hello(payload);
            if (!hello) {
                fail("bad hello: " + hello.error().message);
                return false;
            }
            if (auto st = link_hello(hello.value()); !st) {
                fail(st.error().message);
                return false;
            }
            if (state_ != State::Handshake) return false;  // the hook lost the link
            core_.on_peer_hello(hello.value());
            if (!active_ && !hello->name.empty()) name = hello->name + "#" + std::to_string(id);
            state_ = State::Up;
            backoff_ms_ = opts_.channel.reconnect_min_ms;
            ++epoch;
            stats_.connects++;
            spdlog::info("channel {} up ({}, peer window {})", name, transport_name(),
                         hello->credits);
            ev_.on_channel_up(*this);
            return true;
        }
        case ChannelCore::Action::Deliver:
            core_.deliver([&](bool& hold) {
                hold_ = false;
                ev_.on_frame(*this, h, payload);
                hold = hold_;
            });
            break;
        case ChannelCore::Action::Ping:
            send_control(FrameType::Pong);
            break;
        case ChannelCore::Action::Goodbye:
            spdlog::info("channel {}: peer is draining", name);
            break;
        default:
            break;
    }
    return true;
}

int64_t ChannelFsm::tick(int64_t now) {
    const int64_t hb = opts_.channel.heartbeat_ms * kMs;
    switch (state_) {
        case State::Idle:
            if (shutting_down_) {
                state_ = State::Dead;
                break;
            }
            if (now >= next_connect_ && !link_connect(now)) {
                next_connect_ = now + backoff_ms_ * kMs;
                return next_connect_;
            }
            return state_ == State::Idle ? next_connect_ : deadline_;
        case State::Connecting:
        case State::Handshake:
            if (now >= deadline_) {
                fail("connect/handshake timeout to " + name);
                return now + hb;
            }
            return deadline_;
        case State::Up:
            if (auto d = link_tick_up(now)) return *d;
            return core_.beat(
                now, hb, [&] { fail("peer silent for 3 heartbeats"); },
                [&] { send_control(FrameType::Ping); });
        case State::Dead:
            break;
    }
    return now + hb;
}

}  // namespace sv
