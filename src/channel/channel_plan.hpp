// Internal: the plan of the channel ops (BatchNorm inference and training-mode forward,
// GroupNorm, InstanceNorm, MeanVarianceNormalization), shared by the files that build it
// (src/ops/*.cpp and make_plan.cpp: validation; schedule.cpp: phases and tasks) and run it
// (phases_*.cpp). The geometry is in geometry.hpp, the per-unit arithmetic in unit_math.hpp,
// the element loops in the ISA kernels of src/kernels/channel/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../plan_impl.hpp"
#include "geometry.hpp"
#include "unit_math.hpp"

namespace simdnorm::detail::channel {

enum class ch_op { bn_inference, bn_training, group_norm, mean_variance_norm };

inline const char* op_name(ch_op op) {
  switch (op) {
    case ch_op::bn_inference:
    case ch_op::bn_training: return "batch_norm";
    case ch_op::group_norm: return "group_norm";
    case ch_op::mean_variance_norm: return "mean_variance_norm";
  }
  return "?";
}

enum class phase_kind {
  infer_planes,   // BatchNorm inference, planes
  infer_rows,     // BatchNorm inference, columns
  fused_units,    // planes: statistics + normalize per unit
  split_partial,  // planes, split: partial moments of (unit, part) of one wave
  split_finish,   // planes, split: merge + normalize (unit, part) of one wave
  col_partial,    // columns: partial moments per (b, row split, channel range)
  col_finish,     // columns: merge, fold scale/shift per (b, channel block)
  col_normalize,  // columns: normalize per (b, row block)
  apply_units,    // planes, stats_stage::apply: normalize (unit, part) from the given records
  apply_fold,     // columns, stats_stage::apply: fold the records per (b, channel block)
  bookkeeping,    // BatchNorm training: increment the batch counter
};

struct phase_desc {
  phase_kind kind;
  std::size_t tasks = 1;
  std::size_t first_unit = 0, units = 0;  // split phases: the wave
};

/// Segments [k0, k1) x elements [s0, s1) of a unit.
struct part_range {
  std::int64_t k0, k1, s0, s1;
};

/// A plan's kernels, chosen at creation for its x and y types (f32, bf16, f16).
struct channel_kernels {
  segment_moments_fn segment_moments = nullptr;
  column_moments_fn column_moments = nullptr;
  plane_affine_fn plane_affine = nullptr;
  row_affine_fn row_affine = nullptr;
  fold_units_fn fold_units = nullptr;
};

struct channel_norm_plan final : plan_impl {
  ch_op op = ch_op::bn_inference;
  stats_stage stage = stats_stage::full;
  channel_geometry g;
  float eps = 0.f;
  bool relu = false, stream = false;
  float relu_floor = 0.f;  ///< the fused ReLU's max(relu_floor, y): 0, or an 8-bit y's zero point
  bool per_group_affine = false;
  std::int64_t kept_channels = 1;  ///< C of the tensor (gamma index = channel % this)
  running_rule running;            ///< BatchNorm training
  std::vector<float> folded;       ///< BatchNorm inference: scale[C] then shift[C]
  /// An 8-bit y: each channel's static quantization (folded into its scale and shift); empty
  /// for a float y. `quant_varies`: the channels' values differ (GroupNorm then folds per
  /// channel, not per group).
  std::vector<output_quant> quant;
  bool quant_varies = false;
  channel_kernels ck;                   ///< for x's and y's element types
  std::int64_t x_elem = 4, y_elem = 4;  ///< bytes per element of x and y
  // aliasing
  std::int64_t x_span = 0, y_span = 0;  // bytes
  bool same_strides = false;
  // schedule (schedule.cpp)
  std::vector<phase_desc> phases;
  std::size_t units_total = 1;  ///< B * units per b
  std::size_t unit_elements = 1;
  std::size_t units_per_task = 1;                             // fused
  std::size_t parts = 1;                                      // split
  std::size_t planes_per_task = 1, pieces = 1;                // infer_planes
  std::size_t splits = 1, chan_block = 1, rows_per_task = 1;  // columns
  std::size_t col_ranges = 1, range_cols = 1;  ///< columns: channel ranges of the partial phase
  std::size_t col_params_offset = 0;  ///< columns: bytes of workspace before the parameters
  std::size_t ws_bytes = 0;

  std::size_t num_phases() const noexcept override { return phases.size(); }
  std::size_t num_tasks(std::size_t phase) const noexcept override { return phases[phase].tasks; }
  std::size_t workspace_bytes() const noexcept override { return ws_bytes; }
  status check_args(const call_args& a) const noexcept override;  // make_plan.cpp
  void run_tasks(const call_args& a, std::size_t phase, std::size_t begin,
                 std::size_t end) const noexcept override;  // phases_columns.cpp

  // ---- per-unit arithmetic with this plan's parameters (unit_math.hpp) ----------------------

  /// Whether the statistics keep a tiny M2 exact (keeps_tiny_m2 of eps).
  bool tiny_m2() const { return keeps_tiny_m2(eps, op == ch_op::mean_variance_norm); }
  /// A unit's statistics from its moments over `count` values (this plan's units, or the
  /// merged records of stats_stage::apply).
  unit_stats finish(const moments_f64& m, std::size_t count) const {
    return unit_stats_of(m, count, eps, op == ch_op::mean_variance_norm);
  }
  unit_stats finish(const moments_f64& m) const { return finish(m, unit_elements); }

  /// stats_stage::moments: records unit q's moments and returns true; the unit is done (no
  /// normalize, no outputs). False in the other stages.
  bool record_moments(const call_args& a, std::size_t q, const moments_f64& m) const {
    if (stage != stats_stage::moments) return false;
    a.moments_out[q] = {std::int64_t(unit_elements), m.mean, m.m2, moments_kind::centered, 0};
    return true;
  }

  /// stats_stage::apply: unit q's merged record, as moments and a count.
  moments_f64 given_moments(const call_args& a, std::size_t q, std::size_t* count) const {
    *count = std::size_t(a.moments_in[q].count);
    return {a.moments_in[q].mean, a.moments_in[q].m2};
  }

  /// gamma/beta index of kept channel `ch` (the channel within the unit's batch item).
  std::int64_t affine_index(std::int64_t ch) const {
    ch %= kept_channels;
    return per_group_affine ? ch / g.group : ch;
  }

  /// The static quantization of channel `ch`, or null for a float y (quant has C entries: set
  /// before kept_channels, for BatchNorm inference's fold at creation).
  const output_quant* quant_of(std::int64_t ch) const {
    return quant.empty() ? nullptr : &quant[std::size_t(ch) % quant.size()];
  }

  /// center, scale, shift of one plane or channel: y = (x - center) * scale + shift.
  void fold(const unit_stats& s, std::int64_t ch, const call_args& a, float* c, float* sc,
            float* sh) const {
    fold_unit(s, a.gamma, a.beta, affine_index(ch), quant_of(ch), c, sc, sh);
  }

  /// Saved outputs and, for BatchNorm training, the running statistics of unit q, whose
  /// moments m are over `count` values.
  void unit_outputs(const call_args& a, std::size_t q, const moments_f64& m, const unit_stats& s,
                    std::size_t count) const {
    if (a.mean) a.mean[q] = float(s.mean);
    if (a.rstd) a.rstd[q] = float(s.rstd);
    if (op != ch_op::bn_training || a.running_mean == nullptr) return;
    update_running(running_weights_of(running, a.num_batches_tracked), count, m, s.mean,
                   a.running_mean + q, a.running_var + q);
  }
  void unit_outputs(const call_args& a, std::size_t q, const moments_f64& m,
                    const unit_stats& s) const {
    unit_outputs(a, q, m, s, unit_elements);
  }

  // ---- columns (phases_columns.cpp) ----------------------------------------------------------

  /// The finish of `units` (at most kMergeSideBySide) units from unit q, whose first channel
  /// is c, from moments mean[u] and m2[u] over count[u] values, in the ISA's vectors
  /// (fold_units): the unit outputs, and the center, scale and shift of each channel into prm
  /// ([3][C] of q's batch item). Units of several channels or a quantized y fold per channel
  /// afterwards (fold_unit).
  void fold_columns(const call_args& a, std::size_t q, std::size_t c, std::size_t units,
                    const double* mean, const double* m2, const double* count, float* prm) const;

  // ---- planes (phases_planes.cpp) -----------------------------------------------------------

  /// Element `i` (geometry strides are in elements) of a call's x and y.
  const void* x_at(const call_args& a, std::int64_t i) const {
    return static_cast<const char*>(a.x) + i * x_elem;
  }
  void* y_at(const call_args& a, std::int64_t i) const {
    return static_cast<char*>(a.y) + i * y_elem;
  }
  /// Element `off` of unit q's x and y.
  const void* unit_x(const call_args& a, std::size_t q, std::int64_t off = 0) const;
  void* unit_y(const call_args& a, std::size_t q, std::int64_t off = 0) const;
  part_range part_of(std::size_t j) const { return part_of(j, parts); }
  part_range part_of(std::size_t j, std::size_t n) const;
  void normalize_unit(const call_args& a, std::size_t q, const unit_stats& s,
                      const part_range& r) const;
  moments_f64 part_moments(const call_args& a, std::size_t q, const part_range& r) const;
  bool per_segment_affine(const call_args& a) const;
  void run_fused(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_long_units(const call_args& a, std::size_t q0, std::size_t q1) const;
  void run_split_partial(const call_args& a, const phase_desc& ph, std::size_t begin,
                         std::size_t end) const;
  void run_split_finish(const call_args& a, const phase_desc& ph, std::size_t begin,
                        std::size_t end) const;
  void run_infer_planes(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_apply_units(const call_args& a, std::size_t begin, std::size_t end) const;

  // ---- columns (phases_columns.cpp) ---------------------------------------------------------

  std::size_t row_blocks() const { return (std::size_t(g.R) + rows_per_task - 1) / rows_per_task; }
  std::size_t chan_blocks() const { return (std::size_t(g.C) + chan_block - 1) / chan_block; }
  void run_infer_rows(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_col_partial(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_col_finish(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_col_normalize(const call_args& a, std::size_t begin, std::size_t end) const;
  void run_apply_fold(const call_args& a, std::size_t begin, std::size_t end) const;
};

/// Whether units of `unit_elements` values in segments of `segment_len` go through the
/// statistics kernel kInterleavedUnits at a time (schedule.cpp).
bool interleaved_units(std::size_t unit_elements, std::int64_t segment_len);

/// Chooses the phases and tasks of a plan whose geometry is made (schedule.cpp).
void schedule(channel_norm_plan& p);

}  // namespace simdnorm::detail::channel
