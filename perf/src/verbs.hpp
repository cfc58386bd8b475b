// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// verbs.hpp - small RAII layer over libibverbs for the perf/ benchmarks: open a
// device by name, make PD/CQ/MR/RC QP, connect two QPs of the same process
// directly (INIT -> RTR -> RTS with the peer's QPN/PSN/GID, no rdmacm).
#pragma once

#include <infiniband/sverbs.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace perf {

// Every setup failure is one of these; main() prints what() and exits 1.
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A completion with a status other than IBV_WC_SUCCESS.
struct CompletionError : Error {
    using Error::Error;
};

template <auto Fn>
struct Deleter {
    template <class T>
    void operator()(T* p) const noexcept {
        if (p) Fn(p);
    }
};

using ContextPtr = std::unique_ptr<ibv_context, Deleter<ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, Deleter<ibv_destroy_qp>>;
using MrPtr = std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>>;

// Page-aligned, zeroed memory for MRs.
class Buffer {
  public:
    explicit Buffer(size_t bytes);
    uint8_t* data() const { return mem_.get(); }
    size_t size() const { return size_; }

  private:
    struct Free {
        void operator()(uint8_t* p) const noexcept;
    };
    std::unique_ptr<uint8_t, Free> mem_;
    size_t size_;
};

// An opened device + PD and the facts about its port that connecting needs.
struct Device {
    std::string name;
    ContextPtr ctx;
    PdPtr pd;
    uint8_t port = 1;
    int gid_index = 1;
    ibv_gid gid{};
    ibv_mtu active_mtu = IBV_MTU_1024;
    uint32_t max_qp_wr = 0;
};

Device open_device(const std::string& name, uint8_t port, int gid_index);

struct QpCaps {
    uint32_t max_send_wr = 128;
    uint32_t max_recv_wr = 1;
    uint32_t max_inline = 0;
};

// An RC QP with its own send CQ (and recv CQ, which may be the same).
struct Endpoint {
    CqPtr cq;   // send completions (and receive ones unless rcq is set)
    CqPtr rcq;  // separate receive CQ, if asked for
    QpPtr qp;
    uint32_t psn = 0;
    ibv_cq* recv_cq() const { return rcq ? rcq.get() : cq.get(); }
};

// cq_entries: size of the send CQ; rcq_entries > 0 makes a separate recv CQ.
Endpoint make_rc_endpoint(Device& dev, int cq_entries, int rcq_entries, const QpCaps& caps);

struct ConnectOpts {
    uint8_t timeout = 14;  // local ACK timeout, 4.096 us * 2^timeout (as perftest)
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t max_rd_atomic = 1;
};

// Bring a (on da) and b (on db) to RTS, each addressing the other.
void connect_pair(Device& da, Endpoint& a, Device& db, Endpoint& b, const ConnectOpts& o = {});

MrPtr reg_mr(Device& dev, const Buffer& buf, int access);

// Throws CompletionError naming ibv_wc_status_str(status) if wc failed.
void check_wc(const ibv_wc& wc, const char* what);

std::string mtu_str(ibv_mtu m);

}  // namespace perf
