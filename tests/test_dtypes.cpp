// bf16 and f16 tensors: the conversions (simdnorm::convert, the kernels' load / store edge)
// against an independent reference over every 16-bit pattern and the rounding cases of f32, and
// LayerNorm, RMSNorm and Lp norm with every pair of x and y types against float64, on every
// runnable ISA. Hardware conversions (AVX-512F, F16C, AArch64) and the integer-SIMD fallbacks
// (SSE2, SSE4.2, scalar) are each compared with the same reference, so they agree bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;

const dtype kTypes[] = {dtype::f32, dtype::bf16, dtype::f16};

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// ---- an independent reference: values by formula, rounding by nearest neighbour ------------

/// The value of a 16-bit pattern in double (NaN for NaN patterns).
double value16(dtype t, std::uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (t == dtype::bf16) return double(from_bits(std::uint32_t(h) << 16));
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

/// The finite non-negative values of type t in increasing order, with their patterns.
struct ladder {
  std::vector<double> value;
  std::vector<std::uint16_t> pattern;
  explicit ladder(dtype t) {
    const std::uint16_t top = t == dtype::bf16 ? 0x7f80 : 0x7c00;  // +Inf
    for (std::uint32_t h = 0; h < top; ++h) {
      value.push_back(value16(t, std::uint16_t(h)));
      pattern.push_back(std::uint16_t(h));
    }
  }
};

/// f round to nearest even into t: NaN -> quiet NaN with f's top payload bits, beyond the
/// largest finite value by half an ulp or more -> Inf.
std::uint16_t round16(dtype t, const ladder& l, float f) {
  const std::uint16_t sign = std::uint16_t((bits(f) >> 16) & 0x8000);
  if (std::isnan(f)) {
    const std::uint32_t a = bits(f) & 0x7fffffff;
    return t == dtype::bf16 ? std::uint16_t((bits(f) >> 16) | 0x40)
                            : std::uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  }
  const double a = std::fabs(double(f));
  const std::size_t n = l.value.size();
  const double top = l.value[n - 1], ulp = top - l.value[n - 2];
  const std::uint16_t inf = t == dtype::bf16 ? 0x7f80 : 0x7c00;
  if (a >= top + ulp / 2) return std::uint16_t(sign | inf);
  if (a >= top) return std::uint16_t(sign | l.pattern[n - 1]);
  const std::size_t hi = std::size_t(std::upper_bound(l.value.begin(), l.value.end(), a) -
                                     l.value.begin());  // value[hi - 1] <= a < value[hi]
  const double below = l.value[hi - 1], above = l.value[hi];
  std::size_t k = hi - 1;
  if (a - below > above - a || (a - below == above - a && (l.pattern[hi - 1] & 1))) k = hi;
  return std::uint16_t(sign | l.pattern[k]);
}

/// f32 values that exercise the rounding into t: every value of t, the midpoints between
/// neighbours and one f32 ulp either side of them, the overflow threshold, f32 subnormals,
/// specials and random floats.
std::vector<float> rounding_cases(dtype t, const ladder& l) {
  std::vector<float> v;
  for (std::size_t k = 0; k + 1 < l.value.size(); ++k) {
    const float lo = float(l.value[k]), mid = float((l.value[k] + l.value[k + 1]) / 2);
    for (float f : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  const double top = l.value.back(), half = (top - l.value[l.value.size() - 2]) / 2;
  for (double d : {top, top + half, std::nextafter(top + half, 0.0), 1e30, 3.4e38})
    v.push_back(float(d));
  for (std::uint32_t b : {0x00000001u, 0x00400000u, 0x007fffffu, 0x7f800000u, 0xff800000u,
                          0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0x7fa0e000u, 0x33800000u})
    v.push_back(from_bits(b));
  std::mt19937 rng(t == dtype::bf16 ? 16 : 17);
  for (int i = 0; i < 100000; ++i) v.push_back(from_bits(std::uint32_t(rng())));
  return v;
}

bool same16(const std::uint16_t* got, const std::uint16_t* want, std::size_t n,
            std::string* first) {
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "element %zu: got 0x%04x want 0x%04x", i, got[i], want[i]);
      *first = buf;
      return false;
    }
  return true;
}

}  // namespace

TEST_CASE("convert: every bf16 and f16 pattern to f32 is exact (every ISA)") {
  test::for_each_isa([](simdnorm::isa) {
    for (dtype t : {dtype::bf16, dtype::f16}) {
      CAPTURE(std::string(simdnorm::dtype_name(t)));
      std::vector<std::uint16_t> h(65536);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::uint16_t(i);
      // an odd length and offset: vector body, tail, misaligned start
      std::vector<float> f(h.size() + 1, 7.f);
      REQUIRE(simdnorm::convert(h.data() + 1, t, f.data() + 1, dtype::f32, h.size() - 1).ok());
      std::size_t bad = 0;
      for (std::size_t i = 1; i < h.size(); ++i) {
        const double want = value16(t, h[i]);
        const float got = f[i];
        if (std::isnan(want)) {
          // NaN stays NaN; f16 NaNs become quiet with their payload kept
          bad += !std::isnan(got);
          if (t == dtype::f16)
            bad += (bits(got) & 0x003fe000u) >> 13 != (h[i] & 0x1ffu) || !(bits(got) & 0x400000u);
          else
            bad += bits(got) != std::uint32_t(h[i]) << 16;
        } else {
          bad += !(double(got) == want && std::signbit(got) == bool(h[i] & 0x8000));
        }
      }
      CHECK(bad == 0);
      CHECK(f[0] == 7.f);
    }
  });
}

TEST_CASE("convert: f32 to bf16 and f16 rounds to nearest even, keeps NaN, Inf, subnormals") {
  for (dtype t : {dtype::bf16, dtype::f16}) {
    const ladder l(t);
    const std::vector<float> in = rounding_cases(t, l);
    std::vector<std::uint16_t> want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want[i] = round16(t, l, in[i]);
    test::for_each_isa([&](simdnorm::isa) {
      CAPTURE(std::string(simdnorm::dtype_name(t)));
      std::vector<std::uint16_t> got(in.size() + 2, 0xabcd);
      REQUIRE(simdnorm::convert(in.data(), dtype::f32, got.data() + 1, t, in.size()).ok());
      std::string first;
      CHECK_MESSAGE(same16(got.data() + 1, want.data(), in.size(), &first), first);
      CHECK(got[0] == 0xabcd);
      CHECK(got[in.size() + 1] == 0xabcd);
    });
  }
}

TEST_CASE("convert: errors write nothing") {
  float x[4] = {1, 2, 3, 4}, y[4] = {7, 7, 7, 7};
  CHECK(simdnorm::convert(x, dtype(9), y, dtype::f32, 4).code() ==
        simdnorm::status_code::invalid_argument);
  CHECK(simdnorm::convert(nullptr, dtype::f32, y, dtype::f32, 4).code() ==
        simdnorm::status_code::invalid_argument);
  CHECK(simdnorm::convert(x, dtype::f32, x + 1, dtype::f32, 3).code() ==
        simdnorm::status_code::invalid_argument);  // partial overlap
  CHECK(simdnorm::convert(x, dtype::f32, x, dtype::bf16, 4).code() ==
        simdnorm::status_code::invalid_argument);  // in place across types
  for (float v : y) CHECK(v == 7.f);
  CHECK(simdnorm::convert(nullptr, dtype::f32, nullptr, dtype::bf16, 0).ok());
}

namespace {

enum class row_op { layer_norm, rms_norm, l2_norm };
const char* row_op_name(row_op o) {
  switch (o) {
    case row_op::layer_norm: return "layer_norm";
    case row_op::rms_norm: return "rms_norm";
    case row_op::l2_norm: return "l2_norm";
  }
  return "?";
}

using test::subnormal_half_ulp;
using test::typed_buffer;
using test::unit_roundoff;

/// One [rows, cols] case with row padding, misalignment and optionally in place: y against the
/// float64 result of the x values as stored, within the f32 op's bound (see test_layer_norm.cpp,
/// test_rms_norm.cpp, test_lp_norm.cpp) plus the rounding of the output type. Returns y.
std::vector<float> check_typed(simdnorm::isa active, row_op op, dtype xt, dtype yt,
                               std::size_t rows, std::size_t cols, std::size_t pad, std::size_t mis,
                               bool in_place, std::uint32_t seed, double offset,
                               simdnorm::store_policy stores = simdnorm::store_policy::automatic) {
  CAPTURE(std::string(row_op_name(op)));
  CAPTURE(std::string(simdnorm::dtype_name(xt)));
  CAPTURE(std::string(simdnorm::dtype_name(yt)));
  CAPTURE(cols);
  CAPTURE(in_place);
  const std::size_t xs = cols + pad, ys = in_place ? xs : cols;
  std::vector<float> xv(rows * xs), g(cols), b(cols);
  test::fill_normal(xv.data(), xv.size(), seed, offset, 1.0);
  test::fill_normal(g.data(), cols, seed + 1, 1.0, 0.5);
  test::fill_normal(b.data(), cols, seed + 2, 0.0, 1.0);
  typed_buffer x(xt, xv.size(), mis), y(yt, rows * ys + 1, (mis + 1) % 4);
  x.set(xv);
  const std::vector<float> x0 = x.get(xv.size());  // the values as stored in xt
  tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, xt);
  xd.strides[0] = std::int64_t(xs);
  tensor_desc yd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, yt);
  yd.strides[0] = std::int64_t(ys);
  simdnorm::plan p;
  simdnorm::status s;
  if (op == row_op::layer_norm) {
    simdnorm::layer_norm_params prm{1, 1e-5f};
    prm.stores = stores;
    s = simdnorm::plan::layer_norm(xd, yd, prm, &p);
  } else if (op == row_op::rms_norm) {
    simdnorm::rms_norm_params prm{1, 1e-6f};
    prm.stores = stores;
    s = simdnorm::plan::rms_norm(xd, yd, prm, &p);
  } else {
    simdnorm::lp_norm_params prm;
    prm.stores = stores;
    s = simdnorm::plan::lp_norm(xd, yd, prm, &p);
  }
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(p.kernel_isa() == active);
  simdnorm::norm_args a;
  a.x = x.base;
  a.y = in_place ? x.base : y.base;
  if (op != row_op::l2_norm) a.gamma = g.data();
  if (op == row_op::layer_norm) a.beta = b.data();
  REQUIRE(p.execute(a).ok());
  const std::vector<float> out = in_place ? x.get(xv.size()) : y.get(rows * ys);

  const double uo = test::unit_roundoff(yt), sub = subnormal_half_ulp(yt);
  const std::size_t lanes = test::lanes(active);
  test::failures bad;
  std::vector<double> want(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x0.data() + r * xs;
    double s_max = 0;
    if (op == row_op::layer_norm) {
      ref::row_stats st;
      ref::layer_norm_row(xr, cols, g.data(), b.data(), 1e-5, want.data(), &st);
      const double sigma = std::sqrt(st.var + 1e-5);
      for (std::size_t i = 0; i < cols; ++i)
        s_max = std::max(s_max, std::fabs(xr[i] - xr[0]) / sigma);
    } else if (op == row_op::rms_norm) {
      ref::rms_norm_row(xr, cols, g.data(), 1e-6, want.data());
    } else {
      const double rs = 1.0 / std::max(ref::lp_norm(xr, cols, 2), 1e-12);
      for (std::size_t i = 0; i < cols; ++i) want[i] = xr[i] * rs;
    }
    for (std::size_t i = 0; i < cols; ++i) {
      double f32_bound;
      if (op == row_op::layer_norm) {
        const ref::row_stats st = ref::stats(xr, cols);
        const double z = (xr[i] - st.mean) / std::sqrt(st.var + 1e-5);
        f32_bound = ref::layer_norm_bound(ref::accumulation_depth(cols, lanes), z, s_max, g[i],
                                          b[i], want[i]);
      } else if (op == row_op::rms_norm) {
        f32_bound = (ref::accumulation_depth(cols, lanes) / 2 + 4) * ref::u32 * std::fabs(want[i]);
      } else {
        f32_bound = (ref::sum_depth(cols, lanes) / 2 + 4) * ref::u32 * std::fabs(want[i]);
      }
      // the f32 result (within f32_bound of want) rounded once more into yt
      const double tol = f32_bound * (1 + uo) + uo * std::fabs(want[i]) + sub + 1e-30;
      const double got = out[r * ys + i];
      bad.expect(std::fabs(got - want[i]) <= tol, [&] {
        return "row " + std::to_string(r) + " col " + std::to_string(i) + ": got " +
               std::to_string(got) + " want " + std::to_string(want[i]);
      });
    }
    if (in_place)  // the padding between rows is not touched
      for (std::size_t i = cols; i < xs; ++i)
        bad.expect(out[r * xs + i] == x0[r * xs + i], [&] { return "padding written"; });
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  CHECK(x.raw.guards_intact());
  CHECK(y.raw.guards_intact());
  return out;
}

const std::size_t kCols[] = {1, 3, 7, 8, 15, 16, 17, 33, 64, 100, 255, 256, 257, 768, 2049};

}  // namespace

TEST_CASE("dtypes: row ops with every pair of x and y types match float64 (every ISA)" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (row_op op : {row_op::layer_norm, row_op::rms_norm, row_op::l2_norm})
      for (dtype xt : kTypes)
        for (dtype yt : kTypes) {
          if (xt == dtype::f32 && yt == dtype::f32) continue;  // the f32 tests' job
          for (std::size_t cols : kCols) {
            if (test::quick() && cols > 300) continue;
            check_typed(i, op, xt, yt, cols > 300 ? 5 : 19, cols, 0, seed % 3, false, seed, 0.0);
            ++seed;
          }
        }
  });
}

TEST_CASE("dtypes: padded, misaligned, in place and with a large mean" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    for (dtype t : {dtype::bf16, dtype::f16})
      for (std::size_t cols : {17, 64, 300}) {
        check_typed(i, row_op::layer_norm, t, t, 9, cols, 5, 1, true, 77, 0.0);
        check_typed(i, row_op::rms_norm, t, t, 9, cols, 3, 3, true, 78, 0.0);
        check_typed(i, row_op::layer_norm, t, dtype::f32, 9, cols, 2, 2, false, 79, 100.0);
        check_typed(i, row_op::layer_norm, dtype::f32, t, 9, cols, 2, 1, false, 80, 1e4);
      }
  });
}

// A 16-bit y beyond the caches takes the kernels' large-tensor instances (x prefetched ahead,
// regular stores: streaming stores are f32 only); store_policy::streaming forces them here.
TEST_CASE("dtypes: 16-bit y with the large-tensor path matches float64 and regular stores" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 900;
    for (row_op op : {row_op::layer_norm, row_op::rms_norm, row_op::l2_norm})
      for (dtype xt : kTypes)
        for (dtype yt : {dtype::bf16, dtype::f16})
          for (std::size_t cols : {7, 16, 64, 100, 768}) {
            const std::size_t mis = seed % 3;
            const bool in_place = xt == yt && seed % 2 == 0;
            ++seed;
            const auto streamed = check_typed(i, op, xt, yt, 37, cols, 3, mis, in_place, seed, 0.0,
                                              simdnorm::store_policy::streaming);
            const auto regular = check_typed(i, op, xt, yt, 37, cols, 3, mis, in_place, seed, 0.0,
                                             simdnorm::store_policy::regular);
            CHECK(test::bitwise_equal(streamed.data(), regular.data(), regular.size()));
          }
  });
}

TEST_CASE("dtypes: NaN and Inf stay in their row, f16 outputs beyond 65504 become Inf" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa) {
    for (dtype t : {dtype::bf16, dtype::f16}) {
      CAPTURE(std::string(simdnorm::dtype_name(t)));
      const std::size_t cols = 40;
      std::vector<float> xv(3 * cols);
      test::fill_normal(xv.data(), xv.size(), 5);
      xv[5] = std::numeric_limits<float>::quiet_NaN();
      xv[cols + 7] = INFINITY;
      typed_buffer x(t, xv.size(), 0), y(t, xv.size(), 0);
      x.set(xv);
      const tensor_desc d = tensor_desc::contiguous({3, std::int64_t(cols)}, t);
      std::vector<float> g(cols, 1e5f);  // f16 overflows: |z| * 1e5 > 65504 for most z
      simdnorm::norm_args a;
      a.x = x.base;
      a.y = y.base;
      a.gamma = g.data();
      REQUIRE(simdnorm::layer_norm(d, d, {}, a).ok());
      const std::vector<float> out = y.get(xv.size());
      for (std::size_t i = 0; i < cols; ++i) {
        CHECK(std::isnan(out[i]));
        CHECK(std::isnan(out[cols + i]));
        const float v = out[2 * cols + i];
        if (t == dtype::f16)
          CHECK((std::isinf(v) || std::fabs(v) <= 65504.f));
        else
          CHECK(std::isfinite(v));
      }
    }
  });
}

TEST_CASE("dtypes: errors are clear and write nothing" * doctest::skip(!test::all_dtypes)) {
  std::vector<std::uint16_t> x(12, 0x3f80), y(12, 0x7777);
  const tensor_desc xb = tensor_desc::contiguous({3, 4}, dtype::bf16);
  const tensor_desc yf = tensor_desc::contiguous({3, 4}, dtype::f16);
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = x.data();  // in place across types
  CHECK(simdnorm::layer_norm(xb, yf, {}, a).code() == simdnorm::status_code::invalid_argument);
  a.y = y.data();
  simdnorm::batch_norm_params bn;
  bn.training = true;
  CHECK(simdnorm::batch_norm(tensor_desc::contiguous({1, 3, 2, 2}, dtype::bf16),
                             tensor_desc::contiguous({1, 3, 2, 2}, dtype::i8), bn, a)
            .code() == simdnorm::status_code::invalid_argument);  // an i8 y needs static scales
  tensor_desc bad = xb;
  bad.type = dtype(42);  // not in dtype_list.h
  const simdnorm::status s = simdnorm::layer_norm(bad, bad, {}, a);
  CHECK(s.code() == simdnorm::status_code::invalid_argument);
  CHECK(std::string(s.message()).find("type=42") != std::string::npos);
  for (std::uint16_t v : y) CHECK(v == 0x7777);
}
