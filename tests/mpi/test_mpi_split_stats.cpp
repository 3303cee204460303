// Split statistics across MPI processes (run under mpiexec with any number of ranks; ctest runs
// 1, 2 and 3 ranks, each twice, label mpi): tensor-parallel LayerNorm / RMSNorm (hidden dim
// sharded, shards of unequal lengths) and SyncBatchNorm (batch split), on every runnable ISA,
// each against
//   - float64: within the library's own error bound of the whole row or channel
//     (tests/reference.hpp; a shard boundary acts as one more chunk boundary, and the merge in
//     double adds nothing visible at float precision: docs/distributed.md);
//   - the single-process one-call result of the whole tensor (every rank computes it): within
//     twice that bound, and bitwise with one rank, and for the row ops with every rank after the
//     first holding one of the library's pieces (16384 values on piece boundaries);
//   - itself: the same bits with a 3-thread executor as with the serial one, and the running
//     statistics bitwise the same on every rank.
// Rank 0 prints one "digest" line per case (hashes of every rank's outputs); the ctest driver
// (tests/mpi/run.cmake) runs the program twice and requires the same digests.
// Collectives run on every rank whatever the checks find: failures are counted, not thrown,
// and reduced at the end (exit status 1 on any failure).
#include <mpi.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "channel_reference.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace {

using simdnorm::moments;
using simdnorm::stats_stage;
using simdnorm::tensor_desc;

constexpr std::size_t kPiece = 16384;  // the library's row piece (src/tuning.hpp)

int rank = 0, ranks = 1;
MPI_Datatype record_type;
unsigned long failed = 0;

void expect(const std::string& what, const test::failures& bad) {
  if (bad.none()) return;
  ++failed;
  std::fprintf(stderr, "rank %d: FAILED %s: %s\n", rank, what.c_str(), bad.report().c_str());
}

void require_ok(const simdnorm::status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, s.message());
  MPI_Abort(MPI_COMM_WORLD, 2);
}

// FNV-1a of bytes, chained.
std::uint64_t fnv(const void* p, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// Rank 0 prints every rank's digest of a case, in rank order.
void print_digest(const std::string& what, std::uint64_t mine) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks));
  MPI_Gather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  std::printf("digest %s:", what.c_str());
  for (std::uint64_t h : all) std::printf(" %016" PRIx64, h);
  std::printf("\n");
}

// Moments records of every rank, gathered in rank order and merged: the global statistics.
std::vector<moments> allgather_merge(const std::vector<moments>& local) {
  std::vector<moments> parts(local.size() * std::size_t(ranks)), merged(local.size());
  MPI_Allgather(local.data(), int(local.size()), record_type, parts.data(), int(local.size()),
                record_type, MPI_COMM_WORLD);
  require_ok(simdnorm::merge_moments(parts.data(), std::size_t(ranks), local.size(), merged.data()),
             "merge_moments");
  return merged;
}

// Max over ranks of a double.
double max_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

// The checks of one case, named; `worst` is this rank's max |y - single| / (2 bound).
struct case_checks {
  test::failures threads, agree, bound, versus, bitwise;
  double worst = 0;
  // Counts the failed checks, prints the worst ratio over the ranks and the digest (rank 0).
  void finish(const std::string& what, const char* agree_what, bool claims_bitwise,
              std::uint64_t digest) {
    expect(what + ": 3 threads as 1", threads);
    expect(what + ": " + agree_what, agree);
    expect(what + ": float64 bound", bound);
    expect(what + ": single process within 2x the bound", versus);
    expect(what + ": bitwise the single process", bitwise);
    const double w = max_over_ranks(worst);
    if (rank == 0)
      std::printf("%-44s max |y - single| = %.3f of 2x bound%s\n", what.c_str(), w,
                  claims_bitwise ? ", bitwise" : "");
    print_digest(what, digest);
  }
};

// ---- tensor-parallel LayerNorm / RMSNorm ---------------------------------------------------

enum class row_op { layer_norm, rms_norm };

simdnorm::status make_row_plan(row_op op, std::size_t rows, std::size_t cols, stats_stage stage,
                               simdnorm::plan* p) {
  const tensor_desc d = tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  if (op == row_op::layer_norm) {
    simdnorm::layer_norm_params prm;
    prm.stage = stage;
    return simdnorm::plan::layer_norm(d, d, prm, p);
  }
  simdnorm::rms_norm_params prm;
  prm.stage = stage;
  return simdnorm::plan::rms_norm(d, d, prm, p);
}

// Column cuts of the ranks: `even` spreads D / ranks with the remainder on the first ranks;
// `pieces` gives each rank after the first one piece of the row from its end (the last may
// be the row's shorter tail) and rank 0 the rest: shards on the library's piece boundaries.
std::vector<std::size_t> column_cuts(std::size_t D, bool pieces) {
  std::vector<std::size_t> cuts(std::size_t(ranks) + 1);
  const std::size_t P = std::size_t(ranks);
  if (!pieces) {
    for (std::size_t r = 0; r <= P; ++r) cuts[r] = r * (D / P) + std::min(r, D % P);
    return cuts;
  }
  const std::size_t num_pieces = (D + kPiece - 1) / kPiece;
  cuts[P] = D;
  for (std::size_t r = 1; r < P; ++r) cuts[r] = (num_pieces - (P - r)) * kPiece;
  return cuts;
}

struct row_case {
  std::size_t rows, cols;
  bool on_pieces;
};

// One op on this rank's shard of the columns: moments, allgather + merge, apply on `exec`.
std::vector<float> sharded(row_op op, const std::vector<float>& x, const std::vector<float>& g,
                           const std::vector<float>& b, std::size_t rows, std::size_t n,
                           simdnorm::executor* exec, std::vector<moments>* merged) {
  simdnorm::plan pm, pa;
  require_ok(make_row_plan(op, rows, n, stats_stage::moments, &pm), "moments plan");
  require_ok(make_row_plan(op, rows, n, stats_stage::apply, &pa), "apply plan");
  std::vector<moments> local(rows);
  simdnorm::norm_args a;
  a.x = x.data();
  a.moments_out = local.data();
  require_ok(pm.execute(a, exec), "moments");
  *merged = allgather_merge(local);
  std::vector<float> y(rows * n, 7.25f);
  simdnorm::norm_args c;
  c.x = x.data();
  c.y = y.data();
  c.gamma = g.data();
  c.beta = op == row_op::layer_norm ? b.data() : nullptr;
  c.moments_in = merged->data();
  require_ok(pa.execute(c, exec), "apply");
  return y;
}

void row_case_run(row_op op, const row_case& rc, simdnorm::isa active) {
  const std::string what = std::string(op == row_op::layer_norm ? "layer_norm" : "rms_norm") + " " +
                           simdnorm::isa_name(active) + " " + std::to_string(rc.rows) + "x" +
                           std::to_string(rc.cols) + (rc.on_pieces ? " on pieces" : "");
  const std::size_t R = rc.rows, D = rc.cols;
  std::vector<float> x(R * D), g(D), b(D);
  test::fill_normal(x.data(), x.size(), std::uint32_t(D), op == row_op::layer_norm ? 3.0 : 0.0,
                    2.0);
  test::fill_normal(g.data(), D, 4, 1.0, 0.5);
  test::fill_normal(b.data(), D, 5, 0.0, 1.0);

  // The single-process one-call result of the whole tensor.
  std::vector<float> single(R * D);
  {
    simdnorm::plan p;
    require_ok(make_row_plan(op, R, D, stats_stage::full, &p), "full plan");
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = single.data();
    a.gamma = g.data();
    a.beta = op == row_op::layer_norm ? b.data() : nullptr;
    require_ok(p.execute(a, &simdnorm::serial_executor()), "full");
  }

  // The moments of the whole rows in one process: one part, the library's fold of its pieces.
  std::vector<moments> whole(R);
  {
    simdnorm::plan p;
    require_ok(make_row_plan(op, R, D, stats_stage::moments, &p), "whole moments plan");
    simdnorm::norm_args a;
    a.x = x.data();
    a.moments_out = whole.data();
    require_ok(p.execute(a, &simdnorm::serial_executor()), "whole moments");
  }

  // This rank's shard, dense, as tensor parallelism holds it.
  const std::vector<std::size_t> cuts = column_cuts(D, rc.on_pieces);
  const std::size_t c0 = cuts[std::size_t(rank)], n = cuts[std::size_t(rank) + 1] - c0;
  std::vector<float> xs(R * n), gs(g.begin() + long(c0), g.begin() + long(c0 + n)),
      bs(b.begin() + long(c0), b.begin() + long(c0 + n));
  for (std::size_t r = 0; r < R; ++r) std::copy_n(&x[r * D + c0], n, &xs[r * n]);
  std::vector<moments> merged, merged3;
  const std::vector<float> y = sharded(op, xs, gs, bs, R, n, &simdnorm::serial_executor(), &merged);
  test::chunked_thread_executor three(3);
  const std::vector<float> y3 = sharded(op, xs, gs, bs, R, n, &three, &merged3);

  case_checks ck;
  ck.threads.expect(y == y3, [] { return "3 threads differ from 1"; });
  ck.agree.expect(std::memcmp(merged.data(), merged3.data(), R * sizeof(moments)) == 0 &&
                      std::all_of(merged.begin(), merged.end(),
                                  [&](const moments& m) { return m.count == std::int64_t(D); }),
                  [] { return "merged records"; });
  if (ranks == 1 || rc.on_pieces)  // the merge in rank order is that fold, bit for bit
    ck.bitwise.expect(std::memcmp(merged.data(), whole.data(), R * sizeof(moments)) == 0,
                      [] { return "merged records differ from the whole rows' moments"; });
  const double depth = ref::accumulation_depth(D, test::lanes(active));
  std::vector<double> yr(D);
  for (std::size_t r = 0; r < R; ++r) {
    const float* xr = &x[r * D];
    ref::row_stats st{};
    double scale = 0, s = 0, sigma = 1;
    if (op == row_op::layer_norm) {
      ref::layer_norm_row(xr, D, g.data(), b.data(), 1e-5, yr.data(), &st);
      sigma = std::sqrt(st.var + 1e-5);
      for (std::size_t i = 0; i < D; ++i) s = std::max(s, 2 * std::fabs(xr[i] - st.mean) / sigma);
    } else {
      scale = ref::rms_rstd(xr, D, 1e-6);
      for (std::size_t i = 0; i < D; ++i) yr[i] = xr[i] * scale * g[i];
    }
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t i = c0 + j;
      const double tol =
          op == row_op::layer_norm
              ? ref::layer_norm_bound(depth, (xr[i] - st.mean) / sigma, s, g[i], b[i], yr[i])
              : (depth + 4) * ref::u32 * std::fabs(yr[i]) + 1e-30;
      const float got = y[r * n + j], want = single[r * D + i];
      const auto where = [&] {
        return "row " + std::to_string(r) + " col " + std::to_string(i) + ": got " +
               std::to_string(got) + " single process " + std::to_string(want) + " float64 " +
               std::to_string(yr[i]);
      };
      ck.bound.expect(std::fabs(got - yr[i]) <= tol, where);
      ck.versus.expect(std::fabs(got - want) <= 2 * tol, where);
      ck.worst = std::max(ck.worst, std::fabs(double(got) - want) / (2 * tol));
      if (ranks == 1 || rc.on_pieces) ck.bitwise.expect(test::bitwise_equal(&got, &want, 1), where);
    }
  }
  ck.finish(what, "merged records", ranks == 1 || rc.on_pieces,
            fnv(merged.data(), merged.size() * sizeof(moments), fnv(y.data(), y.size() * 4)));
}

// ---- SyncBatchNorm -------------------------------------------------------------------------

struct bn_case {
  simdnorm::channel_layout layout;
  std::size_t N, C, S;
};

struct bn_out {
  std::vector<float> y, mean, rstd, running_mean, running_var;
  std::int64_t batches = 3;
  bn_out(std::size_t values, std::size_t C)
      : y(values, 7.25f), mean(C), rstd(C), running_mean(C, 0.5f), running_var(C, 2.f) {}
  simdnorm::batch_norm_args args(const float* x, const std::vector<float>& g,
                                 const std::vector<float>& b) {
    simdnorm::batch_norm_args a;
    a.x = x;
    a.y = y.data();
    a.gamma = g.data();
    a.beta = b.data();
    a.mean = mean.data();
    a.rstd = rstd.data();
    a.running_mean = running_mean.data();
    a.running_var = running_var.data();
    a.num_batches_tracked = &batches;
    return a;
  }
  std::vector<float> state() const {  // what must agree across ranks
    std::vector<float> s = mean;
    for (const auto* v : {&rstd, &running_mean, &running_var})
      s.insert(s.end(), v->begin(), v->end());
    s.push_back(float(batches));
    return s;
  }
};

tensor_desc bn_desc(const bn_case& bc, std::size_t n) {
  return bc.layout == simdnorm::channel_layout::nchw
             ? tensor_desc::contiguous({std::int64_t(n), std::int64_t(bc.C), std::int64_t(bc.S)})
             : tensor_desc::contiguous({std::int64_t(n), std::int64_t(bc.S), std::int64_t(bc.C)});
}

// SyncBatchNorm of this rank's `n` samples at xs: moments, allgather + merge, apply on `exec`.
bn_out sync_batch_norm(const bn_case& bc, const float* xs, std::size_t n,
                       const std::vector<float>& g, const std::vector<float>& b,
                       simdnorm::executor* exec) {
  simdnorm::batch_norm_params prm;
  prm.layout = bc.layout;
  prm.training = true;
  simdnorm::plan pm, pa;
  prm.stage = stats_stage::moments;
  require_ok(simdnorm::plan::batch_norm(bn_desc(bc, n), bn_desc(bc, n), prm, &pm),
             "bn moments plan");
  prm.stage = stats_stage::apply;
  require_ok(simdnorm::plan::batch_norm(bn_desc(bc, n), bn_desc(bc, n), prm, &pa), "bn apply plan");
  std::vector<moments> local(bc.C);
  simdnorm::norm_args a;
  a.x = xs;
  a.moments_out = local.data();
  require_ok(pm.execute(a, exec), "bn moments");
  const std::vector<moments> merged = allgather_merge(local);
  bn_out out(n * bc.C * bc.S, bc.C);
  simdnorm::batch_norm_args c = out.args(xs, g, b);
  c.moments_in = merged.data();
  require_ok(pa.execute(c, exec), "bn apply");
  return out;
}

void bn_case_run(const bn_case& bc, simdnorm::isa active) {
  using simdnorm::channel_layout;
  const std::size_t N = bc.N, C = bc.C, S = bc.S;
  const std::string what = std::string("sync_batch_norm ") +
                           (bc.layout == channel_layout::nchw ? "nchw " : "nhwc ") +
                           simdnorm::isa_name(active) + " N=" + std::to_string(N) +
                           " C=" + std::to_string(C) + " S=" + std::to_string(S);
  std::vector<float> x_nchw(N * C * S), g(C), b(C);
  test::fill_normal(x_nchw.data(), x_nchw.size(), std::uint32_t(C * S), 1.5, 2.0);
  test::fill_normal(g.data(), C, 4, 1.0, 0.3);
  test::fill_normal(b.data(), C, 5, 0.0, 1.0);
  const std::vector<float> x =
      bc.layout == channel_layout::nchw ? x_nchw : chref::to_nhwc(x_nchw.data(), N, C, S);

  // The single-process one-call training forward of the whole batch.
  bn_out single(x.size(), C);
  {
    simdnorm::batch_norm_params prm;
    prm.layout = bc.layout;
    prm.training = true;
    require_ok(simdnorm::batch_norm(bn_desc(bc, N), bn_desc(bc, N), prm,
                                    single.args(x.data(), g, b), &simdnorm::serial_executor()),
               "bn one call");
  }

  // This rank's samples [n0, n1): the first N % ranks ranks take one more.
  const std::size_t P = std::size_t(ranks), r = std::size_t(rank);
  const std::size_t n0 = r * (N / P) + std::min(r, N % P), n = N / P + (r < N % P ? 1 : 0);
  const float* xs = &x[n0 * C * S];
  const bn_out out = sync_batch_norm(bc, xs, n, g, b, &simdnorm::serial_executor());
  test::chunked_thread_executor three(3);
  const bn_out out3 = sync_batch_norm(bc, xs, n, g, b, &three);

  case_checks ck;
  ck.threads.expect(out.y == out3.y && out.state() == out3.state(),
                    [] { return "3 threads differ from 1"; });
  std::vector<float> state = out.state(), state0 = state;
  MPI_Bcast(state0.data(), int(state0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  ck.agree.expect(test::bitwise_equal(state.data(), state0.data(), state.size()),
                  [] { return "mean, rstd, running statistics or counter differ from rank 0's"; });
  if (ranks == 1)
    ck.bitwise.expect(out.y == single.y && out.state() == single.state(),
                      [] { return "y or the statistics differ from one call"; });

  const double d = chref::depth(N * S, test::lanes(active), S);
  for (std::size_t c = 0; c < C; ++c) {
    const chref::unit_ref st = chref::stats(chref::channel_values(x_nchw.data(), N, C, S, c));
    const double rstd = 1.0 / std::sqrt(st.var + 1e-5), cnt = double(N * S);
    const double rm = 0.9 * 0.5 + 0.1 * st.mean, rv = 0.9 * 2.0 + 0.1 * st.var * cnt / (cnt - 1);
    const double tol_rm = 0.1 * chref::mean_bound(d, st) + 2 * ref::u32 * std::fabs(rm);
    const double tol_rv = (0.1 * chref::var_rel_bound(d) + 2 * ref::u32) * std::fabs(rv);
    const auto channel = [&] { return "channel " + std::to_string(c); };
    ck.bound.expect(std::fabs(out.mean[c] - st.mean) <= chref::mean_bound(d, st) &&
                        std::fabs(out.running_mean[c] - rm) <= tol_rm &&
                        std::fabs(out.running_var[c] - rv) <= tol_rv,
                    channel);
    ck.versus.expect(std::fabs(out.running_mean[c] - single.running_mean[c]) <= 2 * tol_rm &&
                         std::fabs(out.running_var[c] - single.running_var[c]) <= 2 * tol_rv,
                     channel);
    for (std::size_t i = 0; i < n * S; ++i) {  // this rank's values of channel c
      const std::size_t nn = n0 + i / S, s = i % S;
      const std::size_t at =
          bc.layout == channel_layout::nchw ? (nn * C + c) * S + s : (nn * S + s) * C + c;
      const double xv = x[at], want = (xv - st.mean) * rstd * g[c] + b[c];
      const double tol = chref::centered_bound(d, st, 1e-5, xv, g[c], b[c], want);
      const float got = out.y[at - n0 * C * S];
      const auto where = [&] {
        return "channel " + std::to_string(c) + " value " + std::to_string(at) + ": got " +
               std::to_string(got) + " single process " + std::to_string(single.y[at]) +
               " float64 " + std::to_string(want);
      };
      ck.bound.expect(std::fabs(got - want) <= tol, where);
      ck.versus.expect(std::fabs(got - single.y[at]) <= 2 * tol, where);
      ck.worst = std::max(ck.worst, std::fabs(double(got) - single.y[at]) / (2 * tol));
    }
  }
  ck.finish(what, "the same state on every rank", ranks == 1,
            fnv(state.data(), state.size() * 4, fnv(out.y.data(), out.y.size() * 4)));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  static_assert(sizeof(moments) == 32, "moments travel as 32 bytes");
  MPI_Type_contiguous(int(sizeof(moments)), MPI_BYTE, &record_type);
  MPI_Type_commit(&record_type);

  // Shards of unequal lengths (D = 1000: 334 + 333 + 333 on 3 ranks), short (<= 2 chunks) and
  // long rows (pieces), and long rows cut on piece boundaries (5 pieces, the last of 100).
  const row_case row_cases[] = {
      {5, 700, false}, {4, 1000, false}, {3, 2 * kPiece + 77, false}, {3, 4 * kPiece + 100, true}};
  using simdnorm::channel_layout;
  // fused planes, split planes (few channels of many values), short planes; NHWC: columns
  const bn_case bn_cases[] = {
      {channel_layout::nchw, 7, 5, 63},   {channel_layout::nchw, 8, 3, 2500},
      {channel_layout::nchw, 7, 24, 1},   {channel_layout::nhwc, 7, 5, 63},
      {channel_layout::nhwc, 8, 3, 2500}, {channel_layout::nhwc, 7, 24, 1}};
  // Every rank forces the same ISA in turn (quick mode: the selected one only).
  const std::vector<simdnorm::isa> isas =
      test::quick() ? std::vector<simdnorm::isa>{simdnorm::active_isa()} : test::runnable_isas();
  for (simdnorm::isa active : isas) {
    const test::forced_isa guard(active);
    require_ok(guard.status(), "force_isa");
    for (row_op op : {row_op::layer_norm, row_op::rms_norm})
      for (const row_case& rc : row_cases)
        if (!rc.on_pieces || (rc.cols + kPiece - 1) / kPiece >= std::size_t(ranks))
          row_case_run(op, rc, active);
    for (const bn_case& bc : bn_cases) bn_case_run(bc, active);
  }

  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%s: %lu failed checks on %d ranks\n", failed ? "FAILED" : "passed", failed, ranks);
  MPI_Type_free(&record_type);
  MPI_Finalize();
  return failed ? 1 : 0;
}
