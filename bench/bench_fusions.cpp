// The transformer-block fusions of docs/fusions.md, each fused and as the unfused sequence an
// engine would run without it (the simdnorm op, then the elementwise step as a plain loop), on
// the default ISA, f32, rows x D for D in {128, 4096}, x of 1 MiB and 64 MiB:
//   add_rms_norm:   h = x + r stored over r, y = rms_norm(h): x, r read, h, y written
//                   (unfused: h = x + r, then rms_norm(h));
//   rms_norm_add:   post-norm, r = rms_norm(x) * gamma + r in place: x, r read, r written
//                   (unfused: rms_norm into y, then r += y);
//   gated_rms_norm: y = rms_norm(x) * gamma * silu(z): x, z read, y written
//                   (unfused: rms_norm, then y *= silu(z));
//   rms_norm_int8:  int8 y with a dynamic scale per row: x read, 1 byte of y written
//                   (unfused: rms_norm into f32, then a per-row amax and quantize pass);
//   adaln:          DiT's y = layer_norm(x) * (1 + scale[b]) + shift[b], no affine, T = 256
//                   tokens per batch (fewer where the rows are fewer): x read, y written
//                   (unfused: layer_norm, then the modulation as a second pass over y).
// Both variants are credited with the fused op's bytes and timed against a copy of those
// bytes, so the ratio to copy of the unfused variant shows what the fusion saves.
#include <cmath>
#include <string>

#include "bench_common.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

enum class fusion { add_rms_norm, rms_norm_add, gated_rms_norm, rms_norm_int8, adaln };

void bench_fusion(benchmark::State& state, fusion f, bool fused, std::size_t rows, std::size_t cols,
                  int threads) {
  const std::size_t n = rows * cols;
  float* x = bench::shared_buffer(n, 0);
  float* r = bench::shared_buffer(n, 1);  // the residual, or the gate
  float* y = bench::shared_buffer(n, 2);
  float* g = bench::shared_buffer(cols, 3);
  float* scales = bench::shared_buffer(rows, 4);
  const std::size_t tokens = rows < 256 ? rows : 256, batches = rows / tokens;
  float* mod = bench::shared_buffer(2 * batches * cols, 7);  // [B, 2, D]: scale, shift
  bench::fill_normal(mod, 2 * batches * cols, 0.0);
  bench::fill_normal(x, n, 0.0);
  bench::fill_normal(r, n, 0.0);
  bench::fill_normal(g, cols, 1.0);
  const auto d = simdnorm::tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)});
  auto yd = d;
  simdnorm::rms_norm_params prm;
  prm.stores = bench::stores();
  prm.residual_after_norm = f == fusion::rms_norm_add && fused;
  if (f == fusion::rms_norm_int8 && fused) yd.type = simdnorm::dtype::i8;
  simdnorm::layer_norm_params lnp;
  lnp.stores = bench::stores();
  if (f == fusion::adaln && fused) lnp.modulation_tokens = std::int64_t(tokens);
  simdnorm::plan p;
  if (!bench::check(state, f == fusion::adaln ? simdnorm::plan::layer_norm(d, yd, lnp, &p)
                                              : simdnorm::plan::rms_norm(d, yd, prm, &p)))
    return;
  simdnorm::rms_norm_args a;  // adaLN runs a LayerNorm plan: execute() passes it as such
  a.x = x;
  a.y = y;
  a.gamma = f == fusion::adaln ? nullptr : g;
  std::size_t bytes = 0;  // the fused op's traffic
  switch (f) {
    case fusion::add_rms_norm:
      bytes = 16 * n;
      if (fused) a.residual = a.residual_out = r;
      break;
    case fusion::rms_norm_add:
      bytes = 12 * n;
      if (fused) a.residual = a.y = r;
      break;
    case fusion::gated_rms_norm:
      bytes = 12 * n;
      if (fused) a.gate = r;
      break;
    case fusion::rms_norm_int8:
      bytes = 5 * n + 4 * rows;
      if (fused) a.y_scale = scales;
      break;
    case fusion::adaln:
      bytes = 8 * n + 8 * batches * cols;
      if (fused) {
        a.modulation_scale = mod;
        a.modulation_shift = mod + cols;
        a.modulation_stride = std::int64_t(2 * cols);
      }
      break;
  }
  const auto execute = [&] {
    if (f != fusion::adaln) return p.execute(a);
    simdnorm::layer_norm_args la = static_cast<const simdnorm::norm_args&>(a);
    static_cast<simdnorm::modulation_operands&>(la) = a;
    return p.execute(la);
  };
  auto unfused_step = [&] {  // the elementwise step before or after the norm
    if (f == fusion::add_rms_norm) {
      for (std::size_t i = 0; i < n; ++i) r[i] = x[i] + r[i];
      a.x = r;
    }
    (void)execute();
    if (f == fusion::rms_norm_add)
      for (std::size_t i = 0; i < n; ++i) r[i] += y[i];
    if (f == fusion::gated_rms_norm)
      for (std::size_t i = 0; i < n; ++i) y[i] *= r[i] / (1.f + std::exp(-r[i]));
    if (f == fusion::adaln)
      for (std::size_t k = 0; k < rows; ++k) {
        const float* scale = mod + k / tokens * 2 * cols;
        const float* shift = scale + cols;
        float* yr = y + k * cols;
        for (std::size_t i = 0; i < cols; ++i) yr[i] = yr[i] * (1.f + scale[i]) + shift[i];
      }
    if (f == fusion::rms_norm_int8) {
      auto* q = reinterpret_cast<signed char*>(y);  // codes over the f32 row, row by row
      for (std::size_t k = 0; k < rows; ++k) {
        const float* yr = y + k * cols;
        float amax = 0.f;
        for (std::size_t i = 0; i < cols; ++i) amax = std::fmax(amax, std::fabs(yr[i]));
        scales[k] = amax / 127.f;
        const float inv = amax > 0.f ? 127.f / amax : 0.f;
        for (std::size_t i = 0; i < cols; ++i)
          q[k * cols + i] = static_cast<signed char>(std::nearbyint(yr[i] * inv));
      }
    }
  };
  float* copy_src = bench::shared_buffer(bytes / 8, 5);
  float* copy_dst = bench::shared_buffer(bytes / 8, 6);
  if (!bench::check(state, execute())) return;  // once, untimed: an error is never timed
  if (fused)
    bench::measure(state, threads, bytes, copy_src, copy_dst, bytes / 8, [&] { (void)execute(); });
  else
    bench::measure(state, threads, bytes, copy_src, copy_dst, bytes / 8, unfused_step);
  state.counters["rows"] = double(rows);
}

}  // namespace

void register_fusion_benchmarks() {
  const struct {
    fusion f;
    const char* name;
  } ops[] = {{fusion::add_rms_norm, "add_rms_norm"},
             {fusion::rms_norm_add, "rms_norm_add"},
             {fusion::gated_rms_norm, "gated_rms_norm"},
             {fusion::rms_norm_int8, "rms_norm_int8"},
             {fusion::adaln, "adaln"}};
  for (const auto& o : ops)
    for (bool fused : {true, false})
      for (std::size_t xb : {1 * kMiB, 64 * kMiB})
        for (std::size_t cols : {128, 4096})
          for (int t : bench::thread_counts()) {
            const std::string name =
                std::string("fusion/") + o.name + (fused ? "/fused" : "/unfused") +
                "/D:" + std::to_string(cols) + "/x_MiB:" + std::to_string(xb / kMiB) +
                "/threads:" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), bench_fusion, o.f, fused,
                                         xb / sizeof(float) / cols, cols, t)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
}
