// The fused residual add of the row ops (residual_operands): h = x + residual stored to
// residual_out bit for bit as the f32 sum rounded once into x's type, and y = norm(h) against
// float64 of h as stored; in place as engines use it (h over the residual, y over x), padded
// rows, every type and ISA; the aliasing rules and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;
using test::typed;

enum class mode { separate, h_over_residual, h_over_residual_y_over_x, h_over_x };
const char* mode_name(mode m) {
  switch (m) {
    case mode::separate: return "separate";
    case mode::h_over_residual: return "h over residual";
    case mode::h_over_residual_y_over_x: return "h over residual, y over x";
    case mode::h_over_x: return "h over x";
  }
  return "?";
}

void check_residual(bool rms, dtype t, std::size_t rows, std::size_t cols, std::size_t pad, mode m,
                    std::uint32_t seed, simdnorm::isa active, bool with_bias = false) {
  CAPTURE(std::string(rms ? "rms_norm" : "layer_norm"));
  CAPTURE(std::string(simdnorm::dtype_name(t)));
  CAPTURE(std::string(mode_name(m)));
  CAPTURE(cols);
  CAPTURE(with_bias);
  const std::size_t stride = cols + pad, n = rows * stride;
  std::vector<float> xv(n), rv(n), g(cols), b(cols), bias(cols);
  test::fill_normal(bias.data(), cols, seed + 5, 0.0, 3.0);
  test::fill_normal(xv.data(), n, seed, 0.0, 1.0);
  test::fill_normal(rv.data(), n, seed + 1, 0.5, 2.0);
  test::fill_normal(g.data(), cols, seed + 2, 1.0, 0.5);
  test::fill_normal(b.data(), cols, seed + 3, 0.0, 1.0);
  typed x(t, n), r(t, n), h(t, n), y(t, n);
  x.set(xv);
  r.set(rv);
  y.set(std::vector<float>(n, 7.f));
  h.set(std::vector<float>(n, 7.f));
  const std::vector<float> x0 = x.get(n), r0 = r.get(n);
  // h as it must be stored: the f32 sum rounded once into t (simdnorm::convert is tested alone)
  std::vector<float> sum(n);
  for (std::size_t i = 0; i < n; ++i) {
    sum[i] = x0[i] + r0[i];
    if (with_bias) sum[i] += bias[i % stride < cols ? i % stride : 0];  // (x + r) + bias, in f32
  }
  typed hw(t, n);
  hw.set(sum);
  const std::vector<float> h_want = hw.get(n);

  tensor_desc d = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, t);
  d.strides[0] = std::int64_t(stride);
  simdnorm::plan p;
  REQUIRE((rms ? simdnorm::plan::rms_norm(d, d, {1, 1e-6f}, &p)
               : simdnorm::plan::layer_norm(d, d, {1, 1e-5f}, &p))
              .ok());
  REQUIRE(p.kernel_isa() == active);
  test::any_args a;
  a.x = x.data();
  a.residual = r.data();
  a.residual_bias = with_bias ? bias.data() : nullptr;
  a.gamma = g.data();
  a.beta = rms ? nullptr : b.data();
  a.y = m == mode::h_over_residual_y_over_x ? x.data() : y.data();
  a.residual_out = m == mode::separate ? h.data() : m == mode::h_over_x ? x.data() : r.data();
  const simdnorm::status s = rms ? p.execute(test::as<simdnorm::rms_norm_args>(a))
                                 : p.execute(test::as<simdnorm::layer_norm_args>(a));
  REQUIRE_MESSAGE(s.ok(), s.message());

  const std::vector<float> h_got = m == mode::separate   ? h.get(n)
                                   : m == mode::h_over_x ? x.get(n)
                                                         : r.get(n);
  const std::vector<float> y_got = m == mode::h_over_residual_y_over_x ? x.get(n) : y.get(n);
  const double uo = test::unit_roundoff(t);
  const double depth = ref::accumulation_depth(cols, test::lanes(active));
  test::failures bad;
  std::vector<double> want(cols);
  for (std::size_t k = 0; k < rows; ++k) {
    const float* hr = h_want.data() + k * stride;
    for (std::size_t i = 0; i < cols; ++i)
      bad.expect(test::bitwise_equal(&h_got[k * stride + i], &hr[i], 1),
                 [&] { return "h row " + std::to_string(k) + " col " + std::to_string(i); });
    double s_max = 0;
    if (rms) {
      ref::rms_norm_row(hr, cols, g.data(), 1e-6, want.data());
    } else {
      ref::row_stats st;
      ref::layer_norm_row(hr, cols, g.data(), b.data(), 1e-5, want.data(), &st);
      for (std::size_t i = 0; i < cols; ++i)
        s_max = std::max(s_max, std::fabs(hr[i] - hr[0]) / std::sqrt(st.var + 1e-5));
    }
    const ref::row_stats st = ref::stats(hr, cols);
    for (std::size_t i = 0; i < cols; ++i) {
      const double f32_bound =
          rms ? (depth / 2 + 4) * ref::u32 * std::fabs(want[i])
              : ref::layer_norm_bound(depth, (hr[i] - st.mean) / std::sqrt(st.var + 1e-5), s_max,
                                      g[i], b[i], want[i]);
      const double tol = f32_bound * (1 + uo) + uo * std::fabs(want[i]) + 1e-7;
      const double got = y_got[k * stride + i];
      bad.expect(std::fabs(got - want[i]) <= tol, [&] {
        return "y row " + std::to_string(k) + " col " + std::to_string(i) + ": got " +
               std::to_string(got) + " want " + std::to_string(want[i]);
      });
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  for (typed* buf : {&x, &r, &h, &y}) CHECK(buf->raw.guards_intact());
}

}  // namespace

TEST_CASE("residual: h = x + residual stored exactly, y = norm(h), in place (every ISA)" *
          doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (bool rms : {false, true})
      for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
        for (mode m : {mode::separate, mode::h_over_residual, mode::h_over_residual_y_over_x,
                       mode::h_over_x})
          for (std::size_t cols : {1, 7, 16, 33, 256, 1000}) {
            check_residual(rms, t, 11, cols, cols % 3, m, seed, i, cols % 2 == 1);
            seed += 4;
          }
  });
}

TEST_CASE("residual: h = (x + residual) + bias (ORT SkipLayerNorm), f32, every ISA") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 500;
    for (bool rms : {false, true})
      for (mode m : {mode::separate, mode::h_over_residual_y_over_x, mode::h_over_x})
        for (std::size_t cols : {1, 9, 64, 300, 20000}) {
          check_residual(rms, dtype::f32, 5, cols, cols % 2, m, seed, i, true);
          seed += 6;
        }
  });
}

TEST_CASE("residual: aliasing rules and errors write nothing") {
  const std::size_t n = 32;
  std::vector<float> x(n, 1.f), r(n, 2.f), h(n, 7.f), y(n, 7.f);
  const tensor_desc d = tensor_desc::contiguous({4, 8});
  struct row {
    const char* what;
    void (*mutate)(simdnorm::layer_norm_args&, float* x, float* r, float* h, float* y);
    const char* message;
  } rows[] = {
      {"residual without residual_out",
       [](simdnorm::layer_norm_args& a, float*, float*, float*, float*) {
         a.residual_out = nullptr;
       },
       "go together"},
      {"residual_out without residual",
       [](simdnorm::layer_norm_args& a, float*, float*, float*, float*) { a.residual = nullptr; },
       "go together"},
      {"y over h", [](simdnorm::layer_norm_args& a, float*, float*, float* h, float*) { a.y = h; },
       "args.y and args.residual_out"},
      {"h partly over x",
       [](simdnorm::layer_norm_args& a, float* x, float*, float*, float*) {
         a.residual_out = x + 1;
       },
       "args.residual_out and args.x"},
      {"bias without a residual",
       [](simdnorm::layer_norm_args& a, float* x, float*, float*, float*) {
         a.residual = a.residual_out = nullptr;
         a.residual_bias = x;
       },
       "needs args.residual"},
      {"h partly over the residual",
       [](simdnorm::layer_norm_args& a, float*, float* r, float*, float*) {
         a.residual_out = r + 3;
       },
       "args.residual_out and args.residual"},
  };
  for (const row& c : rows) {
    CAPTURE(std::string(c.what));
    simdnorm::layer_norm_args a;
    a.x = x.data();
    a.residual = r.data();
    a.residual_out = h.data();
    a.y = y.data();
    c.mutate(a, x.data(), r.data(), h.data(), y.data());
    const simdnorm::status s = simdnorm::layer_norm(d, d, {}, a);
    CHECK(s.code() == simdnorm::status_code::invalid_argument);
    CHECK_MESSAGE(std::string(s.message()).find(c.message) != std::string::npos, s.message());
  }
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(h[i] == 7.f);
    CHECK(y[i] == 7.f);
    CHECK(r[i] == 2.f);
  }
  // A channel op has no residual operands: another op's args struct does not convert to its
  // own, and a plan refuses another op's args struct.
  static_assert(!std::is_convertible_v<simdnorm::layer_norm_args, simdnorm::instance_norm_args>);
  simdnorm::layer_norm_args a;
  a.x = x.data();
  a.y = y.data();
  a.residual = r.data();
  a.residual_out = h.data();
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::instance_norm(tensor_desc::contiguous({1, 2, 4, 4}),
                                        tensor_desc::contiguous({1, 2, 4, 4}), {}, &p)
              .ok());
  const simdnorm::status s = p.execute(a);
  CHECK(s.code() == simdnorm::status_code::invalid_argument);
  CHECK_MESSAGE(std::string(s.message()).find("layer_norm_args given to a plan of instance_norm") !=
                    std::string::npos,
                s.message());
}
