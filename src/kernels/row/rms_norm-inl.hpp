// rms_norm_rows: RMSNorm over rows of a 2-D view [rows, cols] with row strides.
//
// Formula: y = x * rstd * gamma, rstd = 1 / sqrt(sum(x^2) / cols + eps), gamma optional
//   (beta is rejected by the plan). Two multiplies per element.
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

/// Sum of squares of one row: float accumulators per chunk, chunks added in double.
template <class V>
inline double row_sum_squares_f32(const float* x, std::size_t n, row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  double total = 0.0;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const float* c = x + start;
    V q0(0.f), q1(0.f), q2(0.f), q3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      const V v0 = io::load<V>(c + i), v1 = io::load<V>(c + i + W);
      const V v2 = io::load<V>(c + i + 2 * W), v3 = io::load<V>(c + i + 3 * W);
      q0 = fma(v0, v0, q0);
      q1 = fma(v1, v1, q1);
      q2 = fma(v2, v2, q2);
      q3 = fma(v3, v3, q3);
      pf.step(W);
    }
    for (; i + W <= len; i += W) {
      const V v = io::load<V>(c + i);
      q0 = fma(v, v, q0);
    }
    float q = hadd((q0 + q1) + (q2 + q3));
    for (; i < len; ++i) {
      const float v = io::load1(c + i);
      q += v * v;
    }
    if (squares_lost(q, float(len) * FLT_MIN))  // once per chunk, off the element loop
      total += scaled_sum_squares<V>(c, len, 0.f, q > FLT_MAX ? kDownScale : kUpScale);
    else
      total += double(q);
  }
  return total;
}

struct rms_norm_stats {
  static constexpr bool centered = false;

  /// V::size short rows: sums of squares reduced for all rows at once, rstd in float lanes.
  template <class V>
  static void short_rows(const row_norm_config& cfg, const float* const* xs, row_consts& k,
                         row_prefetcher& pf) {
    const V sq = row_lanes_sum<V>(xs, cfg.cols, [](V v, std::size_t) { return v; },
                                  [](V s, V v) { return fma(v, v, s); }, pf);
    const V ms = sq * V(float(cfg.inv_cols));
    (V(1.f) / sqrt(ms + V(cfg.eps))).store_unaligned(k.rs);
    // Rows whose float sum of squares overflowed or underflowed: the long-row sum (scaled).
    const float len_min = float(cfg.cols) * FLT_MIN;
    if (any(squares_lost(sq, V(len_min))))
      long_rows_where<rms_norm_stats>(cfg, xs, k, sq,
                                      [&](float s) { return squares_lost(s, len_min); });
  }

  template <class V, std::size_t R>
  static void long_rows(const row_norm_config& cfg, const float* const* xs, row_consts& k,
                        std::size_t first, row_prefetcher& pf) {
    for (std::size_t r = 0; r < R; ++r) {
      const double ms = row_sum_squares_f32<V>(xs[r], cfg.cols, pf) * cfg.inv_cols;
      k.rs[first + r] = float(1.0 / __builtin_sqrt(ms + double(cfg.eps)));
    }
  }
};

template <class V>
void rms_norm_rows(const row_norm_config& cfg, const row_block& blk) {
  row_norm_rows<V, rms_norm_stats>(cfg, blk);
}
