// MeanVarianceNormalization plans: validation of the axes; the dims not in `axes` are kept,
// and each index of them is a unit normalized over the axes.
#include "../channel/make_plan.hpp"

namespace simdnorm {
namespace detail::channel {
namespace {

status make_mvn(const tensor_desc& x, const tensor_desc& y, const mean_variance_norm_params& mp,
                plan* out) {
  const char* name = "mean_variance_norm";
  status s = common_checks(x, y, mp.eps, mp.stores, 1, name, out);
  if (!s) return s;
  if (!(s = check_stage(mp.stage, name))) return s;
  if (mp.num_axes < 1 || mp.num_axes > x.ndim)
    return status::error(status_code::invalid_argument,
                         "mean_variance_norm: num_axes=%d must be in [1, ndim=%d]", mp.num_axes,
                         x.ndim);
  bool reduced[max_dims] = {};
  for (int i = 0; i < mp.num_axes; ++i) {
    const int a = mp.axes[i];
    if (a < -x.ndim || a >= x.ndim)
      return status::error(status_code::invalid_argument,
                           "mean_variance_norm: axes[%d]=%d is outside [-%d, %d)", i, a, x.ndim,
                           x.ndim);
    const int d = a < 0 ? a + x.ndim : a;
    if (reduced[d])
      return status::error(status_code::invalid_argument,
                           "mean_variance_norm: axis %d appears twice", d);
    reduced[d] = true;
  }
  auto p = new_plan(op_id::mean_variance_norm, ch_op::mean_variance_norm, &s);
  if (!p) return s;
  p->eps = mp.eps;
  p->stage = mp.stage;
  p->stream = streaming(mp.stores, x, y);
  int kd[max_dims], nk = 0;
  std::int64_t kept = 1;
  for (int d = 0; d < x.ndim; ++d)
    if (!reduced[d]) kd[nk++] = d, kept *= x.shape[d];
  return make_channel_plan(x, y, std::move(p), kd, nk, kept, 1, out);
}

}  // namespace
}  // namespace detail::channel

status plan::mean_variance_norm(const tensor_desc& x, const tensor_desc& y,
                                const mean_variance_norm_params& params, plan* out) noexcept {
  return detail::channel::make_mvn(x, y, params, out);
}

}  // namespace simdnorm
