// libtorch peer (ATen C++ API, as Debian 12 ships it: libtorch-dev 1.13, OpenMP backend).
//   LayerNorm          at::layer_norm(x [rows, D], {D}, gamma, beta, eps)
//   BatchNorm infer.   at::batch_norm(x, gamma, beta, running_mean, running_var, false, ...)
//   BatchNorm training at::batch_norm(..., training = true, momentum 0.1, ...): batch
//                      statistics, running statistics updated in place
//   GroupNorm          at::group_norm(x, groups, gamma, beta, eps)
// bf16 problems run as a model converted with .to(torch.bfloat16) runs: x, y, gamma and beta
// (and the running statistics) bf16, the statistics in float inside ATen's kernels.
// NHWC inputs are channels-last strided views of the same buffer. The functional API allocates
// each output; run() drops the previous output first, and large blocks come from a caching
// allocator (below), so the output memory is warm, as it would be in a tuned deployment.
#include <omp.h>
#include <sys/mman.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "peers.hpp"

namespace peers {
namespace {

// "CPU capability usage: AVX2" from at::show_config() (get_cpu_capability() is not exported in
// 1.13). Reads the capability ATen dispatches to in this process.
std::string show_config_value(const std::string& key) {
  const std::string cfg = at::show_config();
  const auto at_key = cfg.find(key);
  if (at_key == std::string::npos) return "";
  const auto b = at_key + key.size();
  const auto e = cfg.find_first_of(",\n", b);
  return cfg.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

std::string capability() {
  static const std::string c = show_config_value("CPU capability usage: ");
  return c;
}

// libtorch allocates every output through its CPU allocator, which is glibc's posix_memalign.
// glibc maps each 256 MiB output afresh and page-faults it on every call (about as long as the
// kernel itself); with mmap off it does not reuse the freed block either (the aligned request
// is larger than the freed chunk), so the heap grows and each call touches new memory.
// A user who cares runs jemalloc or tcmalloc, which hand the same warm block back. This
// allocator does that through libtorch's own hook (c10::SetCPUAllocator): blocks of 64 KiB and
// more are kept by size after they are freed and reused, 2 MiB-aligned with transparent huge
// pages as simdnorm's benchmark buffers are; smaller ones go to the default allocator.
// It favours libtorch: allocation stays in its numbers, page faults do not.
class caching_cpu_allocator final : public c10::Allocator {
 public:
  explicit caching_cpu_allocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n < kMin) return fallback_->allocate(n);
    const std::size_t bytes = (n + kAlign - 1) / kAlign * kAlign;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(pool().mu);
      auto it = pool().free.find(bytes);
      if (it != pool().free.end()) {
        p = it->second;
        pool().free.erase(it);
      }
    }
    if (!p) {
      p = std::aligned_alloc(kAlign, bytes);
      if (!p) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
      madvise(p, bytes, MADV_HUGEPAGE);
#endif
      std::lock_guard<std::mutex> lock(pool().mu);
      pool().size[p] = bytes;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  /// True when `p` lies in a block this allocator made (blocks are never given back).
  static bool owns(const void* p) {
    std::lock_guard<std::mutex> lock(pool().mu);
    for (const auto& kv : pool().size) {
      const char* b = static_cast<const char*>(kv.first);
      if (static_cast<const char*>(p) >= b && static_cast<const char*>(p) < b + kv.second)
        return true;
    }
    return false;
  }

 private:
  static constexpr std::size_t kMin = std::size_t(64) << 10, kAlign = std::size_t(2) << 20;
  struct pool_t {
    std::mutex mu;
    std::unordered_map<void*, std::size_t> size;
    std::multimap<std::size_t, void*> free;
  };
  static pool_t& pool() {
    static pool_t* p = new pool_t;  // outlives every tensor
    return *p;
  }
  static void release(void* p) {
    std::lock_guard<std::mutex> lock(pool().mu);
    pool().free.emplace(pool().size.at(p), p);
  }
  c10::Allocator* fallback_;
};

class torch_op final : public peer_op {
 public:
  torch_op(const problem& p, const io& b, int threads) : p_(p), threads_(threads), y_(b.y) {
    set_threads();
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto data = at::TensorOptions().dtype(p.type == elem::bf16 ? at::kBFloat16 : at::kFloat);
    auto* x = const_cast<void*>(b.x);
    if (p.lay == layout::rows) {
      x_ = at::from_blob(x, {p.n, p.c}, data);
    } else if (p.lay == layout::nchw) {
      x_ = at::from_blob(x, {p.n, p.c, p.h, p.w}, data);
    } else {
      x_ = at::from_blob(x, {p.n, p.c, p.h, p.w}, {p.h * p.w * p.c, 1, p.w * p.c, p.c}, data);
    }
    const std::int64_t k = std::int64_t(p.affine_length());
    auto params = [&](const float* v) {  // a copy in the data type, made once (untimed)
      return at::from_blob(const_cast<float*>(v), {k}, f32).to(data.dtype());
    };
    g_ = params(b.gamma);
    b_ = params(b.beta);
    if (p.op == op_kind::batch_norm_inference) {
      rm_ = params(b.mean);
      rv_ = params(b.var);
    } else if (p.op == op_kind::batch_norm_training) {
      rm_ = at::zeros({k}, data);  // updated in place, as nn.BatchNorm2d in training does
      rv_ = at::ones({k}, data);
    }
  }

  void run() override {
    set_threads();
    c10::InferenceMode guard;
    out_.reset();
    switch (p_.op) {
      case op_kind::layer_norm:
        out_ = at::layer_norm(x_, {p_.c}, g_, b_, p_.eps, /*cudnn_enable=*/false);
        break;
      case op_kind::batch_norm_inference:
        out_ = at::batch_norm(x_, g_, b_, rm_, rv_, /*training=*/false, 0.1, p_.eps, false);
        break;
      case op_kind::batch_norm_training:
        out_ = at::batch_norm(x_, g_, b_, rm_, rv_, /*training=*/true, 0.1, p_.eps, false);
        break;
      case op_kind::group_norm: out_ = at::group_norm(x_, p_.groups, g_, b_, p_.eps, false); break;
    }
  }

  const float* output() override {
    const auto fmt =
        p_.lay == layout::nhwc ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    float_out_ = out_.to(at::kFloat).contiguous(fmt);
    return float_out_.data_ptr<float>();
  }

  // The output block itself when the caching allocator made it (it never returns memory, so
  // writing there between runs is safe even if a later run got another block), else y.
  void* copy_target() override {
    void* p = out_.defined() ? out_.data_ptr() : nullptr;
    return p && caching_cpu_allocator::owns(p) ? p : y_;
  }

 private:
  void set_threads() {
    // ATen applies its thread count once per thread, lazily; do it before setting ours, so that
    // it does not override ours (and does not re-create its thread pool) later.
    at::internal::lazy_init_num_threads();
    if (omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
  }

  problem p_;
  int threads_;
  void* y_;
  at::Tensor x_, g_, b_, rm_, rv_, out_, float_out_;
};

std::unique_ptr<peer_op> make(const problem& p, const io& b, int threads, std::string* why) {
  try {
    auto op = std::make_unique<torch_op>(p, b, threads);
    *why = "ATen " + capability();  // on success: the label
    return op;
  } catch (const std::exception& e) {
    *why = std::string("libtorch: ") + e.what();
    return nullptr;
  }
}

}  // namespace

void torch_init(int max_threads) {
  static caching_cpu_allocator alloc(c10::GetDefaultCPUAllocator());
  c10::SetCPUAllocator(&alloc, /*priority=*/1);
  // The per-thread lazy init first, then the thread count, once: every at::set_num_threads
  // re-creates ATen's pthreadpool, whose new workers spin for tens of milliseconds.
  at::internal::lazy_init_num_threads();
  at::set_num_threads(max_threads);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

peer torch_peer() {
  // The default dispatch is "torch"; with ATEN_CPU_CAPABILITY set, the capability ATen
  // actually uses names it (torch_avx512), so both can sit in one report.
  const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
  std::string name = "torch";
  if (forced && *forced) {
    std::string c = capability();
    for (char& ch : c) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    name += "_" + (c.empty() ? std::string(forced) : c);
  }
  return {name, make, omp_fork};
}

std::vector<std::pair<std::string, std::string>> torch_describe() {
  const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
  return {{"torch_version", show_config_value("TORCH_VERSION=")},
          {"torch_cpu_capability", capability()},
          {"torch_cpu_capability_forced", forced ? forced : ""},
          {"torch_parallel_backend",
           at::get_parallel_info().find("OpenMP") != std::string::npos ? "OpenMP" : "other"},
          {"torch_num_threads", std::to_string(at::get_num_threads())}};
}

}  // namespace peers
