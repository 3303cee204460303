// sse2 kernels (flags in CMakeLists.txt).
#define SIMDNORM_ISA_NAME sse2
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::sse2>
#include "isa_unit.inc"
