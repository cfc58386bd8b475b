// TCP transport: the channel framing over a stream socket, on the worker's io_uring.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>

#include "channel_core.hpp"
#include "transport.hpp"
#include "uring.hpp"

namespace sv {

namespace {

class TcpTransport;

class TcpChannel final : public Channel, public StreamConn::Events {
  public:
    TcpChannel(TcpTransport& t, ChannelEvents& ev, bool active, Endpoint ep,
               Endpoint source = {});
    ~TcpChannel() override;

    void start_passive(int fd);
    int64_t tick(int64_t now);
    bool dead() const { return state_ == State::Dead; }

    bool up() const override { return state_ == State::Up; }
    bool can_send() const override { return up() && !core_.peer_draining && core_.send.can_send(); }
    Status send(std::string_view frame, int prio) override;
    void close() override;
    void goodbye() override {
        if (!said_goodbye_ && up()) send_control(FrameType::Goodbye);
        said_goodbye_ = true;
    }
    uint32_t credits_available() const override { return core_.send.available(); }
    uint32_t credits_owed() const override { return core_.ret.owed(); }
    const ChannelStats& stats() const override { return stats_; }
    std::string_view transport_name() const override { return "tcp"; }
    bool peer_draining() const override { return core_.peer_draining; }
    void release_credit() override {
        if (!up()) return;
        core_.ret.release(1);
        if (core_.ret.explicit_due()) send_control(FrameType::Credit);
    }

  private:
    enum class State { Idle, Connecting, Handshake, Up, Dead };
    void on_data(StreamConn& c, std::string_view data) override;
    void on_connect(StreamConn& c, int err) override;
    void on_closed(StreamConn& c) override;
    void start_connect(int64_t now);
    size_t parse(std::string_view data);  // returns bytes consumed
    bool handle(const FrameHeader& h, std::string_view payload);
    void send_control(FrameType t);
    void fail(const std::string& why);

    TcpTransport& t_;
    ChannelEvents& ev_;
    bool active_;
    Endpoint ep_;
    Endpoint source_;
    State state_ = State::Idle;
    std::unique_ptr<StreamConn> conn_;
    std::string rx_;
    ChannelCore core_;
    ChannelStats stats_;
    int64_t backoff_ms_ = 0, next_connect_ = 0, connect_deadline_ = 0;
    bool shutting_down_ = false;
    bool said_goodbye_ = false;
};

class TcpTransport final : public Transport {
  public:
    TcpTransport(Ring& ring, const TransportOptions& o) : ring_(ring), o_(o) {}
    ~TcpTransport() override { passive_.clear(); }

    std::unique_ptr<Channel> dial(const Endpoint& ep, const Endpoint& source, std::string name,
                                  ChannelEvents& ev) override {
        auto ch = std::make_unique<TcpChannel>(*this, ev, true, ep, source);
        ch->name = std::move(name);
        ch->id = next_id_++;
        active_.push_back(ch.get());
        return ch;
    }

    Status listen(const Endpoint& ep, ChannelEvents& ev) override {
        passive_ev_ = &ev;
        acceptor_ = std::make_unique<Acceptor>(ring_, [this](int fd) {
            auto ch = std::make_unique<TcpChannel>(*this, *passive_ev_, false, Endpoint{});
            ch->id = next_id_++;
            ch->name = "ingress#" + std::to_string(ch->id);
            ch->start_passive(fd);
            passive_.push_back(std::move(ch));
        });
        if (o_.listen_fd >= 0) return acceptor_->adopt(o_.listen_fd, true);
        return acceptor_->listen(ep, true);
    }

    void stop_listening() override {
        if (acceptor_) acceptor_->stop();
    }

    int64_t tick(int64_t now) override {
        int64_t next = now + 1000 * kMs;
        for (auto* ch : active_) next = std::min(next, ch->tick(now));
        for (auto& ch : passive_) next = std::min(next, ch->tick(now));
        std::erase_if(passive_, [](auto& ch) { return ch->dead(); });
        return next;
    }

    size_t passive_count() const override { return passive_.size(); }

    void forget(TcpChannel* ch) { std::erase(active_, ch); }
    Ring& ring() { return ring_; }
    const TransportOptions& opts() const { return o_; }
    std::mt19937& rng() { return rng_; }

  private:
    Ring& ring_;
    TransportOptions o_;
    std::vector<TcpChannel*> active_;
    std::vector<std::unique_ptr<TcpChannel>> passive_;
    std::unique_ptr<Acceptor> acceptor_;
    ChannelEvents* passive_ev_ = nullptr;
    uint32_t next_id_ = 1;
    std::mt19937 rng_{std::random_device{}()};
};

TcpChannel::TcpChannel(TcpTransport& t, ChannelEvents& ev, bool active, Endpoint ep,
                       Endpoint source)
    : t_(t), ev_(ev), active_(active), ep_(std::move(ep)), source_(std::move(source)) {
    backoff_ms_ = t_.opts().channel.reconnect_min_ms;
}

TcpChannel::~TcpChannel() {
    if (active_) t_.forget(this);
}

void TcpChannel::start_passive(int fd) {
    conn_ = std::make_unique<StreamConn>(t_.ring(), *this);
    conn_->attach(fd);
    state_ = State::Handshake;
    core_.reset(t_.opts().channel.credits);
    connect_deadline_ = now_ns() + t_.opts().channel.connect_timeout_ms * kMs;
    core_.mark_up(now_ns());
    send_control(FrameType::Hello);
}

void TcpChannel::start_connect(int64_t now) {
    auto addr = resolve(ep_);
    if (!addr) {
        spdlog::warn("channel {}: {}", name, addr.error().message);
        next_connect_ = now + backoff_ms_ * kMs;
        return;
    }
    std::optional<SockAddr> from;
    if (!source_.host.empty()) {
        auto s = resolve(source_);
        if (!s) {
            spdlog::warn("channel {}: source: {}", name, s.error().message);
            next_connect_ = now + backoff_ms_ * kMs;
            return;
        }
        from = s.value();
    }
    conn_ = std::make_unique<StreamConn>(t_.ring(), *this);
    if (auto st = conn_->connect(addr.value(), from ? &*from : nullptr); !st) {
        spdlog::warn("channel {}: {}", name, st.error().message);
        conn_.reset();
        next_connect_ = now + backoff_ms_ * kMs;
        return;
    }
    state_ = State::Connecting;
    core_.reset(t_.opts().channel.credits);
    connect_deadline_ = now + t_.opts().channel.connect_timeout_ms * kMs;
}

void TcpChannel::on_connect(StreamConn&, int err) {
    if (err) {
        spdlog::debug("channel {}: connect to {}: {}", name, ep_.text, std::strerror(err));
        return;  // StreamConn closes itself; on_closed schedules the retry
    }
    state_ = State::Handshake;
    core_.mark_up(now_ns());
    send_control(FrameType::Hello);
}

void TcpChannel::send_control(FrameType t) {
    if (!conn_ || conn_->closing()) return;
    auto& out = conn_->out();
    size_t at = out.size();
    if (t == FrameType::Hello) {
        Hello h;
        h.role = t_.opts().role;
        h.credits = t_.opts().channel.credits;
        h.max_frame = t_.opts().channel.max_frame_bytes;
        h.name = t_.opts().local_name;
        std::string tmp;
        encode_hello(tmp, h);
        out.append(tmp);
    } else {
        out.resize(at + kFrameHeaderBytes);
        encode_control(&out[at], t);
    }
    core_.prepare_outgoing(&out[at]);
    stats_.frames_tx++;
    stats_.bytes_tx += out.size() - at;
    core_.sent(now_ns());
    conn_->flush();
}

Status TcpChannel::send(std::string_view frame, int) {
    if (!up() || !conn_) return make_error(Errc::ChannelDown, "channel down");
    auto& out = conn_->out();
    size_t at = out.size();
    out.append(frame);
    if (!core_.prepare_outgoing(&out[at])) {
        out.resize(at);
        stats_.credit_stalls++;
        return make_error(Errc::NoCredit, "no credit");
    }
    stats_.frames_tx++;
    stats_.bytes_tx += frame.size();
    core_.sent(now_ns());
    conn_->flush();
    return {};
}

void TcpChannel::close() {
    if (shutting_down_) return;
    shutting_down_ = true;
    if (conn_ && state_ == State::Up) {
        goodbye();
        conn_->close_after_flush();
    } else if (conn_) {
        conn_->close();
    } else {
        state_ = State::Dead;
    }
}

void TcpChannel::fail(const std::string& why) {
    spdlog::warn("channel {}: {}", name, why);
    if (conn_) conn_->close();
}

void TcpChannel::on_data(StreamConn&, std::string_view data) {
    core_.received(now_ns());
    stats_.bytes_rx += data.size();
    if (rx_.empty()) {
        size_t used = parse(data);
        if (used < data.size() && conn_ && !conn_->closing()) rx_.assign(data.substr(used));
    } else {
        rx_.append(data);
        size_t used = parse(rx_);
        rx_.erase(0, used);
    }
    if (conn_ && !conn_->closing() && core_.hello_done && core_.ret.explicit_due())
        send_control(FrameType::Credit);
}

size_t TcpChannel::parse(std::string_view data) {
    size_t off = 0;
    const uint32_t max = t_.opts().channel.max_frame_bytes;
    while (data.size() - off >= kFrameHeaderBytes) {
        if (!conn_ || conn_->closing()) return data.size();
        auto h = decode_header(data.data() + off, data.size() - off, max);
        if (!h) {
            fail("protocol error: " + h.error().message);
            return data.size();
        }
        size_t total = kFrameHeaderBytes + h->length;
        if (data.size() - off < total) break;
        if (!handle(h.value(), data.substr(off + kFrameHeaderBytes, h->length))) return data.size();
        off += total;
    }
    return off;
}

bool TcpChannel::handle(const FrameHeader& h, std::string_view payload) {
    stats_.frames_rx++;
    bool could_send = core_.send.can_send();
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
            core_.on_peer_hello(hello.value());
            if (!active_ && !hello->name.empty()) name = hello->name + "#" + std::to_string(id);
            state_ = State::Up;
            backoff_ms_ = t_.opts().channel.reconnect_min_ms;
            ++epoch;
            stats_.connects++;
            spdlog::info("channel {} up (tcp, peer window {})", name, hello->credits);
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
    if (!could_send && core_.send.can_send() && up()) ev_.on_writable(*this);
    return true;
}

void TcpChannel::on_closed(StreamConn&) {
    bool was_up = state_ == State::Up;
    conn_.reset();
    rx_.clear();
    int64_t now = now_ns();
    if (was_up) {
        stats_.disconnects++;
        spdlog::warn("channel {} down", name);
    }
    if (active_ && !shutting_down_) {
        state_ = State::Idle;
        std::uniform_int_distribution<int64_t> jitter(0, backoff_ms_ / 4 + 1);
        next_connect_ = now + (backoff_ms_ + jitter(t_.rng())) * kMs;
        backoff_ms_ = std::min(backoff_ms_ * 2, t_.opts().channel.reconnect_max_ms);
    } else {
        state_ = State::Dead;
    }
    if (was_up) ev_.on_channel_down(*this);
}

int64_t TcpChannel::tick(int64_t now) {
    const auto& c = t_.opts().channel;
    int64_t hb = c.heartbeat_ms * kMs;
    switch (state_) {
        case State::Idle:
            if (shutting_down_) {
                state_ = State::Dead;
                break;
            }
            if (now >= next_connect_) start_connect(now);
            return state_ == State::Idle ? next_connect_ : connect_deadline_;
        case State::Connecting:
        case State::Handshake:
            if (now >= connect_deadline_) {
                fail("connect/handshake timeout to " + (active_ ? ep_.text : name));
                return now + hb;
            }
            return connect_deadline_;
        case State::Up:
            return core_.beat(
                now, hb, [&] { fail("peer silent for 3 heartbeats"); },
                [&] { send_control(FrameType::Ping); });
        case State::Dead:
            break;
    }
    return now + hb;
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Ring& ring, const TransportOptions& o) {
    return std::make_unique<TcpTransport>(ring, o);
}

}  // namespace sv
