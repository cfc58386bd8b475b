// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// stats.hpp - the statistics of sverbs-flowgen, kept free of verbs so the unit
// tests can reach them: a log-linear latency histogram and its percentiles,
// Jain's fairness index, and the least-squares fits of the BMR cost model.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace flowgen {

// Values (nanoseconds) below 2^kExactBits are counted exactly; above, every
// power-of-two range [2^k, 2^(k+1)) is cut into 2^kSubBits equal buckets, so
// a percentile is at most 1/2^kSubBits (6.25%) above the true value.
class Histogram {
  public:
    static constexpr unsigned kSubBits = 4;
    static constexpr unsigned kExactBits = kSubBits + 1;
    static constexpr unsigned kSub = 1u << kSubBits;
    static constexpr unsigned kExact = 1u << kExactBits;
    static constexpr size_t kBuckets = kExact + (64 - kExactBits) * kSub;

    static size_t bucket_of(uint64_t v);
    // The largest value that falls into bucket b.
    static uint64_t upper_of(size_t b);

    void add(uint64_t v, uint32_t n = 1);
    void merge(const Histogram& o);
    uint64_t count() const { return count_; }
    uint64_t max() const { return max_; }
    uint64_t min() const { return count_ ? min_ : 0; }
    double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
    // Nearest rank: the upper edge of the bucket that holds the
    // ceil(q * count)-th smallest value (q in [0, 1]); 0 when empty.  Never
    // above max().
    uint64_t percentile(double q) const;
    // The non-empty buckets, lowest first: (upper edge, capped at max(); count).
    std::vector<std::pair<uint64_t, uint64_t>> buckets() const;

  private:
    std::vector<uint32_t> b_ = std::vector<uint32_t>(kBuckets);
    uint64_t count_ = 0, sum_ = 0, max_ = 0, min_ = UINT64_MAX;
};

// (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one takes all.  An
// empty set or all zeros gives 0 (nobody got anything: not "fair").
double jain_index(const std::vector<double>& x);

// y = intercept + slope * x by ordinary least squares, with r^2.
struct LineFit {
    double slope = 0, intercept = 0, r2 = 0;
    size_t n = 0;
};
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y);
// y = slope * x (through the origin).
LineFit fit_through_origin(const std::vector<double>& x, const std::vector<double>& y);

// The BMR cost model T(N) = N(N+1) Ts + (1 + log2 N) (M^2/N) Tc + 2 (M^3/N) Tf.
struct BmrPoint {
    double n = 0, m = 0, t = 0;  // processes, matrix order, measured seconds
};
double bmr_model(double n, double m, double t_sched, double t_comm, double t_flops);
// T_sched by least squares over the points, with T_comm and T_flops given.
double fit_t_sched(const std::vector<BmrPoint>& pts, double t_comm, double t_flops);
// The x of the overhead plot, N(1 + log2 N) / (4M), and the overhead itself:
// (N T(N) - T(1)) / T(1) with T(1) = 2 M^3 Tf (docs/flowgen.md derives it).
double bmr_x(double n, double m);
double bmr_overhead(double n, double t_n, double t_serial);
// The x under which the model's communication term is slope * x with slope
// T_comm / T_flops: (1 + log2 N) / (2M) (docs/flowgen.md).
double bmr_x_model(double n, double m);

double median(std::vector<double> v);

// The model check over a set of BMR runs (sverbs-bmr's JSON):
//   T_flops = median over the N = 1 runs of T(1) / (2 M^3) (the same dgemm),
//   T_comm  = median of the runs' per-element WRITE time (N > 1),
//   per (N > 1, M): T = the median of its runs, overhead (N T - T(1)) / T(1)
//   with T(1) the median N = 1 time at that M,
//   T_sched by least squares (fit_t_sched) over those points,
//   paper: overhead against N (1 + log2 N) / (4M), a line with intercept,
//   model: overhead minus the fitted T_sched term against (1 + log2 N) / (2M),
//   through the origin.  The errors are |slope - T_comm/T_flops| / (T_comm/T_flops).
struct BmrRun {
    double n = 0, m = 0, seconds = 0, t_comm = 0;
};
struct ModelRow {
    double n = 0, m = 0, t = 0, t_min = 0, t_max = 0, t1 = 0, overhead = 0, x_paper = 0,
           x_model = 0, y_model = 0;
    size_t runs = 0;
};
struct ModelFit {
    double t_comm = 0, t_flops = 0, t_sched = 0, ratio = 0;
    LineFit paper, model;
    double paper_err = 0, model_err = 0;
    std::vector<ModelRow> rows;
};
ModelFit fit_bmr(const std::vector<BmrRun>& runs);

}  // namespace flowgen
