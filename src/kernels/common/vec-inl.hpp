// Vector helpers shared by all kernels: loads, the I/O policy at the kernel edge, streaming
// stores, lane masks and lane sums. Included after common/base-inl.hpp and the ISA files.

template <class V>
inline V load(const float* p) {
  return V::load_unaligned(p);
}

/// Bytes a streaming store of V must be aligned to.
template <class V>
constexpr std::size_t stream_alignment() {
  return V::size * sizeof(float);
}

/// Non-temporal store of a full vector to a stream_alignment()-aligned address where the ISA
/// has one (x86); an ordinary store elsewhere.
template <class V>
inline void store_stream(float* p, const V& v) {
#if defined(__AVX512F__)
  if constexpr (V::size == 16) {
    _mm512_stream_ps(p, v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (V::size == 8) {
    _mm256_stream_ps(p, v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (V::size == 4) {
    _mm_stream_ps(p, v);
    return;
  }
#endif
  v.store_unaligned(p);
}

/// Orders streaming stores before whatever the thread does next (e.g. signalling completion).
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/// The I/O policy: how the kernels read x and write y, the tensors whose element type a caller
/// chooses. Everything else (statistics, parameters, arithmetic) is f32. f32_io is the only
/// policy today; another element type (bf16, fp16) is another policy of the same shape, whose
/// loads convert to f32 vectors and whose stores convert back.
struct f32_io {
  using value_type = float;
  template <class V>
  static V load(const float* p) {
    return V::load_unaligned(p);
  }
  static float load1(const float* p) { return *p; }
  template <class V>
  static void store(float* p, const V& v) {
    v.store_unaligned(p);
  }
  /// Non-temporal store; p is stream_alignment<V>()-aligned.
  template <class V>
  static void stream(float* p, const V& v) {
    store_stream<V>(p, v);
  }
  static void store1(float* p, float v) { *p = v; }
};

/// The policy the kernels of this build read x and write y with.
using io = f32_io;

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
inline V lane_sums(const V* rows) {
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
template <class V>
inline std::size_t elements_to_stream_alignment(const float* p, std::size_t n) {
  const std::size_t a = stream_alignment<V>();
  const std::size_t mis = reinterpret_cast<std::uintptr_t>(p) % a;
  if (mis % sizeof(float) != 0) return n;  // not even float-aligned: never stream
  const std::size_t head = mis == 0 ? 0 : (a - mis) / sizeof(float);
  return head < n ? head : n;
}

/// Writes y[0, n) = f(i) for vector offsets and scalar tails, with streaming or ordinary
/// stores. f_vec(i) returns V for elements [i, i + V::size); f_one(i) returns float.
template <class V, bool Stream, class FV, class F1>
inline void store_row(float* y, std::size_t n, FV f_vec, F1 f_one) {
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
template <class V>
inline V last_vector(const float* x, std::size_t n) {
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
