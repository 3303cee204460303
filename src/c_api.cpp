// The C API (include/simdnorm/simdnorm.h): conversions to the C++ API and a per-thread message
// of the last failure. Every entry point catches everything: no exception crosses extern "C".
#include "simdnorm/simdnorm.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "simdnorm/plan.hpp"

struct simdnorm_plan {
  simdnorm::plan p;
};

namespace {

using simdnorm::status;
using simdnorm::status_code;

// The C enums mirror the C++ ones value for value, so conversions are casts (the ISA enums are
// both generated from simdnorm/isa_list.h).
static_assert(int(SIMDNORM_UNSUPPORTED_DTYPE) == int(status_code::unsupported_dtype),
              "status codes");
static_assert(SIMDNORM_MAX_DIMS == simdnorm::max_dims, "max dims");
static_assert(int(SIMDNORM_STORES_STREAMING) == int(simdnorm::store_policy::streaming), "stores");
static_assert(int(SIMDNORM_NHWC) == int(simdnorm::channel_layout::nhwc), "layouts");
static_assert(int(SIMDNORM_MOMENTUM_ONNX) == int(simdnorm::momentum_convention::onnx), "momentum");
static_assert(int(SIMDNORM_STAGE_APPLY) == int(simdnorm::stats_stage::apply), "stages");
static_assert(int(SIMDNORM_QUANT_PER_TENSOR) == int(simdnorm::quant_scaling::per_tensor), "quant");
static_assert(int(SIMDNORM_QUANT_DYNAMIC_ASYMMETRIC) ==
                  int(simdnorm::quant_scaling::dynamic_asymmetric),
              "quant");
static_assert(int(SIMDNORM_QUANT_PER_CHANNEL) == int(simdnorm::quant_scaling::per_channel),
              "quant");
static_assert(int(SIMDNORM_MOMENTS_MAGNITUDES) == int(simdnorm::moments_kind::magnitudes), "kinds");
// simdnorm_moments and simdnorm::moments are the same record: arrays of one are the other's.
static_assert(sizeof(simdnorm_moments) == sizeof(simdnorm::moments) &&
                  offsetof(simdnorm_moments, count) == offsetof(simdnorm::moments, count) &&
                  offsetof(simdnorm_moments, mean) == offsetof(simdnorm::moments, mean) &&
                  offsetof(simdnorm_moments, m2) == offsetof(simdnorm::moments, m2) &&
                  offsetof(simdnorm_moments, kind) == offsetof(simdnorm::moments, kind) &&
                  offsetof(simdnorm_moments, reserved) == offsetof(simdnorm::moments, reserved),
              "moments records");

// Per-thread, like errno: only failures write it, so a success cannot erase a message that the
// caller has not read yet, and the hot path (run) pays nothing for it.
thread_local char t_last_error[200] = "";

simdnorm_status record(const status& s) noexcept {
  if (!s.ok()) {
    std::strncpy(t_last_error, s.message(), sizeof t_last_error - 1);
    t_last_error[sizeof t_last_error - 1] = '\0';
  }
  return simdnorm_status(s.code());
}

simdnorm_status fail(status_code code, const char* what) noexcept {
  return record(status::error(code, "%s", what));
}

// Runs `body` (which returns a status) and turns any exception into internal_error.
template <class F>
simdnorm_status guarded(const char* fn, F&& body) noexcept {
  try {
    return record(body());
  } catch (const std::bad_alloc&) {
    return record(status::error(status_code::out_of_memory, "%s: out of memory", fn));
  } catch (...) {
    return record(status::error(status_code::internal_error, "%s: unexpected exception", fn));
  }
}

// C enum inputs as the 32-bit value the caller stored. A C caller may pass any bit pattern of
// the enum's type, and a C++ load of one outside the enumerators' range is undefined (UBSan
// -fsanitize=enum traps on it), so enum arguments and fields are read through their bytes.
template <class E>
int raw(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(std::int32_t), "the C enums are 32-bit");
  std::int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bool valid_isa(int i) noexcept { return simdnorm::isa_lanes(simdnorm::isa(i)) != 0; }

status to_desc(const simdnorm_tensor_desc* in, const char* name,
               simdnorm::tensor_desc* out) noexcept {
  if (in == nullptr) return status::error(status_code::invalid_argument, "%s is null", name);
  if (in->ndim < 1 || in->ndim > SIMDNORM_MAX_DIMS)
    return status::error(status_code::invalid_argument, "%s.ndim=%d: must be in [1, %d]", name,
                         int(in->ndim), SIMDNORM_MAX_DIMS);
  const int type = raw(in->type);
  if (simdnorm::dtype_size(simdnorm::dtype(type)) == 0)
    return status::error(status_code::invalid_argument, "%s.type=%d: not a simdnorm_dtype", name,
                         type);
  out->ndim = int(in->ndim);
  for (int i = 0; i < out->ndim; ++i) {
    out->shape[i] = in->shape[i];
    out->strides[i] = in->strides[i];
  }
  out->type = simdnorm::dtype(type);
  return {};
}

// The C args structs into the C++ ones, part by part.
void to_cpp(const simdnorm_norm_args& a, simdnorm::norm_args* n) noexcept {
  n->x = a.x;
  n->y = a.y;
  n->gamma = a.gamma;
  n->beta = a.beta;
  n->mean = a.mean;
  n->rstd = a.rstd;
  n->workspace = a.workspace;
  n->moments_out = reinterpret_cast<simdnorm::moments*>(a.moments_out);
  n->moments_in = reinterpret_cast<const simdnorm::moments*>(a.moments_in);
}
void to_cpp(const simdnorm_residual_operands& a, simdnorm::residual_operands* n) noexcept {
  n->residual = a.in;
  n->residual_out = a.out;
  n->residual_bias = a.bias;
}
void to_cpp(const simdnorm_quantized_outputs& a, simdnorm::quantized_outputs* n) noexcept {
  n->y_scale = a.y_scale;
  n->y_zero_point = a.y_zero_point;
  n->amax = a.amax;
}
void to_cpp(const simdnorm_modulation_operands& a, simdnorm::modulation_operands* n) noexcept {
  n->modulation_scale = a.scale;
  n->modulation_shift = a.shift;
  n->modulation_stride = a.stride;
}
void to_cpp(const simdnorm_running_statistics& a, simdnorm::running_statistics* n) noexcept {
  n->running_mean = a.mean;
  n->running_var = a.var;
  n->num_batches_tracked = a.num_batches_tracked;
}
// LayerNorm's and RMSNorm's common parts.
template <class CArgs, class CppArgs>
void transformer_norm_to_cpp(const CArgs& a, CppArgs* n) noexcept {
  to_cpp(a.base, n);
  to_cpp(a.residual, n);
  to_cpp(a.quant, n);
  to_cpp(a.modulation, n);
}
void to_cpp(const simdnorm_layer_norm_args& a, simdnorm::layer_norm_args* n) noexcept {
  transformer_norm_to_cpp(a, n);
}
void to_cpp(const simdnorm_rms_norm_args& a, simdnorm::rms_norm_args* n) noexcept {
  transformer_norm_to_cpp(a, n);
  n->gate = a.gate;
}
void to_cpp(const simdnorm_lp_norm_args& a, simdnorm::lp_norm_args* n) noexcept {
  to_cpp(a.base, n);
  to_cpp(a.residual, n);
}
void to_cpp(const simdnorm_batch_norm_args& a, simdnorm::batch_norm_args* n) noexcept {
  to_cpp(a.base, n);
  to_cpp(a.running, n);
}

// C enums arrive as any 32-bit value: check the range before the C++ enum is used.
status check_enum(int value, int max, const char* name) noexcept {
  if (value < 0 || value > max)
    return status::error(status_code::invalid_argument, "params.%s=%d: not a valid value", name,
                         value);
  return {};
}

// The row ops' store policy and stage.
template <class CParams>
status check_stores_and_stage(const CParams* p) noexcept {
  const status s = check_enum(raw(p->stores), SIMDNORM_STORES_STREAMING, "stores");
  return s ? check_enum(raw(p->stage), SIMDNORM_STAGE_APPLY, "stage") : s;
}

void convert_quant(const simdnorm_quant_params& p, simdnorm::quant_params* q) noexcept {
  q->scaling = simdnorm::quant_scaling(raw(p.scaling));
  q->block = p.block;
  q->scale = p.scale;
  q->zero_point = p.zero_point;
  q->row_amax = p.row_amax != 0;
  q->channel_scales = p.channel_scales;
  q->channel_zero_points = p.channel_zero_points;
}

simdnorm_quant_params c_quant(const simdnorm::quant_params& q) noexcept {
  return {simdnorm_quant_scaling(q.scaling),
          q.block,
          q.scale,
          q.zero_point,
          q.row_amax ? 1 : 0,
          q.channel_scales,
          q.channel_zero_points};
}

status check_quant_enum(const simdnorm_quant_params& q) noexcept {
  return check_enum(raw(q.scaling), SIMDNORM_QUANT_PER_CHANNEL, "quant.scaling");
}

// The row ops' store policy and stage, and the quantized-output scaling.
template <class CParams>
status check_row_enums(const CParams* p) noexcept {
  const status s = check_stores_and_stage(p);
  return s ? check_quant_enum(p->quant) : s;
}

// Converters from the C parameter structs; a null pointer means the C++ defaults.
status convert(const simdnorm_layer_norm_params* p, simdnorm::layer_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->normalized_ndim = p->normalized_ndim;
  q->eps = p->eps;
  q->compensated_mean = p->compensated_mean != 0;
  q->weight_offset = p->weight_offset;
  q->modulation_tokens = p->modulation_tokens;
  q->residual_after_norm = p->residual_after_norm != 0;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  convert_quant(p->quant, &q->quant);
  return check_row_enums(p);
}

status convert(const simdnorm_rms_norm_params* p, simdnorm::rms_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->normalized_ndim = p->normalized_ndim;
  q->eps = p->eps;
  q->weight_offset = p->weight_offset;
  q->modulation_tokens = p->modulation_tokens;
  q->gate_before_norm = p->gate_before_norm != 0;
  q->residual_after_norm = p->residual_after_norm != 0;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  convert_quant(p->quant, &q->quant);
  return check_row_enums(p);
}

status convert(const simdnorm_lp_norm_params* p, simdnorm::lp_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->axis = p->axis;
  q->p = p->p;
  q->eps = p->eps;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  return check_stores_and_stage(p);
}

status convert(const simdnorm_batch_norm_params* p, simdnorm::batch_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->layout = simdnorm::channel_layout(raw(p->layout));
  q->eps = p->eps;
  q->training = p->training != 0;
  q->fuse_relu = p->fuse_relu != 0;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->running_mean = p->running_mean;
  q->running_var = p->running_var;
  q->gamma = p->gamma;
  q->beta = p->beta;
  q->momentum = p->momentum;
  q->convention = simdnorm::momentum_convention(raw(p->convention));
  q->cumulative = p->cumulative != 0;
  q->stage = simdnorm::stats_stage(raw(p->stage));
  convert_quant(p->quant, &q->quant);
  status s = check_enum(raw(p->layout), SIMDNORM_NHWC, "layout");
  if (s) s = check_enum(raw(p->convention), SIMDNORM_MOMENTUM_ONNX, "convention");
  if (s) s = check_quant_enum(p->quant);
  return s ? check_stores_and_stage(p) : s;
}

status convert(const simdnorm_group_norm_params* p, simdnorm::group_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->num_groups = p->num_groups;
  q->layout = simdnorm::channel_layout(raw(p->layout));
  q->eps = p->eps;
  q->per_group_affine = p->per_group_affine != 0;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  convert_quant(p->quant, &q->quant);
  status s = check_enum(raw(p->layout), SIMDNORM_NHWC, "layout");
  if (s) s = check_quant_enum(p->quant);
  return s ? check_stores_and_stage(p) : s;
}

status convert(const simdnorm_instance_norm_params* p, simdnorm::instance_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->layout = simdnorm::channel_layout(raw(p->layout));
  q->eps = p->eps;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  convert_quant(p->quant, &q->quant);
  status s = check_enum(raw(p->layout), SIMDNORM_NHWC, "layout");
  if (s) s = check_quant_enum(p->quant);
  return s ? check_stores_and_stage(p) : s;
}

status convert(const simdnorm_mean_variance_norm_params* p,
               simdnorm::mean_variance_norm_params* q) noexcept {
  if (p == nullptr) return {};
  q->num_axes = p->num_axes;
  for (int i = 0; i < SIMDNORM_MAX_DIMS; ++i) q->axes[i] = p->axes[i];
  q->eps = p->eps;
  q->stores = simdnorm::store_policy(raw(p->stores));
  q->stage = simdnorm::stats_stage(raw(p->stage));
  return check_stores_and_stage(p);
}

// A host pool given as C callbacks, seen by the C++ plan as an executor.
class c_executor final : public simdnorm::executor {
 public:
  explicit c_executor(const simdnorm_executor& e) noexcept : e_(e) {}
  std::size_t concurrency() const noexcept override { return e_.concurrency; }
  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    e_.parallel_for(e_.user, n, task, ctx);
  }

 private:
  const simdnorm_executor& e_;
};

status check_executor(const simdnorm_executor* e) noexcept {
  if (e != nullptr && e->concurrency > 1 && e->parallel_for == nullptr)
    return status::error(status_code::invalid_argument,
                         "exec->parallel_for is null but exec->concurrency=%zu", e->concurrency);
  return {};
}

// Executes p with the C++ form of the C args struct `args` (CppArgs: simdnorm::norm_args or an
// op's args struct).
template <class CppArgs, class CArgs>
status execute(const simdnorm::plan& p, const CArgs* args, const simdnorm_executor* exec) {
  if (args == nullptr) return status::error(status_code::invalid_argument, "args is null");
  status s = check_executor(exec);
  if (!s) return s;
  CppArgs a;
  to_cpp(*args, &a);
  if (exec == nullptr) return p.execute(a, nullptr);
  c_executor e(*exec);
  return p.execute(a, &e);
}

template <class CppArgs, class CArgs>
simdnorm_status run(const char* fn, simdnorm_plan_t plan, const CArgs* args, size_t phase,
                    size_t begin, size_t end) {
  if (plan == nullptr)
    return record(status::error(status_code::invalid_argument, "%s: plan is null", fn));
  if (args == nullptr)
    return record(status::error(status_code::invalid_argument, "%s: args is null", fn));
  CppArgs a;
  to_cpp(*args, &a);
  return record(plan->p.run(a, phase, begin, end));
}

// Plan creation shared by the ops and their one-shot forms: convert the C arguments, make.
// `make` is one of simdnorm::plan's static makers; its parameter type names the C++ struct.
template <class CppParams>
using maker = status (*)(const simdnorm::tensor_desc&, const simdnorm::tensor_desc&,
                         const CppParams&, simdnorm::plan*) noexcept;

template <class CParams, class CppParams>
status make_plan(const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y,
                 const CParams* params, maker<CppParams> make, simdnorm::plan* p) noexcept {
  simdnorm::tensor_desc xd, yd;
  CppParams q;
  status s = to_desc(x, "x", &xd);
  if (s) s = to_desc(y, "y", &yd);
  if (s) s = convert(params, &q);
  return s ? make(xd, yd, q, p) : s;
}

template <class CParams, class CppParams>
simdnorm_status new_plan(const char* fn, const simdnorm_tensor_desc* x,
                         const simdnorm_tensor_desc* y, const CParams* params, simdnorm_plan_t* out,
                         maker<CppParams> make) noexcept {
  if (out == nullptr)
    return record(status::error(status_code::invalid_argument, "%s: out is null", fn));
  *out = nullptr;
  return guarded(fn, [&]() -> status {
    simdnorm::plan p;
    status s = make_plan(x, y, params, make, &p);
    if (!s) return s;
    *out = new (std::nothrow) simdnorm_plan{p};
    if (*out == nullptr)
      return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", fn);
    return {};
  });
}

template <class CppArgs, class CArgs, class CParams, class CppParams>
simdnorm_status one_shot(const char* fn, const simdnorm_tensor_desc* x,
                         const simdnorm_tensor_desc* y, const CParams* params, const CArgs* args,
                         const simdnorm_executor* exec, maker<CppParams> make) noexcept {
  return guarded(fn, [&]() -> status {
    simdnorm::plan p;
    status s = make_plan(x, y, params, make, &p);
    return s ? execute<CppArgs>(p, args, exec) : s;
  });
}

}  // namespace

extern "C" {

const char* simdnorm_status_string(simdnorm_status s) {
  return simdnorm::to_string(status_code(raw(s)));
}

const char* simdnorm_last_error_message(void) { return t_last_error; }

const char* simdnorm_isa_name(simdnorm_isa isa) {
  return valid_isa(raw(isa)) ? simdnorm::isa_name(simdnorm::isa(raw(isa))) : "unknown";
}

simdnorm_status simdnorm_isa_from_name(const char* name, simdnorm_isa* out) {
  if (name == nullptr || out == nullptr)
    return fail(status_code::invalid_argument, "simdnorm_isa_from_name: null argument");
  simdnorm::isa i;
  if (!simdnorm::isa_from_name(name, &i))
    return record(status::error(status_code::invalid_argument, "'%.40s' is not an ISA name", name));
  *out = simdnorm_isa(i);
  return SIMDNORM_OK;
}

int simdnorm_isa_lanes(simdnorm_isa isa) { return simdnorm::isa_lanes(simdnorm::isa(raw(isa))); }

int simdnorm_isa_has_fma(simdnorm_isa isa) {
  return simdnorm::isa_has_fma(simdnorm::isa(raw(isa)));
}

size_t simdnorm_compiled_isas(simdnorm_isa* out, size_t capacity) {
  std::size_t n = 0;
  const simdnorm::isa* all = simdnorm::compiled_isas(&n);
  for (std::size_t i = 0; out != nullptr && i < n && i < capacity; ++i)
    out[i] = simdnorm_isa(all[i]);
  return n;
}

int simdnorm_cpu_supports(simdnorm_isa isa) {
  return valid_isa(raw(isa)) && simdnorm::cpu_supports(simdnorm::isa(raw(isa))) ? 1 : 0;
}

simdnorm_isa simdnorm_active_isa(void) { return simdnorm_isa(simdnorm::active_isa()); }

simdnorm_status simdnorm_force_isa(simdnorm_isa isa) {
  if (!valid_isa(raw(isa)))
    return record(status::error(status_code::invalid_argument, "simdnorm_force_isa(%d): not an ISA",
                                raw(isa)));
  return record(simdnorm::force_isa(simdnorm::isa(raw(isa))));
}

void simdnorm_reset_isa(void) { simdnorm::reset_isa(); }

simdnorm_status simdnorm_convert(const void* x, simdnorm_dtype x_type, void* y,
                                 simdnorm_dtype y_type, size_t n) {
  return guarded("simdnorm_convert", [&] {
    return simdnorm::convert(x, simdnorm::dtype(raw(x_type)), y, simdnorm::dtype(raw(y_type)), n);
  });
}

simdnorm_status simdnorm_merge_moments(const simdnorm_moments* parts, size_t num_parts, size_t n,
                                       simdnorm_moments* out) {
  return guarded("simdnorm_merge_moments", [&] {
    return simdnorm::merge_moments(reinterpret_cast<const simdnorm::moments*>(parts), num_parts, n,
                                   reinterpret_cast<simdnorm::moments*>(out));
  });
}

simdnorm_status simdnorm_tensor_contiguous(simdnorm_tensor_desc* d, int32_t ndim,
                                           const int64_t* shape) {
  if (d == nullptr || shape == nullptr)
    return fail(status_code::invalid_argument, "simdnorm_tensor_contiguous: null argument");
  if (ndim < 1 || ndim > SIMDNORM_MAX_DIMS)
    return record(status::error(status_code::invalid_argument,
                                "simdnorm_tensor_contiguous: ndim=%d must be in [1, %d]", int(ndim),
                                SIMDNORM_MAX_DIMS));
  simdnorm_tensor_desc t{};
  t.ndim = ndim;
  t.type = SIMDNORM_DTYPE_F32;
  std::int64_t s = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = s;
    // wraps (unsigned) rather than overflow; a plan made from such a desc reports it
    s = std::int64_t(std::uint64_t(s) * std::uint64_t(shape[i]));
  }
  *d = t;
  return SIMDNORM_OK;
}

simdnorm_layer_norm_params simdnorm_layer_norm_params_default(void) {
  const simdnorm::layer_norm_params d;
  return {d.normalized_ndim,
          d.eps,
          d.compensated_mean ? 1 : 0,
          simdnorm_store_policy(d.stores),
          d.weight_offset,
          simdnorm_stats_stage(d.stage),
          c_quant(d.quant),
          d.modulation_tokens,
          int32_t(d.residual_after_norm)};
}

simdnorm_rms_norm_params simdnorm_rms_norm_params_default(void) {
  const simdnorm::rms_norm_params d;
  return {d.normalized_ndim,
          d.eps,
          simdnorm_store_policy(d.stores),
          d.weight_offset,
          simdnorm_stats_stage(d.stage),
          c_quant(d.quant),
          d.modulation_tokens,
          int32_t(d.gate_before_norm),
          int32_t(d.residual_after_norm)};
}

simdnorm_lp_norm_params simdnorm_lp_norm_params_default(void) {
  const simdnorm::lp_norm_params d;
  return {d.axis, d.p, d.eps, simdnorm_store_policy(d.stores), simdnorm_stats_stage(d.stage)};
}

simdnorm_batch_norm_params simdnorm_batch_norm_params_default(void) {
  const simdnorm::batch_norm_params d;
  simdnorm_batch_norm_params c;
  std::memset(&c, 0, sizeof c);
  c.layout = simdnorm_channel_layout(d.layout);
  c.eps = d.eps;
  c.training = d.training;
  c.fuse_relu = d.fuse_relu;
  c.stores = simdnorm_store_policy(d.stores);
  c.momentum = d.momentum;
  c.convention = simdnorm_momentum_convention(d.convention);
  c.cumulative = d.cumulative;
  c.stage = simdnorm_stats_stage(d.stage);
  c.quant = c_quant(d.quant);
  return c;
}

simdnorm_group_norm_params simdnorm_group_norm_params_default(void) {
  const simdnorm::group_norm_params d;
  return {d.num_groups,
          simdnorm_channel_layout(d.layout),
          d.eps,
          d.per_group_affine ? 1 : 0,
          simdnorm_store_policy(d.stores),
          simdnorm_stats_stage(d.stage),
          c_quant(d.quant)};
}

simdnorm_instance_norm_params simdnorm_instance_norm_params_default(void) {
  const simdnorm::instance_norm_params d;
  return {simdnorm_channel_layout(d.layout), d.eps, simdnorm_store_policy(d.stores),
          simdnorm_stats_stage(d.stage), c_quant(d.quant)};
}

simdnorm_mean_variance_norm_params simdnorm_mean_variance_norm_params_default(void) {
  const simdnorm::mean_variance_norm_params d;
  simdnorm_mean_variance_norm_params c;
  c.num_axes = d.num_axes;
  for (int i = 0; i < SIMDNORM_MAX_DIMS; ++i) c.axes[i] = d.axes[i];
  c.eps = d.eps;
  c.stores = simdnorm_store_policy(d.stores);
  c.stage = simdnorm_stats_stage(d.stage);
  return c;
}

// simdnorm_plan_<op>, simdnorm_<op>, simdnorm_plan_run_<op> and simdnorm_plan_execute_<op> for
// every op of simdnorm/op_list.h.
#define SIMDNORM_DEFINE_C_OP(op)                                                                   \
  simdnorm_status simdnorm_plan_##op(const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y, \
                                     const simdnorm_##op##_params* params, simdnorm_plan_t* out) { \
    return new_plan("simdnorm_plan_" #op, x, y, params, out, &simdnorm::plan::op);                 \
  }                                                                                                \
  simdnorm_status simdnorm_##op(const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y,      \
                                const simdnorm_##op##_params* params,                              \
                                const simdnorm_norm_args* args, const simdnorm_executor* exec) {   \
    return one_shot<simdnorm::op##_args>("simdnorm_" #op, x, y, params, args, exec,                \
                                         &simdnorm::plan::op);                                     \
  }                                                                                                \
  simdnorm_status simdnorm_##op##_ex(const simdnorm_tensor_desc* x, const simdnorm_tensor_desc* y, \
                                     const simdnorm_##op##_params* params,                         \
                                     const simdnorm_##op##_args* args,                             \
                                     const simdnorm_executor* exec) {                              \
    return one_shot<simdnorm::op##_args>("simdnorm_" #op "_ex", x, y, params, args, exec,          \
                                         &simdnorm::plan::op);                                     \
  }                                                                                                \
  simdnorm_status simdnorm_plan_run_##op(simdnorm_plan_t plan, const simdnorm_##op##_args* args,   \
                                         size_t phase, size_t begin, size_t end) {                 \
    return run<simdnorm::op##_args>("simdnorm_plan_run_" #op, plan, args, phase, begin, end);      \
  }                                                                                                \
  simdnorm_status simdnorm_plan_execute_##op(                                                      \
      simdnorm_plan_t plan, const simdnorm_##op##_args* args, const simdnorm_executor* exec) {     \
    if (plan == nullptr)                                                                           \
      return fail(status_code::invalid_argument, "simdnorm_plan_execute_" #op ": plan is null");   \
    return guarded("simdnorm_plan_execute_" #op,                                                   \
                   [&] { return execute<simdnorm::op##_args>(plan->p, args, exec); });             \
  }
SIMDNORM_OP_LIST(SIMDNORM_DEFINE_C_OP)
#undef SIMDNORM_DEFINE_C_OP

void simdnorm_plan_destroy(simdnorm_plan_t plan) { delete plan; }

simdnorm_isa simdnorm_plan_isa(simdnorm_plan_t plan) {
  return plan ? simdnorm_isa(plan->p.kernel_isa()) : SIMDNORM_ISA_SCALAR;
}
size_t simdnorm_plan_num_phases(simdnorm_plan_t plan) { return plan ? plan->p.num_phases() : 0; }
size_t simdnorm_plan_num_tasks(simdnorm_plan_t plan, size_t phase) {
  return plan ? plan->p.num_tasks(phase) : 0;
}
size_t simdnorm_plan_workspace_bytes(simdnorm_plan_t plan) {
  return plan ? plan->p.workspace_bytes() : 0;
}
size_t simdnorm_plan_rows(simdnorm_plan_t plan) { return plan ? plan->p.rows() : 0; }
size_t simdnorm_plan_row_length(simdnorm_plan_t plan) { return plan ? plan->p.row_length() : 0; }

simdnorm_status simdnorm_plan_run(simdnorm_plan_t plan, const simdnorm_norm_args* args,
                                  size_t phase, size_t begin, size_t end) {
  return run<simdnorm::norm_args>("simdnorm_plan_run", plan, args, phase, begin, end);
}

simdnorm_status simdnorm_plan_execute(simdnorm_plan_t plan, const simdnorm_norm_args* args,
                                      const simdnorm_executor* exec) {
  if (plan == nullptr)
    return fail(status_code::invalid_argument, "simdnorm_plan_execute: plan is null");
  return guarded("simdnorm_plan_execute",
                 [&] { return execute<simdnorm::norm_args>(plan->p, args, exec); });
}

}  // extern "C"
