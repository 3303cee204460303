// The converted modules' forward calls (module_calls.cpp), bound into simdnorm_torch._C.
#pragma once

#include <pybind11/pybind11.h>

namespace simdnorm_torch {

// Adds _C.layer_norm_call, rms_norm_call, rms_norm_gated_call, group_norm_call,
// instance_norm_call and batch_norm_call to `m`, and call_obstacle (the checks alone, for
// simdnorm_torch.normalize).
void bind_module_calls(pybind11::module_& m);

}  // namespace simdnorm_torch
