// LayerNorm, RMSNorm and L2 normalization bandwidth: rows x D for D in {64, 128, 768, 1024, 4096,
// 16384}, with x of 1 MiB (cache-resident) and 256 MiB (beyond the last-level cache), per ISA and
// thread count; plus LayerNorm with a single-float mean, to price the compensated (hi + lo) mean.
#include <string>

#include "bench_common.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
const std::size_t kCols[] = {64, 128, 768, 1024, 4096, 16384};
const std::size_t kXBytes[] = {1 * kMiB, 256 * kMiB};

enum class row_op { layer_norm, layer_norm_single_mean, rms_norm, l2_norm };

void bench_row_op(benchmark::State& state, row_op op, simdnorm::isa isa, std::size_t cols,
                  std::size_t x_bytes, int threads) {
  const std::size_t n = x_bytes / sizeof(float), rows = n / cols;
  float* x = bench::shared_buffer(n, 0);
  float* y = bench::shared_buffer(n, 1);
  float* g = bench::shared_buffer(cols, 2);
  float* b = bench::shared_buffer(cols, 3);
  bench::fill_normal(x, rows * cols, 3.0);
  bench::fill_normal(g, cols, 1.0);
  bench::fill_normal(b, cols, 0.0);
  if (!bench::check(state, simdnorm::force_isa(isa))) return;
  const auto d = simdnorm::tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  simdnorm::plan p;
  simdnorm::status s;
  if (op == row_op::rms_norm) {
    simdnorm::rms_norm_params prm;
    prm.stores = bench::stores();
    s = simdnorm::plan::rms_norm(d, d, prm, &p);
  } else if (op == row_op::l2_norm) {
    simdnorm::lp_norm_params prm;
    prm.stores = bench::stores();
    s = simdnorm::plan::lp_norm(d, d, prm, &p);
  } else {
    simdnorm::layer_norm_params prm;
    prm.stores = bench::stores();
    prm.compensated_mean = op == row_op::layer_norm;
    s = simdnorm::plan::layer_norm(d, d, prm, &p);
  }
  simdnorm::reset_isa();
  if (!bench::check(state, s)) return;
  simdnorm::norm_args a;
  a.x = x;
  a.y = y;
  const bool layer_norm = op == row_op::layer_norm || op == row_op::layer_norm_single_mean;
  a.gamma = op == row_op::l2_norm ? nullptr : g;
  a.beta = layer_norm ? b : nullptr;
  bench::measure(state, threads, 2 * rows * cols * sizeof(float), x, y, rows * cols,
                 [&] { (void)p.execute(a); });
  state.counters["rows"] = double(rows);
}

}  // namespace

void register_row_benchmarks() {
  const struct {
    row_op op;
    const char* name;
  } ops[] = {
      {row_op::layer_norm, "layer_norm"},
      {row_op::rms_norm, "rms_norm"},
      {row_op::layer_norm_single_mean, "layer_norm_single_mean"},
      {row_op::l2_norm, "l2_norm"},
  };
  for (const auto& o : ops)
    for (simdnorm::isa i : bench::isas())
      for (std::size_t xb : kXBytes)
        for (std::size_t cols : kCols)
          for (int t : bench::thread_counts()) {
            const std::string name =
                std::string(o.name) + "/" + simdnorm::isa_name(i) + "/D:" + std::to_string(cols) +
                "/x_MiB:" + std::to_string(xb / kMiB) + "/threads:" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), bench_row_op, o.op, i, cols, xb, t)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
}
