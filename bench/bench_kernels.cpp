// simdnorm_kernel_bench: the kernels alone, on one thread, with x and y resident in L1 or L2,
// in time-stamp-counter ticks per input vector of the ISA. It isolates the instruction cost
// that the bandwidth benchmark (simdnorm_bench) hides behind memory, and is the harness the
// experiments of docs/performance.md are measured with:
//
//   simdnorm_kernel_bench [--benchmark_filter=layer_norm/avx512bw] [Google Benchmark flags]
//
// Names: <op>/<isa>/D:<row length>/KiB:<bytes of x> (rows = KiB * 1024 / 4 / D). The ops:
// layer_norm, rms_norm, l2_norm (the whole op); layer_norm_moments and layer_norm_apply (its
// two passes alone, as split-statistics plans: the long-row statistics at every D); copy
// (memcpy of x to y, the same bytes: the roofline's reference, docs/performance.md); and
// core_clock, the core cycles per TSC tick, and core_throughput/{fma,load,store}/threads:{1,2},
// the core's AVX-512 FMAs, 64-byte L1 loads and stores per tick (x86), on one thread and on two
// at once (summed over both: each on its own registers and L1 buffer, nothing shared, so the
// ratio of the two is what a second thread can add to work that never leaves the core, the
// ceiling of a kernel's 1-to-2-thread scaling on this machine). Counters:
//   ticks_per_vector  TSC ticks per V::size input floats (x86 only; the TSC runs at a fixed
//                     rate, not the core clock, so compare within one machine)
//   ns_per_row        wall time per row
// Each call runs every task of the plan with plan::run on the calling thread: the row ops'
// kernels plus the plan's row-block walk (a few instructions per run of rows).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "simdnorm/simdnorm.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {

enum class op { layer_norm, layer_norm_moments, layer_norm_apply, rms_norm, l2_norm, copy };

std::uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

void bench_kernel(benchmark::State& state, op which, simdnorm::isa isa, std::size_t cols,
                  std::size_t x_bytes) {
  const std::size_t rows = std::max<std::size_t>(1, x_bytes / sizeof(float) / cols);
  std::vector<float> x(rows * cols), y(x.size()), g(cols), b(cols);
  std::mt19937 rng(1);
  std::normal_distribution<float> d(3.f, 1.f);
  for (float& v : x) v = d(rng);
  for (float& v : g) v = d(rng);
  for (float& v : b) v = d(rng);
  const auto desc = simdnorm::tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  const double vectors = double(rows * cols) / double(simdnorm::isa_lanes(isa));
  if (which == op::copy) {
    std::uint64_t total_ticks = 0;
    for (auto _ : state) {
      const std::uint64_t t0 = ticks();
      std::memcpy(y.data(), x.data(), x.size() * sizeof(float));
      total_ticks += ticks() - t0;
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
    state.counters["ticks_per_vector"] = double(total_ticks) / double(state.iterations()) / vectors;
    return;
  }
  if (!simdnorm::force_isa(isa)) return state.SkipWithError("ISA cannot run here");
  simdnorm::plan p;
  simdnorm::status s;
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = y.data();
  std::vector<simdnorm::moments> records(rows);
  if (which == op::layer_norm || which == op::layer_norm_moments || which == op::layer_norm_apply) {
    simdnorm::layer_norm_params prm;
    prm.stores = simdnorm::store_policy::regular;
    if (which == op::layer_norm_apply) {  // the records its moments plan writes
      prm.stage = simdnorm::stats_stage::moments;
      a.moments_out = records.data();
      if (!(s = simdnorm::plan::layer_norm(desc, desc, prm, &p)) || !(s = p.execute(a)))
        return state.SkipWithError(s.message());
      a.moments_out = nullptr;
      a.moments_in = records.data();
    }
    prm.stage = which == op::layer_norm           ? simdnorm::stats_stage::full
                : which == op::layer_norm_moments ? simdnorm::stats_stage::moments
                                                  : simdnorm::stats_stage::apply;
    if (which == op::layer_norm_moments) a.moments_out = records.data();
    s = simdnorm::plan::layer_norm(desc, desc, prm, &p);
    a.gamma = g.data();
    a.beta = b.data();
  } else if (which == op::rms_norm) {
    simdnorm::rms_norm_params prm;
    prm.stores = simdnorm::store_policy::regular;
    s = simdnorm::plan::rms_norm(desc, desc, prm, &p);
    a.gamma = g.data();
  } else {
    simdnorm::lp_norm_params prm;
    prm.stores = simdnorm::store_policy::regular;
    s = simdnorm::plan::lp_norm(desc, desc, prm, &p);
  }
  simdnorm::reset_isa();
  if (!s) return state.SkipWithError(s.message());
  const std::size_t tasks = p.num_tasks(0);
  std::uint64_t total_ticks = 0;
  for (auto _ : state) {
    const std::uint64_t t0 = ticks();
    s = p.run(a, 0, 0, tasks);
    total_ticks += ticks() - t0;
    benchmark::DoNotOptimize(y.data());
  }
  if (!s) return state.SkipWithError(s.message());
  const double calls = double(state.iterations());
  state.counters["ticks_per_vector"] = double(total_ticks) / calls / vectors;
  state.counters["ns_per_row"] = benchmark::Counter(
      calls * double(rows), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(std::int64_t(calls) * std::int64_t(2 * rows * cols * sizeof(float)));
}

/// Core cycles per TSC tick: a chain of dependent one-cycle integer adds, 64 per iteration, so
/// that the kernels' ticks per vector convert to core cycles (the TSC runs at a fixed rate,
/// the core at whatever clock it boosts to).
void bench_core_clock(benchmark::State& state) {
#if defined(__x86_64__)
  std::uint64_t v = 0, total_ticks = 0, adds = 0;
  for (auto _ : state) {
    const std::uint64_t t0 = ticks();
    for (int i = 0; i < 1024; ++i) {
      asm volatile(
          ".rept 64\n\t"
          "add $1, %0\n\t"
          ".endr"
          : "+r"(v));
    }
    total_ticks += ticks() - t0;
    adds += 64 * 1024;
  }
  benchmark::DoNotOptimize(v);
  state.counters["core_cycles_per_tick"] = double(adds) / double(total_ticks);
#else
  state.SkipWithError("x86-64 only (the TSC)");
#endif
}

#if defined(__x86_64__)
/// The core's AVX-512 throughput, per core cycle (core_clock converts): independent FMAs on
/// registers (12 chains, more than latency x pipes), and 64-byte loads and stores on a buffer
/// in L1. The roofline of docs/performance.md divides the kernels' operations by these. Run on
/// two threads, each has its own buffer and the counter is their sum.
__attribute__((target("avx512f"))) void bench_core_throughput(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512 here");
  const int which = int(state.range(0));     // 0: fma, 1: load, 2: store
  alignas(64) thread_local float buf[4096];  // 16 KiB: L1, one per thread
  __m512 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k));
  const __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(1e-3f);
  std::uint64_t total_ticks = 0, ops = 0;
  for (auto _ : state) {
    const std::uint64_t t0 = ticks();
    for (int rep = 0; rep < 64; ++rep) {
      if (which == 0) {
        for (int i = 0; i < 64; ++i)
          for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
        ops += 64 * 12;
      } else if (which == 1) {  // loads summed into the 12 accumulators
        for (int i = 0; i < 4096 - 192; i += 192)
          for (int k = 0; k < 12; ++k)
            acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(buf + i + 16 * k));
        ops += (4096 / 192) * 12;
      } else {
        const __m512 v = acc[rep % 12];
        for (int i = 0; i < 4096; i += 64) {
          _mm512_store_ps(buf + i, v);
          _mm512_store_ps(buf + i + 16, v);
          _mm512_store_ps(buf + i + 32, v);
          _mm512_store_ps(buf + i + 48, v);
        }
        ops += 4096 / 16;
      }
      benchmark::ClobberMemory();
    }
    total_ticks += ticks() - t0;
  }
  for (int k = 0; k < 12; ++k) benchmark::DoNotOptimize(acc[k]);
  state.counters["ops_per_tick"] = double(ops) / double(total_ticks);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("core_clock", bench_core_clock);
#if defined(__x86_64__)
  const char* const probes[] = {"core_throughput/fma", "core_throughput/load",
                                "core_throughput/store"};  // Arg 0, 1, 2
  for (int which = 0; which < 3; ++which)
    benchmark::RegisterBenchmark(probes[which], bench_core_throughput)
        ->Arg(which)
        ->Threads(1)
        ->Threads(2);
#endif
  const struct {
    op which;
    const char* name;
  } ops[] = {{op::layer_norm, "layer_norm"},
             {op::layer_norm_moments, "layer_norm_moments"},
             {op::layer_norm_apply, "layer_norm_apply"},
             {op::rms_norm, "rms_norm"},
             {op::l2_norm, "l2_norm"},
             {op::copy, "copy"}};
  const std::size_t cols_list[] = {64, 128, 200, 768, 1024, 4096, 16384};
  const std::size_t kib_list[] = {16, 256};  // x in L1 (with y: 32 KiB), x + y in L2
  std::size_t n = 0;
  const simdnorm::isa* isas = simdnorm::compiled_isas(&n);
  for (const auto& o : ops)
    for (std::size_t k = 0; k < n; ++k) {
      if (!simdnorm::cpu_supports(isas[k])) continue;
      for (std::size_t kib : kib_list)
        for (std::size_t cols : cols_list) {
          if (cols * sizeof(float) > kib * 1024) continue;
          const std::string name = std::string(o.name) + "/" + simdnorm::isa_name(isas[k]) +
                                   "/D:" + std::to_string(cols) + "/KiB:" + std::to_string(kib);
          benchmark::RegisterBenchmark(name.c_str(), bench_kernel, o.which, isas[k], cols,
                                       kib * 1024);
        }
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
