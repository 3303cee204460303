// channel_affine: the normalize pass of the channel ops (BatchNorm, GroupNorm, InstanceNorm,
// MeanVarianceNormalization), with the statistics already folded per channel or per plane.
//
// Formula: y = (x - center) * scale + shift, then max(0, y) with `relu` (NaN stays NaN).
//   center null: y = x * scale + shift, one FMA per element (BatchNorm inference, whose scale
//   and shift were folded in double at plan creation). With a center (the batch mean rounded
//   to float, its rounding error folded into shift), x - center is exact for x near the mean,
//   so data with a large mean keep the accuracy of their deviations: one sub and one FMA.
// Layouts:
//   plane_affine: a grid of planes, plane (o, i) holding `len` dense floats at
//     x + o * x_outer + i * x_inner, with one (center, scale, shift) per plane at index
//     o * p_outer + i * p_inner (NCHW: o = n, i = c, p = (0, 1); a GroupNorm group: i = c).
//   row_affine: rows of `cols` dense channels, one (center, scale, shift) per channel, read
//     from L1 (NHWC, [N, C]).
// Memory traffic per element: x read once, y written once (8 bytes), parameters from L1.
//   With `stream`, y goes out with non-temporal stores (aligned body, scalar head and tail)
//   and x is prefetched kStreamPrefetch floats ahead. Measured beyond the LLC (256 MiB, Xeon
//   of this machine's family, 1 and 2 threads): streaming stores 0.90-1.03 of the copy limit
//   against 0.57-0.66 with ordinary stores; the prefetch 0.89 against 0.77 (NHWC, 1 thread).
// Short planes: a run of contiguous planes (NCHW inference, a block of 4 channels in
//   training) whose length is not a whole number of vectors is walked as one array in
//   vectors aligned on y, a vector straddling two planes taking each lane's parameters from
//   its own plane (7x7: 0.79 -> 0.97 of copy; unaligned per-plane vectors split cache lines).
//   Otherwise a partial last vector is computed from a full vector ending at the plane's end,
//   loaded before the body is stored and stored last, so in-place use (y == x) stays correct.
//   Planes or rows shorter than a vector run scalar.
// Preconditions: len, cols >= 1; y == x with equal strides allowed, otherwise no overlap.

/// Distance (floats) of the software prefetch in streaming passes: a single core's DRAM read
/// bandwidth is bound by misses in flight, and the hardware prefetchers alone keep too few.
inline constexpr std::size_t kStreamPrefetch = 1024;

/// y[0, n) = f(x[0, n)) for a unary vector/scalar pair, with the overlapping partial last
/// vector described in the banner, or streaming stores. Inlined into the plane and row loops:
/// a 7x7 plane is 4 vectors, so a call per plane would cost as much as the plane.
template <class V, bool Stream, class FV, class F1>
SIMDNORM_ALWAYS_INLINE void map_row(const float* x, float* y, std::size_t n, FV fv, F1 f1) {
  constexpr std::size_t W = V::size;
  if constexpr (Stream) {  // large data: also prefetch x a few KiB ahead, as memcpy does
    store_row<V, true>(y, n,
                       [&](std::size_t i) {
                         if (i % 16 == 0) __builtin_prefetch(x + i + kStreamPrefetch, 0, 3);
                         return fv(load<V>(x + i), i);
                       },
                       [&](std::size_t i) { return f1(x[i], i); });
    return;
  }
  if (n < W) {
    for (std::size_t i = 0; i < n; ++i) y[i] = f1(x[i], i);
    return;
  }
  const std::size_t last = n - W;
  const V tail = fv(load<V>(x + last), last);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const V r0 = fv(load<V>(x + i), i), r1 = fv(load<V>(x + i + W), i + W);
    const V r2 = fv(load<V>(x + i + 2 * W), i + 2 * W), r3 = fv(load<V>(x + i + 3 * W), i + 3 * W);
    r0.store_unaligned(y + i);
    r1.store_unaligned(y + i + W);
    r2.store_unaligned(y + i + 2 * W);
    r3.store_unaligned(y + i + 3 * W);
  }
  for (; i + W <= n; i += W) fv(load<V>(x + i), i).store_unaligned(y + i);
  if (i < n) tail.store_unaligned(y + last);
}

/// Lanes at and after `first` set.
template <class V>
inline auto lanes_from(std::size_t first) {
  alignas(64) static constexpr float kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return load<V>(kIota) >= V(float(first));
}

/// `count` contiguous planes of `len` >= W floats (plane i at x + i * len, its parameters at
/// index i * ps), walked as one array in vectors aligned on y: no load or store splits a cache
/// line, and a vector straddling two planes takes each lane's parameters from its own plane.
template <class V, bool Center, bool Relu, bool Stream, class F1>
void flat_planes_affine(const float* x, float* y, std::size_t count, std::size_t len,
                        const plane_affine_job& j, const float* cen, const float* sc,
                        const float* sh, F1 f1) {
  constexpr std::size_t W = V::size;
  const std::size_t n = count * len, ps = std::size_t(j.p_inner);
  std::size_t i = 0, p = 0, next = len;  // plane p covers [next - len, next)
  for (const std::size_t head = elements_to_stream_alignment<V>(y, n); i < head; ++i) {
    if (i == next) ++p, next += len;
    y[i] = f1(x[i], p * ps);
  }
  V vc(Center ? cen[p * ps] : 0.f), va(sc[p * ps]), vb(sh[p * ps]);
  for (; i + W <= n; i += W) {
    if (i >= next) {
      ++p, next += len;
      if constexpr (Center) vc = V(cen[p * ps]);
      va = V(sc[p * ps]), vb = V(sh[p * ps]);
    }
    V c = vc, a = va, b = vb;
    if (i + W > next) {  // lanes [next - i, W) are plane p + 1's
      const auto m = lanes_from<V>(next - i);
      const std::size_t q = (p + 1) * ps;
      if constexpr (Center) c = select(m, V(cen[q]), c);
      a = select(m, V(sc[q]), a);
      b = select(m, V(sh[q]), b);
    }
    V v = load<V>(x + i);
    if constexpr (Center) v = v - c;
    v = fma(v, a, b);
    if constexpr (Relu) v = relu_max(v);
    if constexpr (Stream) store_stream<V>(y + i, v);
    else v.store_unaligned(y + i);
  }
  for (; i < n; ++i) {
    if (i >= next) ++p, next += len;
    y[i] = f1(x[i], p * ps);
  }
}

template <class V, bool Center, bool Relu, bool Stream>
void plane_affine_impl(const plane_affine_job& j) {
  constexpr std::size_t W = V::size;
  // Runs of contiguous planes not a whole number of vectors long: one aligned walk per run.
  if constexpr (W > 1) {
  if (j.inner > 1 && j.len >= W && j.len % W != 0 && j.x_inner == std::ptrdiff_t(j.len) &&
      j.y_inner == std::ptrdiff_t(j.len)) {
    for (std::size_t o = 0; o < j.outer; ++o) {
      const std::ptrdiff_t po = std::ptrdiff_t(o) * j.p_outer;
      const float* cen = Center ? j.center + po : nullptr;
      const float* sc = j.scale + po;
      const float* sh = j.shift + po;
      flat_planes_affine<V, Center, Relu, Stream>(
          j.x + std::ptrdiff_t(o) * j.x_outer, j.y + std::ptrdiff_t(o) * j.y_outer, j.inner,
          j.len, j, cen, sc, sh, [&](float v, std::size_t k) {
            if constexpr (Center) v = v - cen[k];
            v = fma1<V>(v, sc[k], sh[k]);
            if constexpr (Relu) v = relu_max(v);
            return v;
          });
    }
    if constexpr (Stream) stream_fence();
    return;
  }
  }
  for (std::size_t o = 0; o < j.outer; ++o) {
    for (std::size_t i = 0; i < j.inner; ++i) {
      const std::ptrdiff_t pi = std::ptrdiff_t(o) * j.p_outer + std::ptrdiff_t(i) * j.p_inner;
      const float c = Center ? j.center[pi] : 0.f, a = j.scale[pi], b = j.shift[pi];
      const V vc(c), va(a), vb(b);
      map_row<V, Stream>(
          j.x + std::ptrdiff_t(o) * j.x_outer + std::ptrdiff_t(i) * j.x_inner,
          j.y + std::ptrdiff_t(o) * j.y_outer + std::ptrdiff_t(i) * j.y_inner, j.len,
          [&](V v, std::size_t) {
            if constexpr (Center) v = v - vc;
            v = fma(v, va, vb);
            if constexpr (Relu) v = relu_max(v);
            return v;
          },
          [&](float v, std::size_t) {
            if constexpr (Center) v = v - c;
            v = fma1<V>(v, a, b);  // rounds as fma(V) does
            if constexpr (Relu) v = relu_max(v);
            return v;
          });
    }
  }
  if constexpr (Stream) stream_fence();
}

template <class V, bool Center, bool Relu, bool Stream>
void row_affine_impl(const row_affine_job& j) {
  const float* cen = j.center;
  const float* sc = j.scale;
  const float* sh = j.shift;
  for (std::size_t r = 0; r < j.rows; ++r) {
    map_row<V, Stream>(
        j.x + std::ptrdiff_t(r) * j.x_stride, j.y + std::ptrdiff_t(r) * j.y_stride, j.cols,
        [&](V v, std::size_t i) {
          if constexpr (Center) v = v - load<V>(cen + i);
          v = fma(v, load<V>(sc + i), load<V>(sh + i));
          if constexpr (Relu) v = relu_max(v);
          return v;
        },
        [&](float v, std::size_t i) {
          if constexpr (Center) v = v - cen[i];
          v = fma1<V>(v, sc[i], sh[i]);
          if constexpr (Relu) v = relu_max(v);
          return v;
        });
  }
  if constexpr (Stream) stream_fence();
}

// Run-time flags to template instances: K::run<V, Center, Relu, Stream>(job).
template <class K, class V, bool Center, bool Relu, class Job>
void dispatch_stream(const Job& j) {
  if (j.stream) K::template run<V, Center, Relu, true>(j);
  else K::template run<V, Center, Relu, false>(j);
}

template <class K, class V, class Job>
void dispatch_affine(const Job& j) {
  if (j.center && j.relu) dispatch_stream<K, V, true, true>(j);
  else if (j.center) dispatch_stream<K, V, true, false>(j);
  else if (j.relu) dispatch_stream<K, V, false, true>(j);
  else dispatch_stream<K, V, false, false>(j);
}

struct plane_affine_kernel {
  template <class V, bool Center, bool Relu, bool Stream>
  static void run(const plane_affine_job& j) { plane_affine_impl<V, Center, Relu, Stream>(j); }
};
struct row_affine_kernel {
  template <class V, bool Center, bool Relu, bool Stream>
  static void run(const row_affine_job& j) { row_affine_impl<V, Center, Relu, Stream>(j); }
};

template <class V>
void plane_affine(const plane_affine_job& j) { dispatch_affine<plane_affine_kernel, V>(j); }

template <class V>
void row_affine(const row_affine_job& j) { dispatch_affine<row_affine_kernel, V>(j); }
