// simdnorm: plans. Validate shapes once, then run many times, from many threads.
//
//   simdnorm::plan p;
//   simdnorm::status s = simdnorm::plan::layer_norm(x_desc, y_desc, {/*normalized_ndim=*/1}, &p);
//   if (!s) fprintf(stderr, "%s\n", s.message());
//   s = p.execute(args);                    // all tasks, default executor (oneTBB or serial)
//   s = p.run(args, 0, begin, end);         // or: tasks [begin, end) of phase 0, this thread
//
// A plan is immutable after creation; copies share it. `run` never allocates or throws, and the
// outputs are bitwise identical whatever the partition of tasks into `run` calls, the executor
// and the thread count. A plan captures the ISA that is active when it is made.
#pragma once
#include <cstddef>
#include <memory>

#include "simdnorm/executor.hpp"
#include "simdnorm/export.h"
#include "simdnorm/isa.hpp"
#include "simdnorm/status.hpp"
#include "simdnorm/tensor.hpp"

namespace simdnorm {

namespace detail {
struct plan_impl;
struct plan_access;
}

/// Whether outputs are written with non-temporal (streaming) stores, which bypass the caches.
/// They pay when the output is far larger than the last-level cache and will not be read soon.
enum class store_policy : int {
  automatic = 0,  ///< streaming when x and y together exceed the last-level cache size
  regular = 1,    ///< ordinary stores
  streaming = 2,  ///< streaming stores wherever the output is aligned enough for them
};

/// LayerNorm over the trailing `normalized_ndim` dims:
/// y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance (torch.nn.LayerNorm,
/// ONNX LayerNormalization with axis = ndim - normalized_ndim).
struct layer_norm_params {
  int normalized_ndim = 1;  ///< 1..ndim; for an ONNX axis a: a >= 0 ? ndim - a : -a
  float eps = 1e-5f;        ///< >= 0 and not NaN
  /// Keep each row's mean as a float pair hi + lo (the row is shifted by its first element
  /// before it is summed). Costs one subtraction per element in the statistics pass and removes
  /// the rounding error of a single-float mean, which dominates for rows with a large mean
  /// (about 5e-4 output error at mean 1e4). Off = a single float mean.
  bool compensated_mean = true;
  store_policy stores = store_policy::automatic;
};

/// RMSNorm over the trailing `normalized_ndim` dims: y = x / sqrt(mean(x^2) + eps) * gamma.
struct rms_norm_params {
  int normalized_ndim = 1;  ///< 1..ndim
  float eps = 1e-6f;        ///< >= 0 and not NaN
  store_policy stores = store_policy::automatic;
};

/// Pointers for one run. Shapes and strides live in the plan; these must match them.
/// y may alias x exactly (same pointer, same strides); any other overlap is an error.
struct norm_args {
  const float* x = nullptr;      ///< required
  float* y = nullptr;            ///< required
  const float* gamma = nullptr;  ///< optional scale over the normalized block (dense)
  const float* beta = nullptr;   ///< optional shift over the normalized block (LayerNorm only)
  float* mean = nullptr;  ///< optional output, one float per row (rows in row-major order)
  float* rstd = nullptr;  ///< optional output 1/sqrt(var + eps) (RMSNorm: 1/rms) per row
  /// Scratch memory of `plan::workspace_bytes()` bytes, 64-byte aligned, for plans with more
  /// than one phase (partial statistics between phases). `run` requires it when the plan needs
  /// it; `execute` allocates it when it is null.
  void* workspace = nullptr;
};

/// A validated operation: shapes, strides, parameters and the selected kernels.
class SIMDNORM_EXPORT plan {
 public:
  plan() noexcept;
  ~plan();
  plan(const plan&) noexcept;
  plan& operator=(const plan&) noexcept;

  /// Makes a LayerNorm plan. x and y must have the same shape; the normalized (trailing) dims
  /// must be dense in both (stride 1 innermost, no padding inside a row); the outer dims may
  /// have any non-negative strides (padded rows, a slice of a batch) as long as y's rows do not
  /// overlap. On error `*out` is left unchanged.
  static status layer_norm(const tensor_desc& x, const tensor_desc& y,
                           const layer_norm_params& params, plan* out) noexcept;

  /// Makes an RMSNorm plan; the same layout rules as `layer_norm`.
  static status rms_norm(const tensor_desc& x, const tensor_desc& y,
                         const rms_norm_params& params, plan* out) noexcept;

  /// True once made successfully.
  bool valid() const noexcept { return impl_ != nullptr; }
  /// The ISA whose kernels this plan runs.
  isa kernel_isa() const noexcept;
  /// Phases run one after the other; the tasks within one phase are independent.
  std::size_t num_phases() const noexcept;
  /// Number of independent tasks in `phase`.
  std::size_t num_tasks(std::size_t phase = 0) const noexcept;
  /// Bytes of `norm_args::workspace` that `run` needs (0 for single-phase plans).
  std::size_t workspace_bytes() const noexcept;
  /// Number of rows (products of the outer dims) and the row length.
  std::size_t rows() const noexcept;
  std::size_t row_length() const noexcept;

  /// Runs tasks [begin, end) of `phase` on the calling thread. Checks the arguments first;
  /// on error writes nothing. No allocation, no exception.
  status run(const norm_args& args, std::size_t phase, std::size_t begin,
             std::size_t end) const noexcept;

  /// Runs every phase on `exec` (nullptr: `default_executor()`). Problems too small to gain
  /// from threads run inline on the calling thread without touching the executor.
  status execute(const norm_args& args, executor* exec = nullptr) const noexcept;

 private:
  friend struct detail::plan_access;
  std::shared_ptr<const detail::plan_impl> impl_;
};

/// One-shot LayerNorm: make a plan and execute it.
SIMDNORM_EXPORT status layer_norm(const tensor_desc& x, const tensor_desc& y,
                                  const layer_norm_params& params, const norm_args& args,
                                  executor* exec = nullptr) noexcept;

/// One-shot RMSNorm: make a plan and execute it.
SIMDNORM_EXPORT status rms_norm(const tensor_desc& x, const tensor_desc& y,
                                const rms_norm_params& params, const norm_args& args,
                                executor* exec = nullptr) noexcept;

}  // namespace simdnorm
