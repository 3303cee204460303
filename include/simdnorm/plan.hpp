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
#include <cstdint>
#include <memory>
#include <type_traits>

#include "simdnorm/executor.hpp"
#include "simdnorm/export.h"
#include "simdnorm/isa.hpp"
#include "simdnorm/op_list.h"
#include "simdnorm/status.hpp"
#include "simdnorm/tensor.hpp"

namespace simdnorm {

namespace detail {
struct plan_impl;
struct plan_access;
}  // namespace detail

/// Whether outputs are written with non-temporal (streaming) stores, which bypass the caches
/// and skip the read-for-ownership of each output line. They pay off only when y could not
/// stay in any cache; where y would fit in the L3 they send it to memory and cost up to half
/// the bandwidth (measurements: docs/design.md, "Store policy"). Never changes a bit of y.
/// Streaming stores write f32 outputs; a bf16 or f16 y is stored regularly, but where the
/// policy streams, the row ops prefetch x ahead for it as they do for an f32 y.
enum class store_policy : int {
  /// streaming when x and y together exceed 3/4 of all the machine's caches (the L2 of every
  /// online CPU plus the L3): y could not stay in cache for the next op anyway.
  automatic = 0,
  regular = 1,    ///< ordinary stores
  streaming = 2,  ///< streaming stores wherever the output is aligned enough for them
};

/// Which part of a norm a plan runs (split statistics), for the ops with statistics: the row
/// ops, BatchNorm training, GroupNorm, InstanceNorm and MeanVarianceNormalization. A norm whose
/// data lives in parts on several processes (tensor parallelism shards the hidden dim;
/// SyncBatchNorm splits the batch) runs in three steps: each process makes the `moments` of its
/// part of every row (or statistics group: a BatchNorm channel, a GroupNorm (n, group)), the
/// records are gathered (MPI_Allgather, say) and merged in a fixed order (merge_moments), and each
/// process runs `apply` on its part with the merged records. The one-call plan (`full`) runs the
/// same kernels: its results are bitwise those of moments, a merge of that one part and apply,
/// except for rows of at most 256 elements, whose float-lane statistics in `full` agree with
/// the staged path within the error bound (docs/numerics.md).
enum class stats_stage : int {
  full = 0,     ///< statistics and normalize (the default)
  moments = 1,  ///< statistics only: one record per row in norm_args::moments_out; y unused
  apply = 2,    ///< normalize only, from norm_args::moments_in (one record per whole row)
};

/// What a moments record summarizes; merge_moments and apply refuse to mix kinds.
enum class moments_kind : std::int32_t {
  centered = 1,    ///< mean and M2 = sum (x - mean)^2 (LayerNorm)
  squares = 2,     ///< m2 = sum x^2, mean 0 (RMSNorm, L2 normalization)
  magnitudes = 3,  ///< m2 = sum |x|, mean 0 (L1 normalization)
};

/// The statistics of a part of a row: a plain 32-byte record that can travel between
/// processes as bytes (all processes of one job run the same build).
struct moments {
  std::int64_t count = 0;  ///< values summarized, >= 1
  double mean = 0.0;       ///< their mean (centered), else 0
  double m2 = 0.0;         ///< see moments_kind
  moments_kind kind = moments_kind::centered;
  std::int32_t reserved = 0;  ///< 0
};

/// out[i] = the merge of parts[p * n + i] over p = 0 .. num_parts - 1, in that order (the
/// layout MPI_Allgather gives when every process sends n records): Chan's formula in double,
/// a left fold, so the result depends only on the records and their order, never on threads.
/// Counts add exactly (int64). `out` may be `parts` (the first part's records). Errors
/// (nothing written): null pointers with n > 0, num_parts 0, a count < 1, kinds that differ
/// along one i or are not a moments_kind, counts whose sum overflows.
SIMDNORM_EXPORT status merge_moments(const moments* parts, std::size_t num_parts, std::size_t n,
                                     moments* out) noexcept;

/// How LayerNorm and RMSNorm scale y into an 8-bit y (the y descriptor's type is dtype::i8,
/// dtype::u8 or dtype::f8e4m3fn): y is computed in f32 as for a float output, then
/// q = convert(y * inv_scale) (+ zero point), inv_scale = 1 / scale rounded once in f32 (PyTorch's
/// and vLLM's quantizers multiply by the inverse scale too; ONNX QuantizeLinear divides, which can
/// differ by one code where y / scale is within an ulp of a rounding boundary). The conversion
/// rounds to nearest even and saturates: i8 to [-128, 127], u8 to [0, 255], f8e4m3fn to +-448
/// (OCP E4M3FN). A dynamic scale that would be positive but below FLT_MIN is FLT_MIN, so that
/// 1 / scale is finite (y within 255 FLT_MIN of 0: the codes step by FLT_MIN).
enum class quant_scaling : int {
  /// Symmetric, one scale per row or per block of `quant_params::block` elements (i8,
  /// f8e4m3fn): scale = amax / qmax (qmax = 127 for i8, 448 for f8e4m3fn; amax = max |y| over
  /// the row or block), written to quantized_outputs::y_scale; q in [-127, 127] (i8). amax = 0
  /// gives scale 0 and code 0 throughout; an amax that is not finite (a NaN or Inf in y) gives
  /// scale NaN or +Inf and the NaN code throughout (i8: 0, f8e4m3fn: 0x7f). (vLLM's dynamic
  /// per-token int8 and fp8 quantization; ggml's q8_0 with block = 32.)
  dynamic = 0,
  /// Static: q = sat(rne(y * (1 / scale)) + zero_point) with quant_params::scale and
  /// zero_point for the whole tensor (oneDNN's and PyTorch's quantized norms: PyTorch's quint8
  /// is a u8 y); NaN gives code 0 (i8, u8) or 0x7f (f8e4m3fn).
  per_tensor = 1,
  /// Asymmetric, one scale and zero point per row or block (i8, u8), as ONNX
  /// DynamicQuantizeLinear (u8) and KleidiAI's per-row int8 packing define them: the range
  /// [lo, hi] = [min(0, min y), max(0, max y)] maps onto the 256 codes from qmin (-128 for i8, 0
  /// for u8): scale = (hi - lo) / 255, zero_point = sat(rne(qmin - lo / scale)),
  /// q = sat(rne(y * (1 / scale)) + zero_point). Scales go to quantized_outputs::y_scale and zero
  /// points to y_zero_point. A row or block of zeros gets scale 1 and q = zero_point (ONNX
  /// Runtime's choice: never a division by 0). One with a NaN or Inf gets scale NaN or +Inf,
  /// zero point 0 and code 0 throughout, so that it dequantizes to NaN.
  dynamic_asymmetric = 2,
  /// Static, one scale and zero point per channel of a BatchNorm, GroupNorm or InstanceNorm y
  /// (quant_params::channel_scales and channel_zero_points): q = sat(rne(y * (1 / scale[c])) +
  /// zero_point[c]) as per_tensor, channel by channel (oneDNN's per-channel output scales).
  per_channel = 3,
};

/// Quantized outputs and the amax side output of LayerNorm and RMSNorm (docs/fusions.md), and
/// the static 8-bit y of BatchNorm, GroupNorm and InstanceNorm (per_tensor, per_channel). Row
/// plans with an 8-bit y or row_amax keep every row whole in one task (no split statistics:
/// stats_stage::full only).
struct quant_params {
  quant_scaling scaling = quant_scaling::dynamic;
  /// dynamic and dynamic_asymmetric: elements per scale along the row; 0: one scale per row.
  /// Otherwise 32..256 and a divisor of the row length; the scales are (rows, row length /
  /// block), row-major.
  int block = 0;
  float scale = 1.f;   ///< per_tensor: finite and > 0
  int zero_point = 0;  ///< per_tensor: in [-128, 127] for i8, [0, 255] for u8, 0 for f8e4m3fn
  /// Writes max |y| of each row (of y in f32, before its rounding into y's type; rounding is
  /// monotonic, so rounded it is the amax of y as stored) to quantized_outputs::amax, whatever y's
  /// type: the "current scaling" input of a downstream fp8 quantizer. NaN in y gives NaN.
  bool row_amax = false;
  /// per_channel: C scales (each finite, > 0, with a finite inverse) and C zero points (null: all
  /// 0; the ranges of `zero_point`), read only while the plan is made.
  const float* channel_scales = nullptr;
  const std::int32_t* channel_zero_points = nullptr;
};

/// LayerNorm over the trailing `normalized_ndim` dims:
/// y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance (torch.nn.LayerNorm,
/// ONNX LayerNormalization with axis = ndim - normalized_ndim).
/// Layout (the row ops: LayerNorm, RMSNorm, Lp): x and y have the same shape; the normalized
/// (trailing) dims are dense in both (stride 1 innermost, no padding inside a row); the outer
/// dims may have any non-negative strides (padded rows, a slice of a batch) as long as y's rows
/// do not overlap.
struct layer_norm_params {
  int normalized_ndim = 1;  ///< 1..ndim; for an ONNX axis a: a >= 0 ? ndim - a : -a
  float eps = 1e-5f;        ///< finite and >= 0
  /// Keep each row's mean as a float pair hi + lo (the row is shifted by a float near its
  /// mean, its first element or first vector, before it is summed). Costs one subtraction per
  /// element in the statistics pass and removes the rounding error of a single-float mean, which
  /// dominates for rows with a large mean (about 5e-4 output error at mean 1e4). Off = a single
  /// float mean.
  bool compensated_mean = true;
  store_policy stores = store_policy::automatic;
  /// gamma_eff = gamma + weight_offset, computed once per call in f32 (Megatron's
  /// LayerNorm1P: 1); needs norm_args::gamma when nonzero. The weights stay as stored.
  float weight_offset = 0.f;
  stats_stage stage = stats_stage::full;  ///< split statistics: see stats_stage
  quant_params quant;                     ///< 8-bit y and the amax output: see quant_params
  /// adaLN modulation (DiT): y = norm(x) [* gamma + beta] * (1 + scale) + shift, with one
  /// scale and one shift row per batch of `modulation_tokens` consecutive rows (x [B, T, D]:
  /// T), given per call in the args' modulation_operands. 0: no modulation.
  /// Must divide the number of rows; not with stats_stage::moments (docs/fusions.md).
  std::int64_t modulation_tokens = 0;
  /// Post-norm residual (Gemma 2/3's sandwich norms, OLMo-2): y = norm(x) + residual, the sum
  /// in f32 after the affine terms and rounded once into y's type. args.residual is then that
  /// residual (x's shape, strides and type; y may be it or x, same layout: the residual stream
  /// updated in place); residual_out and residual_bias are refused. A float y, no quant.row_amax,
  /// no adaLN modulation; with stats_stage::apply, not moments (docs/fusions.md).
  bool residual_after_norm = false;
};

/// RMSNorm over the trailing `normalized_ndim` dims: y = x / sqrt(mean(x^2) + eps) * gamma.
/// The layout rules of layer_norm_params.
struct rms_norm_params {
  int normalized_ndim = 1;  ///< 1..ndim
  float eps = 1e-6f;        ///< finite and >= 0
  store_policy stores = store_policy::automatic;
  /// gamma_eff = gamma + weight_offset, computed once per call in f32 (Gemma's `x * (1 + w)`:
  /// 1); needs norm_args::gamma when nonzero. The weights stay as stored.
  float weight_offset = 0.f;
  stats_stage stage = stats_stage::full;  ///< split statistics: see stats_stage
  quant_params quant;                     ///< 8-bit y and the amax output: see quant_params
  /// adaLN modulation (DiT): y = norm(x) [* gamma + beta] * (1 + scale) + shift, with one
  /// scale and one shift row per batch of `modulation_tokens` consecutive rows (x [B, T, D]:
  /// T), given per call in the args' modulation_operands. 0: no modulation.
  /// Must divide the number of rows; not with stats_stage::moments (docs/fusions.md).
  std::int64_t modulation_tokens = 0;
  /// Gated RMSNorm with the gate before the norm (Mamba-2's norm_before_gate=False, its
  /// default): y = rms_norm(x * silu(gate)) * gamma. Each task stores h = x * silu(gate), in f32
  /// and rounded once into y's type, in y and normalizes it there, so y must be f32, bf16 or
  /// f16 (with y f32 h is Mamba's f32 product). Needs rms_norm_args::gate; stats_stage::full
  /// only; not with the residual add or adaLN modulation (docs/fusions.md).
  bool gate_before_norm = false;
  /// Post-norm residual (Gemma 2/3's sandwich norms, OLMo-2): y = norm(x) + residual, the sum
  /// in f32 after the affine terms and rounded once into y's type. args.residual is then that
  /// residual (x's shape, strides and type; y may be it or x, same layout: the residual stream
  /// updated in place); residual_out and residual_bias are refused. A float y, no quant.row_amax,
  /// no adaLN modulation, no gate; with stats_stage::apply, not moments (docs/fusions.md).
  bool residual_after_norm = false;
};

/// Lp normalization along one axis: y = x / max(||x||_p, eps), ||x||_1 = sum |x|,
/// ||x||_2 = sqrt(sum x^2) (torch.nn.functional.normalize(x, p, dim, eps); ONNX
/// LpNormalization is eps = 0, where a row of zeros gives NaN as 0 / 0). The axis must be the
/// innermost one that is not of size 1 (rows, as for layer_norm_params; an embedding matrix
/// [N, D] with axis -1 or 1). No gamma, beta or mean; norm_args::rstd (optional) receives
/// 1 / max(||x||_p, eps) per row.
struct lp_norm_params {
  int axis = -1;       ///< in [-ndim, ndim)
  int p = 2;           ///< 1 or 2
  float eps = 1e-12f;  ///< finite and >= 0 (torch's default)
  store_policy stores = store_policy::automatic;
  stats_stage stage = stats_stage::full;  ///< split statistics: see stats_stage
};

/// Where the channel axis of a BatchNorm, GroupNorm or InstanceNorm tensor is. The shape in the
/// tensor_desc is given in this order; the strides may be anything the plan accepts (below).
///   nchw: (N, C, D1..Dk), channel axis 1 (k = 0: [N, C]; k = 1, 2, 3: BatchNorm1d/2d/3d);
///         also accepts channels-last strides (PyTorch channels_last) on that logical shape.
///   nhwc: (N, D1..Dk, C), channel axis ndim - 1 (TensorFlow, ONNX Runtime NHWC).
enum class channel_layout : int { nchw = 0, nhwc = 1 };

/// How BatchNorm training updates the running statistics, with m = momentum:
///   pytorch: running = (1 - m) * running + m * batch; the variance with the UNBIASED batch
///            variance (torch.nn.BatchNorm, default m = 0.1);
///   onnx:    running = m * running + (1 - m) * batch; the variance with the BIASED batch
///            variance (ONNX BatchNormalization-15 training_mode, default m = 0.9).
enum class momentum_convention : int { pytorch = 0, onnx = 1 };

/// BatchNorm over channel axis 1 (nchw) or the last axis (nhwc):
/// y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], optionally then max(y, 0).
///
/// Layout: x and y have the same shape, ndim >= 2, in `layout` order. Accepted strides: the dims
/// after the channel axis dense in x and y and the dims before it mergeable into one strided
/// dim (padded or sliced batch), or the channel axis dense (stride 1) and all other dims
/// mergeable into one strided dim of rows (channels last). Training needs more than one value
/// per channel.
///
/// Inference (`training` false): mean and var are the running statistics, given here and read
/// only while the plan is made: they are folded (in double) with gamma and beta into one scale
/// and one shift per channel, so each element costs one FMA. A new running state needs a new
/// plan. norm_args then carries only x and y.
///
/// Training (`training` true): mean and var are the batch statistics of this call (biased
/// variance, over N and every spatial position); gamma, beta, the running statistics, the batch
/// counter and the saved mean / inverse std go in batch_norm_args per call.
struct batch_norm_params {
  channel_layout layout = channel_layout::nchw;
  float eps = 1e-5f;       ///< finite and >= 0
  bool training = false;   ///< batch statistics (training-mode forward) instead of running ones
  bool fuse_relu = false;  ///< y = max(y, 0) (NaN stays NaN)
  store_policy stores = store_policy::automatic;
  // Inference only (must be null in training plans):
  const float* running_mean = nullptr;  ///< [C], required for inference
  const float* running_var = nullptr;   ///< [C], required for inference, every value >= 0
  const float* gamma = nullptr;         ///< [C] or null (1)
  const float* beta = nullptr;          ///< [C] or null (0)
  // Training only (the running-statistics update):
  /// In [0, 1]. Weight of the batch (pytorch) or of the old value (onnx); ONNX models carry
  /// their own `momentum` attribute, whose default is 0.9. Ignored when `cumulative`.
  float momentum = 0.1f;
  momentum_convention convention = momentum_convention::pytorch;
  /// PyTorch momentum=None: a cumulative average, running = running + (batch - running) / k
  /// with k = *batch_norm_args::num_batches_tracked + 1 (the counter is then incremented).
  bool cumulative = false;
  /// Training only: split statistics (SyncBatchNorm; see stats_stage). One record per
  /// channel. `apply` writes mean, rstd and the running statistics from the merged records
  /// (their count, not this part's, enters the unbiased variance) and increments the batch
  /// counter, so every process that applies the same records keeps the same running state.
  stats_stage stage = stats_stage::full;
  /// An 8-bit y (i8, u8, f8e4m3fn): quant.scaling per_tensor or per_channel, folded (in double)
  /// into each channel's scale and shift. With fuse_relu the codes are those of max(y, 0),
  /// max(code, zero point) before the rounding; every channel must then have the same zero point
  /// (scales may differ: symmetric per-channel int8 has zero points 0).
  quant_params quant;
};

/// GroupNorm: statistics per (n, group) over the group's C / num_groups channels and every
/// spatial position (biased variance); y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c].
/// ndim >= 2 and the stride rules of batch_norm_params, where the batch dim (axis 0) may have
/// its own stride.
/// gamma and beta (norm_args, optional) have C entries (torch.nn.GroupNorm, ONNX
/// GroupNormalization-21), or num_groups entries with `per_group_affine` (the deprecated ONNX
/// GroupNormalization-18). norm_args::mean and ::rstd (optional) receive N * num_groups floats
/// in (n, group) order.
struct group_norm_params {
  int num_groups = 1;  ///< >= 1 and divides C
  channel_layout layout = channel_layout::nchw;
  float eps = 1e-5f;  ///< finite and >= 0
  bool per_group_affine = false;
  store_policy stores = store_policy::automatic;
  stats_stage stage = stats_stage::full;  ///< split statistics: one record per (n, group)
  quant_params quant;  ///< an 8-bit y: as batch_norm_params::quant, scales per channel c
};

/// InstanceNorm: statistics per (n, c) over the spatial dims (biased variance);
/// y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c], gamma and beta optional (norm_args,
/// C entries). norm_args::mean and ::rstd (optional) receive N * C floats in (n, c) order.
/// The tensor needs at least one spatial dim (ndim >= 3); the stride rules of group_norm_params.
struct instance_norm_params {
  channel_layout layout = channel_layout::nchw;
  float eps = 1e-5f;  ///< finite and >= 0
  store_policy stores = store_policy::automatic;
  stats_stage stage = stats_stage::full;  ///< split statistics: one record per (n, c)
  quant_params quant;                     ///< an 8-bit y: as batch_norm_params::quant
};

/// ONNX MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + eps) with mean and biased
/// variance over `axes` (eps is added to the standard deviation; ONNX fixes it at 1e-9). No
/// affine, no outputs besides y. After dropping size-1 dims and merging neighbours, the kept and
/// reduced dims must fall in the pattern [kept][reduced][kept][reduced] with the last reduced
/// group (if any) innermost and dense, or the last kept group innermost and dense: this covers
/// axes {0, 2, 3} (default), {2, 3}, {1, 2, 3}, {0}, {1}, {0, 1, 2, 3} of an NCHW tensor.
struct mean_variance_norm_params {
  int num_axes = 3;                ///< 1..ndim
  int axes[max_dims] = {0, 2, 3};  ///< distinct, each in [-ndim, ndim)
  float eps = 1e-9f;               ///< finite and >= 0; added to sqrt(var)
  store_policy stores = store_policy::automatic;
  stats_stage stage = stats_stage::full;  ///< split statistics: one record per kept index
};

/// The operands of every op, for one run. Shapes and strides live in the plan; these must match
/// them. y may alias x exactly (same pointer, same strides); any other overlap is an error.
/// An op's own operands (the residual add, quantized outputs, running statistics, ...) come in
/// its args struct below, which extends this one: `layer_norm_args`, `batch_norm_args`, ... A
/// plan runs with its op's args struct or with a plain norm_args (no operands of its own).
struct norm_args {
  const void* x = nullptr;       ///< required: elements of the x descriptor's dtype
  void* y = nullptr;             ///< required: elements of the y descriptor's dtype
  const float* gamma = nullptr;  ///< optional scale over the normalized block (dense)
  const float* beta = nullptr;   ///< optional shift over the normalized block (not RMSNorm)
  float* mean = nullptr;         ///< optional output, one float per row (rows in row-major order)
  /// optional output per row: 1/sqrt(var + eps) (RMSNorm: 1/rms, Lp: 1/max(norm, eps))
  float* rstd = nullptr;
  /// Scratch memory of `plan::workspace_bytes()` bytes, 64-byte aligned, for plans with more
  /// than one phase (partial statistics between phases). `run` requires it when the plan needs
  /// it; `execute` allocates it when it is null.
  void* workspace = nullptr;
  // For the channel ops gamma and beta have C entries (GroupNorm per-group form: num_groups;
  // BatchNorm inference takes them in batch_norm_params instead), and mean and rstd receive one
  // float per statistics group: C for BatchNorm training (the batch mean and
  // 1/sqrt(biased var + eps)), N * num_groups for GroupNorm, N * C for InstanceNorm.

  // Split statistics (see stats_stage), one record per row (row-major order) or statistics
  // group (the order of mean and rstd):
  /// stats_stage::moments: written. Such a plan reads x (row ops: and residual, storing h to
  /// residual_out) and writes nothing else.
  moments* moments_out = nullptr;
  /// stats_stage::apply: read, the statistics of the whole row or group (merged). Their count,
  /// not this part's size, divides the sums. The row ops' residual add is refused here.
  const moments* moments_in = nullptr;
};

/// The residual add of a pre-norm transformer block, fused into a row op (LayerNorm, RMSNorm,
/// Lp). With `residual`, the op computes h = x + residual, stores h to `residual_out` and
/// normalizes h as stored: y = norm(h). residual and residual_out have x's shape, strides and
/// type. The sum is taken in f32 and rounded once into x's type, and the statistics are those
/// of the rounded h (vLLM's fused_add_rms_norm, and PyTorch's x + r followed by the norm).
/// residual_out may be residual or x (in place, as engines update the residual stream); y
/// may be x, but not residual_out. A plan with residual_after_norm (LayerNorm, RMSNorm) adds
/// `residual` after the norm instead, y = norm(x) + residual, and takes no residual_out.
struct residual_operands {
  const void* residual = nullptr;  ///< optional; requires residual_out
  void* residual_out = nullptr;    ///< the sum h, the next layer's residual
  /// Optional, with `residual`: h = (x + residual) + residual_bias, a bias over the row ([row
  /// length] floats, dense, broadcast over the rows), summed in f32 in that order and rounded
  /// once into x's type (ONNX Runtime's SkipLayerNormalization bias input).
  const float* residual_bias = nullptr;
};

/// The outputs of a LayerNorm or RMSNorm plan with an 8-bit y or quant_params::row_amax.
struct quantized_outputs {
  /// Written with an 8-bit y and dynamic scaling (quant_scaling::dynamic or dynamic_asymmetric):
  /// rows * (row length / block) floats (block 0: one per row), row-major. Required there,
  /// refused elsewhere.
  float* y_scale = nullptr;
  /// Written with quant_scaling::dynamic_asymmetric: the zero point of each scale, same layout.
  /// Required there, refused elsewhere.
  std::int32_t* y_zero_point = nullptr;
  /// Written with quant_params::row_amax: one float per row. Required there, refused elsewhere.
  float* amax = nullptr;
};

/// adaLN modulation (DiT) of a LayerNorm or RMSNorm plan with modulation_tokens = T: row r, in
/// row-major order of x's outer dims, takes modulation row b = r / T (stride 0: b = 0 for every
/// row), and y = norm(x) [* gamma + beta] * (1 + scale[b]) + shift[b] (docs/fusions.md has the
/// rounding). Both are required with such a plan and refused without one. They must not
/// overlap y or residual_out; the gate is refused with them.
struct modulation_operands {
  /// [B, row length] f32, batch b's row at modulation_scale + b * modulation_stride.
  const float* modulation_scale = nullptr;
  const float* modulation_shift = nullptr;  ///< [B, row length] f32, the same layout
  /// Elements between consecutive batches' rows of scale and shift (DiT's chunked adaLN
  /// output: 6 * D); 0 broadcasts one row to every row of x; else >= the row length.
  std::int64_t modulation_stride = 0;
};

/// Gated RMSNorm, y = rms_norm(x) * gamma * silu(gate) with silu(z) = z / (1 + exp(-z))
/// (Qwen3-Next's RMSNormGated, Mamba-2's with norm_before_gate=True: norm, then gate), or
/// y = rms_norm(x * silu(gate)) * gamma with rms_norm_params::gate_before_norm (Mamba-2's
/// default).
struct gate_operand {
  /// Optional; x's shape, strides and type. With a residual add the norm is of h and the gate
  /// still multiplies after it. All in f32, y rounded once. y may be the gate (same layout);
  /// the gate must not overlap residual_out.
  const void* gate = nullptr;
};

/// The running-statistics update of a BatchNorm training plan.
struct running_statistics {
  /// [C], read and updated in place (see batch_norm_params::convention). Optional; running_var
  /// must be given with it. Untouched when the call fails.
  float* running_mean = nullptr;
  float* running_var = nullptr;  ///< [C], read and updated in place, with running_mean
  /// The number of batches seen so far; incremented by one on every successful call. Required
  /// with batch_norm_params::cumulative when running statistics are given; optional otherwise.
  std::int64_t* num_batches_tracked = nullptr;
};

// One args struct per op of simdnorm/op_list.h, named <op>_args: norm_args and the op's own
// operands. Each converts implicitly from a plain norm_args, so a call that passes one compiles
// for every op; another op's args struct does not convert (its own operands would be lost).
#define SIMDNORM_ARGS_CONSTRUCTORS(op)                                        \
  op##_args() = default;                                                      \
  template <class A, std::enable_if_t<std::is_same_v<A, norm_args>, int> = 0> \
  op##_args(const A& a) noexcept /* NOLINT: implicit */                       \
      : norm_args(a) {}
struct layer_norm_args : norm_args, residual_operands, quantized_outputs, modulation_operands {
  SIMDNORM_ARGS_CONSTRUCTORS(layer_norm)
};
struct rms_norm_args : norm_args,
                       residual_operands,
                       quantized_outputs,
                       modulation_operands,
                       gate_operand {
  SIMDNORM_ARGS_CONSTRUCTORS(rms_norm)
};
struct lp_norm_args : norm_args, residual_operands {
  SIMDNORM_ARGS_CONSTRUCTORS(lp_norm)
};
struct batch_norm_args : norm_args, running_statistics {
  SIMDNORM_ARGS_CONSTRUCTORS(batch_norm)
};
struct group_norm_args : norm_args {
  SIMDNORM_ARGS_CONSTRUCTORS(group_norm)
};
struct instance_norm_args : norm_args {
  SIMDNORM_ARGS_CONSTRUCTORS(instance_norm)
};
struct mean_variance_norm_args : norm_args {
  SIMDNORM_ARGS_CONSTRUCTORS(mean_variance_norm)
};
#undef SIMDNORM_ARGS_CONSTRUCTORS

namespace detail {
template <class Params>
struct args_of_params;
#define SIMDNORM_ARGS_OF_PARAMS(op)    \
  template <>                          \
  struct args_of_params<op##_params> { \
    using type = op##_args;            \
  };
SIMDNORM_OP_LIST(SIMDNORM_ARGS_OF_PARAMS)
#undef SIMDNORM_ARGS_OF_PARAMS
}  // namespace detail

/// The args struct of the op whose parameters are `Params` (args_of<rms_norm_params> is
/// rms_norm_args), for code generic over ops.
template <class Params>
using args_of = typename detail::args_of_params<Params>::type;

/// A validated operation: shapes, strides, parameters and the selected kernels.
class SIMDNORM_EXPORT plan {
 public:
  plan() noexcept;
  ~plan();
  plan(const plan&) noexcept;
  plan& operator=(const plan&) noexcept;

  // The plan makers, one per op of simdnorm/op_list.h:
  //   static status layer_norm(const tensor_desc& x, const tensor_desc& y,
  //                            const layer_norm_params& params, plan* out) noexcept;
  // and likewise rms_norm, lp_norm, batch_norm, group_norm, instance_norm and
  // mean_variance_norm. Each validates shapes, strides and parameters against the rules of its
  // params struct and, on success, stores the plan in *out; on error *out is left unchanged.
#define SIMDNORM_DECLARE_PLAN_MAKER(op)                                                   \
  static status op(const tensor_desc& x, const tensor_desc& y, const op##_params& params, \
                   plan* out) noexcept;
  SIMDNORM_OP_LIST(SIMDNORM_DECLARE_PLAN_MAKER)
#undef SIMDNORM_DECLARE_PLAN_MAKER

  /// True once made successfully.
  bool valid() const noexcept { return impl_ != nullptr; }
  /// The op it was made for, as named in simdnorm/op_list.h ("layer_norm"; "" when empty): its
  /// args struct is <op>_args.
  const char* op_name() const noexcept;
  /// The ISA whose kernels this plan runs.
  isa kernel_isa() const noexcept;
  /// Phases run one after the other; the tasks within one phase are independent.
  std::size_t num_phases() const noexcept;
  /// Number of independent tasks in `phase`.
  std::size_t num_tasks(std::size_t phase = 0) const noexcept;
  /// Bytes of `norm_args::workspace` that `run` needs (0 for single-phase plans).
  std::size_t workspace_bytes() const noexcept;
  /// Number of rows (products of the outer dims) and the row length. For the channel ops: the
  /// number of statistics groups (BatchNorm C, GroupNorm N * groups, InstanceNorm N * C,
  /// MeanVarianceNormalization the product of the kept dims) and the elements in each.
  std::size_t rows() const noexcept;
  std::size_t row_length() const noexcept;

  /// Runs tasks [begin, end) of `phase` on the calling thread. Checks the arguments first;
  /// on error writes nothing. No allocation, no exception.
  status run(const norm_args& args, std::size_t phase, std::size_t begin,
             std::size_t end) const noexcept;

  /// Runs every phase on `exec` (nullptr: `default_executor()`). Problems too small to gain
  /// from threads run inline on the calling thread without touching the executor.
  status execute(const norm_args& args, executor* exec = nullptr) const noexcept;

  // The same with an op's args struct, one pair per op of simdnorm/op_list.h. A plan of another
  // op refuses it (invalid_argument).
#define SIMDNORM_DECLARE_RUN(op)                                                           \
  status run(const op##_args& args, std::size_t phase, std::size_t begin, std::size_t end) \
      const noexcept;                                                                      \
  status execute(const op##_args& args, executor* exec = nullptr) const noexcept;
  SIMDNORM_OP_LIST(SIMDNORM_DECLARE_RUN)
#undef SIMDNORM_DECLARE_RUN

 private:
  friend struct detail::plan_access;
  std::shared_ptr<const detail::plan_impl> impl_;
};

// One-shot calls, one per op of simdnorm/op_list.h: make a plan and execute it on `exec`.
//   status layer_norm(const tensor_desc& x, const tensor_desc& y, const layer_norm_params& params,
//                     const layer_norm_args& args, executor* exec = nullptr) noexcept;
#define SIMDNORM_DECLARE_ONE_SHOT(op)                                                              \
  SIMDNORM_EXPORT status op(const tensor_desc& x, const tensor_desc& y, const op##_params& params, \
                            const op##_args& args, executor* exec = nullptr) noexcept;
SIMDNORM_OP_LIST(SIMDNORM_DECLARE_ONE_SHOT)
#undef SIMDNORM_DECLARE_ONE_SHOT

/// y[0, n) = x[0, n) converted from `x_type` to `y_type` with the conversions the kernels use at
/// their loads and stores, on the selected ISA (one thread): exact into f32; round to nearest
/// even into bf16 and f16, NaN kept (made quiet), +-Inf kept, f16 overflow to +-Inf, subnormals
/// kept. x and y must not overlap unless x == y with equal types. Errors (nothing written):
/// null pointers with n > 0, an unknown dtype, partial overlap, an ISA that cannot run.
SIMDNORM_EXPORT status convert(const void* x, dtype x_type, void* y, dtype y_type,
                               std::size_t n) noexcept;

}  // namespace simdnorm
