// io_uring event loop pieces: Ring (handler table, provided-buffer ring), StreamConn
// (a socket with async recv/send/connect), Acceptor (multishot accept), Waker (eventfd),
// FdWatch (multishot poll, used for the verbs/rdmacm channels).
//
// Lifetime rule: an object owning in-flight operations is never freed before they
// complete.  StreamConn::close() shuts the socket down, cancels its operations, and only
// when the last one has completed closes the fd and reports on_closed() -- after which the
// owner may destroy it.
#pragma once

#include <liburing.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "config.hpp"

namespace sv {

enum class Op : uint8_t { Accept = 1, Recv, Send, Connect, Poll, Read, Cancel, Closed, Timeout };

class IoHandler {
  public:
    virtual void on_cqe(Op op, int res, uint32_t flags) = 0;

  protected:
    ~IoHandler() = default;
};

// The address resolved at configuration time (resolve_addresses); an endpoint that was not
// resolved there is an error here, not a blocking getaddrinfo on the event loop -- except a
// numeric address or a unix path, which need no resolver.
Result<SockAddr> resolve(const Endpoint& ep);
Result<int> listen_socket(const Endpoint& ep, bool reuseport, int backlog = 4096);

class Ring {
  public:
    static constexpr uint16_t kBufGroup = 7;

    Ring() = default;
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;
    ~Ring() { shutdown(); }

    // entries: SQ size.  bufs x buf_size: provided-buffer ring for multishot recv (0 = none).
    Status init(unsigned entries, unsigned bufs, unsigned buf_size);
    void shutdown();
    bool running() const { return inited_; }

    uint32_t add(IoHandler* h);
    void remove(uint32_t slot);
    io_uring_sqe* sqe();
    void tag(io_uring_sqe* s, uint32_t slot, Op op);
    uint64_t token_of(uint32_t slot, Op op) const;
    static constexpr uint64_t kIgnore = ~0ull;  // completions nobody wants
    // Deliver on_cqe(op, 0, 0) to slot at the end of this iteration.
    void post(uint32_t slot, Op op) { posted_.push_back({slot, handlers_[slot].gen, op}); }

    void submit() { io_uring_submit(&ring_); }
    // Submit, wait up to timeout_ns (<0: forever) for one completion, dispatch all.
    int run_once(int64_t timeout_ns);

    bool has_buf_ring() const { return br_ != nullptr; }
    std::string_view buffer(uint16_t bid, size_t len) const {
        return {bufs_ + static_cast<size_t>(bid) * buf_size_, len};
    }
    void recycle(uint16_t bid);

    bool multishot_recv = true;  // cleared if the kernel refuses it
    bool multishot_accept = true;

  private:
    struct Entry {
        IoHandler* h = nullptr;
        uint32_t gen = 0;
    };
    struct Posted {
        uint32_t slot, gen;
        Op op;
    };
    void dispatch(const io_uring_cqe& c);

    io_uring ring_{};
    bool inited_ = false;
    std::vector<Entry> handlers_;
    std::vector<uint32_t> free_;
    std::vector<Posted> posted_, posted_run_;
    io_uring_buf_ring* br_ = nullptr;
    size_t br_bytes_ = 0;
    char* bufs_ = nullptr;
    size_t bufs_bytes_ = 0;
    unsigned nbufs_ = 0, buf_size_ = 0;
};

class StreamConn final : public IoHandler {
  public:
    class Events {
      public:
        virtual void on_data(StreamConn& c, std::string_view data) = 0;
        virtual void on_connect(StreamConn&, int /*err*/) {}
        virtual void on_drained(StreamConn&) {}
        // Final: the fd is closed; the owner may now destroy the StreamConn.
        virtual void on_closed(StreamConn& c) = 0;

      protected:
        ~Events() = default;
    };

    StreamConn(Ring& ring, Events& ev) : ring_(ring), ev_(ev) {}
    StreamConn(const StreamConn&) = delete;
    StreamConn& operator=(const StreamConn&) = delete;
    ~StreamConn();

    void attach(int fd);  // accepted socket: start receiving
    // on_connect reports the outcome; from: local address to bind first (port 0), or null.
    Status connect(const SockAddr& a, const SockAddr* from = nullptr);
    std::string& out() { return out_; }
    void flush();
    // Close once everything queued is sent.  linger: half-close (FIN) and discard input
    // until the peer closes, so unread request bytes cannot turn the close into an RST
    // that destroys the answer in flight (owner bounds it with lingering_since()).
    void close_after_flush(bool linger = false);
    int64_t lingering_since() const { return linger_since_; }
    void close();
    // Back-pressure: stop reading (the kernel's socket buffer, then TCP flow control, hold the
    // client) until resumed.  Data already in flight may still arrive once.
    void pause_recv(bool p);
    bool recv_paused() const { return paused_; }

    bool is_open() const { return fd_ >= 0 && !closing_; }
    bool connected() const { return connected_; }
    bool closing() const { return closing_; }
    // close_after_flush() was asked: the last answer is queued, nothing more may be.
    bool closing_after_flush() const { return close_after_flush_; }
    size_t unsent() const { return out_.size() + (sending_.size() - sent_); }
    int64_t send_started_ns() const { return send_inflight_ ? send_started_ : 0; }
    uint64_t bytes_in = 0, bytes_out = 0;

  private:
    void on_cqe(Op op, int res, uint32_t flags) override;
    void arm_recv();
    void submit_send();
    void maybe_finish();

    Ring& ring_;
    Events& ev_;
    int fd_ = -1;
    uint32_t slot_ = UINT32_MAX;
    int inflight_ = 0;
    bool recv_armed_ = false, send_inflight_ = false, closing_ = false, finished_ = false;
    bool connected_ = false, close_after_flush_ = false, linger_ = false, paused_ = false;
    int64_t linger_since_ = 0;
    void finish_output();
    std::string out_, sending_;
    size_t sent_ = 0;
    int64_t send_started_ = 0;
    std::unique_ptr<char[]> rbuf_;  // used when the kernel has no buffer rings
    SockAddr peer_;
};

class Acceptor final : public IoHandler {
  public:
    using Callback = std::function<void(int fd)>;
    Acceptor(Ring& ring, Callback cb) : ring_(ring), cb_(std::move(cb)) {}
    ~Acceptor();
    Status listen(const Endpoint& ep, bool reuseport);
    // A listening socket we were given (systemd socket activation); not closed by stop() when
    // borrowed (other workers share it).
    Status adopt(int fd, bool borrowed);
    // Stop accepting: new connections are refused at once (shutdown of the listening socket,
    // submitted cancel), the socket closed when the pending accept has completed.
    void stop();
    bool active() const { return fd_ >= 0 && !stopping_; }
    uint64_t errors = 0;  // accept failures (EMFILE, ...)

  private:
    void on_cqe(Op op, int res, uint32_t flags) override;
    void arm();
    void finish();
    Ring& ring_;
    Callback cb_;
    int fd_ = -1;
    uint32_t slot_ = UINT32_MAX;
    bool armed_ = false, stopping_ = false, borrowed_ = false, timer_ = false;
    __kernel_timespec pause_{};
    int64_t last_warn_ = 0;
};

// Cross-thread wake-up: notify() from any thread runs the callback on the ring's thread.
class Waker final : public IoHandler {
  public:
    Waker(Ring& ring, std::function<void()> cb);
    ~Waker();
    void notify();

  private:
    void on_cqe(Op op, int res, uint32_t flags) override;
    void arm();
    Ring& ring_;
    std::function<void()> cb_;
    int fd_ = -1;
    uint32_t slot_;
    uint64_t value_ = 0;
};

// Multishot readiness poll on a foreign fd (ibverbs completion channel, rdmacm events).
class FdWatch final : public IoHandler {
  public:
    FdWatch(Ring& ring, int fd, std::function<void()> cb);
    ~FdWatch();
    void cancel();

  private:
    void on_cqe(Op op, int res, uint32_t flags) override;
    void arm();
    Ring& ring_;
    int fd_;
    std::function<void()> cb_;
    uint32_t slot_;
    bool armed_ = false, cancelled_ = false;
};

}  // namespace sv
