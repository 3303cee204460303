// A host engine with its own thread pool runs simdnorm plans, two ways:
//   1. through the executor interface: plan.execute(args, &pool);
//   2. by scheduling task ranges itself: each worker calls plan.run(args, phase, begin, end).
// No oneTBB thread is ever started: the example counts the process's threads before and after
// (Linux /proc/self/task) and fails if any thread other than the pool's appeared.
#include <simdnorm/simdnorm.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace {

// The engine's pool: fixed workers, a queue of jobs, and a parallel loop on top of it.
class thread_pool final : public simdnorm::executor {
 public:
  explicit thread_pool(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
  }
  ~thread_pool() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  std::size_t concurrency() const noexcept override { return workers_.size(); }

  // One chunk per worker; returns when every chunk has run (the executor contract).
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    const std::size_t chunks = workers_.size();
    std::size_t left = 0;
    std::mutex done_m;
    std::condition_variable done_cv;
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t b = n * c / chunks, e = n * (c + 1) / chunks;
      if (b == e) continue;
      ++left;
      submit([=, &left, &done_m, &done_cv] {
        task(ctx, b, e);
        std::lock_guard<std::mutex> lock(done_m);
        if (--left == 0) done_cv.notify_one();
      });
    }
    std::unique_lock<std::mutex> lock(done_m);
    done_cv.wait(lock, [&] { return left == 0; });
  }

  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping and drained
        job = std::move(jobs_.back());
        jobs_.pop_back();
      }
      job();
    }
  }

  std::vector<std::thread> workers_;
  std::vector<std::function<void()>> jobs_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
};

int thread_count() {  // threads of this process, or -1 where /proc is not available
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

}  // namespace

int main() {
  const int threads_at_start = thread_count();
  const std::size_t workers = 3;
  thread_pool pool(workers);

  // A LayerNorm over 512 rows of 1024 floats: several tasks.
  const std::int64_t rows = 512, cols = 1024;
  std::vector<float> x(rows * cols), gamma(cols, 1.5f), beta(cols, 0.25f);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(3.f, 2.f);
  for (float& v : x) v = dist(rng);
  std::vector<float> y_serial(x.size()), y_pool(x.size()), y_ranges(x.size());

  const auto d = simdnorm::tensor_desc::contiguous({rows, cols});
  simdnorm::plan plan;
  simdnorm::status s = simdnorm::plan::layer_norm(d, d, {}, &plan);
  if (!s) return std::fprintf(stderr, "plan: %s\n", s.message()), 1;

  simdnorm::norm_args args;
  args.x = x.data();
  args.gamma = gamma.data();
  args.beta = beta.data();

  // Reference: every task on this thread.
  args.y = y_serial.data();
  s = plan.execute(args, &simdnorm::serial_executor());

  // 1. The pool as an executor.
  args.y = y_pool.data();
  if (s) s = plan.execute(args, &pool);

  // 2. The engine schedules task ranges itself, e.g. interleaved with its own work. A plan
  //    with more than one phase needs a barrier between phases and a shared workspace.
  args.y = y_ranges.data();
  std::vector<unsigned char> workspace(plan.workspace_bytes() + 64);
  void* ws = workspace.data() + (64 - reinterpret_cast<std::uintptr_t>(workspace.data()) % 64) % 64;
  args.workspace = plan.workspace_bytes() ? ws : nullptr;
  for (std::size_t phase = 0; s && phase < plan.num_phases(); ++phase) {
    const std::size_t n = plan.num_tasks(phase), grain = 2;
    std::vector<simdnorm::status> results((n + grain - 1) / grain);
    std::mutex m;
    std::condition_variable cv;
    std::size_t left = results.size();
    for (std::size_t k = 0; k < results.size(); ++k) {
      pool.submit([&, k, phase] {
        results[k] = plan.run(args, phase, k * grain, std::min(n, (k + 1) * grain));
        std::lock_guard<std::mutex> lock(m);
        if (--left == 0) cv.notify_one();
      });
    }
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return left == 0; });
    for (const auto& r : results)
      if (!r) s = r;
  }
  if (!s) return std::fprintf(stderr, "run: %s\n", s.message()), 1;

  const bool same = std::memcmp(y_serial.data(), y_pool.data(), x.size() * sizeof(float)) == 0 &&
                    std::memcmp(y_serial.data(), y_ranges.data(), x.size() * sizeof(float)) == 0;
  const int threads_now = thread_count();
  const bool no_extra_threads =
      threads_at_start < 0 || threads_now == threads_at_start + int(workers);
  std::printf("host_pool: %zu tasks on %zu pool threads (%s), results %s, threads %d -> %d%s\n",
              plan.num_tasks(0), workers, simdnorm::isa_name(plan.kernel_isa()),
              same ? "identical to serial" : "DIFFER", threads_at_start, threads_now,
              no_extra_threads ? " (no library threads)" : " (UNEXPECTED THREADS)");
  return same && no_extra_threads && plan.num_tasks(0) > 1 ? 0 : 1;
}
