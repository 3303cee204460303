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
        a[r][0] += shift_sub(load<V>(c), vp);
        a[r][1] += shift_sub(load<V>(c + W), vp);
        a[r][2] += shift_sub(load<V>(c + 2 * W), vp);
        a[r][3] += shift_sub(load<V>(c + 3 * W), vp);
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

/// Lane r of the result is sum over k of acc(d_r(x[r][k])) for V::size rows of n elements:
/// acc(s, d) folds one deviation vector into a row's accumulator and dev(v, r) maps row r's
/// values to deviations. The rows are walked together, one vector of each row per step, so
/// the V::size accumulators are independent chains and the loop costs one branch per V::size
/// vectors (a short row walked alone is dominated by loop and tail overhead). The last n % W
/// elements are taken from the vector that ends at element n (or, for n < W, from a
/// zero-padded copy), with the lanes counted already masked to zero: no scalar tail. The
/// accumulators are then reduced for all rows at once (lane_sums). Each row's result depends
/// only on its own values and n. The first step also steps `pf` once per row, so prefetches
/// are spread among the loads (bunched after the pass, D = 64 beyond L3 lost 0.03-0.05).
template <class V, class Dev, class Acc>
inline V row_lanes_sum(const float* const* x, std::size_t n, Dev dev, Acc acc,
                       row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  const std::size_t full = n / W * W;
  V s[W];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r) s[r] = V(0.f);
  std::size_t i = 0;
  if (full != 0) {  // the first step also steps the prefetcher, once per row
    SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r) {
      s[r] = acc(s[r], dev(load<V>(x[r]), r));
      pf.step(W);
    }
    i = W;
  } else {
    for (std::size_t r = 0; r < W; ++r) pf.step(W);
  }
  for (; i < full; i += W)
    SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r) s[r] = acc(s[r], dev(load<V>(x[r] + i), r));
  if (full != n) {
    alignas(64) float lane[W];
    for (std::size_t j = 0; j < W; ++j) lane[j] = float(j);
    const auto last = V(float(W - (n - full)) - 0.5f) < load<V>(lane);  // lanes of the tail
    for (std::size_t r = 0; r < W; ++r) {
      V v;
      if (n >= W) {
        v = load<V>(x[r] + n - W);
      } else {
        alignas(64) float padded[W] = {};
        for (std::size_t k = 0; k < n; ++k) padded[W - n + k] = x[r][k];
        v = load<V>(padded);
      }
      s[r] = acc(s[r], select(last, dev(v, r), V(0.f)));
    }
  }
  return lane_sums(s);
}

/// Moments of exactly V::size short rows (n <= kMomentChunk) at once, in vector form: lane r
/// describes row r. Pass A sums x - p and pass B sums (x - center)^2 over all rows together
/// (row_lanes_sum); the per-row arithmetic between and after them runs in the vector lanes.
/// Outputs: the mean as an exact float pair hi + lo (hi = p + mean_rel rounded, lo its
/// rounding error by TwoSum; hi is also the pass-B center, so M2 needs the n * lo^2
/// correction of the identity in the banner) and M2 in float.
/// The plan routes every row of such a shape through this function (groups are padded by
/// repeating a row), so a row's bits do not depend on its position in the batch.
template <class V, bool Shift>
inline void rows_moments_short_f32(const float* const* x, std::size_t n, V& hi, V& lo, V& m2,
                                   row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  alignas(64) float p[W], center[W];
  for (std::size_t r = 0; r < W; ++r) p[r] = Shift ? x[r][0] : 0.f;
  const auto add = [](V s, V d) { return s + d; };
  const auto add_square = [](V s, V d) { return fma(d, d, s); };
  const V sum = row_lanes_sum<V>(x, n, [&](V v, std::size_t r) { return shift_sub(v, V(p[r])); }, add, pf);
  const V P = load<V>(p), mean_rel = sum * V(1.f / float(n));
  hi = P + mean_rel;  // TwoSum: hi + lo == P + mean_rel exactly
  const V bb = hi - P;
  lo = (P - (hi - bb)) + (mean_rel - bb);
  hi.store_unaligned(center);
  row_prefetcher none;
  const V sq = row_lanes_sum<V>(x, n, [&](V v, std::size_t r) { return v - V(center[r]); },
                                add_square, none);
  // sum (x - hi)^2 = M2 + n * lo^2; clamp rounding below zero (NaN stays NaN).
  m2 = fnma(V(float(n)) * lo, lo, sq);
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
