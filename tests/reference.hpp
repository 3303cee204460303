// Float64 reference implementations (the oracle for every test) and error bounds.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ref {

struct row_stats {
  double mean, var;
};

inline row_stats stats(const float* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += x[i];
  const double mean = s / double(n);
  double q = 0;
  for (std::size_t i = 0; i < n; ++i) q += (x[i] - mean) * (x[i] - mean);
  return {mean, q / double(n)};  // biased, as LayerNorm
}

/// y = (x - mean) / sqrt(var + eps) * g + b for one row; g, b may be null.
inline void layer_norm_row(const float* x, std::size_t n, const float* g, const float* b,
                           double eps, double* y, row_stats* st = nullptr) {
  const row_stats s = stats(x, n);
  const double r = 1.0 / std::sqrt(s.var + eps);
  for (std::size_t i = 0; i < n; ++i)
    y[i] = (x[i] - s.mean) * r * (g ? g[i] : 1.0) + (b ? b[i] : 0.0);
  if (st) *st = s;
}

inline double rms_rstd(const float* x, std::size_t n, double eps) {
  double q = 0;
  for (std::size_t i = 0; i < n; ++i) q += double(x[i]) * x[i];
  return 1.0 / std::sqrt(q / double(n) + eps);
}

inline void rms_norm_row(const float* x, std::size_t n, const float* g, double eps, double* y) {
  const double r = rms_rstd(x, n, eps);
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * r * (g ? g[i] : 1.0);
}

/// ||x||_p of a row, p = 1 or 2.
inline double lp_norm(const float* x, std::size_t n, int p) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p == 1 ? std::fabs(double(x[i])) : double(x[i]) * x[i];
  return p == 1 ? s : std::sqrt(s);
}

/// Float unit roundoff.
inline constexpr double u32 = 0x1p-24;

/// Number of rounding steps a float accumulator chain of the kernels can take for a row of n
/// elements with W lanes: each of the 4*W accumulators sums up to min(n, 2048)/(4W) terms
/// (the statistics chunk is 2048 elements), then a log2(4W)-deep tree combines them; a few
/// more roundings come from the per-element normalize (sub, fms, fma) and the float rstd.
inline double accumulation_depth(std::size_t n, std::size_t lanes) {
  const double per_acc = std::ceil(double(std::min<std::size_t>(n, 2048)) / double(4 * lanes));
  return per_acc + std::log2(4.0 * double(lanes)) + 8.0;
}

/// Depth of the float sums of non-negative terms (RMSNorm, Lp): one accumulator lane sums at
/// most min(n, 2048) / lanes terms (short rows: one accumulator per lane; long rows: four per
/// lane over 2048-element chunks added in double), then a log2(lanes)-deep tree; the sum's
/// relative error is at most this depth times u32.
inline double sum_depth(std::size_t n, std::size_t lanes) {
  return std::ceil(double(std::min<std::size_t>(n, 2048)) / double(lanes)) +
         std::log2(double(lanes)) + 2;
}

/// Bound on |y - y_ref| for LayerNorm element i (derived in tests/README of the numerics):
/// the statistics are sums of terms of size |x - p| (p = the row's first element, the shift),
/// so their absolute error is depth * u * max|x - p|; divided by sigma this moves the
/// normalized value by depth * u * (|z| + s) with s = max|x - p| / sigma; gamma scales it and
/// the output rounding adds u * |y|.
inline double layer_norm_bound(double depth, double z, double s, double g, double b, double y) {
  return depth * u32 * (std::fabs(g) * (std::fabs(z) + s)) +
         2 * u32 * (std::fabs(y) + std::fabs(b)) + 1e-30;
}

}  // namespace ref
