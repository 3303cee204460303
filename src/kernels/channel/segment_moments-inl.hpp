// segment_moments: statistics of the channel ops (BatchNorm training, GroupNorm,
// InstanceNorm, MeanVarianceNormalization) whose values lie in segments: `count` segments of
// `len` dense elements at a constant stride, taken as one row in segment order: an NCHW channel
// (N planes of H*W), a GroupNorm group (C/G planes), a contiguous InstanceNorm plane. x is
// float, bf16_t or f16_t, read through io (exact); chunks are counted in elements, so a 16-bit
// x gives the moments of the f32 tensor holding the same values, bit for bit.
//
// Formula: common/moments-inl.hpp, as the long rows: one read sums (x - p) and (x - p)^2
//   around a float shift p, the mean of the unit's first vector for its first chunk and the
//   mean of the chunks so far after that; a chunk that fails the one-read guard (its mean
//   more than about half a standard deviation from p: a channel whose batch items differ in
//   mean, or a trend) takes pass B around its float mean, re-read from L1; a chunk whose
//   float sums overflow, or (with tiny_m2) whose squares underflow, is computed again in
//   double.
// Chunks (chunk_walk) are pieces of kMomentChunk floats of a long segment (contiguous units
//   are one segment), or short segments (7x7, 14x14 planes) packed whole, so the dependent
//   scalar chain (reduction, division, merge) is paid once per chunk rather than once per
//   plane. Within a chunk a segment's vectors go round-robin to 4 accumulators; a partial last
//   vector is loaded overlapping the previous one with its old lanes masked. Up to 4 units run
//   at once (adjacent channels: memory order, overlapping scalar tails). The kernel walks its
//   own chunks rather than calling rows_moments_f32 so that, for data beyond the caches, it
//   can request chunk j + 1 while it reads chunk j: a single core otherwise has nothing in
//   flight during the reductions, and reads DRAM below its streaming rate. NCHW finishes a
//   channel, or 4 short ones, and normalizes it while it is in cache: x comes from memory once
//   wherever a channel's slice fits in L3.
// Memory traffic per element: x read once from memory (and once more from L1 in the chunks
//   that take pass B); the prefetches only move that read earlier. Work per vector: load,
//   sub, add, fma.
// Preconditions: count, len >= 1; no alignment.
// Numerics: as the rows; each lane sums at most kMomentChunk / (4 W) terms in float before the
//   double merge. Results depend only on the shape and the ISA, never on threads (callers
//   merge partial results in a fixed order).

/// The lanes of a piece's overlapping last vector (walk_segment) that are not yet counted.
template <class V>
SIMDNORM_ALWAYS_INLINE auto overlap_lanes(std::size_t len) {
  return lanes_from<V>(V::size - len % V::size);
}

/// Feeds the vectors of one segment piece c[0, len) to 4 accumulators, round-robin:
/// add(j, v) for accumulator j and a vector v of x. A partial last vector (`overlap`) is loaded
/// ending at len with its already-counted lanes (not in `fresh`, overlap_lanes(len)) set to
/// `neutral` (whose term is zero); pieces shorter than a vector go element by element to add1.
template <class V, class T, class M, class Add, class Add1>
SIMDNORM_ALWAYS_INLINE void walk_segment(const T* c, std::size_t len, bool overlap, const M& fresh,
                                         const V& neutral, Add add, Add1 add1) {
  constexpr std::size_t W = V::size;
  const std::size_t body = len - len % W;
  std::size_t i = 0;
  for (; i + 4 * W <= body; i += 4 * W) {
    add(0, io::load<V>(c + i));
    add(1, io::load<V>(c + i + W));
    add(2, io::load<V>(c + i + 2 * W));
    add(3, io::load<V>(c + i + 3 * W));
  }
  if (i + 2 * W <= body) {
    add(0, io::load<V>(c + i));
    add(1, io::load<V>(c + i + W));
    i += 2 * W;
  }
  if (i + W <= body) {
    add(2, io::load<V>(c + i));
    i += W;
  }
  if constexpr (W > 1) {
    if (overlap)
      add(3, select(fresh, io::load<V>(c + len - W), neutral));
    else
      for (; i < len; ++i) add1(io::load1(c + i));
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
      k0 = j * per_chunk, k1 = count - k0 < per_chunk ? count : k0 + per_chunk, off = 0,
      piece = len;
    }
  }
};

/// Pass B of one unit's chunk, segments [k0, k1) x [off, off + piece): sum (x - center)^2,
/// re-read from L1, for a chunk that failed the one-read guard.
template <class V, class TX>
SIMDNORM_COLD float chunk_pass_b(const TX* x, std::ptrdiff_t stride, std::size_t k0, std::size_t k1,
                                 std::size_t off, std::size_t piece, bool overlap, float center) {
  const V vc(center);
  const auto fresh = overlap_lanes<V>(piece);
  V b[4] = {V(0.f), V(0.f), V(0.f), V(0.f)};
  float t = 0.f;
  for (std::size_t k = k0; k < k1; ++k)
    walk_segment<V>(
        x + std::ptrdiff_t(k) * stride + std::ptrdiff_t(off), piece, overlap, fresh, vc,
        [&](std::size_t j, const V& v) {
          const V d = v - vc;
          b[j] = fma(d, d, b[j]);
        },
        [&](float v) { t += (v - center) * (v - center); });
  return hadd((b[0] + b[1]) + (b[2] + b[3])) + t;
}

/// Moments of R units at once; unit r is `count` segments of `len` floats at x[r] + k * stride,
/// taken in order as one row, in the chunks of chunk_walk (a contiguous unit is one segment).
/// Each unit goes through exactly the operations of the R = 1 case (bitwise independent of R);
/// interleaving lets the units' dependent scalar tails overlap, and adjacent units (NCHW
/// channels c..c+R-1) are read in memory order. While the one read walks chunk j, the lines
/// of chunk j + 1 are requested into L2, one per vector (banner).
template <class V, std::size_t R, class TX>
void segments_moments_r(const TX* const* x, std::ptrdiff_t stride, std::size_t count,
                        std::size_t len, bool tiny_m2, moments_f64* out) {
  constexpr std::size_t W = V::size;
  if (count > 1 && stride == std::ptrdiff_t(len)) len *= count, count = 1;  // contiguous
  const chunk_walk cw(count, len);
  double mean[R] = {}, m2[R] = {};  // set by the first chunk
  float p[R];                       // the shift: the mean so far
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r)
    p[r] = leading_mean<V>(x[r], len < kMomentChunk ? len : kMomentChunk);
  double n_done = 0;
  for (std::size_t j = 0; j < cw.chunks; ++j) {
    std::size_t k0, k1, off, piece;
    cw.span(j, k0, k1, off, piece);
    const double n_chunk = double((k1 - k0) * piece);
    const float len_min = tiny_m2 ? float(n_chunk) * FLT_MIN : 0.f;  // keeps_tiny_m2
    const bool overlap = W > 1 && piece % W != 0 && piece >= W;
    row_prefetcher pf[R];
    const bool prefetch = j + 1 < cw.chunks;
    if (prefetch) {
      std::size_t nk0, nk1, noff, npiece;
      cw.span(j + 1, nk0, nk1, noff, npiece);
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < R; ++r)
        pf[r] = row_prefetcher::of(x[r] + std::ptrdiff_t(nk0) * stride + std::ptrdiff_t(noff),
                                   stride, nk1 - nk0, npiece);
    }

    // One read: S1 = sum (x - p), S2 = sum (x - p)^2; a segment's vectors go round-robin to 4
    // accumulators each.
    V a[R][4], q[R][4];
    float ta[R], tq[R];
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
      q[r][0] = q[r][1] = q[r][2] = q[r][3] = V(0.f);
      ta[r] = tq[r] = 0.f;
    }
    // The walk, compiled apart for the last chunk (no prefetch): its branches and the
    // prefetchers' state otherwise stay in the loop of short segments (7x7 planes).
    const auto fresh = overlap_lanes<V>(piece);
    const auto walk = [&](auto with_prefetch) {
      for (std::size_t k = k0; k < k1; ++k) {
        SIMDNORM_UNROLL
        for (std::size_t r = 0; r < R; ++r) {
          const V vp(p[r]);
          walk_segment<V>(
              x[r] + std::ptrdiff_t(k) * stride + std::ptrdiff_t(off), piece, overlap, fresh, vp,
              [&](std::size_t j, const V& v) {
                if constexpr (decltype(with_prefetch)::value) pf[r].step(line_elements<TX>());
                const V d = v - vp;
                a[r][j] += d;
                q[r][j] = fma(d, d, q[r][j]);
              },
              [&](float v) {
                const float d = v - p[r];
                ta[r] += d;
                tq[r] += d * d;
              });
        }
      }
    };
    if (prefetch)
      walk(std::true_type{});
    else
      walk(std::false_type{});
    const chan_weights w{n_done, n_chunk};
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      const float s1 = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3])) + ta[r];
      const float s2 = hadd((q[r][0] + q[r][1]) + (q[r][2] + q[r][3])) + tq[r];
      const double mean_rel = double(s1) / n_chunk;  // relative to p
      double cm = double(p[r]) + mean_rel, cm2;
      const double shift_part = double(s1) * mean_rel;  // n_chunk * (mean - p)^2
      if (__builtin_expect(one_read_accepted(shift_part, double(s2)) && !(s2 < len_min), 1)) {
        cm2 = double(s2) - shift_part;
      } else {  // pass B around the chunk's float mean; in double where its sums lost their value
        const float center = p[r] + float(mean_rel);
        const float qs = chunk_pass_b<V>(x[r], stride, k0, k1, off, piece, overlap, center);
        if (!chunk_sums_kept(s1, qs) || qs < len_min) {
          const TX* c = x[r] + std::ptrdiff_t(k0) * stride + std::ptrdiff_t(off);
          chunk_moments_f64((k1 - k0) * piece,
                            [=](std::size_t e) {
                              return io::load1(c + std::ptrdiff_t(e / piece) * stride +
                                               std::ptrdiff_t(e % piece));
                            },
                            cm, cm2);
        } else {
          cm2 = m2_around(double(qs), n_chunk, cm - double(center));
        }
      }
      merge_moments(n_done == 0.0, w, cm, clamp_m2(cm2), mean[r], m2[r]);
      p[r] = float(mean[r]);  // the next chunk's shift
    }
    n_done += n_chunk;
  }
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
}

/// Moments of `units` units, unit u at x[u] (elements of TX): 4 at a time, then one by one
/// (same bits).
template <class V, class TX>
void segment_moments(const void* const* x_in, std::size_t units, std::ptrdiff_t stride,
                     std::size_t count, std::size_t len, bool tiny_m2, moments_f64* out) {
  constexpr std::size_t R = kInterleavedUnits;
  const TX* x[R];
  std::size_t u = 0;
  for (; u + R <= units; u += R) {
    for (std::size_t r = 0; r < R; ++r) x[r] = static_cast<const TX*>(x_in[u + r]);
    segments_moments_r<V, R>(x, stride, count, len, tiny_m2, out + u);
  }
  for (; u < units; ++u) {
    x[0] = static_cast<const TX*>(x_in[u]);
    segments_moments_r<V, 1>(x, stride, count, len, tiny_m2, out + u);
  }
}
