// LayerNorm, RMSNorm, Lp normalization and the channel ops (BatchNorm training, MVN,
// InstanceNorm, GroupNorm) at the edges of the float range, on every runnable ISA, f32 and bf16
// x, against a float64 reference: rows and units whose deviations, their squares (or the
// squares) or their sums overflow float although the normalized output is an ordinary number,
// rows and units near FLT_MAX and of both signs near it, rows whose var + eps exceeds FLT_MAX
// (eps = FLT_MAX), and rows and units of tiny values with eps = 0, whose squares underflow. The
// reference is exact enough in double: |x| <= FLT_MAX = 2^128, so squared deviations reach at most
// 2^258 and their sums over a row 2^271, far inside double's range, and the smallest inputs used
// (1e-37) square to 1e-74, far above double's underflow.
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "channel_reference.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::isa;
using simdnorm::tensor_desc;

constexpr double u = ref::u32;
// Absolute rounding of a float rstd that falls below FLT_MIN (subnormal): half its spacing.
constexpr double kSubnormalHalfUlp = 0x1p-150;

const std::size_t kCols[] = {1, 7, 16, 17, 64, 100, 1024, 4099};
constexpr std::size_t kRows = 20;  // a full 16-row short group, a partial one, long-row groups

// Error bounds. depth = ref::accumulation_depth(D, lanes): the longest chain of float
// additions in one accumulator of the kernels' sums, plus their reduction tree (each float
// sum of positive terms then has a relative error <= depth * u).
//
// LayerNorm, for an element with z = (x - mean) / sigma, in units of sigma:
// - mean: pass A sums x - p over the row with the shift p inside the row's range, so
//   |mean - p| <= max |x - mean| <= sqrt(D) sigma, and sum |x - p| <= D sigma + D sqrt(D) sigma
//   (Cauchy-Schwarz for the first term): the mean is off by at most
//   e_mean = depth * u * (1 + sqrt(D)) (the float pair hi + lo represents it exactly).
// - M2: pass B (or its scaled form; scaling by a power of two is exact) sums positive squares:
//   relative error (depth + 2) u; the one-read form S2 - S1^2 / D, accepted only when
//   S1^2 / D <= S2 / 4, at most (4/3) (1.5 depth + 2) u. Both are <= (2 depth + 3) u.
// - rstd: half the relative error of M2, plus the sqrt, the division and the float rounding:
//   e_rstd = (depth + 1.5 + 3) u, plus kSubnormalHalfUlp / rstd if rstd is subnormal.
// - y = ((x - hi) * rstd - lo * rstd) * g + b rounds x - hi, the fms and the fma:
//   |dy| <= |g| (e_mean + (e_rstd + 2u) |z|) + u |y|.
// For D = 4099 and 16 lanes depth = 46, so e_mean = 3e-4 and the |z| term is 3e-6 |z|: the
// mean term dominates, of order D * u for every D here, as expected of a shifted one-pass sum.
double ln_rstd_rel(double depth, double rstd) {
  const double sub = rstd < FLT_MIN ? kSubnormalHalfUlp / rstd : 0.0;
  return (depth + 4.5) * u + sub;
}
// In a row whose deviations may exceed FLT_MAX / 2 the kernel drops the center (hi = 0,
// layer_norm-inl.hpp): lo * rstd = mean * rstd rounds twice, adding 2 u |mean| rstd; the
// kernel switches at sqrt(M2) > FLT_MAX / 2, the test adds the term from sqrt(M2) > 0.4
// FLT_MAX, a margin over the statistics' rounding.
bool may_uncenter(double m2) { return std::sqrt(m2) > 0.4 * double(FLT_MAX); }
double ln_bound(double depth, std::size_t d, double z, double g, double y, double rstd,
                double uncentered_mean) {
  const double e_mean = depth * u * (1.0 + std::sqrt(double(d)));
  const double e_uncentered = 2 * u * std::fabs(uncentered_mean) * rstd;
  return std::fabs(g) *
             (e_mean + e_uncentered + (ln_rstd_rel(depth, rstd) + 2 * u) * std::fabs(z)) +
         u * std::fabs(y) + 1e-30;
}

// RMSNorm: the sum of squares has relative error (depth + 1) u (each square rounds once);
// rstd half of that plus the scaling by 1 / D, eps, the sqrt, the division and the float
// rounding (<= 4 u), plus kSubnormalHalfUlp / rstd when rstd is subnormal; y = x * rstd * g
// rounds twice more.
double rms_rstd_rel(double depth, double rstd) {
  const double sub = rstd < FLT_MIN ? kSubnormalHalfUlp / rstd : 0.0;
  return ((depth + 1) / 2 + 4) * u + sub;
}
double rms_bound(double depth, double y, double rstd) {
  return (rms_rstd_rel(depth, rstd) + 2 * u) * std::fabs(y) + 1e-30;
}

// Lp, y = x * rs with rs = 1 / ||x||_p (eps 0 or below the norm): the norm's sum has a
// relative error of at most ref::sum_depth * u (halved by the sqrt for p = 2; a chunk summed
// again in double does better), 1 / norm and the float rs round twice more, plus half a
// subnormal spacing when rs falls below FLT_MIN (norms beyond 1 / FLT_MIN, about 8.5e37); the
// product x * rs rounds once more.
double lp_rs_rel(double depth, int p, double rs) {
  const double sub = rs < FLT_MIN ? kSubnormalHalfUlp / rs : 0.0;
  return ((p == 2 ? depth / 2 : depth) + 2) * u + sub;
}

enum class op { layer_norm, rms_norm, l1_norm, l2_norm };

struct outcome {
  std::size_t bad = 0;
  std::string first;
  void fail(const std::string& what) {
    if (bad++ == 0) first = what;
  }
};

// The x types at the edges: f32, and bf16 (f32's range) where the build has 16-bit kernels.
// f16's range (65504) keeps every square and sum far inside float's. y stays f32, so the
// bounds are the f32 ones on the values as stored.
std::vector<dtype> x_types() {
  if (test::all_dtypes) return {dtype::f32, dtype::bf16};
  return {dtype::f32};
}

// x as stored in type t (f32 unchanged; bf16 rounded to nearest even).
std::vector<float> stored_as(dtype t, const std::vector<float>& x) {
  test::typed_buffer b(t, x.size(), 0);
  b.set(x);
  return b.get(x.size());
}

// Runs one [kRows, D] case on the active ISA, with x of type xt, and checks y, the mean and
// rstd against float64 on x as stored.
void check(isa active, dtype xt, op which, std::size_t d, const std::vector<float>& x_in, float eps,
           const char* what) {
  const std::string name = what;  // doctest 2.4.9 prints a char* as a pointer
  CAPTURE(name);
  CAPTURE(std::string(simdnorm::dtype_name(xt)));
  CAPTURE(d);
  const std::vector<float> x = stored_as(xt, x_in);
  test::typed_buffer xb(xt, x.size(), 0);
  xb.set(x);
  std::vector<float> g(d), b(d), y(x.size(), 7.25f), mean(kRows, -1.f), rstd(kRows, -1.f);
  test::fill_normal(g.data(), d, 11, 1.0, 0.3);
  test::fill_normal(b.data(), d, 12, 0.0, 1.0);
  const tensor_desc xd = tensor_desc::contiguous({std::int64_t(kRows), std::int64_t(d)}, xt);
  const tensor_desc desc = tensor_desc::contiguous({std::int64_t(kRows), std::int64_t(d)});
  simdnorm::plan p;
  if (which == op::layer_norm) {
    simdnorm::layer_norm_params prm;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::layer_norm(xd, desc, prm, &p).ok());
  } else if (which == op::rms_norm) {
    simdnorm::rms_norm_params prm;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::rms_norm(xd, desc, prm, &p).ok());
  } else {
    simdnorm::lp_norm_params prm;
    prm.p = which == op::l1_norm ? 1 : 2;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::lp_norm(xd, desc, prm, &p).ok());
  }
  const bool lp = which == op::l1_norm || which == op::l2_norm;
  REQUIRE(p.kernel_isa() == active);
  simdnorm::norm_args a;
  a.x = xb.base;
  a.y = y.data();
  a.gamma = lp ? nullptr : g.data();
  a.beta = which == op::layer_norm ? b.data() : nullptr;
  a.mean = which == op::layer_norm ? mean.data() : nullptr;
  a.rstd = rstd.data();
  REQUIRE(p.execute(a).ok());

  const double depth = ref::accumulation_depth(d, test::lanes(active));
  std::vector<double> yr(d);
  outcome o;
  for (std::size_t r = 0; r < kRows; ++r) {
    const float* xr = x.data() + r * d;
    const float* yk = y.data() + r * d;
    const std::string row = "row " + std::to_string(r);
    if (which == op::layer_norm) {
      ref::row_stats st;
      ref::layer_norm_row(xr, d, g.data(), b.data(), eps, yr.data(), &st);
      const double rs = 1.0 / std::sqrt(st.var + eps);
      const double sigma = std::sqrt(st.var), m2 = st.var * double(d);
      const double uncentered_mean = may_uncenter(m2) ? st.mean : 0.0;
      for (std::size_t i = 0; i < d; ++i) {
        const double z = (xr[i] - st.mean) * rs;
        if (!(std::fabs(yk[i] - yr[i]) <= ln_bound(depth, d, z, g[i], yr[i], rs, uncentered_mean)))
          o.fail(row + " col " + std::to_string(i) + ": got " + std::to_string(yk[i]) + " want " +
                 std::to_string(yr[i]));
      }
      // The mean output: the e_mean of ln_bound in units of sigma, then rounded to float.
      const double e_mean = depth * u * (1.0 + std::sqrt(double(d))) * sigma;
      if (!(std::fabs(mean[r] - st.mean) <= e_mean + u * std::fabs(st.mean)))
        o.fail(row + ": mean " + std::to_string(mean[r]) + " want " + std::to_string(st.mean));
      if (!(std::fabs(rstd[r] - rs) <= ln_rstd_rel(depth, rs) * rs))
        o.fail(row + ": rstd " + std::to_string(rstd[r]) + " want " + std::to_string(rs));
    } else if (lp) {
      const int pw = which == op::l1_norm ? 1 : 2;
      const double rs = 1.0 / std::max(ref::lp_norm(xr, d, pw), double(eps));
      const double depth_lp = ref::sum_depth(d, test::lanes(active));
      for (std::size_t i = 0; i < d; ++i) {
        const double want = xr[i] * rs;
        if (!(std::fabs(yk[i] - want) <=
              (lp_rs_rel(depth_lp, pw, rs) + u) * std::fabs(want) + kSubnormalHalfUlp))
          o.fail(row + " col " + std::to_string(i) + ": got " + std::to_string(yk[i]) + " want " +
                 std::to_string(want));
      }
      if (!(std::fabs(rstd[r] - rs) <= lp_rs_rel(depth_lp, pw, rs) * rs))
        o.fail(row + ": rs " + std::to_string(rstd[r]) + " want " + std::to_string(rs));
    } else {
      const double rs = ref::rms_rstd(xr, d, eps);
      ref::rms_norm_row(xr, d, g.data(), eps, yr.data());
      for (std::size_t i = 0; i < d; ++i)
        if (!(std::fabs(yk[i] - yr[i]) <= rms_bound(depth, yr[i], rs)))
          o.fail(row + " col " + std::to_string(i) + ": got " + std::to_string(yk[i]) + " want " +
                 std::to_string(yr[i]));
      if (!(std::fabs(rstd[r] - rs) <= rms_rstd_rel(depth, rs) * rs))
        o.fail(row + ": rstd " + std::to_string(rstd[r]) + " want " + std::to_string(rs));
    }
  }
  CHECK_MESSAGE(o.bad == 0, o.first);
}

// Row r of kRows: its value of a parameter spread over [lo, hi] in log10.
double log_spread(std::size_t r, double lo, double hi) {
  return std::pow(10.0, lo + (hi - lo) * double(r) / double(kRows - 1));
}

// Rows of mean +-10^(18 .. 38.4) (alternating signs) with spreads 10^19 .. 10^33: a spread of
// 10^19 around a mean of 10^18 mixes signs within the row; near 10^38 a spread of 10^33 is
// about 50 float spacings. Squared deviations overflow float in every row.
std::vector<float> large_means(std::size_t d, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01;
  std::vector<float> x(kRows * d);
  for (std::size_t r = 0; r < kRows; ++r) {
    const double mean = (r % 2 ? -1.0 : 1.0) * log_spread(r, 18.0, 38.4);
    const double sd = std::min(std::max(std::fabs(mean) * 1e-2, 1e19), 1e33);
    for (std::size_t i = 0; i < d; ++i) x[r * d + i] = float(mean + sd * n01(rng));
  }
  return x;
}

// Standard normal values with one element of magnitude h (sign alternating by row) at a
// position that moves with the row: h from 4e19 (the variance about 1e38, just representable
// in float) to 1e30.
std::vector<float> one_huge(std::size_t d, std::uint32_t seed) {
  std::vector<float> x(kRows * d);
  test::fill_normal(x.data(), x.size(), seed);
  for (std::size_t r = 0; r < kRows; ++r)
    x[r * d + (r * 7) % d] = float((r % 2 ? -1.0 : 1.0) * 4.0 * log_spread(r, 19.0, 29.4));
  return x;
}

// Rows at 0.99 FLT_MAX (sign alternating by row) with a spread of 1e33 (about 50 spacings).
std::vector<float> near_max(std::size_t d, std::uint32_t seed) {
  std::vector<float> x(kRows * d);
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01;
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t i = 0; i < d; ++i)
      x[r * d + i] = float((r % 2 ? -1.0 : 1.0) * 0.99 * FLT_MAX + 1e33 * n01(rng));
  return x;
}

// Rows of mean +-3e37 with spreads 10^35 .. 10^37.5: beyond about 1.7e35 the float sum of
// x - p over a 2048-element chunk overflows.
std::vector<float> wide_spreads(std::size_t d, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01;
  std::vector<float> x(kRows * d);
  for (std::size_t r = 0; r < kRows; ++r) {
    const double mean = (r % 2 ? -3e37 : 3e37), sd = log_spread(r, 35.0, 37.5);
    for (std::size_t i = 0; i < d; ++i) x[r * d + i] = float(mean + sd * n01(rng));
  }
  return x;
}

// Values of both signs with magnitudes 0.5 .. 0.99 FLT_MAX (below bf16's largest), positive with a
// probability that moves from 0.05 to 0.95 over the rows: the mean lies off zero, so the deviations
// of the minority sign exceed FLT_MAX.
std::vector<float> both_signs_near_max(std::size_t d, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> f(0.5, 0.99), coin(0.0, 1.0);
  std::vector<float> x(kRows * d);
  for (std::size_t r = 0; r < kRows; ++r) {
    const double positive = 0.05 + 0.9 * double(r) / double(kRows - 1);
    for (std::size_t i = 0; i < d; ++i)
      x[r * d + i] = float((coin(rng) < positive ? 1.0 : -1.0) * f(rng) * FLT_MAX);
  }
  return x;
}

// Mixed-sign normal values scaled by 10^lo .. 10^hi (one scale per row).
std::vector<float> scaled_rows(std::size_t d, std::uint32_t seed, double lo, double hi) {
  std::vector<float> x(kRows * d);
  test::fill_normal(x.data(), x.size(), seed);
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t i = 0; i < d; ++i) x[r * d + i] = float(x[r * d + i] * log_spread(r, lo, hi));
  return x;
}

// Values near +-FLT_MAX for RMSNorm (below bf16's largest): their mean square is about 1e77.
std::vector<float> rms_near_max(std::size_t d, std::uint32_t seed) {
  std::vector<float> x(kRows * d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> f(0.5, 0.99);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i % 3 ? 1.0 : -1.0) * f(rng) * FLT_MAX);
  return x;
}

}  // namespace

TEST_CASE("layer_norm: rows whose deviations, squares or sums leave float match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 100;
    for (dtype t : x_types())
      for (std::size_t d : kCols) {
        check(i, t, op::layer_norm, d, large_means(d, seed++), 1e-5f, "large means");
        check(i, t, op::layer_norm, d, one_huge(d, seed++), 1e-5f, "one huge element");
        check(i, t, op::layer_norm, d, near_max(d, seed++), 1e-5f, "near FLT_MAX");
        check(i, t, op::layer_norm, d, wide_spreads(d, seed++), 1e-5f, "spreads up to 3e37");
        check(i, t, op::layer_norm, d, both_signs_near_max(d, seed++), 1e-5f,
              "both signs near FLT_MAX");
        check(i, t, op::layer_norm, d, scaled_rows(d, seed++, 16.0, 19.0), FLT_MAX,
              "var + eps beyond FLT_MAX");
        if (d == 1) continue;  // eps 0 and one value: var = 0, y = 0 / 0
        check(i, t, op::layer_norm, d, scaled_rows(d, seed++, -37.0, -20.0), 0.f,
              "tiny values, eps 0");
        std::vector<float> tiny(kRows * d);
        test::fill_normal(tiny.data(), tiny.size(), seed++, 3e-25, 1e-25);
        check(i, t, op::layer_norm, d, tiny, 0.f, "3e-25 + N(0, 1e-25), eps 0");
      }
  });
}

TEST_CASE("rms_norm: rows whose squares overflow or underflow float match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 200;
    for (dtype t : x_types())
      for (std::size_t d : kCols) {
        check(i, t, op::rms_norm, d, scaled_rows(d, seed++, 19.0, 37.0), 1e-6f, "large values");
        check(i, t, op::rms_norm, d, one_huge(d, seed++), 1e-6f, "one huge element");
        check(i, t, op::rms_norm, d, rms_near_max(d, seed++), 1e-6f, "near FLT_MAX");
        check(i, t, op::rms_norm, d, scaled_rows(d, seed++, 16.0, 19.0), FLT_MAX,
              "ms + eps beyond FLT_MAX");
        check(i, t, op::rms_norm, d, scaled_rows(d, seed++, -37.0, -20.0), 0.f,
              "tiny values, eps 0");
        std::vector<float> tiny(kRows * d);
        test::fill_normal(tiny.data(), tiny.size(), seed++, 0.0, 1e-25);
        check(i, t, op::rms_norm, d, tiny, 0.f, "rows of 1e-25, eps 0");
      }
  });
}

TEST_CASE("lp_norm: rows whose sums overflow or underflow float match float64 (p = 1, 2)") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 300;
    for (dtype t : x_types())
      for (std::size_t d : kCols) {
        for (op which : {op::l1_norm, op::l2_norm}) {
          check(i, t, which, d, scaled_rows(d, seed++, 19.0, 37.0), 1e-12f, "large values");
          check(i, t, which, d, one_huge(d, seed++), 1e-12f, "one huge element");
          check(i, t, which, d, rms_near_max(d, seed++), 0.f, "near FLT_MAX, eps 0");
          check(i, t, which, d, scaled_rows(d, seed++, -37.0, -20.0), 0.f, "tiny values, eps 0");
        }
      }
  });
}

namespace {

// The data of a channel-op case, one kind per unit family (as the row generators above):
// large means, near FLT_MAX, spreads whose float sums of x - p overflow, both signs near
// FLT_MAX with the mean off zero, and tiny values (N(0, 1) scaled by 1e-37 .. 1e-20) with
// eps = 0, whose squares underflow.
enum class channel_data { large_means, near_max, wide_spreads, both_signs, tiny };

// The channel ops and their units on x[N][C][S]: BatchNorm training and MVN over axes (N, S)
// (a unit is channel c over the batch), InstanceNorm (plane (n, c)), GroupNorm with one group
// (batch item n, all channels).
enum class channel_op { batch_norm_training, mean_variance_norm, instance_norm, group_norm };

// The logical (NCHW) indices of every unit of op.
std::vector<std::vector<std::size_t>> units_of(channel_op op, std::size_t N, std::size_t C,
                                               std::size_t S) {
  std::vector<std::vector<std::size_t>> units;
  const auto at = [&](std::size_t n, std::size_t c, std::size_t s) { return (n * C + c) * S + s; };
  if (op == channel_op::batch_norm_training || op == channel_op::mean_variance_norm) {
    for (std::size_t c = 0; c < C; ++c) {
      units.emplace_back();
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t s = 0; s < S; ++s) units.back().push_back(at(n, c, s));
    }
  } else {
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t c = 0; c < C; ++c) {
        if (op == channel_op::instance_norm || c == 0) units.emplace_back();
        for (std::size_t s = 0; s < S; ++s) units.back().push_back(at(n, c, s));
      }
  }
  return units;
}

// Runs one channel op on x (logical NCHW, given in NCHW or NHWC memory order) into y (the same
// order); eps is the op's (MVN adds it to the standard deviation).
void run_channel_op(channel_op op, bool nhwc, const tensor_desc& xd, const tensor_desc& yd,
                    std::size_t C, float eps, const void* x, float* y) {
  const auto layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  simdnorm::plan p;
  if (op == channel_op::batch_norm_training) {
    simdnorm::batch_norm_params prm;
    prm.training = true;
    prm.layout = layout;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::batch_norm(xd, yd, prm, &p).ok());
    std::vector<float> rm(C, 0.f), rv(C, 1.f);
    std::int64_t batches = 0;
    simdnorm::batch_norm_args a;
    a.x = x;
    a.y = y;
    a.running_mean = rm.data();
    a.running_var = rv.data();
    a.num_batches_tracked = &batches;
    test::execute_checked(p, a);
    return;
  }
  if (op == channel_op::mean_variance_norm) {
    simdnorm::mean_variance_norm_params prm;
    prm.num_axes = 2;
    prm.axes[0] = 0;
    prm.axes[1] = nhwc ? 1 : 2;  // the spatial dim
    prm.eps = eps;
    REQUIRE(simdnorm::plan::mean_variance_norm(xd, yd, prm, &p).ok());
  } else if (op == channel_op::instance_norm) {
    simdnorm::instance_norm_params prm;
    prm.layout = layout;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::instance_norm(xd, yd, prm, &p).ok());
  } else {
    simdnorm::group_norm_params prm;
    prm.layout = layout;
    prm.eps = eps;
    REQUIRE(simdnorm::plan::group_norm(xd, yd, prm, &p).ok());
  }
  simdnorm::norm_args a;
  a.x = x;
  a.y = y;
  test::execute_checked(p, a);
}

// Each channel with its own mean and spread, so that squared deviations (or the sums, or the
// deviations themselves) overflow float, or the squares underflow, in every unit. Bounds:
// chref::centered_bound with the depth of the channel walk (channel_reference.hpp), plus, in
// units whose deviations may exceed FLT_MAX / 2 (the kernel then drops the center:
// unit_math.hpp's fold_unit), the rounding of x * scale and of the shift that holds the whole
// mean: u (|x| + 2 |mean|) rstd. MVN's rstd = 1 / (sqrt(var) + eps): its bound takes
// sigma = sqrt(var + eps^2), within a factor sqrt(2) of sqrt(var) + eps, which keeps it finite
// for constant units (bf16 rounds a unit near FLT_MAX with a spread of 1e33 to one value).
void check_channels(isa active, dtype xt, channel_op op, bool nhwc, std::size_t S,
                    channel_data kind, std::uint32_t seed) {
  const std::size_t N = 4, C = 17;
  CAPTURE(std::string(simdnorm::dtype_name(xt)));
  CAPTURE(int(op));
  CAPTURE(nhwc);
  CAPTURE(S);
  CAPTURE(int(kind));
  std::mt19937 rng(seed);
  std::normal_distribution<double> n01;
  std::uniform_real_distribution<double> f(0.5, 0.99), coin(0.0, 1.0);
  std::vector<float> x(N * C * S);  // logical NCHW
  for (std::size_t c = 0; c < C; ++c) {
    const double sign = c % 2 ? -1.0 : 1.0;
    double mean = sign * std::pow(10.0, 18.0 + c);
    double sd = std::min(std::max(std::fabs(mean) * 1e-2, 1e19), 1e33);
    if (kind == channel_data::near_max) mean = sign * 0.99 * FLT_MAX, sd = 1e33;
    if (kind == channel_data::wide_spreads)
      mean = sign * 3e37, sd = std::pow(10.0, 35.0 + 2.5 * double(c) / double(C - 1));
    if (kind == channel_data::tiny)
      mean = 0, sd = std::pow(10.0, -37.0 + 17.0 * double(c) / double(C - 1));
    const double positive = 0.05 + 0.9 * double(c) / double(C - 1);
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t s = 0; s < S; ++s)
        x[(n * C + c) * S + s] = kind == channel_data::both_signs
                                     ? float((coin(rng) < positive ? 1.0 : -1.0) * f(rng) * FLT_MAX)
                                     : float(mean + sd * n01(rng));
  }
  x = stored_as(xt, x);
  const auto shape = [&](dtype t) {
    return nhwc ? tensor_desc::contiguous({std::int64_t(N), std::int64_t(S), std::int64_t(C)}, t)
                : tensor_desc::contiguous({std::int64_t(N), std::int64_t(C), std::int64_t(S)}, t);
  };
  const std::vector<float> xin = nhwc ? chref::to_nhwc(x.data(), N, C, S) : x;
  test::typed_buffer xb(xt, xin.size(), 0);
  xb.set(xin);
  std::vector<float> y(xin.size(), 7.25f);
  const bool mvn = op == channel_op::mean_variance_norm;
  const float eps = kind == channel_data::tiny ? 0.f : mvn ? 1e-9f : 1e-5f;
  run_channel_op(op, nhwc, shape(xt), shape(dtype::f32), C, eps, xb.base, y.data());
  if (nhwc) y = chref::to_nchw(y.data(), N, C, S);
  const std::size_t lanes = simdnorm::isa_lanes(active);
  outcome o;
  const std::vector<std::vector<std::size_t>> units = units_of(op, N, C, S);
  for (std::size_t q = 0; q < units.size(); ++q) {
    std::vector<double> v;
    for (std::size_t i : units[q]) v.push_back(x[i]);
    const chref::unit_ref ur = chref::stats(v);
    const double d = chref::depth(v.size(), lanes, S);
    const double rstd = mvn ? 1.0 / (std::sqrt(ur.var) + eps) : 1.0 / std::sqrt(ur.var + eps);
    const bool uncentered = may_uncenter(ur.var * double(v.size()));
    for (std::size_t k = 0; k < v.size(); ++k) {
      const double want = (v[k] - ur.mean) * rstd;
      const double e_uncentered =
          uncentered ? u * (std::fabs(v[k]) + 2 * std::fabs(ur.mean)) * rstd : 0.0;
      const double got = y[units[q][k]];
      if (!(std::fabs(got - want) <=
            chref::centered_bound(d, ur, mvn ? double(eps) * eps : eps, v[k], 1, 0, want) +
                e_uncentered))
        o.fail("unit " + std::to_string(q) + ": got " + std::to_string(got) + " want " +
               std::to_string(want));
    }
  }
  CHECK_MESSAGE(o.bad == 0, o.first);
}

}  // namespace

TEST_CASE("channel ops: units whose deviations, squares or sums leave float match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 400;
    for (dtype t : x_types())
      for (channel_op op : {channel_op::batch_norm_training, channel_op::mean_variance_norm,
                            channel_op::instance_norm, channel_op::group_norm})
        for (bool nhwc : {false, true})
          for (std::size_t S : {std::size_t(49), std::size_t(144), std::size_t(2500)})
            for (channel_data kind :
                 {channel_data::large_means, channel_data::near_max, channel_data::wide_spreads,
                  channel_data::both_signs, channel_data::tiny})
              check_channels(i, t, op, nhwc, S, kind, seed++);
  });
}
