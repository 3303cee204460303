// Run-time ISA selection. Compiled with baseline flags: it only reads tables and CPUID.
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "isa_table.hpp"

namespace simdnorm {
namespace {

struct compiled_entry {
  isa id;
  const detail::kernel_table* table;
};

// Best first. An entry exists iff CMake compiled that ISA's object.
constexpr compiled_entry kCompiled[] = {
#if SIMDNORM_HAVE_AVX512BW
    {isa::avx512bw, &detail::avx512bw::table},
#endif
#if SIMDNORM_HAVE_AVX2_FMA
    {isa::avx2_fma, &detail::avx2_fma::table},
#endif
#if SIMDNORM_HAVE_SSE4_2
    {isa::sse4_2, &detail::sse4_2::table},
#endif
#if SIMDNORM_HAVE_SSE2
    {isa::sse2, &detail::sse2::table},
#endif
#if SIMDNORM_HAVE_NEON64
    {isa::neon64, &detail::neon64::table},
#endif
    {isa::scalar, &detail::scalar::table},
};
constexpr std::size_t kNumCompiled = sizeof kCompiled / sizeof kCompiled[0];

constexpr isa kCompiledIds[] = {
#if SIMDNORM_HAVE_AVX512BW
    isa::avx512bw,
#endif
#if SIMDNORM_HAVE_AVX2_FMA
    isa::avx2_fma,
#endif
#if SIMDNORM_HAVE_SSE4_2
    isa::sse4_2,
#endif
#if SIMDNORM_HAVE_SSE2
    isa::sse2,
#endif
#if SIMDNORM_HAVE_NEON64
    isa::neon64,
#endif
    isa::scalar,
};

const detail::kernel_table* compiled_table(isa i) noexcept {
  for (const compiled_entry& e : kCompiled)
    if (e.id == i) return e.table;
  return nullptr;
}

// CPU and OS support. libgcc's __builtin_cpu_supports checks XCR0 (the OS saves the AVX and
// AVX-512 register state) before it reports AVX2 or AVX-512; xsimd 8.1's own check does not.
bool hardware_supports(isa i) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (i) {
    case isa::scalar: return true;
    case isa::sse2: return __builtin_cpu_supports("sse2");
    case isa::sse4_2: return __builtin_cpu_supports("sse4.2");
    case isa::avx2_fma: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case isa::avx512bw:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
    default: return false;
  }
#elif defined(__aarch64__)
  return i == isa::scalar || i == isa::neon64;  // Advanced SIMD is mandatory on AArch64
#else
  return i == isa::scalar;
#endif
}

const detail::kernel_table* best_table() noexcept {
  for (const compiled_entry& e : kCompiled)
    if (hardware_supports(e.id)) return e.table;
  return &detail::scalar::table;
}

// The default selection, computed once: SIMDNORM_ISA if set, else the best runnable ISA.
struct default_selection {
  const detail::kernel_table* table = nullptr;  // null: SIMDNORM_ISA cannot be honoured
  char error[160] = {};
};

const default_selection& default_choice() noexcept {
  static const default_selection sel = [] {
    default_selection s;
    const char* env = std::getenv("SIMDNORM_ISA");
    if (env == nullptr || *env == '\0') {
      s.table = best_table();
      return s;
    }
    isa want;
    if (!isa_from_name(env, &want)) {
      std::snprintf(s.error, sizeof s.error, "SIMDNORM_ISA='%.40s' is not an ISA name", env);
    } else if (compiled_table(want) == nullptr) {
      std::snprintf(s.error, sizeof s.error, "SIMDNORM_ISA=%s: not compiled into this build", env);
    } else if (!hardware_supports(want)) {
      std::snprintf(s.error, sizeof s.error, "SIMDNORM_ISA=%s: this CPU cannot run it", env);
    } else {
      s.table = compiled_table(want);
    }
    return s;
  }();
  return sel;
}

std::atomic<const detail::kernel_table*> g_forced{nullptr};

}  // namespace

const char* isa_name(isa i) noexcept {
  switch (i) {
    case isa::scalar: return "scalar";
    case isa::sse2: return "sse2";
    case isa::sse4_2: return "sse4_2";
    case isa::avx2_fma: return "avx2_fma";
    case isa::avx512bw: return "avx512bw";
    case isa::neon64: return "neon64";
  }
  return "unknown";
}

bool isa_from_name(const char* name, isa* out) noexcept {
  if (name == nullptr || out == nullptr) return false;
  for (int k = 0; k <= int(isa::neon64); ++k) {
    if (std::strcmp(name, isa_name(isa(k))) == 0) {
      *out = isa(k);
      return true;
    }
  }
  return false;
}

const isa* compiled_isas(std::size_t* count) noexcept {
  if (count) *count = kNumCompiled;
  return kCompiledIds;
}

bool cpu_supports(isa i) noexcept { return compiled_table(i) != nullptr && hardware_supports(i); }

isa active_isa() noexcept {
  if (const detail::kernel_table* t = g_forced.load(std::memory_order_acquire)) return t->id;
  const default_selection& d = default_choice();
  return d.table ? d.table->id : best_table()->id;
}

status force_isa(isa i) noexcept {
  const detail::kernel_table* t = compiled_table(i);
  if (t == nullptr)
    return status::error(status_code::unsupported_isa, "force_isa(%s): not compiled into this build",
                         isa_name(i));
  if (!hardware_supports(i))
    return status::error(status_code::unsupported_isa, "force_isa(%s): this CPU cannot run it",
                         isa_name(i));
  g_forced.store(t, std::memory_order_release);
  return {};
}

void reset_isa() noexcept { g_forced.store(nullptr, std::memory_order_release); }

namespace detail {
const kernel_table* selected_table(status* err) noexcept {
  if (const kernel_table* t = g_forced.load(std::memory_order_acquire)) return t;
  const default_selection& d = default_choice();
  if (d.table == nullptr && err) *err = status::error(status_code::unsupported_isa, "%s", d.error);
  return d.table;
}
}  // namespace detail

}  // namespace simdnorm
