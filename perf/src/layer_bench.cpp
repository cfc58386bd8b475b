// layer_bench - the sverbs layer's own CPU cost per WR, natively on the host,
// with no device: sched/ and batch/ driven through a null adapter whose
// post_send only records the WQEs and whose poll_cq hands back one successful
// completion per signaled WQE.  The "stock" cases call the null adapter
// directly, the others go through sverbs_post_send()/sverbs_poll_cq(); the
// difference is what the layer adds to a provider's post and poll, which on
// mlx5 (a post of ~100-200 ns) is what decides "within 2% of stock".
//
//   build/perf/layer_bench [--benchmark_repetitions=5 ...]   (Google Benchmark)
//
// Per iteration: post, then poll until the WR's completion came ("lat"), or
// post 16 WRs one per call, the 16th signaled, then poll ("burst16").
// Timing is the benchmark's business; no test asserts on it.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

extern "C" {
#include "sverbs_sched.h"
}

namespace {

// The null provider: a ring of posted WQEs, and a CQ of their completions.
struct NullDev {
    static constexpr std::size_t kRing = 1024;
    std::array<ibv_wc, kRing> cqe{};
    std::size_t head = 0, count = 0;
    uint32_t consumed = 0;  // CQEs polled (the adapter's cq_consumed)
    uint32_t qp_num = 0x11;
};

NullDev dev;

int null_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    for (; wr; wr = wr->next) {
        if (!(wr->send_flags & IBV_SEND_SIGNALED)) continue;
        if (dev.count == NullDev::kRing) {
            *bad = wr;
            return ENOMEM;
        }
        ibv_wc& wc = dev.cqe[(dev.head + dev.count++) % NullDev::kRing];
        std::memset(&wc, 0, sizeof(wc));
        wc.wr_id = wr->wr_id;
        wc.opcode = IBV_WC_RDMA_WRITE;
        wc.qp_num = qp->qp_num;
    }
    return 0;
}

int null_poll_cq(ibv_cq*, int ne, ibv_wc* wc) {
    int n = 0;

    for (; n < ne && dev.count; n++, dev.count--) {
        wc[n] = dev.cqe[dev.head];
        dev.head = (dev.head + 1) % NullDev::kRing;
    }
    dev.consumed += static_cast<uint32_t>(n);
    return n;
}

uint32_t null_consumed(ibv_cq*) {
    return dev.consumed;
}

int null_arm(ibv_cq*, int) {
    return 0;
}
int null_resize(ibv_cq*, int) {
    return 0;
}
void null_log(ibv_context*, sverbs_log_level, const char*) {}
// the provider's no-op (a refused WR's placeholder): a zero-length WRITE here
void null_nop(ibv_qp*, ibv_send_wr* wr) {
    wr->opcode = IBV_WR_RDMA_WRITE;
}

const sverbs_adapter null_adapter = {
    "null",  null_post_send, null_poll_cq, null_arm, null_resize, null_log, nullptr,
    nullptr, nullptr,        null_nop,     nullptr,  nullptr,     nullptr,  null_consumed,
    nullptr,  // cq_sync: the glue's after-poll test (no provider lock here)
    nullptr,  // qp_lockless: never
    nullptr,  // post_send_nodb: a watched QP batches through the queue
    nullptr,  // ring
};

// How a WR goes down: straight to the null provider, or through the layer.
struct Path {
    virtual ~Path() = default;
    virtual int post(ibv_send_wr* wr) = 0;
    virtual int poll(ibv_wc* wc, int ne) = 0;
};

struct Stock : Path {
    ibv_qp qp{};
    ibv_cq cq{};
    Stock() { qp.qp_num = dev.qp_num; }
    int post(ibv_send_wr* wr) override {
        ibv_send_wr* bad = nullptr;
        return null_post_send(&qp, wr, &bad);
    }
    int poll(ibv_wc* wc, int ne) override { return null_poll_cq(&cq, ne, wc); }
};

struct Layer : Path {
    ibv_qp qp{};
    ibv_cq cq{};
    sverbs_cq* scq = nullptr;
    sverbs_qp* sqp = nullptr;

    Layer(bool scheduled, bool passthrough, uint32_t budget_us) {
        sverbs_config cfg;
        sverbs_config_defaults(&cfg);
        cfg.slice_always = scheduled;
        cfg.passthrough = passthrough;
        cfg.batch_budget_us = budget_us;
        cq.cqe = 256 + static_cast<int>(cfg.cq_headroom);
        qp.qp_num = dev.qp_num;
        qp.qp_type = IBV_QPT_RC;
        scq = sverbs_cq_create(&null_adapter, &cq, &cfg);
        ibv_qp_init_attr_ex attr{};
        attr.qp_type = IBV_QPT_RC;
        attr.cap.max_send_wr = 128;
        attr.cap.max_send_sge = 1;
        if (scq) sqp = sverbs_qp_create(&null_adapter, &qp, scq, &attr, &cfg);
        if (!scq || !sqp)
            throw std::runtime_error(
                "layer_bench: sverbs refused "
                "the null QP/CQ");
    }
    ~Layer() override {
        sverbs_qp_destroy_pre(sqp);
        sverbs_qp_destroy_post(sqp, 0);
        sverbs_cq_destroy(scq);
    }
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;
    int post(ibv_send_wr* wr) override {
        ibv_send_wr* bad = nullptr;
        return sverbs_post_send(sqp, wr, &bad);
    }
    int poll(ibv_wc* wc, int ne) override { return sverbs_poll_cq(scq, ne, wc); }
};

// One 64 B RDMA WRITE.
struct Wr {
    std::array<char, 64> buf{};
    ibv_sge sge{};
    ibv_send_wr wr{};
    Wr() {
        sge.addr = reinterpret_cast<uintptr_t>(buf.data());
        sge.length = 64;
        sge.lkey = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = 0x1000;
        wr.wr.rdma.rkey = 2;
    }
};

void wait_one(benchmark::State& state, Path& p, uint64_t id) {
    std::array<ibv_wc, 4> wc{};
    int n;

    do n = p.poll(wc.data(), 4);
    while (n == 0);
    if (n != 1 || wc[0].wr_id != id || wc[0].status != IBV_WC_SUCCESS)
        state.SkipWithError("wrong completion");
}

void run_lat(benchmark::State& state, Path& p) {
    Wr w;
    uint64_t id = 0;

    w.wr.send_flags = IBV_SEND_SIGNALED;
    for (auto _ : state) {
        w.wr.wr_id = ++id;
        if (p.post(&w.wr)) {
            state.SkipWithError("post failed");
            break;
        }
        wait_one(state, p, id);
    }
    state.SetItemsProcessed(state.iterations());
}

void run_burst16(benchmark::State& state, Path& p) {
    Wr w;
    uint64_t id = 0;

    for (auto _ : state) {
        for (int i = 0; i < 16; i++) {
            w.wr.wr_id = ++id;
            w.wr.send_flags = i == 15 ? IBV_SEND_SIGNALED : 0;
            if (p.post(&w.wr)) {
                state.SkipWithError("post failed");
                return;
            }
        }
        wait_one(state, p, id);
    }
    state.SetItemsProcessed(state.iterations() * 16);
}

enum class Kind { stock, passthrough, lone, scheduled };

std::unique_ptr<Path> make_path(Kind k) {
    if (k == Kind::stock) return std::make_unique<Stock>();
    return std::make_unique<Layer>(k == Kind::scheduled, k == Kind::passthrough, 0);
}

void BM_lat(benchmark::State& state, Kind k) {
    run_lat(state, *make_path(k));
}

void BM_burst16(benchmark::State& state, Kind k) {
    run_burst16(state, *make_path(k));
}

BENCHMARK_CAPTURE(BM_lat, stock, Kind::stock);
BENCHMARK_CAPTURE(BM_lat, layer_passthrough, Kind::passthrough);
BENCHMARK_CAPTURE(BM_lat, layer_lone, Kind::lone);
BENCHMARK_CAPTURE(BM_lat, layer_scheduled, Kind::scheduled);
BENCHMARK_CAPTURE(BM_burst16, stock, Kind::stock);
BENCHMARK_CAPTURE(BM_burst16, layer_passthrough, Kind::passthrough);
BENCHMARK_CAPTURE(BM_burst16, layer, Kind::lone);
BENCHMARK_CAPTURE(BM_burst16, layer_scheduled, Kind::scheduled);

}  // namespace

BENCHMARK_MAIN();
