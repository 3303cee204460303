// Phase executors of the channel ops on the planes view (geometry.hpp): BatchNorm inference
// over planes, the fused schedule (a unit's statistics, then its normalize pass from cache)
// and the two phases of the split schedule (partial moments per part, then merge and
// normalize). Which phases run, with how many tasks, is decided in schedule.cpp.
#include <algorithm>

#include "../tuning.hpp"
#include "channel_plan.hpp"

namespace simdnorm::detail::channel {

const void* channel_norm_plan::unit_x(const call_args& a, std::size_t q, std::int64_t off) const {
  const std::int64_t b = std::int64_t(q) / g.U, u = std::int64_t(q) % g.U;
  return x_at(a, b * g.xb + u * g.xu + off);
}

void* channel_norm_plan::unit_y(const call_args& a, std::size_t q, std::int64_t off) const {
  const std::int64_t b = std::int64_t(q) / g.U, u = std::int64_t(q) % g.U;
  return y_at(a, b * g.yb + u * g.yu + off);
}

/// Part j of a unit cut into n parts: ranges of whole segments when there are at least n
/// segments, else each segment cut into n / nseg aligned pieces.
part_range channel_norm_plan::part_of(std::size_t j, std::size_t n) const {
  if (std::size_t(g.nseg) >= n) {
    const std::int64_t k0 = g.nseg * std::int64_t(j) / std::int64_t(n);
    const std::int64_t k1 = g.nseg * std::int64_t(j + 1) / std::int64_t(n);
    return {k0, k1, 0, g.len};
  }
  const std::int64_t ps = std::int64_t(n) / g.nseg;  // pieces per segment
  const std::int64_t k = std::int64_t(j) / ps, i = std::int64_t(j) % ps;
  return {k, k + 1, piece_bound(g.len, i, ps), piece_bound(g.len, i + 1, ps)};
}

/// GroupNorm with per-channel gamma or beta, or per-channel quantization that differs between
/// channels: each segment (channel) of a unit has its own (center, scale, shift).
bool channel_norm_plan::per_segment_affine(const call_args& a) const {
  return g.group > 1 && (quant_varies || (!per_group_affine && (a.gamma || a.beta)));
}

/// Normalizes segments [k0, k1) x [s0, s1) of unit q with its statistics.
void channel_norm_plan::normalize_unit(const call_args& a, std::size_t q, const unit_stats& s,
                                       const part_range& r) const {
  plane_affine_job j;
  j.x = unit_x(a, q, r.k0 * g.xs + r.s0);
  j.y = unit_y(a, q, r.k0 * g.ys + r.s0);
  j.x_outer = g.xs;
  j.y_outer = g.ys;
  j.len = std::size_t(r.s1 - r.s0);
  j.relu = relu;
  j.relu_floor = relu_floor;
  j.stream = stream;
  float c, sc, sh;
  j.center = &c;
  j.scale = &sc;
  j.shift = &sh;
  const std::int64_t u = std::int64_t(q) % g.U;
  if (!per_segment_affine(a)) {  // one (center, scale, shift) for the whole unit
    fold(s, u * g.group, a, &c, &sc, &sh);
    j.outer = std::size_t(r.k1 - r.k0);
    ck.plane_affine(j);
    return;
  }
  for (std::int64_t k = r.k0; k < r.k1; ++k) {  // GroupNorm: segment k is channel k
    fold(s, u * g.group + k, a, &c, &sc, &sh);
    j.x = unit_x(a, q, k * g.xs + r.s0);
    j.y = unit_y(a, q, k * g.ys + r.s0);
    j.outer = 1;
    ck.plane_affine(j);
  }
}

moments_f64 channel_norm_plan::part_moments(const call_args& a, std::size_t q,
                                            const part_range& r) const {
  const void* x = unit_x(a, q, r.k0 * g.xs + r.s0);
  moments_f64 m;
  ck.segment_moments(&x, 1, std::ptrdiff_t(g.xs), std::size_t(r.k1 - r.k0),
                     std::size_t(r.s1 - r.s0), tiny_m2(), &m);
  return m;
}

void channel_norm_plan::run_fused(const call_args& a, std::size_t begin, std::size_t end) const {
  constexpr std::size_t kBlock = kFusedBlockUnits;
  const std::size_t q_end = std::min(units_total, end * units_per_task);
  const part_range whole{0, g.nseg, 0, g.len};
  if (!interleaved_units(unit_elements, g.len)) {
    if (begin * units_per_task < q_end) run_long_units(a, begin * units_per_task, q_end);
    return;
  }
  const std::size_t U = std::size_t(g.U);
  for (std::size_t q0 = begin * units_per_task, n; q0 < q_end; q0 += n) {
    n = std::min({kBlock, q_end - q0, U - q0 % U});  // a block ends with its batch item
    const void* xs[kBlock];
    for (std::size_t r = 0; r < n; ++r) xs[r] = unit_x(a, q0 + r);
    moments_f64 m[kBlock];
    ck.segment_moments(xs, n, std::ptrdiff_t(g.xs), std::size_t(g.nseg), std::size_t(g.len),
                       tiny_m2(), m);
    if (stage == stats_stage::moments) {
      for (std::size_t r = 0; r < n; ++r) record_moments(a, q0 + r, m[r]);
      continue;
    }
    unit_stats st[kBlock];
    for (std::size_t r = 0; r < n; ++r) {
      st[r] = finish(m[r]);
      unit_outputs(a, q0 + r, m[r], st[r]);
    }
    if (per_segment_affine(a)) {
      for (std::size_t r = 0; r < n; ++r) normalize_unit(a, q0 + r, st[r], whole);
      continue;
    }
    // segments outer, the block's units inner: adjacent NCHW channels in memory order
    float c[kBlock], sc[kBlock], sh[kBlock];
    for (std::size_t r = 0; r < n; ++r)
      fold(st[r], std::int64_t((q0 + r) % U) * g.group, a, c + r, sc + r, sh + r);
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
    j.relu_floor = relu_floor;
    j.stream = stream;
    ck.plane_affine(j);
  }
}

/// Long units [q0, q1), one after the other: statistics, then the normalize pass from cache.
void channel_norm_plan::run_long_units(const call_args& a, std::size_t q0, std::size_t q1) const {
  const part_range whole{0, g.nseg, 0, g.len};
  for (std::size_t q = q0; q < q1; ++q) {
    const moments_f64 m = part_moments(a, q, whole);
    if (record_moments(a, q, m)) continue;
    const unit_stats s = finish(m);
    unit_outputs(a, q, m, s);
    normalize_unit(a, q, s, whole);
  }
}

void channel_norm_plan::run_split_partial(const call_args& a, const phase_desc& ph,
                                          std::size_t begin, std::size_t end) const {
  moments_f64* ws = static_cast<moments_f64*>(a.workspace);  // [unit][part]
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t q = ph.first_unit + t / parts, j = t % parts;
    ws[q * parts + j] = part_moments(a, q, part_of(j));
  }
}

void channel_norm_plan::run_split_finish(const call_args& a, const phase_desc& ph,
                                         std::size_t begin, std::size_t end) const {
  const moments_f64* ws = static_cast<const moments_f64*>(a.workspace);
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
    if (stage == stats_stage::moments) {
      if (j == 0) record_moments(a, q, m);
      continue;
    }
    const unit_stats s = finish(m);
    if (j == 0) unit_outputs(a, q, m, s);
    normalize_unit(a, q, s, part_of(j));
  }
}

/// stats_stage::apply: units in tasks of units_per_task (parts == 1) or (unit, part) tasks,
/// each normalized from its merged record as the full plan normalizes it from its own moments.
void channel_norm_plan::run_apply_units(const call_args& a, std::size_t begin,
                                        std::size_t end) const {
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t j = parts > 1 ? t % parts : 0;
    const std::size_t q0 = parts > 1 ? t / parts : t * units_per_task;
    const std::size_t q1 = parts > 1 ? q0 + 1 : std::min(units_total, q0 + units_per_task);
    for (std::size_t q = q0; q < q1; ++q) {
      std::size_t count;
      const moments_f64 m = given_moments(a, q, &count);
      const unit_stats s = finish(m, count);
      if (j == 0) unit_outputs(a, q, m, s, count);
      normalize_unit(a, q, s, part_of(j));
    }
  }
}

void channel_norm_plan::run_infer_planes(const call_args& a, std::size_t begin,
                                         std::size_t end) const {
  plane_affine_job j;
  j.scale = folded.data();
  j.shift = folded.data() + g.U;
  j.relu = relu;
  j.relu_floor = relu_floor;
  j.stream = stream;
  const std::size_t planes = std::size_t(g.nseg * g.U);
  if (pieces > 1) {  // long planes: tasks are pieces of planes
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t p = t / pieces, i = t % pieces;
      const std::int64_t k = std::int64_t(p) / g.U, u = std::int64_t(p) % g.U;
      const std::int64_t s0 = piece_bound(g.len, std::int64_t(i), std::int64_t(pieces));
      const std::int64_t s1 = piece_bound(g.len, std::int64_t(i + 1), std::int64_t(pieces));
      j.x = x_at(a, k * g.xs + u * g.xu + s0);
      j.y = y_at(a, k * g.ys + u * g.yu + s0);
      j.len = std::size_t(s1 - s0);
      j.scale = folded.data() + u;
      j.shift = folded.data() + g.U + u;
      ck.plane_affine(j);
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
    r.x = x_at(a, k * g.xs + u * g.xu);
    r.y = y_at(a, k * g.ys + u * g.yu);
    r.scale = folded.data() + u;
    r.shift = folded.data() + g.U + u;
    if (u != 0 || p1 - p < std::size_t(g.U)) {  // a partial row of units
      r.inner = std::min<std::size_t>(std::size_t(g.U - u), p1 - p);
      ck.plane_affine(r);
      p += r.inner;
      continue;
    }
    r.outer = (p1 - p) / std::size_t(g.U);  // whole rows
    r.inner = std::size_t(g.U);
    ck.plane_affine(r);
    p += r.outer * r.inner;
  }
}

}  // namespace simdnorm::detail::channel
