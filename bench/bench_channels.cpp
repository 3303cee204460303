// BatchNorm (inference and training-mode forward) and GroupNorm(32) bandwidth on CNN shapes,
// NCHW and NHWC, per ISA and thread count: (N, C, H, W) in {(1, 64, 112, 112), (8, 64, 56, 56),
// (32, 256, 14, 14), (32, 512, 7, 7), (256, 2048, 1, 1)} (2-6 MiB of x: cache-resident),
// (1, 256, 14, 14) and (1, 2048, 7, 7) (ResNet-50 at batch 1: 196 and 392 KiB, calls that run
// inline below kInlineElements or not) and (64, 64, 128, 128) (256 MiB of x: beyond the
// last-level cache); GroupNorm(32) on
// (1, 320, 64, 64) and (1, 640, 32, 32). Bytes: x read once plus y written once. The same in
// bf16 (x and y bf16, statistics and parameters f32: 2 bytes read and 2 written per element,
// against a copy of the same bytes).
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

struct shape {
  std::int64_t N, C, H, W;
};

// CNN shapes, plus two channel counts just off a power of two (496, 2032): beside 32x512x7x7
// and 256x2048x1x1 they price a power-of-two row stride in NHWC (docs/performance.md).
const shape kBatchNormShapes[] = {
    {1, 64, 112, 112}, {8, 64, 56, 56}, {32, 256, 14, 14},  {32, 512, 7, 7}, {256, 2048, 1, 1},
    {1, 256, 14, 14},  {1, 2048, 7, 7}, {64, 64, 128, 128}, {32, 496, 7, 7}, {256, 2032, 1, 1}};
const shape kGroupNormShapes[] = {{1, 320, 64, 64}, {1, 640, 32, 32}};

enum class op { bn_inference, bn_training, group_norm };

simdnorm::tensor_desc desc(const shape& s, bool nhwc, simdnorm::dtype t) {
  return nhwc ? simdnorm::tensor_desc::contiguous({s.N, s.H, s.W, s.C}, t)
              : simdnorm::tensor_desc::contiguous({s.N, s.C, s.H, s.W}, t);
}

void bench_channel_op(benchmark::State& state, op o, simdnorm::dtype type, simdnorm::isa isa,
                      shape s, bool nhwc, int threads) {
  const std::size_t n = std::size_t(s.N * s.C * s.H * s.W), C = std::size_t(s.C);
  const std::size_t bytes = n * simdnorm::dtype_size(type);  // of x, and of y
  float* x = bench::shared_buffer(bytes / sizeof(float), 0);
  float* y = bench::shared_buffer(bytes / sizeof(float), 1);
  float* g = bench::shared_buffer(C, 2);
  float* b = bench::shared_buffer(C, 3);
  std::vector<float> rm(C, 0.f), rv(C, 1.f), mean(C * std::size_t(s.N)), rstd(C * std::size_t(s.N));
  if (!bench::fill_normal_as(state, type, x, n, 3.0)) return;
  bench::fill_normal(g, C, 1.0);
  bench::fill_normal(b, C, 0.0);
  if (!bench::check(state, simdnorm::force_isa(isa))) return;
  const auto layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  simdnorm::plan p;
  simdnorm::status st;
  simdnorm::batch_norm_args a;
  a.x = x;
  a.y = y;
  if (o == op::group_norm) {
    simdnorm::group_norm_params prm;
    prm.num_groups = 32;
    prm.layout = layout;
    prm.stores = bench::stores();
    st = simdnorm::plan::group_norm(desc(s, nhwc, type), desc(s, nhwc, type), prm, &p);
    a.gamma = g, a.beta = b, a.mean = mean.data(), a.rstd = rstd.data();
  } else {
    simdnorm::batch_norm_params prm;
    prm.layout = layout;
    prm.stores = bench::stores();
    prm.training = o == op::bn_training;
    if (prm.training) {
      a.gamma = g, a.beta = b, a.mean = mean.data(), a.rstd = rstd.data();
      a.running_mean = rm.data(), a.running_var = rv.data();
    } else {
      prm.running_mean = rm.data(), prm.running_var = rv.data(), prm.gamma = g, prm.beta = b;
    }
    st = simdnorm::plan::batch_norm(desc(s, nhwc, type), desc(s, nhwc, type), prm, &p);
  }
  simdnorm::reset_isa();
  if (!bench::check(state, st)) return;
  std::vector<unsigned char> ws_storage(p.workspace_bytes() + 64);
  if (p.workspace_bytes() != 0)  // a caller's reusable workspace, 64-byte aligned
    a.workspace =
        ws_storage.data() + (64 - reinterpret_cast<std::uintptr_t>(ws_storage.data()) % 64) % 64;
  // GroupNorm takes the common operands only (a group_norm plan refuses batch_norm_args).
  const simdnorm::group_norm_args ga = static_cast<const simdnorm::norm_args&>(a);
  const auto run = [&] { return o == op::group_norm ? p.execute(ga) : p.execute(a); };
  if (!bench::check(state, run())) return;  // once, untimed: an error is never timed
  bench::measure(state, threads, 2 * bytes, x, y, bytes / sizeof(float), [&] { (void)run(); });
  state.counters["phases"] = double(p.num_phases());
  state.counters["tasks"] = double(p.num_tasks(0));
}

std::string shape_name(const shape& s) {
  return std::to_string(s.N) + "x" + std::to_string(s.C) + "x" + std::to_string(s.H) + "x" +
         std::to_string(s.W);
}

}  // namespace

void register_channel_benchmarks() {
  using simdnorm::dtype;
  struct entry {
    op o;
    dtype type;
    const char* name;
  };
  const entry ops[] = {{op::bn_inference, dtype::f32, "batch_norm_inference"},
                       {op::bn_training, dtype::f32, "batch_norm_training"},
                       {op::group_norm, dtype::f32, "group_norm32"},
                       {op::bn_inference, dtype::bf16, "batch_norm_inference_bf16"},
                       {op::bn_training, dtype::bf16, "batch_norm_training_bf16"},
                       {op::group_norm, dtype::bf16, "group_norm32_bf16"}};
  for (const entry& e : ops)
    for (simdnorm::isa i : bench::isas())
      for (bool nhwc : {false, true}) {
        const bool gn = e.o == op::group_norm;
        const shape* begin = gn ? std::begin(kGroupNormShapes) : std::begin(kBatchNormShapes);
        const shape* end = gn ? std::end(kGroupNormShapes) : std::end(kBatchNormShapes);
        for (const shape* s = begin; s != end; ++s)
          for (int t : bench::thread_counts()) {
            const std::string name = std::string(e.name) + "/" + simdnorm::isa_name(i) + "/" +
                                     (nhwc ? "nhwc/" : "nchw/") + shape_name(*s) +
                                     "/threads:" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), bench_channel_op, e.o, e.type, i, *s, nhwc,
                                         t)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
      }
}
