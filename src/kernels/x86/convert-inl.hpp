// x86 parts of the element conversions (common/convert-inl.hpp): moving W 16-bit values in and
// out of the W 32-bit lanes of an integer vector (u16_lanes<W>), and the f16 conversion
// instructions (f16_hardware<W>): vcvtph2ps / vcvtps2ph of AVX-512F for 16 lanes and of F16C
// for 8 (the avx2_fma unit is compiled with -mf16c; every AVX2 CPU has it); the bf16 store of
// AVX512-BF16 (bf16_hardware<16>, the avx512bf16 unit). SSE2 and SSE4.2 convert f16 in integer
// SIMD. Compiled only where the compiler targets SSE2 (the guard).

#if defined(__SSE2__)

template <>
struct u16_lanes<4> {
  static __m128i widen(const std::uint16_t* p) {
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
#if defined(__SSE4_1__)
    return _mm_cvtepu16_epi32(h);
#else
    return _mm_unpacklo_epi16(h, _mm_setzero_si128());
#endif
  }
  static void narrow(std::uint16_t* p, __m128i v) {
#if defined(__SSE4_1__)
    const __m128i packed = _mm_packus_epi32(v, v);
#else  // sign-extend the low halves, so that the signed saturating pack keeps their bits
    const __m128i low = _mm_srai_epi32(_mm_slli_epi32(v, 16), 16);
    const __m128i packed = _mm_packs_epi32(low, low);
#endif
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), packed);
  }
};

#if defined(__AVX2__)
template <>
struct u16_lanes<8> {
  static __m256i widen(const std::uint16_t* p) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void narrow(std::uint16_t* p, __m256i v) {
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};
#endif

#if defined(__F16C__)
template <>
struct f16_hardware<8> {
  static constexpr bool available = true;
  static __m256 load(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(std::uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#endif

#if defined(__AVX512F__)
template <>
struct u16_lanes<16> {
  static __m512i widen(const std::uint16_t* p) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void narrow(std::uint16_t* p, __m512i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
};

#if defined(__AVX512BF16__)
template <>
struct bf16_hardware<16> {
  static constexpr bool available = true;
  // vcvtneps2bf16 rounds to nearest even and quiets NaN as to_bf16 does, but reads subnormal
  // inputs as zero whatever MXCSR says: a vector with one (fpclass 0x20) is left to the
  // integer path, so both paths give the same bits.
  static bool store(std::uint16_t* p, __m512 v) {
    if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0x20) != 0, 0)) return false;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), __m256i(_mm512_cvtneps_pbh(v)));
    return true;
  }
};
#endif

template <>
struct f16_hardware<16> {
  static constexpr bool available = true;
  static __m512 load(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(std::uint16_t* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#endif

// The low byte of each 32-bit lane: masked to 0..255, so that the saturating packs keep it.
template <>
struct u8_lanes<4> {
  static constexpr bool available = true;
  static void narrow(std::uint8_t* p, __m128i v) {
    const __m128i w = _mm_packs_epi32(_mm_and_si128(v, _mm_set1_epi32(0xff)), _mm_setzero_si128());
    const int bytes = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
    __builtin_memcpy(p, &bytes, 4);
  }
};

#if defined(__AVX2__)
template <>
struct u8_lanes<8> {
  static constexpr bool available = true;
  static void narrow(std::uint8_t* p, __m256i v) {
    const __m256i m = _mm256_and_si256(v, _mm256_set1_epi32(0xff));
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
  }
};
#endif

#if defined(__AVX512F__)
template <>
struct u8_lanes<16> {
  static constexpr bool available = true;
  static void narrow(std::uint8_t* p, __m512i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  }
};
#endif

#endif  // __SSE2__
