// AArch64 parts of the element conversions (common/convert-inl.hpp): 16-bit values in and out
// of 32-bit lanes (ushll / xtn), the base ISA's f16 conversions (fcvtl / fcvtn) and, in the
// neon64_bf16 unit, FEAT_BF16's f32 -> bf16 conversion (bfcvtn). All three round to nearest even
// and keep subnormals under Linux's default FPCR (RMode 0, FZ 0), so they give the integer
// path's bits. Compiled only for AArch64.

#if defined(__aarch64__)

template <>
struct u16_lanes<4> {
  static uint32x4_t widen(const std::uint16_t* p) { return vmovl_u16(vld1_u16(p)); }
  static void narrow(std::uint16_t* p, uint32x4_t v) { vst1_u16(p, vmovn_u32(v)); }
};

template <>
struct f16_hardware<4> {
  static constexpr bool available = true;
  static float32x4_t load(const std::uint16_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
  }
  static void store(std::uint16_t* p, float32x4_t v) {
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
  }
};

#if defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
template <>
struct bf16_hardware<4> {
  static constexpr bool available = true;
  // bfcvtn quiets a NaN by setting the top fraction bit and truncating, as to_bf16 does; unlike
  // vcvtneps2bf16 it keeps subnormals, so every vector takes this path.
  static bool store(std::uint16_t* p, float32x4_t v) {
    vst1_u16(p, vreinterpret_u16_bf16(vcvt_bf16_f32(v)));
    return true;
  }
};
#endif

#endif  // __aarch64__
