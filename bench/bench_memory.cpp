// simdnorm_memory_bench: what one core's memory system gives a kernel that reads x and writes y
// beyond the caches, depending on how the reads and the writes are ordered. It is the
// measurement behind the ceiling of BatchNorm training over NCHW beyond cache
// (docs/performance.md, "The two passes in one walk, and what the memory allows"): that plan
// reads a channel for its statistics, then normalizes it from the last-level cache, so its
// DRAM reads and its non-temporal writes come in separate phases, as in `phases` here.
//
//   simdnorm_memory_bench [--benchmark_repetitions=7] [Google Benchmark flags]
//
// One thread, 256 MiB of x and of y (float), y written with non-temporal stores (as the
// library's automatic stores beyond cache); times per pass over the 256 MiB, to be compared
// with `copy` of the same run. The probes:
//   read                 sum of x (four accumulators)
//   write                y = constant
//   copy                 y = x * 1, one read and one write in one loop
//   phases/slice:S       slices of S floats: read a slice of x, then write a slice of y
//   one_loop/lag:L       one loop that reads x[i] and writes y[i - L] = x[i - L] * c, the
//                        second read hitting the cache (L floats behind): the fused statistics
//                        and normalize of a pipelined kernel
// Each probe runs with 16-byte (SSE2) and, where the CPU has them, 64-byte (AVX-512) loads
// and streaming stores, as memory/<width>/<probe>: the width changes what one core keeps in
// flight. x86 only.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

constexpr std::size_t kFloats = std::size_t(64) << 20;  // 256 MiB

struct buffers {
  float* x;
  float* y;
  buffers() {
    x = static_cast<float*>(std::aligned_alloc(64, kFloats * sizeof(float)));
    y = static_cast<float*>(std::aligned_alloc(64, kFloats * sizeof(float)));
    for (std::size_t i = 0; i < kFloats; ++i) x[i] = float(i % 1024), y[i] = 0.f;
  }
  ~buffers() {
    std::free(x);
    std::free(y);
  }
};

buffers& data() {
  static buffers b;  // one pair for every probe, touched before the first is timed
  return b;
}

// A width is its vector type (GCC's vector extension: +, *, [] and a scalar operand broadcast)
// and its streaming store.
namespace sse2 {
using vec = __m128;
inline void stream(float* p, vec v) { _mm_stream_ps(p, v); }
#include "bench_memory-inl.hpp"
}  // namespace sse2

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace avx512 {
using vec = __m512;
inline void stream(float* p, vec v) { _mm512_stream_ps(p, v); }
#include "bench_memory-inl.hpp"
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/// One width's probes (bench_memory-inl.hpp).
struct width {
  std::string name;
  float (*read)(const float*, std::size_t);
  void (*write)(float*, std::size_t, float);
  void (*scale)(const float*, float*, std::size_t, float);
  float (*phases)(const float*, float*, std::size_t, std::size_t);
  float (*one_loop)(const float*, float*, std::size_t, std::size_t);
};

template <class F>
void add_probe(const std::string& name, F f) {
  benchmark::RegisterBenchmark(name.c_str(), [f](benchmark::State& state) {
    buffers& b = data();
    float sink = 0.f;
    for (auto _ : state) {
      sink += f(b.x, b.y);
      _mm_sfence();  // the streaming stores are done
    }
    benchmark::DoNotOptimize(sink);
    state.SetBytesProcessed(std::int64_t(state.iterations() * kFloats * sizeof(float)));
  });
}

void add_probes(const width& w) {
  const std::string p = "memory/" + w.name + "/";
  add_probe(p + "read", [w](float* x, float*) { return w.read(x, kFloats); });
  add_probe(p + "write", [w](float*, float* y) { return w.write(y, kFloats, 1.f), 0.f; });
  add_probe(p + "copy", [w](float* x, float* y) { return w.scale(x, y, kFloats, 1.f), 0.f; });
  for (std::size_t n : {std::size_t(2048), std::size_t(16384), kFloats})
    add_probe(p + "phases/slice:" + std::to_string(n),
              [w, n](float* x, float* y) { return w.phases(x, y, kFloats, n); });
  for (std::size_t n : {std::size_t(1) << 16, std::size_t(1) << 20})
    add_probe(p + "one_loop/lag:" + std::to_string(n),
              [w, n](float* x, float* y) { return w.one_loop(x, y, kFloats, n); });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  add_probes({"sse2", sse2::read, sse2::write, sse2::scale, sse2::phases, sse2::one_loop});
  if (__builtin_cpu_supports("avx512f"))
    add_probes(
        {"avx512", avx512::read, avx512::write, avx512::scale, avx512::phases, avx512::one_loop});
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
