// rms_norm_rows: RMSNorm over rows of a 2-D view [rows, cols] with row strides.
//
// Formula: y = x * rstd * gamma, rstd = 1 / sqrt(sum(x^2) / cols + eps), gamma optional.
// Layout, passes and traffic as layer_norm_rows: one pass for sum(x^2) (float accumulators per
//   2048-element chunk, chunks summed in double), one normalize pass that re-reads the row from
//   cache and writes y; 8 bytes of memory traffic per element for rows that fit in L2.
// Preconditions: cols >= 1; y == x (same strides) allowed; no alignment.
// Numerics: sum of squares has no cancellation; relative error about eps_f32 * log2(chunk).

template <class V, bool Gamma, bool Stream>
void rms_norm_rows_impl(const row_norm_config& cfg, const row_block& blk) {
  const std::size_t n = cfg.cols;
  const float* g = cfg.gamma;
  for (std::size_t r = 0; r < blk.rows; ++r) {
    const float* xr = blk.x + std::ptrdiff_t(r) * blk.x_stride;
    float* yr = blk.y + std::ptrdiff_t(r) * blk.y_stride;
    const double ms = row_sum_squares_f32<V>(xr, n) * cfg.inv_cols;
    const float rs = float(1.0 / __builtin_sqrt(ms + double(cfg.eps)));
    const V vrs(rs);
    store_row<V, Stream>(
        yr, n,
        [&](std::size_t i) {
          V t = load<V>(xr + i) * vrs;
          if constexpr (Gamma) t = t * load<V>(g + i);
          return t;
        },
        [&](std::size_t i) {
          float t = xr[i] * rs;
          if constexpr (Gamma) t = t * g[i];
          return t;
        });
    if (blk.rstd) blk.rstd[r] = rs;
  }
  if constexpr (Stream) stream_fence();
}

template <class V>
void rms_norm_rows(const row_norm_config& cfg, const row_block& blk) {
  const bool g = cfg.gamma != nullptr;
  if (g && cfg.stream) rms_norm_rows_impl<V, true, true>(cfg, blk);
  else if (g) rms_norm_rows_impl<V, true, false>(cfg, blk);
  else if (cfg.stream) rms_norm_rows_impl<V, false, true>(cfg, blk);
  else rms_norm_rows_impl<V, false, false>(cfg, blk);
}
