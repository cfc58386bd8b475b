// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// sverbs-bmr-fit: the model check over sverbs-bmr's JSON results
// (fit_bmr() in stats.cpp, docs/flowgen.md): prints the fit as JSON on
// stdout, for flowgen/plot-model.py to table and plot.
//
//   sverbs-bmr-fit bmr-*.json > fit.json
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "stats.hpp"

int main(int argc, char** argv) {
    using namespace flowgen;
    if (argc < 2) {
        fmt::print(stderr, "usage: sverbs-bmr-fit RESULT.json...\n");
        return 1;
    }
    std::vector<BmrRun> runs;
    for (int i = 1; i < argc; i++) {
        std::ifstream in(argv[i]);
        nlohmann::json j;
        try {
            in >> j;
            runs.push_back({j.at("ranks").get<double>(), j.at("matrix").get<double>(),
                            j.at("seconds").get<double>(),
                            j.at("t_comm_per_element").get<double>()});
        } catch (const std::exception& e) {
            fmt::print(stderr, "sverbs-bmr-fit: {}: {}\n", argv[i], e.what());
            return 1;
        }
    }
    ModelFit f = fit_bmr(runs);
    if (f.rows.empty() || f.t_flops <= 0 || f.t_comm <= 0) {
        fmt::print(stderr,
                   "sverbs-bmr-fit: nothing to fit: need N = 1 runs (T_flops, T(1)) and N > 1 "
                   "runs at the same M (T_comm, overhead)\n");
        return 1;
    }
    auto line = [](const LineFit& l) {
        return nlohmann::json{
            {"slope", l.slope}, {"intercept", l.intercept}, {"r2", l.r2}, {"points", l.n}};
    };
    nlohmann::json out{{"t_comm", f.t_comm},     {"t_flops", f.t_flops},
                       {"t_sched", f.t_sched},   {"t_comm_over_t_flops", f.ratio},
                       {"paper", line(f.paper)}, {"paper_error", f.paper_err},
                       {"model", line(f.model)}, {"model_error", f.model_err},
                       {"runs", runs.size()}};
    for (const auto& r : f.rows)
        out["rows"].push_back({{"n", r.n},
                               {"m", r.m},
                               {"runs", r.runs},
                               {"seconds", r.t},
                               {"seconds_min", r.t_min},
                               {"seconds_max", r.t_max},
                               {"t1", r.t1},
                               {"overhead", r.overhead},
                               {"x_paper", r.x_paper},
                               {"x_model", r.x_model},
                               {"overhead_minus_sched", r.y_model}});
    fmt::print("{}\n", out.dump(1));
    return 0;
}
