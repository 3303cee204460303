// Shared benchmark machinery: buffers, the in-run copy limit, thread arenas, ISA selection.
//
// Every benchmark reports
//   bytes_per_second  x read once plus y written once (the algorithmic minimum traffic),
//   copy_GBps         the best of three copies of the same bytes (ordinary-store copy,
//                     non-temporal-store copy, memcpy) from x to y, at the same thread count,
//                     timed in the same benchmark run, interleaved with the op,
//   ratio             op bandwidth / copy bandwidth (medians of both),
//   runq_wait         cores' worth of time this process's threads waited for a CPU during
//                     the repetition (Linux schedstat): > 0.05 or so means the machine was
//                     busy with something else and the repetition is suspect,
// so results are comparable across machines and robust to a noisy shared host.
#pragma once
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "simdnorm/simdnorm.hpp"

namespace bench {

/// A 2 MiB-aligned float buffer of at least `floats` elements, written once (so its pages are
/// mapped) and cached by (slot, size): benchmarks of one size share it.
float* shared_buffer(std::size_t floats, int slot);

/// Fills `n` floats with N(mean, 1) data (deterministic).
void fill_normal(float* p, std::size_t n, double mean = 0.0);

/// Fills `n` elements of type t at p with fill_normal's values rounded into t; false (and the
/// benchmark skipped with the message) when the conversion fails.
bool fill_normal_as(benchmark::State& state, simdnorm::dtype t, void* p, std::size_t n,
                    double mean = 0.0);

/// ISAs to benchmark: the best runnable one, or all runnable ones when the command line had
/// --simdnorm_isas=all (parsed by parse_flags).
const std::vector<simdnorm::isa>& isas();

/// Thread counts to benchmark (--simdnorm_threads=1,2; default 1 and 2).
const std::vector<int>& thread_counts();

/// Few rows of a row op (benchmarks named few_rows/...): LLM decode, 1 to 8 tokens of hidden
/// 4096 to 16384 (latency, in cache), and single rows of 1M and 4M elements (a LayerNorm over
/// a whole image), which the plan spreads over the threads piece by piece.
struct rows_cols {
  std::size_t rows, cols;
};
inline constexpr rows_cols kFewRows[] = {
    {1, 4096},  {2, 4096},  {4, 4096},  {8, 4096},   {1, 16384},   {2, 16384},  {4, 16384},
    {8, 16384}, {2, 65536}, {8, 65536}, {32, 65536}, {1, 1 << 20}, {1, 4 << 20}};

/// The store policy every simdnorm plan is made with
/// (--simdnorm_stores=automatic|regular|streaming; default automatic).
simdnorm::store_policy stores();

/// Consumes the simdnorm-specific flags from argv before benchmark::Initialize sees them.
void parse_flags(int* argc, char** argv);

/// Runs `op()` as the timed body (manual time, medians) inside a task arena of `threads`
/// threads, interleaving copies of `copy_floats` floats from `src` to `dst`, and sets the
/// counters described above. `bytes` is the traffic the op is credited with per call.
template <class Op>
void measure(benchmark::State& state, int threads, std::size_t bytes, const float* src, float* dst,
             std::size_t copy_floats, Op op);

// Implementation detail of measure(): type-erased.
using op_fn = void (*)(void* ctx);
void measure_erased(benchmark::State& state, int threads, std::size_t bytes, const float* src,
                    float* dst, std::size_t copy_floats, op_fn op, void* ctx);

/// A thread runtime other than oneTBB for the interleaved copies: `fork(threads, fn, ctx)` calls
/// fn(ctx, t) once for every t in [0, threads), concurrently, and returns when all returned.
/// For ops that run on their own pool (the OpenMP-based peers in bench/peers/): op and copy
/// then run on the same threads. Mixing two spinning pools on a machine with few cores makes
/// each wait for the other's time slice (oneDNN at 2 threads on 2 cores: 0.27 instead of 60 GB/s).
/// Same copies, partition and counters as measure(); null `fork` is measure() itself.
using fork_fn = void (*)(int threads, void (*fn)(void* ctx, int t), void* ctx);
void measure_erased_on(fork_fn fork, benchmark::State& state, int threads, std::size_t bytes,
                       const float* src, float* dst, std::size_t copy_floats, op_fn op, void* ctx);

template <class Op>
void measure_on(fork_fn fork, benchmark::State& state, int threads, std::size_t bytes,
                const float* src, float* dst, std::size_t copy_floats, Op op) {
  measure_erased_on(
      fork, state, threads, bytes, src, dst, copy_floats, [](void* c) { (*static_cast<Op*>(c))(); },
      &op);
}

template <class Op>
void measure(benchmark::State& state, int threads, std::size_t bytes, const float* src, float* dst,
             std::size_t copy_floats, Op op) {
  measure_erased(
      state, threads, bytes, src, dst, copy_floats, [](void* c) { (*static_cast<Op*>(c))(); }, &op);
}

/// Aborts the benchmark with the status message when `s` is an error.
inline bool check(benchmark::State& state, const simdnorm::status& s) {
  if (!s) state.SkipWithError(s.message());
  return s.ok();
}

}  // namespace bench
