// Split statistics (stats_stage, merge_moments) and long rows spread over tasks piece by
// piece: against the float64 reference on every runnable ISA, bitwise against the one-call
// path where the design promises it, independent of threads, and the errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::isa;
using simdnorm::moments;
using simdnorm::moments_kind;
using simdnorm::stats_stage;
using simdnorm::tensor_desc;

constexpr std::size_t kPiece = 16384;  // the library's row piece (src/tuning.hpp)

enum class row_op { layer_norm, rms_norm, l1_norm, l2_norm };
constexpr row_op kRowOps[] = {row_op::layer_norm, row_op::rms_norm, row_op::l1_norm,
                              row_op::l2_norm};
const char* name_of(row_op op) {
  static const char* const names[] = {"layer_norm", "rms_norm", "l1_norm", "l2_norm"};
  return names[int(op)];
}

simdnorm::status make(row_op op, const tensor_desc& x, const tensor_desc& y, stats_stage stage,
                      simdnorm::plan* p) {
  switch (op) {
    case row_op::layer_norm: {
      simdnorm::layer_norm_params prm;
      prm.stage = stage;
      return simdnorm::plan::layer_norm(x, y, prm, p);
    }
    case row_op::rms_norm: {
      simdnorm::rms_norm_params prm;
      prm.stage = stage;
      return simdnorm::plan::rms_norm(x, y, prm, p);
    }
    default: {
      simdnorm::lp_norm_params prm;
      prm.p = op == row_op::l1_norm ? 1 : 2;
      prm.stage = stage;
      return simdnorm::plan::lp_norm(x, y, prm, p);
    }
  }
}

// The op's operands for `cols` columns from column c0 of gamma and beta.
struct operands {
  const float* gamma;
  const float* beta;
};
operands operands_of(row_op op, const std::vector<float>& g, const std::vector<float>& b,
                     std::size_t c0) {
  return {op == row_op::layer_norm || op == row_op::rms_norm ? g.data() + c0 : nullptr,
          op == row_op::layer_norm ? b.data() + c0 : nullptr};
}

// Float64 reference of one row, and the bound on each output (tests/reference.hpp): LayerNorm
// statistics are sums of |x - p| with the shift p within max|x - mean| of the mean; the other
// ops sum non-negative terms (relative error depth * u) and round each output a few times.
void reference_row(row_op op, const float* x, std::size_t n, const float* g, const float* b,
                   double depth, std::vector<double>& y, std::vector<double>& tol) {
  y.assign(n, 0.0);
  tol.assign(n, 0.0);
  if (op == row_op::layer_norm) {
    ref::row_stats st;
    ref::layer_norm_row(x, n, g, b, 1e-5, y.data(), &st);
    const double sigma = std::sqrt(st.var + 1e-5);
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s = std::max(s, 2 * std::fabs(x[i] - st.mean) / sigma);
    for (std::size_t i = 0; i < n; ++i)
      tol[i] = ref::layer_norm_bound(depth, (x[i] - st.mean) / sigma, s, g[i], b[i], y[i]);
    return;
  }
  double scale;
  if (op == row_op::rms_norm) {
    scale = ref::rms_rstd(x, n, 1e-6);
  } else {
    const double norm = ref::lp_norm(x, n, op == row_op::l1_norm ? 1 : 2);
    scale = 1.0 / std::max(norm, 1e-12);
  }
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = x[i] * scale * (g ? g[i] : 1.0);
    tol[i] = (depth + 4) * ref::u32 * std::fabs(y[i]) + 1e-30;
  }
}

struct problem {
  std::size_t rows, cols;
  std::vector<float> x, g, b;
  problem(row_op op, std::size_t rows_, std::size_t cols_, std::uint32_t seed)
      : rows(rows_), cols(cols_), x(rows_ * cols_), g(cols_), b(cols_) {
    test::fill_normal(x.data(), x.size(), seed, op == row_op::layer_norm ? 3.0 : 0.0, 2.0);
    test::fill_normal(g.data(), cols, seed + 1, 1.0, 0.5);
    test::fill_normal(b.data(), cols, seed + 2, 0.0, 1.0);
  }
  tensor_desc desc(std::size_t n_rows, std::size_t n_cols) const {
    tensor_desc d = tensor_desc::contiguous({std::int64_t(n_rows), std::int64_t(n_cols)});
    d.strides[0] = std::int64_t(cols);  // a column shard of the full rows
    return d;
  }
  // The one-call result of rows [0, n_rows) on `exec`.
  std::vector<float> full(row_op op, std::size_t n_rows, simdnorm::executor* exec,
                          std::vector<float>* rstd = nullptr) const {
    simdnorm::plan p;
    const tensor_desc d = desc(n_rows, cols);
    REQUIRE(make(op, d, d, stats_stage::full, &p).ok());
    std::vector<float> y(n_rows * cols, 7.25f);
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    const operands o = operands_of(op, g, b, 0);
    a.gamma = o.gamma;
    a.beta = o.beta;
    if (rstd) {
      rstd->assign(n_rows, -1.f);
      a.rstd = rstd->data();
    }
    const simdnorm::status s = p.execute(a, exec);
    REQUIRE_MESSAGE(s.ok(), s.message());
    return y;
  }
};

void check_against_reference(row_op op, const problem& pb, const std::vector<float>& y,
                             std::size_t rows, isa active) {
  const double depth = ref::accumulation_depth(pb.cols, test::lanes(active));
  std::vector<double> yr, tol;
  test::failures bad;
  const operands o = operands_of(op, pb.g, pb.b, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    reference_row(op, pb.x.data() + r * pb.cols, pb.cols, o.gamma ? o.gamma : pb.g.data(),
                  o.beta ? o.beta : pb.b.data(), depth, yr, tol);
    if (op != row_op::layer_norm && o.gamma == nullptr)  // the sums ops without gamma
      reference_row(op, pb.x.data() + r * pb.cols, pb.cols, nullptr, nullptr, depth, yr, tol);
    for (std::size_t i = 0; i < pb.cols; ++i)
      bad.expect(std::fabs(y[r * pb.cols + i] - yr[i]) <= tol[i], [&] {
        return "row " + std::to_string(r) + " col " + std::to_string(i) + ": got " +
               std::to_string(y[r * pb.cols + i]) + " want " + std::to_string(yr[i]);
      });
  }
  CHECK_MESSAGE(bad.none(), bad.report());
}

TEST_CASE("split rows: a few long rows spread over tasks piece by piece (every ISA)") {
  // 64 rows make enough tasks to go whole; 3 rows are cut into pieces across tasks. The rows
  // shared by both must come out bitwise the same, on any executor, and match float64.
  const std::size_t cols_list[] = {kPiece + 1, 3 * kPiece, 50001};
  test::chunked_thread_executor three(3);
  test::for_each_isa([&](isa active) {
    for (row_op op : kRowOps)
      for (std::size_t cols : cols_list) {
        if (test::quick() && cols != kPiece + 1) continue;
        CAPTURE(name_of(op));
        CAPTURE(cols);
        const problem pb(op, 64, cols, std::uint32_t(cols));
        std::vector<float> rstd_whole, rstd_split;
        const std::vector<float> whole = pb.full(op, 64, nullptr, &rstd_whole);
        const std::vector<float> split = pb.full(op, 3, nullptr, &rstd_split);
        CHECK(test::bitwise_equal(whole.data(), split.data(), split.size()));
        CHECK(test::bitwise_equal(rstd_whole.data(), rstd_split.data(), 3));
        CHECK(split == pb.full(op, 3, &simdnorm::serial_executor()));
        CHECK(split == pb.full(op, 3, &three));
        check_against_reference(op, pb, split, 3, active);
      }
  });
}

// Runs op on rows [0, rows) of pb with the columns cut at `cuts` (shards [cuts[k], cuts[k+1])):
// the moments of each shard, merged, then applied to each shard. Returns y; the merged
// records in *merged.
std::vector<float> staged(row_op op, const problem& pb, std::size_t rows,
                          const std::vector<std::size_t>& cuts, simdnorm::executor* exec,
                          std::vector<moments>* merged) {
  const std::size_t shards = cuts.size() - 1;
  std::vector<moments> parts(shards * rows);
  for (std::size_t k = 0; k < shards; ++k) {
    const std::size_t c0 = cuts[k], n = cuts[k + 1] - c0;
    simdnorm::plan p;
    const tensor_desc d = pb.desc(rows, n);
    REQUIRE(make(op, d, d, stats_stage::moments, &p).ok());
    simdnorm::norm_args a;
    a.x = pb.x.data() + c0;
    a.moments_out = parts.data() + k * rows;
    const simdnorm::status s = p.execute(a, exec);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  merged->assign(rows, moments{});
  REQUIRE(simdnorm::merge_moments(parts.data(), shards, rows, merged->data()).ok());
  std::vector<float> y(rows * pb.cols, 7.25f);
  for (std::size_t k = 0; k < shards; ++k) {
    const std::size_t c0 = cuts[k], n = cuts[k + 1] - c0;
    simdnorm::plan p;
    const tensor_desc d = pb.desc(rows, n);
    REQUIRE(make(op, d, d, stats_stage::apply, &p).ok());
    simdnorm::norm_args a;
    a.x = pb.x.data() + c0;
    a.y = y.data() + c0;
    const operands o = operands_of(op, pb.g, pb.b, c0);
    a.gamma = o.gamma;
    a.beta = o.beta;
    a.moments_in = merged->data();
    const simdnorm::status s = p.execute(a, exec);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  return y;
}

TEST_CASE("split statistics: moments of column shards, merged, then applied (every ISA)") {
  struct shape {
    std::size_t rows, cols;
  };
  const shape shapes[] = {{5, 100}, {5, 700}, {3, 2 * kPiece + 77}};
  test::chunked_thread_executor three(3);
  test::for_each_isa([&](isa active) {
    for (row_op op : kRowOps)
      for (const shape& sh : shapes) {
        if (test::quick() && sh.cols > 1000) continue;
        CAPTURE(name_of(op));
        CAPTURE(sh.cols);
        const problem pb(op, sh.rows, sh.cols, std::uint32_t(sh.cols + 11));
        std::vector<moments> merged;
        // Shards of unequal lengths, not on piece boundaries (tensor parallelism's shards).
        const std::vector<std::size_t> cuts = {0, sh.cols / 3, sh.cols / 3 + sh.cols / 5 + 1,
                                               sh.cols};
        const std::vector<float> y = staged(op, pb, sh.rows, cuts, nullptr, &merged);
        check_against_reference(op, pb, y, sh.rows, active);
        for (const moments& m : merged) {
          CHECK(m.count == std::int64_t(sh.cols));
          CHECK(m.kind == (op == row_op::layer_norm  ? moments_kind::centered
                           : op == row_op::l1_norm ? moments_kind::magnitudes
                                                   : moments_kind::squares));
        }
        // Deterministic whatever the threads.
        std::vector<moments> merged3;
        CHECK(y == staged(op, pb, sh.rows, cuts, &three, &merged3));
        CHECK(std::memcmp(merged.data(), merged3.data(), merged.size() * sizeof(moments)) == 0);
        // One shard: moments, a merge of one part and apply are the one-call path. Bitwise for
        // rows longer than kShortCols (256); shorter ones keep float-lane statistics there.
        const std::vector<float> one = staged(op, pb, sh.rows, {0, sh.cols}, nullptr, &merged);
        if (sh.cols > 256)
          CHECK(one == pb.full(op, sh.rows, nullptr));
        else
          check_against_reference(op, pb, one, sh.rows, active);
      }
  });
}

TEST_CASE("split statistics: the merged moments match float64, counts beyond 2^31 exact") {
  // Moments of a row cut at shard boundaries: the merged mean and M2 against float64.
  const problem pb(row_op::layer_norm, 1, 3000, 5);
  std::vector<moments> merged;
  staged(row_op::layer_norm, pb, 1, {0, 1000, 1001, 3000}, nullptr, &merged);
  const ref::row_stats st = ref::stats(pb.x.data(), 3000);
  CHECK(merged[0].mean == doctest::Approx(st.mean).epsilon(1e-6));
  CHECK(merged[0].m2 / 3000 == doctest::Approx(st.var).epsilon(1e-5));

  // Counts beyond 2^32 add exactly; the merged mean and M2 are Chan's, in closed form here:
  // two parts of constant values a and b.
  const std::int64_t na = (std::int64_t(1) << 33) + 1, nb = (std::int64_t(1) << 32) + 3;
  const moments parts[2] = {{na, 1.0, 0.0, moments_kind::centered, 0},
                            {nb, 4.0, 0.0, moments_kind::centered, 0}};
  moments out;
  REQUIRE(simdnorm::merge_moments(parts, 2, 1, &out).ok());
  CHECK(out.count == na + nb);
  const double n = double(na) + double(nb);
  CHECK(out.mean == doctest::Approx((double(na) * 1.0 + double(nb) * 4.0) / n).epsilon(1e-15));
  CHECK(out.m2 == doctest::Approx(9.0 * double(na) * double(nb) / n).epsilon(1e-15));
}

TEST_CASE("split statistics: bad input is refused with a clear message and writes nothing") {
  const std::size_t rows = 2, cols = 40;
  const problem pb(row_op::layer_norm, rows, cols, 3);
  const tensor_desc d = pb.desc(rows, cols);
  const moments good{std::int64_t(cols), 0.5, 3.0, moments_kind::centered, 0};
  std::vector<moments> in(rows, good);
  moments squares = good;
  squares.kind = moments_kind::squares;
  moments empty = good;
  empty.count = 0;
  std::vector<float> r(rows * cols, 1.f), h(rows * cols, 0.f);

  struct bad_call {
    const char* what;  // a word the message must contain
    stats_stage stage;
    std::function<void(simdnorm::norm_args&, std::vector<moments>&)> edit;
  };
  const bad_call calls[] = {
      {"moments_out", stats_stage::moments,
       [](simdnorm::norm_args& a, std::vector<moments>&) { a.moments_out = nullptr; }},
      {"moments_in", stats_stage::apply,
       [](simdnorm::norm_args& a, std::vector<moments>&) { a.moments_in = nullptr; }},
      {"kind", stats_stage::apply,
       [&](simdnorm::norm_args&, std::vector<moments>& m) { m[1] = squares; }},
      {"count", stats_stage::apply,
       [&](simdnorm::norm_args&, std::vector<moments>& m) { m[0] = empty; }},
      {"residual", stats_stage::apply,
       [&](simdnorm::norm_args& a, std::vector<moments>&) {
         a.residual = r.data();
         a.residual_out = h.data();
       }},
  };
  for (const bad_call& c : calls) {
    CAPTURE(c.what);
    simdnorm::plan p;
    REQUIRE(make(row_op::layer_norm, d, d, c.stage, &p).ok());
    std::vector<moments> m = in, out(rows);
    std::vector<float> y(rows * cols, 7.25f);
    simdnorm::norm_args a;
    a.x = pb.x.data();
    a.y = y.data();
    a.moments_in = m.data();
    a.moments_out = out.data();
    c.edit(a, m);
    const simdnorm::status s = p.execute(a);
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find(c.what) != std::string::npos);
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.25f; }));
    CHECK(std::all_of(h.begin(), h.end(), [](float v) { return v == 0.f; }));
  }

  simdnorm::plan p;
  CHECK_FALSE(make(row_op::layer_norm, d, d, stats_stage(7), &p).ok());
  CHECK_FALSE(p.valid());
}

TEST_CASE("merge_moments: bad records are refused and nothing is written") {
  const moments ok{10, 1.0, 2.0, moments_kind::centered, 0};
  struct bad_merge {
    const char* what;
    std::vector<moments> parts;
    std::size_t num_parts;
  };
  moments zero = ok, negative = ok, other = ok, unknown = ok, huge = ok;
  zero.count = 0;
  negative.count = -5;
  other.kind = moments_kind::squares;
  unknown.kind = moments_kind(9);
  huge.count = std::numeric_limits<std::int64_t>::max();
  const bad_merge cases[] = {
      {"num_parts", {ok}, 0},          {"count", {ok, zero}, 2},   {"count", {negative}, 1},
      {"kind", {ok, other}, 2},        {"kind", {unknown}, 1},     {"overflow", {huge, ok}, 2},
  };
  for (const bad_merge& c : cases) {
    CAPTURE(c.what);
    moments out{-1, -1.0, -1.0, moments_kind::squares, 0};
    const simdnorm::status s = simdnorm::merge_moments(c.parts.data(), c.num_parts, 1, &out);
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find(c.what) != std::string::npos);
    CHECK(out.count == -1);
  }
  moments out;
  CHECK_FALSE(simdnorm::merge_moments(nullptr, 1, 1, &out).ok());
  CHECK_FALSE(simdnorm::merge_moments(&ok, 1, 1, nullptr).ok());
  CHECK(simdnorm::merge_moments(nullptr, 1, 0, nullptr).ok());  // nothing to merge
}

}  // namespace
