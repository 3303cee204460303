// row_affine: the channel ops' normalize pass (channel/affine-inl.hpp) over rows of `cols`
// dense channels, one (center, scale, shift) per channel, read from L1 (NHWC, [N, C]); x and y
// of element types TX and TY (affine-inl.hpp).
// Preconditions: cols >= 1; y == x with equal strides allowed, otherwise no overlap.

template <class V, bool Center, bool Relu, bool Stream, class TX, class TY>
void row_affine_impl(const row_affine_job& j) {
  const TX* x = static_cast<const TX*>(j.x);
  TY* y = static_cast<TY*>(j.y);
  const float* cen = j.center;
  const float* sc = j.scale;
  const float* sh = j.shift;
  for (std::size_t r = 0; r < j.rows; ++r) {
    map_row<V, Stream>(
        x + std::ptrdiff_t(r) * j.x_stride, y + std::ptrdiff_t(r) * j.y_stride, j.cols,
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
