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

/// Rows are processed kRowGroup at a time: their statistics are interleaved (short rows, see
/// rows_moments_f32) and the normalize pass loads each gamma/beta vector once for all rows of
/// the group, which halves the cache traffic of the affine LayerNorm on long rows. Groups are
/// used while the group's rows fit comfortably in L2 (kGroupBytes).
inline constexpr std::size_t kRowGroup = 4;
inline constexpr std::size_t kInterleaveMaxCols = 1024;
inline constexpr std::size_t kGroupBytes = std::size_t(256) << 10;

/// Per-row constants of the normalize pass: t = (x - hi) * rs - lo_rs.
struct ln_row_consts {
  float hi, rs, lo_rs;
};

template <bool Shift>
inline ln_row_consts layer_norm_consts(const row_norm_config& cfg, const row_moments& m) {
  const double rstd = 1.0 / __builtin_sqrt(m.m2 * cfg.inv_cols + double(cfg.eps));
  const float hi = float(m.mean);
  const float lo = Shift ? float(m.mean - double(hi)) : 0.f;
  const float rs = float(rstd);
  return {hi, rs, lo * rs};
}

/// Streams the next rows through the cache one vector per step. In the streaming (beyond-LLC)
/// case the normalize pass reads only cached data and writes around the cache, so without
/// this the DRAM read stream would pause for the whole pass; stepping it from the normalize
/// loop keeps reads of the next rows in flight meanwhile.
struct row_prefetcher {
  const float* row = nullptr;
  std::ptrdiff_t stride = 0;
  std::size_t rows_left = 0, n = 0, i = 0;
  void step(std::size_t w) {
    if (rows_left == 0) return;
    __builtin_prefetch(row + i);
    i += w;
    if (i >= n) {
      i = 0;
      row += stride;
      --rows_left;
    }
  }
};

inline row_prefetcher next_rows(const row_block& blk, std::size_t first, std::size_t count,
                                std::size_t n) {
  row_prefetcher p;
  if (first >= blk.rows) return p;
  p.row = blk.x + std::ptrdiff_t(first) * blk.x_stride;
  p.stride = blk.x_stride;
  p.rows_left = blk.rows - first < count ? blk.rows - first : count;
  p.n = n;
  return p;
}

/// Normalizes R rows whose y rows share one alignment (for streaming stores). Every element
/// goes through the same operations whatever R is: grouping never changes a bit.
template <class V, bool Gamma, bool Beta, bool Stream, std::size_t R>
inline void layer_norm_normalize_rows(const row_norm_config& cfg, const float* const* xs,
                                      float* const* ys, const ln_row_consts* k,
                                      row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  const std::size_t n = cfg.cols;
  const float* g = cfg.gamma;
  const float* b = cfg.beta;
  auto one = [&](std::size_t r, std::size_t i) {
    float t = (xs[r][i] - k[r].hi) * k[r].rs - k[r].lo_rs;
    if constexpr (Gamma) t = t * g[i];
    if constexpr (Beta) t = t + b[i];
    ys[r][i] = t;
  };
  std::size_t i = 0;
  if constexpr (Stream) {
    for (const std::size_t head = elements_to_stream_alignment<V>(ys[0], n); i < head; ++i)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) one(r, i);
  }
  V vhi[R], vrs[R], vlo[R];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
    vhi[r] = V(k[r].hi);
    vrs[r] = V(k[r].rs);
    vlo[r] = V(k[r].lo_rs);
  }
  for (; i + W <= n; i += W) {
    V gv, bv;
    if constexpr (Gamma) gv = load<V>(g + i);
    if constexpr (Beta) bv = load<V>(b + i);
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      V t = fms(load<V>(xs[r] + i) - vhi[r], vrs[r], vlo[r]);
      if constexpr (Gamma && Beta) t = fma(t, gv, bv);
      else if constexpr (Gamma) t = t * gv;
      else if constexpr (Beta) t = t + bv;
      if constexpr (Stream) {
        store_stream<V>(ys[r] + i, t);
        pf.step(W);
      } else {
        t.store_unaligned(ys[r] + i);
      }
    }
  }
  for (; i < n; ++i)
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) one(r, i);
}

template <class V, bool Shift, bool Gamma, bool Beta, bool Stream, std::size_t R>
inline void layer_norm_row_group(const row_norm_config& cfg, const row_block& blk, std::size_t r0) {
  const std::size_t n = cfg.cols;
  const float* xs[R];
  float* ys[R];
  row_moments m[R];
  ln_row_consts k[R];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
    xs[r] = blk.x + std::ptrdiff_t(r0 + r) * blk.x_stride;
    ys[r] = blk.y + std::ptrdiff_t(r0 + r) * blk.y_stride;
  }
  if (n <= kInterleaveMaxCols) {
    rows_moments_f32<V, Shift, R>(xs, n, m);
  } else {
    for (std::size_t r = 0; r < R; ++r) rows_moments_f32<V, Shift, 1>(&xs[r], n, &m[r]);
  }
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
    k[r] = layer_norm_consts<Shift>(cfg, m[r]);
    if (blk.mean) blk.mean[r0 + r] = k[r].hi;
    if (blk.rstd) blk.rstd[r0 + r] = k[r].rs;
  }
  row_prefetcher pf = Stream ? next_rows(blk, r0 + R, R, n) : row_prefetcher{};
  layer_norm_normalize_rows<V, Gamma, Beta, Stream, R>(cfg, xs, ys, k, pf);
}

/// Rows of at most kShortCols elements: statistics of V::size rows at a time
/// (rows_moments_short_f32), then normalized kRowGroup rows at a time.
inline constexpr std::size_t kShortCols = 256;

template <class V, bool Shift, bool Gamma, bool Beta, bool Stream>
void layer_norm_short_rows(const row_norm_config& cfg, const row_block& blk, bool group) {
  constexpr std::size_t W = V::size;
  const std::size_t n = cfg.cols;
  for (std::size_t r0 = 0; r0 < blk.rows; r0 += W) {
    const std::size_t count = blk.rows - r0 < W ? blk.rows - r0 : W;
    const float* xs[W];
    float* ys[W];
    for (std::size_t r = 0; r < W; ++r) {
      const std::size_t rr = r0 + (r < count ? r : count - 1);  // pad with the last row
      xs[r] = blk.x + std::ptrdiff_t(rr) * blk.x_stride;
      ys[r] = blk.y + std::ptrdiff_t(rr) * blk.y_stride;
    }
    // rstd = 1 / sqrt(M2 / n + eps) for all W rows in the vector lanes (float: 1.5 ulp).
    V hi, lo, m2;
    rows_moments_short_f32<V, Shift>(xs, n, hi, lo, m2);
    const V rs = V(1.f) / sqrt(fma(m2, V(float(cfg.inv_cols)), V(cfg.eps)));
    alignas(64) float his[W], rss[W], lors[W];
    hi.store_unaligned(his);
    rs.store_unaligned(rss);
    (lo * rs).store_unaligned(lors);
    ln_row_consts k[W];
    for (std::size_t r = 0; r < W; ++r) k[r] = {his[r], rss[r], lors[r]};
    for (std::size_t r = 0; r < count; ++r) {
      if (blk.mean) blk.mean[r0 + r] = k[r].hi;
      if (blk.rstd) blk.rstd[r0 + r] = k[r].rs;
    }
    row_prefetcher pf = Stream ? next_rows(blk, r0 + 2 * W, W, n) : row_prefetcher{};
    std::size_t r = 0;
    if (group)
      for (; r + kRowGroup <= count; r += kRowGroup)
        layer_norm_normalize_rows<V, Gamma, Beta, Stream, kRowGroup>(cfg, xs + r, ys + r, k + r, pf);
    for (; r < count; ++r)
      layer_norm_normalize_rows<V, Gamma, Beta, Stream, 1>(cfg, xs + r, ys + r, k + r, pf);
  }
}

template <class V, bool Shift, bool Gamma, bool Beta, bool Stream>
void layer_norm_rows_impl(const row_norm_config& cfg, const row_block& blk) {
  // Grouping needs the rows of a group to share y's alignment when streaming.
  const bool same_alignment =
      !Stream || (std::size_t(blk.y_stride) * sizeof(float)) % stream_alignment<V>() == 0;
  const bool group = same_alignment && cfg.cols * sizeof(float) * kRowGroup <= kGroupBytes;
  if (cfg.cols <= kShortCols) {
    layer_norm_short_rows<V, Shift, Gamma, Beta, Stream>(cfg, blk, group);
    if constexpr (Stream) stream_fence();
    return;
  }
  std::size_t r = 0;
  if (group)
    for (; r + kRowGroup <= blk.rows; r += kRowGroup)
      layer_norm_row_group<V, Shift, Gamma, Beta, Stream, kRowGroup>(cfg, blk, r);
  for (; r < blk.rows; ++r) layer_norm_row_group<V, Shift, Gamma, Beta, Stream, 1>(cfg, blk, r);
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
