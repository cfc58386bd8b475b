// RDMA transport: RC queue pairs set up with rdmacm, frames in registered memory.
//
//   frame <= slot_bytes : IBV_WR_SEND into one of the peer's pre-posted receive slots
//   frame >  slot_bytes : IBV_WR_RDMA_WRITE_WITH_IMM into the peer's large-frame ring
//                         (address/rkey/size from its Hello), imm = offset / 64;
//                         it consumes a receive WR too, so it spends a frame credit and
//                         ring space (returned in 64-byte units in frame headers).
// Receive queue depth = credits + kControlReserve, so with the credit rule of
// ChannelCore a SEND never finds the receive queue empty (no RNR).
// Every WR carries the upstream's sverbs priority: send_flags |= SVERBS_PRIO(prio).
// Frames up to rdma_inline_bytes (and the QP's max_inline_data) go inline: the provider
// copies them into the WQE, no copy into a send slot.  One send WR in rdma_signal_every asks
// for a completion (SendQueue: control frames, a draining channel and low send slots force
// one); a completion reclaims every WR posted before it.
// The verbs completion channel and the rdmacm event channel are polled by the worker's
// io_uring (multishot poll), so one thread drives HTTP, TCP and RDMA.
// RDMA has no SO_REUSEPORT: the workers of a process that listen on one address share one
// listening cm_id (ListenGroups below) and connection requests are spread over them.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>

#if __has_include(<infiniband/sverbs.h>)
#include <infiniband/sverbs.h>
#endif
#ifndef SVERBS_PRIO
// Fallback until the sverbs prefix is installed: same encoding (bits 24..27 of
// send_flags, 0 = not stated, n + 1 = level n).
#define SVERBS_PRIO(n) ((((unsigned int)(n)&7u) + 1u) << 24)
#endif

#include <arpa/inet.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <random>

#include "channel_fsm.hpp"
#include "chunk_pool.hpp"
#include "send_queue.hpp"
#include "transport.hpp"
#include "uring.hpp"

namespace sv {

bool rdma_compiled_in() {
    return true;
}

namespace {

class RdmaTransport;

// Page-aligned anonymous memory (registered with the HCA).
struct Region {
    char* p = nullptr;
    size_t n = 0;
    ibv_mr* mr = nullptr;
    Region() = default;
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    ~Region() { release(); }
    bool alloc(ibv_pd* pd, size_t bytes, int access) {
        n = bytes;
        void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
        if (m == MAP_FAILED) return false;
        p = static_cast<char*>(m);
        mr = ibv_reg_mr(pd, p, n, access);
        return mr != nullptr;
    }
    void release() {
        if (mr) ibv_dereg_mr(mr);
        if (p) munmap(p, n);
        mr = nullptr;
        p = nullptr;
    }
};

class RdmaChannel;

// What the channels of one worker share on one device: the protection domain, the pool of
// registered send chunks (slot_bytes each, registered once), and one completion queue with
// its completion channel, polled by the worker's io_uring.  A completion goes to its channel
// by the channel id in its wr_id, checked against the QP number; one of a channel that is
// gone (torn down) is dropped.  Created when the first channel on the device sets up, kept
// until the transport goes.
struct Device {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    Region pool_mem;
    ChunkPool pool;
    ibv_comp_channel* cc = nullptr;
    ibv_cq* cq = nullptr;
    std::unique_ptr<FdWatch> watch;
    int cq_cap = 0;                   // CQ entries
    int cq_need = 0;                  // entries the live channels' queues can fill
    std::vector<RdmaChannel*> chans;  // the live channels on the CQ
    bool polling = false;
    bool more = false;  // the last poll stopped at its budget: the CQ may hold more
    Device() = default;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;
    ~Device() {
        if (watch) watch->cancel();
        watch.reset();
        if (cq) ibv_destroy_cq(cq);
        if (cc) ibv_destroy_comp_channel(cc);
        pool_mem.release();
        if (pd) ibv_dealloc_pd(pd);
    }
};

constexpr uint32_t kCtlSlot = UINT32_MAX - 1;
constexpr int kCqEntries = 4096;  // a device's shared CQ at first (20 channels at credits 64)  //
                                  // SendQueue slot: the channel's control buffer

constexpr size_t kCtlBytes = 4096;  // the largest control frame (Hello) is < 320 bytes

// wr_id = kind (8 bits) | channel id (24 bits) | index (32 bits; Recv: the slot, Send: the
// low bits of the SendQueue sequence).  The channel id routes a completion on the shared CQ.
enum class WrKind : uint64_t { Recv = 1, Send = 2 };
inline uint64_t wr_id(WrKind k, uint32_t chan, uint64_t idx) {
    return (static_cast<uint64_t>(k) << 56) | (static_cast<uint64_t>(chan & 0xffffff) << 32) |
           (idx & 0xffffffffull);
}
inline WrKind wr_kind(uint64_t id) {
    return static_cast<WrKind>(id >> 56);
}
inline uint32_t wr_chan(uint64_t id) {
    return static_cast<uint32_t>((id >> 32) & 0xffffff);
}
inline uint32_t wr_index(uint64_t id) {
    return static_cast<uint32_t>(id);
}

class RdmaChannel final : public ChannelFsm {
  public:
    RdmaChannel(RdmaTransport& t, ChannelEvents& ev, bool active, Endpoint ep,
                Endpoint source = {});
    ~RdmaChannel() override;

    Status send(std::string_view frame, int prio) override;
    std::span<char> frame_buffer(size_t bytes) override;
    void release_frame_buffer() override;
    void close() override;
    std::string_view transport_name() const override { return "rdma"; }

    // rdmacm events routed here by the transport
    void on_cm_event(rdma_cm_event& e);
    Status accept_from(rdma_cm_id* id);
    // The device's CQ: one completion of ours, then once after the poll round.
    bool owns(const ibv_wc& wc) const {
        return id_ && id_->qp && wc.qp_num == id_->qp->qp_num &&
               wr_chan(wc.wr_id) == (id & 0xffffff);
    }
    void on_wc(const ibv_wc& wc);
    void after_poll(bool could_send);
    ChannelStats& stats_mut() { return stats_; }

  private:
    // ChannelFsm's link hooks
    bool link_connect(int64_t now) override;
    void link_abort(const std::string& why) override { down(why); }
    void send_control(FrameType t) override;
    // A data frame needs a pool chunk (lent or free); control frames have their own buffer.
    bool link_ready() const override {
        return dev_ && (lent_ != ChunkPool::kNone || dev_->pool.available() > 0) &&
               sq_.outstanding() + 1 < sq_.depth();
    }
    Status link_hello(const Hello& h) override;
    std::optional<int64_t> link_tick_up(int64_t now) override;

    Status setup_resources(rdma_cm_id* id);
    void teardown();
    void down(const std::string& why);
    void poll_cq();
    void post_recv(uint32_t idx);
    void handle_frame(const char* p, size_t n);
    void flush_pending_control();
    void reclaim(const SendQueue::Entry& e);
    Status post(std::string_view frame, int prio, bool data);
    bool sends_outstanding() const;
    void maybe_disconnect(int64_t now);

    RdmaTransport& t_;
    Endpoint ep_;
    Endpoint source_;  // dial from this local address (selects the device); empty: any
    rdma_cm_id* id_ = nullptr;
    Device* dev_ = nullptr;  // the PD and the send chunk pool, shared with the worker's channels
    ibv_cq* cq_ = nullptr;   // the device's shared CQ while our QP exists
    Region recv_, ctl_, ring_, stage_;  // ctl_: control frames that do not go inline
    bool ctl_free_ = true;
    uint32_t lent_ = ChunkPool::kNone;  // pool chunk lent by frame_buffer(), not yet posted
    uint32_t nslots_ = 0, slot_bytes_ = 0;
    int cq_need_ = 0;           // entries our queues can fill in the shared CQ
    RingAllocator peer_ring_;   // space in the peer's ring
    RingAllocator stage_ring_;  // local staging for WRITEs (freed on completion, FIFO)
    SendQueue sq_;              // posted send WRs and what they hold, until reclaimed
    uint32_t max_inline_ = 0;   // frames up to this size are posted inline
    RingReclaimer my_ring_;
    uint64_t peer_ring_addr_ = 0;
    uint32_t peer_ring_rkey_ = 0;
    bool hello_sent_ = false;
    std::vector<FrameType> pending_ctl_;  // control frames that found no free send slot
    bool down_ = false;                   // inside down(): harvesting the CQ
    int64_t disconnect_at_ = 0;           // close() waits for send completions until then
};

// RDMA has no SO_REUSEPORT: one cm_id listens per address and port.  The workers of a process
// that listen on the same address form a group: the first one binds and listens, and every
// connection request it gets is handed round robin to a member, by migrating the new cm_id to
// that member's event channel (rdma_migrate_id) and waking the member's loop, which accepts.
class ListenGroups {
  public:
    // True if t is the first member (it must bind and listen).
    bool join(const std::string& key, RdmaTransport* t) {
        std::lock_guard lk(mu_);
        for (auto& g : groups_)
            if (g.key == key) {
                g.members.push_back(t);
                return false;
            }
        groups_.push_back({key, t, {t}, 0});
        return true;
    }
    void leave(const std::string& key, RdmaTransport* t) {
        std::lock_guard lk(mu_);
        for (auto it = groups_.begin(); it != groups_.end(); ++it) {
            if (it->key != key) continue;
            if (it->owner == t) {
                groups_.erase(it);  // nobody listens any more
            } else {
                std::erase(it->members, t);
            }
            return;
        }
    }
    // The member that takes the next connection request (round robin; self if alone).
    template <class Handoff>
    bool hand_off(const std::string& key, RdmaTransport* self, rdma_cm_id* id, Handoff&& give) {
        std::lock_guard lk(mu_);
        for (auto& g : groups_) {
            if (g.key != key || g.members.empty()) continue;
            RdmaTransport* m = g.members[g.rr++ % g.members.size()];
            if (m == self) return false;
            return give(m, id);  // under the lock: m cannot leave meanwhile
        }
        return false;
    }

  private:
    struct Group {
        std::string key;
        RdmaTransport* owner;
        std::vector<RdmaTransport*> members;
        size_t rr;
    };
    std::mutex mu_;
    std::vector<Group> groups_;
};

ListenGroups& listen_groups() {
    static ListenGroups g;
    return g;
}

class RdmaTransport final : public Transport {
  public:
    RdmaTransport(Ring& ring, const TransportOptions& o) : ring_(ring), o_(o) {}
    ~RdmaTransport() override {
        stop_listening();
        handoff_waker_.reset();
        watch_.reset();
        passive_.clear();
        devices_.clear();  // after every channel (the ingress destroys its channels first)
        {
            std::lock_guard lk(inbox_mu_);
            for (auto* id : inbox_) {
                rdma_reject(id, nullptr, 0);
                rdma_destroy_id(id);
            }
            inbox_.clear();
        }
        if (ec_) rdma_destroy_event_channel(ec_);
    }

    Status init() {
        ec_ = rdma_create_event_channel();
        if (!ec_)
            return make_error(fmt::format("rdma_create_event_channel: {}", std::strerror(errno)));
        int fl = fcntl(ec_->fd, F_GETFL);
        fcntl(ec_->fd, F_SETFL, fl | O_NONBLOCK);
        watch_ = std::make_unique<FdWatch>(ring_, ec_->fd, [this] { drain_events(); });
        return {};
    }

    std::unique_ptr<Channel> dial(const Endpoint& ep, const Endpoint& source, std::string name,
                                  ChannelEvents& ev) override {
        auto ch = std::make_unique<RdmaChannel>(*this, ev, true, ep, source);
        ch->name = std::move(name);
        ch->id = next_id_++;
        active_.push_back(ch.get());
        return ch;
    }

    Status listen(const Endpoint& ep, ChannelEvents& ev) override {
        passive_ev_ = &ev;
        auto a = resolve(ep);
        if (!a) return a.error();
        handoff_waker_ = std::make_unique<Waker>(ring_, [this] { take_handoffs(); });
        group_key_ = ep.text;
        if (!listen_groups().join(group_key_, this)) return {};  // another worker listens
        auto fail = [&](std::string msg) {
            stop_listening();
            return make_error(std::move(msg));
        };
        if (rdma_create_id(ec_, &listen_id_, nullptr, RDMA_PS_TCP))
            return fail(fmt::format("rdma_create_id: {}", std::strerror(errno)));
        if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&a->addr)))
            return fail(fmt::format("rdma_bind_addr {}: {}", ep.text, std::strerror(errno)));
        if (rdma_listen(listen_id_, 64))
            return fail(fmt::format("rdma_listen: {}", std::strerror(errno)));
        return {};
    }

    void stop_listening() override {
        if (!group_key_.empty()) listen_groups().leave(group_key_, this);
        group_key_.clear();
        if (listen_id_) rdma_destroy_id(listen_id_);
        listen_id_ = nullptr;
    }

    int64_t tick(int64_t now) override {
        int64_t next = now + 1000 * kMs;
        // A CQ whose last poll stopped at its budget raises no new event for what it still
        // holds: it is polled again here, and the loop does not sleep while it has more.
        for (auto& d : devices_) {
            if (d->more) poll(*d);
            if (d->more) next = now;
        }
        for (auto* ch : active_) next = std::min(next, ch->tick(now));
        for (auto& ch : passive_) next = std::min(next, ch->tick(now));
        std::erase_if(passive_, [](auto& ch) { return ch->dead(); });
        graveyard_.clear();
        return next;
    }

    size_t passive_count() const override { return passive_.size(); }

    // Our channel joins the device's CQ: it may fill `need` entries (its send and receive
    // queues).  The CQ holds at least twice what the live channels can fill (kCqEntries at
    // first), so what departed channels left in it until the next poll also fits; it is
    // resized only when the live channels outgrow half of it.
    Status join(Device& d, RdmaChannel* ch, int need) {
        if (!d.cq) {
            d.cc = ibv_create_comp_channel(d.ctx);
            if (!d.cc) return make_error("ibv_create_comp_channel failed");
            int fl = fcntl(d.cc->fd, F_GETFL);
            fcntl(d.cc->fd, F_SETFL, fl | O_NONBLOCK);
            d.cq_cap = std::max(2 * need, kCqEntries);
            d.cq = ibv_create_cq(d.ctx, d.cq_cap, nullptr, d.cc, 0);
            if (!d.cq) return make_error("ibv_create_cq failed");
            if (ibv_req_notify_cq(d.cq, 0)) return make_error("ibv_req_notify_cq failed");
            d.watch = std::make_unique<FdWatch>(ring_, d.cc->fd, [this, &d] { poll(d); });
        }
        if (2 * (d.cq_need + need) > d.cq_cap) {
            int cap = 2 * d.cq_cap;
            while (cap < 2 * (d.cq_need + need)) cap *= 2;
            if (ibv_resize_cq(d.cq, cap))
                return make_error(
                    fmt::format("ibv_resize_cq to {}: {}", cap, std::strerror(errno)));
            d.cq_cap = cap;
        }
        d.cq_need += need;
        d.chans.push_back(ch);
        return {};
    }
    void leave(Device& d, RdmaChannel* ch, int need) {
        if (std::erase(d.chans, ch) == 0) return;
        d.cq_need -= need;  // its completions still in the CQ are dropped at the next poll
    }

    // The device's CQ's completions (up to rdma_poll_budget; tick() polls again for the rest)
    // to their channels; then each channel that got some
    // finishes its round (credits, control frames, disconnect).  Re-entered from a channel
    // that goes down inside the round: the outer round goes on, nothing polled twice.
    void poll(Device& d) {
        if (d.polling || !d.cq) return;
        d.polling = true;
        ibv_cq* ev_cq = nullptr;
        void* ctx = nullptr;
        // Non-blocking channel fd: take every pending event (a multishot poll reports edges),
        // then re-arm before polling so a completion after the poll raises a new event.
        unsigned events = 0;
        while (ibv_get_cq_event(d.cc, &ev_cq, &ctx) == 0) ++events;
        if (events) ibv_ack_cq_events(d.cq, events);
        ibv_req_notify_cq(d.cq, 0);
        touched_.clear();
        uint64_t polls = 0;
        bool empty = false;
        ibv_wc wc[32];
        uint32_t left = o_.channel.rdma_poll_budget;
        while (left > 0) {
            const int want = static_cast<int>(std::min<uint32_t>(32, left));
            int n = ibv_poll_cq(d.cq, want, wc);
            polls++;
            if (n < want) empty = true;
            if (n <= 0) break;
            left -= static_cast<uint32_t>(n);
            for (int i = 0; i < n; ++i) {
                RdmaChannel* ch = nullptr;
                for (auto* c : d.chans)
                    if (c->owns(wc[i])) ch = c;
                if (!ch) continue;  // its channel is gone: flushed or stale
                if (std::find_if(touched_.begin(), touched_.end(),
                                 [ch](auto& t) { return t.first == ch; }) == touched_.end())
                    touched_.emplace_back(ch, ch->can_send());
                ch->on_wc(wc[i]);
            }
            if (empty) break;
        }
        d.polling = false;
        d.more = !empty;
        // The device's wake-ups and polls are counted on the first channel served (per
        // request they add up the same).
        RdmaChannel* first = !touched_.empty()  ? touched_.front().first
                             : !d.chans.empty() ? d.chans.front()
                                                : nullptr;
        if (first) {
            first->stats_mut().cq_events++;
            first->stats_mut().cq_polls += polls;
        }
        auto done = std::move(touched_);
        touched_.clear();
        for (auto& [ch, could_send] : done)
            if (std::find(d.chans.begin(), d.chans.end(), ch) != d.chans.end())
                ch->after_poll(could_send);
    }

    // The worker's PD and send pool on ctx (created on first use).
    Result<Device*> device(ibv_context* ctx) {
        for (auto& d : devices_)
            if (d->ctx == ctx) return d.get();
        auto d = std::make_unique<Device>();
        d->ctx = ctx;
        d->pd = ibv_alloc_pd(ctx);
        if (!d->pd) return make_error("ibv_alloc_pd failed");
        const auto& c = o_.channel;
        if (!d->pool_mem.alloc(d->pd, static_cast<size_t>(c.rdma_pool_chunks) * c.slot_bytes, 0))
            return make_error(fmt::format("registering the send pool ({} x {} B) failed",
                                          c.rdma_pool_chunks, c.slot_bytes));
        d->pool.reset(d->pool_mem.p, c.slot_bytes, c.rdma_pool_chunks);
        devices_.push_back(std::move(d));
        return devices_.back().get();
    }
    void forget(RdmaChannel* ch) { std::erase(active_, ch); }
    // A watch cannot be destroyed inside its own callback: keep it until the next tick.
    void bury(std::unique_ptr<FdWatch> w) { graveyard_.push_back(std::move(w)); }
    Ring& ring() { return ring_; }
    rdma_event_channel* ec() { return ec_; }
    const TransportOptions& opts() const { return o_; }
    std::mt19937& rng() { return rng_; }

  private:
    // Another worker's thread: id now reports to our event channel; accept it on our loop.
    bool receive_handoff(rdma_cm_id* id) {
        if (rdma_migrate_id(id, ec_)) return false;
        {
            std::lock_guard lk(inbox_mu_);
            inbox_.push_back(id);
        }
        handoff_waker_->notify();
        return true;
    }

    void take_handoffs() {
        std::vector<rdma_cm_id*> ids;
        {
            std::lock_guard lk(inbox_mu_);
            ids.swap(inbox_);
        }
        for (auto* id : ids) accept(id);
    }

    void accept(rdma_cm_id* id) {
        if (!passive_ev_ || group_key_.empty()) {  // not listening (any more)
            rdma_reject(id, nullptr, 0);
            rdma_destroy_id(id);
            return;
        }
        auto ch = std::make_unique<RdmaChannel>(*this, *passive_ev_, false, Endpoint{});
        ch->id = next_id_++;
        ch->name = "ingress#" + std::to_string(ch->id);
        if (auto st = ch->accept_from(id); !st) {
            spdlog::warn("rdma accept: {}", st.error().message);
            return;  // the channel's destructor rejects/destroys the id
        }
        passive_.push_back(std::move(ch));
    }

    void drain_events() {
        rdma_cm_event* e = nullptr;
        // The fd is non-blocking; read until it is empty (a multishot poll reports edges).
        while (rdma_get_cm_event(ec_, &e) == 0) {
            rdma_cm_event copy = *e;
            if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
                rdma_cm_id* id = e->id;
                rdma_ack_cm_event(e);
                bool handed = listen_groups().hand_off(
                    group_key_, this, id,
                    [](RdmaTransport* m, rdma_cm_id* x) { return m->receive_handoff(x); });
                if (!handed) accept(id);
                continue;
            }
            auto* ch = static_cast<RdmaChannel*>(e->id ? e->id->context : nullptr);
            rdma_ack_cm_event(e);
            if (ch) ch->on_cm_event(copy);
        }
    }

    Ring& ring_;
    TransportOptions o_;
    rdma_event_channel* ec_ = nullptr;
    rdma_cm_id* listen_id_ = nullptr;
    std::string group_key_;  // set while listening (as owner or member)
    std::unique_ptr<FdWatch> watch_;
    std::unique_ptr<Waker> handoff_waker_;
    std::mutex inbox_mu_;
    std::vector<rdma_cm_id*> inbox_;
    std::vector<RdmaChannel*> active_;
    std::vector<std::unique_ptr<RdmaChannel>> passive_;
    std::vector<std::unique_ptr<FdWatch>> graveyard_;
    std::vector<std::unique_ptr<Device>> devices_;
    std::vector<std::pair<RdmaChannel*, bool>> touched_;  // poll(): channels served, could_send
    ChannelEvents* passive_ev_ = nullptr;
    uint32_t next_id_ = 1;
    std::mt19937 rng_{std::random_device{}()};
};

RdmaChannel::RdmaChannel(RdmaTransport& t, ChannelEvents& ev, bool active, Endpoint ep,
                         Endpoint source)
    : ChannelFsm(ev, t.opts(), active, t.rng()),
      t_(t),
      ep_(std::move(ep)),
      source_(std::move(source)) {}

RdmaChannel::~RdmaChannel() {
    teardown();
    if (active_) t_.forget(this);
}

Status RdmaChannel::setup_resources(rdma_cm_id* id) {
    const auto& c = opts_.channel;
    id_ = id;
    id_->context = this;
    auto dev = t_.device(id_->verbs);
    if (!dev) return dev.error();
    dev_ = dev.value();
    ibv_pd* pd = dev_->pd;
    nslots_ = c.credits + kControlReserve;
    slot_bytes_ = c.slot_bytes;
    // Send queue: every slot (SENDs) plus one WRITE per data credit (large frames use no
    // slot); the CQ holds all sends and all receives.
    const uint32_t max_send = nslots_ + c.credits;
    cq_need_ = static_cast<int>(max_send + nslots_);
    if (auto st = t_.join(*dev_, this, cq_need_); !st) {
        dev_ = nullptr;
        return st;
    }
    cq_ = dev_->cq;
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = max_send;
    qa.cap.max_recv_wr = nslots_;
    qa.cap.max_send_sge = 2;  // inline: the header (our copy) and the payload
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = c.rdma_inline_bytes;
    if (rdma_create_qp(id_, pd, &qa) && c.rdma_inline_bytes) {
        qa.cap.max_inline_data = 0;  // a device without inline sends: copy every frame
        if (rdma_create_qp(id_, pd, &qa))
            return make_error(fmt::format("rdma_create_qp: {}", std::strerror(errno)));
    } else if (!id_->qp) {
        return make_error(fmt::format("rdma_create_qp: {}", std::strerror(errno)));
    }
    max_inline_ = std::min(qa.cap.max_inline_data, c.rdma_inline_bytes);
    sq_.reset(max_send, c.rdma_signal_every);
    if (!recv_.alloc(pd, static_cast<size_t>(nslots_) * slot_bytes_, IBV_ACCESS_LOCAL_WRITE) ||
        !ctl_.alloc(pd, kCtlBytes, 0) ||
        !ring_.alloc(pd, c.large_ring_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) ||
        !stage_.alloc(pd, c.large_ring_bytes, 0))
        return make_error("registering channel memory failed");
    ctl_free_ = true;
    core_.reset(c.credits);
    my_ring_.reset(c.large_ring_bytes);
    stage_ring_.reset(c.large_ring_bytes);
    pending_ctl_.clear();
    hello_sent_ = false;
    for (uint32_t i = 0; i < nslots_; ++i) post_recv(i);
    return {};
}

void RdmaChannel::teardown() {
    if (dev_) t_.leave(*dev_, this, cq_need_);  // our completions left in the CQ are dropped
    if (id_) {
        if (id_->qp) rdma_destroy_qp(id_);
    }
    // The QP is gone: the pool chunks its sends held (and the one lent) go back to the pool
    // for the other channels, although no completion will come for them.
    sq_.abandon([this](const SendQueue::Entry& e) { reclaim(e); });
    if (dev_ && lent_ != ChunkPool::kNone) dev_->pool.release(lent_);
    lent_ = ChunkPool::kNone;
    recv_.release();
    ctl_.release();
    ring_.release();
    stage_.release();
    if (id_) rdma_destroy_id(id_);
    cq_ = nullptr;
    dev_ = nullptr;
    id_ = nullptr;
}

Status RdmaChannel::accept_from(rdma_cm_id* id) {
    if (auto st = setup_resources(id); !st) {
        rdma_reject(id, nullptr, 0);
        return st;
    }
    rdma_conn_param p{};
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.rnr_retry_count = 7;
    if (rdma_accept(id_, &p))
        return make_error(fmt::format("rdma_accept: {}", std::strerror(errno)));
    link_connecting(now_ns());
    return {};
}

bool RdmaChannel::link_connect(int64_t now) {
    auto a = resolve(ep_);
    Result<SockAddr> src = SockAddr{};
    if (!source_.host.empty()) src = resolve(source_);
    if (!a || !src) {
        spdlog::warn("channel {}: {}", name, (!a ? a : src).error().message);
        return false;
    }
    if (rdma_create_id(t_.ec(), &id_, this, RDMA_PS_TCP)) {
        id_ = nullptr;
        return false;
    }
    link_connecting(now);  // address and route resolution, then rdma_connect
    sockaddr* from = source_.host.empty() ? nullptr : reinterpret_cast<sockaddr*>(&src->addr);
    if (rdma_resolve_addr(id_, from, reinterpret_cast<sockaddr*>(&a->addr),
                          static_cast<int>(opts_.channel.connect_timeout_ms)))
        down(fmt::format("rdma_resolve_addr {}: {}", ep_.text, std::strerror(errno)));
    return true;
}

void RdmaChannel::on_cm_event(rdma_cm_event& e) {
    switch (e.event) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (rdma_resolve_route(id_, static_cast<int>(opts_.channel.connect_timeout_ms)))
                down("rdma_resolve_route failed");
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            if (auto st = setup_resources(id_); !st) {
                down(st.error().message);
                break;
            }
            rdma_conn_param p{};
            p.responder_resources = 1;
            p.initiator_depth = 1;
            p.retry_count = 7;
            p.rnr_retry_count = 7;
            if (rdma_connect(id_, &p)) down("rdma_connect failed");
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            link_established(now_ns());
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            // down() first takes what already arrived from the CQ: the peer's last answers
            // are delivered, not turned into 502s.
            down(fmt::format("rdmacm: {}", rdma_event_str(e.event)));
            break;
        default:
            break;
    }
}

void RdmaChannel::down(const std::string& why) {
    if (down_) return;
    down_ = true;
    // Deliver every frame that completed before the failure (a drain's last answers), then
    // disconnect: rdma_disconnect moves the QP to error and flushes what was not polled.
    if (cq_ && connecting_or_up()) poll_cq();
    down_ = false;
    if (connecting_or_up()) {
        spdlog::warn("channel {} (rdma): {}", name, why);
        if (id_) rdma_disconnect(id_);
    }
    teardown();
    link_lost();
}

void RdmaChannel::post_recv(uint32_t idx) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(recv_.p + static_cast<size_t>(idx) * slot_bytes_),
                slot_bytes_, recv_.mr->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wr_id(WrKind::Recv, id, idx);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    stats_.recv_posts++;
    ibv_post_recv(id_->qp, &wr, &bad);
}

std::span<char> RdmaChannel::frame_buffer(size_t bytes) {
    if (!dev_ || !up() || bytes > slot_bytes_) return {};
    if (lent_ == ChunkPool::kNone) lent_ = dev_->pool.acquire();
    if (lent_ == ChunkPool::kNone) return {};
    return {dev_->pool.data(lent_), slot_bytes_};
}

void RdmaChannel::release_frame_buffer() {
    if (dev_ && lent_ != ChunkPool::kNone) dev_->pool.release(lent_);
    lent_ = ChunkPool::kNone;
}

Status RdmaChannel::post(std::string_view frame, int prio, bool data) {
    if (sq_.full()) return make_error(Errc::NoCredit, "send queue full");
    const bool large = frame.size() > slot_bytes_;
    const bool inl = !large && frame.size() <= max_inline_;
    // A data frame assembled in the chunk frame_buffer() lent: posted from there, no copy.
    const bool in_place = data && lent_ != ChunkPool::kNone &&
                          dev_->pool.chunk_of(frame.data(), frame.size()) == lent_;
    uint32_t copy_chunk = ChunkPool::kNone;
    if (!large && !inl) {
        if (!data && (!ctl_free_ || frame.size() > ctl_.n))
            return make_error(Errc::NoCredit, "control buffer busy");
        // A copied frame takes a chunk of its own: the lent one may hold a frame being
        // assembled (the egress's next answers).
        if (data && !in_place) copy_chunk = dev_->pool.acquire();
        if (data && !in_place && copy_chunk == ChunkPool::kNone)
            return make_error(Errc::NoCredit, "no free chunk in the send pool");
    }
    // Header fields owed to the peer are filled in our copy (inline: of the header only).
    char hdr[kFrameHeaderBytes];
    char* dst;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    ibv_sge sge[2]{};
    wr.num_sge = 1;
    uint32_t slot = UINT32_MAX;
    uint64_t units = 0;
    bool copied = false;
    if (inl) {
        std::memcpy(hdr, frame.data(), kFrameHeaderBytes);
        dst = hdr;
        sge[0] = {reinterpret_cast<uintptr_t>(hdr), kFrameHeaderBytes, 0};
        if (frame.size() > kFrameHeaderBytes) {
            sge[1] = {reinterpret_cast<uintptr_t>(frame.data() + kFrameHeaderBytes),
                      static_cast<uint32_t>(frame.size() - kFrameHeaderBytes), 0};
            wr.num_sge = 2;
        }
        wr.opcode = IBV_WR_SEND;
    } else if (!large) {
        uint32_t lkey;
        if (data) {
            slot = in_place ? lent_ : copy_chunk;
            dst = in_place ? const_cast<char*>(frame.data()) : dev_->pool.data(slot);
            lkey = dev_->pool_mem.mr->lkey;
        } else {
            slot = kCtlSlot;
            dst = ctl_.p;
            lkey = ctl_.mr->lkey;
        }
        if (!in_place) {
            std::memcpy(dst, frame.data(), frame.size());
            copied = true;
        }
        sge[0] = {reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(frame.size()), lkey};
        wr.opcode = IBV_WR_SEND;
    } else {
        if (!data) return make_error("control frame too large");
        if (!peer_ring_.can_alloc(frame.size()) || !stage_ring_.can_alloc(frame.size()))
            return make_error(Errc::NoCredit,
                              "no credit");  // ring space is a credit too: wait for returns
        auto roff = peer_ring_.alloc(frame.size());
        const uint64_t used = stage_ring_.used_bytes();
        auto loff = stage_ring_.alloc(frame.size());
        // Freed on completion, with the wrap padding the allocation may have skipped.
        units = (stage_ring_.used_bytes() - used) / kRingUnit;
        dst = stage_.p + *loff;
        std::memcpy(dst, frame.data(), frame.size());
        copied = true;
        sge[0] = {reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(frame.size()),
                  stage_.mr->lkey};
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htonl(static_cast<uint32_t>(*roff / kRingUnit));
        wr.wr.rdma.remote_addr = peer_ring_addr_ + *roff;
        wr.wr.rdma.rkey = peer_ring_rkey_;
        stats_.large_frames++;
    }
    auto give_back = [&] {
        if (copy_chunk != ChunkPool::kNone) dev_->pool.release(copy_chunk);
    };
    if (!core_.prepare_outgoing(dst)) {
        give_back();
        return make_error(Errc::NoCredit, "no credit");
    }
    put_le<uint32_t>(dst + 16, my_ring_.take_units());
    // Control frames and a draining channel's frames are signaled: close() waits for the
    // completion of the last one, and unsignaled WRs are reclaimed only by a later one.  Low
    // on free pool chunks: signaled too (the pool is shared: chunks held by unsignaled WRs
    // come back only with a later completion).
    const bool sig =
        sq_.want_signal(!data || said_goodbye_ || shutting_down_, dev_->pool.available(), units);
    wr.wr_id = wr_id(WrKind::Send, id, sq_.next_seq());
    wr.sg_list = sge;
    wr.send_flags = (sig ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0) | SVERBS_PRIO(prio);
    stats_.send_posts++;
    if (int rc = ibv_post_send(id_->qp, &wr, &bad); rc) {
        give_back();
        return make_error(fmt::format("ibv_post_send: {}", std::strerror(rc)));
    }
    if (slot == kCtlSlot) ctl_free_ = false;
    if (in_place && slot == lent_) lent_ = ChunkPool::kNone;  // the WR holds it now
    // Posted inline out of the lent chunk: nothing is in it now.  It goes back to the pool
    // (shared by the device's channels) instead of staying with an idle channel.
    if (in_place && inl) release_frame_buffer();
    sq_.posted(slot, units, sig);
    stats_.signaled += sig;
    stats_.inline_sends += inl;
    if (inl) stats_.inline_bytes += frame.size();
    if (copied) {
        stats_.copies++;
        stats_.copied_bytes += frame.size();
    }
    counted_tx(frame.size());
    return {};
}

Status RdmaChannel::send(std::string_view frame, int prio) {
    if (!up()) return make_error(Errc::ChannelDown, "channel down");
    if (!core_.send.can_send()) {
        stats_.credit_stalls++;
        return make_error(Errc::NoCredit, "no credit");
    }
    auto st = post(frame, prio, true);
    if (!st && st.error().code == Errc::NoCredit) {
        stats_.credit_stalls++;
        // No room in the peer's ring, and the peer may owe less than the half that makes it
        // return space on its own (the wrap padding): ask now, not at the next heartbeat.
        if (frame.size() > slot_bytes_ && !peer_ring_.can_alloc(frame.size()) &&
            peer_ring_.want_probe()) {
            stats_.ring_probes++;
            send_control(FrameType::Ping);
        }
    } else if (!st) {
        down(st.error().message);
    }
    return st;
}

void RdmaChannel::send_control(FrameType t) {
    if (!id_ || !id_->qp) return;
    if (t == FrameType::Hello) {  // sent once per connection, by whichever side gets there
        if (hello_sent_) return;
        hello_sent_ = true;
    }
    std::string f;
    if (t == FrameType::Hello) {
        Hello h;
        h.role = opts_.role;
        h.credits = opts_.channel.credits;
        h.slot_bytes = slot_bytes_;
        h.max_frame = opts_.channel.max_frame_bytes;
        h.ring_addr = reinterpret_cast<uintptr_t>(ring_.p);
        h.ring_rkey = ring_.mr->rkey;
        h.ring_bytes = ring_.n;
        h.name = opts_.local_name;
        encode_hello(f, h);
    } else {
        f.resize(kFrameHeaderBytes);
        encode_control(f.data(), t);
    }
    if (sq_.full() || (f.size() > max_inline_ && !ctl_free_)) {
        // Every slot (or queue entry) is waiting for its send completion: send it after the
        // next poll.
        if (std::find(pending_ctl_.begin(), pending_ctl_.end(), t) == pending_ctl_.end())
            pending_ctl_.push_back(t);
        if (t == FrameType::Hello) hello_sent_ = false;
        return;
    }
    if (auto st = post(f, 0, false); !st) down("control send: " + st.error().message);
}

void RdmaChannel::flush_pending_control() {
    while (!pending_ctl_.empty() && cq_) {
        const size_t before = pending_ctl_.size();
        FrameType t = pending_ctl_.front();
        pending_ctl_.erase(pending_ctl_.begin());
        send_control(t);
        if (pending_ctl_.size() >= before) break;  // still no room: after the next poll
    }
}

// A send WR is complete (its own signaled completion, or a later one's): give back what it
// held.
void RdmaChannel::reclaim(const SendQueue::Entry& e) {
    if (e.slot == kCtlSlot)
        ctl_free_ = true;
    else if (e.slot != UINT32_MAX && !dev_->pool.release(e.slot))
        spdlog::error("channel {} (rdma): send chunk {} returned twice", name, e.slot);
    if (e.stage_units) (void)stage_ring_.release_units(e.stage_units);
}

bool RdmaChannel::sends_outstanding() const {
    return cq_ && sq_.unreaped();
}

void RdmaChannel::close() {
    if (!begin_close(id_ && state_ != State::Idle)) return;
    goodbye();
    // Disconnect only once every posted send has completed (the peer has it): a disconnect
    // flushes sends still queued, and those are answers.  Bounded by connect_timeout_ms
    // (link_tick_up).
    if (up() && sends_outstanding()) {
        disconnect_at_ = now_ns() + opts_.channel.connect_timeout_ms * kMs;
        return;
    }
    rdma_disconnect(id_);  // DISCONNECTED event finishes it
}

void RdmaChannel::maybe_disconnect(int64_t now) {
    if (!disconnect_at_ || !id_) return;
    if (sends_outstanding() && now < disconnect_at_) return;
    disconnect_at_ = 0;
    rdma_disconnect(id_);
}

// Our CQ is the device's: polling it serves every channel on it.
void RdmaChannel::poll_cq() {
    if (cq_ && dev_) t_.poll(*dev_);
}

void RdmaChannel::on_wc(const ibv_wc& wc) {
    if (!cq_) return;
    if (wc.status != IBV_WC_SUCCESS) {
        if (down_) return;
        if (wc.status != IBV_WC_WR_FLUSH_ERR)
            down(fmt::format("completion error: {}", ibv_wc_status_str(wc.status)));
        return;
    }
    switch (wr_kind(wc.wr_id)) {
        case WrKind::Send: {
            // the full sequence number from its low 32 bits (outstanding WRs are < 2^32 apart)
            uint64_t seq = (sq_.next_seq() & ~0xffffffffull) | wr_index(wc.wr_id);
            if (seq >= sq_.next_seq()) seq -= 1ull << 32;
            if (!sq_.completed(seq, [this](const SendQueue::Entry& e) { reclaim(e); }))
                down("send completion for no outstanding signaled WR");
            break;
        }
        case WrKind::Recv: {
            auto idx = wr_index(wc.wr_id);
            core_.received(now_ns());
            stats_.bytes_rx += wc.byte_len;
            if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
                uint64_t off = static_cast<uint64_t>(ntohl(wc.imm_data)) * kRingUnit;
                if (off + kFrameHeaderBytes > ring_.n) {
                    down("large frame offset outside the ring");
                    return;
                }
                uint32_t len = get_le<uint32_t>(ring_.p + off + 8) + kFrameHeaderBytes;
                auto units = my_ring_.on_frame(off, len);
                if (!units) {
                    down(units.error().message);
                    return;
                }
                handle_frame(ring_.p + off, len);
                my_ring_.consumed_units(units.value());
            } else {
                handle_frame(recv_.p + static_cast<size_t>(idx) * slot_bytes_, wc.byte_len);
            }
            if (cq_) post_recv(idx);
            break;
        }
    }
}

void RdmaChannel::after_poll(bool could_send) {
    if (!cq_) return;
    flush_pending_control();
    if (disconnect_at_) maybe_disconnect(now_ns());
    if (down_) return;  // harvesting for down(): no new frames
    if (!cq_ || !up()) return;
    if (core_.ret.explicit_due() || my_ring_.explicit_due()) send_control(FrameType::Credit);
    if (!could_send && can_send()) ev_.on_writable(*this);
}

void RdmaChannel::handle_frame(const char* p, size_t n) {
    auto h = decode_header(p, n, opts_.channel.max_frame_bytes);
    if (!h || kFrameHeaderBytes + h->length > n) {
        down("protocol error: " + (h ? std::string("truncated frame") : h.error().message));
        return;
    }
    if (auto st = peer_ring_.release_units(h->ring_units); !st) {
        down("protocol error: " + st.error().message);
        return;
    }
    // A Ping may come from a sender short of ring space: its Pong (on_frame) returns what is
    // owed, and if nothing is, the next units owed go in a Credit (after_poll()).
    if (h->type == FrameType::Ping) my_ring_.peer_waits();
    on_frame(h.value(), std::string_view(p + kFrameHeaderBytes, h->length));
}

Status RdmaChannel::link_hello(const Hello& hello) {
    const auto& ch = opts_.channel;
    if (hello.slot_bytes != slot_bytes_ ||
        hello.ring_bytes / kRingUnit * kRingUnit / 2 < ring_round(ch.max_frame_bytes) ||
        hello.max_frame > ch.max_frame_bytes)
        return make_error(fmt::format(
            "peer's [channel] differs: slot_bytes {} (ours {}), large ring {} B, "
            "max_frame {} (ours {})",
            hello.slot_bytes, slot_bytes_, hello.ring_bytes, hello.max_frame, ch.max_frame_bytes));
    send_control(FrameType::Hello);  // passive side: the peer's Hello may come before ESTABLISHED
    if (!cq_) return {};             // that send failed and took the channel down
    if (state_ == State::Connecting) {
        state_ = State::Handshake;
        core_.mark_up(now_ns());
    }
    peer_ring_.reset(hello.ring_bytes);
    peer_ring_addr_ = hello.ring_addr;
    peer_ring_rkey_ = hello.ring_rkey;
    return {};
}

std::optional<int64_t> RdmaChannel::link_tick_up(int64_t now) {
    if (!disconnect_at_) return std::nullopt;
    maybe_disconnect(now);
    if (!disconnect_at_) return std::nullopt;
    return std::min(disconnect_at_, now + 10 * kMs);
}

}  // namespace

Result<std::unique_ptr<Transport>> make_rdma_transport(Ring& ring, const TransportOptions& o) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    if (n <= 0)
        return make_error(
            "transport = \"rdma\" but no RDMA device is present (try Soft-RoCE: rdma link add rxe0 "
            "type rxe netdev eth0)");
    auto t = std::make_unique<RdmaTransport>(ring, o);
    if (auto st = t->init(); !st) return st.error();
    return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace sv
