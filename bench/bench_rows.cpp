// LayerNorm, RMSNorm and L2 normalization bandwidth: rows x D for D in {64, 128, 768, 1024, 4096,
// 16384}, with x of 1 MiB (cache-resident) and 256 MiB (beyond the last-level cache), per ISA and
// thread count; plus LayerNorm with a single-float mean, to price the compensated (hi + lo) mean,
// and LayerNorm / RMSNorm on bf16 and f16 tensors (x and y of that type: 2 bytes read and 2
// written per element, against a copy of the same bytes).
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
const std::size_t kCols[] = {64, 128, 768, 1024, 4096, 16384};
const std::size_t kXBytes[] = {1 * kMiB, 256 * kMiB};

enum class row_op { layer_norm, layer_norm_single_mean, rms_norm, l2_norm };

void bench_row_op(benchmark::State& state, row_op op, simdnorm::dtype type, simdnorm::isa isa,
                  std::size_t rows, std::size_t cols, int threads) {
  const std::size_t elem = simdnorm::dtype_size(type);
  const std::size_t x_bytes = rows * cols * elem;
  float* x = bench::shared_buffer(x_bytes / sizeof(float), 0);
  float* y = bench::shared_buffer(x_bytes / sizeof(float), 1);
  float* g = bench::shared_buffer(cols, 2);
  float* b = bench::shared_buffer(cols, 3);
  if (!bench::fill_normal_as(state, type, x, rows * cols, 3.0)) return;
  bench::fill_normal(g, cols, 1.0);
  bench::fill_normal(b, cols, 0.0);
  if (!bench::check(state, simdnorm::force_isa(isa))) return;
  const auto d = simdnorm::tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, type);
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
  const std::size_t bytes = rows * cols * elem;    // of x, and of y
  if (!bench::check(state, p.execute(a))) return;  // once, untimed: an error is never timed
  bench::measure(state, threads, 2 * bytes, x, y, bytes / sizeof(float),
                 [&] { (void)p.execute(a); });
  state.counters["rows"] = double(rows);
}

}  // namespace

void register_row_benchmarks() {
  using simdnorm::dtype;
  const struct {
    row_op op;
    dtype type;
    const char* name;
  } ops[] = {
      {row_op::layer_norm, dtype::f32, "layer_norm"},
      {row_op::rms_norm, dtype::f32, "rms_norm"},
      {row_op::layer_norm_single_mean, dtype::f32, "layer_norm_single_mean"},
      {row_op::l2_norm, dtype::f32, "l2_norm"},
      {row_op::layer_norm, dtype::bf16, "layer_norm_bf16"},
      {row_op::rms_norm, dtype::bf16, "rms_norm_bf16"},
      {row_op::layer_norm, dtype::f16, "layer_norm_f16"},
      {row_op::rms_norm, dtype::f16, "rms_norm_f16"},
  };
  for (const auto& o : ops)
    for (simdnorm::isa i : bench::isas())
      for (std::size_t xb : kXBytes)
        for (std::size_t cols : kCols)
          for (int t : bench::thread_counts()) {
            const std::string name =
                std::string(o.name) + "/" + simdnorm::isa_name(i) + "/D:" + std::to_string(cols) +
                "/x_MiB:" + std::to_string(xb / kMiB) + "/threads:" + std::to_string(t);
            const std::size_t rows = xb / simdnorm::dtype_size(o.type) / cols;
            benchmark::RegisterBenchmark(name.c_str(), bench_row_op, o.op, o.type, i, rows, cols, t)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
  for (row_op op : {row_op::layer_norm, row_op::rms_norm})
    for (simdnorm::isa i : bench::isas())
      for (const bench::rows_cols& f : bench::kFewRows)
        for (int t : bench::thread_counts()) {
          const std::string name = std::string("few_rows/") +
                                   (op == row_op::layer_norm ? "layer_norm/" : "rms_norm/") +
                                   simdnorm::isa_name(i) + "/rows:" + std::to_string(f.rows) +
                                   "/D:" + std::to_string(f.cols) + "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), bench_row_op, op, simdnorm::dtype::f32, i,
                                       f.rows, f.cols, t)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
}
