// simdnorm_bench: registers every benchmark at run time (per runnable ISA and thread count).
//   simdnorm_bench [--simdnorm_isas=all] [--simdnorm_threads=1,2]
//                  [--simdnorm_stores=automatic|regular|streaming] [Google Benchmark flags]
#include "bench_common.hpp"

void register_row_benchmarks();
void register_fusion_benchmarks();   // bench_fusions.cpp: fused vs unfused transformer steps
void register_channel_benchmarks();  // bench_channels.cpp: BatchNorm, GroupNorm
void register_peer_benchmarks();     // bench/peers/: oneDNN, libtorch when built in

int main(int argc, char** argv) {
  bench::parse_flags(&argc, argv);
  register_row_benchmarks();
  register_fusion_benchmarks();
  register_channel_benchmarks();
  register_peer_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simdnorm_isa", simdnorm::isa_name(simdnorm::active_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
