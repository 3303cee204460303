// Tensor-parallel LayerNorm and RMSNorm over MPI: the hidden dimension is sharded across ranks
// (each rank holds x[:, shard] and the matching slices of gamma and beta, as after a
// column-parallel linear layer), so no rank sees a whole row. Per batch of rows:
//   1. each rank computes the moments of its part of every row  (stats_stage::moments)
//   2. one MPI_Allgather of the 32-byte records                  (rank order: parts[r * rows + i])
//   3. every rank merges them in rank order                      (simdnorm::merge_moments)
//   4. each rank normalizes its shard with the merged moments    (stats_stage::apply)
// The shards need not be equal: hidden = 4099 is divisible by no rank count here.
//
// Rank 0 then gathers the shards and compares them with one single-process call on the whole
// tensor, regenerated from the same seed (docs/distributed.md: within the bound, and bitwise
// with one rank).
//   mpiexec -n 3 ./example_mpi_sharded_layer_norm
#include <mpi.h>
#include <simdnorm/simdnorm.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

const std::int64_t tokens = 48, hidden = 4099, rows_per_batch = 16;

// The whole activations, gamma and beta, the same on every rank (seeded): a stand-in for the
// previous layer. A real engine only ever has its own shard.
struct layer {
  std::vector<float> x, gamma, beta;
  layer() : x(std::size_t(tokens * hidden)), gamma(hidden), beta(hidden) {
    std::mt19937 rng(11);
    std::normal_distribution<float> act(0.5f, 3.f), w(1.f, 0.1f), b(0.f, 0.2f);
    for (float& v : x) v = act(rng);
    for (std::int64_t e = 0; e < hidden; ++e) gamma[e] = w(rng), beta[e] = b(rng);
  }
};

// Columns [begin, end) of rank r of `ranks`: the first hidden % ranks ranks take one more.
struct shard {
  std::int64_t begin, end;
  shard(int r, int ranks) {
    const std::int64_t base = hidden / ranks, extra = hidden % ranks;
    begin = r * base + (r < extra ? r : extra);
    end = begin + base + (r < extra ? 1 : 0);
  }
  std::int64_t cols() const { return end - begin; }
};

enum class op { layer_norm, rms_norm };

simdnorm::status make_plan(op which, std::int64_t rows, std::int64_t cols,
                           simdnorm::stats_stage stage, simdnorm::plan* out) {
  const auto d = simdnorm::tensor_desc::contiguous({rows, cols});
  if (which == op::layer_norm) {
    simdnorm::layer_norm_params p;
    p.stage = stage;
    return simdnorm::plan::layer_norm(d, d, p, out);
  }
  simdnorm::rms_norm_params p;
  p.stage = stage;
  return simdnorm::plan::rms_norm(d, d, p, out);
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

  // A moments record travels as 32 opaque bytes (every rank runs the same build).
  static_assert(sizeof(simdnorm::moments) == 32, "simdnorm::moments is a 32-byte record");
  MPI_Datatype record;
  MPI_Type_contiguous(int(sizeof(simdnorm::moments)), MPI_BYTE, &record);
  MPI_Type_commit(&record);

  const layer whole;
  const shard mine(rank, ranks);
  const std::int64_t n = mine.cols();
  // This rank's shard, dense: x[:, begin:end], gamma[begin:end], beta[begin:end].
  std::vector<float> x(std::size_t(tokens * n)), y(x.size());
  for (std::int64_t t = 0; t < tokens; ++t)
    std::memcpy(&x[std::size_t(t * n)], &whole.x[std::size_t(t * hidden + mine.begin)],
                std::size_t(n) * sizeof(float));
  const float* gamma = &whole.gamma[std::size_t(mine.begin)];
  const float* beta = &whole.beta[std::size_t(mine.begin)];

  bool ok = true;
  for (op which : {op::layer_norm, op::rms_norm}) {
    const char* name = which == op::layer_norm ? "layer_norm" : "rms_norm";
    // Plans for one batch of rows of the shard, made once.
    simdnorm::plan moments_plan, apply_plan;
    check(make_plan(which, rows_per_batch, n, simdnorm::stats_stage::moments, &moments_plan),
          "moments plan");
    check(make_plan(which, rows_per_batch, n, simdnorm::stats_stage::apply, &apply_plan),
          "apply plan");
    std::vector<simdnorm::moments> local(rows_per_batch), gathered(rows_per_batch * ranks),
        merged(rows_per_batch);

    for (std::int64_t t0 = 0; t0 < tokens; t0 += rows_per_batch) {
      simdnorm::norm_args a;
      a.x = &x[std::size_t(t0 * n)];
      a.moments_out = local.data();
      check(moments_plan.execute(a), "moments");
      // gathered[r * rows_per_batch + i] = rank r's record of row i: merge_moments's layout.
      MPI_Allgather(local.data(), int(rows_per_batch), record, gathered.data(), int(rows_per_batch),
                    record, MPI_COMM_WORLD);
      check(simdnorm::merge_moments(gathered.data(), std::size_t(ranks),
                                    std::size_t(rows_per_batch), merged.data()),
            "merge_moments");
      simdnorm::norm_args b;
      b.x = a.x;
      b.y = &y[std::size_t(t0 * n)];
      b.gamma = gamma;
      b.beta = which == op::layer_norm ? beta : nullptr;
      b.moments_in = merged.data();
      check(apply_plan.execute(b), "apply");
    }

    // Check: the shards, gathered on rank 0, against one call on the whole tensor.
    std::vector<int> counts(static_cast<std::size_t>(ranks)), offsets(counts.size());
    for (int r = 0; r < ranks; ++r) {
      counts[std::size_t(r)] = int(tokens * shard(r, ranks).cols());
      offsets[std::size_t(r)] = int(tokens * shard(r, ranks).begin);
    }
    std::vector<float> shards(rank == 0 ? whole.x.size() : 0);
    MPI_Gatherv(y.data(), int(y.size()), MPI_FLOAT, shards.data(), counts.data(), offsets.data(),
                MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const auto d = simdnorm::tensor_desc::contiguous({tokens, hidden});
      std::vector<float> single(whole.x.size());
      simdnorm::norm_args a;
      a.x = whole.x.data();
      a.y = single.data();
      a.gamma = whole.gamma.data();
      if (which == op::layer_norm) {
        a.beta = whole.beta.data();
        check(simdnorm::layer_norm(d, d, {}, a), "single-process layer_norm");
      } else {
        check(simdnorm::rms_norm(d, d, {}, a), "single-process rms_norm");
      }
      double err = 0;
      bool bitwise = true;
      for (int r = 0; r < ranks; ++r) {
        const shard s(r, ranks);
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t c = 0; c < s.cols(); ++c) {
            const float got = shards[std::size_t(tokens * s.begin + t * s.cols() + c)];
            const float want = single[std::size_t(t * hidden + s.begin + c)];
            const double e = std::fabs(double(got) - double(want));
            if (!(e <= err)) err = e;  // NaN counts as an error
            bitwise &= std::memcmp(&got, &want, sizeof got) == 0;
          }
      }
      // The outputs are O(10) here; the split moves them by a few float roundings.
      const bool good = err <= 1e-5 && (ranks > 1 || bitwise);
      std::printf(
          "mpi_sharded_layer_norm: %s, %lld x %lld over %d ranks (%lld..%lld columns each), "
          "%lld allgathers; max |y - single process| = %.3g%s %s\n",
          name, static_cast<long long>(tokens), static_cast<long long>(hidden), ranks,
          static_cast<long long>(shard(ranks - 1, ranks).cols()),
          static_cast<long long>(shard(0, ranks).cols()),
          static_cast<long long>(tokens / rows_per_batch), err, bitwise ? " (bitwise)" : "",
          good ? "ok" : "WRONG");
      ok &= good;
    }
  }
  MPI_Type_free(&record);
  int good = ok ? 1 : 0;
  MPI_Bcast(&good, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return good ? 0 : 1;
}
