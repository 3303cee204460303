// What every kernel file assumes. Included first, inside namespace simdnorm::detail::<isa>.
//
// Kernels are templates on a float vector type V: xsimd::batch<float, Arch> for a SIMD ISA, or
// scalar_vector (one lane) for the portable path. V provides ::size, a broadcast constructor,
// load_unaligned/store_unaligned, + - * / < and +=; fma/fms/fnma/sqrt/select/hadd/haddp are
// found by argument-dependent lookup (xsimd's for batches, the ones below for scalar_vector),
// or by ordinary lookup for overloads an ISA file declares before the generic templates
// (x86/avx512-inl.hpp). Where an ISA does a step differently, the generic template asks
// isa_hooks<V> (below) and the ISA's file specialises it.

// Loops over interleaved rows (R rows at a time) must be fully unrolled so that the per-row
// accumulators live in registers (GCC at -O2 otherwise keeps a[R][4] on the stack, adding a
// store-forward to every accumulation).
#ifndef SIMDNORM_UNROLL
#if defined(__clang__)
#define SIMDNORM_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SIMDNORM_UNROLL _Pragma("GCC unroll 16")
#else
#define SIMDNORM_UNROLL
#endif
#endif

// Helpers called inside loops that keep many accumulators in registers: a call that is not
// inlined would spill them all (every vector register is caller-saved). Not forced under
// AddressSanitizer: the instrumented, force-inlined short-row kernels took GCC over ten
// minutes to compile; the sanitizer build checks the same code, inlined or not.
#if defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define SIMDNORM_ALWAYS_INLINE inline __attribute__((always_inline))
#define SIMDNORM_LAMBDA_INLINE __attribute__((always_inline))
#else
#define SIMDNORM_ALWAYS_INLINE inline
#define SIMDNORM_LAMBDA_INLINE
#endif

// Rare paths (the statistics' overflow fallbacks): kept out of line and out of the hot code's
// inlining budget.
#if defined(__GNUC__)
#define SIMDNORM_COLD __attribute__((noinline, cold))
#else
#define SIMDNORM_COLD
#endif

/// One-lane stand-in for xsimd::batch, so the scalar ISA runs the same kernel source.
struct scalar_vector {
  static constexpr std::size_t size = 1;
  float v;
  scalar_vector() = default;
  scalar_vector(float f) : v(f) {}  // NOLINT: broadcast, as xsimd::batch
  static scalar_vector load_unaligned(const float* p) { return scalar_vector(*p); }
  void store_unaligned(float* p) const { *p = v; }
  friend scalar_vector operator+(scalar_vector a, scalar_vector b) { return a.v + b.v; }
  friend scalar_vector operator-(scalar_vector a, scalar_vector b) { return a.v - b.v; }
  friend scalar_vector operator*(scalar_vector a, scalar_vector b) { return a.v * b.v; }
  friend scalar_vector operator/(scalar_vector a, scalar_vector b) { return a.v / b.v; }
  scalar_vector& operator+=(scalar_vector b) {
    v += b.v;
    return *this;
  }
};
inline scalar_vector fma(scalar_vector a, scalar_vector b, scalar_vector c) {
  return a.v * b.v + c.v;
}
inline scalar_vector fms(scalar_vector a, scalar_vector b, scalar_vector c) {
  return a.v * b.v - c.v;
}
inline scalar_vector fnma(scalar_vector a, scalar_vector b, scalar_vector c) {
  return c.v - a.v * b.v;
}
inline scalar_vector sqrt(scalar_vector a) { return __builtin_sqrtf(a.v); }
inline scalar_vector exp(scalar_vector a) { return __builtin_expf(a.v); }
inline bool operator<(scalar_vector a, scalar_vector b) { return a.v < b.v; }
inline bool operator<=(scalar_vector a, scalar_vector b) { return a.v <= b.v; }
inline bool operator>=(scalar_vector a, scalar_vector b) { return a.v >= b.v; }
inline bool operator>(scalar_vector a, scalar_vector b) { return a.v > b.v; }
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }
inline scalar_vector select(bool c, scalar_vector a, scalar_vector b) { return c ? a : b; }
/// Lane-wise and / or of comparison results: vector masks combine bitwise, the scalar
/// vector's bools logically.
template <class M>
inline M both(const M& a, const M& b) {
  return a & b;
}
inline bool both(bool a, bool b) { return a && b; }
template <class M>
inline M either(const M& a, const M& b) {
  return a | b;
}
inline bool either(bool a, bool b) { return a || b; }
inline float hadd(scalar_vector a) { return a.v; }
/// Lane r of the result is the horizontal sum of rows[r] (xsimd::haddp's contract).
inline scalar_vector haddp(const scalar_vector* rows) { return rows[0]; }

/// The steps an ISA does its own way, chosen by vector type at compile time. This primary
/// template has none, so the generic code runs; an ISA's file specialises it for its vector
/// (x86/avx512-inl.hpp) and provides:
///   lane_tree:        static V lane_sums(const V* rows) and
///                     static void split_halves(const V& a, const V& b, V& lo, V& hi),
///                     with the contracts of the generic lane_sums and split_halves;
///   paired_row_sums:  static V shifted_sums_half_paired(x, n, p, between_rows), the row
///                     statistics that let the row driver overlap two groups of short rows
///                     (short_rows_overlapped, row/normalize-inl.hpp).
template <class V>
struct isa_hooks {
  static constexpr bool lane_tree = false;
  static constexpr bool paired_row_sums = false;
};

/// W 16-bit values in and out of the W 32-bit lanes of an integer vector (widen, narrow):
/// defined per vector width by the ISA files (x86/, arm/convert-inl.hpp).
template <std::size_t W>
struct u16_lanes;

/// The low byte of each of W 32-bit lanes out to W bytes (narrow), where an ISA file has a
/// faster way than a store and a byte loop (common/io-inl.hpp: narrow_u8).
template <std::size_t W>
struct u8_lanes {
  static constexpr bool available = false;
};

/// The ISA's f32 -> bf16 conversion instruction for W lanes, where it has one: store(p, v)
/// writes W bf16 and returns true, or writes nothing and returns false when v holds a
/// subnormal (the instruction flushes those to zero; the caller rounds in integer SIMD then).
template <std::size_t W>
struct bf16_hardware {
  static constexpr bool available = false;
};

/// The ISA's f16 <-> f32 conversion instructions for W lanes (load, store), where it has them.
template <std::size_t W>
struct f16_hardware {
  static constexpr bool available = false;
};
