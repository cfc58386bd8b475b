// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// sverbs-flowgen: the multi-user, multi-service RDMA concurrency test
// (docs/flowgen.md).  Exit status: 0 done, 1 bad input or setup failure
// (nothing ran), 2 the run was cut short (a peer went away, a completion
// failed, a signal): the partial results are still written.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "config.hpp"
#include "rdma.hpp"
#include "report.hpp"

namespace {

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw flowgen::SetupError(fmt::format("cannot write '{}'", path));
}

}  // namespace

int main(int argc, char** argv) {
    using namespace flowgen;
    Config cfg;
    try {
        cfg = parse_cli(std::vector<std::string>(argv, argv + argc));
        check(cfg);
    } catch (const ExitRequest& e) {
        fmt::print("{}", e.text);
        return e.code;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "sverbs-flowgen: {}\n", e.what());
        return 1;
    }
    RunResult r;
    try {
        if (cfg.mode == "server")
            r = run_server(cfg);
        else if (cfg.mode == "client")
            r = run_client(cfg);
        else if (cfg.mode == "bmr")
            throw SetupError("mode bmr: run sverbs-bmr under mpirun (docs/flowgen.md)");
        else
            throw SetupError(fmt::format("mode '{}' is not in this build", cfg.mode));
    } catch (const std::exception& e) {
        fmt::print(stderr, "sverbs-flowgen: {}\n", e.what());
        return 1;
    }
    try {
        if (!cfg.json.empty()) write_file(cfg.json, to_json(r).dump(1) + "\n");
        if (!cfg.csv.empty()) write_file(cfg.csv, to_csv(r));
    } catch (const std::exception& e) {
        fmt::print(stderr, "sverbs-flowgen: {}\n", e.what());
        return 1;
    }
    if (!cfg.quiet) fmt::print("{}", summary(r));
    std::fflush(stdout);
    if (r.aborted) {
        fmt::print(stderr, "sverbs-flowgen: run cut short: {} (partial results {}{})\n",
                   r.abort_reason, cfg.json.empty() ? "" : "in " + cfg.json,
                   cfg.csv.empty() ? "" : " " + cfg.csv);
        return 2;
    }
    return 0;
}
