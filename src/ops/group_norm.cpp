// GroupNorm and InstanceNorm plans (InstanceNorm is GroupNorm with one channel per group):
// validation of the layout and the groups, and the kept dims (batch, channel) each unit spans.
#include "../channel/make_plan.hpp"

namespace simdnorm {
namespace detail::channel {
namespace {

status make_group_norm(const tensor_desc& x, const tensor_desc& y, channel_layout layout,
                       std::int64_t groups, bool per_group, float eps, store_policy stores,
                       stats_stage stage, const quant_params& quant, int min_ndim, op_id api_op,
                       plan* out) {
  const char* name = op_name(api_op);
  status s = common_checks(x, y, eps, stores, min_ndim, name, out);
  if (!s) return s;
  if (!(s = check_layout(layout, name))) return s;
  if (!(s = check_stage(stage, name))) return s;
  const int ca = layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.shape[ca];
  if (groups < 1 || C % groups != 0)
    return status::error(status_code::invalid_argument,
                         "group_norm: num_groups=%lld must be >= 1 and divide C=%lld",
                         static_cast<long long>(groups), static_cast<long long>(C));
  auto p = new_plan(api_op, ch_op::group_norm, &s);
  if (!p) return s;
  p->eps = eps;
  p->stage = stage;
  p->stream = streaming(stores, x, y);
  p->per_group_affine = per_group;
  if (!(s = set_quant(*p, quant, y, C, false))) return s;
  const int kd[2] = {0, ca};
  return make_channel_plan(x, y, std::move(p), kd, 2, C, C / groups, out);
}

}  // namespace
}  // namespace detail::channel

status plan::group_norm(const tensor_desc& x, const tensor_desc& y, const group_norm_params& params,
                        plan* out) noexcept {
  return detail::channel::make_group_norm(
      x, y, params.layout, params.num_groups, params.per_group_affine, params.eps, params.stores,
      params.stage, params.quant, 2, detail::op_id::group_norm, out);
}

status plan::instance_norm(const tensor_desc& x, const tensor_desc& y,
                           const instance_norm_params& params, plan* out) noexcept {
  // InstanceNorm is GroupNorm with one channel per group.
  const int ca = params.layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.ndim >= 2 && x.ndim <= max_dims ? x.shape[ca] : 1;
  return detail::channel::make_group_norm(x, y, params.layout, C, false, params.eps, params.stores,
                                          params.stage, params.quant, 3,
                                          detail::op_id::instance_norm, out);
}

}  // namespace simdnorm
