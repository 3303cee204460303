#include "simdnorm/status.hpp"

#include <cstdarg>
#include <cstdio>

namespace simdnorm {

const char* to_string(status_code code) noexcept {
  switch (code) {
    case status_code::ok: return "ok";
    case status_code::invalid_argument: return "invalid_argument";
    case status_code::unsupported_layout: return "unsupported_layout";
    case status_code::size_overflow: return "size_overflow";
    case status_code::unsupported_isa: return "unsupported_isa";
    case status_code::out_of_memory: return "out_of_memory";
    case status_code::internal_error: return "internal_error";
    case status_code::unsupported_dtype: return "unsupported_dtype";
  }
  return "unknown";
}

status status::error(status_code code, const char* fmt, ...) noexcept {
  status s;
  s.code_ = code;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(s.message_, sizeof s.message_, fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace simdnorm
