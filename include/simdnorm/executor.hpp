// simdnorm: executors run a plan's independent tasks on some threads.
//
// A plan splits its work into tasks that are independent within one phase. `plan::execute`
// hands each phase to an executor; a host engine that owns a thread pool implements
// `executor` (or calls `plan::run` on task ranges itself) and no library thread is started.
#pragma once
#include <cstddef>

#include "simdnorm/export.h"

namespace simdnorm {

/// Interface for running `n` independent tasks. The shape of oneDNN's threadpool_iface and
/// pthreadpool: a count, and a parallel loop that returns when every task has finished.
class SIMDNORM_EXPORT executor {
 public:
  /// Runs tasks [begin, end) on the calling thread; never throws.
  using task_fn = void (*)(void* ctx, std::size_t begin, std::size_t end) noexcept;

  virtual ~executor();
  /// How many threads may run tasks at once (a hint; 1 means serial).
  virtual std::size_t concurrency() const noexcept = 0;
  /// Calls `task(ctx, b, e)` over disjoint ranges that together cover [0, n), on any threads,
  /// and returns only when all calls have returned. The partition is the executor's choice:
  /// results do not depend on it.
  virtual void parallel_for(std::size_t n, task_fn task, void* ctx) = 0;
};

/// Runs every task on the calling thread, in order.
SIMDNORM_EXPORT executor& serial_executor() noexcept;

/// The default: oneTBB `parallel_for` in the caller's current task arena (wrap calls in your own
/// `tbb::task_arena::execute` to cap or isolate the threads; the library never creates a
/// `global_control`). In a build without oneTBB it is `serial_executor()`.
SIMDNORM_EXPORT executor& default_executor() noexcept;

}  // namespace simdnorm
