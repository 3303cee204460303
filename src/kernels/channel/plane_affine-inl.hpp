// plane_affine: the channel ops' normalize pass (channel/affine-inl.hpp) over a grid of planes,
// plane (o, i) holding `len` dense elements at x + o * x_outer + i * x_inner, with one
// (center, scale, shift) per plane at index o * p_outer + i * p_inner (NCHW: o = n, i = c,
// p = (0, 1); a GroupNorm group: i = c). x and y of element types TX and TY (affine-inl.hpp).
//
// Short planes: a run of contiguous planes (NCHW inference, a block of 4 channels in training)
//   whose length is not a whole number of vectors is walked as one array in vectors aligned on
//   y, a vector straddling two planes taking each lane's parameters from its own plane
//   (per-plane vectors, unaligned, would split cache lines; docs/performance.md has the 7x7
//   measurement). Other planes go through map_row.
// Preconditions: len >= 1; y == x with equal strides allowed, otherwise no overlap.

/// `count` contiguous planes of `len` >= W elements (plane i at x + i * len, its parameters at
/// index i * ps), walked as one array in vectors aligned on y: no load or store splits a cache
/// line, and a vector straddling two planes takes each lane's parameters from its own plane.
template <class V, bool Center, bool Relu, bool Stream, class TX, class TY, class F1>
void flat_planes_affine(const TX* x, TY* y, std::size_t count, std::size_t len,
                        const plane_affine_job& j, const float* cen, const float* sc,
                        const float* sh, F1 f1) {
  constexpr std::size_t W = V::size;
  const std::size_t n = count * len, ps = std::size_t(j.p_inner);
  std::size_t i = 0, p = 0, next = len;  // plane p covers [next - len, next)
  for (const std::size_t head = elements_to_stream_alignment<V>(y, n); i < head; ++i) {
    if (i == next) ++p, next += len;
    io::store1(y + i, f1(io::load1(x + i), p * ps));
  }
  V vc(Center ? cen[p * ps] : 0.f), va(sc[p * ps]), vb(sh[p * ps]);
  const V vlo(j.relu_floor);
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
    prefetch_ahead<Stream>(x, i);
    V v = io::load<V>(x + i);
    if constexpr (Center) v = v - c;
    v = fma(v, a, b);
    if constexpr (Relu) v = relu_max(v, vlo);
    if constexpr (Stream)
      io::stream(y + i, v);
    else
      io::store(y + i, v);
  }
  for (; i < n; ++i) {
    if (i >= next) ++p, next += len;
    io::store1(y + i, f1(io::load1(x + i), p * ps));
  }
}

template <class V, bool Center, bool Relu, bool Stream, class TX, class TY>
void plane_affine_impl(const plane_affine_job& j) {
  constexpr std::size_t W = V::size;
  const TX* x = static_cast<const TX*>(j.x);
  TY* y = static_cast<TY*>(j.y);
  const float lo = j.relu_floor;
  const V vlo(lo);
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
            x + std::ptrdiff_t(o) * j.x_outer, y + std::ptrdiff_t(o) * j.y_outer, j.inner, j.len, j,
            cen, sc, sh, [&](float v, std::size_t k) {
              if constexpr (Center) v = v - cen[k];
              v = fma1<V>(v, sc[k], sh[k]);
              if constexpr (Relu) v = relu_max(v, lo);
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
          x + std::ptrdiff_t(o) * j.x_outer + std::ptrdiff_t(i) * j.x_inner,
          y + std::ptrdiff_t(o) * j.y_outer + std::ptrdiff_t(i) * j.y_inner, j.len,
          [&](V v, std::size_t) {
            if constexpr (Center) v = v - vc;
            v = fma(v, va, vb);
            if constexpr (Relu) v = relu_max(v, vlo);
            return v;
          },
          [&](float v, std::size_t) {
            if constexpr (Center) v = v - c;
            v = fma1<V>(v, a, b);  // rounds as fma(V) does
            if constexpr (Relu) v = relu_max(v, lo);
            return v;
          });
    }
  }
  if constexpr (Stream) stream_fence();
}

struct plane_affine_kernel {
  template <class V, bool Center, bool Relu, bool Stream, class TX, class TY>
  static void run(const plane_affine_job& j) {
    plane_affine_impl<V, Center, Relu, Stream, TX, TY>(j);
  }
};

template <class V, class TX, class TY>
void plane_affine(const plane_affine_job& j) {
  dispatch_affine<plane_affine_kernel, V, TX, TY>(j);
}
