// Float64 reference of every op of simdnorm/op_list.h for the C API fuzzer, with the error
// bound each output must meet. Written from the formulas of include/simdnorm/plan.hpp only.
//
// Every op is reduced to "units" (the values one set of statistics covers) and a per-element
// formula:
//   centered  y = (x - mean) * rstd * g + b, rstd = 1 / sqrt(var + eps), biased variance:
//             LayerNorm (unit = row), BatchNorm training (unit = channel), GroupNorm
//             (unit = (n, group)), InstanceNorm (unit = (n, c));
//   mvn       y = (x - mean) / (sqrt(var) + eps) (MeanVarianceNormalization, unit = kept index);
//   rms       y = x / sqrt(mean(x^2) + eps) * g (RMSNorm, unit = row);
//   l1, l2    y = x / max(||x||_p, eps) (Lp, unit = row);
//   folded    y = x * a[c] + s[c], a = g / sqrt(rv + eps), s = b - rm * a (BatchNorm inference).
// Statistics are computed in double, per unit, from the logical (gathered) values.
//
// Error bound. The kernels sum at most kChunk = 2048 float terms in one chain before merging
// chunks in double, and shift every term by a float p within the unit's range (or p = 0 for
// LayerNorm without compensated_mean), so with u = 2^-24 and
//   depth(n) = min(n, 2048) + 2 log2(n) + 16        (chain + reduction tree + normalize ops;
//                                                   lanes are ignored: an upper bound for all)
//   P = max |x - p| <= 2 max |x - mean| (compensated) or max(|x|, 2 max |x - mean|) (p = 0)
// the mean is off by at most depth u P, and the variance (kept >= 3/4 of the shifted sum of
// squares, or recomputed around the float mean) by a relative 2 depth u, i.e. sigma by
// depth u. The normalized value z = (x - mean) rstd then moves by depth u (P rstd + |z|);
// gamma scales that, and the final float operations add a few u (|y| + |b| + |g z|). The bound
// used is twice that, 4 depth u |g| (s + |z| (1 + s)) + 8 u (|y| + |b| + |g z|) with
// s = P rstd: the |z| s term covers units of several chunks, whose chunk means (each off by
// up to depth u P) enter the double merge of the variance through Chan's delta^2 term; plus an
// absolute 2^-120 (1 + |z| + |g|) + 2^-147 rstd |g| for the roundings of subnormal
// intermediates (x - mean can be off by a subnormal step, which rstd scales), and
// 2^-148 (|x| + |mean|) (1 + |g|) for an rstd that is itself subnormal. Float sums that
// overflow or underflow are computed again in double or scaled by the kernels
// (docs/numerics.md), only more accurately, so the bound holds for every finite unit. Where p = 0
// the float mean is only depth u max|x| close and enters the variance squared, so y and the
// saved rstd also allow a relative 4 (depth u s)^2 (which leaves such rows with a large mean
// nearly unchecked: plan.hpp documents that mode as lossy). For n = 9 and s ~ 3 the bound is
// about 1e-5 |g| (s + 4 |z|); for n >= 2048 about 5e-4 times that.
//
// Split statistics. A moments record (stats_stage::moments) holds in double what the kernels
// summed in float: the mean and M2 = sum (x - mean)^2 (centered), or sum x^2 (squares: RMSNorm,
// L2) or sum |x| (magnitudes: L1) in m2, and the exact count. From the sums above, with n the
// unit's size and sigma^2 = M2 / n:
//   mean  off by depth u P (the shifted sum), the bound of the saved mean: 4 depth u P +
//         4 u |mean|;
//   M2    the float sum of the squared deviations, a relative 2 depth u; the chunk means (each
//         off by e = depth u P) enter Chan's merge through w delta^2 with sum w <= n and
//         sum w |delta| <= sqrt(n M2) = n sigma, i.e. 2 e n sigma + e^2 n; where p = 0 the
//         poor float mean enters squared, n e^2 again. Used: 8 depth u (M2 + n P sigma) +
//         8 n (depth u P)^2, plus an absolute n 2^-140 (1 + P) for deviations and squares that
//         round to subnormal steps (or to 0);
//   sum x^2  a relative 4 depth u, plus n 2^-146 for squares that round to subnormals;
//   sum |x|  a relative 4 depth u (|x| is exact, and subnormal additions are exact).
// Records are not value-checked where the unit's inputs are not all finite. stats_stage::apply from
// exact records (the float64 statistics below) meets the bounds of the one-call outputs: the
// error of the statistics is then only smaller.
//
// What is not value-checked (and why): a unit whose inputs are not all finite (its outputs may
// be NaN or Inf; only the other units are checked, which is the confinement check), a unit
// whose rstd exceeds kMaxRstd = 2^120 (var + eps below 2^-240: rstd nears float's top, where
// rstd |g| and the products with it overflow), and an element whose gamma or beta is not finite or
// whose reference |y|, |g z| or |g rstd| exceeds 2^120 (not representable in float, or an
// intermediate that overflows), or, for the channel ops, which fold rstd * gamma (BatchNorm
// inference: gamma / sqrt(var + eps)) into one float scale, whose scale is subnormal (the scale
// then keeps few or no bits, and the output |x - mean| * scale with it, even where g z itself is a
// normal float). The exact special case that plan.hpp documents is asserted: Lp with eps = 0 on a
// row of zeros gives y = NaN and rstd = 1 / 0 = +Inf.
//
// The fused operands of the row ops (docs/fusions.md). The residual add, the weight offset and
// adaLN modulation need nothing new here: the harness gives compute() the values the norm sees
// (h = x + residual + bias, as stored and checked bit for bit) and the gamma and beta the
// normalize pass applies (gamma + weight_offset, and per modulation batch the documented folds
// gamma_eff = fl(gamma fl(1 + scale)), beta_eff = fl(fl(beta fl(1 + scale)) + shift), each
// rounded as in the library, so the bound above holds with them). Two fusions widen the bound:
//   gate after the norm  y = t silu(z), t the unfused value: silu in f32 (exp, 1 + e, the
//             division) and the product cost up to 12 u of |y|, t's own error scales by
//             |silu(z)|, and where f32 exp(-z) overflows (z < -88.7) silu is -0 instead of a
//             value below 2^-121: an absolute kSiluSlack |t|. A non-finite gate leaves only
//             its own element unchecked (confinement).
//   gate before the norm  the norm sees h = fl(x silu(z)), known to within e = 10 u |h| +
//             kSiluSlack |x| + 2^-148 (silu and the product, the rounding of h; the reference
//             h is x silu(z) in double rounded to float). RMSNorm of values each off by at
//             most e_i moves sqrt(mean h^2 + eps) by at most max e (the triangle inequality),
//             a relative rho = max e * rstd, so y moves by |g| rstd e_i + |y| rho and rstd by
//             rstd rho (first order; twice that is used, and a unit with rho > 1/16 is not
//             value-checked).
// The post-norm residual (residual_after_norm), y = norm(x) [* g + b] + r: the norm's bound
// above plus the f32 rounding of the sum, half an f32 ulp of |y| (add_after_norm); a
// non-finite r leaves its element unchecked.
//
// bf16 and f16 (docs/numerics.md): every 16-bit value is a float, so a 16-bit x enters
// compute() exactly (from_16bit, from the formats' definitions: 1 sign bit, 8 or 5 exponent
// bits with bias 127 or 15, 7 or 10 fraction bits, subnormals, Inf, NaN). A 16-bit y is the f32
// result rounded to nearest even once more (to_16bit): the bound is the f32 one plus half an
// ulp of y's type at the largest |y| the f32 y may have (round_into). f16 overflows to Inf from
// 65520 on: where the f32 y may lie between 65504 and 65536 nothing is checked; where it is
// surely beyond, Inf of its sign is required. The statistics outputs are f32 whatever the
// types: their bounds do not change.
//
// The 8-bit outputs are checked against the quantizer of the float y (quant_code below and
// tests/quant_reference.hpp, written from the formats' definitions): the harness runs the same plan
// into an f32 y, checks that y against this reference, and requires the codes, scales and zero
// points the documented formulas give from it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../quant_reference.hpp"

namespace fuzzref {

inline constexpr double kU = 0x1p-24;
/// Units are value-checked up to this rstd (var + eps down to 2^-240): beyond, rstd nears
/// float's top and rstd |g| or the products with it may overflow. Below FLT_MIN (var beyond
/// 2^252) rstd is a subnormal float, off by up to 2^-150 absolute, which moves y by
/// 2^-150 |x - mean| |g| (the 2^-148 (|x| + |mean|) (1 + |g|) term).
inline constexpr double kMaxRstd = 0x1p120;

inline double depth(double n) {
  return std::min(n, 2048.0) + 2.0 * std::ceil(std::log2(n + 1.0)) + 16.0;
}

enum class family { centered, mvn, rms, l1, l2, folded };

/// What one output value must satisfy.
enum class want : std::uint8_t { skip, close, nan, pos_inf, neg_inf };

struct expectation {
  std::vector<double> value, tol;
  std::vector<want> kind;
  void resize(std::size_t n) {
    value.assign(n, 0.0);
    tol.assign(n, 0.0);
    kind.assign(n, want::skip);
  }
  /// True when `got` (a float output, or a double of a moments record) satisfies entry i.
  bool ok(std::size_t i, double got) const {
    switch (kind[i]) {
      case want::skip: return true;
      case want::nan: return std::isnan(got);
      case want::pos_inf: return got == INFINITY;
      case want::neg_inf: return got == -INFINITY;
      case want::close: return std::fabs(got - value[i]) <= tol[i];
    }
    return false;
  }
};

/// An op reduced to units: the harness fills it from the op, its parameters and the shape.
struct model {
  family fam = family::centered;
  bool compensated = true;   ///< LayerNorm's compensated_mean (p = 0 when false)
  bool relu = false;         ///< BatchNorm fuse_relu
  bool folds_scale = false;  ///< the kernel multiplies by one float rstd * gamma (channel ops)
  double eps = 0;
  std::size_t units = 0;
  std::vector<std::int64_t> unit_of;  ///< per logical element
  std::vector<std::int64_t> aff_of;   ///< per logical element: gamma/beta index, -1 none
  const float* gamma = nullptr;       ///< runtime affine (args), may be null
  const float* beta = nullptr;
  // BatchNorm inference: the plan-time parameters, per channel (unit)
  const float* bn_mean = nullptr;
  const float* bn_var = nullptr;
  const float* bn_gamma = nullptr;
  const float* bn_beta = nullptr;
  // BatchNorm training running statistics update
  bool bn_training = false, bn_pytorch = true, bn_cumulative = false;
  double momentum = 0.1;
  const float* run_mean_in = nullptr;  ///< values before the call (null: none given)
  const float* run_var_in = nullptr;
  std::int64_t counter_in = 0;
};

/// The float64 statistics of one unit (and, below, whether its outputs are checked).
struct unit_ref {
  double n = 0, mean = 0, m2 = 0, var = 0, dev = 0, absmax = 0, sumsq = 0, sumabs = 0;
  double rstd = 0;
  bool finite = true, checkable = false, zero_row = true;
};

/// What a moments record of the family summarizes (simdnorm_moments_kind: 1 centered, 2 sums
/// of squares, 3 sums of magnitudes); 0 for BatchNorm inference, which has none.
inline int moments_kind(family f) {
  switch (f) {
    case family::centered:
    case family::mvn: return 1;
    case family::rms:
    case family::l2: return 2;
    case family::l1: return 3;
    default: return 0;
  }
}

/// The unit's exact record: its m2 by the family's moments kind (the mean is 0 but for
/// centered records).
inline double record_m2(family f, const unit_ref& q) {
  const int k = moments_kind(f);
  return k == 1 ? q.m2 : k == 2 ? q.sumsq : q.sumabs;
}

struct result {
  expectation y, mean, rstd, run_mean, run_var;
  expectation record_mean, record_m2;  ///< stats_stage::moments
  std::vector<unit_ref> units;
};

/// The float64 statistics of every unit of logical values x[0..numel) (row-major over the
/// shape): n, mean, M2, var, the largest deviation and magnitude, the sums of squares and of
/// magnitudes.
inline std::vector<unit_ref> statistics(const model& m, const std::vector<float>& x) {
  const std::size_t numel = x.size();
  std::vector<unit_ref> u(m.units);
  for (std::size_t i = 0; i < numel; ++i) {
    unit_ref& q = u[std::size_t(m.unit_of[i])];
    const double v = x[i];
    q.n += 1;
    if (!std::isfinite(v)) q.finite = false;
    q.mean += v;
    q.sumsq += v * v;
    q.sumabs += std::fabs(v);
    q.absmax = std::max(q.absmax, std::fabs(v));
    if (v != 0.0) q.zero_row = false;
  }
  for (unit_ref& q : u)
    if (q.n > 0) q.mean /= q.n;
  for (std::size_t i = 0; i < numel; ++i) {
    unit_ref& q = u[std::size_t(m.unit_of[i])];
    const double d = double(x[i]) - q.mean;
    q.m2 += d * d;
    q.dev = std::max(q.dev, std::fabs(d));
  }
  for (unit_ref& q : u)
    if (q.n > 0) q.var = q.m2 / q.n;
  return u;
}

/// The reference for logical values x[0..numel) (row-major over the shape).
inline result compute(const model& m, const std::vector<float>& x) {
  result r;
  const std::size_t numel = x.size();
  std::vector<unit_ref>& u = r.units;
  u = statistics(m, x);
  const double e = m.eps;
  for (unit_ref& q : u) {
    if (!q.finite) continue;
    switch (m.fam) {
      case family::centered:
        q.rstd = 1.0 / std::sqrt(q.var + e);
        q.checkable = q.rstd <= kMaxRstd;
        break;
      case family::mvn:
        q.rstd = 1.0 / (std::sqrt(q.var) + e);
        q.checkable = q.rstd <= kMaxRstd;
        break;
      case family::rms: {
        const double ms = q.sumsq / q.n;
        q.rstd = 1.0 / std::sqrt(ms + e);
        q.checkable = q.rstd <= kMaxRstd;
        break;
      }
      case family::l1:
      case family::l2: {
        const double norm = m.fam == family::l1 ? q.sumabs : std::sqrt(q.sumsq);
        const double d = std::max(norm, e);
        q.rstd = 1.0 / d;
        q.checkable = d > 0 && q.rstd <= kMaxRstd;
        break;
      }
      case family::folded: break;  // per channel, below
    }
  }

  r.y.resize(numel);
  for (std::size_t i = 0; i < numel; ++i) {
    const std::size_t k = std::size_t(m.unit_of[i]);
    const unit_ref& q = u[k];
    const double xv = x[i];
    if (m.fam == family::folded) {
      if (!std::isfinite(xv)) continue;
      const double g = m.bn_gamma ? double(m.bn_gamma[k]) : 1.0;
      const double b = m.bn_beta ? double(m.bn_beta[k]) : 0.0;
      const double rm = m.bn_mean[k], rv = m.bn_var[k];
      if (!std::isfinite(g) || !std::isfinite(b) || !std::isfinite(rm) || !std::isfinite(rv))
        continue;
      const double a = g / std::sqrt(rv + e), s = b - rm * a;
      if (!std::isfinite(a) || !std::isfinite(s) || std::fabs(a) > 0x1p100 ||
          (a != 0 && std::fabs(a) < 0x1p-126) || std::fabs(s) > 0x1p120 ||
          std::fabs(xv * a) > 0x1p120)
        continue;
      double y = xv * a + s;
      if (m.relu) y = std::max(y, 0.0);
      r.y.kind[i] = want::close;
      r.y.value[i] = y;
      r.y.tol[i] = 8 * kU * (std::fabs(xv * a) + std::fabs(s) + std::fabs(y)) +
                   0x1p-120 * (1 + std::fabs(xv));
      continue;
    }
    if (!q.finite) continue;
    if ((m.fam == family::l1 || m.fam == family::l2) && q.zero_row && e == 0.0) {
      r.y.kind[i] = want::nan;  // plan.hpp: ONNX eps = 0, a row of zeros gives 0 / 0
      continue;
    }
    if (!q.checkable) continue;
    const std::int64_t a = m.aff_of.empty() ? -1 : m.aff_of[i];
    const double g = (a >= 0 && m.gamma) ? double(m.gamma[a]) : 1.0;
    const double b = (a >= 0 && m.beta) ? double(m.beta[a]) : 0.0;
    if (!std::isfinite(g) || !std::isfinite(b)) continue;
    const double dp = depth(q.n);
    double z, s;
    switch (m.fam) {
      case family::centered:
      case family::mvn: {
        const double P = m.compensated ? 2 * q.dev : std::max(q.absmax, 2 * q.dev);
        z = (xv - q.mean) * q.rstd;
        s = P * q.rstd;
        break;
      }
      default:  // rms, l1, l2: no centering; the sum's relative error scales z
        z = xv * q.rstd;
        s = 0;
        break;
    }
    double y = z * g + b;
    if (m.relu) y = std::max(y, 0.0);
    if (std::fabs(y) > 0x1p120 || std::fabs(g * z) > 0x1p120 || std::fabs(g) * q.rstd > 0x1p120)
      continue;
    if (m.folds_scale && g != 0 && std::fabs(g) * q.rstd < 0x1p-126) continue;  // subnormal scale
    r.y.kind[i] = want::close;
    r.y.value[i] = y;
    const double ds = dp * kU * s;  // the (depth u s)^2 term: see the saved rstd below
    r.y.tol[i] = 4 * dp * kU * std::fabs(g) * (s + std::fabs(z) * (1 + s)) +
                 4 * ds * ds * std::fabs(g * z) +
                 8 * kU * (std::fabs(y) + std::fabs(b) + std::fabs(g * z)) +
                 0x1p-120 * (1 + std::fabs(z) + std::fabs(g)) +
                 0x1p-147 * q.rstd * std::fabs(g) +  // x - mean rounded to a subnormal step
                 0x1p-148 * (std::fabs(xv) + std::fabs(q.mean)) * (1 + std::fabs(g));  // rstd
  }

  // Moments records (stats_stage::moments), per unit: see "Split statistics" at the top.
  r.record_mean.resize(m.units);
  r.record_m2.resize(m.units);
  for (std::size_t k = 0; k < m.units && m.fam != family::folded; ++k) {
    const unit_ref& q = u[k];
    if (!q.finite || q.n < 1) continue;
    const double dp = depth(q.n);
    const int kind = moments_kind(m.fam);
    r.record_mean.kind[k] = r.record_m2.kind[k] = want::close;
    r.record_m2.value[k] = record_m2(m.fam, q);
    if (kind == 1) {
      const double P = m.compensated ? 2 * q.dev : std::max(q.absmax, 2 * q.dev);
      const double sigma = std::sqrt(q.var), de = dp * kU * P;
      r.record_mean.value[k] = q.mean;
      r.record_mean.tol[k] = 4 * dp * kU * P + 4 * kU * std::fabs(q.mean) + 0x1p-140;
      r.record_m2.tol[k] =
          8 * dp * kU * (q.m2 + q.n * P * sigma) + 8 * q.n * de * de + q.n * 0x1p-140 * (1 + P);
    } else {  // mean exactly 0
      r.record_m2.tol[k] = 4 * dp * kU * r.record_m2.value[k] + (kind == 2 ? q.n * 0x1p-146 : 0);
    }
  }

  // Saved statistics (mean, rstd) and the BatchNorm running statistics, per unit.
  r.mean.resize(m.units);
  r.rstd.resize(m.units);
  r.run_mean.resize(m.units);
  r.run_var.resize(m.units);
  if (m.fam == family::folded) return r;
  for (std::size_t k = 0; k < m.units; ++k) {
    const unit_ref& q = u[k];
    if (!q.finite) continue;
    const double dp = depth(q.n);
    if ((m.fam == family::l1 || m.fam == family::l2) && q.zero_row && e == 0.0) {
      r.rstd.kind[k] = want::pos_inf;
      continue;
    }
    if (!q.checkable) continue;
    const double P = m.compensated ? 2 * q.dev : std::max(q.absmax, 2 * q.dev);
    const double mean_tol = 4 * dp * kU * P + 4 * kU * std::fabs(q.mean) + 0x1p-140;
    r.mean.kind[k] = want::close;
    r.mean.value[k] = q.mean;
    r.mean.tol[k] = mean_tol;
    if (q.rstd <= 0x1p120) {
      r.rstd.kind[k] = want::close;
      r.rstd.value[k] = q.rstd;
      // sigma's relative error (see the top): depth u, plus depth u s through the merge of
      // chunk means, plus (depth u s)^2 where a poor float mean (p = 0) enters the variance
      const bool centered = m.fam == family::centered || m.fam == family::mvn;
      const double ds = centered ? dp * kU * P * q.rstd : 0.0;
      r.rstd.tol[k] = ((4 * dp + 8) * kU + 4 * ds + 4 * ds * ds) * q.rstd + 0x1p-140;
    }
    if (!m.bn_training || m.run_mean_in == nullptr) continue;
    const double rm = m.run_mean_in[k], rv = m.run_var_in[k];
    if (!std::isfinite(rm) || !std::isfinite(rv)) continue;
    double w_new, w_old;
    if (m.bn_cumulative) {
      w_new = 1.0 / (double(m.counter_in) + 1.0);
      w_old = 1.0 - w_new;
    } else {
      w_new = m.bn_pytorch ? m.momentum : 1.0 - m.momentum;
      w_old = m.bn_pytorch ? 1.0 - m.momentum : m.momentum;
    }
    const double vb = m.bn_pytorch ? q.var * q.n / (q.n - 1) : q.var;
    const double em = w_old * rm + w_new * q.mean, ev = w_old * rv + w_new * vb;
    if (std::fabs(em) > 0x1p120 || std::fabs(ev) > 0x1p120 || std::fabs(w_old * rv) > 0x1p120 ||
        std::fabs(w_new * vb) > 0x1p120 || std::fabs(w_old * rm) > 0x1p120)
      continue;
    r.run_mean.kind[k] = want::close;
    r.run_mean.value[k] = em;
    r.run_mean.tol[k] =
        w_new * mean_tol + 4 * kU * (std::fabs(w_old * rm) + std::fabs(w_new * q.mean)) + 0x1p-140;
    r.run_var.kind[k] = want::close;
    r.run_var.value[k] = ev;
    r.run_var.tol[k] = w_new * vb * 8 * dp * kU * (1 + P * q.rstd) +
                       4 * kU * (std::fabs(w_old * rv) + std::fabs(w_new * vb)) + 0x1p-140;
  }
  return r;
}

// ---- bf16 and f16, from the formats' definitions ---------------------------------------------

/// simdnorm_dtype values of the float types.
inline constexpr int kF32 = 0, kBF16 = 1, kF16 = 2;

/// A binary float format: precision p (with the hidden bit), the smallest normal exponent, the
/// largest exponent and the bias of the stored exponent.
struct float_format {
  int p, emin, emax, bias;
};
inline float_format format_of(int t) {
  if (t == kBF16) return {8, -126, 127, 127};
  if (t == kF16) return {11, -14, 15, 15};
  return {24, -126, 127, 127};
}

/// The largest finite value of type t: (2 - 2^(1 - p)) 2^emax.
inline double max_finite(int t) {
  const float_format f = format_of(t);
  return std::ldexp(2.0 - std::ldexp(1.0, 1 - f.p), f.emax);
}

/// The value of the 16-bit pattern b of type t (kBF16, kF16): sign, exponent field, fraction;
/// exponent field 0 is the subnormals (2^emin scaled by the fraction), all ones Inf or NaN.
inline double from_16bit(int t, std::uint16_t b) {
  const float_format f = format_of(t);
  const int frac_bits = f.p - 1, exp_bits = 15 - frac_bits;
  const int e = (b >> frac_bits) & ((1 << exp_bits) - 1);
  const int frac = b & ((1 << frac_bits) - 1);
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return frac != 0 ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(double(frac), f.emin - frac_bits);
  return sign * std::ldexp(double(frac + (1 << frac_bits)), e - f.bias - frac_bits);
}

/// v rounded to nearest, ties to even, into type t (kBF16, kF16): its bit pattern. Values that
/// round to 2^(emax + 1) or beyond are +-Inf; NaN becomes a quiet NaN.
inline std::uint16_t to_16bit(int t, double v) {
  const float_format f = format_of(t);
  const int frac_bits = f.p - 1;
  const auto sign = std::uint16_t(std::signbit(v) ? 0x8000 : 0);
  const auto inf = std::uint16_t(((1 << (15 - frac_bits)) - 1) << frac_bits);
  if (std::isnan(v)) return std::uint16_t(sign | inf | (1 << (frac_bits - 1)));
  const double a = std::fabs(v);
  if (a == 0.0) return sign;
  if (std::isinf(a)) return std::uint16_t(sign | inf);
  int e;
  std::frexp(a, &e);                                                      // a in [2^(e - 1), 2^e)
  const double q = std::ldexp(1.0, std::max(e - 1, f.emin) - frac_bits);  // the spacing at a
  const double r = std::nearbyint(a / q) * q;  // a / q is exact; the default mode: ties to even
  if (r >= std::ldexp(1.0, f.emax + 1)) return std::uint16_t(sign | inf);
  if (r < std::ldexp(1.0, f.emin))  // subnormal: exponent field 0
    return std::uint16_t(sign | std::uint16_t(r / std::ldexp(1.0, f.emin - frac_bits)));
  std::frexp(r, &e);
  const double frac = r / std::ldexp(1.0, e - 1 - frac_bits) - std::ldexp(1.0, frac_bits);
  return std::uint16_t(sign | ((e - 1 + f.bias) << frac_bits) | int(frac));
}

/// v as stored in type t (kF32, kBF16, kF16), as a float (every such value is one).
inline float round_to(int t, double v) {
  return t == kF32 ? float(v) : float(from_16bit(t, to_16bit(t, v)));
}

/// Half an ulp of type t at magnitude a >= 0: the most that rounding a value of magnitude at
/// most a into t moves it (below the overflow threshold); half the smallest subnormal at 0.
inline double half_ulp(int t, double a) {
  const float_format f = format_of(t);
  int e = f.emin + 1;
  if (a > 0) std::frexp(a, &e);
  return std::ldexp(1.0, std::max(e - 1, f.emin) - (f.p - 1) - 1);
}

/// The f32 op's expectations of y, rounded once more into y's type t (a 16-bit y): half an ulp
/// of t at the largest magnitude the f32 y may have. Near the overflow threshold (f16: results
/// from 65520 on become +-Inf) a y whose f32 value may lie within [max, 2^(emax + 1)] is not
/// value-checked; one surely beyond must be Inf of its sign.
inline void round_into(expectation& y, int t) {
  if (t == kF32) return;
  const double top = max_finite(t), beyond = std::ldexp(1.0, format_of(t).emax + 1);
  for (std::size_t i = 0; i < y.kind.size(); ++i) {
    if (y.kind[i] != want::close) continue;
    const double a = std::fabs(y.value[i]), tol = y.tol[i];
    if (a + tol < top)
      y.tol[i] = tol + half_ulp(t, a + tol);
    else if (a - tol >= beyond)
      y.kind[i] = y.value[i] > 0 ? want::pos_inf : want::neg_inf;
    else
      y.kind[i] = want::skip;
  }
}

// ---- Fused operands of the row ops (see the top) ------------------------------------------------

/// Absolute error of f32 silu(z) where exp(-z) overflows (z < -88.7: -0 instead of |silu| below
/// 2^-121).
inline constexpr double kSiluSlack = 0x1p-118;

inline double silu(double z) { return z / (1.0 + std::exp(-z)); }

/// Gated RMSNorm with the gate after the norm: y = t silu(gate[i]) (gate in logical order).
inline void gate_after_norm(result& r, const std::vector<float>& gate) {
  for (std::size_t i = 0; i < gate.size(); ++i) {
    if (r.y.kind[i] != want::close) continue;
    const double z = gate[i];
    if (!std::isfinite(z)) {
      r.y.kind[i] = want::skip;
      continue;
    }
    const double f = silu(z), t = r.y.value[i], y = t * f, tol = r.y.tol[i];
    if (std::fabs(y) > 0x1p120) {
      r.y.kind[i] = want::skip;
      continue;
    }
    r.y.value[i] = y;
    r.y.tol[i] = tol * std::fabs(f) * (1 + 16 * kU) + 12 * kU * std::fabs(y) +
                 kSiluSlack * (std::fabs(t) + tol) + 0x1p-140;
  }
}

/// The gate before the norm: the values the norm sees, h = x silu(gate) rounded to float, and
/// each one's absolute error bound (see the top). h is stored in y (of type y_type, kF32 or a
/// 16-bit type) before the norm reads it back: a 16-bit y adds its rounding, twice half an ulp
/// (the library's f32 h may lie in the next binade), and where h may reach the type's
/// overflow threshold h is taken as Inf, which leaves the unit unchecked.
inline void gate_before_norm(const std::vector<float>& x, const std::vector<float>& gate,
                             int y_type, std::vector<float>* h, std::vector<double>* err) {
  h->resize(x.size());
  err->resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = double(x[i]) * silu(gate[i]);
    (*h)[i] = float(v);
    (*err)[i] = 10 * kU * std::fabs(v) + kSiluSlack * std::fabs(double(x[i])) + 0x1p-148;
    if (y_type == kF32) continue;
    (*err)[i] += 2 * half_ulp(y_type, std::fabs(v));
    if (std::fabs(v) >= 0.99 * max_finite(y_type)) (*h)[i] = float(std::copysign(INFINITY, v));
  }
}

/// The post-norm residual, y = norm + r (r in logical order, as stored: exact): the sum in
/// f32 costs half an f32 ulp of |y| (a 16-bit y's own rounding comes after, round_into). A
/// non-finite r leaves its element unchecked (confinement), as does a sum beyond 2^120.
inline void add_after_norm(result& r, const std::vector<float>& res) {
  for (std::size_t i = 0; i < res.size(); ++i) {
    if (r.y.kind[i] != want::close) continue;  // a NaN norm stays NaN whatever r is
    const double rv = res[i];
    if (!std::isfinite(rv)) {
      r.y.kind[i] = want::skip;
      continue;
    }
    const double y = r.y.value[i] + rv;
    if (std::fabs(y) > 0x1p120) {
      r.y.kind[i] = want::skip;
      continue;
    }
    r.y.value[i] = y;
    r.y.tol[i] += half_ulp(kF32, std::fabs(y) + r.y.tol[i]);
  }
}

/// Widens the y and rstd bounds of an RMSNorm whose values are known only within err[i]
/// (absolute, logical order): see "gate before the norm" at the top.
inline void widen_for_value_error(result& r, const model& m, const std::vector<double>& err) {
  std::vector<double> worst(m.units, 0.0);
  for (std::size_t i = 0; i < err.size(); ++i) {
    double& w = worst[std::size_t(m.unit_of[i])];
    w = std::max(w, err[i]);
  }
  for (std::size_t i = 0; i < err.size(); ++i) {
    if (r.y.kind[i] != want::close) continue;
    const std::size_t k = std::size_t(m.unit_of[i]);
    const double rstd = r.units[k].rstd, rho = worst[k] * rstd;
    const std::int64_t a = m.aff_of.empty() ? -1 : m.aff_of[i];
    const double g = (a >= 0 && m.gamma) ? double(m.gamma[a]) : 1.0;
    if (rho > 0.0625) {
      r.y.kind[i] = want::skip;
      continue;
    }
    r.y.tol[i] += 2 * (std::fabs(g) * rstd * err[i] + std::fabs(r.y.value[i]) * rho);
  }
  for (std::size_t k = 0; k < m.units; ++k) {
    if (r.rstd.kind[k] != want::close) continue;
    const double rho = worst[k] * r.units[k].rstd;
    if (rho > 0.0625)
      r.rstd.kind[k] = want::skip;
    else
      r.rstd.tol[k] += 2 * rho * r.rstd.value[k];
  }
}

// ---- The 8-bit outputs: the quantizer, from the formats' definitions -------------------------

/// simdnorm_dtype values of the 8-bit types.
inline constexpr int kI8 = 3, kF8 = 4, kU8 = 5;

/// The byte an 8-bit y of type t holds for the scaled value v = fl(y * inv_scale): i8 and u8
/// sat(rne(v) + zp) (NaN: 0), f8e4m3fn f8_code(v).
inline unsigned quant_code(int t, float v, int zp) {
  return qref::ref_code(simdnorm::dtype(t), v, zp);
}

}  // namespace fuzzref
