// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// sport.hpp - the RoCE v2 UDP source port Linux 6.1 gives a connection.
//
// rxe: rxe_modify_qp() sets qp->src_port = rdma_get_udp_sport(flow_label,
// qpn, dest_qpn) when the AV has a GRH (ib_verbs.h): a zero flow label is
// replaced by rdma_calc_flow_label(lqpn, rqpn), and the label is folded into
// 14 bits above 0xC000 by rdma_flow_label_to_udp_sport().  rdma_cm fills the
// label of a RoCE v2 route itself (cma.c, cma_get_roce_udp_flow_label()):
// (cm_sport * 31 + cm_dport) & 0xFFFFF for IPv4, so a flow's UDP source port
// follows from the rdma_cm port pair.  The destination port is always 4791.
#pragma once

#include <cstdint>

namespace flowgen {

constexpr uint16_t kRoceV2Port = 4791;

inline uint16_t flow_label_to_udp_sport(uint32_t fl) {
    uint32_t lo = fl & 0x03fff, hi = fl & 0xfc000;
    lo ^= hi >> 14;
    return static_cast<uint16_t>(lo | 0xc000);
}

inline uint32_t calc_flow_label(uint32_t lqpn, uint32_t rqpn) {
    uint64_t v = static_cast<uint64_t>(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    return static_cast<uint32_t>(v & 0xfffff);
}

inline uint32_t cm_flow_label(uint16_t cm_sport, uint16_t cm_dport) {
    return (static_cast<uint32_t>(cm_sport) * 31 + cm_dport) & 0xfffff;
}

// The port rxe uses for a connection made by rdma_cm.
inline uint16_t rxe_cm_udp_sport(uint16_t cm_sport, uint16_t cm_dport, uint32_t lqpn,
                                 uint32_t rqpn) {
    uint32_t fl = cm_flow_label(cm_sport, cm_dport);
    if (!fl) fl = calc_flow_label(lqpn, rqpn);
    return flow_label_to_udp_sport(fl);
}

// mlx5: the port sverbs-flowgen sets with mlx5dv_modify_qp_udp_sport() for
// flow `index` of a run with random `salt`: in the 0xC000-0xFFFF range the
// kernel uses too, index * an odd number mod 2^14 (distinct for the first
// 16,384 flows), offset by the salt.
inline uint16_t mlx5_flow_udp_sport(uint32_t index, uint32_t salt) {
    return static_cast<uint16_t>(0xc000 | ((index * 0x2f1bu + salt) & 0x3fff));
}

}  // namespace flowgen
