/* simdnorm: the element types of x and y, written once.
 *
 * f32, bf16 and f16 are the types of x and y. i8 (int8), u8 (uint8) and f8e4m3fn (OCP FP8
 * E4M3FN: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no Inf, NaN S.1111.111, largest
 * 448) are output types: the y of LayerNorm and RMSNorm (quantized with a scale, see
 * simdnorm::quant_params) and either side of simdnorm::convert.
 *
 * The C++ and C enums, dtype_name / dtype_size and the kernel tables' type axes come from this
 * table. Statistics, parameters (gamma, beta), mean / rstd outputs and running statistics are
 * f32 whatever the element type; x and y are converted at the kernels' load / store edge.
 *
 * X(name, NAME, id, bytes):
 *   name   enum value (simdnorm::dtype::name) and the name dtype_name returns
 *   NAME   the same in capitals, for the C enum (SIMDNORM_DTYPE_<NAME>)
 *   id     stable integer value of both enums
 *   bytes  size of one element
 */
#ifndef SIMDNORM_DTYPE_LIST_H
#define SIMDNORM_DTYPE_LIST_H

#define SIMDNORM_DTYPE_LIST(X) \
  X(f32, F32, 0, 4)            \
  X(bf16, BF16, 1, 2)          \
  X(f16, F16, 2, 2)            \
  X(i8, I8, 3, 1)              \
  X(f8e4m3fn, F8E4M3FN, 4, 1)  \
  X(u8, U8, 5, 1)

#endif /* SIMDNORM_DTYPE_LIST_H */
