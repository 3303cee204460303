// The transformer-block fusions of the row ops beyond the residual add (test_residual.cpp):
// gated RMSNorm (gate_operand) against a float64 reference, alone and after a residual add,
// in place over the gate, padded rows, every type and ISA; non-finite gates; the errors.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;
using test::typed;

double silu(double z) { return z / (1.0 + std::exp(-z)); }

/// Compares y with a float64 want where both are finite (within tol), and their classes
/// (NaN, +-Inf) where want is not.
void expect_close(test::failures& bad, double got, double want, double tol, std::size_t row,
                  std::size_t col) {
  const bool ok = std::isfinite(want) ? std::fabs(got - want) <= tol
                  : std::isnan(want)  ? std::isnan(got)
                                      : got == want;
  bad.expect(ok, [&] {
    return "row " + std::to_string(row) + " col " + std::to_string(col) + ": got " +
           std::to_string(got) + " want " + std::to_string(want);
  });
}

struct gated_case {
  dtype t = dtype::f32;
  std::size_t rows = 5, cols = 16, pad = 0;
  bool residual = false;  ///< h = x + residual first (stored over the residual)
  bool y_over_gate = false;
  bool gamma = true;
};

/// y = rms_norm(h) * gamma * silu(gate) against float64 of h as stored.
void check_gated(const gated_case& c, std::uint32_t seed, simdnorm::isa active,
                 const std::vector<float>* gate_values = nullptr) {
  CAPTURE(std::string(simdnorm::dtype_name(c.t)));
  CAPTURE(c.cols);
  CAPTURE(c.residual);
  CAPTURE(c.y_over_gate);
  const std::size_t stride = c.cols + c.pad, n = c.rows * stride;
  std::vector<float> xv(n), rv(n), zv(n), g(c.cols);
  test::fill_normal(xv.data(), n, seed, 0.0, 1.0);
  test::fill_normal(rv.data(), n, seed + 1, 0.5, 2.0);
  test::fill_normal(zv.data(), n, seed + 2, 0.0, 3.0);
  test::fill_normal(g.data(), c.cols, seed + 3, 1.0, 0.5);
  if (gate_values != nullptr) zv = *gate_values;
  typed x(c.t, n), r(c.t, n), z(c.t, n), y(c.t, n);
  x.set(xv);
  r.set(rv);
  z.set(zv);
  y.set(std::vector<float>(n, 7.f));
  const std::vector<float> x0 = x.get(n), r0 = r.get(n), z0 = z.get(n);
  std::vector<float> h0 = x0;
  if (c.residual) {
    std::vector<float> sum(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] = x0[i] + r0[i];
    typed hw(c.t, n);
    hw.set(sum);
    h0 = hw.get(n);
  }
  tensor_desc d = tensor_desc::contiguous({std::int64_t(c.rows), std::int64_t(c.cols)}, c.t);
  d.strides[0] = std::int64_t(stride);
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::rms_norm(d, d, {1, 1e-6f}, &p).ok());
  REQUIRE(p.kernel_isa() == active);
  simdnorm::rms_norm_args a;
  a.x = x.data();
  a.gate = z.data();
  a.gamma = c.gamma ? g.data() : nullptr;
  a.y = c.y_over_gate ? z.data() : y.data();
  if (c.residual) {
    a.residual = r.data();
    a.residual_out = r.data();
  }
  test::execute_checked(p, a);
  const std::vector<float> got = c.y_over_gate ? z.get(n) : y.get(n);
  const double uo = test::unit_roundoff(c.t);
  const double depth = ref::accumulation_depth(c.cols, test::lanes(active));
  test::failures bad;
  std::vector<double> want(c.cols);
  for (std::size_t k = 0; k < c.rows; ++k) {
    const float* hr = h0.data() + k * stride;
    ref::rms_norm_row(hr, c.cols, c.gamma ? g.data() : nullptr, 1e-6, want.data());
    for (std::size_t i = 0; i < c.cols; ++i) {
      const double w = want[i] * silu(z0[k * stride + i]);
      // the RMSNorm bound of test_residual.cpp, plus exp, 1 + e, the division and the product
      const double f32_bound = (depth / 2 + 10) * ref::u32 * std::fabs(w);
      expect_close(bad, got[k * stride + i], w, f32_bound * (1 + uo) + uo * std::fabs(w) + 1e-7, k,
                   i);
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  for (typed* buf : {&x, &r, &z, &y}) CHECK(buf->raw.guards_intact());
}

/// Mamba-2's gate before the norm: y = rms_norm(x * silu(gate)) * gamma, x and gate of type
/// xt, y of type yt (in place over x or the gate when the types agree).
void check_gate_before(dtype xt, dtype yt, std::size_t rows, std::size_t cols, int in_place,
                       std::uint32_t seed, simdnorm::isa active) {
  CAPTURE(std::string(simdnorm::dtype_name(xt)));
  CAPTURE(std::string(simdnorm::dtype_name(yt)));
  CAPTURE(cols);
  CAPTURE(in_place);
  const std::size_t n = rows * cols;
  std::vector<float> xv(n), zv(n), g(cols);
  test::fill_normal(xv.data(), n, seed, 0.0, 1.0);
  test::fill_normal(zv.data(), n, seed + 1, 0.5, 2.0);
  test::fill_normal(g.data(), cols, seed + 2, 1.0, 0.5);
  typed x(xt, n), z(xt, n), y(yt, n);
  x.set(xv);
  z.set(zv);
  const std::vector<float> x0 = x.get(n), z0 = z.get(n);
  const tensor_desc xd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, xt);
  const tensor_desc yd = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, yt);
  simdnorm::rms_norm_params p{1, 1e-6f};
  p.gate_before_norm = true;
  simdnorm::plan plan;
  REQUIRE(simdnorm::plan::rms_norm(xd, yd, p, &plan).ok());
  REQUIRE(plan.kernel_isa() == active);
  simdnorm::rms_norm_args a;
  a.x = x.data();
  a.gate = z.data();
  a.gamma = g.data();
  a.y = in_place == 1 ? x.data() : in_place == 2 ? z.data() : y.data();
  test::execute_checked(plan, a);
  const std::vector<float> got = in_place == 1 ? x.get(n) : in_place == 2 ? z.get(n) : y.get(n);
  // Bound: the kernel stores h = x * silu(z) in y's type: silu (exp, 1 + e, the division) and
  // the product cost up to 8 u per element in f32, then y's rounding uo. Each element's h
  // error moves y by as much relatively, and the rms by at most the largest: 2 (8 u + uo).
  // Then RMSNorm's bound (test_residual.cpp) and y's own rounding.
  const double uo = test::unit_roundoff(yt);
  const double depth = ref::accumulation_depth(cols, test::lanes(active));
  test::failures bad;
  std::vector<double> h(cols), want(cols);
  for (std::size_t k = 0; k < rows; ++k) {
    for (std::size_t i = 0; i < cols; ++i) h[i] = double(x0[k * cols + i]) * silu(z0[k * cols + i]);
    double q = 0;
    for (std::size_t i = 0; i < cols; ++i) q += h[i] * h[i];
    const double rs = 1 / std::sqrt(q / double(cols) + 1e-6);
    for (std::size_t i = 0; i < cols; ++i) {
      const double w = h[i] * rs * g[i];
      const double tol =
          ((depth / 2 + 4) * ref::u32 + 2 * (8 * ref::u32 + uo) + uo) * std::fabs(w) + 1e-7;
      expect_close(bad, got[k * cols + i], w, tol, k, i);
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  for (typed* buf : {&x, &z, &y}) CHECK(buf->raw.guards_intact());
}

}  // namespace

TEST_CASE("gated rms_norm: y = rms_norm(x) * gamma * silu(gate), every ISA") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (std::size_t cols : {1, 7, 16, 33, 256, 1000, 20000}) {
      gated_case c;
      c.cols = cols;
      c.pad = cols % 3;
      for (int variant = 0; variant < 4; ++variant) {
        c.residual = variant & 1;
        c.y_over_gate = variant & 2;
        c.gamma = cols != 33;
        check_gated(c, seed += 4, i);
      }
    }
  });
}

TEST_CASE("gated rms_norm: bf16 and f16, every ISA" * doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 100;
    for (dtype t : {dtype::bf16, dtype::f16})
      for (std::size_t cols : {7, 64, 300})
        for (bool residual : {false, true}) {
          gated_case c;
          c.t = t;
          c.cols = cols;
          c.residual = residual;
          check_gated(c, seed += 4, i);
        }
  });
}

TEST_CASE("gated rms_norm: non-finite and extreme gates stay in their element") {
  test::for_each_isa([](simdnorm::isa i) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> specials = {inf, -inf, nan, -100.f, 100.f, -0.f, 0.f, 88.f, -88.f};
    for (std::size_t cols : {9, 40}) {
      gated_case c;
      c.rows = 3;
      c.cols = cols;
      std::vector<float> z(c.rows * cols);
      for (std::size_t k = 0; k < z.size(); ++k) z[k] = specials[k % specials.size()];
      check_gated(c, 7, i, &z);
    }
  });
}

TEST_CASE("gated rms_norm: errors write nothing") {
  const std::size_t n = 32;
  std::vector<float> x(n, 1.f), r(n, 2.f), h(n, 7.f), y(n, 7.f), z(n, 0.5f);
  const tensor_desc d = tensor_desc::contiguous({4, 8});
  struct row {
    const char* what;
    int op;  // 0 rms_norm, 1 layer_norm, 2 lp_norm
    void (*mutate)(simdnorm::rms_norm_args&, float* z, float* h, float* y);
    const char* message;
  } rows[] = {
      {"gate on layer_norm", 1, [](simdnorm::rms_norm_args&, float*, float*, float*) {},
       "rms_norm_args given to a plan of layer_norm"},
      {"gate on lp_norm", 2, [](simdnorm::rms_norm_args&, float*, float*, float*) {},
       "rms_norm_args given to a plan of lp_norm"},
      {"gate over h", 0,
       [](simdnorm::rms_norm_args& a, float*, float* h, float*) {
         a.residual = a.x;  // h = x + x over h: the gate may not overlap h
         a.residual_out = h;
         a.gate = h + 4;
       },
       "args.gate and args.residual_out"},
      {"y partly over the gate", 0,
       [](simdnorm::rms_norm_args& a, float* z, float*, float*) { a.y = z + 1; },
       "args.y and args.gate"},
  };
  for (const row& c : rows) {
    CAPTURE(std::string(c.what));
    simdnorm::rms_norm_args a;
    a.x = x.data();
    a.gate = z.data();
    a.y = y.data();
    c.mutate(a, z.data(), h.data(), y.data());
    simdnorm::plan p;
    REQUIRE((c.op == 0   ? simdnorm::plan::rms_norm(d, d, {}, &p)
             : c.op == 1 ? simdnorm::plan::layer_norm(d, d, {}, &p)
                         : simdnorm::plan::lp_norm(d, d, {}, &p))
                .ok());
    const simdnorm::status s = p.execute(a);
    CHECK(s.code() == simdnorm::status_code::invalid_argument);
    CHECK_MESSAGE(std::string(s.message()).find(c.message) != std::string::npos, s.message());
  }
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(h[i] == 7.f);
    CHECK(y[i] == 7.f);
    CHECK(z[i] == 0.5f);
  }
}

// Every fusion at once (residual add with bias, gate, adaLN on LayerNorm, int8 y with block
// scales and the amax on RMSNorm) on a shape of several tasks: the same bits on the serial
// executor, on 3 threads and task by task in reverse order.
TEST_CASE("fusions: outputs are bitwise identical for any executor and thread count") {
  const std::int64_t B = 4, T = 64, D = 1024;  // 2^18 elements: above the inline size
  const std::size_t n = std::size_t(B * T * D);
  std::vector<float> x(n), r(n), z(n), g(D), b(D), bias(D), mod(std::size_t(2 * B * D));
  test::fill_normal(x.data(), n, 1, 0.3, 1.0);
  test::fill_normal(r.data(), n, 2, 0.0, 1.0);
  test::fill_normal(z.data(), n, 3, 0.0, 2.0);
  test::fill_normal(g.data(), D, 4, 1.0, 0.2);
  test::fill_normal(b.data(), D, 5, 0.0, 0.5);
  test::fill_normal(bias.data(), D, 6, 0.0, 0.1);
  test::fill_normal(mod.data(), mod.size(), 7, 0.0, 0.3);
  const tensor_desc d = tensor_desc::contiguous({B, T, D});
  tensor_desc q = d;
  q.type = dtype::i8;
  simdnorm::layer_norm_params lp;
  lp.modulation_tokens = T;
  simdnorm::rms_norm_params rp;
  rp.quant.block = 128;
  rp.quant.row_amax = true;
  simdnorm::plan ln, rms;
  REQUIRE(simdnorm::plan::layer_norm(d, d, lp, &ln).ok());
  REQUIRE(simdnorm::plan::rms_norm(d, q, rp, &rms).ok());
  REQUIRE(ln.num_tasks() > 1);
  REQUIRE(rms.num_tasks() > 1);

  struct outputs {
    std::vector<float> h, y, scales, amax;
    std::vector<std::int8_t> codes;
  };
  const auto run = [&](int how) {
    outputs o{r, std::vector<float>(n), std::vector<float>(n / 128), std::vector<float>(B * T),
              std::vector<std::int8_t>(n)};
    simdnorm::layer_norm_args la;
    la.x = x.data(), la.y = o.y.data(), la.gamma = g.data(), la.beta = b.data();
    la.residual = o.h.data(), la.residual_out = o.h.data(), la.residual_bias = bias.data();
    la.modulation_scale = mod.data(), la.modulation_shift = mod.data() + D;
    la.modulation_stride = 2 * D;
    simdnorm::rms_norm_args ra;
    ra.x = o.y.data(), ra.y = o.codes.data(), ra.gamma = g.data(), ra.gate = z.data();
    ra.y_scale = o.scales.data(), ra.amax = o.amax.data();
    test::chunked_thread_executor three(3);
    if (how == 2) {  // every task by hand, last first
      for (const simdnorm::plan* p : {&ln, &rms}) {
        test::buffer ws(p->workspace_bytes() / sizeof(float) + 1);
        la.workspace = ra.workspace = ws.data();
        for (std::size_t ph = 0; ph < p->num_phases(); ++ph)
          for (std::size_t t = p->num_tasks(ph); t-- > 0;)
            REQUIRE((p == &ln ? p->run(la, ph, t, t + 1) : p->run(ra, ph, t, t + 1)).ok());
      }
    } else {
      simdnorm::executor* e = how == 0 ? &simdnorm::serial_executor() : &three;
      REQUIRE(ln.execute(la, e).ok());
      REQUIRE(rms.execute(ra, e).ok());
    }
    return o;
  };
  const outputs serial = run(0);
  for (int how : {1, 2}) {
    CAPTURE(how);
    const outputs o = run(how);
    CHECK(test::bitwise_equal(o.h.data(), serial.h.data(), n));
    CHECK(test::bitwise_equal(o.y.data(), serial.y.data(), n));
    CHECK(test::bitwise_equal(o.scales.data(), serial.scales.data(), o.scales.size()));
    CHECK(test::bitwise_equal(o.amax.data(), serial.amax.data(), o.amax.size()));
    CHECK(o.codes == serial.codes);
  }
}

TEST_CASE("gated rms_norm: the gate before the norm (Mamba-2), every ISA and type") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 300;
    const std::vector<dtype> types = test::all_dtypes
                                         ? std::vector<dtype>{dtype::f32, dtype::bf16, dtype::f16}
                                         : std::vector<dtype>{dtype::f32};
    for (dtype xt : types)
      for (dtype yt : types)
        for (std::size_t cols : {1, 7, 16, 33, 256, 1000, 20000})
          for (int in_place : {0, 1, 2}) {
            if (in_place != 0 && xt != yt) continue;
            const std::size_t rows = cols >= 20000 ? 8 : 5;  // 8 x 20000: split into pieces
            check_gate_before(xt, yt, rows, cols, in_place, seed += 3, i);
          }
  });
}

TEST_CASE("gated rms_norm: the gate before the norm refuses what it cannot do") {
  std::vector<float> x(64, 1.f), z(64, 1.f), y(64, 7.f), r(64, 2.f), s(8);
  const tensor_desc d = tensor_desc::contiguous({8, 8});
  tensor_desc q = d;
  q.type = dtype::i8;
  simdnorm::rms_norm_params p;
  p.gate_before_norm = true;
  simdnorm::rms_norm_args a;
  a.x = x.data(), a.y = y.data();
  const auto fails = [](const simdnorm::status& st, const char* word) {
    CHECK(st.code() == simdnorm::status_code::invalid_argument);
    CHECK_MESSAGE(std::string(st.message()).find(word) != std::string::npos, st.message());
  };
  fails(simdnorm::rms_norm(d, d, p, a), "args.gate is null");
  a.gate = z.data();
  a.residual = a.residual_out = r.data();
  fails(simdnorm::rms_norm(d, d, p, a), "does not combine with the residual add");
  a.residual = a.residual_out = nullptr;
  simdnorm::plan plan;
  p.stage = simdnorm::stats_stage::moments;
  fails(simdnorm::plan::rms_norm(d, d, p, &plan), "stats_stage::full");
  p.stage = simdnorm::stats_stage::full;
  p.modulation_tokens = 2;
  fails(simdnorm::plan::rms_norm(d, d, p, &plan), "adaLN");
  p.modulation_tokens = 0;
  fails(simdnorm::plan::rms_norm(d, q, p, &plan), "a float y");
  for (float v : y) CHECK(v == 7.f);
  CHECK(r == std::vector<float>(64, 2.f));
}
