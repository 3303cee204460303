// row_norm_rows: the row-walking driver shared by the row ops (LayerNorm, RMSNorm, Lp).
//
// Formula: y = t * gamma + beta with t = (x - hi) * rs - lo_rs (centered ops, LayerNorm) or
//   t = x * rs (RMSNorm); hi, lo_rs and rs are per-row constants from the op's statistics
//   (Stats::short_rows, or Stats::row_moments and Stats::finish). gamma and beta are optional.
// Layout: row r starts at x + r * x_stride (y likewise); each row is dense.
// Passes and memory traffic per element: the statistics read x from memory once (and, for
//   LayerNorm's chunks or short-row groups whose shift is far from their mean, once more from
//   L1); the normalize pass re-reads x from cache and writes y. Rows are handled in groups
//   (below) that stay in L2 (kGroupBytes), so x is read from memory once and y written once:
//   8 bytes of traffic per element. A single row longer than the L2 is correct but read from
//   memory twice (12 bytes per element). With `stream`, an f32 y goes out with non-temporal
//   stores (no read-for-ownership, no cache pollution; a 16-bit y is stored regularly) and,
//   for every y type, the next group's rows are prefetched into
//   L2 (not L1: L1 holds the group in hand) from both passes: one line per vector stored in
//   the normalize pass, one line per row (short rows) or per 4 vectors of each interleaved row
//   set (long rows) in the statistics pass. One core's memory reads are limited by the
//   requests it keeps in flight, not by DRAM, so reads must go on during the statistics pass
//   too, not only while y is written; a few there is best (more lengthen that pass).
// Grouping: rows of at most kShortCols elements get their statistics V::size rows at a time,
//   with the per-row arithmetic in vector lanes (row/stats_short-inl.hpp); longer rows get
//   them kRowGroup rows at a time, interleaved, so that the rows' dependent per-chunk
//   reductions overlap. The normalize pass then runs kRowGroup rows at a time and loads each
//   gamma/beta vector once for all of them, except with regular stores and rows of
//   kShortCols < n <= kRowsTogetherMinCols, or short rows with a scalar tail, which go row by
//   row: one sequential store stream, whose read-for-ownership the hardware prefetcher
//   follows, measured faster there than four interleaved ones (longer rows lose row by row,
//   as they reload gamma/beta from L2; short rows of whole vectors, whose statistics are
//   cheap, win with fewer instructions per row).
//   On ISAs with isa_hooks<V>::paired_row_sums, short rows of whole vectors with regular
//   stores overlap the two passes (short_rows_overlapped): the statistics of group g + 1 are
//   summed row by row, and after every fourth row four rows of group g are normalized, so
//   that the loads hide behind the stores (x86/avx512-inl.hpp). With streaming stores the
//   overlap lost (the statistics no longer issue the next rows' prefetches), so those keep
//   the two phases. docs/performance.md has the measurements behind these choices.
//   The statistics of a row go through the same operations whether its row set is
//   interleaved or not, and the short-row path depends only on the row length, so the bits of
//   a row do not depend on its position, threads or partitions.
// Preconditions: cols >= 1; y == x (same strides) allowed, otherwise no overlap; no alignment.

/// Per-row constants of the normalize pass, t = (x - hi) * rs - lo_rs or t = x * rs, for the
/// rows of one group: one array per constant, so that the short-row statistics store each as
/// one vector (lane r is row r). mean is the row's mean as the statistics output gives it:
/// hi, except in rows whose deviations may overflow float, where hi is 0 (layer_norm_stats).
struct row_consts {
  static constexpr std::size_t capacity = 16;  // >= V::size and kRowGroup
  alignas(64) float hi[capacity], rs[capacity], lo_rs[capacity], mean[capacity];
};

/// R long rows' constants: their statistics in double (Stats::row_moments), then
/// Stats::finish.
template <class Stats, class V, std::size_t R, class TX>
inline void long_rows(const row_norm_config& cfg, const TX* const* xs, row_consts& k,
                      std::size_t first, row_prefetcher& pf) {
  moments_f64 m[R];
  Stats::template row_moments<V, R>(cfg, xs, cfg.cols, m, pf);
  for (std::size_t r = 0; r < R; ++r) Stats::finish(cfg, cfg.inv_cols, m[r], k, first + r);
}

/// Recomputes with long_rows (double, scaled sums) the rows of a short-row group whose
/// float-lane statistics lost their value: lost(v[r]) for row r. Rare, so out of line.
template <class Stats, class V, class Lost, class TX>
SIMDNORM_COLD void long_rows_where(const row_norm_config& cfg, const TX* const* xs, row_consts& k,
                                   const V& v, Lost lost) {
  alignas(64) float lanes[V::size];
  v.store_unaligned(lanes);
  row_prefetcher none;
  for (std::size_t r = 0; r < V::size; ++r)
    if (lost(lanes[r])) long_rows<Stats, V, 1>(cfg, xs + r, k, r, none);
}

template <class TX>
inline row_prefetcher next_rows(const row_block& blk, std::size_t first, std::size_t count,
                                std::size_t n) {
  if (first >= blk.rows) return {};
  return row_prefetcher::of(static_cast<const TX*>(blk.x) + std::ptrdiff_t(first) * blk.x_stride,
                            blk.x_stride, blk.rows - first < count ? blk.rows - first : count, n);
}

/// What the normalize pass does with its per-element operand z (row_block::operand, rows in
/// x's type and strides) after the affine terms: nothing, gated RMSNorm's t * silu(z), or the
/// post-norm residual add t + z (layer_norm_params / rms_norm_params::residual_after_norm).
enum class row_epilogue { none, gate, add };

constexpr bool has_operand(row_epilogue e) { return e != row_epilogue::none; }

template <row_epilogue E>
using epilogue_constant = std::integral_constant<row_epilogue, E>;

/// silu(z) = z / (1 + exp(-z)), the gate of gated RMSNorm, in V's lanes: silu(-Inf) is NaN
/// (-Inf / Inf, as PyTorch's F.silu), silu(+Inf) = +Inf, NaN stays NaN.
template <class V>
SIMDNORM_ALWAYS_INLINE V silu(const V& z) {
  return z / (V(1.f) + exp(V(0.f) - z));
}

/// Lane 0 of v: scalar heads and tails compute one element with the vector operations on
/// broadcast operands, so that an element's bits do not depend on where it falls in its row.
template <class V>
SIMDNORM_ALWAYS_INLINE float lane0(const V& v) {
  alignas(64) float t[V::size];
  v.store_unaligned(t);
  return t[0];
}

/// The value the normalize pass writes for one element: t = (x - hi) * rs - lo_rs (Centered)
/// or x * rs, then t * gamma + beta with the terms present, then the epilogue E with operand z: t *
/// silu(z) (gate) or t + z (add).
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E>
SIMDNORM_ALWAYS_INLINE V row_value(const V& x, const V& hi, const V& rs, const V& lo, const V& g,
                                   const V& b, const V& z) {
  V t;
  if constexpr (Centered)
    t = fms(x - hi, rs, lo);
  else
    t = x * rs;
  if constexpr (Gamma && Beta)
    t = fma(t, g, b);
  else if constexpr (Gamma)
    t = t * g;
  else if constexpr (Beta)
    t = t + b;
  if constexpr (E == row_epilogue::gate)
    t = t * silu(z);
  else if constexpr (E == row_epilogue::add)
    t = t + z;
  return t;
}

/// row_value of element i of one row, on broadcast operands (heads and tails).
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX>
SIMDNORM_ALWAYS_INLINE float row_value1(const TX* x, const TX* z, const float* g, const float* b,
                                        float hi, float rs, float lo, std::size_t i) {
  return lane0(row_value<V, Centered, Gamma, Beta, E>(V(io::load1(x + i)), V(hi), V(rs), V(lo),
                                                      V(Gamma ? g[i] : 0.f), V(Beta ? b[i] : 0.f),
                                                      V(has_operand(E) ? io::load1(z + i) : 0.f)));
}

/// Normalizes R rows whose y rows share one alignment (for streaming stores). Every element
/// goes through the same operations whatever R is: grouping never changes a bit. zs: the rows'
/// epilogue operands (has_operand(E)), in x's type.
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, bool Stream, std::size_t R,
          class TX, class TY>
SIMDNORM_ALWAYS_INLINE void normalize_rows_inlined(const row_norm_config& cfg, const TX* const* xs,
                                                   const TX* const* zs, TY* const* ys,
                                                   const row_consts& k, std::size_t first,
                                                   row_prefetcher& pf_io) {
  constexpr std::size_t W = V::size;
  row_prefetcher pf = pf_io;  // a local copy stays in registers across the stores
  const std::size_t n = cfg.cols;
  const float* g = cfg.gamma;
  const float* b = cfg.beta;
  // Local copies of the row pointers: a vector store may alias anything, so pointers read
  // through xs / ys would be reloaded after every store (two extra loads per vector).
  const TX* xr[R];
  const TX* zr[R];
  TY* yr[R];
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r) {
    xr[r] = xs[r];
    zr[r] = has_operand(E) ? zs[r] : nullptr;
    yr[r] = ys[r];
  }
  auto one = [&](std::size_t r, std::size_t i) {  // the vector body's operations, one lane
    const std::size_t j = first + r;
    io::store1(yr[r] + i, row_value1<V, Centered, Gamma, Beta, E>(xr[r], zr[r], g, b, k.hi[j],
                                                                  k.rs[j], k.lo_rs[j], i));
  };
  std::size_t i = 0;
  if constexpr (Stream) {
    for (const std::size_t head = elements_to_stream_alignment<V>(yr[0], n); i < head; ++i) {
      SIMDNORM_UNROLL
      for (std::size_t r = 0; r < R; ++r) one(r, i);
    }
  }
  V vhi[R], vrs[R], vlo[R];
  SIMDNORM_UNROLL
  for (std::size_t r = 0; r < R; ++r) {
    vhi[r] = V(k.hi[first + r]);
    vrs[r] = V(k.rs[first + r]);
    vlo[r] = V(k.lo_rs[first + r]);
  }
  for (; i + W <= n; i += W) {
    V gv(0.f), bv(0.f);
    if constexpr (Gamma) gv = load<V>(g + i);
    if constexpr (Beta) bv = load<V>(b + i);
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) {
      const V t = row_value<V, Centered, Gamma, Beta, E>(
          io::load<V>(xr[r] + i), vhi[r], vrs[r], vlo[r], gv, bv,
          has_operand(E) ? io::load<V>(zr[r] + i) : V(0.f));
      if constexpr (Stream) {
        io::stream(yr[r] + i, t);
        pf.step(W);
      } else {
        io::store(yr[r] + i, t);
      }
    }
  }
  for (; i < n; ++i) {
    SIMDNORM_UNROLL
    for (std::size_t r = 0; r < R; ++r) one(r, i);
  }
  pf_io = pf;
}

/// normalize_rows_inlined, left to the compiler to inline or call.
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, bool Stream, std::size_t R,
          class TX, class TY>
inline void normalize_rows(const row_norm_config& cfg, const TX* const* xs, const TX* const* zs,
                           TY* const* ys, const row_consts& k, std::size_t first,
                           row_prefetcher& pf) {
  normalize_rows_inlined<V, Centered, Gamma, Beta, E, Stream, R>(cfg, xs, zs, ys, k, first, pf);
}

template <class V, class Stats, bool Gamma, bool Beta, row_epilogue E, bool Stream, class TX,
          class TY>
SIMDNORM_ALWAYS_INLINE void normalize_group(const row_norm_config& cfg, const TX* const* xs,
                                            const TX* const* zs, TY* const* ys, const row_consts& k,
                                            std::size_t count, bool group, row_prefetcher& pf) {
  constexpr bool kCentered = Stats::centered;
  std::size_t r = 0;
  if (group)
    for (; r + kRowGroup <= count; r += kRowGroup)
      normalize_rows<V, kCentered, Gamma, Beta, E, Stream, kRowGroup>(cfg, xs + r, zs + r, ys + r,
                                                                      k, r, pf);
  for (; r < count; ++r)
    normalize_rows<V, kCentered, Gamma, Beta, E, Stream, 1>(cfg, xs + r, zs + r, ys + r, k, r, pf);
}

/// Points xs / ys (and zs at the operand rows, when there is an operand) at the `count` rows that
/// start at row r0, then pads them to `padded` entries by repeating the last row.
template <class TX, class TY>
SIMDNORM_ALWAYS_INLINE void point_rows(const row_block& blk, std::size_t r0, std::size_t count,
                                       std::size_t padded, const TX** xs, TY** ys,
                                       const TX** zs = nullptr) {
  const TX* xr = static_cast<const TX*>(blk.x) + std::ptrdiff_t(r0) * blk.x_stride;
  TY* yr = static_cast<TY*>(blk.y) + std::ptrdiff_t(r0) * blk.y_stride;
  const TX* zr = static_cast<const TX*>(blk.operand);
  if (zr != nullptr) zr += std::ptrdiff_t(r0) * blk.x_stride;
  for (std::size_t r = 0; r < padded; ++r) {
    xs[r] = xr;
    ys[r] = yr;
    if (zs != nullptr) zs[r] = zr;
    if (r + 1 < count) {
      xr += blk.x_stride;
      yr += blk.y_stride;
      if (zr != nullptr) zr += blk.x_stride;
    }
  }
}

/// Short rows of whole vectors, regular stores, on ISAs with isa_hooks<V>::paired_row_sums:
/// group g's normalize runs between the rows of group g + 1's statistics (banner, Grouping).
/// Two sets of row pointers and row constants alternate. The same operations as the phased
/// path, so the same bits; y == x is fine, as a group's stores touch only its own rows.
template <class V, class Stats, bool Gamma, bool Beta, class TX, class TY>
void short_rows_overlapped(const row_norm_config& cfg, const row_block& blk) {
  constexpr std::size_t W = V::size;
  const TX* xs[2][W];
  TY* ys[2][W];
  row_consts k[2];
  row_prefetcher none;
  const auto group_at = [&](std::size_t r0, std::size_t g) {
    const std::size_t count = blk.rows - r0 < W ? blk.rows - r0 : W;
    point_rows(blk, r0, count, W, xs[g], ys[g]);
    return count;
  };
  std::size_t count = group_at(0, 0);
  Stats::template short_rows<V>(cfg, xs[0], k[0], none);
  for (std::size_t r0 = 0, g = 0; r0 < blk.rows; r0 += W, g ^= 1) {
    for (std::size_t r = 0; r < count; ++r) {
      if (blk.mean) blk.mean[r0 + r] = k[g].mean[r];
      if (blk.rstd) blk.rstd[r0 + r] = k[g].rs[r];
    }
    if (r0 + W < blk.rows) {
      const std::size_t next = group_at(r0 + W, g ^ 1);
      const TX* const* xg = xs[g];
      TY* const* yg = ys[g];
      const row_consts& kg = k[g];
      std::size_t calls = 0;
      Stats::template short_rows<V>(cfg, xs[g ^ 1], k[g ^ 1], none, [&]() SIMDNORM_LAMBDA_INLINE {
        if (++calls % kRowGroup == 0) {  // group g is full: only the last group can be partial
          const std::size_t b = calls - kRowGroup;
          normalize_rows_inlined<V, Stats::centered, Gamma, Beta, row_epilogue::none, false,
                                 kRowGroup>(cfg, xg + b, xg + b, yg + b, kg, b, none);
        }
      });
      count = next;
    } else {
      normalize_group<V, Stats, Gamma, Beta, row_epilogue::none, false>(cfg, xs[g], xs[g], ys[g],
                                                                        k[g], count, true, none);
    }
  }
}

// 8-bit outputs and the amax side output (row/quantize-inl.hpp).
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX, class TY>
void quantize_rows(const row_norm_config& cfg, const row_block& blk, const TX* const* xs,
                   const TX* const* zs, TY* const* ys, const row_consts& k, std::size_t r0,
                   std::size_t count);
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX>
void amax_rows(const row_norm_config& cfg, const row_block& blk, const TX* const* xs,
               const TX* const* zs, const row_consts& k, std::size_t r0, std::size_t count);

template <class V, class Stats, bool Gamma, bool Beta, row_epilogue E, bool Stream, class TX,
          class TY>
void row_norm_rows_impl(const row_norm_config& cfg, const row_block& blk) {
  constexpr std::size_t W = V::size;
  static_assert(W <= row_consts::capacity && kRowGroup <= row_consts::capacity);
  const std::size_t n = cfg.cols;
  // Grouping needs the rows of a group to share y's alignment when streaming.
  const bool same_alignment =
      !Stream || (std::size_t(blk.y_stride) * sizeof(TY)) % stream_alignment<V>() == 0;
  const bool group = same_alignment && n * sizeof(TX) * kRowGroup <= kGroupBytes;
  const bool short_rows = n <= kShortCols;
  const std::size_t step = short_rows ? W : group ? kRowGroup : 1;
  const bool rows_together =
      group && (Stream || n > kRowsTogetherMinCols || (short_rows && n % W == 0));
  if constexpr (isa_hooks<V>::paired_row_sums && Stats::centered && !has_operand(E) && !Stream &&
                !is_8bit<TY>)
    if (short_rows && n % W == 0 && blk.amax == nullptr) {
      short_rows_overlapped<V, Stats, Gamma, Beta, TX, TY>(cfg, blk);
      return;
    }
  for (std::size_t r0 = 0; r0 < blk.rows; r0 += step) {
    const std::size_t count = blk.rows - r0 < step ? blk.rows - r0 : step;
    const TX* xs[W > kRowGroup ? W : kRowGroup];
    const TX* zs[W > kRowGroup ? W : kRowGroup];
    TY* ys[W > kRowGroup ? W : kRowGroup];
    row_consts k;
    point_rows(blk, r0, count, short_rows ? W : count, xs, ys, has_operand(E) ? zs : nullptr);
    // Prefetch two short-row groups ahead (they are small), one long-row group ahead.
    row_prefetcher pf =
        Stream ? next_rows<TX>(blk, r0 + (short_rows ? 2 : 1) * step, step, n) : row_prefetcher{};
    if (short_rows)
      Stats::template short_rows<V>(cfg, xs, k, pf);
    else if (count == kRowGroup)
      long_rows<Stats, V, kRowGroup>(cfg, xs, k, 0, pf);
    else
      for (std::size_t r = 0; r < count; ++r) long_rows<Stats, V, 1>(cfg, xs + r, k, r, pf);
    for (std::size_t r = 0; r < count; ++r) {
      if (blk.mean) blk.mean[r0 + r] = k.mean[r];
      if (blk.rstd) blk.rstd[r0 + r] = k.rs[r];
    }
    constexpr bool kCentered = Stats::centered;
    if constexpr (is_8bit<TY>) {
      quantize_rows<V, kCentered, Gamma, Beta, E>(cfg, blk, xs, zs, ys, k, r0, count);
      continue;
    }
    if constexpr (E != row_epilogue::add)  // the plan refuses amax with the post-norm add
      if (blk.amax != nullptr)
        amax_rows<V, kCentered, Gamma, Beta, E>(cfg, blk, xs, zs, k, r0, count);
    normalize_group<V, Stats, Gamma, Beta, E, Stream>(cfg, xs, zs, ys, k, count, rows_together, pf);
  }
  if constexpr (Stream) stream_fence();
}

/// Calls f(G, B, E, S) for the affine terms present (gamma, beta: std::bool_constant), the
/// epilogue (E: epilogue_constant) and the store kind (S: streaming), among those the op can
/// have (Stats::has_gamma, has_beta, has_gate, has_residual_after; the plan refuses the others):
/// each is its own instantiation. The streaming instances exist for float and 16-bit outputs
/// (8-bit ones store through the quantizer), and not with the post-norm add (the plan turns
/// them off there). adaLN modulation is no variant: the
/// plan folds it into cfg.gamma and cfg.beta per batch. An op whose beta is only that fold
/// (Stats::beta_from_modulation: RMSNorm) has it with gamma and without an epilogue, so its beta
/// adds one variant, not six.
template <class Stats, class TY, class F>
inline void with_row_variant(const row_norm_config& cfg, const row_block& blk, F f) {
  constexpr bool G = Stats::has_gamma, B = Stats::has_beta;
  constexpr bool kGate = Stats::has_gate, kAdd = Stats::has_residual_after && !is_8bit<TY>;
  const auto stores = [&](auto gamma, auto beta, auto epilogue) {
    if constexpr (!is_8bit<TY>)
      if (cfg.stream) return f(gamma, beta, epilogue, std::true_type{});
    f(gamma, beta, epilogue, std::false_type{});
  };
  const auto with_epilogue = [&](auto gamma, auto beta) {
    if constexpr (kAdd)
      if (blk.operand != nullptr && cfg.residual_after_norm)
        return f(gamma, beta, epilogue_constant<row_epilogue::add>{}, std::false_type{});
    if constexpr (kGate)
      if (blk.operand != nullptr)
        return stores(gamma, beta, epilogue_constant<row_epilogue::gate>{});
    stores(gamma, beta, epilogue_constant<row_epilogue::none>{});
  };
  const bool g = G && cfg.gamma != nullptr, b = B && cfg.beta != nullptr;
  if constexpr (Stats::beta_from_modulation) {
    if (b)
      return stores(std::true_type{}, std::true_type{}, epilogue_constant<row_epilogue::none>{});
  }
  constexpr bool kBeta = B && !Stats::beta_from_modulation;  // with any gamma and epilogue
  if (g && b)
    with_epilogue(std::bool_constant<G>{}, std::bool_constant<kBeta>{});
  else if (g)
    with_epilogue(std::bool_constant<G>{}, std::false_type{});
  else if (b)
    with_epilogue(std::false_type{}, std::bool_constant<kBeta>{});
  else
    with_epilogue(std::false_type{}, std::false_type{});
}

/// Entry point (kernel_table::row_op_kernels::rows) of a row op (layer_norm_op, rms_norm_op,
/// lp_norm_op): x holds TX and y TY elements (float, bf16_t, f16_t; LayerNorm and RMSNorm also
/// the 8-bit i8_t, f8e4m3fn_t).
template <class V, class Op, class TX, class TY>
void row_norm_rows(const row_norm_config& cfg, const row_block& blk) {
  Op::with_stats(cfg, [&](auto stats) {
    using Stats = decltype(stats);
    with_row_variant<Stats, TY>(cfg, blk, [&](auto g, auto b, auto z, auto s) {
      row_norm_rows_impl<V, Stats, decltype(g)::value, decltype(b)::value, decltype(z)::value,
                         decltype(s)::value, TX, TY>(cfg, blk);
    });
  });
}
