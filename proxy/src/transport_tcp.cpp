// TCP transport: the channel framing over a stream socket, on the worker's io_uring.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>

#include "channel_fsm.hpp"
#include "transport.hpp"
#include "uring.hpp"

namespace sv {

namespace {

class TcpTransport;

class TcpChannel final : public ChannelFsm, public StreamConn::Events {
  public:
    TcpChannel(TcpTransport& t, ChannelEvents& ev, bool active, Endpoint ep, Endpoint source = {});
    ~TcpChannel() override;

    void start_passive(int fd);

    Status send(std::string_view frame, int prio) override;
    void close() override;
    std::string_view transport_name() const override { return "tcp"; }

  private:
    // ChannelFsm's link hooks
    bool link_connect(int64_t now) override;
    void link_abort(const std::string& why) override;
    void send_control(FrameType t) override;
    // StreamConn::Events
    void on_data(StreamConn& c, std::string_view data) override;
    void on_connect(StreamConn& c, int err) override;
    void on_closed(StreamConn& c) override;
    size_t parse(std::string_view data);  // returns bytes consumed
    bool handle(const FrameHeader& h, std::string_view payload);

    TcpTransport& t_;
    Endpoint ep_;
    Endpoint source_;
    std::unique_ptr<StreamConn> conn_;
    std::string rx_;
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
    : ChannelFsm(ev, t.opts(), active, t.rng()),
      t_(t),
      ep_(std::move(ep)),
      source_(std::move(source)) {}

TcpChannel::~TcpChannel() {
    if (active_) t_.forget(this);
}

void TcpChannel::start_passive(int fd) {
    conn_ = std::make_unique<StreamConn>(t_.ring(), *this);
    conn_->attach(fd);
    link_established(now_ns());
}

bool TcpChannel::link_connect(int64_t now) {
    auto addr = resolve(ep_);
    if (!addr) {
        spdlog::warn("channel {}: {}", name, addr.error().message);
        return false;
    }
    std::optional<SockAddr> from;
    if (!source_.host.empty()) {
        auto s = resolve(source_);
        if (!s) {
            spdlog::warn("channel {}: source: {}", name, s.error().message);
            return false;
        }
        from = s.value();
    }
    conn_ = std::make_unique<StreamConn>(t_.ring(), *this);
    if (auto st = conn_->connect(addr.value(), from ? &*from : nullptr); !st) {
        spdlog::warn("channel {}: {}", name, st.error().message);
        conn_.reset();
        return false;
    }
    link_connecting(now);
    return true;
}

void TcpChannel::on_connect(StreamConn&, int err) {
    if (err) {
        spdlog::debug("channel {}: connect to {}: {}", name, ep_.text, std::strerror(err));
        return;  // StreamConn closes itself; on_closed schedules the retry
    }
    link_established(now_ns());
}

void TcpChannel::send_control(FrameType t) {
    if (!conn_ || conn_->closing()) return;
    auto& out = conn_->out();
    size_t at = out.size();
    if (t == FrameType::Hello) {
        Hello h;
        h.role = opts_.role;
        h.credits = opts_.channel.credits;
        h.max_frame = opts_.channel.max_frame_bytes;
        h.name = opts_.local_name;
        std::string tmp;
        encode_hello(tmp, h);
        out.append(tmp);
    } else {
        out.resize(at + kFrameHeaderBytes);
        encode_control(&out[at], t);
    }
    core_.prepare_outgoing(&out[at]);
    counted_tx(out.size() - at);
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
    counted_tx(frame.size());
    conn_->flush();
    return {};
}

void TcpChannel::close() {
    if (!begin_close(conn_ != nullptr)) return;
    if (up()) {
        goodbye();
        conn_->close_after_flush();
    } else {
        conn_->close();
    }
}

void TcpChannel::link_abort(const std::string& why) {
    spdlog::warn("channel {}: {}", name, why);
    if (conn_) conn_->close();  // on_closed reports the loss
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
    const uint32_t max = opts_.channel.max_frame_bytes;
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
    bool could_send = core_.send.can_send();
    if (!on_frame(h, payload)) return false;
    if (!could_send && core_.send.can_send() && up()) ev_.on_writable(*this);
    return true;
}

void TcpChannel::on_closed(StreamConn&) {
    conn_.reset();
    rx_.clear();
    link_lost();
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Ring& ring, const TransportOptions& o) {
    return std::make_unique<TcpTransport>(ring, o);
}

}  // namespace sv
