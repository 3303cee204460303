// The normalize pass of the channel ops (BatchNorm, GroupNorm, InstanceNorm,
// MeanVarianceNormalization), with the statistics already folded per channel or per plane:
// what plane_affine and row_affine share.
//
// Formula: y = (x - center) * scale + shift, then max(relu_floor, y) with `relu` (NaN stays
//   NaN): relu_floor is 0, or for an 8-bit y its zero point, since the plan folds 1 / qscale
//   and the zero point into scale and shift, and max(y, 0) / qscale + zp = max(y / qscale + zp,
//   zp).
//   center null: y = x * scale + shift, one FMA per element (BatchNorm inference, whose scale
//   and shift were folded in double at plan creation). With a center (the batch mean rounded
//   to float, its rounding error folded into shift), x - center is exact for x near the mean,
//   so data with a large mean keep the accuracy of their deviations: one sub and one FMA.
// Element types: x and y are float, bf16_t or f16_t (any pair), read and written only through
//   io (common/io-inl.hpp); the arithmetic is f32 whatever they are, so a 16-bit x gives the
//   bits of the f32 tensor holding the same values, rounded once into y's type.
// Memory traffic per element: x read once, y written once (8 bytes in f32, 4 in bf16 / f16),
//   parameters from L1. With `stream` (f32 y beyond the last-level cache), y goes out with
//   non-temporal stores (aligned body, scalar head and tail) and x is prefetched
//   kStreamPrefetch floats' worth of bytes ahead: both are needed to approach the copy limit.
//   A 16-bit y is stored regularly without the prefetch, which gained nothing there
//   (docs/performance.md).
// Partial vectors: a partial last vector is computed from a full vector ending at the row's
//   end, loaded before the body is stored and stored last, so in-place use (y == x) stays
//   correct. Rows shorter than a vector run scalar.
// Preconditions: n >= 1; y == x with equal strides allowed, otherwise no overlap.

/// max(floor, v) with NaN kept (the fused ReLU; floor: the job's relu_floor).
inline float relu_max(float v, float floor) { return v < floor ? floor : v; }
inline scalar_vector relu_max(scalar_vector v, scalar_vector floor) {
  return relu_max(v.v, floor.v);
}
template <class V>
inline V relu_max(const V& v, const V& floor) {
  return select(v < floor, floor, v);
}

/// The streaming passes' software prefetch of x, once per cache line of x walked (i: the
/// element about to be loaded): the hardware prefetchers alone keep too few misses in flight
/// for one core to read DRAM at its copy rate. A prefetch past the end of x never faults.
template <bool Stream, class TX>
SIMDNORM_ALWAYS_INLINE void prefetch_ahead(const TX* x, std::size_t i) {
  if constexpr (Stream) {
    constexpr std::size_t ahead = kStreamPrefetch * sizeof(float) / sizeof(TX);
    if (i % line_elements<TX>() == 0) __builtin_prefetch(x + i + ahead, 0, 3);
  }
}

/// y[0, n) = f(x[0, n)) for a unary vector/scalar pair, with the overlapping partial last
/// vector described in the banner, or streaming stores. Inlined into the plane and row loops:
/// a 7x7 plane is 4 vectors, so a call per plane would cost as much as the plane.
template <class V, bool Stream, class TX, class TY, class FV, class F1>
SIMDNORM_ALWAYS_INLINE void map_row(const TX* x, TY* y, std::size_t n, FV fv, F1 f1) {
  constexpr std::size_t W = V::size;
  if constexpr (Stream) {
    store_row<V, true>(
        y, n,
        [&](std::size_t i) {
          prefetch_ahead<true>(x, i);
          return fv(io::load<V>(x + i), i);
        },
        [&](std::size_t i) { return f1(io::load1(x + i), i); });
    return;
  }
  if (n < W) {
    for (std::size_t i = 0; i < n; ++i) io::store1(y + i, f1(io::load1(x + i), i));
    return;
  }
  const std::size_t last = n - W;
  const V tail = fv(io::load<V>(x + last), last);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const V r0 = fv(io::load<V>(x + i), i), r1 = fv(io::load<V>(x + i + W), i + W);
    const V r2 = fv(io::load<V>(x + i + 2 * W), i + 2 * W);
    const V r3 = fv(io::load<V>(x + i + 3 * W), i + 3 * W);
    io::store(y + i, r0);
    io::store(y + i + W, r1);
    io::store(y + i + 2 * W, r2);
    io::store(y + i + 3 * W, r3);
  }
  for (; i + W <= n; i += W) io::store(y + i, fv(io::load<V>(x + i), i));
  if (i < n) io::store(y + last, tail);
}

/// Run-time flags to template instances: K::run<V, Center, Relu, Stream, TX, TY>(job). Only
/// f32 y has streaming instances (the plans stream f32 y only).
template <class K, class V, bool Center, bool Relu, class TX, class TY, class Job>
void dispatch_stream(const Job& j) {
  if constexpr (std::is_same_v<TY, float>) {
    if (j.stream) {
      K::template run<V, Center, Relu, true, TX, TY>(j);
      return;
    }
  }
  K::template run<V, Center, Relu, false, TX, TY>(j);
}

template <class K, class V, class TX, class TY, class Job>
void dispatch_affine(const Job& j) {
  if (j.center && j.relu)
    dispatch_stream<K, V, true, true, TX, TY>(j);
  else if (j.center)
    dispatch_stream<K, V, true, false, TX, TY>(j);
  else if (j.relu)
    dispatch_stream<K, V, false, true, TX, TY>(j);
  else
    dispatch_stream<K, V, false, false, TX, TY>(j);
}
