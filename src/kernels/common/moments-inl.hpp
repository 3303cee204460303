// Moments: the arithmetic every statistics kernel (rows and channels) shares. Values are cut
// into chunks of at most kMomentChunk; each chunk gives (len, mean, M2) in double, and chunks
// are merged in chunk order. Never E[x^2] - E[x]^2 on unshifted data.
//
// Formula, per chunk, from float sums around a float shift p near the chunk's mean:
//   one read:  S1 = sum (x - p), S2 = sum (x - p)^2, M2 = S2 - S1^2 / len: exact up to the
//     rounding of S1 and S2, but the subtraction cancels when p is far from the mean, so it is
//     used only when one_read_accepted (S1^2 / len <= S2 / 4: the shift lies within about half
//     a standard deviation of the mean; M2 keeps at least 3/4 of S2 and loses under one bit).
//   pass B:    sum (x - c)^2 around the chunk's float mean c, re-read from L1:
//     sum (x - c)^2 = M2 + len * (mean - c)^2 removes c's rounding (m2_around).
//   in double: when pass A's or pass B's float sum lost its value (S1 beyond FLT_MAX: spreads
//     beyond about FLT_MAX / kMomentChunk; squares beyond FLT_MAX: deviations beyond about
//     1.8e19; or a deviation x - p itself beyond FLT_MAX: values of both signs near FLT_MAX),
//     the chunk's moments are computed again in double, in two passes (chunk_moments_f64);
//     so are chunks whose sum of squares fell below len * FLT_MIN, where the plan's eps asks
//     for it (keeps_tiny_m2 in isa_table.hpp). The one-read guard rejects an S1 or S2 that
//     overflowed, so such chunks reach pass B.
//   merge:     Chan's formula in double (merge_moments): delta = mean_b - mean_a,
//     mean += delta * n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n.
// Numerics: |x - p| small => errors of order eps_f32 * depth * std per chunk; the merge in
//   double adds nothing visible at float precision. A NaN or Inf in the values makes the
//   result non-finite (NaN is never clamped away). Finite values always give a finite M2
//   (a double: it may exceed FLT_MAX, and so may the variance).

/// The guard of the one-read M2: shift_part = S1^2 / len (len * (mean - p)^2), s2 = S2. False
/// for NaN, and for an S2 that overflowed (Inf <= Inf must not pass: M2 would be Inf or NaN);
/// then M2 = S2 - shift_part is finite too. T is double (one chunk) or a float vector (a chunk
/// per lane).
template <class T>
SIMDNORM_ALWAYS_INLINE auto one_read_accepted(const T& shift_part, const T& s2) {
  return both(shift_part * T(4.f) <= s2, s2 <= T(FLT_MAX));
}

/// Scale of the scaled pass over squares that overflowed (RMSNorm, L2): a finite float has
/// |x| < 2^128, so (x * 2^-100)^2 < 2^56 and kMomentChunk of them sum far below FLT_MAX; and
/// when the unscaled sum overflowed (>= 2^128) a value that matters at float precision has
/// x^2 >= 2^(128 - 24 - 11), whose scaled square (>= 2^-107) is still a normal float. Powers
/// of two scale exactly.
inline constexpr float kDownScale = 0x1p-100f;
/// Scale of the scaled pass over squares that underflowed (RMSNorm): when the sum of len
/// squares is below len * FLT_MIN <= 2^-115, every |x| < 2^-57, so |x * 2^100| < 2^43 and the
/// scaled squares sum far below FLT_MAX; the smallest subnormal x = 2^-149 gives
/// (x * 2^100)^2 = 2^-98, still a normal float.
inline constexpr float kUpScale = 0x1p100f;

/// sum (x * scale)^2 / scale^2 over x[0, len), summed in float as the plain sum is (four
/// accumulators per lane), scaled back in double: the sum of squares when the unscaled float
/// sum overflows or underflows. Rare, so out of line.
template <class V, class T>
SIMDNORM_COLD double scaled_sum_squares(const T* x, std::size_t len, float scale) {
  constexpr std::size_t W = V::size;
  const V vs(scale);
  V q[4] = {V(0.f), V(0.f), V(0.f), V(0.f)};
  std::size_t i = 0;
  for (; i + 4 * W <= len; i += 4 * W) {
    SIMDNORM_UNROLL
    for (std::size_t k = 0; k < 4; ++k) {
      const V d = io::load<V>(x + i + k * W) * vs;
      q[k] = fma(d, d, q[k]);
    }
  }
  for (; i + W <= len; i += W) {
    const V d = io::load<V>(x + i) * vs;
    q[0] = fma(d, d, q[0]);
  }
  float s = hadd((q[0] + q[1]) + (q[2] + q[3]));
  for (; i < len; ++i) {
    const float d = io::load1(x + i) * scale;
    s += d * d;
  }
  const double back = 1.0 / double(scale);
  return double(s) * back * back;
}

/// Whether a chunk's float sums kept their value: pass A's s1 = sum (x - p) and pass B's
/// q = sum (x - center)^2 are finite (false on overflow, or a NaN / Inf among the values). T
/// is float or a float vector (per lane).
template <class T>
SIMDNORM_ALWAYS_INLINE auto chunk_sums_kept(const T& s1, const T& q) {
  return both(both(s1 <= T(FLT_MAX), s1 >= T(-FLT_MAX)), q <= T(FLT_MAX));
}

/// Mean and M2 of a chunk of len values (value i is at(i)) in double, in two passes: where
/// !chunk_sums_kept, or the squares underflowed under keeps_tiny_m2. Double holds every such
/// sum: |x| < 2^128, so squared deviations stay below 2^258 and their sums far below DBL_MAX,
/// and a nonzero float deviation (>= 2^-149) squares to a normal double. A NaN or Inf among
/// the values gives a non-finite M2, as the float sums would. Rare, so out of line.
template <class At>
SIMDNORM_COLD void chunk_moments_f64(std::size_t len, At at, double& mean, double& m2) {
  double s = 0.0;
  for (std::size_t i = 0; i < len; ++i) s += double(at(i));
  mean = s / double(len);
  double q = 0.0;
  for (std::size_t i = 0; i < len; ++i) {
    const double d = double(at(i)) - mean;
    q += d * d;
  }
  m2 = q;
}

/// A float sum of len squares that lost its value: overflowed (+Inf), or below len * FLT_MIN,
/// where squares flushed to zero or subnormal (absolute error up to 2^-150 each) can exceed
/// the float precision of the sum. False for NaN. T is float or a float vector (then
/// len_min = len * FLT_MIN per lane).
template <class T>
SIMDNORM_ALWAYS_INLINE auto squares_lost(const T& q, const T& len_min) {
  return either(q > T(FLT_MAX), q < len_min);
}

/// M2 of len values from their sum of squares sq around c, off = mean - c (pass B); may round
/// below zero (clamp_m2).
SIMDNORM_ALWAYS_INLINE double m2_around(double sq, double len, double off) {
  return sq - len * off * off;
}

/// M2 rounded below zero is zero; NaN stays NaN.
SIMDNORM_ALWAYS_INLINE double clamp_m2(double m2) { return m2 < 0.0 ? 0.0 : m2; }
template <class V>
SIMDNORM_ALWAYS_INLINE V clamp_m2(const V& m2) {
  return select(m2 < V(0.f), V(0.f), m2);
}

/// Mean and M2 of a chunk of len values from pass A's s = sum (x - p) and pass B's
/// q = sum (x - center)^2.
SIMDNORM_ALWAYS_INLINE void chunk_moments(float p, float s, float center, float q, double len,
                                          double& mean, double& m2) {
  mean = double(p) + double(s) / len;
  m2 = clamp_m2(m2_around(double(q), len, mean - double(center)));
}

/// Float mean of the first min(n, V::size) values, as x[0] + mean(x - x[0]) (exact
/// differences near the mean): the first chunk's shift, of rows and of channel units.
template <class V, class TX>
inline float leading_mean(const TX* x, std::size_t n) {
  constexpr std::size_t W = V::size;
  const float x0 = io::load1(x);
  if (n < W) return x0;
  return x0 + hadd(io::load<V>(x) - V(x0)) * (1.f / float(W));
}

/// Weights of Chan's merge of a part of nb values into a state of na values.
struct chan_weights {
  double mean_w, m2_w;  // nb / (na + nb), na * nb / (na + nb)
  chan_weights(double na, double nb) : mean_w(nb / (na + nb)), m2_w(na * nb / (na + nb)) {}
};

/// Chan's merge of a part (mean_b, m2_b) into the state (mean, m2); the first part is taken
/// as it is. Callers merge parts in a fixed order, so results never depend on threads.
SIMDNORM_ALWAYS_INLINE void merge_moments(bool first, const chan_weights& w, double mean_b,
                                          double m2_b, double& mean, double& m2) {
  if (first) {
    mean = mean_b;
    m2 = m2_b;
    return;
  }
  const double delta = mean_b - mean;
  mean += delta * w.mean_w;
  m2 += m2_b + delta * delta * w.m2_w;
}
