#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <dirent.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if SIMDNORM_BENCH_WITH_TBB
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#endif

namespace bench {
namespace {

// ---- copies: the memory-bandwidth reference ------------------------------------------------

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void copy_plain_avx512(const float* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_loadu_ps(s + i));
  for (; i < n; ++i) d[i] = s[i];
}
__attribute__((target("avx512f"))) void copy_nt_avx512(const float* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(d + i) % 64; ++i) d[i] = s[i];
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(d + i, _mm512_loadu_ps(s + i));
  for (; i < n; ++i) d[i] = s[i];
  _mm_sfence();
}
__attribute__((target("avx2"))) void copy_plain_avx2(const float* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
  for (; i < n; ++i) d[i] = s[i];
}
__attribute__((target("avx2"))) void copy_nt_avx2(const float* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(d + i) % 32; ++i) d[i] = s[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(d + i, _mm256_loadu_ps(s + i));
  for (; i < n; ++i) d[i] = s[i];
  _mm_sfence();
}
#endif
void copy_plain_generic(const float* s, float* d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
}
void copy_memcpy(const float* s, float* d, std::size_t n) { std::memcpy(d, s, n * sizeof(float)); }

using copy_fn = void (*)(const float*, float*, std::size_t);

struct copy_kernels {
  copy_fn plain = copy_plain_generic, nt = copy_plain_generic, mem = copy_memcpy;
};

const copy_kernels& copies() {
  static const copy_kernels k = [] {
    copy_kernels c;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
      c.plain = copy_plain_avx512;
      c.nt = copy_nt_avx512;
    } else if (__builtin_cpu_supports("avx2")) {
      c.plain = copy_plain_avx2;
      c.nt = copy_nt_avx2;
    }
#endif
    return c;
  }();
  return k;
}

// One contiguous block per thread (static partition), as a copy at this thread count.
void parallel_copy(copy_fn f, const float* s, float* d, std::size_t n, int threads,
                   fork_fn fork = nullptr) {
  if (fork && threads > 1) {  // the same blocks on another runtime's threads
    struct job {
      copy_fn f;
      const float* s;
      float* d;
      std::size_t n;
      int threads;
    } j{f, s, d, n, threads};
    fork(
        threads,
        [](void* c, int t) {
          const job& j = *static_cast<const job*>(c);
          const std::size_t b = (j.n * std::size_t(t) / std::size_t(j.threads)) / 16 * 16;
          const std::size_t e = t + 1 == j.threads
                                    ? j.n
                                    : (j.n * std::size_t(t + 1) / std::size_t(j.threads)) / 16 * 16;
          j.f(j.s + b, j.d + b, e - b);
        },
        &j);
    return;
  }
#if SIMDNORM_BENCH_WITH_TBB
  if (threads > 1) {
    oneapi::tbb::parallel_for(
        0, threads,
        [&](int t) {
          // Blocks rounded to 64 bytes so NT stores stay aligned.
          const std::size_t b = (n * std::size_t(t) / std::size_t(threads)) / 16 * 16;
          const std::size_t e =
              t + 1 == threads ? n : (n * std::size_t(t + 1) / std::size_t(threads)) / 16 * 16;
          f(s + b, d + b, e - b);
        },
        oneapi::tbb::static_partitioner());
    return;
  }
#endif
  (void)threads;
  f(s, d, n);
}

// Nanoseconds this process's threads have spent runnable but not running (waiting on a run
// queue, /proc/self/task/*/schedstat field 2), or -1 where that is not available. Grows when
// other processes, or more runnable threads than cores, take the CPUs from the benchmark.
double runqueue_wait_ns() {
#if defined(__linux__)
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  double sum = 0;
  bool any = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    if (FILE* f = std::fopen(path, "r")) {
      unsigned long long run = 0, wait = 0;
      if (std::fscanf(f, "%llu %llu", &run, &wait) == 2) {
        sum += double(wait);
        any = true;
      }
      std::fclose(f);
    }
  }
  closedir(d);
  return any ? sum : -1;
#else
  return -1;
#endif
}

// The largest cache of cpu0 in sysfs (".../cache/index<i>/size", e.g. "2048K"), 0 when unknown.
std::size_t sysfs_cache_bytes() {
  std::size_t best = 0;
#if defined(__linux__)
  for (int i = 0; i < 16; ++i) {
    char path[64];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE* f = std::fopen(path, "r");
    if (!f) break;
    unsigned long v = 0;
    char unit = 0;
    if (std::fscanf(f, "%lu%c", &v, &unit) >= 1) {
      const std::size_t b = std::size_t(v) << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
      best = std::max(best, b);
    }
    std::fclose(f);
  }
#endif
  return best;
}

// Last-level cache size: sysfs, else sysconf (glibc's L3 figure is not one L3's size on every
// CPU: 320 MiB on an AMD EPYC 9004 guest with one 32 MiB L3), else 32 MiB.
std::size_t cache_bytes() {
  static const std::size_t b = [] {
    const std::size_t s = sysfs_cache_bytes();
    if (s > 0) return s;
    long v = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return v > 0 ? std::size_t(v) : std::size_t(32) << 20;
  }();
  return b;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::vector<simdnorm::isa> g_isas;
std::vector<int> g_threads = {1, 2};
bool g_all_isas = false;
simdnorm::store_policy g_stores = simdnorm::store_policy::automatic;

}  // namespace

constexpr std::size_t kSlotSkew = 17 * 64;  // bytes

float* shared_buffer(std::size_t floats, int slot) {
  struct deleter {
    void operator()(float* p) const { std::free(p); }
  };
  static std::map<std::pair<int, std::size_t>, std::unique_ptr<float, deleter>> cache;
  auto& p = cache[{slot, floats}];
  if (!p) {
    const std::size_t align = std::size_t(2) << 20;
    const std::size_t bytes = (floats * sizeof(float) + kSlotSkew * 16 + align - 1) / align * align;
    p.reset(static_cast<float*>(std::aligned_alloc(align, bytes)));
#if defined(MADV_HUGEPAGE)
    madvise(p.get(), bytes, MADV_HUGEPAGE);
#endif
    std::memset(p.get(), 0, bytes);
  }
  // Buffers of different slots start at different offsets within a page (slot * 17 cache
  // lines, 64-byte aligned): x, y, gamma and beta all at 2 MiB boundaries would map element i
  // of every stream to the same cache set, a conflict-miss pattern real allocators avoid.
  return p.get() + std::size_t(slot % 16) * kSlotSkew / sizeof(float);
}

void fill_normal(float* p, std::size_t n, double mean) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> d(float(mean), 1.0f);
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 1 << 16); ++i) p[i] = d(rng);
  for (std::size_t i = std::size_t(1) << 16; i < n; i += std::size_t(1) << 16)
    std::memcpy(p + i, p, std::min<std::size_t>(std::size_t(1) << 16, n - i) * sizeof(float));
}

bool fill_normal_as(benchmark::State& state, simdnorm::dtype t, void* p, std::size_t n,
                    double mean) {
  if (t == simdnorm::dtype::f32) {
    fill_normal(static_cast<float*>(p), n, mean);
    return true;
  }
  std::vector<float> f(n);
  fill_normal(f.data(), n, mean);
  return check(state, simdnorm::convert(f.data(), simdnorm::dtype::f32, p, t, n));
}

const std::vector<simdnorm::isa>& isas() {
  if (g_isas.empty()) {
    std::size_t n = 0;
    const simdnorm::isa* all = simdnorm::compiled_isas(&n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!simdnorm::cpu_supports(all[i])) continue;
      g_isas.push_back(all[i]);
      if (!g_all_isas) break;  // best first
    }
  }
  return g_isas;
}

const std::vector<int>& thread_counts() { return g_threads; }

simdnorm::store_policy stores() { return g_stores; }

void parse_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    if (a == "--simdnorm_isas=all") {
      g_all_isas = true;
    } else if (a == "--simdnorm_stores=automatic" || a == "--simdnorm_stores=regular" ||
               a == "--simdnorm_stores=streaming") {
      g_stores = a[18] == 'a'   ? simdnorm::store_policy::automatic
                 : a[18] == 'r' ? simdnorm::store_policy::regular
                                : simdnorm::store_policy::streaming;
    } else if (a.rfind("--simdnorm_threads=", 0) == 0) {
      g_threads.clear();
      std::stringstream ss(a.substr(19));
      std::string t;
      while (std::getline(ss, t, ',')) g_threads.push_back(std::max(1, std::atoi(t.c_str())));
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
}

void measure_erased(benchmark::State& state, int threads, std::size_t bytes, const float* src,
                    float* dst, std::size_t copy_floats, op_fn op, void* ctx) {
  measure_erased_on(nullptr, state, threads, bytes, src, dst, copy_floats, op, ctx);
}

void measure_erased_on(fork_fn fork, benchmark::State& state, int threads, std::size_t bytes,
                       const float* src, float* dst, std::size_t copy_floats, op_fn op, void* ctx) {
  using clock = std::chrono::steady_clock;
  const copy_kernels& ck = copies();
  const copy_fn kinds[3] = {ck.plain, ck.nt, ck.mem};
  std::vector<double> op_t, copy_t[3];
  auto body = [&] {
    op(ctx);  // warm-up: page faults, caches, thread start
    // Cache-resident sizes: each timed run of the op or of a copy follows an untimed run of the
    // same, so it starts from its own steady cache state (after a non-temporal copy, y is not
    // in cache, and the next op would pay for it). Beyond the cache every run starts cold.
    const bool warm = 2 * copy_floats * sizeof(float) <= cache_bytes() / 2;
    std::size_t k = 0;
    for (auto _ : state) {
      if (warm) op(ctx);
      const auto t0 = clock::now();
      op(ctx);
      const auto t1 = clock::now();
      const double s = std::chrono::duration<double>(t1 - t0).count();
      state.SetIterationTime(s);
      op_t.push_back(s);
      // Interleaved copy of the same bytes (rotating through the three kinds), not timed
      // into the op.
      const copy_fn f = kinds[k % 3];
      if (warm) parallel_copy(f, src, dst, copy_floats, threads, fork);
      const auto c0 = clock::now();
      parallel_copy(f, src, dst, copy_floats, threads, fork);
      copy_t[k % 3].push_back(std::chrono::duration<double>(clock::now() - c0).count());
      ++k;
    }
    // A run too short for the rotation to reach every kind (one or two iterations of a
    // DRAM-sized op) still times each kind once, so the limit is always the best of the three
    // (in DRAM that is the non-temporal copy, the second kind).
    for (int j = 0; j < 3; ++j) {
      if (!copy_t[j].empty()) continue;
      const auto c0 = clock::now();
      parallel_copy(kinds[j], src, dst, copy_floats, threads, fork);
      copy_t[j].push_back(std::chrono::duration<double>(clock::now() - c0).count());
    }
  };
  const double wait0 = runqueue_wait_ns();
  const auto wall0 = clock::now();
#if SIMDNORM_BENCH_WITH_TBB
  oneapi::tbb::task_arena arena(threads);
  arena.execute(body);
#else
  body();
#endif
  const double wait1 = runqueue_wait_ns();
  const double wall_ns = std::chrono::duration<double, std::nano>(clock::now() - wall0).count();
  const double op_med = median(op_t);
  double copy_best = 0;
  for (auto& v : copy_t)
    if (!v.empty())
      copy_best = std::max(copy_best, double(copy_floats * 2 * sizeof(float)) / median(v));
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(bytes));
  state.counters["GBps"] = bytes / op_med / 1e9;
  state.counters["copy_GBps"] = copy_best / 1e9;
  state.counters["ratio"] = copy_best > 0 ? (bytes / op_med) / copy_best : 0;
  // Disturbance of this repetition: cores' worth of run-queue waiting (0 on a quiet machine;
  // absent where the kernel does not report it). Lets a report set disturbed repetitions aside.
  if (wait0 >= 0 && wait1 >= 0 && wall_ns > 0)
    state.counters["runq_wait"] = (wait1 - wait0) / wall_ns;
}

}  // namespace bench
