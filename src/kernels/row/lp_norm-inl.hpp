// lp_norm_op<1>, lp_norm_op<2>: Lp normalization over rows of a 2-D view [rows, cols] with row
// strides (torch.nn.functional.normalize, ONNX LpNormalization).
//
// Formula: y = x * rs, rs = 1 / max(||x||_p, eps), ||x||_1 = sum |x|, ||x||_2 = sqrt(sum x^2).
//   One multiply per element; no gamma or beta (the plan rejects them).
// Layout, passes, traffic, grouping: row/normalize-inl.hpp, as RMSNorm (one statistics pass,
//   one normalize pass from cache: 8 bytes of memory traffic per element).
// Numerics: a sum of non-negative terms has no cancellation: float accumulators per chunk of
//   kMomentChunk elements, chunks added in double (long rows) or float lanes (short rows), a
//   relative error about eps_f32 * depth (tests/reference.hpp); y = x * (1 / norm) rounds
//   twice where x / norm rounds once (one more ulp). A float sum that lost its value (squares
//   beyond about 1e19 or below about 1e-19, |x| sums beyond FLT_MAX) is summed again, scaled
//   or in double (row_sum_squares_f32, row_sum_abs_f32); short rows then take the long-row
//   sum, so the norm is right for any finite row whose norm is a finite float. max(norm, eps)
//   keeps a NaN norm, so a NaN in a row makes that row NaN; an Inf makes rs 0 and the row 0
//   except Inf * 0 = NaN, as x / Inf does in PyTorch. Other rows are untouched.

template <int P>
struct lp_norm_stats {
  static constexpr bool centered = false;
  static constexpr bool has_gamma = false, has_beta = false, has_gate = false;
  static constexpr bool has_residual_after = false;
  static constexpr bool beta_from_modulation = false;

  /// V::size short rows: the norms of all rows at once, rs in float lanes.
  template <class V, class TX>
  SIMDNORM_ALWAYS_INLINE static void short_rows(const row_norm_config& cfg, const TX* const* xs,
                                                row_consts& k, row_prefetcher& pf) {
    V sum;
    if constexpr (P == 1)
      sum = row_lanes_sum<V>(
          xs, cfg.cols, [](V v, std::size_t) { return abs_value(v); },
          [](V s, V v) { return s + v; }, pf);
    else
      sum = row_lanes_sum<V>(
          xs, cfg.cols, [](V v, std::size_t) { return v; }, [](V s, V v) { return fma(v, v, s); },
          pf);
    const V norm = P == 1 ? sum : sqrt(sum), eps(cfg.eps);
    (V(1.f) / select(norm < eps, eps, norm)).store_unaligned(k.rs);
    // Rows whose float sum lost its value: the long-row sum (scaled or in double). An Inf or
    // NaN in the row lands here too and comes out the same.
    const float len_min = P == 1 ? 0.f : float(cfg.cols) * FLT_MIN;
    if (any(squares_lost(sum, V(len_min))))
      long_rows_where<lp_norm_stats>(cfg, xs, k, sum,
                                     [&](float s) { return squares_lost(s, len_min); });
  }

  /// Sums of |x| (p = 1) or x^2 (p = 2) of R long rows in double, in m2.
  template <class V, std::size_t R, class TX>
  static void row_moments(const row_norm_config&, const TX* const* xs, std::size_t n,
                          moments_f64* m, row_prefetcher& pf) {
    for (std::size_t r = 0; r < R; ++r)
      m[r] = {0.0,
              P == 1 ? row_sum_abs_f32<V>(xs[r], n, pf) : row_sum_squares_f32<V>(xs[r], n, pf)};
  }

  static void fold(std::size_t start, std::size_t len, const moments_f64& piece, moments_f64& row) {
    fold_sum(start, len, piece, row);
  }

  /// Row j's rs from its sum, rounded from double (the count does not enter).
  static void finish(const row_norm_config& cfg, double, const moments_f64& m, row_consts& k,
                     std::size_t j) {
    const double norm = P == 1 ? m.m2 : __builtin_sqrt(m.m2);
    const double eps = double(cfg.eps);
    k.rs[j] = float(1.0 / (norm < eps ? eps : norm));
  }
};

/// The row-op interface of the kernel table (row/pieces-inl.hpp), one per p.
template <int P>
struct lp_norm_op {
  static constexpr bool scaled_outputs = false;
  template <class F>
  static void with_stats(const row_norm_config&, F f) {
    f(lp_norm_stats<P>{});
  }
};
