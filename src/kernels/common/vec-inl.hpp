// Vector helpers shared by all kernels: lane masks, lane sums, fused scalar steps, row tails.
// Included after common/io-inl.hpp (the load / store edge).

/// v - p, rounded once, as v * 1 - p on the FMA unit where there is one: the statistics pass
/// issues one subtraction and one addition per vector, and on Zen 4 512-bit adds and FMAs go
/// to different pipes (one of each per cycle), so moving the subtraction over halves that
/// pass's add-pipe load. v * 1 is exact, so the result is the same bits as v - p.
template <class V>
inline V shift_sub(const V& v, const V& p) {
#if defined(__FMA__) || defined(__AVX512F__) || defined(__aarch64__)
  return fms(v, V(1.f), p);
#else
  return v - p;
#endif
}

/// Scalar fma / fms that round exactly as one lane of V's fma / fms: fused on ISAs with an FMA
/// unit, two roundings on SSE2/SSE4.2. Scalar heads and tails use them so that an element's
/// value does not depend on whether it fell in a vector or in a tail (streaming stores, padded
/// rows, NCHW vs NHWC). The ISA objects are compiled with -ffp-contract=off, so plain + - *
/// are single IEEE operations in both paths and only these are fused.
template <class V>
inline float fma1(float a, float b, float c) {
  alignas(64) float t[V::size];
  fma(V(a), V(b), V(c)).store_unaligned(t);
  return t[0];
}
template <class V>
inline float fms1(float a, float b, float c) {
  alignas(64) float t[V::size];
  fms(V(a), V(b), V(c)).store_unaligned(t);
  return t[0];
}

/// Lane r of the result is the horizontal sum of rows[r], for r < V::size: one
/// transpose-and-add for all rows (xsimd's haddp, or the ISA's lane tree).
template <class V>
SIMDNORM_ALWAYS_INLINE V lane_sums(const V* rows) {
  if constexpr (isa_hooks<V>::lane_tree)
    return isa_hooks<V>::lane_sums(rows);
  else
    return haddp(rows);
}

/// Regroups the halves of two vectors: lo = [a's low half | b's low half], hi = [a's high half
/// | b's high half]. For V::size >= 2.
template <class V>
inline void split_halves(const V& a, const V& b, V& lo, V& hi) {
  constexpr std::size_t W = V::size, H = W / 2;
  if constexpr (isa_hooks<V>::lane_tree) {
    isa_hooks<V>::split_halves(a, b, lo, hi);
  } else {
    alignas(64) float ta[W], tb[W], tl[W], th[W];
    a.store_unaligned(ta);
    b.store_unaligned(tb);
    for (std::size_t j = 0; j < H; ++j) {
      tl[j] = ta[j];
      tl[H + j] = tb[j];
      th[j] = ta[H + j];
      th[H + j] = tb[H + j];
    }
    lo = load<V>(tl);
    hi = load<V>(th);
  }
}

/// Number of leading elements to store one by one before `p` is stream-aligned.
template <class V, class T>
inline std::size_t elements_to_stream_alignment(const T* p, std::size_t n) {
  const std::size_t a = stream_alignment<V>();
  const std::size_t mis = reinterpret_cast<std::uintptr_t>(p) % a;
  if (mis % sizeof(T) != 0) return n;  // not even element-aligned: never stream
  const std::size_t head = mis == 0 ? 0 : (a - mis) / sizeof(T);
  return head < n ? head : n;
}

/// Writes y[0, n) = f(i) for vector offsets and scalar tails, with streaming or ordinary
/// stores (streaming: f32 y only, see io::stream). f_vec(i) returns V for elements
/// [i, i + V::size); f_one(i) returns float.
template <class V, bool Stream, class T, class FV, class F1>
inline void store_row(T* y, std::size_t n, FV f_vec, F1 f_one) {
  constexpr std::size_t W = V::size;
  std::size_t i = 0;
  if constexpr (Stream) {
    for (const std::size_t head = elements_to_stream_alignment<V>(y, n); i < head; ++i)
      io::store1(y + i, f_one(i));
    for (; i + W <= n; i += W) io::stream(y + i, f_vec(i));
  } else {
    for (; i + W <= n; i += W) io::store(y + i, f_vec(i));
  }
  for (; i < n; ++i) io::store1(y + i, f_one(i));
}

/// The vector of a row of n floats that ends at element n: its last m = n % V::size (or n, if
/// n < V::size) elements sit in the top m lanes; for n < V::size the other lanes are zero
/// (a padded copy, never a read outside the row).
template <class V, class T>
inline V last_vector(const T* x, std::size_t n) {
  constexpr std::size_t W = V::size;
  if (n >= W) return io::load<V>(x + n - W);
  alignas(64) float padded[W] = {};
  for (std::size_t k = 0; k < n; ++k) padded[W - n + k] = io::load1(x + k);
  return load<V>(padded);
}

/// Mask of lanes [first, V::size): with first = V::size - m, the top m lanes, i.e. the lanes
/// of a vector loaded ending at a row's end (last_vector) that the body has not counted yet.
/// The lane indices are built for V's width, so any width works.
template <class V>
inline auto lanes_from(std::size_t first) {
  constexpr std::size_t W = V::size;
  alignas(64) float lane[W];
  for (std::size_t j = 0; j < W; ++j) lane[j] = float(j);
  return load<V>(lane) >= V(float(first));
}
