// simdnorm: tensor descriptors. Shapes and strides are in elements (PyTorch and DLPack
// convention), row-major order of dimensions, outermost first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "simdnorm/dtype_list.h"

namespace simdnorm {

/// Element type of a tensor (simdnorm/dtype_list.h): f32 (IEEE binary32), bf16 (bfloat16, the
/// top 16 bits of a binary32), f16 (IEEE binary16); and the 8-bit output types i8 (int8) and
/// f8e4m3fn (OCP FP8 E4M3FN).
enum class dtype : int {
#define SIMDNORM_DTYPE_ENUM(name, NAME, id, bytes) name = id,
  SIMDNORM_DTYPE_LIST(SIMDNORM_DTYPE_ENUM)
#undef SIMDNORM_DTYPE_ENUM
};

/// Bytes per element of `t`, or 0 for a value that is not a dtype.
constexpr std::size_t dtype_size(dtype t) noexcept {
#define SIMDNORM_DTYPE_SIZE(name, NAME, id, bytes) \
  if (t == dtype::name) return bytes;
  SIMDNORM_DTYPE_LIST(SIMDNORM_DTYPE_SIZE)
#undef SIMDNORM_DTYPE_SIZE
  return 0;
}

/// "f32", "bf16", "f16", "i8", "f8e4m3fn", or "unknown".
constexpr const char* dtype_name(dtype t) noexcept {
#define SIMDNORM_DTYPE_NAME(name, NAME, id, bytes) \
  if (t == dtype::name) return #name;
  SIMDNORM_DTYPE_LIST(SIMDNORM_DTYPE_NAME)
#undef SIMDNORM_DTYPE_NAME
  return "unknown";
}

/// Maximum tensor rank accepted by any plan.
inline constexpr int max_dims = 8;

/// Shape, strides (in elements) and element type of one tensor. Strides must be non-negative.
struct tensor_desc {
  int ndim = 0;
  std::int64_t shape[max_dims] = {};
  std::int64_t strides[max_dims] = {};
  dtype type = dtype::f32;

  /// A dense row-major tensor of the given shape. Dimensions beyond `max_dims` are dropped
  /// and `ndim` is set to max_dims + 1, so that plan creation reports "too many dims".
  static tensor_desc contiguous(std::initializer_list<std::int64_t> dims,
                                dtype type = dtype::f32) noexcept {
    tensor_desc d;
    d.type = type;
    for (std::int64_t v : dims) {
      if (d.ndim == max_dims) {
        d.ndim = max_dims + 1;
        return d;
      }
      d.shape[d.ndim++] = v;
    }
    std::int64_t s = 1;  // the product wraps (unsigned) rather than overflow; plans report it
    for (int i = d.ndim - 1; i >= 0; --i) {
      d.strides[i] = s;
      s = std::int64_t(std::uint64_t(s) * std::uint64_t(d.shape[i]));
    }
    return d;
  }
};

}  // namespace simdnorm
