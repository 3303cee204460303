// avx512bw kernels (flags in CMakeLists.txt).
#define SIMDNORM_ISA_NAME avx512bw
#define SIMDNORM_ISA_VECTOR xsimd::batch<float, xsimd::avx512bw>
#include "isa_unit.inc"
