// RMSNorm against the float64 reference on every runnable ISA: sizes that hit every tail,
// misaligned pointers, padded rows, in place, the rstd output, adversarial data.
#include <cmath>
#include <cstring>
#include <limits>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::isa;
using simdnorm::tensor_desc;

// Bound: the sum of squares is a sum of positive terms (no cancellation): relative error
// depth * u; rstd's relative error is half that plus the float rounding of 1/sqrt; each output
// then takes two more roundings (x * rstd, * gamma).
double rms_bound(double depth, double y) {
  return (depth / 2 + 4) * ref::u32 * std::fabs(y) + 1e-30;
}

void check_rms(isa active, std::size_t rows, std::size_t cols, std::size_t pad, std::size_t mis,
               bool gamma, bool in_place, std::uint32_t seed, double scale = 1.0) {
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(in_place);
  const std::size_t xs = cols + pad, ys = in_place ? xs : cols;
  test::buffer x(rows * xs, mis), y(rows * ys, (mis + 1) % 4), g(cols, (mis + 2) % 4);
  test::fill_normal(x.data(), x.size(), seed, 0.0, scale);
  test::fill_normal(g.data(), cols, seed + 1, 1.0, 0.5);
  const std::vector<float> x0(x.data(), x.data() + x.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = 7.25f;
  std::vector<float> rstd(rows, -1.f);
  tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  xd.strides[0] = std::int64_t(xs);
  tensor_desc yd = xd;
  yd.strides[0] = std::int64_t(ys);
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::rms_norm(xd, yd, {}, &p).ok());
  REQUIRE(p.kernel_isa() == active);
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = in_place ? x.data() : y.data();
  a.gamma = gamma ? g.data() : nullptr;
  a.rstd = rstd.data();
  REQUIRE(p.execute(a).ok());
  const float* out = in_place ? x.data() : y.data();
  const double depth = ref::accumulation_depth(cols, test::lanes(active));
  std::vector<double> yr(cols);
  test::failures bad;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x0.data() + r * xs;
    ref::rms_norm_row(xr, cols, a.gamma, 1e-6, yr.data());
    for (std::size_t i = 0; i < cols; ++i) {
      const double got = out[r * ys + i];
      bad.expect(std::fabs(got - yr[i]) <= rms_bound(depth, yr[i]), [&] {
        return "row " + std::to_string(r) + " col " + std::to_string(i) + ": got " +
               std::to_string(got) + " want " + std::to_string(yr[i]);
      });
    }
    const double rr = ref::rms_rstd(xr, cols, 1e-6);
    bad.expect(std::fabs(rstd[r] - rr) <= rms_bound(depth, rr), [&] {
      return "rstd of row " + std::to_string(r) + ": got " + std::to_string(rstd[r]) + " want " +
             std::to_string(rr);
    });
    if (in_place)
      for (std::size_t i = cols; i < xs; ++i)
        bad.expect(x[r * xs + i] == x0[r * xs + i],
                   [&] { return "padding of row " + std::to_string(r) + " was written"; });
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  CHECK(x.guards_intact());
  CHECK(y.guards_intact());
  if (!in_place) CHECK(test::bitwise_equal(x.data(), x0.data(), x.size()));
}

}  // namespace

TEST_CASE("rms_norm: every size, tail, alignment, stride and gamma variant matches float64") {
  const std::size_t cols_list[] = {1,  2,  3,  4,  5,   6,   7,   8,   9,    10,   11,
                                   12, 13, 14, 15, 16,  17,  18,  19,  20,   21,   22,
                                   23, 24, 25, 26, 27,  28,  29,  30,  31,   32,   33,
                                   47, 63, 64, 65, 127, 128, 129, 768, 4096, 4099, 65537};
  test::for_each_isa([&](isa i) {
    std::uint32_t seed = 100;
    for (std::size_t cols : cols_list)
      for (std::size_t rows :
           {std::size_t(1), std::size_t(3), std::size_t(17), std::size_t(1000)}) {
        if (rows * cols > 300000 && rows > 3) continue;
        if (test::quick() && rows * cols > 20000) continue;  // emulated: every tail, fewer rows
        check_rms(i, rows, cols, 3, 1, true, false, seed++);
        check_rms(i, rows, cols, 0, 0, false, true, seed++);
        check_rms(i, rows, cols, 5, 3, true, true, seed++);
      }
  });
}

TEST_CASE("rms_norm: tiny and huge magnitudes keep float64 accuracy") {
  test::for_each_isa([](isa i) {
    for (double scale : {1e-15, 1e15})
      for (std::size_t cols : {std::size_t(5), std::size_t(64), std::size_t(4099)})
        check_rms(i, 3, cols, 0, 0, true, false, 7, scale);
  });
}

TEST_CASE("rms_norm: zero rows give zeros, NaN and Inf stay in their row") {
  test::for_each_isa([](isa) {
    const std::size_t rows = 4, cols = 37;
    std::vector<float> x(rows * cols), y(rows * cols);
    test::fill_normal(x.data(), x.size(), 3);
    for (std::size_t k = 0; k < cols; ++k) x[k] = 0.f;
    x[1 * cols + 5] = std::numeric_limits<float>::quiet_NaN();
    x[2 * cols + 36] = std::numeric_limits<float>::infinity();
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    REQUIRE(simdnorm::rms_norm(tensor_desc::contiguous({rows, cols}),
                               tensor_desc::contiguous({rows, cols}), {}, a)
                .ok());
    for (std::size_t k = 0; k < cols; ++k) CHECK(y[k] == 0.f);
    std::size_t finite1 = 0, finite3 = 0;
    for (std::size_t k = 0; k < cols; ++k) {
      finite1 += std::isfinite(y[cols + k]);
      finite3 += std::isfinite(y[3 * cols + k]);
    }
    CHECK(finite1 == 0);
    CHECK(finite3 == cols);
    // An Inf makes the sum of squares Inf: the Inf element becomes NaN (Inf * 0), the rest 0.
    CHECK(std::isnan(y[2 * cols + 36]));
  });
}

// Guards the tolerance itself: the bound that accepts the library's result on every ISA must
// reject a result computed without eps, or with the sum of squares divided by n - 1. The data
// are small (mean square about 1e-6 = eps) so that eps moves every output by about 30 %.
TEST_CASE("rms_norm: the bound accepts the library and rejects no eps or the wrong mean") {
  const std::size_t cols = 16;
  const double eps = 1e-6;  // rms_norm_params' default
  std::vector<float> x(cols), y(cols);
  test::fill_normal(x.data(), cols, 8, 0.0, 1e-3);
  std::vector<double> yr(cols), no_eps(cols);
  ref::rms_norm_row(x.data(), cols, nullptr, eps, yr.data());
  ref::rms_norm_row(x.data(), cols, nullptr, 0.0, no_eps.data());
  double q = 0;
  for (float v : x) q += double(v) * v;
  const double wrong_mean = 1.0 / std::sqrt(q / (cols - 1) + eps);
  test::for_each_isa([&](isa i) {
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    REQUIRE(simdnorm::rms_norm(tensor_desc::contiguous({1, std::int64_t(cols)}),
                               tensor_desc::contiguous({1, std::int64_t(cols)}), {}, a)
                .ok());
    const double depth = ref::accumulation_depth(cols, test::lanes(i));
    test::failures library;
    std::size_t rejected_no_eps = 0, rejected_mean = 0;
    for (std::size_t k = 0; k < cols; ++k) {
      const double tol = rms_bound(depth, yr[k]);
      library.expect(std::fabs(y[k] - yr[k]) <= tol, [&] { return "col " + std::to_string(k); });
      rejected_no_eps += std::fabs(no_eps[k] - yr[k]) > tol;
      rejected_mean += std::fabs(x[k] * wrong_mean - yr[k]) > tol;
    }
    CHECK_MESSAGE(library.none(), library.report());
    CHECK(rejected_no_eps > cols / 2);
    CHECK(rejected_mean > cols / 2);
  });
}

TEST_CASE("rms_norm and layer_norm: weight_offset scales by gamma + offset (Gemma's 1 + w)" *
          doctest::skip(!test::all_dtypes)) {
  // gamma_eff = gamma + offset rounded once in f32: the same bits as a plan without an offset
  // given gamma_eff itself; also on bf16 rows, and through the two-phase plan's run().
  test::for_each_isa([](isa) {
    for (simdnorm::dtype t : {simdnorm::dtype::f32, simdnorm::dtype::bf16})
      for (std::size_t cols : {5, 64, 1000}) {
        CAPTURE(cols);
        const std::size_t rows = 7, n = rows * cols;
        std::vector<float> xf(n), g(cols), g1(cols), b(cols);
        test::fill_normal(xf.data(), n, 3);
        test::fill_normal(g.data(), cols, 4, 0.0, 0.1);
        test::fill_normal(b.data(), cols, 5);
        for (std::size_t i = 0; i < cols; ++i) g1[i] = g[i] + 1.f;
        std::vector<float> x(n), y_off(n, 7.f), y_ref(n, 8.f);
        REQUIRE(simdnorm::convert(xf.data(), simdnorm::dtype::f32, x.data(), t, n).ok());
        const tensor_desc d = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, t);
        for (bool rms : {true, false}) {
          CAPTURE(rms);
          simdnorm::plan with, without;
          if (rms) {
            simdnorm::rms_norm_params prm;
            REQUIRE(simdnorm::plan::rms_norm(d, d, prm, &without).ok());
            prm.weight_offset = 1.f;
            REQUIRE(simdnorm::plan::rms_norm(d, d, prm, &with).ok());
          } else {
            simdnorm::layer_norm_params prm;
            REQUIRE(simdnorm::plan::layer_norm(d, d, prm, &without).ok());
            prm.weight_offset = 1.f;
            REQUIRE(simdnorm::plan::layer_norm(d, d, prm, &with).ok());
          }
          CHECK(with.num_phases() == 2);
          simdnorm::norm_args a;
          a.x = x.data();
          a.beta = rms ? nullptr : b.data();
          a.gamma = g1.data();
          a.y = y_ref.data();
          REQUIRE(without.execute(a).ok());
          a.gamma = g.data();
          a.y = y_off.data();
          // phase by phase on this thread, with a caller's workspace
          std::vector<unsigned char> ws(with.workspace_bytes() + 64);
          a.workspace = ws.data() + (64 - reinterpret_cast<std::uintptr_t>(ws.data()) % 64) % 64;
          for (std::size_t ph = 0; ph < with.num_phases(); ++ph)
            REQUIRE(with.run(a, ph, 0, with.num_tasks(ph)).ok());
          CHECK(std::memcmp(y_off.data(), y_ref.data(), n * simdnorm::dtype_size(t)) == 0);
          a.gamma = nullptr;
          CHECK(with.execute(a).code() == simdnorm::status_code::invalid_argument);
        }
      }
  });
  simdnorm::rms_norm_params prm;
  prm.weight_offset = NAN;
  simdnorm::plan p;
  CHECK(simdnorm::plan::rms_norm(tensor_desc::contiguous({2, 4}), tensor_desc::contiguous({2, 4}),
                                 prm, &p)
            .code() == simdnorm::status_code::invalid_argument);
}

TEST_CASE("rms_norm: per-head QK-norm in place on the q slice of a fused qkv buffer") {
  // [tokens, 3 * heads * head_dim] as projected; q viewed as [tokens, heads, head_dim] with the
  // token stride of the whole buffer, normalized per head with gamma [head_dim] (Qwen3, OLMo 2).
  const std::int64_t tokens = 5, heads = 4, hd = 64, row = 3 * heads * hd;
  std::vector<float> qkv(std::size_t(tokens * row)), g(hd);
  test::fill_normal(qkv.data(), qkv.size(), 41, 0.5, 2.0);
  test::fill_normal(g.data(), g.size(), 42, 1.0, 0.2);
  const std::vector<float> before = qkv;
  tensor_desc q;
  q.ndim = 3;
  q.shape[0] = tokens, q.shape[1] = heads, q.shape[2] = hd;
  q.strides[0] = row, q.strides[1] = hd, q.strides[2] = 1;
  simdnorm::norm_args a;
  a.x = qkv.data();
  a.y = qkv.data();
  a.gamma = g.data();
  test::for_each_isa([&](isa i) {
    qkv = before;
    REQUIRE(simdnorm::rms_norm(q, q, {1, 1e-6f}, a).ok());
    std::vector<double> want(hd);
    const double depth = ref::accumulation_depth(std::size_t(hd), test::lanes(i));
    test::failures bad;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t c = 0; c < row; ++c) {
        const std::size_t k = std::size_t(t * row + c);
        if (c >= heads * hd) {  // k and v untouched
          bad.expect(qkv[k] == before[k], [&] { return "k/v written at " + std::to_string(k); });
          continue;
        }
        if (c % hd == 0)
          ref::rms_norm_row(&before[k], std::size_t(hd), g.data(), 1e-6, want.data());
        const double w = want[std::size_t(c % hd)];
        bad.expect(std::fabs(qkv[k] - w) <= rms_bound(depth, w),
                   [&] { return "q at " + std::to_string(k); });
      }
    CHECK_MESSAGE(bad.none(), bad.report());
  });
}
