// Helpers shared by the tests: ISA facts and iteration, buffers with chosen misalignment, random
// data, failure collection.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "simdnorm/simdnorm.hpp"

namespace test {

/// Quick mode, for emulated (qemu) runs, which are 10 to 100 times slower: SIMDNORM_TEST_QUICK
/// set to anything but "" or "0". for_each_isa then runs only the ISA that dispatch selects (the
/// one the emulated CPU is there to check; every ISA is tested natively), and sweep tests skip
/// their largest sizes (they keep every tail length). Native runs use the full suite.
inline bool quick() {
  static const bool q = [] {
    const char* e = std::getenv("SIMDNORM_TEST_QUICK");
    return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
  }();
  return q;
}

/// ISAs compiled in and runnable on this CPU, best first.
inline std::vector<simdnorm::isa> runnable_isas() {
  std::size_t n = 0;
  const simdnorm::isa* all = simdnorm::compiled_isas(&n);
  std::vector<simdnorm::isa> out;
  for (std::size_t i = 0; i < n; ++i)
    if (simdnorm::cpu_supports(all[i])) out.push_back(all[i]);
  return out;
}

// ---- ISA facts and selection ----------------------------------------------------------------
// What an ISA is (its lanes, whether it fuses multiply-add) comes from the library's one ISA
// list (simdnorm::isa_lanes, simdnorm::isa_has_fma); the tests never restate it.

/// Float lanes of one vector of `i`.
inline std::size_t lanes(simdnorm::isa i) { return std::size_t(simdnorm::isa_lanes(i)); }

/// True when `i` computes a * b + c with one rounding (a fused multiply-add unit).
inline bool has_fma(simdnorm::isa i) { return simdnorm::isa_has_fma(i); }

/// Every value of simdnorm::isa that the library has a name for, compiled in or not.
inline std::vector<simdnorm::isa> named_isas() {
  std::vector<simdnorm::isa> out;
  for (int k = 0; k < 64; ++k) {
    const auto i = static_cast<simdnorm::isa>(k);
    if (std::strcmp(simdnorm::isa_name(i), "unknown") != 0) out.push_back(i);
  }
  return out;
}

/// An ISA this process cannot select: not compiled in, or not runnable on this CPU. False when
/// every named ISA runs here.
inline bool foreign_isa(simdnorm::isa* out) {
  for (simdnorm::isa i : named_isas())
    if (!simdnorm::cpu_supports(i)) {
      *out = i;
      return true;
    }
  return false;
}

/// True when the library's row kernels cover bf16 and f16 (SIMDNORM_ALL_DTYPES, off in the
/// sanitizer builds). Test cases that need them carry `* doctest::skip(!test::all_dtypes)`.
inline constexpr bool all_dtypes = SIMDNORM_ALL_DTYPES;

/// True when the environment variable `name` is set and not empty.
inline bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

/// Forces an ISA for its lifetime and returns to the default selection when it ends, so that a
/// forced ISA never leaks into later tests (also when an assertion throws).
class forced_isa {
 public:
  explicit forced_isa(simdnorm::isa i) : status_(simdnorm::force_isa(i)) {}
  ~forced_isa() { simdnorm::reset_isa(); }
  forced_isa(const forced_isa&) = delete;
  forced_isa& operator=(const forced_isa&) = delete;
  const simdnorm::status& status() const { return status_; }

 private:
  simdnorm::status status_;
};

/// Runs body(isa) once per runnable ISA (quick mode: the selected ISA only), each in its own
/// SUBCASE named "isa=<name>" with that ISA forced, after checking that plans really dispatch
/// to it. A failed REQUIRE ends its own ISA's subcase only: the exception is kept until every
/// ISA's subcase has been seen, so the remaining ISAs still run (doctest reenters the test case
/// once per subcase).
template <class F>
void for_each_isa(F&& body) {
  simdnorm::reset_isa();
  const std::vector<simdnorm::isa> isas =
      quick() ? std::vector<simdnorm::isa>{simdnorm::active_isa()} : runnable_isas();
  std::exception_ptr failure;
  for (simdnorm::isa i : isas) {
    const std::string name = "isa=" + std::string(simdnorm::isa_name(i));
    SUBCASE(name.c_str()) {
      try {
        const forced_isa guard(i);
        REQUIRE_MESSAGE(guard.status().ok(), guard.status().message());
        REQUIRE(simdnorm::active_isa() == i);
        body(i);
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// ---- checks ----------------------------------------------------------------------------------

/// Collects the failures of an element-wise comparison: their count and the description of the
/// first, so that a sweep reports one CHECK (with what failed first) instead of one per element.
///   test::failures bad;
///   for (...) bad.expect(std::fabs(got - want) <= tol, [&] { return "row " + ...; });
///   CHECK_MESSAGE(bad.none(), bad.report());
class failures {
 public:
  /// Records a failure unless `ok`; describe() is called for the first failure only.
  template <class Describe>
  void expect(bool ok, Describe&& describe) {
    if (!ok && count_++ == 0) first_ = describe();
  }
  bool none() const { return count_ == 0; }
  std::size_t count() const { return count_; }
  std::string report() const {
    return count_ == 0 ? std::string("no failures")
                       : std::to_string(count_) + " failed, the first: " + first_;
  }

 private:
  std::size_t count_ = 0;
  std::string first_;
};

/// A float buffer whose data() sits `misalign` floats past a 64-byte boundary, with guard
/// floats on both sides set to a sentinel so that out-of-bounds writes are detected.
class buffer {
 public:
  static constexpr float sentinel = -12345.678f;
  static constexpr std::size_t guard = 32;
  explicit buffer(std::size_t n, std::size_t misalign = 0) : n_(n) {
    storage_.assign(n + 2 * guard + 16 + misalign, sentinel);
    auto base = reinterpret_cast<std::uintptr_t>(storage_.data() + guard);
    const std::size_t to64 = (64 - base % 64) % 64 / sizeof(float);
    off_ = guard + to64 + misalign;
  }
  float* data() { return storage_.data() + off_; }
  const float* data() const { return storage_.data() + off_; }
  std::size_t size() const { return n_; }
  float& operator[](std::size_t i) { return data()[i]; }
  /// True when no float outside [data(), data() + size()) was changed.
  bool guards_intact() const {
    for (std::size_t i = 0; i < off_; ++i)
      if (std::memcmp(&storage_[i], &sentinel, sizeof(float)) != 0) return false;
    for (std::size_t i = off_ + n_; i < storage_.size(); ++i)
      if (std::memcmp(&storage_[i], &sentinel, sizeof(float)) != 0) return false;
    return true;
  }

 private:
  std::vector<float> storage_;
  std::size_t n_, off_;
};

/// `n` values of type t in a guarded buffer, set from and read back as f32.
struct typed {
  simdnorm::dtype t;
  buffer raw;
  typed(simdnorm::dtype type, std::size_t n)
      : t(type), raw((n * simdnorm::dtype_size(type) + 3) / 4, 1) {}
  void* data() { return raw.data(); }
  void set(const std::vector<float>& v) {
    REQUIRE(simdnorm::convert(v.data(), simdnorm::dtype::f32, raw.data(), t, v.size()).ok());
  }
  std::vector<float> get(std::size_t n) {
    std::vector<float> v(n);
    REQUIRE(simdnorm::convert(raw.data(), t, v.data(), simdnorm::dtype::f32, n).ok());
    return v;
  }
};

/// Unit roundoff of the output type: half an ulp relative (2^-24 f32, 2^-8 bf16, 2^-11 f16),
/// and the absolute half-ulp of its subnormals.
inline double unit_roundoff(simdnorm::dtype t) {
  return t == simdnorm::dtype::f32 ? 0x1p-24 : t == simdnorm::dtype::bf16 ? 0x1p-8 : 0x1p-11;
}
inline double subnormal_half_ulp(simdnorm::dtype t) {
  return t == simdnorm::dtype::f32 ? 0x1p-150 : t == simdnorm::dtype::bf16 ? 0x1p-134 : 0x1p-25;
}

/// Typed storage with guards: n elements of t, `mis` elements past a 64-byte boundary.
struct typed_buffer {
  simdnorm::dtype t;
  buffer raw;
  typed_buffer(simdnorm::dtype type, std::size_t n, std::size_t mis)
      : t(type), raw((n * simdnorm::dtype_size(type) + 3) / 4 + 4, 0) {
    base = reinterpret_cast<unsigned char*>(raw.data()) + mis * simdnorm::dtype_size(type);
  }
  unsigned char* base;
  /// Stores f32 values converted to t (exactly representable ones stay exact).
  void set(const std::vector<float>& v) {
    REQUIRE(simdnorm::convert(v.data(), simdnorm::dtype::f32, base, t, v.size()).ok());
  }
  std::vector<float> get(std::size_t n) const {
    std::vector<float> v(n);
    REQUIRE(simdnorm::convert(base, t, v.data(), simdnorm::dtype::f32, n).ok());
    return v;
  }
};

/// Runs the plan on the arguments (norm_args or an op's args struct) and stops the test case,
/// with the library's message, if it fails.
template <class Args>
void execute_checked(const simdnorm::plan& p, const Args& a) {
  const simdnorm::status s = p.execute(a);
  REQUIRE_MESSAGE(s.ok(), s.message());
}

/// Every operand of every op, for a test that drives several ops with one set of pointers; an
/// op takes its part through as<>.
struct any_args : simdnorm::norm_args,
                  simdnorm::residual_operands,
                  simdnorm::quantized_outputs,
                  simdnorm::modulation_operands,
                  simdnorm::gate_operand,
                  simdnorm::running_statistics {};

/// The operands of `a` that the args struct `Args` has (as<simdnorm::rms_norm_args>(a)).
template <class Args>
Args as(const any_args& a) {
  Args o = static_cast<const simdnorm::norm_args&>(a);
  if constexpr (std::is_base_of_v<simdnorm::residual_operands, Args>)
    static_cast<simdnorm::residual_operands&>(o) = a;
  if constexpr (std::is_base_of_v<simdnorm::quantized_outputs, Args>)
    static_cast<simdnorm::quantized_outputs&>(o) = a;
  if constexpr (std::is_base_of_v<simdnorm::modulation_operands, Args>)
    static_cast<simdnorm::modulation_operands&>(o) = a;
  if constexpr (std::is_base_of_v<simdnorm::gate_operand, Args>)
    static_cast<simdnorm::gate_operand&>(o) = a;
  if constexpr (std::is_base_of_v<simdnorm::running_statistics, Args>)
    static_cast<simdnorm::running_statistics&>(o) = a;
  return o;
}

/// f(as<the args struct of p's op>(a)): lets a test run plans of any op on one any_args.
template <class F>
simdnorm::status with_args_of(const simdnorm::plan& p, const any_args& a, F&& f) {
  const std::string op = p.op_name();
#define SIMDNORM_TEST_ARGS_OF(name) \
  if (op == #name) return f(as<simdnorm::name##_args>(a));
  SIMDNORM_OP_LIST(SIMDNORM_TEST_ARGS_OF)
#undef SIMDNORM_TEST_ARGS_OF
  return f(static_cast<const simdnorm::norm_args&>(a));  // an empty plan refuses it
}

inline simdnorm::status execute_any(const simdnorm::plan& p, const any_args& a,
                                    simdnorm::executor* exec = nullptr) {
  return with_args_of(p, a, [&](const auto& args) { return p.execute(args, exec); });
}

inline simdnorm::status run_any(const simdnorm::plan& p, const any_args& a, std::size_t phase,
                                std::size_t begin, std::size_t end) {
  return with_args_of(p, a, [&](const auto& args) { return p.run(args, phase, begin, end); });
}

inline void fill_normal(float* p, std::size_t n, std::uint32_t seed, double mean = 0,
                        double sd = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  for (std::size_t i = 0; i < n; ++i) p[i] = float(d(rng));
}

inline bool bitwise_equal(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

/// A host-style pool stand-in: splits [0, n) into `chunks` ranges and runs each on its own
/// std::thread (the shape of an engine's pool driving plan tasks).
class chunked_thread_executor final : public simdnorm::executor {
 public:
  explicit chunked_thread_executor(std::size_t chunks) : chunks_(chunks) {}
  std::size_t concurrency() const noexcept override { return chunks_; }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override;

 private:
  std::size_t chunks_;
};

}  // namespace test
