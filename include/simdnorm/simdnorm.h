/* simdnorm: the C99 API. A thin layer over the C++ API (simdnorm/plan.hpp): the same plans,
 * the same ISA selection, the same results, bit for bit.
 *
 *   simdnorm_tensor_desc x = ...;                        shapes and strides in elements
 *   simdnorm_plan_t p;
 *   if (simdnorm_plan_layer_norm(&x, &x, NULL, &p) != SIMDNORM_OK)
 *     fprintf(stderr, "%s\n", simdnorm_last_error_message());
 *   simdnorm_norm_args a = {0};
 *   a.x = xs; a.y = xs;                                  in place
 *   simdnorm_plan_execute(p, &a, NULL);                  all tasks, default executor
 *   simdnorm_plan_destroy(p);
 *
 * Errors: every fallible call returns a simdnorm_status. The message naming the offending
 * argument is kept per thread: simdnorm_last_error_message() returns the message of the most
 * recent call on the calling thread that failed (calls that succeed leave it unchanged, as with
 * errno). Nothing throws across this API, and no call aborts on bad input.
 *
 * Threads: a plan is immutable; any number of threads may run or execute it at once. The ISA
 * functions change a process-wide setting that plans capture when they are made. */
#ifndef SIMDNORM_SIMDNORM_H_
#define SIMDNORM_SIMDNORM_H_

#include <stddef.h>
#include <stdint.h>

#include "simdnorm/export.h"
#include "simdnorm/dtype_list.h"
#include "simdnorm/isa_list.h"
#include "simdnorm/op_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status ---------------------------------------------------------------------------- */

/** Result of every fallible call; the values equal those of simdnorm::status_code. */
typedef enum simdnorm_status {
  SIMDNORM_OK = 0,
  SIMDNORM_INVALID_ARGUMENT = 1,   /**< null pointer, bad dimension or eps, mismatched shapes */
  SIMDNORM_UNSUPPORTED_LAYOUT = 2, /**< strides that overlap or cannot serve the normalized block */
  SIMDNORM_SIZE_OVERFLOW = 3,      /**< element counts or extents that do not fit in 64 bits */
  SIMDNORM_UNSUPPORTED_ISA = 4,    /**< an ISA not compiled in, or that this CPU cannot run */
  SIMDNORM_OUT_OF_MEMORY = 5,      /**< an allocation (plan handle, workspace) failed */
  SIMDNORM_INTERNAL_ERROR = 6,     /**< an executor threw, or another condition that is a bug */
  SIMDNORM_UNSUPPORTED_DTYPE = 7,  /**< an element type (or x / y type pair) the op does not take */
  SIMDNORM_STATUS_MAX_ENUM = 0x7FFFFFFF /**< not a status: makes every enum here 32-bit, and
                                           any value 0..INT32_MAX valid to pass to C++ */
} simdnorm_status;

/** Short, stable name of a status ("ok", "invalid_argument", ...); "unknown" if out of range. */
SIMDNORM_EXPORT const char* simdnorm_status_string(simdnorm_status s);

/** Message of the most recent failed call on this thread ("" if none has failed). The pointer
 * stays valid until the next failing call on this thread. */
SIMDNORM_EXPORT const char* simdnorm_last_error_message(void);

/* ---- ISA selection ------------------------------------------------------------------------ */

/** Instruction sets (SIMDNORM_ISA_SCALAR, _SSE2, _SSE4_2, _AVX2_FMA, _AVX512BW, _NEON64); the
 * values equal those of simdnorm::isa; simdnorm/isa_list.h has each one's facts. */
typedef enum simdnorm_isa {
#define SIMDNORM_ISA_C_ENUMERATOR(name, NAME, id, lanes, fma, arch, features) \
  SIMDNORM_ISA_##NAME = id,
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_C_ENUMERATOR)
#undef SIMDNORM_ISA_C_ENUMERATOR
      SIMDNORM_ISA_MAX_ENUM = 0x7FFFFFFF /**< not an ISA (see SIMDNORM_STATUS_MAX_ENUM) */
} simdnorm_isa;

/** f32 lanes of the ISA's vectors (1 for scalar); 0 when the value is not an ISA. */
SIMDNORM_EXPORT int simdnorm_isa_lanes(simdnorm_isa isa);

/** 1 when the ISA's kernels fuse multiply-adds (see simdnorm::isa_has_fma), else 0. */
SIMDNORM_EXPORT int simdnorm_isa_has_fma(simdnorm_isa isa);

/** The ISA's name as used by SIMDNORM_ISA ("avx2_fma"), or "unknown". */
SIMDNORM_EXPORT const char* simdnorm_isa_name(simdnorm_isa isa);

/** Parses an ISA name into *out. SIMDNORM_INVALID_ARGUMENT for null pointers or an unknown name. */
SIMDNORM_EXPORT simdnorm_status simdnorm_isa_from_name(const char* name, simdnorm_isa* out);

/** Writes up to `capacity` compiled-in ISAs, best first, into `out` (may be NULL when capacity
 * is 0) and returns how many this build has. */
SIMDNORM_EXPORT size_t simdnorm_compiled_isas(simdnorm_isa* out, size_t capacity);

/** 1 when `isa` is compiled in and this CPU and OS can run it, else 0. */
SIMDNORM_EXPORT int simdnorm_cpu_supports(simdnorm_isa isa);

/** The ISA the next plan will use (see simdnorm::active_isa for SIMDNORM_ISA handling). */
SIMDNORM_EXPORT simdnorm_isa simdnorm_active_isa(void);

/** Selects `isa` for plans made from now on, process-wide. SIMDNORM_UNSUPPORTED_ISA (nothing
 * changes) when it is not compiled in or cannot run here; SIMDNORM_INVALID_ARGUMENT when the
 * value is not a simdnorm_isa. */
SIMDNORM_EXPORT simdnorm_status simdnorm_force_isa(simdnorm_isa isa);

/** Undoes simdnorm_force_isa: back to the default selection (SIMDNORM_ISA if set, else the
 * best runnable ISA). */
SIMDNORM_EXPORT void simdnorm_reset_isa(void);

/* ---- Tensors, parameters, arguments --------------------------------------------------------- */

#define SIMDNORM_MAX_DIMS 8

/** Element type of x and y (simdnorm/dtype_list.h); see simdnorm::dtype. */
typedef enum simdnorm_dtype {
#define SIMDNORM_DTYPE_C_ENUM(name, NAME, id, bytes) SIMDNORM_DTYPE_##NAME = id,
  SIMDNORM_DTYPE_LIST(SIMDNORM_DTYPE_C_ENUM)
#undef SIMDNORM_DTYPE_C_ENUM
      SIMDNORM_DTYPE_MAX_ENUM = 0x7FFFFFFF /**< not a type (see SIMDNORM_STATUS_MAX_ENUM) */
} simdnorm_dtype;

/** Shape, strides (in elements, outermost dimension first) and element type of one tensor. A
 * zero-initialized type is SIMDNORM_DTYPE_F32. */
typedef struct simdnorm_tensor_desc {
  int32_t ndim;                       /**< 1..SIMDNORM_MAX_DIMS */
  int64_t shape[SIMDNORM_MAX_DIMS];   /**< positive */
  int64_t strides[SIMDNORM_MAX_DIMS]; /**< non-negative, in elements */
  simdnorm_dtype type;                /**< element type of the tensor */
} simdnorm_tensor_desc;

/** y[0, n) = x[0, n) converted between element types as the kernels do; see simdnorm::convert. */
SIMDNORM_EXPORT simdnorm_status simdnorm_convert(const void* x, simdnorm_dtype x_type, void* y,
                                                 simdnorm_dtype y_type, size_t n);

/** Fills *d with a dense row-major tensor of `ndim` dims. SIMDNORM_INVALID_ARGUMENT when d or
 * shape is NULL or ndim is outside 1..SIMDNORM_MAX_DIMS (*d is then unchanged). */
SIMDNORM_EXPORT simdnorm_status simdnorm_tensor_contiguous(simdnorm_tensor_desc* d, int32_t ndim,
                                                           const int64_t* shape);

/** Non-temporal (streaming) stores for outputs; see simdnorm::store_policy. */
typedef enum simdnorm_store_policy {
  SIMDNORM_STORES_AUTOMATIC = 0, /**< streaming once x + y exceed 3/4 of all L2s + L3 */
  SIMDNORM_STORES_REGULAR = 1,
  SIMDNORM_STORES_STREAMING = 2,
  SIMDNORM_STORES_MAX_ENUM = 0x7FFFFFFF /**< not a policy (see SIMDNORM_STATUS_MAX_ENUM) */
} simdnorm_store_policy;

/** Which part of a row op a plan runs: split statistics (see simdnorm::stats_stage). */
typedef enum simdnorm_stats_stage {
  SIMDNORM_STAGE_FULL = 0,    /**< statistics and normalize (default) */
  SIMDNORM_STAGE_MOMENTS = 1, /**< statistics only, into simdnorm_norm_args::moments_out */
  SIMDNORM_STAGE_APPLY = 2,   /**< normalize from simdnorm_norm_args::moments_in */
  SIMDNORM_STAGE_MAX_ENUM = 0x7FFFFFFF
} simdnorm_stats_stage;

/** What a moments record summarizes (see simdnorm::moments_kind). */
typedef enum simdnorm_moments_kind {
  SIMDNORM_MOMENTS_CENTERED = 1,   /**< mean and M2 (LayerNorm) */
  SIMDNORM_MOMENTS_SQUARES = 2,    /**< m2 = sum x^2 (RMSNorm, L2) */
  SIMDNORM_MOMENTS_MAGNITUDES = 3, /**< m2 = sum |x| (L1) */
  SIMDNORM_MOMENTS_MAX_ENUM = 0x7FFFFFFF
} simdnorm_moments_kind;

/** The statistics of a part of a row (see simdnorm::moments): 32 bytes, sent as bytes. */
typedef struct simdnorm_moments {
  int64_t count;
  double mean;
  double m2;
  simdnorm_moments_kind kind;
  int32_t reserved;
} simdnorm_moments;

/** out[i] = the merge of parts[p * n + i], p = 0 .. num_parts - 1 in order (see
 * simdnorm::merge_moments). */
SIMDNORM_EXPORT simdnorm_status simdnorm_merge_moments(const simdnorm_moments* parts,
                                                       size_t num_parts, size_t n,
                                                       simdnorm_moments* out);

/** How LayerNorm and RMSNorm scale y into an 8-bit y (see simdnorm::quant_scaling). */
typedef enum simdnorm_quant_scaling {
  SIMDNORM_QUANT_DYNAMIC = 0, /**< scale = amax / qmax per row or block, into args.quant.y_scale */
  SIMDNORM_QUANT_PER_TENSOR = 1, /**< static scale and zero point */
  /** (hi - lo) / 255 and a zero point per row or block, into args.quant.y_scale, y_zero_point */
  SIMDNORM_QUANT_DYNAMIC_ASYMMETRIC = 2,
  SIMDNORM_QUANT_PER_CHANNEL = 3, /**< channel ops: quant.channel_scales, channel_zero_points */
  SIMDNORM_QUANT_MAX_ENUM = 0x7FFFFFFF
} simdnorm_quant_scaling;

/** Quantized outputs and the amax side output (see simdnorm::quant_params). */
typedef struct simdnorm_quant_params {
  simdnorm_quant_scaling scaling; /**< default SIMDNORM_QUANT_DYNAMIC */
  int32_t block;                  /**< dynamic: elements per scale, 0 = per row; default 0 */
  float scale;                    /**< per tensor: finite, > 0; default 1 */
  int32_t zero_point;             /**< per tensor: i8 [-128, 127], u8 [0, 255]; default 0 */
  int32_t row_amax;               /**< nonzero: max |y| per row into args.quant.amax; default 0 */
  const float* channel_scales;    /**< per channel: [C], read while the plan is made */
  const int32_t* channel_zero_points; /**< per channel: [C] or NULL (0) */
} simdnorm_quant_params;

/** LayerNorm over the trailing `normalized_ndim` dims (see simdnorm::layer_norm_params). */
typedef struct simdnorm_layer_norm_params {
  int32_t normalized_ndim;      /**< 1..ndim; default 1 */
  float eps;                    /**< finite, >= 0; default 1e-5 */
  int32_t compensated_mean;     /**< nonzero: row mean kept as a float pair; default 1 */
  simdnorm_store_policy stores; /**< default SIMDNORM_STORES_AUTOMATIC */
  float weight_offset;          /**< gamma_eff = gamma + weight_offset; default 0 */
  simdnorm_stats_stage stage;   /**< default SIMDNORM_STAGE_FULL */
  simdnorm_quant_params quant;  /**< 8-bit y (SIMDNORM_DTYPE_I8, _U8, _F8E4M3FN), amax output */
  int64_t modulation_tokens;    /**< adaLN: rows per modulation row (T of [B, T, D]); default 0 */
  int32_t residual_after_norm;  /**< nonzero: y = norm(x) + args.residual (post-norm); default 0 */
} simdnorm_layer_norm_params;

/** RMSNorm over the trailing `normalized_ndim` dims (see simdnorm::rms_norm_params). */
typedef struct simdnorm_rms_norm_params {
  int32_t normalized_ndim;      /**< 1..ndim; default 1 */
  float eps;                    /**< finite, >= 0; default 1e-6 */
  simdnorm_store_policy stores; /**< default SIMDNORM_STORES_AUTOMATIC */
  float weight_offset;          /**< gamma_eff = gamma + weight_offset (Gemma: 1); default 0 */
  simdnorm_stats_stage stage;   /**< default SIMDNORM_STAGE_FULL */
  simdnorm_quant_params quant;  /**< 8-bit y (SIMDNORM_DTYPE_I8, _U8, _F8E4M3FN), amax output */
  int64_t modulation_tokens;    /**< adaLN: rows per modulation row (T of [B, T, D]); default 0 */
  int32_t gate_before_norm;     /**< nonzero: y = rms_norm(x * silu(gate)) * gamma; default 0 */
  int32_t residual_after_norm;  /**< nonzero: y = norm(x) + args.residual (post-norm); default 0 */
} simdnorm_rms_norm_params;

/** Lp normalization along one axis, y = x / max(||x||_p, eps) (see simdnorm::lp_norm_params). */
typedef struct simdnorm_lp_norm_params {
  int32_t axis;                 /**< in [-ndim, ndim), the innermost dim of size > 1; default -1 */
  int32_t p;                    /**< 1 or 2; default 2 */
  float eps;                    /**< finite, >= 0; default 1e-12 (ONNX: 0) */
  simdnorm_store_policy stores; /**< default SIMDNORM_STORES_AUTOMATIC */
  simdnorm_stats_stage stage;   /**< default SIMDNORM_STAGE_FULL */
} simdnorm_lp_norm_params;

/** Where the channel axis is (see simdnorm::channel_layout). */
typedef enum simdnorm_channel_layout {
  SIMDNORM_NCHW = 0, /**< (N, C, D1..Dk): channel axis 1 (channels-last strides accepted too) */
  SIMDNORM_NHWC = 1, /**< (N, D1..Dk, C): channel axis ndim - 1 */
  SIMDNORM_LAYOUT_MAX_ENUM = 0x7FFFFFFF
} simdnorm_channel_layout;

/** Running-statistics update rule of BatchNorm training (see simdnorm::momentum_convention). */
typedef enum simdnorm_momentum_convention {
  SIMDNORM_MOMENTUM_PYTORCH = 0, /**< running = (1-m) running + m batch, unbiased batch variance */
  SIMDNORM_MOMENTUM_ONNX = 1,    /**< running = m running + (1-m) batch, biased batch variance */
  SIMDNORM_MOMENTUM_MAX_ENUM = 0x7FFFFFFF
} simdnorm_momentum_convention;

/** BatchNorm, inference (running statistics folded into the plan) or training-mode forward
 * (batch statistics; running statistics in simdnorm_norm_args). See simdnorm::batch_norm_params. */
typedef struct simdnorm_batch_norm_params {
  simdnorm_channel_layout layout; /**< default SIMDNORM_NCHW */
  float eps;                      /**< finite, >= 0; default 1e-5 */
  int32_t training;               /**< nonzero: batch statistics; default 0 */
  int32_t fuse_relu;              /**< nonzero: y = max(y, 0); default 0 */
  simdnorm_store_policy stores;   /**< default SIMDNORM_STORES_AUTOMATIC */
  const float* running_mean;      /**< inference: [C], required; read while the plan is made */
  const float* running_var;       /**< inference: [C], required, every value >= 0 */
  const float* gamma;             /**< inference: [C] or NULL (1) */
  const float* beta;              /**< inference: [C] or NULL (0) */
  float momentum;                 /**< training: in [0, 1]; default 0.1 */
  simdnorm_momentum_convention convention; /**< training: default SIMDNORM_MOMENTUM_PYTORCH */
  int32_t cumulative;          /**< training: nonzero: cumulative average (momentum=None) */
  simdnorm_stats_stage stage;  /**< default SIMDNORM_STAGE_FULL */
  simdnorm_quant_params quant; /**< 8-bit y: SIMDNORM_QUANT_PER_TENSOR or _PER_CHANNEL */
} simdnorm_batch_norm_params;

/** GroupNorm (see simdnorm::group_norm_params). */
typedef struct simdnorm_group_norm_params {
  int32_t num_groups;             /**< >= 1 and divides C; default 1 */
  simdnorm_channel_layout layout; /**< default SIMDNORM_NCHW */
  float eps;                      /**< default 1e-5 */
  int32_t per_group_affine;       /**< nonzero: gamma and beta have num_groups entries */
  simdnorm_store_policy stores;
  simdnorm_stats_stage stage;  /**< default SIMDNORM_STAGE_FULL */
  simdnorm_quant_params quant; /**< 8-bit y: as simdnorm_batch_norm_params */
} simdnorm_group_norm_params;

/** InstanceNorm, ndim >= 3 (see simdnorm::instance_norm_params). */
typedef struct simdnorm_instance_norm_params {
  simdnorm_channel_layout layout; /**< default SIMDNORM_NCHW */
  float eps;                      /**< default 1e-5 */
  simdnorm_store_policy stores;
  simdnorm_stats_stage stage;  /**< default SIMDNORM_STAGE_FULL */
  simdnorm_quant_params quant; /**< 8-bit y: as simdnorm_batch_norm_params */
} simdnorm_instance_norm_params;

/** ONNX MeanVarianceNormalization (see simdnorm::mean_variance_norm_params for the axes). */
typedef struct simdnorm_mean_variance_norm_params {
  int32_t num_axes;                /**< 1..ndim; default 3 */
  int32_t axes[SIMDNORM_MAX_DIMS]; /**< distinct, each in [-ndim, ndim); default {0, 2, 3} */
  float eps;                       /**< added to sqrt(var); default 1e-9 */
  simdnorm_store_policy stores;
  simdnorm_stats_stage stage; /**< default SIMDNORM_STAGE_FULL */
} simdnorm_mean_variance_norm_params;

/** The operands of every op for one run of a plan (see simdnorm::norm_args). Zero-initialize
 * it and set what you use. y may alias x exactly (in place). For the channel ops gamma and beta
 * have C entries (GroupNorm per-group form: num_groups), and mean and rstd receive one float per
 * statistics group: C (BatchNorm), N * num_groups (GroupNorm), N * C (InstanceNorm). */
typedef struct simdnorm_norm_args {
  const void* x;      /**< required; elements of the x descriptor's type */
  void* y;            /**< required; elements of the y descriptor's type */
  const float* gamma; /**< optional scale over the normalized block */
  const float* beta;  /**< optional shift (LayerNorm only) */
  float* mean;        /**< optional per-row output (LayerNorm only) */
  float* rstd;        /**< optional per-row output 1/sqrt(var + eps) (RMSNorm: 1/rms) */
  void* workspace;    /**< simdnorm_plan_workspace_bytes() bytes, 64-byte aligned, for run() */
  /* Split statistics (see simdnorm::stats_stage): */
  simdnorm_moments* moments_out;      /**< SIMDNORM_STAGE_MOMENTS: one record per row */
  const simdnorm_moments* moments_in; /**< SIMDNORM_STAGE_APPLY: one record per whole row */
} simdnorm_norm_args;

/* An op's own operands (see simdnorm::residual_operands and the structs after it). */

/** Row ops: h = in + x (+ bias) stored to out, then y = norm(h). With residual_after_norm in
 *  the params (LayerNorm, RMSNorm): y = norm(x) + in, and out and bias stay NULL. */
typedef struct simdnorm_residual_operands {
  const void* in;    /**< the residual, x's layout and type; optional, requires out */
  void* out;         /**< the sum h, the next layer's residual; may be in or x */
  const float* bias; /**< optional, with in: h = x + in + bias, [row length] */
} simdnorm_residual_operands;

/** LayerNorm and RMSNorm with an 8-bit y or quant.row_amax. */
typedef struct simdnorm_quantized_outputs {
  float* y_scale;        /**< 8-bit y, dynamic scaling: rows * (row length / block) scales */
  float* amax;           /**< with quant.row_amax: max |y| per row out */
  int32_t* y_zero_point; /**< dynamic asymmetric scaling: a zero point per scale out */
} simdnorm_quantized_outputs;

/** adaLN modulation, with params.modulation_tokens = T: y = norm(x) * (1 + scale) + shift,
 * row r taking batch r / T's row (see simdnorm::modulation_operands). */
typedef struct simdnorm_modulation_operands {
  const float* scale; /**< [B, row length], batch b at + b * stride */
  const float* shift; /**< [B, row length], the same layout */
  int64_t stride;     /**< elements between batches; 0: one row for all */
} simdnorm_modulation_operands;

/** BatchNorm training: the running-statistics update (see simdnorm::running_statistics). */
typedef struct simdnorm_running_statistics {
  float* mean;                  /**< [C], updated in place; optional, with var */
  float* var;                   /**< [C], updated in place */
  int64_t* num_batches_tracked; /**< incremented per call; required with `cumulative` */
} simdnorm_running_statistics;

/* One args struct per op: `base` and the op's own operands (an op without any takes
 * simdnorm_norm_args itself). */
typedef struct simdnorm_layer_norm_args {
  simdnorm_norm_args base;
  simdnorm_residual_operands residual;
  simdnorm_quantized_outputs quant;
  simdnorm_modulation_operands modulation;
} simdnorm_layer_norm_args;

typedef struct simdnorm_rms_norm_args {
  simdnorm_norm_args base;
  simdnorm_residual_operands residual;
  simdnorm_quantized_outputs quant;
  simdnorm_modulation_operands modulation;
  const void* gate; /**< y = rms_norm(x) * gamma * silu(gate), x's layout and type */
} simdnorm_rms_norm_args;

typedef struct simdnorm_lp_norm_args {
  simdnorm_norm_args base;
  simdnorm_residual_operands residual;
} simdnorm_lp_norm_args;

typedef struct simdnorm_batch_norm_args {
  simdnorm_norm_args base;
  simdnorm_running_statistics running; /**< training plans only */
} simdnorm_batch_norm_args;

typedef simdnorm_norm_args simdnorm_group_norm_args;
typedef simdnorm_norm_args simdnorm_instance_norm_args;
typedef simdnorm_norm_args simdnorm_mean_variance_norm_args;

/* ---- Executors: a host thread pool runs the tasks ---------------------------------------------
 */

/** Runs tasks [begin, end) of the current phase on the calling thread. */
typedef void (*simdnorm_task_fn)(void* ctx, size_t begin, size_t end);

/** A host thread pool, in the shape of pthreadpool: `parallel_for(user, n, task, ctx)` must call
 * `task(ctx, b, e)` over disjoint ranges that together cover [0, n), on any threads, and return
 * only when every call has returned. The partition is the pool's choice; results do not depend
 * on it. `concurrency` is how many threads may run tasks at once: with 1 or less the work runs
 * on the calling thread and `parallel_for` is not called. */
typedef struct simdnorm_executor {
  void* user;
  size_t concurrency;
  void (*parallel_for)(void* user, size_t n, simdnorm_task_fn task, void* ctx);
} simdnorm_executor;

/* ---- Plans --------------------------------------------------------------------------------- */

/** An opaque, immutable plan; thread-safe to run and execute concurrently. */
typedef struct simdnorm_plan* simdnorm_plan_t;

/** Per op of simdnorm/op_list.h (layer_norm, rms_norm, lp_norm, batch_norm, group_norm,
 * instance_norm, mean_variance_norm), for example for layer_norm:
 *
 *   simdnorm_layer_norm_params simdnorm_layer_norm_params_default(void);
 *       the defaults of the C++ API, as documented on the fields
 *   simdnorm_status simdnorm_plan_layer_norm(const simdnorm_tensor_desc* x,
 *                                            const simdnorm_tensor_desc* y,
 *                                            const simdnorm_layer_norm_params* params,
 *                                            simdnorm_plan_t* out);
 *       makes a plan into *out (the layout rules of simdnorm::layer_norm_params); params NULL
 *       means the defaults (for batch_norm: an inference plan without running statistics,
 *       which is refused); on error *out is set to NULL; free it with simdnorm_plan_destroy
 *   simdnorm_status simdnorm_layer_norm(const simdnorm_tensor_desc* x,
 *                                       const simdnorm_tensor_desc* y,
 *                                       const simdnorm_layer_norm_params* params,
 *                                       const simdnorm_norm_args* args,
 *                                       const simdnorm_executor* exec);
 *       one-shot: makes a plan, executes it on exec (NULL: the default), frees it
 *   simdnorm_status simdnorm_layer_norm_ex(..., const simdnorm_layer_norm_args* args,
 *                                          const simdnorm_executor* exec);
 *       the one-shot with the op's own operands (the residual add, ...)
 *   simdnorm_status simdnorm_plan_run_layer_norm(simdnorm_plan_t plan,
 *                                                const simdnorm_layer_norm_args* args,
 *                                                size_t phase, size_t begin, size_t end);
 *   simdnorm_status simdnorm_plan_execute_layer_norm(simdnorm_plan_t plan,
 *                                                    const simdnorm_layer_norm_args* args,
 *                                                    const simdnorm_executor* exec);
 *       simdnorm_plan_run and simdnorm_plan_execute with the op's own operands; a plan of
 *       another op refuses them */
#define SIMDNORM_DECLARE_C_OP(op)                                                                 \
  SIMDNORM_EXPORT simdnorm_##op##_params simdnorm_##op##_params_default(void);                    \
  SIMDNORM_EXPORT simdnorm_status simdnorm_plan_##op(                                             \
      const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y,                               \
      const simdnorm_##op##_params* params, simdnorm_plan_t* out);                                \
  SIMDNORM_EXPORT simdnorm_status simdnorm_##op(                                                  \
      const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y,                               \
      const simdnorm_##op##_params* params, const simdnorm_norm_args* args,                       \
      const simdnorm_executor* exec);                                                             \
  SIMDNORM_EXPORT simdnorm_status simdnorm_##op##_ex(                                             \
      const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y,                               \
      const simdnorm_##op##_params* params, const simdnorm_##op##_args* args,                     \
      const simdnorm_executor* exec);                                                             \
  SIMDNORM_EXPORT simdnorm_status simdnorm_plan_run_##op(simdnorm_plan_t plan,                    \
                                                         const simdnorm_##op##_args* args,        \
                                                         size_t phase, size_t begin, size_t end); \
  SIMDNORM_EXPORT simdnorm_status simdnorm_plan_execute_##op(                                     \
      simdnorm_plan_t plan, const simdnorm_##op##_args* args, const simdnorm_executor* exec);
SIMDNORM_OP_LIST(SIMDNORM_DECLARE_C_OP)
#undef SIMDNORM_DECLARE_C_OP

/** Frees a plan. NULL is ignored. */
SIMDNORM_EXPORT void simdnorm_plan_destroy(simdnorm_plan_t plan);

/** The ISA whose kernels the plan runs (SIMDNORM_ISA_SCALAR for NULL). */
SIMDNORM_EXPORT simdnorm_isa simdnorm_plan_isa(simdnorm_plan_t plan);
/** Phases run one after the other; tasks within one phase are independent (0 for NULL). */
SIMDNORM_EXPORT size_t simdnorm_plan_num_phases(simdnorm_plan_t plan);
/** Number of independent tasks in `phase` (0 for NULL or a phase out of range). */
SIMDNORM_EXPORT size_t simdnorm_plan_num_tasks(simdnorm_plan_t plan, size_t phase);
/** Bytes of args.workspace that simdnorm_plan_run needs (0 for single-phase plans). */
SIMDNORM_EXPORT size_t simdnorm_plan_workspace_bytes(simdnorm_plan_t plan);
/** Number of rows (product of the outer dims) and the row length (0 for NULL). */
SIMDNORM_EXPORT size_t simdnorm_plan_rows(simdnorm_plan_t plan);
SIMDNORM_EXPORT size_t simdnorm_plan_row_length(simdnorm_plan_t plan);

/** Runs tasks [begin, end) of `phase` on the calling thread: no allocation, no threads. Checks
 * the arguments first and writes nothing on error. */
SIMDNORM_EXPORT simdnorm_status simdnorm_plan_run(simdnorm_plan_t plan,
                                                  const simdnorm_norm_args* args, size_t phase,
                                                  size_t begin, size_t end);

/** Runs every phase on `exec`; NULL means the library default (oneTBB in the caller's arena, or
 * serial in a build without oneTBB). Allocates the workspace when args->workspace is NULL. */
SIMDNORM_EXPORT simdnorm_status simdnorm_plan_execute(simdnorm_plan_t plan,
                                                      const simdnorm_norm_args* args,
                                                      const simdnorm_executor* exec);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SIMDNORM_SIMDNORM_H_ */
