// row_moments: mean and sum of squared deviations (M2) of one float row.
//
// Formula: the row is cut into chunks of kMomentChunk elements. For each chunk, pass A sums
//   (x - p) and gives the chunk mean; pass B sums (x - c)^2 around the float center c nearest
//   that mean, and the exact identity  sum (x - c)^2 = M2 + len * (mean - c)^2  removes the
//   center's rounding. Chunks are merged into the row state with Chan's formula, in double,
//   in chunk order:  delta = mean_b - mean_a,  mean += delta * n_b / n,
//                    M2 = M2_a + M2_b + delta^2 * n_a * n_b / n.
//   Within a chunk, SIMD lanes and 4 accumulators are combined in a fixed order (hadd), so
//   the result depends only on the ISA, never on threads or partitions.
// Shift p: p = x[0] when Shift (compensated mean). Then x - p is exact for data near the mean
//   (Sterbenz) and the sums carry no large-offset cancellation; the mean comes out in double
//   as p + sum/len and is later split into a float pair hi + lo. Without Shift, p = 0 and the
//   chunk sums of raw values lose about log2(|mean| / std) bits: the single-float-mean variant.
// Memory traffic per element: pass A reads x once from memory; pass B re-reads it from L1
//   (a chunk is 8 KiB). Work per vector: load, [sub], add; load, sub, fma.
// Preconditions: n >= 1; x readable for n floats; no alignment required.
// Numerics: |x - p| small => errors of order eps_f32 * sqrt(len) * std per chunk; the merge in
//   double adds nothing visible at float precision. This is a Welford/Chan update on chunks,
//   never E[x^2] - E[x]^2.

struct row_moments {
  double mean;
  double m2;
};

inline constexpr std::size_t kMomentChunk = 2048;

/// Moments of R rows of length n at once. Each row goes through exactly the operations of
/// the R = 1 case; interleaving only lets the rows' dependent scalar tails (hadd, division,
/// merge) overlap, which is what short rows are limited by. Results are bitwise independent
/// of R.
template <class V, bool Shift, std::size_t R>
inline void rows_moments_f32(const float* const* x, std::size_t n, row_moments* out,
                             row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  float p[R];
  double mean[R] = {}, m2[R] = {};  // set by the first chunk (n >= 1)
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) p[r] = Shift ? x[r][0] : 0.f;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const double inv_len = 1.0 / double(len);

    // Pass A: sum of (x - p), four independent accumulators per row to hide add latency.
    V a[R][4];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) a[r][0] = a[r][1] = a[r][2] = a[r][3] = V(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const float* c = x[r] + start + i;
        const V vp(p[r]);
        a[r][0] += load<V>(c) - vp;
        a[r][1] += load<V>(c + W) - vp;
        a[r][2] += load<V>(c + 2 * W) - vp;
        a[r][3] += load<V>(c + 3 * W) - vp;
      }
      pf.step(W);
    }
    for (; i + W <= len; i += W)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) a[r][0] += load<V>(x[r] + start + i) - V(p[r]);
    float center[R];
    double mean_rel[R];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      float s = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3]));
      for (std::size_t k = i; k < len; ++k) s += x[r][start + k] - p[r];
      mean_rel[r] = double(s) * inv_len;  // relative to p
      center[r] = p[r] + float(mean_rel[r]);
    }

    // Pass B: sum of (x - center)^2, re-read from L1.
    V q[R][4];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) q[r][0] = q[r][1] = q[r][2] = q[r][3] = V(0.f);
    for (i = 0; i + 4 * W <= len; i += 4 * W)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const float* c = x[r] + start + i;
        const V vc(center[r]);
        const V d0 = load<V>(c) - vc, d1 = load<V>(c + W) - vc;
        const V d2 = load<V>(c + 2 * W) - vc, d3 = load<V>(c + 3 * W) - vc;
        q[r][0] = fma(d0, d0, q[r][0]);
        q[r][1] = fma(d1, d1, q[r][1]);
        q[r][2] = fma(d2, d2, q[r][2]);
        q[r][3] = fma(d3, d3, q[r][3]);
      }
    for (; i + W <= len; i += W)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const V d = load<V>(x[r] + start + i) - V(center[r]);
        q[r][0] = fma(d, d, q[r][0]);
      }
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      float qs = hadd((q[r][0] + q[r][1]) + (q[r][2] + q[r][3]));
      for (std::size_t k = i; k < len; ++k) {
        const float d = x[r][start + k] - center[r];
        qs += d * d;
      }
      const double chunk_mean = double(p[r]) + mean_rel[r];
      const double off = chunk_mean - double(center[r]);
      double chunk_m2 = double(qs) - double(len) * off * off;
      if (chunk_m2 < 0.0) chunk_m2 = 0.0;  // NaN stays NaN
      if (start == 0) {
        mean[r] = chunk_mean;
        m2[r] = chunk_m2;
      } else {  // Chan's merge of (start, mean, m2) with (len, chunk_mean, chunk_m2)
        const double na = double(start), nb = double(len), nt = na + nb;
        const double delta = chunk_mean - mean[r];
        mean[r] += delta * (nb / nt);
        m2[r] += chunk_m2 + delta * delta * (na * nb / nt);
      }
    }
  }
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
}

/// Moments of exactly V::size short rows (n <= kMomentChunk) at once, in vector form: lane r
/// describes row r. The rows' accumulators are reduced across lanes for all rows together
/// (lane_sums, a transpose-and-add) and the per-row arithmetic runs in the vector lanes, so
/// short rows are not dominated by one horizontal reduction and a scalar tail per row.
/// Outputs: the mean as an exact float pair hi + lo (hi = p + mean_rel rounded, lo its
/// rounding error by TwoSum; hi is also the pass-B center, so M2 needs the n * lo^2
/// correction of the identity in the banner) and M2 in float.
/// The plan routes every row of such a shape through this function (groups are padded by
/// repeating a row), so a row's bits do not depend on its position in the batch.
template <class V, bool Shift>
inline void rows_moments_short_f32(const float* const* x, std::size_t n, V& hi, V& lo, V& m2,
                                   row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  alignas(64) float p[W], tail[W], center[W];
  V acc[W];
  for (std::size_t r = 0; r < W; ++r) {
    p[r] = Shift ? x[r][0] : 0.f;
    const V vp(p[r]);
    V a0(0.f), a1(0.f), a2(0.f), a3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 += load<V>(x[r] + i) - vp;
      a1 += load<V>(x[r] + i + W) - vp;
      a2 += load<V>(x[r] + i + 2 * W) - vp;
      a3 += load<V>(x[r] + i + 3 * W) - vp;
    }
    for (; i + W <= n; i += W) a0 += load<V>(x[r] + i) - vp;
    pf.step(W);
    acc[r] = (a0 + a1) + (a2 + a3);
    float t = 0.f;
    for (; i < n; ++i) t += x[r][i] - p[r];
    tail[r] = t;
  }
  const V vn = V(float(n)), inv_n = V(1.f / float(n)), P = load<V>(p);
  const V mean_rel = (lane_sums(acc) + load<V>(tail)) * inv_n;
  hi = P + mean_rel;  // TwoSum: hi + lo == P + mean_rel exactly
  const V bb = hi - P;
  lo = (P - (hi - bb)) + (mean_rel - bb);
  hi.store_unaligned(center);
  for (std::size_t r = 0; r < W; ++r) {
    const V vc(center[r]);
    V q0(0.f), q1(0.f), q2(0.f), q3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      const V d0 = load<V>(x[r] + i) - vc, d1 = load<V>(x[r] + i + W) - vc;
      const V d2 = load<V>(x[r] + i + 2 * W) - vc, d3 = load<V>(x[r] + i + 3 * W) - vc;
      q0 = fma(d0, d0, q0);
      q1 = fma(d1, d1, q1);
      q2 = fma(d2, d2, q2);
      q3 = fma(d3, d3, q3);
    }
    for (; i + W <= n; i += W) {
      const V d = load<V>(x[r] + i) - vc;
      q0 = fma(d, d, q0);
    }
    acc[r] = (q0 + q1) + (q2 + q3);
    float t = 0.f;
    for (; i < n; ++i) t += (x[r][i] - center[r]) * (x[r][i] - center[r]);
    tail[r] = t;
  }
  // sum (x - hi)^2 = M2 + n * lo^2; clamp rounding below zero (NaN stays NaN).
  m2 = fnma(vn * lo, lo, lane_sums(acc) + load<V>(tail));
  m2 = select(m2 < V(0.f), V(0.f), m2);
}

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
      const V v0 = load<V>(c + i), v1 = load<V>(c + i + W);
      const V v2 = load<V>(c + i + 2 * W), v3 = load<V>(c + i + 3 * W);
      q0 = fma(v0, v0, q0);
      q1 = fma(v1, v1, q1);
      q2 = fma(v2, v2, q2);
      q3 = fma(v3, v3, q3);
      pf.step(W);
    }
    for (; i + W <= len; i += W) {
      const V v = load<V>(c + i);
      q0 = fma(v, v, q0);
    }
    float q = hadd((q0 + q1) + (q2 + q3));
    for (; i < len; ++i) q += c[i] * c[i];
    total += double(q);
  }
  return total;
}
