// neon64_bf16 kernels (flags in CMakeLists.txt): the neon64 kernels, with bf16 stores by BFCVTN
// (arm/convert-inl.hpp: bf16_hardware), for AArch64 cores with FEAT_BF16 (Armv8.6-A; Neoverse
// V1/N2/V2, Graviton 3/4, Cortex-A510/A710 and later, Apple M2+).
//
// xsimd 8.1 has no BF16 architecture, and the neon64 unit instantiates xsimd's own templates
// (exp, ...) for xsimd::neon64: this unit's copies, compiled with +bf16, must not share those
// symbols (the odr_guard test), so it gets an architecture of its own that takes every neon64
// kernel of xsimd.
#include <type_traits>

// xsimd 8.1's neon64 broadcast of non-double values returns batch<T, neon64> whatever A is
// (xsimd_neon64.hpp: broadcast<neon64>), the one neon64 kernel that does not pass A through.
// batch's constructor calls kernel::broadcast by qualified name, which sees only the overloads
// declared before xsimd's headers define it: this one is declared here, defined below.
namespace xsimd {
struct neon64_bf16;
template <class T, class A>
class batch;
namespace kernel {
template <class A, class T, std::enable_if_t<!std::is_same_v<T, double>, int> = 0>
batch<T, A> broadcast(T val, neon64_bf16 const&) noexcept;
}  // namespace kernel
}  // namespace xsimd

#include <xsimd/xsimd.hpp>

namespace xsimd {
struct neon64_bf16 : neon64 {
  static constexpr char const* name() noexcept { return "arm64+neon+bf16"; }
};
namespace types {
XSIMD_DECLARE_SIMD_REGISTER_ALIAS(neon64_bf16, neon64);
template <class T>
struct get_bool_simd_register<T, neon64_bf16> : detail::neon_bool_simd_register<T, neon64_bf16> {};
}  // namespace types
namespace kernel {
template <class A, class T, std::enable_if_t<!std::is_same_v<T, double>, int>>
batch<T, A> broadcast(T val, neon64_bf16 const&) noexcept {
  return broadcast<A>(val, neon{});
}
}  // namespace kernel
}  // namespace xsimd

#define SIMDNORM_ISA_NAME neon64_bf16
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::neon64_bf16>
#include "isa_unit.inc"
