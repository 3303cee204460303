// Internal: the per-unit arithmetic of the channel ops, in double. Merging partial moments
// (Chan's formula, the one copy every merging phase uses), a unit's statistics, folding them
// with gamma and beta into the (center, scale, shift) of the normalize pass, BatchNorm's
// running-statistics update and its inference fold. Kept apart from the executors so that the
// numerics that decide the bits of the results sit in one place.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../isa_table.hpp"
#include "simdnorm/plan.hpp"

namespace simdnorm::detail::channel {

/// A unit's statistics: mean and 1 / standard deviation (eps included), and M2, whose square
/// root bounds |x - mean| for every x of the unit.
struct unit_stats {
  double mean = 0, rstd = 0, m2 = 0;
};

/// Chan's weights of merging nb values into na values: w1 = nb / n and w2 = na nb / n, with
/// n = na + nb.
struct chan_weights {
  double w1 = 0, w2 = 0;
};

inline chan_weights chan_weights_of(double na, double nb) {
  const double nt = na + nb;
  return {nb / nt, na * nb / nt};
}

/// One step of Chan's merge: (mean, m2) of na values takes in the moments b of nb values, with
/// w = chan_weights_of(na, nb) (na > 0).
inline void chan_merge(double& mean, double& m2, const moments_f64& b, const chan_weights& w) {
  const double delta = b.mean - mean;
  mean += delta * w.w1;
  m2 += b.m2 + delta * delta * w.w2;
}

/// acc (the moments of na values) takes in b (nb values); with na = 0 it becomes b.
inline void merge_moments(double na, moments_f64& acc, double nb, const moments_f64& b) {
  if (na == 0.0) {
    acc = b;
    return;
  }
  chan_merge(acc.mean, acc.m2, b, chan_weights_of(na, nb));
}

/// Statistics of a unit of n values with moments m: rstd = 1 / sqrt(var + eps), or, with
/// `eps_outside_sqrt` (MeanVarianceNormalization), 1 / (sqrt(var) + eps); var is biased.
inline unit_stats unit_stats_of(const moments_f64& m, std::size_t n, float eps,
                                bool eps_outside_sqrt) {
  const double var = m.m2 / double(n);
  unit_stats s;
  s.mean = m.mean;
  s.m2 = m.m2;
  s.rstd =
      eps_outside_sqrt ? 1.0 / (std::sqrt(var) + double(eps)) : 1.0 / std::sqrt(var + double(eps));
  return s;
}

/// The static quantization of an 8-bit y's channel, folded into its scale and shift: the
/// kernel's value is y * inv + zero_point, which the 8-bit store rounds and saturates.
struct output_quant {
  double inv = 1.0;  ///< 1 / scale rounded once in f32 (the row ops' and PyTorch's inverse)
  double zero_point = 0.0;
};

/// center, scale, shift of one plane or channel, with gamma[i] and beta[i] (either may be
/// null): y = (x - center) * scale + shift. The shift absorbs the rounding of the center. In a
/// unit whose deviations may exceed FLT_MAX / 2 (values of both signs near FLT_MAX), x - center
/// could overflow, so the center is 0 and the shift takes the whole mean: y = x * scale +
/// shift, whose rounding costs about 2 u |mean| / std there. With q (an 8-bit y), scale and shift
/// are those of y * q.inv + q.zero_point, rounded once.
inline void fold_unit(const unit_stats& s, const float* gamma, const float* beta, std::int64_t i,
                      const output_quant* q, float* c, float* sc, float* sh) {
  double scale = s.rstd * (gamma ? double(gamma[i]) : 1.0);
  const float center = s.m2 > kHugeM2 ? 0.f : float(s.mean);
  double shift = (beta ? double(beta[i]) : 0.0) - (s.mean - double(center)) * scale;
  if (q) {
    scale *= q->inv;
    shift = shift * q->inv + q->zero_point;
  }
  *c = center;
  *sc = float(scale);
  *sh = float(shift);
}

/// BatchNorm's rule for the running statistics (batch_norm_params).
struct running_rule {
  momentum_convention convention = momentum_convention::pytorch;
  double momentum = 0.1;
  bool cumulative = false;
};

/// The weights of a running-statistics update, running = w_old * running + w_new * batch
/// statistic, and whether the variance is unbiased; `num_batches_tracked` is read with the
/// cumulative rule only.
struct running_weights {
  double w_old = 0.0, w_new = 0.0;
  bool unbiased = false;
};

inline running_weights running_weights_of(const running_rule& r,
                                          const std::int64_t* num_batches_tracked) {
  const bool pytorch = r.convention == momentum_convention::pytorch;
  running_weights w;
  if (r.cumulative)
    w.w_new = 1.0 / (double(*num_batches_tracked) + 1.0);
  else
    w.w_new = pytorch ? r.momentum : 1.0 - r.momentum;
  w.w_old = r.cumulative ? 1.0 - w.w_new : pytorch ? 1.0 - r.momentum : r.momentum;
  w.unbiased = pytorch;
  return w;
}

/// Updates one channel's running statistics with its batch moments m over n values.
inline void update_running(const running_weights& w, std::size_t n_values, const moments_f64& m,
                           double mean, float* running_mean, float* running_var) {
  const double n = double(n_values);
  const double var = w.unbiased ? m.m2 / (n - 1.0) : m.m2 / n;
  *running_mean = float(w.w_old * double(*running_mean) + w.w_new * mean);
  *running_var = float(w.w_old * double(*running_var) + w.w_new * var);
}

/// BatchNorm inference of channel c folded in double from bp's gamma, beta (either may be
/// null) and running statistics: y = x * scale + shift (with q, as fold_unit).
inline void fold_inference(const batch_norm_params& bp, std::int64_t c, const output_quant* q,
                           float* scale, float* shift) {
  double s = (bp.gamma ? double(bp.gamma[c]) : 1.0) /
             std::sqrt(double(bp.running_var[c]) + double(bp.eps));
  double t = (bp.beta ? double(bp.beta[c]) : 0.0) - double(bp.running_mean[c]) * s;
  if (q) {
    s *= q->inv;
    t = t * q->inv + q->zero_point;
  }
  *scale = float(s);
  *shift = float(t);
}

}  // namespace simdnorm::detail::channel
