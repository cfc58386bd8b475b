// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "bmr_math.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace flowgen::bmr {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

double element(uint64_t seed, uint32_t which, uint64_t r, uint64_t c, uint32_t m) {
    uint64_t h = splitmix64(seed * 2 + which) ^ (r * m + c);
    h = splitmix64(h);
    return static_cast<double>(h >> 11) * 0x1p-52 - 1.0;
}

std::vector<double> make_block(uint64_t seed, uint32_t which, uint32_t m, uint32_t b, uint32_t bi,
                               uint32_t bj) {
    std::vector<double> x(static_cast<size_t>(b) * b);
    for (uint32_t r = 0; r < b; r++)
        for (uint32_t c = 0; c < b; c++)
            x[static_cast<size_t>(r) * b + c] =
                element(seed, which, static_cast<uint64_t>(bi) * b + r,
                        static_cast<uint64_t>(bj) * b + c, m);
    return x;
}

std::vector<double> make_matrix(uint64_t seed, uint32_t which, uint32_t m) {
    return make_block(seed, which, m, m, 0, 0);
}

void gemm_acc(const double* a, const double* b, double* c, uint32_t n, uint32_t tile) {
    if (n == 0) return;
    const int ld = static_cast<int>(n);
    if (tile == 0 || n <= tile) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ld, ld, ld, 1.0, a, ld, b, ld, 1.0,
                    c, ld);
        return;
    }
    for (uint32_t i = 0; i < n; i += tile) {
        int mi = static_cast<int>(std::min(tile, n - i));
        for (uint32_t j = 0; j < n; j += tile) {
            int nj = static_cast<int>(std::min(tile, n - j));
            for (uint32_t k = 0; k < n; k += tile) {
                int kk = static_cast<int>(std::min(tile, n - k));
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mi, nj, kk, 1.0,
                            a + static_cast<size_t>(i) * n + k, ld,
                            b + static_cast<size_t>(k) * n + j, ld, 1.0,
                            c + static_cast<size_t>(i) * n + j, ld);
            }
        }
    }
}

void set_blas_threads(uint32_t n) {
    openblas_set_num_threads(static_cast<int>(n));
}

double tolerance(uint32_t m, double max_a, double max_b) {
    const double u = 0x1p-53, mu = m * u;
    return 2 * (mu / (1 - mu)) * m * max_a * max_b;
}

double max_abs(const std::vector<double>& x) {
    double r = 0;
    for (double v : x) r = std::max(r, std::fabs(v));
    return r;
}

double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) return INFINITY;
    double r = 0;
    for (size_t i = 0; i < x.size(); i++) r = std::max(r, std::fabs(x[i] - y[i]));
    return r;
}

std::vector<double> get_block(const std::vector<double>& x, uint32_t m, uint32_t b, uint32_t bi,
                              uint32_t bj) {
    std::vector<double> blk(static_cast<size_t>(b) * b);
    for (uint32_t r = 0; r < b; r++)
        std::copy_n(x.begin() + (static_cast<size_t>(bi) * b + r) * m + static_cast<size_t>(bj) * b,
                    b, blk.begin() + static_cast<size_t>(r) * b);
    return blk;
}

void put_block(std::vector<double>& x, const double* blk, uint32_t m, uint32_t b, uint32_t bi,
               uint32_t bj) {
    for (uint32_t r = 0; r < b; r++)
        std::copy_n(
            blk + static_cast<size_t>(r) * b, b,
            x.begin() + (static_cast<size_t>(bi) * b + r) * m + static_cast<size_t>(bj) * b);
}

std::vector<double> fox_in_memory(const std::vector<double>& a, const std::vector<double>& b,
                                  uint32_t m, uint32_t q, uint32_t tile) {
    const uint32_t bs = m / q, p = q * q;
    std::vector<std::vector<double>> bblk(p), cblk(p, std::vector<double>(size_t{bs} * bs));
    for (uint32_t r = 0; r < p; r++) bblk[r] = get_block(b, m, bs, r / q, r % q);
    for (uint32_t k = 0; k < q; k++) {
        for (uint32_t r = 0; r < p; r++) {
            Grid g(q, r);
            auto ablk = get_block(a, m, bs, g.row, g.a_col(k));  // the row's broadcast
            gemm_acc(ablk.data(), bblk[r].data(), cblk[r].data(), bs, tile);
        }
        std::vector<std::vector<double>> rolled(p);
        for (uint32_t r = 0; r < p; r++) rolled[Grid(q, r).up()] = std::move(bblk[r]);
        bblk = std::move(rolled);
    }
    std::vector<double> c(static_cast<size_t>(m) * m);
    for (uint32_t r = 0; r < p; r++) put_block(c, cblk[r].data(), m, bs, r / q, r % q);
    return c;
}

}  // namespace flowgen::bmr
