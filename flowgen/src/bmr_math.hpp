// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// bmr_math.hpp - the arithmetic of the broadcast-multiply-roll (Fox) matrix
// multiplication, kept free of verbs and MPI so the unit tests can reach it:
// the grid and its schedule, the matrices, the blocked dgemm (OpenBLAS), the
// error tolerance, and Fox's algorithm run in one process.
#pragma once

#include <cstdint>
#include <vector>

namespace flowgen::bmr {

// Rank r of a q x q grid sits at row r / q, column r % q.  At step k
// (0 <= k < q) row i multiplies the A block of column (i + k) mod q, broadcast
// along the row by its owner, with the B block it holds; then every B block
// rolls one row up (rank (i, j) sends to ((i - 1) mod q, j)).
struct Grid {
    uint32_t q = 1, row = 0, col = 0;
    Grid(uint32_t side, uint32_t rank) : q(side), row(rank / side), col(rank % side) {}
    uint32_t rank_of(uint32_t r, uint32_t c) const { return r * q + c; }
    uint32_t a_col(uint32_t step) const { return (row + step) % q; }
    bool owns_a(uint32_t step) const { return a_col(step) == col; }
    uint32_t up() const { return rank_of((row + q - 1) % q, col); }
    uint32_t down() const { return rank_of((row + 1) % q, col); }
};

// Element (r, c) of matrix `which` (0: A, 1: B) of order m, uniform in
// [-1, 1) from the seed: every rank makes its own blocks, rank 0 the whole.
double element(uint64_t seed, uint32_t which, uint64_t r, uint64_t c, uint32_t m);
// Block (bi, bj) of order b, row-major.
std::vector<double> make_block(uint64_t seed, uint32_t which, uint32_t m, uint32_t b, uint32_t bi,
                               uint32_t bj);
std::vector<double> make_matrix(uint64_t seed, uint32_t which, uint32_t m);

// C += A B for n x n row-major matrices with leading dimension n: one
// cblas_dgemm when n <= tile, else cut into tile x tile blocks (the last ones
// smaller), one cblas_dgemm per block product.
void gemm_acc(const double* a, const double* b, double* c, uint32_t n, uint32_t tile);
// OpenBLAS's thread count (openblas_set_num_threads).
void set_blas_threads(uint32_t n);

// The largest |BMR - reference| allowed: both are sums of m products of
// elements of magnitude <= max_a * max_b in some order, each within
// gamma_m = m u / (1 - m u) of the exact product (u = 2^-53), so they differ by
// at most 2 gamma_m m max_a max_b.
double tolerance(uint32_t m, double max_a, double max_b);
double max_abs(const std::vector<double>& x);
double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y);

// Fox's algorithm on a q x q grid in one process (the blocks in memory): the
// same schedule the ranks run over verbs.  Returns C (m x m, row-major).
std::vector<double> fox_in_memory(const std::vector<double>& a, const std::vector<double>& b,
                                  uint32_t m, uint32_t q, uint32_t tile);
// Block (bi, bj) of order b out of / into an m x m row-major matrix.
std::vector<double> get_block(const std::vector<double>& x, uint32_t m, uint32_t b, uint32_t bi,
                              uint32_t bj);
void put_block(std::vector<double>& x, const double* blk, uint32_t m, uint32_t b, uint32_t bi,
               uint32_t bj);

}  // namespace flowgen::bmr
