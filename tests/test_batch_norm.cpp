// BatchNorm (inference and training-mode forward) against the float64 oracle on every runnable
// ISA: NCHW and NHWC, channel counts and plane sizes that hit every SIMD tail, affine, ReLU,
// in place, misaligned; running statistics in both conventions and cumulative; constant
// channels, large means. Thread invariance, streaming stores, NaN/Inf confinement and error
// paths: test_invariance.cpp, test_errors.cpp.
#include <algorithm>
#include <cmath>

#include "channel_reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::isa;
using simdnorm::tensor_desc;

struct shape4 {
  std::size_t N, C, H, W;
  std::size_t S() const { return H * W; }
  std::size_t numel() const { return N * C * H * W; }
};

/// BatchNorm parameters for the layout and mode a test sweeps over (other fields default).
simdnorm::batch_norm_params bn_params(bool nhwc, bool training) {
  simdnorm::batch_norm_params p;
  p.layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  p.training = training;
  return p;
}

tensor_desc desc(const shape4& s, bool nhwc) {
  const auto n = std::int64_t(s.N), c = std::int64_t(s.C), h = std::int64_t(s.H),
             w = std::int64_t(s.W);
  return nhwc ? tensor_desc::contiguous({n, h, w, c}) : tensor_desc::contiguous({n, c, h, w});
}

std::size_t spatial_side(std::size_t S, int k) {  // S in {1, 7, 49, 3136} as H x W
  if (S == 49) return 7;
  if (S == 3136) return 56;
  return k == 0 ? S : 1;
}

/// x[N][C][S] with channel c ~ N(mu_c, sd_c) so that channels differ.
std::vector<float> make_x(const shape4& s, std::uint32_t seed, double offset = 0.0) {
  std::vector<float> x(s.numel());
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, 1);
  for (std::size_t n = 0; n < s.N; ++n)
    for (std::size_t c = 0; c < s.C; ++c) {
      const double mu = offset + 0.5 * double(c % 5) - 1.0, sd = 0.5 + 0.25 * double(c % 3);
      for (std::size_t i = 0; i < s.S(); ++i)
        x[(n * s.C + c) * s.S() + i] = float(mu + sd * d(rng));
    }
  return x;
}

struct bn_case {
  shape4 shape;
  bool nhwc = false, training = false, gamma = true, beta = true, relu = false, in_place = false;
  bool stream = false;  // store_policy::streaming (non-temporal stores where aligned)
  std::size_t mis = 0;
  simdnorm::executor* exec = nullptr;
};

void check_case(isa active, const bn_case& c, std::uint32_t seed) {
  const shape4& sh = c.shape;
  const std::size_t N = sh.N, C = sh.C, S = sh.S(), n_unit = N * S;
  CAPTURE(N);
  CAPTURE(C);
  CAPTURE(S);
  CAPTURE(c.nhwc);
  CAPTURE(c.training);
  CAPTURE(c.in_place);
  const std::vector<float> x_nchw = make_x(sh, seed);
  const std::vector<float> x_in = c.nhwc ? chref::to_nhwc(x_nchw.data(), N, C, S) : x_nchw;
  test::buffer x(sh.numel(), c.mis), y(sh.numel(), (c.mis * 3) % 16);  // y aligned when mis = 0
  std::copy(x_in.begin(), x_in.end(), x.data());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = 7.25f;
  std::vector<float> g(C), b(C), rm(C), rv(C);
  test::fill_normal(g.data(), C, seed + 1, 1.0, 0.5);
  test::fill_normal(b.data(), C, seed + 2, 0.0, 1.0);
  test::fill_normal(rm.data(), C, seed + 3, 0.0, 1.0);
  for (std::size_t k = 0; k < C; ++k) rv[k] = 0.25f + float(k % 7) * 0.5f;
  const std::vector<float> rm0 = rm, rv0 = rv;

  simdnorm::batch_norm_params prm;
  prm.layout = c.nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  prm.training = c.training;
  prm.fuse_relu = c.relu;
  if (c.stream) prm.stores = simdnorm::store_policy::streaming;
  simdnorm::batch_norm_args a;
  std::vector<float> mean(C, -1.f), rstd(C, -1.f);
  std::int64_t batches = 4;
  if (c.training) {
    a.gamma = c.gamma ? g.data() : nullptr;
    a.beta = c.beta ? b.data() : nullptr;
    a.running_mean = rm.data();
    a.running_var = rv.data();
    a.mean = mean.data();
    a.rstd = rstd.data();
    a.num_batches_tracked = &batches;
  } else {
    prm.running_mean = rm.data();
    prm.running_var = rv.data();
    prm.gamma = c.gamma ? g.data() : nullptr;
    prm.beta = c.beta ? b.data() : nullptr;
  }
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::batch_norm(desc(sh, c.nhwc), desc(sh, c.nhwc), prm, &p).ok());
  REQUIRE(p.kernel_isa() == active);
  a.x = x.data();
  a.y = c.in_place ? x.data() : y.data();
  const simdnorm::status s = p.execute(a, c.exec);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const float* out_raw = c.in_place ? x.data() : y.data();
  const std::vector<float> out =
      c.nhwc ? chref::to_nchw(out_raw, N, C, S) : std::vector<float>(out_raw, out_raw + sh.numel());

  const double eps = prm.eps;
  const std::size_t seg = c.nhwc ? (C == 1 ? n_unit : test::lanes(active)) : S;
  const double d = chref::depth(n_unit, test::lanes(active), seg);
  test::failures bad;
  for (std::size_t ch = 0; ch < C; ++ch) {
    const double gc = c.gamma ? g[ch] : 1.0, bc = c.beta ? b[ch] : 0.0;
    chref::unit_ref st;
    double mu, var;
    if (c.training) {
      st = chref::stats(chref::channel_values(x_nchw.data(), N, C, S, ch));
      mu = st.mean, var = st.var;
    } else {
      mu = rm0[ch], var = rv0[ch];
    }
    const double r = 1.0 / std::sqrt(var + eps), scale = r * gc, shift = bc - mu * scale;
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t i = 0; i < S; ++i) {
        const std::size_t k = (n * C + ch) * S + i;
        const double xv = x_nchw[k];
        double want = (xv - mu) * scale + bc;
        if (c.relu) want = std::max(want, 0.0);
        const double tol = c.training ? chref::centered_bound(d, st, eps, xv, gc, bc, want)
                                      : chref::folded_bound(xv, scale, shift, want);
        bad.expect(std::fabs(out[k] - want) <= tol, [&] {
          return "channel " + std::to_string(ch) + " n " + std::to_string(n) + " s " +
                 std::to_string(i) + ": got " + std::to_string(out[k]) + " want " +
                 std::to_string(want) + " tol " + std::to_string(tol);
        });
      }
    if (!c.training) continue;
    const auto named = [ch](const char* what) { return [=] { return what + std::to_string(ch); }; };
    bad.expect(std::fabs(mean[ch] - st.mean) <= chref::mean_bound(d, st), named("mean "));
    bad.expect(std::fabs(rstd[ch] - r) <= chref::rstd_bound(d, r), named("rstd "));
    // PyTorch convention, momentum 0.1, unbiased variance for the running update.
    const double unb = st.var * double(n_unit) / double(n_unit - 1);
    const double rm_want = 0.9 * rm0[ch] + 0.1 * st.mean, rv_want = 0.9 * rv0[ch] + 0.1 * unb;
    const double rm_tol = 0.1 * chref::mean_bound(d, st) + 2 * ref::u32 * std::fabs(rm_want);
    const double rv_tol = 0.1 * unb * chref::var_rel_bound(d) + 2 * ref::u32 * std::fabs(rv_want);
    bad.expect(std::fabs(rm[ch] - rm_want) <= rm_tol, named("running_mean "));
    bad.expect(std::fabs(rv[ch] - rv_want) <= rv_tol, named("running_var "));
  }
  CHECK_MESSAGE(bad.none(), bad.report());
  CHECK(x.guards_intact());
  CHECK(y.guards_intact());
  if (!c.in_place) CHECK(test::bitwise_equal(x.data(), x_in.data(), x_in.size()));
  if (c.training) CHECK(batches == 5);
  if (!c.training) CHECK((rm == rm0 && rv == rv0));  // inference never writes them
}

const std::size_t kC[] = {1, 3, 15, 16, 17, 64};
const std::size_t kS[] = {1, 7, 49, 3136};
const std::size_t kN[] = {1, 2, 5};

void sweep(isa i, bool training) {
  std::uint32_t seed = training ? 1000 : 1;
  std::size_t v = 0;
  for (std::size_t C : kC)
    for (std::size_t S : kS)
      for (std::size_t N : kN) {
        if (training && N * S == 1) continue;  // one value per channel: an error (tested below)
        if (test::quick() && N * C * S > 40000) continue;  // emulated: smaller tensors
        for (bool nhwc : {false, true}) {
          bn_case c;
          c.shape = {N, C, spatial_side(S, 0), spatial_side(S, 1)};
          c.nhwc = nhwc;
          c.training = training;
          // rotate the variants over the sweep so every one meets every layout and tail
          c.gamma = v % 4 != 1;
          c.beta = v % 4 != 2;
          c.relu = v % 3 == 0;
          c.in_place = v % 5 == 4;
          c.stream = v % 4 == 3;
          c.mis = v % 7;
          ++v;
          check_case(i, c, seed++);
        }
      }
}

}  // namespace

TEST_CASE("batch_norm inference: every channel count, plane size and batch matches float64") {
  test::for_each_isa([](isa i) { sweep(i, false); });
}

TEST_CASE("batch_norm training: every channel count, plane size and batch matches float64") {
  test::for_each_isa([](isa i) { sweep(i, true); });
}

// Hundreds of NHWC channels: the vector fold's blocks of units (kFoldBlock) with a short last
// block, many row splits, rows of odd length.
TEST_CASE("batch_norm training: hundreds of NHWC channels match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 3000;
    std::size_t v = 0;
    for (const shape4& sh : {shape4{4, 520, 8, 8}, shape4{3, 1030, 10, 10}}) {
      if (test::quick() && sh.numel() > 200000) continue;  // emulated: the smaller one
      for (int variant = 0; variant < 4; ++variant, ++v) {
        bn_case c;
        c.shape = sh;
        c.nhwc = true;
        c.training = true;
        c.gamma = variant != 1;
        c.beta = variant != 2;
        c.relu = variant == 3;
        c.in_place = variant == 2;
        c.mis = v % 7;
        check_case(i, c, seed++);
      }
    }
  });
}

// Fewer than 16 channels with enough data: each channel is cut into parts (over N, or pieces
// of a plane), partial moments merged in a second phase; 17 MiB channels go in waves.
TEST_CASE("batch_norm: few large channels (split into parts, in waves) match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 500;
    for (bool training : {false, true})
      for (bool nhwc : {false, true})
        for (std::size_t C : {std::size_t(1), std::size_t(3)})
          for (std::size_t N : {std::size_t(1), std::size_t(5)}) {
            if (test::quick() && N * C > 1) continue;  // emulated: one plane still splits
            bn_case c;
            c.shape = {N, C, 192, 192};
            c.training = training;
            c.nhwc = nhwc;
            c.relu = N == 5;
            c.in_place = C == 3;
            check_case(i, c, seed++);
          }
    if (i != test::runnable_isas().front()) return;  // the large case once
    if (test::quick()) return;                       // and not under emulation
    for (bool training : {false, true}) {
      bn_case c;
      c.shape = {1, 2, 2048, 2100};
      c.training = training;
      check_case(i, c, seed++);
    }
  });
}

TEST_CASE("batch_norm: [N, C], BatchNorm1d (N, C, L) and BatchNorm3d (N, C, D, H, W)") {
  test::for_each_isa([](isa) {
    for (bool training : {false, true}) {
      CAPTURE(training);
      // The same data in every rank: x[N][C][S], S = L = D*H*W.
      const std::size_t N = 3, C = 5, D = 2, H = 3, W = 4, S = D * H * W;
      const std::vector<float> x = make_x({N, C, S, 1}, 51);
      std::vector<float> g(C), b(C), rm(C, 0.5f), rv(C, 2.f);
      test::fill_normal(g.data(), C, 52, 1.0, 0.5);
      test::fill_normal(b.data(), C, 53);
      simdnorm::batch_norm_params prm;
      prm.training = training;
      simdnorm::norm_args a;
      a.x = x.data();
      if (training) {
        a.gamma = g.data();
        a.beta = b.data();
      } else {
        prm.running_mean = rm.data();
        prm.running_var = rv.data();
        prm.gamma = g.data();
        prm.beta = b.data();
      }
      const auto n = std::int64_t(N), c = std::int64_t(C);
      std::vector<float> y1(x.size()), y5(x.size());
      a.y = y1.data();
      REQUIRE(simdnorm::batch_norm(tensor_desc::contiguous({n, c, std::int64_t(S)}),
                                   tensor_desc::contiguous({n, c, std::int64_t(S)}), prm, a)
                  .ok());
      a.y = y5.data();
      const tensor_desc d5 =
          tensor_desc::contiguous({n, c, std::int64_t(D), std::int64_t(H), std::int64_t(W)});
      REQUIRE(simdnorm::batch_norm(d5, d5, prm, a).ok());
      CHECK(test::bitwise_equal(y1.data(), y5.data(), x.size()));  // same canonical geometry
      // [N*S, C] as a 2-D batch (BatchNorm1d on (N, C)): rows of channels.
      const std::vector<float> xt = chref::to_nhwc(x.data(), N, C, S);
      std::vector<float> yt(x.size());
      a.x = xt.data();
      a.y = yt.data();
      REQUIRE(simdnorm::batch_norm(tensor_desc::contiguous({n * std::int64_t(S), c}),
                                   tensor_desc::contiguous({n * std::int64_t(S), c}), prm, a)
                  .ok());
      const std::vector<float> back = chref::to_nchw(yt.data(), N, C, S);
      for (std::size_t k = 0; k < x.size(); ++k)
        CHECK(back[k] == doctest::Approx(y1[k]).epsilon(1e-5).scale(1));
    }
  });
}

TEST_CASE("batch_norm inference: the NCHW result transposed equals the NHWC result, bit for bit") {
  test::for_each_isa([](isa) {
    for (std::size_t S : {std::size_t(1), std::size_t(7), std::size_t(49)}) {
      const std::size_t N = 2, C = 17;
      const std::vector<float> x = make_x({N, C, S, 1}, 61);
      const std::vector<float> xt = chref::to_nhwc(x.data(), N, C, S);
      std::vector<float> rm(C), rv(C, 1.5f), g(C), b(C), y(x.size()), yt(x.size());
      test::fill_normal(rm.data(), C, 62);
      test::fill_normal(g.data(), C, 63);
      test::fill_normal(b.data(), C, 64);
      simdnorm::batch_norm_params prm;
      prm.running_mean = rm.data();
      prm.running_var = rv.data();
      prm.gamma = g.data();
      prm.beta = b.data();
      prm.fuse_relu = true;
      simdnorm::norm_args a;
      a.x = x.data();
      a.y = y.data();
      const shape4 sh{N, C, S, 1};
      REQUIRE(simdnorm::batch_norm(desc(sh, false), desc(sh, false), prm, a).ok());
      prm.layout = simdnorm::channel_layout::nhwc;
      a.x = xt.data();
      a.y = yt.data();
      REQUIRE(simdnorm::batch_norm(desc(sh, true), desc(sh, true), prm, a).ok());
      const std::vector<float> back = chref::to_nchw(yt.data(), N, C, S);
      CHECK(test::bitwise_equal(back.data(), y.data(), y.size()));
    }
  });
}

// Inference is y = fma(x, scale, shift) per element, nothing summed: every ISA with an FMA
// unit (one rounding) must give the same bits, and the ISAs without one (two roundings) must
// differ from them somewhere. This caught xsimd 8.1's AVX-512 fma, which is x * y + z unfused.
// Which ISAs fuse is test::has_fma's; a CPU that runs only one of the groups checks that group.
TEST_CASE("batch_norm inference: ISAs with FMA give the same bits, ISAs without differ") {
  const shape4 sh{3, 5, 67, 1};  // planes of 67: vector bodies and scalar tails
  const std::vector<float> x = make_x(sh, 81);
  std::vector<float> rm(sh.C), rv(sh.C), g(sh.C), b(sh.C);
  test::fill_normal(rm.data(), sh.C, 82);
  test::fill_normal(g.data(), sh.C, 83);
  test::fill_normal(b.data(), sh.C, 84);
  for (std::size_t k = 0; k < sh.C; ++k) rv[k] = 0.3f + float(k);
  simdnorm::batch_norm_params prm;
  prm.running_mean = rm.data();
  prm.running_var = rv.data();
  prm.gamma = g.data();
  prm.beta = b.data();
  std::vector<float> fused_ref, unfused_ref;
  for (isa i : test::runnable_isas()) {
    INFO("isa=" << std::string(simdnorm::isa_name(i)));
    const test::forced_isa guard(i);
    REQUIRE(guard.status().ok());
    std::vector<float> y(x.size());
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    REQUIRE(simdnorm::batch_norm(desc(sh, false), desc(sh, false), prm, a).ok());
    std::vector<float>& ref = test::has_fma(i) ? fused_ref : unfused_ref;
    if (ref.empty())
      ref = y;
    else
      CHECK(test::bitwise_equal(y.data(), ref.data(), y.size()));
  }
  if (fused_ref.empty() || unfused_ref.empty())
    MESSAGE("only ISAs " << (fused_ref.empty() ? "without" : "with") << " FMA run here");
  else
    CHECK_FALSE(test::bitwise_equal(fused_ref.data(), unfused_ref.data(), x.size()));
}

TEST_CASE("batch_norm training: the NCHW result transposed equals the NHWC result") {
  test::for_each_isa([](isa i) {
    for (std::size_t S : {std::size_t(7), std::size_t(49), std::size_t(3136)}) {
      const std::size_t N = 2, C = 17;
      const std::vector<float> x = make_x({N, C, S, 1}, 71);
      const std::vector<float> xt = chref::to_nhwc(x.data(), N, C, S);
      std::vector<float> y(x.size()), yt(x.size()), m1(C), m2(C), r1(C), r2(C);
      simdnorm::batch_norm_params prm;
      prm.training = true;
      simdnorm::norm_args a;
      a.x = x.data(), a.y = y.data(), a.mean = m1.data(), a.rstd = r1.data();
      const shape4 sh{N, C, S, 1};
      REQUIRE(simdnorm::batch_norm(desc(sh, false), desc(sh, false), prm, a).ok());
      prm.layout = simdnorm::channel_layout::nhwc;
      a.x = xt.data(), a.y = yt.data(), a.mean = m2.data(), a.rstd = r2.data();
      REQUIRE(simdnorm::batch_norm(desc(sh, true), desc(sh, true), prm, a).ok());
      const std::vector<float> back = chref::to_nchw(yt.data(), N, C, S);
      // Both are within their bound of float64, so within the sum of the bounds of each other.
      const double d = chref::depth(N * S, test::lanes(i), 1);
      for (std::size_t c = 0; c < C; ++c) {
        const chref::unit_ref st = chref::stats(chref::channel_values(x.data(), N, C, S, c));
        CHECK(std::fabs(m1[c] - m2[c]) <= 2 * chref::mean_bound(d, st));
        CHECK(std::fabs(r1[c] - r2[c]) <= 2 * chref::rstd_bound(d, r1[c]));
        for (std::size_t k = (c * S); k < c * S + S; ++k) {  // n = 0
          const double sigma = std::sqrt(st.var + 1e-5), yref = (x[k] - st.mean) / sigma;
          CHECK(std::fabs(back[k] - y[k]) <=
                2 * chref::centered_bound(d, st, 1e-5, x[k], 1, 0, yref));
        }
      }
    }
  });
}

// Three successive batches; the expected running statistics are computed by hand in float64
// from the batch statistics (float64 too), in each convention.
TEST_CASE("batch_norm training: running statistics after 3 batches (pytorch, onnx, cumulative)") {
  const std::size_t N = 4, C = 3, S = 10;
  struct mode {
    const char* name;
    simdnorm::momentum_convention conv;
    float momentum;
    bool cumulative;
  };
  const mode modes[] = {{"pytorch m=0.1", simdnorm::momentum_convention::pytorch, 0.1f, false},
                        {"pytorch m=0.3", simdnorm::momentum_convention::pytorch, 0.3f, false},
                        {"onnx m=0.9", simdnorm::momentum_convention::onnx, 0.9f, false},
                        {"pytorch cumulative", simdnorm::momentum_convention::pytorch, 0.1f, true},
                        {"onnx cumulative", simdnorm::momentum_convention::onnx, 0.9f, true}};
  test::for_each_isa([&](isa i) {
    for (const mode& md : modes) {
      INFO(std::string(md.name));
      simdnorm::batch_norm_params prm;
      prm.training = true;
      prm.momentum = md.momentum;
      prm.convention = md.conv;
      prm.cumulative = md.cumulative;
      simdnorm::plan p;
      const shape4 sh{N, C, S, 1};
      REQUIRE(simdnorm::plan::batch_norm(desc(sh, false), desc(sh, false), prm, &p).ok());
      std::vector<float> rm = {0.f, 1.f, -2.f}, rv = {1.f, 4.f, 0.5f}, y(N * C * S);
      std::vector<double> hm(rm.begin(), rm.end()), hv(rv.begin(), rv.end());
      std::int64_t counter = 0;
      const double n = double(N * S);
      for (int batch = 0; batch < 3; ++batch) {
        const std::vector<float> x = make_x(sh, 90 + std::uint32_t(batch), 3.0 * batch);
        simdnorm::batch_norm_args a;
        a.x = x.data(), a.y = y.data(), a.running_mean = rm.data(), a.running_var = rv.data();
        a.num_batches_tracked = &counter;
        REQUIRE(p.execute(a).ok());
        for (std::size_t c = 0; c < C; ++c) {
          const chref::unit_ref st = chref::stats(chref::channel_values(x.data(), N, C, S, c));
          const bool torch = md.conv == simdnorm::momentum_convention::pytorch;
          const double var = torch ? st.var * n / (n - 1) : st.var;
          const double m = double(md.momentum);
          const double w_new = md.cumulative ? 1.0 / double(batch + 1) : torch ? m : 1 - m;
          hm[c] = (1 - w_new) * hm[c] + w_new * st.mean;
          hv[c] = (1 - w_new) * hv[c] + w_new * var;
          const double d = chref::depth(N * S, test::lanes(i), S);
          // each batch adds the statistics' error and one float rounding of the state
          CHECK(std::fabs(rm[c] - hm[c]) <=
                (batch + 1) * (chref::mean_bound(d, st) + 2 * ref::u32 * std::fabs(hm[c])));
          CHECK(std::fabs(rv[c] - hv[c]) <=
                (batch + 1) * (var * chref::var_rel_bound(d) + 2 * ref::u32 * std::fabs(hv[c])));
        }
        CHECK(counter == batch + 1);
      }
    }
  });
}

// A counter that is not reset makes the cumulative average weight the batch 1/(k+1).
TEST_CASE("batch_norm training: cumulative averaging continues from the counter it is given") {
  const std::size_t N = 2, C = 2, S = 3;
  std::vector<float> x = make_x({N, C, S, 1}, 5), y(x.size());
  std::vector<float> rm = {1.f, 2.f}, rv = {3.f, 4.f};
  std::int64_t counter = 9;  // the batch gets weight 1/10
  simdnorm::batch_norm_params prm;
  prm.training = true;
  prm.cumulative = true;
  simdnorm::batch_norm_args a;
  a.x = x.data(), a.y = y.data(), a.running_mean = rm.data(), a.running_var = rv.data();
  a.num_batches_tracked = &counter;
  REQUIRE(simdnorm::batch_norm(desc({N, C, S, 1}, false), desc({N, C, S, 1}, false), prm, a).ok());
  CHECK(counter == 10);
  for (std::size_t c = 0; c < C; ++c) {
    const chref::unit_ref st = chref::stats(chref::channel_values(x.data(), N, C, S, c));
    CHECK(rm[c] == doctest::Approx(0.9 * (c + 1) + 0.1 * st.mean).epsilon(1e-6));
    CHECK(rv[c] == doctest::Approx(0.9 * (c + 3) + 0.1 * st.var * 6 / 5).epsilon(1e-6));
  }
}

TEST_CASE("batch_norm: C = 1 to 16 gives work to more than one thread") {
  for (std::size_t C = 1; C <= 16; ++C) {
    CAPTURE(C);
    const shape4 sh{8, C, 64, 64};  // 128 KiB per channel
    simdnorm::batch_norm_params prm;
    prm.training = true;
    for (bool nhwc : {false, true}) {
      CAPTURE(nhwc);
      prm.layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
      simdnorm::plan p;
      REQUIRE(simdnorm::plan::batch_norm(desc(sh, nhwc), desc(sh, nhwc), prm, &p).ok());
      // the first phase reads x, the one before the batch-counter phase writes y
      CHECK(p.num_tasks(0) >= 2);
      CHECK(p.num_tasks(p.num_phases() - 2) >= 2);
    }
  }
}

TEST_CASE("batch_norm training: constant channels give exactly beta and the constant mean") {
  test::for_each_isa([](isa) {
    for (std::size_t S : {std::size_t(1), std::size_t(7), std::size_t(49), std::size_t(3136)})
      for (bool nhwc : {false, true})
        for (float v : {0.f, 3.7f, -1e6f}) {
          const std::size_t N = 3, C = 17;
          std::vector<float> x(N * C * S, v), y(x.size()), g(C), b(C), mean(C), rstd(C);
          test::fill_normal(g.data(), C, 5, 1.0, 1.0);
          test::fill_normal(b.data(), C, 6);
          simdnorm::batch_norm_params prm = bn_params(nhwc, true);
          simdnorm::norm_args a;
          a.x = x.data(), a.y = y.data(), a.gamma = g.data(), a.beta = b.data();
          a.mean = mean.data(), a.rstd = rstd.data();
          const shape4 sh{N, C, S, 1};
          REQUIRE(simdnorm::batch_norm(desc(sh, nhwc), desc(sh, nhwc), prm, a).ok());
          const std::vector<float> out = nhwc ? chref::to_nchw(y.data(), N, C, S) : y;
          for (std::size_t c = 0; c < C; ++c) {
            CHECK(mean[c] == v);
            CHECK(rstd[c] == doctest::Approx(1.0 / std::sqrt(1e-5)).epsilon(1e-6));
            for (std::size_t n = 0; n < N; ++n)
              for (std::size_t i = 0; i < S; ++i) CHECK(out[(n * C + c) * S + i] == b[c]);
          }
        }
  });
}

// The accuracy target: data with mean 1e4, N*H*W = 25088 per channel.
TEST_CASE(
    "batch_norm training: mean 1e4 + N(0,1), N*H*W = 25088: statistics within 1e-3 of float64") {
  const shape4 sh{8, 4, 56, 56};
  std::vector<float> x(sh.numel());
  test::fill_normal(x.data(), x.size(), 4242, 1e4, 1.0);
  test::for_each_isa([&](isa i) {
    for (bool nhwc : {false, true}) {
      CAPTURE(nhwc);
      const std::vector<float> xin = nhwc ? chref::to_nhwc(x.data(), sh.N, sh.C, sh.S()) : x;
      std::vector<float> y(x.size()), mean(sh.C), rstd(sh.C);
      simdnorm::batch_norm_params prm = bn_params(nhwc, true);
      simdnorm::norm_args a;
      a.x = xin.data(), a.y = y.data(), a.mean = mean.data(), a.rstd = rstd.data();
      REQUIRE(simdnorm::batch_norm(desc(sh, nhwc), desc(sh, nhwc), prm, a).ok());
      const std::vector<float> out = nhwc ? chref::to_nchw(y.data(), sh.N, sh.C, sh.S()) : y;
      double err_y = 0, err_m = 0, err_s = 0;
      for (std::size_t c = 0; c < sh.C; ++c) {
        const chref::unit_ref st =
            chref::stats(chref::channel_values(x.data(), sh.N, sh.C, sh.S(), c));
        const double sigma = std::sqrt(st.var + 1e-5);
        err_m = std::max(err_m, std::fabs(mean[c] - st.mean));
        err_s = std::max(err_s, std::fabs(1 / rstd[c] - sigma));
        CHECK(std::fabs(mean[c] - st.mean) <= 1e-3);
        CHECK(std::fabs(1 / rstd[c] - sigma) <= 1e-3);
        for (std::size_t n = 0; n < sh.N; ++n)
          for (std::size_t i = 0; i < sh.S(); ++i) {
            const std::size_t k = (n * sh.C + c) * sh.S() + i;
            err_y = std::max(err_y, std::fabs(out[k] - (x[k] - st.mean) / sigma));
          }
      }
      MESSAGE(std::string(simdnorm::isa_name(i))
              << (nhwc ? " nhwc" : " nchw") << ": max |mean - mean64| = " << err_m
              << ", |sigma - sigma64| = " << err_s << ", |y - y64| = " << err_y);
      CHECK(err_y <= 1e-4);  // the centered normalize keeps the deviations' accuracy
    }
  });
}

TEST_CASE("batch_norm: padded batch, channels_last strides, in place with padding") {
  test::for_each_isa([](isa) {
    for (bool training : {false, true}) {
      CAPTURE(training);
      const std::size_t N = 3, C = 5, H = 4, W = 6, S = H * W;
      const std::vector<float> x = make_x({N, C, H, W}, 31);
      std::vector<float> rm(C, 0.25f), rv(C, 1.5f);
      simdnorm::batch_norm_params prm;
      prm.training = training;
      if (!training) prm.running_mean = rm.data(), prm.running_var = rv.data();
      const tensor_desc dense = desc({N, C, H, W}, false);
      std::vector<float> want(x.size());
      simdnorm::norm_args a;
      a.x = x.data(), a.y = want.data();
      REQUIRE(simdnorm::batch_norm(dense, dense, prm, a).ok());
      // x as every other item of a batch of 2N, y padded by 8 floats per item
      std::vector<float> big(2 * N * C * S, 99.f), y(N * (C * S + 8), 7.25f);
      for (std::size_t n = 0; n < N; ++n)
        std::copy(x.begin() + std::ptrdiff_t(n * C * S),
                  x.begin() + std::ptrdiff_t((n + 1) * C * S),
                  big.begin() + std::ptrdiff_t(2 * n * C * S));
      tensor_desc xd = dense, yd = dense;
      xd.strides[0] = std::int64_t(2 * C * S);
      yd.strides[0] = std::int64_t(C * S + 8);
      a.x = big.data(), a.y = y.data();
      REQUIRE(simdnorm::batch_norm(xd, yd, prm, a).ok());
      for (std::size_t n = 0; n < N; ++n) {
        CHECK(test::bitwise_equal(&y[n * (C * S + 8)], &want[n * C * S], C * S));
        for (std::size_t k = 0; k < 8; ++k) CHECK(y[n * (C * S + 8) + C * S + k] == 7.25f);
      }
      // channels_last strides on the logical NCHW shape (PyTorch channels_last) = the NHWC layout
      const std::vector<float> xt = chref::to_nhwc(x.data(), N, C, S);
      tensor_desc cl = dense;
      cl.strides[0] = std::int64_t(S * C), cl.strides[1] = 1;
      cl.strides[2] = std::int64_t(W * C), cl.strides[3] = std::int64_t(C);
      std::vector<float> ycl(x.size()), ynhwc(x.size());
      a.x = xt.data(), a.y = ycl.data();
      REQUIRE(simdnorm::batch_norm(cl, cl, prm, a).ok());
      simdnorm::batch_norm_params pn = prm;
      pn.layout = simdnorm::channel_layout::nhwc;
      a.y = ynhwc.data();
      REQUIRE(simdnorm::batch_norm(desc({N, C, H, W}, true), desc({N, C, H, W}, true), pn, a).ok());
      CHECK(test::bitwise_equal(ycl.data(), ynhwc.data(), x.size()));
    }
  });
}
