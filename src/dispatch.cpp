// Run-time ISA selection. Compiled with baseline flags: it only reads tables and CPUID.
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string_view>

#include "isa_table.hpp"

namespace simdnorm {
namespace {

struct compiled_entry {
  isa id;
  const detail::kernel_table* table;
};

// The ISAs CMake compiled, in the order of its simdnorm_add_isa calls (compiled_isas.inc is
// generated from them).
constexpr compiled_entry kCompiledAnyOrder[] = {
#define SIMDNORM_COMPILED_ISA(name) {isa::name, &detail::name::table},
#include "compiled_isas.inc"
#undef SIMDNORM_COMPILED_ISA
};
constexpr std::size_t kNumCompiled = std::size(kCompiledAnyOrder);

// Every ISA, best first (the order of simdnorm/isa_list.h).
constexpr isa kBestFirst[] = {
#define SIMDNORM_ISA_ID(name, NAME, id, lanes, fma, arch, features) isa::name,
    SIMDNORM_ISA_LIST(SIMDNORM_ISA_ID)
#undef SIMDNORM_ISA_ID
};

// The compiled ISAs, best first: the order in which dispatch tries them.
constexpr std::array<compiled_entry, kNumCompiled> kCompiled = [] {
  std::array<compiled_entry, kNumCompiled> out{};
  std::size_t n = 0;
  for (isa i : kBestFirst)
    for (const compiled_entry& e : kCompiledAnyOrder)
      if (e.id == i) out[n++] = e;
  return out;
}();

constexpr std::array<isa, kNumCompiled> kCompiledIds = [] {
  std::array<isa, kNumCompiled> out{};
  for (std::size_t k = 0; k < kNumCompiled; ++k) out[k] = kCompiled[k].id;
  return out;
}();

const detail::kernel_table* compiled_table(isa i) noexcept {
  for (const compiled_entry& e : kCompiled)
    if (e.id == i) return e.table;
  return nullptr;
}

#if defined(__x86_64__)
constexpr std::string_view kArch = "x86_64";
#elif defined(__aarch64__)
constexpr std::string_view kArch = "aarch64";
#else
constexpr std::string_view kArch = "";
#endif

// The x86 CPU features simdnorm/isa_list.h may name. GCC's __builtin_cpu_supports takes only
// string literals, hence a list; libgcc checks XCR0 (the OS saves the AVX and AVX-512 register
// state) before it reports AVX2 or AVX-512, which xsimd 8.1's own check does not.
#define SIMDNORM_X86_FEATURES(F) \
  F("sse2")                      \
  F("sse4.2")                    \
  F("avx2") F("fma") F("avx512f") F("avx512cd") F("avx512dq") F("avx512bw") F("avx512bf16")

// The AArch64 CPU features simdnorm/isa_list.h may name, with their bit in Linux's AT_HWCAP2
// (asm/hwcap.h; the kernel sets it only when the CPU has the feature and the kernel supports it).
#define SIMDNORM_AARCH64_FEATURES(F) F("bf16", 14)

// Calls each(feature) for every space-separated word of `features`; false when one returns false.
template <class F>
constexpr bool all_features(std::string_view features, F each) {
  while (!features.empty()) {
    const std::size_t end = std::min(features.find(' '), features.size());
    if (end > 0 && !each(features.substr(0, end))) return false;
    features.remove_prefix(std::min(end + 1, features.size()));
  }
  return true;
}

constexpr bool known_feature(std::string_view f) {
  if (f == "f16c") return true;  // clang 16's __builtin_cpu_supports lacks it: cpuid below
#define SIMDNORM_KNOWN(literal) \
  if (f == literal) return true;
  SIMDNORM_X86_FEATURES(SIMDNORM_KNOWN)
#undef SIMDNORM_KNOWN
#define SIMDNORM_KNOWN(literal, hwcap2_bit) \
  if (f == literal) return true;
  SIMDNORM_AARCH64_FEATURES(SIMDNORM_KNOWN)
#undef SIMDNORM_KNOWN
  return false;
}

#define SIMDNORM_CHECK_FEATURES(name, NAME, id, lanes, fma, arch, features)                 \
  static_assert(all_features(features, known_feature), "simdnorm/isa_list.h: " #name        \
                                                       " names a CPU feature missing from " \
                                                       "SIMDNORM_*_FEATURES");
SIMDNORM_ISA_LIST(SIMDNORM_CHECK_FEATURES)
#undef SIMDNORM_CHECK_FEATURES

bool cpu_has_feature(std::string_view f) noexcept {
#if defined(__x86_64__)
  if (f == "f16c") {  // CPUID leaf 1, ECX bit 29 (no OS state beyond AVX's, which avx2 checks)
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }
  __builtin_cpu_init();
#define SIMDNORM_TEST_FEATURE(literal) \
  if (f == literal) return __builtin_cpu_supports(literal);
  SIMDNORM_X86_FEATURES(SIMDNORM_TEST_FEATURE)
#undef SIMDNORM_TEST_FEATURE
#elif defined(__aarch64__) && defined(__linux__)
#define SIMDNORM_TEST_FEATURE(literal, hwcap2_bit) \
  if (f == literal) return (getauxval(AT_HWCAP2) >> (hwcap2_bit)) & 1;
  SIMDNORM_AARCH64_FEATURES(SIMDNORM_TEST_FEATURE)
#undef SIMDNORM_TEST_FEATURE
#endif
  (void)f;
  return false;
}

// CPU and OS support, from the ISA's row of simdnorm/isa_list.h.
bool hardware_supports(isa i) noexcept {
#define SIMDNORM_ISA_RUNS_HERE(name, NAME, id, lanes, fma, arch, features)         \
  if (i == isa::name)                                                              \
    return (std::string_view(arch) == "any" || std::string_view(arch) == kArch) && \
           all_features(features, cpu_has_feature);
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_RUNS_HERE)
#undef SIMDNORM_ISA_RUNS_HERE
  return false;
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
#define SIMDNORM_ISA_NAME_OF(name, NAME, id, lanes, fma, arch, features) \
  if (i == isa::name) return #name;
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_NAME_OF)
#undef SIMDNORM_ISA_NAME_OF
  return "unknown";
}

bool isa_from_name(const char* name, isa* out) noexcept {
  if (name == nullptr || out == nullptr) return false;
  for (isa i : kBestFirst) {
    if (std::strcmp(name, isa_name(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

const isa* compiled_isas(std::size_t* count) noexcept {
  if (count) *count = kNumCompiled;
  return kCompiledIds.data();
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
    return status::error(status_code::unsupported_isa,
                         "force_isa(%s): not compiled into this build", isa_name(i));
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
