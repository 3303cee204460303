// Peer benchmarks: the same ops, shapes, buffers and thread counts as simdnorm's own benchmarks,
// named in parallel with them, the implementation in place of simdnorm's ISA:
//   layer_norm/avx512bw/D:768/x_MiB:1/threads:2     (bench_rows.cpp, simdnorm)
//   layer_norm/onednn/D:768/x_MiB:1/threads:2       (here)
//   layer_norm/torch/D:768/x_MiB:1/threads:2        (here; torch_avx512 when ATen is forced)
//   batch_norm_training/avx512bw/nhwc/8x64x56x56/threads:1   (bench_channels.cpp, simdnorm)
//   batch_norm_training/onednn/nhwc/8x64x56x56/threads:1     (here)
// Each is timed with bench::measure_on, the same machinery as simdnorm's bench::measure: its
// own in-run copy limit of the same bytes at the same thread count, and its ratio. Two
// differences make that copy comparable to the op it sits next to: it runs on the peer's thread
// runtime (OpenMP; a oneTBB copy between OpenMP runs would fight the OpenMP workers, which spin
// after each parallel region, for the cores), and it writes where the peer writes (libtorch
// allocates its outputs; a copy into another buffer would see colder caches).
//
// Interleaving. These are separate benchmarks, and the report runs them all with
// --benchmark_repetitions=N --benchmark_enable_random_interleaving=true and takes medians over
// the repetitions (Google Benchmark 1.7.1 shuffles every repetition of every benchmark into
// one random order). So simdnorm and each peer of one shape are sampled at N random moments
// spread over the whole run, and a noisy phase of the shared machine hits all of them alike,
// with a copy limit measured next to every sample. Rotating the implementations inside one
// benchmark function would interleave more tightly, but it would give the peers and simdnorm
// different benchmark machinery from simdnorm's own sweep and one shared iteration count.
//
// Correctness first: before a peer of a shape is timed the first time, its output is compared
// with simdnorm's on the same input (simdnorm is within a few float roundings of a float64
// reference: bench/accuracy.cpp). A wrong output makes the benchmark an error (with the largest
// difference in the message), never a timing; a numerical difference from long float
// reductions is timed and reported (counters max_diff_vs_simdnorm, numerics_differ).
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "../bench_common.hpp"
#include "peers.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
// The shapes of bench_rows.cpp's LayerNorm sweep.
const std::size_t kLnCols[] = {64, 128, 768, 1024, 4096, 16384};
const std::size_t kLnXBytes[] = {1 * kMiB, 256 * kMiB};
// Buffer slot for simdnorm's reference output (bench::shared_buffer); 0..3 are x, y, gamma,
// beta as in simdnorm's own benchmarks, so peers and simdnorm read and write the same memory.
constexpr int kRefSlot = 40;

/// Largest |peer - simdnorm| and whether every element is within atol + rtol * |simdnorm|
/// (NaN or Inf where simdnorm is finite fails).
struct diff {
  double max_abs = 0;
  std::size_t bad = 0, first_bad = 0;
};

diff compare(const float* got, const float* want, std::size_t n, double atol, double rtol) {
  diff d;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = std::fabs(double(got[i]) - double(want[i]));
    const bool ok = e <= atol + rtol * std::fabs(double(want[i]));  // false for NaN
    if (!ok) {
      if (d.bad++ == 0) d.first_bad = i;
    }
    if (!(e <= d.max_abs)) d.max_abs = std::isfinite(e) ? std::max(d.max_abs, e) : INFINITY;
  }
  return d;
}

// The verdict per benchmark name: the peer's output is compared once (setup runs again for every
// repetition; the inputs are the same each time).
struct verdict {
  bool ok = false;       // timed (maybe with a numerical difference, see the counters)
  bool differs = false;  // beyond kTight
  double max_abs = 0;
  std::string message;
};
// Tolerances of the check against simdnorm, elementwise |peer - simdnorm| <= tol * (1 + |y|):
// within kTight the outputs agree; up to kLoose they differ by float rounding of long
// reductions (peers that add a channel of a million values sequentially in one float lane):
// timed, and the difference is reported (counter numerics_differ = 1, max_diff_vs_simdnorm);
// beyond, or NaN/Inf where simdnorm is finite, the output is wrong and the peer is not timed.
constexpr double kTight = 1e-3, kTightBf16 = 1e-2, kLoose = 5e-2;
std::map<std::string, verdict>& verdicts() {
  static std::map<std::string, verdict> v;
  return v;
}

// Checks the peer against simdnorm's output once per benchmark name, then times it.
// `ref_fn(ref)` computes simdnorm's output into ref, of the problem's element type (only on the
// first call for this name).
template <class RefFn>
void check_and_measure(benchmark::State& state, const peers::peer* peer, const peers::problem& p,
                       const peers::io& io, int threads, const std::string& key, RefFn ref_fn) {
  const std::size_t n = p.elements(), bytes = n * p.element_bytes();
  const bool bf16 = p.type == peers::elem::bf16;
  std::string info;
  auto op = peer->make(p, io, threads, &info);
  if (!op) {
    state.SkipWithError(info.c_str());
    return;
  }
  auto it = verdicts().find(key);
  if (it == verdicts().end()) {
    float* ref = bench::shared_buffer(n, kRefSlot);
    verdict v;
    std::vector<std::uint16_t> ref_bits(bf16 ? n : 0);
    const simdnorm::status s = bf16 ? ref_fn(ref_bits.data()) : ref_fn(ref);
    for (std::size_t i = 0; i < ref_bits.size(); ++i) ref[i] = peers::bf16_to_float(ref_bits[i]);
    if (!s) {
      v.message = std::string("simdnorm reference failed: ") + s.message();
    } else {
      op->run();
      // bf16 outputs that agree may still differ by an ulp of bf16 (2^-8 relative)
      const double tight = bf16 ? kTightBf16 : kTight;
      const diff df = compare(op->output(), ref, n, kLoose, kLoose);
      v.max_abs = df.max_abs;
      v.ok = df.bad == 0;
      v.differs = compare(op->output(), ref, n, tight, tight).bad != 0;
      if (!v.ok)
        v.message = "output differs from simdnorm: " + std::to_string(df.bad) +
                    " elements beyond 5e-2 * (1 + |y|), max |diff| " + std::to_string(df.max_abs) +
                    ", first at " + std::to_string(df.first_bad);
    }
    it = verdicts().emplace(key, v).first;
  }
  if (!it->second.ok) {
    state.SkipWithError(it->second.message.c_str());
    return;
  }
  op->run();  // untimed: the output memory exists now (the copy target)
  bench::measure_on(peer->fork, state, threads, 2 * bytes, static_cast<const float*>(io.x),
                    static_cast<float*>(op->copy_target()), bytes / sizeof(float),
                    [&] { op->run(); });
  state.counters["max_diff_vs_simdnorm"] = it->second.max_abs;
  state.counters["numerics_differ"] = it->second.differs ? 1 : 0;
  state.SetLabel(info);
}

/// simdnorm's dtype of a problem's element type.
simdnorm::dtype dtype_of(peers::elem t) {
  return t == peers::elem::bf16 ? simdnorm::dtype::bf16 : simdnorm::dtype::f32;
}

void bench_peer_layer_norm(benchmark::State& state, const peers::peer* peer, peers::elem type,
                           bench::rows_cols rc, int threads, const std::string& key) {
  const std::size_t rows = rc.rows, cols = rc.cols, n = rows * cols;
  const simdnorm::dtype dt = dtype_of(type);
  const std::size_t floats = (n * simdnorm::dtype_size(dt) + 3) / sizeof(float);
  float* x = bench::shared_buffer(floats, 0);
  float* y = bench::shared_buffer(floats, 1);
  float* g = bench::shared_buffer(cols, 2);
  float* b = bench::shared_buffer(cols, 3);
  if (!bench::fill_normal_as(state, dt, x, n, 3.0)) return;  // as bench_rows.cpp
  bench::fill_normal(g, cols, 1.0);
  bench::fill_normal(b, cols, 0.0);

  peers::problem p;
  p.op = peers::op_kind::layer_norm;
  p.lay = peers::layout::rows;
  p.n = std::int64_t(rows);
  p.c = std::int64_t(cols);
  p.type = type;
  peers::io io;
  io.x = x;
  io.y = y;
  io.gamma = g;
  io.beta = b;
  check_and_measure(state, peer, p, io, threads, key, [&](void* ref) {
    // simdnorm with default parameters (compensated mean, eps 1e-5).
    const auto d = simdnorm::tensor_desc::contiguous({std::int64_t(rows), std::int64_t(cols)}, dt);
    simdnorm::plan plan;
    simdnorm::norm_args a;
    a.x = x;
    a.y = ref;
    a.gamma = g;
    a.beta = b;
    simdnorm::status s = simdnorm::plan::layer_norm(d, d, {}, &plan);
    if (s) s = plan.execute(a);
    return s;
  });
  state.counters["rows"] = double(rows);
}

// BatchNorm and GroupNorm: the CNN shapes of the channel benchmarks (bench_channels.cpp),
// NCHW and NHWC; GroupNorm with 32 groups on two diffusion-model (UNet) shapes.
struct nchw {
  std::int64_t n, c, h, w;
};
const nchw kBnShapes[] = {{1, 64, 112, 112}, {8, 64, 56, 56},   {32, 256, 14, 14},
                          {32, 512, 7, 7},   {256, 2048, 1, 1}, {64, 64, 128, 128}};
const nchw kGnShapes[] = {{1, 320, 64, 64}, {1, 640, 32, 32}};
constexpr int kGnGroups = 32;

void bench_peer_channels(benchmark::State& state, const peers::peer* peer, peers::op_kind op,
                         peers::elem type, peers::layout lay, nchw sh, int threads,
                         const std::string& key) {
  peers::problem p;
  p.op = op;
  p.lay = lay;
  p.n = sh.n;
  p.c = sh.c;
  p.h = sh.h;
  p.w = sh.w;
  p.groups = op == peers::op_kind::group_norm ? kGnGroups : 0;
  p.type = type;
  const simdnorm::dtype dt = dtype_of(type);
  const std::size_t n = p.elements(), c = std::size_t(sh.c);
  const std::size_t floats = (n * simdnorm::dtype_size(dt) + 3) / sizeof(float);
  float* x = bench::shared_buffer(floats, 0);
  float* y = bench::shared_buffer(floats, 1);
  float* g = bench::shared_buffer(c, 2);
  float* b = bench::shared_buffer(c, 3);
  float* rm = bench::shared_buffer(c, 4);
  float* rv = bench::shared_buffer(c, 5);
  if (!bench::fill_normal_as(state, dt, x, n, 3.0)) return;
  bench::fill_normal(g, c, 1.0);
  bench::fill_normal(b, c, 0.0);
  bench::fill_normal(rm, c, 3.0);
  bench::fill_normal(rv, c, 0.0);
  for (std::size_t i = 0; i < c; ++i) rv[i] = 0.5f + 0.25f * std::fabs(rv[i]);
  peers::io io;
  io.x = x;
  io.y = y;
  io.gamma = g;
  io.beta = b;
  io.mean = rm;
  io.var = rv;
  check_and_measure(state, peer, p, io, threads, key, [&](void* ref) {
    const bool nhwc = lay == peers::layout::nhwc;
    const auto d = nhwc ? simdnorm::tensor_desc::contiguous({sh.n, sh.h, sh.w, sh.c}, dt)
                        : simdnorm::tensor_desc::contiguous({sh.n, sh.c, sh.h, sh.w}, dt);
    const auto cl = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
    simdnorm::plan plan;
    simdnorm::norm_args a;
    a.x = x;
    a.y = ref;
    simdnorm::status s;
    if (op == peers::op_kind::group_norm) {
      simdnorm::group_norm_params prm;
      prm.num_groups = kGnGroups;
      prm.layout = cl;
      a.gamma = g;
      a.beta = b;
      s = simdnorm::plan::group_norm(d, d, prm, &plan);
    } else {
      simdnorm::batch_norm_params prm;
      prm.layout = cl;
      prm.training = op == peers::op_kind::batch_norm_training;
      if (prm.training) {
        a.gamma = g;
        a.beta = b;
      } else {
        prm.running_mean = rm;
        prm.running_var = rv;
        prm.gamma = g;
        prm.beta = b;
      }
      s = simdnorm::plan::batch_norm(d, d, prm, &plan);
    }
    if (s) s = plan.execute(a);
    return s;
  });
}

int max_threads() {
  int m = 1;
  for (int t : bench::thread_counts()) m = std::max(m, t);
  return m;
}

}  // namespace

void register_peer_benchmarks() {
  if (peers::available().empty()) return;
  peers::init(max_threads());
  for (const auto& kv : peers::describe()) benchmark::AddCustomContext(kv.first, kv.second);
  // The element types, with the suffix of simdnorm's benchmark names (bench_rows.cpp,
  // bench_channels.cpp): layer_norm_bf16/onednn/... sits next to layer_norm_bf16/avx512bf16/...
  const struct {
    peers::elem type;
    const char* suffix;
  } types[] = {{peers::elem::f32, ""}, {peers::elem::bf16, "_bf16"}};
  for (const auto& ty : types)
    for (const peers::peer& peer : peers::available())
      for (std::size_t xb : kLnXBytes)
        for (std::size_t cols : kLnCols)
          for (int t : bench::thread_counts()) {
            const std::string name = std::string("layer_norm") + ty.suffix + "/" + peer.name +
                                     "/D:" + std::to_string(cols) +
                                     "/x_MiB:" + std::to_string(xb / kMiB) +
                                     "/threads:" + std::to_string(t);
            // x of xb bytes, as simdnorm's benchmark of the same name
            const std::size_t rows = xb / (ty.type == peers::elem::bf16 ? 2 : 4) / cols;
            benchmark::RegisterBenchmark(name.c_str(), bench_peer_layer_norm, &peer, ty.type,
                                         bench::rows_cols{rows, cols}, t, name)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
  for (const peers::peer& peer : peers::available())
    for (const bench::rows_cols& f : bench::kFewRows)
      for (int t : bench::thread_counts()) {
        const std::string name = "few_rows/layer_norm/" + peer.name +
                                 "/rows:" + std::to_string(f.rows) +
                                 "/D:" + std::to_string(f.cols) + "/threads:" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), bench_peer_layer_norm, &peer, peers::elem::f32,
                                     f, t, name)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // Channel ops: op/impl/layout/NxCxHxW/threads:T, as bench_channels.cpp (group_norm32 is
  // GroupNorm with 32 groups).
  const struct {
    peers::op_kind op;
    const char* name;
  } channel_ops[] = {
      {peers::op_kind::batch_norm_inference, "batch_norm_inference"},
      {peers::op_kind::batch_norm_training, "batch_norm_training"},
      {peers::op_kind::group_norm, "group_norm32"},
  };
  for (const auto& ty : types)
    for (const auto& o : channel_ops)
      for (const peers::peer& peer : peers::available())
        for (peers::layout lay : {peers::layout::nchw, peers::layout::nhwc})
          for (const nchw& sh : o.op == peers::op_kind::group_norm
                                    ? std::vector<nchw>(std::begin(kGnShapes), std::end(kGnShapes))
                                    : std::vector<nchw>(std::begin(kBnShapes), std::end(kBnShapes)))
            for (int t : bench::thread_counts()) {
              std::string name = std::string(o.name) + ty.suffix + "/" + peer.name + "/" +
                                 (lay == peers::layout::nchw ? "nchw/" : "nhwc/") +
                                 std::to_string(sh.n) + "x" + std::to_string(sh.c) + "x" +
                                 std::to_string(sh.h) + "x" + std::to_string(sh.w);
              name += "/threads:" + std::to_string(t);
              benchmark::RegisterBenchmark(name.c_str(), bench_peer_channels, &peer, o.op, ty.type,
                                           lay, sh, t, name)
                  ->UseManualTime()
                  ->Unit(benchmark::kMicrosecond);
            }
}
