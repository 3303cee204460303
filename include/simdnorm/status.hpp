// simdnorm: status values returned by every fallible call. No call throws.
#pragma once
#include <cstddef>
#include <cstring>

#include "simdnorm/export.h"

namespace simdnorm {

/// What went wrong, as a stable code (also the C API's `simdnorm_status_code`).
enum class status_code : int {
  ok = 0,
  invalid_argument = 1,    ///< null pointer, bad dimension, bad eps/momentum, mismatched shapes
  unsupported_layout = 2,  ///< strides that overlap or cannot serve the normalized block
  size_overflow = 3,       ///< element counts or extents that do not fit in 64 bits
  unsupported_isa = 4,     ///< an ISA that was not compiled in, or that this CPU cannot run
  out_of_memory = 5,       ///< the whole-op call could not allocate its workspace
  internal_error = 6,      ///< an executor threw, or another condition that is a bug
  unsupported_dtype = 7,   ///< an element type (or pair of x and y types) the op does not take
};

/// Short, stable name of a code ("ok", "invalid_argument", ...).
SIMDNORM_EXPORT const char* to_string(status_code code) noexcept;

/// A code plus a human-readable message naming the offending argument and value.
/// Fixed-size and allocation-free, so it can be returned from `noexcept` hot paths.
class SIMDNORM_EXPORT status {
 public:
  /// ok. The message buffer is written and read for errors only: checks on the hot path of
  /// every call return ok statuses, and zeroing 200 bytes each time was most of their cost.
  status() noexcept {}
  status(const status& other) noexcept { *this = other; }
  status& operator=(const status& other) noexcept {
    code_ = other.code_;
    if (!other.ok()) std::memcpy(message_, other.message_, sizeof message_);
    return *this;
  }
  /// printf-style message; truncated to the buffer size.
  static status error(status_code code, const char* fmt, ...) noexcept
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
  bool ok() const noexcept { return code_ == status_code::ok; }
  explicit operator bool() const noexcept { return ok(); }
  status_code code() const noexcept { return code_; }
  /// "ok" for success; otherwise the message given at construction.
  const char* message() const noexcept { return ok() ? "ok" : message_; }

 private:
  status_code code_ = status_code::ok;
  char message_[200];
};

}  // namespace simdnorm
