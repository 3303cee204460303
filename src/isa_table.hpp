// Internal: the per-ISA kernel table and the job descriptions its kernels take.
// Baseline-safe: no xsimd, no intrinsics; included by the dispatcher and by every ISA unit.
#pragma once
#include <array>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "simdnorm/isa.hpp"
#include "simdnorm/tensor.hpp"

namespace simdnorm::detail {

// ---- element types (simdnorm/dtype_list.h) ---------------------------------------------------
// The storage of each dtype as the kernels see it: f32 is float; the 16-bit types are their
// bits, converted at the kernels' load / store edge (kernels/common/io-inl.hpp).

using f32_t = float;
struct bf16_t {
  std::uint16_t bits;
};
struct f16_t {
  std::uint16_t bits;
};
struct i8_t {
  std::int8_t v;
};
struct f8e4m3fn_t {
  std::uint8_t bits;
};
struct u8_t {
  std::uint8_t v;
};

/// The 8-bit output types, written through a scale (quantized outputs of the row ops).
template <class T>
inline constexpr bool is_8bit = sizeof(T) == 1;
/// The largest code's value of a symmetric scale: the dynamic scale is amax / this.
template <class T>
inline constexpr float quant_max = std::is_same_v<T, i8_t> ? 127.f : 448.f;
/// The integer types' lowest code: an asymmetric scale maps [min(0, y), max(0, y)] onto the 256
/// codes from here.
template <class T>
inline constexpr float quant_lowest = std::is_same_v<T, i8_t> ? -128.f : 0.f;

/// Number of dtypes; their ids are 0 .. kDtypes - 1.
inline constexpr std::size_t kDtypes = 0
#define SIMDNORM_COUNT_DTYPE(name, NAME, id, bytes) +1
    SIMDNORM_DTYPE_LIST(SIMDNORM_COUNT_DTYPE);
#undef SIMDNORM_COUNT_DTYPE

/// element<id>::type: the storage type of the dtype with that id.
template <std::size_t Id>
struct element;
#define SIMDNORM_ELEMENT(name, NAME, id, bytes)                              \
  template <>                                                                \
  struct element<id> {                                                       \
    using type = name##_t;                                                   \
    static_assert(sizeof(type) == bytes, "dtype_list.h: size of " #name);    \
    static_assert(id < kDtypes, "dtype_list.h: ids must be 0 .. count - 1"); \
  };
SIMDNORM_DTYPE_LIST(SIMDNORM_ELEMENT)
#undef SIMDNORM_ELEMENT

/// A kernel for each pair of element types: [x's dtype][y's dtype].
template <class Fn>
using dtype_pairs = std::array<std::array<Fn, kDtypes>, kDtypes>;

/// Parameters shared by all rows of a row-wise normalization (LayerNorm, RMSNorm).
struct row_norm_config {
  std::size_t cols = 0;   ///< row length (elements of the normalized block)
  double inv_cols = 0.0;  ///< 1 / cols
  float eps = 0.f;
  const float* gamma = nullptr;  ///< [cols] or null
  const float* beta = nullptr;   ///< [cols] or null
  bool compensated_mean = true;  ///< LayerNorm: mean kept as hi + lo
  bool stream = false;           ///< non-temporal stores for y
  /// row_block::operand is the post-norm residual (y = norm(x) + operand), not the gate.
  bool residual_after_norm = false;
  // 8-bit outputs (row/quantize-inl.hpp): q = TY(y * inv_scale) (+ zero point, i8 and u8).
  bool quant_static = false;      ///< per-tensor scale below; else dynamic, into row_block::y_scale
  bool quant_asymmetric = false;  ///< dynamic: a zero point per scale, into row_block::y_zero_point
  std::size_t quant_block = 0;    ///< dynamic: elements per scale; 0: one scale per row
  float quant_inv_scale = 1.f;    ///< static: 1 / scale, rounded once
  float quant_zero_point = 0.f;   ///< static i8 and u8: added after rounding
};

/// A run of rows with constant strides (elements). x and y hold elements of the kernel's x and
/// y types. `mean` and `rstd` point at this run's first row's slot in the per-row outputs, or
/// are null.
struct row_block {
  const void* x = nullptr;
  std::ptrdiff_t x_stride = 0;
  void* y = nullptr;
  std::ptrdiff_t y_stride = 0;
  std::size_t rows = 0;
  float* mean = nullptr;
  float* rstd = nullptr;
  /// The normalize pass's per-element operand, rows in x's type and strides (at
  /// operand + r * x_stride), or null: gated RMSNorm's gate (y = norm(x) * gamma * silu(gate)),
  /// or with row_norm_config::residual_after_norm the post-norm residual (y = norm(x) + r).
  const void* operand = nullptr;
  /// 8-bit y with dynamic scales: this run's first row's scales (cols / block per row).
  float* y_scale = nullptr;
  std::int32_t* y_zero_point = nullptr;  ///< and asymmetric scaling: their zero points
  float* amax = nullptr;                 ///< max |y| per row (before y's rounding), or null
};

/// Mean and sum of squared deviations (M2) of a set of values (the count is the caller's).
struct moments_f64 {
  double mean = 0.0;
  double m2 = 0.0;
};

/// Whether the statistics of a plan with this eps must keep a tiny M2 exact. A float sum of
/// squared deviations below len * FLT_MIN holds squares that rounded to subnormals or to zero,
/// an absolute error of up to 2^-150 each: with var + eps >= FLT_MIN that is below u of it,
/// but with eps = 0 (or below FLT_MIN) it can be the whole variance of a row of tiny values,
/// so such chunks are computed again in double (kernels/common/moments-inl.hpp). eps_outside_sqrt
/// (MeanVarianceNormalization, 1 / (sqrt(var) + eps)): an error of 2^-150 in var moves
/// sqrt(var) by up to 2^-75, below u of sqrt(var) + eps only where eps >= 2^-50.
inline bool keeps_tiny_m2(float eps, bool eps_outside_sqrt = false) {
  return eps_outside_sqrt ? !(eps >= 0x1p-50f) : !(eps >= FLT_MIN);
}

using row_norm_fn = void (*)(const row_norm_config& cfg, const row_block& block);

/// The statistics of a whole row: its count and moments (row/pieces-inl.hpp).
struct row_totals {
  double count = 0.0;
  moments_f64 m;
};

/// Statistics of columns [0, n) of `rows` rows, row r at x + r * stride (elements): out[r *
/// out_stride] (row/pieces-inl.hpp).
struct row_moments_job {
  const void* x = nullptr;
  std::ptrdiff_t stride = 0;
  std::size_t rows = 0, n = 0;
  moments_f64* out = nullptr;
  std::size_t out_stride = 1;
};
using row_moments_fn = void (*)(const row_norm_config& cfg, const row_moments_job& job);
using row_fold_fn = moments_f64 (*)(const row_norm_config& cfg, const moments_f64* pieces);
using row_apply_fn = void (*)(const row_norm_config& cfg, const row_block& block,
                              const row_totals* totals);

/// One row op's kernels (row/normalize-inl.hpp, row/pieces-inl.hpp).
struct row_op_kernels {
  dtype_pairs<row_norm_fn> rows;                ///< [x][y] statistics and normalize in one call
  std::array<row_moments_fn, kDtypes> moments;  ///< [x] statistics of a column range
  row_fold_fn fold;                             ///< a row's statistics from its pieces'
  dtype_pairs<row_apply_fn> apply;              ///< [x][y] normalize from given statistics
};

/// h = x + r (+ bias) over `rows` rows of `cols` elements of one type, row k at x + k * stride
/// (r and h likewise): the fused residual add of the row ops, summed in f32, (x + r) + bias, and
/// rounded once into the type. bias: [cols] floats or null.
struct add_rows_job {
  const void* x = nullptr;
  const void* r = nullptr;
  void* h = nullptr;
  const float* bias = nullptr;
  std::ptrdiff_t stride = 0;
  std::size_t rows = 0, cols = 0;
};
using add_rows_fn = void (*)(const add_rows_job& job);

/// h = x * silu(z) over `rows` rows of `cols` elements (Mamba-2's gate before the norm,
/// row/gate_rows-inl.hpp): x and z of the kernel's x type at + k * x_stride, h of its h type at
/// h + k * h_stride; in f32, rounded once. h may be x or z (same layout).
struct gate_rows_job {
  const void* x = nullptr;
  const void* z = nullptr;
  void* h = nullptr;
  std::ptrdiff_t x_stride = 0, h_stride = 0;
  std::size_t rows = 0, cols = 0;
};
using gate_rows_fn = void (*)(const gate_rows_job& job);

/// y[0, n) = x[0, n) converted between the kernel's element types (simdnorm::convert).
using convert_fn = void (*)(const void* x, void* y, std::size_t n);

/// The channel ops' normalize pass over a grid of planes (kernels/channel/plane_affine-inl.hpp):
/// plane (o, i) holds `len` dense elements at x + o * x_outer + i * x_inner (y likewise; x and y
/// hold elements of the kernel's x and y types) and y = (x - center[k]) * scale[k] + shift[k],
/// k = o * p_outer + i * p_inner; center may be null (y = x * scale + shift); `relu` then
/// applies max(relu_floor, y) (0; an 8-bit y's zero point: kernels/channel/affine-inl.hpp).
struct plane_affine_job {
  const void* x = nullptr;
  void* y = nullptr;
  std::ptrdiff_t x_outer = 0, x_inner = 0, y_outer = 0, y_inner = 0;
  std::size_t outer = 1, inner = 1, len = 0;
  const float* center = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  std::ptrdiff_t p_outer = 0, p_inner = 0;
  bool relu = false;
  float relu_floor = 0.f;
  bool stream = false;  ///< non-temporal stores for y (f32 y only)
};

/// The normalize pass over rows of `cols` dense channels, row r at x + r * x_stride:
/// y[r][c] = (x[r][c] - center[c]) * scale[c] + shift[c] (center may be null), then `relu`;
/// x and y in the kernel's element types, as plane_affine_job.
struct row_affine_job {
  const void* x = nullptr;
  void* y = nullptr;
  std::ptrdiff_t x_stride = 0, y_stride = 0;
  std::size_t rows = 0, cols = 0;
  const float* center = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  bool relu = false;
  float relu_floor = 0.f;
  bool stream = false;
};

/// out[u] = moments of unit u < units: `count` segments of `len` dense elements of the kernel's
/// x type, segment k at x[u] + k * stride, taken in order as one row
/// (kernels/channel/segment_moments-inl.hpp). tiny_m2: keeps_tiny_m2 of the plan's eps.
using segment_moments_fn = void (*)(const void* const* x, std::size_t units, std::ptrdiff_t stride,
                                    std::size_t count, std::size_t len, bool tiny_m2,
                                    moments_f64* out);
/// out[c] = moments of column c over `rows` rows of `cols` dense elements, row r at
/// x + r * stride.
using column_moments_fn = void (*)(const void* x, std::ptrdiff_t row_stride, std::size_t rows,
                                   std::size_t cols, bool tiny_m2, moments_f64* out);
using plane_affine_fn = void (*)(const plane_affine_job& job);
using row_affine_fn = void (*)(const row_affine_job& job);
/// A unit whose M2 exceeds this may hold deviations |x - mean| beyond FLT_MAX / 2 (sqrt(M2)
/// bounds them): its normalize pass takes no center, so that x - center cannot overflow
/// (fold_unit in channel/unit_math.hpp). The square, exact in double, so that no square root
/// is taken per unit.
inline constexpr double kHugeM2 = 0.25 * double(FLT_MAX) * double(FLT_MAX);

/// The per-unit work of the channel ops between the statistics and the normalize pass, for
/// `units` units of one channel each, unit u from mean[u] and m2[u] over count[u] values
/// (kernels/channel/fold_units-inl.hpp): its rstd, the saved mean and rstd, the running
/// statistics and the normalize pass's center, scale and shift, each output at [u]. Every
/// output but rstd may be null (gamma and beta too). The bits of unit_stats_of,
/// update_running and fold_unit (without quantization) of channel/unit_math.hpp, on every ISA.
struct unit_fold_job {
  std::size_t units = 0;
  const double* mean = nullptr;
  const double* m2 = nullptr;
  const double* count = nullptr;
  float eps = 0.f;
  bool eps_outside_sqrt = false;  ///< MeanVarianceNormalization: 1 / (sqrt(var) + eps)
  double* rstd = nullptr;
  float* mean_out = nullptr;
  float* rstd_out = nullptr;
  /// running = w_old * running + w_new * batch statistic; the variance unbiased
  /// (M2 / (n - 1)) or not.
  float* running_mean = nullptr;
  float* running_var = nullptr;
  double running_w_old = 0.0, running_w_new = 0.0;
  bool running_unbiased = false;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* center = nullptr;
  float* scale = nullptr;
  float* shift = nullptr;
};
using fold_units_fn = void (*)(const unit_fold_job& job);

/// One ISA's kernels. Every member is set for every ISA.
struct kernel_table {
  isa id;
  row_op_kernels layer_norm, rms_norm;
  row_op_kernels l1_norm, l2_norm;  // Lp normalization, p = 1 and 2
  dtype_pairs<convert_fn> convert;
  std::array<add_rows_fn, kDtypes> add_rows;  // [x dtype]
  dtype_pairs<gate_rows_fn> gate_rows;        // [x dtype][h dtype]
  // The channel ops (src/channel/): x and y f32, bf16 or f16; null for the other types.
  std::array<segment_moments_fn, kDtypes> segment_moments;  // [x dtype]
  std::array<column_moments_fn, kDtypes> column_moments;    // [x dtype]
  dtype_pairs<plane_affine_fn> plane_affine;                // [x dtype][y dtype]
  dtype_pairs<row_affine_fn> row_affine;                    // [x dtype][y dtype]
  fold_units_fn fold_units;
};

// Each ISA's table, defined by src/isa/<name>.cpp when CMake compiles that ISA.
#define SIMDNORM_DECLARE_TABLE(name, NAME, id, lanes, fma, arch, features) \
  namespace name {                                                         \
  extern const kernel_table table;                                         \
  }
SIMDNORM_ISA_LIST(SIMDNORM_DECLARE_TABLE)
#undef SIMDNORM_DECLARE_TABLE

/// The table plans made now should use, or null with `*err` set when the selection
/// (SIMDNORM_ISA) names an ISA that cannot run here.
const kernel_table* selected_table(status* err) noexcept;

}  // namespace simdnorm::detail
