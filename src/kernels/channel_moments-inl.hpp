// channel_moments: statistics of the channel ops (BatchNorm training, GroupNorm, InstanceNorm,
// MeanVarianceNormalization). The scheme of row_moments-inl.hpp, extended to the two shapes a
// channel's values take in memory; nothing else.
//
// Formula (as row_moments): values are cut into chunks; per chunk, pass A sums (x - p) with a
//   fixed shift p (the first value), giving the chunk mean; pass B sums (x - center)^2 around
//   the float nearest that mean, re-reading the chunk from L1, and the identity
//   sum (x - center)^2 = M2 + len * (mean - center)^2 removes the center's rounding. Chunks
//   are merged in double with Chan's formula, in chunk order. Never E[x^2] - E[x]^2.
//
// segment_moments: `count` segments of `len` dense floats at a constant stride, taken as one
//   row in segment order: an NCHW channel (N planes of H*W), a GroupNorm group (C/G planes);
//   up to 4 such units at once (adjacent channels: memory order, overlapping scalar tails).
//   Contiguous segments (stride == len) are one row and go through rows_moments_f32, so a
//   dense group or plane gets the row kernel's statistics bit for bit. Segments of at least
//   kMomentChunk elements are rows of their own, merged in order. Shorter segments (7x7,
//   14x14 planes) are packed whole into chunks of up to kMomentChunk elements, so the dependent
//   scalar chain (reduction, division, merge) is paid once per chunk rather than once per
//   plane; within a chunk the vectors of a segment go round-robin to 4 accumulators and a
//   partial last vector is loaded overlapping the previous one with its old lanes masked.
//
// column_moments: the statistics of each of `cols` dense channels over `rows` strided rows
//   (NHWC, [N, C]): SIMD lanes are channels, accumulated vertically (no horizontal reduction);
//   a block of up to 4 vectors of channels is walked down kColumnChunkRows rows per chunk
//   (the chunk stays in L1 for pass B) and the chunks of each channel are merged per lane.
//   A last partial vector of channels overlaps the previous one (its lanes compute the same
//   channels' values again, bit for bit); fewer channels than lanes run the one-lane kernel.
//
// Memory traffic per element: x read once from memory, once more from L1 (pass B).
// Preconditions: count, len, rows, cols >= 1; no alignment.
// Numerics: as row_moments; each lane sums at most kColumnChunkRows terms (columns) or
//   kMomentChunk / (4 W) terms (segments) in float before the double merge. Results depend only
//   on the shape and the ISA, never on threads (callers merge partial results in a fixed order).

/// Chan's merge of a chunk (nb values, mean_b, m2_b) into a running state of na values.
inline void merge_moments(double na, double& mean, double& m2, double nb, double mean_b, double m2_b) {
  if (na == 0.0) {
    mean = mean_b;
    m2 = m2_b;
    return;
  }
  const double nt = na + nb, delta = mean_b - mean;
  mean += delta * (nb / nt);
  m2 += m2_b + delta * delta * (na * nb / nt);
}

/// Chunk statistics from pass A's sum s of (x - p) and pass B's sum q of (x - center)^2.
inline void chunk_moments(float p, float s, float center, float q, double len, double& mean,
                          double& m2) {
  mean = double(p) + double(s) / len;
  const double off = mean - double(center);
  m2 = double(q) - len * off * off;
  if (m2 < 0.0) m2 = 0.0;  // NaN stays NaN
}

/// Lanes [W - t, W) set: the new lanes of a vector loaded at (end - W) when t values remain.
template <class V>
inline auto last_lanes_mask(std::size_t t) {
  alignas(64) static constexpr float kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return load<V>(kIota) >= V(float(V::size - t));
}

/// Moments of R units at once; unit r is `count` segments of `len` floats at x[r] + k * stride.
/// Each unit goes through exactly the operations of the R = 1 case (bitwise independent of R);
/// interleaving lets the units' dependent scalar tails overlap, and adjacent units (NCHW
/// channels c..c+R-1) are read in memory order.
template <class V, std::size_t R>
void segments_moments_r(const float* const* x, std::ptrdiff_t stride, std::size_t count,
                        std::size_t len, moments_f64* out) {
  constexpr std::size_t W = V::size;
  row_moments m[R];
  if (count == 1 || stride == std::ptrdiff_t(len)) {  // contiguous: the row kernel
    rows_moments_f32<V, true, R>(x, count * len, m);
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) out[r] = {m[r].mean, m[r].m2};
    return;
  }
  double mean[R], m2[R];
  if (len >= kMomentChunk) {  // long segments: rows of their own, R at a time, merged in order
    for (std::size_t k = 0; k < count; ++k) {
      const float* xs[R];
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) xs[r] = x[r] + std::ptrdiff_t(k) * stride;
      rows_moments_f32<V, true, R>(xs, len, m);
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r)
        merge_moments(double(k) * double(len), mean[r], m2[r], double(len), m[r].mean, m[r].m2);
    }
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
    return;
  }

  // Short segments, packed whole into chunks.
  const std::size_t per_chunk = kMomentChunk / len;
  const std::size_t t = len % W, body = len - t;  // body: whole vectors
  const bool overlap = W > 1 && t != 0 && len >= W;
  float p[R];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) p[r] = x[r][0];
  for (std::size_t k0 = 0; k0 < count; k0 += per_chunk) {
    const std::size_t k1 = count - k0 < per_chunk ? count : k0 + per_chunk;
    const double n_chunk = double((k1 - k0) * len);

    // Pass A: sum of (x - p); a segment's vectors go round-robin to 4 accumulators.
    V a[R][4];
    float ts[R];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
      ts[r] = 0.f;
    }
    for (std::size_t k = k0; k < k1; ++k) {
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const float* c = x[r] + std::ptrdiff_t(k) * stride;
        const V vp(p[r]);
        std::size_t i = 0;
        for (; i + 4 * W <= body; i += 4 * W) {
          a[r][0] += load<V>(c + i) - vp;
          a[r][1] += load<V>(c + i + W) - vp;
          a[r][2] += load<V>(c + i + 2 * W) - vp;
          a[r][3] += load<V>(c + i + 3 * W) - vp;
        }
        if (i + 2 * W <= body) {
          a[r][0] += load<V>(c + i) - vp;
          a[r][1] += load<V>(c + i + W) - vp;
          i += 2 * W;
        }
        if (i + W <= body) {
          a[r][2] += load<V>(c + i) - vp;
          i += W;
        }
        if constexpr (W > 1) {
          if (overlap) {
            a[r][3] += select(last_lanes_mask<V>(t), load<V>(c + len - W) - vp, V(0.f));
          } else {
            for (; i < len; ++i) ts[r] += c[i] - p[r];
          }
        }
      }
    }
    float s[R], center[R];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      s[r] = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ts[r];
      center[r] = p[r] + float(double(s[r]) / n_chunk);
    }

    // Pass B: sum of (x - center)^2, from L1.
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
      ts[r] = 0.f;
    }
    for (std::size_t k = k0; k < k1; ++k) {
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const float* c = x[r] + std::ptrdiff_t(k) * stride;
        const V vc(center[r]);
        std::size_t i = 0;
        for (; i + 4 * W <= body; i += 4 * W) {
          const V d0 = load<V>(c + i) - vc, d1 = load<V>(c + i + W) - vc;
          const V d2 = load<V>(c + i + 2 * W) - vc, d3 = load<V>(c + i + 3 * W) - vc;
          a[r][0] = fma(d0, d0, a[r][0]);
          a[r][1] = fma(d1, d1, a[r][1]);
          a[r][2] = fma(d2, d2, a[r][2]);
          a[r][3] = fma(d3, d3, a[r][3]);
        }
        if (i + 2 * W <= body) {
          const V d0 = load<V>(c + i) - vc, d1 = load<V>(c + i + W) - vc;
          a[r][0] = fma(d0, d0, a[r][0]);
          a[r][1] = fma(d1, d1, a[r][1]);
          i += 2 * W;
        }
        if (i + W <= body) {
          const V d = load<V>(c + i) - vc;
          a[r][2] = fma(d, d, a[r][2]);
          i += W;
        }
        if constexpr (W > 1) {
          if (overlap) {
            const V d = select(last_lanes_mask<V>(t), load<V>(c + len - W) - vc, V(0.f));
            a[r][3] = fma(d, d, a[r][3]);
          } else {
            for (; i < len; ++i) ts[r] += (c[i] - center[r]) * (c[i] - center[r]);
          }
        }
      }
    }
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      const float q = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ts[r];
      double cm, cm2;
      chunk_moments(p[r], s[r], center[r], q, n_chunk, cm, cm2);
      merge_moments(double(k0 * len), mean[r], m2[r], n_chunk, cm, cm2);
    }
  }
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
}

/// Moments of `units` units, unit u at x[u]: 4 at a time, then one by one (same bits).
template <class V>
void segment_moments(const float* const* x, std::size_t units, std::ptrdiff_t stride,
                     std::size_t count, std::size_t len, moments_f64* out) {
  std::size_t u = 0;
  for (; u + 4 <= units; u += 4) segments_moments_r<V, 4>(x + u, stride, count, len, out + u);
  for (; u < units; ++u) segments_moments_r<V, 1>(x + u, stride, count, len, out + u);
}

/// Rows per chunk of column_moments: each lane sums this many values in float.
inline constexpr std::size_t kColumnChunkRows = 64;

template <class V>
void column_moments(const float* x, std::ptrdiff_t row_stride, std::size_t rows, std::size_t cols,
                    moments_f64* out) {
  constexpr std::size_t W = V::size;
  if constexpr (W > 1) {
    if (cols < W) {
      column_moments<scalar_vector>(x, row_stride, rows, cols, out);
      return;
    }
  }
  constexpr std::size_t B = 4 * W;  // channels per block
  for (std::size_t c0 = 0; c0 < cols; c0 += B) {
    const std::size_t nv = (cols - c0 >= B) ? 4 : (cols - c0 + W - 1) / W;
    std::size_t off[4];
    for (std::size_t j = 0; j < 4; ++j) {
      const std::size_t o = c0 + j * W;
      off[j] = j < nv ? (o + W <= cols ? o : cols - W) : off[0];
    }
    alignas(64) float p[B], s[B], center[B], q[B];
    double mean[B], m2[B];
    for (std::size_t j = 0; j < 4; ++j) load<V>(x + off[j]).store_unaligned(p + j * W);
    for (std::size_t r0 = 0; r0 < rows; r0 += kColumnChunkRows) {
      const std::size_t r1 = rows - r0 < kColumnChunkRows ? rows : r0 + kColumnChunkRows;
      const float* base = x + std::ptrdiff_t(r0) * row_stride;
      const std::size_t n = r1 - r0;
      // Pass A: per-lane sums of (x - p); two accumulators per vector (even and odd rows).
      V a[4][2], vp[4];
      for (std::size_t j = 0; j < 4; ++j) {
        vp[j] = load<V>(p + j * W);
        a[j][0] = a[j][1] = V(0.f);
      }
      std::size_t r = 0;
      for (; r + 2 <= n; r += 2) {
        const float* x0 = base + std::ptrdiff_t(r) * row_stride;
        const float* x1 = x0 + row_stride;
        for (std::size_t j = 0; j < nv; ++j) {
          a[j][0] += load<V>(x0 + off[j]) - vp[j];
          a[j][1] += load<V>(x1 + off[j]) - vp[j];
        }
      }
      if (r < n)
        for (std::size_t j = 0; j < nv; ++j)
          a[j][0] += load<V>(base + std::ptrdiff_t(r) * row_stride + off[j]) - vp[j];
      const V inv_n(float(1.0 / double(n)));
      V vc[4];
      for (std::size_t j = 0; j < nv; ++j) {
        const V sj = a[j][0] + a[j][1];
        sj.store_unaligned(s + j * W);
        vc[j] = fma(sj, inv_n, vp[j]);
        vc[j].store_unaligned(center + j * W);
      }
      // Pass B: per-lane sums of (x - center)^2, from L1.
      for (std::size_t j = 0; j < 4; ++j) a[j][0] = a[j][1] = V(0.f);
      for (r = 0; r + 2 <= n; r += 2) {
        const float* x0 = base + std::ptrdiff_t(r) * row_stride;
        const float* x1 = x0 + row_stride;
        for (std::size_t j = 0; j < nv; ++j) {
          const V d0 = load<V>(x0 + off[j]) - vc[j], d1 = load<V>(x1 + off[j]) - vc[j];
          a[j][0] = fma(d0, d0, a[j][0]);
          a[j][1] = fma(d1, d1, a[j][1]);
        }
      }
      if (r < n)
        for (std::size_t j = 0; j < nv; ++j) {
          const V d = load<V>(base + std::ptrdiff_t(r) * row_stride + off[j]) - vc[j];
          a[j][0] = fma(d, d, a[j][0]);
        }
      for (std::size_t j = 0; j < nv; ++j) (a[j][0] + a[j][1]).store_unaligned(q + j * W);
      // Per lane, in double: the chunk's moments merged into the channel's.
      const double dn = double(n), na = double(r0);
      for (std::size_t l = 0; l < nv * W; ++l) {
        double cm, cm2;
        chunk_moments(p[l], s[l], center[l], q[l], dn, cm, cm2);
        merge_moments(na, mean[l], m2[l], dn, cm, cm2);
      }
    }
    for (std::size_t j = 0; j < nv; ++j)
      for (std::size_t l = 0; l < W; ++l) out[off[j] + l] = {mean[j * W + l], m2[j * W + l]};
  }
}
