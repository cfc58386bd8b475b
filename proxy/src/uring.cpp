#include "uring.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

namespace sv {

namespace {
constexpr size_t kFallbackRecv = 16 * 1024;

uint64_t token(uint32_t slot, uint32_t gen, Op op) {
    return (static_cast<uint64_t>(slot) << 32) | ((gen & 0xffffffu) << 8) |
           static_cast<uint8_t>(op);
}
}  // namespace

Result<SockAddr> resolve(const Endpoint& ep) {
    if (ep.addr) return *ep.addr;
    if (ep.kind == Endpoint::Kind::Unix) return resolve_now(ep);
    // Numeric only: never the resolver here.
    SockAddr a;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.addr);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.addr);
    if (inet_pton(AF_INET, ep.host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(ep.port);
        a.len = sizeof *v4;
        a.family = AF_INET;
        return a;
    }
    if (inet_pton(AF_INET6, ep.host.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(ep.port);
        a.len = sizeof *v6;
        a.family = AF_INET6;
        return a;
    }
    return make_error(fmt::format("{} was not resolved at configuration time", ep.text));
}

Result<int> listen_socket(const Endpoint& ep, bool reuseport, int backlog) {
    auto a = resolve(ep);
    if (!a) return a.error();
    int fd = ::socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error(fmt::format("socket: {}", std::strerror(errno)));
    int one = 1;
    if (a->family != AF_UNIX) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    } else {
        ::unlink(ep.path.c_str());
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a->addr), a->len) < 0) {
        int e = errno;
        ::close(fd);
        return make_error(fmt::format("bind {}: {}", ep.text, std::strerror(e)));
    }
    if (::listen(fd, backlog) < 0) {
        int e = errno;
        ::close(fd);
        return make_error(fmt::format("listen {}: {}", ep.text, std::strerror(e)));
    }
    return fd;
}

// ---------------------------------------------------------------- Ring

Status Ring::init(unsigned entries, unsigned bufs, unsigned buf_size) {
    io_uring_params p{};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
    int rc = io_uring_queue_init_params(entries, &ring_, &p);
    if (rc == -EINVAL) {
        p = {};
        rc = io_uring_queue_init_params(entries, &ring_, &p);
    }
    if (rc < 0) return make_error(fmt::format("io_uring_queue_init: {}", std::strerror(-rc)));
    inited_ = true;
    if (bufs == 0) return {};
    // Buffer rings need a power-of-two count.
    unsigned n = 1;
    while (n < bufs && n < 32768) n <<= 1;
    br_bytes_ = n * sizeof(io_uring_buf);
    void* mem =
        mmap(nullptr, br_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (mem == MAP_FAILED) return {};
    bufs_bytes_ = static_cast<size_t>(n) * buf_size;
    void* data =
        mmap(nullptr, bufs_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (data == MAP_FAILED) {
        munmap(mem, br_bytes_);
        return {};
    }
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uintptr_t>(mem);
    reg.ring_entries = n;
    reg.bgid = kBufGroup;
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) {
        // Older kernel: fall back to per-connection buffers.
        munmap(mem, br_bytes_);
        munmap(data, bufs_bytes_);
        multishot_recv = false;
        return {};
    }
    br_ = static_cast<io_uring_buf_ring*>(mem);
    bufs_ = static_cast<char*>(data);
    nbufs_ = n;
    buf_size_ = buf_size;
    io_uring_buf_ring_init(br_);
    for (unsigned i = 0; i < n; ++i)
        io_uring_buf_ring_add(br_, bufs_ + static_cast<size_t>(i) * buf_size, buf_size,
                              static_cast<unsigned short>(i), io_uring_buf_ring_mask(n),
                              static_cast<int>(i));
    io_uring_buf_ring_advance(br_, static_cast<int>(n));
    return {};
}

void Ring::shutdown() {
    if (!inited_) return;
    io_uring_queue_exit(&ring_);
    inited_ = false;
    if (br_) munmap(br_, br_bytes_);
    if (bufs_) munmap(bufs_, bufs_bytes_);
    br_ = nullptr;
    bufs_ = nullptr;
}

void Ring::recycle(uint16_t bid) {
    io_uring_buf_ring_add(br_, bufs_ + static_cast<size_t>(bid) * buf_size_, buf_size_, bid,
                          io_uring_buf_ring_mask(nbufs_), 0);
    io_uring_buf_ring_advance(br_, 1);
}

uint32_t Ring::add(IoHandler* h) {
    uint32_t slot;
    if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
    } else {
        slot = static_cast<uint32_t>(handlers_.size());
        handlers_.push_back({});
    }
    handlers_[slot].h = h;
    return slot;
}

void Ring::remove(uint32_t slot) {
    if (slot >= handlers_.size() || !handlers_[slot].h) return;
    handlers_[slot].h = nullptr;
    handlers_[slot].gen = (handlers_[slot].gen + 1) & 0xffffffu;
    free_.push_back(slot);
}

io_uring_sqe* Ring::sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    while (!s) {
        io_uring_submit(&ring_);
        s = io_uring_get_sqe(&ring_);
    }
    return s;
}

uint64_t Ring::token_of(uint32_t slot, Op op) const {
    return token(slot, handlers_[slot].gen, op);
}

void Ring::tag(io_uring_sqe* s, uint32_t slot, Op op) {
    io_uring_sqe_set_data64(s, token(slot, handlers_[slot].gen, op));
}

void Ring::dispatch(const io_uring_cqe& c) {
    uint64_t t = c.user_data;
    uint32_t slot = static_cast<uint32_t>(t >> 32);
    uint32_t gen = static_cast<uint32_t>((t >> 8) & 0xffffffu);
    Op op = static_cast<Op>(t & 0xff);
    if (slot < handlers_.size() && handlers_[slot].h && handlers_[slot].gen == gen) {
        handlers_[slot].h->on_cqe(op, c.res, c.flags);
        return;
    }
    // Stale completion: give a selected buffer back.
    if (c.flags & IORING_CQE_F_BUFFER)
        recycle(static_cast<uint16_t>(c.flags >> IORING_CQE_BUFFER_SHIFT));
}

int Ring::run_once(int64_t timeout_ns) {
    io_uring_cqe* cqe = nullptr;
    if (posted_.empty() && timeout_ns != 0) {
        if (timeout_ns < 0) {
            io_uring_submit_and_wait(&ring_, 1);
        } else {
            __kernel_timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
            io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
        }
    } else {
        io_uring_submit(&ring_);
    }
    refresh_loop_clock();
    int n = 0;
    // Bounded so posted work and timers get their turn under a flood.
    while (n < 4096 && io_uring_peek_cqe(&ring_, &cqe) == 0) {
        io_uring_cqe c = *cqe;
        io_uring_cqe_seen(&ring_, cqe);
        dispatch(c);
        ++n;
    }
    while (!posted_.empty()) {
        posted_run_.swap(posted_);
        for (auto& p : posted_run_) {
            if (p.slot < handlers_.size() && handlers_[p.slot].h && handlers_[p.slot].gen == p.gen)
                handlers_[p.slot].h->on_cqe(p.op, 0, 0);
        }
        posted_run_.clear();
    }
    return n;
}

// ---------------------------------------------------------------- StreamConn

StreamConn::~StreamConn() {
    // Only reached with no operation in flight (after on_closed) or at ring teardown.
    if (slot_ != UINT32_MAX) ring_.remove(slot_);
    if (fd_ >= 0 && !finished_) ::close(fd_);
}

void StreamConn::attach(int fd) {
    fd_ = fd;
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    slot_ = ring_.add(this);
    connected_ = true;
    arm_recv();
}

Status StreamConn::connect(const SockAddr& a, const SockAddr* from) {
    int fd = ::socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return make_error(fmt::format("socket: {}", std::strerror(errno)));
    if (from && ::bind(fd, reinterpret_cast<const sockaddr*>(&from->addr), from->len) < 0) {
        int e = errno;
        ::close(fd);
        return make_error(fmt::format("bind source address: {}", std::strerror(e)));
    }
    fd_ = fd;
    if (a.family != AF_UNIX) {
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    peer_ = a;
    slot_ = ring_.add(this);
    auto* s = ring_.sqe();
    io_uring_prep_connect(s, fd_, reinterpret_cast<sockaddr*>(&peer_.addr), peer_.len);
    ring_.tag(s, slot_, Op::Connect);
    ++inflight_;
    return {};
}

void StreamConn::pause_recv(bool p) {
    if (paused_ == p) return;
    paused_ = p;
    if (p) {
        if (recv_armed_ && fd_ >= 0 && !closing_) {
            auto* s = ring_.sqe();
            io_uring_prep_cancel64(s, ring_.token_of(slot_, Op::Recv), 0);
            ring_.tag(s, slot_, Op::Cancel);
            ++inflight_;
        }
    } else {
        arm_recv();
    }
}

void StreamConn::arm_recv() {
    if (recv_armed_ || closing_ || fd_ < 0 || paused_) return;
    auto* s = ring_.sqe();
    if (ring_.has_buf_ring()) {
        if (ring_.multishot_recv)
            io_uring_prep_recv_multishot(s, fd_, nullptr, 0, 0);
        else
            io_uring_prep_recv(s, fd_, nullptr, 0, 0);
        s->flags |= IOSQE_BUFFER_SELECT;
        s->buf_group = Ring::kBufGroup;
    } else {
        if (!rbuf_) rbuf_ = std::make_unique<char[]>(kFallbackRecv);
        io_uring_prep_recv(s, fd_, rbuf_.get(), kFallbackRecv, 0);
    }
    ring_.tag(s, slot_, Op::Recv);
    recv_armed_ = true;
    ++inflight_;
}

void StreamConn::flush() {
    if (send_inflight_ || out_.empty() || closing_ || fd_ < 0 || !connected_) return;
    sending_.swap(out_);
    out_.clear();
    sent_ = 0;
    send_started_ = now_ns();
    submit_send();
}

void StreamConn::submit_send() {
    auto* s = ring_.sqe();
    io_uring_prep_send(s, fd_, sending_.data() + sent_, sending_.size() - sent_, MSG_NOSIGNAL);
    ring_.tag(s, slot_, Op::Send);
    send_inflight_ = true;
    ++inflight_;
}

void StreamConn::close_after_flush(bool linger) {
    if (closing_) return;
    close_after_flush_ = true;
    linger_ = linger_ || linger;
    if (!send_inflight_ && out_.empty())
        finish_output();
    else
        flush();
}

void StreamConn::finish_output() {
    if (!linger_ || fd_ < 0) {
        close();
        return;
    }
    if (linger_since_) return;
    linger_since_ = now_ns();
    ::shutdown(fd_, SHUT_WR);
}

void StreamConn::close() {
    if (closing_) return;
    closing_ = true;
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_RDWR);
    if (inflight_ > 0) {
        auto* s = ring_.sqe();
        io_uring_prep_cancel_fd(s, fd_, IORING_ASYNC_CANCEL_ALL);
        ring_.tag(s, slot_, Op::Cancel);
        ++inflight_;
    }
    maybe_finish();
}

void StreamConn::maybe_finish() {
    if (!closing_ || inflight_ > 0 || finished_) return;
    finished_ = true;
    if (fd_ >= 0) ::close(fd_);
    if (slot_ == UINT32_MAX) slot_ = ring_.add(this);
    ring_.post(slot_, Op::Closed);
}

void StreamConn::on_cqe(Op op, int res, uint32_t flags) {
    switch (op) {
        case Op::Closed: {
            ring_.remove(slot_);
            slot_ = UINT32_MAX;
            fd_ = -1;
            ev_.on_closed(*this);  // may destroy *this
            return;
        }
        case Op::Connect:
            --inflight_;
            if (closing_) break;
            if (res < 0) {
                ev_.on_connect(*this, -res);
                close();
                return;
            }
            connected_ = true;
            arm_recv();
            ev_.on_connect(*this, 0);
            flush();
            break;
        case Op::Recv: {
            bool more = (flags & IORING_CQE_F_MORE) != 0;
            if (!more) {
                recv_armed_ = false;
                --inflight_;
            }
            if (res > 0) {
                bytes_in += static_cast<uint64_t>(res);
                if (flags & IORING_CQE_F_BUFFER) {
                    auto bid = static_cast<uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
                    if (!closing_ && !close_after_flush_)
                        ev_.on_data(*this, ring_.buffer(bid, static_cast<size_t>(res)));
                    ring_.recycle(bid);
                } else if (!closing_ && !close_after_flush_) {
                    ev_.on_data(*this, {rbuf_.get(), static_cast<size_t>(res)});
                }
                if (!more) arm_recv();
            } else if (res == 0) {
                close();  // peer closed
            } else if (res == -ENOBUFS || res == -EINTR || res == -EAGAIN || res == -ECANCELED) {
                if (!more) arm_recv();  // cancelled by pause_recv: stays unarmed while paused
            } else if (res == -EINVAL && ring_.multishot_recv) {
                ring_.multishot_recv = false;  // kernel without multishot recv
                if (!more) arm_recv();
            } else {
                close();
            }
            break;
        }
        case Op::Send:
            --inflight_;
            send_inflight_ = false;
            if (res < 0) {
                close();
                break;
            }
            bytes_out += static_cast<uint64_t>(res);
            sent_ += static_cast<size_t>(res);
            if (closing_) break;
            if (sent_ < sending_.size()) {
                submit_send();
                break;
            }
            sending_.clear();
            sent_ = 0;
            if (!out_.empty()) {
                flush();
            } else {
                ev_.on_drained(*this);
                if (close_after_flush_ && out_.empty() && !send_inflight_) finish_output();
            }
            break;
        case Op::Cancel:
            --inflight_;
            break;
        default:
            break;
    }
    maybe_finish();
}

// ---------------------------------------------------------------- Acceptor

Acceptor::~Acceptor() {
    if (slot_ != UINT32_MAX) ring_.remove(slot_);
    if (fd_ >= 0 && !borrowed_) ::close(fd_);
}

Status Acceptor::listen(const Endpoint& ep, bool reuseport) {
    auto fd = listen_socket(ep, reuseport);
    if (!fd) return fd.error();
    return adopt(fd.value(), false);
}

Status Acceptor::adopt(int fd, bool borrowed) {
    fd_ = fd;
    borrowed_ = borrowed;
    slot_ = ring_.add(this);
    arm();
    return {};
}

void Acceptor::arm() {
    if (armed_ || fd_ < 0 || stopping_ || timer_) return;
    auto* s = ring_.sqe();
    if (ring_.multishot_accept)
        io_uring_prep_multishot_accept(s, fd_, nullptr, nullptr, SOCK_CLOEXEC);
    else
        io_uring_prep_accept(s, fd_, nullptr, nullptr, SOCK_CLOEXEC);
    ring_.tag(s, slot_, Op::Accept);
    armed_ = true;
}

void Acceptor::stop() {
    if (fd_ < 0 || stopping_) return;
    stopping_ = true;
    // Before: the fd was closed first and the cancel, looked up by fd, then found nothing, so
    // the multishot accept kept the socket listening while we drained.  Now: shutdown() takes
    // the socket out of the listen path at once (a new SYN is refused; with SO_REUSEPORT it
    // leaves the group), and the cancel goes out with the fd still open.
    if (!borrowed_) ::shutdown(fd_, SHUT_RDWR);
    if (armed_) {
        auto* s = ring_.sqe();
        io_uring_prep_cancel_fd(s, fd_, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(s, Ring::kIgnore);
        ring_.submit();
    }
    if (!armed_ && !timer_) finish();
}

void Acceptor::finish() {
    if (slot_ != UINT32_MAX) ring_.remove(slot_);
    slot_ = UINT32_MAX;
    if (fd_ >= 0 && !borrowed_) ::close(fd_);
    fd_ = -1;
}

void Acceptor::on_cqe(Op op, int res, uint32_t flags) {
    if (op == Op::Timeout) {
        timer_ = false;
        if (stopping_) {
            if (!armed_) finish();
            return;
        }
        arm();
        return;
    }
    if (!(flags & IORING_CQE_F_MORE)) armed_ = false;
    if (res >= 0) {
        if (stopping_)
            ::close(res);  // raced the stop: we no longer take connections
        else
            cb_(res);
    } else if (res == -EINVAL && ring_.multishot_accept && !stopping_) {
        ring_.multishot_accept = false;
    } else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM) {
        // Out of descriptors: the connection stays in the backlog and every new accept would
        // fail at once (a busy loop).  Pause accepting for 100 ms; clients wait in the backlog.
        errors++;
        if (!stopping_ && !timer_) {
            int64_t now = now_ns();
            if (now - last_warn_ > 1000 * kMs) {
                last_warn_ = now;
                fmt::print(stderr, "sverbs-proxy: accept: {}; pausing accepts for 100 ms\n",
                           std::strerror(-res));
            }
            if (armed_) {  // multishot still armed: cancel it, re-arm after the pause
                auto* s = ring_.sqe();
                io_uring_prep_cancel_fd(s, fd_, IORING_ASYNC_CANCEL_ALL);
                io_uring_sqe_set_data64(s, Ring::kIgnore);
            }
            pause_ = {0, 100 * 1000 * 1000};
            auto* s = ring_.sqe();
            io_uring_prep_timeout(s, &pause_, 0, 0);
            ring_.tag(s, slot_, Op::Timeout);
            timer_ = true;
        }
        return;
    } else if (res < 0 && res != -ECANCELED && res != -EINTR && res != -EAGAIN &&
               res != -ECONNABORTED && !stopping_) {
        errors++;
    }
    if (stopping_) {
        if (!armed_ && !timer_) finish();
        return;
    }
    if (!armed_) arm();
}

// ---------------------------------------------------------------- Waker

Waker::Waker(Ring& ring, std::function<void()> cb) : ring_(ring), cb_(std::move(cb)) {
    fd_ = eventfd(0, EFD_CLOEXEC);
    slot_ = ring_.add(this);
    arm();
}

Waker::~Waker() {
    ring_.remove(slot_);
    if (fd_ >= 0) ::close(fd_);
}

void Waker::notify() {
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(fd_, &one, sizeof one);
}

void Waker::arm() {
    auto* s = ring_.sqe();
    io_uring_prep_read(s, fd_, &value_, sizeof value_, 0);
    ring_.tag(s, slot_, Op::Read);
}

void Waker::on_cqe(Op, int, uint32_t) {
    cb_();
    arm();
}

// ---------------------------------------------------------------- FdWatch

FdWatch::FdWatch(Ring& ring, int fd, std::function<void()> cb)
    : ring_(ring), fd_(fd), cb_(std::move(cb)) {
    slot_ = ring_.add(this);
    arm();
}

FdWatch::~FdWatch() {
    cancel();
}

void FdWatch::cancel() {
    if (cancelled_) return;
    cancelled_ = true;
    if (armed_ && ring_.running()) {  // after Ring::shutdown() the poll is gone already
        auto* s = ring_.sqe();
        io_uring_prep_poll_remove(s, ring_.token_of(slot_, Op::Poll));
        io_uring_sqe_set_data64(s, Ring::kIgnore);
    }
    ring_.remove(slot_);
}

void FdWatch::arm() {
    auto* s = ring_.sqe();
    io_uring_prep_poll_multishot(s, fd_, POLLIN);
    ring_.tag(s, slot_, Op::Poll);
    armed_ = true;
}

void FdWatch::on_cqe(Op, int res, uint32_t flags) {
    if (!(flags & IORING_CQE_F_MORE)) armed_ = false;
    if (res >= 0) cb_();
    if (!armed_ && !cancelled_) arm();
}

}  // namespace sv
