// Quantized outputs of LayerNorm and RMSNorm (quant_params, y of dtype i8 or f8e4m3fn) and the
// amax side output: the codes against a reference quantizer applied to the float64 reference
// y, exactly except where y sits within its f32 error bound of a rounding boundary (those are
// counted and bounded); dynamic scales per row and per block, static scale and zero point;
// every ISA; tails, padded rows, gate and residual add before the quantizer; constant rows,
// NaN rows; all 256 fp8 codes through simdnorm::convert; the errors, which write nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;

// ---- the reference quantizers ----------------------------------------------------------------

/// E4M3FN code -> value (independent of the library: from the format's definition).
double f8_value(unsigned c) {
  const unsigned e = (c >> 3) & 15u, m = c & 7u;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, int(e) - 7);
  return (c & 0x80u) ? -mag : mag;
}

/// Nearest E4M3FN code of v, ties to the even code, saturating at 448; NaN -> 0x7f.
unsigned f8_code(double v) {
  if (std::isnan(v)) return 0x7f;
  const unsigned sign = std::signbit(v) ? 0x80u : 0u;
  const double a = std::fabs(v);
  unsigned lo = 0;  // largest code with value <= a, among 0 .. 0x7e
  while (lo < 0x7e && f8_value(lo + 1) <= a) ++lo;
  if (lo == 0x7e) return sign | lo;
  const double dl = a - f8_value(lo), dh = f8_value(lo + 1) - a;
  return sign | (dl < dh || (dl == dh && lo % 2 == 0) ? lo : lo + 1);
}

/// Position of a code on the number line: adjacent values differ by one (+0 and -0 are both 0).
int ordinal(dtype t, unsigned c) {
  if (t == dtype::i8) return int(std::int8_t(c));
  return (c & 0x80u) ? -int(c & 0x7fu) : int(c & 0x7fu);
}

/// The code of the scaled value v (= y * inv_scale): i8 sat(rne(v) + zp), f8 f8_code(v).
unsigned ref_code(dtype t, double v, int zp) {
  if (t == dtype::f8e4m3fn) return f8_code(v);
  if (std::isnan(v)) return 0;
  const double r = std::clamp(std::nearbyint(v) + zp, -128.0, 127.0);  // nearbyint: ties even
  return unsigned(std::uint8_t(std::int8_t(r)));
}

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
  const bool dynamic = c.q.scaling == simdnorm::quant_scaling::dynamic;
  a.y_scale = dynamic ? scales.data() : nullptr;
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
      double am = 0, am_bound = 0;
      for (std::size_t i = s0; i < s0 + seg; ++i)
        if (std::fabs(want[i]) > am) am = std::fabs(want[i]), am_bound = bound[i];
      if (am > row_amax) row_amax = am, row_amax_bound = am_bound;
      float inv = 1.f / c.q.scale;
      int zp = c.q.zero_point;
      if (dynamic) {
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
  bad.expect(scales.back() == -1.f && amax.back() == -1.f, [] { return "scale guard written"; });
  CHECK_MESSAGE(bad.none(), bad.report());
}

/// Runs `count` rows of `cols` constant or NaN values and returns the codes and scales.
void run_rows(bool rms, dtype yt, std::size_t cols, const std::vector<float>& x,
              std::vector<std::uint8_t>& y, std::vector<float>& scales) {
  const std::size_t rows = x.size() / cols;
  const tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  const tensor_desc yd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, yt);
  y.assign(x.size(), 0xa5);
  scales.assign(rows, -1.f);
  test::any_args a;
  a.x = x.data();
  a.y = y.data();
  a.y_scale = scales.data();
  const simdnorm::status s =
      rms ? simdnorm::rms_norm(xd, yd, {}, test::as<simdnorm::rms_norm_args>(a))
          : simdnorm::layer_norm(xd, yd, {}, test::as<simdnorm::layer_norm_args>(a));
  REQUIRE_MESSAGE(s.ok(), s.message());
}

}  // namespace

TEST_CASE("quantize: every fp8 e4m3fn code round-trips through f32, and f32 rounds to nearest") {
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
    CHECK_MESSAGE(bad.none(), bad.report());
  });
}

TEST_CASE("quantize: codes match the reference quantizer of the float64 y (every ISA)") {
  tally t;
  test::for_each_isa([&](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (bool rms : {true, false})
      for (dtype yt : {dtype::i8, dtype::f8e4m3fn})
        for (std::size_t cols : {7, 64, 96, 256, 1000, 4096}) {
          quant_case c;
          c.rms = rms;
          c.y = yt;
          c.cols = cols;
          c.pad = cols % 5;
          c.amax = cols % 2 == 0;
          c.gate = rms && cols % 3 == 0;
          c.residual = cols == 96 || cols == 1000;
          check_quantized(c, seed += 8, i, t);  // dynamic, per row
          for (int block : {32, 64, 256})
            if (cols % std::size_t(block) == 0) {
              c.q.block = block;
              check_quantized(c, seed += 8, i, t);
            }
          c.q = {};
          c.q.scaling = simdnorm::quant_scaling::per_tensor;
          c.q.scale = yt == dtype::i8 ? 0.02f : 0.01f;
          c.q.zero_point = yt == dtype::i8 ? -3 : 0;
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
          std::vector<std::uint8_t> y;
          std::vector<float> scales;
          run_rows(rms, yt, cols, x, y, scales);
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
      {"apply stage", 0, dtype::f32, dtype::i8,
       [](simdnorm::quant_params&, test::any_args&, simdnorm::stats_stage& st) {
         st = simdnorm::stats_stage::apply;
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
}
