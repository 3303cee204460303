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

#include "channel_reference.hpp"
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
                          std::vector<float>* rstd = nullptr, std::size_t* phases = nullptr) const {
    simdnorm::plan p;
    const tensor_desc d = desc(n_rows, cols);
    REQUIRE(make(op, d, d, stats_stage::full, &p).ok());
    if (phases) *phases = p.num_phases();
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
  // 64 rows make enough tasks to go whole; 3 rows are cut into pieces across tasks (a second
  // phase folds them). The rows shared by both must come out bitwise the same, on any
  // executor, and match float64. 3 rows of these lengths are above the inline size.
  const std::size_t cols_list[] = {4 * kPiece + 1, 3 * kPiece, 50001};
  test::chunked_thread_executor three(3);
  test::for_each_isa([&](isa active) {
    for (row_op op : kRowOps)
      for (std::size_t cols : cols_list) {
        if (test::quick() && cols != 4 * kPiece + 1) continue;
        CAPTURE(name_of(op));
        CAPTURE(cols);
        const problem pb(op, 64, cols, std::uint32_t(cols));
        std::vector<float> rstd_whole, rstd_split;
        std::size_t phases_whole = 0, phases_split = 0;
        const std::vector<float> whole = pb.full(op, 64, nullptr, &rstd_whole, &phases_whole);
        const std::vector<float> split = pb.full(op, 3, nullptr, &rstd_split, &phases_split);
        CHECK(phases_whole == 1);
        CHECK(phases_split == 2);
        CHECK(test::bitwise_equal(whole.data(), split.data(), split.size()));
        CHECK(test::bitwise_equal(rstd_whole.data(), rstd_split.data(), 3));
        CHECK(split == pb.full(op, 3, &simdnorm::serial_executor()));
        CHECK(split == pb.full(op, 3, &three));
        check_against_reference(op, pb, split, 3, active);
      }
  });
}

TEST_CASE("split rows: a call under the inline size is one task, whatever its rows") {
  // Decode-sized calls (a few rows of 4096-16384) run on the calling thread: waking a pool
  // thread would cost as much as the call (kInlineElements, src/tuning.hpp).
  const std::size_t shapes[][2] = {{1, 4096}, {8, 4096}, {4, kPiece}, {3, 2 * kPiece + 1}};
  for (const auto& [rows, cols] : shapes) {
    CAPTURE(rows);
    CAPTURE(cols);
    const tensor_desc d = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
    for (row_op op : kRowOps) {
      simdnorm::plan p;
      REQUIRE(make(op, d, d, stats_stage::full, &p).ok());
      CHECK(p.num_phases() == 1);
      CHECK(p.num_tasks() == 1);
    }
  }
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
          CHECK(m.kind == (op == row_op::layer_norm ? moments_kind::centered
                           : op == row_op::l1_norm  ? moments_kind::magnitudes
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
    std::function<void(simdnorm::layer_norm_args&, std::vector<moments>&)> edit;
  };
  const bad_call calls[] = {
      {"moments_out", stats_stage::moments,
       [](simdnorm::layer_norm_args& a, std::vector<moments>&) { a.moments_out = nullptr; }},
      {"moments_in", stats_stage::apply,
       [](simdnorm::layer_norm_args& a, std::vector<moments>&) { a.moments_in = nullptr; }},
      {"kind", stats_stage::apply,
       [&](simdnorm::layer_norm_args&, std::vector<moments>& m) { m[1] = squares; }},
      {"count", stats_stage::apply,
       [&](simdnorm::layer_norm_args&, std::vector<moments>& m) { m[0] = empty; }},
      {"no adaLN modulation", stats_stage::moments,
       [&](simdnorm::layer_norm_args& a, std::vector<moments>&) {
         a.modulation_scale = a.modulation_shift = r.data();
       }},
      {"y_scale", stats_stage::moments,
       [&](simdnorm::layer_norm_args& a, std::vector<moments>&) { a.y_scale = h.data(); }},
      {"residual", stats_stage::apply,
       [&](simdnorm::layer_norm_args& a, std::vector<moments>&) {
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
    simdnorm::layer_norm_args a;
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

// BatchNorm training with the batch cut into parts (SyncBatchNorm: one part per process):
// the moments of each part, merged in part order, then each part applied with its own copy of
// the running statistics and batch counter.
struct sync_bn_result {
  std::vector<float> y, mean, rstd;
  std::vector<std::vector<float>> running_mean, running_var;  // one copy per part
  std::vector<std::int64_t> batches;

  sync_bn_result(std::size_t parts, std::size_t values, std::size_t C)
      : y(values, 7.25f),
        mean(C, 0.f),
        rstd(C, 0.f),
        running_mean(parts, std::vector<float>(C, 0.5f)),
        running_var(parts, std::vector<float>(C, 2.f)),
        batches(parts, 3) {}

  /// The training-forward arguments of part k, whose values start at `offset`.
  simdnorm::batch_norm_args args(const std::vector<float>& x, std::size_t k, std::size_t offset,
                                 const std::vector<float>& g, const std::vector<float>& b) {
    simdnorm::batch_norm_args a;
    a.x = x.data() + offset;
    a.y = y.data() + offset;
    a.gamma = g.data();
    a.beta = b.data();
    a.mean = mean.data();  // every part writes the same values
    a.rstd = rstd.data();
    a.running_mean = running_mean[k].data();
    a.running_var = running_var[k].data();
    a.num_batches_tracked = &batches[k];
    return a;
  }
};

tensor_desc bn_desc(simdnorm::channel_layout layout, std::size_t n, std::size_t C, std::size_t S) {
  return layout == simdnorm::channel_layout::nchw
             ? tensor_desc::contiguous({std::int64_t(n), std::int64_t(C), std::int64_t(S)})
             : tensor_desc::contiguous({std::int64_t(n), std::int64_t(S), std::int64_t(C)});
}

sync_bn_result sync_batch_norm(simdnorm::channel_layout layout, const std::vector<float>& x,
                               std::size_t C, std::size_t S, const std::vector<std::size_t>& cuts,
                               const std::vector<float>& g, const std::vector<float>& b,
                               simdnorm::executor* exec) {
  const std::size_t parts = cuts.size() - 1, N = cuts.back();
  const auto desc = [&](std::size_t n) { return bn_desc(layout, n, C, S); };
  simdnorm::batch_norm_params prm;
  prm.layout = layout;
  prm.training = true;
  std::vector<moments> records(parts * C), merged(C);
  for (std::size_t k = 0; k < parts; ++k) {
    prm.stage = stats_stage::moments;
    simdnorm::plan p;
    const tensor_desc d = desc(cuts[k + 1] - cuts[k]);
    REQUIRE(simdnorm::plan::batch_norm(d, d, prm, &p).ok());
    simdnorm::norm_args a;
    a.x = x.data() + cuts[k] * C * S;
    a.moments_out = records.data() + k * C;
    const simdnorm::status s = p.execute(a, exec);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  REQUIRE(simdnorm::merge_moments(records.data(), parts, C, merged.data()).ok());
  sync_bn_result out(parts, N * C * S, C);
  for (std::size_t k = 0; k < parts; ++k) {
    prm.stage = stats_stage::apply;
    simdnorm::plan p;
    const tensor_desc d = desc(cuts[k + 1] - cuts[k]);
    REQUIRE(simdnorm::plan::batch_norm(d, d, prm, &p).ok());
    simdnorm::batch_norm_args a = out.args(x, k, cuts[k] * C * S, g, b);
    a.moments_in = merged.data();
    const simdnorm::status s = p.execute(a, exec);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  return out;
}

TEST_CASE("split statistics: BatchNorm training with the batch split (SyncBatchNorm, every ISA)") {
  using simdnorm::channel_layout;
  struct shape {
    std::size_t N, C, S;
  };
  // fused planes, split planes (few channels of many values), short planes; NHWC: columns,
  // and with 520 channels several blocks of the vector fold
  const shape shapes[] = {{6, 5, 63}, {8, 3, 2500}, {7, 24, 1}, {8, 520, 32}};
  test::chunked_thread_executor three(3);
  test::for_each_isa([&](isa active) {
    for (channel_layout layout : {channel_layout::nchw, channel_layout::nhwc})
      for (const shape& sh : shapes) {
        CAPTURE(int(layout));
        CAPTURE(sh.C);
        CAPTURE(sh.S);
        const std::size_t N = sh.N, C = sh.C, S = sh.S;
        std::vector<float> x_nchw(N * C * S), g(C), b(C);
        test::fill_normal(x_nchw.data(), x_nchw.size(), std::uint32_t(C * S), 1.5, 2.0);
        test::fill_normal(g.data(), C, 4, 1.0, 0.3);
        test::fill_normal(b.data(), C, 5, 0.0, 1.0);
        const std::vector<float> x =
            layout == channel_layout::nchw ? x_nchw : chref::to_nhwc(x_nchw.data(), N, C, S);
        const sync_bn_result one = sync_batch_norm(layout, x, C, S, {0, N}, g, b, nullptr);
        const sync_bn_result three_parts =
            sync_batch_norm(layout, x, C, S, {0, 2, 3, N}, g, b, nullptr);

        // One part is the one-call training forward, bit for bit.
        {
          simdnorm::batch_norm_params prm;
          prm.layout = layout;
          prm.training = true;
          const tensor_desc d = bn_desc(layout, N, C, S);
          sync_bn_result direct(1, x.size(), C);
          REQUIRE(simdnorm::batch_norm(d, d, prm, direct.args(x, 0, 0, g, b)).ok());
          CHECK(direct.y == one.y);
          CHECK(direct.mean == one.mean);
          CHECK(direct.rstd == one.rstd);
          CHECK(direct.running_mean == one.running_mean);
          CHECK(direct.running_var == one.running_var);
          CHECK(direct.batches == one.batches);
        }
        // Every part keeps the same running state; threads change nothing.
        for (std::size_t k = 1; k < 3; ++k) {
          CHECK(three_parts.running_mean[k] == three_parts.running_mean[0]);
          CHECK(three_parts.running_var[k] == three_parts.running_var[0]);
          CHECK(three_parts.batches[k] == 4);
        }
        const sync_bn_result threaded =
            sync_batch_norm(layout, x, C, S, {0, 2, 3, N}, g, b, &three);
        CHECK(threaded.y == three_parts.y);
        CHECK(threaded.running_var[0] == three_parts.running_var[0]);

        // The split result against float64: the whole batch's statistics.
        const double d = chref::depth(N * S, test::lanes(active), S);
        test::failures bad;
        for (std::size_t c = 0; c < C; ++c) {
          const chref::unit_ref st = chref::stats(chref::channel_values(x_nchw.data(), N, C, S, c));
          const double rstd = 1.0 / std::sqrt(st.var + 1e-5);
          bad.expect(std::fabs(three_parts.mean[c] - st.mean) <= chref::mean_bound(d, st),
                     [&] { return "mean of channel " + std::to_string(c); });
          const double n = double(N * S);
          const double rm = 0.9 * 0.5 + 0.1 * st.mean, rv = 0.9 * 2.0 + 0.1 * st.var * n / (n - 1);
          bad.expect(std::fabs(three_parts.running_mean[0][c] - rm) <=
                         0.1 * chref::mean_bound(d, st) + 2 * ref::u32 * std::fabs(rm),
                     [&] { return "running_mean of channel " + std::to_string(c); });
          bad.expect(std::fabs(three_parts.running_var[0][c] - rv) <=
                         (0.1 * chref::var_rel_bound(d) + 2 * ref::u32) * std::fabs(rv),
                     [&] { return "running_var of channel " + std::to_string(c); });
          for (std::size_t i = 0; i < N * S; ++i) {
            const std::size_t nn = i / S, s = i % S;
            const std::size_t at =
                layout == channel_layout::nchw ? (nn * C + c) * S + s : (nn * S + s) * C + c;
            const double xv = x[at], want = (xv - st.mean) * rstd * g[c] + b[c];
            bad.expect(std::fabs(three_parts.y[at] - want) <=
                           chref::centered_bound(d, st, 1e-5, xv, g[c], b[c], want),
                       [&] {
                         return "channel " + std::to_string(c) + " value " + std::to_string(i) +
                                ": got " + std::to_string(three_parts.y[at]) + " want " +
                                std::to_string(want);
                       });
          }
        }
        CHECK_MESSAGE(bad.none(), bad.report());
      }
  });
}

TEST_CASE("split statistics: GroupNorm with the spatial dims split (every ISA)") {
  // [N, C, H, W] cut along H, as sequence parallelism cuts an image's rows: each part is a
  // strided view of the whole tensor. Records per (n, group).
  const std::size_t N = 2, C = 6, H = 12, W = 10, groups = 3;
  std::vector<float> x(N * C * H * W), g(C), b(C);
  test::fill_normal(x.data(), x.size(), 17, -0.5, 3.0);
  test::fill_normal(g.data(), C, 18, 1.0, 0.3);
  test::fill_normal(b.data(), C, 19, 0.0, 1.0);
  const std::vector<std::size_t> cuts = {0, 5, 6, H};
  test::for_each_isa([&](isa active) {
    simdnorm::group_norm_params prm;
    prm.num_groups = int(groups);
    std::vector<moments> records((cuts.size() - 1) * N * groups), merged(N * groups);
    const auto part = [&](std::size_t k) {
      tensor_desc d = tensor_desc::contiguous(
          {std::int64_t(N), std::int64_t(C), std::int64_t(H), std::int64_t(W)});
      d.shape[2] = std::int64_t(cuts[k + 1] - cuts[k]);
      return d;
    };
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      prm.stage = stats_stage::moments;
      simdnorm::plan p;
      REQUIRE(simdnorm::plan::group_norm(part(k), part(k), prm, &p).ok());
      simdnorm::norm_args a;
      a.x = x.data() + cuts[k] * W;
      a.moments_out = records.data() + k * N * groups;
      REQUIRE(p.execute(a).ok());
    }
    REQUIRE(
        simdnorm::merge_moments(records.data(), cuts.size() - 1, N * groups, merged.data()).ok());
    std::vector<float> y(x.size(), 7.25f);
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      prm.stage = stats_stage::apply;
      simdnorm::plan p;
      REQUIRE(simdnorm::plan::group_norm(part(k), part(k), prm, &p).ok());
      simdnorm::norm_args a;
      a.x = x.data() + cuts[k] * W;
      a.y = y.data() + cuts[k] * W;
      a.gamma = g.data();
      a.beta = b.data();
      a.moments_in = merged.data();
      REQUIRE(p.execute(a).ok());
    }
    const std::size_t S = H * W;
    const double d = chref::depth(C / groups * S, test::lanes(active), W);
    test::failures bad;
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t gi = 0; gi < groups; ++gi) {
        const chref::unit_ref st = chref::stats(chref::group_values(x.data(), C, S, groups, n, gi));
        CHECK(merged[n * groups + gi].count == std::int64_t(C / groups * S));
        const double rstd = 1.0 / std::sqrt(st.var + 1e-5);
        for (std::size_t c = gi * C / groups; c < (gi + 1) * C / groups; ++c)
          for (std::size_t s = 0; s < S; ++s) {
            const std::size_t at = (n * C + c) * S + s;
            const double want = (x[at] - st.mean) * rstd * g[c] + b[c];
            bad.expect(std::fabs(y[at] - want) <=
                           chref::centered_bound(d, st, 1e-5, x[at], g[c], b[c], want),
                       [&] { return "element " + std::to_string(at); });
          }
      }
    CHECK_MESSAGE(bad.none(), bad.report());
  });
}

TEST_CASE("split statistics: MeanVarianceNormalization with the batch split (every ISA)") {
  // ONNX's default axes {0, 2, 3}: one record per channel, the batch cut in two parts.
  const std::size_t N = 5, C = 4, S = 30;
  std::vector<float> x(N * C * S);
  test::fill_normal(x.data(), x.size(), 23, 2.0, 1.5);
  test::for_each_isa([&](isa active) {
    simdnorm::mean_variance_norm_params prm;  // axes {0, 2, 3}
    const auto desc = [&](std::size_t n) {
      return tensor_desc::contiguous({std::int64_t(n), std::int64_t(C), 5, 6});
    };
    // Returns y for the batch cut at `cuts`.
    const auto staged_mvn = [&](const std::vector<std::size_t>& cuts) {
      const std::size_t parts = cuts.size() - 1;
      std::vector<moments> records(parts * C), merged(C);
      std::vector<float> y(x.size(), 7.25f);
      for (stats_stage stage : {stats_stage::moments, stats_stage::apply}) {
        if (stage == stats_stage::apply)
          REQUIRE(simdnorm::merge_moments(records.data(), parts, C, merged.data()).ok());
        for (std::size_t k = 0; k < parts; ++k) {
          prm.stage = stage;
          simdnorm::plan p;
          const tensor_desc d = desc(cuts[k + 1] - cuts[k]);
          REQUIRE(simdnorm::plan::mean_variance_norm(d, d, prm, &p).ok());
          simdnorm::norm_args a;
          a.x = x.data() + cuts[k] * C * S;
          a.y = y.data() + cuts[k] * C * S;
          a.moments_out = records.data() + k * C;
          a.moments_in = merged.data();
          REQUIRE(p.execute(a).ok());
        }
      }
      return y;
    };
    prm.stage = stats_stage::full;
    std::vector<float> direct(x.size());
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = direct.data();
    REQUIRE(simdnorm::mean_variance_norm(desc(N), desc(N), prm, a).ok());
    CHECK(staged_mvn({0, N}) == direct);
    const std::vector<float> y = staged_mvn({0, 2, N});
    const double d = chref::depth(N * S, test::lanes(active), S);
    test::failures bad;
    for (std::size_t c = 0; c < C; ++c) {
      const chref::unit_ref st = chref::stats(chref::channel_values(x.data(), N, C, S, c));
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t i = 0; i < S; ++i) {
          const std::size_t at = (n * C + c) * S + i;
          const double want = (x[at] - st.mean) / (std::sqrt(st.var) + 1e-9);
          bad.expect(std::fabs(y[at] - want) <= chref::centered_bound(d, st, 0, x[at], 1, 0, want),
                     [&] { return "element " + std::to_string(at); });
        }
    }
    CHECK_MESSAGE(bad.none(), bad.report());
  });
}

TEST_CASE("split statistics: channel ops refuse bad records and stages, writing nothing") {
  const auto d = tensor_desc::contiguous({4, 3, 5});
  std::vector<float> x(60, 1.f), y(60, 7.25f), rm(3, 0.5f), rv(3, 2.f);
  simdnorm::batch_norm_params prm;
  prm.training = true;
  prm.stage = stats_stage::apply;
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::batch_norm(d, d, prm, &p).ok());
  const moments ok{20, 1.0, 4.0, moments_kind::centered, 0};
  struct bad_records {
    const char* what;
    moments second;
  };
  moments one_value = ok, squares = ok;
  one_value.count = 1;  // BatchNorm's unbiased running variance needs two
  squares.kind = moments_kind::squares;
  for (const bad_records& c : {bad_records{"count", one_value}, bad_records{"kind", squares}}) {
    CAPTURE(c.what);
    const moments in[3] = {ok, c.second, ok};
    simdnorm::batch_norm_args a;
    a.x = x.data();
    a.y = y.data();
    a.running_mean = rm.data();
    a.running_var = rv.data();
    a.moments_in = in;
    const simdnorm::status s = p.execute(a);
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find(c.what) != std::string::npos);
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.25f; }));
    CHECK(rm == std::vector<float>(3, 0.5f));
  }
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = y.data();
  CHECK(std::string(p.execute(a).message()).find("moments_in") != std::string::npos);
  prm.stage = stats_stage::moments;
  REQUIRE(simdnorm::plan::batch_norm(d, d, prm, &p).ok());
  CHECK(std::string(p.execute(a).message()).find("moments_out") != std::string::npos);
  prm.training = false;  // inference has no batch statistics to split
  const float stats[3] = {0.f, 1.f, 2.f};
  prm.running_mean = prm.running_var = stats;
  CHECK(std::string(simdnorm::plan::batch_norm(d, d, prm, &p).message()).find("training") !=
        std::string::npos);
  simdnorm::group_norm_params gp;
  gp.stage = stats_stage(5);
  CHECK(std::string(simdnorm::plan::group_norm(d, d, gp, &p).message()).find("stats_stage") !=
        std::string::npos);
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
      {"num_parts", {ok}, 0},   {"count", {ok, zero}, 2}, {"count", {negative}, 1},
      {"kind", {ok, other}, 2}, {"kind", {unknown}, 1},   {"overflow", {huge, ok}, 2},
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
