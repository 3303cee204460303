// simdnorm_torch: simdnorm's plans as PyTorch operators (torch.ops.simdnorm.*).
//
// Each call builds a plan key from the op, the shapes, the strides, the element types and the
// parameters, takes the plan from a small LRU cache (or makes it) and executes it on an executor
// that hands the tasks to at::parallel_for, so torch.set_num_threads governs the threads.
//
// Element types: the row ops (layer_norm, rms_norm, normalize and the fused_add_* ops) take
// float32, bfloat16 and float16 inputs, as do the channel ops; the output has the input's dtype.
// Weight, bias and BatchNorm's running statistics are float32 or the input's dtype (converted to
// a float32 copy per call: the kernels read float32 parameters; updated running statistics are
// rounded back into their dtype). Forward only: the
// operators have no autograd formula and refuse inputs that require grad in grad mode (the
// Python modules and simdnorm_torch.normalize fall back to PyTorch when a graph is needed).
//
// The fused forms (docs/fusions.md) work over the last dim: the residual add with an optional
// residual bias (ONNX Runtime's SkipLayerNormalization), gated RMSNorm, int8 / fp8 e4m3fn codes
// with dynamic scales per row or block (fp8 codes in uint8 tensors: PyTorch 1.13 has no float8
// dtype) and split statistics (moments records as the last dim, 32 bytes, of uint8 tensors);
// BatchNorm inference, GroupNorm and InstanceNorm also write 8-bit codes with static scales per
// tensor or per channel (the *_quant_static ops).
//
// BatchNorm inference folds the running statistics, gamma and beta into the plan (and
// batch_norm_quant_static its output scales and zero points). Its cache entries keep the bytes of
// those tensors, in their own dtype, and compare them with the tensors' current contents on every
// call, so any update, through autograd-visible in-place ops or not, makes a new plan.
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/WrapDimMinimal.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "module_calls.hpp"
#include "simdnorm/plan.hpp"

namespace simdnorm_torch {
namespace {

using at::Tensor;
using c10::optional;

// ---- threads --------------------------------------------------------------------------------

// at::parallel_for is inlined here: under ATen's OpenMP backend it runs in parallel only where
// this file is compiled with OpenMP (CMakeLists.txt), else every task on the calling thread.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "simdnorm_torch: compile with OpenMP (ATen's OpenMP backend), or at::parallel_for is serial"
#endif

class torch_executor final : public simdnorm::executor {
 public:
  std::size_t concurrency() const noexcept override {
    return static_cast<std::size_t>(at::get_num_threads());
  }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    at::parallel_for(0, static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
      task(ctx, static_cast<std::size_t>(begin), static_cast<std::size_t>(end));
    });
  }
};

torch_executor& executor() {
  static torch_executor exec;
  return exec;
}

// How many distinct threads run the executor's tasks 0 .. n - 1 (the tests check that
// torch.set_num_threads governs the operators).
int64_t executor_threads(int64_t n) {
  struct seen_threads {
    std::mutex mutex;
    std::set<std::thread::id> ids;
  } seen;
  executor().parallel_for(
      static_cast<std::size_t>(n),
      [](void* ctx, std::size_t, std::size_t) noexcept {
        auto* s = static_cast<seen_threads*>(ctx);
        std::lock_guard<std::mutex> lock(s->mutex);
        s->ids.insert(std::this_thread::get_id());
      },
      &seen);
  return static_cast<int64_t>(seen.ids.size());
}

// ---- plan cache -----------------------------------------------------------------------------

enum class op_id : int64_t { layer_norm, rms_norm, batch_norm, group_norm, instance_norm, lp_norm };

// The bytes of a key: the op, both tensor descriptors and the parameters.
class key_builder {
 public:
  explicit key_builder(op_id op) { add(static_cast<int64_t>(op)); }
  key_builder& add(int64_t v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  key_builder& add(float v) {
    int32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return add(static_cast<int64_t>(bits));
  }
  key_builder& add(const void* p) {
    return add(static_cast<int64_t>(reinterpret_cast<intptr_t>(p)));
  }
  key_builder& add(const simdnorm::tensor_desc& d) {
    add(static_cast<int64_t>(d.type)).add(static_cast<int64_t>(d.ndim));
    for (int i = 0; i < d.ndim; ++i) add(d.shape[i]).add(d.strides[i]);
    return *this;
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

struct cache_entry {
  simdnorm::plan plan;
  std::string folded;  // BatchNorm inference: the bytes of the tensors folded into the plan
};

struct cache_stats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t stale = 0;  // BatchNorm inference entries whose folded values had changed
};

class plan_cache {
 public:
  // Returns the plan of the entry for `key`, made by `make` when it is missing or when
  // `still_valid` says its contents are out of date. `make` returns an entry or throws.
  template <class Make, class Valid>
  simdnorm::plan get(const std::string& key, Make&& make, Valid&& still_valid) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        if (still_valid(it->second->second)) {
          ++stats_.hits;
          entries_.splice(entries_.begin(), entries_, it->second);
          return it->second->second.plan;
        }
        ++stats_.stale;
        entries_.erase(it->second);
        index_.erase(it);
      }
      ++stats_.misses;
    }
    cache_entry made = make();  // outside the lock: plan making may take a while
    std::lock_guard<std::mutex> lock(mutex_);
    if (capacity_ == 0) return made.plan;
    auto it = index_.find(key);
    if (it != index_.end()) {
      entries_.erase(it->second);
      index_.erase(it);
    }
    simdnorm::plan plan = made.plan;
    entries_.emplace_front(key, std::move(made));
    index_.emplace(key, entries_.begin());
    trim();
    return plan;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    index_.clear();
    stats_ = {};
  }
  void set_capacity(int64_t capacity) {
    TORCH_CHECK(capacity >= 0, "simdnorm: cache capacity must be >= 0, got ", capacity);
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = static_cast<std::size_t>(capacity);
    trim();
  }
  pybind11::dict info() {
    std::lock_guard<std::mutex> lock(mutex_);
    pybind11::dict d;
    d["size"] = entries_.size();
    d["capacity"] = capacity_;
    d["hits"] = stats_.hits;
    d["misses"] = stats_.misses;
    d["stale"] = stats_.stale;
    return d;
  }

 private:
  void trim() {
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
  }

  using list_t = std::list<std::pair<std::string, cache_entry>>;
  std::mutex mutex_;
  std::size_t capacity_ = 256;
  list_t entries_;
  std::unordered_map<std::string, list_t::iterator> index_;
  cache_stats stats_;
};

plan_cache& cache() {
  static plan_cache c;
  return c;
}

// ---- argument checks and conversions ---------------------------------------------------------

// The element types of the row ops' x and y.
bool is_float_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

simdnorm::dtype dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return simdnorm::dtype::bf16;
    case at::kHalf: return simdnorm::dtype::f16;
    default: return simdnorm::dtype::f32;
  }
}

void check_input(const Tensor& x, const char* op) {
  TORCH_CHECK(x.device().is_cpu(), "simdnorm.", op, ": input must be a CPU tensor, got ",
              x.device());
  TORCH_CHECK(is_float_dtype(x.scalar_type()), "simdnorm.", op,
              ": input must be float32, bfloat16 or float16, got ", x.scalar_type());
  TORCH_CHECK(x.layout() == at::kStrided, "simdnorm.", op, ": input must be a strided tensor");
  TORCH_CHECK(x.dim() <= simdnorm::max_dims, "simdnorm.", op, ": input has ", x.dim(),
              " dims, at most ", simdnorm::max_dims, " are supported");
}

// A per-channel (or per-element) vector: float32, CPU, contiguous, `numel` entries.
const float* vector_ptr(const optional<Tensor>& t, int64_t numel, const char* op,
                        const char* name) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat, "simdnorm.", op, ": ", name,
              " must be a float32 CPU tensor, got ", t->scalar_type(), " on ", t->device());
  TORCH_CHECK(t->is_contiguous(), "simdnorm.", op, ": ", name, " must be contiguous");
  TORCH_CHECK(t->numel() == numel, "simdnorm.", op, ": ", name, " has ", t->numel(),
              " elements, expected ", numel);
  return t->data_ptr<float>();
}

// Checks a weight, bias or running statistic: float32, or the input's dtype `x_type`; `numel`
// entries, CPU, contiguous. Returns whether it is present.
bool check_param(const optional<Tensor>& t, at::ScalarType x_type, int64_t numel, const char* op,
                 const char* name) {
  if (!t.has_value() || !t->defined()) return false;
  if (t->scalar_type() == at::kFloat || x_type == at::kFloat) {
    vector_ptr(t, numel, op, name);
    return true;
  }
  TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == x_type, "simdnorm.", op, ": ", name,
              " must be a float32 CPU tensor or one of the input's dtype (", x_type, "), got ",
              t->scalar_type(), " on ", t->device());
  TORCH_CHECK(t->is_contiguous(), "simdnorm.", op, ": ", name, " must be contiguous");
  TORCH_CHECK(t->numel() == numel, "simdnorm.", op, ": ", name, " has ", t->numel(),
              " elements, expected ", numel);
  return true;
}

// A checked parameter (check_param) as float32: its data, or a float32 copy kept in *holder.
const float* param_ptr(const optional<Tensor>& t, at::ScalarType x_type, int64_t numel,
                       const char* op, const char* name, Tensor* holder) {
  if (!check_param(t, x_type, numel, op, name)) return nullptr;
  if (t->scalar_type() == at::kFloat) return t->data_ptr<float>();
  *holder = t->to(at::kFloat);  // exact: bfloat16 and float16 values are float32 values
  return holder->data_ptr<float>();
}

// The data of an optional tensor (null when absent): a parameter's identity in a plan key.
const void* storage_of(const optional<Tensor>& t) {
  return t.has_value() && t->defined() ? t->data_ptr() : nullptr;
}

simdnorm::tensor_desc desc_of(const Tensor& t) {
  simdnorm::tensor_desc d;
  d.type = dtype_of(t.scalar_type());
  d.ndim = static_cast<int>(t.dim());
  for (int i = 0; i < d.ndim; ++i) {
    d.shape[i] = t.size(i);
    d.strides[i] = t.stride(i);
  }
  return d;
}

void check_status(const simdnorm::status& s, const char* op) {
  TORCH_CHECK(s.ok(), "simdnorm.", op, ": ", s.message(), " (", simdnorm::to_string(s.code()), ")");
}

// make_plan(x, y, params, &plan): simdnorm's plan maker for the op of `params`.
#define SIMDNORM_TORCH_MAKE_PLAN(op)                                                            \
  inline simdnorm::status make_plan(const simdnorm::tensor_desc& x,                             \
                                    const simdnorm::tensor_desc& y,                             \
                                    const simdnorm::op##_params& params, simdnorm::plan* out) { \
    return simdnorm::plan::op(x, y, params, out);                                               \
  }
SIMDNORM_OP_LIST(SIMDNORM_TORCH_MAKE_PLAN)
#undef SIMDNORM_TORCH_MAKE_PLAN

template <class Params>
cache_entry make_entry(const simdnorm::tensor_desc& x, const simdnorm::tensor_desc& y,
                       const Params& params, const char* op) {
  cache_entry e;
  check_status(make_plan(x, y, params, &e.plan), op);
  return e;
}

bool always_valid(const cache_entry&) { return true; }

// Runs `plan` with a workspace from PyTorch's allocator (64-byte aligned) when it needs one.
template <class Args>
void execute(const simdnorm::plan& plan, Args args, const char* op) {
  Tensor workspace;
  if (plan.workspace_bytes() > 0) {
    workspace = at::empty({static_cast<int64_t>(plan.workspace_bytes())}, at::kByte);
    args.workspace = workspace.data_ptr();
  }
  check_status(plan.execute(args, &executor()), op);
}

Tensor output_like(const Tensor& x) { return at::empty_like(x); }

// ---- operators ------------------------------------------------------------------------------

int64_t check_normalized_shape(const Tensor& x, at::IntArrayRef normalized_shape, const char* op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(k >= 1 && k <= x.dim(), "simdnorm.", op, ": normalized_shape has ", k,
              " dims, input has ", x.dim());
  int64_t numel = 1;
  for (int64_t i = 0; i < k; ++i) {
    TORCH_CHECK(x.size(x.dim() - k + i) == normalized_shape[i], "simdnorm.", op,
                ": normalized_shape ", normalized_shape, " does not match the input's trailing ",
                "dims ", x.sizes());
    numel *= normalized_shape[i];
  }
  return numel;
}

// The bits of a float parameter as a key entry.
int64_t key_of(float v) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// The ops whose plans depend on shapes, types and parameters only (all but BatchNorm): runs the
// op from x into y (allocated by the caller; may be x). `extra` are the parameters besides eps
// that the plan depends on; gamma and beta have `affine_numel` entries. `fill(args)` sets the
// op's other operands of the call in its args struct (the residual add, the gate, scales,
// moments records).
template <class Params, class Fill>
void run_into(op_id id, const char* op, const Tensor& x, const Tensor& y,
              const simdnorm::tensor_desc& yd, const Params& params,
              const std::vector<int64_t>& extra, const optional<Tensor>& weight,
              const optional<Tensor>& bias, int64_t affine_numel, Fill&& fill) {
  if (x.numel() == 0) return;  // plans want positive sizes; there is nothing to compute
  const auto xd = desc_of(x);
  key_builder kb(id);
  kb.add(xd).add(yd);
  for (int64_t v : extra) kb.add(v);
  std::string key = kb.add(params.eps).take();
  simdnorm::plan plan = cache().get(
      key, [&] { return make_entry(xd, yd, params, op); }, always_valid);
  Tensor weight32, bias32;  // float32 copies of bfloat16 / float16 parameters
  simdnorm::args_of<Params> args;
  args.x = x.data_ptr();
  args.y = y.defined() ? y.data_ptr() : nullptr;
  args.gamma = param_ptr(weight, x.scalar_type(), affine_numel, op, "weight", &weight32);
  args.beta = param_ptr(bias, x.scalar_type(), affine_numel, op, "bias", &bias32);
  fill(args);
  execute(plan, args, op);
}

void no_fill(simdnorm::norm_args&) {}

template <class Params>
Tensor run_plain(op_id id, const char* op, const Tensor& x, const Params& params,
                 const std::vector<int64_t>& extra, const optional<Tensor>& weight,
                 const optional<Tensor>& bias, int64_t affine_numel) {
  Tensor y = output_like(x);
  run_into(id, op, x, y, desc_of(y), params, extra, weight, bias, affine_numel, no_fill);
  return y;
}

// The key entries of a row op's parameters besides eps: every field a plan depends on.
template <class Params>
std::vector<int64_t> row_extras(const Params& p) {
  int64_t gate_before = 0;
  if constexpr (std::is_same_v<Params, simdnorm::rms_norm_params>) gate_before = p.gate_before_norm;
  return {p.normalized_ndim,
          gate_before,
          int64_t{p.residual_after_norm},
          p.modulation_tokens,
          key_of(p.weight_offset),
          static_cast<int64_t>(p.stage),
          static_cast<int64_t>(p.quant.scaling),
          p.quant.block,
          key_of(p.quant.scale),
          p.quant.zero_point,
          int64_t{p.quant.row_amax}};
}

// LayerNorm and RMSNorm: rows over the trailing dims named by normalized_shape.
template <class Params>
Tensor row_norm(op_id id, const char* op, const Tensor& x, at::IntArrayRef normalized_shape,
                const optional<Tensor>& weight, const optional<Tensor>& bias, double eps,
                double weight_offset = 0.0) {
  check_input(x, op);
  const int64_t row = check_normalized_shape(x, normalized_shape, op);
  Params params;
  params.normalized_ndim = static_cast<int>(normalized_shape.size());
  params.eps = static_cast<float>(eps);
  params.weight_offset = static_cast<float>(weight_offset);
  TORCH_CHECK(params.weight_offset == 0.f || (weight.has_value() && weight->defined()), "simdnorm.",
              op, ": weight_offset=", weight_offset,
              " needs a weight (the scale is weight + weight_offset)");
  return run_plain(id, op, x, params, row_extras(params), weight, bias, row);
}

Tensor layer_norm(const Tensor& x, at::IntArrayRef normalized_shape, const optional<Tensor>& weight,
                  const optional<Tensor>& bias, double eps) {
  return row_norm<simdnorm::layer_norm_params>(op_id::layer_norm, "layer_norm", x, normalized_shape,
                                               weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, at::IntArrayRef normalized_shape, const optional<Tensor>& weight,
                double eps, double weight_offset) {
  return row_norm<simdnorm::rms_norm_params>(op_id::rms_norm, "rms_norm", x, normalized_shape,
                                             weight, c10::nullopt, eps, weight_offset);
}

// The ops over the last dim (the fused, gated, quantized and staged forms).
void check_last_dim_input(const Tensor& x, const char* op) {
  check_input(x, op);
  TORCH_CHECK(x.dim() >= 1, "simdnorm.", op, ": input needs at least 1 dim");
}

// The residual of a fused add: the input's dtype, sizes and strides (it is read and written in
// the input's layout).
void check_residual(const Tensor& x, const Tensor& residual, const char* op) {
  TORCH_CHECK(residual.device().is_cpu() && residual.scalar_type() == x.scalar_type(), "simdnorm.",
              op, ": residual must be a CPU tensor of the input's dtype (", x.scalar_type(),
              "), got ", residual.scalar_type(), " on ", residual.device());
  TORCH_CHECK(residual.layout() == at::kStrided, "simdnorm.", op,
              ": residual must be a strided tensor");
  TORCH_CHECK(residual.sizes() == x.sizes() && residual.strides() == x.strides(), "simdnorm.", op,
              ": residual must have the input's sizes and strides, got ", residual.sizes(),
              " with strides ", residual.strides(), " for an input of ", x.sizes(),
              " with strides ", x.strides());
}

// The gate of a gated RMSNorm: the input's dtype and sizes. The plan reads it with the input's
// strides, so a gate of another layout (a slice of a fused projection, say) is copied: both
// into contiguous tensors, or, when `x_pinned` (a residual fixes the input's layout), the gate
// into the input's strides.
void prepare_gate(Tensor* x, Tensor* gate, bool x_pinned, const char* op) {
  TORCH_CHECK(gate->device().is_cpu() && gate->scalar_type() == x->scalar_type(), "simdnorm.", op,
              ": gate must be a CPU tensor of the input's dtype (", x->scalar_type(), "), got ",
              gate->scalar_type(), " on ", gate->device());
  TORCH_CHECK(gate->layout() == at::kStrided, "simdnorm.", op, ": gate must be a strided tensor");
  TORCH_CHECK(gate->sizes() == x->sizes(), "simdnorm.", op, ": gate must have the input's sizes ",
              x->sizes(), ", got ", gate->sizes());
  if (gate->strides() == x->strides()) return;
  if (!x_pinned) {
    *x = x->contiguous();
    *gate = gate->contiguous();
    if (gate->strides() == x->strides()) return;
  }
  Tensor copy = at::empty_strided(x->sizes(), x->strides(), gate->options());
  copy.copy_(*gate);
  *gate = copy;
}

// vLLM's fused_add_rms_norm / fused_add_layer_norm, in place: residual <- input + residual
// (+ residual_bias; rounded once into the dtype), input <- norm(residual) over the last dim.
template <class Params>
void fused_add_norm(op_id id, const char* op, const Tensor& x, const Tensor& residual,
                    const Tensor& weight, const optional<Tensor>& bias, double eps,
                    const optional<Tensor>& residual_bias) {
  check_last_dim_input(x, op);
  check_residual(x, residual, op);
  TORCH_CHECK(weight.defined(), "simdnorm.", op, ": weight is required");
  Params params;
  params.normalized_ndim = 1;
  params.eps = static_cast<float>(eps);
  Tensor residual_bias32;
  const float* rb =
      param_ptr(residual_bias, x.scalar_type(), x.size(-1), op, "residual_bias", &residual_bias32);
  run_into(id, op, x, x, desc_of(x), params, row_extras(params), weight, bias, x.size(-1),
           [&](auto& a) {
             a.residual = residual.data_ptr();
             a.residual_out = residual.data_ptr();
             a.residual_bias = rb;
           });
}

void fused_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                        const optional<Tensor>& residual_bias) {
  fused_add_norm<simdnorm::rms_norm_params>(op_id::rms_norm, "fused_add_rms_norm", x, residual,
                                            weight, c10::nullopt, eps, residual_bias);
}

void fused_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                          const Tensor& bias, double eps, const optional<Tensor>& residual_bias) {
  fused_add_norm<simdnorm::layer_norm_params>(op_id::layer_norm, "fused_add_layer_norm", x,
                                              residual, weight, bias, eps, residual_bias);
}

// The post-norm residual (Gemma 2/3's sandwich norms, OLMo-2), in place: residual <- residual +
// norm(input) [* (weight + weight_offset) + bias] over the last dim, in float32, rounded once.
template <class Params>
void norm_add(op_id id, const char* op, const Tensor& x, const Tensor& residual,
              const optional<Tensor>& weight, const optional<Tensor>& bias, double eps,
              double weight_offset) {
  check_last_dim_input(x, op);
  check_residual(x, residual, op);
  Params params;
  params.eps = static_cast<float>(eps);
  params.weight_offset = static_cast<float>(weight_offset);
  params.residual_after_norm = true;
  TORCH_CHECK(params.weight_offset == 0.f || (weight.has_value() && weight->defined()), "simdnorm.",
              op, ": weight_offset=", weight_offset,
              " needs a weight (the scale is weight + weight_offset)");
  run_into(id, op, x, residual, desc_of(residual), params, row_extras(params), weight, bias,
           x.size(-1), [&](auto& a) { a.residual = residual.data_ptr(); });
}

void rms_norm_add(const Tensor& x, const Tensor& residual, const optional<Tensor>& weight,
                  double eps, double weight_offset) {
  norm_add<simdnorm::rms_norm_params>(op_id::rms_norm, "rms_norm_add", x, residual, weight,
                                      c10::nullopt, eps, weight_offset);
}

void layer_norm_add(const Tensor& x, const Tensor& residual, const optional<Tensor>& weight,
                    const optional<Tensor>& bias, double eps) {
  norm_add<simdnorm::layer_norm_params>(op_id::layer_norm, "layer_norm_add", x, residual, weight,
                                        bias, eps, 0.0);
}

// adaLN modulation (DiT): y = norm(x) [* weight + bias] * (1 + scale[b]) + shift[b] over the
// last dim. The input's rows (all dims but the last, row-major) form B equal batches, one per row
// of scale and shift ([B, D], rows dense and equally strided, such as chunks of DiT's
// adaLN_modulation output; [D] or [1, D]: one row for every batch); float32 or the input's
// dtype. Other layouts are copied.
template <class Params>
Tensor norm_modulate(op_id id, const char* op, const Tensor& x, const Tensor& scale,
                     const Tensor& shift, const optional<Tensor>& weight,
                     const optional<Tensor>& bias, double eps) {
  check_last_dim_input(x, op);
  const int64_t d = x.size(-1), rows = d == 0 ? 0 : x.numel() / d;
  Tensor ms[2] = {scale, shift};
  const char* names[2] = {"scale", "shift"};
  for (int i = 0; i < 2; ++i) {
    const Tensor& t = ms[i];
    TORCH_CHECK(t.device().is_cpu() &&
                    (t.scalar_type() == at::kFloat || t.scalar_type() == x.scalar_type()),
                "simdnorm.", op, ": ", names[i],
                " must be a float32 CPU tensor or one of the input's dtype (", x.scalar_type(),
                "), got ", t.scalar_type(), " on ", t.device());
    TORCH_CHECK((t.dim() == 1 || t.dim() == 2) && t.size(-1) == d, "simdnorm.", op, ": ", names[i],
                " must be [B, ", d, "] or [", d, "], got ", t.sizes());
  }
  const int64_t batches = scale.dim() == 2 ? scale.size(0) : 1;
  TORCH_CHECK(shift.sizes() == scale.sizes(), "simdnorm.", op, ": shift must have scale's sizes ",
              scale.sizes(), ", got ", shift.sizes());
  TORCH_CHECK(batches >= 1 && rows % batches == 0, "simdnorm.", op, ": ", batches,
              " modulation rows must divide the input's ", rows, " rows");
  const auto stride_of = [&](const Tensor& t) {
    return t.dim() == 2 && batches > 1 ? t.stride(0) : 0;
  };
  const auto usable = [&](const Tensor& t) {
    return t.scalar_type() == at::kFloat && (d <= 1 || t.stride(-1) == 1) &&
           stride_of(t) == stride_of(ms[0]) && (batches == 1 || stride_of(t) >= d);
  };
  if (!usable(ms[0]) || !usable(ms[1]))
    for (Tensor& t : ms) t = t.to(at::kFloat).contiguous();
  Params params;
  params.eps = static_cast<float>(eps);
  params.modulation_tokens = rows / batches;
  Tensor y = output_like(x);
  run_into(id, op, x, y, desc_of(y), params, row_extras(params), weight, bias, d, [&](auto& a) {
    a.modulation_scale = ms[0].data_ptr<float>();
    a.modulation_shift = ms[1].data_ptr<float>();
    a.modulation_stride = batches > 1 ? ms[0].stride(0) : 0;
  });
  return y;
}

Tensor layer_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                           const optional<Tensor>& weight, const optional<Tensor>& bias,
                           double eps) {
  return norm_modulate<simdnorm::layer_norm_params>(op_id::layer_norm, "layer_norm_modulate", x,
                                                    scale, shift, weight, bias, eps);
}

Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                         const optional<Tensor>& weight, double eps) {
  return norm_modulate<simdnorm::rms_norm_params>(op_id::rms_norm, "rms_norm_modulate", x, scale,
                                                  shift, weight, c10::nullopt, eps);
}

// Gated RMSNorm over the last dim (Qwen3-Next's RMSNormGated, norm before gate):
// y = rms_norm(x) * (weight + weight_offset) * silu(gate), in float32, rounded once.
Tensor rms_norm_gated(const Tensor& input, const Tensor& gate, const optional<Tensor>& weight,
                      double eps, double weight_offset, bool norm_before_gate) {
  constexpr const char* op = "rms_norm_gated";
  check_last_dim_input(input, op);
  Tensor x = input, g = gate;
  prepare_gate(&x, &g, /*x_pinned=*/false, op);
  simdnorm::rms_norm_params params;
  params.eps = static_cast<float>(eps);
  params.weight_offset = static_cast<float>(weight_offset);
  params.gate_before_norm = !norm_before_gate;  // Mamba-2's default: rms_norm(x * silu(gate))
  TORCH_CHECK(params.weight_offset == 0.f || (weight.has_value() && weight->defined()), "simdnorm.",
              op, ": weight_offset=", weight_offset,
              " needs a weight (the scale is weight + weight_offset)");
  Tensor y = output_like(x);
  run_into(op_id::rms_norm, op, x, y, desc_of(y), params, row_extras(params), weight, c10::nullopt,
           x.size(-1), [&](auto& a) { a.gate = g.data_ptr(); });
  return y;
}

// The 8-bit output types of the quantized ops: (simdnorm type, torch dtype of the codes).
std::pair<simdnorm::dtype, at::ScalarType> quant_type(c10::string_view name, const char* op) {
  if (name == "int8") return {simdnorm::dtype::i8, at::kChar};
  if (name == "uint8") return {simdnorm::dtype::u8, at::kByte};
  if (name == "float8_e4m3fn") return {simdnorm::dtype::f8e4m3fn, at::kByte};
  TORCH_CHECK(false, "simdnorm.", op, ": dtype='", std::string(name.data(), name.size()),
              "' is not supported; use 'int8', 'uint8' or 'float8_e4m3fn' (fp8 codes returned as "
              "uint8)");
}

// The codes, and per row or block the scales and zero points (undefined where the scaling has
// none).
struct quantized {
  Tensor q, scales, zero_points;
};

// LayerNorm / RMSNorm over the last dim into 8-bit codes with the scaling of `quant`
// (simdnorm::quant_scaling: dynamic symmetric, dynamic asymmetric, static per tensor),
// optionally with the residual add first (residual <- input + residual (+ residual_bias),
// normalized as stored) and, for RMSNorm, the gate. q is contiguous; scales (float32) and zero
// points (int32) have input.shape[:-1] (+ [D / block]).
template <class Params>
quantized norm_quant(op_id id, const char* op, const Tensor& input, const optional<Tensor>& weight,
                     const optional<Tensor>& bias, double eps, c10::string_view dtype,
                     const simdnorm::quant_params& quant, const optional<Tensor>& residual,
                     const optional<Tensor>& residual_bias, const optional<Tensor>& gate) {
  check_last_dim_input(input, op);
  const auto type = quant_type(dtype, op);
  const int64_t d = input.size(-1), block = quant.block;
  TORCH_CHECK(block >= 0 && block <= d, "simdnorm.", op, ": block=", block,
              " must be 0 (one scale per row) or a divisor of the row length ", d, " in [32, 256]");
  const bool has_residual = residual.has_value() && residual->defined();
  if (has_residual) check_residual(input, *residual, op);
  TORCH_CHECK(has_residual || !(residual_bias.has_value() && residual_bias->defined()), "simdnorm.",
              op, ": residual_bias needs a residual (h = input + residual + bias)");
  Tensor x = input, g;
  if (gate.has_value() && gate->defined()) {
    g = *gate;
    prepare_gate(&x, &g, has_residual, op);
  }
  Params params;
  params.eps = static_cast<float>(eps);
  params.quant = quant;
  quantized out;
  out.q = at::empty(x.sizes(), x.options().dtype(type.second));
  std::vector<int64_t> scale_sizes(x.sizes().begin(), x.sizes().end() - 1);
  if (block > 0) scale_sizes.push_back(d / block);
  if (quant.scaling != simdnorm::quant_scaling::per_tensor)
    out.scales = at::empty(scale_sizes, x.options().dtype(at::kFloat));
  if (quant.scaling == simdnorm::quant_scaling::dynamic_asymmetric)
    out.zero_points = at::empty(scale_sizes, x.options().dtype(at::kInt));
  auto yd = desc_of(out.q);
  yd.type = type.first;
  Tensor residual_bias32;
  const float* rb =
      param_ptr(residual_bias, x.scalar_type(), d, op, "residual_bias", &residual_bias32);
  run_into(id, op, x, out.q, yd, params, row_extras(params), weight, bias, d, [&](auto& a) {
    if (has_residual) {
      a.residual = residual->data_ptr();
      a.residual_out = residual->data_ptr();
      a.residual_bias = rb;
    }
    if constexpr (std::is_base_of_v<simdnorm::gate_operand, std::decay_t<decltype(a)>>) {
      if (g.defined()) a.gate = g.data_ptr();
    }
    if (out.scales.defined()) a.y_scale = out.scales.data_ptr<float>();
    if (out.zero_points.defined()) a.y_zero_point = out.zero_points.data_ptr<int32_t>();
  });
  return out;
}

simdnorm::quant_params dynamic_quant(simdnorm::quant_scaling scaling, int64_t block) {
  simdnorm::quant_params q;
  q.scaling = scaling;
  q.block = static_cast<int>(block);
  return q;
}

simdnorm::quant_params static_quant(double scale, int64_t zero_point) {
  simdnorm::quant_params q;
  q.scaling = simdnorm::quant_scaling::per_tensor;
  q.scale = static_cast<float>(scale);
  q.zero_point = static_cast<int>(zero_point);
  return q;
}

quantized rms_norm_quantized(const char* op, const Tensor& x, const optional<Tensor>& weight,
                             double eps, c10::string_view dtype, const simdnorm::quant_params& q,
                             const optional<Tensor>& residual,
                             const optional<Tensor>& residual_bias, const optional<Tensor>& gate) {
  return norm_quant<simdnorm::rms_norm_params>(op_id::rms_norm, op, x, weight, c10::nullopt, eps,
                                               dtype, q, residual, residual_bias, gate);
}

quantized layer_norm_quantized(const char* op, const Tensor& x, const optional<Tensor>& weight,
                               const optional<Tensor>& bias, double eps, c10::string_view dtype,
                               const simdnorm::quant_params& q, const optional<Tensor>& residual,
                               const optional<Tensor>& residual_bias) {
  return norm_quant<simdnorm::layer_norm_params>(op_id::layer_norm, op, x, weight, bias, eps, dtype,
                                                 q, residual, residual_bias, c10::nullopt);
}

// Dynamic symmetric scales: (q, scales), scale = amax(|y|) / qmax (127, 448).
std::tuple<Tensor, Tensor> rms_norm_quant(const Tensor& x, const optional<Tensor>& weight,
                                          double eps, c10::string_view dtype, int64_t block,
                                          const optional<Tensor>& residual,
                                          const optional<Tensor>& residual_bias,
                                          const optional<Tensor>& gate) {
  const quantized o = rms_norm_quantized("rms_norm_quant", x, weight, eps, dtype,
                                         dynamic_quant(simdnorm::quant_scaling::dynamic, block),
                                         residual, residual_bias, gate);
  return {o.q, o.scales};
}

std::tuple<Tensor, Tensor> layer_norm_quant(const Tensor& x, const optional<Tensor>& weight,
                                            const optional<Tensor>& bias, double eps,
                                            c10::string_view dtype, int64_t block,
                                            const optional<Tensor>& residual,
                                            const optional<Tensor>& residual_bias) {
  const quantized o = layer_norm_quantized("layer_norm_quant", x, weight, bias, eps, dtype,
                                           dynamic_quant(simdnorm::quant_scaling::dynamic, block),
                                           residual, residual_bias);
  return {o.q, o.scales};
}

// Dynamic asymmetric scales (ONNX DynamicQuantizeLinear per row or block): (q, scales, zero
// points).
std::tuple<Tensor, Tensor, Tensor> rms_norm_quant_asymmetric(
    const Tensor& x, const optional<Tensor>& weight, double eps, c10::string_view dtype,
    int64_t block, const optional<Tensor>& residual, const optional<Tensor>& residual_bias,
    const optional<Tensor>& gate) {
  const quantized o =
      rms_norm_quantized("rms_norm_quant_asymmetric", x, weight, eps, dtype,
                         dynamic_quant(simdnorm::quant_scaling::dynamic_asymmetric, block),
                         residual, residual_bias, gate);
  return {o.q, o.scales, o.zero_points};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_quant_asymmetric(
    const Tensor& x, const optional<Tensor>& weight, const optional<Tensor>& bias, double eps,
    c10::string_view dtype, int64_t block, const optional<Tensor>& residual,
    const optional<Tensor>& residual_bias) {
  const quantized o = layer_norm_quantized(
      "layer_norm_quant_asymmetric", x, weight, bias, eps, dtype,
      dynamic_quant(simdnorm::quant_scaling::dynamic_asymmetric, block), residual, residual_bias);
  return {o.q, o.scales, o.zero_points};
}

// A static scale and zero point for the whole tensor (torch.quantize_per_tensor of the norm):
// the codes.
Tensor rms_norm_quant_static(const Tensor& x, double scale, int64_t zero_point,
                             const optional<Tensor>& weight, double eps, c10::string_view dtype,
                             const optional<Tensor>& residual,
                             const optional<Tensor>& residual_bias, const optional<Tensor>& gate) {
  return rms_norm_quantized("rms_norm_quant_static", x, weight, eps, dtype,
                            static_quant(scale, zero_point), residual, residual_bias, gate)
      .q;
}

Tensor layer_norm_quant_static(const Tensor& x, double scale, int64_t zero_point,
                               const optional<Tensor>& weight, const optional<Tensor>& bias,
                               double eps, c10::string_view dtype, const optional<Tensor>& residual,
                               const optional<Tensor>& residual_bias) {
  return layer_norm_quantized("layer_norm_quant_static", x, weight, bias, eps, dtype,
                              static_quant(scale, zero_point), residual, residual_bias)
      .q;
}

// ---- split statistics -------------------------------------------------------------------------
// A moments record (simdnorm::moments, 32 bytes: count, mean, m2, kind) travels as the last dim
// of a uint8 tensor: records of x's rows are x.shape[:-1] + [32].

constexpr int64_t kRecordBytes = static_cast<int64_t>(sizeof(simdnorm::moments));
static_assert(sizeof(simdnorm::moments) == 32, "moments records are 32 bytes");

std::vector<int64_t> record_sizes(at::IntArrayRef row_sizes) {
  std::vector<int64_t> sizes(row_sizes.begin(), row_sizes.end());
  sizes.push_back(kRecordBytes);
  return sizes;
}

// A records tensor: uint8, CPU, contiguous, 8-byte aligned, of `sizes`.
const simdnorm::moments* records_ptr(const Tensor& r, at::IntArrayRef sizes, const char* op,
                                     const char* name) {
  TORCH_CHECK(r.device().is_cpu() && r.scalar_type() == at::kByte, "simdnorm.", op, ": ", name,
              " must be a uint8 CPU tensor of moments records, got ", r.scalar_type(), " on ",
              r.device());
  TORCH_CHECK(r.sizes() == sizes, "simdnorm.", op, ": ", name, " must have sizes ", sizes,
              " (one 32-byte record per row), got ", r.sizes());
  TORCH_CHECK(r.is_contiguous(), "simdnorm.", op, ": ", name, " must be contiguous");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(r.data_ptr()) % alignof(simdnorm::moments) == 0,
              "simdnorm.", op, ": ", name, " must be 8-byte aligned");
  return reinterpret_cast<const simdnorm::moments*>(r.data_ptr());
}

// Statistics only: one record per row of x's last dim (a shard of the row).
template <class Params>
Tensor row_moments(op_id id, const char* op, const Tensor& x) {
  check_last_dim_input(x, op);
  Params params;
  params.stage = simdnorm::stats_stage::moments;
  Tensor records =
      at::zeros(record_sizes(x.sizes().slice(0, x.dim() - 1)), x.options().dtype(at::kByte));
  run_into(id, op, x, Tensor(), desc_of(x), params, row_extras(params), c10::nullopt, c10::nullopt,
           x.size(-1), [&](auto& a) {
             a.moments_out = reinterpret_cast<simdnorm::moments*>(records.data_ptr());
           });
  return records;
}

// Normalize only, x (a shard of each row) with the merged records of the whole rows.
template <class Params>
Tensor row_apply(op_id id, const char* op, const Tensor& x, const Tensor& records,
                 const optional<Tensor>& weight, const optional<Tensor>& bias, double eps) {
  check_last_dim_input(x, op);
  const simdnorm::moments* in =
      records_ptr(records, record_sizes(x.sizes().slice(0, x.dim() - 1)), op, "moments");
  Params params;
  params.eps = static_cast<float>(eps);
  params.stage = simdnorm::stats_stage::apply;
  Tensor y = output_like(x);
  run_into(id, op, x, y, desc_of(y), params, row_extras(params), weight, bias, x.size(-1),
           [&](auto& a) { a.moments_in = in; });
  return y;
}

Tensor layer_norm_moments(const Tensor& x) {
  return row_moments<simdnorm::layer_norm_params>(op_id::layer_norm, "layer_norm_moments", x);
}
Tensor rms_norm_moments(const Tensor& x) {
  return row_moments<simdnorm::rms_norm_params>(op_id::rms_norm, "rms_norm_moments", x);
}
Tensor layer_norm_apply(const Tensor& x, const Tensor& records, const optional<Tensor>& weight,
                        const optional<Tensor>& bias, double eps) {
  return row_apply<simdnorm::layer_norm_params>(op_id::layer_norm, "layer_norm_apply", x, records,
                                                weight, bias, eps);
}
Tensor rms_norm_apply(const Tensor& x, const Tensor& records, const optional<Tensor>& weight,
                      double eps) {
  return row_apply<simdnorm::rms_norm_params>(op_id::rms_norm, "rms_norm_apply", x, records, weight,
                                              c10::nullopt, eps);
}

// parts: [P, ...rows, 32], the records of P parts in order (torch.stack of an all_gather);
// returns [...rows, 32], their merge (simdnorm::merge_moments: Chan's formula in double, a left
// fold over the parts).
Tensor merge_moments(const Tensor& parts) {
  constexpr const char* op = "merge_moments";
  TORCH_CHECK(parts.dim() >= 2 && parts.size(0) >= 1 && parts.size(-1) == kRecordBytes, "simdnorm.",
              op, ": parts must be [num_parts >= 1, ..., 32] (records stacked by part), got ",
              parts.sizes());
  const simdnorm::moments* in = records_ptr(parts, parts.sizes(), op, "parts");
  Tensor out = at::empty(parts.sizes().slice(1), parts.options());
  const auto n = static_cast<std::size_t>(out.numel() / kRecordBytes);
  if (n == 0) return out;
  check_status(simdnorm::merge_moments(in, static_cast<std::size_t>(parts.size(0)), n,
                                       reinterpret_cast<simdnorm::moments*>(out.data_ptr())),
               op);
  return out;
}

int64_t channels_of(const Tensor& x, const char* op) {
  TORCH_CHECK(x.dim() >= 2, "simdnorm.", op, ": input needs at least 2 dims (N, C, ...), got ",
              x.sizes());
  return x.size(1);
}

// The tensors whose values a BatchNorm inference plan folds in, null where absent (the key
// records which are present). Their entry keeps their bytes, in their own dtype.
using folded_tensors = std::initializer_list<const Tensor*>;

const Tensor* present(const optional<Tensor>& t) {
  return t.has_value() && t->defined() ? &*t : nullptr;
}

std::string bytes_of(folded_tensors ts) {
  std::string out;
  for (const Tensor* t : ts)
    if (t != nullptr) out.append(static_cast<const char*>(t->data_ptr()), t->nbytes());
  return out;
}

bool same_bytes(const std::string& folded, folded_tensors ts) {
  std::size_t at = 0;
  for (const Tensor* t : ts) {
    if (t == nullptr) continue;
    const std::size_t n = t->nbytes();
    if (folded.size() < at + n || std::memcmp(folded.data() + at, t->data_ptr(), n) != 0)
      return false;
    at += n;
  }
  return at == folded.size();
}

// BatchNorm inference's vectors (check_param): gamma and beta optional, the running statistics
// required.
void check_inference_params(const char* op, const Tensor& x, const optional<Tensor>& weight,
                            const optional<Tensor>& bias, const optional<Tensor>& running_mean,
                            const optional<Tensor>& running_var) {
  const at::ScalarType xt = x.scalar_type();
  const int64_t c = x.size(1);
  check_param(weight, xt, c, op, "weight");
  check_param(bias, xt, c, op, "bias");
  const bool rm = check_param(running_mean, xt, c, op, "running_mean");
  const bool rv = check_param(running_var, xt, c, op, "running_var");
  TORCH_CHECK(rm && rv, "simdnorm.", op,
              ": inference (training=False) needs running_mean and running_var");
}

// A BatchNorm inference plan for x -> yd from the cache. `params` has everything but the four
// vectors, which are checked here on every call but converted to float32 (bfloat16 / float16
// ones) only when a plan is made: the plan folds them in (in double) and keeps no pointer.
// `key` holds the caller's own entries; `quant_scales` and `quant_zero_points` (per-channel
// quantized outputs) are folded in too. The entry is remade when any folded byte changes.
simdnorm::plan batch_norm_inference_plan(
    const char* op, const Tensor& x, const simdnorm::tensor_desc& yd,
    simdnorm::batch_norm_params params, key_builder key, const optional<Tensor>& weight,
    const optional<Tensor>& bias, const optional<Tensor>& running_mean,
    const optional<Tensor>& running_var, const Tensor* quant_scales = nullptr,
    const Tensor* quant_zero_points = nullptr) {
  check_inference_params(op, x, weight, bias, running_mean, running_var);
  const at::ScalarType xt = x.scalar_type();
  const int64_t c = x.size(1);
  const auto xd = desc_of(x);
  // The key names the parameter tensors (their storage); the entry compares their contents.
  key.add(xd).add(yd).add(params.eps);
  key.add(storage_of(running_mean)).add(storage_of(running_var));
  key.add(storage_of(weight)).add(storage_of(bias));
  const folded_tensors folded = {present(running_mean), present(running_var), present(weight),
                                 present(bias),         quant_scales,         quant_zero_points};
  return cache().get(
      key.take(),
      [&] {
        Tensor gamma32, beta32, rm32, rv32;  // float32 copies of bfloat16 / float16 ones
        params.gamma = param_ptr(weight, xt, c, op, "weight", &gamma32);
        params.beta = param_ptr(bias, xt, c, op, "bias", &beta32);
        params.running_mean = param_ptr(running_mean, xt, c, op, "running_mean", &rm32);
        params.running_var = param_ptr(running_var, xt, c, op, "running_var", &rv32);
        cache_entry made = make_entry(xd, yd, params, op);
        made.folded = bytes_of(folded);
        return made;
      },
      [&](const cache_entry& entry) { return same_bytes(entry.folded, folded); });
}

void bump_version(const Tensor& t) {
  if (t.unsafeGetTensorImpl()->version_counter().enabled()) t.unsafeGetTensorImpl()->bump_version();
}

void check_mutable(const optional<Tensor>& t, const char* op, const char* name) {
  if (!t.has_value() || !t->defined()) return;
  TORCH_CHECK(
      t->unsafeGetTensorImpl()->version_counter().enabled() || c10::InferenceMode::is_enabled(),
      "simdnorm.", op, ": ", name,
      " is an inference tensor; it cannot be updated outside InferenceMode");
}

Tensor batch_norm(const Tensor& x, const optional<Tensor>& weight, const optional<Tensor>& bias,
                  const optional<Tensor>& running_mean, const optional<Tensor>& running_var,
                  const optional<Tensor>& num_batches_tracked, bool training, double momentum,
                  bool cumulative, double eps) {
  constexpr const char* op = "batch_norm";
  check_input(x, op);
  const int64_t c = channels_of(x, op);
  Tensor y = output_like(x);
  const at::ScalarType xt = x.scalar_type();
  check_param(weight, xt, c, op, "weight");
  check_param(bias, xt, c, op, "bias");
  const bool has_running = check_param(running_mean, xt, c, op, "running_mean");
  TORCH_CHECK(has_running == check_param(running_var, xt, c, op, "running_var"), "simdnorm.", op,
              ": running_mean and running_var must be given together");
  if (x.numel() == 0) return y;  // nothing to normalize; the running statistics stay as they are
  const auto xd = desc_of(x), yd = desc_of(y);
  simdnorm::batch_norm_params params;
  params.eps = static_cast<float>(eps);
  params.training = training;
  simdnorm::batch_norm_args args;
  args.x = x.data_ptr();
  args.y = y.data_ptr();

  if (!training) {
    const simdnorm::plan plan =
        batch_norm_inference_plan(op, x, yd, params, key_builder(op_id::batch_norm).add(int64_t{0}),
                                  weight, bias, running_mean, running_var);
    execute(plan, args, op);
    return y;
  }

  Tensor gamma32, beta32, rm32, rv32;  // float32 copies of bfloat16 / float16 parameters
  const float* gamma = param_ptr(weight, xt, c, op, "weight", &gamma32);
  const float* beta = param_ptr(bias, xt, c, op, "bias", &beta32);
  param_ptr(running_mean, xt, c, op, "running_mean", &rm32);  // updated in the copies, if any
  param_ptr(running_var, xt, c, op, "running_var", &rv32);
  params.momentum = static_cast<float>(momentum);
  params.cumulative = cumulative;
  params.convention = simdnorm::momentum_convention::pytorch;
  int64_t* nbt = nullptr;
  if (num_batches_tracked.has_value() && num_batches_tracked->defined()) {
    const Tensor& t = *num_batches_tracked;
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kLong && t.numel() == 1, "simdnorm.",
                op, ": num_batches_tracked must be a one-element int64 CPU tensor");
    nbt = t.data_ptr<int64_t>();
  }
  TORCH_CHECK(!(cumulative && has_running && nbt == nullptr), "simdnorm.", op,
              ": cumulative averaging (momentum=None) needs num_batches_tracked");
  check_mutable(running_mean, op, "running_mean");
  check_mutable(running_var, op, "running_var");
  check_mutable(num_batches_tracked, op, "num_batches_tracked");
  std::string key = key_builder(op_id::batch_norm)
                        .add(xd)
                        .add(yd)
                        .add(int64_t{1})
                        .add(params.eps)
                        .add(params.momentum)
                        .add(int64_t{cumulative})
                        .take();
  simdnorm::plan plan = cache().get(
      key, [&] { return make_entry(xd, yd, params, op); }, always_valid);
  args.gamma = gamma;
  args.beta = beta;
  if (has_running) {  // updated in place: the tensors themselves, or their float32 copies
    args.running_mean = rm32.defined() ? rm32.data_ptr<float>() : running_mean->data_ptr<float>();
    args.running_var = rv32.defined() ? rv32.data_ptr<float>() : running_var->data_ptr<float>();
  }
  args.num_batches_tracked = nbt;
  execute(plan, args, op);
  if (rm32.defined()) running_mean->copy_(rm32);  // rounded once into their dtype
  if (rv32.defined()) running_var->copy_(rv32);
  if (has_running) {
    bump_version(*running_mean);
    bump_version(*running_var);
  }
  if (nbt != nullptr) bump_version(*num_batches_tracked);
  return y;
}

// Static 8-bit outputs of the channel ops: `scale` and `zero_point` tensors of 1 element
// (torch.quantize_per_tensor) or C elements (torch.quantize_per_channel along dim 1), as the
// plan's quant_params. The plan reads the per-channel arrays while it is made.
struct channel_quant {
  Tensor scales;       // float32, contiguous, 1 or C elements
  Tensor zero_points;  // int32, the same
  simdnorm::quant_params params;
  bool per_channel() const { return params.scaling == simdnorm::quant_scaling::per_channel; }
};

channel_quant channel_quant_of(const Tensor& scale, const Tensor& zero_point, int64_t c,
                               const char* op) {
  TORCH_CHECK(scale.device().is_cpu() && (scale.numel() == 1 || scale.numel() == c), "simdnorm.",
              op, ": scale must be a CPU tensor of 1 element (per tensor) or C = ", c,
              " elements (per channel), got ", scale.numel());
  TORCH_CHECK(zero_point.device().is_cpu() && zero_point.numel() == scale.numel() &&
                  !at::isFloatingType(zero_point.scalar_type()),
              "simdnorm.", op, ": zero_point must be an integer CPU tensor of scale's ",
              scale.numel(), " elements");
  channel_quant q;
  q.scales = scale.to(at::kFloat).contiguous().reshape({-1});
  q.zero_points = zero_point.to(at::kInt).contiguous().reshape({-1});
  if (scale.numel() != 1) {
    q.params.scaling = simdnorm::quant_scaling::per_channel;
    q.params.channel_scales = q.scales.data_ptr<float>();
    q.params.channel_zero_points = q.zero_points.data_ptr<int32_t>();
  } else {
    q.params.scaling = simdnorm::quant_scaling::per_tensor;
    q.params.scale = q.scales.data_ptr<float>()[0];
    q.params.zero_point = q.zero_points.data_ptr<int32_t>()[0];
  }
  return q;
}

// The codes' tensor: the input's shape and memory format, int8 or uint8 (float8_e4m3fn codes as
// uint8); *yd its descriptor with the 8-bit type.
Tensor codes_like(const Tensor& x, c10::string_view dtype, const char* op,
                  simdnorm::tensor_desc* yd) {
  const auto type = quant_type(dtype, op);
  Tensor q = at::empty_like(x, x.options().dtype(type.second));
  *yd = desc_of(q);
  yd->type = type.first;
  return q;
}

// BatchNorm inference straight into 8-bit codes with static output scales (channel_quant): the
// codes of torch's quantizer applied to batch_norm's float output, without that output. The
// scales and zero points are folded into the plan with the running statistics (in double), so
// a code can differ by one from quantizing the rounded float y where y / scale lies within an
// ulp of a rounding boundary. With `relu`, the codes of max(y, 0).
Tensor batch_norm_quant_static(const Tensor& x, const optional<Tensor>& weight,
                               const optional<Tensor>& bias, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& scale,
                               const Tensor& zero_point, double eps, c10::string_view dtype,
                               bool relu) {
  constexpr const char* op = "batch_norm_quant_static";
  check_input(x, op);
  const int64_t c = channels_of(x, op);
  simdnorm::tensor_desc yd;
  Tensor q = codes_like(x, dtype, op, &yd);
  const channel_quant quant = channel_quant_of(scale, zero_point, c, op);
  check_inference_params(op, x, weight, bias, running_mean, running_var);
  if (x.numel() == 0) return q;
  simdnorm::batch_norm_params params;
  params.eps = static_cast<float>(eps);
  params.fuse_relu = relu;
  params.quant = quant.params;
  const bool per_channel = quant.per_channel();
  key_builder key(op_id::batch_norm);
  key.add(int64_t{2}).add(int64_t{relu}).add(int64_t{per_channel});
  if (!per_channel) key.add(params.quant.scale).add(int64_t{params.quant.zero_point});
  const simdnorm::plan plan = batch_norm_inference_plan(
      op, x, yd, params, std::move(key), weight, bias, running_mean, running_var,
      per_channel ? &quant.scales : nullptr, per_channel ? &quant.zero_points : nullptr);
  simdnorm::batch_norm_args args;
  args.x = x.data_ptr();
  args.y = q.data_ptr();
  execute(plan, args, op);
  return q;
}

// The plan key entries of a channel_quant: its kind, and every scale and zero point (the plan
// folded them in; per channel that is C pairs, hashed on every call as the BatchNorm refold
// check reads its values).
void add_quant_key(std::vector<int64_t>* extra, const channel_quant& q) {
  extra->push_back(static_cast<int64_t>(q.params.scaling));
  const float* s = q.scales.data_ptr<float>();
  const int32_t* z = q.zero_points.data_ptr<int32_t>();
  for (int64_t i = 0; i < q.scales.numel(); ++i) extra->insert(extra->end(), {key_of(s[i]), z[i]});
}

// The checks and parameters GroupNorm and InstanceNorm share with their quantized forms.
simdnorm::group_norm_params group_norm_params_of(const Tensor& x, int64_t num_groups, double eps,
                                                 const char* op) {
  check_input(x, op);
  const int64_t c = channels_of(x, op);
  TORCH_CHECK(num_groups >= 1 && num_groups <= c, "simdnorm.", op, ": num_groups ", num_groups,
              " must be in [1, C = ", c, "]");
  simdnorm::group_norm_params params;
  params.num_groups = static_cast<int>(num_groups);
  params.eps = static_cast<float>(eps);
  return params;
}

simdnorm::instance_norm_params instance_norm_params_of(const Tensor& x, double eps,
                                                       const char* op) {
  check_input(x, op);
  channels_of(x, op);
  simdnorm::instance_norm_params params;
  params.eps = static_cast<float>(eps);
  return params;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const optional<Tensor>& weight,
                  const optional<Tensor>& bias, double eps) {
  constexpr const char* op = "group_norm";
  const auto params = group_norm_params_of(x, num_groups, eps, op);
  return run_plain(op_id::group_norm, op, x, params, {num_groups}, weight, bias, x.size(1));
}

Tensor instance_norm(const Tensor& x, const optional<Tensor>& weight, const optional<Tensor>& bias,
                     double eps) {
  constexpr const char* op = "instance_norm";
  const auto params = instance_norm_params_of(x, eps, op);
  return run_plain(op_id::instance_norm, op, x, params, {}, weight, bias, x.size(1));
}

// GroupNorm and InstanceNorm straight into 8-bit codes with static output scales
// (channel_quant): the codes of torch's quantizer applied to their float output, within a code.
Tensor group_norm_quant_static(const Tensor& x, int64_t num_groups, const optional<Tensor>& weight,
                               const optional<Tensor>& bias, const Tensor& scale,
                               const Tensor& zero_point, double eps, c10::string_view dtype) {
  constexpr const char* op = "group_norm_quant_static";
  auto params = group_norm_params_of(x, num_groups, eps, op);
  const int64_t c = x.size(1);
  simdnorm::tensor_desc yd;
  Tensor q = codes_like(x, dtype, op, &yd);
  const channel_quant quant = channel_quant_of(scale, zero_point, c, op);
  params.quant = quant.params;
  std::vector<int64_t> extra = {num_groups};
  add_quant_key(&extra, quant);
  run_into(op_id::group_norm, op, x, q, yd, params, extra, weight, bias, c, no_fill);
  return q;
}

Tensor instance_norm_quant_static(const Tensor& x, const optional<Tensor>& weight,
                                  const optional<Tensor>& bias, const Tensor& scale,
                                  const Tensor& zero_point, double eps, c10::string_view dtype) {
  constexpr const char* op = "instance_norm_quant_static";
  auto params = instance_norm_params_of(x, eps, op);
  const int64_t c = x.size(1);
  simdnorm::tensor_desc yd;
  Tensor q = codes_like(x, dtype, op, &yd);
  const channel_quant quant = channel_quant_of(scale, zero_point, c, op);
  params.quant = quant.params;
  std::vector<int64_t> extra;
  add_quant_key(&extra, quant);
  run_into(op_id::instance_norm, op, x, q, yd, params, extra, weight, bias, c, no_fill);
  return q;
}

// torch.nn.functional.normalize(x, p, dim, eps): y = x / max(||x||_p, eps) along dim, for
// p = 1 or 2 and a dim the plan takes as rows (every dim after it of size 1, the row dense).
Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  constexpr const char* op = "normalize";
  check_input(x, op);
  const int64_t axis = c10::maybe_wrap_dim(dim, x.dim());  // IndexError out of range, as torch
  TORCH_CHECK(p == 1.0 || p == 2.0, "simdnorm.", op, ": p=", p,
              " is not supported; simdnorm's Lp plan takes p = 1 or 2");
  if (x.dim() == 0) return normalize(x.reshape({1}), p, 0, eps).reshape({});  // a 1-element row
  simdnorm::lp_norm_params params;
  params.axis = static_cast<int>(axis);
  params.p = static_cast<int>(p);
  params.eps = static_cast<float>(eps);  // as PyTorch's clamp_min on a float32 tensor
  return run_plain(op_id::lp_norm, op, x, params, {axis, int64_t{params.p}}, c10::nullopt,
                   c10::nullopt, 0);
}

// ---- autograd ---------------------------------------------------------------------------------
// The operators have no derivative. Rather than return outputs that silently drop out of the
// graph, a call that would need one (grad mode on, an input requiring grad) fails.

bool needs_grad(const Tensor& t) { return t.requires_grad(); }
bool needs_grad(const optional<Tensor>& t) { return t.has_value() && t->requires_grad(); }

template <class... Tensors>
void check_no_grad(const char* op, const Tensors&... tensors) {
  TORCH_CHECK(!c10::GradMode::is_enabled() || !(needs_grad(tensors) || ...), "simdnorm.", op,
              " has no autograd formula and an input requires grad: call it under "
              "torch.no_grad() or torch.inference_mode(), or use the torch.nn module (it falls "
              "back to PyTorch when gradients are needed)");
}

Tensor layer_norm_autograd(const Tensor& x, at::IntArrayRef normalized_shape,
                           const optional<Tensor>& weight, const optional<Tensor>& bias,
                           double eps) {
  check_no_grad("layer_norm", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

Tensor rms_norm_autograd(const Tensor& x, at::IntArrayRef normalized_shape,
                         const optional<Tensor>& weight, double eps, double weight_offset) {
  check_no_grad("rms_norm", x, weight);
  at::AutoDispatchBelowADInplaceOrView guard;
  return rms_norm(x, normalized_shape, weight, eps, weight_offset);
}

// The fused_add ops update input and residual in place: version counters are bumped here, as
// the ADInplaceOrView kernel this one replaces would.
void fused_add_rms_norm_autograd(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                 double eps, const optional<Tensor>& residual_bias) {
  constexpr const char* op = "fused_add_rms_norm";
  check_no_grad(op, x, residual, weight, residual_bias);
  check_mutable(x, op, "input");
  check_mutable(residual, op, "residual");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    fused_add_rms_norm(x, residual, weight, eps, residual_bias);
  }
  bump_version(x);
  bump_version(residual);
}

void fused_add_layer_norm_autograd(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                   const Tensor& bias, double eps,
                                   const optional<Tensor>& residual_bias) {
  constexpr const char* op = "fused_add_layer_norm";
  check_no_grad(op, x, residual, weight, bias, residual_bias);
  check_mutable(x, op, "input");
  check_mutable(residual, op, "residual");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    fused_add_layer_norm(x, residual, weight, bias, eps, residual_bias);
  }
  bump_version(x);
  bump_version(residual);
}

// The norm_add ops update the residual in place (its version counter bumped here).
void rms_norm_add_autograd(const Tensor& x, const Tensor& residual, const optional<Tensor>& weight,
                           double eps, double weight_offset) {
  constexpr const char* op = "rms_norm_add";
  check_no_grad(op, x, residual, weight);
  check_mutable(residual, op, "residual");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    rms_norm_add(x, residual, weight, eps, weight_offset);
  }
  bump_version(residual);
}

void layer_norm_add_autograd(const Tensor& x, const Tensor& residual,
                             const optional<Tensor>& weight, const optional<Tensor>& bias,
                             double eps) {
  constexpr const char* op = "layer_norm_add";
  check_no_grad(op, x, residual, weight, bias);
  check_mutable(residual, op, "residual");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    layer_norm_add(x, residual, weight, bias, eps);
  }
  bump_version(residual);
}

Tensor layer_norm_modulate_autograd(const Tensor& x, const Tensor& scale, const Tensor& shift,
                                    const optional<Tensor>& weight, const optional<Tensor>& bias,
                                    double eps) {
  check_no_grad("layer_norm_modulate", x, scale, shift, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return layer_norm_modulate(x, scale, shift, weight, bias, eps);
}

Tensor rms_norm_modulate_autograd(const Tensor& x, const Tensor& scale, const Tensor& shift,
                                  const optional<Tensor>& weight, double eps) {
  check_no_grad("rms_norm_modulate", x, scale, shift, weight);
  at::AutoDispatchBelowADInplaceOrView guard;
  return rms_norm_modulate(x, scale, shift, weight, eps);
}

Tensor rms_norm_gated_autograd(const Tensor& x, const Tensor& gate, const optional<Tensor>& weight,
                               double eps, double weight_offset, bool norm_before_gate) {
  check_no_grad("rms_norm_gated", x, gate, weight);
  at::AutoDispatchBelowADInplaceOrView guard;
  return rms_norm_gated(x, gate, weight, eps, weight_offset, norm_before_gate);
}

// The quantized ops update the optional residual in place: `run` below the autograd keys,
// then the residual's version bumped.
template <class Run>
auto quant_in_place(const char* op, const optional<Tensor>& residual, Run&& run) {
  check_mutable(residual, op, "residual");
  decltype(run()) out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = run();
  }
  if (residual.has_value() && residual->defined()) bump_version(*residual);
  return out;
}

std::tuple<Tensor, Tensor> rms_norm_quant_autograd(const Tensor& x, const optional<Tensor>& weight,
                                                   double eps, c10::string_view dtype,
                                                   int64_t block, const optional<Tensor>& residual,
                                                   const optional<Tensor>& residual_bias,
                                                   const optional<Tensor>& gate) {
  check_no_grad("rms_norm_quant", x, weight, residual, residual_bias, gate);
  return quant_in_place("rms_norm_quant", residual, [&] {
    return rms_norm_quant(x, weight, eps, dtype, block, residual, residual_bias, gate);
  });
}

std::tuple<Tensor, Tensor> layer_norm_quant_autograd(const Tensor& x,
                                                     const optional<Tensor>& weight,
                                                     const optional<Tensor>& bias, double eps,
                                                     c10::string_view dtype, int64_t block,
                                                     const optional<Tensor>& residual,
                                                     const optional<Tensor>& residual_bias) {
  check_no_grad("layer_norm_quant", x, weight, bias, residual, residual_bias);
  return quant_in_place("layer_norm_quant", residual, [&] {
    return layer_norm_quant(x, weight, bias, eps, dtype, block, residual, residual_bias);
  });
}

std::tuple<Tensor, Tensor, Tensor> rms_norm_quant_asymmetric_autograd(
    const Tensor& x, const optional<Tensor>& weight, double eps, c10::string_view dtype,
    int64_t block, const optional<Tensor>& residual, const optional<Tensor>& residual_bias,
    const optional<Tensor>& gate) {
  check_no_grad("rms_norm_quant_asymmetric", x, weight, residual, residual_bias, gate);
  return quant_in_place("rms_norm_quant_asymmetric", residual, [&] {
    return rms_norm_quant_asymmetric(x, weight, eps, dtype, block, residual, residual_bias, gate);
  });
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_quant_asymmetric_autograd(
    const Tensor& x, const optional<Tensor>& weight, const optional<Tensor>& bias, double eps,
    c10::string_view dtype, int64_t block, const optional<Tensor>& residual,
    const optional<Tensor>& residual_bias) {
  check_no_grad("layer_norm_quant_asymmetric", x, weight, bias, residual, residual_bias);
  return quant_in_place("layer_norm_quant_asymmetric", residual, [&] {
    return layer_norm_quant_asymmetric(x, weight, bias, eps, dtype, block, residual, residual_bias);
  });
}

Tensor rms_norm_quant_static_autograd(const Tensor& x, double scale, int64_t zero_point,
                                      const optional<Tensor>& weight, double eps,
                                      c10::string_view dtype, const optional<Tensor>& residual,
                                      const optional<Tensor>& residual_bias,
                                      const optional<Tensor>& gate) {
  check_no_grad("rms_norm_quant_static", x, weight, residual, residual_bias, gate);
  return quant_in_place("rms_norm_quant_static", residual, [&] {
    return rms_norm_quant_static(x, scale, zero_point, weight, eps, dtype, residual, residual_bias,
                                 gate);
  });
}

Tensor layer_norm_quant_static_autograd(const Tensor& x, double scale, int64_t zero_point,
                                        const optional<Tensor>& weight,
                                        const optional<Tensor>& bias, double eps,
                                        c10::string_view dtype, const optional<Tensor>& residual,
                                        const optional<Tensor>& residual_bias) {
  check_no_grad("layer_norm_quant_static", x, weight, bias, residual, residual_bias);
  return quant_in_place("layer_norm_quant_static", residual, [&] {
    return layer_norm_quant_static(x, scale, zero_point, weight, bias, eps, dtype, residual,
                                   residual_bias);
  });
}

Tensor layer_norm_moments_autograd(const Tensor& x) {
  check_no_grad("layer_norm_moments", x);
  at::AutoDispatchBelowADInplaceOrView guard;
  return layer_norm_moments(x);
}

Tensor rms_norm_moments_autograd(const Tensor& x) {
  check_no_grad("rms_norm_moments", x);
  at::AutoDispatchBelowADInplaceOrView guard;
  return rms_norm_moments(x);
}

Tensor layer_norm_apply_autograd(const Tensor& x, const Tensor& records,
                                 const optional<Tensor>& weight, const optional<Tensor>& bias,
                                 double eps) {
  check_no_grad("layer_norm_apply", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return layer_norm_apply(x, records, weight, bias, eps);
}

Tensor rms_norm_apply_autograd(const Tensor& x, const Tensor& records,
                               const optional<Tensor>& weight, double eps) {
  check_no_grad("rms_norm_apply", x, weight);
  at::AutoDispatchBelowADInplaceOrView guard;
  return rms_norm_apply(x, records, weight, eps);
}

Tensor merge_moments_autograd(const Tensor& parts) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return merge_moments(parts);
}

Tensor batch_norm_autograd(const Tensor& x, const optional<Tensor>& weight,
                           const optional<Tensor>& bias, const optional<Tensor>& running_mean,
                           const optional<Tensor>& running_var,
                           const optional<Tensor>& num_batches_tracked, bool training,
                           double momentum, bool cumulative, double eps) {
  check_no_grad("batch_norm", x, weight, bias, running_mean, running_var);
  at::AutoDispatchBelowADInplaceOrView guard;
  return batch_norm(x, weight, bias, running_mean, running_var, num_batches_tracked, training,
                    momentum, cumulative, eps);
}

Tensor batch_norm_quant_static_autograd(const Tensor& x, const optional<Tensor>& weight,
                                        const optional<Tensor>& bias, const Tensor& running_mean,
                                        const Tensor& running_var, const Tensor& scale,
                                        const Tensor& zero_point, double eps,
                                        c10::string_view dtype, bool relu) {
  check_no_grad("batch_norm_quant_static", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return batch_norm_quant_static(x, weight, bias, running_mean, running_var, scale, zero_point, eps,
                                 dtype, relu);
}

Tensor group_norm_quant_static_autograd(const Tensor& x, int64_t num_groups,
                                        const optional<Tensor>& weight,
                                        const optional<Tensor>& bias, const Tensor& scale,
                                        const Tensor& zero_point, double eps,
                                        c10::string_view dtype) {
  check_no_grad("group_norm_quant_static", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return group_norm_quant_static(x, num_groups, weight, bias, scale, zero_point, eps, dtype);
}

Tensor instance_norm_quant_static_autograd(const Tensor& x, const optional<Tensor>& weight,
                                           const optional<Tensor>& bias, const Tensor& scale,
                                           const Tensor& zero_point, double eps,
                                           c10::string_view dtype) {
  check_no_grad("instance_norm_quant_static", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return instance_norm_quant_static(x, weight, bias, scale, zero_point, eps, dtype);
}

Tensor group_norm_autograd(const Tensor& x, int64_t num_groups, const optional<Tensor>& weight,
                           const optional<Tensor>& bias, double eps) {
  check_no_grad("group_norm", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return group_norm(x, num_groups, weight, bias, eps);
}

Tensor instance_norm_autograd(const Tensor& x, const optional<Tensor>& weight,
                              const optional<Tensor>& bias, double eps) {
  check_no_grad("instance_norm", x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView guard;
  return instance_norm(x, weight, bias, eps);
}

Tensor normalize_autograd(const Tensor& x, double p, int64_t dim, double eps) {
  check_no_grad("normalize", x);
  at::AutoDispatchBelowADInplaceOrView guard;
  return normalize(x, p, dim, eps);
}

}  // namespace
}  // namespace simdnorm_torch

TORCH_LIBRARY(simdnorm, m) {
  m.def(
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
      "Tensor? bias=None, float eps=1e-05) -> Tensor");
  m.def(
      "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
      "float eps=1e-06, float weight_offset=0.) -> Tensor");
  m.def(
      "fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
      "float eps=1e-06, Tensor? residual_bias=None) -> ()");
  m.def(
      "fused_add_layer_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, Tensor bias, "
      "float eps=1e-05, Tensor? residual_bias=None) -> ()");
  m.def(
      "rms_norm_add(Tensor input, Tensor(a!) residual, Tensor? weight=None, float eps=1e-06, "
      "float weight_offset=0.) -> ()");
  m.def(
      "layer_norm_add(Tensor input, Tensor(a!) residual, Tensor? weight=None, "
      "Tensor? bias=None, float eps=1e-05) -> ()");
  m.def(
      "layer_norm_modulate(Tensor input, Tensor scale, Tensor shift, Tensor? weight=None, "
      "Tensor? bias=None, float eps=1e-06) -> Tensor");
  m.def(
      "rms_norm_modulate(Tensor input, Tensor scale, Tensor shift, Tensor? weight=None, "
      "float eps=1e-06) -> Tensor");
  m.def(
      "rms_norm_gated(Tensor input, Tensor gate, Tensor? weight=None, float eps=1e-06, "
      "float weight_offset=0., bool norm_before_gate=True) -> Tensor");
  m.def(
      "rms_norm_quant(Tensor input, Tensor? weight=None, float eps=1e-06, str dtype='int8', "
      "int block=0, Tensor(a!)? residual=None, Tensor? residual_bias=None, Tensor? gate=None) "
      "-> (Tensor, Tensor)");
  m.def(
      "layer_norm_quant(Tensor input, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
      "str dtype='int8', int block=0, Tensor(a!)? residual=None, Tensor? residual_bias=None) "
      "-> (Tensor, Tensor)");
  m.def(
      "rms_norm_quant_asymmetric(Tensor input, Tensor? weight=None, float eps=1e-06, "
      "str dtype='uint8', int block=0, Tensor(a!)? residual=None, Tensor? residual_bias=None, "
      "Tensor? gate=None) -> (Tensor, Tensor, Tensor)");
  m.def(
      "layer_norm_quant_asymmetric(Tensor input, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05, str dtype='uint8', int block=0, Tensor(a!)? residual=None, "
      "Tensor? residual_bias=None) -> (Tensor, Tensor, Tensor)");
  m.def(
      "rms_norm_quant_static(Tensor input, float scale, int zero_point=0, Tensor? weight=None, "
      "float eps=1e-06, str dtype='uint8', Tensor(a!)? residual=None, "
      "Tensor? residual_bias=None, Tensor? gate=None) -> Tensor");
  m.def(
      "layer_norm_quant_static(Tensor input, float scale, int zero_point=0, "
      "Tensor? weight=None, Tensor? bias=None, float eps=1e-05, str dtype='uint8', "
      "Tensor(a!)? residual=None, Tensor? residual_bias=None) -> Tensor");
  m.def("layer_norm_moments(Tensor input) -> Tensor");
  m.def("rms_norm_moments(Tensor input) -> Tensor");
  m.def(
      "layer_norm_apply(Tensor input, Tensor moments, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor");
  m.def(
      "rms_norm_apply(Tensor input, Tensor moments, Tensor? weight=None, float eps=1e-06) "
      "-> Tensor");
  m.def("merge_moments(Tensor parts) -> Tensor");
  m.def(
      "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
      "Tensor(b!)? running_var, Tensor(c!)? num_batches_tracked, bool training, "
      "float momentum=0.1, bool cumulative=False, float eps=1e-05) -> Tensor");
  m.def(
      "batch_norm_quant_static(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
      "Tensor running_var, Tensor scale, Tensor zero_point, float eps=1e-05, str dtype='uint8', "
      "bool relu=False) -> Tensor");
  m.def(
      "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor");
  m.def(
      "instance_norm(Tensor input, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor");
  m.def(
      "group_norm_quant_static(Tensor input, int num_groups, Tensor? weight, Tensor? bias, "
      "Tensor scale, Tensor zero_point, float eps=1e-05, str dtype='uint8') -> Tensor");
  m.def(
      "instance_norm_quant_static(Tensor input, Tensor? weight, Tensor? bias, Tensor scale, "
      "Tensor zero_point, float eps=1e-05, str dtype='uint8') -> Tensor");
  m.def("normalize(Tensor input, float p=2., int dim=1, float eps=1e-12) -> Tensor");
}

TORCH_LIBRARY_IMPL(simdnorm, CPU, m) {
  m.impl("layer_norm", &simdnorm_torch::layer_norm);
  m.impl("rms_norm", &simdnorm_torch::rms_norm);
  m.impl("fused_add_rms_norm", &simdnorm_torch::fused_add_rms_norm);
  m.impl("fused_add_layer_norm", &simdnorm_torch::fused_add_layer_norm);
  m.impl("rms_norm_add", &simdnorm_torch::rms_norm_add);
  m.impl("layer_norm_add", &simdnorm_torch::layer_norm_add);
  m.impl("layer_norm_modulate", &simdnorm_torch::layer_norm_modulate);
  m.impl("rms_norm_modulate", &simdnorm_torch::rms_norm_modulate);
  m.impl("rms_norm_gated", &simdnorm_torch::rms_norm_gated);
  m.impl("rms_norm_quant", &simdnorm_torch::rms_norm_quant);
  m.impl("layer_norm_quant", &simdnorm_torch::layer_norm_quant);
  m.impl("rms_norm_quant_asymmetric", &simdnorm_torch::rms_norm_quant_asymmetric);
  m.impl("layer_norm_quant_asymmetric", &simdnorm_torch::layer_norm_quant_asymmetric);
  m.impl("rms_norm_quant_static", &simdnorm_torch::rms_norm_quant_static);
  m.impl("layer_norm_quant_static", &simdnorm_torch::layer_norm_quant_static);
  m.impl("layer_norm_moments", &simdnorm_torch::layer_norm_moments);
  m.impl("rms_norm_moments", &simdnorm_torch::rms_norm_moments);
  m.impl("layer_norm_apply", &simdnorm_torch::layer_norm_apply);
  m.impl("rms_norm_apply", &simdnorm_torch::rms_norm_apply);
  m.impl("merge_moments", &simdnorm_torch::merge_moments);
  m.impl("batch_norm", &simdnorm_torch::batch_norm);
  m.impl("batch_norm_quant_static", &simdnorm_torch::batch_norm_quant_static);
  m.impl("group_norm", &simdnorm_torch::group_norm);
  m.impl("instance_norm", &simdnorm_torch::instance_norm);
  m.impl("group_norm_quant_static", &simdnorm_torch::group_norm_quant_static);
  m.impl("instance_norm_quant_static", &simdnorm_torch::instance_norm_quant_static);
  m.impl("normalize", &simdnorm_torch::normalize);
}

TORCH_LIBRARY_IMPL(simdnorm, Autograd, m) {
  m.impl("layer_norm", &simdnorm_torch::layer_norm_autograd);
  m.impl("rms_norm", &simdnorm_torch::rms_norm_autograd);
  m.impl("fused_add_rms_norm", &simdnorm_torch::fused_add_rms_norm_autograd);
  m.impl("fused_add_layer_norm", &simdnorm_torch::fused_add_layer_norm_autograd);
  m.impl("rms_norm_add", &simdnorm_torch::rms_norm_add_autograd);
  m.impl("layer_norm_add", &simdnorm_torch::layer_norm_add_autograd);
  m.impl("layer_norm_modulate", &simdnorm_torch::layer_norm_modulate_autograd);
  m.impl("rms_norm_modulate", &simdnorm_torch::rms_norm_modulate_autograd);
  m.impl("rms_norm_gated", &simdnorm_torch::rms_norm_gated_autograd);
  m.impl("rms_norm_quant", &simdnorm_torch::rms_norm_quant_autograd);
  m.impl("layer_norm_quant", &simdnorm_torch::layer_norm_quant_autograd);
  m.impl("rms_norm_quant_asymmetric", &simdnorm_torch::rms_norm_quant_asymmetric_autograd);
  m.impl("layer_norm_quant_asymmetric", &simdnorm_torch::layer_norm_quant_asymmetric_autograd);
  m.impl("rms_norm_quant_static", &simdnorm_torch::rms_norm_quant_static_autograd);
  m.impl("layer_norm_quant_static", &simdnorm_torch::layer_norm_quant_static_autograd);
  m.impl("layer_norm_moments", &simdnorm_torch::layer_norm_moments_autograd);
  m.impl("rms_norm_moments", &simdnorm_torch::rms_norm_moments_autograd);
  m.impl("layer_norm_apply", &simdnorm_torch::layer_norm_apply_autograd);
  m.impl("rms_norm_apply", &simdnorm_torch::rms_norm_apply_autograd);
  m.impl("merge_moments", &simdnorm_torch::merge_moments_autograd);
  m.impl("batch_norm", &simdnorm_torch::batch_norm_autograd);
  m.impl("batch_norm_quant_static", &simdnorm_torch::batch_norm_quant_static_autograd);
  m.impl("group_norm", &simdnorm_torch::group_norm_autograd);
  m.impl("instance_norm", &simdnorm_torch::instance_norm_autograd);
  m.impl("group_norm_quant_static", &simdnorm_torch::group_norm_quant_static_autograd);
  m.impl("instance_norm_quant_static", &simdnorm_torch::instance_norm_quant_static_autograd);
  m.impl("normalize", &simdnorm_torch::normalize_autograd);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "simdnorm PyTorch operators (torch.ops.simdnorm) and their plan cache";
  m.def(
      "cache_info", [] { return simdnorm_torch::cache().info(); },
      "Plan cache size, capacity, hits, misses and stale (refolded BatchNorm) entries.");
  m.def(
      "clear_cache", [] { simdnorm_torch::cache().clear(); }, "Drops every cached plan.");
  m.def(
      "set_cache_capacity", [](int64_t n) { simdnorm_torch::cache().set_capacity(n); },
      "Maximum number of cached plans (0 disables the cache).");
  m.def(
      "kernel_isa", [] { return std::string(simdnorm::isa_name(simdnorm::active_isa())); },
      "The ISA whose kernels new plans use.");
  m.def(
      "kernel_lanes", [] { return simdnorm::isa_lanes(simdnorm::active_isa()); },
      "float32 lanes of that ISA's vectors (the tests' error bounds depend on them).");
  m.def("executor_threads", &simdnorm_torch::executor_threads,
        "Distinct threads that run n tasks of the operators' executor (at::parallel_for).");
  simdnorm_torch::bind_module_calls(m);
}
