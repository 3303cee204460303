#include "test_util.hpp"

#include <thread>

namespace test {

void chunked_thread_executor::parallel_for(std::size_t n, task_fn task, void* ctx) {
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < chunks_; ++c) {
    const std::size_t b = n * c / chunks_, e = n * (c + 1) / chunks_;
    if (b < e) threads.emplace_back([=] { task(ctx, b, e); });
  }
  for (auto& t : threads) t.join();
}

}  // namespace test
