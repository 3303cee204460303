// Internal: plan creation shared by the channel ops (src/ops/batch_norm.cpp, group_norm.cpp,
// mean_variance_norm.cpp): the checks every channel op makes, and make_channel_plan, which
// turns an op's kept dims into the geometry and the schedule. An op file validates its own
// parameters, fills a plan from new_plan and hands it to make_channel_plan.
#pragma once
#include <cstdint>
#include <memory>

#include "channel_plan.hpp"

namespace simdnorm::detail::channel {

/// Checks out, x, y (same shape, at least `min_ndim` dims), eps and the store policy.
status common_checks(const tensor_desc& x, const tensor_desc& y, float eps, store_policy stores,
                     int min_ndim, const char* name, plan* out);

/// Checks that `s` is a known stats_stage.
status check_stage(stats_stage s, const char* name);

/// Checks that `l` is a known channel_layout.
status check_layout(channel_layout l, const char* name);

/// A new plan of the public op `api_op`, run as `op`, on the selected kernels, or null with *s
/// set.
std::shared_ptr<channel_norm_plan> new_plan(op_id api_op, ch_op op, status* s);

/// Checks the quantization parameters against y's type, the C channels and the fused ReLU, and
/// with an 8-bit y sets p.quant (the folded inverse scales and zero points); refuses them with
/// a float y.
status set_quant(channel_norm_plan& p, const quant_params& q, const tensor_desc& y, std::int64_t C,
                 bool relu);

/// Whether y is written with streaming stores under policy `sp` (y has x's shape; f32 y only).
bool streaming(store_policy sp, const tensor_desc& x, const tensor_desc& y);

/// Validation common to every channel op, then geometry and schedule; installs the plan in
/// *out. `kd`: kept dims in order; the other dims are reduced. `kept_channels`: C; `group`:
/// channels per unit.
status make_channel_plan(const tensor_desc& x, const tensor_desc& y,
                         std::shared_ptr<channel_norm_plan> p, const int* kd, int nk,
                         std::int64_t kept_channels, std::int64_t group, plan* out);

}  // namespace simdnorm::detail::channel
