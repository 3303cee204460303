// simdnorm: SIMD CPU kernels for normalization layers. Umbrella header of the C++17 API.
#pragma once
#include "simdnorm/executor.hpp"
#include "simdnorm/isa.hpp"
#include "simdnorm/plan.hpp"
#include "simdnorm/status.hpp"
#include "simdnorm/tensor.hpp"
