// Peers: other libraries' normalization kernels (oneDNN, libtorch), run on the same buffers,
// shapes and thread counts as simdnorm so that the benchmark and the accuracy report can put
// them side by side.
//
// Each peer is compiled only when CMake finds it (bench/peers/peers.cmake defines
// SIMDNORM_BENCH_WITH_ONEDNN / SIMDNORM_BENCH_WITH_TORCH); without any, `available()` is empty
// and everything still builds and runs. Peers are set up as their users would set them up, and
// fairly (the team's research notes on the peers' baselines list the traps met so far):
//   oneDNN   Debian builds it with OpenMP: threads via omp_set_num_threads before the
//            primitive is created and before each run; the primitive cache is off (with it,
//            NCHW- and NHWC-tagged N x C x 1 x 1 BatchNorm share one primitive, whichever was
//            created first); primitives are created outside the timed loop.
//   libtorch at::set_num_threads once per process (each call re-creates a spinning thread
//            pool), then omp_set_num_threads per run; ATen's per-thread lazy init is done
//            before it. The CPU capability is ATen's default, or what ATEN_CPU_CAPABILITY
//            forces (the peer is then named torch_<capability>, e.g. torch_avx512); it is fixed
//            per process, so the report runs a second process for it. Ops run under
//            c10::InferenceMode and allocate their outputs, as the functional API does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace peers {

enum class op_kind { layer_norm, batch_norm_inference, batch_norm_training, group_norm };
enum class layout { rows, nchw, nhwc };
/// The element type of x and y (gamma, beta and the running statistics are f32 throughout).
enum class elem { f32, bf16 };

/// bf16 bits -> float (exact) and float -> bf16 bits (round to nearest even, NaN kept quiet):
/// the peers' outputs are compared and measured as floats.
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

/// One forward normalization problem on dense tensors of f32 or bf16.
///   layer_norm: x is [n, c] (rows = n, normalized length D = c); h = w = 1, layout rows.
///   batch_norm_*: x is (n, c, h, w) in NCHW or NHWC memory order; per-channel gamma/beta
///                 (and running mean/var for inference).
///   group_norm: x is (n, c, h, w), `groups` groups of c / groups channels, per-channel affine.
struct problem {
  op_kind op = op_kind::layer_norm;
  layout lay = layout::rows;
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  int groups = 0;
  float eps = 1e-5f;
  elem type = elem::f32;

  std::size_t elements() const { return std::size_t(n * c * h * w); }
  std::size_t element_bytes() const { return type == elem::bf16 ? 2 : 4; }
  /// Length of gamma/beta: the row length D for LayerNorm, the channel count otherwise.
  std::size_t affine_length() const { return std::size_t(c); }
};

/// The buffers one problem runs on: x and y of the problem's element type. `y` receives the
/// output for peers that write in place; `mean`/`var` are the running statistics (BatchNorm
/// inference only).
struct io {
  const void* x = nullptr;
  void* y = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  const float* mean = nullptr;
  const float* var = nullptr;
};

/// A ready-to-run peer operation: everything that can be prepared (primitives, descriptors,
/// tensor views) is prepared in the constructor, outside the timed loop.
class peer_op {
 public:
  virtual ~peer_op() = default;
  /// One forward pass: the timed call.
  virtual void run() = 0;
  /// After run(): the output in the problem's layout (dense), as floats (a bf16 output
  /// converted). Untimed.
  virtual const float* output() = 0;
  /// After run(): where the benchmark's interleaved copy (of the output's bytes) may write
  /// between runs: the memory the op writes its output to, so that the copy limit is measured
  /// with the caches as the op leaves them. The y buffer for peers that write in place.
  virtual void* copy_target() = 0;
};

/// One peer implementation.
struct peer {
  std::string name;  ///< "onednn", "torch", "torch_avx512", ...
  /// A prepared op for `p` on `threads` threads, or nullptr with the reason in `*why` (op not
  /// offered by the peer, creation failed).
  std::unique_ptr<peer_op> (*make)(const problem& p, const io& b, int threads, std::string* why);
  /// The peer's thread runtime, for the benchmark's interleaved copies (bench::measure_on):
  /// fork(threads, fn, ctx) runs fn(ctx, t) for t in [0, threads) on that runtime's threads.
  void (*fork)(int threads, void (*fn)(void* ctx, int t), void* ctx) = nullptr;
};

/// OpenMP's fork (one `omp parallel` region of `threads` threads), the runtime of both peers.
void omp_fork(int threads, void (*fn)(void* ctx, int t), void* ctx);

/// Once per process, before anything else: fixes the peers' thread pools for up to
/// `max_threads` threads, disables oneDNN's primitive cache, gives libtorch a caching CPU
/// allocator so that its large outputs come back warm (see peer_torch.cpp).
void init(int max_threads);

/// The peers compiled into this build (empty without oneDNN and libtorch).
const std::vector<peer>& available();

/// "key=value" lines describing the peers (versions, ISA, threading), for the benchmark context.
std::vector<std::pair<std::string, std::string>> describe();

// Implemented by the peer translation units that are compiled in.
#if SIMDNORM_BENCH_WITH_ONEDNN
void onednn_init();
peer onednn_peer();
std::vector<std::pair<std::string, std::string>> onednn_describe();
#endif
#if SIMDNORM_BENCH_WITH_TORCH
void torch_init(int max_threads);
peer torch_peer();
std::vector<std::pair<std::string, std::string>> torch_describe();
#endif

}  // namespace peers
