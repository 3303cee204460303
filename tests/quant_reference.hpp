// The reference quantizers of the 8-bit outputs (i8, u8, f8e4m3fn), from the formats'
// definitions, independent of the library: tests/test_quantize.cpp (row ops) and
// tests/test_quantize_channels.cpp (channel ops).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "simdnorm/tensor.hpp"

namespace qref {

using simdnorm::dtype;

/// E4M3FN code -> value (independent of the library: from the format's definition).
inline double f8_value(unsigned c) {
  const unsigned e = (c >> 3) & 15u, m = c & 7u;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, int(e) - 7);
  return (c & 0x80u) ? -mag : mag;
}

/// Nearest E4M3FN code of v, ties to the even code, saturating at 448; NaN -> 0x7f.
inline unsigned f8_code(double v) {
  if (std::isnan(v)) return 0x7f;
  const unsigned sign = std::signbit(v) ? 0x80u : 0u;
  const double a = std::fabs(v);
  unsigned lo = 0;  // largest code with value <= a, among 0 .. 0x7e
  while (lo < 0x7e && f8_value(lo + 1) <= a) ++lo;
  if (lo == 0x7e) return sign | lo;
  const double dl = a - f8_value(lo), dh = f8_value(lo + 1) - a;
  return sign | (dl < dh || (dl == dh && lo % 2 == 0) ? lo : lo + 1);
}

/// Position of a code on the number line: adjacent values differ by one (+0 and -0 are both 0).
inline int ordinal(dtype t, unsigned c) {
  if (t == dtype::i8) return int(std::int8_t(c));
  if (t == dtype::u8) return int(c);
  return (c & 0x80u) ? -int(c & 0x7fu) : int(c & 0x7fu);
}

/// The lowest integer code of t (i8 -128, u8 0); the highest is 255 above it.
inline double lowest_code(dtype t) { return t == dtype::i8 ? -128.0 : 0.0; }

/// The code of the scaled value v (= y * inv_scale): i8 and u8 sat(rne(v) + zp), f8 f8_code(v).
inline unsigned ref_code(dtype t, double v, int zp) {
  if (t == dtype::f8e4m3fn) return f8_code(v);
  if (std::isnan(v)) return 0;
  const double lo = lowest_code(t);  // nearbyint: ties to even
  const double r = std::clamp(std::nearbyint(v) + zp, lo, lo + 255);
  return unsigned(std::uint8_t(int(r)));  // the code's byte (two's complement for i8)
}

/// One code's value (i8, u8: the integer; f8e4m3fn: f8_value).
inline double code_value(dtype t, unsigned c) {
  if (t == dtype::i8) return double(std::int8_t(c));
  if (t == dtype::u8) return double(c);
  return f8_value(c);
}

}  // namespace qref
