// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "rdma.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/sverbs.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "pacer.hpp"

namespace flowgen {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
}

std::string errno_str(int e) {
    return fmt::format("{} ({})", std::strerror(e), e);
}

template <auto Fn>
struct Deleter {
    template <class T>
    void operator()(T* p) const noexcept {
        if (p) Fn(p);
    }
};
using ChannelPtr = std::unique_ptr<rdma_event_channel, Deleter<rdma_destroy_event_channel>>;
using PdPtr = std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, Deleter<ibv_destroy_comp_channel>>;
using MrPtr = std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>>;
using AddrInfoPtr = std::unique_ptr<rdma_addrinfo, Deleter<rdma_freeaddrinfo>>;
// An id with a QP: the QP goes first.
struct IdDeleter {
    void operator()(rdma_cm_id* id) const noexcept {
        if (id->qp) rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
};
using IdPtr = std::unique_ptr<rdma_cm_id, IdDeleter>;

struct FreeDeleter {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
};
using BufPtr = std::unique_ptr<uint8_t, FreeDeleter>;

BufPtr alloc_buf(size_t bytes) {
    void* p = nullptr;
    size_t a = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
    if (int rc = posix_memalign(&p, 4096, a); rc != 0)
        throw SetupError(fmt::format("cannot allocate {} bytes: {}", a, errno_str(rc)));
    std::memset(p, 0, a);
    return BufPtr(static_cast<uint8_t*>(p));
}

// What the client tells the server in the connect request (<= 56 bytes).
struct ConnReq {
    uint32_t magic;
    uint16_t version;
    uint8_t op;
    int8_t prio;
    uint32_t flow;
    uint32_t depth;
    uint64_t size;  // the largest message
};
// ... and what the server answers in the accept.
struct ConnRep {
    uint32_t magic;
    uint32_t rkey;
    uint64_t addr;
    uint32_t qpn;
    uint32_t pad;
};
constexpr uint32_t kMagic = 0x53564647;  // "SVFG"
static_assert(sizeof(ConnReq) <= 56);

uint64_t rss_bytes() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

uint64_t mem_used_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t v = 0, total = 0, avail = 0;
    std::string unit;
    while (in >> key >> v) {
        std::getline(in, unit);
        if (key == "MemTotal:") total = v;
        if (key == "MemAvailable:") avail = v;
    }
    return (total - avail) * 1024;
}

std::map<std::string, uint64_t> read_hw_counters(const std::string& dev, int port) {
    std::map<std::string, uint64_t> m;
    namespace fs = std::filesystem;
    fs::path p =
        fs::path("/sys/class/infiniband") / dev / "ports" / std::to_string(port) / "hw_counters";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(p, ec)) {
        std::ifstream in(e.path());
        uint64_t v = 0;
        if (in >> v) m[e.path().filename().string()] = v;
    }
    return m;
}

std::map<std::string, uint64_t> delta(const std::map<std::string, uint64_t>& a,
                                      const std::map<std::string, uint64_t>& b) {
    std::map<std::string, uint64_t> d;
    for (const auto& [k, v] : b) {
        auto it = a.find(k);
        d[k] = v - (it == a.end() ? 0 : it->second);
    }
    return d;
}

DeviceLimits query_limits(ibv_context* ctx) {
    ibv_device_attr a{};
    if (int rc = ibv_query_device(ctx, &a); rc != 0)
        throw SetupError(fmt::format("ibv_query_device: {}", errno_str(rc)));
    DeviceLimits l;
    l.name = ibv_get_device_name(ctx->device);
    l.max_qp = static_cast<uint64_t>(a.max_qp);
    l.max_mr_size = a.max_mr_size;
    l.max_mr = static_cast<uint64_t>(a.max_mr);
    l.max_qp_wr = static_cast<uint64_t>(a.max_qp_wr);
    l.max_cqe = static_cast<uint64_t>(a.max_cqe);
    return l;
}

// Every device name rdma_cm knows; throws when name is not one of them.
void check_device_exists(const std::string& name) {
    if (name.empty()) return;
    int n = 0;
    ibv_context** list = rdma_get_devices(&n);
    std::string names;
    bool found = false;
    for (int i = 0; list && i < n; i++) {
        const char* dn = ibv_get_device_name(list[i]->device);
        names += names.empty() ? dn : fmt::format(", {}", dn);
        if (name == dn) found = true;
    }
    if (list) rdma_free_devices(list);
    if (!found)
        throw SetupError(fmt::format("unknown RDMA device '{}' (have: {})", name,
                                     names.empty() ? "none" : names));
}

// Waits up to timeout_ms for one event on ch; nullptr on timeout.
rdma_cm_event* get_event(rdma_event_channel* ch, int timeout_ms) {
    pollfd p{ch->fd, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);
    if (rc <= 0) return nullptr;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) return nullptr;
    return ev;
}

sockaddr_storage resolve(const std::string& host, uint16_t port, bool passive) {
    rdma_addrinfo hints{};
    hints.ai_port_space = RDMA_PS_TCP;
    if (passive) hints.ai_flags = RAI_PASSIVE;
    rdma_addrinfo* res = nullptr;
    std::string svc = std::to_string(port);
    if (int rc = rdma_getaddrinfo(host.empty() ? nullptr : host.c_str(), svc.c_str(), &hints, &res);
        rc != 0 || !res)
        throw SetupError(fmt::format("cannot resolve address '{}': {}", host,
                                     rc ? gai_strerror(rc) : "no result"));
    AddrInfoPtr ai(res);
    sockaddr_storage ss{};
    const sockaddr* sa = passive ? ai->ai_src_addr : ai->ai_dst_addr;
    socklen_t len = passive ? ai->ai_src_len : ai->ai_dst_len;
    if (!sa) throw SetupError(fmt::format("address '{}' resolved to nothing", host));
    std::memcpy(&ss, sa, len);
    return ss;
}

std::atomic<bool> g_signal{false};
void on_signal(int) {
    g_signal = true;
}

// ------------------------------------------------------------------ client

struct Flow {
    uint32_t index = 0;
    FlowResult res;
    IdPtr id;
    BufPtr buf;
    MrPtr mr;
    ibv_cq* cq = nullptr;
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    bool connected = false;
    // the worker's
    uint32_t outstanding = 0;
    uint64_t posted = 0, completed = 0;
    uint64_t next_size = 0;
    Pacer pacer;  // open loop: the schedule
    bool failed = false;
    std::vector<uint64_t> post_ts, post_size;
    std::mt19937_64 rng;
    // read by the progress sampler
    std::atomic<uint64_t> bytes_live{0};
};

struct Worker {
    std::vector<Flow*> flows;
    std::vector<CqPtr> cqs;
    std::thread th;
    std::atomic<bool> done{false};
};

struct Shared {
    std::atomic<bool> stop_posting{false};
    std::atomic<bool> abort{false};
    std::mutex mu;
    std::string abort_reason;
    uint64_t iters = 0;
    uint64_t drain_ns = 0;
    void fail(const std::string& why) {
        std::lock_guard lk(mu);
        if (abort_reason.empty()) abort_reason = why;
        abort = true;
        stop_posting = true;
    }
};

bool post_one(Flow& f, Shared& sh, uint64_t now) {
    uint64_t size = f.next_size;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(f.buf.get());
    sge.length = static_cast<uint32_t>(size);
    sge.lkey = f.mr->lkey;
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = f.index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (f.res.spec.prio >= 0) wr.send_flags |= SVERBS_PRIO(f.res.spec.prio);
    switch (f.res.spec.op) {
        case Op::Write:
            wr.opcode = IBV_WR_RDMA_WRITE;
            break;
        case Op::Read:
            wr.opcode = IBV_WR_RDMA_READ;
            break;
        case Op::Send:
            wr.opcode = IBV_WR_SEND;
            break;
        case Op::WriteImm:
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.imm_data = htonl(f.index);
            break;
    }
    wr.wr.rdma.remote_addr = f.raddr;
    wr.wr.rdma.rkey = f.rkey;
    if (int rc = ibv_post_send(f.id->qp, &wr, &bad); rc != 0) {
        f.failed = true;
        f.res.errors++;
        if (f.res.error.empty()) f.res.error = fmt::format("ibv_post_send: {}", errno_str(rc));
        sh.fail(fmt::format("flow {}: {}", f.index, f.res.error));
        return false;
    }
    size_t slot = f.posted % f.res.spec.depth;
    f.post_ts[slot] = now;
    f.post_size[slot] = size;
    f.posted++;
    f.outstanding++;
    f.pacer.sent(size);
    f.res.posted_bytes += size;
    f.next_size = f.res.spec.size.sample(f.rng);
    return true;
}

void complete(Flow& f, const ibv_wc& wc, Shared& sh, uint64_t now) {
    f.outstanding--;
    if (wc.status != IBV_WC_SUCCESS) {
        f.res.errors++;
        if (f.res.error.empty())
            f.res.error =
                fmt::format("{} (vendor_err {:#x})", ibv_wc_status_str(wc.status), wc.vendor_err);
        if (!f.failed)
            sh.fail(fmt::format("flow {} (user {} service {}): completion error: {}", f.index,
                                f.res.user, f.res.service, f.res.error));
        f.failed = true;
        return;
    }
    size_t slot = f.completed % f.res.spec.depth;
    f.completed++;
    f.res.ops++;
    f.res.bytes += f.post_size[slot];
    f.res.lat.add(now - f.post_ts[slot]);
    f.bytes_live.store(f.res.bytes, std::memory_order_relaxed);
}

void worker_loop(Worker& w, Shared& sh, const std::vector<Flow>& all) {
    ibv_wc wc[64];
    uint64_t drain_deadline = 0;
    {
        // a random phase per flow: flows of one rate started in one sweep do
        // not post in lockstep
        std::uniform_real_distribution<double> phase(0, 1);
        uint64_t now = now_ns();
        for (Flow* f : w.flows) f->pacer.start(now, phase(f->rng), f->next_size);
    }
    for (;;) {
        uint64_t now = now_ns();
        bool posting = !sh.stop_posting.load(std::memory_order_relaxed);
        bool active = false;
        for (Flow* f : w.flows) {
            if (f->failed) continue;
            if (posting) {
                while (f->outstanding < f->res.spec.depth &&
                       (sh.iters == 0 || f->posted < sh.iters)) {
                    if (!f->pacer.due(now, f->next_size)) break;
                    if (!post_one(*f, sh, now)) break;
                }
            }
            if (f->outstanding || (posting && (sh.iters == 0 || f->posted < sh.iters)))
                active = true;
        }
        for (auto& cq : w.cqs) {
            int n;
            while ((n = ibv_poll_cq(cq.get(), 64, wc)) > 0) {
                uint64_t t = now_ns();
                for (int i = 0; i < n; i++)
                    complete(const_cast<Flow&>(all[wc[i].wr_id]), wc[i], sh, t);
            }
            if (n < 0) sh.fail("ibv_poll_cq failed");
        }
        if (!active) break;
        if (!posting) {
            if (!drain_deadline) drain_deadline = now + sh.drain_ns;
            if (now > drain_deadline) {
                for (Flow* f : w.flows)
                    if (f->outstanding) {
                        f->res.errors += f->outstanding;
                        if (f->res.error.empty())
                            f->res.error = fmt::format("{} WRs never completed", f->outstanding);
                    }
                break;
            }
        }
    }
    for (Flow* f : w.flows) f->res.pace_resets = f->pacer.resets();
    w.done = true;
}

// mlx5: every flow's QP (in RTS once established) gets its own UDP source
// port explicitly, the client -> server direction (the server's QPs keep the
// port the kernel derived from the flow label).  Not run here: no mlx5 device.
template <class Flows>
void set_mlx5_sports(Flows& flows, RunResult& r) {
    const uint32_t salt = std::random_device{}();
    for (auto& f : flows) {
        uint16_t port = mlx5_flow_udp_sport(f.index, salt);
        if (int e = mlx5dv_modify_qp_udp_sport(f.id->qp, port))
            throw SetupError(fmt::format("flow {}: mlx5dv_modify_qp_udp_sport({}): {}", f.index,
                                         port, errno_str(e)));
        f.res.udp_sport = port;
    }
    r.sport_rule = fmt::format(
        "mlx5: set with mlx5dv_modify_qp_udp_sport, 0xc000 | ((flow * 0x2f1b + {}) & 0x3fff) "
        "(client -> server); RoCE v2 destination port is always 4791",
        salt);
}

const char* event_name(rdma_cm_event_type t) {
    return rdma_event_str(t);
}

}  // namespace

RunResult run_client(const Config& cfg) {
    check(cfg);
    check_device_exists(cfg.device);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    RunResult r;
    r.mode = "client";
    r.label = cfg.label;
    r.users = cfg.users;
    r.services = cfg.services;
    r.threads = cfg.threads;
    const uint32_t nflows = cfg.flows();

    ChannelPtr ch(rdma_create_event_channel());
    if (!ch) throw SetupError(fmt::format("rdma_create_event_channel: {}", errno_str(errno)));
    sockaddr_storage dst = resolve(cfg.server, cfg.port, false);
    sockaddr_storage src{};
    bool have_src = !cfg.bind.empty();
    if (have_src) src = resolve(cfg.bind, 0, true);
    auto* srcp = have_src ? reinterpret_cast<sockaddr*>(&src) : nullptr;
    auto* dstp = reinterpret_cast<sockaddr*>(&dst);

    // A probe id finds the device the address routes to.
    ibv_context* ctx = nullptr;
    {
        rdma_cm_id* raw = nullptr;
        if (rdma_create_id(ch.get(), &raw, nullptr, RDMA_PS_TCP))
            throw SetupError(fmt::format("rdma_create_id: {}", errno_str(errno)));
        IdPtr probe(raw);
        if (rdma_resolve_addr(probe.get(), srcp, dstp, 5000))
            throw SetupError(
                fmt::format("rdma_resolve_addr({}): {}", cfg.server, errno_str(errno)));
        rdma_cm_event* ev = get_event(ch.get(), 10000);
        if (!ev) throw SetupError(fmt::format("no route to {} (timeout)", cfg.server));
        auto type = ev->event;
        int status = ev->status;
        rdma_ack_cm_event(ev);
        if (type != RDMA_CM_EVENT_ADDR_RESOLVED)
            throw SetupError(fmt::format("cannot resolve {}: {} (status {})", cfg.server,
                                         event_name(type), status));
        ctx = probe->verbs;
    }
    if (!ctx) throw SetupError(fmt::format("{} does not route through an RDMA device", cfg.server));
    r.device = ibv_get_device_name(ctx->device);
    if (!cfg.device.empty() && cfg.device != r.device)
        throw SetupError(fmt::format("{} routes through device {}, not {} (give --bind)",
                                     cfg.server, r.device, cfg.device));
    DeviceLimits lim = query_limits(ctx);
    check_limits(cfg, lim);
    ibv_port_attr pa{};
    ibv_query_port(ctx, 1, &pa);

    r.alloc = alloc_active(cfg);
    Allocation alloc;
    if (r.alloc) {
        double link = cfg.link_gbps * 1000;
        if (link <= 0) {
            // active_speed code -> Gbit/s per lane; width code -> lanes
            static const std::map<int, double> speed = {{1, 2.5}, {2, 5},   {4, 10},  {8, 10},
                                                        {16, 14}, {32, 25}, {64, 50}, {128, 100}};
            static const std::map<int, double> width = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
            auto s = speed.find(pa.active_speed);
            auto w = width.find(pa.active_width);
            link = (s == speed.end() ? 10 : s->second) * (w == width.end() ? 1 : w->second) * 1000;
        }
        r.link_mbps = link;
        alloc = allocate(cfg, link);
    }
    r.user_weights = cfg.user_weights;

    PdPtr pd(ibv_alloc_pd(ctx));
    if (!pd) throw SetupError(fmt::format("ibv_alloc_pd: {}", errno_str(errno)));

    uint64_t rss0 = rss_bytes(), sys0 = mem_used_bytes();
    r.rss_before = rss0;
    std::vector<Flow> flows(nflows);
    std::vector<std::unique_ptr<Worker>> workers;
    for (uint32_t t = 0; t < cfg.threads; t++) workers.push_back(std::make_unique<Worker>());
    std::random_device rd;
    for (uint32_t i = 0; i < nflows; i++) {
        Flow& f = flows[i];
        f.index = i;
        f.res.id = i;
        f.res.user = i / cfg.services;
        f.res.service = i % cfg.services;
        f.res.spec = flow_spec(cfg, f.res.user, f.res.service);
        if (r.alloc) {
            f.res.spec.rate_mbps = alloc.rate_mbps[i];
            f.res.spec.prio = alloc.prio[i];
        }
        f.pacer = Pacer(f.res.spec.rate_mbps);
        f.rng.seed(rd() ^ (uint64_t{i} << 32));
        f.post_ts.resize(f.res.spec.depth);
        f.post_size.resize(f.res.spec.depth);
        f.next_size = f.res.spec.size.sample(f.rng);
        f.buf = alloc_buf(f.res.spec.size.max());
        f.mr.reset(
            ibv_reg_mr(pd.get(), f.buf.get(), f.res.spec.size.max(),
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
        if (!f.mr)
            throw SetupError(fmt::format("flow {}: ibv_reg_mr({} bytes): {}", i,
                                         f.res.spec.size.max(), errno_str(errno)));
        workers[i % cfg.threads]->flows.push_back(&f);  // round robin over threads
    }
    // A thread's CQs: sized to its flows' depths, each at most max_cqe.
    uint64_t cap = std::min<uint64_t>(lim.max_cqe ? lim.max_cqe : 4096, 16384);
    for (auto& wp : workers) {
        Worker& w = *wp;
        size_t first = 0;
        uint64_t fill = 0;
        auto make_cq = [&](size_t end) {
            CqPtr cq(ibv_create_cq(ctx, static_cast<int>(fill), nullptr, nullptr, 0));
            if (!cq)
                throw SetupError(
                    fmt::format("ibv_create_cq({} entries): {}", fill, errno_str(errno)));
            for (size_t k = first; k < end; k++) w.flows[k]->cq = cq.get();
            w.cqs.push_back(std::move(cq));
            first = end;
            fill = 0;
        };
        for (size_t k = 0; k < w.flows.size(); k++) {
            if (fill && fill + w.flows[k]->res.spec.depth > cap) make_cq(k);
            fill += w.flows[k]->res.spec.depth;
        }
        if (fill) make_cq(w.flows.size());
    }

    // Connect, connect_window at a time.
    auto t_conn = Clock::now();
    uint32_t started = 0, established = 0;
    auto start_one = [&](uint32_t i) {
        rdma_cm_id* raw = nullptr;
        if (rdma_create_id(ch.get(), &raw, &flows[i], RDMA_PS_TCP))
            throw SetupError(fmt::format("flow {}: rdma_create_id: {}", i, errno_str(errno)));
        flows[i].id.reset(raw);
        if (rdma_resolve_addr(raw, srcp, dstp, 5000))
            throw SetupError(fmt::format("flow {}: rdma_resolve_addr: {}", i, errno_str(errno)));
    };
    uint32_t window = std::max<uint32_t>(cfg.connect_window, 1);
    while (started < nflows && started < window) start_one(started++);
    auto last_progress = Clock::now();
    while (established < nflows) {
        if (g_signal) throw SetupError("interrupted while connecting");
        rdma_cm_event* ev = get_event(ch.get(), 30000);
        if (!ev)
            throw SetupError(fmt::format(
                "connecting: no rdma_cm event for 30 s ({} of {} flows up)", established, nflows));
        auto* f = static_cast<Flow*>(ev->id->context);
        auto type = ev->event;
        int status = ev->status;
        ConnRep rep{};
        if (type == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data &&
            ev->param.conn.private_data_len >= sizeof rep)
            std::memcpy(&rep, ev->param.conn.private_data, sizeof rep);
        std::string reject;
        if (type == RDMA_CM_EVENT_REJECTED && ev->param.conn.private_data &&
            ev->param.conn.private_data_len)
            reject.assign(static_cast<const char*>(ev->param.conn.private_data),
                          strnlen(static_cast<const char*>(ev->param.conn.private_data),
                                  ev->param.conn.private_data_len));
        rdma_ack_cm_event(ev);
        if (!f) continue;
        switch (type) {
            case RDMA_CM_EVENT_ADDR_RESOLVED:
                if (f->id->verbs != ctx)
                    throw SetupError(fmt::format("flow {}: resolved to another device", f->index));
                if (rdma_resolve_route(f->id.get(), 5000))
                    throw SetupError(
                        fmt::format("flow {}: rdma_resolve_route: {}", f->index, errno_str(errno)));
                break;
            case RDMA_CM_EVENT_ROUTE_RESOLVED: {
                ibv_qp_init_attr ia{};
                ia.send_cq = f->cq;
                ia.recv_cq = f->cq;
                ia.qp_type = IBV_QPT_RC;
                ia.cap.max_send_wr = f->res.spec.depth;
                ia.cap.max_recv_wr = 1;
                ia.cap.max_send_sge = 1;
                ia.cap.max_recv_sge = 1;
                if (rdma_create_qp(f->id.get(), pd.get(), &ia))
                    throw SetupError(
                        fmt::format("flow {}: rdma_create_qp: {} ({} QPs up; device max_qp {})",
                                    f->index, errno_str(errno), established, lim.max_qp));
                ConnReq req{};
                req.magic = kMagic;
                req.version = 1;
                req.op = static_cast<uint8_t>(f->res.spec.op);
                req.prio = static_cast<int8_t>(f->res.spec.prio);
                req.flow = f->index;
                req.depth = f->res.spec.depth;
                req.size = f->res.spec.size.max();
                rdma_conn_param cp{};
                cp.private_data = &req;
                cp.private_data_len = sizeof req;
                cp.initiator_depth =
                    static_cast<uint8_t>(std::min<uint32_t>(f->res.spec.depth, 16));
                cp.responder_resources = cp.initiator_depth;
                cp.retry_count = 7;
                cp.rnr_retry_count = 7;
                if (rdma_connect(f->id.get(), &cp))
                    throw SetupError(
                        fmt::format("flow {}: rdma_connect: {}", f->index, errno_str(errno)));
                break;
            }
            case RDMA_CM_EVENT_ESTABLISHED:
                if (rep.magic != kMagic)
                    throw SetupError(
                        fmt::format("flow {}: the server's answer is not flowgen's", f->index));
                f->raddr = rep.addr;
                f->rkey = rep.rkey;
                f->res.peer_qpn = rep.qpn;
                f->res.qpn = f->id->qp->qp_num;
                f->connected = true;
                established++;
                if (started < nflows) start_one(started++);
                break;
            case RDMA_CM_EVENT_REJECTED:
                throw SetupError(fmt::format("flow {}: the server rejected it{}{} (status {})",
                                             f->index, reject.empty() ? "" : ": ", reject, status));
            default:
                throw SetupError(fmt::format("flow {}: {} (status {}) while connecting to {}",
                                             f->index, event_name(type), status, cfg.server));
        }
        if (cfg.progress && Clock::now() - last_progress > std::chrono::seconds(1)) {
            last_progress = Clock::now();
            fmt::print(stderr, "\rconnecting: {} / {} flows", established, nflows);
        }
    }
    if (cfg.progress) fmt::print(stderr, "\rconnecting: {} / {} flows\n", established, nflows);
    r.connect_seconds = std::chrono::duration<double>(Clock::now() - t_conn).count();
    r.rss_after = rss_bytes();
    r.rss_per_flow = static_cast<double>(r.rss_after - rss0) / nflows;
    uint64_t sys1 = mem_used_bytes();
    r.sys_per_flow = sys1 > sys0 ? static_cast<double>(sys1 - sys0) / nflows : 0;

    uint16_t dport = cfg.port;
    for (auto& f : flows) {
        f.res.cm_sport = ntohs(rdma_get_src_port(f.id.get()));
        f.res.udp_sport = rxe_cm_udp_sport(f.res.cm_sport, dport, f.res.qpn, f.res.peer_qpn);
    }
    r.sport_rule =
        "rxe: rdma_get_udp_sport(flow_label = (cm_sport * 31 + cm_dport) & 0xfffff, qpn, "
        "peer_qpn); RoCE v2 destination port is always 4791";
    if (mlx5dv_is_supported(ctx->device)) set_mlx5_sports(flows, r);

    // The run.
    Shared sh;
    sh.iters = cfg.iters;
    sh.drain_ns = static_cast<uint64_t>(cfg.drain_timeout * 1e9);
    auto hw0 = read_hw_counters(r.device, 1);
    std::atomic<bool> cm_stop{false};
    std::thread cm_thread([&] {
        while (!cm_stop) {
            rdma_cm_event* ev = get_event(ch.get(), 100);
            if (!ev) continue;
            auto* f = static_cast<Flow*>(ev->id->context);
            auto type = ev->event;
            rdma_ack_cm_event(ev);
            if (f && (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
                sh.fail(
                    fmt::format("flow {}: the peer disconnected ({})", f->index, event_name(type)));
                rdma_disconnect(f->id.get());  // QP to error: its WRs flush
            }
        }
    });
    auto t0 = Clock::now();
    for (auto& w : workers)
        w->th = std::thread(worker_loop, std::ref(*w), std::ref(sh), std::cref(flows));
    auto end = t0 + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(cfg.duration > 0 ? cfg.duration : 1e9));
    std::vector<uint64_t> last(nflows, 0);
    auto tick = t0;
    auto all_done = [&] {
        for (auto& w : workers)
            if (!w->done) return false;
        return true;
    };
    while (!all_done()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        auto now = Clock::now();
        if (g_signal && !sh.stop_posting) sh.fail("interrupted (signal)");
        if (now >= end) sh.stop_posting = true;
        if (sh.stop_posting && r.post_seconds == 0)
            r.post_seconds = std::chrono::duration<double>(now - t0).count();
        if (now - tick >= std::chrono::seconds(1)) {
            double dt = std::chrono::duration<double>(now - tick).count();
            tick = now;
            std::vector<double> rates(nflows);
            uint64_t sum = 0, total = 0;
            for (uint32_t i = 0; i < nflows; i++) {
                uint64_t b = flows[i].bytes_live.load(std::memory_order_relaxed);
                rates[i] = static_cast<double>(b - last[i]) * 8 / dt / 1e9;
                sum += b - last[i];
                total += b;
                last[i] = b;
            }
            TimePoint p;
            p.t = std::chrono::duration<double>(now - t0).count();
            p.gbps = static_cast<double>(sum) * 8 / dt / 1e9;
            p.jain = jain_index(rates);
            r.timeline.push_back(p);
            if (cfg.progress)
                fmt::print(stderr, "\r[{:6.1f} s] {:.3f} Gbit/s  {:.1f} MB total  Jain {:.3f}   ",
                           p.t, p.gbps, total / 1e6, p.jain);
        }
    }
    for (auto& w : workers) w->th.join();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.post_seconds == 0) r.post_seconds = r.seconds;  // iterations done before the end
    if (cfg.progress) fmt::print(stderr, "\n");
    cm_stop = true;
    cm_thread.join();
    r.hw_counters = delta(hw0, read_hw_counters(r.device, 1));
    r.aborted = sh.abort;
    r.abort_reason = sh.abort_reason;
    for (auto& f : flows) {
        if (f.connected) rdma_disconnect(f.id.get());
        r.flows.push_back(std::move(f.res));
    }
    // Drain what the disconnects produced so destroying the ids does not wait.
    while (rdma_cm_event* ev = get_event(ch.get(), 0)) rdma_ack_cm_event(ev);
    for (auto& f : flows) {
        f.id.reset();
        f.mr.reset();
    }
    return r;
}

// ------------------------------------------------------------------ server

namespace {

struct SFlow {
    uint32_t index = 0;
    FlowResult res;
    IdPtr id;
    BufPtr buf;
    MrPtr mr;
    uint64_t size = 0;
    bool recvs = false;  // SEND / WRITE_IMM: receives to keep posted
    bool live = false, gone = false;
};

bool post_recv(SFlow& f) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(f.buf.get());
    sge.length = static_cast<uint32_t>(f.size);
    sge.lkey = f.mr->lkey;
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = f.index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(f.id->qp, &wr, &bad) == 0;
}

}  // namespace

RunResult run_server(const Config& cfg) {
    check_device_exists(cfg.device);
    RunResult r;
    r.mode = "server";
    r.label = cfg.label;
    ChannelPtr ch(rdma_create_event_channel());
    if (!ch) throw SetupError(fmt::format("rdma_create_event_channel: {}", errno_str(errno)));
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(ch.get(), &raw, nullptr, RDMA_PS_TCP))
        throw SetupError(fmt::format("rdma_create_id: {}", errno_str(errno)));
    IdPtr listen_id(raw);
    sockaddr_storage addr = resolve(cfg.server, cfg.port, true);
    if (rdma_bind_addr(listen_id.get(), reinterpret_cast<sockaddr*>(&addr)))
        throw SetupError(
            fmt::format("rdma_bind_addr({}:{}): {}", cfg.server, cfg.port, errno_str(errno)));
    ibv_context* ctx = listen_id->verbs;
    if (ctx) {
        r.device = ibv_get_device_name(ctx->device);
        if (!cfg.device.empty() && cfg.device != r.device)
            throw SetupError(
                fmt::format("{} is on device {}, not {}", cfg.server, r.device, cfg.device));
    }
    if (rdma_listen(listen_id.get(), 4096))
        throw SetupError(fmt::format("rdma_listen: {}", errno_str(errno)));
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    fmt::print("sverbs-flowgen server: listening on {}:{}{}\n",
               cfg.server.empty() ? "*" : cfg.server, cfg.port,
               r.device.empty() ? "" : " (" + r.device + ")");
    std::fflush(stdout);

    PdPtr pd;
    DeviceLimits lim;
    CompChannelPtr chan;  // destroyed after the CQs
    std::vector<CqPtr> cqs;
    uint64_t cq_fill = 0, cq_cap = 0;
    // Flows are looked up by the poller through a fixed table of pointers.
    constexpr uint32_t kMax = 1u << 20;
    std::deque<SFlow> flows;
    std::vector<std::atomic<SFlow*>> table(kMax);
    std::atomic<size_t> ncq{0};
    std::vector<std::atomic<ibv_cq*>> cq_table(4096);
    std::atomic<bool> stop{false};
    // Receives (SEND, WRITE_IMM flows) are reposted by this thread, woken by
    // the CQs' completion channel: it must not spin, the client shares the CPUs.
    std::atomic<ibv_comp_channel*> chan_live{nullptr};
    std::thread poller([&] {
        ibv_wc wc[64];
        while (!stop) {
            ibv_comp_channel* chp = chan_live.load();
            if (!chp) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            pollfd p{chp->fd, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            ibv_cq* cq = nullptr;
            void* cq_ctx = nullptr;
            if (ibv_get_cq_event(chp, &cq, &cq_ctx)) continue;
            ibv_ack_cq_events(cq, 1);
            ibv_req_notify_cq(cq, 0);  // then drain: nothing between is lost
            int k;
            while ((k = ibv_poll_cq(cq, 64, wc)) > 0) {
                for (int i = 0; i < k; i++) {
                    SFlow* f = table[wc[i].wr_id].load();
                    if (!f) continue;
                    if (wc[i].status != IBV_WC_SUCCESS) {
                        if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                            f->res.errors++;
                            if (f->res.error.empty())
                                f->res.error = ibv_wc_status_str(wc[i].status);
                        }
                        continue;
                    }
                    f->res.ops++;
                    f->res.bytes += wc[i].byte_len;
                    if (!post_recv(*f)) {
                        f->res.errors++;
                        if (f->res.error.empty()) f->res.error = "ibv_post_recv failed";
                    }
                }
            }
        }
    });
    uint32_t live = 0, ever = 0;
    uint64_t rss0 = rss_bytes(), sys0 = mem_used_bytes();
    r.rss_before = rss0;
    auto t0 = Clock::now();
    std::map<std::string, uint64_t> hw0;
    std::string fatal;
    while (!g_signal) {
        rdma_cm_event* ev = get_event(ch.get(), 200);
        if (!ev) continue;
        auto type = ev->event;
        rdma_cm_id* id = ev->id;
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            ConnReq req{};
            std::string why;
            if (ev->param.conn.private_data_len >= sizeof req)
                std::memcpy(&req, ev->param.conn.private_data, sizeof req);
            if (req.magic != kMagic) why = "not a sverbs-flowgen client";
            if (why.empty() && !pd) {
                ctx = id->verbs;
                r.device = ibv_get_device_name(ctx->device);
                lim = query_limits(ctx);
                pd.reset(ibv_alloc_pd(ctx));
                if (!pd) why = fmt::format("ibv_alloc_pd: {}", errno_str(errno));
                cq_cap = std::min<uint64_t>(lim.max_cqe ? lim.max_cqe : 4096, 4096);
                hw0 = read_hw_counters(r.device, 1);
            }
            if (why.empty() && lim.max_mr_size && req.size > lim.max_mr_size)
                why = fmt::format("size {} above max_mr_size {}", req.size, lim.max_mr_size);
            if (why.empty() && flows.size() >= kMax) why = "too many flows";
            SFlow* f = nullptr;
            if (why.empty()) {
                f = &flows.emplace_back();
                f->index = static_cast<uint32_t>(flows.size() - 1);
                f->res.id = req.flow;
                f->res.spec.op = static_cast<Op>(req.op);
                f->res.spec.depth = req.depth;
                f->res.spec.prio = req.prio;
                f->res.spec.size.lo = f->res.spec.size.hi = req.size;
                f->size = req.size;
                f->recvs = f->res.spec.op == Op::Send || f->res.spec.op == Op::WriteImm;
                f->buf = alloc_buf(req.size);
                f->mr.reset(ibv_reg_mr(
                    pd.get(), f->buf.get(), req.size,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
                if (!f->mr) why = fmt::format("ibv_reg_mr: {}", errno_str(errno));
            }
            uint32_t nrecv = f && f->recvs ? req.depth : 1;
            if (why.empty() && (cqs.empty() || cq_fill + nrecv > cq_cap)) {
                if (ncq >= cq_table.size()) {
                    why = "too many CQs";
                } else {
                    if (!chan) {
                        chan.reset(ibv_create_comp_channel(ctx));
                        chan_live.store(chan.get());
                    }
                    CqPtr cq;
                    if (chan)
                        cq.reset(
                            ibv_create_cq(ctx, static_cast<int>(cq_cap), nullptr, chan.get(), 0));
                    if (!cq || ibv_req_notify_cq(cq.get(), 0)) {
                        why = fmt::format("ibv_create_cq: {}", errno_str(errno));
                    } else {
                        cq_table[ncq].store(cq.get());
                        cqs.push_back(std::move(cq));
                        ncq++;
                        cq_fill = 0;
                    }
                }
            }
            if (why.empty()) {
                cq_fill += nrecv;
                ibv_qp_init_attr ia{};
                ia.send_cq = cqs.back().get();
                ia.recv_cq = cqs.back().get();
                ia.qp_type = IBV_QPT_RC;
                ia.cap.max_send_wr = 1;
                ia.cap.max_recv_wr = nrecv;
                ia.cap.max_send_sge = 1;
                ia.cap.max_recv_sge = 1;
                if (rdma_create_qp(id, pd.get(), &ia))
                    why = fmt::format("rdma_create_qp: {} ({} QPs up, max_qp {})", errno_str(errno),
                                      live, lim.max_qp);
            }
            if (why.empty()) {
                id->context = f;
                f->id.reset(id);
                f->res.qpn = id->qp->qp_num;
                table[f->index].store(f);
                if (f->recvs)
                    for (uint32_t k = 0; k < nrecv && why.empty(); k++)
                        if (!post_recv(*f)) why = "ibv_post_recv failed";
            }
            if (why.empty()) {
                ConnRep rep{};
                rep.magic = kMagic;
                rep.rkey = f->mr->rkey;
                rep.addr = reinterpret_cast<uintptr_t>(f->buf.get());
                rep.qpn = id->qp->qp_num;
                rdma_conn_param cp{};
                cp.private_data = &rep;
                cp.private_data_len = sizeof rep;
                cp.responder_resources = static_cast<uint8_t>(std::min<uint32_t>(req.depth, 16));
                cp.initiator_depth = cp.responder_resources;
                cp.rnr_retry_count = 7;
                if (rdma_accept(id, &cp)) why = fmt::format("rdma_accept: {}", errno_str(errno));
            }
            if (!why.empty()) {
                fmt::print(stderr, "sverbs-flowgen server: rejecting flow {}: {}\n", req.flow, why);
                rdma_reject(id, why.c_str(),
                            static_cast<uint8_t>(std::min<size_t>(why.size() + 1, 140)));
                rdma_ack_cm_event(ev);
                if (f) {
                    f->gone = true;
                    f->res.errors++;
                    f->res.error = "rejected: " + why;
                    table[f->index].store(nullptr);
                }
                if (f && f->id)
                    f->id.reset();  // its QP, then the id
                else
                    rdma_destroy_id(id);
                continue;
            }
            rdma_ack_cm_event(ev);
            continue;
        }
        auto* f = static_cast<SFlow*>(id->context);
        rdma_ack_cm_event(ev);
        if (!f || id == listen_id.get()) continue;
        if (type == RDMA_CM_EVENT_ESTABLISHED) {
            f->live = true;
            live++;
            ever++;
        } else if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_TIMEWAIT_EXIT ||
                   type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE) {
            if (!f->gone) {
                f->gone = true;
                rdma_disconnect(id);
                if (f->live) live--;
            }
            if (ever && live == 0) break;
        }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.rss_after = rss_bytes();
    if (!flows.empty()) {
        r.rss_per_flow = static_cast<double>(r.rss_after - rss0) / flows.size();
        uint64_t sys1 = mem_used_bytes();
        r.sys_per_flow = sys1 > sys0 ? static_cast<double>(sys1 - sys0) / flows.size() : 0;
    }
    stop = true;
    poller.join();
    if (!r.device.empty()) r.hw_counters = delta(hw0, read_hw_counters(r.device, 1));
    r.users = 1;
    r.services = static_cast<uint32_t>(flows.size());
    r.threads = 1;
    for (auto& f : flows) r.flows.push_back(f.res);
    while (rdma_cm_event* ev = get_event(ch.get(), 0)) rdma_ack_cm_event(ev);
    flows.clear();
    if (g_signal) {
        r.aborted = true;
        r.abort_reason = "signal";
    }
    return r;
}

}  // namespace flowgen
