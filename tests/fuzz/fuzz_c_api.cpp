// libFuzzer harness of the public C API (include/simdnorm/simdnorm.h), every op of
// simdnorm/op_list.h.
//
// Why: the C API is where untrusted shapes, strides, parameters and pointers enter the library.
// Each input decodes into one call: an op, a tensor of 1..5 dims (sometimes an invalid rank, a
// zero, negative or huge size), x's and y's element types (f32, bf16, f16, any pair:
// decode_types, header byte 61 bits 3-7), x and y strides (dense, padded, permuted,
// channels-last, zero, overlapping, huge, arbitrary), x / y aliasing (disjoint, in place, in
// place with other strides or another type, partial overlap, adjacent, at byte offsets that
// keep both types aligned), the op's parameters (eps NaN / Inf / negative / 0 / subnormal,
// axes, groups, momentum, enum values out of range), the split-statistics stage (full,
// moments, apply, or a value that is not a stage), optional gamma / beta / mean / rstd /
// running statistics / moments records (exact ones, or corrupted), an ISA among the runnable
// ones, a way to execute (default executor, a host pool callback with its own partition,
// plan_run task by task, one-shot), and the data itself (raw bits of x's type, so NaN, Inf,
// huge and subnormal values occur; values of the other data modes rounded to nearest even into
// x's type). Some inputs also merge random moments records (simdnorm_merge_moments).
//
// The row ops' fused operands (docs/fusions.md; decode_fused, header bytes 44-53): some
// LayerNorm, RMSNorm and Lp calls go through the op's own args struct (simdnorm_<op>_ex,
// simdnorm_plan_execute_<op>, simdnorm_plan_run_<op>) and carry the residual add (residual,
// residual_out, residual_bias; residual_out apart, over the residual, over x, over y, partly
// over x or the residual, one of the pair missing, the residual being x or y), the post-norm
// residual of LayerNorm and RMSNorm (residual_after_norm: the residual apart, being y, being x
// while y is x or not, partly over x or y, missing; with a residual_out, bias, gate, adaLN
// modulation, an 8-bit y, row_amax or a moments plan, all refused), RMSNorm's gate
// (after the norm: apart, as y, over h, partly over y, as x; gate_before_norm: apart, as y,
// missing), adaLN modulation (modulation_tokens dividing the rows or not, negative, huge, 0
// with operands; strides 0, the row length, padded, DiT's 6 D, too short, negative, one whose
// span overflows; scale or shift missing, over y or over h), weight_offset (finite, 0, NaN,
// Inf), 8-bit y (i8, u8, f8e4m3fn; dynamic, dynamic_asymmetric, per_tensor, per_channel or no
// scaling; blocks 0, 32..256, the row, and invalid ones; static scales and zero points valid
// and not) with y_scale / y_zero_point / amax given as required or one of them wrong, an 8-bit
// x or a y type that is not one, row_amax, and sometimes another row op's args struct. The
// residual, residual_out and gate have x's type (f32, bf16 or f16).
//
// What it checks (a failed check traps, so libFuzzer reports the input):
//   1. Every call that fails returns a real status, sets a non-empty message, leaves *out NULL
//      and writes nothing: every buffer (x, y with its padding, mean, rstd, running statistics,
//      the batch counter, gamma, beta, moments records, residual, residual_out, bias, gate,
//      modulation rows, y_scale, y_zero_point, amax; every byte, whatever the element type)
//      stays bit-identical. Inputs the documented rules forbid (bad rank, sizes, eps, enums,
//      axes, groups, stages; byte sizes that overflow for the tensor's type; y elements that
//      overlap; a partial x/y overlap; x as y with other strides or another type; pointers an
//      op does not take; missing or bad moments records; the fused rules of fused_plan_refused
//      and fused_args_expect) must fail; simple valid layouts (dense, padded rows,
//      channels-last) must be accepted. A build without the bf16 / f16 kernels (the
//      SIMDNORM_ALL_DTYPES=OFF of CI's fuzz stage) must refuse every plan with a 16-bit x or y,
//      with SIMDNORM_UNSUPPORTED_DTYPE where nothing else is wrong.
//   2. An accepted plan executes successfully with valid arguments, reports the documented
//      rows / row_length, and gives bit-identical results on every execution path.
//   3. Outputs match the float64 reference of fuzz_reference.hpp within its derived bound (y,
//      mean, rstd, running statistics, the batch counter); units with non-finite inputs are
//      not value-checked, which makes the check of the other units a confinement check. A
//      16-bit x enters the reference exactly; a 16-bit y is held to the f32 bound plus half an
//      ulp of its type (round_into; f16 overflow: Inf required where the f32 y is surely past
//      65536, no check near 65504..65536); the statistics outputs stay f32 and their checks as
//      for f32 tensors. The post-norm residual: y = the norm's reference + residual, within the
//      norm's bound plus the f32 rounding of the sum (and y's own rounding). The
//      moments stage's records have the exact count and the op's kind, and their mean and m2
//      match the float64 statistics; the apply stage, given those statistics exactly, meets
//      the bounds of the one-call outputs. Fused calls: residual_out holds fl(fl(x + residual)
//      + bias) bit for bit (rounded once into x's type), and the reference normalizes it; the
//      weight offset and adaLN modulation enter the reference as the gamma and beta the
//      documented folds give, the gate through the bounds of fuzz_reference.hpp (the gate
//      before the norm also through the rounding of h into a 16-bit y). The same plan into an
//      f32 y from that residual_out, in x's type (run_twin), must give a residual add's y bit
//      for bit (the plain norm of h, rounded to nearest even into a 16-bit y's type); for an
//      8-bit y that f32 y meets the float64 reference, and the scales, zero points and codes are
//      the documented quantizer of it (check_quantized: exact, the asymmetric scale and zero
//      point within their roundings); amax is max |y| of the f32 y exactly (for a 16-bit y:
//      rounded into its type, the largest |y| stored).
//   4. Nothing outside y's elements is written: buffers are allocated with the exact size the
//      descriptors address in their types' bytes (AddressSanitizer catches any access past
//      them) and every byte that is not part of y or residual_out (padding, x when not in
//      place, the residual after the norm unless it is y) is compared with a snapshot. The
//      moments stage writes its records (and residual_out) and nothing else.
//   5. simdnorm_merge_moments refuses bad records and writes nothing then; on good ones the
//      counts add exactly and the fold matches a two-pass reference in long double.
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "fuzz_reference.hpp"
#include "simdnorm/simdnorm.h"

extern "C" {
simdnorm_status fuzz_c_force_isa(int32_t v);
int fuzz_c_cpu_supports(int32_t v);
int fuzz_c_isa_lanes(int32_t v);
int fuzz_c_isa_has_fma(int32_t v);
const char* fuzz_c_isa_name(int32_t v);
const char* fuzz_c_status_string(int32_t v);
}

namespace {

char g_case[768];  // the decoded case, printed when a check fails

[[noreturn]] void check_failed(const char* what, int line) {
  std::fprintf(stderr, "fuzz_c_api.cpp:%d: check failed: %s\n  case: %s\n  last error: %s\n", line,
               what, g_case, simdnorm_last_error_message());
  __builtin_trap();
}
#define FUZZ_CHECK(cond)                        \
  do {                                          \
    if (!(cond)) check_failed(#cond, __LINE__); \
  } while (0)

enum op_id { kLayerNorm, kRmsNorm, kLpNorm, kBatchNorm, kGroupNorm, kInstanceNorm, kMvn, kOps };
const char* const kOpNames[kOps] = {"layer_norm",        "rms_norm",   "lp_norm",
                                    "batch_norm",        "group_norm", "instance_norm",
                                    "mean_variance_norm"};

constexpr std::size_t kHeader = 64;             // fixed-position header bytes, then data
constexpr std::int64_t kMaxElements = 1 << 15;  // larger problems are planned, not executed
constexpr std::int64_t kMaxSpan = 1 << 17;
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int32_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int32_t kI32Min = std::numeric_limits<std::int32_t>::min();

// ---- Decoding helpers -------------------------------------------------------------------------

struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1p-53 * 2.0 - 1.0; }  // [-1, 1)
};

float bits_to_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The element types (simdnorm_dtype values; fuzzref has the 8-bit ones).
constexpr std::int32_t kF32 = 0;
using fuzzref::kBF16;
using fuzzref::kF16;
using fuzzref::kF8;
using fuzzref::kI8;
using fuzzref::kU8;

bool is_8bit(std::int32_t t) { return t == kI8 || t == kU8 || t == kF8; }
bool is_16bit(std::int32_t t) { return t == kBF16 || t == kF16; }
/// Bytes per element (4 for a value that is not a type: the library refuses those).
std::size_t elem_bytes(std::int32_t t) { return is_8bit(t) ? 1 : is_16bit(t) ? 2 : 4; }

/// Element o of a tensor of type t at base, as a float (exact for f32, bf16 and f16; an 8-bit
/// element, which only a refused x has, reads as 0).
float load_elem(const void* base, std::int64_t o, std::int32_t t) {
  const auto* p = static_cast<const unsigned char*>(base) + o * std::int64_t(elem_bytes(t));
  if (is_16bit(t)) {
    std::uint16_t b;
    std::memcpy(&b, p, 2);
    return float(fuzzref::from_16bit(t, b));
  }
  if (is_8bit(t)) return 0.f;
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

/// Stores v as element o of a tensor of type t, rounded to nearest even (an 8-bit x, refused
/// anyway, takes v's low bits).
void store_elem(void* base, std::int64_t o, std::int32_t t, float v) {
  auto* p = static_cast<unsigned char*>(base) + o * std::int64_t(elem_bytes(t));
  if (is_16bit(t)) {
    const std::uint16_t b = fuzzref::to_16bit(t, v);
    std::memcpy(p, &b, 2);
  } else if (is_8bit(t)) {
    *p = static_cast<unsigned char>(float_bits(v));
  } else {
    std::memcpy(p, &v, 4);
  }
}

// C enum fields are written as the raw 32-bit value a C caller may store.
template <class E>
void set_enum(E* field, std::int32_t v) {
  static_assert(sizeof(E) == sizeof(std::int32_t), "32-bit enums");
  std::memcpy(field, &v, sizeof v);
}

template <class E>
std::int32_t get_enum(const E& field) {
  std::int32_t v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

std::int64_t wrap_mul(std::int64_t a, std::int64_t b) {
  return std::int64_t(std::uint64_t(a) * std::uint64_t(b));
}
std::int64_t wrap_add(std::int64_t a, std::int64_t b) {
  return std::int64_t(std::uint64_t(a) + std::uint64_t(b));
}

constexpr std::int64_t kLargeDims[15] = {16,  17,  31,  32,   33,   63,   64,  65,
                                         127, 129, 255, 1023, 2047, 2049, 4097};
constexpr std::int64_t kSpecialDims[8] = {0,
                                          -1,
                                          kI64Min,
                                          std::int64_t(1) << 31,
                                          std::int64_t(1) << 40,
                                          kI64Max,
                                          3037000500,
                                          std::int64_t(1) << 62};
constexpr std::int64_t kHugeStrides[8] = {kI64Max,
                                          std::int64_t(1) << 62,
                                          kI64Max / 4 + 1,
                                          std::int64_t(1) << 40,
                                          std::int64_t(1) << 32,
                                          std::int64_t(1) << 20,
                                          -1,
                                          kI64Min};

float decode_eps(std::uint8_t code, const std::uint8_t* raw, float dflt) {
  switch (code % 20) {
    case 0:
    case 1:
    case 2:
    case 3: return dflt;
    case 4: return 0.f;
    case 5: return std::numeric_limits<float>::quiet_NaN();
    case 6: return INFINITY;
    case 7: return -INFINITY;
    case 8: return -1e-5f;
    case 9: return 1e-45f;  // smallest subnormal
    case 10: return std::numeric_limits<float>::min();
    case 11: return 1e-12f;
    case 12: return 1e-5f;
    case 13: return 1.f;
    case 14: return 1e30f;
    case 15: return -0.f;
    case 16: return std::numeric_limits<float>::max();
    default: {
      std::uint32_t b;
      std::memcpy(&b, raw, 4);
      return bits_to_float(b);
    }
  }
}

std::int32_t decode_enum(std::uint8_t code, int valid_count) {
  constexpr std::int32_t kOdd[6] = {-1, 2, 3, kI32Max, kI32Min, 0x40000000};
  return code < 240 ? std::int32_t(code % valid_count) : kOdd[(code - 240) % 6];
}

enum stage_id : std::int32_t { kFull = 0, kMoments = 1, kApply = 2 };

/// The stats_stage byte: full half the time, moments and apply a quarter each; from 240 on
/// values that are not a simdnorm_stats_stage (plan creation must refuse them).
std::int32_t decode_stage(std::uint8_t code) {
  constexpr std::int32_t kStages[8] = {kFull,    kFull,    kFull,  kFull,
                                       kMoments, kMoments, kApply, kApply};
  constexpr std::int32_t kOdd[6] = {-1, 3, 4, kI32Max, kI32Min, 0x40000000};
  return code < 240 ? kStages[code % 8] : kOdd[(code - 240) % 6];
}

// Dense row-major strides with wrapping arithmetic (invalid sizes are the library's to refuse).
void dense_strides(int nd, const std::int64_t* shape, const int* order, std::int64_t* strides) {
  std::int64_t s = 1;
  for (int k = nd - 1; k >= 0; --k) {
    const int d = order ? order[k] : k;
    strides[d] = s;
    s = wrap_mul(s, shape[d]);
  }
}

/// Strides of one tensor from its 10 layout bytes (mode, then arguments).
void decode_strides(int nd, const std::int64_t* shape, const std::uint8_t* lay, std::int64_t* st) {
  const std::uint8_t* a = lay + 1;
  int order[SIMDNORM_MAX_DIMS];
  for (int i = 0; i < nd; ++i) order[i] = i;
  dense_strides(nd, shape, nullptr, st);
  if (nd == 0) return;
  switch (lay[0] % 8) {
    case 0: break;  // dense
    case 1: {       // padded: each outer stride steps past the inner extent plus 0..3
      std::int64_t s = 1;
      for (int i = nd - 1; i >= 0; --i) {
        st[i] = s;
        s = wrap_add(wrap_mul(s, shape[i]), a[i] % 4);
      }
      break;
    }
    case 2:  // permuted, dense in that order
      for (int i = nd - 1; i > 0; --i) std::swap(order[i], order[a[i] % (i + 1)]);
      dense_strides(nd, shape, order, st);
      break;
    case 3:  // channels-last: (N, C, D...) laid out as (N, D..., C)
      if (nd >= 3) {
        for (int k = 1; k < nd - 1; ++k) order[k] = k + 1;
        order[nd - 1] = 1;
        dense_strides(nd, shape, order, st);
      }
      break;
    case 4: st[a[0] % nd] = 0; break;  // broadcast dim
    case 5: {                          // overlapping
      const int d = a[0] % nd;
      if (a[1] & 1)
        st[d] = st[d] > 1 ? st[d] - 1 - (a[2] % 2) : 0;
      else
        st[d] = 1;
      if (st[d] < 0) st[d] = 0;
      break;
    }
    case 6: st[a[0] % nd] = kHugeStrides[a[1] % 8]; break;
    case 7:  // arbitrary small strides
      for (int i = 0; i < nd; ++i) st[i] = a[i] % 40;
      if (a[8] & 1) st[nd - 1] = 1;
      break;
  }
}

/// x's and y's types from bits 3-7 of header byte 61 (bits 0-2 are the special values): every
/// pair of f32, bf16 and f16, the same type a third of the time (in place needs it); f32 for
/// 0 and for the values inputs from before the 16-bit types have there (3, 17, 31).
std::array<std::int32_t, 2> decode_types(std::uint8_t b) {
  constexpr std::int32_t F = kF32, B = kBF16, H = kF16;
  constexpr std::int32_t kPairs[32][2] = {
      {F, F}, {B, B}, {H, H}, {F, F}, {B, F}, {H, F}, {F, B}, {F, H}, {B, H}, {H, B}, {B, B},
      {H, H}, {F, F}, {B, B}, {H, H}, {B, F}, {H, F}, {F, F}, {F, B}, {F, H}, {B, B}, {H, H},
      {B, H}, {H, B}, {F, F}, {B, B}, {H, H}, {B, F}, {H, F}, {F, B}, {F, H}, {F, F}};
  return {kPairs[b >> 3][0], kPairs[b >> 3][1]};
}

/// Whether this build has the bf16 and f16 kernels (SIMDNORM_ALL_DTYPES): without them every
/// plan with a 16-bit x or y must be refused with SIMDNORM_UNSUPPORTED_DTYPE.
bool build_has_16bit() {
  simdnorm_tensor_desc d;
  const std::int64_t shape[1] = {4};
  if (simdnorm_tensor_contiguous(&d, 1, shape) != SIMDNORM_OK) std::abort();
  set_enum(&d.type, kBF16);
  simdnorm_plan_t plan = nullptr;
  const simdnorm_status s = simdnorm_plan_layer_norm(&d, &d, nullptr, &plan);
  simdnorm_plan_destroy(plan);
  if (s != SIMDNORM_OK && s != SIMDNORM_UNSUPPORTED_DTYPE) std::abort();
  return s == SIMDNORM_OK;
}

// ---- Buffers ------------------------------------------------------------------------------------

/// A buffer of exactly `lead + count` elements of `elem` bytes (4: floats, 2: a 16-bit tensor,
/// 1: an 8-bit y; the lead elements only misalign the data), filled with a sentinel (floats:
/// NaN payloads; smaller elements: the low bytes of those), with a snapshot for "untouched"
/// checks.
struct buffer {
  unsigned char* base = nullptr;
  unsigned char* bytes = nullptr;  ///< the data, after the lead elements
  float* data = nullptr;           ///< the same, as floats
  std::size_t total = 0, elem = 4;
  std::vector<unsigned char> snap;
  buffer() = default;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { std::free(base); }
  std::size_t size() const { return total * elem; }
  void alloc(std::size_t count, std::size_t lead, std::uint32_t salt, std::size_t elem_bytes = 4) {
    elem = elem_bytes;
    total = lead + count;
    void* p = nullptr;
    if (posix_memalign(&p, 64, size()) != 0) std::abort();
    base = static_cast<unsigned char*>(p);
    bytes = base + lead * elem;
    data = reinterpret_cast<float*>(bytes);
    for (std::size_t i = 0; i < total; ++i) {  // elem 1, 2: the low bytes
      const std::uint32_t v = 0x7FC00000u | ((salt * 0x9E37u + std::uint32_t(i)) & 0x3FFFFFu);
      std::memcpy(base + i * elem, &v, elem);
    }
  }
  /// True when `p` points into the buffer.
  bool holds(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return base != nullptr && c >= base && c < base + size();
  }
  void take_snapshot() { snap.assign(base, base + size()); }
  bool unchanged() const { return size() == 0 || std::memcmp(snap.data(), base, size()) == 0; }
  void restore() {
    if (size()) std::memcpy(base, snap.data(), size());
  }
  /// A buffer of `n` moments records (8 floats of storage each, 64-byte aligned).
  void alloc_records(std::size_t n, std::uint32_t salt) { alloc(n * kRecordFloats, 0, salt); }
  simdnorm_moments* records() const { return reinterpret_cast<simdnorm_moments*>(data); }
  static constexpr std::size_t kRecordFloats = sizeof(simdnorm_moments) / sizeof(float);
};
static_assert(sizeof(simdnorm_moments) == 32, "a moments record is 32 bytes");

/// How to read a buffer's bytes when comparing two runs' outputs.
enum class word_kind { raw, f64, f32, bf16, f16 };
word_kind word_kind_of(std::int32_t type) {
  return type == kF32    ? word_kind::f32
         : type == kBF16 ? word_kind::bf16
         : type == kF16  ? word_kind::f16
                         : word_kind::raw;
}

/// True when `a` and `b` hold the same values: the same bits word by word, or NaN in both.
/// Which NaN an operation on two NaNs returns depends on its operand order (x86 returns the
/// first operand's), which the compiler may swap in one inlined copy of a kernel and not in
/// another: NaN payloads are outside the library's bitwise contract (docs/numerics.md).
bool same_values(const unsigned char* a, const unsigned char* b, std::size_t bytes, word_kind k) {
  if (bytes == 0 || std::memcmp(a, b, bytes) == 0) return true;
  auto nan_pairs = [&](auto word, auto is_nan) {
    using W = decltype(word);
    for (std::size_t i = 0; i + sizeof(W) <= bytes; i += sizeof(W)) {
      W u, v;
      std::memcpy(&u, a + i, sizeof u);
      std::memcpy(&v, b + i, sizeof v);
      if (u != v && !(is_nan(u) && is_nan(v))) return false;
    }
    return bytes % sizeof(W) == 0;
  };
  switch (k) {
    case word_kind::f64:
      return nan_pairs(std::uint64_t(), [](std::uint64_t u) {
        return (u & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
      });
    case word_kind::f32:
      return nan_pairs(std::uint32_t(),
                       [](std::uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; });
    case word_kind::bf16:
      return nan_pairs(std::uint16_t(), [](std::uint16_t u) { return (u & 0x7fffu) > 0x7f80u; });
    case word_kind::f16:
      return nan_pairs(std::uint16_t(), [](std::uint16_t u) { return (u & 0x7fffu) > 0x7c00u; });
    case word_kind::raw: break;
  }
  return false;
}

// ---- The decoded case ---------------------------------------------------------------------------

struct fuzz_case {
  int op = 0;
  int nd = 0;  ///< dims decoded (0..8); xd.ndim holds the possibly invalid rank
  simdnorm_tensor_desc xd{}, yd{};
  // parameters, as the C structs (enum fields written raw) and their raw enum values
  simdnorm_layer_norm_params ln{};
  simdnorm_rms_norm_params rms{};
  simdnorm_lp_norm_params lp{};
  simdnorm_batch_norm_params bn{};
  simdnorm_group_norm_params gn{};
  simdnorm_instance_norm_params in{};
  simdnorm_mean_variance_norm_params mvn{};
  std::int32_t stores = 0, layout = 0, convention = 0;
  std::int32_t stage = kFull;  ///< raw stats_stage (kFull for MVN, which has none)
  float eps = 0;
  bool null_params = false;
  // BatchNorm inference parameter arrays
  bool bn_rm = false, bn_rv = false, bn_g = false, bn_b = false;

  void set_defaults() {
    ln = simdnorm_layer_norm_params_default();
    rms = simdnorm_rms_norm_params_default();
    lp = simdnorm_lp_norm_params_default();
    bn = simdnorm_batch_norm_params_default();
    gn = simdnorm_group_norm_params_default();
    in = simdnorm_instance_norm_params_default();
    mvn = simdnorm_mean_variance_norm_params_default();
  }
};

const void* params_of(const fuzz_case& c) {
  if (c.null_params) return nullptr;
  switch (c.op) {
    case kLayerNorm: return &c.ln;
    case kRmsNorm: return &c.rms;
    case kLpNorm: return &c.lp;
    case kBatchNorm: return &c.bn;
    case kGroupNorm: return &c.gn;
    case kInstanceNorm: return &c.in;
    default: return &c.mvn;
  }
}

simdnorm_status make_plan(const fuzz_case& c, const simdnorm_tensor_desc* x,
                          const simdnorm_tensor_desc* y, simdnorm_plan_t* out) {
  const void* p = params_of(c);
  switch (c.op) {
    case kLayerNorm:
      return simdnorm_plan_layer_norm(x, y, static_cast<const simdnorm_layer_norm_params*>(p), out);
    case kRmsNorm:
      return simdnorm_plan_rms_norm(x, y, static_cast<const simdnorm_rms_norm_params*>(p), out);
    case kLpNorm:
      return simdnorm_plan_lp_norm(x, y, static_cast<const simdnorm_lp_norm_params*>(p), out);
    case kBatchNorm:
      return simdnorm_plan_batch_norm(x, y, static_cast<const simdnorm_batch_norm_params*>(p), out);
    case kGroupNorm:
      return simdnorm_plan_group_norm(x, y, static_cast<const simdnorm_group_norm_params*>(p), out);
    case kInstanceNorm:
      return simdnorm_plan_instance_norm(x, y, static_cast<const simdnorm_instance_norm_params*>(p),
                                         out);
    default:
      return simdnorm_plan_mean_variance_norm(
          x, y, static_cast<const simdnorm_mean_variance_norm_params*>(p), out);
  }
}

// BatchNorm runs with its args struct (the running statistics), every other op with the
// common operands. A null `a` stays null (the misuse of a null args pointer).
const simdnorm_batch_norm_args* bn_args(const simdnorm_norm_args* a,
                                        const simdnorm_running_statistics& running,
                                        simdnorm_batch_norm_args* out) {
  if (a == nullptr) return nullptr;
  out->base = *a;
  out->running = running;
  return out;
}

simdnorm_status one_shot(const fuzz_case& c, const simdnorm_norm_args* a,
                         const simdnorm_running_statistics& running, const simdnorm_executor* e) {
  const void* p = params_of(c);
  simdnorm_batch_norm_args ba;
  switch (c.op) {
    case kLayerNorm:
      return simdnorm_layer_norm(&c.xd, &c.yd, static_cast<const simdnorm_layer_norm_params*>(p), a,
                                 e);
    case kRmsNorm:
      return simdnorm_rms_norm(&c.xd, &c.yd, static_cast<const simdnorm_rms_norm_params*>(p), a, e);
    case kLpNorm:
      return simdnorm_lp_norm(&c.xd, &c.yd, static_cast<const simdnorm_lp_norm_params*>(p), a, e);
    case kBatchNorm:
      return simdnorm_batch_norm_ex(&c.xd, &c.yd, static_cast<const simdnorm_batch_norm_params*>(p),
                                    bn_args(a, running, &ba), e);
    case kGroupNorm:
      return simdnorm_group_norm(&c.xd, &c.yd, static_cast<const simdnorm_group_norm_params*>(p), a,
                                 e);
    case kInstanceNorm:
      return simdnorm_instance_norm(&c.xd, &c.yd,
                                    static_cast<const simdnorm_instance_norm_params*>(p), a, e);
    default:
      return simdnorm_mean_variance_norm(
          &c.xd, &c.yd, static_cast<const simdnorm_mean_variance_norm_params*>(p), a, e);
  }
}

// ---- Last-error checks --------------------------------------------------------------------------

char g_sentinel_msg[256];

/// Makes the per-thread message a known one, so that a later failure must replace it.
void set_sentinel_message() {
  simdnorm_isa i;
  FUZZ_CHECK(simdnorm_isa_from_name("fuzz-sentinel", &i) == SIMDNORM_INVALID_ARGUMENT);
  std::snprintf(g_sentinel_msg, sizeof g_sentinel_msg, "%s", simdnorm_last_error_message());
  FUZZ_CHECK(g_sentinel_msg[0] != '\0');
}

void check_failure_reported(simdnorm_status s) {
  FUZZ_CHECK(s != SIMDNORM_OK);
  FUZZ_CHECK(int(s) >= 1 && int(s) <= int(SIMDNORM_UNSUPPORTED_DTYPE));
  FUZZ_CHECK(std::strcmp(fuzz_c_status_string(std::int32_t(s)), "unknown") != 0);
  const char* m = simdnorm_last_error_message();
  FUZZ_CHECK(m != nullptr && m[0] != '\0');
  FUZZ_CHECK(std::strcmp(m, g_sentinel_msg) != 0);
}

void check_no_new_message() {
  FUZZ_CHECK(std::strcmp(simdnorm_last_error_message(), g_sentinel_msg) == 0);
}

// ---- ISAs ---------------------------------------------------------------------------------------

struct isa_list {
  simdnorm_isa all[16];
  std::size_t n = 0;
  isa_list() {
    simdnorm_isa compiled[16];
    const std::size_t c = std::min<std::size_t>(simdnorm_compiled_isas(compiled, 16), 16);
    for (std::size_t i = 0; i < c; ++i)
      if (simdnorm_cpu_supports(compiled[i])) all[n++] = compiled[i];
  }
};

struct isa_reset {
  ~isa_reset() { simdnorm_reset_isa(); }
};

/// Out-of-range and not-runnable ISA values: errors, and nothing changes.
void probe_isa_values(std::uint8_t code) {
  constexpr std::int32_t kProbe[8] = {-1, 7, 99, kI32Min, kI32Max, 5, 0x40000000, 6};
  const std::int32_t v = kProbe[code % 8];
  FUZZ_CHECK(fuzz_c_status_string(v) != nullptr);
  const char* name = fuzz_c_isa_name(v);
  FUZZ_CHECK(name != nullptr);
  const int lanes = fuzz_c_isa_lanes(v);
  (void)fuzz_c_isa_has_fma(v);
  if (lanes == 0) FUZZ_CHECK(std::strcmp(name, "unknown") == 0);
  const int runnable = fuzz_c_cpu_supports(v);
  const int before = int(simdnorm_active_isa());
  set_sentinel_message();
  const simdnorm_status s = fuzz_c_force_isa(v);
  if (runnable) {
    FUZZ_CHECK(s == SIMDNORM_OK);
    simdnorm_reset_isa();
  } else {
    FUZZ_CHECK(s == SIMDNORM_INVALID_ARGUMENT || s == SIMDNORM_UNSUPPORTED_ISA);
    check_failure_reported(s);
  }
  FUZZ_CHECK(int(simdnorm_active_isa()) == before);
}

// ---- Geometry of the logical tensor -------------------------------------------------------------

bool strides_equal_nonunit(const simdnorm_tensor_desc& a, const simdnorm_tensor_desc& b, int nd) {
  for (int i = 0; i < nd; ++i)
    if (a.shape[i] != 1 && a.strides[i] != b.strides[i]) return false;
  return true;
}

/// Dims [first, nd) dense row-major (size-1 dims ignored).
bool dense_from(const simdnorm_tensor_desc& t, int nd, int first) {
  std::int64_t expect = 1;
  for (int i = nd - 1; i >= first; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

/// Dense in the dim order `order` (outermost first), size-1 dims ignored.
bool dense_in_order(const simdnorm_tensor_desc& t, int nd, const int* order) {
  std::int64_t expect = 1;
  for (int k = nd - 1; k >= 0; --k) {
    const int d = order[k];
    if (t.shape[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

/// Row-major with every dim dense except that dim 0 may have a larger stride.
bool dense_padded_batch(const simdnorm_tensor_desc& t, int nd) {
  if (!dense_from(t, nd, 1)) return false;
  std::int64_t inner = 1;
  for (int i = 1; i < nd; ++i) inner *= t.shape[i];
  return t.shape[0] == 1 || t.strides[0] >= inner;
}

/// Outer dims [0, first) row-major with padding allowed: each stride (size-1 dims skipped)
/// at least the extent of the dims inside it, the innermost at least `cols`.
bool padded_rows(const simdnorm_tensor_desc& t, int first, std::int64_t cols) {
  __int128 extent = cols;  // up to an extent of INT64_MAX plus a row
  for (int i = first - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] < extent) return false;
    extent = __int128(t.strides[i]) * (t.shape[i] - 1) + extent;
  }
  return true;
}

enum class expect { reject, accept, either };

/// True when two of the elements at `offs` (each below `span`) are the same memory (exact, by
/// enumeration).
bool elements_overlap(const std::vector<std::int64_t>& offs, std::int64_t span) {
  std::vector<bool> seen(std::size_t(span), false);
  for (const std::int64_t o : offs) {
    if (seen[std::size_t(o)]) return true;
    seen[std::size_t(o)] = true;
  }
  return false;
}

/// Memory a call writes: elements of `elem` bytes at start + o elem for each offset o.
struct region {
  const void* start;
  const std::vector<std::int64_t>* offs;
  std::size_t elem;
};

/// True when every byte of `b` outside the regions (those that start in it) holds its
/// snapshot.
bool untouched_except(const buffer& b, std::initializer_list<region> regions) {
  std::vector<char> written(b.size(), 0);
  for (const region& r : regions) {
    if (r.start == nullptr || !b.holds(r.start)) continue;
    const std::size_t at = std::size_t(static_cast<const unsigned char*>(r.start) - b.base);
    for (const std::int64_t o : *r.offs)
      for (std::size_t k = 0, i = at + std::size_t(o) * r.elem; k < r.elem; ++k, ++i)
        if (i < written.size()) written[i] = 1;
  }
  for (std::size_t i = 0; i < b.size(); ++i)
    if (!written[i] && b.base[i] != b.snap[i]) return false;
  return true;
}

// ---- The per-call check -------------------------------------------------------------------------

struct host_pool {
  std::size_t chunk = 1;
  bool reverse = false;
  std::vector<std::size_t> calls;  // n of every parallel_for
};

void pool_parallel_for(void* user, std::size_t n, simdnorm_task_fn task, void* ctx) {
  auto* p = static_cast<host_pool*>(user);
  p->calls.push_back(n);
  const std::size_t chunks = (n + p->chunk - 1) / p->chunk;
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t j = p->reverse ? chunks - 1 - k : k;
    task(ctx, j * p->chunk, std::min(n, (j + 1) * p->chunk));
  }
}

/// All memory one execution may touch, laid out from the decoded case.
struct arena {
  buffer xbuf, ybuf;           // ybuf unused when x and y share one buffer
  std::size_t x_at = 0;        ///< x's first byte in xbuf
  unsigned char* y = nullptr;  ///< y's first byte, in ybuf or xbuf
  buffer gamma, beta, mean, rstd, run_mean, run_var;
  buffer moments_out, moments_in;                             // records (buffer::records)
  buffer resid, resid_out, bias, gate, mod_scale, mod_shift;  // the row ops' fused operands
  buffer y_scale, y_zero_point, amax;                         // and their quantized outputs
  std::int64_t counter = 0, counter_snap = 0;
  bool has_counter = false;
  unsigned char* x() { return xbuf.bytes + x_at; }
  /// Every buffer.
  std::array<buffer*, 19> all() {
    return {&xbuf,      &ybuf,        &gamma,      &beta,         &mean,      &rstd, &run_mean,
            &run_var,   &moments_out, &moments_in, &resid,        &resid_out, &bias, &gate,
            &mod_scale, &mod_shift,   &y_scale,    &y_zero_point, &amax};
  }
  /// The buffers whose elements a call writes only where y or h lies (checked bytewise).
  std::array<buffer*, 11> inputs() {
    return {&xbuf,      &ybuf, &gamma, &beta,      &moments_in, &resid,
            &resid_out, &bias, &gate,  &mod_scale, &mod_shift};
  }
  void snapshot_all() {
    for (buffer* b : all()) b->take_snapshot();
    counter_snap = counter;
  }
  bool all_unchanged() {
    for (const buffer* b : all())
      if (!b->unchanged()) return false;
    return counter == counter_snap;
  }
  void restore_all() {
    for (buffer* b : all()) b->restore();
    counter = counter_snap;
  }
};

struct op_shape {
  bool known = false;  ///< the op's geometry is defined (plan-valid parameters)
  std::int64_t numel = 0;
  std::int64_t units = 0;     ///< rows / statistics groups
  std::int64_t affine = 0;    ///< entries of gamma and beta in norm_args (0: none taken)
  std::int64_t channels = 0;  ///< BatchNorm C
  bool takes_beta = false, takes_mean = false, takes_rstd = false;
};

// ---- simdnorm_merge_moments ---------------------------------------------------------------------

/// The documented rules of simdnorm_merge_moments: pointers and parts when n > 0, one kind per
/// index (part 0's), counts >= 1 whose sum fits in int64.
bool merge_valid(const simdnorm_moments* parts, std::size_t num_parts, std::size_t n,
                 const simdnorm_moments* out) {
  if (n == 0) return true;
  if (parts == nullptr || out == nullptr || num_parts == 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t total = 0;
    for (std::size_t p = 0; p < num_parts; ++p) {
      const simdnorm_moments& q = parts[p * n + i];
      const std::int32_t kind = get_enum(q.kind);
      if (kind != get_enum(parts[i].kind) || kind < 1 || kind > 3 || q.count < 1) return false;
      if (__builtin_add_overflow(total, q.count, &total)) return false;
    }
  }
  return true;
}

/// Checks merged record `got` of index i against a two-pass fold in long double: the counts
/// exact; the mean and M2 (centered) within the roundings of a left fold of Chan's formula in
/// double (a few u = 2^-53 of the largest mean per part, and the error e of delta through
/// w delta^2 with sum w <= N and |delta| <= 2 max |mean_p - mean|); sums within 2 parts u.
void check_merged(const std::vector<simdnorm_moments>& parts, std::size_t num_parts, std::size_t n,
                  std::size_t i, const simdnorm_moments& got) {
  std::int64_t total = 0;
  long double count = 0, sum = 0, sum_m2 = 0, max_mean = 0;
  for (std::size_t p = 0; p < num_parts; ++p) {
    const simdnorm_moments& q = parts[p * n + i];
    total += q.count;
    count += q.count;
    sum += (long double)q.count * q.mean;
    sum_m2 += q.m2;
    max_mean = std::max(max_mean, std::fabs((long double)q.mean));
  }
  FUZZ_CHECK(got.count == total);
  FUZZ_CHECK(get_enum(got.kind) == get_enum(parts[i].kind));
  FUZZ_CHECK(got.reserved == 0);
  if (count > 0x1p53L) return;  // the double weights are no longer exact
  const long double u = 0x1p-53L, k = (long double)num_parts;
  if (get_enum(parts[i].kind) != 1) {
    FUZZ_CHECK(got.mean == parts[i].mean);  // 0
    FUZZ_CHECK(std::fabs(got.m2 - sum_m2) <= 2 * k * u * sum_m2);
    return;
  }
  const long double mean = sum / count;
  long double m2 = sum_m2, max_dev = 0;
  for (std::size_t p = 0; p < num_parts; ++p) {
    const simdnorm_moments& q = parts[p * n + i];
    m2 += (long double)q.count * (q.mean - mean) * (q.mean - mean);
    max_dev = std::max(max_dev, std::fabs(q.mean - mean));
  }
  const long double mean_tol = 16 * k * u * max_mean, e = mean_tol + 4 * u * max_mean;
  const long double m2_tol =
      16 * k * u * (sum_m2 + m2) + 8 * count * max_dev * e + 2 * count * e * e;
  if (std::fabs(got.mean - mean) > mean_tol || std::fabs(got.m2 - m2) > m2_tol) {
    std::fprintf(
        stderr,
        "merged[%zu]: mean %.17g m2 %.17g, reference %.17Lg (tol %.3Lg), %.17Lg (tol %.3Lg)\n", i,
        got.mean, got.m2, mean, mean_tol, m2, m2_tol);
    FUZZ_CHECK(!"merged moments match the two-pass reference");
  }
}

/// simdnorm_merge_moments on random records: bad ones (a kind other than part 0's or no kind,
/// a count < 1, counts whose sum overflows, null pointers, no parts) are refused and write
/// nothing; good ones (out apart or in place over the first part) merge as check_merged says.
void probe_merge_moments(rng r) {
  const std::size_t num_parts = r.next() % 8 == 0 ? 0 : 1 + r.next() % 4;
  const std::size_t n = r.next() % 5;
  std::vector<simdnorm_moments> parts(std::max<std::size_t>(num_parts * n, 1));
  std::memset(parts.data(), 0, parts.size() * sizeof parts[0]);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t kind = std::int32_t(1 + r.next() % 3);
    // the parts of one index: a common offset (the fold then cancels) plus a spread
    const double offset = r.next() % 2 ? std::ldexp(r.uniform(), int(r.next() % 21)) : 0.0;
    const double spread = std::ldexp(1.0, int(r.next() % 41) - 20);
    for (std::size_t p = 0; p < num_parts; ++p) {
      simdnorm_moments& q = parts[p * n + i];
      q.count = std::int64_t(1 + r.next() % (r.next() % 4 == 0 ? 1u << 20 : 64u));
      q.mean = kind == 1 ? offset + r.uniform() * spread : 0.0;
      q.m2 = double(q.count) * spread * spread * std::fabs(r.uniform());
      set_enum(&q.kind, kind);
    }
  }
  if (num_parts * n > 0) {
    simdnorm_moments& q = parts[r.next() % (num_parts * n)];
    constexpr std::int32_t kNotKinds[4] = {0, 4, -1, kI32Min};
    constexpr std::int64_t kBadCounts[3] = {0, -1, kI64Min};
    switch (r.next() % 12) {
      case 0: set_enum(&q.kind, 1 + (get_enum(q.kind) + std::int32_t(r.next() % 2)) % 3); break;
      case 1: set_enum(&q.kind, kNotKinds[r.next() % 4]); break;
      case 2: q.count = kBadCounts[r.next() % 3]; break;
      case 3: {  // one index's counts sum past INT64_MAX (with 2 parts or more) or reach it
        const std::size_t i = std::size_t(r.next() % n);
        const std::int64_t each = num_parts > 1 ? kI64Max / std::int64_t(num_parts) + 1 : kI64Max;
        for (std::size_t p = 0; p < num_parts; ++p) parts[p * n + i].count = each;
        break;
      }
      default: break;
    }
  }
  std::vector<simdnorm_moments> out_store(std::max<std::size_t>(n, 1));
  for (simdnorm_moments& o : out_store) std::memset(&o, 0xA5, sizeof o);
  const std::uint64_t where = r.next() % 16;  // 0: parts null, 1: out null, 2-5: in place
  const simdnorm_moments* in = where == 0 ? nullptr : parts.data();
  simdnorm_moments* out = where == 1                        ? nullptr
                          : where <= 5 && num_parts * n > 0 ? parts.data()
                                                            : out_store.data();
  const std::vector<simdnorm_moments> parts_in = parts, out_in = out_store;
  auto same = [](const std::vector<simdnorm_moments>& a, const std::vector<simdnorm_moments>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * sizeof a[0]) == 0;
  };
  set_sentinel_message();
  const simdnorm_status s = simdnorm_merge_moments(in, num_parts, n, out);
  if (!merge_valid(in, num_parts, n, out)) {
    check_failure_reported(s);
    FUZZ_CHECK(same(parts, parts_in) && same(out_store, out_in));
    return;
  }
  FUZZ_CHECK(s == SIMDNORM_OK);
  check_no_new_message();
  if (out == parts.data())  // in place: the first part's records only
    FUZZ_CHECK(std::memcmp(parts.data() + n, parts_in.data() + n,
                           (parts.size() - n) * sizeof parts[0]) == 0);
  else
    FUZZ_CHECK(same(parts, parts_in));
  if (out != out_store.data() || n == 0) FUZZ_CHECK(same(out_store, out_in));
  for (std::size_t i = 0; i < n; ++i) check_merged(parts_in, num_parts, n, i, out[i]);
}

/// The exact record of a unit, from its float64 statistics (the apply stage's input).
simdnorm_moments record_of(fuzzref::family f, const fuzzref::unit_ref& q) {
  simdnorm_moments r;
  std::memset(&r, 0, sizeof r);
  const int kind = fuzzref::moments_kind(f);
  r.count = std::int64_t(q.n);
  r.mean = kind == 1 ? q.mean : 0.0;
  r.m2 = fuzzref::record_m2(f, q);
  set_enum(&r.kind, kind);
  return r;
}

/// The op reduced to units for the float64 reference (fuzz_reference.hpp): every element's
/// unit and gamma / beta index, the family and its plan-time parameters. The call's arguments
/// (gamma, beta, the running statistics before the call) are the caller's to add.
fuzzref::model model_of(const fuzz_case& c, const std::int64_t* shape, int ca, const op_shape& os) {
  const int nd = c.nd;
  const std::int64_t numel = os.numel;
  fuzzref::model md;
  md.units = std::size_t(os.units);
  md.eps = double(c.eps);
  md.unit_of.resize(std::size_t(numel));
  std::int64_t idx[SIMDNORM_MAX_DIMS] = {};
  const std::int64_t cols = c.op <= kLpNorm ? numel / os.units : 1;
  const bool with_aff = c.op != kLpNorm && c.op != kMvn && !(c.op == kBatchNorm && !c.bn.training);
  if (with_aff) md.aff_of.resize(std::size_t(numel));
  bool red[SIMDNORM_MAX_DIMS] = {};
  if (c.op == kMvn)
    for (int i = 0; i < c.mvn.num_axes; ++i)
      red[c.mvn.axes[i] < 0 ? c.mvn.axes[i] + nd : c.mvn.axes[i]] = true;
  const std::int64_t C = c.op >= kBatchNorm && c.op <= kInstanceNorm ? shape[ca] : 1;
  const std::int64_t G = c.op == kGroupNorm ? c.gn.num_groups : C;
  for (std::int64_t i = 0; i < numel; ++i) {
    std::int64_t u = 0, a = -1;
    switch (c.op) {
      case kLayerNorm:
      case kRmsNorm:
      case kLpNorm: u = i / cols, a = i % cols; break;
      case kBatchNorm: u = idx[ca], a = idx[ca]; break;
      case kGroupNorm:
      case kInstanceNorm: {
        const std::int64_t cg = C / G, g = idx[ca] / cg;
        u = idx[0] * G + g;
        a = c.op == kGroupNorm && c.gn.per_group_affine ? g : idx[ca];
        break;
      }
      default:
        for (int d = 0; d < nd; ++d)
          if (!red[d]) u = u * shape[d] + idx[d];
        break;
    }
    md.unit_of[std::size_t(i)] = u;
    if (with_aff) md.aff_of[std::size_t(i)] = a;
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  switch (c.op) {
    case kLayerNorm:
      md.fam = fuzzref::family::centered, md.compensated = c.ln.compensated_mean != 0;
      break;
    case kRmsNorm: md.fam = fuzzref::family::rms; break;
    case kLpNorm: md.fam = c.lp.p == 1 ? fuzzref::family::l1 : fuzzref::family::l2; break;
    case kBatchNorm:
      md.relu = c.bn.fuse_relu != 0;
      if (!c.bn.training) {
        md.fam = fuzzref::family::folded;
        md.bn_mean = c.bn.running_mean;
        md.bn_var = c.bn.running_var;
        md.bn_gamma = c.bn.gamma;
        md.bn_beta = c.bn.beta;
      } else {
        md.fam = fuzzref::family::centered;
        md.bn_training = true;
        md.bn_pytorch = c.convention == 0;
        md.bn_cumulative = c.bn.cumulative != 0;
        md.momentum = double(c.bn.momentum);
      }
      break;
    case kMvn: md.fam = fuzzref::family::mvn; break;
    default: md.fam = fuzzref::family::centered; break;
  }
  md.folds_scale = c.op >= kBatchNorm;
  return md;
}

// ---- The row ops' fused operands (docs/fusions.md) ----------------------------------------------

constexpr std::int32_t kDynamic = 0, kPerTensor = 1, kAsymmetric = 2;  // simdnorm_quant_scaling

/// Where residual_out (h) goes: apart, over the residual, over x (both allowed), over y, partly
/// over x or the residual (refused), one of the pair missing (refused), and the residual being
/// x or y itself (allowed by the library, not documented either way).
/// With residual_after_norm the same nibble places the residual, y = norm(x) + residual, which
/// takes no residual_out: apart (kResApart, kResNoOut), y itself (kResOverY: allowed with x's
/// layout and type, kResIsY: where y has them, else apart), x itself (kResIsX; not documented
/// either way), partly over x, partly over y (kResPartlyOverResidual), missing (kResNoIn), or
/// with a residual_out, over the residual or over x (all refused).
enum residual_mode {
  kResApart,
  kResOverResidual,
  kResOverX,
  kResOverY,
  kResPartlyOverX,
  kResPartlyOverResidual,
  kResNoOut,
  kResNoIn,
  kResIsX,
  kResIsY
};
/// Where the gate goes (RMSNorm): apart, y (allowed with y's layout and type), h, partly over
/// y (refused), x; and gate_before_norm with the gate apart, as y, or missing (refused).
enum gate_mode {
  kGateApart,
  kGateIsY,
  kGateIsH,
  kGatePartlyOverY,
  kGateIsX,
  kGateBefore,
  kGateBeforeIsY,
  kGateBeforeNone
};

/// The fused operands of a row-op call (LayerNorm, RMSNorm, Lp), from header bytes 44-53, which
/// the row ops use for nothing else. Byte 44 bit 7 makes the call with the op's args struct
/// (simdnorm_<op>_ex, simdnorm_plan_execute_<op>, simdnorm_plan_run_<op>); its bits 0-6 add the
/// residual add (placed by byte 45's low nibble), the residual bias, the gate (RMSNorm; byte
/// 45's high nibble), adaLN modulation (bytes 46-47), the weight offset (byte 48), an 8-bit y
/// or x, or a y type that is not one, and the quantization parameters (bytes 49-51) and
/// row_amax. Byte 52 gives the quantized outputs right or one of them wrong, and sometimes
/// another row op's args struct; byte 53 picks the fused operands' values (bits 0-1) and
/// makes the residual a post-norm one (bit 7, LayerNorm and RMSNorm: residual_after_norm; byte
/// 45's low nibble places it too, residual_mode). The Lp norm takes the residual and the y type
/// only. The float types of x and y (and so of the residual, residual_out and gate) are the
/// call's (decode_types).
struct fused_case {
  bool on = false;
  bool quant_outputs = false;  ///< the args struct has quantized outputs (not the Lp norm's)
  bool residual = false, bias = false, gate = false, modulation = false;
  int residual_mode = kResApart, gate_mode = kGateApart;
  int mod_place = 0;  ///< 0, 1: apart; 2: the shift over y; 3: the scale over h (or y)
  bool null_scale = false, null_shift = false;
  std::int64_t stride = 0;  ///< modulation_stride
  int outputs_mode = 0;     ///< 4, 5, 6: y_scale, y_zero_point, amax given where not taken or
                            ///< missing where required; otherwise as the plan takes them
  bool cross_op = false;    ///< another row op's args struct (plan calls): refused
  int value_mode = 0;
  // the plan's parameters
  std::int32_t x_type = kF32, y_type = kF32, scaling = kDynamic, block = 0, zero_point = 0;
  float scale = 1.f, weight_offset = 0.f;
  std::int64_t tokens = 0;
  bool row_amax = false, gate_before = false;
  bool post_norm = false;  ///< residual_after_norm: y = norm(x) + residual

  /// NULL params: the defaults, the tensor types kept.
  void default_params() {
    scaling = kDynamic, block = 0, zero_point = 0, scale = 1.f, weight_offset = 0.f;
    tokens = 0, row_amax = false, gate_before = false, post_norm = false;
  }
};

/// rows itself or one of its divisors up to 64, by `pick`.
std::int64_t pick_divisor(std::int64_t rows, std::uint8_t pick) {
  std::int64_t d[65];
  int n = 0;
  for (std::int64_t k = 1; k <= std::min<std::int64_t>(rows, 64); ++k)
    if (rows % k == 0) d[n++] = k;
  if (rows > 64 || n == 0) d[n++] = std::max<std::int64_t>(rows, 1);
  return d[pick % n];
}

/// modulation_tokens T (byte m bits 0-2), the stride (bits 3-5) and where scale and shift lie
/// (bits 6-7); byte a picks T's divisor and the stride's padding.
void decode_modulation(std::uint8_t m, std::uint8_t a, std::int64_t rows, std::int64_t cols,
                       fused_case* f) {
  switch (m % 8) {
    case 0: f->tokens = rows; break;
    case 1: f->tokens = 1; break;
    case 3: f->tokens = wrap_add(rows, 1); break;  // divides no row count (or wraps): refused
    case 4: f->tokens = -1; break;
    case 5: f->tokens = kI64Max; break;
    case 6: f->tokens = 0; break;  // modulation operands without a modulation plan: refused
    default: f->tokens = pick_divisor(rows, a); break;
  }
  switch ((m >> 3) % 8) {
    case 0: f->stride = 0; break;  // one row for all
    case 1: f->stride = cols; break;
    case 2: f->stride = wrap_add(cols, 1 + (a >> 6)); break;
    case 3: f->stride = wrap_mul(6, cols); break;  // DiT's chunked [B, 6 D]
    case 4: f->stride = cols - 1; break;           // shorter than a row (cols 1: 0, valid)
    case 5: f->stride = -cols; break;
    case 6: f->stride = kI64Max / 2; break;  // one batch: valid; more: the span overflows
    default:
      f->stride = cols;
      (a & 1 ? f->null_scale : f->null_shift) = true;
      break;
  }
  f->mod_place = m >> 6;
}

/// The tensor types and quantization: byte t picks y's type (an 8-bit one, the float y the call
/// decoded, and rarely an 8-bit x or a value that is not a type) and the scaling, b the block,
/// s the static scale and zero point.
void decode_quant(std::uint8_t t, std::uint8_t b, std::uint8_t s, std::int64_t cols,
                  fused_case* f) {
  constexpr std::int32_t kYTypes[8] = {kI8, kI8, kU8, kF8, kF8, -1, -1, 6};  // -1: the float y
  if (kYTypes[t % 8] != -1) f->y_type = kYTypes[t % 8];
  if (t % 8 == 6) f->x_type = kI8;  // 8-bit types are outputs: refused
  constexpr std::int32_t kScalings[8] = {kDynamic,    kDynamic,   kAsymmetric,         kPerTensor,
                                         kAsymmetric, kPerTensor, 3 /* per channel */, 77};
  f->scaling = kScalings[(t >> 3) % 8];
  constexpr std::int32_t kBlocks[12] = {0, 0, 0, 32, 64, 128, 256, -1 /* cols */, 16, 48, 257, -32};
  const std::int32_t block = kBlocks[b % 12];
  f->block = block == -1 ? std::int32_t(std::min<std::int64_t>(cols, kI32Max)) : block;
  constexpr float kScales[10] = {1.f,  0.02f, 1e-3f,    50.f,   0.f,
                                 -1.f, NAN,   INFINITY, 1e-39f, FLT_MAX};
  f->scale = kScales[(s & 15) % 10];
  constexpr std::int32_t kZeroPoints[8] = {0, 0, -3, 128, 255, -128, 256, -129};
  f->zero_point = kZeroPoints[(s >> 4) % 8];
}

fused_case decode_fused(const std::uint8_t* h, int op, std::int64_t rows, std::int64_t cols,
                        std::int32_t x_type, std::int32_t y_type) {
  fused_case f;
  const std::uint8_t flags = h[44];
  f.on = op <= kLpNorm && (flags & 0x80);
  f.x_type = x_type, f.y_type = y_type;
  if (!f.on) return f;
  const bool ln_rms = op != kLpNorm;
  f.quant_outputs = ln_rms;
  f.residual = flags & 1;
  f.bias = flags & 2;
  f.gate = op == kRmsNorm && (flags & 4);
  f.modulation = ln_rms && (flags & 8);
  f.row_amax = ln_rms && (flags & 0x40);
  constexpr int kResidualModes[16] = {
      kResApart, kResApart, kResApart, kResOverResidual, kResOverResidual,
      kResOverX, kResOverX, kResOverY, kResPartlyOverX,  kResPartlyOverResidual,
      kResNoOut, kResNoIn,  kResIsX,   kResIsY,          kResOverResidual,
      kResOverX};
  f.residual_mode = kResidualModes[h[45] & 15];
  f.gate_mode = (h[45] >> 4) % 8;
  f.gate_before = f.gate && f.gate_mode >= kGateBefore;
  if (ln_rms && (flags & 0x10)) {
    constexpr float kOffsets[10] = {1.f, -1.f,     0.5f,      1e-3f, 0.f,
                                    NAN, INFINITY, -INFINITY, 1e30f, 3e38f};
    f.weight_offset = kOffsets[h[48] % 10];
  }
  if (f.modulation) decode_modulation(h[46], h[47], rows, cols, &f);
  if (flags & 0x20) decode_quant(h[49], h[50], h[51], cols, &f);
  if (!ln_rms) f.scaling = kDynamic, f.block = 0, f.x_type = x_type;  // the y type only
  f.outputs_mode = h[52] & 7;
  f.cross_op = (h[52] >> 3) % 8 == 7;
  f.value_mode = h[53] % 4;
  f.post_norm = ln_rms && (h[53] & 0x80);
  return f;
}

/// The fused parameters into the plan's parameters and the tensor descriptors.
void apply_fused(const fused_case& f, fuzz_case* c) {
  set_enum(&c->xd.type, f.x_type);
  set_enum(&c->yd.type, f.y_type);
  simdnorm_quant_params* q = c->op == kLayerNorm ? &c->ln.quant : &c->rms.quant;
  if (c->op == kLpNorm || c->null_params) return;
  set_enum(&q->scaling, f.scaling);
  q->block = f.block;
  q->scale = f.scale;
  q->zero_point = f.zero_point;
  q->row_amax = f.row_amax;
  if (c->op == kLayerNorm) {
    c->ln.weight_offset = f.weight_offset;
    c->ln.modulation_tokens = f.tokens;
    c->ln.residual_after_norm = f.post_norm;
  } else {
    c->rms.weight_offset = f.weight_offset;
    c->rms.modulation_tokens = f.tokens;
    c->rms.gate_before_norm = f.gate_before;
    c->rms.residual_after_norm = f.post_norm;
  }
}

/// The documented plan-time rules of the fused parameters (plan.hpp: quant_params,
/// layer_norm_params, rms_norm_params): true when the plan must be refused.
bool fused_plan_refused(const fused_case& f, int op, std::int32_t stage, std::int64_t rows,
                        std::int64_t cols) {
  const bool y8 = is_8bit(f.y_type);
  const bool x_float = f.x_type == kF32 || is_16bit(f.x_type);
  if (!x_float || !(y8 || f.y_type == kF32 || is_16bit(f.y_type))) return true;
  if (op == kLpNorm) return y8;  // 8-bit outputs are LayerNorm's and RMSNorm's
  const bool dynamic = f.scaling == kDynamic || f.scaling == kAsymmetric;
  if (!dynamic && f.scaling != kPerTensor) return true;  // per channel, or not a scaling
  if (!y8 && (f.scaling != kDynamic || f.block != 0)) return true;
  if (f.scaling == kDynamic && f.y_type == kU8) return true;     // no symmetric u8
  if (f.scaling == kAsymmetric && f.y_type == kF8) return true;  // no fp8 zero point
  if ((y8 || f.row_amax) && stage != kFull) return true;         // whole rows
  if (dynamic && f.block != 0 && (f.block < 32 || f.block > 256 || cols % f.block != 0))
    return true;
  if (f.scaling == kPerTensor) {
    if (!(f.scale > 0.f && f.scale <= FLT_MAX) || !(1.f / f.scale <= FLT_MAX)) return true;
    const int lo = f.y_type == kI8 ? -128 : 0;
    const int hi = f.y_type == kI8 ? 127 : f.y_type == kU8 ? 255 : 0;
    if (f.zero_point < lo || f.zero_point > hi) return true;
  }
  if (!std::isfinite(f.weight_offset)) return true;
  if (f.tokens < 0 || (f.tokens > 0 && rows % f.tokens != 0)) return true;
  if (f.tokens > 0 && stage == kMoments) return true;  // no y to modulate
  // the residual is added as y is stored: a float y, without the amax, adaLN or the gate before
  if (f.post_norm && (stage == kMoments || y8 || f.row_amax || f.tokens != 0 || f.gate_before))
    return true;
  return f.gate_before && (stage != kFull || y8 || f.tokens != 0);
}

/// Floats the modulation rows span, (B - 1) stride + row length; 0 where the stride is
/// refused or the span's bytes overflow int64 (the plan reads none of it then).
std::int64_t modulation_span(const fused_case& f, std::int64_t rows, std::int64_t cols) {
  if (f.stride < 0 || (f.stride > 0 && f.stride < cols)) return 0;
  const std::int64_t batches =
      f.stride == 0 || f.tokens <= 0 ? 1 : std::max<std::int64_t>(rows / f.tokens, 1);
  const __int128 span = __int128(batches - 1) * f.stride + cols;
  return span * 4 > kI64Max ? 0 : std::int64_t(span);
}

/// The fused operands as the op's args struct takes them.
struct fused_ptrs {
  simdnorm_residual_operands residual{};
  simdnorm_quantized_outputs quant{};
  simdnorm_modulation_operands modulation{};
  const void* gate = nullptr;
};

/// The row ops' args structs, from the common operands and the fused ones.
struct row_args {
  simdnorm_layer_norm_args ln;
  simdnorm_rms_norm_args rms;
  simdnorm_lp_norm_args lp;
  row_args(const simdnorm_norm_args& a, const fused_ptrs& p)
      : ln{a, p.residual, p.quant, p.modulation},
        rms{a, p.residual, p.quant, p.modulation, p.gate},
        lp{a, p.residual} {}
};

/// The op whose args struct a call passes to a plan of `op` (cross: another row op's).
int args_op(int op, bool cross) { return !cross ? op : op == kLayerNorm ? kRmsNorm : kLayerNorm; }

simdnorm_status execute_fused(simdnorm_plan_t plan, int op, const row_args* a,
                              const simdnorm_executor* e) {
  switch (op) {
    case kLayerNorm: return simdnorm_plan_execute_layer_norm(plan, a ? &a->ln : nullptr, e);
    case kRmsNorm: return simdnorm_plan_execute_rms_norm(plan, a ? &a->rms : nullptr, e);
    default: return simdnorm_plan_execute_lp_norm(plan, a ? &a->lp : nullptr, e);
  }
}

simdnorm_status run_fused(simdnorm_plan_t plan, int op, const row_args* a, std::size_t phase,
                          std::size_t begin, std::size_t end) {
  switch (op) {
    case kLayerNorm:
      return simdnorm_plan_run_layer_norm(plan, a ? &a->ln : nullptr, phase, begin, end);
    case kRmsNorm:
      return simdnorm_plan_run_rms_norm(plan, a ? &a->rms : nullptr, phase, begin, end);
    default: return simdnorm_plan_run_lp_norm(plan, a ? &a->lp : nullptr, phase, begin, end);
  }
}

simdnorm_status one_shot_fused(const fuzz_case& c, const row_args* a, const simdnorm_executor* e) {
  const void* p = params_of(c);
  switch (c.op) {
    case kLayerNorm:
      return simdnorm_layer_norm_ex(&c.xd, &c.yd, static_cast<const simdnorm_layer_norm_params*>(p),
                                    a ? &a->ln : nullptr, e);
    case kRmsNorm:
      return simdnorm_rms_norm_ex(&c.xd, &c.yd, static_cast<const simdnorm_rms_norm_params*>(p),
                                  a ? &a->rms : nullptr, e);
    default:
      return simdnorm_lp_norm_ex(&c.xd, &c.yd, static_cast<const simdnorm_lp_norm_params*>(p),
                                 a ? &a->lp : nullptr, e);
  }
}

/// Calls `call` with the row ops' args structs made from `a` and the fused operands (a null
/// `a` stays null: the misuse of a null args pointer).
template <class Call>
simdnorm_status with_row_args(const simdnorm_norm_args* a, const fused_ptrs& p, Call call) {
  if (a == nullptr) return call(nullptr);
  const row_args r(*a, p);
  return call(&r);
}

/// What the placement of the fused operands needs of the call.
struct call_geometry {
  const std::vector<std::int64_t>* xo = nullptr;  ///< x's element offsets (logical order)
  std::int64_t x_span = 0, y_bytes = 0, rows = 0, cols = 0, segs = 1;
  std::int32_t x_type = kF32;  ///< also the residual's, residual_out's and the gate's
  /// y has x's type and strides, in a buffer of its own: the residual and the gate may be it.
  bool y_apart_same_layout = false;
  /// y's buffer has room for x's span from y on: h may go over y (a moments plan takes it).
  bool x_fits_y = false;
};

/// Allocates the fused operands where their modes put them and writes their values (at x's
/// offsets; modulation rows and the bias dense). `value(spread)` gives one value.
template <class Value>
fused_ptrs place_fused(const fused_case& f, const call_geometry& g, rng& r, arena& m, Value value) {
  fused_ptrs p;
  unsigned char* x = m.x();
  unsigned char* y = m.y;
  const std::size_t span = std::size_t(g.x_span), xe = elem_bytes(g.x_type);
  const std::int64_t y_elems = g.y_bytes / std::int64_t(xe);  // of x's type, within y
  auto fill = [&](unsigned char* at, double spread) {
    for (const std::int64_t o : *g.xo) store_elem(at, o, g.x_type, value(spread));
    return at;
  };
  auto own = [&](buffer& b, std::size_t n, std::uint32_t salt, double spread) {
    b.alloc(n, 0, salt, xe);
    return fill(b.bytes, spread);
  };
  auto out = [&]() {
    m.resid_out.alloc(span, 0, 21, xe);
    return m.resid_out.bytes;
  };
  auto partly = [&](std::int64_t n) {  // an offset inside a span of n >= 2, in bytes
    return xe * std::size_t(1 + r.next() % std::uint64_t(n - 1));
  };
  if (f.residual && f.post_norm) {
    unsigned char *in = nullptr, *h = nullptr;
    switch (f.residual_mode) {
      case kResApart:
      case kResNoOut: in = own(m.resid, span, 20, 2); break;
      case kResOverResidual: in = h = own(m.resid, span, 20, 2); break;
      case kResOverX: in = own(m.resid, span, 20, 2), h = x; break;
      case kResOverY: in = g.y_apart_same_layout ? fill(y, 2) : y; break;
      case kResPartlyOverX:
        in = g.x_span > 1 ? x + partly(g.x_span) : own(m.resid, span, 20, 2);
        break;
      case kResPartlyOverResidual:  // partly over y
        in = y_elems > 1 ? y + partly(y_elems) : own(m.resid, span, 20, 2);
        break;
      case kResNoIn: break;
      case kResIsX: in = x; break;
      default:  // kResIsY
        in = g.y_apart_same_layout ? fill(y, 2) : own(m.resid, span, 20, 2);
        break;
    }
    p.residual.in = in;
    p.residual.out = h;
  } else if (f.residual) {
    unsigned char *in = nullptr, *h = nullptr;
    switch (f.residual_mode) {
      case kResApart: in = own(m.resid, span, 20, 2), h = out(); break;
      case kResOverResidual: in = h = own(m.resid, span, 20, 2); break;
      case kResOverX: in = own(m.resid, span, 20, 2), h = x; break;
      case kResOverY: in = own(m.resid, span, 20, 2), h = g.x_fits_y ? y : out(); break;
      case kResPartlyOverX:  // a partial overlap needs two elements; with one, apart
        in = own(m.resid, span, 20, 2), h = g.x_span > 1 ? x + partly(g.x_span) : out();
        break;
      case kResPartlyOverResidual: {
        const std::size_t k = g.x_span > 1 ? partly(g.x_span) : xe;
        in = own(m.resid, span + k / xe, 20, 2), h = in + k;
        break;
      }
      case kResNoOut: in = own(m.resid, span, 20, 2); break;
      case kResNoIn: h = out(); break;
      case kResIsX: in = x, h = out(); break;
      default:  // kResIsY
        in = g.y_apart_same_layout ? fill(y, 2) : own(m.resid, span, 20, 2), h = out();
        break;
    }
    p.residual.in = in;
    p.residual.out = h;
  }
  if (f.bias) {
    m.bias.alloc(std::size_t(g.cols), 0, 22);
    for (std::int64_t i = 0; i < g.cols; ++i) m.bias.data[i] = value(1);
    p.residual.bias = m.bias.data;
  }
  if (f.gate) {
    switch (f.gate_mode) {
      case kGateIsY:
      case kGateBeforeIsY:  // values there only where y may be the gate
        if (g.y_apart_same_layout) fill(y, 4);
        p.gate = m.y;
        break;
      case kGateIsH: p.gate = p.residual.out ? p.residual.out : own(m.gate, span, 23, 4); break;
      case kGatePartlyOverY:
        p.gate = y_elems > 1 ? y + partly(y_elems) : own(m.gate, span, 23, 4);
        break;
      case kGateIsX: p.gate = x; break;
      case kGateBeforeNone: break;
      default: p.gate = own(m.gate, span, 23, 4); break;  // kGateApart, kGateBefore
    }
  }
  if (f.modulation) {
    const std::int64_t n = std::max(modulation_span(f, g.rows, g.cols), g.cols);
    auto rows_of = [&](buffer& b, std::uint32_t salt, double spread) {
      b.alloc(std::size_t(n), 0, salt);
      for (std::int64_t i = 0; i < n; ++i) b.data[i] = value(spread);
      return b.data;
    };
    const float* scale = rows_of(m.mod_scale, 24, 0.7);
    const float* shift = rows_of(m.mod_shift, 25, 2);
    // over y or h, whose elements may not be floats: refused before anything is read
    const float* y_as_floats = reinterpret_cast<const float*>(y);
    if (f.mod_place == 2) shift = y_as_floats;
    if (f.mod_place == 3)
      scale = p.residual.out ? static_cast<const float*>(p.residual.out) : y_as_floats;
    p.modulation.scale = f.null_scale ? nullptr : scale;
    p.modulation.shift = f.null_shift ? nullptr : shift;
    p.modulation.stride = f.stride;
  }
  if (!f.quant_outputs) return p;
  const bool need_scale = is_8bit(f.y_type) && f.scaling != kPerTensor;
  const std::size_t n_scales = std::size_t(g.rows * g.segs);
  if (need_scale != (f.outputs_mode == 4)) {
    m.y_scale.alloc(n_scales, 0, 26);
    p.quant.y_scale = m.y_scale.data;
  }
  if ((f.scaling == kAsymmetric) != (f.outputs_mode == 5)) {
    m.y_zero_point.alloc(n_scales, 0, 27);
    p.quant.y_zero_point = reinterpret_cast<std::int32_t*>(m.y_zero_point.bytes);
  }
  if (f.row_amax != (f.outputs_mode == 6)) {
    m.amax.alloc(std::size_t(g.rows), 0, 28);
    p.quant.amax = m.amax.data;
  }
  return p;
}

enum class lap { apart, same, partly };

/// How [p, p + pn) and [q, q + qn) (bytes) meet; apart where either is null.
lap overlap(const void* p, std::size_t pn, const void* q, std::size_t qn) {
  if (p == nullptr || q == nullptr) return lap::apart;
  const auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(q);
  if (a == b) return lap::same;
  return a < b + qn && b < a + pn ? lap::partly : lap::apart;
}

/// What the fused-operand rules need of the plan and the call.
struct call_info {
  std::int32_t stage = kFull;
  std::size_t x_bytes = 0, y_bytes = 0;
  std::int64_t rows = 0, cols = 0;
  bool same_layout = false;  ///< x and y: equal strides and types
  bool x_overlaps = false;   ///< x's elements overlap, so would h's (it takes x's strides)
  bool x_plain_rows = true;  ///< x's rows are row-major with padding (padded_rows)
};

/// The documented rules of the fused operands at a call (docs/fusions.md; plan.hpp's
/// residual_operands, quantized_outputs, modulation_operands and gate_operand), and the
/// library's refusal of a residual_out whose rows would overlap (tests/test_residual.cpp):
/// refused, or either where the documentation leaves the outcome open (the residual being x or
/// y, the gate being x; the gate and a missing gamma for the weight offset given to a moments
/// plan, which reads x only). The post-norm residual (plan.hpp's
/// residual_after_norm): required; no residual_out, bias or gate; it may be y with x's layout
/// and type, and x (not documented either way); partial overlaps refused.
expect fused_args_expect(const fused_case& f, const fused_ptrs& p, const simdnorm_norm_args& a,
                         const call_info& g) {
  bool reject = false, open = false;
  const simdnorm_residual_operands& r = p.residual;
  const std::size_t xb = g.x_bytes, yb = g.y_bytes;
  const bool moments = g.stage == kMoments;
  if (f.post_norm) {  // the plan refuses a moments stage
    reject |= r.in == nullptr || r.out != nullptr || r.bias != nullptr || p.gate != nullptr;
    const lap rx = overlap(r.in, xb, a.x, xb), ry = overlap(r.in, xb, a.y, yb);
    reject |= rx == lap::partly || ry == lap::partly || (ry == lap::same && !g.same_layout);
    open |= rx == lap::same;
  } else {
    reject |= (r.in == nullptr) != (r.out == nullptr);
  }
  reject |= r.bias != nullptr && r.in == nullptr;
  // h's rows must not overlap (as y's): refused where x's do; the library's test of that is
  // sufficient only (as for y's rows), so layouts other than padded rows may be refused too
  if (r.out) {
    reject |= g.x_overlaps;
    open |= !g.x_plain_rows;
  }
  reject |= overlap(r.out, xb, a.x, xb) == lap::partly;
  reject |= overlap(r.out, xb, r.in, xb) == lap::partly;
  open |= overlap(r.in, xb, a.x, xb) == lap::same;
  reject |= overlap(p.gate, xb, r.out, xb) != lap::apart;
  open |= overlap(p.gate, xb, a.x, xb) == lap::same;
  if (moments) {
    open |= p.gate != nullptr;
  } else {  // y is written: never over h; the gate only as y, with y's layout and type
    reject |= overlap(r.out, xb, a.y, yb) != lap::apart;
    if (!f.post_norm) open |= overlap(r.in, xb, a.y, yb) != lap::apart;
    const lap gy = overlap(p.gate, xb, a.y, yb);
    reject |= gy == lap::partly || (gy == lap::same && !g.same_layout);
  }
  reject |= g.stage == kApply && !f.post_norm && (r.in || r.out);
  reject |= f.gate_before && (p.gate == nullptr || r.in || r.out);
  // the quantized outputs: required where the plan writes them, refused elsewhere
  const bool mismatch =
      f.quant_outputs &&
      ((p.quant.y_scale != nullptr) != (is_8bit(f.y_type) && f.scaling != kPerTensor) ||
       (p.quant.y_zero_point != nullptr) != (f.scaling == kAsymmetric) ||
       (p.quant.amax != nullptr) != f.row_amax);
  reject |= mismatch;
  if (f.weight_offset != 0.f && a.gamma == nullptr) (moments ? open : reject) = true;
  const simdnorm_modulation_operands& md = p.modulation;
  if (f.tokens == 0) {
    reject |= md.scale || md.shift || md.stride != 0;
  } else {
    const std::int64_t span = modulation_span(f, g.rows, g.cols);
    reject |= !md.scale || !md.shift || span == 0 || p.gate != nullptr;
    for (const void* in : {static_cast<const void*>(md.scale), static_cast<const void*>(md.shift)})
      reject |= overlap(in, std::size_t(span) * 4, a.y, yb) != lap::apart ||
                overlap(in, std::size_t(span) * 4, r.out, xb) != lap::apart;
  }
  return reject ? expect::reject : open ? expect::either : expect::accept;
}

/// Float values that must be equal: the same bits, or both NaN (payloads are not specified).
bool same_float(float a, float b) {
  return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b));
}

/// h = (x + residual) + bias as the library must store it (docs/fusions.md): the f32 sums, in
/// that order, each rounded to f32, then rounded once into x's type. Logical order.
std::vector<float> residual_sum(const std::vector<float>& x, const std::vector<float>& r,
                                const float* bias, std::int64_t cols, std::int32_t x_type) {
  std::vector<float> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = x[i] + r[i];
    h[i] = fuzzref::round_to(x_type, bias ? s + bias[std::int64_t(i) % cols] : s);
  }
  return h;
}

/// gamma and beta as the normalize pass applies them, per modulation batch (docs/fusions.md's
/// rounding points, in f32): gamma + weight_offset, and with adaLN modulation
/// gamma_eff = fl(g fl(1 + scale)) (g = 1 without gamma), beta_eff = fl(fl(beta fl(1 + scale)) +
/// shift) (the shift itself without beta). Empty where the plain gamma or beta applies.
struct affine_eff {
  std::vector<float> gamma, beta;
};
affine_eff effective_affine(const fused_case& f, const simdnorm_norm_args& a,
                            const simdnorm_modulation_operands& md, std::int64_t batches,
                            std::int64_t cols) {
  affine_eff e;
  auto g_of = [&](std::int64_t i) {
    if (a.gamma == nullptr) return 1.f;
    return f.weight_offset != 0.f ? a.gamma[i] + f.weight_offset : a.gamma[i];
  };
  if (f.tokens == 0) {
    if (f.weight_offset != 0.f)
      for (std::int64_t i = 0; i < cols; ++i) e.gamma.push_back(g_of(i));
    return e;
  }
  for (std::int64_t b = 0; b < batches; ++b)
    for (std::int64_t i = 0; i < cols; ++i) {
      const std::int64_t at = b * md.stride + i;
      const float s1 = 1.f + md.scale[at];
      e.gamma.push_back(g_of(i) * s1);
      if (a.beta == nullptr) {
        e.beta.push_back(md.shift[at]);
      } else {
        const float t = a.beta[i] * s1;
        e.beta.push_back(t + md.shift[at]);
      }
    }
  return e;
}

/// The f32 y of the same plan from h, the values its norm read (at x's offsets, in x's type),
/// with the same gamma, beta, gate, modulation and weight offset, into a dense f32 y: what an
/// 8-bit y quantizes and what the residual add normalizes, bit for bit (docs/fusions.md; a
/// 16-bit y is that f32 y rounded once, docs/numerics.md). row_amax keeps the rows whole, as an
/// 8-bit y does, and gives their amax. Logical order.
struct twin_result {
  std::vector<float> y, amax;
};
twin_result run_twin(const fuzz_case& c, bool row_amax, const simdnorm_norm_args& a,
                     const fused_ptrs& p, const std::vector<float>& h,
                     const std::vector<float>& gate, const std::vector<std::int64_t>& xo,
                     std::int64_t x_span, std::int64_t rows) {
  const std::int32_t xt = get_enum(c.xd.type);
  const std::size_t span = std::size_t(x_span) * elem_bytes(xt);
  std::vector<unsigned char> x(span), z(gate.empty() ? 0 : span);
  for (std::size_t i = 0; i < h.size(); ++i) {  // exact: h and the gate are x's type's values
    store_elem(x.data(), xo[i], xt, h[i]);
    if (!gate.empty()) store_elem(z.data(), xo[i], xt, gate[i]);
  }
  twin_result t{std::vector<float>(h.size()), std::vector<float>(std::size_t(rows))};
  fuzz_case tc = c;
  std::memset(&tc.yd, 0, sizeof tc.yd);
  FUZZ_CHECK(simdnorm_tensor_contiguous(&tc.yd, c.xd.ndim, c.xd.shape) == SIMDNORM_OK);
  set_enum(&tc.yd.type, kF32);
  tc.null_params = false;  // set_defaults() left the defaults there
  tc.ln.residual_after_norm = tc.rms.residual_after_norm = 0;  // refused with an h or 8-bit y
  simdnorm_quant_params q;
  std::memset(&q, 0, sizeof q);
  q.scale = 1.f;
  q.row_amax = row_amax;
  tc.ln.quant = tc.rms.quant = q;
  simdnorm_plan_t plan = nullptr;
  FUZZ_CHECK(make_plan(tc, &tc.xd, &tc.yd, &plan) == SIMDNORM_OK);
  simdnorm_norm_args base;
  std::memset(&base, 0, sizeof base);
  base.x = x.data();
  base.y = t.y.data();
  base.gamma = a.gamma;
  base.beta = a.beta;
  fused_ptrs tp;
  tp.modulation = p.modulation;
  tp.gate = gate.empty() ? nullptr : z.data();
  tp.quant.amax = row_amax ? t.amax.data() : nullptr;
  const row_args ta(base, tp);
  const simdnorm_status s = execute_fused(plan, c.op, &ta, nullptr);
  simdnorm_plan_destroy(plan);
  FUZZ_CHECK(s == SIMDNORM_OK);
  return t;
}

/// The bits of max |v| over v[0, n) (NaN above Inf above any finite value), as the library
/// takes the amax of y.
std::uint32_t amax_bits(const float* v, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, float_bits(v[i]) & 0x7FFFFFFFu);
  return m;
}

/// A dynamic segment's asymmetric scale and zero point (docs/fusions.md) against the f32 y's
/// range [lo, hi] = [min(0, min y), max(0, max y)]: a range of zeros gives scale 1 and zero
/// point qmin; otherwise the scale is (hi - lo) / 255 within its f32 roundings (4 u; FLT_MIN
/// below that) and the zero point sat(rne(qmin - lo / scale)) within half a code plus the
/// roundings of lo / scale.
void check_asymmetric_scale(float lo, float hi, float scale, std::int32_t zp, int qmin) {
  if (hi == lo) {
    FUZZ_CHECK(scale == 1.f && zp == qmin);
    return;
  }
  const double w = (double(hi) - double(lo)) / 255, w_lo = w * (1 - 4 * fuzzref::kU),
               w_hi = w * (1 + 4 * fuzzref::kU);
  const bool scale_ok = (scale >= w_lo && scale <= w_hi) || (scale == FLT_MIN && w_lo <= FLT_MIN);
  const double z = std::clamp(qmin - double(lo) / double(scale), double(qmin), qmin + 255.0);
  if (!scale_ok || std::fabs(zp - z) > 0.5 + 1e-4) {
    std::fprintf(stderr,
                 "asymmetric: lo %a hi %a: scale %a (want [%a, %a]), zero point %d (want %.6f)\n",
                 double(lo), double(hi), double(scale), w_lo, w_hi, zp, z);
    FUZZ_CHECK(!"the asymmetric scale and zero point match the f32 y's range");
  }
}

/// An 8-bit y against the documented quantizer applied to the f32 y yf (run_twin; checked
/// against the float64 reference on its own), row by row and segment (row or block) by
/// segment: dynamic scales exactly fl(amax / qmax), at least FLT_MIN (0 for amax 0: codes 0;
/// amax itself where it is not finite: the NaN code, and for asymmetric scaling zero point 0
/// and code 0), asymmetric ones by check_asymmetric_scale; then every code exactly
/// quant_code(fl(yf * fl(1 / scale)), zero point).
void check_quantized(const fused_case& f, std::int64_t rows, std::int64_t cols,
                     const std::vector<float>& yf, const unsigned char* y,
                     const std::vector<std::int64_t>& yo, const float* y_scale,
                     const std::int32_t* y_zero_point) {
  const std::int64_t seg = f.block > 0 ? f.block : cols, segs = cols / seg;
  const float qmax = f.y_type == kF8 ? 448.f : 127.f;
  const int qmin = f.y_type == kI8 ? -128 : 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t s = 0; s < segs; ++s) {
      const std::int64_t i0 = r * cols + s * seg, at = r * segs + s;
      const float* v = yf.data() + i0;
      float inv = 1.f / f.scale;
      int zp = f.zero_point;
      bool fill = false;  // the segment's codes are all fill_code
      unsigned fill_code = 0;
      if (f.scaling != kPerTensor) {
        const float amax = bits_to_float(amax_bits(v, seg)), got = y_scale[at];
        if (!(amax <= FLT_MAX)) {  // NaN or Inf in y
          FUZZ_CHECK(same_float(got, amax));
          fill = true;
          fill_code = f.scaling == kAsymmetric || f.y_type != kF8 ? 0 : 0x7f;
          if (f.scaling == kAsymmetric) FUZZ_CHECK(y_zero_point[at] == 0);
        } else if (f.scaling == kDynamic) {
          float want = amax / qmax;  // 0 only for amax 0: never below FLT_MIN otherwise
          if (amax > 0.f && want < FLT_MIN) want = FLT_MIN;
          if (float_bits(got) != float_bits(want)) {
            std::fprintf(stderr, "y_scale[%lld] = %a, want %a (amax %a)\n", (long long)at,
                         double(got), double(want), double(amax));
            FUZZ_CHECK(!"the dynamic scale is fl(amax / qmax) of the f32 y");
          }
          fill = amax == 0.f;
          inv = 1.f / got;
          zp = 0;
        } else {
          float lo = 0.f, hi = 0.f;
          for (std::int64_t i = 0; i < seg; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
          check_asymmetric_scale(lo, hi, got, y_zero_point[at], qmin);
          inv = 1.f / got;
          zp = y_zero_point[at];
        }
      }
      for (std::int64_t i = 0; i < seg; ++i) {
        const float scaled = v[i] * inv;
        const unsigned want = fill ? fill_code : fuzzref::quant_code(f.y_type, scaled, zp);
        const unsigned got = y[yo[std::size_t(i0 + i)]];
        if (got != want) {
          std::fprintf(
              stderr, "y[%lld] = code %u, want %u: f32 y %a * inv_scale %a = %a, zero point %d\n",
              (long long)(i0 + i), got, want, double(v[i]), double(inv), double(scaled), zp);
          FUZZ_CHECK(!"the 8-bit y is the documented quantizer of the f32 y");
        }
      }
    }
}

/// The seed of the data generator: a hash of the whole input.
std::uint64_t input_hash(const std::uint8_t* data, std::size_t size) {
  std::uint64_t seed = 0xC0FFEEull;
  for (std::size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 0x100000001B3ull;
  return seed;
}

int run_one(const std::uint8_t* data, std::size_t size) {
  static const isa_list isas;
  isa_reset reset_guard;
  std::uint8_t h[kHeader] = {};
  std::memcpy(h, data, std::min(size, kHeader));
  if ((h[62] & 0xC0) == 0xC0) probe_merge_moments(rng{input_hash(data, size) ^ 0x6D65726765ull});
  fuzz_case c;
  c.op = h[0] % kOps;

  // ---- shape ------------------------------------------------------------------------------------
  constexpr int kOddRanks[8] = {0, 6, 8, 9, -1, 7, 33, 1};
  const int rank = h[1] < 240 ? 1 + h[1] % 5 : kOddRanks[(h[1] - 240) % 8];
  c.nd = std::clamp(rank, 0, SIMDNORM_MAX_DIMS);
  std::int64_t shape[SIMDNORM_MAX_DIMS] = {};
  for (int i = 0; i < c.nd; ++i) {
    const std::uint8_t s = h[2 + i];
    shape[i] = s < 232 ? 1 + s % 9 : s < 248 ? kLargeDims[(s - 232) % 15] : kSpecialDims[s % 8];
  }
  c.xd.ndim = rank;
  c.yd.ndim = rank;
  for (int i = 0; i < c.nd; ++i) c.xd.shape[i] = c.yd.shape[i] = shape[i];
  decode_strides(c.nd, shape, h + 10, c.xd.strides);
  if (h[20] < 128) {
    std::memcpy(c.yd.strides, c.xd.strides, sizeof c.yd.strides);
  } else {
    decode_strides(c.nd, shape, h + 20, c.yd.strides);
  }
  // x's and y's float types (the fused operands may make y 8-bit, or x i8)
  const std::array<std::int32_t, 2> types = decode_types(h[61]);
  set_enum(&c.xd.type, types[0]);
  set_enum(&c.yd.type, types[1]);
  const int alias = h[30] % 5;  // 0 disjoint, 1 in place, 2 same pointer, 3 overlap, 4 adjacent
  if (alias == 1) std::memcpy(c.yd.strides, c.xd.strides, sizeof c.yd.strides);
  const int misuse = h[35] % 32;
  c.null_params = misuse == 10;
  if (misuse == 11 && c.nd > 0) c.yd.shape[c.nd - 1] = wrap_add(c.yd.shape[c.nd - 1], 1);
  if (misuse == 12) c.yd.ndim = rank == 1 ? 2 : rank - 1;

  // ---- parameters -------------------------------------------------------------------------------
  const int nd = c.nd;
  c.stores = h[41] < 250 ? std::int32_t(h[41] % 3) : decode_enum(std::uint8_t(240 + h[41] % 6), 3);
  c.set_defaults();
  constexpr float kDefaultEps[kOps] = {1e-5f, 1e-6f, 1e-12f, 1e-5f, 1e-5f, 1e-5f, 1e-9f};
  c.eps = decode_eps(h[36], h + 37, kDefaultEps[c.op]);
  auto small_int = [&](std::uint8_t b, int lo, int count) -> std::int32_t {
    constexpr std::int32_t kOdd[5] = {0, -1, kI32Max, kI32Min, 9};
    if (b >= 230) return kOdd[b % 5];
    if (b >= 220) return lo + count + (b - 220) % 3;  // just past the range
    return count > 0 ? lo + b % count : lo;
  };
  c.layout = decode_enum(h[42], 2);
  c.convention = decode_enum(h[45], 2);
  c.stage = c.op == kMvn ? kFull : decode_stage(h[63]);
  switch (c.op) {
    case kLayerNorm:
      c.ln.normalized_ndim = small_int(h[42], 1, nd);
      c.ln.eps = c.eps;
      c.ln.compensated_mean = h[43] & 1;
      set_enum(&c.ln.stores, c.stores);
      set_enum(&c.ln.stage, c.stage);
      break;
    case kRmsNorm:
      c.rms.normalized_ndim = small_int(h[42], 1, nd);
      c.rms.eps = c.eps;
      set_enum(&c.rms.stores, c.stores);
      set_enum(&c.rms.stage, c.stage);
      break;
    case kLpNorm:
      c.lp.axis = h[42] < 128 ? -1 : small_int(h[42], -nd, 2 * nd);
      c.lp.p = h[43] < 240 ? 1 + h[43] % 2 : small_int(h[43], 3, 1);
      c.lp.eps = c.eps;
      set_enum(&c.lp.stores, c.stores);
      set_enum(&c.lp.stage, c.stage);
      break;
    case kBatchNorm: {
      set_enum(&c.bn.layout, c.layout);
      c.bn.eps = c.eps;
      c.bn.training = h[43] & 1;
      c.bn.fuse_relu = (h[43] >> 1) & 1;
      c.bn.cumulative = (h[43] >> 2) & 1;
      constexpr float kMomentum[8] = {0.1f, 0.9f, 0.f, 1.f, -0.1f, 1.5f, NAN, 0.5f};
      c.bn.momentum = kMomentum[h[44] % 8];
      set_enum(&c.bn.convention, c.convention);
      set_enum(&c.bn.stores, c.stores);
      set_enum(&c.bn.stage, c.stage);
      // which parameter arrays: inference needs both statistics; training takes none here
      const std::uint8_t f = h[46];
      const bool misplaced = (f & 0xF0) == 0xF0;
      c.bn_rm = c.bn.training ? misplaced : (f & 0x07) != 0x07;
      c.bn_rv = c.bn.training ? false : (f & 0x07) != 0x06;
      c.bn_g = !c.bn.training && (f & 0x08);
      c.bn_b = !c.bn.training && (f & 0x10);
      break;
    }
    case kGroupNorm:
      c.gn.num_groups = 1;  // chosen below, once C is known
      set_enum(&c.gn.layout, c.layout);
      c.gn.eps = c.eps;
      c.gn.per_group_affine = h[43] & 1;
      set_enum(&c.gn.stores, c.stores);
      set_enum(&c.gn.stage, c.stage);
      break;
    case kInstanceNorm:
      set_enum(&c.in.layout, c.layout);
      c.in.eps = c.eps;
      set_enum(&c.in.stores, c.stores);
      set_enum(&c.in.stage, c.stage);
      break;
    default:
      c.mvn.num_axes = small_int(h[42], 1, nd);
      for (int i = 0; i < SIMDNORM_MAX_DIMS; ++i)
        c.mvn.axes[i] = h[46 + i] < 240 ? std::int32_t(h[46 + i] % (2 * std::max(nd, 1))) - nd
                                        : small_int(h[46 + i], nd, 0);
      c.mvn.eps = c.eps;
      set_enum(&c.mvn.stores, c.stores);
      break;
  }
  // the effective parameters (NULL params: the defaults)
  if (c.null_params) {
    c.set_defaults();
    c.stores = 0;
    c.layout = 0;
    c.convention = 0;
    c.stage = kFull;
    c.eps = kDefaultEps[c.op];
    c.bn_rm = c.bn_rv = c.bn_g = c.bn_b = false;
  }

  // the channel axis (for valid layouts) and GroupNorm's groups
  const bool layout_ok = c.layout == 0 || c.layout == 1;
  const int ca = c.layout == 1 ? nd - 1 : 1;
  if (c.op == kGroupNorm && nd >= 2 && layout_ok && !c.null_params) {
    const std::int64_t C = shape[ca];
    if (h[44] >= 220 || C <= 0) {
      c.gn.num_groups = small_int(h[44], 1, 0);
      if (h[44] % 7 == 0) c.gn.num_groups = 3;
    } else {
      std::int64_t divisors[64];
      int nd_ = 0;
      for (std::int64_t g = 1; g <= std::min<std::int64_t>(C, 4096) && nd_ < 63; ++g)
        if (C % g == 0) divisors[nd_++] = g;
      if (C > 4096) divisors[nd_++] = C;
      c.gn.num_groups = std::int32_t(divisors[h[44] % nd_]);
    }
  }

  // ---- geometry and the expected plan outcome ---------------------------------------------------
  bool sizes_ok = rank >= 1 && rank <= SIMDNORM_MAX_DIMS && c.yd.ndim == rank;
  __int128 numel128 = 1, xlast = 0, ylast = 0;
  for (int i = 0; i < nd && sizes_ok; ++i) {
    if (shape[i] <= 0 || c.yd.shape[i] != shape[i]) sizes_ok = false;
    if (c.xd.strides[i] < 0 || c.yd.strides[i] < 0) sizes_ok = false;
  }
  bool overflow = false;
  if (sizes_ok) {
    for (int i = 0; i < nd && !overflow; ++i) {  // each step stays below 2^127
      numel128 *= shape[i];
      xlast += __int128(shape[i] - 1) * c.xd.strides[i];
      ylast += __int128(shape[i] - 1) * c.yd.strides[i];
      if (numel128 > kI64Max || xlast > kI64Max || ylast > kI64Max) overflow = true;
    }
  }
  expect ex = expect::either;
  bool reject = !sizes_ok || overflow;
  const float eps = c.eps;
  if (!std::isfinite(eps) || eps < 0.f) reject = true;
  if (c.stores < 0 || c.stores > 2) reject = true;
  if (c.stage < kFull || c.stage > kApply) reject = true;
  op_shape os;
  const std::int64_t numel = reject ? 0 : std::int64_t(numel128);
  int first = 0;  // row ops: first normalized dim
  bool simple_layout = false;
  if (!reject) {
    os.numel = numel;
    switch (c.op) {
      case kLayerNorm:
      case kRmsNorm:
      case kLpNorm: {
        int nn;
        if (c.op == kLpNorm) {
          if (c.lp.p != 1 && c.lp.p != 2) reject = true;
          if (c.lp.axis < -nd || c.lp.axis >= nd) {
            reject = true;
            break;
          }
          const int axis = c.lp.axis < 0 ? c.lp.axis + nd : c.lp.axis;
          for (int d = axis + 1; d < nd; ++d)
            if (shape[d] != 1) reject = true;
          nn = nd - axis;
        } else {
          nn = c.op == kLayerNorm ? c.ln.normalized_ndim : c.rms.normalized_ndim;
          if (nn < 1 || nn > nd) {
            reject = true;
            break;
          }
        }
        first = nd - nn;
        if (!dense_from(c.xd, nd, first) || !dense_from(c.yd, nd, first)) reject = true;
        std::int64_t cols = 1;
        for (int i = first; i < nd; ++i) cols *= shape[i];
        os.known = true;
        os.units = numel / cols;
        os.affine = c.op == kLpNorm ? 0 : cols;
        os.takes_beta = os.takes_mean = c.op == kLayerNorm;
        os.takes_rstd = true;
        simple_layout = padded_rows(c.yd, first, cols);
        break;
      }
      case kBatchNorm:
      case kGroupNorm:
      case kInstanceNorm: {
        const int min_nd = c.op == kInstanceNorm ? 3 : 2;
        if (nd < min_nd || !layout_ok) {
          reject = true;
          break;
        }
        if (c.op == kBatchNorm && (c.convention < 0 || c.convention > 1)) reject = true;
        const std::int64_t C = shape[ca], N = shape[0];
        if (c.op == kBatchNorm) {
          os.channels = C;
          os.units = C;
          if (c.bn.training) {
            if (c.bn_rm) reject = true;
            if (!(c.bn.momentum >= 0.f && c.bn.momentum <= 1.f)) reject = true;
            // one value per channel: refused in one call; staged, the merged count decides
            if (numel / C < 2 && c.stage == kFull) reject = true;
            os.affine = C;
            os.takes_beta = os.takes_mean = os.takes_rstd = true;
          } else {
            if (!c.bn_rm || !c.bn_rv) reject = true;
            if (c.stage != kFull) reject = true;  // the running statistics are the statistics
          }
        } else {
          const std::int64_t G = c.op == kInstanceNorm ? C : c.gn.num_groups;
          if (G < 1 || C % G != 0) {
            reject = true;
            break;
          }
          os.units = N * G;
          os.affine = c.op == kGroupNorm && c.gn.per_group_affine ? G : C;
          os.takes_beta = os.takes_mean = os.takes_rstd = true;
        }
        os.known = true;
        int cl[SIMDNORM_MAX_DIMS] = {0};
        for (int k = 1; k < nd - 1; ++k) cl[k] = k + 1;
        cl[nd - 1] = 1;
        const bool both_dense = dense_from(c.xd, nd, 0) && dense_from(c.yd, nd, 0);
        const bool both_cl =
            c.layout == 0 && dense_in_order(c.xd, nd, cl) && dense_in_order(c.yd, nd, cl);
        const bool batch_ok = c.op != kBatchNorm || c.layout == 0 || nd == 2;
        const bool both_padded =
            batch_ok && dense_padded_batch(c.xd, nd) && dense_padded_batch(c.yd, nd);
        simple_layout = both_dense || both_cl || both_padded;
        break;
      }
      default: {  // MeanVarianceNormalization
        if (c.mvn.num_axes < 1 || c.mvn.num_axes > nd) {
          reject = true;
          break;
        }
        bool red[SIMDNORM_MAX_DIMS] = {};
        for (int i = 0; i < c.mvn.num_axes && !reject; ++i) {
          const int a = c.mvn.axes[i];
          if (a < -nd || a >= nd) {
            reject = true;
            break;
          }
          const int d = a < 0 ? a + nd : a;
          if (red[d]) reject = true;
          red[d] = true;
        }
        if (reject) break;
        std::int64_t kept = 1;
        for (int d = 0; d < nd; ++d)
          if (!red[d]) kept *= shape[d];
        os.known = true;
        os.units = kept;
        // dense tensors: groups of kept (K) and reduced (R) dims, size-1 dims dropped, must fit
        // [K][R][K][R] (plan.hpp)
        char groups[SIMDNORM_MAX_DIMS + 1];
        int ng = 0;
        for (int d = 0; d < nd; ++d) {
          if (shape[d] == 1) continue;
          const char g = red[d] ? 'R' : 'K';
          if (ng == 0 || groups[ng - 1] != g) groups[ng++] = g;
        }
        const bool fits = ng == 0 || (groups[0] == 'K' ? ng <= 4 : ng <= 3);
        simple_layout = fits && dense_from(c.xd, nd, 0) && dense_from(c.yd, nd, 0);
        break;
      }
    }
  }
  if (c.op == kBatchNorm && !reject && !c.bn.training && c.null_params) reject = true;
  // the row ops' fused operands and their plan parameters (header bytes 44-53)
  const std::int64_t rows = os.known ? os.units : 1, cols = os.known ? numel / os.units : 1;
  fused_case f = decode_fused(h, c.op, rows, cols, types[0], types[1]);
  if (f.on) {
    if (c.null_params) f.default_params();
    apply_fused(f, &c);
    if (fused_plan_refused(f, c.op, c.stage, rows, cols)) reject = true;
  }
  // x's and y's extents and element counts in bytes of their types (decoded with the fused
  // operands) must fit in int64
  const std::int32_t x_type = get_enum(c.xd.type), y_type = get_enum(c.yd.type);
  const std::size_t x_elem = elem_bytes(x_type), y_elem = elem_bytes(y_type);
  for (const std::int64_t e : {std::int64_t(x_elem), std::int64_t(y_elem)})
    if (sizes_ok && !overflow && numel128 > kI64Max / e) reject = true;
  if (sizes_ok && !overflow &&
      (xlast + 1 > kI64Max / std::int64_t(x_elem) || ylast + 1 > kI64Max / std::int64_t(y_elem)))
    reject = true;

  // the logical tensor: offsets of every element in x and y (only when small enough)
  const bool small = !reject && numel <= kMaxElements && std::int64_t(xlast) < kMaxSpan &&
                     std::int64_t(ylast) < kMaxSpan;
  std::vector<std::int64_t> xo, yo;
  if (small) {
    xo.resize(std::size_t(numel));
    yo.resize(std::size_t(numel));
    std::int64_t idx[SIMDNORM_MAX_DIMS] = {};
    std::int64_t xoff = 0, yoff = 0;
    for (std::int64_t i = 0; i < numel; ++i) {
      xo[std::size_t(i)] = xoff;
      yo[std::size_t(i)] = yoff;
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) {
          xoff += c.xd.strides[d];
          yoff += c.yd.strides[d];
          break;
        }
        xoff -= (shape[d] - 1) * c.xd.strides[d];
        yoff -= (shape[d] - 1) * c.yd.strides[d];
        idx[d] = 0;
      }
    }
    if (elements_overlap(yo, std::int64_t(ylast) + 1)) reject = true;  // y's must not
  }
  if (reject)
    ex = expect::reject;
  else if (simple_layout)
    ex = expect::accept;
  // a build without the 16-bit kernels refuses them, and says why where nothing else is wrong
  static const bool has_16bit = build_has_16bit();
  const bool unsupported = !has_16bit && (is_16bit(x_type) || is_16bit(y_type));
  bool want_unsupported = unsupported && ex == expect::accept;
  if (unsupported) reject = true, ex = expect::reject;

  std::snprintf(g_case, sizeof g_case,
                "op=%s ndim=%d shape=[%lld,%lld,%lld,%lld,%lld] xs=[%lld,%lld,%lld,%lld,%lld] "
                "ys=[%lld,%lld,%lld,%lld,%lld] alias=%d misuse=%d eps=%g stores=%d layout=%d "
                "stage=%d x_type=%d y_type=%d expect=%d",
                kOpNames[c.op], rank, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                (long long)shape[3], (long long)shape[4], (long long)c.xd.strides[0],
                (long long)c.xd.strides[1], (long long)c.xd.strides[2], (long long)c.xd.strides[3],
                (long long)c.xd.strides[4], (long long)c.yd.strides[0], (long long)c.yd.strides[1],
                (long long)c.yd.strides[2], (long long)c.yd.strides[3], (long long)c.yd.strides[4],
                alias, misuse, double(eps), c.stores, c.layout, c.stage, x_type, y_type, int(ex));
  if (f.on) {
    const std::size_t n = std::strlen(g_case);
    std::snprintf(g_case + n, sizeof g_case - n,
                  " fused=%02x residual=%d post_norm=%d gate=%d tokens=%lld stride=%lld "
                  "mod_place=%d offset=%g scaling=%d block=%d scale=%g zp=%d outputs=%d cross=%d",
                  h[44], f.residual_mode, int(f.post_norm), f.gate_mode, (long long)f.tokens,
                  (long long)f.stride, f.mod_place, double(f.weight_offset), f.scaling, f.block,
                  double(f.scale), f.zero_point, f.outputs_mode, int(f.cross_op));
  }

  // ---- data generation --------------------------------------------------------------------------
  rng prng{input_hash(data, size)};
  std::size_t pos = kHeader;
  auto next_byte = [&](bool prng_when_empty) -> std::uint8_t {
    if (pos < size) return data[pos++];
    return prng_when_empty ? std::uint8_t(prng.next()) : 0;
  };
  constexpr int kExp[16] = {0,    -3,   -7, -10, -20, -40, -60, -100,
                            -126, -140, 5,  10,  20,  40,  60,  100};
  constexpr double kOff[16] = {0,    0,   0,   1,    -1,    0.5,   100,     1e4,
                               -1e4, 1e6, 3e7, 1e20, -1e30, 1e-30, 1.5e-40, 3e38};
  const int data_mode = h[57] % 4;
  const double scale = std::ldexp(1.0, kExp[h[58] % 16]);
  const double offset = kOff[h[59] % 16];
  auto next_value = [&]() -> float {
    switch (data_mode) {
      case 0: {
        std::uint32_t b = 0;
        for (int k = 0; k < 4; ++k) b |= std::uint32_t(next_byte(true)) << (8 * k);
        return bits_to_float(b);
      }
      case 1: return float(double(std::int8_t(next_byte(true))) * scale + offset);
      case 2: return float(prng.uniform() * scale + offset);
      default: {
        const std::int8_t b = std::int8_t(next_byte(false));
        return float(offset + (b == 0 ? 0.0 : double(b) * scale));
      }
    }
  };
  constexpr float kSpecials[9] = {NAN,    INFINITY,        -INFINITY, 3.4e38f, -3.4e38f,
                                  1e-45f, 1.17549435e-38f, 1e30f,     -0.f};
  const int aux_mode = h[60] % 4;
  auto aux_value = [&](int kind) -> float {  // kind: 0 gamma, 1 beta / mean, 2 variance
    switch (aux_mode) {
      case 0:
        return float(kind == 0   ? 1.0 + 0.5 * prng.uniform()
                     : kind == 1 ? prng.uniform()
                                 : 1.0 + prng.uniform());
      case 1: {
        std::uint32_t b = 0;
        for (int k = 0; k < 4; ++k) b |= std::uint32_t(next_byte(true)) << (8 * k);
        return bits_to_float(b);
      }
      case 2: {
        if (prng.next() % 4 == 0) return kSpecials[prng.next() % 9];
        const float v = float(prng.uniform() * std::ldexp(1.0, int(prng.next() % 40) - 20));
        return kind == 2 && prng.next() % 2 ? std::fabs(v) : v;
      }
      default: return kind == 0 ? 1.f : kind == 1 ? 0.f : 1.f;
    }
  };

  // BatchNorm inference parameter arrays (read at plan time)
  const std::int64_t C_bn = c.op == kBatchNorm && os.known ? os.channels : 16;
  const bool bn_sizes = c.op == kBatchNorm && C_bn <= kMaxElements;
  buffer bn_rm, bn_rv, bn_g, bn_b;
  if (c.op == kBatchNorm && !c.null_params && bn_sizes) {
    const std::size_t n = std::size_t(C_bn);
    bn_rm.alloc(n, 0, 11);
    bn_rv.alloc(n, 0, 12);
    bn_g.alloc(n, 0, 13);
    bn_b.alloc(n, 0, 14);
    for (std::size_t i = 0; i < n; ++i) {
      bn_rm.data[i] = aux_value(1);
      bn_rv.data[i] = aux_value(2);
      bn_g.data[i] = aux_value(0);
      bn_b.data[i] = aux_value(1);
    }
    if (h[47] % 8 == 1 && n > 0) bn_rv.data[h[48] % n] = -1.f;  // refused variances
    if (h[47] % 8 == 2 && n > 0) bn_rv.data[h[48] % n] = NAN;
    c.bn.running_mean = c.bn_rm ? bn_rm.data : nullptr;
    c.bn.running_var = c.bn_rv ? bn_rv.data : nullptr;
    c.bn.gamma = c.bn_g ? bn_g.data : nullptr;
    c.bn.beta = c.bn_b ? bn_b.data : nullptr;
    if (!c.bn.training && c.bn_rv && os.known)
      for (std::size_t i = 0; i < n; ++i)
        if (!(bn_rv.data[i] >= 0.f)) {
          reject = true;
          ex = expect::reject;
          want_unsupported = false;  // something else is wrong: either refusal is right
        }
    for (buffer* b : {&bn_rm, &bn_rv, &bn_g, &bn_b}) b->take_snapshot();
  } else if (c.op == kBatchNorm && !c.null_params) {
    // Too large to allocate exactly. An inference plan would read C floats from them: none
    // are given, so it must refuse. A training plan never reads them but must refuse any it
    // is given (the expectation above): it gets the same pointers, to a stand-in.
    static float stand_in[1];
    c.bn.running_mean = c.bn.training && c.bn_rm ? stand_in : nullptr;
    c.bn.running_var = c.bn.training && c.bn_rv ? stand_in : nullptr;
    c.bn.gamma = c.bn.training && c.bn_g ? stand_in : nullptr;
    c.bn.beta = c.bn.training && c.bn_b ? stand_in : nullptr;
    if (!c.bn.training) {
      reject = true;
      ex = expect::reject;
      want_unsupported = false;
    }
  }

  // ---- ISA --------------------------------------------------------------------------------------
  if (h[32] >= 248) probe_isa_values(h[32]);
  FUZZ_CHECK(isas.n > 0);
  const simdnorm_isa isa = isas.all[h[32] % isas.n];
  FUZZ_CHECK(simdnorm_force_isa(isa) == SIMDNORM_OK);
  FUZZ_CHECK(simdnorm_active_isa() == isa);

  // ---- plan -------------------------------------------------------------------------------------
  if (misuse >= 1 && misuse <= 3) {
    set_sentinel_message();
    simdnorm_plan_t junk = reinterpret_cast<simdnorm_plan_t>(std::uintptr_t(16));
    const simdnorm_status s =
        make_plan(c, misuse == 1 ? nullptr : &c.xd, misuse == 2 ? nullptr : &c.yd,
                  misuse == 3 ? nullptr : &junk);
    FUZZ_CHECK(s == SIMDNORM_INVALID_ARGUMENT);
    check_failure_reported(s);
    if (misuse != 3) FUZZ_CHECK(junk == nullptr);
  }
  set_sentinel_message();
  simdnorm_plan_t plan = reinterpret_cast<simdnorm_plan_t>(std::uintptr_t(16));
  const simdnorm_status ps = make_plan(c, &c.xd, &c.yd, &plan);
  std::unique_ptr<simdnorm_plan, void (*)(simdnorm_plan_t)> plan_guard(
      ps == SIMDNORM_OK ? plan : nullptr, &simdnorm_plan_destroy);
  if (c.op == kBatchNorm && bn_sizes && !c.null_params)
    for (buffer* b : {&bn_rm, &bn_rv, &bn_g, &bn_b}) FUZZ_CHECK(b->unchanged());
  if (ps != SIMDNORM_OK) {
    FUZZ_CHECK(ex != expect::accept);
    FUZZ_CHECK(plan == nullptr);
    check_failure_reported(ps);
    if (want_unsupported) FUZZ_CHECK(ps == SIMDNORM_UNSUPPORTED_DTYPE);
  } else {
    FUZZ_CHECK(ex != expect::reject);
    FUZZ_CHECK(plan != nullptr);
    check_no_new_message();
    FUZZ_CHECK(simdnorm_plan_isa(plan) == isa);
    FUZZ_CHECK(os.known);
    FUZZ_CHECK(simdnorm_plan_rows(plan) == std::size_t(os.units));
    FUZZ_CHECK(simdnorm_plan_row_length(plan) * simdnorm_plan_rows(plan) == std::size_t(numel));
    const std::size_t phases = simdnorm_plan_num_phases(plan);
    FUZZ_CHECK(phases >= 1);
    FUZZ_CHECK(simdnorm_plan_num_tasks(plan, phases) == 0);
    if (phases == 1) FUZZ_CHECK(simdnorm_plan_workspace_bytes(plan) == 0);
  }
  const bool planned = ps == SIMDNORM_OK;
  static const bool verbose = std::getenv("SIMDNORM_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s -> plan %d\n", g_case, int(ps));
  if (!small && planned) return 0;  // accepted but too large to run here

  // ---- memory -----------------------------------------------------------------------------------
  arena m;
  const std::int64_t x_span = small ? std::int64_t(xlast) + 1 : 16;
  const std::int64_t y_span = small ? std::int64_t(ylast) + 1 : 16;
  const std::size_t lead_x = h[56] & 15, lead_y = h[56] >> 4;
  const std::size_t x_bytes = std::size_t(x_span) * x_elem, y_bytes = std::size_t(y_span) * y_elem;
  // x and y in one buffer start at multiples of both element sizes (their natural alignment)
  const std::size_t align = std::max(x_elem, y_elem);
  auto round_up = [&](std::size_t n) { return (n + align - 1) / align * align; };
  std::size_t y_at = 0, shared = 0;  // y's first byte in xbuf, and xbuf's bytes, when shared
  switch (alias) {
    case 0:
      m.xbuf.alloc(std::size_t(x_span), lead_x, 1, x_elem);
      m.ybuf.alloc(std::size_t(y_span), lead_y, 2, y_elem);
      break;
    case 1:
    case 2: shared = std::max(x_bytes, y_bytes); break;
    case 3: {
      const bool y_first = h[31] & 128;
      const std::size_t under = (y_first ? y_bytes : x_bytes) / align;  // starts first
      const std::size_t k = under > 1 ? align * (1 + (h[31] & 127) % (under - 1)) : 0;
      (y_first ? m.x_at : y_at) = k;
      shared = std::max(m.x_at + x_bytes, y_at + y_bytes);
      break;
    }
    default: {
      const bool y_first = h[31] & 1;
      (y_first ? m.x_at : y_at) = round_up(y_first ? y_bytes : x_bytes);
      shared = (y_first ? m.x_at : y_at) + (y_first ? x_bytes : y_bytes);
      break;
    }
  }
  if (alias != 0)  // the lead, too, keeps y aligned
    m.xbuf.alloc((shared + x_elem - 1) / x_elem, lead_x * (align / x_elem), 1, x_elem);
  m.y = alias == 0 ? m.ybuf.bytes : m.xbuf.bytes + y_at;
  // x values, written through x's offsets and read back (zero strides repeat elements); a
  // 16-bit x takes raw bits in the raw data mode, and the others' values rounded to nearest
  unsigned char* xw = m.x();
  auto put_x = [&](std::int64_t o) {
    if (data_mode == 0 && is_16bit(x_type)) {
      const unsigned lo = next_byte(true);
      const std::uint16_t b = std::uint16_t(lo | unsigned(next_byte(true)) << 8);
      std::memcpy(xw + 2 * o, &b, 2);
    } else {
      store_elem(xw, o, x_type, next_value());
    }
  };
  std::vector<float> xl;
  if (small) {
    for (std::int64_t i = 0; i < numel; ++i) put_x(xo[std::size_t(i)]);
    const int specials = h[61] % 8 < 5 ? 0 : h[61] % 8 - 4;
    for (int k = 0; k < specials && numel > 0; ++k)
      store_elem(xw, xo[std::size_t(prng.next() % std::uint64_t(numel))], x_type,
                 kSpecials[prng.next() % 9]);
    xl.resize(std::size_t(numel));
    for (std::int64_t i = 0; i < numel; ++i)
      xl[std::size_t(i)] = load_elem(xw, xo[std::size_t(i)], x_type);
  } else {
    for (std::int64_t i = 0; i < x_span; ++i) put_x(i);
  }
  // the op reduced to units, and each unit's float64 statistics (the reference, and the
  // records of the apply stage)
  fuzzref::model md;
  std::vector<fuzzref::unit_ref> unit_stats;
  if (planned) {
    md = model_of(c, shape, ca, os);
    unit_stats = fuzzref::statistics(md, xl);
  }
  // args: which pointers
  const std::uint8_t af = h[54];
  const std::int64_t units = os.known ? os.units : 16;
  const std::int64_t aff_n = os.known && os.affine > 0 ? os.affine : 16;
  const std::int64_t ch_n = os.known && c.op == kBatchNorm ? os.channels : 16;
  const bool sizes_fit = units <= kMaxElements && aff_n <= kMaxElements && ch_n <= kMaxElements;
  if (!sizes_fit) return 0;
  simdnorm_norm_args args;
  std::memset(&args, 0, sizeof args);
  simdnorm_running_statistics running;  // BatchNorm's own operands (simdnorm_batch_norm_args)
  std::memset(&running, 0, sizeof running);
  args.x = m.x();
  args.y = m.y;
  if (af & 1) {
    m.gamma.alloc(std::size_t(aff_n), 0, 3);
    for (std::int64_t i = 0; i < aff_n; ++i) m.gamma.data[i] = aux_value(0);
    args.gamma = m.gamma.data;
  }
  if (af & 2) {
    m.beta.alloc(std::size_t(aff_n), 0, 4);
    for (std::int64_t i = 0; i < aff_n; ++i) m.beta.data[i] = aux_value(1);
    args.beta = m.beta.data;
  }
  if (af & 4) {
    m.mean.alloc(std::size_t(units), 0, 5);
    args.mean = m.mean.data;
  }
  if (af & 8) {
    m.rstd.alloc(std::size_t(units), 0, 6);
    args.rstd = m.rstd.data;
  }
  const bool give_rm = (af & 0x30) != 0, give_rv = (af & 0x30) == 0x30 || (af & 0x30) == 0x10;
  // 0x10: both, 0x20: mean only (invalid), 0x30: both
  if (give_rm) {
    m.run_mean.alloc(std::size_t(ch_n), 0, 7);
    for (std::int64_t i = 0; i < ch_n; ++i) m.run_mean.data[i] = aux_value(1);
    running.mean = m.run_mean.data;
  }
  if (give_rv) {
    m.run_var.alloc(std::size_t(ch_n), 0, 8);
    for (std::int64_t i = 0; i < ch_n; ++i) m.run_var.data[i] = aux_value(2);
    running.var = m.run_var.data;
  }
  if (af & 0x40) {
    constexpr std::int64_t kCounters[8] = {0,  1,       2,           7,
                                           -1, kI64Max, kI64Max - 1, std::int64_t(1) << 40};
    m.counter = kCounters[h[55] % 8];
    m.has_counter = true;
    running.num_batches_tracked = &m.counter;
  }
  if (c.op != kBatchNorm) std::memset(&running, 0, sizeof running);  // no such operands
  // split statistics (h[62]): the records the stage takes, left out when bits 0-1 are 3; bits
  // 2-4 from 4 on corrupt one of apply's; bits 5-7 = 1 give a stage the records it does not take
  const std::uint8_t rf = h[62];
  const bool stray_records = (rf & 0xE0) == 0x20;
  const int record_kind = planned ? fuzzref::moments_kind(md.fam) : 0;
  const std::int64_t min_count = c.op == kBatchNorm && c.bn.training ? 2 : 1;
  if ((c.stage == kMoments && (rf & 3) != 3) || (stray_records && c.stage != kMoments)) {
    m.moments_out.alloc_records(std::size_t(units), 9);
    args.moments_out = m.moments_out.records();
  }
  if ((c.stage == kApply && (rf & 3) != 3) || (stray_records && c.stage != kApply)) {
    m.moments_in.alloc_records(std::size_t(units), 10);
    simdnorm_moments* rec = m.moments_in.records();
    if (planned)
      for (std::int64_t k = 0; k < units; ++k)
        rec[k] = record_of(md.fam, unit_stats[std::size_t(k)]);
    const int corrupt = (rf >> 2) & 7;
    if (planned && c.stage == kApply && corrupt >= 4) {
      simdnorm_moments& r = rec[prng.next() % std::uint64_t(units)];
      constexpr std::int32_t kNotKinds[4] = {0, 4, -1, kI32Min};
      constexpr std::int64_t kBadCounts[3] = {0, -1, kI64Min};
      switch (corrupt) {
        case 4: set_enum(&r.kind, 1 + (record_kind + std::int32_t(prng.next() % 2)) % 3); break;
        case 5: set_enum(&r.kind, kNotKinds[prng.next() % 4]); break;
        case 6: r.count = kBadCounts[prng.next() % 3]; break;
        default: r.count = min_count - 1; break;  // BatchNorm training: 1
      }
    }
    args.moments_in = rec;
  }
  // the row ops' fused operands (place_fused), their values by h[53]
  auto fused_value = [&](double spread) -> float {
    switch (f.value_mode) {
      case 0: return float(prng.uniform() * spread);
      case 1: return float(prng.uniform() * std::ldexp(spread, int(prng.next() % 41) - 20));
      case 2:
        return prng.next() % 8 == 0 ? kSpecials[prng.next() % 9] : float(prng.uniform() * spread);
      default: return next_value();
    }
  };
  call_geometry geo;
  geo.xo = &xo;
  geo.x_span = x_span;
  geo.y_bytes = std::int64_t(y_bytes);
  geo.x_type = x_type;
  geo.rows = units;
  geo.cols = small ? cols : 16;
  geo.segs = f.block > 0 && geo.cols % f.block == 0 ? geo.cols / f.block : 1;
  geo.y_apart_same_layout = alias == 0 && y_type == x_type && strides_equal_nonunit(c.xd, c.yd, nd);
  const buffer& y_holder = alias == 0 ? m.ybuf : m.xbuf;
  geo.x_fits_y = y_holder.base + y_holder.size() - m.y >= std::ptrdiff_t(x_bytes);
  const fused_ptrs fp = f.on ? place_fused(f, geo, prng, m, fused_value) : fused_ptrs{};
  if (misuse == 8) args.x = nullptr;
  if (misuse == 9) args.y = nullptr;
  m.snapshot_all();

  // ---- the arguments' validity (documented rules) -----------------------------------------------
  expect args_ex = expect::accept;
  if (planned) {
    auto bad = [&](bool b) {
      if (b) args_ex = expect::reject;
    };
    bad(args.x == nullptr || args.y == nullptr);
    if (args.x && args.y) {
      const auto xb = reinterpret_cast<std::uintptr_t>(args.x);
      const auto yb = reinterpret_cast<std::uintptr_t>(args.y);
      if (xb == yb) {
        bad(!strides_equal_nonunit(c.xd, c.yd, nd) || y_type != x_type);
      } else {
        bad(xb < yb + y_bytes && yb < xb + x_bytes);
      }
    }
    bad(args.beta && !os.takes_beta);
    bad(args.mean && !os.takes_mean);
    bad(args.gamma && os.affine == 0 && c.op != kBatchNorm);
    const bool stats_args = running.mean || running.var || running.num_batches_tracked;
    if (c.op == kBatchNorm && !c.bn.training) {
      bad(args.gamma || args.beta || args.mean || args.rstd || stats_args);
    } else if (c.op == kBatchNorm) {
      bad((running.mean == nullptr) != (running.var == nullptr));
      bad(c.bn.cumulative && running.mean && !running.num_batches_tracked);
      bad(c.bn.cumulative && running.num_batches_tracked && m.counter < 0);
      bad(running.num_batches_tracked && m.counter == kI64Max);  // cannot be incremented
    } else if (c.op == kMvn) {
      bad(args.gamma || args.beta || args.mean || args.rstd);
    }
    if (c.stage == kApply) {  // one record per unit, of the op's kind, with enough values
      bad(args.moments_in == nullptr);
      for (std::int64_t k = 0; args.moments_in && k < units; ++k)
        bad(get_enum(args.moments_in[k].kind) != record_kind ||
            args.moments_in[k].count < min_count);
    }
    if (c.stage == kMoments)  // reads x, writes the records; everything else is ignored
      args_ex = args.x && args.moments_out ? expect::accept : expect::reject;
    else if (stray_records && args_ex == expect::accept)
      args_ex = expect::either;  // records a stage does not take: not documented
  }
  call_info ci;
  ci.stage = c.stage;
  ci.x_bytes = x_bytes;
  ci.y_bytes = y_bytes;
  ci.rows = units;
  ci.cols = geo.cols;
  ci.same_layout = y_type == x_type && strides_equal_nonunit(c.xd, c.yd, nd);
  ci.x_overlaps = small && elements_overlap(xo, x_span);
  ci.x_plain_rows = padded_rows(c.xd, first, cols);
  const expect fused_ex = f.on ? fused_args_expect(f, fp, args, ci) : expect::accept;
  if (planned && fused_ex == expect::reject) args_ex = expect::reject;
  if (planned && fused_ex == expect::either && args_ex == expect::accept) args_ex = expect::either;
  // the residual's and the gate's values as given: in bounds wherever the call may be accepted
  // (a moments plan ignores the gate, wherever it lies: not read then). Not read where the
  // call must fail: with y missing, a gate placed over y's bytes may run past them.
  std::vector<float> rl, gl;
  const bool read_gate = fp.gate && c.stage != kMoments;
  for (std::int64_t i = 0; small && planned && args_ex != expect::reject && i < numel; ++i) {
    const std::int64_t o = xo[std::size_t(i)];
    if (fp.residual.in) rl.push_back(load_elem(fp.residual.in, o, x_type));
    if (read_gate) gl.push_back(load_elem(fp.gate, o, x_type));
  }

  // ---- execution --------------------------------------------------------------------------------
  host_pool pool;
  pool.chunk = 1 + (h[34] & 7);
  pool.reverse = h[34] & 8;
  simdnorm_executor ex_pool{&pool, std::size_t(h[34] >> 4), &pool_parallel_for};
  if (ex_pool.concurrency <= 1 && (h[34] & 0x10)) ex_pool.parallel_for = nullptr;

  // Runs the call by `path`; returns its status (first failing call).
  const bool bn = c.op == kBatchNorm;
  simdnorm_batch_norm_args ba;
  int call_op = c.op;  // the op whose args struct a fused plan call passes
  auto plan_execute = [&](const simdnorm_norm_args* a, const simdnorm_executor* e) {
    if (f.on)
      return with_row_args(a, fp,
                           [&](const row_args* r) { return execute_fused(plan, call_op, r, e); });
    return bn ? simdnorm_plan_execute_batch_norm(plan, bn_args(a, running, &ba), e)
              : simdnorm_plan_execute(plan, a, e);
  };
  auto plan_run = [&](const simdnorm_norm_args* a, std::size_t phase, std::size_t begin,
                      std::size_t end) {
    if (f.on)
      return with_row_args(
          a, fp, [&](const row_args* r) { return run_fused(plan, call_op, r, phase, begin, end); });
    return bn ? simdnorm_plan_run_batch_norm(plan, bn_args(a, running, &ba), phase, begin, end)
              : simdnorm_plan_run(plan, a, phase, begin, end);
  };
  auto any_one_shot = [&](const simdnorm_norm_args* a, const simdnorm_executor* e) {
    if (f.on)
      return with_row_args(a, fp, [&](const row_args* r) { return one_shot_fused(c, r, e); });
    return one_shot(c, a, running, e);
  };
  auto execute = [&](int path, bool allow_misuse) -> simdnorm_status {
    const int misuse_now = allow_misuse ? misuse : 0;
    call_op = args_op(c.op, allow_misuse && f.cross_op);
    pool.calls.clear();
    set_sentinel_message();
    switch (path) {
      case 0: return plan_execute(misuse_now == 4 ? nullptr : &args, nullptr);
      case 1: {
        simdnorm_executor e = ex_pool;
        if (misuse_now == 5) e.concurrency = 2, e.parallel_for = nullptr;
        return plan_execute(misuse_now == 4 ? nullptr : &args, &e);
      }
      case 2: {
        const std::size_t phases = simdnorm_plan_num_phases(plan);
        const std::size_t ws = simdnorm_plan_workspace_bytes(plan);
        void* w = nullptr;
        if (ws && posix_memalign(&w, 64, ws) != 0) std::abort();
        std::unique_ptr<void, void (*)(void*)> wg(w, &std::free);
        simdnorm_norm_args a = args;
        a.workspace = w;
        if (misuse_now == 4) return plan_run(nullptr, 0, 0, 1);
        if (misuse_now == 6) {
          const std::size_t n0 = simdnorm_plan_num_tasks(plan, 0);
          const int k = h[31] % 3;
          return k == 0   ? plan_run(&a, phases, 0, 0)
                 : k == 1 ? plan_run(&a, 0, 1, 0)
                          : plan_run(&a, 0, 0, n0 + 1);
        }
        if (misuse_now == 7 && ws) a.workspace = nullptr;
        for (std::size_t p = 0; p < phases; ++p) {
          const std::size_t n = simdnorm_plan_num_tasks(plan, p);
          const std::size_t chunks = (n + pool.chunk - 1) / pool.chunk;
          for (std::size_t k = 0; k < chunks; ++k) {
            const std::size_t j = pool.reverse ? chunks - 1 - k : k;
            const simdnorm_status s =
                plan_run(&a, p, j * pool.chunk, std::min(n, (j + 1) * pool.chunk));
            if (s != SIMDNORM_OK) return s;
          }
        }
        return SIMDNORM_OK;
      }
      default: {
        simdnorm_executor e = ex_pool;
        if (misuse_now == 5) e.concurrency = 2, e.parallel_for = nullptr;
        return any_one_shot(misuse_now == 4 ? nullptr : &args, &e);
      }
    }
  };
  const int path = h[33] % 4;
  const bool misuse_call = (misuse == 4) || (misuse == 5 && (path == 1 || path == 3)) ||
                           (misuse == 6 && path == 2) ||
                           (misuse == 7 && path == 2 && simdnorm_plan_workspace_bytes(plan) > 0) ||
                           (f.cross_op && path != 3);  // the one-shot takes its own struct
  if (!planned) {
    // the one-shot form of a refused plan fails the same way and writes nothing
    set_sentinel_message();
    const simdnorm_status s = any_one_shot(&args, &ex_pool);
    FUZZ_CHECK(s == ps);
    check_failure_reported(s);
    FUZZ_CHECK(m.all_unchanged());
    return 0;
  }
  const simdnorm_status s = execute(path, true);
  if (verbose) {
    std::fprintf(stderr, "  execute path %d -> %d (%s); tasks per phase:", path, int(s),
                 simdnorm_last_error_message());
    for (std::size_t p = 0; p < simdnorm_plan_num_phases(plan); ++p)
      std::fprintf(stderr, " %zu", simdnorm_plan_num_tasks(plan, p));
    std::fprintf(stderr, "\n");
  }
  if (misuse_call) args_ex = expect::reject;
  if (s != SIMDNORM_OK) {
    FUZZ_CHECK(args_ex != expect::accept);
    check_failure_reported(s);
    FUZZ_CHECK(m.all_unchanged());
    return 0;
  }
  FUZZ_CHECK(args_ex != expect::reject);
  check_no_new_message();
  if (path == 1 && ex_pool.concurrency > 1) {  // the pool saw every multi-task phase, in order
    std::vector<std::size_t> want;
    for (std::size_t p = 0; p < simdnorm_plan_num_phases(plan); ++p)
      if (simdnorm_plan_num_tasks(plan, p) > 1) want.push_back(simdnorm_plan_num_tasks(plan, p));
    FUZZ_CHECK(pool.calls == want);
  }

  // ---- nothing written outside y (and the outputs the op takes) ---------------------------------
  const bool writes_y = c.stage != kMoments;  // the moments stage writes its records only
  {
    // y's elements, and h's (the residual add stores it in every stage that takes it)
    const region y_region{writes_y ? m.y : nullptr, &yo, y_elem};
    const region h_region{fp.residual.out, &xo, x_elem};
    for (const buffer* b : m.inputs()) FUZZ_CHECK(untouched_except(*b, {y_region, h_region}));
    if (c.stage != kMoments) FUZZ_CHECK(m.moments_out.unchanged());
    const bool bn_train = c.op == kBatchNorm && c.bn.training && writes_y;
    if (!bn_train) {
      FUZZ_CHECK(m.run_mean.unchanged());
      FUZZ_CHECK(m.run_var.unchanged());
      FUZZ_CHECK(m.counter == m.counter_snap);
    } else if (m.has_counter) {
      FUZZ_CHECK(m.counter == m.counter_snap + 1);
    }
    if (!os.takes_mean || !writes_y) FUZZ_CHECK(m.mean.unchanged());
    if (!os.takes_rstd || !writes_y) FUZZ_CHECK(m.rstd.unchanged());
  }

  // ---- the float64 reference --------------------------------------------------------------------
  // The values the norm sees: x; h = (x + residual) + bias, which residual_out must hold bit
  // for bit; or with the gate before the norm x silu(gate), known within val_err.
  std::vector<float> vals = xl;
  std::vector<double> val_err;
  if (fp.residual.out) {
    vals = residual_sum(xl, rl, fp.residual.bias, cols, x_type);
    for (std::int64_t i = 0; i < numel; ++i) {
      const std::size_t u = std::size_t(i);
      const float got = load_elem(fp.residual.out, xo[u], x_type);
      if (!same_float(got, vals[u])) {
        std::fprintf(stderr, "residual_out[%lld] = %a, want %a = %a + %a (+ bias)\n", (long long)i,
                     double(got), double(vals[u]), double(xl[u]), double(rl[u]));
        FUZZ_CHECK(!"residual_out holds fl_x(fl(x + residual) + bias)");
      }
    }
  }
  if (f.gate_before) fuzzref::gate_before_norm(xl, gl, y_type, &vals, &val_err);
  md.gamma = args.gamma;
  md.beta = args.beta;
  affine_eff eff;  // gamma + weight_offset, the adaLN folds
  if (f.on) {
    const simdnorm_modulation_operands& mo = fp.modulation;
    const std::int64_t batches = f.tokens > 0 && mo.stride != 0 ? rows / f.tokens : 1;
    eff = effective_affine(f, args, mo, batches, cols);
    if (!eff.gamma.empty()) md.gamma = eff.gamma.data();
    if (!eff.beta.empty()) md.beta = eff.beta.data();
    for (std::int64_t i = 0; f.tokens > 0 && i < numel; ++i) {
      const std::int64_t b = mo.stride == 0 ? 0 : i / cols / f.tokens;
      md.aff_of[std::size_t(i)] = b * cols + i % cols;
    }
  }
  if (c.op == kBatchNorm && c.bn.training) {
    if (running.mean && running.var) {  // the moments stage takes one without the other
      md.run_mean_in = reinterpret_cast<const float*>(m.run_mean.snap.data());
      md.run_var_in = reinterpret_cast<const float*>(m.run_var.snap.data());
    }
    md.counter_in = m.counter_snap;
  }
  fuzzref::result ref = fuzzref::compute(md, vals);
  if (!gl.empty() && !f.gate_before) fuzzref::gate_after_norm(ref, gl);
  if (!val_err.empty()) fuzzref::widen_for_value_error(ref, md, val_err);
  if (f.post_norm) fuzzref::add_after_norm(ref, rl);
  // a 16-bit y is the f32 result rounded once more (an 8-bit y is checked through run_twin)
  if (is_16bit(y_type)) fuzzref::round_into(ref.y, y_type);
  auto print_unit = [&](std::int64_t unit) {
    const fuzzref::unit_ref& q = ref.units[std::size_t(unit)];
    std::fprintf(stderr,
                 "unit %lld: n %g mean %.17g var %.17g rstd %.17g; values:", (long long)unit, q.n,
                 q.mean, q.var, q.rstd);
    for (std::int64_t j = 0, shown = 0; j < numel && shown < 32; ++j)
      if (md.unit_of[std::size_t(j)] == unit) {
        std::fprintf(stderr, " %a", double(vals[std::size_t(j)]));
        ++shown;
      }
    std::fprintf(stderr, "\n");
  };
  // An 8-bit y and a residual add are checked through the same plan's f32 y from h (run_twin);
  // that f32 y then meets the float64 reference in the 8-bit y's place.
  const bool y8 = is_8bit(y_type);
  const bool twin = c.stage == kFull && !f.gate_before && (fp.residual.out || y8);
  const twin_result tw =
      twin ? run_twin(c, f.row_amax || y8, args, fp, vals, gl, xo, x_span, rows) : twin_result{};
  std::vector<float> yl(writes_y && !y8 ? std::size_t(numel) : 0);  // y as stored
  for (std::size_t i = 0; i < yl.size(); ++i) yl[i] = load_elem(m.y, yo[i], y_type);
  const std::vector<float>& yf = y8 ? tw.y : yl;
  for (std::size_t i = 0; i < yf.size(); ++i) {
    if (!ref.y.ok(i, yf[i])) {
      std::fprintf(stderr, "%s[%zu] = %.9g, reference %.17g (tol %.3g, kind %d), x = %.9g\n",
                   y8 ? "f32 y" : "y", i, double(yf[i]), ref.y.value[i], ref.y.tol[i],
                   int(ref.y.kind[i]), double(vals[i]));
      print_unit(md.unit_of[i]);
      FUZZ_CHECK(!"y matches the float64 reference");
    }
  }
  if (twin && !y8)  // the residual add: y is the plain norm of h as stored (rounded into y's type)
    for (std::size_t i = 0; i < yl.size(); ++i)
      if (!same_float(yl[i], fuzzref::round_to(y_type, tw.y[i]))) {
        std::fprintf(stderr, "y[%zu] = %a, the plain norm of h gives %a\n", i, double(yl[i]),
                     double(tw.y[i]));
        FUZZ_CHECK(!"y after the residual add is the plain norm of residual_out, bit for bit");
      }
  if (y8 && c.stage == kFull)
    check_quantized(f, rows, cols, tw.y, m.y, yo, fp.quant.y_scale, fp.quant.y_zero_point);
  for (std::int64_t r = 0; c.stage == kFull && fp.quant.amax && r < rows; ++r) {
    // max |y| of the f32 y: of y as stored for an f32 y; rounded into a 16-bit y's type, the
    // largest |y| stored there (rounding is monotonic)
    const float got = fp.quant.amax[r];
    if (!y8)
      FUZZ_CHECK(same_float(fuzzref::round_to(y_type, got),
                            bits_to_float(amax_bits(yl.data() + r * cols, cols))));
    if (twin && !is_16bit(y_type)) FUZZ_CHECK(same_float(got, tw.amax[std::size_t(r)]));
  }
  auto check_aux = [&](const buffer& b, const fuzzref::expectation& e, const char* name) {
    if (!b.data) return;
    for (std::int64_t k = 0; k < os.units && k < std::int64_t(e.kind.size()); ++k)
      if (!e.ok(std::size_t(k), b.data[k])) {
        std::fprintf(stderr, "%s[%lld] = %.9g, reference %.17g (tol %.3g)\n", name, (long long)k,
                     double(b.data[k]), e.value[std::size_t(k)], e.tol[std::size_t(k)]);
        print_unit(k);
        FUZZ_CHECK(!"saved statistics match the float64 reference");
      }
  };
  if (os.takes_mean && writes_y) check_aux(m.mean, ref.mean, "mean");
  if (os.takes_rstd && writes_y) check_aux(m.rstd, ref.rstd, "rstd");
  if (c.op == kBatchNorm && c.bn.training && running.mean && writes_y) {
    check_aux(m.run_mean, ref.run_mean, "running_mean");
    check_aux(m.run_var, ref.run_var, "running_var");
  }
  if (c.stage == kMoments) {  // one record per unit: the exact count, the op's kind, the sums
    const simdnorm_moments* rec = m.moments_out.records();
    for (std::int64_t k = 0; k < os.units; ++k) {
      const simdnorm_moments& r = rec[k];
      FUZZ_CHECK(r.count == numel / os.units);
      FUZZ_CHECK(get_enum(r.kind) == record_kind);
      FUZZ_CHECK(r.reserved == 0);
      const std::size_t u = std::size_t(k);
      if (!ref.record_mean.ok(u, r.mean) || !ref.record_m2.ok(u, r.m2)) {
        std::fprintf(stderr,
                     "moments_out[%lld]: mean %.17g m2 %.17g, reference %.17g (tol %.3g) and "
                     "%.17g (tol %.3g)\n",
                     (long long)k, r.mean, r.m2, ref.record_mean.value[u], ref.record_mean.tol[u],
                     ref.record_m2.value[u], ref.record_m2.tol[u]);
        print_unit(k);
        FUZZ_CHECK(!"the moments record matches the float64 statistics");
      }
    }
  }

  // ---- another execution path gives the same bits, NaN payloads aside ---------------------------
  if (!(h[33] & 0x80) && numel <= 1024 && !misuse_call) {
    std::vector<std::vector<unsigned char>> first_run;
    for (const buffer* b : m.all()) first_run.emplace_back(b->base, b->base + b->size());
    const std::int64_t first_counter = m.counter;
    m.restore_all();
    const int path2 = (path + 1 + (h[33] >> 2) % 3) % 4;
    FUZZ_CHECK(execute(path2, false) == SIMDNORM_OK);
    // what each buffer's words are, for the NaN test: the tensors of x's type (the residual
    // and its output too), y, the moments records (doubles and integers that are never NaN
    // patterns), the int32 zero points; the other buffers hold f32
    auto words_of = [&](const buffer* b) {
      if (b == &m.xbuf || b == &m.resid || b == &m.resid_out) return word_kind_of(x_type);
      if (b == &m.ybuf) return word_kind_of(y_type);
      if (b == &m.moments_out || b == &m.moments_in) return word_kind::f64;
      if (b == &m.y_zero_point) return word_kind::raw;
      return b->elem == 4 ? word_kind::f32 : word_kind::raw;
    };
    int k = 0;
    for (const buffer* b : m.all()) {
      FUZZ_CHECK(same_values(first_run[std::size_t(k)].data(), b->base, b->size(), words_of(b)));
      ++k;
    }
    FUZZ_CHECK(m.counter == first_counter);
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return run_one(data, size);
}
