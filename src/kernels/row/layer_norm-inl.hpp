// layer_norm_op: LayerNorm over rows of a 2-D view [rows, cols] with row strides.
//
// Formula: y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), var = M2 / cols
//   (biased), gamma and beta optional. The mean is kept as a float pair hi + lo (compensated
//   mean), so t = (x - hi) * rstd - lo * rstd: one sub and one fms; y = t * gamma + beta: one
//   fma. Without the compensated mean, lo = 0 and hi is a single float.
// Layout, passes, traffic, grouping: row/normalize-inl.hpp. Statistics: row/stats_long-inl.hpp
//   and row/stats_short-inl.hpp (chunked Welford/Chan on x shifted by a float near the row's
//   mean, common/moments-inl.hpp).
// Numerics: the output error is a few ulp of the normalized value plus the statistics'
//   rounding, independent of the mean's magnitude when compensated (tests/reference.hpp derives
//   the bound). rstd is float-rounded from double (long rows) or computed in float lanes
//   (short rows, 1.5 ulp). Chunks whose float sums overflow (|x - mean| beyond about 1e19),
//   or, with an eps below FLT_MIN, whose squares underflow (keeps_tiny_m2), are computed
//   again in double (common/moments-inl.hpp); short rows whose float M2 is not finite (or
//   that small) take the long-row statistics (the check runs once per group). In a row whose
//   deviations may exceed FLT_MAX (sqrt(M2) beyond FLT_MAX / 2: values of both signs near
//   FLT_MAX), x - hi could overflow, so hi = 0 and lo = mean: t = x * rs - mean * rs, one fms,
//   whose rounding costs 2 u |mean| / std <= 4 sqrt(cols) u there. A NaN or Inf in a row makes
//   that row's statistics, hence the whole row, non-finite; other rows are untouched.

template <bool Shift>
struct layer_norm_stats {
  static constexpr bool centered = true;
  static constexpr bool has_gamma = true, has_beta = true;  // the affine terms the op takes
  static constexpr bool has_gate = false;
  static constexpr bool has_residual_after = true;  // post-norm: y = norm(x) + residual
  static constexpr bool beta_from_modulation = false;

  /// V::size short rows: vector-lane moments, rstd in float lanes. between_rows() runs after
  /// each row's sums (see rows_moments_short_f32).
  template <class V, class TX, class Between = no_work_between_rows>
  SIMDNORM_ALWAYS_INLINE static void short_rows(const row_norm_config& cfg, const TX* const* xs,
                                                row_consts& k, row_prefetcher& pf,
                                                Between between_rows = {}) {
    V hi, lo, m2;
    rows_moments_short_f32<V, Shift>(xs, cfg.cols, hi, lo, m2, pf, between_rows);
    const V var_eps = fma(m2, V(float(cfg.inv_cols)), V(cfg.eps));
    const V rs = V(1.f) / sqrt(var_eps);
    hi.store_unaligned(k.hi);
    hi.store_unaligned(k.mean);
    rs.store_unaligned(k.rs);
    (lo * rs).store_unaligned(k.lo_rs);
    // Rows whose M2 is not finite: their float sums overflowed (M2 may exceed FLT_MAX while
    // the variance does not, and n * lo^2 overflows for means near FLT_MAX), or a NaN / Inf
    // is in the row; with a tiny eps, also rows whose M2 fell below n * FLT_MIN
    // (keeps_tiny_m2); and rows whose var + eps overflowed float (an eps near FLT_MAX), for
    // which rs would be 0. They take the long-row statistics, whose chunks are computed again
    // in double where their float sums lost their value (a NaN or Inf stays non-finite
    // there), and whose rstd is computed in double.
    const float len_min = keeps_tiny_m2(cfg.eps) ? float(cfg.cols) * FLT_MIN : 0.f;
    const V lost = select(var_eps > V(FLT_MAX), V(INFINITY), m2);
    if (!all(both(lost <= V(FLT_MAX), lost >= V(len_min))))
      long_rows_where<layer_norm_stats>(
          cfg, xs, k, lost, [len_min](float v) { return !(v <= FLT_MAX && v >= len_min); });
  }

  /// Moments of R long rows in double (row/stats_long-inl.hpp).
  template <class V, std::size_t R, class TX>
  static void row_moments(const row_norm_config& cfg, const TX* const* xs, std::size_t n,
                          moments_f64* m, row_prefetcher& pf) {
    const bool tiny_m2 = keeps_tiny_m2(cfg.eps);
    // Two rows at a time: 2 x 8 accumulators stay in the 32 registers of AVX-512, R = 4 would
    // spill them (on 16-register ISAs the two rows' accumulators alone fill the file).
    if constexpr (R % 2 == 0) {
      for (std::size_t r = 0; r < R; r += 2)
        rows_moments_f32<V, Shift, 2>(xs + r, n, m + r, pf, tiny_m2);
    } else {
      rows_moments_f32<V, Shift, R>(xs, n, m, pf, tiny_m2);
    }
  }

  static void fold(std::size_t start, std::size_t len, const moments_f64& piece, moments_f64& row) {
    fold_piece(start, len, piece, row);
  }

  /// Row j's constants from its moments over 1 / inv_count values: rstd rounded from double.
  static void finish(const row_norm_config& cfg, double inv_count, const moments_f64& m,
                     row_consts& k, std::size_t j) {
    const float rs = float(1.0 / __builtin_sqrt(m.m2 * inv_count + double(cfg.eps)));
    const float mean = float(m.mean);
    // |x - mean| <= sqrt(M2) for every x of the row: beyond FLT_MAX / 2, x - hi may overflow.
    const bool uncentered = m.m2 > 0.25 * double(FLT_MAX) * double(FLT_MAX);
    const float hi = uncentered ? 0.f : mean;
    const float lo = uncentered ? mean : Shift ? float(m.mean - double(hi)) : 0.f;
    k.hi[j] = hi;
    k.rs[j] = rs;
    k.lo_rs[j] = lo * rs;
    k.mean[j] = mean;
  }
};

/// The row-op interface of the kernel table (row/pieces-inl.hpp): LayerNorm's statistics for
/// the plan's choice of mean (compensated or single float).
struct layer_norm_op {
  static constexpr bool scaled_outputs = true;  // 8-bit y (row/quantize-inl.hpp)
  template <class F>
  static void with_stats(const row_norm_config& cfg, F f) {
    if (cfg.compensated_mean)
      f(layer_norm_stats<true>{});
    else
      f(layer_norm_stats<false>{});
  }
};
