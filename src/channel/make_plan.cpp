// Plan creation shared by the channel ops (see make_plan.hpp), and the checks of a plan's call
// arguments (channel_norm_plan::check_args).
#include "make_plan.hpp"

#include <algorithm>
#include <cfloat>
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
  if (dtype_size(y.type) == 1 && p->quant.empty())
    return status::error(status_code::unsupported_dtype,
                         "%s: y is %s; the channel ops write f32, bf16 or f16, or an 8-bit y with "
                         "static scales (batch_norm, group_norm and instance_norm: quant_params "
                         "per_tensor or per_channel)",
                         name, dtype_name(y.type));
  const kernel_table& kt = *p->kernels;
  const std::size_t xt = std::size_t(x.type), yt = std::size_t(y.type);
  p->ck = {kt.segment_moments[xt], kt.column_moments[xt], kt.plane_affine[xt][yt],
           kt.row_affine[xt][yt], kt.fold_units};
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
  if (dtype_size(x.type) == 1)
    return status::error(status_code::unsupported_dtype,
                         "%s: x is %s; the channel ops read f32, bf16 or f16 (8-bit types are "
                         "outputs)",
                         name, dtype_name(x.type));
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

status set_quant(channel_norm_plan& p, const quant_params& q, const tensor_desc& y, std::int64_t C,
                 bool relu) {
  const char* name = op_name(p.op);
  if (dtype_size(y.type) != 1) {
    if (q.scaling != quant_scaling::dynamic || q.block != 0 || q.row_amax || q.channel_scales ||
        q.channel_zero_points)
      return status::error(status_code::invalid_argument,
                           "%s: quant applies to an 8-bit y (i8, u8, f8e4m3fn), y is %s", name,
                           dtype_name(y.type));
    return {};
  }
  const bool per_channel = q.scaling == quant_scaling::per_channel;
  if (!per_channel && q.scaling != quant_scaling::per_tensor)
    return status::error(status_code::invalid_argument,
                         "%s: y %s needs static scales: quant.scaling per_tensor or per_channel "
                         "(dynamic scales are layer_norm's and rms_norm's)",
                         name, dtype_name(y.type));
  if (q.block != 0 || q.row_amax)
    return status::error(status_code::invalid_argument,
                         "%s: quant.block and quant.row_amax are the row ops' (layer_norm, "
                         "rms_norm)",
                         name);
  if (per_channel && q.channel_scales == nullptr)
    return status::error(status_code::invalid_argument,
                         "%s: quant.channel_scales is null: per_channel scaling reads C=%lld "
                         "scales there",
                         name, static_cast<long long>(C));
  const int lo = y.type == dtype::i8 ? -128 : 0;
  const int hi = y.type == dtype::i8 ? 127 : y.type == dtype::u8 ? 255 : 0;
  try {
    p.quant.resize(std::size_t(C));
  } catch (...) {
    return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", name);
  }
  for (std::int64_t c = 0; c < C; ++c) {
    const float scale = per_channel ? q.channel_scales[c] : q.scale;
    const int zp = !per_channel            ? q.zero_point
                   : q.channel_zero_points ? q.channel_zero_points[c]
                                           : 0;
    if (!(scale > 0.f && scale <= FLT_MAX) || !(1.f / scale <= FLT_MAX))
      return status::error(status_code::invalid_argument,
                           "%s: quant scale of channel %lld = %g must be finite, > 0 and have a "
                           "finite inverse",
                           name, static_cast<long long>(c), double(scale));
    if (zp < lo || zp > hi)
      return status::error(status_code::invalid_argument,
                           "%s: quant zero point of channel %lld = %d must be in [%d, %d] for y %s",
                           name, static_cast<long long>(c), zp, lo, hi, dtype_name(y.type));
    if (relu && c > 0 && double(zp) != p.quant[0].zero_point)
      return status::error(status_code::invalid_argument,
                           "%s: fuse_relu with y %s needs one zero point for all channels (the "
                           "ReLU is max(code, zero point)); channel 0 has %d, channel %lld %d",
                           name, dtype_name(y.type), int(p.quant[0].zero_point),
                           static_cast<long long>(c), zp);
    p.quant[std::size_t(c)] = {double(1.f / scale), double(zp)};
    if (c > 0 && (p.quant[std::size_t(c)].inv != p.quant[0].inv ||
                  p.quant[std::size_t(c)].zero_point != p.quant[0].zero_point))
      p.quant_varies = true;
  }
  return {};
}

bool streaming(store_policy sp, const tensor_desc& x, const tensor_desc& y) {
  std::size_t n = 1;
  for (int i = 0; i < x.ndim; ++i) n *= std::size_t(x.shape[i]);
  // The kernels stream whole vectors of floats: f32 y only, as the row ops.
  return y.type == dtype::f32 &&
         use_streaming_stores(sp, n * dtype_size(x.type), n * dtype_size(y.type));
}

}  // namespace simdnorm::detail::channel
