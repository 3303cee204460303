// Phase executors of the channel ops on the columns view (geometry.hpp): BatchNorm inference
// over rows of dense channels, and the three phases of the columns schedule (partial column
// moments per row split and channel range, the merge and fold per channel block, the normalize
// pass per row block); and run_tasks, which sends each phase to its executor.
#include <algorithm>

#include "../tuning.hpp"
#include "channel_plan.hpp"

namespace simdnorm::detail::channel {
namespace {

/// Workspace: the partial moments [B][splits][C], then the parameters [B][3][C] (center,
/// scale, shift).
moments_f64* col_partials(const call_args& a) { return static_cast<moments_f64*>(a.workspace); }

float* col_params(const channel_norm_plan& p, const call_args& a) {
  return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + p.col_params_offset);
}

std::int64_t split_row(const channel_norm_plan& p, std::size_t i) {
  return p.g.R * std::int64_t(i) / std::int64_t(p.splits);
}

}  // namespace

void channel_norm_plan::run_infer_rows(const call_args& a, std::size_t begin,
                                       std::size_t end) const {
  row_affine_job j;
  j.x_stride = g.xr;
  j.y_stride = g.yr;
  j.cols = std::size_t(g.C);
  j.scale = folded.data();
  j.shift = folded.data() + g.C;
  j.relu = relu;
  j.relu_floor = relu_floor;
  j.stream = stream;
  const std::size_t r0 = begin * rows_per_task;
  const std::size_t r1 = std::min<std::size_t>(g.R, end * rows_per_task);
  if (r0 >= r1) return;
  j.x = x_at(a, std::int64_t(r0) * g.xr);
  j.y = y_at(a, std::int64_t(r0) * g.yr);
  j.rows = r1 - r0;
  ck.row_affine(j);
}

void channel_norm_plan::run_col_partial(const call_args& a, std::size_t begin,
                                        std::size_t end) const {
  const std::size_t C = std::size_t(g.C);
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t bi = t / col_ranges, k = t % col_ranges;  // bi = b * splits + i
    const std::size_t b = bi / splits, i = bi % splits;
    const std::size_t c0 = k * range_cols, c1 = k + 1 == col_ranges ? C : c0 + range_cols;
    const std::int64_t r0 = split_row(*this, i), r1 = split_row(*this, i + 1);
    ck.column_moments(x_at(a, std::int64_t(b) * g.xb + r0 * g.xr + std::int64_t(c0)),
                      std::ptrdiff_t(g.xr), std::size_t(r1 - r0), c1 - c0, tiny_m2(),
                      col_partials(a) + bi * C + c0);
  }
}

void channel_norm_plan::run_col_finish(const call_args& a, std::size_t begin,
                                       std::size_t end) const {
  constexpr std::size_t kSide = kMergeSideBySide;
  const std::size_t C = std::size_t(g.C), G = std::size_t(g.group), nb = chan_blocks();
  const std::size_t R = std::size_t(g.R);
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t b = t / nb, c0 = (t % nb) * chan_block, c1 = std::min(C, c0 + chan_block);
    const moments_f64* part = col_partials(a) + b * splits * C;
    float* prm = col_params(*this, a) + b * 3 * C;
    for (std::size_t u0 = c0; u0 < c1; u0 += kSide * G) {
      const std::size_t nu = std::min(kSide, (c1 - u0) / G);
      double mean[kSide], m2[kSide], count[kSide];
      // A unit is G adjacent channels: channels in order, each channel's splits in order.
      // Step w takes in the rows [r0, r1) of channel j after j * R + r0 values (computed here,
      // not tabled at plan time: a table would grow with the group, up to 2^40 entries).
      for (std::size_t j = 0, w = 0; j < G; ++j)
        for (std::size_t i = 0; i < splits; ++i, ++w) {
          const moments_f64* src = part + i * C + u0 + j;
          const double r0 = double(R * i / splits), r1 = double(R * (i + 1) / splits);
          const chan_weights cw = chan_weights_of(double(j) * double(R) + r0, r1 - r0);
          for (std::size_t u = 0; u < nu; ++u) {
            const moments_f64& p = src[u * G];
            if (w == 0) {
              mean[u] = p.mean, m2[u] = p.m2;
              continue;
            }
            chan_merge(mean[u], m2[u], p, cw);
          }
        }
      const std::size_t q0 = b * (C / G) + u0 / G;
      if (stage == stats_stage::moments) {
        for (std::size_t u = 0; u < nu; ++u) record_moments(a, q0 + u, {mean[u], m2[u]});
        continue;
      }
      std::fill(count, count + nu, double(unit_elements));
      fold_columns(a, q0, u0, nu, mean, m2, count, prm);
    }
  }
}

/// stats_stage::apply: the parameters of the normalize pass per (b, channel block) from the
/// merged records, as run_col_finish folds its own moments.
void channel_norm_plan::run_apply_fold(const call_args& a, std::size_t begin,
                                       std::size_t end) const {
  constexpr std::size_t kSide = kMergeSideBySide;
  const std::size_t C = std::size_t(g.C), G = std::size_t(g.group), nb = chan_blocks();
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t b = t / nb, c0 = (t % nb) * chan_block, c1 = std::min(C, c0 + chan_block);
    float* prm = col_params(*this, a) + b * 3 * C;
    for (std::size_t u0 = c0; u0 < c1; u0 += kSide * G) {
      const std::size_t nu = std::min(kSide, (c1 - u0) / G);
      const std::size_t q0 = b * (C / G) + u0 / G;
      double mean[kSide], m2[kSide], count[kSide];
      for (std::size_t u = 0; u < nu; ++u) {
        std::size_t n;
        const moments_f64 m = given_moments(a, q0 + u, &n);
        mean[u] = m.mean, m2[u] = m.m2, count[u] = double(n);
      }
      fold_columns(a, q0, u0, nu, mean, m2, count, prm);
    }
  }
}

void channel_norm_plan::fold_columns(const call_args& a, std::size_t q, std::size_t c,
                                     std::size_t units, const double* mean, const double* m2,
                                     const double* count, float* prm) const {
  const std::size_t C = std::size_t(g.C), G = std::size_t(g.group);
  double rstd[kMergeSideBySide];
  unit_fold_job j;
  j.units = units;
  j.mean = mean;
  j.m2 = m2;
  j.count = count;
  j.eps = eps;
  j.eps_outside_sqrt = op == ch_op::mean_variance_norm;
  j.rstd = rstd;
  j.mean_out = a.mean ? a.mean + q : nullptr;
  j.rstd_out = a.rstd ? a.rstd + q : nullptr;
  if (op == ch_op::bn_training && a.running_mean) {
    const running_weights w = running_weights_of(running, a.num_batches_tracked);
    j.running_mean = a.running_mean + q;
    j.running_var = a.running_var + q;
    j.running_w_old = w.w_old;
    j.running_w_new = w.w_new;
    j.running_unbiased = w.unbiased;
  }
  // One channel per unit with its own gamma and beta (affine_index(k) = k), float y.
  const bool channels_fold = G == 1 && quant.empty() && g.C <= kept_channels;
  if (channels_fold) {
    j.gamma = a.gamma ? a.gamma + c : nullptr;
    j.beta = a.beta ? a.beta + c : nullptr;
    j.center = prm + c;
    j.scale = prm + C + c;
    j.shift = prm + 2 * C + c;
  }
  ck.fold_units(j);
  if (channels_fold) return;
  for (std::size_t u = 0; u < units; ++u) {
    const unit_stats s{mean[u], rstd[u], m2[u]};
    for (std::size_t k = c + u * G; k < c + (u + 1) * G; ++k)
      fold(s, std::int64_t(k), a, prm + k, prm + C + k, prm + 2 * C + k);
  }
}

void channel_norm_plan::run_col_normalize(const call_args& a, std::size_t begin,
                                          std::size_t end) const {
  const std::size_t C = std::size_t(g.C), nb = row_blocks();
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t b = t / nb, blk = t % nb;
    const std::size_t r0 = blk * rows_per_task, r1 = std::min<std::size_t>(g.R, r0 + rows_per_task);
    const float* prm = col_params(*this, a) + b * 3 * C;
    row_affine_job j;
    j.x = x_at(a, std::int64_t(b) * g.xb + std::int64_t(r0) * g.xr);
    j.y = y_at(a, std::int64_t(b) * g.yb + std::int64_t(r0) * g.yr);
    j.x_stride = g.xr;
    j.y_stride = g.yr;
    j.rows = r1 - r0;
    j.cols = C;
    j.center = prm;
    j.scale = prm + C;
    j.shift = prm + 2 * C;
    j.relu = relu;
    j.relu_floor = relu_floor;
    j.stream = stream;
    ck.row_affine(j);
  }
}

void channel_norm_plan::run_tasks(const call_args& a, std::size_t phase, std::size_t begin,
                                  std::size_t end) const noexcept {
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
    case phase_kind::apply_units: run_apply_units(a, begin, end); break;
    case phase_kind::apply_fold: run_apply_fold(a, begin, end); break;
    case phase_kind::bookkeeping:
      if (begin < end && a.num_batches_tracked) ++*a.num_batches_tracked;
      break;
  }
}

}  // namespace simdnorm::detail::channel
