// Config parsing: valid files, defaults, and errors that name the offending line.
#include <string>

#include "config.hpp"
#include "cunit_main.hpp"

using namespace sv;

namespace {

const char* kGood = R"(log_level = "debug"
[channel]
transport = "tcp"
credits = 32
max_frame_bytes = "8MiB"

[ingress]
listen = "127.0.0.1:8080"
workers = 3
max_body_bytes = "64KiB"

[[ingress.egress]]
name = "gpu1"
address = "10.0.0.2:7000"
connections = 2

[[ingress.egress]]
name = "gpu2"
address = "unix:/run/sv.sock"

[egress]
listen = "0.0.0.0:7000"

[[upstream]]
name = "matmul"
class = "latency"
egress = ["gpu1"]
slo_p99_ms = 5
service = "127.0.0.1:9000"

[[upstream]]
name = "bulk"
class = "bulk"

[[route]]
prefix = "/matmul"
upstream = "matmul"

[[route]]
prefix = "/"
upstream = "bulk"
)";

bool contains(const std::string& s, const std::string& sub) {
    return s.find(sub) != std::string::npos;
}

void test_good() {
    auto r = parse_config(kGood, "good.toml");
    CU_ASSERT_FATAL(r.ok());
    const Config& c = r.value();
    CU_ASSERT_EQUAL(c.channel.credits, 32u);
    CU_ASSERT_EQUAL(c.channel.max_frame_bytes, 8u << 20);
    CU_ASSERT_EQUAL(c.ingress.workers, 3u);
    CU_ASSERT_EQUAL(c.ingress.max_body_bytes, 64u << 10);
    CU_ASSERT_EQUAL(c.ingress.max_header_bytes, 8192u);  // default kept
    CU_ASSERT_EQUAL(c.channel.rdma_pool_chunks, 128u);   // default: the send pool is bounded
    CU_ASSERT_EQUAL(c.channel.rdma_poll_budget, 2048u);  // default
    CU_ASSERT_EQUAL(c.ingress.egress.size(), 2u);
    CU_ASSERT_EQUAL(c.ingress.egress[0].connections, 2u);
    CU_ASSERT(c.ingress.egress[1].address.kind == Endpoint::Kind::Unix);
    CU_ASSERT_EQUAL(c.ingress.egress[1].address.path, std::string("/run/sv.sock"));
    CU_ASSERT_EQUAL(c.upstreams.size(), 2u);
    CU_ASSERT_EQUAL(c.upstreams[0].priority, 0);
    CU_ASSERT_EQUAL(c.upstreams[1].priority, 7);
    CU_ASSERT(c.upstreams[0].service.has_value());
    CU_ASSERT_EQUAL(c.upstreams[0].service->port, 9000);
    CU_ASSERT_DOUBLE_EQUAL(c.upstreams[0].slo_p99_ms, 5.0, 1e-9);
    // Shedding only for a stated objective; without one, 50 ms sizes batches.
    CU_ASSERT(c.upstreams[0].shed);
    CU_ASSERT_FALSE(c.upstreams[1].shed);
    CU_ASSERT_DOUBLE_EQUAL(c.upstreams[1].slo_p99_ms, 50.0, 1e-9);
    CU_ASSERT_EQUAL(c.log_level, std::string("debug"));
}

void test_routes() {
    auto r = parse_config(kGood, "good.toml");
    CU_ASSERT_FATAL(r.ok());
    const Config& c = r.value();
    CU_ASSERT_EQUAL(c.route("/matmul"), 0);
    CU_ASSERT_EQUAL(c.route("/matmul/x"), 0);
    CU_ASSERT_EQUAL(c.route("/matmulx"), 1);  // not a path-segment match: falls to "/"
    CU_ASSERT_EQUAL(c.route("/other"), 1);
}

void expect_error(const char* text, const std::string& where, const std::string& what) {
    auto r = parse_config(text, "t.toml");
    CU_ASSERT_FALSE(r.ok());
    if (r.ok()) return;
    const auto& m = r.error().message;
    CU_ASSERT(contains(m, where));
    CU_ASSERT(contains(m, what));
    if (!contains(m, where) || !contains(m, what)) std::fprintf(stderr, "\n  got: %s\n", m.c_str());
}

void test_errors_name_line() {
    // syntax error on line 3
    expect_error("[ingress]\nlisten = \"127.0.0.1:1\"\nworkers = = 2\n", "t.toml:3:", "");
    // unknown key on line 3
    expect_error("[egress]\nlisten = \"127.0.0.1:1\"\nlisten_port = 5\n",
                 "t.toml:3:", "unknown key 'listen_port'");
    // out of range on line 4
    expect_error("[egress]\nlisten = \"127.0.0.1:1\"\n\nworkers = 0\n",
                 "t.toml:4:", "out of range");
    // wrong type on line 2
    expect_error("[egress]\nworkers = \"two\"\nlisten = \"127.0.0.1:1\"\n",
                 "t.toml:2:", "must be an integer");
    // bad endpoint on line 2
    expect_error("[egress]\nlisten = \"nohostport\"\n", "t.toml:2:", "host:port");
    // bad size on line 3
    expect_error("[channel]\n\nmax_frame_bytes = \"12 parsecs\"\n[egress]\nlisten=\"a:1\"\n",
                 "t.toml:3:", "not a size");
    // route naming an unknown upstream: line of the [[route]] table (5)
    expect_error(
        "[egress]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\n[[route]]\nprefix = "
        "\"/x\"\nupstream = \"b\"\n",
        "t.toml:5:", "unknown upstream 'b'");
    // an RDMA ring that holds no frame of max_frame_bytes: the sender allocates 64-byte units
    // and at most half the ring (100000 B: 99968 usable, a 50000-B frame takes 50048)
    expect_error(
        "[channel]\ntransport = \"rdma\"\nlarge_ring_bytes = 100000\nmax_frame_bytes = "
        "50000\nslot_bytes = 4096\n[egress]\nlisten=\"a:1\"\n",
        "t.toml:1:", "half of large_ring_bytes");
    // a send pool of one chunk (or none) on line 2
    expect_error("[channel]\nrdma_pool_chunks = 1\n[egress]\nlisten=\"a:1\"\n",
                 "t.toml:2:", "out of range");
    // a poll that may take no completion on line 3
    expect_error(
        "[channel]\ntransport = \"rdma\"\nrdma_poll_budget = 0\n[egress]\nlisten=\"a:1\"\n",
        "t.toml:3:", "out of range");
    // bad transport on line 2
    expect_error("[channel]\ntransport = \"carrier-pigeon\"\n", "t.toml:2:", "transport");
    // neither role
    expect_error("log_level = \"info\"\n", "t.toml:1:", "neither");
    // ingress without egress hosts
    expect_error("[ingress]\nlisten = \"127.0.0.1:1\"\n", "t.toml:1:", "at least one");
}

void test_endpoint() {
    auto a = parse_endpoint("[::1]:80");
    CU_ASSERT_FATAL(a.ok());
    CU_ASSERT_EQUAL(a->host, std::string("::1"));
    CU_ASSERT_EQUAL(a->port, 80);
    CU_ASSERT_FALSE(parse_endpoint("host:0").ok());
    CU_ASSERT_FALSE(parse_endpoint("host:70000").ok());
    CU_ASSERT_FALSE(parse_endpoint("host:80x").ok());
    CU_ASSERT_FALSE(parse_endpoint("unix:").ok());
}

}  // namespace

int main() {
    static const CuTest tests[] = {
        {"valid file and defaults", test_good},
        {"longest-prefix routing", test_routes},
        {"errors name the line", test_errors_name_line},
        {"endpoints", test_endpoint},
    };
    return run_cunit_suite("config", tests);
}
