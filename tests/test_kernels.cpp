// The kernel table of every ISA, entry by entry, without a plan: f32 rows and channels at every
// length around the kernels' tiles (a vector, the 4-way unroll, the short-row group, the
// moments chunk), misaligned by one float, with canaries around each row that must survive.
// The plans' tests reach the same entries through shapes; these pin each entry's own contract
// (src/isa_table.hpp) so that a kernel change fails here, named, before it fails in an op.
// Needs the library's internals: built only against the static library (tests/CMakeLists.txt).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../src/channel/unit_math.hpp"
#include "../src/isa_table.hpp"
#include "../src/tuning.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace {

namespace sd = simdnorm::detail;
constexpr std::size_t kF32 = std::size_t(simdnorm::dtype::f32);
constexpr float kCanary = 7.25f;
constexpr std::size_t kPad = 3;  // floats of canary before, between and after the rows

const sd::kernel_table& active_table() {
  simdnorm::status s;
  const sd::kernel_table* t = sd::selected_table(&s);
  REQUIRE_MESSAGE(t != nullptr, s.message());
  return *t;
}

/// Row lengths around every tile of a kernel with `lanes` lanes.
std::vector<std::size_t> lengths(std::size_t lanes) {
  std::vector<std::size_t> n;
  for (std::size_t k = 1; k <= 4 * lanes + 1; ++k) n.push_back(k);
  for (std::size_t base :
       {8 * lanes, 16 * lanes, sd::kShortCols, sd::kMomentChunk, sd::kRowsTogetherMinCols,
        sd::kRowAffineGroupMaxCols, 2 * sd::kMomentChunk})
    for (std::size_t k : {base - 1, base, base + 1}) n.push_back(k);
  return n;
}

/// `rows` rows of `cols` floats, kPad canaries before the first row, between rows and after
/// the last; the first element one float past a 64-byte boundary (misaligned for every ISA).
struct rows_buffer {
  std::size_t rows, cols, stride;
  test::buffer mem;
  rows_buffer(std::size_t r, std::size_t c)
      : rows(r), cols(c), stride(c + kPad), mem(kPad + r * (c + kPad), 64 / 4 + 1 - kPad) {
    for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = kCanary;
  }
  float* row(std::size_t r) { return mem.data() + kPad + r * stride; }
  bool canaries_intact() const {
    for (std::size_t i = 0; i < mem.size(); ++i) {
      const bool in_row = i >= kPad && (i - kPad) % stride < cols;
      if (!in_row && mem.data()[i] != kCanary) return false;
    }
    return mem.guards_intact();
  }
};

enum class row_kind { layer_norm, rms_norm, l2_norm };

/// One call of a row op's one-pass entry (rows[f32][f32]) on `rows` rows of `cols`.
void check_row_entry(simdnorm::isa active, row_kind kind, std::size_t rows, std::size_t cols) {
  CAPTURE(cols);
  CAPTURE(rows);
  const sd::kernel_table& t = active_table();
  const sd::row_op_kernels& k = kind == row_kind::layer_norm ? t.layer_norm
                                : kind == row_kind::rms_norm ? t.rms_norm
                                                             : t.l2_norm;
  rows_buffer x(rows, cols), y(rows, cols);
  std::vector<float> g(cols), b(cols), mean(rows + 1, kCanary), rstd(rows + 1, kCanary);
  for (std::size_t r = 0; r < rows; ++r)
    test::fill_normal(x.row(r), cols, std::uint32_t(17 * r + cols), 0.5, 1.0);
  test::fill_normal(g.data(), cols, 3, 1.0, 0.5);
  test::fill_normal(b.data(), cols, 4, 0.0, 1.0);
  sd::row_norm_config cfg;
  cfg.cols = cols;
  cfg.inv_cols = 1.0 / double(cols);
  cfg.eps = kind == row_kind::l2_norm ? 1e-12f : 1e-5f;
  cfg.gamma = kind == row_kind::l2_norm ? nullptr : g.data();
  cfg.beta = kind == row_kind::layer_norm ? b.data() : nullptr;
  sd::row_block blk;
  blk.x = x.row(0);
  blk.x_stride = std::ptrdiff_t(x.stride);
  blk.y = y.row(0);
  blk.y_stride = std::ptrdiff_t(y.stride);
  blk.rows = rows;
  blk.mean = kind == row_kind::layer_norm ? mean.data() : nullptr;
  blk.rstd = rstd.data();
  k.rows[kF32][kF32](cfg, blk);

  CHECK_MESSAGE(x.canaries_intact(), "x was written");
  CHECK_MESSAGE(y.canaries_intact(), "y was written outside its rows");
  CHECK_MESSAGE(rstd[rows] == kCanary, "rstd past the last row");
  CHECK_MESSAGE(mean[rows] == kCanary, "mean past the last row");
  const std::size_t lanes = test::lanes(active);
  const double depth = ref::accumulation_depth(cols, lanes);
  std::vector<double> want(cols);
  test::failures bad;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x.row(r);
    const float* yr = y.row(r);
    if (kind == row_kind::layer_norm) {
      ref::row_stats st;
      ref::layer_norm_row(xr, cols, g.data(), b.data(), cfg.eps, want.data(), &st);
      const double sigma = std::sqrt(st.var + cfg.eps);
      double s = 0;  // the statistics are shifted by the row's first element (compensated)
      for (std::size_t i = 0; i < cols; ++i) s = std::max(s, std::fabs(xr[i] - xr[0]) / sigma);
      for (std::size_t i = 0; i < cols; ++i) {
        const double z = (xr[i] - st.mean) / sigma;
        bad.expect(
            std::fabs(yr[i] - want[i]) <= ref::layer_norm_bound(depth, z, s, g[i], b[i], want[i]),
            [&] { return "row " + std::to_string(r) + " col " + std::to_string(i); });
      }
      bad.expect(std::fabs(mean[r] - st.mean) <=
                     depth * ref::u32 * s * sigma + ref::u32 * std::fabs(st.mean),
                 [&] { return "mean of row " + std::to_string(r); });
      bad.expect(std::fabs(rstd[r] - 1 / sigma) <= depth * ref::u32 * (1 + s) * (1 + s) / sigma,
                 [&] { return "rstd of row " + std::to_string(r); });
    } else {
      // RMSNorm: the rms_bound of test_rms_norm.cpp; L2: the lp_bound of test_lp_norm.cpp.
      double rs;
      if (kind == row_kind::rms_norm) {
        ref::rms_norm_row(xr, cols, g.data(), cfg.eps, want.data());
        rs = ref::rms_rstd(xr, cols, cfg.eps);
      } else {
        rs = 1 / std::max(ref::lp_norm(xr, cols, 2), double(cfg.eps));
        for (std::size_t i = 0; i < cols; ++i) want[i] = xr[i] * rs;
      }
      const double rel = kind == row_kind::rms_norm
                             ? (depth / 2 + 4) * ref::u32
                             : (ref::sum_depth(cols, lanes) / 2 + 4) * ref::u32;
      for (std::size_t i = 0; i < cols; ++i)
        bad.expect(std::fabs(yr[i] - want[i]) <= rel * std::fabs(want[i]) + 1e-30,
                   [&] { return "row " + std::to_string(r) + " col " + std::to_string(i); });
      bad.expect(std::fabs(rstd[r] - rs) <= rel * rs,
                 [&] { return "rstd of row " + std::to_string(r); });
    }
  }
  CHECK_MESSAGE(bad.none(), bad.report());
}

}  // namespace

TEST_CASE("kernels: the row ops' one-pass entries at every tile and tail (every ISA)") {
  test::for_each_isa([](simdnorm::isa active) {
    for (row_kind kind : {row_kind::layer_norm, row_kind::rms_norm, row_kind::l2_norm}) {
      CAPTURE(int(kind));
      // 1 row, and one more than the short-row group (the group and its tail)
      for (std::size_t cols : lengths(test::lanes(active)))
        for (std::size_t rows : {std::size_t(1), sd::kRowGroup + 1})
          check_row_entry(active, kind, rows, cols);
    }
  });
}

TEST_CASE("kernels: add_rows sums in f32 and rounds once, within its rows (every ISA)") {
  test::for_each_isa([](simdnorm::isa active) {
    const sd::kernel_table& t = active_table();
    for (std::size_t cols : lengths(test::lanes(active))) {
      CAPTURE(cols);
      const std::size_t rows = 3;
      rows_buffer x(rows, cols), r(rows, cols), h(rows, cols);
      std::vector<float> bias(cols);
      for (std::size_t k = 0; k < rows; ++k) {
        test::fill_normal(x.row(k), cols, std::uint32_t(k + 1), 0.0, 3.0);
        test::fill_normal(r.row(k), cols, std::uint32_t(k + 9), 0.0, 1e-3);
      }
      test::fill_normal(bias.data(), cols, 5, 0.0, 1.0);
      const float* biases[2] = {nullptr, bias.data()};
      for (const float* bp : biases) {
        sd::add_rows_job job;
        job.x = x.row(0);
        job.r = r.row(0);
        job.h = h.row(0);
        job.bias = bp;
        job.stride = std::ptrdiff_t(x.stride);
        job.rows = rows;
        job.cols = cols;
        t.add_rows[kF32](job);
        CHECK(h.canaries_intact());
        test::failures bad;
        for (std::size_t k = 0; k < rows; ++k)
          for (std::size_t i = 0; i < cols; ++i) {
            const float sum = x.row(k)[i] + r.row(k)[i];  // f32, rounded once per add
            const float want = bp ? sum + bp[i] : sum;
            bad.expect(h.row(k)[i] == want,
                       [&] { return "row " + std::to_string(k) + " col " + std::to_string(i); });
          }
        CHECK_MESSAGE(bad.none(), bad.report());
      }
    }
  });
}

TEST_CASE("kernels: row_affine and column_moments over channel rows (every ISA)") {
  test::for_each_isa([](simdnorm::isa active) {
    const sd::kernel_table& t = active_table();
    for (std::size_t cols : lengths(test::lanes(active))) {
      CAPTURE(cols);
      const std::size_t rows = sd::kColumnChunkRows + 3;  // a whole chunk of rows and a tail
      rows_buffer x(rows, cols), y(rows, cols);
      std::vector<float> center(cols), scale(cols), shift(cols);
      for (std::size_t k = 0; k < rows; ++k)
        test::fill_normal(x.row(k), cols, std::uint32_t(k + 31), 2.0, 1.0);
      test::fill_normal(center.data(), cols, 6, 2.0, 0.1);
      test::fill_normal(scale.data(), cols, 7, 1.0, 0.5);
      test::fill_normal(shift.data(), cols, 8, 0.0, 1.0);

      sd::row_affine_job job;
      job.x = x.row(0);
      job.y = y.row(0);
      job.x_stride = job.y_stride = std::ptrdiff_t(x.stride);
      job.rows = rows;
      job.cols = cols;
      job.center = center.data();
      job.scale = scale.data();
      job.shift = shift.data();
      job.relu = true;
      t.row_affine[kF32][kF32](job);
      CHECK(y.canaries_intact());
      // (x - c) rounds once, * scale + shift once or twice (fma or not): 3 roundings of the
      // largest intermediate at most.
      test::failures bad;
      for (std::size_t k = 0; k < rows; ++k)
        for (std::size_t i = 0; i < cols; ++i) {
          const double d = double(x.row(k)[i]) - center[i];
          const double want = std::max(0.0, d * scale[i] + shift[i]);
          const double tol = 3 * ref::u32 * (std::fabs(d * scale[i]) + std::fabs(shift[i])) + 1e-30;
          bad.expect(std::fabs(y.row(k)[i] - want) <= tol,
                     [&] { return "row " + std::to_string(k) + " col " + std::to_string(i); });
        }
      CHECK_MESSAGE(bad.none(), bad.report());

      // The moments of each column over all rows: float sums of at most kColumnChunkRows terms
      // per chunk, chunks merged in double (Chan), so the mean's error is a chunk's depth.
      test::failures bad_moments;
      std::vector<sd::moments_f64> m(cols + 1);
      m[cols].mean = kCanary;
      t.column_moments[kF32](x.row(0), std::ptrdiff_t(x.stride), rows, cols, false, m.data());
      CHECK(m[cols].mean == kCanary);
      for (std::size_t i = 0; i < cols; ++i) {
        double s = 0, q = 0;
        for (std::size_t k = 0; k < rows; ++k) s += x.row(k)[i];
        const double mean = s / double(rows);
        for (std::size_t k = 0; k < rows; ++k) q += (x.row(k)[i] - mean) * (x.row(k)[i] - mean);
        double spread = 0;
        for (std::size_t k = 0; k < rows; ++k)
          spread = std::max(spread, std::fabs(x.row(k)[i] - mean));
        // The shift is one of the column's values, so |x - shift| <= 2 * spread.
        const double depth = double(sd::kColumnChunkRows) + 8;
        bad_moments.expect(std::fabs(m[i].mean - mean) <=
                               depth * ref::u32 * 2 * spread + 2 * ref::u32 * std::fabs(mean),
                           [&] { return "mean of column " + std::to_string(i); });
        bad_moments.expect(
            std::fabs(m[i].m2 - q) <= 2 * depth * ref::u32 * double(rows) * 4 * spread * spread,
            [&] { return "m2 of column " + std::to_string(i); });
      }
      CHECK_MESSAGE(bad_moments.none(), bad_moments.report());
    }
  });
}

TEST_CASE("kernels: fold_units gives the scalar fold's bits (every ISA)") {
  namespace ch = sd::channel;
  test::for_each_isa([](simdnorm::isa active) {
    const sd::kernel_table& t = active_table();
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    // Block sizes around the kernel's block, tails included; odd cases: M2 = 0, M2 above
    // kHugeM2 (the center falls to 0), a count of 1 (the unbiased variance is Inf or NaN).
    for (std::size_t units : {1, 2, 7, 15, 16, 17, 31, 32, 33, 64, 70}) {
      for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(units);
        CAPTURE(variant);
        const bool mvn = variant == 3, affine = variant % 2 == 0, running = variant < 2;
        const float eps = variant == 1 ? 0.f : 1e-5f;
        std::vector<double> mean(units), m2(units), count(units);
        std::vector<float> gamma(units), beta(units), rm0(units), rv0(units);
        for (std::size_t u = 0; u < units; ++u) {
          mean[u] = (unit(rng) - 0.5) * std::pow(10.0, 8 * unit(rng) - 4);
          count[u] = std::floor(1 + 300 * unit(rng));
          m2[u] = u % 11 == 3   ? 0.0
                  : u % 13 == 5 ? 0.3 * double(FLT_MAX) * double(FLT_MAX) * count[u]
                                : count[u] * std::pow(10.0, 10 * unit(rng) - 5);
          if (u % 17 == 9) count[u] = 1;
          gamma[u] = float(unit(rng) * 2 - 0.5);
          beta[u] = float(unit(rng) - 0.5);
          rm0[u] = float(unit(rng));
          rv0[u] = float(unit(rng) + 0.5);
        }
        // Every output one element longer than the units, its last element a canary.
        std::vector<double> rstd(units + 1, kCanary);
        std::vector<float> mean_out(units + 1, kCanary), rstd_out(units + 1, kCanary),
            center(units + 1, kCanary), scale(units + 1, kCanary), shift(units + 1, kCanary),
            rm(rm0), rv(rv0);
        rm.push_back(kCanary), rv.push_back(kCanary);
        sd::unit_fold_job j;
        j.units = units;
        j.mean = mean.data();
        j.m2 = m2.data();
        j.count = count.data();
        j.eps = eps;
        j.eps_outside_sqrt = mvn;
        j.rstd = rstd.data();
        j.mean_out = mean_out.data();
        j.rstd_out = rstd_out.data();
        const ch::running_weights w{0.9, 0.1, variant == 0};
        if (running) {
          j.running_mean = rm.data();
          j.running_var = rv.data();
          j.running_w_old = w.w_old;
          j.running_w_new = w.w_new;
          j.running_unbiased = w.unbiased;
        }
        if (affine) {
          j.gamma = gamma.data();
          j.beta = beta.data();
        }
        j.center = center.data();
        j.scale = scale.data();
        j.shift = shift.data();
        t.fold_units(j);

        test::failures bad;
        auto same = [](double a, double b) {
          return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
        };
        for (std::size_t u = 0; u < units; ++u) {
          const ch::unit_stats s =
              ch::unit_stats_of({mean[u], m2[u]}, std::size_t(count[u]), eps, mvn);
          float c, sc, sh, want_rm = rm0[u], want_rv = rv0[u];
          ch::fold_unit(s, affine ? gamma.data() : nullptr, affine ? beta.data() : nullptr,
                        std::int64_t(u), nullptr, &c, &sc, &sh);
          if (running)
            ch::update_running(w, std::size_t(count[u]), {mean[u], m2[u]}, s.mean, &want_rm,
                               &want_rv);
          const auto at = [u] { return "unit " + std::to_string(u); };
          bad.expect(same(rstd[u], s.rstd), at);
          bad.expect(same(mean_out[u], float(s.mean)) && same(rstd_out[u], float(s.rstd)), at);
          bad.expect(same(center[u], c) && same(scale[u], sc) && same(shift[u], sh), at);
          bad.expect(same(rm[u], want_rm) && same(rv[u], want_rv), at);
        }
        CHECK_MESSAGE(bad.none(), bad.report());
        CHECK(rstd[units] == kCanary);
        for (const auto* v : {&mean_out, &rstd_out, &center, &scale, &shift, &rm, &rv})
          CHECK((*v)[units] == kCanary);
      }
    }
  });
}
