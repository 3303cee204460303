// SyncBatchNorm over MPI: BatchNorm training forward with the batch split across ranks (data
// parallelism), normalized with the statistics of the whole batch, as PyTorch's
// nn.SyncBatchNorm does. Per training step:
//   1. each rank computes per-channel moments of its samples    (stats_stage::moments)
//   2. one MPI_Allgather of the C records of 32 bytes           (rank order: parts[r * C + c])
//   3. every rank merges them in rank order                     (simdnorm::merge_moments)
//   4. each rank normalizes its samples with the merged moments (stats_stage::apply), which
//      also updates its running statistics with the merged count (the unbiased variance of
//      the whole batch) and its batch counter.
// Every rank applies the same merged records, so the running statistics stay bitwise the same
// on every rank without any further communication: the example checks that, and rank 0
// compares the gathered outputs and the running state with a single-process training forward
// of the whole batch (docs/distributed.md).
//   mpiexec -n 3 ./example_mpi_sync_batch_norm
#include <mpi.h>
#include <simdnorm/simdnorm.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

const std::int64_t N = 10, C = 16, H = 7, W = 7, HW = H * W, steps = 3;

// The whole batch of step `step` (seeded, the same on every rank): conv outputs with a
// per-channel offset. Each rank keeps only its samples.
std::vector<float> batch(std::int64_t step) {
  std::vector<float> x(std::size_t(N * C * HW));
  std::mt19937 rng(std::uint32_t(100 + step));
  std::normal_distribution<float> dist(0.f, 2.f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = dist(rng) + float(i / HW % C) * 0.5f;
  return x;
}

// Samples [begin, end) of rank r: the first N % ranks ranks take one more.
struct part {
  std::int64_t begin, end;
  part(int r, int ranks) {
    const std::int64_t base = N / ranks, extra = N % ranks;
    begin = r * base + (r < extra ? r : extra);
    end = begin + base + (r < extra ? 1 : 0);
  }
  std::int64_t samples() const { return end - begin; }
};

// Learned and running state of the layer (one copy per rank).
struct bn_state {
  std::vector<float> gamma, beta, running_mean, running_var, saved_mean, saved_rstd;
  std::int64_t batches = 0;
  bn_state()
      : gamma(C), beta(C), running_mean(C, 0.f), running_var(C, 1.f), saved_mean(C), saved_rstd(C) {
    for (std::int64_t c = 0; c < C; ++c)
      gamma[c] = 1.f + 0.01f * float(c), beta[c] = -0.1f * float(c % 3);
  }
  simdnorm::batch_norm_args args(const float* x, float* y) {
    simdnorm::batch_norm_args a;
    a.x = x;
    a.y = y;
    a.gamma = gamma.data();
    a.beta = beta.data();
    a.mean = saved_mean.data();  // saved for the backward pass
    a.rstd = saved_rstd.data();
    a.running_mean = running_mean.data();
    a.running_var = running_var.data();
    a.num_batches_tracked = &batches;
    return a;
  }
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(double(a[i]) - double(b[i]));
    if (!(e <= err)) err = e;  // NaN counts as an error
  }
  return err;
}

// On error: say what failed and end every rank (a real engine would report it upwards).
void check(const simdnorm::status& s, const char* what) {
  if (!s) std::fprintf(stderr, "%s: %s\n", what, s.message()), MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks > N) {
    if (rank == 0) std::fprintf(stderr, "mpi_sync_batch_norm: at most %lld ranks\n", (long long)N);
    MPI_Finalize();
    return 1;
  }
  static_assert(sizeof(simdnorm::moments) == 32, "simdnorm::moments is a 32-byte record");
  MPI_Datatype record;
  MPI_Type_contiguous(int(sizeof(simdnorm::moments)), MPI_BYTE, &record);
  MPI_Type_commit(&record);

  // Two plans for this rank's part of the batch, made once: its moments, and the apply.
  const part mine(rank, ranks);
  const std::int64_t values = mine.samples() * C * HW;
  const auto desc = simdnorm::tensor_desc::contiguous({mine.samples(), C, H, W});
  simdnorm::batch_norm_params params;
  params.training = true;  // PyTorch convention, momentum 0.1 (the defaults)
  simdnorm::plan moments_plan, apply_plan;
  params.stage = simdnorm::stats_stage::moments;
  check(simdnorm::plan::batch_norm(desc, desc, params, &moments_plan), "moments plan");
  params.stage = simdnorm::stats_stage::apply;
  check(simdnorm::plan::batch_norm(desc, desc, params, &apply_plan), "apply plan");

  bn_state state;
  std::vector<float> y(static_cast<std::size_t>(values));
  std::vector<simdnorm::moments> local(C), gathered(std::size_t(C * ranks)), merged(C);
  std::vector<float> x;
  for (std::int64_t step = 0; step < steps; ++step) {
    x = batch(step);
    const float* xs = &x[std::size_t(mine.begin * C * HW)];  // this rank's samples
    simdnorm::norm_args a;
    a.x = xs;
    a.moments_out = local.data();
    check(moments_plan.execute(a), "moments");
    MPI_Allgather(local.data(), int(C), record, gathered.data(), int(C), record, MPI_COMM_WORLD);
    check(
        simdnorm::merge_moments(gathered.data(), std::size_t(ranks), std::size_t(C), merged.data()),
        "merge_moments");
    simdnorm::batch_norm_args b = state.args(xs, y.data());
    b.moments_in = merged.data();
    check(apply_plan.execute(b), "apply");
  }

  // Check 1: every rank holds the same running state, bit for bit (compared with rank 0's).
  std::vector<float> mine_state = state.running_mean;
  mine_state.insert(mine_state.end(), state.running_var.begin(), state.running_var.end());
  mine_state.push_back(float(state.batches));
  std::vector<float> rank0_state = mine_state;
  MPI_Bcast(rank0_state.data(), int(rank0_state.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same =
      std::memcmp(mine_state.data(), rank0_state.data(), mine_state.size() * sizeof(float)) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

  // Check 2: the last step's outputs, gathered on rank 0, and the running state against a
  // single-process training forward of the whole batch, step by step.
  std::vector<int> counts(static_cast<std::size_t>(ranks)), offsets(counts.size());
  for (int r = 0; r < ranks; ++r) {
    counts[std::size_t(r)] = int(part(r, ranks).samples() * C * HW);
    offsets[std::size_t(r)] = int(part(r, ranks).begin * C * HW);
  }
  std::vector<float> y_all(rank == 0 ? x.size() : 0);
  MPI_Gatherv(y.data(), int(y.size()), MPI_FLOAT, y_all.data(), counts.data(), offsets.data(),
              MPI_FLOAT, 0, MPI_COMM_WORLD);
  int ok = same;
  if (rank == 0) {
    const auto whole = simdnorm::tensor_desc::contiguous({N, C, H, W});
    simdnorm::batch_norm_params one_call;
    one_call.training = true;
    bn_state single;
    std::vector<float> y_single(x.size());
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::vector<float> xb = batch(step);
      check(simdnorm::batch_norm(whole, whole, one_call, single.args(xb.data(), y_single.data())),
            "single-process batch_norm");
    }
    const double err_y = max_abs_diff(y_all, y_single);
    const double err_rm = max_abs_diff(state.running_mean, single.running_mean);
    const double err_rv = max_abs_diff(state.running_var, single.running_var);
    const bool bitwise = err_y == 0 && err_rm == 0 && err_rv == 0;
    // Outputs and statistics are O(1)-O(10): the split moves them by a few float roundings.
    ok &= err_y <= 1e-5 && err_rm <= 1e-5 && err_rv <= 1e-5 && single.batches == state.batches &&
          (ranks > 1 || bitwise);
    std::printf(
        "mpi_sync_batch_norm: [%lld, %lld, %lld, %lld] split over %d ranks (%lld..%lld samples "
        "each), %lld steps; running state %s on every rank; vs single process: max |y| diff "
        "%.3g, running_mean %.3g, running_var %.3g%s %s\n",
        static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(H),
        static_cast<long long>(W), ranks, static_cast<long long>(part(ranks - 1, ranks).samples()),
        static_cast<long long>(part(0, ranks).samples()), static_cast<long long>(steps),
        same ? "bitwise the same" : "DIFFERENT", err_y, err_rm, err_rv, bitwise ? " (bitwise)" : "",
        ok ? "ok" : "WRONG");
  }
  MPI_Type_free(&record);
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return ok ? 0 : 1;
}
