// The kernels' load / store edge: the io policy through which every kernel reads x and writes
// y, whatever their element type (float, bf16_t, f16_t); streaming stores; and the element
// conversions f32 <-> bf16 and f32 <-> f16 (IEEE binary16), one element (the reference) and
// one vector of V::size elements. Included after common/base-inl.hpp and the ISA files.
//
// Contract, on every ISA and bit for bit the same: loads are exact (every bf16 and f16 value is
// a float); stores round to nearest even; NaN stays NaN, made quiet with its top payload bits
// kept (as x86's vcvtps2ph / vcvtneps2bf16 and AArch64's fcvt do); +-Inf stays +-Inf; f16
// results beyond 65504 (from 65520 on) become +-Inf; subnormal inputs and outputs are kept.
// Vector paths: f16 in hardware where the ISA has it (AVX-512F vcvtph2ps / vcvtps2ph, F16C on
// the AVX2 unit, AArch64 fcvtl / fcvtn) and bf16 stores where AVX512-BF16 has them
// (vcvtneps2bf16, subnormals excepted); bf16 and the other f16 paths in integer SIMD (widen
// and narrow per ISA in x86/convert-inl.hpp and arm/convert-inl.hpp, the arithmetic here).
// tests/test_convert.cpp checks every one of the 65536 16-bit patterns and rounding cases of
// f32 against the one-element reference on each ISA.
// The 8-bit output types (quantized y, after the kernel's scaling; tests/test_quantize.cpp):
// i8 and u8 round to nearest even and saturate to [-128, 127] and [0, 255], NaN to 0; f8e4m3fn (OCP
// E4M3FN) rounds to nearest even and saturates to +-448 (Inf too), NaN to 0x7f, subnormals kept.
// Their loads are exact (convert only: the row ops never read them).

template <class V>
inline V load(const float* p) {
  return V::load_unaligned(p);
}

// ---- streaming stores ----------------------------------------------------------------------

/// Bytes a streaming store of V must be aligned to.
template <class V>
constexpr std::size_t stream_alignment() {
  return V::size * sizeof(float);
}

/// Non-temporal store of a full vector to a stream_alignment()-aligned address where the ISA
/// has one (x86); an ordinary store elsewhere.
template <class V>
inline void store_stream(float* p, const V& v) {
#if defined(__AVX512F__)
  if constexpr (V::size == 16) {
    _mm512_stream_ps(p, v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (V::size == 8) {
    _mm256_stream_ps(p, v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (V::size == 4) {
    _mm_stream_ps(p, v);
    return;
  }
#endif
  v.store_unaligned(p);
}

/// Orders streaming stores before whatever the thread does next (e.g. signalling completion).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// ---- one element: the reference -----------------------------------------------------------

SIMDNORM_ALWAYS_INLINE std::uint32_t bits_of(float f) {
  std::uint32_t b;
  __builtin_memcpy(&b, &f, sizeof b);
  return b;
}
SIMDNORM_ALWAYS_INLINE float float_of(std::uint32_t b) {
  float f;
  __builtin_memcpy(&f, &b, sizeof f);
  return f;
}

inline float to_f32(bf16_t h) { return float_of(std::uint32_t(h.bits) << 16); }

inline bf16_t to_bf16(float f) {
  const std::uint32_t b = bits_of(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return {std::uint16_t((b >> 16) | 0x40u)};  // quiet NaN
  return {std::uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16)};  // RNE; overflow gives Inf
}

inline float to_f32(f16_t h) {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
  const std::uint32_t e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
  if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0u));
  if (e == 0) return float_of(sign | bits_of(float(m) * 0x1p-24f));  // zero or subnormal: exact
  return float_of(sign | ((e + 112) << 23) | (m << 13));
}

// f32 -> f16, round to nearest even (F. Giesen's float_to_half_fast3_rtne): subnormal results
// come from one float addition whose rounding is the one wanted; normal ones from an integer
// rounding of the mantissa.
inline f16_t to_f16(float f) {
  const std::uint32_t b = bits_of(f), sign = (b >> 16) & 0x8000u, a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return {std::uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};  // NaN
  if (a >= 0x477ff000u) return {std::uint16_t(sign | 0x7c00u)};  // >= 65520: Inf
  if (a < 0x38800000u)                                           // below 2^-14: subnormal
    return {std::uint16_t(sign | (bits_of(float_of(a) + 0.5f) - 0x3f000000u))};
  const std::uint32_t odd = (a >> 13) & 1u;
  return {std::uint16_t(sign | ((a + 0xc8000fffu + odd) >> 13))};  // rebias: (15 - 127) << 23
}

/// f32 -> nearest integer, ties to even, for |v| < 2^22 (the default rounding mode adds and
/// removes 1.5 * 2^23); larger values come back large, which the callers saturate anyway.
template <class V>
SIMDNORM_ALWAYS_INLINE V round_even(const V& v) {
  return (v + V(12582912.f)) - V(12582912.f);
}

/// v clamped to [lo, hi]; NaN stays NaN.
template <class V>
SIMDNORM_ALWAYS_INLINE V clamp_keep_nan(const V& v, float lo, float hi) {
  const V t = select(v > V(hi), V(hi), v);
  return select(t < V(lo), V(lo), t);
}

inline float to_f32(i8_t v) { return float(v.v); }
inline float to_f32(u8_t v) { return float(v.v); }

/// f32 -> the integer code nearest to it in [lo, hi] (ties to even); NaN -> 0.
inline int to_int_code(float f, float lo, float hi) {
  const scalar_vector t = clamp_keep_nan(scalar_vector(f), lo, hi);
  return int(t.v <= hi ? round_even(t).v : 0.f);
}
inline i8_t to_i8(float f) { return {std::int8_t(to_int_code(f, -128.f, 127.f))}; }
inline u8_t to_u8(float f) { return {std::uint8_t(to_int_code(f, 0.f, 255.f))}; }

inline float to_f32(f8e4m3fn_t h) {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x80u) << 24;
  const std::uint32_t e = (h.bits >> 3) & 0xfu, m = h.bits & 7u;
  if (e == 0xf && m == 7) return float_of(sign | 0x7fc00000u);      // NaN
  if (e == 0) return float_of(sign | bits_of(float(m) * 0x1p-9f));  // zero or subnormal
  return float_of(sign | ((e + 120u) << 23) | (m << 20));           // rebias: 127 - 7
}

// f32 -> E4M3FN: magnitudes beyond 448 (Inf too) saturate to 448; below 2^-6 (subnormal) the
// code comes from one float addition to 2^14, whose ulp is the 2^-9 step of the subnormals;
// normal ones from an integer rounding of the mantissa to 3 bits (bits 0x43e00000 = 448,
// 0x3c800000 = 2^-6, 0x46800000 = 2^14).
inline f8e4m3fn_t to_f8e4m3fn(float f) {
  const std::uint32_t b = bits_of(f), sign = (b >> 24) & 0x80u;
  std::uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return {0x7f};
  if (a > 0x43e00000u) a = 0x43e00000u;
  if (a < 0x3c800000u) return {std::uint8_t(sign | (bits_of(float_of(a) + 16384.f) - 0x46800000u))};
  return {std::uint8_t(sign | ((a - (120u << 23) + 0x7ffffu + ((a >> 20) & 1u)) >> 20))};
}

inline float to_f32(float f) { return f; }
/// f32 -> T, one element: the reference of each store.
template <class T>
inline T from_f32(float f) {
  if constexpr (std::is_same_v<T, float>)
    return f;
  else if constexpr (std::is_same_v<T, bf16_t>)
    return to_bf16(f);
  else if constexpr (std::is_same_v<T, f16_t>)
    return to_f16(f);
  else if constexpr (std::is_same_v<T, i8_t>)
    return to_i8(f);
  else if constexpr (std::is_same_v<T, u8_t>)
    return to_u8(f);
  else
    return to_f8e4m3fn(f);
}

// ---- vectors -------------------------------------------------------------------------------
// For xsimd vectors: the integer vector of the same width, and the ISA's widen (W uint16 ->
// W uint32 lanes) and narrow (the low 16 bits of each lane -> W uint16), from the ISA files.

template <class V>
struct vector_ints {
  using type = xsimd::batch<std::uint32_t, typename V::arch_type>;
};

template <class VI>
SIMDNORM_ALWAYS_INLINE VI widen_u16(const std::uint16_t* p) {
  return VI(u16_lanes<VI::size>::widen(p));
}
template <class VI>
SIMDNORM_ALWAYS_INLINE void narrow_u16(std::uint16_t* p, const VI& v) {
  u16_lanes<VI::size>::narrow(p, v);
}

/// W bf16 -> W floats: the bits shifted into the top half.
template <class V>
SIMDNORM_ALWAYS_INLINE V load_bf16(const bf16_t* p) {
  if constexpr (V::size == 1) {
    return V(to_f32(*p));
  } else {
    using VI = typename vector_ints<V>::type;
    const VI w = widen_u16<VI>(reinterpret_cast<const std::uint16_t*>(p));
    return xsimd::bitwise_cast<V>(w << 16);
  }
}

/// W floats -> W bf16, as to_bf16 lane by lane.
template <class V>
SIMDNORM_ALWAYS_INLINE void store_bf16(bf16_t* p, const V& v) {
  if constexpr (V::size == 1) {
    *p = to_bf16(v.v);
  } else {
    if constexpr (bf16_hardware<V::size>::available)
      if (bf16_hardware<V::size>::store(reinterpret_cast<std::uint16_t*>(p), v)) return;
    using VI = typename vector_ints<V>::type;
    const VI b = xsimd::bitwise_cast<VI>(v);
    const VI rounded = (b + VI(0x7fffu) + ((b >> 16) & VI(1u))) >> 16;
    const auto nan = (b & VI(0x7fffffffu)) > VI(0x7f800000u);
    narrow_u16<VI>(reinterpret_cast<std::uint16_t*>(p),
                   xsimd::select(nan, (b >> 16) | VI(0x40u), rounded));
  }
}

/// W f16 -> W floats, as to_f32 lane by lane, in integer SIMD (ISAs without conversions).
template <class V>
SIMDNORM_ALWAYS_INLINE V load_f16_soft(const f16_t* p) {
  using VI = typename vector_ints<V>::type;
  const VI h = widen_u16<VI>(reinterpret_cast<const std::uint16_t*>(p));
  const VI sign = (h & VI(0x8000u)) << 16, mag = (h & VI(0x7fffu)) << 13;
  const VI e = mag & VI(0x0f800000u);
  const VI normal = mag + VI(112u << 23);
  const VI special = (normal + VI(112u << 23)) | xsimd::select(mag != e, VI(0x400000u), VI(0u));
  // subnormal: (mantissa as a normal float with exponent 113 minus 2^-14) is exact
  const V sub = xsimd::bitwise_cast<V>(mag + VI(113u << 23)) - V(0x1p-14f);
  VI r = xsimd::select(e == VI(0x0f800000u), special, normal);
  r = xsimd::select(e == VI(0u), xsimd::bitwise_cast<VI>(sub), r);
  return xsimd::bitwise_cast<V>(r | sign);
}

/// W floats -> W f16, as to_f16 lane by lane, in integer SIMD.
template <class V>
SIMDNORM_ALWAYS_INLINE void store_f16_soft(f16_t* p, const V& v) {
  using VI = typename vector_ints<V>::type;
  const VI b = xsimd::bitwise_cast<VI>(v);
  const VI sign = (b >> 16) & VI(0x8000u), a = b & VI(0x7fffffffu);
  const VI nan = VI(0x7e00u) | ((a >> 13) & VI(0x3ffu));
  const VI sub = xsimd::bitwise_cast<VI>(xsimd::bitwise_cast<V>(a) + V(0.5f)) - VI(0x3f000000u);
  const VI normal = (a + VI(0xc8000fffu) + ((a >> 13) & VI(1u))) >> 13;
  VI r = xsimd::select(a < VI(0x38800000u), sub, normal);
  r = xsimd::select(a >= VI(0x477ff000u), VI(0x7c00u), r);
  r = xsimd::select(a > VI(0x7f800000u), nan, r);
  narrow_u16<VI>(reinterpret_cast<std::uint16_t*>(p), r | sign);
}

/// The low byte of each 32-bit lane of v out to VI::size bytes.
template <class VI>
SIMDNORM_ALWAYS_INLINE void narrow_u8(std::uint8_t* p, const VI& v) {
  if constexpr (u8_lanes<VI::size>::available) {
    u8_lanes<VI::size>::narrow(p, v);
  } else {
    alignas(64) std::int32_t t[VI::size];
    v.store_aligned(t);
    for (std::size_t j = 0; j < VI::size; ++j) p[j] = std::uint8_t(t[j]);
  }
}

/// W floats -> W integer codes in [lo, hi], as to_int_code lane by lane (to_i8, to_u8).
template <class V>
SIMDNORM_ALWAYS_INLINE void store_int_codes(void* p, const V& v, float lo, float hi) {
  const V t = clamp_keep_nan(v, lo, hi);
  const V r = select(t <= V(hi), round_even(t), V(0.f));
  narrow_u8(static_cast<std::uint8_t*>(p), xsimd::to_int(r));
}

/// W floats -> W E4M3FN codes, as to_f8e4m3fn lane by lane.
template <class V>
SIMDNORM_ALWAYS_INLINE void store_f8e4m3fn(f8e4m3fn_t* p, const V& v) {
  using VI = xsimd::batch<std::int32_t, typename V::arch_type>;
  const VI b = xsimd::bitwise_cast<VI>(v);
  const VI sign = (b >> 24) & VI(0x80);
  const VI a0 = b & VI(0x7fffffff);
  const VI a = xsimd::select(a0 > VI(0x43e00000), VI(0x43e00000), a0);
  const VI sub = xsimd::bitwise_cast<VI>(xsimd::bitwise_cast<V>(a) + V(16384.f)) - VI(0x46800000);
  const VI normal = (a - VI(120 << 23) + VI(0x7ffff) + ((a >> 20) & VI(1))) >> 20;
  const VI code = xsimd::select(a < VI(0x3c800000), sub, normal) | sign;
  narrow_u8(reinterpret_cast<std::uint8_t*>(p), xsimd::select(a0 > VI(0x7f800000), VI(0x7f), code));
}

/// W 8-bit values -> W floats, element by element (convert only: not a kernel's hot path).
template <class V, class T>
inline V load_8bit(const T* p) {
  alignas(64) float t[V::size];
  for (std::size_t j = 0; j < V::size; ++j) t[j] = to_f32(p[j]);
  return load<V>(t);
}

/// The I/O policy: how the kernels read x and write y, whose element type the caller chooses
/// (float, bf16_t, f16_t). Everything else (statistics, parameters, arithmetic) is f32.
/// Always inlined: every kernel's inner loop goes through these, and the compiler left the
/// 16-bit stores (hardware path, integer fallback) as a call per vector.
struct io {
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const float* p) {
    return V::load_unaligned(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const bf16_t* p) {
    return load_bf16<V>(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const f16_t* p) {
    if constexpr (V::size == 1)
      return V(to_f32(*p));
    else if constexpr (f16_hardware<V::size>::available)
      return V(f16_hardware<V::size>::load(reinterpret_cast<const std::uint16_t*>(p)));
    else
      return load_f16_soft<V>(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const i8_t* p) {
    return load_8bit<V>(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const f8e4m3fn_t* p) {
    return load_8bit<V>(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static V load(const u8_t* p) {
    return load_8bit<V>(p);
  }
  template <class T>
  SIMDNORM_ALWAYS_INLINE static float load1(const T* p) {
    return to_f32(*p);
  }

  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(float* p, const V& v) {
    v.store_unaligned(p);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(bf16_t* p, const V& v) {
    store_bf16<V>(p, v);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(f16_t* p, const V& v) {
    if constexpr (V::size == 1)
      *p = to_f16(v.v);
    else if constexpr (f16_hardware<V::size>::available)
      f16_hardware<V::size>::store(reinterpret_cast<std::uint16_t*>(p), v);
    else
      store_f16_soft<V>(p, v);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(i8_t* p, const V& v) {
    if constexpr (V::size == 1)
      *p = to_i8(v.v);
    else
      store_int_codes<V>(p, v, -128.f, 127.f);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(u8_t* p, const V& v) {
    if constexpr (V::size == 1)
      *p = to_u8(v.v);
    else
      store_int_codes<V>(p, v, 0.f, 255.f);
  }
  template <class V>
  SIMDNORM_ALWAYS_INLINE static void store(f8e4m3fn_t* p, const V& v) {
    if constexpr (V::size == 1)
      *p = to_f8e4m3fn(v.v);
    else
      store_f8e4m3fn<V>(p, v);
  }
  /// Non-temporal store of a full vector; p is stream_alignment<V, T>()-aligned.
  template <class V, class T>
  SIMDNORM_ALWAYS_INLINE static void stream(T* p, const V& v) {
    if constexpr (std::is_same_v<T, float>)
      store_stream<V>(p, v);
    else
      store(p, v);  // 16-bit outputs: regular stores (the row plans stream them for the prefetch)
  }
  template <class T>
  SIMDNORM_ALWAYS_INLINE static void store1(T* p, float v) {
    *p = from_f32<T>(v);
  }
};

/// y[0, n) = x[0, n) converted from TX to TY through the io policy (simdnorm::convert): the
/// same conversions as the kernels' loads and stores, so it shows what they do.
template <class V, class TX, class TY>
void convert_elements(const void* x_in, void* y_out, std::size_t n) {
  constexpr std::size_t W = V::size;
  const TX* x = static_cast<const TX*>(x_in);
  TY* y = static_cast<TY*>(y_out);
  std::size_t i = 0;
  for (; i + W <= n; i += W) io::store(y + i, io::template load<V>(x + i));
  for (; i < n; ++i) io::store1(y + i, io::load1(x + i));
}

/// The fused residual add (add_rows_job): h = x + r (+ bias), element by element, in f32 and
/// rounded once into T. h may be x or r (each element is read before it is written).
template <class V, bool Bias, class T>
void add_rows_impl(const add_rows_job& job) {
  constexpr std::size_t W = V::size;
  const float* bias = job.bias;
  for (std::size_t k = 0; k < job.rows; ++k) {
    const std::ptrdiff_t off = std::ptrdiff_t(k) * job.stride;
    const T* x = static_cast<const T*>(job.x) + off;
    const T* r = static_cast<const T*>(job.r) + off;
    T* h = static_cast<T*>(job.h) + off;
    std::size_t i = 0;
    for (; i + W <= job.cols; i += W) {
      V s = io::template load<V>(x + i) + io::template load<V>(r + i);
      if constexpr (Bias) s = s + load<V>(bias + i);
      io::store(h + i, s);
    }
    for (; i < job.cols; ++i) {
      float s = io::load1(x + i) + io::load1(r + i);
      if constexpr (Bias) s = s + bias[i];
      io::store1(h + i, s);
    }
  }
}

template <class V, class T>
void add_rows(const add_rows_job& job) {
  if (job.bias != nullptr)
    add_rows_impl<V, true, T>(job);
  else
    add_rows_impl<V, false, T>(job);
}
