// Helpers shared by the tests: ISA iteration, buffers with chosen misalignment, random data.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
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

inline std::size_t lanes(simdnorm::isa i) {
  switch (i) {
    case simdnorm::isa::avx512bw: return 16;
    case simdnorm::isa::avx2_fma: return 8;
    case simdnorm::isa::scalar: return 1;
    default: return 4;
  }
}

/// Runs body(isa) once per runnable ISA (quick mode: the selected ISA only) with that ISA
/// forced, checking that the plan really dispatches to it, then restores the default selection.
template <class F>
void for_each_isa(F&& body) {
  simdnorm::reset_isa();
  const std::vector<simdnorm::isa> isas =
      quick() ? std::vector<simdnorm::isa>{simdnorm::active_isa()} : runnable_isas();
  for (simdnorm::isa i : isas) {
    INFO("isa=" << std::string(simdnorm::isa_name(i)));  // doctest 2.4.9 prints char* as a pointer
    REQUIRE(simdnorm::force_isa(i).ok());
    REQUIRE(simdnorm::active_isa() == i);
    body(i);
    simdnorm::reset_isa();
  }
}

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

inline void fill_normal(float* p, std::size_t n, std::uint32_t seed, double mean = 0, double sd = 1) {
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

/// Fixture of the error-path tests: an [N, C, S] input of 1.5 and an output of 7 that a
/// rejected call must leave as it is.
struct bad_input_base {
  std::vector<float> x, y;
  simdnorm::tensor_desc d;
  bad_input_base(std::int64_t N, std::int64_t C, std::int64_t S)
      : x(std::size_t(N * C * S), 1.5f), y(x.size(), 7.f),
        d(simdnorm::tensor_desc::contiguous({N, C, S})) {}
  simdnorm::norm_args args() {
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    return a;
  }
  /// Fails with `code` and a message containing `what`; y unchanged.
  void expect(const simdnorm::status& s, simdnorm::status_code code, const char* what) {
    CHECK(s.code() == code);
    CHECK_MESSAGE(std::string(s.message()).find(what) != std::string::npos, s.message());
    for (float v : y) CHECK(v == 7.f);
  }
};

}  // namespace test
