// The peer registry: which peers this build has, their one-time process setup, their context.
#include "peers.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <cstring>

namespace peers {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void omp_fork(int threads, void (*fn)(void* ctx, int t), void* ctx) {
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
  {
    // A smaller team than asked (never with OMP_DYNAMIC off, the default) still covers all t.
    for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads()) fn(ctx, t);
  }
#else
  for (int t = 0; t < threads; ++t) fn(ctx, t);
#endif
}

void init(int max_threads) {
  static bool done = false;
  if (done) return;
  done = true;
#if SIMDNORM_BENCH_WITH_ONEDNN
  onednn_init();
#endif
#if SIMDNORM_BENCH_WITH_TORCH
  torch_init(max_threads);
#endif
  (void)max_threads;
}

const std::vector<peer>& available() {
  static const std::vector<peer> all = [] {
    std::vector<peer> v;
#if SIMDNORM_BENCH_WITH_ONEDNN
    v.push_back(onednn_peer());
#endif
#if SIMDNORM_BENCH_WITH_TORCH
    v.push_back(torch_peer());
#endif
    return v;
  }();
  return all;
}

std::vector<std::pair<std::string, std::string>> describe() {
  std::vector<std::pair<std::string, std::string>> d;
#if SIMDNORM_BENCH_WITH_ONEDNN
  for (auto& kv : onednn_describe()) d.push_back(kv);
#endif
#if SIMDNORM_BENCH_WITH_TORCH
  for (auto& kv : torch_describe()) d.push_back(kv);
#endif
  std::string names;
  for (const peer& p : available()) names += (names.empty() ? "" : ",") + p.name;
  d.emplace_back("peers", names.empty() ? "none" : names);
  return d;
}

}  // namespace peers
