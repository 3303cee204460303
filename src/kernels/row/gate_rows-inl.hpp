// gate_rows: Mamba-2's gate before the norm (rms_norm_params::gate_before_norm).
//
// Formula: h = x * silu(z), silu(z) = z / (1 + exp(-z)), in f32 and rounded once into h's type.
//   The RMSNorm kernel then normalizes h as stored: y = rms_norm(h) * gamma.
// Layout: `rows` rows of `cols` dense elements; x and z (x's type) at + k * x_stride, h (y's
//   type: the plan stores h in y) at + k * h_stride. h may be x or z (same layout): each element
//   is read before it is written.
// Traffic per element: reads x and z, writes h; the plan runs it on one task's rows just before
//   the norm reads them back from cache, as the residual add (add_rows).
// Numerics: the same vector operations in the body and the tail (the tail on broadcast lanes),
//   so an element's bits do not depend on its position in the row.
template <class V, class TX, class TH>
void gate_rows(const gate_rows_job& job) {
  constexpr std::size_t W = V::size;
  for (std::size_t k = 0; k < job.rows; ++k) {
    const TX* x = static_cast<const TX*>(job.x) + std::ptrdiff_t(k) * job.x_stride;
    const TX* z = static_cast<const TX*>(job.z) + std::ptrdiff_t(k) * job.x_stride;
    TH* h = static_cast<TH*>(job.h) + std::ptrdiff_t(k) * job.h_stride;
    std::size_t i = 0;
    for (; i + W <= job.cols; i += W)
      io::store(h + i, io::template load<V>(x + i) * silu(io::template load<V>(z + i)));
    for (; i < job.cols; ++i)
      io::store1(h + i, lane0(V(io::load1(x + i)) * silu(V(io::load1(z + i)))));
  }
}
