// Software prefetch of data a kernel reads later, shared by the row and channel kernels.

/// Prefetches `rows_left` rows of n floats, `stride` floats apart (rows of a matrix, or the
/// segments of a channel chunk), into L2, one request per step of w floats (prefetcht1: L1 is
/// busy with the data in hand). Kernels step it from the loops of their passes, so that memory
/// reads are in flight while they compute as well as while they store: a single core's DRAM
/// reads are bound by the misses it keeps in flight, and without these it has none during the
/// reductions, the second pass over a chunk or a group's normalize. The default-constructed
/// prefetcher does nothing.
/// Elements of type T in one 64-byte cache line (kLineFloats floats): the step of the prefetches
/// that request one line per call, and of the streaming passes' prefetch of x.
template <class T>
constexpr std::size_t line_elements() {
  return kLineFloats * sizeof(float) / sizeof(T);
}

struct row_prefetcher {
  const char* row = nullptr;
  std::ptrdiff_t stride = 0;                // bytes
  std::size_t rows_left = 0, n = 0, i = 0;  // n and i in bytes
  std::size_t elem = sizeof(float);         // bytes per element

  /// `rows` rows of n elements of type T, the first at `first`, `stride` elements apart.
  template <class T>
  static row_prefetcher of(const T* first, std::ptrdiff_t stride, std::size_t rows, std::size_t n) {
    return {reinterpret_cast<const char*>(first),
            stride * std::ptrdiff_t(sizeof(T)),
            rows,
            n * sizeof(T),
            0,
            sizeof(T)};
  }

  /// Advances by w elements; one prefetch per call.
  void step(std::size_t w) {
    if (rows_left == 0) return;
    __builtin_prefetch(row + i, 0, 2);
    i += w * elem;
    if (i >= n) {
      i = 0;
      row += stride;
      --rows_left;
    }
  }
};
