// sse4_2 kernels (flags in CMakeLists.txt).
#define SIMDNORM_ISA_NAME sse4_2
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::sse4_2>
#include "isa_unit.inc"
