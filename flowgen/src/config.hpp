// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// config.hpp - what a sverbs-flowgen run is: a TOML file (toml++) overridden
// by flags (CLI11), checked in two steps: check() for what the config alone
// can tell, check_limits() against the device's limits (both before any flow
// starts).  No verbs here, so the unit tests can reach all of it.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace flowgen {

struct ConfigError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Op : uint8_t { Write, Read, Send, WriteImm };
Op parse_op(const std::string& s);
const char* op_name(Op op);

// "4096", "64k", "1m"; "uniform:1k-64k"; "choice:64,4k,64k" (equal weights).
struct SizeDist {
    enum class Kind : uint8_t { Fixed, Uniform, Choice } kind = Kind::Fixed;
    uint64_t lo = 4096, hi = 4096;
    std::vector<uint64_t> choices;
    static SizeDist parse(const std::string& s);
    uint64_t max() const;
    double mean() const;
    uint64_t sample(std::mt19937_64& rng) const;
    std::string str() const;
};
uint64_t parse_bytes(const std::string& s);  // 4096, 4k, 4K, 1m, 1g (binary)

// One flow's traffic.
struct FlowSpec {
    Op op = Op::Write;
    SizeDist size;
    uint32_t depth = 1;    // WRs outstanding (closed loop), or the cap (open loop)
    double rate_mbps = 0;  // > 0: open loop at this rate (Mbit/s); 0: closed loop
    int prio = -1;         // sverbs level 0..7, -1: not stated
};

// A [[flows]] table of the TOML file: a FlowSpec for users x services ranges.
struct Override {
    uint32_t user_lo = 0, user_hi = UINT32_MAX, svc_lo = 0, svc_hi = UINT32_MAX;
    std::optional<std::string> op, size;
    std::optional<uint32_t> depth;
    std::optional<double> rate_mbps;
    std::optional<int> prio;
};

struct Config {
    std::string mode = "client";  // client | server | bmr
    std::string device;           // empty: whatever the address routes to
    std::string server;           // client: the server's address; server: bind address
    std::string bind;             // client: the local address (picks the device)
    uint16_t port = 7471;
    uint32_t users = 1, services = 1, threads = 1;
    // the defaults for every flow, as flags give them
    std::string op = "write", size = "4096";
    uint32_t depth = 1;
    double rate_mbps = 0;
    int prio = -1;
    std::vector<Override> overrides;
    double duration = 5;  // seconds
    uint64_t iters = 0;   // > 0: each flow stops after this many ops
    uint32_t connect_window = 64;
    double drain_timeout = 5;
    std::string json, csv, label;
    bool progress = false, quiet = false;
    // bandwidth allocation
    std::string alloc = "auto";  // auto (above the threshold) | on | off
    uint32_t alloc_threshold = 3000;
    double link_gbps = 0;  // 0: the port's active rate
    std::vector<double> user_weights;
    // bmr
    uint32_t procs = 4, matrix = 512, blas_threads = 1, block = 1024;
    std::string comm = "verbs";  // verbs | mpi (MPI_Ibcast / MPI_Isend+Irecv)
    uint32_t gid_index = 1;      // RoCE v2 GID of the guest's rxe devices
    uint64_t seed = 1;
    bool verify = true;  // rank 0 compares C with one dgemm of the whole matrices

    uint32_t flows() const { return users * services; }
};

// argv[0] is skipped.  Returns the config; throws ConfigError (bad value),
// or ExitRequest for --help / --version (code 0).
struct ExitRequest {
    int code;
    std::string text;
};
// The program's banner in --help (sverbs-bmr parses the same flags).
struct Banner {
    std::string name = "sverbs-flowgen";
    std::string what =
        "users x services RDMA flows, one RC QP each over rdma_cm, with per-flow "
        "statistics (docs/flowgen.md)";
};
Config parse_cli(const std::vector<std::string>& args, const Banner& banner = {});
// A TOML document (toml++) into cfg; throws ConfigError with the line.
void apply_toml(Config& cfg, const std::string& text, const std::string& where);

// What the config alone says is impossible.
void check(const Config& cfg);

// The per-flow traffic after overrides (check() first).
FlowSpec flow_spec(const Config& cfg, uint32_t user, uint32_t service);

// What the device allows (ibv_query_device), and its check.
struct DeviceLimits {
    std::string name;
    uint64_t max_qp = 0, max_mr_size = 0, max_mr = 0, max_qp_wr = 0, max_cqe = 0;
};
void check_limits(const Config& cfg, const DeviceLimits& lim);

// Bandwidth allocation: is it on, and each flow's rate (Mbit/s) and level.
bool alloc_active(const Config& cfg);
struct Allocation {
    std::vector<double> rate_mbps;  // per flow, index user * services + service
    std::vector<int> prio;
};
// link_mbps shared by weight (user_weights, else equal); levels: the heaviest
// users get level 0 ... the lightest SVERBS_NUM_PRIO - 1, by weight rank.
Allocation allocate(const Config& cfg, double link_mbps);

}  // namespace flowgen
