// The fused residual add of the row ops (residual_operands): h = x + residual stored to
// residual_out bit for bit as the f32 sum rounded once into x's type, and y = norm(h) against
// float64 of h as stored; in place as engines use it (h over the residual, y over x), padded
// rows, every type and ISA; the aliasing rules and the errors. And the post-norm residual
// (residual_after_norm): y = norm(x) + residual, against float64 and bit for bit against the
// unfused sequence in f32, in place over the residual or x, rows whole or split in pieces.
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

/// The float64 norm of one row (LayerNorm eps 1e-5, RMSNorm eps 1e-6; gamma, beta may be null)
/// and the f32 kernel's error bound of each element: RMSNorm's sum-depth bound, LayerNorm's
/// layer_norm_bound (tests/reference.hpp), before the rounding into the output type.
void reference_row(bool rms, const float* row, std::size_t cols, const float* gamma,
                   const float* beta, double depth, double* want, double* bound) {
  if (rms) {
    ref::rms_norm_row(row, cols, gamma, 1e-6, want);
    for (std::size_t i = 0; i < cols; ++i)
      bound[i] = (depth / 2 + 4) * ref::u32 * std::fabs(want[i]);
    return;
  }
  ref::row_stats st;
  ref::layer_norm_row(row, cols, gamma, beta, 1e-5, want, &st);
  const double sigma = std::sqrt(st.var + 1e-5);
  double s_max = 0;
  for (std::size_t i = 0; i < cols; ++i)
    s_max = std::max(s_max, std::fabs(row[i] - row[0]) / sigma);
  for (std::size_t i = 0; i < cols; ++i)
    bound[i] = ref::layer_norm_bound(depth, (row[i] - st.mean) / sigma, s_max,
                                     gamma ? gamma[i] : 1.f, beta ? beta[i] : 0.f, want[i]);
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
  std::vector<double> want(cols), f32_bound(cols);
  for (std::size_t k = 0; k < rows; ++k) {
    const float* hr = h_want.data() + k * stride;
    for (std::size_t i = 0; i < cols; ++i)
      bad.expect(test::bitwise_equal(&h_got[k * stride + i], &hr[i], 1),
                 [&] { return "h row " + std::to_string(k) + " col " + std::to_string(i); });
    reference_row(rms, hr, cols, g.data(), rms ? nullptr : b.data(), depth, want.data(),
                  f32_bound.data());
    for (std::size_t i = 0; i < cols; ++i) {
      const double tol = f32_bound[i] * (1 + uo) + uo * std::fabs(want[i]) + 1e-7;
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

enum class post_mode { separate, y_over_residual, y_over_x };
const char* post_mode_name(post_mode m) {
  switch (m) {
    case post_mode::separate: return "separate";
    case post_mode::y_over_residual: return "y over residual";
    case post_mode::y_over_x: return "y over x";
  }
  return "?";
}

/// The affine terms a post-norm case has: LayerNorm gamma and beta, gamma only, none; RMSNorm
/// gamma or none.
enum class affine { gamma_beta, gamma, none };

/// The post-norm residual (residual_after_norm): y = norm(x) + residual against float64 of the
/// stored x and residual, and for f32 bit for bit against the unfused sequence (the plain plan,
/// then the f32 add), which is what PyTorch's norm(x) + r computes from the same norm.
void check_post_norm(bool rms, dtype t, std::size_t rows, std::size_t cols, std::size_t pad,
                     post_mode m, affine aff, std::uint32_t seed, simdnorm::isa active) {
  CAPTURE(std::string(rms ? "rms_norm" : "layer_norm"));
  CAPTURE(std::string(simdnorm::dtype_name(t)));
  CAPTURE(std::string(post_mode_name(m)));
  CAPTURE(int(aff));
  CAPTURE(cols);
  const std::size_t stride = cols + pad, n = rows * stride;
  std::vector<float> xv(n), rv(n), g(cols), b(cols);
  test::fill_normal(xv.data(), n, seed, 0.2, 1.0);
  test::fill_normal(rv.data(), n, seed + 1, 0.5, 2.0);
  test::fill_normal(g.data(), cols, seed + 2, 1.0, 0.5);
  test::fill_normal(b.data(), cols, seed + 3, 0.0, 1.0);
  typed x(t, n), r(t, n), y(t, n), plain(t, n);
  x.set(xv);
  r.set(rv);
  y.set(std::vector<float>(n, 7.f));
  const std::vector<float> x0 = x.get(n), r0 = r.get(n);
  const float* gamma = aff != affine::none ? g.data() : nullptr;
  const float* beta = aff == affine::gamma_beta && !rms ? b.data() : nullptr;

  tensor_desc d = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, t);
  d.strides[0] = std::int64_t(stride);
  simdnorm::layer_norm_params lp{1, 1e-5f};
  simdnorm::rms_norm_params rp{1, 1e-6f};
  simdnorm::plan unfused, fused;
  REQUIRE((rms ? simdnorm::plan::rms_norm(d, d, rp, &unfused)
               : simdnorm::plan::layer_norm(d, d, lp, &unfused))
              .ok());
  lp.residual_after_norm = rp.residual_after_norm = true;
  REQUIRE((rms ? simdnorm::plan::rms_norm(d, d, rp, &fused)
               : simdnorm::plan::layer_norm(d, d, lp, &fused))
              .ok());
  REQUIRE(fused.kernel_isa() == active);
  test::any_args a;
  a.x = x.data();
  a.gamma = gamma;
  a.beta = beta;
  a.y = plain.data();
  const auto run = [&](const simdnorm::plan& p) {
    const simdnorm::status s = rms ? p.execute(test::as<simdnorm::rms_norm_args>(a))
                                   : p.execute(test::as<simdnorm::layer_norm_args>(a));
    REQUIRE_MESSAGE(s.ok(), s.message());
  };
  run(unfused);
  const std::vector<float> norm_got = plain.get(n);
  a.residual = r.data();
  a.y = m == post_mode::y_over_residual ? r.data() : m == post_mode::y_over_x ? x.data() : y.data();
  run(fused);
  const std::vector<float> got = m == post_mode::y_over_residual ? r.get(n)
                                 : m == post_mode::y_over_x      ? x.get(n)
                                                                 : y.get(n);
  // Bound: the norm's f32 error e (test_residual's check_residual), then the f32 sum and y's
  // rounding: |got - want| <= e + (u32 + uo (1 + u32)) (|want| + e).
  const double uo = test::unit_roundoff(t);
  const double depth = ref::accumulation_depth(cols, test::lanes(active));
  test::failures bad;
  std::vector<double> want(cols), f32_bound(cols);
  for (std::size_t k = 0; k < rows; ++k) {
    reference_row(rms, x0.data() + k * stride, cols, gamma, beta, depth, want.data(),
                  f32_bound.data());
    for (std::size_t i = 0; i < cols; ++i) {
      const std::size_t at = k * stride + i;
      const double e = f32_bound[i];
      const double w = want[i] + double(r0[at]);
      const double tol = e + (ref::u32 + uo * (1 + ref::u32)) * (std::fabs(w) + e) + 1e-7;
      bad.expect(std::fabs(got[at] - w) <= tol, [&] {
        return "y row " + std::to_string(k) + " col " + std::to_string(i) + ": got " +
               std::to_string(got[at]) + " want " + std::to_string(w);
      });
      if (t == dtype::f32) {
        const float unfused_y = norm_got[at] + r0[at];
        bad.expect(test::bitwise_equal(&got[at], &unfused_y, 1), [&] {
          return "y row " + std::to_string(k) + " col " + std::to_string(i) +
                 " differs from the unfused norm + residual";
        });
      }
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  for (typed* buf : {&x, &r, &y, &plain}) CHECK(buf->raw.guards_intact());
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

TEST_CASE("residual: post-norm y = norm(x) + residual, in place, every type and ISA") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 700;
    const std::vector<dtype> types = test::all_dtypes
                                         ? std::vector<dtype>{dtype::f32, dtype::bf16, dtype::f16}
                                         : std::vector<dtype>{dtype::f32};
    for (bool rms : {false, true})
      for (dtype t : types)
        for (post_mode m : {post_mode::separate, post_mode::y_over_residual, post_mode::y_over_x})
          for (affine aff : {affine::gamma_beta, affine::gamma, affine::none})
            for (std::size_t cols : {1, 7, 16, 33, 256, 1000, 20000}) {
              if (rms && aff == affine::gamma_beta) continue;  // RMSNorm has no beta
              // 3 x 20000: rows split into pieces across tasks (piece_apply)
              const std::size_t rows = cols >= 20000 ? 3 : 11;
              check_post_norm(rms, t, rows, cols, cols % 3, m, aff, seed += 4, i);
            }
  });
}

TEST_CASE("residual: post-norm gives the same bits on any executor, rows whole or split") {
  for (std::int64_t cols : {1024, 1 << 17}) {  // 256 whole rows; 2 rows of many pieces
    CAPTURE(cols);
    const std::int64_t rows = (1 << 18) / cols;
    const std::size_t n = std::size_t(rows * cols);
    const std::size_t d_cols = static_cast<std::size_t>(cols);
    std::vector<float> x(n), r(n), g(d_cols), b(d_cols);
    test::fill_normal(x.data(), n, 11, 0.3, 1.0);
    test::fill_normal(r.data(), n, 12, 0.0, 1.0);
    test::fill_normal(g.data(), g.size(), 13, 1.0, 0.2);
    test::fill_normal(b.data(), b.size(), 14, 0.0, 0.5);
    const tensor_desc d = tensor_desc::contiguous({rows, cols});
    simdnorm::layer_norm_params lp;
    lp.residual_after_norm = true;
    simdnorm::plan p;
    REQUIRE(simdnorm::plan::layer_norm(d, d, lp, &p).ok());
    REQUIRE(p.num_tasks() > 1);
    const auto run = [&](int how) {
      std::vector<float> y = r;  // in place over the residual stream
      simdnorm::layer_norm_args a;
      a.x = x.data(), a.y = y.data(), a.residual = y.data(), a.gamma = g.data(), a.beta = b.data();
      test::chunked_thread_executor three(3);
      if (how == 2) {  // every task by hand, last first
        test::buffer ws(p.workspace_bytes() / sizeof(float) + 1);
        a.workspace = ws.data();
        for (std::size_t ph = 0; ph < p.num_phases(); ++ph)
          for (std::size_t t = p.num_tasks(ph); t-- > 0;) REQUIRE(p.run(a, ph, t, t + 1).ok());
      } else {
        REQUIRE(p.execute(a, how == 0 ? &simdnorm::serial_executor() : &three).ok());
      }
      return y;
    };
    const std::vector<float> serial = run(0);
    for (int how : {1, 2}) {
      CAPTURE(how);
      CHECK(test::bitwise_equal(run(how).data(), serial.data(), n));
    }
  }
}

TEST_CASE("residual: post-norm refuses what it cannot do and writes nothing") {
  const std::size_t n = 32;
  std::vector<float> x(n, 1.f), r(n, 2.f), h(n, 7.f), y(n, 7.f), z(n, 0.5f), s(4);
  const tensor_desc d = tensor_desc::contiguous({4, 8});
  simdnorm::rms_norm_params p;
  p.residual_after_norm = true;
  const auto fails = [](const simdnorm::status& st, const char* word) {
    CHECK(st.code() == simdnorm::status_code::invalid_argument);
    CHECK_MESSAGE(std::string(st.message()).find(word) != std::string::npos, st.message());
  };
  struct row {
    const char* what;
    void (*mutate)(simdnorm::rms_norm_args&, float* r, float* h, float* y, float* z);
    const char* message;
  } rows[] = {
      {"no residual",
       [](simdnorm::rms_norm_args& a, float*, float*, float*, float*) { a.residual = nullptr; },
       "args.residual is null"},
      {"a residual_out",
       [](simdnorm::rms_norm_args& a, float*, float* h, float*, float*) { a.residual_out = h; },
       "args.residual_out: with residual_after_norm"},
      {"a bias",
       [](simdnorm::rms_norm_args& a, float*, float* h, float*, float*) { a.residual_bias = h; },
       "args.residual_bias: with residual_after_norm"},
      {"a gate", [](simdnorm::rms_norm_args& a, float*, float*, float*, float* z) { a.gate = z; },
       "does not combine with residual_after_norm"},
      {"y partly over the residual",
       [](simdnorm::rms_norm_args& a, float* r, float*, float*, float*) { a.y = r + 1; },
       "args.y and args.residual"},
  };
  for (const row& c : rows) {
    CAPTURE(std::string(c.what));
    simdnorm::rms_norm_args a;
    a.x = x.data();
    a.residual = r.data();
    a.y = y.data();
    c.mutate(a, r.data(), h.data(), y.data(), z.data());
    fails(simdnorm::rms_norm(d, d, p, a), c.message);
  }
  // What the plan refuses: no y to add to, an 8-bit y or the amax, adaLN, the gate first.
  simdnorm::plan plan;
  simdnorm::rms_norm_params q = p;
  q.stage = simdnorm::stats_stage::moments;
  fails(simdnorm::plan::rms_norm(d, d, q, &plan), "residual_after_norm");
  tensor_desc d8 = d;
  d8.type = dtype::i8;
  fails(simdnorm::plan::rms_norm(d, d8, p, &plan), "a float y");
  q = p;
  q.quant.row_amax = true;
  fails(simdnorm::plan::rms_norm(d, d, q, &plan), "quant.row_amax");
  q = p;
  q.modulation_tokens = 2;
  fails(simdnorm::plan::rms_norm(d, d, q, &plan), "adaLN");
  q = p;
  q.gate_before_norm = true;
  fails(simdnorm::plan::rms_norm(d, d, q, &plan), "gate_before_norm");
  simdnorm::layer_norm_params lq;
  lq.residual_after_norm = true;
  lq.stage = simdnorm::stats_stage::moments;
  fails(simdnorm::plan::layer_norm(d, d, lq, &plan), "residual_after_norm");
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(h[i] == 7.f);
    CHECK(y[i] == 7.f);
    CHECK(r[i] == 2.f);
  }
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
  {  // x's rows overlap (stride 0: every row reads the same memory): h, which takes x's
     // layout, would too (found by the C API fuzzer), so the residual add is refused
    tensor_desc xd = d;
    xd.strides[0] = 0;
    simdnorm::layer_norm_args a;
    a.x = x.data();
    a.residual = r.data();
    a.residual_out = r.data();
    a.y = y.data();
    const simdnorm::status s = simdnorm::layer_norm(xd, d, {}, a);
    CHECK(s.code() == simdnorm::status_code::invalid_argument);
    CHECK_MESSAGE(
        std::string(s.message()).find("x's strides make rows overlap") != std::string::npos,
        s.message());
    a.residual = a.residual_out = nullptr;  // without the residual add such an x is fine
    CHECK(simdnorm::layer_norm(xd, d, {}, a).ok());
    y.assign(n, 7.f);
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
