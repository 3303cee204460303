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
//   With `stream`, y goes out with non-temporal stores (aligned body, scalar head and tail).
// Short planes and rows: a partial last vector is computed from a full vector ending at the
//   plane's end, loaded before the body is stored, and stored last; so 7x7 planes take 4
//   vector stores (16 lanes) and in-place use (y == x) stays correct. Planes or rows shorter
//   than a vector run scalar.
// Preconditions: len, cols >= 1; y == x with equal strides allowed, otherwise no overlap.

inline float relu_max(float v) { return v < 0.f ? 0.f : v; }
inline scalar_vector relu_max(scalar_vector v) { return relu_max(v.v); }
template <class V>
inline V relu_max(const V& v) { return select(v < V(0.f), V(0.f), v); }  // NaN stays NaN

/// y[0, n) = f(x[0, n)) for a unary vector/scalar pair, with the overlapping partial last
/// vector described in the banner, or streaming stores.
template <class V, bool Stream, class FV, class F1>
inline void map_row(const float* x, float* y, std::size_t n, FV fv, F1 f1) {
  constexpr std::size_t W = V::size;
  if constexpr (Stream) {
    store_row<V, true>(y, n, [&](std::size_t i) { return fv(load<V>(x + i), i); },
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

template <class V, bool Center, bool Relu, bool Stream>
void plane_affine_impl(const plane_affine_job& j) {
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
            v = v * a + b;  // contracted to an FMA where the ISA has one, as fma(V) is
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
          v = v * sc[i] + sh[i];
          if constexpr (Relu) v = relu_max(v);
          return v;
        });
  }
  if constexpr (Stream) stream_fence();
}

// Run-time flags to template instances.
template <class V, bool Center, bool Relu>
void plane_affine_relu(const plane_affine_job& j) {
  if (j.stream) plane_affine_impl<V, Center, Relu, true>(j);
  else plane_affine_impl<V, Center, Relu, false>(j);
}

template <class V, bool Center>
void plane_affine_center(const plane_affine_job& j) {
  if (j.relu) plane_affine_relu<V, Center, true>(j);
  else plane_affine_relu<V, Center, false>(j);
}

template <class V>
void plane_affine(const plane_affine_job& j) {
  if (j.center) plane_affine_center<V, true>(j);
  else plane_affine_center<V, false>(j);
}

template <class V, bool Center, bool Relu>
void row_affine_relu(const row_affine_job& j) {
  if (j.stream) row_affine_impl<V, Center, Relu, true>(j);
  else row_affine_impl<V, Center, Relu, false>(j);
}

template <class V, bool Center>
void row_affine_center(const row_affine_job& j) {
  if (j.relu) row_affine_relu<V, Center, true>(j);
  else row_affine_relu<V, Center, false>(j);
}

template <class V>
void row_affine(const row_affine_job& j) {
  if (j.center) row_affine_center<V, true>(j);
  else row_affine_center<V, false>(j);
}
