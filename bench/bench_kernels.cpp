// simdnorm_kernel_bench: the kernels alone, on one thread, with x and y resident in L1 or L2,
// in time-stamp-counter ticks per input vector of the ISA. It isolates the instruction cost
// that the bandwidth benchmark (simdnorm_bench) hides behind memory, and is the harness the
// experiments of docs/performance.md are measured with:
//
//   simdnorm_kernel_bench [--benchmark_filter=layer_norm/avx512bw] [Google Benchmark flags]
//
// Names: <op>/<isa>/D:<row length>/KiB:<bytes of x> (rows = KiB * 1024 / 4 / D). Counters:
//   ticks_per_vector  TSC ticks per V::size input floats (x86 only; the TSC runs at a fixed
//                     rate, not the core clock, so compare within one machine)
//   ns_per_row        wall time per row
// Each call runs every task of the plan with plan::run on the calling thread: the row ops'
// kernels plus the plan's row-block walk (a few instructions per run of rows).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "simdnorm/simdnorm.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {

enum class op { layer_norm, rms_norm, l2_norm };

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
  if (!simdnorm::force_isa(isa)) return state.SkipWithError("ISA cannot run here");
  simdnorm::plan p;
  simdnorm::status s;
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = y.data();
  if (which == op::layer_norm) {
    simdnorm::layer_norm_params prm;
    prm.stores = simdnorm::store_policy::regular;
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
  const double vectors = double(rows * cols) / double(simdnorm::isa_lanes(isa));
  state.counters["ticks_per_vector"] = double(total_ticks) / calls / vectors;
  state.counters["ns_per_row"] = benchmark::Counter(
      calls * double(rows), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(std::int64_t(calls) * std::int64_t(2 * rows * cols * sizeof(float)));
}

}  // namespace

int main(int argc, char** argv) {
  const struct {
    op which;
    const char* name;
  } ops[] = {{op::layer_norm, "layer_norm"}, {op::rms_norm, "rms_norm"}, {op::l2_norm, "l2_norm"}};
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
