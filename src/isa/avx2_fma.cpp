// avx2_fma kernels: AVX2 with FMA3 (flags in CMakeLists.txt).
#define SIMDNORM_ISA_NAME avx2_fma
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::fma3<xsimd::avx2>>
#include "isa_unit.inc"
