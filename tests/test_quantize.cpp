// Quantized outputs of LayerNorm and RMSNorm (quant_params, y of dtype i8, u8 or f8e4m3fn) and
// the amax side output: the codes against a reference quantizer applied to the float64
// reference y, exactly except where y sits within its f32 error bound of a rounding boundary
// (those are counted and bounded); dynamic scales per row and per block, symmetric and
// asymmetric (with zero points), static scale and zero point;
// every ISA; tails, padded rows, gate and residual add before the quantizer; constant rows,
// NaN rows; all 256 fp8 codes through simdnorm::convert; the errors, which write nothing.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "quant_reference.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace {

using qref::f8_code;
using qref::f8_value;
using qref::lowest_code;
using qref::ordinal;
using qref::ref_code;
using simdnorm::dtype;
using simdnorm::tensor_desc;

// ---- one quantized run -----------------------------------------------------------------------

struct quant_case {
  bool rms = true;
  dtype y = dtype::i8;
  std::size_t rows = 6, cols = 64, pad = 0;
  simdnorm::quant_params q;
  bool gate = false, residual = false, amax = false;
};

/// Boundary cases (allowed one-step differences) and elements of all runs.
struct tally {
  std::size_t near = 0, elements = 0;
};

void check_quantized(const quant_case& c, std::uint32_t seed, simdnorm::isa active, tally& t) {
  CAPTURE(std::string(c.rms ? "rms_norm" : "layer_norm"));
  CAPTURE(std::string(simdnorm::dtype_name(c.y)));
  CAPTURE(c.cols);
  CAPTURE(c.q.block);
  CAPTURE(int(c.q.scaling));
  CAPTURE(c.gate);
  CAPTURE(c.residual);
  const std::size_t stride = c.cols + c.pad, n = c.rows * stride;
  std::vector<float> x(n), r(n), z(n), g(c.cols), b(c.cols), h(n);
  test::fill_normal(x.data(), n, seed, 0.0, 1.0);
  test::fill_normal(r.data(), n, seed + 1, 0.0, 1.0);
  test::fill_normal(z.data(), n, seed + 2, 0.0, 2.0);
  test::fill_normal(g.data(), c.cols, seed + 3, 1.0, 0.5);
  test::fill_normal(b.data(), c.cols, seed + 4, 0.0, 0.5);
  for (std::size_t i = 0; i < n; ++i) h[i] = c.residual ? x[i] + r[i] : x[i];
  std::vector<std::uint8_t> y(n + 64, 0xa5);  // 64 guard bytes after the tensor
  const std::size_t scales_per_row = c.q.block != 0 ? c.cols / std::size_t(c.q.block) : 1;
  std::vector<float> scales(c.rows * scales_per_row + 1, -1.f), amax(c.rows + 1, -1.f);
  std::vector<std::int32_t> zero_points(c.rows * scales_per_row + 1, -1000);

  tensor_desc xd = tensor_desc::contiguous({std::int64_t(c.rows), std::int64_t(c.cols)});
  tensor_desc yd = tensor_desc::contiguous({std::int64_t(c.rows), std::int64_t(c.cols)}, c.y);
  xd.strides[0] = yd.strides[0] = std::int64_t(stride);
  simdnorm::plan p;
  simdnorm::status s;
  if (c.rms) {
    simdnorm::rms_norm_params rp;
    rp.quant = c.q;
    rp.quant.row_amax = c.amax;
    s = simdnorm::plan::rms_norm(xd, yd, rp, &p);
  } else {
    simdnorm::layer_norm_params lp;
    lp.quant = c.q;
    lp.quant.row_amax = c.amax;
    s = simdnorm::plan::layer_norm(xd, yd, lp, &p);
  }
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(p.kernel_isa() == active);
  test::any_args a;
  a.x = x.data();
  a.y = y.data();
  a.gamma = g.data();
  a.beta = c.rms ? nullptr : b.data();
  a.gate = c.gate ? z.data() : nullptr;
  std::vector<float> hout(n);
  if (c.residual) {
    a.residual = r.data();
    a.residual_out = hout.data();
  }
  const bool asymmetric = c.q.scaling == simdnorm::quant_scaling::dynamic_asymmetric;
  const bool dynamic = asymmetric || c.q.scaling == simdnorm::quant_scaling::dynamic;
  a.y_scale = dynamic ? scales.data() : nullptr;
  a.y_zero_point = asymmetric ? zero_points.data() : nullptr;
  a.amax = c.amax ? amax.data() : nullptr;
  s = c.rms ? p.execute(test::as<simdnorm::rms_norm_args>(a))
            : p.execute(test::as<simdnorm::layer_norm_args>(a));
  REQUIRE_MESSAGE(s.ok(), s.message());

  const double depth = ref::accumulation_depth(c.cols, test::lanes(active));
  const double qmax = c.y == dtype::i8 ? 127 : 448;
  test::failures bad;
  std::vector<double> want(c.cols), bound(c.cols);
  for (std::size_t k = 0; k < c.rows; ++k) {
    const float* hr = h.data() + k * stride;
    // y in float64 and its f32 error bound per element (those of test_residual.cpp, and the
    // gate's of test_fusions.cpp)
    if (c.rms) {
      ref::rms_norm_row(hr, c.cols, g.data(), 1e-6, want.data());
      for (std::size_t i = 0; i < c.cols; ++i) {
        if (c.gate) {
          const double zz = z[k * stride + i];
          want[i] *= zz / (1 + std::exp(-zz));
        }
        bound[i] = (depth / 2 + 10) * ref::u32 * std::fabs(want[i]) + 1e-30;
      }
    } else {
      ref::row_stats st;
      ref::layer_norm_row(hr, c.cols, g.data(), b.data(), 1e-5, want.data(), &st);
      double s_max = 0;
      for (std::size_t i = 0; i < c.cols; ++i)
        s_max = std::max(s_max, std::fabs(hr[i] - hr[0]) / std::sqrt(st.var + 1e-5));
      for (std::size_t i = 0; i < c.cols; ++i)
        bound[i] = ref::layer_norm_bound(depth, (hr[i] - st.mean) / std::sqrt(st.var + 1e-5), s_max,
                                         g[i], b[i], want[i]);
    }
    const std::size_t seg = c.q.block != 0 ? std::size_t(c.q.block) : c.cols;
    double row_amax = 0, row_amax_bound = 0;
    for (std::size_t s0 = 0; s0 < c.cols; s0 += seg) {
      // max |y| of the reference, and the intervals holding the f32 min(0, min y) and
      // max(0, max y) (each y within its bound)
      double am = 0, am_bound = 0, lo_min = 0, lo_max = 0, hi_min = 0, hi_max = 0;
      for (std::size_t i = s0; i < s0 + seg; ++i) {
        if (std::fabs(want[i]) > am) am = std::fabs(want[i]), am_bound = bound[i];
        lo_min = std::min(lo_min, want[i] - bound[i]);
        lo_max = std::min(lo_max, want[i] + bound[i]);
        hi_min = std::max(hi_min, want[i] - bound[i]);
        hi_max = std::max(hi_max, want[i] + bound[i]);
      }
      if (am > row_amax) row_amax = am, row_amax_bound = am_bound;
      float inv = 1.f / c.q.scale;
      int zp = c.q.zero_point;
      if (asymmetric) {
        // scale = (hi - lo) / 255 for ends within those intervals (two f32 roundings); the
        // zero point the code nearest lowest - lo / scale, with the scale as written
        const std::size_t at = k * scales_per_row + s0 / seg;
        const float scale = scales[at];
        const double w_min = (hi_min - lo_max) * (1 - 2 * ref::u32) / 255;
        const double w_max = (hi_max - lo_min) * (1 + 2 * ref::u32) / 255;
        bad.expect(scale >= w_min && scale <= w_max, [&] {
          return "scale of row " + std::to_string(k) + " at " + std::to_string(s0) + ": " +
                 std::to_string(scale) + " want in [" + std::to_string(w_min) + ", " +
                 std::to_string(w_max) + "]";
        });
        const double base = lowest_code(c.y),
                     slack = 0.5 + 1e-4;  // + the f32 rounding of lo / scale
        zp = zero_points[at];
        bad.expect(zp >= base - lo_max / scale - slack && zp <= base - lo_min / scale + slack, [&] {
          return "zero point of row " + std::to_string(k) + " at " + std::to_string(s0) + ": " +
                 std::to_string(zp) + " want in [" + std::to_string(base - lo_max / scale) + ", " +
                 std::to_string(base - lo_min / scale) + "]";
        });
        inv = 1.f / scale;
      } else if (dynamic) {
        const float scale = scales[k * scales_per_row + s0 / seg];
        bad.expect(std::fabs(scale - am / qmax) <= (am_bound + 2 * ref::u32 * am) / qmax, [&] {
          return "scale of row " + std::to_string(k) + " at " + std::to_string(s0) + ": " +
                 std::to_string(scale) + " want " + std::to_string(am / qmax);
        });
        inv = 1.f / scale;
        zp = 0;
      }
      for (std::size_t i = s0; i < s0 + seg; ++i) {
        const unsigned got = y[k * stride + i];
        const double v = want[i] * inv, vb = bound[i] * inv + 2 * ref::u32 * std::fabs(v);
        const int o = ordinal(c.y, got), o_ref = ordinal(c.y, ref_code(c.y, v, zp));
        const int o_lo = ordinal(c.y, ref_code(c.y, v - vb, zp));
        const int o_hi = ordinal(c.y, ref_code(c.y, v + vb, zp));
        ++t.elements;
        if (o != o_ref) ++t.near;
        bad.expect(o >= o_lo && o <= o_hi && std::abs(o - o_ref) <= 1, [&] {
          return "code row " + std::to_string(k) + " col " + std::to_string(i) + ": got " +
                 std::to_string(o) + " want " + std::to_string(o_ref) + " (y " +
                 std::to_string(want[i]) + ")";
        });
      }
    }
    if (c.amax)
      bad.expect(std::fabs(amax[k] - row_amax) <= row_amax_bound + ref::u32 * row_amax,
                 [&] { return "amax of row " + std::to_string(k); });
    for (std::size_t i = c.cols; i < stride && k + 1 < c.rows; ++i)
      bad.expect(y[k * stride + i] == 0xa5, [&] { return "padding written"; });
  }
  for (std::size_t i = n; i < y.size(); ++i)
    bad.expect(y[i] == 0xa5, [&] { return "guard written"; });
  bad.expect(scales.back() == -1.f && amax.back() == -1.f && zero_points.back() == -1000,
             [] { return "scale guard written"; });
  CHECK_MESSAGE(bad.none(), bad.report());
}

/// Codes, scales and zero points of a run of rows with dynamic scales.
struct dynamic_out {
  std::vector<std::uint8_t> y;
  std::vector<float> scales;
  std::vector<std::int32_t> zero_points;
};

/// Runs rows of `cols` values x (with gamma, if not empty) into y of type yt, one scale per row.
dynamic_out run_rows(bool rms, dtype yt, simdnorm::quant_scaling scaling, std::size_t cols,
                     const std::vector<float>& x, const std::vector<float>& gamma = {}) {
  const std::size_t rows = x.size() / cols;
  const tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  const tensor_desc yd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, yt);
  const bool asymmetric = scaling == simdnorm::quant_scaling::dynamic_asymmetric;
  dynamic_out o{std::vector<std::uint8_t>(x.size(), 0xa5), std::vector<float>(rows, -1.f),
                std::vector<std::int32_t>(rows, -1000)};
  test::any_args a;
  a.x = x.data();
  a.y = o.y.data();
  a.gamma = gamma.empty() ? nullptr : gamma.data();
  a.y_scale = o.scales.data();
  a.y_zero_point = asymmetric ? o.zero_points.data() : nullptr;
  simdnorm::rms_norm_params rp;
  simdnorm::layer_norm_params lp;
  rp.quant.scaling = lp.quant.scaling = scaling;
  const simdnorm::status s =
      rms ? simdnorm::rms_norm(xd, yd, rp, test::as<simdnorm::rms_norm_args>(a))
          : simdnorm::layer_norm(xd, yd, lp, test::as<simdnorm::layer_norm_args>(a));
  REQUIRE_MESSAGE(s.ok(), s.message());
  return o;
}

/// A zero-point output for the error table (whose mutations are plain functions).
std::vector<std::int32_t>* zero_points_storage() {
  static std::vector<std::int32_t> z(8, -1000);
  return &z;
}
std::int32_t* zero_points_out() { return zero_points_storage()->data(); }

}  // namespace

TEST_CASE(
    "quantize: every fp8 e4m3fn code round-trips, and f32 to fp8, i8 and u8 rounds to nearest") {
  test::for_each_isa([](simdnorm::isa) {
    std::vector<std::uint8_t> codes(256), back(256);
    for (unsigned c = 0; c < 256; ++c) codes[c] = std::uint8_t(c);
    std::vector<float> v(256);
    REQUIRE(simdnorm::convert(codes.data(), dtype::f8e4m3fn, v.data(), dtype::f32, 256).ok());
    REQUIRE(simdnorm::convert(v.data(), dtype::f32, back.data(), dtype::f8e4m3fn, 256).ok());
    test::failures bad;
    for (unsigned c = 0; c < 256; ++c) {
      const double want = f8_value(c);
      const bool nan = std::isnan(want);
      bad.expect(nan ? std::isnan(v[c]) : double(v[c]) == want && std::signbit(v[c]) == (c >= 128),
                 [&] { return "decode " + std::to_string(c); });
      bad.expect(back[c] == (nan ? 0x7fu : c), [&] { return "round trip " + std::to_string(c); });
    }
    // every midpoint between neighbours (ties to even), just above and below it, beyond 448,
    // Inf, tiny values, and random values: against the brute-force nearest code
    std::vector<float> probe;
    for (unsigned c = 0; c < 0x7e; ++c) {
      const float mid = float((f8_value(c) + f8_value(c + 1)) / 2);
      for (float f : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
        probe.push_back(f);
        probe.push_back(-f);
      }
    }
    const float inf = std::numeric_limits<float>::infinity();
    for (float f : {448.f, 449.f, 464.f, 465.f, 1e30f, inf, -inf, 1e-30f, -1e-30f, 0x1p-10f})
      probe.push_back(f);
    std::vector<float> rnd(300);
    test::fill_normal(rnd.data(), rnd.size(), 5, 0.0, 50.0);
    probe.insert(probe.end(), rnd.begin(), rnd.end());
    std::vector<std::uint8_t> got(probe.size());
    REQUIRE(simdnorm::convert(probe.data(), dtype::f32, got.data(), dtype::f8e4m3fn, probe.size())
                .ok());
    for (std::size_t k = 0; k < probe.size(); ++k)
      bad.expect(got[k] == f8_code(probe[k]), [&] {
        return "encode " + std::to_string(probe[k]) + ": got " + std::to_string(got[k]) + " want " +
               std::to_string(f8_code(probe[k]));
      });
    // int8: ties to even, saturation, NaN -> 0
    const std::vector<float> iv = {
        0.5f,   1.5f,   2.5f,   -0.5f, -1.5f,
        -2.5f,  126.5f, 127.5f, 200.f, -128.f,
        -129.f, -1e9f,  inf,    -inf,  std::numeric_limits<float>::quiet_NaN()};
    const std::vector<int> iw = {0, 2, 2, 0, -2, -2, 126, 127, 127, -128, -128, -128, 127, -128, 0};
    std::vector<std::int8_t> qi(iv.size());
    REQUIRE(simdnorm::convert(iv.data(), dtype::f32, qi.data(), dtype::i8, iv.size()).ok());
    for (std::size_t k = 0; k < iv.size(); ++k)
      bad.expect(qi[k] == iw[k], [&] { return "i8 of " + std::to_string(iv[k]); });
    // uint8: ties to even, saturation at 0 and 255, NaN -> 0
    const std::vector<float> uv = {0.5f,   1.5f,  2.5f,   254.5f,
                                   255.5f, -0.5f, -1.f,   300.f,
                                   inf,    -inf,  1e-30f, std::numeric_limits<float>::quiet_NaN()};
    const std::vector<int> uw = {0, 2, 2, 254, 255, 0, 0, 255, 255, 0, 0, 0};
    std::vector<std::uint8_t> qu(uv.size());
    REQUIRE(simdnorm::convert(uv.data(), dtype::f32, qu.data(), dtype::u8, uv.size()).ok());
    for (std::size_t k = 0; k < uv.size(); ++k)
      bad.expect(qu[k] == uw[k], [&] { return "u8 of " + std::to_string(uv[k]); });
    CHECK_MESSAGE(bad.none(), bad.report());
  });
}

TEST_CASE("quantize: codes match the reference quantizer of the float64 y (every ISA)") {
  tally t;
  test::for_each_isa([&](simdnorm::isa i) {
    std::uint32_t seed = 1;
    using simdnorm::quant_scaling;
    for (bool rms : {true, false})
      for (dtype yt : {dtype::i8, dtype::u8, dtype::f8e4m3fn})
        for (std::size_t cols : {7, 64, 96, 256, 1000, 4096}) {
          quant_case c;
          c.rms = rms;
          c.y = yt;
          c.cols = cols;
          c.pad = cols % 5;
          c.amax = cols % 2 == 0;
          c.gate = rms && cols % 3 == 0;
          c.residual = cols == 96 || cols == 1000;
          // dynamic per row and per block: symmetric (i8, f8), asymmetric (i8, u8)
          for (quant_scaling dyn : {quant_scaling::dynamic, quant_scaling::dynamic_asymmetric}) {
            if ((yt == dtype::u8 && dyn == quant_scaling::dynamic) ||
                (yt == dtype::f8e4m3fn && dyn == quant_scaling::dynamic_asymmetric))
              continue;
            c.q = {};
            c.q.scaling = dyn;
            check_quantized(c, seed += 8, i, t);
            for (int block : {32, 64, 256})
              if (cols % std::size_t(block) == 0) {
                c.q.block = block;
                check_quantized(c, seed += 8, i, t);
              }
          }
          c.q = {};
          c.q.scaling = quant_scaling::per_tensor;
          c.q.scale = yt == dtype::f8e4m3fn ? 0.01f : 0.02f;
          c.q.zero_point = yt == dtype::i8 ? -3 : yt == dtype::u8 ? 128 : 0;
          check_quantized(c, seed += 8, i, t);
        }
  });
  // One-step differences only where y is within its error bound of a rounding boundary: rare.
  MESSAGE("boundary cases: " << t.near << " of " << t.elements << " codes");
  CHECK(t.near * 200 <= t.elements);
}

TEST_CASE("quantize: constant rows give scale 0 and code 0, a NaN row gives scale NaN") {
  test::for_each_isa([](simdnorm::isa) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (dtype yt : {dtype::i8, dtype::f8e4m3fn})
      for (std::size_t cols : {5, 48}) {
        // rows: constant 3 (LayerNorm: all zero), zeros (both ops: zero), NaN inside, normal
        std::vector<float> x(4 * cols);
        for (std::size_t i = 0; i < cols; ++i) {
          x[i] = 3.f;
          x[cols + i] = 0.f;
          x[2 * cols + i] = i == cols / 2 ? nan : float(i);
          x[3 * cols + i] = float(i) - 2.f;
        }
        for (bool rms : {false, true}) {
          CAPTURE(rms);
          CAPTURE(cols);
          const dynamic_out o = run_rows(rms, yt, simdnorm::quant_scaling::dynamic, cols, x);
          const std::vector<std::uint8_t>& y = o.y;
          const std::vector<float>& scales = o.scales;
          const std::uint8_t nan_code = yt == dtype::i8 ? 0x00 : 0x7f;
          if (!rms) CHECK(scales[0] == 0.f);
          CHECK(scales[1] == 0.f);
          CHECK(std::isnan(scales[2]));
          CHECK(scales[3] > 0.f);
          for (std::size_t i = 0; i < cols; ++i) {
            if (!rms) CHECK(y[i] == 0);
            CHECK(y[cols + i] == 0);
            CHECK(y[2 * cols + i] == nan_code);
          }
        }
      }
  });
}

TEST_CASE("quantize: asymmetric scaling of zero rows gives scale 1, of NaN rows scale NaN") {
  test::for_each_isa([](simdnorm::isa) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (dtype yt : {dtype::i8, dtype::u8})
      for (std::size_t cols : {5, 48}) {
        // rows: zeros; a NaN inside; positive values (RMSNorm keeps them positive, so lo = 0
        // and the zero point is the lowest code; LayerNorm centres them); mixed signs
        std::vector<float> x(4 * cols);
        for (std::size_t i = 0; i < cols; ++i) {
          x[i] = 0.f;
          x[cols + i] = i == cols / 2 ? nan : float(i);
          x[2 * cols + i] = float(i + 1);
          x[3 * cols + i] = float(i) - 2.f;
        }
        for (bool rms : {false, true}) {
          CAPTURE(std::string(simdnorm::dtype_name(yt)));
          CAPTURE(rms);
          CAPTURE(cols);
          const dynamic_out o =
              run_rows(rms, yt, simdnorm::quant_scaling::dynamic_asymmetric, cols, x);
          const int lowest = yt == dtype::i8 ? -128 : 0;
          CHECK(o.scales[0] == 1.f);
          CHECK(o.zero_points[0] == lowest);
          CHECK(std::isnan(o.scales[1]));
          CHECK(o.zero_points[1] == 0);
          if (rms) CHECK(o.zero_points[2] == lowest);
          CHECK(o.scales[3] > 0.f);
          for (std::size_t i = 0; i < cols; ++i) {
            CHECK(o.y[i] == std::uint8_t(lowest));
            CHECK(o.y[cols + i] == 0);
          }
        }
      }
  });
}

TEST_CASE("quantize: a dynamic scale below FLT_MIN is FLT_MIN (finite inverse)") {
  // RMSNorm with gamma 1e-37: |y| < 2e-37, so amax / 127 and the width / 255 fall below
  // FLT_MIN (1.2e-38); with gamma 2^-145 (|y| about 1e-44) the quotients underflow to 0. Either
  // way the scale is FLT_MIN and the codes step by FLT_MIN instead of saturating on
  // 1 / scale = Inf (all 0 for the second).
  struct format {
    dtype type;
    simdnorm::quant_scaling scaling;
  };
  const format formats[] = {{dtype::i8, simdnorm::quant_scaling::dynamic},
                            {dtype::f8e4m3fn, simdnorm::quant_scaling::dynamic},
                            {dtype::i8, simdnorm::quant_scaling::dynamic_asymmetric},
                            {dtype::u8, simdnorm::quant_scaling::dynamic_asymmetric}};
  test::for_each_isa([&](simdnorm::isa) {
    const std::size_t cols = 40;
    std::vector<float> x(cols);
    for (std::size_t i = 0; i < cols; ++i) x[i] = float(i % 7) - 3.f;
    for (const float g : {1e-37f, 0x1p-145f}) {
      const std::vector<float> gamma(cols, g);
      std::vector<double> want(cols);
      ref::rms_norm_row(x.data(), cols, gamma.data(), 1e-6, want.data());
      for (const format& f : formats) {
        CAPTURE(g);
        CAPTURE(std::string(simdnorm::dtype_name(f.type)));
        CAPTURE(int(f.scaling));
        const dynamic_out o = run_rows(true, f.type, f.scaling, cols, x, gamma);
        CHECK(o.scales[0] == FLT_MIN);
        const int zp = f.scaling == simdnorm::quant_scaling::dynamic ? 0 : o.zero_points[0];
        for (std::size_t i = 0; i < cols; ++i) {
          // y is within a few f32 ulps of the float64 y (gamma's rounding, rs, the product): a
          // code of v within that relative margin, which only matters next to a tie.
          const double v = want[i] / double(FLT_MIN), margin = 16 * 0x1p-24 * std::fabs(v);
          const unsigned lo = qref::ref_code(f.type, v - margin, zp);
          const unsigned hi = qref::ref_code(f.type, v + margin, zp);
          CAPTURE(i);
          CHECK((o.y[i] == lo || o.y[i] == hi));
          if (g < FLT_MIN) CHECK(qref::code_value(f.type, o.y[i]) == double(zp));
        }
      }
    }
  });
}

TEST_CASE("quantize: an asymmetric range wider than FLT_MAX still gets a finite scale") {
  // RMSNorm of +-1 with gamma 3e38: y = +-3e38, hi - lo = 6e38 overflows f32; the scale is
  // taken from the halves, and every code dequantizes to within half a step of y.
  test::for_each_isa([](simdnorm::isa) {
    const std::size_t cols = 37;
    std::vector<float> x(cols), gamma(cols, 3e38f);
    for (std::size_t i = 0; i < cols; ++i) x[i] = i % 3 == 0 ? -1.f : 1.f;
    std::vector<double> want(cols);
    ref::rms_norm_row(x.data(), cols, gamma.data(), 1e-6, want.data());
    for (dtype yt : {dtype::u8, dtype::i8}) {
      CAPTURE(std::string(simdnorm::dtype_name(yt)));
      const dynamic_out o =
          run_rows(true, yt, simdnorm::quant_scaling::dynamic_asymmetric, cols, x, gamma);
      const double scale = o.scales[0], lowest = yt == dtype::i8 ? -128 : 0;
      REQUIRE(scale > 0);
      REQUIRE(scale <= FLT_MAX);
      CHECK(o.zero_points[0] >= lowest);
      CHECK(o.zero_points[0] <= lowest + 255);
      for (std::size_t i = 0; i < cols; ++i) {
        const double code = yt == dtype::i8 ? int(std::int8_t(o.y[i])) : int(o.y[i]);
        CHECK(std::fabs((code - o.zero_points[0]) * scale - want[i]) <= scale * (0.5 + 1e-5));
      }
    }
  });
}

TEST_CASE("quantize: errors are clear and write nothing") {
  const std::size_t rows = 4, cols = 64, n = rows * cols;
  std::vector<float> x(n, 1.f), scales(rows * 2, -1.f), amax(rows, -1.f);
  for (std::size_t i = 0; i < n; ++i) x[i] = float(i % 7);
  std::vector<std::uint8_t> y(n, 0xa5);
  struct row {
    const char* what;
    int op;  // 0 rms_norm, 1 layer_norm, 2 lp_norm
    dtype x, y;
    void (*mutate)(simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage&);
    simdnorm::status_code code;
    const char* message;
  } table[] = {
      {"missing y_scale", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params&, test::any_args& a, simdnorm::stats_stage&) {
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "args.y_scale is null"},
      {"y_scale with a static scale", 1, dtype::f32, dtype::i8,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::per_tensor;
       },
       simdnorm::status_code::invalid_argument, "writes no scales"},
      {"missing amax", 0, dtype::f32, dtype::f8e4m3fn,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) {
         q.row_amax = true;
       },
       simdnorm::status_code::invalid_argument, "args.amax is null"},
      {"amax without row_amax", 0, dtype::f32, dtype::f32,
       [](simdnorm::quant_params&, test::any_args& a, simdnorm::stats_stage&) {
         a.amax = a.y_scale;  // any float array
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "set quant.row_amax"},
      {"lp_norm into int8", 2, dtype::f32, dtype::i8,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage&) {},
       simdnorm::status_code::unsupported_dtype, "8-bit outputs are layer_norm's and rms_norm's"},
      {"int8 x", 0, dtype::i8, dtype::f32,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage&) {},
       simdnorm::status_code::unsupported_dtype, "8-bit types are outputs"},
      {"block 16", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) { q.block = 16; },
       simdnorm::status_code::invalid_argument, "quant.block=16"},
      {"block 48 does not divide 64", 1, dtype::f32, dtype::f8e4m3fn,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) { q.block = 48; },
       simdnorm::status_code::invalid_argument, "divide the row length 64"},
      {"block with a float y", 0, dtype::f32, dtype::f32,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) { q.block = 32; },
       simdnorm::status_code::invalid_argument, "apply to an 8-bit y"},
      {"zero scale", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::per_tensor;
         q.scale = 0.f;
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "quant.scale=0"},
      {"fp8 zero point", 0, dtype::f32, dtype::f8e4m3fn,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::per_tensor;
         q.zero_point = 3;
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "quant.zero_point=3"},
      {"int8 zero point out of range", 1, dtype::f32, dtype::i8,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::per_tensor;
         q.zero_point = 128;
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "quant.zero_point=128"},
      {"u8 with a symmetric scale", 0, dtype::f32, dtype::u8,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage&) {},
       simdnorm::status_code::invalid_argument, "u8 has no symmetric scale"},
      {"fp8 with a zero point per row", 1, dtype::f32, dtype::f8e4m3fn,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::dynamic_asymmetric;
       },
       simdnorm::status_code::invalid_argument, "f8e4m3fn has no zero point"},
      {"missing y_zero_point", 0, dtype::f32, dtype::u8,
       [](simdnorm::quant_params& q, test::any_args&, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::dynamic_asymmetric;
       },
       simdnorm::status_code::invalid_argument, "args.y_zero_point is null"},
      {"y_zero_point with symmetric scales", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params&, test::any_args& a, simdnorm::stats_stage&) {
         a.y_zero_point = zero_points_out();
       },
       simdnorm::status_code::invalid_argument, "writes no zero points"},
      {"asymmetric with a float y", 1, dtype::f32, dtype::bf16,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::dynamic_asymmetric;
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "apply to an 8-bit y"},
      {"u8 zero point out of range", 0, dtype::f32, dtype::u8,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage&) {
         q.scaling = simdnorm::quant_scaling::per_tensor;
         q.zero_point = 256;
         a.y_scale = nullptr;
       },
       simdnorm::status_code::invalid_argument, "quant.zero_point=256"},
      {"apply stage", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage& st) {
         st = simdnorm::stats_stage::apply;
       },
       simdnorm::status_code::invalid_argument, "needs whole rows"},
      {"moments stage", 1, dtype::f32, dtype::f8e4m3fn,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage& st) {
         st = simdnorm::stats_stage::moments;
       },
       simdnorm::status_code::invalid_argument, "needs whole rows"},
      {"amax of a moments stage", 0, dtype::f32, dtype::f32,
       [](simdnorm::quant_params& q, test::any_args& a, simdnorm::stats_stage& st) {
         q.row_amax = true;
         a.y_scale = nullptr;
         st = simdnorm::stats_stage::moments;
       },
       simdnorm::status_code::invalid_argument, "needs whole rows"},
  };
  for (const row& c : table) {
    CAPTURE(std::string(c.what));
    const tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, c.x);
    const tensor_desc yd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, c.y);
    simdnorm::quant_params q;
    test::any_args a;
    a.x = x.data();
    a.y = y.data();
    a.y_scale = scales.data();
    simdnorm::stats_stage stage = simdnorm::stats_stage::full;
    c.mutate(q, a, stage);
    simdnorm::status s;
    if (c.op == 0) {
      simdnorm::rms_norm_params p;
      p.quant = q;
      p.stage = stage;
      s = simdnorm::rms_norm(xd, yd, p, test::as<simdnorm::rms_norm_args>(a));
    } else if (c.op == 1) {
      simdnorm::layer_norm_params p;
      p.quant = q;
      p.stage = stage;
      s = simdnorm::layer_norm(xd, yd, p, test::as<simdnorm::layer_norm_args>(a));
    } else {
      s = simdnorm::lp_norm(xd, yd, {}, test::as<simdnorm::lp_norm_args>(a));
    }
    CHECK(s.code() == c.code);
    CHECK_MESSAGE(std::string(s.message()).find(c.message) != std::string::npos, s.message());
  }
  for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == 0xa5);
  for (float v : scales) CHECK(v == -1.f);
  for (float v : amax) CHECK(v == -1.f);
  for (std::int32_t v : *zero_points_storage()) CHECK(v == -1000);
}
