// row_moments: mean and sum of squared deviations (M2) of one float row.
//
// Formula: the row is cut into chunks of kMomentChunk elements, each shifted by a float p near
//   the mean: the mean of the row's first vector for the first chunk, the mean of the chunks
//   so far after that (Welford on chunks). One read of the chunk sums S1 = sum (x - p) and
//   S2 = sum (x - p)^2; then  M2 = S2 - S1^2 / len  (in double), which is exact up to the
//   rounding of S1 and S2. That subtraction cancels when the shift is far from the chunk mean,
//   so it is used only when  S1^2 / len <= S2 / 4  (the shift is within about half a
//   standard deviation of the mean; M2 keeps at least 3/4 of S2 and loses under one bit).
//   Otherwise (a chunk whose first values are not representative, e.g. a trend or an outlier
//   at its start) the chunk is read again from L1 and summed around its float mean c
//   (pass B): sum (x - c)^2 = M2 + len * (mean - c)^2 removes c's rounding. Chunks are
//   merged into the row state with Chan's formula, in double, in chunk order:
//   delta = mean_b - mean_a,  mean += delta * n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n.
//   Within a chunk, SIMD lanes and 4 accumulators are combined in a fixed order (hadd), and
//   the branch depends only on the row's values, so the result depends only on the ISA, never
//   on threads or partitions. Never E[x^2] - E[x]^2 on unshifted data.
// Without Shift (the single-float-mean variant) p = 0: the sums of raw values lose about
//   log2(|mean| / std) bits in the mean, and such rows take pass B.
// Memory traffic per element: one read of x from memory (and a re-read from L1 for the chunks
//   that take pass B). Work per vector: load, sub (on the FMA unit), add, fma.
// Preconditions: n >= 1; x readable for n floats; no alignment required.
// Numerics: |x - p| small => errors of order eps_f32 * depth * std per chunk; the merge in
//   double adds nothing visible at float precision.

struct row_moments {
  double mean;
  double m2;
};

inline constexpr std::size_t kMomentChunk = 2048;

/// Float mean of the first min(n, V::size) values, as x[0] + mean(x - x[0]) (exact
/// differences near the mean): the first chunk's shift.
template <class V>
inline float leading_mean(const float* x, std::size_t n) {
  constexpr std::size_t W = V::size;
  if (n < W) return x[0];
  return x[0] + hadd(load<V>(x) - V(x[0])) * (1.f / float(W));
}

/// Moments of R rows of length n at once. Each row goes through exactly the operations of
/// the R = 1 case; interleaving only lets the rows' dependent chains and scalar tails overlap.
/// Results are bitwise independent of R.
template <class V, bool Shift, std::size_t R>
inline void rows_moments_f32(const float* const* x, std::size_t n, row_moments* out,
                             row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  float p[R];
  double mean[R] = {}, m2[R] = {};  // set by the first chunk (n >= 1)
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) p[r] = Shift ? leading_mean<V>(x[r], n) : 0.f;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const double inv_len = 1.0 / double(len);

    // One pass: S1 = sum (x - p) and S2 = sum (x - p)^2, four accumulators each per row.
    V a[R][4], q[R][4];
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) SIMDNORM_UNROLL for (std::size_t k = 0; k < 4; ++k) {
      a[r][k] = V(0.f);
      q[r][k] = V(0.f);
    }
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const float* c = x[r] + start + i;
        const V vp(p[r]);
        SIMDNORM_UNROLL for (std::size_t k = 0; k < 4; ++k) {
          const V d = shift_sub(load<V>(c + k * W), vp);
          a[r][k] += d;
          q[r][k] = fma(d, d, q[r][k]);
        }
      }
      pf.step(W);
    }
    for (; i + W <= len; i += W)
      SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
        const V d = shift_sub(load<V>(x[r] + start + i), V(p[r]));
        a[r][0] += d;
        q[r][0] = fma(d, d, q[r][0]);
      }
    SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) {
      const float* c = x[r] + start;
      float s1 = hadd((a[r][0] + a[r][1]) + (a[r][2] + a[r][3]));
      float s2 = hadd((q[r][0] + q[r][1]) + (q[r][2] + q[r][3]));
      for (std::size_t k = i; k < len; ++k) {
        const float d = c[k] - p[r];
        s1 += d;
        s2 += d * d;
      }
      const double mean_rel = double(s1) * inv_len;  // relative to p
      const double chunk_mean = double(p[r]) + mean_rel;
      const double shift_part = double(s1) * mean_rel;  // len * (mean - p)^2
      double chunk_m2;
      if (shift_part * 4.0 <= double(s2)) {
        chunk_m2 = double(s2) - shift_part;
      } else {  // pass B: around the chunk's float mean, re-read from L1
        const float center = p[r] + float(mean_rel);
        const V vc(center);
        V b0(0.f), b1(0.f), b2(0.f), b3(0.f);
        std::size_t k = 0;
        for (; k + 4 * W <= len; k += 4 * W) {
          const V d0 = load<V>(c + k) - vc, d1 = load<V>(c + k + W) - vc;
          const V d2 = load<V>(c + k + 2 * W) - vc, d3 = load<V>(c + k + 3 * W) - vc;
          b0 = fma(d0, d0, b0);
          b1 = fma(d1, d1, b1);
          b2 = fma(d2, d2, b2);
          b3 = fma(d3, d3, b3);
        }
        for (; k + W <= len; k += W) {
          const V d = load<V>(c + k) - vc;
          b0 = fma(d, d, b0);
        }
        float qs = hadd((b0 + b1) + (b2 + b3));
        for (; k < len; ++k) {
          const float d = c[k] - center;
          qs += d * d;
        }
        const double off = chunk_mean - double(center);
        chunk_m2 = double(qs) - double(len) * off * off;
      }
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
      if (Shift) p[r] = float(mean[r]);  // the next chunk's shift
    }
  }
  SIMDNORM_UNROLL for (std::size_t r = 0; r < R; ++r) out[r] = {mean[r], m2[r]};
}

/// The vector of a row of n floats that ends at element n: its last m = n % V::size (or n, if
/// n < V::size) elements sit in the top m lanes; for n < V::size the other lanes are zero
/// (a padded copy, never a read outside the row).
template <class V>
inline V last_vector(const float* x, std::size_t n) {
  constexpr std::size_t W = V::size;
  if (n >= W) return load<V>(x + n - W);
  alignas(64) float padded[W] = {};
  for (std::size_t k = 0; k < n; ++k) padded[W - n + k] = x[k];
  return load<V>(padded);
}

/// Mask of the top m lanes (0 < m < V::size): the lanes of last_vector not yet counted.
template <class V>
inline auto tail_lanes(std::size_t m) {
  constexpr std::size_t W = V::size;
  alignas(64) float lane[W];
  for (std::size_t j = 0; j < W; ++j) lane[j] = float(j);
  return V(float(W - m) - 0.5f) < load<V>(lane);
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
    const auto last = tail_lanes<V>(n - full);
    SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r)
      s[r] = acc(s[r], select(last, dev(last_vector<V>(x[r], n), r), V(0.f)));
  }
  return lane_sums(s);
}

/// Lanes [0, H) of the result hold S1 = sum (x - p[r]) and lanes [H, 2H) S2 = sum (x - p[r])^2
/// of the H = V::size / 2 rows x[0, H): one read, 2H accumulators (S1 and S2 of 16 rows would
/// not fit in 32 registers), one lane_sums. The walk, tail and prefetch steps are those of
/// row_lanes_sum. Row r's deviations alternate between the FMA unit (shift_sub, even r) and the
/// adder (odd r), so that each of the two takes 1.5 operations per vector, not one 2 and the
/// other 1. Both give the same bits.
template <class V>
inline V shifted_sums_half(const float* const* x, std::size_t n, const float* p,
                           row_prefetcher& pf) {
  constexpr std::size_t W = V::size, H = W / 2;
  const std::size_t full = n / W * W;
  V s[W], vp[H];
  SIMDNORM_UNROLL for (std::size_t r = 0; r < H; ++r) {
    s[r] = V(0.f);
    s[H + r] = V(0.f);
    vp[r] = V(p[r]);
  }
  const auto dev = [&](std::size_t r, const V& v) { return r % 2 == 0 ? shift_sub(v, vp[r]) : v - vp[r]; };
  const auto add = [&](std::size_t r, const V& d) {
    s[r] += d;
    s[H + r] = fma(d, d, s[H + r]);
  };
  std::size_t i = 0;
  if (full != 0) {  // the first step also steps the prefetcher, once per row
    SIMDNORM_UNROLL for (std::size_t r = 0; r < H; ++r) {
      add(r, dev(r, load<V>(x[r])));
      pf.step(W);
    }
    i = W;
  } else {
    for (std::size_t r = 0; r < H; ++r) pf.step(W);
  }
  for (; i < full; i += W)
    SIMDNORM_UNROLL for (std::size_t r = 0; r < H; ++r) add(r, dev(r, load<V>(x[r] + i)));
  if (full != n) {
    const auto last = tail_lanes<V>(n - full);
    SIMDNORM_UNROLL for (std::size_t r = 0; r < H; ++r)
      add(r, select(last, dev(r, last_vector<V>(x[r], n)), V(0.f)));
  }
  return lane_sums(s);
}

/// The no-op callback of rows_moments_short_f32: nothing runs between the rows.
struct no_work_between_rows {
  void operator()() const {}
};

#if defined(__AVX512F__)
/// shifted_sums_half for 16 lanes and rows of whole vectors, with other work in between: the
/// 8 rows are summed one at a time, in the order 0, 4, 2, 6, 1, 5, 3, 7, with between_rows()
/// called after each, so that the caller's work (the previous group's normalize and its
/// stores) interleaves with these loads. Each pair of rows enters lane_sums' reduction tree as
/// soon as both are summed, so only a few vectors stay live beside the caller's. The
/// operations are those of shifted_sums_half and lane_sums, so the bits are the same.
template <class Between>
SIMDNORM_ALWAYS_INLINE __m512 shifted_sums_half_paired(const float* const* x, std::size_t n,
                                                       const float* p, Between between_rows) {
  const auto sums = [&](std::size_t r, __m512& a, __m512& q) SIMDNORM_LAMBDA_INLINE {
    const __m512 vp = _mm512_set1_ps(p[r]);
    const float* xr = x[r];
    a = _mm512_setzero_ps();
    q = _mm512_setzero_ps();
    for (std::size_t i = 0; i < n; i += 16) {
      const __m512 v = _mm512_loadu_ps(xr + i);
      const __m512 d = r % 2 == 0 ? _mm512_fmsub_ps(v, _mm512_set1_ps(1.f), vp) : _mm512_sub_ps(v, vp);
      a = _mm512_add_ps(a, d);
      q = _mm512_fmadd_ps(d, d, q);
    }
    between_rows();
  };
  // lane_sums' tree over [S1 of rows 0-7 | S2 of rows 0-7]: its first step pairs rows (0, 4),
  // (2, 6), (1, 5), (3, 7) and the second joins each S1 pair with the same rows' S2 pair.
  constexpr std::size_t kPairs[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};
  __m512 u[4];
  SIMDNORM_UNROLL for (std::size_t k = 0; k < 4; ++k) {
    __m512 a0, q0, a1, q1;
    sums(kPairs[k][0], a0, q0);
    sums(kPairs[k][1], a1, q1);
    u[k] = halve_blocks_128(halve_blocks_256(a0, a1), halve_blocks_256(q0, q1));
  }
  return halve_lanes(halve_pairs(u[0], u[2]), halve_pairs(u[1], u[3]));
}
#endif

/// Moments of exactly V::size short rows (n <= kMomentChunk) at once, in vector form: lane r
/// describes row r. The shift p of a row is the mean of its first vector (one lane_sums for all
/// rows); one read sums S1 = sum (x - p) and S2 = sum (x - p)^2 (shifted_sums_half, twice), and
/// M2 = S2 - S1^2 / n under the guard of rows_moments_f32 (S1^2 / n <= S2 / 4; false for NaN).
/// If a row fails it (its first vector is not representative, or NaN / Inf), the group takes
/// pass B: sum (x - hi)^2 re-read from L1 (row_lanes_sum), and the failing rows use it. A
/// row's bits depend only on its own values and n, never on the other rows of its group.
/// Outputs: the mean as an exact float pair hi + lo (hi = p + S1 / n rounded, lo its rounding
/// error by TwoSum; hi is also the pass-B center, so that M2 needs the n * lo^2 correction of
/// the identity in the banner) and M2 in float.
/// The plan routes every row of such a shape through this function (groups are padded by
/// repeating a row), so a row's bits do not depend on its position in the batch.
/// between_rows, when given, runs after each row's S1 / S2 (shifted_sums_half_paired: rows of
/// whole vectors, AVX-512 only); it changes the order of the work, never a bit.
template <class V, bool Shift, class Between = no_work_between_rows>
SIMDNORM_ALWAYS_INLINE void rows_moments_short_f32(const float* const* x, std::size_t n, V& hi,
                                                   V& lo, V& m2, row_prefetcher& pf,
                                                   [[maybe_unused]] Between between_rows = {}) {
  constexpr std::size_t W = V::size;
  alignas(64) float p[W];
  V P(0.f);
  if (Shift) {
    V first[W];
    if (n >= W) {
      // p = sum (x / W) over the first vector: the scale is a power of two, so it cannot
      // overflow, and a constant row gives p == x exactly (lane_sums adds equal partial sums).
      SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r) first[r] = load<V>(x[r]) * V(1.f / float(W));
      P = lane_sums(first);
    } else {
      // p = x[0] + mean(x - x[0]), exact for a constant row of any length; the vector of the
      // x[0] goes through memory, a store-forwarding stall only rows shorter than W pay.
      SIMDNORM_UNROLL for (std::size_t r = 0; r < W; ++r) {
        p[r] = x[r][0];
        first[r] = select(tail_lanes<V>(n), last_vector<V>(x[r], n) - V(p[r]), V(0.f));
      }
      P = fma(lane_sums(first), V(1.f / float(n)), load<V>(p));
    }
  }
  P.store_unaligned(p);
  V s1, s2;
  if constexpr (W == 1) {
    s1 = s2 = V(0.f);
    for (std::size_t k = 0; k < n; ++k) {
      const V d = shift_sub(load<V>(x[0] + k), P);
      s1 += d;
      s2 = fma(d, d, s2);
    }
  } else if constexpr (std::is_same_v<Between, no_work_between_rows>) {
    split_halves(shifted_sums_half<V>(x, n, p, pf), shifted_sums_half<V>(x + W / 2, n, p + W / 2, pf), s1, s2);
  } else {  // work between the rows: rows of whole vectors, AVX-512
#if defined(__AVX512F__)
    static_assert(W == 16);
    split_halves(V(shifted_sums_half_paired(x, n, p, between_rows)),
                 V(shifted_sums_half_paired(x + W / 2, n, p + W / 2, between_rows)), s1, s2);
#else
    static_assert(!sizeof(Between), "work between the rows needs AVX-512");
#endif
  }
  const V mean_rel = s1 * V(1.f / float(n));
  hi = P + mean_rel;  // TwoSum: hi + lo == P + mean_rel exactly
  const V bb = hi - P;
  lo = (P - (hi - bb)) + (mean_rel - bb);
  const V shift_part = s1 * mean_rel;  // n * (mean - p)^2
  const auto one_read = shift_part * V(4.f) <= s2;
  m2 = s2 - shift_part;
  if (!all(one_read)) {  // pass B, around the float mean hi, re-read from L1
    alignas(64) float center[W];
    hi.store_unaligned(center);
    row_prefetcher none;
    const V sq = row_lanes_sum<V>(x, n, [&](V v, std::size_t r) { return v - V(center[r]); },
                                  [](V s, V d) { return fma(d, d, s); }, none);
    // sum (x - hi)^2 = M2 + n * lo^2
    m2 = select(one_read, m2, fnma(V(float(n)) * lo, lo, sq));
  }
  m2 = select(m2 < V(0.f), V(0.f), m2);  // rounding below zero; NaN stays NaN
}

/// Sum of term(x) over one row: float accumulators per chunk, chunks added in double.
/// acc(q, v) adds the terms of vector v to q; term1(x) is one scalar tail term.
template <class V, class Acc, class Term1>
inline double row_chunked_sum_f32(const float* x, std::size_t n, row_prefetcher& pf, Acc acc,
                                  Term1 term1) {
  constexpr std::size_t W = V::size;
  double total = 0.0;
  for (std::size_t start = 0; start < n; start += kMomentChunk) {
    const std::size_t len = n - start < kMomentChunk ? n - start : kMomentChunk;
    const float* c = x + start;
    V q0(0.f), q1(0.f), q2(0.f), q3(0.f);
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      q0 = acc(q0, load<V>(c + i));
      q1 = acc(q1, load<V>(c + i + W));
      q2 = acc(q2, load<V>(c + i + 2 * W));
      q3 = acc(q3, load<V>(c + i + 3 * W));
      pf.step(W);
    }
    for (; i + W <= len; i += W) q0 = acc(q0, load<V>(c + i));
    float q = hadd((q0 + q1) + (q2 + q3));
    for (; i < len; ++i) q += term1(c[i]);
    total += double(q);
  }
  return total;
}

/// Sum of squares of one row (row_chunked_sum_f32).
template <class V>
inline double row_sum_squares_f32(const float* x, std::size_t n, row_prefetcher& pf) {
  return row_chunked_sum_f32<V>(
      x, n, pf, [](V q, V v) SIMDNORM_LAMBDA_INLINE { return fma(v, v, q); },
      [](float v) { return v * v; });
}
