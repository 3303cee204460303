// fold_units: the per-unit work between the statistics and the normalize pass of the channel
// ops on the columns view (NHWC, [N, C]): every unit's rstd and outputs, and the normalize
// parameters where a unit is one channel (BatchNorm, InstanceNorm, GroupNorm of one channel
// per group; larger groups and 8-bit outputs fold per channel afterwards, in fold_unit).
//
// Formula: per unit of n values with mean and M2 (channel/unit_math.hpp, operation for
//   operation): rstd = 1 / sqrt(M2 / n + eps) (or 1 / (sqrt(M2 / n) + eps)); the saved mean
//   and rstd in f32; running = float(w_old * running + w_new * stat), stat the mean and
//   M2 / (n - 1) (or M2 / n); center = float(mean) (0 where M2 > kHugeM2), scale =
//   float(rstd * gamma), shift = float(beta - (mean - center) * rstd * gamma).
// Layout: units in blocks of kFoldBlock lanes, a fixed count so that the compiler turns each
//   step into the ISA's double vectors; a last partial block goes through a padded copy. Why:
//   a unit's chain (two divisions and a square root, a dozen conversions and multiplies) run
//   unit after unit set the fold's speed, which at one row per channel ([N, C] after a linear
//   layer) is a tenth of the training call (docs/performance.md); in vectors a block's chains
//   overlap.
// Memory traffic: per unit 24 bytes of moments in, up to 40 bytes of outputs.
// Preconditions: n >= 1 (n >= 2 for the unbiased running variance to be finite).
// Numerics: division and square root round correctly in every ISA's vectors (IEEE 754), and no
//   multiply-add is fused (-ffp-contract=off): every ISA gives the scalar functions' bits.

/// Units [u0, u0 + kFoldBlock) of j. Each loop goes between the job's arrays and local ones, never
/// from one of the job's arrays to another, so that it vectorizes without alias checks.
inline void fold_block(const unit_fold_job& j, std::size_t u0) {
  constexpr std::size_t B = kFoldBlock;
  const double e = double(j.eps);
  double mean[B], m2[B], n[B], rstd[B];
  for (std::size_t l = 0; l < B; ++l) mean[l] = j.mean[u0 + l];
  for (std::size_t l = 0; l < B; ++l) m2[l] = j.m2[u0 + l];
  for (std::size_t l = 0; l < B; ++l) n[l] = j.count[u0 + l];
  if (j.eps_outside_sqrt)
    for (std::size_t l = 0; l < B; ++l) rstd[l] = 1.0 / (std::sqrt(m2[l] / n[l]) + e);
  else
    for (std::size_t l = 0; l < B; ++l) rstd[l] = 1.0 / std::sqrt(m2[l] / n[l] + e);
  for (std::size_t l = 0; l < B; ++l) j.rstd[u0 + l] = rstd[l];
  if (j.mean_out)
    for (std::size_t l = 0; l < B; ++l) j.mean_out[u0 + l] = float(mean[l]);
  if (j.rstd_out)
    for (std::size_t l = 0; l < B; ++l) j.rstd_out[u0 + l] = float(rstd[l]);

  if (j.running_mean) {
    double var[B], rm[B], rv[B];
    if (j.running_unbiased)
      for (std::size_t l = 0; l < B; ++l) var[l] = m2[l] / (n[l] - 1.0);
    else
      for (std::size_t l = 0; l < B; ++l) var[l] = m2[l] / n[l];
    for (std::size_t l = 0; l < B; ++l) rm[l] = double(j.running_mean[u0 + l]);
    for (std::size_t l = 0; l < B; ++l) rv[l] = double(j.running_var[u0 + l]);
    for (std::size_t l = 0; l < B; ++l) {
      rm[l] = j.running_w_old * rm[l] + j.running_w_new * mean[l];
      rv[l] = j.running_w_old * rv[l] + j.running_w_new * var[l];
    }
    for (std::size_t l = 0; l < B; ++l) j.running_mean[u0 + l] = float(rm[l]);
    for (std::size_t l = 0; l < B; ++l) j.running_var[u0 + l] = float(rv[l]);
  }

  if (j.center) {
    double scale[B], shift[B], center[B];
    for (std::size_t l = 0; l < B; ++l) scale[l] = rstd[l];
    if (j.gamma)
      for (std::size_t l = 0; l < B; ++l) scale[l] = rstd[l] * double(j.gamma[u0 + l]);
    for (std::size_t l = 0; l < B; ++l) shift[l] = 0.0;
    if (j.beta)
      for (std::size_t l = 0; l < B; ++l) shift[l] = double(j.beta[u0 + l]);
    // The center in double, where float(mean) is exact, keeps each loop in one width.
    for (std::size_t l = 0; l < B; ++l) center[l] = double(float(mean[l]));
    for (std::size_t l = 0; l < B; ++l) center[l] = m2[l] > kHugeM2 ? 0.0 : center[l];
    for (std::size_t l = 0; l < B; ++l) shift[l] = shift[l] - (mean[l] - center[l]) * scale[l];
    for (std::size_t l = 0; l < B; ++l) j.center[u0 + l] = float(center[l]);
    for (std::size_t l = 0; l < B; ++l) j.scale[u0 + l] = float(scale[l]);
    for (std::size_t l = 0; l < B; ++l) j.shift[u0 + l] = float(shift[l]);
  }
}

/// j with every array advanced by u units.
inline unit_fold_job fold_job_at(unit_fold_job j, std::size_t u) {
  auto at = [u](auto*& p) {
    if (p) p += u;
  };
  at(j.mean), at(j.m2), at(j.count), at(j.rstd), at(j.mean_out), at(j.rstd_out);
  at(j.running_mean), at(j.running_var), at(j.gamma), at(j.beta);
  at(j.center), at(j.scale), at(j.shift);
  return j;
}

inline void fold_units(const unit_fold_job& job) {
  constexpr std::size_t B = kFoldBlock;
  std::size_t u0 = 0;
  for (; u0 + B <= job.units; u0 += B) fold_block(job, u0);
  const std::size_t k = job.units - u0;
  if (k == 0) return;
  // The last units through a padded copy (M2 = 0, n = 2 past them: no 0 / 0).
  const unit_fold_job tail = fold_job_at(job, u0);
  double mean[B] = {}, m2[B] = {}, n[B], rstd[B];
  float mean_out[B], rstd_out[B], rm[B] = {}, rv[B] = {}, gamma[B] = {}, beta[B] = {};
  float center[B], scale[B], shift[B];
  for (std::size_t l = 0; l < B; ++l) n[l] = 2.0;
  unit_fold_job pad = tail;
  pad.units = B;
  auto stage = [k](const auto* from, auto* to, auto*& job_ptr) {
    if (!job_ptr) return;
    if (from)
      for (std::size_t l = 0; l < k; ++l) to[l] = from[l];
    job_ptr = to;
  };
  stage(tail.mean, mean, pad.mean);
  stage(tail.m2, m2, pad.m2);
  stage(tail.count, n, pad.count);
  stage(tail.running_mean, rm, pad.running_mean);
  stage(tail.running_var, rv, pad.running_var);
  stage(tail.gamma, gamma, pad.gamma);
  stage(tail.beta, beta, pad.beta);
  const float* none = nullptr;
  stage(none, rstd, pad.rstd);
  stage(none, mean_out, pad.mean_out);
  stage(none, rstd_out, pad.rstd_out);
  stage(none, center, pad.center);
  stage(none, scale, pad.scale);
  stage(none, shift, pad.shift);
  fold_block(pad, 0);
  auto unstage = [k](const auto* from, auto* to) {
    if (to)
      for (std::size_t l = 0; l < k; ++l) to[l] = from[l];
  };
  unstage(rstd, tail.rstd);
  unstage(mean_out, tail.mean_out);
  unstage(rstd_out, tail.rstd_out);
  unstage(rm, tail.running_mean);
  unstage(rv, tail.running_var);
  unstage(center, tail.center);
  unstage(scale, tail.scale);
  unstage(shift, tail.shift);
}
