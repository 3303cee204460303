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
//   merge:     Chan's formula in double (merge_moments): delta = mean_b - mean_a,
//     mean += delta * n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n.
// Numerics: |x - p| small => errors of order eps_f32 * depth * std per chunk; the merge in
//   double adds nothing visible at float precision. A NaN or Inf in the values makes the
//   result non-finite (NaN is never clamped away).

inline constexpr std::size_t kMomentChunk = 2048;

/// The guard of the one-read M2: shift_part = S1^2 / len (len * (mean - p)^2), s2 = S2. False
/// for NaN. T is double (one chunk) or a float vector (a chunk per lane).
template <class T>
SIMDNORM_ALWAYS_INLINE auto one_read_accepted(const T& shift_part, const T& s2) {
  return shift_part * T(4.f) <= s2;
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
