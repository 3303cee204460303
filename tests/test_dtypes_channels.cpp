// bf16 and f16 tensors in the channel ops (BatchNorm inference and training, GroupNorm,
// InstanceNorm, MeanVarianceNormalization): every pair of x and y types, on every runnable ISA,
// in NCHW, NHWC, NCHW dims with channels-last strides and [N, C], against float64 on values exactly
// representable in x's type (bound: the f32 op's, from channel_reference.hpp, plus the rounding of
// y's type), and against the f32 op: converting x to f32, running the f32 plan and rounding its y
// into y's type gives the same bits, and the same statistics (mean, rstd, running statistics),
// since the kernels read the 16-bit values exactly and count their chunks in elements. Shapes hit
// the vector tails, the short-plane and interleaved paths, long planes cut into pieces, the split
// schedule of few channels and the column splits; pointers are misaligned, same-type pairs also run
// in place, and f32 y from a 16-bit x takes the streaming stores.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "channel_reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;

const dtype kTypes[] = {dtype::f32, dtype::bf16, dtype::f16};

enum class op { bn_inference, bn_training, group_norm, instance_norm, mvn };
const op kOps[] = {op::bn_inference, op::bn_training, op::group_norm, op::instance_norm, op::mvn};
const char* op_name(op o) {
  static const char* const names[] = {"batch_norm inference", "batch_norm training", "group_norm",
                                      "instance_norm", "mean_variance_norm"};
  return names[int(o)];
}

// [N, C, S]; [N, S, C]; [N, C] (S = 1); [N, C, S] with channels-last strides (NCHW dims,
// NHWC memory, as PyTorch's channels_last)
enum class layout { nchw, nhwc, nc, nchw_strided };
const char* layout_name(layout l) {
  static const char* const names[] = {"nchw", "nhwc", "nc", "nchw with channels-last strides"};
  return names[int(l)];
}
bool nhwc_memory(layout l) { return l == layout::nhwc || l == layout::nchw_strided; }

/// One call: the op on a logical x[N][C][S] stored in `lay`, x of type xt and y of type yt.
struct ch_case {
  op o = op::bn_training;
  layout lay = layout::nchw;
  std::size_t N = 1, C = 1, S = 1, groups = 1;
  dtype xt = dtype::f32, yt = dtype::f32;
  std::size_t mis = 0;  // elements past a 64-byte boundary (y: mis + 1)
  bool in_place = false, relu = false, stream = false;
  simdnorm::stats_stage stage = simdnorm::stats_stage::full;
  simdnorm::moments* records = nullptr;  // moments: written; apply: read (units_of records)
  std::size_t numel() const { return N * C * S; }
};

/// What a call wrote, y back in logical NCHW order and as f32.
struct ch_out {
  std::vector<float> y, mean, rstd, rm, rv;
  std::int64_t batches = 0;
};

tensor_desc desc_of(const ch_case& c, dtype t) {
  const auto n = std::int64_t(c.N), ch = std::int64_t(c.C), s = std::int64_t(c.S);
  if (c.lay == layout::nc) return tensor_desc::contiguous({n, ch}, t);
  if (c.lay == layout::nhwc) return tensor_desc::contiguous({n, s, ch}, t);
  tensor_desc d = tensor_desc::contiguous({n, ch, s}, t);
  if (c.lay == layout::nchw_strided) d.strides[1] = 1, d.strides[2] = ch;
  return d;
}

/// Per-channel parameters of every call of a case: gamma, beta and the running statistics.
struct ch_params {
  std::vector<float> g, b, rm, rv;
  explicit ch_params(std::size_t C) : g(C), b(C), rm(C), rv(C) {
    test::fill_normal(g.data(), C, 11, 1.0, 0.5);
    test::fill_normal(b.data(), C, 12);
    test::fill_normal(rm.data(), C, 13);
    for (std::size_t k = 0; k < C; ++k) rv[k] = 0.25f + float(k % 7) * 0.5f;
  }
};

/// Statistics per unit: BatchNorm and MVN per channel, GroupNorm per (n, group), InstanceNorm
/// per (n, c).
std::size_t units_of(const ch_case& c) {
  switch (c.o) {
    case op::group_norm: return c.N * c.groups;
    case op::instance_norm: return c.N * c.C;
    default: return c.C;
  }
}
std::size_t unit_of(const ch_case& c, std::size_t n, std::size_t ch) {
  switch (c.o) {
    case op::group_norm: return n * c.groups + ch / (c.C / c.groups);
    case op::instance_norm: return n * c.C + ch;
    default: return ch;
  }
}

/// Runs the case with x = x_nchw (values exact in c.xt); REQUIREs success.
ch_out run(const ch_case& c, const ch_params& prm, const std::vector<float>& x_nchw) {
  const std::size_t N = c.N, C = c.C, S = c.S, n = c.numel();
  const std::vector<float> x_in =
      nhwc_memory(c.lay) ? chref::to_nhwc(x_nchw.data(), N, C, S) : x_nchw;
  test::typed_buffer x(c.xt, n, c.mis), y(c.yt, n, (c.mis + 1) % 4);
  x.set(x_in);
  const tensor_desc xd = desc_of(c, c.xt), yd = desc_of(c, c.yt);
  const simdnorm::store_policy stores =
      c.stream ? simdnorm::store_policy::streaming : simdnorm::store_policy::regular;
  const simdnorm::channel_layout cl =
      c.lay == layout::nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  ch_out out;
  out.rm = prm.rm, out.rv = prm.rv, out.batches = 3;
  out.mean.assign(units_of(c), -1.f), out.rstd.assign(units_of(c), -1.f);
  test::any_args a;
  a.x = x.base;
  a.y = c.in_place ? x.base : y.base;
  simdnorm::plan p;
  simdnorm::status s;
  switch (c.o) {
    case op::bn_inference:
    case op::bn_training: {
      simdnorm::batch_norm_params bp;
      bp.layout = cl, bp.stores = stores, bp.fuse_relu = c.relu, bp.stage = c.stage;
      bp.training = c.o == op::bn_training;
      if (bp.training) {
        a.gamma = prm.g.data(), a.beta = prm.b.data();
        a.running_mean = out.rm.data(), a.running_var = out.rv.data();
        a.num_batches_tracked = &out.batches;
      } else {
        bp.gamma = prm.g.data(), bp.beta = prm.b.data();
        bp.running_mean = prm.rm.data(), bp.running_var = prm.rv.data();
      }
      s = simdnorm::plan::batch_norm(xd, yd, bp, &p);
      break;
    }
    case op::group_norm: {
      simdnorm::group_norm_params gp;
      gp.num_groups = int(c.groups), gp.layout = cl, gp.stores = stores, gp.stage = c.stage;
      a.gamma = prm.g.data(), a.beta = prm.b.data();
      s = simdnorm::plan::group_norm(xd, yd, gp, &p);
      break;
    }
    case op::instance_norm: {
      simdnorm::instance_norm_params ip;
      ip.layout = cl, ip.stores = stores, ip.stage = c.stage;
      a.gamma = prm.g.data(), a.beta = prm.b.data();
      s = simdnorm::plan::instance_norm(xd, yd, ip, &p);
      break;
    }
    case op::mvn: {
      simdnorm::mean_variance_norm_params mp;
      mp.stores = stores, mp.stage = c.stage;
      // every dim but the channels: [N, C, S] {0, 2}, [N, S, C] {0, 1}, [N, C] {0}
      mp.num_axes = c.lay == layout::nc ? 1 : 2;
      mp.axes[0] = 0, mp.axes[1] = c.lay == layout::nhwc ? 1 : 2;
      s = simdnorm::plan::mean_variance_norm(xd, yd, mp, &p);
      break;
    }
  }
  REQUIRE_MESSAGE(s.ok(), s.message());
  if (c.o == op::bn_training || c.o == op::group_norm || c.o == op::instance_norm)
    a.mean = out.mean.data(), a.rstd = out.rstd.data();
  if (c.stage == simdnorm::stats_stage::moments) a.moments_out = c.records;
  if (c.stage == simdnorm::stats_stage::apply) a.moments_in = c.records;
  s = test::execute_any(p, a);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const std::vector<float> got = c.in_place ? x.get(n) : y.get(n);
  out.y = nhwc_memory(c.lay) ? chref::to_nchw(got.data(), N, C, S) : got;
  CHECK(x.raw.guards_intact());
  CHECK(y.raw.guards_intact());
  if (!c.in_place) CHECK(test::bitwise_equal(x.get(n).data(), x_in.data(), n));  // x unchanged
  return out;
}

/// x[N][C][S], channel c ~ N(mu_c, sd_c), rounded to t (so exactly representable in it).
std::vector<float> make_x(const ch_case& c, std::uint32_t seed) {
  std::vector<float> x(c.numel());
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, 1);
  for (std::size_t n = 0; n < c.N; ++n)
    for (std::size_t ch = 0; ch < c.C; ++ch) {
      const double mu = 0.5 * double(ch % 5) - 1.0, sd = 0.5 + 0.25 * double(ch % 3);
      for (std::size_t i = 0; i < c.S; ++i) x[(n * c.C + ch) * c.S + i] = float(mu + sd * d(rng));
    }
  test::typed_buffer t(c.xt, x.size(), 0);
  t.set(x);
  return t.get(x.size());
}

std::string describe(const ch_case& c) {
  return std::string(op_name(c.o)) + " " + layout_name(c.lay) + " N=" + std::to_string(c.N) +
         " C=" + std::to_string(c.C) + " S=" + std::to_string(c.S) + " x " +
         simdnorm::dtype_name(c.xt) + " y " + simdnorm::dtype_name(c.yt) +
         (c.in_place ? " in place" : "") + (c.stream ? " streaming" : "");
}

/// The same call on the f32 tensor of the same values, y rounded into c.yt: bitwise c's y, and
/// the same statistics.
void check_same_as_f32(const ch_case& c, const ch_params& prm, const std::vector<float>& x,
                       const ch_out& got) {
  ch_case f = c;
  f.xt = f.yt = dtype::f32;
  f.mis = 0, f.in_place = false, f.stream = false;
  const ch_out want = run(f, prm, x);
  test::typed_buffer r(c.yt, want.y.size(), 0);
  r.set(want.y);
  const std::vector<float> y_want = r.get(want.y.size());
  std::size_t first = y_want.size();
  for (std::size_t i = 0; i < y_want.size() && first == y_want.size(); ++i)
    if (std::memcmp(&y_want[i], &got.y[i], sizeof(float)) != 0) first = i;
  CHECK_MESSAGE(first == y_want.size(), "y differs from the f32 op's at "
                                            << first << ": got " << got.y[first] << " want "
                                            << y_want[first]);
  CHECK(test::bitwise_equal(got.mean.data(), want.mean.data(), want.mean.size()));
  CHECK(test::bitwise_equal(got.rstd.data(), want.rstd.data(), want.rstd.size()));
  CHECK(test::bitwise_equal(got.rm.data(), want.rm.data(), want.rm.size()));
  CHECK(test::bitwise_equal(got.rv.data(), want.rv.data(), want.rv.size()));
  CHECK(got.batches == want.batches);
}

/// y against float64: the f32 op's bound (channel_reference.hpp, the longest accumulation
/// chain of any path) plus half an ulp of y's type.
void check_oracle(simdnorm::isa active, const ch_case& c, const ch_params& prm,
                  const std::vector<float>& x, const ch_out& got) {
  const std::size_t N = c.N, C = c.C, S = c.S;
  std::vector<std::vector<double>> vals(units_of(c));
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t ch = 0; ch < C; ++ch)
      for (std::size_t i = 0; i < S; ++i)
        vals[unit_of(c, n, ch)].push_back(x[(n * C + ch) * S + i]);
  std::vector<chref::unit_ref> st(vals.size());
  for (std::size_t u = 0; u < vals.size(); ++u) st[u] = chref::stats(vals[u]);
  const double uo = test::unit_roundoff(c.yt), sub = test::subnormal_half_ulp(c.yt);
  const double d = chref::depth(vals[0].size(), test::lanes(active), 1);
  const bool mvn = c.o == op::mvn, affine = !mvn;
  const double eps = mvn ? 1e-18 : 1e-5;  // MVN: sigma = sqrt(var) + 1e-9 (test_group_norm.cpp)
  test::failures bad;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t ch = 0; ch < C; ++ch) {
      const std::size_t u = unit_of(c, n, ch);
      const double g = affine ? prm.g[ch] : 1.0, b = affine ? prm.b[ch] : 0.0;
      for (std::size_t i = 0; i < S; ++i) {
        const std::size_t k = (n * C + ch) * S + i;
        const double xv = x[k];
        double want, tol;
        if (c.o == op::bn_inference) {
          const double sc = g / std::sqrt(double(prm.rv[ch]) + 1e-5f);
          const double sh = b - double(prm.rm[ch]) * sc;
          want = xv * sc + sh;
          tol = chref::folded_bound(xv, sc, sh, want);
        } else {
          const double r = mvn ? 1.0 / (std::sqrt(st[u].var) + 1e-9)
                               : 1.0 / std::sqrt(st[u].var + double(1e-5f));
          want = (xv - st[u].mean) * r * g + b;
          tol = chref::centered_bound(d, st[u], eps, xv, g, b, want);
        }
        if (c.relu) want = std::max(want, 0.0);
        tol = tol * (1 + uo) + uo * std::fabs(want) + sub;
        bad.expect(std::fabs(got.y[k] - want) <= tol, [&] {
          return "n " + std::to_string(n) + " c " + std::to_string(ch) + " s " + std::to_string(i) +
                 ": got " + std::to_string(got.y[k]) + " want " + std::to_string(want) + " tol " +
                 std::to_string(tol);
        });
      }
    }
  CHECK_MESSAGE(bad.none(), bad.report());
}

struct shape3 {
  std::size_t N, C, S;
};

// Short planes with tails (7, 49), 16 channels of long planes (3136: chunks of 2048, the
// interleaved units), few channels of much data (the split schedule: parts over N, or pieces
// of one 40000-element plane; BatchNorm inference cuts it into pieces too; NHWC: the column
// splits).
const shape3 kPlanes[] = {{2, 5, 7}, {3, 17, 49}, {1, 16, 3136}, {2, 2, 9000}, {1, 1, 40000}};
// [N, C]: channels with a tail, few channels over many rows (column splits).
const shape3 kRowsNC[] = {{37, 17, 1}, {3000, 3, 1}, {9, 1, 1}};

/// Every shape and layout of op o with x of type xt and y of type yt; f32 / f32 is the f32
/// tests' job. `v` rotates the variants (misalignment, in place, ReLU, streaming).
void sweep(simdnorm::isa active, op o, dtype xt, dtype yt, std::size_t& v) {
  for (layout lay : {layout::nchw, layout::nhwc, layout::nc, layout::nchw_strided}) {
    if (lay == layout::nc && o == op::instance_norm) continue;  // needs a spatial dim
    for (const shape3& sh : lay == layout::nc
                                ? std::vector<shape3>(std::begin(kRowsNC), std::end(kRowsNC))
                                : std::vector<shape3>(std::begin(kPlanes), std::end(kPlanes))) {
      if (test::quick() && sh.N * sh.C * sh.S > 20000) continue;
      if (o == op::bn_training && sh.N * sh.S < 2) continue;
      ch_case c;
      c.o = o, c.lay = lay, c.N = sh.N, c.C = sh.C, c.S = sh.S, c.xt = xt, c.yt = yt;
      c.groups = c.C % 4 == 0 ? 4 : 1;  // GroupNorm: 4 groups of 4 channels, or one of all
      c.mis = v % 3;
      c.in_place = xt == yt && v % 3 == 1;
      c.relu = (o == op::bn_inference || o == op::bn_training) && v % 2 == 0;
      c.stream = v % 4 == 3;
      ++v;
      CAPTURE(describe(c));
      const ch_params prm(c.C);
      const std::vector<float> x = make_x(c, std::uint32_t(v));
      const ch_out got = run(c, prm, x);
      check_oracle(active, c, prm, x, got);
      check_same_as_f32(c, prm, x, got);
    }
  }
}

}  // namespace

TEST_CASE("dtypes: channel ops with every pair of x and y types match float64 and the f32 op" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::size_t v = 0;
    for (op o : kOps)
      for (dtype xt : kTypes)
        for (dtype yt : kTypes)
          if (xt != dtype::f32 || yt != dtype::f32) sweep(i, o, xt, yt, v);
  });
}

// A NaN in channel 1 and an Inf in channel 2: with batch statistics they poison their own
// unit only (the other channels stay finite), in inference their own element only; every type
// pair gives the f32 op's bits (NaN quiet, Inf kept, f16 beyond 65504 Inf).
TEST_CASE("dtypes: NaN and Inf channels stay in their unit, as in f32" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa) {
    for (op o : kOps)
      for (layout lay : {layout::nchw, layout::nhwc})
        for (dtype xt : kTypes)
          for (dtype yt : kTypes) {
            if (xt == dtype::f32 && yt == dtype::f32) continue;
            ch_case c;
            c.o = o, c.lay = lay, c.N = 2, c.C = 4, c.S = 21, c.xt = xt, c.yt = yt;
            c.groups = 4;  // GroupNorm: a group per channel
            CAPTURE(describe(c));
            const ch_params prm(c.C);
            std::vector<float> x = make_x(c, 99);
            x[1 * c.S + 3] = std::numeric_limits<float>::quiet_NaN();  // n 0, channel 1
            x[(c.C + 2) * c.S + 5] = -INFINITY;                        // n 1, channel 2
            const ch_out got = run(c, prm, x);
            check_same_as_f32(c, prm, x, got);
            const bool batch_stats = o != op::bn_inference;
            for (std::size_t n = 0; n < c.N; ++n)
              for (std::size_t ch = 0; ch < c.C; ++ch) {
                // per-sample units (GroupNorm, InstanceNorm) are poisoned in their sample only
                const bool per_sample = o == op::group_norm || o == op::instance_norm;
                const bool nan_unit = ch == 1 && (!per_sample || n == 0);
                const bool inf_unit = ch == 2 && (!per_sample || n == 1);
                for (std::size_t i = 0; i < c.S; ++i) {
                  const std::size_t k = (n * c.C + ch) * c.S + i;
                  if (batch_stats && (nan_unit || inf_unit))
                    CHECK(std::isnan(got.y[k]));
                  else if (!std::isnan(x[k]) && std::isfinite(x[k]))
                    CHECK(std::isfinite(got.y[k]));
                }
              }
          }
  });
}

// Split statistics (stats_stage): the moments stage of a 16-bit x records exactly the f32
// tensor's moments, and the apply stage from those records gives the f32 op's y rounded once.
TEST_CASE("dtypes: split statistics of 16-bit tensors give the f32 op's records and y" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa) {
    const dtype pairs[][2] = {
        {dtype::bf16, dtype::bf16}, {dtype::f16, dtype::f32}, {dtype::f32, dtype::f16}};
    for (op o : {op::bn_training, op::group_norm, op::instance_norm, op::mvn})
      for (layout lay : {layout::nchw, layout::nhwc})
        for (const auto& t : pairs) {
          ch_case c;
          c.o = o, c.lay = lay, c.N = 2, c.C = 8, c.S = 300, c.groups = 4;
          c.xt = t[0], c.yt = t[1], c.mis = 1;
          CAPTURE(describe(c));
          const ch_params prm(c.C);
          const std::vector<float> x = make_x(c, 7);
          std::vector<simdnorm::moments> r16(units_of(c)), r32(units_of(c));
          c.stage = simdnorm::stats_stage::moments;
          c.records = r16.data();
          run(c, prm, x);
          ch_case f = c;
          f.xt = f.yt = dtype::f32;
          f.records = r32.data();
          run(f, prm, x);
          for (std::size_t u = 0; u < r16.size(); ++u) {
            CHECK(r16[u].count == r32[u].count);
            CHECK(std::memcmp(&r16[u].mean, &r32[u].mean, sizeof(double)) == 0);
            CHECK(std::memcmp(&r16[u].m2, &r32[u].m2, sizeof(double)) == 0);
          }
          c.stage = simdnorm::stats_stage::apply;
          check_same_as_f32(c, prm, x, run(c, prm, x));
        }
  });
}
