// avx512bf16 kernels (flags in CMakeLists.txt): the avx512bw kernels, with bf16 stores by
// vcvtneps2bf16 (x86/convert-inl.hpp: bf16_hardware).
//
// xsimd 8.1 has no AVX512-BF16 architecture, and the avx512bw unit instantiates xsimd's own
// templates (exp, ...) for xsimd::avx512bw: this unit's copies, compiled with -mavx512bf16,
// must not share those symbols (the odr_guard test), so it gets an architecture of its own
// that takes every avx512bw kernel of xsimd.
#include <xsimd/xsimd.hpp>

namespace xsimd {
struct avx512bf16 : avx512bw {
  static constexpr char const* name() noexcept { return "avx512bf16"; }
};
namespace types {
template <class T>
struct get_bool_simd_register<T, avx512bf16> {
  using type = simd_avx512_bool_register<T>;
};
XSIMD_DECLARE_SIMD_REGISTER_ALIAS(avx512bf16, avx512bw);
}  // namespace types
}  // namespace xsimd

#define SIMDNORM_ISA_NAME avx512bf16
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::avx512bf16>
#include "isa_unit.inc"
