// Row statistics, short rows (n <= kShortCols): V::size rows at once, the per-row arithmetic
// in vector lanes (lane r describes row r), since a short row walked alone is dominated by its
// horizontal reductions and scalar tail. Used by LayerNorm (shifted sums, the one-read guard of
// common/moments-inl.hpp in float lanes) and RMSNorm (sums of squares).
// Memory traffic per element: one read of x (and a re-read from L1 for the groups that take
//   pass B). Preconditions: 1 <= n <= kMomentChunk; x[r] readable for n floats.

/// Lane r of the result is sum over k of acc(d_r(x[r][k])) for V::size rows of n elements:
/// acc(s, d) folds one deviation vector into a row's accumulator and dev(v, r) maps row r's
/// values to deviations. The rows are walked together, one vector of each row per step, so
/// the V::size accumulators are independent chains and the loop costs one branch per V::size
/// vectors. The last n % W elements are taken from the vector that ends at element n (or, for
/// n < W, from a zero-padded copy), with the lanes counted already masked to zero: no scalar
/// tail. The accumulators are then reduced for all rows at once (lane_sums). Each row's result
/// depends only on its own values and n. The first step also steps `pf` once per row, so
/// prefetches are spread among the loads rather than bunched after the pass.
template <class V, class TX, class Dev, class Acc>
inline V row_lanes_sum(const TX* const* x, std::size_t n, Dev dev, Acc acc, row_prefetcher& pf) {
  constexpr std::size_t W = V::size;
  const std::size_t full = n / W * W;
  V s[W];
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < W; ++r) s[r] = V(0.f);
  std::size_t i = 0;
  if (full != 0) {  // the first step also steps the prefetcher, once per row
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < W; ++r) {
      s[r] = acc(s[r], dev(io::load<V>(x[r]), r));
      pf.step(W);
    }
    i = W;
  } else {
    for (std::size_t r = 0; r < W; ++r) pf.step(W);
  }
  for (; i < full; i += W) {
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < W; ++r) s[r] = acc(s[r], dev(io::load<V>(x[r] + i), r));
  }
  if (full != n) {
    const auto last = lanes_from<V>(W - (n - full));
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < W; ++r)
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
template <class V, class TX>
inline V shifted_sums_half(const TX* const* x, std::size_t n, const float* p, row_prefetcher& pf) {
  constexpr std::size_t W = V::size, H = W / 2;
  const std::size_t full = n / W * W;
  V s[W], vp[H];
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < H; ++r) {
    s[r] = V(0.f);
    s[H + r] = V(0.f);
    vp[r] = V(p[r]);
  }
  const auto dev = [&](std::size_t r, const V& v) {
    return r % 2 == 0 ? shift_sub(v, vp[r]) : v - vp[r];
  };
  const auto add = [&](std::size_t r, const V& d) {
    s[r] += d;
    s[H + r] = fma(d, d, s[H + r]);
  };
  std::size_t i = 0;
  if (full != 0) {  // the first step also steps the prefetcher, once per row
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < H; ++r) {
      add(r, dev(r, io::load<V>(x[r])));
      pf.step(W);
    }
    i = W;
  } else {
    for (std::size_t r = 0; r < H; ++r) pf.step(W);
  }
  for (; i < full; i += W) {
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < H; ++r) add(r, dev(r, io::load<V>(x[r] + i)));
  }
  if (full != n) {
    const auto last = lanes_from<V>(W - (n - full));
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < H; ++r)
      add(r, select(last, dev(r, last_vector<V>(x[r], n)), V(0.f)));
  }
  return lane_sums(s);
}

/// The no-op callback of rows_moments_short_f32: nothing runs between the rows.
struct no_work_between_rows {
  void operator()() const {}
};

/// Moments of exactly V::size short rows at once, in vector form: lane r describes row r.
/// The shift p of a row is the mean of its first vector (one lane_sums for all rows); one read
/// sums S1 = sum (x - p) and S2 = sum (x - p)^2 (shifted_sums_half, twice), and
/// M2 = S2 - S1^2 / n under the one-read guard (common/moments-inl.hpp), in float lanes.
/// If a row fails it (its first vector is not representative, or NaN / Inf), the group takes
/// pass B: sum (x - hi)^2 re-read from L1 (row_lanes_sum), and the failing rows use it. A
/// row's bits depend only on its own values and n, never on the other rows of its group.
/// Outputs: the mean as an exact float pair hi + lo (hi = p + S1 / n rounded, lo its rounding
/// error by TwoSum; hi is also the pass-B center, so that M2 needs the n * lo^2 correction of
/// pass B's identity) and M2 in float.
/// The plan routes every row of such a shape through this function (groups are padded by
/// repeating a row), so a row's bits do not depend on its position in the batch.
/// between_rows, when given, runs after each row's S1 / S2 (rows of whole vectors, on ISAs
/// with isa_hooks<V>::paired_row_sums); it changes the order of the work, never a bit.
template <class V, bool Shift, class Between = no_work_between_rows, class TX = float>
SIMDNORM_ALWAYS_INLINE void rows_moments_short_f32(const TX* const* x, std::size_t n, V& hi, V& lo,
                                                   V& m2, row_prefetcher& pf,
                                                   [[maybe_unused]] Between between_rows = {}) {
  constexpr std::size_t W = V::size;
  alignas(64) float p[W];
  V P(0.f);
  if (Shift) {
    V first[W];
    if (n >= W) {
      // p = sum (x / W) over the first vector: the scale is a power of two, so it cannot
      // overflow, and a constant row gives p == x exactly (lane_sums adds equal partial sums).
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < W; ++r) first[r] = io::load<V>(x[r]) * V(1.f / float(W));
      P = lane_sums(first);
    } else {
      // p = x[0] + mean(x - x[0]), exact for a constant row of any length; the vector of the
      // x[0] goes through memory, a store-forwarding stall only rows shorter than W pay.
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < W; ++r) {
        p[r] = io::load1(x[r]);
        first[r] = select(lanes_from<V>(W - n), last_vector<V>(x[r], n) - V(p[r]), V(0.f));
      }
      P = fma(lane_sums(first), V(1.f / float(n)), load<V>(p));
    }
  }
  P.store_unaligned(p);
  V s1, s2;
  if constexpr (W == 1) {
    s1 = s2 = V(0.f);
    for (std::size_t k = 0; k < n; ++k) {
      const V d = shift_sub(io::load<V>(x[0] + k), P);
      s1 += d;
      s2 = fma(d, d, s2);
    }
  } else if constexpr (std::is_same_v<Between, no_work_between_rows>) {
    split_halves(shifted_sums_half<V>(x, n, p, pf),
                 shifted_sums_half<V>(x + W / 2, n, p + W / 2, pf), s1, s2);
  } else {  // work between the rows: rows of whole vectors
    static_assert(isa_hooks<V>::paired_row_sums, "work between the rows needs paired row sums");
    split_halves(
        isa_hooks<V>::template shifted_sums_half_paired<io>(x, n, p, between_rows),
        isa_hooks<V>::template shifted_sums_half_paired<io>(x + W / 2, n, p + W / 2, between_rows),
        s1, s2);
  }
  const V mean_rel = s1 * V(1.f / float(n));
  hi = P + mean_rel;  // TwoSum: hi + lo == P + mean_rel exactly
  const V bb = hi - P;
  lo = (P - (hi - bb)) + (mean_rel - bb);
  const V shift_part = s1 * mean_rel;  // n * (mean - p)^2
  const auto one_read = one_read_accepted(shift_part, s2);
  m2 = s2 - shift_part;
  if (!all(one_read)) {  // pass B, around the float mean hi, re-read from L1
    alignas(64) float center[W];
    hi.store_unaligned(center);
    row_prefetcher none;
    const V sq = row_lanes_sum<V>(
        x, n, [&](V v, std::size_t r) { return v - V(center[r]); },
        [](V s, V d) { return fma(d, d, s); }, none);
    // sum (x - hi)^2 = M2 + n * lo^2
    m2 = select(one_read, m2, fnma(V(float(n)) * lo, lo, sq));
  }
  m2 = clamp_m2(m2);
}
