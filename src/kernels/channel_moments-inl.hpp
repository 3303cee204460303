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
//   row in segment order: an NCHW channel (N planes of H*W), a GroupNorm group (C/G planes),
//   a contiguous InstanceNorm plane; up to 4 such units at once (adjacent channels: memory
//   order, overlapping scalar tails). Chunks (chunk_walk) are pieces of kMomentChunk floats of
//   a long segment (contiguous units are one segment), or short segments (7x7, 14x14 planes)
//   packed whole, so the dependent scalar chain (reduction, division, merge) is paid once per
//   chunk rather than once per plane. Within a chunk a segment's vectors go round-robin to 4
//   accumulators; a partial last vector is loaded overlapping the previous one with its old
//   lanes masked. It walks its own chunks rather than calling rows_moments_f32 so that, for
//   data beyond the caches, it can request chunk j + 1 while pass B re-reads chunk j: a single
//   core otherwise has nothing in flight during pass B and the reductions, and read DRAM at
//   2/3 of its streaming rate (measured on a Xeon of this machine's family, 256 MiB:
//   8.7 -> 12.8 GB/s; a plain read loop 13.9-14.8 GB/s).
//
// column_moments: the statistics of each of `cols` dense channels over `rows` strided rows
//   (NHWC, [N, C]): SIMD lanes are channels, accumulated vertically (no horizontal reduction);
//   a block of up to 4 vectors of channels is walked down kColumnChunkRows rows per chunk
//   (the chunk stays in L1 for pass B) and the chunks of each channel are merged per lane, in
//   double, in a loop over a fixed block of lanes that the compiler vectorizes (the scalar
//   merge, ~20 double operations per lane per chunk, was this pass's bottleneck).
//   A last partial vector of channels overlaps the previous one (its lanes compute the same
//   channels' values again, bit for bit); fewer channels than lanes run the one-lane kernel.
//   NHWC reads x twice from memory (this pass, then the normalize pass): every channel spans
//   the whole tensor, so no block of channels can be finished while it is still in cache.
//   The statistics pass is read-only, so the traffic is 12 bytes per element instead of 8
//   (the same prefetch of the next chunk during pass B applies).
//   NCHW (segment_moments) instead finishes a channel, or 4 short ones, and normalizes it
//   while it is in cache: x comes from memory once wherever a channel's slice fits in L3.
//
// Memory traffic per element: x read once from memory, once more from L1 (pass B); the
//   prefetches only move that read earlier.
// Preconditions: count, len, rows, cols >= 1; no alignment.
// Numerics: as row_moments; each lane sums at most kColumnChunkRows terms (columns) or
//   kMomentChunk / (4 W) terms (segments) in float before the double merge. Results depend only
//   on the shape and the ISA, never on threads (callers merge partial results in a fixed order).

/// max(0, v) with NaN kept (fused ReLU).
inline float relu_max(float v) { return v < 0.f ? 0.f : v; }
inline scalar_vector relu_max(scalar_vector v) { return relu_max(v.v); }
template <class V>
inline V relu_max(const V& v) { return select(v < V(0.f), V(0.f), v); }

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

#ifndef SIMDNORM_ALWAYS_INLINE
#if defined(__GNUC__)
#define SIMDNORM_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SIMDNORM_ALWAYS_INLINE inline
#endif
#endif

/// Feeds the vectors of one segment piece c[0, len) to 4 accumulators, round-robin:
/// add(j, v) for accumulator j and a vector v of x. A partial last vector (`overlap`) is loaded
/// ending at len with its already-counted lanes set to `neutral` (whose term is zero); pieces
/// shorter than a vector go element by element to add1.
template <class V, class Add, class Add1>
SIMDNORM_ALWAYS_INLINE void walk_segment(const float* c, std::size_t len, bool overlap,
                                         const V& neutral, Add add, Add1 add1) {
  constexpr std::size_t W = V::size;
  const std::size_t body = len - len % W;
  std::size_t i = 0;
  for (; i + 4 * W <= body; i += 4 * W) {
    add(0, load<V>(c + i));
    add(1, load<V>(c + i + W));
    add(2, load<V>(c + i + 2 * W));
    add(3, load<V>(c + i + 3 * W));
  }
  if (i + 2 * W <= body) {
    add(0, load<V>(c + i));
    add(1, load<V>(c + i + W));
    i += 2 * W;
  }
  if (i + W <= body) {
    add(2, load<V>(c + i));
    i += W;
  }
  if constexpr (W > 1) {
    if (overlap) add(3, select(last_lanes_mask<V>(len % W), load<V>(c + len - W), neutral));
    else
      for (; i < len; ++i) add1(c[i]);
  }
}

/// The chunks of a unit of `count` segments of `len` floats: a segment of at least
/// kMomentChunk floats is cut into pieces of kMomentChunk (chunk j is piece j % cps of segment
/// j / cps); shorter segments are packed whole, per_chunk to a chunk.
struct chunk_walk {
  std::size_t len, count, cps, per_chunk, chunks;
  chunk_walk(std::size_t count_, std::size_t len_) : len(len_), count(count_) {
    const bool long_seg = len >= kMomentChunk;
    cps = long_seg ? (len + kMomentChunk - 1) / kMomentChunk : 1;
    per_chunk = long_seg ? 1 : kMomentChunk / len;
    chunks = long_seg ? count * cps : (count + per_chunk - 1) / per_chunk;
  }
  /// Chunk j: segments [k0, k1), each from offset `off`, `piece` floats long.
  void span(std::size_t j, std::size_t& k0, std::size_t& k1, std::size_t& off,
            std::size_t& piece) const {
    if (cps > 1 || len >= kMomentChunk) {
      k0 = j / cps, k1 = k0 + 1, off = (j % cps) * kMomentChunk;
      piece = len - off < kMomentChunk ? len - off : kMomentChunk;
    } else {
      k0 = j * per_chunk, k1 = count - k0 < per_chunk ? count : k0 + per_chunk, off = 0, piece = len;
    }
  }
};

/// Requests the lines of one chunk into L2, one line per step (see segments_moments_r).
struct chunk_prefetcher {
  const float* seg = nullptr;
  std::ptrdiff_t stride = 0;
  std::size_t segs_left = 0, piece = 0, i = 0;
  void step() {
    if (segs_left == 0) return;
    __builtin_prefetch(seg + i, 0, 2);
    i += 16;  // one 64-byte line
    if (i >= piece) {
      i = 0, seg += stride;
      --segs_left;
    }
  }
};

/// Moments of R units at once; unit r is `count` segments of `len` floats at x[r] + k * stride,
/// taken in order as one row, in the chunks of chunk_walk (a contiguous unit is one segment).
/// Each unit goes through exactly the operations of the R = 1 case (bitwise independent of R);
/// interleaving lets the units' dependent scalar tails overlap, and adjacent units (NCHW
/// channels c..c+R-1) are read in memory order. While pass B re-reads chunk j from L1, the
/// lines of chunk j + 1 are requested into L2, one per vector: without that, a single core
/// has no memory request in flight during pass B and the reductions, and reads DRAM at 2/3 of
/// its streaming rate (measured: 8.7 against 13.9 GB/s).
template <class V, std::size_t R>
void segments_moments_r(const float* const* x, std::ptrdiff_t stride, std::size_t count,
                        std::size_t len, moments_f64* out) {
  constexpr std::size_t W = V::size;
  if (count > 1 && stride == std::ptrdiff_t(len)) len *= count, count = 1;  // contiguous
  const chunk_walk cw(count, len);
  double mean[R] = {}, m2[R] = {};  // set by the first chunk (merge_moments with na = 0)
  float p[R];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) p[r] = x[r][0];
  double n_done = 0;
  for (std::size_t j = 0; j < cw.chunks; ++j) {
    std::size_t k0, k1, off, piece;
    cw.span(j, k0, k1, off, piece);
    const double n_chunk = double((k1 - k0) * piece);
    const bool overlap = W > 1 && piece % W != 0 && piece >= W;
    chunk_prefetcher pf[R];
    if (j + 1 < cw.chunks) {
      std::size_t nk0, nk1, noff, npiece;
      cw.span(j + 1, nk0, nk1, noff, npiece);
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r)
        pf[r] = {x[r] + std::ptrdiff_t(nk0) * stride + std::ptrdiff_t(noff), stride, nk1 - nk0, npiece, 0};
    }

    // Pass A: sum of (x - p); a segment's vectors go round-robin to 4 accumulators.
    V a[R][4];
    float ts[R];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
      ts[r] = 0.f;
    }
    for (std::size_t k = k0; k < k1; ++k)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const V vp(p[r]);
        walk_segment<V>(
            x[r] + std::ptrdiff_t(k) * stride + std::ptrdiff_t(off), piece, overlap, vp,
            [&](std::size_t j, const V& v) { a[r][j] += v - vp; },
            [&](float v) { ts[r] += v - p[r]; });
      }
    float s[R], center[R];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      s[r] = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ts[r];
      center[r] = p[r] + float(double(s[r]) / n_chunk);
    }

    // Pass B: sum of (x - center)^2, from L1; the next chunk is requested meanwhile.
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
      ts[r] = 0.f;
    }
    for (std::size_t k = k0; k < k1; ++k)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const V vc(center[r]);
        walk_segment<V>(
            x[r] + std::ptrdiff_t(k) * stride + std::ptrdiff_t(off), piece, overlap, vc,
            [&](std::size_t j, const V& v) {
              pf[r].step();
              const V d = v - vc;
              a[r][j] = fma(d, d, a[r][j]);
            },
            [&](float v) { ts[r] += (v - center[r]) * (v - center[r]); });
      }
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      const float q = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ts[r];
      double cm, cm2;
      chunk_moments(p[r], s[r], center[r], q, n_chunk, cm, cm2);
      merge_moments(n_done, mean[r], m2[r], n_chunk, cm, cm2);
    }
    n_done += n_chunk;
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
    // Lanes past nv vectors stay zero: the per-lane merge below runs over all B lanes (a
    // fixed count, so the compiler vectorizes it) and ignores them.
    alignas(64) float p[B] = {}, s[B] = {}, center[B] = {}, q[B] = {};
    alignas(64) double mean[B], m2[B];
    for (std::size_t j = 0; j < nv; ++j) load<V>(x + off[j]).store_unaligned(p + j * W);
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
      // Pass B: per-lane sums of (x - center)^2, from L1; meanwhile the next chunk of this
      // block is requested into L2, one vector's worth per vector (as segment_moments).
      const float* nx = base + std::ptrdiff_t(n) * row_stride;
      std::size_t n_pf = r1 + kColumnChunkRows <= rows ? kColumnChunkRows : rows - r1;
      std::size_t jp = 0;
      auto prefetch_next = [&] {
        if (n_pf == 0) return;
        __builtin_prefetch(nx + off[jp], 0, 2);
        if (++jp == nv) jp = 0, nx += row_stride, --n_pf;
      };
      for (std::size_t j = 0; j < 4; ++j) a[j][0] = a[j][1] = V(0.f);
      for (r = 0; r + 2 <= n; r += 2) {
        const float* x0 = base + std::ptrdiff_t(r) * row_stride;
        const float* x1 = x0 + row_stride;
        for (std::size_t j = 0; j < nv; ++j) {
          prefetch_next();
          prefetch_next();
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
      // Per lane, in double: the chunk's moments merged into the channel's (chunk_moments and
      // merge_moments, written out so that the loop vectorizes; the same operations).
      const double dn = double(n), na = double(r0), nt = na + dn;
      const double w1 = dn / nt, w2 = na * dn / nt;
      for (std::size_t l = 0; l < B; ++l) {
        const double cm = double(p[l]) + double(s[l]) / dn;
        const double off_c = cm - double(center[l]);
        double cm2 = double(q[l]) - dn * off_c * off_c;
        cm2 = cm2 < 0.0 ? 0.0 : cm2;  // NaN stays NaN
        if (r0 == 0) {
          mean[l] = cm;
          m2[l] = cm2;
        } else {
          const double delta = cm - mean[l];
          mean[l] += delta * w1;
          m2[l] += cm2 + delta * delta * w2;
        }
      }
    }
    for (std::size_t j = 0; j < nv; ++j)
      for (std::size_t l = 0; l < W; ++l) out[off[j] + l] = {mean[j * W + l], m2[j * W + l]};
  }
}
