// column_moments: the statistics of each of `cols` dense channels over `rows` strided rows
// (NHWC, [N, C]) for the channel ops.
//
// Formula: common/moments-inl.hpp in two passes per chunk, as segment_moments: pass A sums
//   (x - p) with p the channel's first value, pass B sums (x - center)^2 from L1 (the tile,
//   below); a lane whose float sums overflow, or (with tiny_m2) whose squares underflow, is
//   computed again in double.
// Layout: SIMD lanes are channels, accumulated vertically (no horizontal reduction); a block
//   of up to 4 vectors of channels is walked down kColumnChunkRows rows per chunk. Pass A
//   keeps what it reads in a contiguous tile that pass B reads: in x, a row stride of a power
//   of two (C = 512, 2048) puts every row's lines of the block in the same few L1 sets, which
//   cannot hold a chunk. The chunks of each channel are merged per lane, in double, in
//   a loop over a fixed block of lanes that the compiler vectorizes (the scalar merge, ~20
//   double operations per lane per chunk, was this pass's bottleneck). A last partial vector
//   of channels overlaps the previous one (its lanes compute the same channels' values again,
//   bit for bit); fewer channels than lanes run the one-lane kernel.
// Memory traffic per element: NHWC reads x twice from memory (this pass, then the normalize
//   pass): every channel spans the whole tensor, so no block of channels can be finished while
//   it is still in cache. The statistics pass is read-only, so the traffic is 12 bytes per
//   element instead of 8; the next chunk is prefetched during pass B, as in segment_moments.
// Element types: x is float, bf16_t or f16_t, read through io (exact); rows and chunks are
//   counted in elements, so a 16-bit x gives the moments of the f32 tensor holding the same
//   values, bit for bit.
// Preconditions: rows, cols >= 1; no alignment.
// Numerics: as the rows; each lane sums at most kColumnChunkRows terms in float before the
//   double merge. Results depend only on the shape and the ISA, never on threads.

/// The chunk step of column_block (n rows from base) where some lane's float sums s, q lost
/// their value: those lanes' moments computed again in double (common/moments-inl.hpp), the
/// others as usual, then all B lanes merged into mean, m2. Rare, so out of line, which keeps
/// the common step one loop.
template <class V, std::size_t NV, class TX>
SIMDNORM_COLD void column_chunk_f64(const TX* base, std::ptrdiff_t row_stride, std::size_t n,
                                    const std::size_t (&off)[4], const float* p, const float* s,
                                    const float* center, const float* q, float len_min,
                                    const chan_weights& w, bool first, double* mean, double* m2) {
  constexpr std::size_t W = V::size;
  for (std::size_t l = 0; l < 4 * W; ++l) {
    double cm, cm2;
    if (l < NV * W && !(chunk_sums_kept(s[l], q[l]) && !(q[l] < len_min))) {
      const TX* c = base + off[l / W] + l % W;
      chunk_moments_f64(
          n, [=](std::size_t r) { return io::load1(c + std::ptrdiff_t(r) * row_stride); }, cm, cm2);
    } else {
      chunk_moments(p[l], s[l], center[l], q[l], double(n), cm, cm2);
    }
    merge_moments(first, w, cm, cm2, mean[l], m2[l]);
  }
}

/// One block of NV vectors of channels at offsets off[0..NV) (a compile-time count, so that
/// the accumulators stay in registers: with a run-time count they lived on the stack, and
/// every add waited for the store of the one before), walked down all rows chunk by chunk.
template <class V, class TX, std::size_t NV>
void column_block(const TX* x, std::ptrdiff_t row_stride, std::size_t rows,
                  const std::size_t (&off)[4], bool tiny_m2, moments_f64* out) {
  constexpr std::size_t W = V::size, B = 4 * W;
  // Lanes past NV vectors stay zero: the per-lane merge below runs over all B lanes (a fixed
  // count, so the compiler vectorizes it) and ignores them.
  alignas(64) float p[B] = {}, s[B] = {}, center[B] = {}, q[B] = {};
  alignas(64) double mean[B], m2[B];
  // The chunk as pass A read it (as float), for pass B: 16 KiB on AVX-512, contiguous, so
  // that L1 holds it whatever the row stride.
  alignas(64) float tile[kColumnChunkRows * NV * W];
  V vp[NV];
  SIMDNORM_UNROLL
  for (std::size_t j = 0; j < NV; ++j) {
    vp[j] = io::load<V>(x + off[j]);
    vp[j].store_unaligned(p + j * W);
  }
  for (std::size_t r0 = 0; r0 < rows; r0 += kColumnChunkRows) {
    const std::size_t r1 = rows - r0 < kColumnChunkRows ? rows : r0 + kColumnChunkRows;
    const TX* base = x + std::ptrdiff_t(r0) * row_stride;
    const std::size_t n = r1 - r0;
    // Pass A: per-lane sums of (x - p); two accumulators per vector (even and odd rows).
    // Each vector read is also kept in the tile for pass B.
    V a[NV][2];
    SIMDNORM_UNROLL
    for (std::size_t j = 0; j < NV; ++j) a[j][0] = a[j][1] = V(0.f);
    std::size_t r = 0;
    for (; r + 2 <= n; r += 2) {
      const TX* x0 = base + std::ptrdiff_t(r) * row_stride;
      const TX* x1 = x0 + row_stride;
      float* t0 = tile + r * NV * W;
      SIMDNORM_UNROLL
      for (std::size_t j = 0; j < NV; ++j) {
        const V v0 = io::load<V>(x0 + off[j]), v1 = io::load<V>(x1 + off[j]);
        v0.store_unaligned(t0 + j * W);
        v1.store_unaligned(t0 + (NV + j) * W);
        a[j][0] += v0 - vp[j];
        a[j][1] += v1 - vp[j];
      }
    }
    if (r < n) {
      SIMDNORM_UNROLL
      for (std::size_t j = 0; j < NV; ++j) {
        const V v = io::load<V>(base + std::ptrdiff_t(r) * row_stride + off[j]);
        v.store_unaligned(tile + (r * NV + j) * W);
        a[j][0] += v - vp[j];
      }
    }
    const V inv_n(float(1.0 / double(n)));
    V vc[NV];
    SIMDNORM_UNROLL
    for (std::size_t j = 0; j < NV; ++j) {
      const V sj = a[j][0] + a[j][1];
      sj.store_unaligned(s + j * W);
      vc[j] = fma(sj, inv_n, vp[j]);
      vc[j].store_unaligned(center + j * W);
    }
    // Pass B: per-lane sums of (x - center)^2, from L1; meanwhile the next chunk of this
    // block is requested into L2, one line per vector loaded (as segment_moments).
    const TX* nx = base + std::ptrdiff_t(n) * row_stride;
    std::size_t n_pf = r1 + kColumnChunkRows <= rows ? kColumnChunkRows : rows - r1;
    std::size_t jp = 0;
    auto prefetch_next = [&] {
      if (n_pf == 0) return;
      __builtin_prefetch(nx + off[jp], 0, 2);
      if (++jp == NV) jp = 0, nx += row_stride, --n_pf;
    };
    SIMDNORM_UNROLL
    for (std::size_t j = 0; j < NV; ++j) a[j][0] = a[j][1] = V(0.f);
    for (r = 0; r + 2 <= n; r += 2) {
      const float* t0 = tile + r * NV * W;
      SIMDNORM_UNROLL
      for (std::size_t j = 0; j < NV; ++j) {
        prefetch_next();
        prefetch_next();
        const V d0 = V::load_unaligned(t0 + j * W) - vc[j];
        const V d1 = V::load_unaligned(t0 + (NV + j) * W) - vc[j];
        a[j][0] = fma(d0, d0, a[j][0]);
        a[j][1] = fma(d1, d1, a[j][1]);
      }
    }
    if (r < n) {
      SIMDNORM_UNROLL
      for (std::size_t j = 0; j < NV; ++j) {
        const V d = V::load_unaligned(tile + (r * NV + j) * W) - vc[j];
        a[j][0] = fma(d, d, a[j][0]);
      }
    }
    SIMDNORM_UNROLL
    for (std::size_t j = 0; j < NV; ++j) (a[j][0] + a[j][1]).store_unaligned(q + j * W);
    // Per lane, in double: the chunk's moments merged into the channel's, over all B lanes
    // so that the loop vectorizes; out of line where a lane's float sums lost their value.
    const chan_weights w{double(r0), double(n)};
    const float len_min = tiny_m2 ? float(n) * FLT_MIN : 0.f;  // keeps_tiny_m2
    // s * 0 + q is NaN where s is not finite and Inf where q overflowed: one test for both.
    bool kept = true;
    SIMDNORM_UNROLL
    for (std::size_t j = 0; j < NV; ++j) {
      const V qj = V::load_unaligned(q + j * W);
      kept &= all(fma(V::load_unaligned(s + j * W), V(0.f), qj) <= V(FLT_MAX));
      if (tiny_m2) kept &= all(qj >= V(len_min));
    }
    if (__builtin_expect(!kept, 0)) {
      column_chunk_f64<V, NV>(base, row_stride, n, off, p, s, center, q, len_min, w, r0 == 0, mean,
                              m2);
      continue;
    }
    for (std::size_t l = 0; l < B; ++l) {
      double cm, cm2;
      chunk_moments(p[l], s[l], center[l], q[l], double(n), cm, cm2);
      merge_moments(r0 == 0, w, cm, cm2, mean[l], m2[l]);
    }
  }
  for (std::size_t j = 0; j < NV; ++j)
    for (std::size_t l = 0; l < W; ++l) out[off[j] + l] = {mean[j * W + l], m2[j * W + l]};
}

template <class V, class TX>
void column_moments(const void* x_in, std::ptrdiff_t row_stride, std::size_t rows, std::size_t cols,
                    bool tiny_m2, moments_f64* out) {
  constexpr std::size_t W = V::size;
  if constexpr (W > 1) {
    if (cols < W) {
      column_moments<scalar_vector, TX>(x_in, row_stride, rows, cols, tiny_m2, out);
      return;
    }
  }
  const TX* x = static_cast<const TX*>(x_in);
  constexpr std::size_t B = 4 * W;  // channels per block
  for (std::size_t c0 = 0; c0 < cols; c0 += B) {
    const std::size_t nv = (cols - c0 >= B) ? 4 : (cols - c0 + W - 1) / W;
    std::size_t off[4];
    for (std::size_t j = 0; j < 4; ++j) {
      const std::size_t o = c0 + j * W;
      off[j] = j < nv ? (o + W <= cols ? o : cols - W) : off[0];
    }
    switch (nv) {
      case 4: column_block<V, TX, 4>(x, row_stride, rows, off, tiny_m2, out); break;
      case 3: column_block<V, TX, 3>(x, row_stride, rows, off, tiny_m2, out); break;
      case 2: column_block<V, TX, 2>(x, row_stride, rows, off, tiny_m2, out); break;
      default: column_block<V, TX, 1>(x, row_stride, rows, off, tiny_m2, out); break;
    }
  }
}
