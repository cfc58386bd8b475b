// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

namespace flowgen {

size_t Histogram::bucket_of(uint64_t v) {
    if (v < kExact) return static_cast<size_t>(v);
    unsigned k = 63 - static_cast<unsigned>(std::countl_zero(v));  // 2^k <= v
    uint64_t sub = (v >> (k - kSubBits)) & (kSub - 1);
    return kExact + (k - kExactBits) * kSub + static_cast<size_t>(sub);
}

uint64_t Histogram::upper_of(size_t b) {
    if (b < kExact) return b;
    size_t i = b - kExact;
    unsigned k = static_cast<unsigned>(i / kSub) + kExactBits;
    uint64_t sub = i % kSub;
    uint64_t lo = (kSub + sub) << (k - kSubBits);
    return lo + (uint64_t{1} << (k - kSubBits)) - 1;
}

void Histogram::add(uint64_t v, uint32_t n) {
    if (!n) return;
    b_[bucket_of(v)] += n;
    count_ += n;
    sum_ += v * n;
    max_ = std::max(max_, v);
    min_ = std::min(min_, v);
}

void Histogram::merge(const Histogram& o) {
    for (size_t i = 0; i < kBuckets; i++) b_[i] += o.b_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
}

uint64_t Histogram::percentile(double q) const {
    if (!count_) return 0;
    q = std::clamp(q, 0.0, 1.0);
    auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_) - 1e-9));
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; i++) {
        seen += b_[i];
        if (seen >= rank) return std::min(upper_of(i), max_);
    }
    return max_;
}

std::vector<std::pair<uint64_t, uint64_t>> Histogram::buckets() const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (size_t i = 0; i < kBuckets; i++)
        if (b_[i]) out.emplace_back(std::min(upper_of(i), max_), b_[i]);
    return out;
}

double jain_index(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    if (x.empty() || s2 == 0) return 0;
    return s * s / (static_cast<double>(x.size()) * s2);
}

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
    LineFit f;
    f.n = std::min(x.size(), y.size());
    if (f.n < 2) return f;
    double n = static_cast<double>(f.n), sx = 0, sy = 0;
    for (size_t i = 0; i < f.n; i++) {
        sx += x[i];
        sy += y[i];
    }
    double mx = sx / n, my = sy / n, sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < f.n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx == 0) return f;
    f.slope = sxy / sxx;
    f.intercept = my - f.slope * mx;
    f.r2 = syy == 0 ? 1.0 : (sxy * sxy) / (sxx * syy);
    return f;
}

LineFit fit_through_origin(const std::vector<double>& x, const std::vector<double>& y) {
    LineFit f;
    f.n = std::min(x.size(), y.size());
    double sxx = 0, sxy = 0, syy = 0, ss_res = 0;
    for (size_t i = 0; i < f.n; i++) {
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
        syy += y[i] * y[i];
    }
    if (sxx == 0) return f;
    f.slope = sxy / sxx;
    for (size_t i = 0; i < f.n; i++) ss_res += (y[i] - f.slope * x[i]) * (y[i] - f.slope * x[i]);
    f.r2 = syy == 0 ? 1.0 : 1.0 - ss_res / syy;  // uncentred, as usual without intercept
    return f;
}

double bmr_model(double n, double m, double t_sched, double t_comm, double t_flops) {
    return n * (n + 1) * t_sched + (1 + std::log2(n)) * (m * m / n) * t_comm +
           2 * (m * m * m / n) * t_flops;
}

double fit_t_sched(const std::vector<BmrPoint>& pts, double t_comm, double t_flops) {
    double num = 0, den = 0;
    for (const auto& p : pts) {
        double a = p.n * (p.n + 1);
        double rest = p.t - bmr_model(p.n, p.m, 0, t_comm, t_flops);
        num += a * rest;
        den += a * a;
    }
    return den == 0 ? 0 : num / den;
}

double bmr_x(double n, double m) {
    return n * (1 + std::log2(n)) / (4 * m);
}

double bmr_overhead(double n, double t_n, double t_serial) {
    return t_serial == 0 ? 0 : (n * t_n - t_serial) / t_serial;
}

double bmr_x_model(double n, double m) {
    return (1 + std::log2(n)) / (2 * m);
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

ModelFit fit_bmr(const std::vector<BmrRun>& runs) {
    ModelFit f;
    std::map<double, std::vector<double>> serial;                  // M -> T(1)s
    std::map<std::pair<double, double>, std::vector<double>> par;  // (N, M) -> T(N)s
    std::vector<double> flops, comm;
    for (const auto& r : runs) {
        if (r.n == 1) {
            serial[r.m].push_back(r.seconds);
            flops.push_back(r.seconds / (2 * r.m * r.m * r.m));
        } else {
            par[{r.n, r.m}].push_back(r.seconds);
            if (r.t_comm > 0) comm.push_back(r.t_comm);
        }
    }
    f.t_flops = median(flops);
    f.t_comm = median(comm);
    f.ratio = f.t_flops > 0 ? f.t_comm / f.t_flops : 0;
    std::vector<BmrPoint> pts;
    for (const auto& [key, ts] : par) {
        auto s = serial.find(key.second);
        if (s == serial.end()) continue;  // no T(1) at this M: no overhead
        ModelRow row;
        row.n = key.first;
        row.m = key.second;
        row.t = median(ts);
        row.t_min = *std::min_element(ts.begin(), ts.end());
        row.t_max = *std::max_element(ts.begin(), ts.end());
        row.runs = ts.size();
        row.t1 = median(s->second);
        row.overhead = bmr_overhead(row.n, row.t, row.t1);
        row.x_paper = bmr_x(row.n, row.m);
        row.x_model = bmr_x_model(row.n, row.m);
        f.rows.push_back(row);
        pts.push_back({row.n, row.m, row.t});
    }
    f.t_sched = fit_t_sched(pts, f.t_comm, f.t_flops);
    std::vector<double> xp, yp, xm, ym;
    for (auto& row : f.rows) {
        double sched = f.t_flops > 0 ? row.n * row.n * (row.n + 1) * f.t_sched /
                                           (2 * row.m * row.m * row.m * f.t_flops)
                                     : 0;
        row.y_model = row.overhead - sched;
        xp.push_back(row.x_paper);
        yp.push_back(row.overhead);
        xm.push_back(row.x_model);
        ym.push_back(row.y_model);
    }
    f.paper = fit_line(xp, yp);
    f.model = fit_through_origin(xm, ym);
    if (f.ratio > 0) {
        f.paper_err = std::fabs(f.paper.slope - f.ratio) / f.ratio;
        f.model_err = std::fabs(f.model.slope - f.ratio) / f.ratio;
    }
    return f;
}

}  // namespace flowgen
