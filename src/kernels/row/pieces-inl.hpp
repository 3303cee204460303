// The row ops in stages: statistics of a column range (row_moments), the fold of a row's piece
// statistics (row_fold), and the normalize pass from given statistics (row_apply). Plans use
// them to spread one long row over tasks (its pieces' statistics in one phase, the fold and
// normalize of each piece in the next) and for the split-statistics API (statistics of the
// part of a row one process holds, merged across processes, then applied).
//
// Formula: the op's (Op::with_stats: layer_norm_op, rms_norm_op, lp_norm_op): moments_f64
//   holds the mean and M2 for LayerNorm, and mean 0 and the sum of x^2 (or |x| for L1) in m2
//   for the others.
// Numerics: the same operations as the one-call row kernel (row/normalize-inl.hpp with
//   long_rows): row_moments of a piece is the piece's moments; row_fold folds pieces in order
//   with Stats::fold; row_apply computes each row's constants with Stats::finish. So a long
//   row (more than kShortCols) gets the same bits whether its pieces ran in one task or many.
//   Short rows take float-lane statistics in the one-call kernel, and double here: the two
//   agree within the error bound, not bitwise.
// Memory traffic per element: row_moments reads x; row_apply reads x and writes y.

/// Statistics of columns [0, job.n) of job.rows rows: out[r * out_stride].
template <class V, class Op, class TX>
void row_moments(const row_norm_config& cfg, const row_moments_job& job) {
  Op::with_stats(cfg, [&](auto stats) {
    using Stats = decltype(stats);
    const TX* x = static_cast<const TX*>(job.x);
    row_prefetcher none;
    std::size_t r = 0;
    for (; r + kRowGroup <= job.rows; r += kRowGroup) {
      const TX* xs[kRowGroup];
      moments_f64 m[kRowGroup];
      for (std::size_t i = 0; i < kRowGroup; ++i) xs[i] = x + std::ptrdiff_t(r + i) * job.stride;
      Stats::template row_moments<V, kRowGroup>(cfg, xs, job.n, m, none);
      for (std::size_t i = 0; i < kRowGroup; ++i) job.out[(r + i) * job.out_stride] = m[i];
    }
    for (; r < job.rows; ++r) {
      const TX* xs[1] = {x + std::ptrdiff_t(r) * job.stride};
      Stats::template row_moments<V, 1>(cfg, xs, job.n, job.out + r * job.out_stride, none);
    }
  });
}

/// The statistics of a row of cfg.cols values from the statistics of its pieces of
/// kPieceElements (the last one shorter), in order.
template <class Op>
moments_f64 row_fold(const row_norm_config& cfg, const moments_f64* pieces) {
  moments_f64 row;
  Op::with_stats(cfg, [&](auto stats) {
    for (std::size_t start = 0, i = 0; start < cfg.cols; start += kPieceElements, ++i) {
      const std::size_t len = cfg.cols - start < kPieceElements ? cfg.cols - start : kPieceElements;
      decltype(stats)::fold(start, len, pieces[i], row);
    }
  });
  return row;
}

template <class V, class Stats, bool Gamma, bool Beta, row_epilogue E, bool Stream, class TX,
          class TY>
void row_apply_impl(const row_norm_config& cfg, const row_block& blk, const row_totals* totals) {
  const bool group =
      !Stream || (std::size_t(blk.y_stride) * sizeof(TY)) % stream_alignment<V>() == 0;
  for (std::size_t r0 = 0; r0 < blk.rows; r0 += kRowGroup) {
    const std::size_t count = blk.rows - r0 < kRowGroup ? blk.rows - r0 : kRowGroup;
    const TX* xs[kRowGroup];
    const TX* zs[kRowGroup];
    TY* ys[kRowGroup];
    row_consts k;
    point_rows(blk, r0, count, count, xs, ys, has_operand(E) ? zs : nullptr);
    for (std::size_t r = 0; r < count; ++r) {
      const row_totals& t = totals[r0 + r];
      Stats::finish(cfg, 1.0 / t.count, t.m, k, r);
      if (blk.mean) blk.mean[r0 + r] = k.mean[r];
      if (blk.rstd) blk.rstd[r0 + r] = k.rs[r];
    }
    row_prefetcher none;
    normalize_group<V, Stats, Gamma, Beta, E, Stream>(cfg, xs, zs, ys, k, count, group, none);
  }
  if constexpr (Stream) stream_fence();
}

/// Normalizes blk's rows, cfg.cols columns each (a piece or whole rows; cfg.gamma and
/// cfg.beta point at the first column's), from the statistics of each whole row: totals[r].
/// Writes blk.mean and blk.rstd when set.
template <class V, class Op, class TX, class TY>
void row_apply(const row_norm_config& cfg, const row_block& blk, const row_totals* totals) {
  Op::with_stats(cfg, [&](auto stats) {
    using Stats = decltype(stats);
    with_row_variant<Stats, TY>(cfg, blk, [&](auto g, auto b, auto z, auto s) {
      row_apply_impl<V, Stats, decltype(g)::value, decltype(b)::value, decltype(z)::value,
                     decltype(s)::value, TX, TY>(cfg, blk, totals);
    });
  });
}
