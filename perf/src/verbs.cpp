// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "verbs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

namespace perf {

namespace {

std::string errno_str(int e) {
    return fmt::format("{} ({})", std::strerror(e), e);
}

uint32_t random_psn() {
    static std::mt19937 rng{std::random_device{}()};
    return rng() & 0xffffff;
}

}  // namespace

void Buffer::Free::operator()(uint8_t* p) const noexcept {
    std::free(p);
}

Buffer::Buffer(size_t bytes) : size_(bytes) {
    void* p = nullptr;
    size_t alloc = (bytes + 4095) / 4096 * 4096;
    if (alloc == 0) alloc = 4096;
    if (int rc = posix_memalign(&p, 4096, alloc); rc != 0)
        throw Error(fmt::format("cannot allocate {} bytes: {}", alloc, errno_str(rc)));
    std::memset(p, 0, alloc);
    mem_.reset(static_cast<uint8_t*>(p));
}

Device open_device(const std::string& name, uint8_t port, int gid_index) {
    int n = 0;
    std::unique_ptr<ibv_device*, Deleter<ibv_free_device_list>> list(ibv_get_device_list(&n));
    if (!list) throw Error(fmt::format("ibv_get_device_list: {}", errno_str(errno)));
    ibv_device* found = nullptr;
    std::string names;
    for (int i = 0; i < n; i++) {
        const char* dn = ibv_get_device_name(list.get()[i]);
        names += names.empty() ? dn : fmt::format(", {}", dn);
        if (name == dn) found = list.get()[i];
    }
    if (!found)
        throw Error(
            fmt::format("no RDMA device '{}' (have: {})", name, names.empty() ? "none" : names));
    Device d;
    d.name = name;
    d.port = port;
    d.gid_index = gid_index;
    d.ctx.reset(ibv_open_device(found));
    if (!d.ctx) throw Error(fmt::format("ibv_open_device({}): {}", name, errno_str(errno)));
    d.pd.reset(ibv_alloc_pd(d.ctx.get()));
    if (!d.pd) throw Error(fmt::format("ibv_alloc_pd({}): {}", name, errno_str(errno)));
    ibv_port_attr pa{};
    if (int rc = ibv_query_port(d.ctx.get(), port, &pa); rc != 0)
        throw Error(fmt::format("ibv_query_port({}, {}): {}", name, port, errno_str(rc)));
    if (pa.state != IBV_PORT_ACTIVE)
        throw Error(
            fmt::format("{} port {} is {}, not ACTIVE", name, port, ibv_port_state_str(pa.state)));
    d.active_mtu = pa.active_mtu;
    if (int rc = ibv_query_gid(d.ctx.get(), port, gid_index, &d.gid); rc != 0)
        throw Error(fmt::format("ibv_query_gid({}, port {}, index {}): {}", name, port, gid_index,
                                errno_str(errno)));
    static const ibv_gid zero{};
    if (std::memcmp(&d.gid, &zero, sizeof zero) == 0)
        throw Error(fmt::format("{} GID index {} is empty (no IP address on its netdev?)", name,
                                gid_index));
    ibv_device_attr da{};
    if (int rc = ibv_query_device(d.ctx.get(), &da); rc != 0)
        throw Error(fmt::format("ibv_query_device({}): {}", name, errno_str(rc)));
    d.max_qp_wr = static_cast<uint32_t>(da.max_qp_wr);
    return d;
}

Endpoint make_rc_endpoint(Device& dev, int cq_entries, int rcq_entries, const QpCaps& caps) {
    Endpoint e;
    e.cq.reset(ibv_create_cq(dev.ctx.get(), cq_entries, nullptr, nullptr, 0));
    if (!e.cq)
        throw Error(
            fmt::format("ibv_create_cq({}, {}): {}", dev.name, cq_entries, errno_str(errno)));
    if (rcq_entries > 0) {
        e.rcq.reset(ibv_create_cq(dev.ctx.get(), rcq_entries, nullptr, nullptr, 0));
        if (!e.rcq)
            throw Error(
                fmt::format("ibv_create_cq({}, {}): {}", dev.name, rcq_entries, errno_str(errno)));
    }
    if (dev.max_qp_wr && (caps.max_send_wr > dev.max_qp_wr || caps.max_recv_wr > dev.max_qp_wr))
        throw Error(fmt::format("{}: asked for {} send / {} recv WRs, device max_qp_wr is {}",
                                dev.name, caps.max_send_wr, caps.max_recv_wr, dev.max_qp_wr));
    ibv_qp_init_attr ia{};
    ia.send_cq = e.cq.get();
    ia.recv_cq = e.recv_cq();
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = caps.max_send_wr;
    ia.cap.max_recv_wr = caps.max_recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = caps.max_inline;
    e.qp.reset(ibv_create_qp(dev.pd.get(), &ia));
    if (!e.qp)
        throw Error(fmt::format("ibv_create_qp({}, RC, {} send WRs): {}", dev.name,
                                caps.max_send_wr, errno_str(errno)));
    e.psn = random_psn();
    return e;
}

namespace {

void to_init(Device& d, Endpoint& e) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = d.port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int rc = ibv_modify_qp(
            e.qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        rc != 0)
        throw Error(
            fmt::format("{}: modify QP {} to INIT: {}", d.name, e.qp->qp_num, errno_str(rc)));
}

void to_rtr(Device& d, Endpoint& e, const Device& pd, const Endpoint& pe, ibv_mtu mtu,
            const ConnectOpts& o) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = pe.qp->qp_num;
    a.rq_psn = pe.psn;
    a.max_dest_rd_atomic = o.max_rd_atomic;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = pd.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.port_num = d.port;
    if (int rc =
            ibv_modify_qp(e.qp.get(), &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        rc != 0)
        throw Error(fmt::format("{}: modify QP {} to RTR (peer {} QP {}): {}", d.name, e.qp->qp_num,
                                pd.name, pe.qp->qp_num, errno_str(rc)));
}

void to_rts(Device& d, Endpoint& e, const ConnectOpts& o) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.sq_psn = e.psn;
    a.max_rd_atomic = o.max_rd_atomic;
    if (int rc = ibv_modify_qp(e.qp.get(), &a,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        rc != 0)
        throw Error(
            fmt::format("{}: modify QP {} to RTS: {}", d.name, e.qp->qp_num, errno_str(rc)));
}

}  // namespace

void connect_pair(Device& da, Endpoint& a, Device& db, Endpoint& b, const ConnectOpts& o) {
    ibv_mtu mtu = std::min(da.active_mtu, db.active_mtu);
    to_init(da, a);
    to_init(db, b);
    to_rtr(da, a, db, b, mtu, o);
    to_rtr(db, b, da, a, mtu, o);
    to_rts(da, a, o);
    to_rts(db, b, o);
}

MrPtr reg_mr(Device& dev, const Buffer& buf, int access) {
    MrPtr mr(ibv_reg_mr(dev.pd.get(), buf.data(), buf.size(), access));
    if (!mr)
        throw Error(
            fmt::format("ibv_reg_mr({}, {} bytes): {}", dev.name, buf.size(), errno_str(errno)));
    return mr;
}

void check_wc(const ibv_wc& wc, const char* what) {
    if (wc.status == IBV_WC_SUCCESS) return;
    throw CompletionError(
        fmt::format("{} completion failed: status {} ({}), wr_id {:#x}, qp {}, vendor_err {:#x}",
                    what, ibv_wc_status_str(wc.status), static_cast<int>(wc.status), wc.wr_id,
                    wc.qp_num, wc.vendor_err));
}

std::string mtu_str(ibv_mtu m) {
    switch (m) {
        case IBV_MTU_256:
            return "256";
        case IBV_MTU_512:
            return "512";
        case IBV_MTU_1024:
            return "1024";
        case IBV_MTU_2048:
            return "2048";
        case IBV_MTU_4096:
            return "4096";
    }
    return fmt::format("?{}", static_cast<int>(m));
}

}  // namespace perf
