// Internal: the per-ISA kernel table and the job descriptions its kernels take.
// Baseline-safe: no xsimd, no intrinsics; included by the dispatcher and by every ISA unit.
#pragma once
#include <cstddef>

#include "simdnorm/isa.hpp"

namespace simdnorm::detail {

/// Parameters shared by all rows of a row-wise normalization (LayerNorm, RMSNorm).
struct row_norm_config {
  std::size_t cols = 0;    ///< row length (elements of the normalized block)
  double inv_cols = 0.0;   ///< 1 / cols
  float eps = 0.f;
  const float* gamma = nullptr;  ///< [cols] or null
  const float* beta = nullptr;   ///< [cols] or null
  bool compensated_mean = true;  ///< LayerNorm: mean kept as hi + lo
  bool stream = false;           ///< non-temporal stores for y
};

/// A run of rows with constant strides (elements). `mean` and `rstd` point at this run's first
/// row's slot in the per-row outputs, or are null.
struct row_block {
  const float* x = nullptr;
  std::ptrdiff_t x_stride = 0;
  float* y = nullptr;
  std::ptrdiff_t y_stride = 0;
  std::size_t rows = 0;
  float* mean = nullptr;
  float* rstd = nullptr;
};

using row_norm_fn = void (*)(const row_norm_config& cfg, const row_block& block);

/// One ISA's kernels. Every member is set for every ISA.
struct kernel_table {
  isa id;
  row_norm_fn layer_norm_rows;
  row_norm_fn rms_norm_rows;
};

#define SIMDNORM_DECLARE_TABLE(name) \
  namespace name {                   \
  extern const kernel_table table;   \
  }
SIMDNORM_DECLARE_TABLE(scalar)
SIMDNORM_DECLARE_TABLE(sse2)
SIMDNORM_DECLARE_TABLE(sse4_2)
SIMDNORM_DECLARE_TABLE(avx2_fma)
SIMDNORM_DECLARE_TABLE(avx512bw)
SIMDNORM_DECLARE_TABLE(neon64)
#undef SIMDNORM_DECLARE_TABLE

/// The table plans made now should use, or null with `*err` set when the selection
/// (SIMDNORM_ISA) names an ISA that cannot run here.
const kernel_table* selected_table(status* err) noexcept;

}  // namespace simdnorm::detail
