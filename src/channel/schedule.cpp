// Task sizing of the channel ops: how a made geometry is cut into phases and tasks. All
// results depend on the shape only, never on the executor or the thread count, so the bits of
// the results do not either. The numbers are in tuning.hpp.
//
//   inference (BatchNorm): one phase, elementwise, tasks of ~kTaskElements in memory order
//     (one task below kInlineElements).
//   planes, fused: one phase; a task takes whole units, computes a unit's statistics, then
//     normalizes it while it is still in cache (L1/L2 for small units, L3 for a channel of a
//     large NCHW tensor): x is read from memory once.
//   planes, split (fewer than kMinUnits units, e.g. C = 1..15): each unit is cut into `parts`
//     rectangles; phase A computes partial moments per (unit, part) into the workspace, phase B
//     merges a unit's parts in part order (every part's task does the same merge) and
//     normalizes its part. Units run in waves of at most a kWaveCacheDivisor-th of the
//     last-level cache, one (A, B) pair of phases per wave, so phase B re-reads the wave from
//     cache.
//   columns: phase 0 partial column moments per (b, row split, channel range); phase 1 merges
//     the splits in order per channel (and channels into groups) and folds scale and shift
//     per (b, c) into the workspace; phase 2 normalizes row blocks. Every channel spans the whole
//     tensor, so x is read twice (see channel_moments-inl.hpp).
//   BatchNorm training ends with a one-task phase that increments the batch counter, after
//   every task has read it. The running statistics of a channel are updated by the one task
//   that owns the channel's final statistics.
//   Split statistics (stats_stage): `moments` runs the statistics phases above and records
//   each unit's moments where the full plan would normalize it (no normalize, outputs or
//   bookkeeping); `apply` skips the statistics: planes normalize (unit, part) tasks from the
//   records, columns fold the records per channel block and then normalize row blocks.
#include <algorithm>

#include "../tuning.hpp"
#include "channel_plan.hpp"

namespace simdnorm::detail::channel {
namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

void schedule_inference(channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  if (g.columns) {
    const std::size_t rows = std::size_t(g.R), C = std::size_t(g.C);
    // A call smaller than kInlineElements is one task: it runs inline, no thread is woken.
    p.rows_per_task =
        rows * C < kInlineElements ? rows : std::max<std::size_t>(1, kTaskElements / C);
    p.phases.push_back({phase_kind::infer_rows, ceil_div(rows, p.rows_per_task)});
    return;
  }
  const std::size_t planes = std::size_t(g.nseg * g.U), len = std::size_t(g.len);
  if (planes * len < kInlineElements) {
    p.planes_per_task = planes;
    p.phases.push_back({phase_kind::infer_planes, 1});
  } else if (len >= 2 * kTaskElements) {
    p.pieces = std::min(len / kMinPieceElements, ceil_div(len, kTaskElements));
    p.phases.push_back({phase_kind::infer_planes, planes * p.pieces});
  } else {
    p.planes_per_task = ceil_div(kTaskElements, len);
    p.phases.push_back({phase_kind::infer_planes, ceil_div(planes, p.planes_per_task)});
  }
}

void schedule_columns(channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  const std::size_t B = std::size_t(g.B), R = std::size_t(g.R), C = std::size_t(g.C);
  // Tasks to feed the threads, from channel ranges first (no bit changes), then row splits of
  // at least one statistics chunk (tuning.hpp).
  const std::size_t want =
      std::max<std::size_t>(1, std::min(ceil_div(kColumnPartialTasks, B), R * C / kTaskElements));
  const std::size_t blocks = std::max<std::size_t>(1, C / kColumnRangeChannels);
  p.range_cols = ceil_div(blocks, std::min(blocks, want)) * kColumnRangeChannels;
  p.col_ranges = std::max<std::size_t>(1, C / p.range_cols);  // the last one takes the rest
  p.splits = std::max<std::size_t>(1, std::min(R / kColumnChunkRows, ceil_div(want, p.col_ranges)));
  const std::size_t G = std::size_t(g.group);
  p.chan_block = G * std::max<std::size_t>(1, kColumnFinishMoments / (p.splits * G));
  p.rows_per_task = std::max<std::size_t>(1, kTaskElements / C);
  p.phases.push_back({phase_kind::col_partial, B * p.splits * p.col_ranges});
  p.phases.push_back({phase_kind::col_finish, B * ceil_div(C, p.chan_block)});
  if (p.stage == stats_stage::full)
    p.phases.push_back({phase_kind::col_normalize, B * ceil_div(R, p.rows_per_task)});
  p.col_params_offset = B * p.splits * C * sizeof(moments_f64);
  p.ws_bytes = p.col_params_offset + B * 3 * C * sizeof(float);
}

/// Parts a unit is cut into across tasks: more than one when the units are too few to feed
/// the threads (kMinUnits) and large enough to gain.
std::size_t plane_parts(const channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  const std::size_t units = p.units_total, n = p.unit_elements;
  std::size_t parts = 1;
  if (units < kMinUnits && units * n >= 2 * kTaskElements)
    parts = std::min(ceil_div(kMinUnits, units), std::max<std::size_t>(1, n / (kTaskElements / 2)));
  if (parts > 1 && std::size_t(g.nseg) < parts) {  // pieces of segments: not too short
    const std::size_t per_seg =
        std::min(ceil_div(parts, std::size_t(g.nseg)),
                 std::max<std::size_t>(1, std::size_t(g.len) / kMinPieceElements));
    parts = per_seg * std::size_t(g.nseg);
  }
  return parts;
}

void schedule_apply(channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  if (g.columns) {
    const std::size_t B = std::size_t(g.B), R = std::size_t(g.R), C = std::size_t(g.C);
    const std::size_t G = std::size_t(g.group);
    p.chan_block = G * std::max<std::size_t>(1, kColumnFinishMoments / G);
    p.rows_per_task = std::max<std::size_t>(1, kTaskElements / C);
    p.phases.push_back({phase_kind::apply_fold, B * ceil_div(C, p.chan_block)});
    p.phases.push_back({phase_kind::col_normalize, B * ceil_div(R, p.rows_per_task)});
    p.ws_bytes = B * 3 * C * sizeof(float);
    return;
  }
  p.parts = plane_parts(p);
  if (p.parts > 1) {
    p.phases.push_back({phase_kind::apply_units, p.units_total * p.parts});
    return;
  }
  p.units_per_task = ceil_div(kTaskElements, p.unit_elements);
  p.phases.push_back({phase_kind::apply_units, ceil_div(p.units_total, p.units_per_task)});
}

void schedule_planes(channel_norm_plan& p) {
  const channel_geometry& g = p.g;
  const std::size_t units = p.units_total, n = p.unit_elements;
  const std::size_t parts = plane_parts(p);
  if (parts <= 1) {
    // short units go through the interleaved statistics kernel several at a time
    p.units_per_task = ceil_div(kTaskElements, n);
    if (interleaved_units(n, g.len))
      p.units_per_task =
          std::min(units, ceil_div(p.units_per_task, kInterleavedUnits) * kInterleavedUnits);
    p.phases.push_back({phase_kind::fused_units, ceil_div(units, p.units_per_task)});
    return;
  }
  p.parts = parts;
  const std::size_t wave_budget =
      std::min(last_level_cache_bytes() / kWaveCacheDivisor, kWaveBytes);
  const std::size_t per_wave = std::max<std::size_t>(1, wave_budget / (n * sizeof(float)));
  for (std::size_t q = 0; q < units; q += per_wave) {
    const std::size_t w = std::min(per_wave, units - q);
    p.phases.push_back({phase_kind::split_partial, w * parts, q, w});
    p.phases.push_back({phase_kind::split_finish, w * parts, q, w});
  }
  p.ws_bytes = units * parts * sizeof(moments_f64);
}

}  // namespace

/// Short units (a block of kInterleavedUnits fits a task), or units made of short
/// segments (under kShortSegmentElements, such as 14x14 planes) of at most kTaskElements
/// values: there the per-chunk scalar chains dominate and overlap across units. Other units go
/// one at a time.
bool interleaved_units(std::size_t unit_elements, std::int64_t segment_len) {
  return unit_elements * kInterleavedUnits <= kTaskElements ||
         (unit_elements <= kTaskElements && std::size_t(segment_len) < kShortSegmentElements);
}

void schedule(channel_norm_plan& p) {
  if (p.op == ch_op::bn_inference) {
    schedule_inference(p);
    return;
  }
  if (p.stage == stats_stage::apply)
    schedule_apply(p);
  else if (p.g.columns)
    schedule_columns(p);
  else
    schedule_planes(p);
  if (p.op == ch_op::bn_training && p.stage != stats_stage::moments)
    p.phases.push_back({phase_kind::bookkeeping, 1});
}

}  // namespace simdnorm::detail::channel
