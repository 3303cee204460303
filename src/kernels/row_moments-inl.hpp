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

template <class V, bool Shift>
inline row_moments row_moments_f32(const float* x, std::size_t n) {
  constexpr std::size_t W = V::size;
  const float p = Shift ? x[0] : 0.f;
  const V vp(p);
  double mean = 0.0, m2 = 0.0;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const float* c = x + start;

    // Pass A: sum of (x - p), four independent accumulators to hide add latency.
    V a0(0.f), a1(0.f), a2(0.f), a3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      a0 += load<V>(c + i) - vp;
      a1 += load<V>(c + i + W) - vp;
      a2 += load<V>(c + i + 2 * W) - vp;
      a3 += load<V>(c + i + 3 * W) - vp;
    }
    for (; i + W <= len; i += W) a0 += load<V>(c + i) - vp;
    float s = hadd((a0 + a1) + (a2 + a3));
    for (; i < len; ++i) s += c[i] - p;
    const double chunk_mean_rel = double(s) / double(len);  // relative to p
    const float center = p + float(chunk_mean_rel);

    // Pass B: sum of (x - center)^2 from L1.
    const V vc(center);
    V q0(0.f), q1(0.f), q2(0.f), q3(0.f);
    for (i = 0; i + 4 * W <= len; i += 4 * W) {
      const V d0 = load<V>(c + i) - vc, d1 = load<V>(c + i + W) - vc;
      const V d2 = load<V>(c + i + 2 * W) - vc, d3 = load<V>(c + i + 3 * W) - vc;
      q0 = fma(d0, d0, q0);
      q1 = fma(d1, d1, q1);
      q2 = fma(d2, d2, q2);
      q3 = fma(d3, d3, q3);
    }
    for (; i + W <= len; i += W) {
      const V d = load<V>(c + i) - vc;
      q0 = fma(d, d, q0);
    }
    float q = hadd((q0 + q1) + (q2 + q3));
    for (; i < len; ++i) q += (c[i] - center) * (c[i] - center);

    const double chunk_mean = double(p) + chunk_mean_rel;
    const double off = chunk_mean - double(center);
    double chunk_m2 = double(q) - double(len) * off * off;
    if (!(chunk_m2 > 0.0)) chunk_m2 = chunk_m2 == chunk_m2 ? 0.0 : chunk_m2;  // keep NaN

    if (start == 0) {
      mean = chunk_mean;
      m2 = chunk_m2;
    } else {  // Chan's merge of (start, mean, m2) with (len, chunk_mean, chunk_m2)
      const double na = double(start), nb = double(len), nt = na + nb;
      const double delta = chunk_mean - mean;
      mean += delta * (nb / nt);
      m2 += chunk_m2 + delta * delta * (na * nb / nt);
    }
  }
  return {mean, m2};
}

/// Sum of squares of one row: float accumulators per chunk, chunks added in double.
template <class V>
inline double row_sum_squares_f32(const float* x, std::size_t n) {
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
