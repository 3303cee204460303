// rms_norm_op: RMSNorm over rows of a 2-D view [rows, cols] with row strides.
//
// Formula: y = x * rstd * gamma, rstd = 1 / sqrt(sum(x^2) / cols + eps), gamma optional
//   (beta is rejected by the plan; adaLN modulation comes in as a per-batch gamma and beta,
//   y = fma(t, gamma_eff, beta_eff)). Two multiplies per element. Gated RMSNorm (row_block::gate)
//   then multiplies by silu(gate) = gate / (1 + exp(-gate)) in the normalize pass
//   (row_value in row/normalize-inl.hpp), still rounding y once.
// Layout, passes, traffic, grouping: row/normalize-inl.hpp (one statistics pass, one
//   normalize pass from cache: 8 bytes of memory traffic per element).
// Numerics: the sum of squares has no cancellation: float accumulators per kMomentChunk
//   elements (four per lane), chunks summed in double; relative error about eps_f32 * depth,
//   with the depth derived in tests/reference.hpp. A float sum that overflows (|x| beyond
//   about 1e19) or underflows (|x| below about 1e-19, where squares flush to zero or lose
//   bits as subnormals) is summed again with the values scaled by a power of two
//   (squares_lost, scaled_sum_squares in common/moments-inl.hpp); short rows then take the
//   long-row sum. The check runs once per chunk or per group of short rows. NaN or Inf stays
//   in its row.

struct rms_norm_stats {
  static constexpr bool centered = false;
  // No beta of its own (the plan refuses one): a beta here is the adaLN shift the plan folds
  // per batch (row_norm_plan.cpp), always with a gamma and never with the gate.
  static constexpr bool has_gamma = true, has_beta = true;
  static constexpr bool beta_from_modulation = true;
  static constexpr bool has_gate = true;            // gated RMSNorm: y * silu(gate)
  static constexpr bool has_residual_after = true;  // post-norm: y = norm(x) + residual

  /// V::size short rows: sums of squares reduced for all rows at once, rstd in float lanes.
  template <class V, class TX>
  SIMDNORM_ALWAYS_INLINE static void short_rows(const row_norm_config& cfg, const TX* const* xs,
                                                row_consts& k, row_prefetcher& pf) {
    const V sq = row_lanes_sum<V>(
        xs, cfg.cols, [](V v, std::size_t) { return v; }, [](V s, V v) { return fma(v, v, s); },
        pf);
    const V ms_eps = sq * V(float(cfg.inv_cols)) + V(cfg.eps);
    (V(1.f) / sqrt(ms_eps)).store_unaligned(k.rs);
    // Rows whose float sum of squares overflowed or underflowed, or whose ms + eps overflowed
    // (an eps near FLT_MAX; rs would be 0): the long-row sum (scaled), rstd in double.
    const float len_min = float(cfg.cols) * FLT_MIN;
    const V lost = select(ms_eps > V(FLT_MAX), V(INFINITY), sq);
    if (any(squares_lost(lost, V(len_min))))
      long_rows_where<rms_norm_stats>(cfg, xs, k, lost,
                                      [&](float s) { return squares_lost(s, len_min); });
  }

  /// Sums of squares of R long rows in double (row/stats_long-inl.hpp), in m2.
  template <class V, std::size_t R, class TX>
  static void row_moments(const row_norm_config&, const TX* const* xs, std::size_t n,
                          moments_f64* m, row_prefetcher& pf) {
    for (std::size_t r = 0; r < R; ++r) m[r] = {0.0, row_sum_squares_f32<V>(xs[r], n, pf)};
  }

  static void fold(std::size_t start, std::size_t len, const moments_f64& piece, moments_f64& row) {
    fold_sum(start, len, piece, row);
  }

  /// Row j's rstd from its sum of squares over 1 / inv_count values, rounded from double.
  static void finish(const row_norm_config& cfg, double inv_count, const moments_f64& m,
                     row_consts& k, std::size_t j) {
    const double ms = m.m2 * inv_count;
    k.rs[j] = float(1.0 / __builtin_sqrt(ms + double(cfg.eps)));
  }
};

/// The row-op interface of the kernel table (row/pieces-inl.hpp).
struct rms_norm_op {
  static constexpr bool scaled_outputs = true;  // 8-bit y (row/quantize-inl.hpp)
  template <class F>
  static void with_stats(const row_norm_config&, F f) {
    f(rms_norm_stats{});
  }
};
