// Static 8-bit outputs of the channel ops (BatchNorm inference and training, GroupNorm,
// InstanceNorm; quant_params per_tensor and per_channel; y of dtype i8, u8 or f8e4m3fn): the
// codes against the reference quantizer applied to the float64 reference y, exactly except where
// y sits within its f32 error bound of a rounding boundary (one step either way, counted and
// bounded); NCHW and NHWC, every ISA; the fused ReLU as max(code, zero point); the errors, which
// write nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "channel_reference.hpp"
#include "quant_reference.hpp"
#include "test_util.hpp"

namespace {

using qref::ordinal;
using qref::ref_code;
using simdnorm::dtype;
using simdnorm::quant_scaling;
using simdnorm::tensor_desc;

enum class ch_op { bn_inference, bn_training, group_norm, instance_norm };

const char* name_of(ch_op op) {
  switch (op) {
    case ch_op::bn_inference: return "batch_norm inference";
    case ch_op::bn_training: return "batch_norm training";
    case ch_op::group_norm: return "group_norm";
    case ch_op::instance_norm: return "instance_norm";
  }
  return "?";
}

struct channel_case {
  ch_op op = ch_op::bn_inference;
  simdnorm::channel_layout layout = simdnorm::channel_layout::nchw;
  dtype y = dtype::i8;
  quant_scaling scaling = quant_scaling::per_channel;
  std::size_t N = 3, C = 8, S = 50;
  bool relu = false;
  int relu_zero_point = 0;  ///< with relu: every channel's zero point
};

struct tally {
  std::size_t near = 0, elements = 0;
};

// Parameters of the error table (whose mutations are plain functions).
const float kBadScales[4] = {1.f, 1.f, 0.f, 1.f};
const float kScales[4] = {0.1f, 0.1f, 0.1f, 0.1f};
const std::int32_t kZeroPoints[4] = {0, 3, 0, 0};

void check_channel_quant(const channel_case& c, std::uint32_t seed, simdnorm::isa active,
                         tally& t) {
  CAPTURE(std::string(name_of(c.op)));
  CAPTURE(int(c.layout));
  CAPTURE(std::string(simdnorm::dtype_name(c.y)));
  CAPTURE(int(c.scaling));
  CAPTURE(c.S);
  CAPTURE(c.relu);
  const std::size_t N = c.N, C = c.C, S = c.S, n = N * C * S, G = 4;
  const bool nchw = c.layout == simdnorm::channel_layout::nchw;
  std::vector<float> x(n), gamma(C), beta(C), rmean(C), rvar(C), scales(C);
  std::vector<std::int32_t> zps(C);
  test::fill_normal(x.data(), n, seed, 0.5, 2.0);
  test::fill_normal(gamma.data(), C, seed + 1, 1.0, 0.5);
  test::fill_normal(beta.data(), C, seed + 2, 0.0, 0.5);
  test::fill_normal(rmean.data(), C, seed + 3, 0.5, 0.5);
  for (std::size_t k = 0; k < C; ++k) {
    rvar[k] = 1.f + float(k % 3);
    scales[k] = c.y == dtype::f8e4m3fn ? 0.002f * float(1 + k % 4) : 0.015f * float(1 + k % 3);
    zps[k] = c.relu             ? c.relu_zero_point
             : c.y == dtype::i8 ? int(k % 7) - 3
             : c.y == dtype::u8 ? 120 + int(k % 5)
                                : 0;
  }
  simdnorm::quant_params q;
  q.scaling = c.scaling;
  if (c.scaling == quant_scaling::per_tensor) {
    q.scale = scales[0];
    q.zero_point = zps[0];
    std::fill(scales.begin(), scales.end(), scales[0]);
    std::fill(zps.begin(), zps.end(), zps[0]);
  } else {
    q.channel_scales = scales.data();
    q.channel_zero_points = zps.data();
  }
  const std::vector<float> xl = nchw ? x : chref::to_nhwc(x.data(), N, C, S);
  const std::vector<std::int64_t> shape =
      nchw ? std::vector<std::int64_t>{std::int64_t(N), std::int64_t(C), std::int64_t(S)}
           : std::vector<std::int64_t>{std::int64_t(N), std::int64_t(S), std::int64_t(C)};
  const tensor_desc xd = tensor_desc::contiguous({shape[0], shape[1], shape[2]});
  const tensor_desc yd = tensor_desc::contiguous({shape[0], shape[1], shape[2]}, c.y);
  std::vector<std::uint8_t> y(n + 64, 0xa5);
  const float eps = 1e-5f;
  simdnorm::norm_args a;  // BatchNorm inference takes x and y only (the rest is in the plan)
  a.x = xl.data();
  a.y = y.data();
  if (c.op != ch_op::bn_inference) a.gamma = gamma.data(), a.beta = beta.data();
  simdnorm::status s;
  if (c.op == ch_op::group_norm) {
    simdnorm::group_norm_params gp;
    gp.num_groups = int(G);
    gp.layout = c.layout;
    gp.eps = eps;
    gp.quant = q;
    s = simdnorm::group_norm(xd, yd, gp, a);
  } else if (c.op == ch_op::instance_norm) {
    simdnorm::instance_norm_params ip;
    ip.layout = c.layout;
    ip.eps = eps;
    ip.quant = q;
    s = simdnorm::instance_norm(xd, yd, ip, a);
  } else {
    simdnorm::batch_norm_params bp;
    bp.layout = c.layout;
    bp.eps = eps;
    bp.fuse_relu = c.relu;
    bp.quant = q;
    bp.training = c.op == ch_op::bn_training;
    if (!bp.training) {
      bp.running_mean = rmean.data();
      bp.running_var = rvar.data();
      bp.gamma = gamma.data();
      bp.beta = beta.data();
    }
    s = simdnorm::batch_norm(xd, yd, bp, a);
  }
  REQUIRE_MESSAGE(s.ok(), s.message());

  // The float64 y and its f32 bound, in logical NCHW order, then the codes.
  const std::size_t lanes = test::lanes(active);
  test::failures bad;
  for (std::size_t b = 0; b < N; ++b)
    for (std::size_t k = 0; k < C; ++k) {
      chref::unit_ref st;
      if (c.op == ch_op::bn_training)
        st = chref::stats(chref::channel_values(x.data(), N, C, S, k));
      if (c.op == ch_op::group_norm)
        st = chref::stats(chref::group_values(x.data(), C, S, G, b, k / (C / G)));
      if (c.op == ch_op::instance_norm)
        st = chref::stats(chref::group_values(x.data(), C, S, C, b, k));
      const double d = chref::depth(st.n, lanes, nchw ? S : 1);
      const double inv = double(1.f / scales[k]);
      for (std::size_t i = 0; i < S; ++i) {
        const double xv = x[(b * C + k) * S + i];
        double want, bound;
        if (c.op == ch_op::bn_inference) {
          const double a = double(gamma[k]) / std::sqrt(double(rvar[k]) + double(eps));
          const double sh = double(beta[k]) - double(rmean[k]) * a;
          want = xv * a + sh;
          bound = chref::folded_bound(xv, a, sh, want);
        } else {
          want = (xv - st.mean) / std::sqrt(st.var + double(eps)) * gamma[k] + beta[k];
          bound = chref::centered_bound(d, st, eps, xv, gamma[k], beta[k], want);
        }
        if (c.relu) want = std::max(want, 0.0);
        // v = y / scale; the fold rounds y * inv + zp's scale and shift once more each
        const double v = want * inv, zp = zps[k];
        const double vb = bound * inv + 4 * ref::u32 * (std::fabs(v) + std::fabs(zp)) + 1e-12;
        const std::size_t at = nchw ? (b * C + k) * S + i : (b * S + i) * C + k;
        const int o = ordinal(c.y, y[at]), o_ref = ordinal(c.y, ref_code(c.y, v, zps[k]));
        const int o_lo = ordinal(c.y, ref_code(c.y, v - vb, zps[k]));
        const int o_hi = ordinal(c.y, ref_code(c.y, v + vb, zps[k]));
        ++t.elements;
        if (o != o_ref) ++t.near;
        bad.expect(
            o >= std::min(o_lo, o_hi) && o <= std::max(o_lo, o_hi) && std::abs(o - o_ref) <= 1,
            [&] {
              return "code (" + std::to_string(b) + ", " + std::to_string(k) + ", " +
                     std::to_string(i) + "): got " + std::to_string(o) + " want " +
                     std::to_string(o_ref) + " (y " + std::to_string(want) + ")";
            });
      }
    }
  for (std::size_t i = n; i < y.size(); ++i)
    bad.expect(y[i] == 0xa5, [&] { return "guard written"; });
  CHECK_MESSAGE(bad.none(), bad.report());
}

}  // namespace

TEST_CASE("quantize channels: codes match the reference quantizer of the float64 y (every ISA)") {
  tally t;
  test::for_each_isa([&](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (ch_op op :
         {ch_op::bn_inference, ch_op::bn_training, ch_op::group_norm, ch_op::instance_norm})
      for (auto layout : {simdnorm::channel_layout::nchw, simdnorm::channel_layout::nhwc})
        for (dtype yt : {dtype::i8, dtype::u8, dtype::f8e4m3fn})
          for (auto scaling : {quant_scaling::per_tensor, quant_scaling::per_channel})
            for (std::size_t S : {7, 50}) {
              channel_case c;
              c.op = op;
              c.layout = layout;
              c.y = yt;
              c.scaling = scaling;
              c.S = S;
              check_channel_quant(c, seed += 8, i, t);
            }
  });
  MESSAGE("boundary cases: " << t.near << " of " << t.elements << " codes");
  CHECK(t.near * 200 <= t.elements);
}

TEST_CASE("quantize channels: fused ReLU is max(code, zero point) (every ISA)") {
  // The lowest code as zero point (the saturation alone would do), i8's symmetric 0 (oneDNN's
  // s8 output of a conv + BN + ReLU block), a mid-range u8 one, and fp8's 0; the scales per
  // tensor or per channel (the zero point one for all).
  const struct {
    dtype y;
    int zero_point;
  } formats[] = {
      {dtype::u8, 0}, {dtype::i8, -128}, {dtype::i8, 0}, {dtype::u8, 128}, {dtype::f8e4m3fn, 0}};
  tally t;
  test::for_each_isa([&](simdnorm::isa i) {
    std::uint32_t seed = 100;
    for (ch_op op : {ch_op::bn_inference, ch_op::bn_training})
      for (auto layout : {simdnorm::channel_layout::nchw, simdnorm::channel_layout::nhwc})
        for (const auto& f : formats)
          for (auto scaling : {quant_scaling::per_tensor, quant_scaling::per_channel}) {
            channel_case c;
            c.op = op;
            c.layout = layout;
            c.y = f.y;
            c.scaling = scaling;
            c.relu = true;
            c.relu_zero_point = f.zero_point;
            CAPTURE(f.zero_point);
            check_channel_quant(c, seed += 8, i, t);
          }
  });
  CHECK(t.near * 200 <= t.elements);
}

TEST_CASE("quantize channels: errors are clear and write nothing") {
  const std::size_t N = 2, C = 4, S = 6, n = N * C * S;
  std::vector<float> x(n, 1.f), rm(C, 0.f), rv(C, 1.f);
  for (std::size_t i = 0; i < n; ++i) x[i] = float(i % 5);
  std::vector<std::uint8_t> y(n, 0xa5);
  struct row {
    const char* what;
    int op;  // 0 BatchNorm inference, 1 GroupNorm, 2 mean_variance_norm
    dtype y;
    void (*mutate)(simdnorm::quant_params&, bool& relu);
    simdnorm::status_code code;
    const char* message;
  } table[] = {
      {"dynamic scales", 0, dtype::i8, [](simdnorm::quant_params&, bool&) {},
       simdnorm::status_code::invalid_argument, "needs static scales"},
      {"per channel without scales", 1, dtype::u8,
       [](simdnorm::quant_params& q, bool&) { q.scaling = quant_scaling::per_channel; },
       simdnorm::status_code::invalid_argument, "quant.channel_scales is null"},
      {"a zero scale in channel 2", 0, dtype::i8,
       [](simdnorm::quant_params& q, bool&) {
         q.scaling = quant_scaling::per_channel;
         q.channel_scales = kBadScales;
       },
       simdnorm::status_code::invalid_argument, "channel 2"},
      {"zero point out of range", 1, dtype::i8,
       [](simdnorm::quant_params& q, bool&) {
         q.scaling = quant_scaling::per_tensor;
         q.zero_point = 200;
       },
       simdnorm::status_code::invalid_argument, "must be in [-128, 127]"},
      {"relu with zero points that differ", 0, dtype::u8,
       [](simdnorm::quant_params& q, bool& relu) {
         q.scaling = quant_scaling::per_channel;
         q.channel_scales = kScales;
         q.channel_zero_points = kZeroPoints;
         relu = true;
       },
       simdnorm::status_code::invalid_argument, "channel 0 has 0, channel 1 3"},
      {"block", 1, dtype::u8,
       [](simdnorm::quant_params& q, bool&) {
         q.scaling = quant_scaling::per_tensor;
         q.block = 32;
       },
       simdnorm::status_code::invalid_argument, "row ops'"},
      {"quant with a float y", 0, dtype::f32,
       [](simdnorm::quant_params& q, bool&) { q.scaling = quant_scaling::per_tensor; },
       simdnorm::status_code::invalid_argument, "quant applies to an 8-bit y"},
      {"mean_variance_norm into int8", 2, dtype::i8, [](simdnorm::quant_params&, bool&) {},
       simdnorm::status_code::unsupported_dtype, "static scales"},
  };
  for (const row& r : table) {
    CAPTURE(std::string(r.what));
    const tensor_desc xd = tensor_desc::contiguous({std::int64_t(N), std::int64_t(C), 2, 3});
    const tensor_desc yd = tensor_desc::contiguous({std::int64_t(N), std::int64_t(C), 2, 3}, r.y);
    simdnorm::quant_params q;
    bool relu = false;
    r.mutate(q, relu);
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    simdnorm::status s;
    if (r.op == 0) {
      simdnorm::batch_norm_params bp;
      bp.running_mean = rm.data();
      bp.running_var = rv.data();
      bp.fuse_relu = relu;
      bp.quant = q;
      s = simdnorm::batch_norm(xd, yd, bp, a);
    } else if (r.op == 1) {
      simdnorm::group_norm_params gp;
      gp.num_groups = 2;
      gp.quant = q;
      s = simdnorm::group_norm(xd, yd, gp, a);
    } else {
      s = simdnorm::mean_variance_norm(xd, yd, {}, a);
    }
    CHECK(s.code() == r.code);
    CHECK_MESSAGE(std::string(s.message()).find(r.message) != std::string::npos, s.message());
  }
  for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == 0xa5);
}
