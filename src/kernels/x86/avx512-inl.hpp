// AVX-512 (avx512bw and avx512bf16 units, 16 float lanes): everything the generic kernels do
// differently on this ISA. Included after common/base-inl.hpp and before every generic template, so
// that the fma overloads below win overload resolution in all of them; compiled only where the
// compiler targets AVX-512 (the guard), so the other units see nothing of it.
//
// - fma / fms / fnma: xsimd 8.1 has no AVX-512 fma/fms/fnma: it falls back to its generic
//   x * y + z, which the ISA objects' -ffp-contract=off keeps as two instructions and two
//   roundings. These overloads (non-templates, so they win over xsimd's templates) emit the
//   fused instructions.
// - isa_hooks<avx512_vector>::lane_sums / split_halves: shuffle trees. xsimd 8.1's AVX-512
//   haddp returns the sums in a permuted lane order (rows 2-5 and 10-13 swapped in pairs) and
//   is slow.
// - isa_hooks<avx512_vector>::shifted_sums_half_paired: the short-row statistics one row at a
//   time, with the caller's work between the rows. With it the row driver overlaps the
//   statistics of one group of short rows with the normalize of the previous group
//   (short_rows_overlapped, row/normalize-inl.hpp): loads issued in a phase of their own,
//   with no stores in flight, add their time to the stores'; interleaved with the stores they
//   are hidden. Only rows of whole vectors and regular stores take it (docs/performance.md has
//   the measurements, and the variants that lost).

#if defined(__AVX512F__)

using avx512_vector = SIMDNORM_ISA_VECTOR;  // xsimd's avx512bw, or the avx512bf16 unit's own arch

inline avx512_vector fma(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline avx512_vector fms(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fmsub_ps(a, b, c);
}
inline avx512_vector fnma(const avx512_vector& a, const avx512_vector& b, const avx512_vector& c) {
  return _mm512_fnmadd_ps(a, b, c);
}

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

template <>
struct isa_hooks<avx512_vector> {
  static constexpr bool lane_tree = true;
  static constexpr bool paired_row_sums = true;

  /// Four halving steps (256-bit halves, 128-bit blocks, 64-bit pairs, then lanes), each one
  /// pair of shuffles and one add per output vector, 15 such steps in all. The steps leave
  /// row q's sum in lane kOrder[q]; kOrder is its own inverse, so feeding the rows in kOrder
  /// order puts row r's sum in lane r with no final permute.
  SIMDNORM_ALWAYS_INLINE static avx512_vector lane_sums(const avx512_vector* rows) {
    constexpr int kOrder[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
    __m512 t[8], u[4], v[2];
    SIMDNORM_UNROLL
    for (int j = 0; j < 8; ++j) t[j] = halve_blocks_256(rows[kOrder[j]], rows[kOrder[j + 8]]);
    SIMDNORM_UNROLL
    for (int j = 0; j < 4; ++j) u[j] = halve_blocks_128(t[j], t[j + 4]);
    SIMDNORM_UNROLL
    for (int j = 0; j < 2; ++j) v[j] = halve_pairs(u[j], u[j + 2]);
    return halve_lanes(v[0], v[1]);
  }

  SIMDNORM_ALWAYS_INLINE static void split_halves(const avx512_vector& a, const avx512_vector& b,
                                                  avx512_vector& lo, avx512_vector& hi) {
    lo = _mm512_shuffle_f32x4(a, b, 0x44);
    hi = _mm512_shuffle_f32x4(a, b, 0xEE);
  }

  /// shifted_sums_half (row/stats_short-inl.hpp) for rows of whole vectors, with other work in
  /// between: the 8 rows are summed one at a time, in the order 0, 4, 2, 6, 1, 5, 3, 7, with
  /// between_rows() called after each, so that the caller's work (the previous group's
  /// normalize and its stores) interleaves with these loads. Each pair of rows enters
  /// lane_sums' reduction tree as soon as both are summed, so only a few vectors stay live
  /// beside the caller's. The operations are those of shifted_sums_half and lane_sums, so the
  /// bits are the same. x is read through IO, the kernels' load policy (common/vec-inl.hpp).
  template <class IO, class Between, class TX>
  SIMDNORM_ALWAYS_INLINE static avx512_vector shifted_sums_half_paired(const TX* const* x,
                                                                       std::size_t n,
                                                                       const float* p,
                                                                       Between between_rows) {
    const auto sums = [&](std::size_t r, __m512& a, __m512& q) SIMDNORM_LAMBDA_INLINE {
      const __m512 vp = _mm512_set1_ps(p[r]);
      const TX* xr = x[r];
      a = _mm512_setzero_ps();
      q = _mm512_setzero_ps();
      for (std::size_t i = 0; i < n; i += 16) {
        const __m512 v = IO::template load<avx512_vector>(xr + i);
        const __m512 d =
            r % 2 == 0 ? _mm512_fmsub_ps(v, _mm512_set1_ps(1.f), vp) : _mm512_sub_ps(v, vp);
        a = _mm512_add_ps(a, d);
        q = _mm512_fmadd_ps(d, d, q);
      }
      between_rows();
    };
    // lane_sums' tree over [S1 of rows 0-7 | S2 of rows 0-7]: its first step pairs rows (0, 4),
    // (2, 6), (1, 5), (3, 7) and the second joins each S1 pair with the same rows' S2 pair.
    constexpr std::size_t kPairs[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};
    __m512 u[4];
    SIMDNORM_UNROLL
    for (std::size_t k = 0; k < 4; ++k) {
      __m512 a0, q0, a1, q1;
      sums(kPairs[k][0], a0, q0);
      sums(kPairs[k][1], a1, q1);
      u[k] = halve_blocks_128(halve_blocks_256(a0, a1), halve_blocks_256(q0, q1));
    }
    return halve_lanes(halve_pairs(u[0], u[2]), halve_pairs(u[1], u[3]));
  }
};

#endif  // __AVX512F__
