// Plans for the row-wise ops (LayerNorm, RMSNorm, Lp normalization): validation, collapsing the
// outer dims into runs of equally strided rows, and splitting rows into tasks. The op's kernel
// is chosen here, once, when the plan is made.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "plan_impl.hpp"
#include "tuning.hpp"

namespace simdnorm {
namespace detail {
namespace {

/// What each row op accepts in call_args besides x and y, and its kernels.
struct row_op {
  op_id id;
  bool beta, mean, gamma;
  bool scaled;        ///< 8-bit y and the amax output (quant_params)
  moments_kind kind;  ///< what its statistics are (split statistics)
  row_op_kernels kernel_table::*kernels;
};
constexpr row_op kLayerNorm{
    op_id::layer_norm, true, true, true, true, moments_kind::centered, &kernel_table::layer_norm};
constexpr row_op kRmsNorm{op_id::rms_norm,        false, false, true, true, moments_kind::squares,
                          &kernel_table::rms_norm};
constexpr row_op kL1Norm{
    op_id::lp_norm, false, false, false, false, moments_kind::magnitudes, &kernel_table::l1_norm};
constexpr row_op kL2Norm{op_id::lp_norm,        false, false, false, false, moments_kind::squares,
                         &kernel_table::l2_norm};

/// What one phase of a row plan does. A plan runs a short list of them (make_phases).
enum class row_phase {
  gamma_offset,   ///< one task: gamma + weight_offset into the workspace
  modulation,     ///< a task per batch: gamma and beta with its adaLN modulation folded in
  rows,           ///< tasks of whole rows: statistics and normalize (the one-call kernel)
  rows_moments,   ///< tasks of whole rows: statistics into call_args::moments_out
  rows_apply,     ///< tasks of whole rows: normalize from call_args::moments_in
  piece_moments,  ///< a task per (row, piece): the piece's statistics into the workspace
  pieces_fold,    ///< a task per row: its pieces' statistics folded into moments_out
  piece_apply,    ///< a task per (row, piece): normalize the piece from its row's statistics
};

struct row_norm_plan final : plan_impl {
  const row_op* op = nullptr;
  const row_op_kernels* kernels_of_op = nullptr;
  dtype x_type = dtype::f32, y_type = dtype::f32;
  add_rows_fn add_kernel = nullptr;  // the fused residual add, for x's type
  row_norm_config cfg;
  stats_stage stage = stats_stage::full;
  // Outer dims after dropping size-1 dims and merging contiguous ones; innermost last.
  int n_outer = 0;
  std::int64_t outer_size[max_dims] = {};
  std::int64_t outer_x_stride[max_dims] = {};
  std::int64_t outer_y_stride[max_dims] = {};
  std::size_t rows_per_task = 1, row_tasks = 1;
  std::size_t pieces = 1;  // per row, of kPieceElements; > 1 when rows are split across tasks
  std::int64_t x_bytes = 0, y_bytes = 0;  // spans
  std::size_t x_elem = 4, y_elem = 4;     // bytes per element
  bool same_layout = false;
  // x's rows do not overlap: a residual add may store h, which takes x's strides.
  bool x_rows_disjoint = true;
  float weight_offset = 0.f;  // nonzero: the gamma_offset phase writes gamma + weight_offset
  // adaLN modulation: rows per batch (0: none), batches, floats per folded row (64-byte steps)
  std::size_t mod_tokens = 0, mod_batches = 0, mod_row_floats = 0;
  quant_params quant;  // 8-bit y and the amax output
  // Mamba-2's gate before the norm: each task first stores h = x * silu(gate) into y
  // (gate_kernel), and the op's kernels then normalize y in place, as y's type.
  bool gate_before = false;
  gate_rows_fn gate_kernel = nullptr;
  std::size_t y_scales = 0;  // per row: 8-bit y with dynamic scales (else 0)
  row_phase phases[3] = {};
  std::size_t phase_count = 0;
  std::size_t gamma_bytes = 0, pieces_offset = 0;  // workspace: gamma_eff, then piece stats

  std::size_t num_phases() const noexcept override { return phase_count; }
  std::size_t num_tasks(std::size_t phase) const noexcept override {
    switch (phases[phase]) {
      case row_phase::gamma_offset: return 1;
      case row_phase::modulation: return mod_batches;
      case row_phase::rows:
      case row_phase::rows_moments:
      case row_phase::rows_apply: return row_tasks;
      case row_phase::pieces_fold: return rows;
      case row_phase::piece_moments:
      case row_phase::piece_apply: return rows * pieces;
    }
    return 0;
  }
  std::size_t workspace_bytes() const noexcept override {
    const bool piece_stats = pieces > 1 && stage != stats_stage::apply;
    return pieces_offset + (piece_stats ? rows * pieces * sizeof(moments_f64) : 0);
  }

  void make_phases() noexcept {
    const bool split = pieces > 1;
    auto add = [&](row_phase p) { phases[phase_count++] = p; };
    if (mod_tokens != 0)
      add(row_phase::modulation);  // folds weight_offset too
    else if (weight_offset != 0.f && stage != stats_stage::moments)
      add(row_phase::gamma_offset);
    if (stage != stats_stage::apply)
      add(split                        ? row_phase::piece_moments
          : stage == stats_stage::full ? row_phase::rows
                                       : row_phase::rows_moments);
    if (stage == stats_stage::moments && split) add(row_phase::pieces_fold);
    if (stage == stats_stage::apply || (stage == stats_stage::full && split))
      add(split ? row_phase::piece_apply : row_phase::rows_apply);
    gamma_bytes = phases[0] == row_phase::gamma_offset ? (cols * sizeof(float) + 63) / 64 * 64 : 0;
    if (mod_tokens != 0) {  // gamma_eff per batch, then (LayerNorm's beta) beta_eff per batch
      mod_row_floats = (cols + 15) / 16 * 16;
      gamma_bytes = (op->beta ? 2 : 1) * mod_batches * mod_row_floats * sizeof(float);
    }
    pieces_offset = gamma_bytes;
  }

  status check_args(const call_args& a) const noexcept override {
    if (a.x == nullptr) return status::error(status_code::invalid_argument, "args.x is null");
    if (stage == stats_stage::moments) {
      if (a.moments_out == nullptr)
        return status::error(status_code::invalid_argument,
                             "args.moments_out is null: a %s plan of stats_stage::moments writes "
                             "one record per row there",
                             op_name(op->id));
      // The fused operands of the normalize step would be silently unused: refused.
      if (a.gate != nullptr || a.y_scale != nullptr || a.y_zero_point != nullptr ||
          a.amax != nullptr)
        return status::error(status_code::invalid_argument,
                             "args.%s: a %s plan of stats_stage::moments computes statistics "
                             "only (the gate, y_scale, y_zero_point and amax belong to the "
                             "apply plan)",
                             a.gate           ? "gate"
                             : a.y_scale      ? "y_scale"
                             : a.y_zero_point ? "y_zero_point"
                                              : "amax",
                             op_name(op->id));
      const status s = check_modulation(a);  // none: moments plans have no modulation
      return s ? check_residual(a, 0) : s;
    }
    if (a.y == nullptr) return status::error(status_code::invalid_argument, "args.y is null");
    if (!op->beta && a.beta != nullptr)
      return status::error(status_code::invalid_argument, "args.beta: %s has no beta",
                           op_name(op->id));
    if (!op->mean && a.mean != nullptr)
      return status::error(status_code::invalid_argument, "args.mean: %s has no mean output",
                           op_name(op->id));
    if (!op->gamma && a.gamma != nullptr)
      return status::error(status_code::invalid_argument, "args.gamma: %s has no gamma",
                           op_name(op->id));
    if (y_scales != 0 && a.y_scale == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.y_scale is null: %s with an 8-bit y and dynamic scaling writes "
                           "%zu scale(s) per row there",
                           op_name(op->id), y_scales);
    if (y_scales == 0 && a.y_scale != nullptr)
      return status::error(status_code::invalid_argument,
                           "args.y_scale: this %s plan writes no scales (only an 8-bit y with "
                           "dynamic scaling does)",
                           op_name(op->id));
    if (cfg.quant_asymmetric != (a.y_zero_point != nullptr))
      return status::error(status_code::invalid_argument,
                           cfg.quant_asymmetric
                               ? "args.y_zero_point is null: %s with "
                                 "quant_scaling::dynamic_asymmetric writes one zero point per "
                                 "scale there"
                               : "args.y_zero_point: this %s plan writes no zero points (only "
                                 "quant_scaling::dynamic_asymmetric does)",
                           op_name(op->id));
    if (quant.row_amax != (a.amax != nullptr))
      return status::error(status_code::invalid_argument,
                           quant.row_amax ? "args.amax is null: quant.row_amax writes one float "
                                            "per row there"
                                          : "args.amax: set quant.row_amax in the plan's params "
                                            "to have it written");
    if (weight_offset != 0.f && a.gamma == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.gamma is null: %s with weight_offset=%g scales by gamma + offset",
                           op_name(op->id), double(weight_offset));
    if (const status s = check_modulation(a); !s) return s;
    if (gate_before && a.gate == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.gate is null: a plan with gate_before_norm normalizes "
                           "x * silu(gate)");
    if (gate_before && (a.residual != nullptr || a.residual_out != nullptr))
      return status::error(status_code::invalid_argument,
                           "args.residual: gate_before_norm does not combine with the residual "
                           "add");
    if (cfg.residual_after_norm) {
      if (a.residual == nullptr)
        return status::error(status_code::invalid_argument,
                             "args.residual is null: a plan with residual_after_norm computes "
                             "y = norm(x) + residual");
      if (a.residual_out != nullptr || a.residual_bias != nullptr)
        return status::error(status_code::invalid_argument,
                             "args.%s: with residual_after_norm the sum is y itself (no "
                             "residual_out, no bias)",
                             a.residual_out != nullptr ? "residual_out" : "residual_bias");
      if (a.gate != nullptr)
        return status::error(status_code::invalid_argument,
                             "args.gate: gated RMSNorm does not combine with residual_after_norm");
    }
    if (stage == stats_stage::apply) {
      if (!cfg.residual_after_norm && (a.residual != nullptr || a.residual_out != nullptr))
        return status::error(status_code::invalid_argument,
                             "args.residual: a plan of stats_stage::apply normalizes x as given; "
                             "the residual add goes with the moments stage");
      if (a.moments_in == nullptr)
        return status::error(status_code::invalid_argument,
                             "args.moments_in is null: a %s plan of stats_stage::apply reads one "
                             "record per row there",
                             op_name(op->id));
      for (std::size_t r = 0; r < rows; ++r) {
        const moments& m = a.moments_in[r];
        if (m.kind != op->kind)
          return status::error(status_code::invalid_argument,
                               "args.moments_in[%zu].kind=%d: %s needs %s moments (%d)", r,
                               int(m.kind), op_name(op->id), moments_kind_name(op->kind),
                               int(op->kind));
        if (m.count < 1)
          return status::error(status_code::invalid_argument,
                               "args.moments_in[%zu].count=%lld: must be positive", r,
                               static_cast<long long>(m.count));
      }
    }
    const status s = check_residual(a, y_bytes);
    if (!s) return s;
    return check_aliasing(a.x, x_bytes, a.y, y_bytes, same_layout);
  }

  /// The adaLN operands against the plan's modulation_tokens, and their overlap with what the
  /// run writes (y, residual_out): the shift is read while y is written.
  status check_modulation(const call_args& a) const noexcept {
    const bool given = a.modulation_scale != nullptr || a.modulation_shift != nullptr;
    if (mod_tokens == 0) {
      if (given || a.modulation_stride != 0)
        return status::error(status_code::invalid_argument,
                             "args.modulation_*: this %s plan has no adaLN modulation (make it "
                             "with params.modulation_tokens)",
                             op_name(op->id));
      return {};
    }
    if (a.modulation_scale == nullptr || a.modulation_shift == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.modulation_%s is null: a %s plan with modulation_tokens=%zu "
                           "needs both scale and shift",
                           a.modulation_scale == nullptr ? "scale" : "shift", op_name(op->id),
                           mod_tokens);
    const std::int64_t stride = a.modulation_stride;
    if (stride < 0 || (stride > 0 && std::uint64_t(stride) < cols))
      return status::error(status_code::invalid_argument,
                           "args.modulation_stride=%lld must be 0 (one row for all) or at least "
                           "the row length %zu",
                           static_cast<long long>(stride), cols);
    if (a.gate != nullptr)
      return status::error(status_code::invalid_argument,
                           "args.gate: gated RMSNorm does not combine with adaLN modulation");
    const std::int64_t batches = stride == 0 ? 1 : std::int64_t(mod_batches);
    std::int64_t span = 0;
    if (__builtin_mul_overflow(batches - 1, stride, &span) ||
        __builtin_add_overflow(span, std::int64_t(cols), &span) ||
        __builtin_mul_overflow(span, std::int64_t(sizeof(float)), &span))
      return status::error(status_code::size_overflow,
                           "args.modulation_stride=%lld: the modulation rows' span overflows",
                           static_cast<long long>(stride));
    const struct {
      const void* p;
      const char* name;
    } inputs[] = {{a.modulation_scale, "args.modulation_scale"},
                  {a.modulation_shift, "args.modulation_shift"}},
      outputs[] = {{a.y, "args.y"}, {a.residual_out, "args.residual_out"}};
    for (const auto& in : inputs)
      for (const auto& o : outputs) {
        if (o.p == nullptr) continue;
        const auto p = reinterpret_cast<std::uintptr_t>(in.p);
        const auto q = reinterpret_cast<std::uintptr_t>(o.p);
        const auto q_bytes = std::uintptr_t(o.p == a.y ? y_bytes : x_bytes);
        if (p < q + q_bytes && q < p + std::uintptr_t(span))
          return status::error(status_code::invalid_argument,
                               "%s and %s overlap: the modulation is read while that is written",
                               in.name, o.name);
      }
    return {};
  }

  /// Row r's config: with adaLN modulation, gamma and beta are its batch's folded rows (the
  /// modulation phase), or the shift itself for beta where there is no beta to fold.
  row_norm_config config_of_row(const row_norm_config& c, const call_args& a,
                                std::size_t r) const noexcept {
    if (mod_tokens == 0) return c;
    const std::size_t b = a.modulation_stride == 0 ? 0 : r / mod_tokens;
    row_norm_config m = c;
    const float* folded = static_cast<const float*>(a.workspace);
    m.gamma = folded + b * mod_row_floats;
    m.beta = a.beta != nullptr ? folded + (mod_batches + b) * mod_row_floats
                               : a.modulation_shift + std::ptrdiff_t(b) * a.modulation_stride;
    return m;
  }

  /// Batch b's gamma_eff = (gamma + weight_offset) * (1 + scale) (1 + scale without gamma) and
  /// beta_eff = beta * (1 + scale) + shift, each product and sum rounded in f32.
  void fold_modulation(const call_args& a, std::size_t b) const noexcept {
    if (a.modulation_stride == 0 && b != 0) return;  // one row serves every batch
    const std::ptrdiff_t at = std::ptrdiff_t(b) * a.modulation_stride;
    const float* scale = a.modulation_scale + at;
    const float* shift = a.modulation_shift + at;
    float* gamma_eff = static_cast<float*>(a.workspace) + b * mod_row_floats;
    float* beta_eff = gamma_eff + mod_batches * mod_row_floats;
    for (std::size_t i = 0; i < cols; ++i) {
      const float s1 = 1.f + scale[i];
      float g = 1.f;
      if (a.gamma != nullptr) g = weight_offset != 0.f ? a.gamma[i] + weight_offset : a.gamma[i];
      gamma_eff[i] = g * s1;
      if (a.beta != nullptr) beta_eff[i] = a.beta[i] * s1 + shift[i];
    }
  }

  /// The residual pointers, the gate, and their aliasing with x and y (y_span 0: no y).
  status check_residual(const call_args& a, std::int64_t y_span) const noexcept {
    if (!cfg.residual_after_norm && (a.residual == nullptr) != (a.residual_out == nullptr))
      return status::error(status_code::invalid_argument,
                           "args.residual and args.residual_out go together (h = x + residual "
                           "is stored to residual_out)");
    if (a.residual_bias != nullptr && a.residual == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.residual_bias needs args.residual (h = x + residual + bias)");
    if (a.residual_out != nullptr && !x_rows_disjoint)
      return status::error(status_code::invalid_argument,
                           "args.residual_out: x's strides make rows overlap, and h takes x's "
                           "layout (give x distinct rows for the residual add)");
    if (a.residual == nullptr && a.residual_out == nullptr && a.gate == nullptr)
      return {};  // the plain call skips building the table below (280 bytes to fill)
    // h (residual_out) may be residual or x; y may be x or residual, never h. The gate is read
    // after h is written and while y is: it may be y (in place), never h. The residual after
    // the norm is read as y is written, as the gate: it may be y (in place) or x.
    const struct {
      const void *p, *q;
      std::int64_t q_bytes;
      bool may_alias;
      const char* what;
    } pairs[] = {
        {a.x, a.residual, x_bytes, true, "args.residual and args.x"},
        {a.x, a.residual_out, x_bytes, true, "args.residual_out and args.x"},
        {a.residual, a.residual_out, x_bytes, true, "args.residual_out and args.residual"},
        {a.residual_out, a.y, y_span, false, "args.y and args.residual_out"},
        {a.residual, a.y, y_span, same_layout, "args.y and args.residual"},
        {a.gate, a.residual_out, x_bytes, false, "args.gate and args.residual_out"},
        {a.gate, a.y, y_span, same_layout, "args.y and args.gate"},
    };
    for (const auto& c : pairs) {
      if (c.q_bytes == 0 || c.p == nullptr || c.q == nullptr) continue;
      const auto p = reinterpret_cast<std::uintptr_t>(c.p);
      const auto q = reinterpret_cast<std::uintptr_t>(c.q);
      if (p == q ? !c.may_alias
                 : (p < q + std::uintptr_t(c.q_bytes) && q < p + std::uintptr_t(x_bytes)))
        return status::error(status_code::invalid_argument,
                             "%s overlap: they must be the same tensor (where allowed) or "
                             "disjoint",
                             c.what);
    }
    return {};
  }

  /// Element offsets of row r in x and y, and how many rows from r on share its strides.
  std::size_t locate(std::size_t r, std::int64_t& xo, std::int64_t& yo) const noexcept {
    const int inner = n_outer - 1;
    std::int64_t rem = std::int64_t(r), i_inner = 0;
    xo = yo = 0;
    for (int d = inner; d >= 0; --d) {
      const std::int64_t idx = rem % outer_size[d];
      rem /= outer_size[d];
      xo += idx * outer_x_stride[d];
      yo += idx * outer_y_stride[d];
      if (d == inner) i_inner = idx;
    }
    return std::size_t(outer_size[inner] - i_inner);
  }

  /// `count` rows from row r on (one run of equal strides, see locate), from column c0: the
  /// rows the kernels read, h = x + residual where there is a residual add (the statistics
  /// phases store h first: add_residual), y, and the normalize pass's operand (the gate, or
  /// the residual added after the norm).
  row_block block_at(const call_args& a, std::size_t r, std::size_t count,
                     std::size_t c0) const noexcept {
    std::int64_t xo, yo;
    locate(r, xo, yo);
    const bool add_before = a.residual != nullptr && !cfg.residual_after_norm;
    const void* x = add_before ? a.residual_out : a.x;
    row_block b;
    b.x = static_cast<const char*>(x) + (xo + std::int64_t(c0)) * std::int64_t(x_elem);
    b.x_stride = outer_x_stride[n_outer - 1];
    if (a.y != nullptr)
      b.y = static_cast<char*>(a.y) + (yo + std::int64_t(c0)) * std::int64_t(y_elem);
    b.y_stride = outer_y_stride[n_outer - 1];
    if (gate_before) {  // the kernels read h = x * silu(gate), stored in y by gate_into_y
      b.x = b.y;
      b.x_stride = b.y_stride;
    } else if (const void* z = cfg.residual_after_norm ? a.residual : a.gate) {
      b.operand = static_cast<const char*>(z) + (xo + std::int64_t(c0)) * std::int64_t(x_elem);
    }
    b.rows = count;
    return b;
  }

  /// h = x + residual over columns [c0, c0 + n) of `count` rows from row r on.
  void add_residual(const call_args& a, std::size_t r, std::size_t count, std::size_t c0,
                    std::size_t n) const noexcept {
    if (a.residual == nullptr || cfg.residual_after_norm) return;
    std::int64_t xo, yo;
    locate(r, xo, yo);
    const std::int64_t at = (xo + std::int64_t(c0)) * std::int64_t(x_elem);
    add_rows_job add;
    add.x = static_cast<const char*>(a.x) + at;
    add.r = static_cast<const char*>(a.residual) + at;
    add.h = static_cast<char*>(a.residual_out) + at;
    add.bias = a.residual_bias != nullptr ? a.residual_bias + c0 : nullptr;
    add.stride = outer_x_stride[n_outer - 1];
    add.rows = count;
    add.cols = n;
    add_kernel(add);
  }

  /// Mamba-2's gate before the norm: h = x * silu(gate) into y, over columns [c0, c0 + n) of
  /// `count` rows from row r on.
  void gate_into_y(const call_args& a, std::size_t r, std::size_t count, std::size_t c0,
                   std::size_t n) const noexcept {
    if (!gate_before) return;
    std::int64_t xo, yo;
    locate(r, xo, yo);
    gate_rows_job job;
    job.x = static_cast<const char*>(a.x) + (xo + std::int64_t(c0)) * std::int64_t(x_elem);
    job.z = static_cast<const char*>(a.gate) + (xo + std::int64_t(c0)) * std::int64_t(x_elem);
    job.h = static_cast<char*>(a.y) + (yo + std::int64_t(c0)) * std::int64_t(y_elem);
    job.x_stride = outer_x_stride[n_outer - 1];
    job.h_stride = outer_y_stride[n_outer - 1];
    job.rows = count;
    job.cols = n;
    gate_kernel(job);
  }

  /// Calls f(r, count) for the runs of equal strides that cover the rows of tasks
  /// [begin, end).
  template <class F>
  void for_each_run(std::size_t begin, std::size_t end, F f) const noexcept {
    const std::size_t r_end = std::min(rows, end * rows_per_task);
    for (std::size_t r = begin * rows_per_task; r < r_end;) {
      std::int64_t xo, yo;
      std::size_t count = std::min(r_end - r, locate(r, xo, yo));
      if (mod_tokens != 0) count = std::min(count, mod_tokens - r % mod_tokens);  // one batch
      f(r, count);
      r += count;
    }
  }

  moments public_moments(const moments_f64& m, std::size_t count) const noexcept {
    moments out;
    out.count = std::int64_t(count);
    out.mean = m.mean;
    out.m2 = m.m2;
    out.kind = op->kind;
    return out;
  }

  void run_tasks(const call_args& a, std::size_t phase, std::size_t begin,
                 std::size_t end) const noexcept override {
    row_norm_config c = cfg;
    c.gamma = gamma_bytes != 0 ? static_cast<const float*>(a.workspace) : a.gamma;
    c.beta = a.beta;
    auto* piece_stats =
        reinterpret_cast<moments_f64*>(static_cast<char*>(a.workspace) + pieces_offset);
    // With the gate before the norm the kernels read h from y, in y's type.
    const std::size_t yt = std::size_t(y_type), xt = gate_before ? yt : std::size_t(x_type);
    switch (phases[phase]) {
      case row_phase::gamma_offset: {  // gamma_eff, rounded once in f32, shared by the tasks
        float* gamma_eff = static_cast<float*>(a.workspace);
        for (std::size_t i = 0; i < cols; ++i) gamma_eff[i] = a.gamma[i] + weight_offset;
        return;
      }
      case row_phase::modulation:
        for (std::size_t b = begin; b < end; ++b) fold_modulation(a, b);
        return;
      case row_phase::rows:
        return for_each_run(begin, end, [&](std::size_t r, std::size_t count) {
          add_residual(a, r, count, 0, cols);  // h in cache for the norm: one task's rows
          gate_into_y(a, r, count, 0, cols);
          row_block b = block_at(a, r, count, 0);
          b.mean = a.mean ? a.mean + r : nullptr;
          b.rstd = a.rstd ? a.rstd + r : nullptr;
          b.y_scale = a.y_scale ? a.y_scale + r * y_scales : nullptr;
          b.y_zero_point = a.y_zero_point ? a.y_zero_point + r * y_scales : nullptr;
          b.amax = a.amax ? a.amax + r : nullptr;
          kernels_of_op->rows[xt][yt](config_of_row(c, a, r), b);
        });
      case row_phase::rows_moments:
        return for_each_run(begin, end, [&](std::size_t r, std::size_t count) {
          add_residual(a, r, count, 0, cols);
          const row_block b = block_at(a, r, count, 0);
          constexpr std::size_t kBatch = 16;
          moments_f64 m[kBatch];
          for (std::size_t i = 0; i < count; i += kBatch) {
            const std::size_t n = std::min(kBatch, count - i);
            row_moments_job job;
            job.x = static_cast<const char*>(b.x) +
                    std::ptrdiff_t(i) * b.x_stride * std::ptrdiff_t(x_elem);
            job.stride = b.x_stride;
            job.rows = n;
            job.n = cols;
            job.out = m;
            kernels_of_op->moments[xt](c, job);
            for (std::size_t k = 0; k < n; ++k)
              a.moments_out[r + i + k] = public_moments(m[k], cols);
          }
        });
      case row_phase::rows_apply:
        return for_each_run(begin, end, [&](std::size_t r, std::size_t count) {
          constexpr std::size_t kBatch = 16;
          row_totals t[kBatch];
          for (std::size_t i = 0; i < count; i += kBatch) {
            const std::size_t n = std::min(kBatch, count - i);
            for (std::size_t k = 0; k < n; ++k) t[k] = totals_of(a.moments_in[r + i + k]);
            row_block b = block_at(a, r + i, n, 0);
            b.mean = a.mean ? a.mean + r + i : nullptr;
            b.rstd = a.rstd ? a.rstd + r + i : nullptr;
            kernels_of_op->apply[xt][yt](config_of_row(c, a, r), b, t);
          }
        });
      case row_phase::piece_moments:
        for (std::size_t task = begin; task < end; ++task) {
          const std::size_t r = task / pieces, c0 = task % pieces * kPieceElements;
          const std::size_t n = std::min(kPieceElements, cols - c0);
          add_residual(a, r, 1, c0, n);
          gate_into_y(a, r, 1, c0, n);
          row_moments_job job;
          job.x = block_at(a, r, 1, c0).x;
          job.rows = 1;
          job.n = n;
          job.out = piece_stats + task;
          kernels_of_op->moments[xt](c, job);
        }
        return;
      case row_phase::pieces_fold:
        for (std::size_t r = begin; r < end; ++r)
          a.moments_out[r] = public_moments(kernels_of_op->fold(c, piece_stats + r * pieces), cols);
        return;
      case row_phase::piece_apply:
        for (std::size_t task = begin; task < end; ++task) {
          const std::size_t r = task / pieces, c0 = task % pieces * kPieceElements;
          const row_totals t =
              stage == stats_stage::apply
                  ? totals_of(a.moments_in[r])
                  : row_totals{double(cols), kernels_of_op->fold(c, piece_stats + r * pieces)};
          row_norm_config piece = config_of_row(c, a, r);
          piece.cols = std::min(kPieceElements, cols - c0);
          if (piece.gamma) piece.gamma += c0;
          if (piece.beta) piece.beta += c0;
          row_block b = block_at(a, r, 1, c0);
          if (c0 == 0) {  // the row's first piece writes its statistics
            b.mean = a.mean ? a.mean + r : nullptr;
            b.rstd = a.rstd ? a.rstd + r : nullptr;
          }
          kernels_of_op->apply[xt][yt](piece, b, &t);
        }
        return;
    }
  }

  static row_totals totals_of(const moments& m) noexcept {
    return {double(m.count), {m.mean, m.m2}};
  }
};

// y's rows must not overlap: sorted by stride, each outer dim must step past everything the
// smaller ones cover. (Sufficient, and exact for the layouts frameworks produce.)
bool rows_disjoint(int n, const std::int64_t* size, const std::int64_t* stride, std::int64_t cols) {
  int order[max_dims];
  for (int i = 0; i < n; ++i) {  // insertion sort by stride; n <= max_dims
    int j = i;
    for (; j > 0 && stride[order[j - 1]] > stride[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  std::int64_t covered = cols;  // extent of one row
  for (int k = 0; k < n; ++k) {
    const int d = order[k];
    if (size[d] == 1) continue;
    if (stride[d] < covered) return false;
    covered = stride[d] * (size[d] - 1) + covered;
  }
  return true;
}

/// The quantized-output parameters against the op, y's type and the row length.
status check_quant(const row_op& op, const tensor_desc& x, const tensor_desc& y, std::int64_t cols,
                   stats_stage stage, const quant_params& q) noexcept {
  const char* opname = op_name(op.id);
  const bool y8 = dtype_size(y.type) == 1;
  if (dtype_size(x.type) == 1)
    return status::error(status_code::unsupported_dtype,
                         "%s: x %s: the row ops read f32, bf16 or f16 (8-bit types are outputs)",
                         opname, dtype_name(x.type));
  if (y8 && !op.scaled)
    return status::error(status_code::unsupported_dtype,
                         "%s: y %s: 8-bit outputs are layer_norm's and rms_norm's", opname,
                         dtype_name(y.type));
  const bool dynamic =
      q.scaling == quant_scaling::dynamic || q.scaling == quant_scaling::dynamic_asymmetric;
  if (q.scaling == quant_scaling::per_channel)
    return status::error(status_code::invalid_argument,
                         "%s: quant.scaling per_channel is the channel ops' (batch_norm, "
                         "group_norm, instance_norm)",
                         opname);
  if (!dynamic && q.scaling != quant_scaling::per_tensor)
    return status::error(status_code::invalid_argument, "%s: unknown quant.scaling %d", opname,
                         int(q.scaling));
  if (!y8 && (q.scaling != quant_scaling::dynamic || q.block != 0))
    return status::error(status_code::invalid_argument,
                         "%s: quant.scaling / quant.block apply to an 8-bit y (i8, u8, "
                         "f8e4m3fn), y is %s",
                         opname, dtype_name(y.type));
  if (y8 && q.scaling == quant_scaling::dynamic && y.type == dtype::u8)
    return status::error(status_code::invalid_argument,
                         "%s: y u8 has no symmetric scale: quant.scaling dynamic_asymmetric or "
                         "per_tensor",
                         opname);
  if (q.scaling == quant_scaling::dynamic_asymmetric && y.type == dtype::f8e4m3fn)
    return status::error(status_code::invalid_argument,
                         "%s: y f8e4m3fn has no zero point: quant.scaling dynamic or per_tensor",
                         opname);
  if ((y8 || q.row_amax) && stage != stats_stage::full)  // moments: no y, so no codes either
    return status::error(status_code::invalid_argument,
                         "%s: an 8-bit y or quant.row_amax needs whole rows: stats_stage::full",
                         opname);
  if (dynamic && q.block != 0 && (q.block < 32 || q.block > 256 || cols % q.block != 0))
    return status::error(status_code::invalid_argument,
                         "%s: quant.block=%d must be 0 (per row) or in [32, 256] and divide the "
                         "row length %lld",
                         opname, q.block, static_cast<long long>(cols));
  if (q.scaling == quant_scaling::per_tensor) {
    if (!(q.scale > 0.f && q.scale <= FLT_MAX) || !(1.f / q.scale <= FLT_MAX))
      return status::error(status_code::invalid_argument,
                           "%s: quant.scale=%g must be finite, > 0 and have a finite inverse",
                           opname, double(q.scale));
    const int lo = y.type == dtype::i8 ? -128 : 0;
    const int hi = y.type == dtype::i8 ? 127 : y.type == dtype::u8 ? 255 : 0;
    if (q.zero_point < lo || q.zero_point > hi)
      return status::error(status_code::invalid_argument,
                           "%s: quant.zero_point=%d must be in [%d, %d] for y %s", opname,
                           q.zero_point, lo, hi, dtype_name(y.type));
  }
  return {};
}

/// The fused parts of a LayerNorm or RMSNorm plan (their params' fields of the same names).
struct row_fusions {
  quant_params quant;
  std::int64_t modulation_tokens = 0;
  bool gate_before_norm = false;
  bool residual_after_norm = false;
};

status make_row_norm(const row_op& op, const tensor_desc& x, const tensor_desc& y,
                     int normalized_ndim, float eps, bool compensated, store_policy stores,
                     float weight_offset, stats_stage stage, plan* out,
                     const row_fusions& fused = {}) noexcept {
  const quant_params& quant = fused.quant;
  const std::int64_t modulation_tokens = fused.modulation_tokens;
  const bool gate_before_norm = fused.gate_before_norm;
  const char* opname = op_name(op.id);
  if (out == nullptr)
    return status::error(status_code::invalid_argument, "%s: out is null", opname);
  status s = check_tensor(x, "x");
  if (!s) return s;
  if (!(s = check_tensor(y, "y"))) return s;
  if (!(s = check_same_shape(x, y))) return s;
  if (normalized_ndim < 1 || normalized_ndim > x.ndim)
    return status::error(status_code::invalid_argument,
                         "%s: normalized_ndim=%d must be in [1, ndim=%d]", opname, normalized_ndim,
                         x.ndim);
  if (!(s = check_eps(eps))) return s;
  if (!std::isfinite(weight_offset))
    return status::error(status_code::invalid_argument, "%s: weight_offset=%g must be finite",
                         opname, double(weight_offset));
  const int first = x.ndim - normalized_ndim;
  if (!dense_suffix(x, first) || !dense_suffix(y, first))
    return status::error(status_code::unsupported_layout,
                         "%s: the normalized (last %d) dims of x and y must be dense row-major",
                         opname, normalized_ndim);
  if (stores != store_policy::automatic && stores != store_policy::regular &&
      stores != store_policy::streaming)
    return status::error(status_code::invalid_argument, "%s: unknown store_policy %d", opname,
                         int(stores));
  if (stage != stats_stage::full && stage != stats_stage::moments && stage != stats_stage::apply)
    return status::error(status_code::invalid_argument, "%s: unknown stats_stage %d", opname,
                         int(stage));

  std::int64_t row_length = 1;
  for (int i = first; i < x.ndim; ++i) row_length *= x.shape[i];
  if (!(s = check_quant(op, x, y, row_length, stage, quant))) return s;
  const kernel_table* kt = selected_table(&s);
  if (kt == nullptr) return s;

  std::shared_ptr<row_norm_plan> p;
  try {
    p = std::make_shared<row_norm_plan>();
  } catch (...) {
    return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", opname);
  }
  p->op = &op;
  p->op_kind = op.id;
  p->kernels = kt;
  p->kernels_of_op = &(kt->*op.kernels);
  p->x_type = x.type;
  p->y_type = y.type;
  p->stage = stage;
  p->add_kernel = kt->add_rows[std::size_t(x.type)];
  if (p->kernels_of_op->rows[std::size_t(x.type)][std::size_t(y.type)] == nullptr)
    return status::error(status_code::unsupported_dtype,
                         "%s: x %s, y %s: this build has f32 row kernels only "
                         "(SIMDNORM_ALL_DTYPES=OFF)",
                         opname, dtype_name(x.type), dtype_name(y.type));
  std::int64_t cols = 1;
  for (int i = first; i < x.ndim; ++i) cols *= x.shape[i];
  std::int64_t rows = 1;
  for (int i = 0; i < first; ++i) rows *= x.shape[i];
  if (modulation_tokens < 0 || (modulation_tokens > 0 && rows % modulation_tokens != 0))
    return status::error(status_code::invalid_argument,
                         "%s: modulation_tokens=%lld must be 0 (no adaLN modulation) or divide "
                         "the rows (%lld)",
                         opname, static_cast<long long>(modulation_tokens),
                         static_cast<long long>(rows));
  if (gate_before_norm &&
      (stage != stats_stage::full || dtype_size(y.type) == 1 || modulation_tokens != 0))
    return status::error(status_code::invalid_argument,
                         "%s: gate_before_norm stores x * silu(gate) in y between the statistics "
                         "and the normalize: it needs stats_stage::full, a float y and no adaLN "
                         "modulation",
                         opname);
  if (gate_before_norm) {
    p->gate_before = true;
    p->gate_kernel = kt->gate_rows[std::size_t(x.type)][std::size_t(y.type)];
    if (p->gate_kernel == nullptr ||
        p->kernels_of_op->rows[std::size_t(y.type)][std::size_t(y.type)] == nullptr)
      return status::error(status_code::unsupported_dtype,
                           "%s: gate_before_norm with x %s, y %s: this build has f32 row kernels "
                           "only (SIMDNORM_ALL_DTYPES=OFF)",
                           opname, dtype_name(x.type), dtype_name(y.type));
  }
  if (fused.residual_after_norm && (stage == stats_stage::moments || dtype_size(y.type) == 1 ||
                                    quant.row_amax || modulation_tokens != 0 || gate_before_norm))
    return status::error(status_code::invalid_argument,
                         "%s: residual_after_norm adds the residual to y as it is normalized: it "
                         "needs a y (not stats_stage::moments), a float y without quant.row_amax, "
                         "and no adaLN modulation or gate_before_norm",
                         opname);
  p->cfg.residual_after_norm = fused.residual_after_norm;
  if (modulation_tokens > 0 && stage == stats_stage::moments)
    return status::error(status_code::invalid_argument,
                         "%s: modulation_tokens: a stats_stage::moments plan writes no y to "
                         "modulate (give it to the apply plan)",
                         opname);
  for (int i = 0; i < first; ++i) {
    if (x.shape[i] == 1) continue;
    const int k = p->n_outer;
    if (k > 0 && spans(p->outer_x_stride[k - 1], x.strides[i], x.shape[i]) &&
        spans(p->outer_y_stride[k - 1], y.strides[i], x.shape[i])) {  // merge with the outer dim
      p->outer_size[k - 1] *= x.shape[i];
      p->outer_x_stride[k - 1] = x.strides[i];
      p->outer_y_stride[k - 1] = y.strides[i];
      continue;
    }
    p->outer_size[k] = x.shape[i];
    p->outer_x_stride[k] = x.strides[i];
    p->outer_y_stride[k] = y.strides[i];
    ++p->n_outer;
  }
  if (p->n_outer == 0) {  // a single row
    p->outer_size[0] = 1;
    p->n_outer = 1;
  }
  p->x_rows_disjoint = rows_disjoint(p->n_outer, p->outer_size, p->outer_x_stride, cols);
  if (!rows_disjoint(p->n_outer, p->outer_size, p->outer_y_stride, cols))
    return status::error(status_code::unsupported_layout, "%s: y's strides make rows overlap",
                         opname);
  p->same_layout = x.type == y.type;
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != 1 && x.strides[i] != y.strides[i]) p->same_layout = false;
  p->x_bytes = span_bytes(x);
  p->y_bytes = span_bytes(y);
  p->x_elem = dtype_size(x.type);
  p->y_elem = dtype_size(y.type);
  p->rows = std::size_t(rows);
  p->cols = std::size_t(cols);
  p->cfg.cols = std::size_t(cols);
  p->cfg.inv_cols = 1.0 / double(cols);
  p->cfg.eps = eps;
  p->cfg.compensated_mean = compensated;
  p->weight_offset = weight_offset;
  if (modulation_tokens > 0) {
    p->mod_tokens = std::size_t(modulation_tokens);
    p->mod_batches = std::size_t(rows / modulation_tokens);
  }
  p->quant = quant;
  const bool y8 = dtype_size(y.type) == 1;
  if (y8 && quant.scaling != quant_scaling::per_tensor)
    p->y_scales = quant.block != 0 ? p->cols / std::size_t(quant.block) : 1;
  p->cfg.quant_static = quant.scaling == quant_scaling::per_tensor;
  p->cfg.quant_asymmetric = quant.scaling == quant_scaling::dynamic_asymmetric;
  p->cfg.quant_block = std::size_t(quant.block);
  p->cfg.quant_inv_scale = 1.f / quant.scale;
  p->cfg.quant_zero_point = float(quant.zero_point);
  // Beyond the caches: streaming stores for an f32 y, and for an f32 or 16-bit y the
  // prefetch of x that goes with them (io::stream stores a 16-bit vector regularly).
  const std::size_t elements = std::size_t(rows) * std::size_t(cols);
  // Not with gate_before_norm (y is read back) or residual_after_norm (its kernels store
  // regularly: in place, y's lines are read as the residual anyway).
  p->cfg.stream = !y8 && !gate_before_norm && !fused.residual_after_norm &&
                  use_streaming_stores(stores, elements * p->x_elem, elements * p->y_elem);
  // Tasks of about kTaskElements, in whole kernel tiles: the kernel takes short rows one vector
  // of rows at a time and long rows kRowGroup at a time (tuning.hpp).
  const std::size_t tile = p->cols <= kShortCols ? std::size_t(isa_lanes(kt->id)) : kRowGroup;
  const std::size_t rows_for_elements = (kTaskElements + p->cols - 1) / p->cols;
  p->rows_per_task = (rows_for_elements + tile - 1) / tile * tile;
  // A call smaller than kInlineElements is one task: it runs inline, no thread is woken.
  if (elements < kInlineElements) p->rows_per_task = std::max<std::size_t>(p->rows, 1);
  p->row_tasks = (p->rows + p->rows_per_task - 1) / p->rows_per_task;
  // Rows longer than a piece are cut into their pieces across tasks when whole rows would
  // give too few tasks to feed the threads (kSplitRowTasksBelow). The bits stay the same.
  const std::size_t pieces = (p->cols + kPieceElements - 1) / kPieceElements;
  const bool whole_rows = y8 || quant.row_amax;  // a row's scale or amax needs all of it
  if (pieces > 1 && p->row_tasks < kSplitRowTasksBelow && !whole_rows &&
      elements >= kInlineElements)
    p->pieces = pieces;
  p->make_phases();
  plan_access::set(out, std::move(p));
  return {};
}

}  // namespace
}  // namespace detail

status plan::layer_norm(const tensor_desc& x, const tensor_desc& y, const layer_norm_params& params,
                        plan* out) noexcept {
  return detail::make_row_norm(
      detail::kLayerNorm, x, y, params.normalized_ndim, params.eps, params.compensated_mean,
      params.stores, params.weight_offset, params.stage, out,
      {params.quant, params.modulation_tokens, false, params.residual_after_norm});
}

status plan::rms_norm(const tensor_desc& x, const tensor_desc& y, const rms_norm_params& params,
                      plan* out) noexcept {
  return detail::make_row_norm(detail::kRmsNorm, x, y, params.normalized_ndim, params.eps, false,
                               params.stores, params.weight_offset, params.stage, out,
                               {params.quant, params.modulation_tokens, params.gate_before_norm,
                                params.residual_after_norm});
}

status plan::lp_norm(const tensor_desc& x, const tensor_desc& y, const lp_norm_params& params,
                     plan* out) noexcept {
  if (params.p != 1 && params.p != 2)
    return status::error(status_code::invalid_argument, "lp_norm: p=%d must be 1 or 2", params.p);
  const int ndim = x.ndim;
  if (ndim >= 1 && ndim <= max_dims && (params.axis < -ndim || params.axis >= ndim))
    return status::error(status_code::invalid_argument, "lp_norm: axis=%d must be in [%d, %d)",
                         params.axis, -ndim, ndim);
  // The axis and the size-1 dims after it form the row: normalized_ndim = ndim - axis.
  int normalized_ndim = 1;
  if (ndim >= 1 && ndim <= max_dims) {
    const int axis = params.axis < 0 ? params.axis + ndim : params.axis;
    for (int d = axis + 1; d < ndim; ++d)
      if (x.shape[d] != 1)
        return status::error(status_code::unsupported_layout,
                             "lp_norm: axis=%d: the dims after the normalized axis must have "
                             "size 1 (dim %d has %lld); move the axis last",
                             params.axis, d, static_cast<long long>(x.shape[d]));
    normalized_ndim = ndim - axis;
  }
  return detail::make_row_norm(params.p == 1 ? detail::kL1Norm : detail::kL2Norm, x, y,
                               normalized_ndim, params.eps, false, params.stores, 0.f, params.stage,
                               out);
}

}  // namespace simdnorm
