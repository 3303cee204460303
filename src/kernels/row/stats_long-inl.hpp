// Row statistics, long rows: mean and M2 of one float row of any length (LayerNorm), and the
// chunked sums of non-negative terms (RMSNorm's and L2's squares, L1's magnitudes).
//
// Formula: common/moments-inl.hpp. The row is cut into pieces of kPieceElements, whose
//   moments (or sums) are folded in order: a plan may compute the pieces of one row in
//   different tasks, or processes, and fold them later with the same operations (row_fold),
//   so the bits never depend on where a piece ran. A piece is cut into chunks of kMomentChunk
//   elements, each shifted by a float p near the mean: the mean of the piece's first vector
//   for the first chunk, the mean of the chunks so far after that (Welford on chunks). One read
//   gives the chunk's S1 and S2; a chunk whose first values are not representative (a trend, or an
//   outlier at its start) fails the one-read guard and takes pass B. Within a chunk, SIMD lanes
//   and 4 accumulators are combined in a fixed order (hadd), and the branch depends only on
//   the row's values, so the result depends only on the ISA, never on threads or partitions.
// Without Shift (the single-float-mean variant) p = 0: the sums of raw values lose about
//   log2(|mean| / std) bits in the mean, and such rows take pass B.
// Memory traffic per element: one read of x from memory (and a re-read from L1 for the chunks
//   that take pass B). Work per vector: load, sub (on the FMA unit), add, fma.
// Preconditions: n >= 1; x readable for n floats; no alignment required.

/// Folds the moments of the piece of `len` values that starts at value `start` of its row into
/// the row's moments so far (Chan's merge; the first piece is taken as it is).
SIMDNORM_ALWAYS_INLINE void fold_piece(std::size_t start, std::size_t len, const moments_f64& piece,
                                       moments_f64& row) {
  merge_moments(start == 0, chan_weights(double(start), double(len)), piece.mean, piece.m2,
                row.mean, row.m2);
}

/// Folds the sum of the piece that starts at value `start` into the row's sum so far (in m2):
/// the fold of the non-negative sums (row_chunked_sum_f32 adds its pieces the same way).
SIMDNORM_ALWAYS_INLINE void fold_sum(std::size_t start, std::size_t, const moments_f64& piece,
                                     moments_f64& row) {
  row.m2 = (start == 0 ? 0.0 : row.m2) + piece.m2;
}

/// Moments of one piece (n <= kPieceElements) of R rows at once. Each row goes through exactly
/// the operations of the R = 1 case; interleaving only lets the rows' dependent chains and
/// scalar tails overlap. Results are bitwise independent of R.
template <class V, bool Shift, std::size_t R, class TX>
inline void piece_moments_f32(const TX* const* x, std::size_t n, moments_f64* out,
                              row_prefetcher& pf, bool tiny_m2) {
  constexpr std::size_t W = V::size;
  float p[R];
  double mean[R] = {}, m2[R] = {};  // set by the first chunk (n >= 1)
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r) p[r] = Shift ? leading_mean<V>(x[r], n) : 0.f;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const double inv_len = 1.0 / double(len);
    // With tiny_m2 (keeps_tiny_m2), sums of squares below this are computed again in double.
    const float len_min = tiny_m2 ? float(len) * FLT_MIN : 0.f;

    // One pass: S1 = sum (x - p) and S2 = sum (x - p)^2, four accumulators each per row.
    V a[R][4], q[R][4];
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      SIMDNORM_UNROLL
      for (std::size_t k = 0; k < 4; ++k) {
        a[r][k] = V(0.f);
        q[r][k] = V(0.f);
      }
    }
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < R; ++r) {
        const TX* c = x[r] + start + i;
        const V vp(p[r]);
        SIMDNORM_UNROLL
        for (std::size_t k = 0; k < 4; ++k) {
          const V d = shift_sub(io::load<V>(c + k * W), vp);
          a[r][k] += d;
          q[r][k] = fma(d, d, q[r][k]);
        }
      }
      pf.step(W);
    }
    for (; i + W <= len; i += W) {
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < R; ++r) {
        const V d = shift_sub(io::load<V>(x[r] + start + i), V(p[r]));
        a[r][0] += d;
        q[r][0] = fma(d, d, q[r][0]);
      }
    }
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      const TX* c = x[r] + start;
      float s1 = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3]));
      float s2 = hadd((q[r][0] + q[r][1]) + (q[r][2] + q[r][3]));
      for (std::size_t k = i; k < len; ++k) {
        const float d = io::load1(c + k) - p[r];
        s1 += d;
        s2 += d * d;
      }
      const double mean_rel = double(s1) * inv_len;  // relative to p
      double chunk_mean = double(p[r]) + mean_rel;
      const double shift_part = double(s1) * mean_rel;  // len * (mean - p)^2
      double chunk_m2;
      if (one_read_accepted(shift_part, double(s2)) && !(s2 < len_min)) {
        chunk_m2 = double(s2) - shift_part;
      } else {  // pass B: around the chunk's float mean, re-read from L1
        const float center = p[r] + float(mean_rel);
        const V vc(center);
        V b0(0.f), b1(0.f), b2(0.f), b3(0.f);
        std::size_t k = 0;
        for (; k + 4 * W <= len; k += 4 * W) {
          const V d0 = io::load<V>(c + k) - vc, d1 = io::load<V>(c + k + W) - vc;
          const V d2 = io::load<V>(c + k + 2 * W) - vc, d3 = io::load<V>(c + k + 3 * W) - vc;
          b0 = fma(d0, d0, b0);
          b1 = fma(d1, d1, b1);
          b2 = fma(d2, d2, b2);
          b3 = fma(d3, d3, b3);
        }
        for (; k + W <= len; k += W) {
          const V d = io::load<V>(c + k) - vc;
          b0 = fma(d, d, b0);
        }
        float qs = hadd((b0 + b1) + (b2 + b3));
        for (; k < len; ++k) {
          const float d = io::load1(c + k) - center;
          qs += d * d;
        }
        if (__builtin_expect(!chunk_sums_kept(s1, qs) || qs < len_min, 0))
          chunk_moments_f64(
              len, [c](std::size_t e) { return io::load1(c + e); }, chunk_mean, chunk_m2);
        else
          chunk_m2 = m2_around(double(qs), double(len), chunk_mean - double(center));
      }
      chunk_m2 = clamp_m2(chunk_m2);
      merge_moments(start == 0, chan_weights(double(start), double(len)), chunk_mean, chunk_m2,
                    mean[r], m2[r]);
      if (Shift) p[r] = float(mean[r]);  // the next chunk's shift
    }
  }
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
}

/// Moments of R rows of length n: their pieces' moments, folded in order.
template <class V, bool Shift, std::size_t R, class TX>
inline void rows_moments_f32(const TX* const* x, std::size_t n, moments_f64* out,
                             row_prefetcher& pf, bool tiny_m2) {
  if (n <= kPieceElements) return piece_moments_f32<V, Shift, R>(x, n, out, pf, tiny_m2);
  for (std::size_t start = 0; start < n; start += kPieceElements) {
    const std::size_t len = n - start < kPieceElements ? n - start : kPieceElements;
    const TX* xp[R];
    moments_f64 m[R];
    for (std::size_t r = 0; r < R; ++r) xp[r] = x[r] + start;
    piece_moments_f32<V, Shift, R>(xp, len, m, pf, tiny_m2);
    for (std::size_t r = 0; r < R; ++r) fold_piece(start, len, m[r], out[r]);
  }
}

/// Sum of non-negative terms of one row: float accumulators per chunk of kMomentChunk (four per
/// lane), chunks added in double per piece of kPieceElements, pieces added in order (the fold
/// of row_fold). acc(q, v) adds the terms of vector v to q, term1(x) is one
/// tail term, and chunk_total(q, c, len) turns a chunk's float sum q into its value in double:
/// the place where a sum that lost its value (overflow, underflow) is summed again, once per
/// chunk and off the element loop.
template <class V, class TX, class Acc, class Term1, class ChunkTotal>
inline double row_chunked_sum_f32(const TX* x, std::size_t n, row_prefetcher& pf, Acc acc,
                                  Term1 term1, ChunkTotal chunk_total) {
  constexpr std::size_t W = V::size;
  double total = 0.0, piece = 0.0;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const TX* c = x + start;
    V q0(0.f), q1(0.f), q2(0.f), q3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      q0 = acc(q0, io::load<V>(c + i));
      q1 = acc(q1, io::load<V>(c + i + W));
      q2 = acc(q2, io::load<V>(c + i + 2 * W));
      q3 = acc(q3, io::load<V>(c + i + 3 * W));
      pf.step(W);
    }
    for (; i + W <= len; i += W) q0 = acc(q0, io::load<V>(c + i));
    float q = hadd((q0 + q1) + (q2 + q3));
    for (; i < len; ++i) q += term1(io::load1(c + i));
    piece += chunk_total(q, c, len);
    if ((start + len) % kPieceElements == 0 || start + len == n) {
      total += piece;
      piece = 0.0;
    }
  }
  return total;
}

/// Sum of squares of one row. A chunk whose float sum overflowed (|x| beyond about 1e19) or
/// underflowed (|x| below about 1e-19) is summed again with the values scaled by a power of two
/// (squares_lost, scaled_sum_squares).
template <class V, class TX>
inline double row_sum_squares_f32(const TX* x, std::size_t n, row_prefetcher& pf) {
  return row_chunked_sum_f32<V>(
      x, n, pf, [](V q, V v) SIMDNORM_LAMBDA_INLINE { return fma(v, v, q); },
      [](float v) { return v * v; },
      [](float q, const TX* c, std::size_t len) SIMDNORM_LAMBDA_INLINE {
        if (__builtin_expect(squares_lost(q, float(len) * FLT_MIN), 0))
          return scaled_sum_squares<V>(c, len, q > FLT_MAX ? kDownScale : kUpScale);
        return double(q);
      });
}

/// |v| from the operations every V has (scalar_vector included); NaN and -0 pass through.
template <class V>
SIMDNORM_ALWAYS_INLINE V abs_value(const V& v) {
  return select(v < V(0.f), V(0.f) - v, v);
}

/// Sum of |x| of x[0, len) in double: the chunk sum of row_sum_abs_f32 when its float sum
/// overflowed (|x| beyond about FLT_MAX / kMomentChunk). Rare, so out of line.
template <class TX>
SIMDNORM_COLD double sum_abs_f64(const TX* x, std::size_t len) {
  double s = 0.0;
  for (std::size_t i = 0; i < len; ++i) s += __builtin_fabs(double(io::load1(x + i)));
  return s;
}

/// Sum of |x| of one row.
template <class V, class TX>
inline double row_sum_abs_f32(const TX* x, std::size_t n, row_prefetcher& pf) {
  return row_chunked_sum_f32<V>(
      x, n, pf, [](V q, V v) SIMDNORM_LAMBDA_INLINE { return q + abs_value(v); },
      [](float v) { return __builtin_fabsf(v); },
      [](float q, const TX* c, std::size_t len) {
        return q > FLT_MAX ? sum_abs_f64(c, len) : double(q);
      });
}
