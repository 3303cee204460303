// Internal: the plan interface every op family implements, and shared validation helpers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "isa_table.hpp"
#include "simdnorm/plan.hpp"

namespace simdnorm::detail {

/// The ops of simdnorm/op_list.h: which args struct a plan takes.
enum class op_id : int {
#define SIMDNORM_OP_ID(op) op,
  SIMDNORM_OP_LIST(SIMDNORM_OP_ID)
#undef SIMDNORM_OP_ID
};

/// "layer_norm", ...: the op's name in the list.
const char* op_name(op_id op) noexcept;

/// Every operand of every op, as the plans read them: each public args struct is copied into
/// one of these (its other fields null), so that a plan checks one struct for the operands
/// its op does not take.
struct call_args : norm_args,
                   residual_operands,
                   quantized_outputs,
                   modulation_operands,
                   gate_operand,
                   running_statistics {};

/// A made, immutable plan. Subclasses hold their shapes and kernels; `run_tasks` is called only
/// after `check_args` accepted the arguments (and a workspace of workspace_bytes() is present)
/// and with a valid phase and task range.
struct plan_impl {
  op_id op_kind = op_id::layer_norm;  ///< the op it was made for (set by its maker)
  const kernel_table* kernels = nullptr;
  std::size_t rows = 0, cols = 0;

  virtual ~plan_impl() = default;
  virtual std::size_t num_phases() const noexcept { return 1; }
  virtual std::size_t num_tasks(std::size_t phase) const noexcept = 0;
  virtual std::size_t workspace_bytes() const noexcept { return 0; }
  virtual status check_args(const call_args& args) const noexcept = 0;
  virtual void run_tasks(const call_args& args, std::size_t phase, std::size_t begin,
                         std::size_t end) const noexcept = 0;
};

/// Installs a made plan_impl into a public plan (plan creation functions use this).
struct plan_access {
  static void set(plan* p, std::shared_ptr<const plan_impl> impl) noexcept {
    p->impl_ = std::move(impl);
  }
};

/// Checks rank, positive dims, non-negative strides and that every element count and address
/// extent fits in 64 bits (and in bytes). `name` is used in messages ("x", "y").
status check_tensor(const tensor_desc& t, const char* name) noexcept;

/// Checks that x and y have the same rank and shape.
status check_same_shape(const tensor_desc& x, const tensor_desc& y) noexcept;

/// Elements from the first to one past the last element addressed by `t` (valid after
/// check_tensor).
std::int64_t span_elements(const tensor_desc& t) noexcept;

/// Bytes from the first to one past the last element addressed by `t` (valid after
/// check_tensor).
inline std::int64_t span_bytes(const tensor_desc& t) noexcept {
  return span_elements(t) * std::int64_t(dtype_size(t.type));
}

/// True when one step of `outer_stride` spans `n` steps of `stride` exactly: a dim of n
/// elements at `stride` then merges into the dim outside it. The product may overflow, since
/// check_tensor bounds (n - 1) * stride only; one that does spans nothing.
inline bool spans(std::int64_t outer_stride, std::int64_t stride, std::int64_t n) noexcept {
  std::int64_t product = 0;
  return !__builtin_mul_overflow(stride, n, &product) && product == outer_stride;
}

/// True when t's dims [first, ndim) are dense row-major (size-1 dims may have any stride).
bool dense_suffix(const tensor_desc& t, int first) noexcept;

/// x and y may be the same tensor (same pointer, `same_layout`: equal strides and types) or
/// disjoint byte ranges.
status check_aliasing(const void* x, std::int64_t x_bytes, const void* y, std::int64_t y_bytes,
                      bool same_layout) noexcept;

/// Last-level cache size in bytes (sysfs, else sysconf; 32 MiB when unknown).
std::size_t last_level_cache_bytes() noexcept;

/// What the machine's caches hold together, in bytes: the L2 of every online CPU plus the L3
/// (victim or non-inclusive on current x86 server parts, so the two add up); the larger of the
/// L2s and the last-level cache where there is no L3.
std::size_t total_cache_bytes() noexcept;

/// Whether a kernel writing `out_bytes` after reading `in_bytes` should stream its stores:
/// store_policy::automatic streams when x and y together exceed 3/4 of total_cache_bytes(),
/// i.e. when y could not be in any cache for the next op anyway (see store_policy).
bool use_streaming_stores(store_policy p, std::size_t in_bytes, std::size_t out_bytes) noexcept;

/// Checks eps: finite and non-negative.
status check_eps(float eps) noexcept;

/// "centered", "squares", "magnitudes"; "unknown" for a value that is not a moments_kind.
const char* moments_kind_name(moments_kind k) noexcept;

/// True when no two index tuples of `t` address the same element. Sufficient test: with the
/// dims sorted by stride, each one steps past everything the smaller ones cover.
bool elements_disjoint(const tensor_desc& t) noexcept;

}  // namespace simdnorm::detail
