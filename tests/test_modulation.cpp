// adaLN modulation of LayerNorm and RMSNorm (DiT): y = norm(h) [* gamma + beta] * (1 + scale)
// + shift, scale and shift one row per batch of T rows, against a float64 reference on every
// ISA: one row for all (stride 0), several batches, padded and chunked modulation rows, tails,
// long rows split into pieces, bf16 / f16 x and y, in place, with the residual add and the
// weight offset; split statistics (apply); an 8-bit y bit for bit against the float y; a DiT
// block's adaLN; the errors.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::dtype;
using simdnorm::tensor_desc;
using test::typed;

struct mod_case {
  bool rms = false;
  dtype tx = dtype::f32, ty = dtype::f32;
  std::size_t batches = 3, tokens = 5, cols = 16, pad = 0;
  std::size_t mod_stride = 0;  ///< 0: one modulation row for all; else >= cols
  bool gamma = true, beta = true;
  bool residual = false;  ///< h = x + residual, stored over the residual
  bool in_place = false;  ///< y over x (same type)
  float weight_offset = 0.f;
  bool staged = false;  ///< stats_stage::apply with the moments of an unmodulated moments plan
};

/// The plan's y for case c, and the float64 reference with its bound (derived below).
void check_modulated(const mod_case& c, std::uint32_t seed, simdnorm::isa active) {
  CAPTURE(c.rms);
  CAPTURE(std::string(simdnorm::dtype_name(c.tx)));
  CAPTURE(std::string(simdnorm::dtype_name(c.ty)));
  CAPTURE(c.batches);
  CAPTURE(c.tokens);
  CAPTURE(c.cols);
  CAPTURE(c.mod_stride);
  CAPTURE(c.gamma);
  CAPTURE(c.beta);
  CAPTURE(c.residual);
  CAPTURE(c.in_place);
  CAPTURE(c.staged);
  const std::size_t rows = c.batches * c.tokens, stride = c.cols + c.pad, n = rows * stride;
  const std::size_t mod_rows = c.mod_stride == 0 ? 1 : c.batches;
  const std::size_t mod_n = (mod_rows - 1) * c.mod_stride + c.cols;
  std::vector<float> xv(n), rv(n), g(c.cols), b(c.cols), scale(mod_n), shift(mod_n);
  test::fill_normal(xv.data(), n, seed, 0.3, 1.0);
  test::fill_normal(rv.data(), n, seed + 1, 0.5, 2.0);
  test::fill_normal(g.data(), c.cols, seed + 2, 1.0, 0.5);
  test::fill_normal(b.data(), c.cols, seed + 3, 0.0, 1.0);
  test::fill_normal(scale.data(), mod_n, seed + 4, 0.0, 0.7);
  test::fill_normal(shift.data(), mod_n, seed + 5, 0.0, 2.0);
  typed x(c.tx, n), r(c.tx, n), y(c.ty, n);
  x.set(xv);
  r.set(rv);
  y.set(std::vector<float>(n, 7.f));
  const std::vector<float> x0 = x.get(n), r0 = r.get(n);
  std::vector<float> h0 = x0;
  if (c.residual) {
    std::vector<float> sum(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] = x0[i] + r0[i];
    typed hw(c.tx, n);
    hw.set(sum);
    h0 = hw.get(n);
  }

  tensor_desc xd = tensor_desc::contiguous(
      {std::int64_t(c.batches), std::int64_t(c.tokens), std::int64_t(c.cols)}, c.tx);
  xd.strides[1] = std::int64_t(stride);
  xd.strides[0] = std::int64_t(stride * c.tokens);
  tensor_desc yd = xd;
  yd.type = c.ty;
  const auto tokens = std::int64_t(c.tokens);
  const simdnorm::stats_stage stage =
      c.staged ? simdnorm::stats_stage::apply : simdnorm::stats_stage::full;
  simdnorm::plan p;
  simdnorm::status s;
  if (c.rms) {
    simdnorm::rms_norm_params q{1, 1e-6f};
    q.weight_offset = c.weight_offset;
    q.stage = stage;
    q.modulation_tokens = tokens;
    s = simdnorm::plan::rms_norm(xd, yd, q, &p);
  } else {
    simdnorm::layer_norm_params q{1, 1e-5f};
    q.weight_offset = c.weight_offset;
    q.stage = stage;
    q.modulation_tokens = tokens;
    s = simdnorm::plan::layer_norm(xd, yd, q, &p);
  }
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(p.kernel_isa() == active);
  test::any_args a;
  a.x = x.data();
  a.y = c.in_place ? x.data() : y.data();
  a.gamma = c.gamma ? g.data() : nullptr;
  a.beta = c.beta && !c.rms ? b.data() : nullptr;
  a.modulation_scale = scale.data();
  a.modulation_shift = shift.data();
  a.modulation_stride = std::int64_t(c.mod_stride);
  if (c.residual) {
    a.residual = r.data();
    a.residual_out = r.data();
  }
  std::vector<simdnorm::moments> m(rows);
  if (c.staged) {  // the moments of x from a plain moments plan, then the modulated apply
    simdnorm::plan mp;
    if (c.rms) {
      simdnorm::rms_norm_params q{1, 1e-6f};
      q.stage = simdnorm::stats_stage::moments;
      REQUIRE(simdnorm::plan::rms_norm(xd, yd, q, &mp).ok());
    } else {
      simdnorm::layer_norm_params q{1, 1e-5f};
      q.stage = simdnorm::stats_stage::moments;
      REQUIRE(simdnorm::plan::layer_norm(xd, yd, q, &mp).ok());
    }
    simdnorm::norm_args ma;
    ma.x = x.data();
    ma.moments_out = m.data();
    REQUIRE(mp.execute(ma).ok());
    a.moments_in = m.data();
  }
  if (c.rms)
    test::execute_checked(p, test::as<simdnorm::rms_norm_args>(a));
  else
    test::execute_checked(p, test::as<simdnorm::layer_norm_args>(a));
  const std::vector<float> got = c.in_place ? x.get(n) : y.get(n);

  // Bound: the unmodulated y's bound (test_residual.cpp) times |1 + scale|, plus the folds'
  // roundings (1 + scale, gamma * (1 + scale), beta * (1 + scale) + shift: 3 ulp of each term)
  // and the fma (2 roundings without an FMA unit), plus y's own rounding into its type.
  const double uo = test::unit_roundoff(c.ty);
  const double depth = ref::accumulation_depth(c.cols, test::lanes(active));
  test::failures bad;
  std::vector<double> norm(c.cols);
  std::vector<float> ge(c.cols);
  for (std::size_t i = 0; i < c.cols; ++i)
    ge[i] = c.weight_offset != 0.f ? g[i] + c.weight_offset : g[i];
  const float* gp = c.gamma ? ge.data() : nullptr;
  const float* bp = c.beta && !c.rms ? b.data() : nullptr;
  for (std::size_t k = 0; k < rows; ++k) {
    const float* hr = h0.data() + k * stride;
    const std::size_t mb = c.mod_stride == 0 ? 0 : (k / c.tokens) * c.mod_stride;
    double s_max = 0;
    ref::row_stats st{0, 0};
    if (c.rms) {
      ref::rms_norm_row(hr, c.cols, gp, 1e-6, norm.data());
    } else {
      ref::layer_norm_row(hr, c.cols, gp, bp, 1e-5, norm.data(), &st);
      for (std::size_t i = 0; i < c.cols; ++i)
        s_max = std::max(s_max, std::fabs(hr[i] - hr[0]) / std::sqrt(st.var + 1e-5));
    }
    for (std::size_t i = 0; i < c.cols; ++i) {
      const double s1 = 1.0 + double(scale[mb + i]), sh = shift[mb + i];
      const double w = norm[i] * s1 + sh;
      const double gi = gp ? gp[i] : 1.0, bi = bp ? bp[i] : 0.0;
      const double base =
          c.rms ? (depth / 2 + 4) * ref::u32 * std::fabs(norm[i])
                : ref::layer_norm_bound(depth, (hr[i] - st.mean) / std::sqrt(st.var + 1e-5), s_max,
                                        gi, bi, norm[i]);
      const double terms = std::fabs((norm[i] - bi) * s1) + std::fabs(bi * s1) + std::fabs(sh);
      const double tol =
          (base * std::fabs(s1) + 6 * ref::u32 * terms) * (1 + uo) + uo * std::fabs(w) + 1e-6;
      const double gv = got[k * stride + i];
      bad.expect(std::fabs(gv - w) <= tol, [&] {
        return "row " + std::to_string(k) + " col " + std::to_string(i) + ": got " +
               std::to_string(gv) + " want " + std::to_string(w) + " tol " + std::to_string(tol);
      });
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  for (typed* buf : {&x, &r, &y}) CHECK(buf->raw.guards_intact());
}

}  // namespace

TEST_CASE("adaLN: y = norm(x) * (1 + scale) + shift per batch, f32, every ISA") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 1;
    for (bool rms : {false, true})
      for (std::size_t cols : {1, 7, 16, 33, 256, 1000})
        for (int variant = 0; variant < 6; ++variant) {
          mod_case c;
          c.rms = rms;
          c.cols = cols;
          c.pad = cols % 3;
          c.batches = variant < 2 ? 1 : 3;
          c.tokens = variant % 2 == 0 ? 5 : 17;
          // stride 0, dense rows [B, D], rows inside DiT's chunked [B, 6 * D] output
          c.mod_stride = variant == 0 ? 0 : variant % 3 == 1 ? cols : 6 * cols;
          c.gamma = variant != 3;
          c.beta = variant != 4;
          c.residual = variant == 2 || variant == 5;
          c.in_place = variant >= 4;
          c.weight_offset = variant == 5 ? 1.f : 0.f;
          check_modulated(c, seed += 8, i);
        }
  });
}

TEST_CASE("adaLN: long rows split into pieces, and split statistics (apply), every ISA") {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 300;
    for (bool rms : {false, true})
      for (bool staged : {false, true})
        for (std::size_t cols : {300, 40000}) {  // 40000: pieces of one row across tasks
          mod_case c;
          c.rms = rms;
          c.cols = cols;
          c.batches = 2;
          c.tokens = 2;
          c.mod_stride = cols + 3;
          c.staged = staged;
          c.residual = !staged && cols == 40000;
          check_modulated(c, seed += 8, i);
        }
  });
}

TEST_CASE("adaLN: bf16 and f16 x and y, every ISA" * doctest::skip(!test::all_dtypes)) {
  test::for_each_isa([](simdnorm::isa i) {
    std::uint32_t seed = 600;
    for (bool rms : {false, true})
      for (dtype tx : {dtype::f32, dtype::bf16, dtype::f16})
        for (dtype ty : {dtype::f32, dtype::bf16, dtype::f16})
          for (std::size_t cols : {7, 64, 300}) {
            mod_case c;
            c.rms = rms;
            c.tx = tx;
            c.ty = ty;
            c.cols = cols;
            c.mod_stride = cols == 64 ? 0 : 2 * cols;
            c.residual = cols != 7;
            c.in_place = tx == ty && cols == 300;
            check_modulated(c, seed += 8, i);
          }
  });
}

TEST_CASE("adaLN: an int8 y is the float y quantized, bit for bit, every ISA") {
  test::for_each_isa([](simdnorm::isa) {
    for (bool rms : {false, true})
      for (std::size_t cols : {9, 128, 1000}) {
        CAPTURE(rms);
        CAPTURE(cols);
        const std::size_t batches = 3, tokens = 4, rows = batches * tokens, n = rows * cols;
        std::vector<float> x(n), g(cols), b(cols), scale(batches * cols), shift(batches * cols);
        test::fill_normal(x.data(), n, 11, 0.0, 1.0);
        test::fill_normal(g.data(), cols, 12, 1.0, 0.3);
        test::fill_normal(b.data(), cols, 13, 0.0, 1.0);
        test::fill_normal(scale.data(), scale.size(), 14, 0.0, 0.5);
        test::fill_normal(shift.data(), shift.size(), 15, 0.0, 1.0);
        const tensor_desc xd = tensor_desc::contiguous(
            {std::int64_t(batches), std::int64_t(tokens), std::int64_t(cols)});
        tensor_desc qd = xd;
        qd.type = dtype::i8;
        test::any_args a;
        a.x = x.data();
        a.gamma = g.data();
        a.beta = rms ? nullptr : b.data();
        a.modulation_scale = scale.data();
        a.modulation_shift = shift.data();
        a.modulation_stride = std::int64_t(cols);
        std::vector<float> yf(n), yscale(rows);
        std::vector<std::int8_t> q(n);
        simdnorm::layer_norm_params lp;
        simdnorm::rms_norm_params rp;
        lp.modulation_tokens = rp.modulation_tokens = std::int64_t(tokens);
        a.y = yf.data();
        REQUIRE((rms ? simdnorm::rms_norm(xd, xd, rp, test::as<simdnorm::rms_norm_args>(a))
                     : simdnorm::layer_norm(xd, xd, lp, test::as<simdnorm::layer_norm_args>(a)))
                    .ok());
        a.y = q.data();
        a.y_scale = yscale.data();
        const simdnorm::status s =
            rms ? simdnorm::rms_norm(xd, qd, rp, test::as<simdnorm::rms_norm_args>(a))
                : simdnorm::layer_norm(xd, qd, lp, test::as<simdnorm::layer_norm_args>(a));
        REQUIRE_MESSAGE(s.ok(), s.message());
        test::failures bad;
        for (std::size_t k = 0; k < rows; ++k) {
          float amax = 0.f;
          for (std::size_t i = 0; i < cols; ++i) amax = std::max(amax, std::fabs(yf[k * cols + i]));
          const float sc = amax / 127.f, inv = 1.f / sc;
          bad.expect(yscale[k] == sc, [&] { return "scale of row " + std::to_string(k); });
          for (std::size_t i = 0; i < cols; ++i) {
            const float want = std::nearbyint(yf[k * cols + i] * inv);
            bad.expect(float(q[k * cols + i]) == want,
                       [&] { return "row " + std::to_string(k) + " col " + std::to_string(i); });
          }
        }
        CHECK_MESSAGE(bad.none(), bad.report());
      }
  });
}

// A DiT block's adaLN: c -> adaLN_modulation(c) = [shift_msa, scale_msa, gate_msa, shift_mlp,
// scale_mlp, gate_mlp], each [B, D] inside one [B, 6 * D] tensor; x = modulate(norm1(x),
// shift_msa, scale_msa) with norm1 a LayerNorm without affine, eps 1e-6. One plan, two
// modulation rows per batch taken straight from the chunked tensor (stride 6 * D).
TEST_CASE("adaLN: a DiT block's modulate(norm(x), shift, scale) from the chunked adaLN output") {
  const std::int64_t B = 2, T = 64, D = 96;  // batch, tokens (patches), hidden size
  std::vector<float> x(B * T * D), ada(B * 6 * D), y(x.size()), y_ref(x.size());
  test::fill_normal(x.data(), x.size(), 21, 0.1, 1.3);
  test::fill_normal(ada.data(), ada.size(), 22, 0.0, 0.4);
  const auto d = tensor_desc::contiguous({B, T, D});
  simdnorm::layer_norm_params p{1, 1e-6f};
  p.modulation_tokens = T;
  simdnorm::plan norm1;
  REQUIRE(simdnorm::plan::layer_norm(d, d, p, &norm1).ok());
  simdnorm::layer_norm_args a;
  a.x = x.data();
  a.y = y.data();
  a.modulation_shift = ada.data() + 0 * D;  // shift_msa: chunk 0
  a.modulation_scale = ada.data() + 1 * D;  // scale_msa: chunk 1
  a.modulation_stride = 6 * D;
  const simdnorm::status s = norm1.execute(a);
  REQUIRE_MESSAGE(s.ok(), s.message());
  // The unfused sequence as PyTorch runs it in f32: norm, then x * (1 + scale) + shift, each
  // operation rounded. The fused y rounds once after an fma: within 2 ulp of |y| plus the
  // rounding of the product.
  simdnorm::layer_norm_params plain{1, 1e-6f};
  simdnorm::norm_args b;
  b.x = x.data();
  b.y = y_ref.data();
  REQUIRE(simdnorm::layer_norm(d, d, plain, b).ok());
  test::failures bad;
  for (std::int64_t r = 0; r < B * T; ++r) {
    const float* shift = ada.data() + (r / T) * 6 * D;
    const float* scale = shift + D;
    for (std::int64_t i = 0; i < D; ++i) {
      const float n = y_ref[r * D + i];
      const float want = n * (1.f + scale[i]) + shift[i];
      const float tol = 0x1p-22f * (std::fabs(n * (1.f + scale[i])) + std::fabs(shift[i]));
      bad.expect(std::fabs(y[r * D + i] - want) <= tol,
                 [&] { return "row " + std::to_string(r) + " col " + std::to_string(i); });
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
}

TEST_CASE("adaLN: bad modulation arguments are refused and write nothing") {
  const std::int64_t B = 2, T = 3, D = 8;
  const std::size_t n = std::size_t(B * T * D);
  std::vector<float> x(n, 1.f), y(n, 7.f), z(n, 1.f), mod(64, 0.5f);
  const auto d = tensor_desc::contiguous({B, T, D});
  struct row {
    const char* what;
    std::int64_t tokens;  // the plan's modulation_tokens; negative: -T on RMSNorm with a gate
    void (*mutate)(test::any_args&, float* mod, float* y);
    const char* message;
  } rows[] = {
      {"no modulation in the plan", 0, [](test::any_args&, float*, float*) {},
       "has no adaLN modulation"},
      {"stride without a modulation plan", 0,
       [](test::any_args& a, float*, float*) {
         a.modulation_scale = a.modulation_shift = nullptr;
         a.modulation_stride = 8;
       },
       "has no adaLN modulation"},
      {"scale without shift", T,
       [](test::any_args& a, float*, float*) { a.modulation_shift = nullptr; },
       "modulation_shift is null"},
      {"shift without scale", T,
       [](test::any_args& a, float*, float*) { a.modulation_scale = nullptr; },
       "modulation_scale is null"},
      {"negative stride", T, [](test::any_args& a, float*, float*) { a.modulation_stride = -8; },
       "modulation_stride=-8"},
      {"stride shorter than a row", T,
       [](test::any_args& a, float*, float*) { a.modulation_stride = 7; }, "modulation_stride=7"},
      {"stride that overflows", T,
       [](test::any_args& a, float*, float*) { a.modulation_stride = INT64_MAX / 2; }, "overflows"},
      {"shift over y", T, [](test::any_args& a, float*, float* y) { a.modulation_shift = y + 4; },
       "args.modulation_shift and args.y overlap"},
      {"scale over h", T,
       [](test::any_args& a, float* mod, float*) {
         a.residual = a.x;
         a.residual_out = mod;
         a.modulation_scale = mod + 8;
       },
       "args.modulation_scale and args.residual_out overlap"},
      {"the gate (RMSNorm)", -T, [](test::any_args&, float*, float*) {},
       "gated RMSNorm does not combine"},
  };
  for (const row& c : rows) {
    CAPTURE(std::string(c.what));
    simdnorm::layer_norm_params p;
    simdnorm::rms_norm_params rp;
    p.modulation_tokens = rp.modulation_tokens = c.tokens < 0 ? -c.tokens : c.tokens;
    test::any_args a;
    a.x = x.data();
    a.y = y.data();
    a.gate = c.tokens < 0 ? z.data() : nullptr;
    a.modulation_scale = mod.data();
    a.modulation_shift = mod.data() + 16;
    c.mutate(a, mod.data(), y.data());
    const simdnorm::status s =
        c.tokens < 0 ? simdnorm::rms_norm(d, d, rp, test::as<simdnorm::rms_norm_args>(a))
                     : simdnorm::layer_norm(d, d, p, test::as<simdnorm::layer_norm_args>(a));
    CHECK(s.code() != simdnorm::status_code::ok);
    CHECK_MESSAGE(std::string(s.message()).find(c.message) != std::string::npos, s.message());
  }
  for (float v : y) CHECK(v == 7.f);
}
