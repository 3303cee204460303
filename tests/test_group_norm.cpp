// GroupNorm, InstanceNorm and MeanVarianceNormalization against the float64 oracle on every
// runnable ISA (NCHW and NHWC, group sizes and plane sizes that hit every tail); GroupNorm with
// G = C equals InstanceNorm; G = 1 statistics equal LayerNorm's. NaN confinement, thread
// invariance and error paths: test_invariance.cpp, test_errors.cpp.
#include <cmath>

#include "channel_reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::isa;
using simdnorm::tensor_desc;

tensor_desc desc(std::size_t N, std::size_t C, std::size_t S, bool nhwc) {
  const auto n = std::int64_t(N), c = std::int64_t(C), s = std::int64_t(S);
  return nhwc ? tensor_desc::contiguous({n, s, c}) : tensor_desc::contiguous({n, c, s});
}

struct gn_case {
  std::size_t N, C, S, G;
  bool nhwc = false, gamma = true, beta = true, per_group = false, instance = false,
       in_place = false;
  std::size_t mis = 0;
  std::size_t pad = 0;  ///< NCHW x only: elements of NaN after each batch item (its stride)
};

void check_case(isa active, const gn_case& c, std::uint32_t seed) {
  const std::size_t N = c.N, C = c.C, S = c.S, G = c.G, cg = C / G, numel = N * C * S;
  CAPTURE(N);
  CAPTURE(C);
  CAPTURE(S);
  CAPTURE(G);
  CAPTURE(c.nhwc);
  CAPTURE(c.per_group);
  std::vector<float> x0(numel);
  test::fill_normal(x0.data(), numel, seed, 2.0, 1.5);
  for (std::size_t k = 0; k < numel; ++k) x0[k] += float((k / S) % 7);  // channels differ
  std::vector<float> x_in = c.nhwc ? chref::to_nhwc(x0.data(), N, C, S) : x0;
  if (c.pad > 0) {  // each batch item followed by NaN that no result may read
    std::vector<float> padded(N * (C * S + c.pad), std::nanf(""));
    for (std::size_t n = 0; n < N; ++n)
      std::copy_n(x0.begin() + std::ptrdiff_t(n * C * S), C * S,
                  padded.begin() + std::ptrdiff_t(n * (C * S + c.pad)));
    x_in = padded;
  }
  tensor_desc xd = desc(N, C, S, c.nhwc);
  xd.strides[0] = std::int64_t(C * S + c.pad);
  test::buffer x(x_in.size(), c.mis), y(numel, (c.mis + 3) % 16);
  std::copy(x_in.begin(), x_in.end(), x.data());
  for (std::size_t i = 0; i < numel; ++i) y[i] = 7.25f;
  const std::size_t na = c.per_group ? G : C;
  std::vector<float> g(na), b(na), mean(N * G, -1.f), rstd(N * G, -1.f);
  test::fill_normal(g.data(), na, seed + 1, 1.0, 0.5);
  test::fill_normal(b.data(), na, seed + 2);
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = c.in_place ? x.data() : y.data();
  a.gamma = c.gamma ? g.data() : nullptr;
  a.beta = c.beta ? b.data() : nullptr;
  a.mean = mean.data();
  a.rstd = rstd.data();
  const auto layout = c.nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  simdnorm::plan p;
  const float eps = 1e-5f;
  if (c.instance) {
    simdnorm::instance_norm_params prm;
    prm.layout = layout;
    REQUIRE(simdnorm::plan::instance_norm(xd, desc(N, C, S, c.nhwc), prm, &p).ok());
  } else {
    simdnorm::group_norm_params prm;
    prm.num_groups = int(G);
    prm.layout = layout;
    prm.per_group_affine = c.per_group;
    REQUIRE(simdnorm::plan::group_norm(xd, desc(N, C, S, c.nhwc), prm, &p).ok());
  }
  REQUIRE(p.kernel_isa() == active);
  CHECK(p.rows() == N * G);
  CHECK(p.row_length() == cg * S);
  const simdnorm::status s = p.execute(a);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const float* raw = c.in_place ? x.data() : y.data();
  const std::vector<float> out =
      c.nhwc ? chref::to_nchw(raw, N, C, S) : std::vector<float>(raw, raw + numel);

  const std::size_t seg = c.nhwc ? (C == 1 ? S : test::lanes(active)) : cg * S;
  const double d = chref::depth(cg * S, test::lanes(active), seg);
  test::failures bad;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t gi = 0; gi < G; ++gi) {
      const chref::unit_ref st = chref::stats(chref::group_values(x0.data(), C, S, G, n, gi));
      const double r = 1.0 / std::sqrt(st.var + eps);
      for (std::size_t ch = gi * cg; ch < (gi + 1) * cg; ++ch) {
        const std::size_t ai = c.per_group ? gi : ch;
        const double gc = c.gamma ? g[ai] : 1.0, bc = c.beta ? b[ai] : 0.0;
        for (std::size_t i = 0; i < S; ++i) {
          const std::size_t k = (n * C + ch) * S + i;
          const double want = (x0[k] - st.mean) * r * gc + bc;
          const double tol = chref::centered_bound(d, st, eps, x0[k], gc, bc, want);
          bad.expect(std::fabs(out[k] - want) <= tol, [&] {
            return "n " + std::to_string(n) + " c " + std::to_string(ch) + " s " +
                   std::to_string(i) + ": got " + std::to_string(out[k]) + " want " +
                   std::to_string(want);
          });
        }
      }
      const std::string unit = " of n " + std::to_string(n) + " group " + std::to_string(gi);
      bad.expect(std::fabs(mean[n * G + gi] - st.mean) <= chref::mean_bound(d, st),
                 [&] { return "mean" + unit; });
      bad.expect(std::fabs(rstd[n * G + gi] - r) <= chref::rstd_bound(d, r),
                 [&] { return "rstd" + unit; });
    }
  CHECK_MESSAGE(bad.none(), bad.report());
  CHECK(x.guards_intact());
  CHECK(y.guards_intact());
  if (!c.in_place) CHECK(test::bitwise_equal(x.data(), x_in.data(), x_in.size()));
}

const std::size_t kC[] = {1, 3, 15, 16, 17, 64};
const std::size_t kS[] = {1, 7, 49, 3136};
const std::size_t kN[] = {1, 2, 5};

/// f(N, C, S, nhwc) over every sweep shape and both layouts.
template <class F>
void for_each_shape(F f) {
  for (std::size_t C : kC)
    for (std::size_t S : kS)
      for (std::size_t N : kN)
        for (bool nhwc : {false, true}) {
          if (test::quick() && N * C * S > 40000) continue;  // emulated: smaller tensors
          f(N, C, S, nhwc);
        }
}

}  // namespace

TEST_CASE("group_norm: every channel count, group size, plane size and batch matches float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 1;
    std::size_t v = 0;
    for_each_shape([&](std::size_t N, std::size_t C, std::size_t S, bool nhwc) {
      // groups: 1, all channels, and a divisor in between where there is one
      const std::size_t mid = C % 4 == 0 ? C / 4 : C % 3 == 0 ? C / 3 : C % 5 == 0 ? C / 5 : 1;
      for (std::size_t G : {std::size_t(1), C, mid}) {
        gn_case c{N, C, S, G};
        c.nhwc = nhwc;
        c.gamma = v % 4 != 1;
        c.beta = v % 4 != 2;
        c.per_group = v % 3 == 2;
        c.in_place = v % 5 == 4;
        c.mis = v % 7;
        ++v;
        check_case(i, c, seed++);
      }
    });
  });
}

TEST_CASE("instance_norm: every channel count, plane size and batch matches float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 300;
    std::size_t v = 0;
    for_each_shape([&](std::size_t N, std::size_t C, std::size_t S, bool nhwc) {
      gn_case c{N, C, S, C};
      c.instance = true;
      c.nhwc = nhwc;
      c.gamma = v % 3 != 1;
      c.beta = v % 3 != 2;
      c.mis = v % 5;
      ++v;
      check_case(i, c, seed++);
    });
  });
}

// A padded batch stride in x with short NCHW planes: the fused schedule normalizes blocks of up
// to kFusedBlockUnits adjacent units in one walk, which must end with their batch item (20 and
// 40 units per item are not multiples of 16). NaN in the padding catches any read of it.
TEST_CASE("group_norm and instance_norm: padded NCHW batch strides match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 500;
    for (std::size_t C : {3, 6, 20, 40})
      for (std::size_t S : {7, 49}) {
        gn_case inst{3, C, S, C};
        inst.instance = true;
        inst.pad = 5;
        check_case(i, inst, seed++);
        gn_case grp{3, C, S, C % 2 == 0 ? C / 2 : C};
        grp.per_group = true;  // one (center, scale, shift) per unit: the block walk
        grp.pad = 16;
        grp.mis = 3;
        check_case(i, grp, seed++);
      }
  });
}

// Hundreds of NHWC channels: units of 1, 2 and 10 channels through the columns path's fold
// (the vector fold_units for one channel per unit, then the per-channel fold of larger units).
TEST_CASE("group_norm and instance_norm: hundreds of NHWC channels match float64") {
  test::for_each_isa([](isa i) {
    std::uint32_t seed = 700;
    // groups of 1 (InstanceNorm), 2 and 10 channels; the last block short
    for (const gn_case& base :
         {gn_case{2, 520, 256, 520}, gn_case{2, 520, 256, 260}, gn_case{1, 1040, 320, 104}}) {
      gn_case c = base;
      c.nhwc = true;
      c.instance = c.G == c.C;
      c.per_group = c.G == 104;
      c.mis = seed % 5;
      check_case(i, c, seed++);
    }
  });
}

TEST_CASE("group_norm: G = C equals InstanceNorm, bit for bit") {
  test::for_each_isa([](isa) {
    for (bool nhwc : {false, true}) {
      const std::size_t N = 3, C = 17, S = 49;
      std::vector<float> x(N * C * S), g(C), b(C), y1(x.size()), y2(x.size()), m1(N * C), m2(N * C),
          r1(N * C), r2(N * C);
      test::fill_normal(x.data(), x.size(), 41);
      test::fill_normal(g.data(), C, 42);
      test::fill_normal(b.data(), C, 43);
      const auto layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
      simdnorm::norm_args a;
      a.x = x.data(), a.gamma = g.data(), a.beta = b.data();
      a.y = y1.data(), a.mean = m1.data(), a.rstd = r1.data();
      simdnorm::group_norm_params gp;
      gp.num_groups = int(C);
      gp.layout = layout;
      REQUIRE(simdnorm::group_norm(desc(N, C, S, nhwc), desc(N, C, S, nhwc), gp, a).ok());
      a.y = y2.data(), a.mean = m2.data(), a.rstd = r2.data();
      simdnorm::instance_norm_params ip;
      ip.layout = layout;
      REQUIRE(simdnorm::instance_norm(desc(N, C, S, nhwc), desc(N, C, S, nhwc), ip, a).ok());
      CHECK(test::bitwise_equal(y1.data(), y2.data(), x.size()));
      CHECK(test::bitwise_equal(m1.data(), m2.data(), N * C));
      CHECK(test::bitwise_equal(r1.data(), r2.data(), N * C));
    }
  });
}

// Both are within their bound of float64, hence within twice the bound of each other (both
// use the same chunked scheme, with their own walkers).
TEST_CASE("group_norm: G = 1 statistics equal LayerNorm statistics over C * spatial") {
  test::for_each_isa([](isa i) {
    for (std::size_t S : {std::size_t(7), std::size_t(49), std::size_t(3136)}) {
      const std::size_t N = 4, C = 6, D = C * S;
      std::vector<float> x(N * D), y(x.size()), m1(N), m2(N), r1(N), r2(N);
      test::fill_normal(x.data(), x.size(), 51, 3.0, 2.0);
      simdnorm::norm_args a;
      a.x = x.data(), a.y = y.data(), a.mean = m1.data(), a.rstd = r1.data();
      REQUIRE(simdnorm::group_norm(desc(N, C, S, false), desc(N, C, S, false), {}, a).ok());
      a.mean = m2.data(), a.rstd = r2.data();
      REQUIRE(simdnorm::layer_norm(tensor_desc::contiguous({std::int64_t(N), std::int64_t(D)}),
                                   tensor_desc::contiguous({std::int64_t(N), std::int64_t(D)}), {},
                                   a)
                  .ok());
      const double d = chref::depth(D, test::lanes(i), D);
      for (std::size_t n = 0; n < N; ++n) {
        const chref::unit_ref st = chref::stats(std::vector<double>(
            x.begin() + std::ptrdiff_t(n * D), x.begin() + std::ptrdiff_t((n + 1) * D)));
        CHECK(std::fabs(m1[n] - m2[n]) <= 2 * chref::mean_bound(d, st));
        CHECK(std::fabs(r1[n] - r2[n]) <= 2 * chref::rstd_bound(d, r2[n]));
      }
    }
  });
}

// ---- MeanVarianceNormalization ------------------------------------------------------------

namespace {

/// y = (x - mean) / (sqrt(var) + eps) over `axes` of a dense tensor, in float64.
std::vector<double> mvn_ref(const std::vector<float>& x, const std::vector<std::int64_t>& shape,
                            const std::vector<int>& axes, double eps,
                            std::vector<chref::unit_ref>* units,
                            std::vector<std::size_t>* unit_of) {
  const int r = int(shape.size());
  std::vector<bool> red(std::size_t(r), false);
  for (int a : axes) red[std::size_t(a < 0 ? a + r : a)] = true;
  // unit index = the kept coordinates, row-major
  unit_of->assign(x.size(), 0);
  std::size_t n_units = 1;
  for (int d = 0; d < r; ++d)
    if (!red[std::size_t(d)]) n_units *= std::size_t(shape[std::size_t(d)]);
  std::vector<std::vector<double>> vals(n_units);
  for (std::size_t k = 0; k < x.size(); ++k) {
    std::size_t rem = k, u = 0, mul = 1;
    for (int d = r - 1; d >= 0; --d) {
      const std::size_t i = rem % std::size_t(shape[std::size_t(d)]);
      rem /= std::size_t(shape[std::size_t(d)]);
      if (!red[std::size_t(d)]) u += i * mul, mul *= std::size_t(shape[std::size_t(d)]);
    }
    (*unit_of)[k] = u;
    vals[u].push_back(x[k]);
  }
  units->clear();
  for (auto& v : vals) units->push_back(chref::stats(v));
  std::vector<double> y(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    const chref::unit_ref& st = (*units)[(*unit_of)[k]];
    y[k] = (x[k] - st.mean) / (std::sqrt(st.var) + eps);
  }
  return y;
}

}  // namespace

TEST_CASE("mean_variance_norm: axes {0,2,3}, {2,3}, {1,2,3}, {0}, {1}, {0,1,2,3}, negative axes") {
  const std::vector<std::vector<int>> axes_list = {{0, 2, 3}, {2, 3},       {1, 2, 3}, {0},
                                                   {1},       {0, 1, 2, 3}, {-1, -2},  {3, 0, 2}};
  const std::vector<std::vector<std::int64_t>> shapes = {
      {2, 3, 4, 5}, {3, 17, 7, 7}, {1, 16, 1, 33}, {4, 5, 56, 56}};
  test::for_each_isa([&](isa i) {
    std::uint32_t seed = 80;
    for (const auto& shape : shapes)
      for (const auto& axes : axes_list) {
        CAPTURE(shape[1]);
        CAPTURE(shape[2]);
        CAPTURE(axes.size());
        CAPTURE(axes[0]);
        std::size_t numel = 1;
        for (auto d : shape) numel *= std::size_t(d);
        std::vector<float> x(numel), y(numel);
        test::fill_normal(x.data(), numel, seed++, 5.0, 2.0);
        simdnorm::mean_variance_norm_params prm;
        prm.num_axes = int(axes.size());
        for (std::size_t k = 0; k < axes.size(); ++k) prm.axes[k] = axes[k];
        const tensor_desc d = tensor_desc::contiguous({shape[0], shape[1], shape[2], shape[3]});
        simdnorm::norm_args a;
        a.x = x.data(), a.y = y.data();
        const simdnorm::status s = simdnorm::mean_variance_norm(d, d, prm, a);
        REQUIRE_MESSAGE(s.ok(), s.message());
        std::vector<chref::unit_ref> units;
        std::vector<std::size_t> unit_of;
        const std::vector<double> want = mvn_ref(x, shape, axes, 1e-9, &units, &unit_of);
        const double dp = chref::depth(units[0].n, test::lanes(i), 1);  // any path
        test::failures bad;
        for (std::size_t k = 0; k < numel; ++k) {
          const chref::unit_ref& st = units[unit_of[k]];
          // sigma = sqrt(var) + 1e-9 here: eps = 1e-18 keeps the bound finite for one-value units
          const double tol = chref::centered_bound(dp, st, 1e-18, x[k], 1, 0, want[k]);
          bad.expect(std::fabs(y[k] - want[k]) <= tol, [&] {
            return "element " + std::to_string(k) + ": got " + std::to_string(y[k]) + " want " +
                   std::to_string(want[k]);
          });
        }
        CHECK_MESSAGE(bad.none(), bad.report());
      }
  });
}
