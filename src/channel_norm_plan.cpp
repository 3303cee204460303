// Plans for the channel ops: BatchNorm (inference and training-mode forward), GroupNorm,
// InstanceNorm and MeanVarianceNormalization. Validation, the canonical geometry every layout
// is reduced to, the split of the work into phases and tasks, and the per-unit arithmetic in
// double (folding statistics into scale and shift, the running-statistics update). The
// element loops are the ISA kernels of channel_moments-inl.hpp and channel_affine-inl.hpp.
//
// Geometry. Each op computes statistics per "unit" over a set of values:
//   BatchNorm: unit = channel, values over N and the spatial dims;
//   GroupNorm: unit = (n, group); InstanceNorm: unit = (n, c) (GroupNorm with C groups);
//   MeanVarianceNormalization: unit = an index of the kept dims, values over `axes`.
// After dropping size-1 dims and merging neighbours, the tensor is one of
//   planes:  [B][U units][nseg segments][len] with len dense (NCHW: unit = channel, segments
//            = the N planes; GroupNorm: segments = the group's channels),
//   columns: [B][R rows][C dense channels], a unit is `group` adjacent channels (NHWC, [N, C]).
//
// Schedules (all results depend on the shape only, never on the executor or thread count):
//   inference (BatchNorm): one phase, elementwise, tasks of ~kTaskElements in memory order.
//   planes, fused: one phase; a task takes whole units, computes a unit's statistics, then
//     normalizes it while it is still in cache (L1/L2 for small units, L3 for a channel of a
//     large NCHW tensor): x is read from memory once.
//   planes, split (fewer than kMinUnits units, e.g. C = 1..15): each unit is cut into `parts`
//     rectangles; phase A computes partial moments per (unit, part) into the workspace, phase B
//     merges a unit's parts in part order (every part's task does the same merge) and
//     normalizes its part. Units run in waves of at most a quarter of the last-level cache, one
//     (A, B) pair of phases per wave, so phase B re-reads the wave from cache.
//   columns: phase 0 partial column moments per (b, row split); phase 1 merges the splits in
//     order per channel (and channels into groups) and folds scale and shift per (b, c) into
//     the workspace; phase 2 normalizes row blocks. Every channel spans the whole tensor, so
//     x is read twice (see channel_moments-inl.hpp).
//   BatchNorm training ends with a one-task phase that increments the batch counter, after
//   every task has read it. The running statistics of a channel are updated by the one task
//   that owns the channel's final statistics.
#include <algorithm>
#include <cmath>
#include <vector>

#include "plan_impl.hpp"

namespace simdnorm {
namespace detail {
namespace {

/// Elements per task: enough to amortize a task switch (64 KiB of x).
constexpr std::size_t kTaskElements = 16384;
/// Planes schedule: units go through the statistics kernel 4 at a time, interleaved, when
/// short (at most kTaskElements / 4 values), or made of short segments (under 1024 values,
/// such as 14x14 planes) and at most kTaskElements values: there the per-chunk scalar chains
/// dominate and overlap across units. Other units go one at a time. Measured (BatchNorm
/// training, 1 thread): 32x256x14x14 channels 0.43 -> 0.52 of copy interleaved, while
/// 1x64x112x112 channels (one 12544-value plane) drop 0.66 -> 0.58.
bool interleaved_units(std::size_t unit_elements, std::int64_t segment_len) {
  return unit_elements * 4 <= kTaskElements ||
         (unit_elements <= kTaskElements && segment_len < 1024);
}
/// Below this many units, the planes schedule splits units across tasks.
constexpr std::size_t kMinUnits = 16;
/// At most this many bytes of x per wave of split units (and at most 1/4 of the LLC).
constexpr std::size_t kWaveBytes = std::size_t(16) << 20;
/// At most this many row splits per problem in the columns schedule.
constexpr std::size_t kMaxColumnSplits = 16;

enum class ch_op { bn_inference, bn_training, group_norm, mean_variance_norm };

const char* op_name(ch_op op) {
  switch (op) {
    case ch_op::bn_inference:
    case ch_op::bn_training: return "batch_norm";
    case ch_op::group_norm: return "group_norm";
    case ch_op::mean_variance_norm: return "mean_variance_norm";
  }
  return "?";
}

struct dim_run {
  std::int64_t size = 1, xs = 0, ys = 0;
};

/// Merges dims idx[0..n) (outermost first, size-1 dims skipped) into runs: dim b joins the run
/// of the dim a before it when stride[a] == stride[b] * size[b] in x and in y. Returns the
/// number of runs, or -1 when there would be more than `max_runs`.
int merge_runs(const tensor_desc& x, const tensor_desc& y, const int* idx, int n, int max_runs,
               dim_run* out) {
  int runs = 0;
  for (int k = 0; k < n; ++k) {
    const int d = idx[k];
    if (x.shape[d] == 1) continue;
    if (runs > 0 && out[runs - 1].xs == x.strides[d] * x.shape[d] &&
        out[runs - 1].ys == y.strides[d] * x.shape[d]) {
      out[runs - 1].size *= x.shape[d];
      out[runs - 1].xs = x.strides[d];
      out[runs - 1].ys = y.strides[d];
      continue;
    }
    if (runs == max_runs) return -1;
    out[runs++] = {x.shape[d], x.strides[d], y.strides[d]};
  }
  return runs;
}

/// The canonical view (see the top of the file).
struct channel_geometry {
  bool columns = false;
  std::int64_t B = 1, xb = 0, yb = 0;
  // planes
  std::int64_t U = 1, xu = 0, yu = 0;
  std::int64_t nseg = 1, xs = 0, ys = 0, len = 1;
  // columns
  std::int64_t R = 1, xr = 0, yr = 0, C = 1;
  std::int64_t group = 1;  ///< channels per unit (GroupNorm), in both forms
};

/// Builds the geometry from the kept dims `kd` (in order: batch, channel) and the reduced dims
/// `rd` (any order; they are sorted by stride, as a reduction may take them in any order).
/// `group` kept channels make one unit.
bool make_geometry(const tensor_desc& x, const tensor_desc& y, const int* kd, int nk, int* rd,
                   int nr, std::int64_t group, channel_geometry* g) {
  std::stable_sort(rd, rd + nr, [&](int a, int b) { return x.strides[a] > x.strides[b]; });
  dim_run K[2], R[2];
  const int k_runs = merge_runs(x, y, kd, nk, 2, K);
  const int r_runs = merge_runs(x, y, rd, nr, 2, R);
  if (k_runs < 0 || r_runs < 0) return false;
  const dim_run kb = k_runs == 2 ? K[0] : dim_run{};
  const dim_run kc = k_runs == 2 ? K[1] : k_runs == 1 ? K[0] : dim_run{1, 1, 1};

  // planes: the innermost reduced run dense; or, failing that, one reduced run of segments of
  // length 1 (slow, but any strides work)
  bool planes = false;
  dim_run rn, rs;
  if (r_runs == 0) {
    planes = true;
  } else if (R[r_runs - 1].xs == 1 && R[r_runs - 1].ys == 1) {
    rs = R[r_runs - 1];
    if (r_runs == 2) rn = R[0];
    planes = group == 1 || r_runs == 1;
  } else if (r_runs == 1 && group == 1) {
    rn = R[0];
    planes = true;
  }
  // columns: the innermost kept run dense, at most one run of rows
  const bool columns = kc.size > 1 && kc.xs == 1 && kc.ys == 1 && r_runs <= 1;
  if (columns && (!planes || rs.size == 1)) {
    g->columns = true;
    g->B = kb.size, g->xb = kb.xs, g->yb = kb.ys;
    g->C = kc.size;
    g->group = group;
    if (r_runs == 1) g->R = R[0].size, g->xr = R[0].xs, g->yr = R[0].ys;
    return true;
  }
  if (!planes) return false;
  g->columns = false;
  g->B = kb.size, g->xb = kb.xs, g->yb = kb.ys;
  g->group = group;
  g->U = kc.size / group, g->xu = kc.xs * group, g->yu = kc.ys * group;
  g->len = rs.size;
  if (group > 1) {
    g->nseg = group, g->xs = kc.xs, g->ys = kc.ys;
  } else {
    g->nseg = rn.size, g->xs = rn.xs, g->ys = rn.ys;
  }
  return true;
}

/// Per-unit results folded for the normalize pass.
struct unit_stats {
  double mean = 0, rstd = 0;
};

enum class phase_kind {
  infer_planes,   // BatchNorm inference, planes
  infer_rows,     // BatchNorm inference, columns
  fused_units,    // planes: statistics + normalize per unit
  split_partial,  // planes, split: partial moments of (unit, part) of one wave
  split_finish,   // planes, split: merge + normalize (unit, part) of one wave
  col_partial,    // columns: partial moments per (b, row split)
  col_finish,     // columns: merge, fold scale/shift per (b, channel block)
  col_normalize,  // columns: normalize per (b, row block)
  bookkeeping,    // BatchNorm training: increment the batch counter
};

struct phase_desc {
  phase_kind kind;
  std::size_t tasks = 1;
  std::size_t first_unit = 0, units = 0;  // split phases: the wave
};

struct part_range {
  std::int64_t k0, k1, s0, s1;
};

struct channel_norm_plan final : plan_impl {
  ch_op op = ch_op::bn_inference;
  channel_geometry g;
  float eps = 0.f;
  bool relu = false, stream = false;
  bool per_group_affine = false;
  std::int64_t channels = 1;  ///< length of gamma and beta (C, or groups in per-group form)
  std::int64_t kept_channels = 1;  ///< C of the tensor (gamma index = channel % this)
  // BatchNorm
  momentum_convention convention = momentum_convention::pytorch;
  double momentum = 0.1;
  bool cumulative = false;
  std::vector<float> folded;  ///< inference: scale[C] then shift[C]
  // aliasing
  std::int64_t x_span = 0, y_span = 0;
  bool same_strides = false;
  // schedule
  std::vector<phase_desc> phases;
  std::size_t units_total = 1;  ///< B * units per b
  std::size_t unit_elements = 1;
  std::size_t units_per_task = 1;                // fused
  std::size_t parts = 1;                         // split
  std::size_t planes_per_task = 1, pieces = 1;   // infer_planes
  std::size_t splits = 1, chan_block = 1, rows_per_task = 1;  // columns
  std::vector<double> merge_w1, merge_w2;  ///< columns: Chan's weights, [group][splits]
  std::size_t ws_bytes = 0;

  std::size_t num_phases() const noexcept override { return phases.size(); }
  std::size_t num_tasks(std::size_t phase) const noexcept override { return phases[phase].tasks; }
  std::size_t workspace_bytes() const noexcept override { return ws_bytes; }

  status check_args(const norm_args& a) const noexcept override {
    const char* name = op_name(op);
    if (a.x == nullptr) return status::error(status_code::invalid_argument, "args.x is null");
    if (a.y == nullptr) return status::error(status_code::invalid_argument, "args.y is null");
    if (op == ch_op::bn_inference) {
      if (a.gamma || a.beta || a.running_mean || a.running_var)
        return status::error(status_code::invalid_argument,
                             "batch_norm: an inference plan folds gamma, beta and the running "
                             "statistics at creation (batch_norm_params); args must not carry them");
      if (a.mean || a.rstd || a.num_batches_tracked)
        return status::error(status_code::invalid_argument,
                             "batch_norm: args.mean, args.rstd and args.num_batches_tracked are "
                             "training-mode outputs");
    } else if (op == ch_op::bn_training) {
      if ((a.running_mean == nullptr) != (a.running_var == nullptr))
        return status::error(status_code::invalid_argument,
                             "batch_norm: args.running_mean and args.running_var go together");
      if (cumulative && a.running_mean && a.num_batches_tracked == nullptr)
        return status::error(status_code::invalid_argument,
                             "batch_norm: cumulative averaging needs args.num_batches_tracked");
      if (cumulative && a.num_batches_tracked && *a.num_batches_tracked < 0)
        return status::error(status_code::invalid_argument,
                             "batch_norm: *args.num_batches_tracked=%lld must be >= 0",
                             static_cast<long long>(*a.num_batches_tracked));
    } else {
      if (a.running_mean || a.running_var || a.num_batches_tracked)
        return status::error(status_code::invalid_argument,
                             "%s: args.running_mean, running_var and num_batches_tracked are "
                             "BatchNorm training arguments", name);
      if (op == ch_op::mean_variance_norm && (a.gamma || a.beta || a.mean || a.rstd))
        return status::error(status_code::invalid_argument,
                             "mean_variance_norm: no gamma, beta, mean or rstd (x and y only)");
    }
    return check_aliasing(a.x, x_span, a.y, y_span, same_strides);
  }

  // ---- per-unit arithmetic (double) ----------------------------------------------------------

  unit_stats finish(const moments_f64& m) const {
    const double var = m.m2 / double(unit_elements);
    unit_stats s;
    s.mean = m.mean;
    s.rstd = op == ch_op::mean_variance_norm ? 1.0 / (std::sqrt(var) + double(eps))
                                             : 1.0 / std::sqrt(var + double(eps));
    return s;
  }

  /// gamma/beta index of kept channel `ch` (the channel within the unit's batch item).
  std::int64_t affine_index(std::int64_t ch) const {
    ch %= kept_channels;
    return per_group_affine ? ch / g.group : ch;
  }

  /// center, scale, shift of one plane or channel: y = (x - center) * scale + shift.
  void fold(const unit_stats& s, std::int64_t ch, const norm_args& a, float* c, float* sc,
            float* sh) const {
    const std::int64_t i = affine_index(ch);
    const double scale = s.rstd * (a.gamma ? double(a.gamma[i]) : 1.0);
    const float center = float(s.mean);
    *c = center;
    *sc = float(scale);
    *sh = float((a.beta ? double(a.beta[i]) : 0.0) - (s.mean - double(center)) * scale);
  }

  /// Saved outputs and, for BatchNorm, the running statistics of unit q.
  void unit_outputs(const norm_args& a, std::size_t q, const moments_f64& m,
                    const unit_stats& s) const {
    if (a.mean) a.mean[q] = float(s.mean);
    if (a.rstd) a.rstd[q] = float(s.rstd);
    if (op != ch_op::bn_training || a.running_mean == nullptr) return;
    const double n = double(unit_elements);
    double w_new;
    if (cumulative) w_new = 1.0 / (double(*a.num_batches_tracked) + 1.0);
    else w_new = convention == momentum_convention::pytorch ? momentum : 1.0 - momentum;
    const double w_old = cumulative ? 1.0 - w_new
                                    : convention == momentum_convention::pytorch ? 1.0 - momentum
                                                                                  : momentum;
    const double var = convention == momentum_convention::pytorch ? m.m2 / (n - 1.0) : m.m2 / n;
    a.running_mean[q] = float(w_old * double(a.running_mean[q]) + w_new * s.mean);
    a.running_var[q] = float(w_old * double(a.running_var[q]) + w_new * var);
  }

  // ---- planes --------------------------------------------------------------------------------

  const float* unit_x(const norm_args& a, std::size_t q) const {
    const std::int64_t b = std::int64_t(q) / g.U, u = std::int64_t(q) % g.U;
    return a.x + b * g.xb + u * g.xu;
  }
  float* unit_y(const norm_args& a, std::size_t q) const {
    const std::int64_t b = std::int64_t(q) / g.U, u = std::int64_t(q) % g.U;
    return a.y + b * g.yb + u * g.yu;
  }

  /// Part j of a unit cut into n parts: ranges of whole segments when there are at least n
  /// segments, else each segment cut into n / nseg pieces (16-float aligned).
  part_range part_of(std::size_t j) const { return part_of(j, parts); }
  part_range part_of(std::size_t j, std::size_t parts) const {
    if (std::size_t(g.nseg) >= parts) {
      const std::int64_t k0 = g.nseg * std::int64_t(j) / std::int64_t(parts);
      const std::int64_t k1 = g.nseg * std::int64_t(j + 1) / std::int64_t(parts);
      return {k0, k1, 0, g.len};
    }
    const std::int64_t ps = std::int64_t(parts) / g.nseg;  // pieces per segment
    const std::int64_t k = std::int64_t(j) / ps, i = std::int64_t(j) % ps;
    const std::int64_t s0 = g.len * i / ps / 16 * 16;
    const std::int64_t s1 = i + 1 == ps ? g.len : g.len * (i + 1) / ps / 16 * 16;
    return {k, k + 1, s0, s1};
  }

  /// Normalizes segments [k0, k1) x [s0, s1) of unit q with its statistics.
  void normalize_unit(const norm_args& a, std::size_t q, const unit_stats& s,
                      const part_range& r) const {
    plane_affine_job j;
    j.x = unit_x(a, q) + r.k0 * g.xs + r.s0;
    j.y = unit_y(a, q) + r.k0 * g.ys + r.s0;
    j.x_outer = g.xs;
    j.y_outer = g.ys;
    j.len = std::size_t(r.s1 - r.s0);
    j.relu = relu;
    j.stream = stream;
    float c, sc, sh;
    j.center = &c;
    j.scale = &sc;
    j.shift = &sh;
    const std::int64_t u = std::int64_t(q) % g.U;
    const bool per_segment = g.group > 1 && !per_group_affine && (a.gamma || a.beta);
    if (!per_segment) {  // one (center, scale, shift) for the whole unit
      fold(s, u * g.group, a, &c, &sc, &sh);
      j.outer = std::size_t(r.k1 - r.k0);
      kernels->plane_affine(j);
      return;
    }
    for (std::int64_t k = r.k0; k < r.k1; ++k) {  // GroupNorm: segment k is channel k
      fold(s, u * g.group + k, a, &c, &sc, &sh);
      j.outer = 1;
      kernels->plane_affine(j);
      j.x += g.xs;
      j.y += g.ys;
    }
  }

  moments_f64 part_moments(const norm_args& a, std::size_t q, const part_range& r) const {
    const float* x = unit_x(a, q) + r.k0 * g.xs + r.s0;
    moments_f64 m;
    kernels->segment_moments(&x, 1, std::ptrdiff_t(g.xs), std::size_t(r.k1 - r.k0),
                             std::size_t(r.s1 - r.s0), &m);
    return m;
  }

  /// Whether units [q, q + n) share one set of parameters per unit (not GroupNorm's per-channel
  /// affine) and lie at the unit stride of one batch item: then one grid call normalizes them.
  bool uniform_block(const norm_args& a, std::size_t q, std::size_t n) const {
    const bool per_segment = g.group > 1 && !per_group_affine && (a.gamma || a.beta);
    return !per_segment && std::size_t(q) / std::size_t(g.U) == (q + n - 1) / std::size_t(g.U);
  }

  void run_fused(const norm_args& a, std::size_t begin, std::size_t end) const {
    constexpr std::size_t kBlock = 4;  // short units whose statistics run interleaved
    const std::size_t q_end = std::min(units_total, end * units_per_task);
    const part_range whole{0, g.nseg, 0, g.len};
    if (!interleaved_units(unit_elements, g.len)) {
      if (begin * units_per_task < q_end) run_long_units(a, begin * units_per_task, q_end);
      return;
    }
    const std::size_t block = kBlock;
    for (std::size_t q0 = begin * units_per_task; q0 < q_end; q0 += block) {
      const std::size_t n = std::min(block, q_end - q0);
      const float* xs[kBlock];
      for (std::size_t r = 0; r < n; ++r) xs[r] = unit_x(a, q0 + r);
      moments_f64 m[kBlock];
      kernels->segment_moments(xs, n, std::ptrdiff_t(g.xs), std::size_t(g.nseg),
                               std::size_t(g.len), m);
      unit_stats st[kBlock];
      for (std::size_t r = 0; r < n; ++r) {
        st[r] = finish(m[r]);
        unit_outputs(a, q0 + r, m[r], st[r]);
      }
      if (!uniform_block(a, q0, n)) {
        for (std::size_t r = 0; r < n; ++r) normalize_unit(a, q0 + r, st[r], whole);
        continue;
      }
      // segments outer, the block's units inner: adjacent NCHW channels in memory order
      float c[kBlock], sc[kBlock], sh[kBlock];
      for (std::size_t r = 0; r < n; ++r)
        fold(st[r], std::int64_t((q0 + r) % std::size_t(g.U)) * g.group, a, c + r, sc + r, sh + r);
      plane_affine_job j;
      j.x = unit_x(a, q0);
      j.y = unit_y(a, q0);
      j.x_outer = g.xs, j.y_outer = g.ys, j.x_inner = g.xu, j.y_inner = g.yu;
      j.outer = std::size_t(g.nseg);
      j.inner = n;
      j.len = std::size_t(g.len);
      j.center = c, j.scale = sc, j.shift = sh;
      j.p_inner = 1;
      j.relu = relu;
      j.stream = stream;
      kernels->plane_affine(j);
    }
  }

  /// Long units [q0, q1), one after the other: statistics, then the normalize pass from cache.
  void run_long_units(const norm_args& a, std::size_t q0, std::size_t q1) const {
    const part_range whole{0, g.nseg, 0, g.len};
    for (std::size_t q = q0; q < q1; ++q) {
      const moments_f64 m = part_moments(a, q, whole);
      const unit_stats s = finish(m);
      unit_outputs(a, q, m, s);
      normalize_unit(a, q, s, whole);
    }
  }

  moments_f64* split_partials(const norm_args& a) const {
    return static_cast<moments_f64*>(a.workspace);
  }

  void run_split_partial(const norm_args& a, const phase_desc& ph, std::size_t begin,
                         std::size_t end) const {
    moments_f64* ws = split_partials(a);
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t q = ph.first_unit + t / parts, j = t % parts;
      ws[q * parts + j] = part_moments(a, q, part_of(j));
    }
  }

  void run_split_finish(const norm_args& a, const phase_desc& ph, std::size_t begin,
                        std::size_t end) const {
    const moments_f64* ws = split_partials(a);
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t q = ph.first_unit + t / parts, j = t % parts;
      moments_f64 m;
      double n = 0;
      for (std::size_t i = 0; i < parts; ++i) {  // in part order, identically in every task
        const part_range r = part_of(i);
        const double nb = double((r.k1 - r.k0) * (r.s1 - r.s0));
        merge_moments(n, m, nb, ws[q * parts + i]);
        n += nb;
      }
      const unit_stats s = finish(m);
      if (j == 0) unit_outputs(a, q, m, s);
      normalize_unit(a, q, s, part_of(j));
    }
  }

  static void merge_moments(double na, moments_f64& acc, double nb, const moments_f64& b) {
    if (na == 0.0) {
      acc = b;
      return;
    }
    const double nt = na + nb, delta = b.mean - acc.mean;
    acc.mean += delta * (nb / nt);
    acc.m2 += b.m2 + delta * delta * (na * nb / nt);
  }

  // ---- BatchNorm inference -------------------------------------------------------------------

  void run_infer_planes(const norm_args& a, std::size_t begin, std::size_t end) const {
    plane_affine_job j;
    j.scale = folded.data();
    j.shift = folded.data() + g.U;
    j.relu = relu;
    j.stream = stream;
    const std::size_t planes = std::size_t(g.nseg * g.U);
    if (pieces > 1) {  // long planes: tasks are pieces of planes
      for (std::size_t t = begin; t < end; ++t) {
        const std::size_t p = t / pieces, i = t % pieces;
        const std::int64_t k = std::int64_t(p) / g.U, u = std::int64_t(p) % g.U;
        const std::int64_t s0 = g.len * std::int64_t(i) / std::int64_t(pieces) / 16 * 16;
        const std::int64_t s1 = i + 1 == pieces ? g.len
                                                : g.len * std::int64_t(i + 1) / std::int64_t(pieces) / 16 * 16;
        j.x = a.x + k * g.xs + u * g.xu + s0;
        j.y = a.y + k * g.ys + u * g.yu + s0;
        j.len = std::size_t(s1 - s0);
        j.scale = folded.data() + u;
        j.shift = folded.data() + g.U + u;
        kernels->plane_affine(j);
      }
      return;
    }
    // planes [p0, p1) in memory order: segment-major (n), units (c) inner
    std::size_t p = begin * planes_per_task;
    const std::size_t p1 = std::min(planes, end * planes_per_task);
    j.len = std::size_t(g.len);
    j.x_outer = g.xs, j.y_outer = g.ys, j.x_inner = g.xu, j.y_inner = g.yu;
    j.p_inner = 1;
    while (p < p1) {
      const std::int64_t k = std::int64_t(p) / g.U, u = std::int64_t(p) % g.U;
      plane_affine_job r = j;
      r.x = a.x + k * g.xs + u * g.xu;
      r.y = a.y + k * g.ys + u * g.yu;
      r.scale = folded.data() + u;
      r.shift = folded.data() + g.U + u;
      if (u != 0 || p1 - p < std::size_t(g.U)) {  // a partial row of units
        r.inner = std::min<std::size_t>(std::size_t(g.U - u), p1 - p);
        kernels->plane_affine(r);
        p += r.inner;
        continue;
      }
      r.outer = (p1 - p) / std::size_t(g.U);  // whole rows
      r.inner = std::size_t(g.U);
      kernels->plane_affine(r);
      p += r.outer * r.inner;
    }
  }

  void run_infer_rows(const norm_args& a, std::size_t begin, std::size_t end) const {
    row_affine_job j;
    j.x_stride = g.xr;
    j.y_stride = g.yr;
    j.cols = std::size_t(g.C);
    j.scale = folded.data();
    j.shift = folded.data() + g.C;
    j.relu = relu;
    j.stream = stream;
    const std::size_t r0 = begin * rows_per_task, r1 = std::min<std::size_t>(g.R, end * rows_per_task);
    if (r0 >= r1) return;
    j.x = a.x + std::int64_t(r0) * g.xr;
    j.y = a.y + std::int64_t(r0) * g.yr;
    j.rows = r1 - r0;
    kernels->row_affine(j);
  }

  // ---- columns -------------------------------------------------------------------------------

  std::size_t row_blocks() const { return (std::size_t(g.R) + rows_per_task - 1) / rows_per_task; }
  std::size_t chan_blocks() const { return (std::size_t(g.C) + chan_block - 1) / chan_block; }
  moments_f64* col_partials(const norm_args& a) const { return static_cast<moments_f64*>(a.workspace); }
  float* col_params(const norm_args& a) const {  // [B][3][C]: center, scale, shift
    return reinterpret_cast<float*>(col_partials(a) + std::size_t(g.B) * splits * std::size_t(g.C));
  }
  std::int64_t split_row(std::size_t i) const { return g.R * std::int64_t(i) / std::int64_t(splits); }

  void run_col_partial(const norm_args& a, std::size_t begin, std::size_t end) const {
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t b = t / splits, i = t % splits;
      const std::int64_t r0 = split_row(i), r1 = split_row(i + 1);
      kernels->column_moments(a.x + std::int64_t(b) * g.xb + r0 * g.xr, std::ptrdiff_t(g.xr),
                              std::size_t(r1 - r0), std::size_t(g.C),
                              col_partials(a) + (b * splits + i) * std::size_t(g.C));
    }
  }

  void run_col_finish(const norm_args& a, std::size_t begin, std::size_t end) const {
    constexpr std::size_t kSide = 32;  // units merged side by side, so their chains overlap
    const std::size_t C = std::size_t(g.C), G = std::size_t(g.group), nb = chan_blocks();
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t b = t / nb, c0 = (t % nb) * chan_block, c1 = std::min(C, c0 + chan_block);
      const moments_f64* part = col_partials(a) + b * splits * C;
      float* prm = col_params(a) + b * 3 * C;
      for (std::size_t u0 = c0; u0 < c1; u0 += kSide * G) {
        const std::size_t nu = std::min(kSide, (c1 - u0) / G);
        double mean[kSide], m2[kSide];
        // A unit is G adjacent channels: channels in order, each channel's splits in order;
        // merge_w1/w2 hold Chan's weights n_b / n and n_a n_b / n of each step.
        for (std::size_t j = 0, w = 0; j < G; ++j)
          for (std::size_t i = 0; i < splits; ++i, ++w) {
            const moments_f64* src = part + i * C + u0 + j;
            const double w1 = merge_w1[w], w2 = merge_w2[w];
            for (std::size_t u = 0; u < nu; ++u) {
              const moments_f64& p = src[u * G];
              if (w == 0) {
                mean[u] = p.mean, m2[u] = p.m2;
                continue;
              }
              const double delta = p.mean - mean[u];
              mean[u] += delta * w1;
              m2[u] += p.m2 + delta * delta * w2;
            }
          }
        for (std::size_t u = 0; u < nu; ++u) {
          const moments_f64 m{mean[u], m2[u]};
          const unit_stats s = finish(m);
          const std::size_t c = u0 + u * G;
          unit_outputs(a, b * (C / G) + c / G, m, s);
          for (std::size_t k = c; k < c + G; ++k)
            fold(s, std::int64_t(k), a, prm + k, prm + C + k, prm + 2 * C + k);
        }
      }
    }
  }

  void run_col_normalize(const norm_args& a, std::size_t begin, std::size_t end) const {
    const std::size_t C = std::size_t(g.C), nb = row_blocks();
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t b = t / nb, blk = t % nb;
      const std::size_t r0 = blk * rows_per_task, r1 = std::min<std::size_t>(g.R, r0 + rows_per_task);
      const float* prm = col_params(a) + b * 3 * C;
      row_affine_job j;
      j.x = a.x + std::int64_t(b) * g.xb + std::int64_t(r0) * g.xr;
      j.y = a.y + std::int64_t(b) * g.yb + std::int64_t(r0) * g.yr;
      j.x_stride = g.xr;
      j.y_stride = g.yr;
      j.rows = r1 - r0;
      j.cols = C;
      j.center = prm;
      j.scale = prm + C;
      j.shift = prm + 2 * C;
      j.relu = relu;
      j.stream = stream;
      kernels->row_affine(j);
    }
  }

  void run_tasks(const norm_args& a, std::size_t phase, std::size_t begin,
                 std::size_t end) const noexcept override {
    const phase_desc& ph = phases[phase];
    switch (ph.kind) {
      case phase_kind::infer_planes: run_infer_planes(a, begin, end); break;
      case phase_kind::infer_rows: run_infer_rows(a, begin, end); break;
      case phase_kind::fused_units: run_fused(a, begin, end); break;
      case phase_kind::split_partial: run_split_partial(a, ph, begin, end); break;
      case phase_kind::split_finish: run_split_finish(a, ph, begin, end); break;
      case phase_kind::col_partial: run_col_partial(a, begin, end); break;
      case phase_kind::col_finish: run_col_finish(a, begin, end); break;
      case phase_kind::col_normalize: run_col_normalize(a, begin, end); break;
      case phase_kind::bookkeeping:
        if (begin < end && a.num_batches_tracked) ++*a.num_batches_tracked;
        break;
    }
  }
};

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

/// Chooses the schedule of a made geometry (see the top of the file).
void schedule(channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  if (p.op == ch_op::bn_inference) {
    if (g.columns) {
      p.rows_per_task = std::max<std::size_t>(1, kTaskElements / std::size_t(g.C));
      p.phases.push_back({phase_kind::infer_rows, ceil_div(std::size_t(g.R), p.rows_per_task)});
    } else {
      const std::size_t planes = std::size_t(g.nseg * g.U), len = std::size_t(g.len);
      if (len >= 2 * kTaskElements) {
        p.pieces = std::min(len / 1024, ceil_div(len, kTaskElements));
        p.phases.push_back({phase_kind::infer_planes, planes * p.pieces});
      } else {
        p.planes_per_task = ceil_div(kTaskElements, len);
        p.phases.push_back({phase_kind::infer_planes, ceil_div(planes, p.planes_per_task)});
      }
    }
    return;
  }
  if (g.columns) {
    const std::size_t B = std::size_t(g.B), R = std::size_t(g.R), C = std::size_t(g.C);
    // splits of at least one 64-row statistics chunk, enough of them to feed the threads
    p.splits = std::max<std::size_t>(
        1, std::min({R / 64, kMaxColumnSplits, ceil_div(kMaxColumnSplits, B), R * C / kTaskElements}));
    const std::size_t G = std::size_t(g.group);
    for (std::size_t j = 0; j < G; ++j)
      for (std::size_t i = 0; i < p.splits; ++i) {
        const double r0 = double(R * i / p.splits), r1 = double(R * (i + 1) / p.splits);
        const double na = double(j) * double(R) + r0, nb = r1 - r0;
        p.merge_w1.push_back(nb / (na + nb));
        p.merge_w2.push_back(na * nb / (na + nb));
      }
    p.chan_block = G * std::max<std::size_t>(1, 4096 / (p.splits * G));
    p.rows_per_task = std::max<std::size_t>(1, kTaskElements / C);
    p.phases.push_back({phase_kind::col_partial, B * p.splits});
    p.phases.push_back({phase_kind::col_finish, B * ceil_div(C, p.chan_block)});
    p.phases.push_back({phase_kind::col_normalize, B * ceil_div(R, p.rows_per_task)});
    p.ws_bytes = B * p.splits * C * sizeof(moments_f64) + B * 3 * C * sizeof(float);
  } else {
    const std::size_t units = p.units_total, n = p.unit_elements;
    std::size_t parts = 1;
    if (units < kMinUnits && units * n >= 2 * kTaskElements)
      parts = std::min(ceil_div(kMinUnits, units), std::max<std::size_t>(1, n / (kTaskElements / 2)));
    if (parts > 1 && std::size_t(g.nseg) < parts) {  // pieces of segments: at least 1024 long
      const std::size_t per_seg = std::min(ceil_div(parts, std::size_t(g.nseg)),
                                           std::max<std::size_t>(1, std::size_t(g.len) / 1024));
      parts = per_seg * std::size_t(g.nseg);
    }
    if (parts <= 1) {
      // short units go 4 at a time through the interleaved statistics kernel
      p.units_per_task = ceil_div(kTaskElements, n);
      if (interleaved_units(n, g.len)) p.units_per_task = std::min(units, ceil_div(p.units_per_task, 4) * 4);
      p.phases.push_back({phase_kind::fused_units, ceil_div(units, p.units_per_task)});
    } else {
      p.parts = parts;
      const std::size_t wave_budget = std::min(last_level_cache_bytes() / 4, kWaveBytes);
      const std::size_t per_wave = std::max<std::size_t>(1, wave_budget / (n * sizeof(float)));
      for (std::size_t q = 0; q < units; q += per_wave) {
        const std::size_t w = std::min(per_wave, units - q);
        p.phases.push_back({phase_kind::split_partial, w * parts, q, w});
        p.phases.push_back({phase_kind::split_finish, w * parts, q, w});
      }
      p.ws_bytes = units * parts * sizeof(moments_f64);
    }
  }
  if (p.op == ch_op::bn_training) p.phases.push_back({phase_kind::bookkeeping, 1});
}

status check_stores(store_policy s, const char* name) {
  if (s != store_policy::automatic && s != store_policy::regular && s != store_policy::streaming)
    return status::error(status_code::invalid_argument, "%s: unknown store_policy %d", name, int(s));
  return {};
}

/// Validation common to every channel op, then geometry and schedule. `kd`: kept dims in
/// order; the other dims are reduced. `kept_channels`: C; `group`: channels per unit.
status make_channel_plan(const tensor_desc& x, const tensor_desc& y, std::shared_ptr<channel_norm_plan> p,
                         const int* kd, int nk, std::int64_t kept_channels, std::int64_t group,
                         plan* out) {
  const char* name = op_name(p->op);
  p->kept_channels = kept_channels;
  int rd[max_dims], nr = 0;
  for (int d = 0; d < x.ndim; ++d)
    if (std::find(kd, kd + nk, d) == kd + nk) rd[nr++] = d;
  if (!make_geometry(x, y, kd, nk, rd, nr, group, &p->g))
    return status::error(status_code::unsupported_layout,
                         "%s: unsupported strides: the reduced dims must merge into a dense "
                         "innermost run (plus at most one strided run), or the channels must be "
                         "dense with the other dims merging into one strided run of rows", name);
  if (!elements_disjoint(y))
    return status::error(status_code::unsupported_layout, "%s: y's strides make elements overlap", name);
  p->same_strides = true;
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != 1 && x.strides[i] != y.strides[i]) p->same_strides = false;
  p->x_span = span_elements(x);
  p->y_span = span_elements(y);
  const channel_geometry& g = p->g;
  if (g.columns) {
    p->units_total = std::size_t(g.B * (g.C / g.group));
    p->unit_elements = std::size_t(g.R * g.group);
  } else {
    p->units_total = std::size_t(g.B * g.U);
    p->unit_elements = std::size_t(g.nseg * g.len);
  }
  p->rows = p->units_total;
  p->cols = p->unit_elements;
  try {
    schedule(*p);
  } catch (...) {
    return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", name);
  }
  plan_access::set(out, std::move(p));
  return {};
}

status common_checks(const tensor_desc& x, const tensor_desc& y, float eps, store_policy stores,
                     int min_ndim, const char* name, plan* out) {
  if (out == nullptr) return status::error(status_code::invalid_argument, "%s: out is null", name);
  status s = check_tensor(x, "x");
  if (!s) return s;
  if (!(s = check_tensor(y, "y"))) return s;
  if (!(s = check_same_shape(x, y))) return s;
  if (x.ndim < min_ndim)
    return status::error(status_code::invalid_argument, "%s: x.ndim=%d must be at least %d", name,
                         x.ndim, min_ndim);
  if (!(s = check_eps(eps))) return s;
  return check_stores(stores, name);
}

status check_layout(channel_layout l, const char* name) {
  if (l != channel_layout::nchw && l != channel_layout::nhwc)
    return status::error(status_code::invalid_argument, "%s: unknown channel_layout %d", name, int(l));
  return {};
}

std::shared_ptr<channel_norm_plan> new_plan(ch_op op, status* s) {
  std::shared_ptr<channel_norm_plan> p;
  const kernel_table* kt = selected_table(s);
  if (kt == nullptr) return p;
  try {
    p = std::make_shared<channel_norm_plan>();
  } catch (...) {
    *s = status::error(status_code::out_of_memory, "%s: cannot allocate the plan", op_name(op));
    return p;
  }
  p->kernels = kt;
  p->op = op;
  return p;
}

bool streaming(store_policy sp, const tensor_desc& x) {
  std::size_t n = 1;
  for (int i = 0; i < x.ndim; ++i) n *= std::size_t(x.shape[i]);
  return use_streaming_stores(sp, n * sizeof(float), n * sizeof(float));
}

status make_batch_norm(const tensor_desc& x, const tensor_desc& y, const batch_norm_params& bp,
                       plan* out) {
  const char* name = "batch_norm";
  status s = common_checks(x, y, bp.eps, bp.stores, 2, name, out);
  if (!s) return s;
  if (!(s = check_layout(bp.layout, name))) return s;
  const int ca = bp.layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.shape[ca];
  std::int64_t numel = 1;
  for (int i = 0; i < x.ndim; ++i) numel *= x.shape[i];
  if (bp.training) {
    if (bp.running_mean || bp.running_var || bp.gamma || bp.beta)
      return status::error(status_code::invalid_argument,
                           "batch_norm: training plans take gamma, beta and the running statistics "
                           "in norm_args; batch_norm_params' pointers are for inference");
    if (!(bp.momentum >= 0.f && bp.momentum <= 1.f))
      return status::error(status_code::invalid_argument,
                           "batch_norm: momentum=%g must be in [0, 1]", double(bp.momentum));
    if (bp.convention != momentum_convention::pytorch && bp.convention != momentum_convention::onnx)
      return status::error(status_code::invalid_argument, "batch_norm: unknown momentum_convention %d",
                           int(bp.convention));
    if (numel / C < 2)
      return status::error(status_code::invalid_argument,
                           "batch_norm: training needs more than 1 value per channel (got %lld "
                           "values for each of %lld channels)",
                           static_cast<long long>(numel / C), static_cast<long long>(C));
  } else {
    if (bp.running_mean == nullptr || bp.running_var == nullptr)
      return status::error(status_code::invalid_argument,
                           "batch_norm: inference needs batch_norm_params::running_mean and "
                           "running_var");
    for (std::int64_t c = 0; c < C; ++c)
      if (!(bp.running_var[c] >= 0.f))
        return status::error(status_code::invalid_argument,
                             "batch_norm: running_var[%lld]=%g must be >= 0",
                             static_cast<long long>(c), double(bp.running_var[c]));
  }
  auto p = new_plan(bp.training ? ch_op::bn_training : ch_op::bn_inference, &s);
  if (!p) return s;
  p->eps = bp.eps;
  p->relu = bp.fuse_relu;
  p->stream = streaming(bp.stores, x);
  p->channels = C;
  p->momentum = double(bp.momentum);
  p->convention = bp.convention;
  p->cumulative = bp.cumulative;
  if (!bp.training) {
    try {
      p->folded.resize(std::size_t(2 * C));
    } catch (...) {
      return status::error(status_code::out_of_memory, "batch_norm: cannot allocate the plan");
    }
    for (std::int64_t c = 0; c < C; ++c) {  // y = x * scale + shift, folded in double
      const double scale = (bp.gamma ? double(bp.gamma[c]) : 1.0) /
                           std::sqrt(double(bp.running_var[c]) + double(bp.eps));
      p->folded[std::size_t(c)] = float(scale);
      p->folded[std::size_t(C + c)] =
          float((bp.beta ? double(bp.beta[c]) : 0.0) - double(bp.running_mean[c]) * scale);
    }
  }
  const int kd[1] = {ca};
  return make_channel_plan(x, y, std::move(p), kd, 1, C, 1, out);
}

status make_group_norm(const tensor_desc& x, const tensor_desc& y, channel_layout layout,
                       std::int64_t groups, bool per_group, float eps, store_policy stores,
                       int min_ndim, const char* name, plan* out) {
  status s = common_checks(x, y, eps, stores, min_ndim, name, out);
  if (!s) return s;
  if (!(s = check_layout(layout, name))) return s;
  const int ca = layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.shape[ca];
  if (groups < 1 || C % groups != 0)
    return status::error(status_code::invalid_argument,
                         "group_norm: num_groups=%lld must be >= 1 and divide C=%lld",
                         static_cast<long long>(groups), static_cast<long long>(C));
  auto p = new_plan(ch_op::group_norm, &s);
  if (!p) return s;
  p->eps = eps;
  p->stream = streaming(stores, x);
  p->per_group_affine = per_group;
  p->channels = per_group ? groups : C;
  const int kd[2] = {0, ca};
  return make_channel_plan(x, y, std::move(p), kd, 2, C, C / groups, out);
}

status make_mvn(const tensor_desc& x, const tensor_desc& y, const mean_variance_norm_params& mp,
                plan* out) {
  const char* name = "mean_variance_norm";
  status s = common_checks(x, y, mp.eps, mp.stores, 1, name, out);
  if (!s) return s;
  if (mp.num_axes < 1 || mp.num_axes > x.ndim)
    return status::error(status_code::invalid_argument,
                         "mean_variance_norm: num_axes=%d must be in [1, ndim=%d]", mp.num_axes, x.ndim);
  bool reduced[max_dims] = {};
  for (int i = 0; i < mp.num_axes; ++i) {
    const int a = mp.axes[i];
    if (a < -x.ndim || a >= x.ndim)
      return status::error(status_code::invalid_argument,
                           "mean_variance_norm: axes[%d]=%d is outside [-%d, %d)", i, a, x.ndim, x.ndim);
    const int d = a < 0 ? a + x.ndim : a;
    if (reduced[d])
      return status::error(status_code::invalid_argument,
                           "mean_variance_norm: axis %d appears twice", d);
    reduced[d] = true;
  }
  auto p = new_plan(ch_op::mean_variance_norm, &s);
  if (!p) return s;
  p->eps = mp.eps;
  p->stream = streaming(mp.stores, x);
  int kd[max_dims], nk = 0;
  std::int64_t kept = 1;
  for (int d = 0; d < x.ndim; ++d)
    if (!reduced[d]) kd[nk++] = d, kept *= x.shape[d];
  return make_channel_plan(x, y, std::move(p), kd, nk, kept, 1, out);
}

}  // namespace
}  // namespace detail

status plan::batch_norm(const tensor_desc& x, const tensor_desc& y, const batch_norm_params& params,
                        plan* out) noexcept {
  return detail::make_batch_norm(x, y, params, out);
}

status plan::group_norm(const tensor_desc& x, const tensor_desc& y, const group_norm_params& params,
                        plan* out) noexcept {
  return detail::make_group_norm(x, y, params.layout, params.num_groups, params.per_group_affine,
                                 params.eps, params.stores, 2, "group_norm", out);
}

status plan::instance_norm(const tensor_desc& x, const tensor_desc& y,
                           const instance_norm_params& params, plan* out) noexcept {
  // InstanceNorm is GroupNorm with one channel per group.
  const int ca = params.layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.ndim >= 2 && x.ndim <= max_dims ? x.shape[ca] : 1;
  return detail::make_group_norm(x, y, params.layout, C, false, params.eps, params.stores, 3,
                                 "instance_norm", out);
}

status plan::mean_variance_norm(const tensor_desc& x, const tensor_desc& y,
                                const mean_variance_norm_params& params, plan* out) noexcept {
  return detail::make_mvn(x, y, params, out);
}

}  // namespace simdnorm
