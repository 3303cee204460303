// oneDNN peer (oneDNN 2.x C++ API, as Debian 12 ships it: libdnnl-dev 2.6, OpenMP runtime).
//   LayerNorm          layer_normalization_forward, forward_inference, use_scale | use_shift,
//                      tag ab on [rows, D]
//   BatchNorm infer.   batch_normalization_forward, forward_inference,
//                      use_global_stats | use_scale | use_shift, tag nchw or nhwc
//   BatchNorm training batch_normalization_forward, forward_training, use_scale | use_shift
//                      (batch mean and variance written to buffers of the op)
//   GroupNorm          not offered by oneDNN 2.x (group_normalization arrived in 3.3)
// bf16 problems: x and y bf16, scale and shift f32 (oneDNN's only choice).
// The implementation oneDNN picked (its impl_info_str, e.g. "bnorm_jit:avx512_core" or
// "ncsp_bnorm:any") becomes the benchmark's label.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "peers.hpp"

#if DNNL_VERSION_MAJOR != 2
#error "bench/peers/peer_onednn.cpp is written for the oneDNN 2.x API"
#endif

namespace peers {
namespace {

using dnnl::memory;

class onednn_op final : public peer_op {
 public:
  onednn_op(const problem& p, const io& b, int threads) : p_(p), b_(b), threads_(threads) {}

  // Creates the primitive; false with the reason on failure.
  bool init(std::string* why) try {
    omp_set_num_threads(threads_);  // oneDNN sizes its work split at creation as well
    const bool rows = p_.lay == layout::rows;
    const memory::dims dims =
        rows ? memory::dims{p_.n, p_.c} : memory::dims{p_.n, p_.c, p_.h, p_.w};
    const memory::format_tag tag = rows                     ? memory::format_tag::ab
                                   : p_.lay == layout::nchw ? memory::format_tag::nchw
                                                            : memory::format_tag::nhwc;
    const memory::data_type type =
        p_.type == elem::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc data_md(dims, type, tag);
    const memory::desc chan_md({p_.c}, memory::data_type::f32, memory::format_tag::a);
    auto* x = const_cast<void*>(b_.x);
    args_[DNNL_ARG_SRC] = memory(data_md, eng_, x);
    args_[DNNL_ARG_DST] = memory(data_md, eng_, b_.y);
    args_[DNNL_ARG_SCALE] = memory(chan_md, eng_, const_cast<float*>(b_.gamma));
    args_[DNNL_ARG_SHIFT] = memory(chan_md, eng_, const_cast<float*>(b_.beta));
    const auto affine = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    switch (p_.op) {
      case op_kind::layer_norm: {
        dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data_md,
                                                  p_.eps, affine);
        dnnl::layer_normalization_forward::primitive_desc pd(d, eng_);
        impl_ = pd.impl_info_str();
        prim_ = dnnl::layer_normalization_forward(pd);
        break;
      }
      case op_kind::batch_norm_inference: {
        dnnl::batch_normalization_forward::desc d(
            dnnl::prop_kind::forward_inference, data_md, p_.eps,
            affine | dnnl::normalization_flags::use_global_stats);
        dnnl::batch_normalization_forward::primitive_desc pd(d, eng_);
        impl_ = pd.impl_info_str();
        args_[DNNL_ARG_MEAN] = memory(chan_md, eng_, const_cast<float*>(b_.mean));
        args_[DNNL_ARG_VARIANCE] = memory(chan_md, eng_, const_cast<float*>(b_.var));
        prim_ = dnnl::batch_normalization_forward(pd);
        break;
      }
      case op_kind::batch_norm_training: {
        dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, data_md,
                                                  p_.eps, affine);
        dnnl::batch_normalization_forward::primitive_desc pd(d, eng_);
        impl_ = pd.impl_info_str();
        stats_.assign(2 * std::size_t(p_.c), 0.0f);
        args_[DNNL_ARG_MEAN] = memory(chan_md, eng_, stats_.data());
        args_[DNNL_ARG_VARIANCE] = memory(chan_md, eng_, stats_.data() + p_.c);
        if (pd.workspace_desc().get_size() != 0)
          args_[DNNL_ARG_WORKSPACE] = memory(pd.workspace_desc(), eng_);
        prim_ = dnnl::batch_normalization_forward(pd);
        break;
      }
      case op_kind::group_norm:
        *why = "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." +
               std::to_string(DNNL_VERSION_MINOR) + " has no group normalization primitive";
        return false;
    }
    return true;
  } catch (const dnnl::error& e) {
    *why = std::string("oneDNN: ") + e.what();
    return false;
  }

  void run() override {
    if (omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
    prim_.execute(strm_, args_);
    strm_.wait();
  }

  const float* output() override {
    if (p_.type == elem::f32) return static_cast<const float*>(b_.y);
    const auto* bits = static_cast<const std::uint16_t*>(b_.y);
    float_out_.resize(p_.elements());
    for (std::size_t i = 0; i < float_out_.size(); ++i) float_out_[i] = bf16_to_float(bits[i]);
    return float_out_.data();
  }
  void* copy_target() override { return b_.y; }
  const std::string& impl() const { return impl_; }

 private:
  problem p_;
  io b_;
  int threads_;
  dnnl::engine eng_{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm_{eng_};
  dnnl::primitive prim_;
  std::unordered_map<int, memory> args_;
  std::vector<float> stats_, float_out_;
  std::string impl_;
};

std::unique_ptr<peer_op> make(const problem& p, const io& b, int threads, std::string* why) {
  auto op = std::make_unique<onednn_op>(p, b, threads);
  if (!op->init(why)) return nullptr;
  *why = op->impl();  // on success: the implementation, for the benchmark label
  return op;
}

}  // namespace

void onednn_init() {
  // Off: with the cache, NCHW- and NHWC-tagged N x C x 1 x 1 BatchNorm (the same bytes) get the
  // same primitive, whichever layout created it first.
  dnnl::set_primitive_cache_capacity(0);
}

peer onednn_peer() { return {"onednn", make, omp_fork}; }

std::vector<std::pair<std::string, std::string>> onednn_describe() {
  const dnnl_version_t* v = dnnl_version();
  const char* rt = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                   : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                   : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                        : "other";
  const char* isa = "";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    default: isa = "other"; break;
  }
  return {{"onednn_version", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                 std::to_string(v->patch)},
          {"onednn_cpu_runtime", rt},
          {"onednn_effective_isa", isa},
          {"onednn_primitive_cache", std::to_string(dnnl::get_primitive_cache_capacity())}};
}

}  // namespace peers
