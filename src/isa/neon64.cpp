// neon64 kernels (flags in CMakeLists.txt).
#define SIMDNORM_ISA_NAME neon64
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::neon64>
#include "isa_unit.inc"
