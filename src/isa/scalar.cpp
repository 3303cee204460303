// scalar kernels: the same kernel templates on a one-lane vector type. The portable fallback
// and the readable reference for every ISA.
#define SIMDNORM_ISA_NAME scalar
#define SIMDNORM_ISA_VECTOR scalar_vector
#include "isa_unit.inc"
