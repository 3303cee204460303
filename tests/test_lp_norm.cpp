// Lp normalization (p = 1, 2) against the float64 reference on every runnable ISA: rows of
// every length around the vector, short-row and chunk tails, misaligned, padded, in place, the
// rstd output, eps semantics (torch's clamp and ONNX's eps = 0), NaN/Inf confinement, errors.
#include <cmath>
#include <limits>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::tensor_desc;

// Bound: the norm is a sum of non-negative terms (no cancellation) with a relative error of at
// most ref::sum_depth * u; sqrt halves it for p = 2; 1 / max(norm, eps) and x * rs add one
// rounding each, the float rs one more.
double lp_bound(std::size_t n, std::size_t lanes, int p, double y) {
  const double depth = ref::sum_depth(n, lanes);
  return ((p == 2 ? depth / 2 : depth) + 4) * ref::u32 * std::fabs(y) + 1e-37;
}

void check_lp(simdnorm::isa active, int p, std::size_t rows, std::size_t cols, std::size_t pad,
              std::size_t mis, bool in_place, std::uint32_t seed) {
  CAPTURE(p);
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(in_place);
  const std::size_t xs = cols + pad, ys = in_place ? xs : cols;
  test::buffer x(rows * xs, mis), y(rows * ys, (mis + 1) % 4);
  test::fill_normal(x.data(), x.size(), seed, 0.25, 2.0);
  const std::vector<float> x0(x.data(), x.data() + x.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = 7.25f;
  std::vector<float> rstd(rows, -1.f);
  tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  xd.strides[0] = std::int64_t(xs);
  tensor_desc yd = xd;
  yd.strides[0] = std::int64_t(ys);
  simdnorm::lp_norm_params prm;
  prm.p = p;
  simdnorm::plan plan;
  REQUIRE(simdnorm::plan::lp_norm(xd, yd, prm, &plan).ok());
  REQUIRE(plan.kernel_isa() == active);
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = in_place ? x.data() : y.data();
  a.rstd = rstd.data();
  REQUIRE(plan.execute(a).ok());
  const float* out = in_place ? x.data() : y.data();
  const std::size_t lanes = test::lanes(active);
  std::size_t bad = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x0.data() + r * xs;
    const double rs = 1.0 / std::max(ref::lp_norm(xr, cols, p), double(prm.eps));
    for (std::size_t i = 0; i < cols; ++i) {
      const double want = xr[i] * rs;
      bad += !(std::fabs(out[r * ys + i] - want) <= lp_bound(cols, lanes, p, want));
    }
    bad += !(std::fabs(rstd[r] - rs) <= lp_bound(cols, lanes, p, rs));
    if (in_place)  // the padding between rows is not touched
      for (std::size_t i = cols; i < xs; ++i) bad += x[r * xs + i] != x0[r * xs + i];
  }
  CHECK(bad == 0);
  CHECK(x.guards_intact());
  CHECK(y.guards_intact());
}

// Lengths around every vector width (1, 4, 8, 16), the short-row limit (256), the statistics
// chunk (2048) and beyond.
const std::size_t kCols[] = {1,   2,   3,   4,    5,    7,    8,    9,    15,   16,   17,
                             31,  32,  33,  63,   64,   65,   100,  127,  128,  129,  255,
                             256, 257, 511, 1000, 1024, 2047, 2048, 2049, 4099, 16387};

}  // namespace

TEST_CASE("lp_norm: rows of every length match float64 (p = 1 and 2, every ISA)") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (int p : {1, 2})
      for (std::size_t cols : kCols) {
        if (test::quick() && cols > 4099) continue;
        const std::size_t rows = cols > 2048 ? 3 : 37;  // several short-row groups and a tail
        check_lp(i, p, rows, cols, 0, seed % 3, false, seed);
        ++seed;
      }
  });
}

TEST_CASE("lp_norm: padded rows, misaligned and in place") {
  test::for_each_isa([](simdnorm::isa i) {
    for (int p : {1, 2})
      for (std::size_t cols : {17, 64, 300, 1030}) {
        check_lp(i, p, 9, cols, 5, 1, true, 77);
        check_lp(i, p, 9, cols, 3, 3, false, 78);
      }
  });
}

TEST_CASE(
    "lp_norm: eps clamps small norms, eps = 0 gives 0 / 0 as ONNX does, NaN and Inf stay in their "
    "row") {
  test::for_each_isa([](simdnorm::isa) {
    for (std::size_t cols : {5, 16, 64, 1000}) {
      CAPTURE(cols);
      // rows: 0 = zeros, 1 = tiny values (norm below eps), 2 = a NaN, 3 = an Inf, 4 = ordinary
      std::vector<float> x(5 * cols, 0.f), y(x.size(), 7.f);
      for (std::size_t i = 0; i < cols; ++i) {
        x[cols + i] = 1e-14f;
        x[2 * cols + i] = x[3 * cols + i] = x[4 * cols + i] = float(i % 7) - 3.f;
      }
      x[2 * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();
      x[3 * cols + cols / 2] = std::numeric_limits<float>::infinity();
      x[4 * cols] = 1.f;  // a non-zero row even when cols < 4
      const tensor_desc d = tensor_desc::contiguous({5, std::int64_t(cols)});
      for (float eps : {1e-12f, 0.f}) {
        CAPTURE(eps);
        simdnorm::lp_norm_params prm;
        prm.eps = eps;
        simdnorm::norm_args a;
        a.x = x.data();
        a.y = y.data();
        REQUIRE(simdnorm::lp_norm(d, d, prm, a).ok());
        for (std::size_t i = 0; i < cols; ++i) {
          if (eps > 0) {
            CHECK(y[i] == 0.f);  // 0 * (1 / eps)
            CHECK(y[cols + i] == doctest::Approx(1e-14 / 1e-12).epsilon(1e-5));
          } else {
            CHECK(std::isnan(y[i]));  // 0 / 0
            CHECK(std::fabs(y[cols + i] - 1 / std::sqrt(double(cols))) < 1e-5);
          }
          CHECK(std::isnan(y[2 * cols + i]));
          if (i == cols / 2)
            CHECK(std::isnan(y[3 * cols + i]));  // Inf / Inf
          else
            CHECK(y[3 * cols + i] == 0.f);  // x / Inf
          CHECK(std::isfinite(y[4 * cols + i]));
        }
      }
    }
  });
}

TEST_CASE("lp_norm: the axis is the innermost dim of size > 1, given as ONNX and torch do") {
  std::vector<float> x(2 * 3 * 5), y(x.size()), want(x.size());
  test::fill_normal(x.data(), x.size(), 5);
  for (std::size_t r = 0; r < 6; ++r) {
    const double n = ref::lp_norm(x.data() + 5 * r, 5, 2);
    for (std::size_t i = 0; i < 5; ++i) want[5 * r + i] = float(x[5 * r + i] / n);
  }
  struct {
    tensor_desc d;
    int axis;
  } cases[] = {{tensor_desc::contiguous({2, 3, 5}), -1},
               {tensor_desc::contiguous({2, 3, 5}), 2},
               {tensor_desc::contiguous({6, 5, 1}), 1},
               {tensor_desc::contiguous({6, 5, 1, 1}), -3}};
  for (const auto& c : cases) {
    CAPTURE(c.axis);
    simdnorm::lp_norm_params prm;
    prm.axis = c.axis;
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    std::fill(y.begin(), y.end(), 0.f);
    REQUIRE(simdnorm::lp_norm(c.d, c.d, prm, a).ok());
    for (std::size_t i = 0; i < y.size(); ++i)
      CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("lp_norm errors: bad p, axis, layout and arguments fail clearly and write nothing") {
  std::vector<float> x(12, 1.f), y(12, 7.f), g(4, 1.f), m(3);
  const tensor_desc d = tensor_desc::contiguous({3, 4});
  struct row {
    int p, axis;
    bool gamma, mean;
    float eps;
    simdnorm::status_code code;
    const char* what;
  } rows[] = {
      {3, -1, false, false, 0.f, simdnorm::status_code::invalid_argument, "p=3"},
      {0, -1, false, false, 0.f, simdnorm::status_code::invalid_argument, "p=0"},
      {2, 2, false, false, 0.f, simdnorm::status_code::invalid_argument, "axis=2"},
      {2, -3, false, false, 0.f, simdnorm::status_code::invalid_argument, "axis=-3"},
      {2, 0, false, false, 0.f, simdnorm::status_code::unsupported_layout, "move the axis last"},
      {2, -1, true, false, 0.f, simdnorm::status_code::invalid_argument, "no gamma"},
      {1, -1, false, true, 0.f, simdnorm::status_code::invalid_argument, "no mean"},
      {2, -1, false, false, INFINITY, simdnorm::status_code::invalid_argument, "eps=inf"},
      {2, -1, false, false, -1e-6f, simdnorm::status_code::invalid_argument, "eps=-1e-06"},
      {2, -1, false, false, NAN, simdnorm::status_code::invalid_argument, "eps=nan"},
  };
  for (const row& r : rows) {
    CAPTURE(r.what);
    simdnorm::lp_norm_params prm;
    prm.p = r.p;
    prm.axis = r.axis;
    prm.eps = r.eps;
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    a.gamma = r.gamma ? g.data() : nullptr;
    a.mean = r.mean ? m.data() : nullptr;
    const simdnorm::status s = simdnorm::lp_norm(d, d, prm, a);
    CHECK(s.code() == r.code);
    CHECK_MESSAGE(std::string(s.message()).find(r.what) != std::string::npos, s.message());
    for (float v : y) CHECK(v == 7.f);
  }
}
