// quantize_rows, amax_rows: the normalize pass of LayerNorm and RMSNorm into an 8-bit y
// (i8, u8, f8e4m3fn), and the per-row amax side output.
//
// Formula: y = row_value (row/normalize-inl.hpp: the op's normalized value, gamma, beta, gate)
//   in f32, then q = TY(y * inv_scale) through the io policy (common/io-inl.hpp: i8 rounds to
//   nearest even and saturates to [-128, 127], u8 to [0, 255]; f8e4m3fn rounds to nearest even
//   and saturates to +-448). Static (per-tensor) scale: inv_scale = 1 / scale from the plan,
//   and for i8 and u8 the zero point is added after the rounding:
//   q = sat(rne(y * inv_scale) + zero_point).
//   Dynamic (per row, or per block of cfg.quant_block elements): amax = max |y| over the
//   segment, scale = amax / qmax (127 or 448) stored to y_scale, inv_scale = 1 / scale, both
//   rounded once in f32 (vLLM's dynamic per-token quantization). A segment with amax = 0 gets
//   code 0 throughout; one whose amax is not finite (a NaN or an Inf in y) gets the NaN code
//   throughout (i8: 0, f8e4m3fn: 0x7f) and scale = amax (NaN, or +Inf).
//   Dynamic asymmetric (i8, u8): [lo, hi] = [min(0, min y), max(0, max y)] over the segment,
//   scale = (hi - lo) / 255, zero_point = sat(rne(qmin - lo / scale)), codes as static with
//   that scale and zero point (ONNX DynamicQuantizeLinear). lo = hi = 0 gives scale 1; a
//   segment that is not finite gets scale = amax (NaN or +Inf), zero point 0 and code 0.
//   A dynamic scale below FLT_MIN is raised to FLT_MIN (1 / scale stays finite).
// amax: the integer max of the magnitude bits of y, so that NaN > Inf > any finite value and
//   the result does not depend on the order (vector lanes, tails) it was taken in. The min and
//   max of the asymmetric range are taken beside it in float; they are used only when amax is
//   finite, where float min / max do not depend on the order either.
// Passes: dynamic scales need the segment's amax before its first code: one pass computes y
//   and keeps max |y|, the next computes y again and stores the codes. The row (or block) is
//   in L1 / L2 from the statistics (row/normalize-inl.hpp, Grouping), so memory still sees one
//   read of x (and of the gate) and one write of y. The gate's silu is computed in both passes.
// Tails: single elements go through the vector operations on broadcast operands (row_value,
//   lane0), so an element's code does not depend on its position.

/// One row's normalize-pass values at vector offsets (at) and single elements (one).
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX>
struct row_values {
  const TX* x;
  const TX* z;
  const float* g;
  const float* b;
  float hi, rs, lo;

  SIMDNORM_ALWAYS_INLINE V at(std::size_t i) const {
    return row_value<V, Centered, Gamma, Beta, E>(
        io::load<V>(x + i), V(hi), V(rs), V(lo), Gamma ? load<V>(g + i) : V(0.f),
        Beta ? load<V>(b + i) : V(0.f), has_operand(E) ? io::load<V>(z + i) : V(0.f));
  }
  SIMDNORM_ALWAYS_INLINE float one(std::size_t i) const {
    return row_value1<V, Centered, Gamma, Beta, E>(x, z, g, b, hi, rs, lo, i);
  }
};

/// The bits of max |y| over elements [i0, i0 + len) of a row (see the banner).
template <class V, class Row>
inline std::uint32_t segment_amax(const Row& row, std::size_t i0, std::size_t len) {
  constexpr std::size_t W = V::size;
  const std::size_t end = i0 + len;
  std::size_t i = i0;
  std::uint32_t m = 0;
  if constexpr (W > 1) {
    using VI = xsimd::batch<std::int32_t, typename V::arch_type>;
    VI mv(0);
    for (; i + W <= end; i += W)
      mv = xsimd::max(mv, xsimd::bitwise_cast<VI>(row.at(i)) & VI(0x7fffffff));
    alignas(64) std::int32_t lanes[W];
    mv.store_aligned(lanes);
    for (std::size_t j = 0; j < W; ++j) m = m > std::uint32_t(lanes[j]) ? m : lanes[j];
  }
  for (; i < end; ++i) {
    const std::uint32_t a = bits_of(row.one(i)) & 0x7fffffffu;
    m = m > a ? m : a;
  }
  return m;
}

/// The asymmetric range of a segment: the bits of max |y| and [min(0, min y), max(0, max y)].
struct segment_span {
  std::uint32_t amax_bits;
  float lo, hi;
};

template <class V, class Row>
inline segment_span segment_range(const Row& row, std::size_t i0, std::size_t len) {
  constexpr std::size_t W = V::size;
  const std::size_t end = i0 + len;
  std::size_t i = i0;
  std::uint32_t m = 0;
  float lo = 0.f, hi = 0.f;
  if constexpr (W > 1) {
    using VI = xsimd::batch<std::int32_t, typename V::arch_type>;
    VI mv(0);
    V lov(0.f), hiv(0.f);
    for (; i + W <= end; i += W) {
      const V y = row.at(i);
      mv = xsimd::max(mv, xsimd::bitwise_cast<VI>(y) & VI(0x7fffffff));
      lov = xsimd::min(lov, y);
      hiv = xsimd::max(hiv, y);
    }
    alignas(64) std::int32_t lanes[W];
    alignas(64) float los[W], his[W];
    mv.store_aligned(lanes);
    lov.store_aligned(los);
    hiv.store_aligned(his);
    for (std::size_t j = 0; j < W; ++j) {
      m = m > std::uint32_t(lanes[j]) ? m : lanes[j];
      lo = los[j] < lo ? los[j] : lo;
      hi = his[j] > hi ? his[j] : hi;
    }
  }
  for (; i < end; ++i) {
    const float y = row.one(i);
    const std::uint32_t a = bits_of(y) & 0x7fffffffu;
    m = m > a ? m : a;
    lo = y < lo ? y : lo;
    hi = y > hi ? y : hi;
  }
  return {m, lo, hi};
}

/// The dynamic scale spread / steps of a segment whose spread (amax, or hi - lo) is finite,
/// raised to FLT_MIN when the spread is positive and the quotient falls below (or underflows to
/// 0), so that 1 / scale is finite: the codes of a segment within 255 FLT_MIN of 0 then step by
/// FLT_MIN (error <= 2^-127) instead of saturating on an infinite inverse. A spread of 0 keeps
/// scale 0.
inline float dynamic_scale(float spread, float steps) {
  const float scale = spread / steps;
  return spread > 0.f && scale < FLT_MIN ? FLT_MIN : scale;
}

/// A segment's asymmetric scale and zero point (see the banner).
struct asymmetric_scale {
  float scale;
  int zero_point;
};

template <class TY>
inline asymmetric_scale asymmetric_scale_of(const segment_span& span) {
  const float amax = float_of(span.amax_bits);
  if (!(amax <= FLT_MAX)) return {amax, 0};  // NaN or Inf: dequantizes to NaN
  if (span.hi == span.lo) return {1.f, int(quant_lowest<TY>)};
  // hi - lo overflows (up to 2 FLT_MAX) only where (hi - lo) / 255 does not: halve first then.
  const float width = span.hi - span.lo;
  const float scale =
      width <= FLT_MAX ? dynamic_scale(width, 255.f) : (span.hi * 0.5f - span.lo * 0.5f) / 127.5f;
  return {scale, to_int_code(quant_lowest<TY> - span.lo / scale, quant_lowest<TY>,
                             quant_lowest<TY> + 255.f)};
}

/// Codes of elements [i0, i0 + len): TY(y * inv) (i8, u8 with a zero point: rne(y * inv) + zp).
template <class V, class Row, class TY>
inline void store_codes(const Row& row, TY* y, std::size_t i0, std::size_t len, float inv,
                        float zp) {
  constexpr std::size_t W = V::size;
  const std::size_t end = i0 + len;
  std::size_t i = i0;
  const V vinv(inv), vzp(zp);
  if (zp != 0.f) {
    for (; i + W <= end; i += W) io::store(y + i, round_even(row.at(i) * vinv) + vzp);
    for (; i < end; ++i) io::store1(y + i, lane0(round_even(V(row.one(i)) * vinv) + vzp));
    return;
  }
  for (; i + W <= end; i += W) io::store(y + i, row.at(i) * vinv);
  for (; i < end; ++i) io::store1(y + i, row.one(i) * inv);
}

/// Rows [0, count) of a group (their constants in k, row r0 + r of the block) into an 8-bit y.
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX, class TY>
void quantize_rows(const row_norm_config& cfg, const row_block& blk, const TX* const* xs,
                   const TX* const* zs, TY* const* ys, const row_consts& k, std::size_t r0,
                   std::size_t count) {
  const std::size_t n = cfg.cols;
  const std::size_t seg = cfg.quant_block != 0 ? cfg.quant_block : n, segs = n / seg;
  for (std::size_t r = 0; r < count; ++r) {
    const row_values<V, Centered, Gamma, Beta, E, TX> row{
        xs[r], has_operand(E) ? zs[r] : nullptr, cfg.gamma, cfg.beta, k.hi[r], k.rs[r], k.lo_rs[r]};
    std::uint32_t row_max = 0;
    if (cfg.quant_static) {
      store_codes<V>(row, ys[r], 0, n, cfg.quant_inv_scale, cfg.quant_zero_point);
      if (blk.amax != nullptr) row_max = segment_amax<V>(row, 0, n);
    } else if (cfg.quant_asymmetric) {
      if constexpr (std::is_same_v<TY, i8_t> || std::is_same_v<TY, u8_t>)
        for (std::size_t s = 0; s < segs; ++s) {
          const segment_span span = segment_range<V>(row, s * seg, seg);
          row_max = row_max > span.amax_bits ? row_max : span.amax_bits;
          const asymmetric_scale q = asymmetric_scale_of<TY>(span);
          blk.y_scale[(r0 + r) * segs + s] = q.scale;
          blk.y_zero_point[(r0 + r) * segs + s] = q.zero_point;
          if (q.scale <= FLT_MAX)
            store_codes<V>(row, ys[r], s * seg, seg, 1.f / q.scale, float(q.zero_point));
          else
            for (std::size_t i = 0; i < seg; ++i) ys[r][s * seg + i] = TY{0};
        }
    } else {
      for (std::size_t s = 0; s < segs; ++s) {
        const std::uint32_t m = segment_amax<V>(row, s * seg, seg);
        row_max = row_max > m ? row_max : m;
        const float amax = float_of(m), scale = dynamic_scale(amax, quant_max<TY>);
        blk.y_scale[(r0 + r) * segs + s] = amax <= FLT_MAX ? scale : amax;
        TY* codes = ys[r] + s * seg;
        if (amax == 0.f || !(amax <= FLT_MAX)) {
          const TY fill = from_f32<TY>(amax == 0.f ? 0.f : float_of(0x7fc00000u));
          for (std::size_t i = 0; i < seg; ++i) codes[i] = fill;
        } else {
          store_codes<V>(row, ys[r], s * seg, seg, 1.f / scale, 0.f);
        }
      }
    }
    if (blk.amax != nullptr) blk.amax[r0 + r] = float_of(row_max);
  }
}

/// blk.amax of rows [0, count) of a group with a float y (the side output alone).
template <class V, bool Centered, bool Gamma, bool Beta, row_epilogue E, class TX>
void amax_rows(const row_norm_config& cfg, const row_block& blk, const TX* const* xs,
               const TX* const* zs, const row_consts& k, std::size_t r0, std::size_t count) {
  for (std::size_t r = 0; r < count; ++r) {
    const row_values<V, Centered, Gamma, Beta, E, TX> row{
        xs[r], has_operand(E) ? zs[r] : nullptr, cfg.gamma, cfg.beta, k.hi[r], k.rs[r], k.lo_rs[r]};
    blk.amax[r0 + r] = float_of(segment_amax<V>(row, 0, cfg.cols));
  }
}
