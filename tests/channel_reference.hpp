// Float64 oracle and error bounds for the channel ops (BatchNorm, GroupNorm, InstanceNorm,
// MeanVarianceNormalization). Tensors are logical NCHW, dense, x[n][c][s] with S spatial
// elements; NHWC data is made by transposing (to_nhwc) and compared after transposing back.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "reference.hpp"

namespace chref {

/// Statistics of one unit (a BatchNorm channel, a GroupNorm (n, group)) in float64.
struct unit_ref {
  double mean = 0, var = 0;  ///< biased variance
  double range = 0;          ///< max - min, bounds |x - p| for any shift p the kernels pick
  std::size_t n = 0;
};

inline unit_ref stats(const std::vector<double>& v) {
  unit_ref r;
  r.n = v.size();
  double s = 0, lo = v[0], hi = v[0];
  for (double e : v) s += e, lo = std::min(lo, e), hi = std::max(hi, e);
  r.mean = s / double(r.n);
  double q = 0;
  for (double e : v) q += (e - r.mean) * (e - r.mean);
  r.var = q / double(r.n);
  r.range = hi - lo;
  return r;
}

/// Values of BatchNorm channel c of x[N][C][S].
inline std::vector<double> channel_values(const float* x, std::size_t N, std::size_t C,
                                          std::size_t S, std::size_t c) {
  std::vector<double> v;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t s = 0; s < S; ++s) v.push_back(x[(n * C + c) * S + s]);
  return v;
}

/// Values of GroupNorm group g of sample n (C / G channels).
inline std::vector<double> group_values(const float* x, std::size_t C, std::size_t S, std::size_t G,
                                        std::size_t n, std::size_t g) {
  std::vector<double> v;
  const std::size_t cg = C / G;
  for (std::size_t c = g * cg; c < (g + 1) * cg; ++c)
    for (std::size_t s = 0; s < S; ++s) v.push_back(x[(n * C + c) * S + s]);
  return v;
}

/// x[N][C][S] -> x[N][S][C].
inline std::vector<float> to_nhwc(const float* x, std::size_t N, std::size_t C, std::size_t S) {
  std::vector<float> out(N * C * S);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t s = 0; s < S; ++s) out[(n * S + s) * C + c] = x[(n * C + c) * S + s];
  return out;
}

/// x[N][S][C] -> x[N][C][S]: the same transpose of each batch item, with C and S swapped.
inline std::vector<float> to_nchw(const float* x, std::size_t N, std::size_t C, std::size_t S) {
  return to_nhwc(x, N, S, C);
}

/// Rounding steps of the longest float accumulation chain for a unit of n values, whose
/// segments (NCHW planes) are `segment_len` long: a lane sums at most min(n, 2048) / W terms
/// (segments of at least W elements; the row kernel: 2048 / 4W), all of a 2048-element chunk
/// (segments shorter than W are summed one by one), or 64 rows (columns: NHWC); then a
/// log2(4W)-deep tree, plus a few roundings in the normalize pass.
inline double depth(std::size_t n, std::size_t lanes, std::size_t segment_len) {
  const std::size_t m = std::min<std::size_t>(n, 2048);
  const double planes = segment_len < lanes ? double(m) : std::ceil(double(m) / double(lanes));
  const double per_lane = std::max(planes, double(std::min<std::size_t>(n, 64)));
  return per_lane + std::log2(4.0 * double(lanes)) + 8.0;
}

/// |y - y_ref| bound for the centered normalize of a unit (see reference.hpp's
/// layer_norm_bound): mean error depth*u*range, relative variance error depth*u.
inline double centered_bound(double d, const unit_ref& st, double eps, double x, double g, double b,
                             double y) {
  const double sigma = std::sqrt(st.var + eps);
  const double z = (x - st.mean) / sigma, s = st.range / sigma;
  return ref::layer_norm_bound(d, z, s, g, b, y);
}

/// |y - y_ref| bound for the folded one-FMA form y = x * a + b with a and b rounded to float
/// once from double: u (|x a| + |b| + |y|), plus u |x a| where the ISA rounds the product.
inline double folded_bound(double x, double a, double b, double y) {
  return ref::u32 * (2 * std::fabs(x * a) + std::fabs(b) + std::fabs(y)) + 1e-30;
}

/// Bounds of the saved statistics: the mean's absolute error and the relative errors of the
/// variance (a sum of positive terms) and of rstd.
inline double mean_bound(double d, const unit_ref& st) {
  return d * ref::u32 * st.range + ref::u32 * std::fabs(st.mean) + 1e-30;
}
inline double var_rel_bound(double d) { return (d + 4) * ref::u32; }
inline double rstd_bound(double d, double rstd) {
  return (0.5 * var_rel_bound(d) + ref::u32) * rstd + 1e-30;
}

}  // namespace chref
