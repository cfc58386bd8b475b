// Configuration model and TOML loader (toml++). One file describes both roles.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"

namespace sv {

struct SockAddr {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_INET;
};

struct Endpoint {
    enum class Kind { Tcp, Unix };
    Kind kind = Kind::Tcp;
    std::string host;   // Tcp
    uint16_t port = 0;  // Tcp
    std::string path;   // Unix
    std::string text;   // as written
    // Filled by resolve_addresses() at configuration time (main thread): an event loop never
    // calls the resolver.  Empty for a Tcp endpoint not resolved yet.
    std::optional<SockAddr> addr;
};

// "host:port", "[v6]:port", "unix:/path".
Result<Endpoint> parse_endpoint(std::string_view s);

enum class TransportKind { Tcp, Rdma };

struct ChannelConfig {
    TransportKind transport = TransportKind::Tcp;
    uint32_t credits = 64;                 // receive slots each side offers
    uint32_t slot_bytes = 64 * 1024;       // RDMA: SEND/RECV slot; larger frames use WRITE_WITH_IMM
    uint64_t large_ring_bytes = 8u << 20;  // RDMA: receive ring for large frames (>= 2 x max_frame)
    uint32_t max_frame_bytes = 4u << 20;   // any frame, any transport
    int64_t connect_timeout_ms = 1000;
    int64_t reconnect_min_ms = 50;
    int64_t reconnect_max_ms = 2000;
    int64_t heartbeat_ms = 1000;       // PING when idle; peer lost after 3 missed
    uint32_t rdma_signal_every = 16;   // RDMA: one send WR in N asks for a completion (1: all)
    uint32_t rdma_inline_bytes = 256;  // RDMA: frames up to this size go inline (0: never)
    // RDMA: send chunks (slot_bytes each) registered once per device and worker, shared by
    // its channels; a data frame waits when none is free
    uint32_t rdma_pool_chunks = 128;
    // RDMA: completions taken from a device's CQ in one turn of the loop; the rest wait for
    // the next turn (which then does not sleep), so one busy CQ cannot starve the others
    uint32_t rdma_poll_budget = 2048;

    // A reload compares them: the channels keep the settings they started with.
    bool operator==(const ChannelConfig&) const = default;
};

struct UpstreamConfig {
    std::string name;
    // ingress side
    std::vector<std::string> egress;  // egress host names serving it (empty = all)
    int priority = 4;                 // sverbs level 0 (highest) .. 7
    double slo_p99_ms = 50.0;         // latency objective, end to end at the ingress
    // controller = "slo": answer 503 + Retry-After when the objective cannot be met.  On only
    // when the operator states slo_p99_ms (or shed = true): the 50 ms default sizes batches,
    // it is no promise to the clients worth refusing requests for.
    bool shed = false;
    uint32_t max_batch = 64;
    int64_t max_delay_us = 1000;
    uint32_t initial_batch = 8;
    int64_t initial_delay_us = 200;
    bool adaptive = true;
    bool model = true;  // controller = "slo" (SloController) or "aimd"
    bool eager_when_idle = true;
    uint32_t max_inflight_batches = 2;
    // egress side
    std::optional<Endpoint> service;
    uint32_t pool = 64;
    // Requests pipelined (HTTP/1.1) on one service connection: a batch leaves in one write
    // and its answers come back in few reads.  1 = one request per connection at a time.
    uint32_t pipeline = 1;
    // The service's batch endpoint (e.g. "/batch" of sverbs-compute); empty = none: every
    // request is forwarded by itself.  A batch of queued requests goes as one POST whose body
    // is their HTTP/1.1 pipeline (application/http); a 404/405/501 answer turns it off.
    std::string batch_path;
    int64_t service_timeout_ms = 5000;
    int64_t service_connect_timeout_ms = 1000;
};

struct RouteConfig {
    std::string prefix;
    std::string upstream;
    size_t upstream_index = 0;
};

struct EgressHost {
    std::string name;
    Endpoint address;
    uint32_t connections = 1;  // channels per ingress worker
    std::string source;        // local address to dial from (RDMA: picks the device); "" = any
    Endpoint source_ep;        // source as an endpoint (port 0), resolved with the rest
};

struct IngressConfig {
    bool present = false;
    Endpoint listen;
    uint32_t workers = 2;
    uint32_t max_connections = 10000;  // per worker
    uint32_t max_header_bytes = 8192;
    uint64_t max_body_bytes = 1u << 20;
    uint32_t admission_limit = 4096;  // requests queued or in flight, per worker
    uint32_t retry_after_s = 1;
    int64_t client_timeout_ms = 10000;   // to receive a whole request once it started
    int64_t idle_timeout_ms = 60000;     // keep-alive idle
    int64_t send_timeout_ms = 10000;     // a response not drained by the client
    int64_t request_timeout_ms = 10000;  // upstream answer (-> 504)
    int64_t drain_timeout_ms = 10000;
    std::string metrics_path = "/metrics";   // on metrics_listen only
    std::optional<Endpoint> metrics_listen;  // /metrics and /healthz (worker 0)
    // Memory: request bytes buffered per connection (pipelined input + a body being read)
    // before reading from it pauses, and per worker in total before new input is shed (503).
    uint64_t connection_buffer_bytes = 256 * 1024;
    uint64_t memory_limit_bytes = 256ull << 20;
    std::string access_log;
    std::vector<EgressHost> egress;
};

struct EgressConfig {
    bool present = false;
    Endpoint listen;
    uint32_t workers = 2;
    std::optional<Endpoint> metrics_listen;
    int64_t drain_timeout_ms = 10000;
};

struct Config {
    std::string source;  // file name
    std::string log_level = "info";
    IngressConfig ingress;
    EgressConfig egress;
    ChannelConfig channel;
    std::vector<UpstreamConfig> upstreams;
    std::vector<RouteConfig> routes;

    const UpstreamConfig* upstream(std::string_view name) const;
    int upstream_index(std::string_view name) const;
    // Longest-prefix route; -1 if none.
    int route(std::string_view path) const;
};

// Errors are "file:line: message".
Result<Config> parse_config(std::string_view text, std::string_view source_name);
Result<Config> load_config(const std::string& path);
// Resolves every host name of the file (egress addresses and sources, services, listeners)
// with getaddrinfo.  Called on the main thread at start and on SIGHUP, never on a loop.
// Only what the role uses: an egress does not resolve the ingress's egress hosts.
enum class Role { Ingress, Egress };
Status resolve_addresses(Config& c, Role role);
// Resolve one endpoint (getaddrinfo for a host name; numeric and unix paths directly).
Result<SockAddr> resolve_now(const Endpoint& ep);

}  // namespace sv
