// Vector helpers shared by all kernels. Included inside namespace simdnorm::detail::<isa>.
//
// Kernels are templates on a float vector type V: xsimd::batch<float, Arch> for a SIMD ISA, or
// scalar_vector (one lane) for the portable path. V provides ::size, a broadcast constructor,
// load_unaligned/store_unaligned, + - * / < and +=; fma/fms/fnma/sqrt/select/hadd/haddp are
// found by argument-dependent
// lookup (xsimd's for batches, the ones below for scalar_vector).

// Loops over interleaved rows (R rows at a time) must be fully unrolled so that the per-row accumulators
// live in registers (GCC at -O2 otherwise keeps a[R][4] on the stack, adding a store-forward
// to every accumulation).
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
  scalar_vector& operator+=(scalar_vector b) { v += b.v; return *this; }
};
inline scalar_vector fma(scalar_vector a, scalar_vector b, scalar_vector c) { return a.v * b.v + c.v; }
inline scalar_vector fms(scalar_vector a, scalar_vector b, scalar_vector c) { return a.v * b.v - c.v; }
inline scalar_vector fnma(scalar_vector a, scalar_vector b, scalar_vector c) { return c.v - a.v * b.v; }
inline scalar_vector sqrt(scalar_vector a) { return __builtin_sqrtf(a.v); }
inline bool operator<(scalar_vector a, scalar_vector b) { return a.v < b.v; }
inline bool operator<=(scalar_vector a, scalar_vector b) { return a.v <= b.v; }
inline bool all(bool b) { return b; }
inline scalar_vector select(bool c, scalar_vector a, scalar_vector b) { return c ? a : b; }
inline float hadd(scalar_vector a) { return a.v; }
/// Lane r of the result is the horizontal sum of rows[r] (xsimd::haddp's contract).
inline scalar_vector haddp(const scalar_vector* rows) { return rows[0]; }

#if defined(__AVX512F__)
// xsimd 8.1 has no AVX-512 fma/fms/fnma: it falls back to its generic x * y + z, which the ISA
// objects' -ffp-contract=off keeps as two instructions and two roundings. These overloads
// (non-templates, so they win over xsimd's templates) emit the fused instructions.
using avx512_vector = xsimd::batch<float, xsimd::avx512bw>;
inline avx512_vector fma(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline avx512_vector fms(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fmsub_ps(a, b, c);
}
inline avx512_vector fnma(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fnmadd_ps(a, b, c);
}
#endif

template <class V>
inline V load(const float* p) { return V::load_unaligned(p); }

/// v - p, rounded once, as v * 1 - p on the FMA unit where there is one: the statistics pass
/// issues one subtraction and one addition per vector, and on Zen 4 512-bit adds and FMAs go
/// to different pipes (one of each per cycle), so moving the subtraction over halves that
/// pass's add-pipe load. v * 1 is exact, so the result is the same bits as v - p.
template <class V>
inline V shift_sub(const V& v, const V& p) {
#if defined(__FMA__) || defined(__AVX512F__) || defined(__aarch64__)
  return fms(v, V(1.f), p);
#else
  return v - p;
#endif
}

/// Scalar fma / fms that round exactly as one lane of V's fma / fms: fused on ISAs with an FMA
/// unit, two roundings on SSE2/SSE4.2. Scalar heads and tails use them so that an element's
/// value does not depend on whether it fell in a vector or in a tail (streaming stores, padded
/// rows, NCHW vs NHWC). The ISA objects are compiled with -ffp-contract=off, so plain + - *
/// are single IEEE operations in both paths and only these are fused.
template <class V>
inline float fma1(float a, float b, float c) {
  alignas(64) float t[V::size];
  fma(V(a), V(b), V(c)).store_unaligned(t);
  return t[0];
}
template <class V>
inline float fms1(float a, float b, float c) {
  alignas(64) float t[V::size];
  fms(V(a), V(b), V(c)).store_unaligned(t);
  return t[0];
}

#if defined(__AVX512F__)
/// The four halving steps of the 16-lane lane_sums, each one pair of shuffles and one add
/// (exposed so that shifted_sums_half_paired builds the same tree as its rows arrive).
inline __m512 halve_blocks_256(__m512 a, __m512 b) {  // [a rows | b rows] as 8-lane halves
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
inline __m512 halve_blocks_128(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
inline __m512 halve_pairs(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
inline __m512 halve_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}
#endif

/// Lane r of the result is the horizontal sum of rows[r], for r < V::size: one
/// transpose-and-add for all rows. xsimd 8.1's AVX-512 haddp returns the sums in a permuted
/// lane order (rows 2-5 and 10-13 swapped in pairs) and is slow, so the 16-lane case has its
/// own: four halving steps (256-bit halves, 128-bit blocks, 64-bit pairs, then lanes), each
/// one pair of shuffles and one add per output vector, 15 such steps in all. The steps leave
/// row q's sum in lane kOrder[q]; kOrder is its own inverse, so feeding the rows in kOrder
/// order puts row r's sum in lane r with no final permute.
template <class V>
inline V lane_sums(const V* rows) {
#if defined(__AVX512F__)
  if constexpr (V::size == 16) {
    constexpr int kOrder[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
    __m512 t[8], u[4], v[2];
    SIMDNORM_UNROLL for (int j = 0; j < 8; ++j) t[j] = halve_blocks_256(rows[kOrder[j]], rows[kOrder[j + 8]]);
    SIMDNORM_UNROLL for (int j = 0; j < 4; ++j) u[j] = halve_blocks_128(t[j], t[j + 4]);
    SIMDNORM_UNROLL for (int j = 0; j < 2; ++j) v[j] = halve_pairs(u[j], u[j + 2]);
    return halve_lanes(v[0], v[1]);
  }
#endif
  return haddp(rows);
}

/// Regroups the halves of two vectors: lo = [a's low half | b's low half], hi = [a's high half
/// | b's high half]. For V::size >= 2.
template <class V>
inline void split_halves(const V& a, const V& b, V& lo, V& hi) {
  constexpr std::size_t W = V::size, H = W / 2;
#if defined(__AVX512F__)
  if constexpr (W == 16) {
    lo = _mm512_shuffle_f32x4(a, b, 0x44);
    hi = _mm512_shuffle_f32x4(a, b, 0xEE);
    return;
  }
#endif
  alignas(64) float ta[W], tb[W], tl[W], th[W];
  a.store_unaligned(ta);
  b.store_unaligned(tb);
  for (std::size_t j = 0; j < H; ++j) {
    tl[j] = ta[j];
    tl[H + j] = tb[j];
    th[j] = ta[H + j];
    th[H + j] = tb[H + j];
  }
  lo = load<V>(tl);
  hi = load<V>(th);
}

/// Bytes a streaming store of V must be aligned to.
template <class V>
constexpr std::size_t stream_alignment() { return V::size * sizeof(float); }

/// Non-temporal store of a full vector to a stream_alignment()-aligned address where the ISA
/// has one (x86); an ordinary store elsewhere.
template <class V>
inline void store_stream(float* p, const V& v) {
#if defined(__AVX512F__)
  if constexpr (V::size == 16) { _mm512_stream_ps(p, v); return; }
#endif
#if defined(__AVX__)
  if constexpr (V::size == 8) { _mm256_stream_ps(p, v); return; }
#endif
#if defined(__SSE2__)
  if constexpr (V::size == 4) { _mm_stream_ps(p, v); return; }
#endif
  v.store_unaligned(p);
}

/// Orders streaming stores before whatever the thread does next (e.g. signalling completion).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/// Number of leading elements to store one by one before `p` is stream-aligned.
template <class V>
inline std::size_t elements_to_stream_alignment(const float* p, std::size_t n) {
  const std::size_t a = stream_alignment<V>();
  const std::size_t mis = reinterpret_cast<std::uintptr_t>(p) % a;
  if (mis % sizeof(float) != 0) return n;  // not even float-aligned: never stream
  const std::size_t head = mis == 0 ? 0 : (a - mis) / sizeof(float);
  return head < n ? head : n;
}

/// Writes y[0, n) = f(i) for vector offsets and scalar tails, with streaming or ordinary
/// stores. f_vec(i) returns V for elements [i, i + V::size); f_one(i) returns float.
template <class V, bool Stream, class FV, class F1>
inline void store_row(float* y, std::size_t n, FV f_vec, F1 f_one) {
  constexpr std::size_t W = V::size;
  std::size_t i = 0;
  if constexpr (Stream) {
    for (const std::size_t head = elements_to_stream_alignment<V>(y, n); i < head; ++i) y[i] = f_one(i);
    for (; i + W <= n; i += W) store_stream<V>(y + i, f_vec(i));
  } else {
    for (; i + W <= n; i += W) f_vec(i).store_unaligned(y + i);
  }
  for (; i < n; ++i) y[i] = f_one(i);
}

/// Prefetches rows that a kernel will read later, one cache line (vector) per step, into L2
/// (prefetcht1: L1 is busy with the data in hand). Kernels step it from both of their passes
/// so that memory reads are in flight while they compute as well as while they store. The
/// default-constructed prefetcher does nothing.
struct row_prefetcher {
  const float* row = nullptr;
  std::ptrdiff_t stride = 0;
  std::size_t rows_left = 0, n = 0, i = 0;
  void step(std::size_t w) {
    if (rows_left == 0) return;
    __builtin_prefetch(row + i, 0, 2);
    i += w;
    if (i >= n) {
      i = 0;
      row += stride;
      --rows_left;
    }
  }
};
