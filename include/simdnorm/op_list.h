/* simdnorm: the operations, written once.
 *
 * Every per-op entry point of the C++ and C APIs is generated from this list: for an op `name`
 * with its parameter structs simdnorm::name_params (plan.hpp) and simdnorm_name_params
 * (simdnorm.h), the list declares and defines
 *   C++  simdnorm::plan::name(x, y, params, &plan)       make a plan
 *        simdnorm::name(x, y, params, args, exec)        one-shot: make, execute
 *   C    simdnorm_plan_name(&x, &y, &params, &plan)
 *        simdnorm_name(&x, &y, &params, &args, exec)
 *        simdnorm_name_params_default()
 * What stays an op's own: its parameter structs, its plan maker (the row or channel plan), the
 * C conversion of its parameters (src/c_api.cpp), its kernels and its tests. */
#ifndef SIMDNORM_OP_LIST_H
#define SIMDNORM_OP_LIST_H

#define SIMDNORM_OP_LIST(X) \
  X(layer_norm)             \
  X(rms_norm)               \
  X(lp_norm)                \
  X(batch_norm)             \
  X(group_norm)             \
  X(instance_norm)          \
  X(mean_variance_norm)

#endif /* SIMDNORM_OP_LIST_H */
