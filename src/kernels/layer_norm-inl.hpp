// layer_norm_rows: LayerNorm over rows of a 2-D view [rows, cols] with row strides.
//
// Formula: y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), var = M2 / cols
//   (biased), gamma and beta optional. With the compensated mean (hi + lo):
//   t = (x - hi) * rstd - lo * rstd  (one sub and one fms), y = t * gamma + beta (one fma).
// Layout: row r starts at x + r * x_stride (y likewise); the row itself is dense.
// Passes and memory traffic per element: row_moments reads x from memory once (and once more
//   from L1), then the normalize pass reads x again and writes y. A row of up to ~1/2 of L2
//   (about 128K floats here) is still cached for that second read, so x is read from memory
//   once and y written once: 8 bytes of traffic per element. Longer rows are correct but
//   are read from memory twice (12 bytes per element). With `stream`, y goes out with
//   non-temporal stores (no read-for-ownership of y's lines, no cache pollution).
// Preconditions: cols >= 1; y == x (same strides) allowed, otherwise no overlap; no alignment.
// Numerics: statistics as in row_moments-inl.hpp; the output error is a few ulp of the
//   normalized value plus |lo| rounding, independent of the mean's magnitude when compensated.
//   A NaN or Inf in a row makes that row's statistics, hence the whole row, non-finite.

template <class V, bool Shift, bool Gamma, bool Beta, bool Stream>
void layer_norm_rows_impl(const row_norm_config& cfg, const row_block& blk) {
  const std::size_t n = cfg.cols;
  const float* g = cfg.gamma;
  const float* b = cfg.beta;
  for (std::size_t r = 0; r < blk.rows; ++r) {
    const float* xr = blk.x + std::ptrdiff_t(r) * blk.x_stride;
    float* yr = blk.y + std::ptrdiff_t(r) * blk.y_stride;
    const row_moments m = row_moments_f32<V, Shift>(xr, n);
    const double rstd = 1.0 / __builtin_sqrt(m.m2 * cfg.inv_cols + double(cfg.eps));
    const float hi = float(m.mean);
    const float lo = Shift ? float(m.mean - double(hi)) : 0.f;
    const float rs = float(rstd);
    const float lo_rs = lo * rs;
    const V vhi(hi), vrs(rs), vlo_rs(lo_rs);
    store_row<V, Stream>(
        yr, n,
        [&](std::size_t i) {
          V t = fms(load<V>(xr + i) - vhi, vrs, vlo_rs);
          if constexpr (Gamma && Beta) t = fma(t, load<V>(g + i), load<V>(b + i));
          else if constexpr (Gamma) t = t * load<V>(g + i);
          else if constexpr (Beta) t = t + load<V>(b + i);
          return t;
        },
        [&](std::size_t i) {
          float t = (xr[i] - hi) * rs - lo_rs;
          if constexpr (Gamma) t = t * g[i];
          if constexpr (Beta) t = t + b[i];
          return t;
        });
    if (blk.mean) blk.mean[r] = Shift ? hi : float(m.mean);
    if (blk.rstd) blk.rstd[r] = rs;
  }
  if constexpr (Stream) stream_fence();
}

template <class V, bool Shift, bool Gamma, bool Beta>
void layer_norm_rows_store(const row_norm_config& cfg, const row_block& blk) {
  if (cfg.stream) layer_norm_rows_impl<V, Shift, Gamma, Beta, true>(cfg, blk);
  else layer_norm_rows_impl<V, Shift, Gamma, Beta, false>(cfg, blk);
}

template <class V, bool Shift>
void layer_norm_rows_shift(const row_norm_config& cfg, const row_block& blk) {
  const bool g = cfg.gamma != nullptr, b = cfg.beta != nullptr;
  if (g && b) layer_norm_rows_store<V, Shift, true, true>(cfg, blk);
  else if (g) layer_norm_rows_store<V, Shift, true, false>(cfg, blk);
  else if (b) layer_norm_rows_store<V, Shift, false, true>(cfg, blk);
  else layer_norm_rows_store<V, Shift, false, false>(cfg, blk);
}

template <class V>
void layer_norm_rows(const row_norm_config& cfg, const row_block& blk) {
  if (cfg.compensated_mean) layer_norm_rows_shift<V, true>(cfg, blk);
  else layer_norm_rows_shift<V, false>(cfg, blk);
}
