// plan: the op-independent part (lifetime, phases, execute) and shared validation helpers.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "plan_impl.hpp"
#include "tuning.hpp"

namespace simdnorm {

namespace detail {

status check_tensor(const tensor_desc& t, const char* name) noexcept {
  if (t.ndim < 1 || t.ndim > max_dims)
    return status::error(status_code::invalid_argument, "%s.ndim=%d: must be in [1, %d]", name,
                         t.ndim, max_dims);
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] <= 0)
      return status::error(status_code::invalid_argument, "%s.shape[%d]=%lld: must be positive",
                           name, i, static_cast<long long>(t.shape[i]));
  std::int64_t numel = 1, last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.strides[i] < 0)
      return status::error(status_code::unsupported_layout,
                           "%s.strides[%d]=%lld: negative strides are not supported", name, i,
                           static_cast<long long>(t.strides[i]));
    std::int64_t off;
    if (__builtin_mul_overflow(numel, t.shape[i], &numel) ||
        __builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &off) ||
        __builtin_add_overflow(last, off, &last))
      return status::error(status_code::size_overflow, "%s: sizes overflow 64 bits", name);
  }
  const std::int64_t elem = std::int64_t(dtype_size(t.type));
  if (elem == 0)
    return status::error(status_code::invalid_argument, "%s.type=%d: not a simdnorm::dtype", name,
                         int(t.type));
  std::int64_t end, bytes;  // last + 1 itself overflows for an extent of exactly INT64_MAX
  if (__builtin_add_overflow(last, std::int64_t(1), &end) ||
      __builtin_mul_overflow(end, elem, &bytes) || __builtin_mul_overflow(numel, elem, &bytes))
    return status::error(status_code::size_overflow, "%s: byte size overflows 64 bits", name);
  return {};
}

status check_same_shape(const tensor_desc& x, const tensor_desc& y) noexcept {
  if (x.ndim != y.ndim)
    return status::error(status_code::invalid_argument, "x.ndim=%d but y.ndim=%d", x.ndim, y.ndim);
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != y.shape[i])
      return status::error(status_code::invalid_argument, "x.shape[%d]=%lld but y.shape[%d]=%lld",
                           i, static_cast<long long>(x.shape[i]), i,
                           static_cast<long long>(y.shape[i]));
  return {};
}

std::int64_t span_elements(const tensor_desc& t) noexcept {
  std::int64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) last += (t.shape[i] - 1) * t.strides[i];
  return last + 1;
}

bool dense_suffix(const tensor_desc& t, int first) noexcept {
  std::int64_t expect = 1;
  for (int i = t.ndim - 1; i >= first; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

status check_aliasing(const void* x, std::int64_t x_bytes, const void* y, std::int64_t y_bytes,
                      bool same_layout) noexcept {
  const auto xb = reinterpret_cast<std::uintptr_t>(x), yb = reinterpret_cast<std::uintptr_t>(y);
  if (xb == yb) {
    if (same_layout) return {};
    return status::error(status_code::invalid_argument,
                         "y aliases x (in place) but their strides or types differ");
  }
  const std::uintptr_t xe = xb + std::uintptr_t(x_bytes);
  const std::uintptr_t ye = yb + std::uintptr_t(y_bytes);
  if (xb < ye && yb < xe)
    return status::error(status_code::invalid_argument,
                         "y partially overlaps x: in-place use needs y == x with equal strides");
  return {};
}

namespace {

/// Size of the level-`level` (2 or 3: unified) cache of cpu0 from sysfs
/// (/sys/devices/system/cpu/cpu0/cache/index<i>/{level,size}), 0 when unknown. glibc's sysconf
/// knows the cache sizes on x86 only; on aarch64 it returns 0.
std::size_t sysfs_cache_bytes(int level) noexcept {
  std::size_t bytes = 0;
#if defined(__linux__)
  for (int i = 0; i < 16 && bytes == 0; ++i) {
    char path[80], unit = 0;
    int lvl = 0;
    unsigned long size = 0;
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE* f = std::fopen(path, "r");
    if (!f) break;
    const bool ok = std::fscanf(f, "%d", &lvl) == 1;
    std::fclose(f);
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!ok || lvl != level || !(f = std::fopen(path, "r"))) continue;
    if (std::fscanf(f, "%lu%c", &size, &unit) >= 1)
      bytes = std::size_t(size) << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
    std::fclose(f);
  }
#else
  (void)level;
#endif
  return bytes;
}

// sysfs first: glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) is not the size of one L3 on every CPU
// (on AMD EPYC guests it reports the package's: 320 MiB on Zen 4, 508 MiB on Zen 5, where a
// core reaches one 32 MiB L3), so an AMD L3 beyond any CCX's is taken as one CCX's.
std::size_t cache_bytes(int level) noexcept {
  const std::size_t b = sysfs_cache_bytes(level);
  if (b > 0) return b;
  long v = -1;
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
#endif
  std::size_t bytes = v > 0 ? std::size_t(v) : 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (level == 3 && bytes > kAmdLargestL3 && __builtin_cpu_is("amd")) bytes = kAmdCcxL3;
#endif
  return bytes;
}

}  // namespace

std::size_t last_level_cache_bytes() noexcept {
  static const std::size_t bytes = [] {
    std::size_t b = cache_bytes(3);
    if (b == 0) b = cache_bytes(2);
    return b > 0 ? b : std::size_t(32) << 20;
  }();
  return bytes;
}

std::size_t total_cache_bytes() noexcept {
  static const std::size_t bytes = [] {
    const std::size_t l2 = cache_bytes(2);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const std::size_t l2_all =
        (l2 > 0 ? l2 : std::size_t(1) << 20) * std::size_t(cpus > 0 ? cpus : 1);
    return cache_bytes(3) > 0 ? l2_all + cache_bytes(3)
                              : std::max(l2_all, last_level_cache_bytes());
  }();
  return bytes;
}

bool use_streaming_stores(store_policy p, std::size_t in_bytes, std::size_t out_bytes) noexcept {
  switch (p) {
    case store_policy::regular: return false;
    case store_policy::streaming: return true;
    case store_policy::automatic: break;
  }
  return in_bytes + out_bytes > total_cache_bytes() / 4 * 3;
}

status check_eps(float eps) noexcept {
  // An infinite eps would silently turn every output into beta (rstd 0): refused as the typo
  // it almost certainly is.
  if (!std::isfinite(eps) || eps < 0.f)
    return status::error(status_code::invalid_argument, "eps=%g: must be finite and >= 0",
                         double(eps));
  return {};
}

bool elements_disjoint(const tensor_desc& t) noexcept {
  int order[max_dims];
  for (int i = 0; i < t.ndim; ++i) {  // insertion sort by stride; ndim <= max_dims
    int j = i;
    for (; j > 0 && t.strides[order[j - 1]] > t.strides[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  std::int64_t covered = 1;  // extent of one element
  for (int k = 0; k < t.ndim; ++k) {
    const int d = order[k];
    if (t.shape[d] == 1) continue;
    if (t.strides[d] < covered) return false;
    covered = t.strides[d] * (t.shape[d] - 1) + covered;
  }
  return true;
}

}  // namespace detail

plan::plan() noexcept = default;
plan::~plan() = default;
plan::plan(const plan&) noexcept = default;
plan& plan::operator=(const plan&) noexcept = default;

isa plan::kernel_isa() const noexcept { return impl_ ? impl_->kernels->id : isa::scalar; }
std::size_t plan::num_phases() const noexcept { return impl_ ? impl_->num_phases() : 0; }
std::size_t plan::num_tasks(std::size_t phase) const noexcept {
  return impl_ && phase < impl_->num_phases() ? impl_->num_tasks(phase) : 0;
}
const char* plan::op_name() const noexcept { return impl_ ? detail::op_name(impl_->op_kind) : ""; }
std::size_t plan::workspace_bytes() const noexcept { return impl_ ? impl_->workspace_bytes() : 0; }
std::size_t plan::rows() const noexcept { return impl_ ? impl_->rows : 0; }
std::size_t plan::row_length() const noexcept { return impl_ ? impl_->cols : 0; }

namespace {

struct task_context {
  const detail::plan_impl* impl;
  const detail::call_args* args;
  std::size_t phase;
};
void run_task_range(void* ctx, std::size_t begin, std::size_t end) noexcept {
  const auto* c = static_cast<const task_context*>(ctx);
  c->impl->run_tasks(*c->args, c->phase, begin, end);
}

status run_checked(const detail::plan_impl* impl, const detail::call_args& args, std::size_t phase,
                   std::size_t begin, std::size_t end) noexcept {
  if (!impl) return status::error(status_code::invalid_argument, "run: the plan is empty");
  if (phase >= impl->num_phases())
    return status::error(status_code::invalid_argument, "run: phase %zu of %zu", phase,
                         impl->num_phases());
  const std::size_t n = impl->num_tasks(phase);
  if (begin > end || end > n)
    return status::error(status_code::invalid_argument, "run: tasks [%zu, %zu) outside [0, %zu)",
                         begin, end, n);
  status s = impl->check_args(args);
  if (!s) return s;
  if (impl->workspace_bytes() != 0 && args.workspace == nullptr)
    return status::error(status_code::invalid_argument,
                         "run: this plan needs args.workspace of %zu bytes",
                         impl->workspace_bytes());
  impl->run_tasks(args, phase, begin, end);
  return {};
}

status execute_checked(const detail::plan_impl* impl, const detail::call_args& args,
                       executor* exec) noexcept {
  if (!impl) return status::error(status_code::invalid_argument, "execute: the plan is empty");
  status s = impl->check_args(args);
  if (!s) return s;
  if (exec == nullptr) exec = &default_executor();
  detail::call_args a = args;
  std::unique_ptr<unsigned char, void (*)(void*)> scratch(nullptr, &std::free);
  if (impl->workspace_bytes() != 0 && a.workspace == nullptr) {
    const std::size_t bytes = (impl->workspace_bytes() + 63) / 64 * 64;
    scratch.reset(static_cast<unsigned char*>(std::aligned_alloc(64, bytes)));
    if (!scratch)
      return status::error(status_code::out_of_memory,
                           "execute: cannot allocate %zu bytes of workspace", bytes);
    a.workspace = scratch.get();
  }
  for (std::size_t phase = 0; phase < impl->num_phases(); ++phase) {
    const std::size_t n = impl->num_tasks(phase);
    if (n <= 1 || exec->concurrency() <= 1) {  // small: inline, the pool is not touched
      impl->run_tasks(a, phase, 0, n);
      continue;
    }
    task_context ctx{impl, &a, phase};
    try {
      exec->parallel_for(n, &run_task_range, &ctx);
    } catch (...) {
      return status::error(status_code::internal_error, "execute: the executor threw");
    }
  }
  return {};
}

/// Copies the parts of `a` that exist into call_args; the others stay null.
template <class Args>
detail::call_args to_call_args(const Args& a) noexcept {
  detail::call_args c;
  static_cast<norm_args&>(c) = a;
  if constexpr (std::is_base_of_v<residual_operands, Args>) static_cast<residual_operands&>(c) = a;
  if constexpr (std::is_base_of_v<quantized_outputs, Args>) static_cast<quantized_outputs&>(c) = a;
  if constexpr (std::is_base_of_v<modulation_operands, Args>)
    static_cast<modulation_operands&>(c) = a;
  if constexpr (std::is_base_of_v<gate_operand, Args>) static_cast<gate_operand&>(c) = a;
  if constexpr (std::is_base_of_v<running_statistics, Args>)
    static_cast<running_statistics&>(c) = a;
  return c;
}

/// An op's args struct on a plan of another op is refused.
status check_op(const detail::plan_impl* impl, detail::op_id op) noexcept {
  if (impl && impl->op_kind != op)
    return status::error(status_code::invalid_argument, "%s_args given to a plan of %s",
                         detail::op_name(op), detail::op_name(impl->op_kind));
  return {};
}

}  // namespace

const char* detail::op_name(op_id op) noexcept {
  switch (op) {
#define SIMDNORM_OP_NAME(name) \
  case op_id::name: return #name;
    SIMDNORM_OP_LIST(SIMDNORM_OP_NAME)
#undef SIMDNORM_OP_NAME
  }
  return "unknown";
}

status plan::run(const norm_args& args, std::size_t phase, std::size_t begin,
                 std::size_t end) const noexcept {
  return run_checked(impl_.get(), to_call_args(args), phase, begin, end);
}

status plan::execute(const norm_args& args, executor* exec) const noexcept {
  return execute_checked(impl_.get(), to_call_args(args), exec);
}

// plan::run and plan::execute with each op's args struct, and the one-shot calls of every op
// in simdnorm/op_list.h: make a plan, execute it.
#define SIMDNORM_DEFINE_RUN(op)                                                                  \
  status plan::run(const op##_args& args, std::size_t phase, std::size_t begin, std::size_t end) \
      const noexcept {                                                                           \
    const status s = check_op(impl_.get(), detail::op_id::op);                                   \
    return s ? run_checked(impl_.get(), to_call_args(args), phase, begin, end) : s;              \
  }                                                                                              \
  status plan::execute(const op##_args& args, executor* exec) const noexcept {                   \
    const status s = check_op(impl_.get(), detail::op_id::op);                                   \
    return s ? execute_checked(impl_.get(), to_call_args(args), exec) : s;                       \
  }                                                                                              \
  status op(const tensor_desc& x, const tensor_desc& y, const op##_params& params,               \
            const op##_args& args, executor* exec) noexcept {                                    \
    plan p;                                                                                      \
    const status s = plan::op(x, y, params, &p);                                                 \
    return s ? p.execute(args, exec) : s;                                                        \
  }
SIMDNORM_OP_LIST(SIMDNORM_DEFINE_RUN)
#undef SIMDNORM_DEFINE_RUN

status convert(const void* x, dtype x_type, void* y, dtype y_type, std::size_t n) noexcept {
  const std::size_t xs = dtype_size(x_type), ys = dtype_size(y_type);
  if (xs == 0 || ys == 0)
    return status::error(status_code::invalid_argument, "convert: type %d: not a simdnorm::dtype",
                         int(xs == 0 ? x_type : y_type));
  if (n == 0) return {};
  if (x == nullptr || y == nullptr)
    return status::error(status_code::invalid_argument, "convert: %s is null", x ? "y" : "x");
  if (n > std::size_t(PTRDIFF_MAX) / 4)
    return status::error(status_code::size_overflow, "convert: n=%zu is too large", n);
  status s =
      detail::check_aliasing(x, std::int64_t(n * xs), y, std::int64_t(n * ys), x_type == y_type);
  if (!s) return s;
  const detail::kernel_table* kt = detail::selected_table(&s);
  if (kt == nullptr) return s;
  kt->convert[std::size_t(x_type)][std::size_t(y_type)](x, y, n);
  return {};
}

}  // namespace simdnorm
