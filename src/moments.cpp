// Split statistics: merging moments records (simdnorm::merge_moments). The library is built
// with -ffp-contract=off, so each operation below rounds as written on every architecture and
// a merge gives the same bits wherever it runs.
#include "plan_impl.hpp"

namespace simdnorm {

namespace detail {

const char* moments_kind_name(moments_kind k) noexcept {
  switch (k) {
    case moments_kind::centered: return "centered";
    case moments_kind::squares: return "squares";
    case moments_kind::magnitudes: return "magnitudes";
  }
  return "unknown";
}

bool known_kind(moments_kind k) noexcept {
  return k == moments_kind::centered || k == moments_kind::squares || k == moments_kind::magnitudes;
}

}  // namespace detail

status merge_moments(const moments* parts, std::size_t num_parts, std::size_t n,
                     moments* out) noexcept {
  if (n == 0) return {};
  if (parts == nullptr || out == nullptr)
    return status::error(status_code::invalid_argument, "merge_moments: %s is null",
                         parts == nullptr ? "parts" : "out");
  if (num_parts == 0)
    return status::error(status_code::invalid_argument, "merge_moments: num_parts is 0");
  // Validate everything first: on error nothing is written.
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t total = 0;
    for (std::size_t p = 0; p < num_parts; ++p) {
      const moments& m = parts[p * n + i];
      if (m.kind != parts[i].kind || !detail::known_kind(m.kind))
        return status::error(status_code::invalid_argument,
                             "merge_moments: parts[%zu].kind=%d: record %zu of every part must "
                             "have one moments_kind (part 0 has %d)",
                             p * n + i, int(m.kind), i, int(parts[i].kind));
      if (m.count < 1)
        return status::error(status_code::invalid_argument,
                             "merge_moments: parts[%zu].count=%lld: must be positive", p * n + i,
                             static_cast<long long>(m.count));
      if (__builtin_add_overflow(total, m.count, &total))
        return status::error(status_code::size_overflow,
                             "merge_moments: the counts of record %zu overflow 64 bits", i);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    moments acc = parts[i];
    for (std::size_t p = 1; p < num_parts; ++p) {
      const moments& b = parts[p * n + i];
      const std::int64_t count = acc.count + b.count;
      if (acc.kind == moments_kind::centered) {  // Chan: the weights as the kernels' folds
        const double na = double(acc.count), nb = double(b.count);
        const double delta = b.mean - acc.mean;
        acc.mean += delta * (nb / (na + nb));
        acc.m2 += b.m2 + delta * delta * (na * nb / (na + nb));
      } else {
        acc.m2 += b.m2;
      }
      acc.count = count;
    }
    acc.reserved = 0;
    out[i] = acc;
  }
  return {};
}

}  // namespace simdnorm
