// row_affine: the channel ops' normalize pass (channel/affine-inl.hpp) over rows of `cols`
// dense channels, one (center, scale, shift) per channel, read from L1 (NHWC, [N, C]); x and y
// of element types TX and TY (affine-inl.hpp).
//
// Formula: y[r][c] = (x[r][c] - center[c]) * scale[c] + shift[c], then ReLU (affine-inl.hpp).
// Memory traffic per element: x read once, y written once; the parameters from L1.
// Layouts: a row walked on its own pays per row for its loop, its overlapping last vector and
//   three parameter loads per vector; short rows (C = 64: four vectors) then run at half the
//   copy limit in cache. So:
//   periodic: dense rows (x and y strides equal to cols) are one array whose parameters repeat
//     every lcm(cols, W) floats; when that period is at most kPeriodVectors vectors (C = 64 or
//     128, C = 3, 24, 48, ...) the parameters of one period are held in registers, replicated,
//     and the array is walked in vectors aligned on y, as one stream with no per-row work.
//   row groups: other rows of W to kRowAffineGroupMaxCols floats, kRowAffineGroup rows at a
//     time, each parameter vector loaded once for the group's rows; a partial last vector of a
//     row overlaps the one before it and is loaded before the group's body is stored and
//     stored last, so in-place use stays correct.
//   row by row (map_row): longer rows, whose per-row work is amortized (there the groups'
//     interleaved store streams lost: C = 2048), rows shorter than a vector, and streaming
//     stores.
//   (Measurements: docs/performance.md, "BatchNorm inference on NHWC".)
// Numerics: every element goes through the same operations in every layout (v - c, then
//   one fma, the scalar tails through fma1), so the layout never changes a bit.
// Preconditions: cols >= 1; y == x with equal strides allowed, otherwise no overlap.

/// Dense rows, n elements from channel 0, whose parameters repeat every K vectors (lcm(cols,
/// W) = K * W): one period of parameters, replicated from the channel the aligned body starts
/// at, is held in registers.
template <class V, bool Center, bool Relu, bool Stream, std::size_t K, class TX, class TY>
void periodic_affine(const TX* x, TY* y, std::size_t n, std::size_t cols, const float* cen,
                     const float* sc, const float* sh, float lo) {
  constexpr std::size_t W = V::size, L = K * W;
  const V vlo(lo);
  auto one = [&](float v, std::size_t c) {
    if constexpr (Center) v = v - cen[c];
    v = fma1<V>(v, sc[c], sh[c]);
    if constexpr (Relu) v = relu_max(v, lo);
    return v;
  };
  // scalar head up to y's alignment, so that every vector store is aligned
  const std::size_t head = elements_to_stream_alignment<V>(y, n);
  std::size_t i = 0, c = 0;
  for (; i < head; ++i) {
    io::store1(y + i, one(io::load1(x + i), c));
    if (++c == cols) c = 0;
  }
  // the period from channel c on, replicated
  alignas(64) float pc[Center ? L : 1], pa[L], pb[L];
  for (std::size_t k = 0, ck = c; k < L; ++k) {
    if constexpr (Center) pc[k] = cen[ck];
    pa[k] = sc[ck], pb[k] = sh[ck];
    if (++ck == cols) ck = 0;
  }
  V vc[Center ? K : 1], va[K], vb[K];
  SIMDNORM_UNROLL
  for (std::size_t k = 0; k < K; ++k) {
    if constexpr (Center) vc[k] = load<V>(pc + k * W);
    va[k] = load<V>(pa + k * W), vb[k] = load<V>(pb + k * W);
  }
  auto vec = [&](std::size_t at, std::size_t k) {
    prefetch_ahead<Stream>(x, at);
    V v = io::load<V>(x + at);
    if constexpr (Center) v = v - vc[k];
    v = fma(v, va[k], vb[k]);
    if constexpr (Relu) v = relu_max(v, vlo);
    if constexpr (Stream)
      io::stream(y + at, v);
    else
      io::store(y + at, v);
  };
  // at least 4 vectors per iteration
  constexpr std::size_t P = K >= 4 ? 1 : (4 + K - 1) / K;
  for (; i + P * L <= n; i += P * L) {
    SIMDNORM_UNROLL
    for (std::size_t p = 0; p < P; ++p) {
      SIMDNORM_UNROLL
      for (std::size_t k = 0; k < K; ++k) vec(i + p * L + k * W, k);
    }
  }
  std::size_t k = 0;
  for (; i + W <= n; i += W) {
    vec(i, k);
    if (++k == K) k = 0;
  }
  c = (c + k * W) % cols;
  for (; i < n; ++i) {
    io::store1(y + i, one(io::load1(x + i), c));
    if (++c == cols) c = 0;
  }
}

/// Rows of cols >= W channels, kRowAffineGroup at a time, regular stores: each parameter
/// vector is loaded once for the group's rows.
template <class V, bool Center, bool Relu, class TX, class TY>
void grouped_rows_affine(const row_affine_job& j) {
  const TX* x = static_cast<const TX*>(j.x);
  TY* y = static_cast<TY*>(j.y);
  constexpr std::size_t W = V::size, G = kRowAffineGroup;
  const std::size_t cols = j.cols, last = cols - W;
  const bool partial = cols % W != 0;
  const V vlo(j.relu_floor);
  auto f = [&](V v, std::size_t i) {
    if constexpr (Center) v = v - load<V>(j.center + i);
    v = fma(v, load<V>(j.scale + i), load<V>(j.shift + i));
    if constexpr (Relu) v = relu_max(v, vlo);
    return v;
  };
  std::size_t r = 0;
  for (; r + G <= j.rows; r += G) {
    const TX* xr[G];
    TY* yr[G];
    V tail[G];
    for (std::size_t g = 0; g < G; ++g) {
      xr[g] = x + std::ptrdiff_t(r + g) * j.x_stride;
      yr[g] = y + std::ptrdiff_t(r + g) * j.y_stride;
    }
    if (partial) {
      SIMDNORM_UNROLL
      for (std::size_t g = 0; g < G; ++g) tail[g] = f(io::load<V>(xr[g] + last), last);
    }
    std::size_t i = 0;
    for (; i + W <= cols; i += W) {
      V c, a = load<V>(j.scale + i), b = load<V>(j.shift + i);
      if constexpr (Center) c = load<V>(j.center + i);
      SIMDNORM_UNROLL
      for (std::size_t g = 0; g < G; ++g) {
        V v = io::load<V>(xr[g] + i);
        if constexpr (Center) v = v - c;
        v = fma(v, a, b);
        if constexpr (Relu) v = relu_max(v, vlo);
        io::store(yr[g] + i, v);
      }
    }
    if (partial) {
      SIMDNORM_UNROLL
      for (std::size_t g = 0; g < G; ++g) io::store(yr[g] + last, tail[g]);
    }
  }
  for (; r < j.rows; ++r) {
    const TX* xr = x + std::ptrdiff_t(r) * j.x_stride;
    TY* yr = y + std::ptrdiff_t(r) * j.y_stride;
    const V tail = f(io::load<V>(xr + last), last);
    std::size_t i = 0;
    for (; i + W <= cols; i += W) io::store(yr + i, f(io::load<V>(xr + i), i));
    if (partial) io::store(yr + last, tail);
  }
}

template <class V, bool Center, bool Relu, bool Stream, class TX, class TY, std::size_t... K>
bool periodic_dispatch(const row_affine_job& j, std::size_t k, std::index_sequence<K...>) {
  const std::size_t n = j.rows * j.cols;
  return ((k == K + 1 ? (periodic_affine<V, Center, Relu, Stream, K + 1>(
                             static_cast<const TX*>(j.x), static_cast<TY*>(j.y), n, j.cols,
                             j.center, j.scale, j.shift, j.relu_floor),
                         true)
                      : false) ||
          ...);
}

template <class V, bool Center, bool Relu, bool Stream, class TX, class TY>
void row_affine_impl(const row_affine_job& j) {
  constexpr std::size_t W = V::size;
  const TX* x = static_cast<const TX*>(j.x);
  TY* y = static_cast<TY*>(j.y);
  const float* cen = j.center;
  const float* sc = j.scale;
  const float* sh = j.shift;
  const float lo = j.relu_floor;
  const V vlo(lo);
  if constexpr (W > 1) {
    const bool dense = j.rows == 1 || (j.x_stride == std::ptrdiff_t(j.cols) &&
                                       j.y_stride == std::ptrdiff_t(j.cols));
    // the period in vectors: lcm(cols, W) / W
    std::size_t g = W, a = j.cols;
    while (a != 0) g = std::exchange(a, g % a);  // g = gcd(W, cols)
    const std::size_t k = j.cols / g;
    if (dense && k <= kPeriodVectors &&
        periodic_dispatch<V, Center, Relu, Stream, TX, TY>(
            j, k, std::make_index_sequence<kPeriodVectors>{})) {
      if constexpr (Stream) stream_fence();
      return;
    }
    // short rows in groups; streaming (beyond the caches, bound by DRAM) and long rows go
    // row by row below, which also aligns y for the streaming stores
    if (!Stream && j.cols >= W && j.cols <= kRowAffineGroupMaxCols) {
      grouped_rows_affine<V, Center, Relu, TX, TY>(j);
      return;
    }
  }
  for (std::size_t r = 0; r < j.rows; ++r) {
    map_row<V, Stream>(
        x + std::ptrdiff_t(r) * j.x_stride, y + std::ptrdiff_t(r) * j.y_stride, j.cols,
        [&](V v, std::size_t i) {
          if constexpr (Center) v = v - load<V>(cen + i);
          v = fma(v, load<V>(sc + i), load<V>(sh + i));
          if constexpr (Relu) v = relu_max(v, vlo);
          return v;
        },
        [&](float v, std::size_t i) {
          if constexpr (Center) v = v - cen[i];
          v = fma1<V>(v, sc[i], sh[i]);
          if constexpr (Relu) v = relu_max(v, lo);
          return v;
        });
  }
  if constexpr (Stream) stream_fence();
}

struct row_affine_kernel {
  template <class V, bool Center, bool Relu, bool Stream, class TX, class TY>
  static void run(const row_affine_job& j) {
    row_affine_impl<V, Center, Relu, Stream, TX, TY>(j);
  }
};

template <class V, class TX, class TY>
void row_affine(const row_affine_job& j) {
  dispatch_affine<row_affine_kernel, V, TX, TY>(j);
}
