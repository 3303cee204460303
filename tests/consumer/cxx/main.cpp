// Consumer check: the installed C++ headers compile on their own and the library links and runs.
#include <simdnorm/simdnorm.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

// A host executor defined outside the library: needs the exported vtable and typeinfo.
class inline_pool final : public simdnorm::executor {
 public:
  std::size_t calls = 0;
  std::size_t concurrency() const noexcept override { return 2; }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    ++calls;
    task(ctx, 0, n / 2);
    task(ctx, n / 2, n);
  }
};

int main() {
  const std::int64_t rows = 4, cols = 37;
  std::vector<float> x(rows * cols), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % cols) * 0.25f;
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = y.data();
  const auto d = simdnorm::tensor_desc::contiguous({rows, cols});
  simdnorm::status s = simdnorm::layer_norm(d, d, {}, a);
  inline_pool pool;
  // Above the library's inline size (2^17 elements), so the call goes to the pool.
  std::vector<float> big(1024 * 256, 1.5f);
  simdnorm::norm_args b;
  b.x = b.y = big.data();
  const auto bd = simdnorm::tensor_desc::contiguous({1024, 256});
  if (s) s = simdnorm::rms_norm(bd, bd, {}, b, &pool);
  if (s && (pool.calls != 1 || std::fabs(big.back() - 1.f) > 1e-5f))
    s = simdnorm::status::error(simdnorm::status_code::internal_error, "host pool not used");
  if (!s) {
    std::fprintf(stderr, "layer_norm: %s\n", s.message());
    return 1;
  }
  double sum = 0, sq = 0;  // each row now has mean 0 and variance 1
  for (std::int64_t k = 0; k < cols; ++k) sum += y[k], sq += double(y[k]) * y[k];
  const bool ok = std::fabs(sum / cols) < 1e-5 && std::fabs(sq / cols - 1) < 1e-3;
  std::printf("consumer_cxx: %s on %s\n", ok ? "ok" : "WRONG",
              simdnorm::isa_name(simdnorm::active_isa()));
  return ok ? 0 : 1;
}
