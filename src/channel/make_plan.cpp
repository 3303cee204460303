// Plan creation shared by the channel ops (see make_plan.hpp), and the checks of a plan's call
// arguments (channel_norm_plan::check_args).
#include "make_plan.hpp"

#include <algorithm>
#include <cstdint>

namespace simdnorm::detail::channel {
namespace {

status check_stores(store_policy s, const char* name) {
  if (s != store_policy::automatic && s != store_policy::regular && s != store_policy::streaming)
    return status::error(status_code::invalid_argument, "%s: unknown store_policy %d", name,
                         int(s));
  return {};
}

}  // namespace

status channel_norm_plan::check_args(const call_args& a) const noexcept {
  const char* name = op_name(op);
  if (a.x == nullptr) return status::error(status_code::invalid_argument, "args.x is null");
  if (stage == stats_stage::moments) {  // reads x, writes the records, nothing else
    if (a.moments_out == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.moments_out is null: a %s plan of stats_stage::moments writes "
                           "one record per statistics group there",
                           name);
    return {};
  }
  if (a.y == nullptr) return status::error(status_code::invalid_argument, "args.y is null");
  if (stage == stats_stage::apply) {
    if (a.moments_in == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.moments_in is null: a %s plan of stats_stage::apply reads one "
                           "record per statistics group there",
                           name);
    // BatchNorm's unbiased running variance divides by count - 1.
    const std::int64_t min_count = op == ch_op::bn_training ? 2 : 1;
    for (std::size_t q = 0; q < units_total; ++q) {
      const moments& m = a.moments_in[q];
      if (m.kind != moments_kind::centered)
        return status::error(status_code::invalid_argument,
                             "args.moments_in[%zu].kind=%d: %s needs centered moments (%d)", q,
                             int(m.kind), name, int(moments_kind::centered));
      if (m.count < min_count)
        return status::error(status_code::invalid_argument,
                             "args.moments_in[%zu].count=%lld: %s needs at least %lld values", q,
                             static_cast<long long>(m.count), name,
                             static_cast<long long>(min_count));
    }
  }
  if (op == ch_op::bn_inference) {
    if (a.gamma || a.beta || a.running_mean || a.running_var)
      return status::error(status_code::invalid_argument,
                           "batch_norm: an inference plan folds gamma, beta and the running "
                           "statistics at creation (batch_norm_params); args must not carry them");
    if (a.mean || a.rstd || a.num_batches_tracked)
      return status::error(status_code::invalid_argument,
                           "batch_norm: args.mean, args.rstd and args.num_batches_tracked are "
                           "training-mode outputs");
  } else if (op == ch_op::bn_training) {
    if ((a.running_mean == nullptr) != (a.running_var == nullptr))
      return status::error(status_code::invalid_argument,
                           "batch_norm: args.running_mean and args.running_var go together");
    if (running.cumulative && a.running_mean && a.num_batches_tracked == nullptr)
      return status::error(status_code::invalid_argument,
                           "batch_norm: cumulative averaging needs args.num_batches_tracked");
    if (running.cumulative && a.num_batches_tracked && *a.num_batches_tracked < 0)
      return status::error(status_code::invalid_argument,
                           "batch_norm: *args.num_batches_tracked=%lld must be >= 0",
                           static_cast<long long>(*a.num_batches_tracked));
    // The counter is incremented after the run; at INT64_MAX that would overflow.
    if (a.num_batches_tracked && *a.num_batches_tracked == INT64_MAX)
      return status::error(status_code::invalid_argument,
                           "batch_norm: *args.num_batches_tracked=%lld cannot be incremented",
                           static_cast<long long>(*a.num_batches_tracked));
  } else {
    if (a.running_mean || a.running_var || a.num_batches_tracked)
      return status::error(status_code::invalid_argument,
                           "%s: args.running_mean, running_var and num_batches_tracked are "
                           "BatchNorm training arguments",
                           name);
    if (op == ch_op::mean_variance_norm && (a.gamma || a.beta || a.mean || a.rstd))
      return status::error(status_code::invalid_argument,
                           "mean_variance_norm: no gamma, beta, mean or rstd (x and y only)");
  }
  return check_aliasing(a.x, x_span, a.y, y_span, same_strides);
}

status make_channel_plan(const tensor_desc& x, const tensor_desc& y,
                         std::shared_ptr<channel_norm_plan> p, const int* kd, int nk,
                         std::int64_t kept_channels, std::int64_t group, plan* out) {
  const char* name = op_name(p->op);
  if (dtype_size(x.type) == 1 || dtype_size(y.type) == 1)
    return status::error(status_code::unsupported_dtype,
                         "%s: x is %s and y is %s; the channel ops take f32, bf16 or f16 (the "
                         "8-bit types are outputs of layer_norm and rms_norm)",
                         name, dtype_name(x.type), dtype_name(y.type));
  const kernel_table& kt = *p->kernels;
  const std::size_t xt = std::size_t(x.type), yt = std::size_t(y.type);
  p->ck = {kt.segment_moments[xt], kt.column_moments[xt], kt.plane_affine[xt][yt],
           kt.row_affine[xt][yt]};
  if (p->ck.plane_affine == nullptr)
    return status::error(status_code::unsupported_dtype,
                         "%s: x %s, y %s: this build has f32 channel kernels only "
                         "(SIMDNORM_ALL_DTYPES=OFF)",
                         name, dtype_name(x.type), dtype_name(y.type));
  p->x_elem = std::int64_t(dtype_size(x.type));
  p->y_elem = std::int64_t(dtype_size(y.type));
  p->kept_channels = kept_channels;
  int rd[max_dims], nr = 0;
  for (int d = 0; d < x.ndim; ++d)
    if (std::find(kd, kd + nk, d) == kd + nk) rd[nr++] = d;
  if (!make_geometry(x, y, kd, nk, rd, nr, group, &p->g))
    return status::error(status_code::unsupported_layout,
                         "%s: unsupported strides: the reduced dims must merge into a dense "
                         "innermost run (plus at most one strided run), or the channels must be "
                         "dense with the other dims merging into one strided run of rows",
                         name);
  if (!elements_disjoint(y))
    return status::error(status_code::unsupported_layout, "%s: y's strides make elements overlap",
                         name);
  p->same_strides = x.type == y.type;  // in place needs the same type
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != 1 && x.strides[i] != y.strides[i]) p->same_strides = false;
  p->x_span = span_bytes(x);
  p->y_span = span_bytes(y);
  const channel_geometry& g = p->g;
  if (g.columns) {
    p->units_total = std::size_t(g.B * (g.C / g.group));
    p->unit_elements = std::size_t(g.R * g.group);
  } else {
    p->units_total = std::size_t(g.B * g.U);
    p->unit_elements = std::size_t(g.nseg * g.len);
  }
  p->rows = p->units_total;
  p->cols = p->unit_elements;
  try {
    schedule(*p);
  } catch (...) {
    return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", name);
  }
  plan_access::set(out, std::move(p));
  return {};
}

status check_stage(stats_stage s, const char* name) {
  if (s != stats_stage::full && s != stats_stage::moments && s != stats_stage::apply)
    return status::error(status_code::invalid_argument, "%s: unknown stats_stage %d", name, int(s));
  return {};
}

status common_checks(const tensor_desc& x, const tensor_desc& y, float eps, store_policy stores,
                     int min_ndim, const char* name, plan* out) {
  if (out == nullptr) return status::error(status_code::invalid_argument, "%s: out is null", name);
  status s = check_tensor(x, "x");
  if (!s) return s;
  if (!(s = check_tensor(y, "y"))) return s;
  if (!(s = check_same_shape(x, y))) return s;
  if (x.ndim < min_ndim)
    return status::error(status_code::invalid_argument, "%s: x.ndim=%d must be at least %d", name,
                         x.ndim, min_ndim);
  if (!(s = check_eps(eps))) return s;
  return check_stores(stores, name);
}

status check_layout(channel_layout l, const char* name) {
  if (l != channel_layout::nchw && l != channel_layout::nhwc)
    return status::error(status_code::invalid_argument, "%s: unknown channel_layout %d", name,
                         int(l));
  return {};
}

std::shared_ptr<channel_norm_plan> new_plan(op_id api_op, ch_op op, status* s) {
  std::shared_ptr<channel_norm_plan> p;
  const kernel_table* kt = selected_table(s);
  if (kt == nullptr) return p;
  try {
    p = std::make_shared<channel_norm_plan>();
  } catch (...) {
    *s = status::error(status_code::out_of_memory, "%s: cannot allocate the plan", op_name(op));
    return p;
  }
  p->kernels = kt;
  p->op_kind = api_op;
  p->op = op;
  return p;
}

bool streaming(store_policy sp, const tensor_desc& x, const tensor_desc& y) {
  std::size_t n = 1;
  for (int i = 0; i < x.ndim; ++i) n *= std::size_t(x.shape[i]);
  // The kernels stream whole vectors of floats: f32 y only, as the row ops.
  return y.type == dtype::f32 &&
         use_streaming_stores(sp, n * dtype_size(x.type), n * dtype_size(y.type));
}

}  // namespace simdnorm::detail::channel
