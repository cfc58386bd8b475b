// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// sverbs-bmr: the broadcast-multiply-roll (Fox) matrix multiplication of
// sverbs-flowgen over a sqrt(p) x sqrt(p) grid of MPI ranks (docs/flowgen.md).
//
//   mpirun -np 4 sverbs-bmr --matrix 512 --device rxe0,rxe1 --json bmr.json
//
// MPI starts the ranks, exchanges the QP numbers, GIDs and buffer keys, and
// gathers the results; with --comm verbs (the default) every block moves by
// RDMA WRITE with immediate over an RC QP per pair of ranks: the A block along
// the grid row (broadcast), the B block one row up (roll), the transfers of
// step k + 1 posted before the dgemm of step k so they overlap it.  With
// --comm mpi the same schedule uses MPI_Ibcast and MPI_Isend/Irecv instead
// (over UCX when mpirun says --mca pml ucx).  Rank 0 also measures T_comm
// (seconds per element of a block WRITE from rank 0 to rank 1) and T_flops
// (seconds per flop of the same blocked dgemm) and, with --verify, compares C
// with one dgemm of the whole matrices.
//
// Exit status: 0 done and C within the tolerance; 1 bad input or a setup
// failure; 3 C differs from the reference by more than the tolerance; a
// failed completion aborts every rank (MPI_Abort, status 2).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bmr_math.hpp"
#include "config.hpp"

namespace {

using namespace flowgen;
using namespace flowgen::bmr;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct SetupError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void die(int code, const std::string& msg) {
    fmt::print(stderr, "sverbs-bmr: {}\n", msg);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
}

template <class T, auto F>
struct Del {
    void operator()(T* p) const { F(p); }
};
using CtxPtr = std::unique_ptr<ibv_context, Del<ibv_context, ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, Del<ibv_pd, ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, Del<ibv_cq, ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, Del<ibv_qp, ibv_destroy_qp>>;
using MrPtr = std::unique_ptr<ibv_mr, Del<ibv_mr, ibv_dereg_mr>>;

// What a rank tells every other rank (MPI_Allgather): its QP towards each
// rank, its GID, where its A and B receive slots are.
struct PeerAddr {
    uint32_t qpn[64];
    uint8_t gid[16];
    uint64_t a_addr, b_addr;
    uint32_t a_rkey, b_rkey;
};
constexpr uint32_t kMaxRanks = 64;
enum : uint32_t { kImmA = 1, kImmB = 2 };

uint32_t imm_of(uint32_t kind, uint32_t step) {
    return kind << 16 | step;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep))
        if (!item.empty()) out.push_back(item);
    return out;
}

// One rank's verbs: a device, a PD, one CQ for sends and one for receives,
// an RC QP to every other rank, the blocks and their MRs.
class Verbs {
  public:
    Verbs(const Config& cfg, int rank, int size, uint32_t q, uint32_t b)
        : rank_(rank), size_(size), q_(q), blk_(size_t{b} * b) {
        open(cfg, rank);
        a_slots_.assign(blk_ * q, 0.0);
        b_slots_.assign(blk_ * q, 0.0);
        a_mr_.reset(reg(a_slots_));
        b_mr_.reset(reg(b_slots_));
        const uint32_t recvs = 2 * q + 4;
        scq_.reset(ibv_create_cq(ctx_.get(), 256 * size, nullptr, nullptr, 0));
        rcq_.reset(ibv_create_cq(ctx_.get(), static_cast<int>(recvs) * size, nullptr, nullptr, 0));
        if (!scq_ || !rcq_) throw SetupError(fmt::format("ibv_create_cq: {}", strerror(errno)));
        qps_.resize(size);
        for (int r = 0; r < size; r++) {
            if (r == rank) continue;
            ibv_qp_init_attr ia{};
            ia.send_cq = scq_.get();
            ia.recv_cq = rcq_.get();
            ia.qp_type = IBV_QPT_RC;
            ia.cap.max_send_wr = 128;
            ia.cap.max_recv_wr = recvs;
            ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
            qps_[r].reset(ibv_create_qp(pd_.get(), &ia));
            if (!qps_[r]) throw SetupError(fmt::format("ibv_create_qp: {}", strerror(errno)));
        }
    }

    PeerAddr local() const {
        PeerAddr a{};
        for (int r = 0; r < size_; r++) a.qpn[r] = qps_[r] ? qps_[r]->qp_num : 0;
        std::memcpy(a.gid, gid_.raw, 16);
        a.a_addr = reinterpret_cast<uintptr_t>(a_slots_.data());
        a.b_addr = reinterpret_cast<uintptr_t>(b_slots_.data());
        a.a_rkey = a_mr_->rkey;
        a.b_rkey = b_mr_->rkey;
        return a;
    }

    void connect(const std::vector<PeerAddr>& all) {
        peers_ = all;
        for (int r = 0; r < size_; r++) {
            if (r == rank_) continue;
            to_rts(*qps_[r], all[r].qpn[rank_], all[r].gid);
            for (uint32_t i = 0; i < 2 * q_ + 4; i++) {
                ibv_recv_wr wr{}, *bad = nullptr;
                wr.wr_id = static_cast<uint64_t>(r);
                if (ibv_post_recv(qps_[r].get(), &wr, &bad))
                    throw SetupError(fmt::format("ibv_post_recv: {}", strerror(errno)));
            }
        }
    }

    double* a_slot(uint32_t step) { return a_slots_.data() + blk_ * step; }
    double* b_slot(uint32_t step) { return b_slots_.data() + blk_ * step; }
    // The caller's own blocks (registered once, read by the WRITEs).
    void set_home(std::vector<double>& a, std::vector<double>& b) {
        ah_mr_.reset(reg(a));
        bh_mr_.reset(reg(b));
    }
    uint32_t lkey_of(const double* p) const {
        for (const ibv_mr* mr : {a_mr_.get(), b_mr_.get(), ah_mr_.get(), bh_mr_.get()}) {
            if (!mr) continue;
            auto lo = static_cast<const char*>(mr->addr);
            auto c = reinterpret_cast<const char*>(p);
            if (c >= lo && c < lo + mr->length) return mr->lkey;
        }
        die(1, "internal: a buffer outside the registered blocks");
    }

    // RDMA WRITE with immediate of one block into rank `to`'s A or B slot.
    void write_block(int to, const double* src, uint32_t kind, uint32_t step, bool imm = true) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(blk_ * sizeof(double)),
                    lkey_of(src)};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = static_cast<uint64_t>(to);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.imm_data = htonl(imm_of(kind, step));
        wr.send_flags = IBV_SEND_SIGNALED;
        const PeerAddr& p = peers_[to];
        wr.wr.rdma.remote_addr =
            (kind == kImmA ? p.a_addr : p.b_addr) + blk_ * sizeof(double) * step;
        wr.wr.rdma.rkey = kind == kImmA ? p.a_rkey : p.b_rkey;
        if (int e = ibv_post_send(qps_[to].get(), &wr, &bad))
            die(2, fmt::format("ibv_post_send to rank {}: {}", to, strerror(e)));
        outstanding_++;
    }

    // Waits until every posted WRITE completed (each one signaled: one
    // completion per WR, an error aborts the run).
    void wait_sends() {
        ibv_wc wc[16];
        while (outstanding_ > 0) {
            int n = ibv_poll_cq(scq_.get(), 16, wc);
            if (n < 0) die(2, "ibv_poll_cq (send) failed");
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IBV_WC_SUCCESS)
                    die(2, fmt::format("rank {}: WRITE to rank {} failed: {}", rank_, wc[i].wr_id,
                                       ibv_wc_status_str(wc[i].status)));
                outstanding_--;
            }
            poll_recv();
            if (n == 0) std::this_thread::yield();
        }
    }

    // Has the block of `kind` for `step` arrived (its WRITE's immediate)?
    bool arrived(uint32_t kind, uint32_t step) {
        poll_recv();
        return got_[kind == kImmA ? 0 : 1].size() > step && got_[kind == kImmA ? 0 : 1][step];
    }
    void poll_recv() {
        ibv_wc wc[16];
        int n = ibv_poll_cq(rcq_.get(), 16, wc);
        if (n < 0) die(2, "ibv_poll_cq (recv) failed");
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS)
                die(2, fmt::format("rank {}: receive from rank {} failed: {}", rank_, wc[i].wr_id,
                                   ibv_wc_status_str(wc[i].status)));
            if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) continue;
            uint32_t imm = ntohl(wc[i].imm_data), kind = imm >> 16, step = imm & 0xffff;
            auto& v = got_[kind == kImmA ? 0 : 1];
            if (v.size() <= step) v.resize(step + 1);
            v[step] = true;
        }
    }

    std::string device() const { return ibv_get_device_name(ctx_->device); }

  private:
    void open(const Config& cfg, int rank) {
        auto names = split(cfg.device, ',');
        int num = 0;
        ibv_device** list = ibv_get_device_list(&num);
        if (!list || num == 0) throw SetupError("no RDMA device");
        std::unique_ptr<ibv_device*, Del<ibv_device*, ibv_free_device_list>> guard(list);
        std::string want = names.empty() ? "" : names[rank % names.size()];
        ibv_device* dev = nullptr;
        for (int i = 0; i < num && !dev; i++)
            if (want.empty() || want == ibv_get_device_name(list[i])) dev = list[i];
        if (!dev) throw SetupError(fmt::format("unknown device '{}'", want));
        ctx_.reset(ibv_open_device(dev));
        if (!ctx_) throw SetupError(fmt::format("ibv_open_device: {}", strerror(errno)));
        pd_.reset(ibv_alloc_pd(ctx_.get()));
        if (!pd_) throw SetupError(fmt::format("ibv_alloc_pd: {}", strerror(errno)));
        ibv_port_attr pa{};
        if (ibv_query_port(ctx_.get(), 1, &pa))
            throw SetupError(fmt::format("ibv_query_port: {}", strerror(errno)));
        mtu_ = std::min(pa.active_mtu, IBV_MTU_1024);  // the method's 1,082-byte packets
        gid_index_ = static_cast<uint8_t>(cfg.gid_index);
        if (ibv_query_gid(ctx_.get(), 1, gid_index_, &gid_))
            throw SetupError(fmt::format("ibv_query_gid {}: {}", cfg.gid_index, strerror(errno)));
    }

    ibv_mr* reg(std::vector<double>& v) {
        auto* mr = ibv_reg_mr(pd_.get(), v.data(), v.size() * sizeof(double),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!mr) throw SetupError(fmt::format("ibv_reg_mr: {}", strerror(errno)));
        return mr;
    }

    void to_rts(ibv_qp& qp, uint32_t dqpn, const uint8_t* dgid) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (int e = ibv_modify_qp(
                &qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            throw SetupError(fmt::format("QP to INIT: {}", strerror(e)));
        a = {};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = mtu_;
        a.dest_qp_num = dqpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
        a.ah_attr.grh.sgid_index = gid_index_;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        if (int e =
                ibv_modify_qp(&qp, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            throw SetupError(fmt::format("QP to RTR: {}", strerror(e)));
        a = {};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 0;
        a.max_rd_atomic = 1;
        if (int e = ibv_modify_qp(&qp, &a,
                                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
            throw SetupError(fmt::format("QP to RTS: {}", strerror(e)));
    }

    int rank_, size_;
    uint32_t q_;
    size_t blk_;
    CtxPtr ctx_;
    PdPtr pd_;
    CqPtr scq_, rcq_;
    std::vector<double> a_slots_, b_slots_;
    MrPtr a_mr_, b_mr_, ah_mr_, bh_mr_;
    std::vector<QpPtr> qps_;
    std::vector<PeerAddr> peers_;
    ibv_gid gid_{};
    uint8_t gid_index_ = 1;
    ibv_mtu mtu_ = IBV_MTU_1024;
    uint64_t outstanding_ = 0;
    std::vector<bool> got_[2];
};

struct Times {
    double total = 0, compute = 0, wait = 0;
};

// Fox's algorithm over verbs: step k's A arrives from the row's owner, B from
// the rank below; step k + 1's WRITEs are posted before step k's dgemm.
Times run_verbs(Verbs& v, const Grid& g, std::vector<double>& a, std::vector<double>& b,
                std::vector<double>& c, uint32_t bs, uint32_t tile) {
    Times t;
    auto post = [&](uint32_t k) {
        if (g.owns_a(k))
            for (uint32_t col = 0; col < g.q; col++)
                if (col != g.col)
                    v.write_block(static_cast<int>(g.rank_of(g.row, col)), a.data(), kImmA, k);
        if (k > 0)
            v.write_block(static_cast<int>(g.up()), k == 1 ? b.data() : v.b_slot(k - 1), kImmB, k);
    };
    double t0 = now_s();
    if (g.q > 1) post(0);
    for (uint32_t k = 0; k < g.q; k++) {
        double w = now_s();
        // yield while polling: with more ranks than CPUs (--oversubscribe) a
        // spinning rank would take the CPU from the ranks that compute
        while ((!g.owns_a(k) && !v.arrived(kImmA, k)) || (k > 0 && !v.arrived(kImmB, k)))
            std::this_thread::yield();
        t.wait += now_s() - w;
        if (k + 1 < g.q) post(k + 1);
        const double* ak = g.owns_a(k) ? a.data() : v.a_slot(k);
        const double* bk = k == 0 ? b.data() : v.b_slot(k);
        double s = now_s();
        gemm_acc(ak, bk, c.data(), bs, tile);
        t.compute += now_s() - s;
    }
    double w = now_s();
    v.wait_sends();
    t.wait += now_s() - w;
    t.total = now_s() - t0;
    return t;
}

// The same schedule with MPI: a row communicator for the broadcast, the
// roll as Isend/Irecv in the world communicator.
Times run_mpi(const Grid& g, std::vector<double>& a, std::vector<double>& b, std::vector<double>& c,
              uint32_t bs, uint32_t tile) {
    Times t;
    MPI_Comm row;
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(g.row), static_cast<int>(g.col), &row);
    const int n = static_cast<int>(size_t{bs} * bs);
    std::vector<double> abuf[2] = {std::vector<double>(n), std::vector<double>(n)};
    std::vector<double> bbuf[2] = {b, std::vector<double>(n)};
    MPI_Request req[3];
    auto post = [&](uint32_t k) {  // step k's A broadcast and B roll into slot k % 2
        auto& ab = abuf[k % 2];
        if (g.owns_a(k)) ab = a;
        MPI_Ibcast(ab.data(), n, MPI_DOUBLE, static_cast<int>(g.a_col(k)), row, &req[0]);
        if (k > 0) {
            MPI_Isend(bbuf[(k - 1) % 2].data(), n, MPI_DOUBLE, static_cast<int>(g.up()),
                      static_cast<int>(k), MPI_COMM_WORLD, &req[1]);
            MPI_Irecv(bbuf[k % 2].data(), n, MPI_DOUBLE, static_cast<int>(g.down()),
                      static_cast<int>(k), MPI_COMM_WORLD, &req[2]);
        } else {
            req[1] = req[2] = MPI_REQUEST_NULL;
        }
    };
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    post(0);
    for (uint32_t k = 0; k < g.q; k++) {
        double w = now_s();
        MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
        t.wait += now_s() - w;
        // step k + 1 fills the slots of step k - 1, done with once this wait is over
        if (k + 1 < g.q) post(k + 1);
        double s = now_s();
        gemm_acc(abuf[k % 2].data(), bbuf[k % 2].data(), c.data(), bs, tile);
        t.compute += now_s() - s;
    }
    t.total = now_s() - t0;
    MPI_Comm_free(&row);
    return t;
}

double time_dgemm(uint32_t bs, uint32_t tile, uint64_t seed) {
    auto x = make_block(seed, 0, bs, bs, 0, 0), y = make_block(seed, 1, bs, bs, 0, 0);
    std::vector<double> z(x.size());
    int reps = 0;
    double t0 = now_s(), t = 0;
    do {
        gemm_acc(x.data(), y.data(), z.data(), bs, tile);
        reps++;
        t = now_s() - t0;
    } while (t < 0.3 && reps < 50);
    return t / reps / (2.0 * bs * bs * bs);
}

// Seconds per element of a block WRITE, rank 0 -> rank 1, `reps` of them
// back to back (the other ranks wait in a barrier).
double time_comm(Verbs& v, int rank, uint32_t bs, std::vector<double>& a) {
    double per = 0;
    if (rank == 0) {
        const uint32_t reps = std::max<uint32_t>(4, std::min<uint32_t>(32, (1u << 22) / (bs * bs)));
        v.write_block(1, a.data(), kImmA, 0, false);  // warm-up
        v.wait_sends();
        double t0 = now_s();
        for (uint32_t i = 0; i < reps; i++) v.write_block(1, a.data(), kImmA, 0, false);
        v.wait_sends();
        per = (now_s() - t0) / reps / (double(bs) * bs);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return per;
}

// The flags and checks for `size` ranks into cfg: -1 to run, else the exit
// status (--help: 0, bad input: 1), said by the rank that prints.
int configure(int argc, char** argv, int size, bool print, Config& cfg) {
    std::vector<std::string> args(argv, argv + argc);
    args.insert(args.begin() + 1, {"--mode", "bmr"});
    try {
        cfg = parse_cli(args, {"sverbs-bmr",
                               "broadcast-multiply-roll matrix multiplication on a "
                               "sqrt(N) x sqrt(N) grid of MPI ranks, blocks over verbs "
                               "(or MPI), timed against the model (docs/flowgen.md)"});
        cfg.mode = "bmr";
        cfg.procs = static_cast<uint32_t>(size);
        check(cfg);
        if (cfg.procs > kMaxRanks)
            throw ConfigError(fmt::format("bmr: at most {} ranks", kMaxRanks));
    } catch (const ExitRequest& e) {
        if (print) fmt::print("{}", e.text);
        return e.code;
    } catch (const ConfigError& e) {
        if (print) fmt::print(stderr, "sverbs-bmr: {}\n", e.what());
        return 1;
    }
    return -1;
}

int run(int argc, char** argv) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Config cfg;
    if (int rc = configure(argc, argv, size, rank == 0, cfg); rc >= 0) return rc;
    const uint32_t q = static_cast<uint32_t>(std::lround(std::sqrt(double(size))));
    const uint32_t m = cfg.matrix, bs = m / q;
    Grid g(q, static_cast<uint32_t>(rank));
    set_blas_threads(cfg.blas_threads);
    auto a = make_block(cfg.seed, 0, m, bs, g.row, g.col);
    auto b = make_block(cfg.seed, 1, m, bs, g.row, g.col);
    std::vector<double> c(a.size(), 0.0);

    std::unique_ptr<Verbs> v;
    std::string dev = "-";
    int ok = 1;
    std::string err;
    if (cfg.comm == "verbs" && size > 1) {
        try {
            v = std::make_unique<Verbs>(cfg, rank, size, q, bs);
            dev = v->device();
        } catch (const SetupError& e) {
            ok = 0;
            err = e.what();
        }
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!ok) fmt::print(stderr, "sverbs-bmr: rank {}: {}\n", rank, err);
        return 1;
    }
    double t_comm = 0;
    if (v) {
        PeerAddr me = v->local();
        std::vector<PeerAddr> all(size);
        MPI_Allgather(&me, sizeof me, MPI_BYTE, all.data(), sizeof me, MPI_BYTE, MPI_COMM_WORLD);
        try {
            v->connect(all);
            v->set_home(a, b);
        } catch (const SetupError& e) {
            die(1, fmt::format("rank {}: {}", rank, e.what()));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t_comm = time_comm(*v, rank, bs, a);
    }
    double t_flops = rank == 0 ? time_dgemm(bs, cfg.block, cfg.seed + 7) : 0;
    MPI_Barrier(MPI_COMM_WORLD);

    Times t = v ? run_verbs(*v, g, a, b, c, bs, cfg.block) : run_mpi(g, a, b, c, bs, cfg.block);
    double mine[3] = {t.total, t.compute, t.wait}, mx[3] = {}, sum[3] = {};
    MPI_Reduce(mine, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    std::vector<double> gathered(rank == 0 ? c.size() * size : 0);
    MPI_Gather(c.data(), static_cast<int>(c.size()), MPI_DOUBLE, gathered.data(),
               static_cast<int>(c.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    std::vector<char> devs(rank == 0 ? 32 * size : 0);
    char mydev[32] = {};
    std::snprintf(mydev, sizeof mydev, "%s", dev.c_str());
    MPI_Gather(mydev, 32, MPI_CHAR, devs.data(), 32, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) return 0;

    nlohmann::json j;
    j["ranks"] = size;
    j["grid"] = q;
    j["matrix"] = m;
    j["block_order"] = bs;
    j["blas_threads"] = cfg.blas_threads;
    j["dgemm_tile"] = cfg.block;
    j["comm"] = size > 1 ? cfg.comm : "none";
    j["seconds"] = mx[0];  // T(N): the slowest rank, first post to last completion
    j["compute_seconds_max"] = mx[1];
    j["compute_seconds_mean"] = sum[1] / size;
    j["wait_seconds_max"] = mx[2];
    j["wait_seconds_mean"] = sum[2] / size;
    j["t_comm_per_element"] = t_comm;  // 0 when nothing went over verbs
    j["t_flops_per_flop"] = t_flops;
    j["t_flops_in_run"] = mx[1] / (2.0 * bs * bs * bs * q);
    for (int r = 0; r < size; r++) j["devices"].push_back(std::string(&devs[32 * r]));
    int status = 0;
    if (cfg.verify) {
        std::vector<double> cfull(size_t{m} * m);
        for (int r = 0; r < size; r++)
            put_block(cfull, gathered.data() + c.size() * r, m, bs, r / q, r % q);
        auto A = make_matrix(cfg.seed, 0, m), B = make_matrix(cfg.seed, 1, m);
        std::vector<double> ref(cfull.size(), 0.0);
        double s = now_s();
        gemm_acc(A.data(), B.data(), ref.data(), m, cfg.block);
        j["reference_seconds"] = now_s() - s;
        double err_max = max_abs_diff(cfull, ref), tol = tolerance(m, max_abs(A), max_abs(B));
        j["max_abs_error"] = err_max;
        j["tolerance"] = tol;
        j["verified"] = err_max <= tol;
        if (!(err_max <= tol)) status = 3;
    }
    std::string text = j.dump(1) + "\n";
    if (!cfg.json.empty()) {
        std::ofstream out(cfg.json);
        out << text;
        if (!out) {
            fmt::print(stderr, "sverbs-bmr: cannot write '{}'\n", cfg.json);
            return 1;
        }
    }
    if (!cfg.quiet)
        fmt::print(
            "bmr: {} ranks ({}x{}), M {}, comm {}: {:.4f} s (compute max {:.4f} s, wait max "
            "{:.4f} s); T_comm {:.3e} s/element, T_flops {:.3e} s/flop{}\n",
            size, q, q, m, j["comm"].get<std::string>(), mx[0], mx[1], mx[2], t_comm, t_flops,
            cfg.verify ? fmt::format("; max abs error {:.3e} (tolerance {:.3e}) {}",
                                     j["max_abs_error"].get<double>(), j["tolerance"].get<double>(),
                                     status ? "EXCEEDED" : "ok")
                       : "");
    return status;
}

}  // namespace

// --help is answered before MPI_Init: it needs no MPI, and a singleton
// MPI_Init (no mpirun) costs 12 s in the TCG guest.
bool wants_help(int argc, char** argv) {
    return std::any_of(argv + 1, argv + argc, [](const char* a) {
        return std::strcmp(a, "-h") == 0 || std::strcmp(a, "--help") == 0;
    });
}

int main(int argc, char** argv) {
    if (wants_help(argc, argv)) {
        Config cfg;
        return std::max(0, configure(argc, argv, 1, true, cfg));
    }
    MPI_Init(&argc, &argv);
    int rc = run(argc, argv);  // a setup failure: every rank returns 1 together
    MPI_Finalize();
    return rc;
}
