// BatchNorm plans: inference (gamma, beta and the running statistics folded into one scale and
// shift per channel at creation) and the training-mode forward (batch statistics, running
// statistics updated in place). Validation of batch_norm_params; the rest is the channel plan.
#include "../channel/make_plan.hpp"

namespace simdnorm {
namespace detail::channel {
namespace {

status make_batch_norm(const tensor_desc& x, const tensor_desc& y, const batch_norm_params& bp,
                       plan* out) {
  const char* name = "batch_norm";
  status s = common_checks(x, y, bp.eps, bp.stores, 2, name, out);
  if (!s) return s;
  if (!(s = check_layout(bp.layout, name))) return s;
  if (!(s = check_stage(bp.stage, name))) return s;
  if (!bp.training && bp.stage != stats_stage::full)
    return status::error(status_code::invalid_argument,
                         "batch_norm: stats_stage %d needs a training plan (inference uses the "
                         "running statistics)",
                         int(bp.stage));
  const int ca = bp.layout == channel_layout::nchw ? 1 : x.ndim - 1;
  const std::int64_t C = x.shape[ca];
  std::int64_t numel = 1;
  for (int i = 0; i < x.ndim; ++i) numel *= x.shape[i];
  if (bp.training) {
    if (bp.running_mean || bp.running_var || bp.gamma || bp.beta)
      return status::error(status_code::invalid_argument,
                           "batch_norm: training plans take gamma, beta and the running statistics "
                           "in batch_norm_args; batch_norm_params' pointers are for inference");
    if (!(bp.momentum >= 0.f && bp.momentum <= 1.f))
      return status::error(status_code::invalid_argument,
                           "batch_norm: momentum=%g must be in [0, 1]", double(bp.momentum));
    if (bp.convention != momentum_convention::pytorch && bp.convention != momentum_convention::onnx)
      return status::error(status_code::invalid_argument,
                           "batch_norm: unknown momentum_convention %d", int(bp.convention));
    if (numel / C < 2 && bp.stage == stats_stage::full)  // staged: the merged count decides
      return status::error(status_code::invalid_argument,
                           "batch_norm: training needs more than 1 value per channel (got %lld "
                           "values for each of %lld channels)",
                           static_cast<long long>(numel / C), static_cast<long long>(C));
  } else {
    if (bp.running_mean == nullptr || bp.running_var == nullptr)
      return status::error(status_code::invalid_argument,
                           "batch_norm: inference needs batch_norm_params::running_mean and "
                           "running_var");
    for (std::int64_t c = 0; c < C; ++c)
      if (!(bp.running_var[c] >= 0.f))
        return status::error(status_code::invalid_argument,
                             "batch_norm: running_var[%lld]=%g must be >= 0",
                             static_cast<long long>(c), double(bp.running_var[c]));
  }
  auto p = new_plan(op_id::batch_norm, bp.training ? ch_op::bn_training : ch_op::bn_inference, &s);
  if (!p) return s;
  p->eps = bp.eps;
  p->stage = bp.stage;
  if (!(s = set_quant(*p, bp.quant, y, C, bp.fuse_relu))) return s;
  p->relu = bp.fuse_relu;
  // An 8-bit y's codes are y / scale + zp (folded): the ReLU is max(code, zp)
  p->relu_floor = p->quant.empty() ? 0.f : float(p->quant[0].zero_point);
  p->stream = streaming(bp.stores, x, y);
  p->running.momentum = double(bp.momentum);
  p->running.convention = bp.convention;
  p->running.cumulative = bp.cumulative;
  if (!bp.training) {
    try {
      p->folded.resize(std::size_t(2 * C));
    } catch (...) {
      return status::error(status_code::out_of_memory, "batch_norm: cannot allocate the plan");
    }
    for (std::int64_t c = 0; c < C; ++c)
      fold_inference(bp, c, p->quant_of(c), &p->folded[std::size_t(c)],
                     &p->folded[std::size_t(C + c)]);
  }
  const int kd[1] = {ca};
  return make_channel_plan(x, y, std::move(p), kd, 1, C, 1, out);
}

}  // namespace
}  // namespace detail::channel

status plan::batch_norm(const tensor_desc& x, const tensor_desc& y, const batch_norm_params& params,
                        plan* out) noexcept {
  return detail::channel::make_batch_norm(x, y, params, out);
}

}  // namespace simdnorm
