// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// CUnit tests of sverbs-flowgen's config, statistics and model fit.  Every
// expected value is worked out by hand in the comment next to it.
#include <CUnit/Basic.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "../src/bmr_math.hpp"
#include "../src/config.hpp"
#include "../src/pacer.hpp"
#include "../src/sport.hpp"
#include "../src/stats.hpp"

using namespace flowgen;

namespace {

bool near(double a, double b, double rel = 1e-9) {
    return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)) + 1e-300;
}

// The message of the ConfigError f throws, or "" if none.
template <class F>
std::string config_error(F f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

bool has(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

Config cli(std::vector<std::string> args) {
    args.insert(args.begin(), "sverbs-flowgen");
    return parse_cli(args);
}

void test_hist_buckets() {
    // below 32: exact
    for (uint64_t v = 0; v < 32; v++) {
        CU_ASSERT_EQUAL(Histogram::bucket_of(v), v);
        CU_ASSERT_EQUAL(Histogram::upper_of(v), v);
    }
    // 50 = 0b110010: k = 5, sub = (50 >> 1) & 15 = 9 -> bucket 32 + 0 * 16 + 9 = 41, [50, 51]
    CU_ASSERT_EQUAL(Histogram::bucket_of(50), 41u);
    CU_ASSERT_EQUAL(Histogram::upper_of(41), 51u);
    CU_ASSERT_EQUAL(Histogram::bucket_of(51), 41u);
    // 1000: k = 9, sub = (1000 >> 5) & 15 = 31 & 15 = 15 -> 32 + 4 * 16 + 15 = 111,
    // [31 << 5 = 992, 1023]
    CU_ASSERT_EQUAL(Histogram::bucket_of(1000), 111u);
    CU_ASSERT_EQUAL(Histogram::upper_of(111), 1023u);
    // every bucket's upper edge falls into it, and the next value does not
    for (size_t b = 0; b + 1 < Histogram::kBuckets; b++) {
        CU_ASSERT_EQUAL(Histogram::bucket_of(Histogram::upper_of(b)), b);
        CU_ASSERT_EQUAL(Histogram::bucket_of(Histogram::upper_of(b) + 1), b + 1);
    }
    CU_ASSERT_EQUAL(Histogram::bucket_of(UINT64_MAX), Histogram::kBuckets - 1);
}

void test_hist_percentiles() {
    Histogram h;
    CU_ASSERT_EQUAL(h.percentile(0.5), 0u);  // empty
    for (uint64_t v = 1; v <= 100; v++) h.add(v);
    CU_ASSERT_EQUAL(h.count(), 100u);
    // p50: rank 50 -> value 50, bucket [50, 51] -> 51
    CU_ASSERT_EQUAL(h.percentile(0.50), 51u);
    // p99: rank 99 -> 99: k = 6, sub = (99 >> 2) & 15 = 8, [96, 99] -> 99
    CU_ASSERT_EQUAL(h.percentile(0.99), 99u);
    // p99.9: rank ceil(99.9) = 100 -> 100 in [100, 103], capped at max 100
    CU_ASSERT_EQUAL(h.percentile(0.999), 100u);
    // p1: rank 1 -> 1 (exact)
    CU_ASSERT_EQUAL(h.percentile(0.01), 1u);
    CU_ASSERT_EQUAL(h.percentile(0.0), 1u);
    CU_ASSERT(near(h.mean(), 50.5));
    CU_ASSERT_EQUAL(h.min(), 1u);
    CU_ASSERT_EQUAL(h.max(), 100u);

    Histogram a, b;
    a.add(4, 3);  // 4, 4, 4
    b.add(10);
    b.add(20);
    a.merge(b);  // 4 4 4 10 20
    CU_ASSERT_EQUAL(a.count(), 5u);
    CU_ASSERT_EQUAL(a.percentile(0.6), 4u);    // rank 3
    CU_ASSERT_EQUAL(a.percentile(0.61), 10u);  // rank ceil(3.05) = 4
    CU_ASSERT_EQUAL(a.percentile(1.0), 20u);
    CU_ASSERT(near(a.mean(), 42.0 / 5));
    // all below 32, so exact: 4 three times, 10, 20
    auto bk = a.buckets();
    CU_ASSERT(bk == (std::vector<std::pair<uint64_t, uint64_t>>{{4, 3}, {10, 1}, {20, 1}}));
    CU_ASSERT(Histogram().buckets().empty());
    // one slow value among many: p99 stays low, p99.9 sees it
    Histogram c;
    c.add(1000, 999);  // bucket [992, 1023]
    c.add(1000000);
    CU_ASSERT_EQUAL(c.percentile(0.99), 1023u);    // rank 990: the bucket [992, 1023]
    CU_ASSERT_EQUAL(c.percentile(1.0), 1000000u);  // rank 1000
}

void test_jain() {
    CU_ASSERT(near(jain_index({1, 1, 1, 1}), 1.0));
    CU_ASSERT(near(jain_index({1, 0, 0, 0}), 0.25));              // 1 / n
    CU_ASSERT(near(jain_index({1, 2, 3}), 36.0 / 42.0));          // 6^2 / (3 * 14)
    CU_ASSERT(near(jain_index({5, 5, 10, 10}), 900.0 / 1000.0));  // 30^2 / (4 * 250)
    CU_ASSERT_EQUAL(jain_index({}), 0.0);
    CU_ASSERT_EQUAL(jain_index({0, 0}), 0.0);
}

void test_fits() {
    auto f = fit_line({1, 2, 3, 4}, {3, 5, 7, 9});  // y = 1 + 2x
    CU_ASSERT(near(f.slope, 2.0));
    CU_ASSERT(near(f.intercept, 1.0));
    CU_ASSERT(near(f.r2, 1.0));
    // x 0 1 2, y 1 2 2: mx 1, my 5/3, Sxx 2, Sxy 1 -> slope 1/2, b = 5/3 - 1/2
    // Syy = 4/9 + 1/9 + 1/9 = 2/3, r2 = 1 / (2 * 2/3) = 3/4
    f = fit_line({0, 1, 2}, {1, 2, 2});
    CU_ASSERT(near(f.slope, 0.5));
    CU_ASSERT(near(f.intercept, 5.0 / 3 - 0.5));
    CU_ASSERT(near(f.r2, 0.75));
    // through the origin: Sxy / Sxx = (2 + 10) / (1 + 4) = 2.4
    f = fit_through_origin({1, 2}, {2, 5});
    CU_ASSERT(near(f.slope, 2.4));
    CU_ASSERT_EQUAL(fit_line({1}, {1}).n, 1u);
    CU_ASSERT_EQUAL(fit_line({1}, {1}).slope, 0.0);
}

void test_model() {
    // N 4, M 100, Ts 1e-6, Tc 1e-8, Tf 1e-9:
    // 4 * 5 * 1e-6 = 20e-6; (1 + 2) * (1e4 / 4) * 1e-8 = 75e-6; 2 * (1e6 / 4) * 1e-9 = 500e-6
    CU_ASSERT(near(bmr_model(4, 100, 1e-6, 1e-8, 1e-9), 595e-6));
    // T_sched alone from one point: (595e-6 - 575e-6) / 20 = 1e-6
    CU_ASSERT(near(fit_t_sched({{4, 100, 595e-6}}, 1e-8, 1e-9), 1e-6));
    // two points: N 1 M 10 T = 2 Ts + 10^2 Tc + 2e3 Tf, N 4 M 100 as above, measured
    // 1 us high at N 1: a = (2, 20), rest = (2e-6 + 1e-6, 20e-6):
    // Ts = (2 * 3e-6 + 20 * 20e-6) / (4 + 400) = 406e-6 / 404
    double t1 = bmr_model(1, 10, 1e-6, 1e-8, 1e-9) + 1e-6;
    CU_ASSERT(near(fit_t_sched({{1, 10, t1}, {4, 100, 595e-6}}, 1e-8, 1e-9), 406e-6 / 404, 1e-6));
    CU_ASSERT(near(bmr_x(4, 100), 4 * 3 / 400.0));  // N (1 + log2 N) / (4M)
    CU_ASSERT(near(bmr_x(16, 1024), 16 * 5 / 4096.0));
    CU_ASSERT(near(bmr_overhead(4, 0.3, 1.0), 0.2));  // (4 * 0.3 - 1) / 1
}

void test_sizes() {
    CU_ASSERT_EQUAL(parse_bytes("4096"), 4096u);
    CU_ASSERT_EQUAL(parse_bytes("64k"), 65536u);
    CU_ASSERT_EQUAL(parse_bytes("2M"), 2u << 20);
    CU_ASSERT_EQUAL(parse_bytes("1g"), 1u << 30);
    CU_ASSERT(has(config_error([] { parse_bytes("12x"); }), "not a number"));
    auto d = SizeDist::parse("uniform:1k-4k");
    CU_ASSERT_EQUAL(d.lo, 1024u);
    CU_ASSERT_EQUAL(d.max(), 4096u);
    CU_ASSERT(near(d.mean(), 2560));
    d = SizeDist::parse("choice:64,4k,64k");
    CU_ASSERT_EQUAL(d.choices.size(), 3u);
    CU_ASSERT_EQUAL(d.max(), 65536u);
    CU_ASSERT(near(d.mean(), (64 + 4096 + 65536) / 3.0));
    CU_ASSERT_EQUAL(d.str(), "choice:64,4096,65536");
    std::mt19937_64 rng(1);
    for (int i = 0; i < 100; i++) {
        auto s = d.sample(rng);
        CU_ASSERT(s == 64 || s == 4096 || s == 65536);
    }
    CU_ASSERT(has(config_error([] { SizeDist::parse("0"); }), "0 bytes"));
    CU_ASSERT(has(config_error([] { SizeDist::parse("uniform:8-4"); }), "LO > HI"));
    CU_ASSERT(has(config_error([] { SizeDist::parse("zipf:4"); }), "unknown distribution"));
}

void test_cli() {
    auto c = cli({"-s", "10.77.0.2", "-u", "4", "-S", "16", "--op", "READ", "--size", "64k", "-D",
                  "8", "--prio", "3", "--user-weights", "1,2,3,4"});
    CU_ASSERT_EQUAL(c.flows(), 64u);
    CU_ASSERT_EQUAL(c.server, "10.77.0.2");
    check(c);
    auto f = flow_spec(c, 3, 15);
    CU_ASSERT(f.op == Op::Read);
    CU_ASSERT_EQUAL(f.size.max(), 65536u);
    CU_ASSERT_EQUAL(f.depth, 8u);
    CU_ASSERT_EQUAL(f.prio, 3);
    CU_ASSERT_EQUAL(c.user_weights.size(), 4u);
    CU_ASSERT(has(config_error([] {
                      check(cli({"-s", "x", "--op", "atomic"}));
                  }),
                  "unknown operation 'atomic'"));
    CU_ASSERT(has(config_error([] { cli({"--users", "many"}); }), "users"));
    CU_ASSERT(has(config_error([] { cli({"--alloc", "maybe"}); }), "alloc"));
    CU_ASSERT(has(config_error([] { check(cli({"-u", "4"})); }), "no --server"));
    CU_ASSERT(has(config_error([] { check(cli({"-s", "x", "-u", "0"})); }), "at least 1"));
    CU_ASSERT(has(config_error([] {
                      check(cli({"-s", "x", "-u", "2", "--user-weights", "1"}));
                  }),
                  "1 user weights for 2 users"));
    CU_ASSERT(has(config_error([] { check(cli({"-s", "x", "--prio", "9"})); }), "0..7"));
    CU_ASSERT(has(config_error([] { check(cli({"-s", "x", "-t", "3"})); }), "3 threads for 1"));
    CU_ASSERT(has(config_error([] { cli({"--user-weights", "1,b"}); }), "'b' is not a number"));
    try {
        cli({"--help"});
        CU_FAIL("--help did not ask to exit");
    } catch (const ExitRequest& e) {
        CU_ASSERT_EQUAL(e.code, 0);
        CU_ASSERT(has(e.text, "--services"));
        CU_ASSERT_EQUAL(e.text.rfind("sverbs-flowgen: users x services", 0), 0u);
    }
    // sverbs-bmr parses the same flags under its own name
    try {
        parse_cli({"sverbs-bmr", "--help"}, {"sverbs-bmr", "matrix multiplication"});
        CU_FAIL("--help did not ask to exit");
    } catch (const ExitRequest& e) {
        CU_ASSERT_EQUAL(e.text.rfind("sverbs-bmr: matrix multiplication", 0), 0u);
        CU_ASSERT(!has(e.text, "sverbs-flowgen"));
        CU_ASSERT(has(e.text, "Usage: sverbs-bmr"));
    }
}

void test_toml() {
    Config c;
    apply_toml(c, R"(
server = "10.77.0.2"
users = 2
services = 3
op = "send"
size = 1024
depth = 4
alloc = "on"
user_weights = [1.0, 3]
[[flows]]
users = "1"
services = "1-2"
op = "write_imm"
size = "uniform:512-2k"
prio = 0
)",
               "t.toml");
    check(c);
    CU_ASSERT_EQUAL(c.flows(), 6u);
    CU_ASSERT(flow_spec(c, 0, 2).op == Op::Send);
    CU_ASSERT_EQUAL(flow_spec(c, 0, 2).size.max(), 1024u);
    CU_ASSERT(flow_spec(c, 1, 0).op == Op::Send);
    CU_ASSERT(flow_spec(c, 1, 1).op == Op::WriteImm);
    CU_ASSERT_EQUAL(flow_spec(c, 1, 2).size.max(), 2048u);
    CU_ASSERT_EQUAL(flow_spec(c, 1, 2).prio, 0);
    CU_ASSERT_EQUAL(flow_spec(c, 1, 2).depth, 4u);
    CU_ASSERT(has(config_error([] {
                      Config x;
                      apply_toml(x, "userz = 3\n", "t.toml");
                  }),
                  "unknown key 'userz'"));
    CU_ASSERT(has(config_error([] {
                      Config x;
                      apply_toml(x, "users = \"two\"\n", "t.toml");
                  }),
                  "line 1"));
    CU_ASSERT(has(config_error([] {
                      Config x;
                      apply_toml(x, "users = [\n", "t.toml");
                  }),
                  "t.toml"));
    CU_ASSERT(has(config_error([] {
                      Config x;
                      apply_toml(x, "port = 70000\n", "t.toml");
                  }),
                  "out of range"));
    CU_ASSERT(has(config_error([] {
                      Config x;
                      apply_toml(x, "[[flows]]\nusers = \"0\"\ndeep = 3\n", "t.toml");
                  }),
                  "unknown key 'deep' in [[flows]]"));
}

void test_toml_then_flags() {
    char path[] = "/tmp/flowgen-unit-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    std::string text = "server = \"10.0.0.1\"\nusers = 8\ndepth = 2\n";
    CU_ASSERT_FATAL(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(fd);
    auto c = cli({"--config", path, "-u", "3"});  // the flag wins, the rest from the file
    CU_ASSERT_EQUAL(c.users, 3u);
    CU_ASSERT_EQUAL(c.depth, 2u);
    CU_ASSERT_EQUAL(c.server, "10.0.0.1");
    unlink(path);
    CU_ASSERT(has(config_error([] {
                      cli({"--config", "/nonexistent.toml"});
                  }),
                  "cannot read config file"));
}

void test_limits() {
    DeviceLimits lim;
    lim.name = "rxe0";
    lim.max_qp = 100;
    lim.max_mr_size = 1 << 20;
    lim.max_qp_wr = 16;
    auto c = cli({"-s", "x", "-u", "10", "-S", "10"});
    check_limits(c, lim);  // 100 flows: fits
    c.services = 11;
    CU_ASSERT(has(config_error([&] { check_limits(c, lim); }), "110 flows need 110 QPs"));
    CU_ASSERT(has(config_error([&] { check_limits(c, lim); }), "max_qp 100"));
    auto d = cli({"-s", "x", "--size", "2m"});
    CU_ASSERT(has(config_error([&] { check_limits(d, lim); }), "max_mr_size 1048576"));
    auto e = cli({"-s", "x", "-D", "32"});
    CU_ASSERT(has(config_error([&] { check_limits(e, lim); }), "max_qp_wr 16"));
    // the grid
    auto g = cli({"--mode", "bmr", "--procs", "8"});
    CU_ASSERT(has(config_error([&] { check(g); }), "8 processes do not make a square grid"));
    g.procs = 9;
    g.matrix = 100;
    CU_ASSERT(has(config_error([&] { check(g); }), "not a multiple of the grid side 3"));
    g.matrix = 99;
    check(g);
}

void test_alloc() {
    auto c = cli({"-s", "x", "-u", "2", "-S", "2", "--user-weights", "1,3", "--alloc", "on"});
    CU_ASSERT(alloc_active(c));
    auto a = allocate(c, 1000);  // total weight 1*2 + 3*2 = 8: 125 per user-0 flow, 375 user 1
    CU_ASSERT(near(a.rate_mbps[0], 125));
    CU_ASSERT(near(a.rate_mbps[1], 125));
    CU_ASSERT(near(a.rate_mbps[2], 375));
    CU_ASSERT(near(a.rate_mbps[3], 375));
    CU_ASSERT_EQUAL(a.prio[2], 0);  // the heaviest user: level 0
    CU_ASSERT_EQUAL(a.prio[0], 1);
    auto e = cli({"-s", "x", "-u", "4", "-S", "1", "--prio", "5"});
    a = allocate(e, 1000);  // equal: 250 each, the stated level kept
    for (int i = 0; i < 4; i++) {
        CU_ASSERT(near(a.rate_mbps[i], 250));
        CU_ASSERT_EQUAL(a.prio[i], 5);
    }
    auto t = cli({"-s", "x", "-u", "30", "-S", "100"});  // 3000 flows: not above 3000
    CU_ASSERT(!alloc_active(t));
    t.services = 101;  // 3030
    CU_ASSERT(alloc_active(t));
    t.alloc = "off";
    CU_ASSERT(!alloc_active(t));
}

void test_sport() {
    // 0x12345: low 14 bits 0x2345, high bits 0x10000 >> 14 = 4: 0x2345 ^ 4 = 0x2341 | 0xC000
    CU_ASSERT_EQUAL(flow_label_to_udp_sport(0x12345), 0xe341);
    CU_ASSERT_EQUAL(flow_label_to_udp_sport(0), 0xc000);
    // 50000 * 31 + 7471 = 1557471; & 0xFFFFF = 1557471 - 1048576 = 508895
    CU_ASSERT_EQUAL(cm_flow_label(50000, 7471), 508895u);
    // 17 * 18 = 306, no high bits to fold
    CU_ASSERT_EQUAL(calc_flow_label(17, 18), 306u);
    // 0x1000 * 0x1000 = 0x1000000: ^ (>> 20) = 0x1000000 ^ 0x10 -> & 0xFFFFF = 0x10
    CU_ASSERT_EQUAL(calc_flow_label(0x1000, 0x1000), 0x10u);
    // symmetric in the QPNs
    CU_ASSERT_EQUAL(calc_flow_label(0x11, 0x2345), calc_flow_label(0x2345, 0x11));
    // 508895 = 0x7C3DF: low 0x03DF, high 0x7C000 >> 14 = 0x1F: 0x3DF ^ 0x1F = 0x3C0 | 0xC000
    CU_ASSERT_EQUAL(rxe_cm_udp_sport(50000, 7471, 17, 18), 0xc3c0);
    // mlx5: 0xC000 | ((i * 0x2F1B + salt) & 0x3FFF): flow 1, salt 5 -> 0x2F20 | 0xC000 = 0xEF20;
    // flow 0x1000 salt 0 -> 0x2F1B000 & 0x3FFF = 0x3000 -> 0xF000; distinct for 16,384 flows
    CU_ASSERT_EQUAL(mlx5_flow_udp_sport(1, 5), 0xef20);
    CU_ASSERT_EQUAL(mlx5_flow_udp_sport(0x1000, 0), 0xf000);
    std::vector<bool> seen(65536);
    unsigned distinct = 0;
    for (uint32_t i = 0; i < 16384; i++) {
        uint16_t p = mlx5_flow_udp_sport(i, 12345);
        if (p >= 0xc000 && !seen[p]) distinct++;
        seen[p] = true;
    }
    CU_ASSERT_EQUAL(distinct, 16384u);
}

void test_model_check() {
    // runs made from the model with Ts 1e-6, Tc 1e-8, Tf 1e-9 (T(1) = 2 M^3 Tf,
    // no communication); N 4 M 100 three times with one outlier (median 595e-6)
    std::vector<BmrRun> runs = {{1, 100, 2e-3, 0},
                                {1, 100, 2e-3, 0},
                                {1, 90, 1.458e-3, 0},
                                {4, 100, 595e-6, 1e-8},
                                {4, 100, 595e-6, 1e-8},
                                {4, 100, 1.0, 3e-8},
                                {9, 90, bmr_model(9, 90, 1e-6, 1e-8, 1e-9), 1e-8},
                                {16, 50, 1.0, 1e-8}};  // no N = 1 run at M 50: left out
    auto f = fit_bmr(runs);
    CU_ASSERT(near(f.t_flops, 1e-9));  // 2e-3 / 2e6, 1.458e-3 / (2 * 729e3)
    CU_ASSERT(near(f.t_comm, 1e-8));   // median of 1e-8, 1e-8, 3e-8, 1e-8, 1e-8
    CU_ASSERT(near(f.ratio, 10));
    CU_ASSERT_EQUAL(f.rows.size(), 2u);
    if (f.rows.size() != 2) return;
    const auto& r = f.rows[0];  // (4, 100): sorted by (N, M)
    CU_ASSERT(near(r.t, 595e-6));
    CU_ASSERT(near(r.t_max, 1.0));
    CU_ASSERT_EQUAL(r.runs, 3u);
    // (4 * 595e-6 - 2e-3) / 2e-3 = 0.19; x = 4 * 3 / 400 = 0.03; (1 + 2) / 200 = 0.015
    CU_ASSERT(near(r.overhead, 0.19));
    CU_ASSERT(near(r.x_paper, 0.03));
    CU_ASSERT(near(r.x_model, 0.015));
    // the sched term 16 * 5 * 1e-6 / (2e6 * 1e-9) = 0.04 off: 0.15 = 0.015 * Tc/Tf
    CU_ASSERT(near(f.t_sched, 1e-6, 1e-6));
    CU_ASSERT(near(r.y_model, 0.15, 1e-6));
    CU_ASSERT(near(f.model.slope, 10, 1e-6));
    CU_ASSERT(f.model_err < 1e-6);
    // the paper's x: through (0.03, 0.19) and (9 log2(18) / 360, (9 T(9) - 1.458e-3) / 1.458e-3)
    // = (0.104248, 0.787218): slope 8.04354, 19.6% below Tc/Tf
    CU_ASSERT(near(f.rows[1].overhead, 0.7872180556, 1e-8));
    CU_ASSERT(near(f.paper.slope, 8.04354393, 1e-7));
    CU_ASSERT(near(f.paper_err, 0.195645607, 1e-6));
    CU_ASSERT(near(median({3, 1, 2}), 2));
    CU_ASSERT(near(median({4, 1, 2, 3}), 2.5));
}

// The naive triple loop, C = A B (m x m, row-major).
std::vector<double> naive_mul(const std::vector<double>& a, const std::vector<double>& b,
                              uint32_t m) {
    std::vector<double> c(size_t{m} * m, 0.0);
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t k = 0; k < m; k++)
            for (uint32_t j = 0; j < m; j++) c[i * m + j] += a[i * m + k] * b[k * m + j];
    return c;
}

void test_bmr_grid() {
    // 3 x 3: rank 5 is row 1, column 2; up is (0, 2) = 2, down (2, 2) = 8;
    // at step 0 row 1 takes A from column 1, step 1 column 2 (rank 5's own), step 2 column 0
    bmr::Grid g(3, 5);
    CU_ASSERT_EQUAL(g.row, 1u);
    CU_ASSERT_EQUAL(g.col, 2u);
    CU_ASSERT_EQUAL(g.up(), 2u);
    CU_ASSERT_EQUAL(g.down(), 8u);
    CU_ASSERT_EQUAL(g.a_col(0), 1u);
    CU_ASSERT(g.owns_a(1));
    CU_ASSERT_EQUAL(g.a_col(2), 0u);
    CU_ASSERT_EQUAL(bmr::Grid(3, 0).up(), 6u);  // row 0 rolls to row 2
    // tolerance: 2 gamma_m m, gamma_m = m u / (1 - m u); m = 1024: 2 * 1024^2 u / (1 - 1024 u)
    const double u = 0x1p-53;
    CU_ASSERT(near(bmr::tolerance(1024, 1, 1), 2.0 * 1024 * 1024 * u / (1 - 1024 * u)));
    CU_ASSERT(near(bmr::tolerance(10, 2, 0.5), 2.0 * 10 * 10 * u / (1 - 10 * u)));
    // the elements are in [-1, 1) and the same for the block and the whole matrix
    auto whole = bmr::make_matrix(3, 0, 12);
    auto blk = bmr::make_block(3, 0, 12, 4, 2, 1);
    CU_ASSERT(bmr::max_abs(whole) < 1.0);
    CU_ASSERT_EQUAL(bmr::max_abs_diff(blk, bmr::get_block(whole, 12, 4, 2, 1)), 0.0);
    CU_ASSERT(bmr::make_matrix(3, 1, 12) != whole);  // B is not A
}

void test_bmr_fox() {
    // [[1 2] [3 4]] [[5 6] [7 8]] = [[19 22] [43 50]]; tile 1 cuts it into 1 x 1 blocks
    std::vector<double> c(4, 0.0), a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
    bmr::gemm_acc(a.data(), b.data(), c.data(), 2, 1);
    CU_ASSERT(c == (std::vector<double>{19, 22, 43, 50}));
    bmr::gemm_acc(a.data(), b.data(), c.data(), 2, 1024);  // accumulates: C += A B
    CU_ASSERT(c == (std::vector<double>{38, 44, 86, 100}));
    // Fox on a 3 x 3 grid (and 2 x 2, and 1 x 1) of 12 x 12 random matrices,
    // with tiles of 3 and 5 (the last tile smaller), against the triple loop
    const uint32_t m = 12;
    auto A = bmr::make_matrix(9, 0, m), B = bmr::make_matrix(9, 1, m);
    auto ref = naive_mul(A, B, m);
    const double tol = bmr::tolerance(m, 1, 1);
    for (uint32_t q : {1u, 2u, 3u})
        for (uint32_t tile : {3u, 5u, 1024u}) {
            double e = bmr::max_abs_diff(bmr::fox_in_memory(A, B, m, q, tile), ref);
            CU_ASSERT(e <= tol);
        }
    // the check can fail: one element off by 1e-12 (tol = 2 * 144 u / (1 - 12 u) ~ 3.2e-14)
    auto off = bmr::fox_in_memory(A, B, m, 3, 5);
    off[77] += 1e-12;
    CU_ASSERT(bmr::max_abs_diff(off, ref) > tol);
}

// ---- the pacer under a simulated clock (ns).  A flow at 0.2 Mbit/s with
// 16 KiB messages: one message per 16384 * 8e3 / 0.2 = 655,360,000 ns.
constexpr uint64_t kSize = 16384;
constexpr double kRate = 0.2;
constexpr uint64_t kInterval = 655'360'000;
constexpr uint64_t kSec = 1'000'000'000;

struct SimFlow {
    Pacer pacer{kRate};
    uint32_t depth = 4;
    std::deque<uint64_t> done_at;  // completion times of the outstanding messages
    std::vector<uint64_t> posts;   // post times
};

// The worker loop of rdma.cpp on a simulated clock: it sweeps at the times
// next_sweep() gives; each sweep reaps the completions due, then every flow
// posts while it has fewer than depth outstanding and its pacer says due.
// latency(t) is the post-to-completion time of a message posted at t.
// Returns the time of the last sweep.
uint64_t simulate(std::vector<SimFlow>& flows, uint64_t t0, uint64_t dur_ns,
                  const std::function<uint64_t(uint64_t)>& latency,
                  const std::function<uint64_t(uint64_t)>& next_sweep) {
    const uint64_t end = t0 + dur_ns;
    uint64_t last = t0;
    for (uint64_t now = t0; now < end; now = next_sweep(now)) {
        last = now;
        for (auto& f : flows) {
            while (!f.done_at.empty() && f.done_at.front() <= now) f.done_at.pop_front();
            while (f.done_at.size() < f.depth && f.pacer.due(now, kSize)) {
                f.pacer.sent(kSize);
                f.posts.push_back(now);
                f.done_at.push_back(
                    std::max(now + latency(now), f.done_at.empty() ? 0 : f.done_at.back()));
            }
        }
    }
    return last;
}

std::vector<SimFlow> started(size_t n, uint64_t t0) {
    std::vector<SimFlow> flows(n);
    for (size_t i = 0; i < n; i++) flows[i].pacer.start(t0, static_cast<double>(i) / n, kSize);
    return flows;
}

// A flow sends R * T +- 1 messages up to the last sweep (T = last - t0; a
// phase p delays the first by p intervals: floor(T / I - p) + 1 of them).
// 60 s: R * T = 60 s / 0.65536 s = 91.55
bool on_rate(const SimFlow& f, uint64_t t0, uint64_t last) {
    double want = static_cast<double>(last - t0) / kInterval;
    bool ok = std::fabs(static_cast<double>(f.posts.size()) - want) <= 1.0;
    if (!ok) std::fprintf(stderr, "    sent %zu messages, R*T = %.2f\n", f.posts.size(), want);
    return ok;
}

void test_pacer_rate() {
    const uint64_t t0 = 1000 * kSec, T = 60 * kSec;
    auto every = [](uint64_t step) { return [step](uint64_t t) { return t + step; }; };
    auto fixed = [](uint64_t lat) { return [lat](uint64_t) { return lat; }; };
    // the plain case: sweeps every ms, completions after 1 ms
    auto a = started(4, t0);
    uint64_t last = simulate(a, t0, T, fixed(1'000'000), every(1'000'000));
    for (auto& f : a) CU_ASSERT(on_rate(f, t0, last));
    for (auto& f : a) CU_ASSERT_EQUAL(f.pacer.resets(), 0u);
    // completions late: for the first 20 s a message takes 5 intervals (3.3 s),
    // so depth 4 binds and the flow falls ~6 messages behind; then 1 ms: it
    // catches up
    auto b = started(4, t0);
    last = simulate(
        b, t0, T, [&](uint64_t t) { return t < t0 + 20 * kSec ? 5 * kInterval : 1'000'000; },
        every(1'000'000));
    for (auto& f : b) CU_ASSERT(on_rate(f, t0, last));
    // completions seen in bursts: the worker runs only every 2 s (its thread
    // descheduled, or the CQ polled late); depth 4 holds 2 s of messages
    auto c = started(4, t0);
    last = simulate(c, t0, T, fixed(1'000'000), every(2 * kSec));
    for (auto& f : c) CU_ASSERT(on_rate(f, t0, last));
    // a late thread: sweeps 0-600 ms apart (a fixed pseudo-random sequence)
    auto d = started(4, t0);
    uint64_t x = 12345;
    last = simulate(d, t0, T, fixed(1'000'000), [&](uint64_t t) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return t + 1 + (x >> 33) % 600'000'000;
    });
    for (auto& f : d) CU_ASSERT(on_rate(f, t0, last));
}

void test_pacer_lockstep() {
    const uint64_t t0 = 1000 * kSec;
    auto ms = [](uint64_t) { return 1'000'000; };
    // 32 flows of one rate started in one sweep, phases i/32: in the first
    // interval, 32 distinct post times i/32 of an interval apart (20.48 ms)
    auto f = started(32, t0);
    simulate(f, t0, kInterval, ms, [](uint64_t t) { return t + 1'000'000; });
    std::set<uint64_t> first;
    for (auto& x : f) {
        CU_ASSERT_EQUAL_FATAL(x.posts.size(), 1u);
        first.insert(x.posts[0]);
    }
    CU_ASSERT_EQUAL(first.size(), 32u);
    // a stall: the worker does not run from 10 s to 40 s, far beyond what a
    // flow may catch up (max(1 s, 16 intervals) = 10.5 s); it drops the rest
    // of its debt (a reset) but keeps its phase, so the flows do not post in
    // lockstep afterwards
    auto g = started(32, t0);
    uint64_t last = simulate(g, t0, 60 * kSec, ms, [&](uint64_t t) {
        return t >= t0 + 10 * kSec && t < t0 + 40 * kSec ? t0 + 40 * kSec : t + 1'000'000;
    });
    std::set<uint64_t> after;
    size_t n_after = 0;
    for (auto& x : g) {
        CU_ASSERT(x.pacer.resets() >= 1);
        for (uint64_t t : x.posts)
            if (t > t0 + 50 * kSec) {
                after.insert(t);
                n_after++;
            }
        // it lost the debt beyond the catch-up: fewer than R * T - 1 messages
        CU_ASSERT(static_cast<double>(x.posts.size()) <
                  static_cast<double>(last - t0) / kInterval - 1);
    }
    CU_ASSERT(n_after > 32u * 10);
    CU_ASSERT_EQUAL(after.size(), n_after);  // no two flows post at the same time
    // not paced: always due
    Pacer open;
    CU_ASSERT(!open.paced());
    CU_ASSERT(open.due(0, kSize));
}

}  // namespace

int main() {
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("flowgen", nullptr, nullptr);
    CU_add_test(s, "histogram buckets", test_hist_buckets);
    CU_add_test(s, "histogram percentiles", test_hist_percentiles);
    CU_add_test(s, "jain index", test_jain);
    CU_add_test(s, "line fits", test_fits);
    CU_add_test(s, "bmr model and T_sched fit", test_model);
    CU_add_test(s, "bmr model check over runs", test_model_check);
    CU_add_test(s, "bmr grid, elements, tolerance", test_bmr_grid);
    CU_add_test(s, "bmr fox schedule and blocked dgemm", test_bmr_fox);
    CU_add_test(s, "size distributions", test_sizes);
    CU_add_test(s, "flags", test_cli);
    CU_add_test(s, "toml", test_toml);
    CU_add_test(s, "toml then flags", test_toml_then_flags);
    CU_add_test(s, "device limits and grid", test_limits);
    CU_add_test(s, "bandwidth allocation", test_alloc);
    CU_add_test(s, "udp source port", test_sport);
    CU_add_test(s, "pacer: rate R for T seconds sends R*T +- 1", test_pacer_rate);
    CU_add_test(s, "pacer: no lockstep", test_pacer_lockstep);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return failed || ran == 0 ? 1 : 0;
}
