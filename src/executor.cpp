// The serial executor and the default (oneTBB) executor.
#include "simdnorm/executor.hpp"

#if SIMDNORM_WITH_TBB
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#endif

namespace simdnorm {

executor::~executor() = default;

namespace {

class serial_executor_impl final : public executor {
 public:
  std::size_t concurrency() const noexcept override { return 1; }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    if (n) task(ctx, 0, n);
  }
};

#if SIMDNORM_WITH_TBB
// parallel_for in the caller's current arena: a host caps or isolates us with its own
// tbb::task_arena; no global_control is ever created here. Plan tasks are equal-sized, so a
// static partition (one contiguous block of tasks per thread, as the copy it is measured
// against) beats work stealing: no splitting overhead and each thread streams one region.
class tbb_executor_impl final : public executor {
 public:
  std::size_t concurrency() const noexcept override {
    const int c = oneapi::tbb::this_task_arena::max_concurrency();
    return c > 0 ? std::size_t(c) : 1;
  }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<std::size_t>(0, n, 1),
        [&](const oneapi::tbb::blocked_range<std::size_t>& r) { task(ctx, r.begin(), r.end()); },
        oneapi::tbb::static_partitioner());
  }
};
#endif

}  // namespace

executor& serial_executor() noexcept {
  static serial_executor_impl e;
  return e;
}

executor& default_executor() noexcept {
#if SIMDNORM_WITH_TBB
  static tbb_executor_impl e;
  return e;
#else
  return serial_executor();
#endif
}

}  // namespace simdnorm
