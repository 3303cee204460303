// simdnorm: tensor descriptors. Shapes and strides are in elements (PyTorch and DLPack
// convention), row-major order of dimensions, outermost first.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace simdnorm {

/// Maximum tensor rank accepted by any plan.
inline constexpr int max_dims = 8;

/// Shape and strides (in elements) of one tensor. Strides must be non-negative.
struct tensor_desc {
  int ndim = 0;
  std::int64_t shape[max_dims] = {};
  std::int64_t strides[max_dims] = {};

  /// A dense row-major tensor of the given shape. Dimensions beyond `max_dims` are dropped
  /// and `ndim` is set to max_dims + 1, so that plan creation reports "too many dims".
  static tensor_desc contiguous(std::initializer_list<std::int64_t> dims) noexcept {
    tensor_desc d;
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
