// BatchNorm for a CNN layer (NCHW), both ways a framework uses it:
//   inference: the running statistics, gamma and beta are folded into one scale and shift per
//              channel when the plan is made (y = max(x * scale + shift, 0) with the fused ReLU);
//   training:  the batch statistics normalize the batch, and the running statistics are
//              updated in place (PyTorch's rule, momentum 0.1, unbiased variance).
// After a few training steps, an inference plan is made from the updated running statistics.
#include <simdnorm/simdnorm.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

const std::int64_t N = 8, C = 32, H = 14, W = 14, HW = H * W;

// Batch mean and biased variance of channel c, in float64.
void channel_moments(const std::vector<float>& x, std::int64_t c, double* mean, double* var) {
  double s = 0, q = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t i = 0; i < HW; ++i) s += x[std::size_t((n * C + c) * HW + i)];
  *mean = s / double(N * HW);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t i = 0; i < HW; ++i) {
      const double d = x[std::size_t((n * C + c) * HW + i)] - *mean;
      q += d * d;
    }
  *var = q / double(N * HW);
}

}  // namespace

int main() {
  const auto desc = simdnorm::tensor_desc::contiguous({N, C, H, W});
  std::vector<float> x(std::size_t(N * C * HW)), y(x.size());
  std::vector<float> gamma(C), beta(C), running_mean(C, 0.f), running_var(C, 1.f);
  std::mt19937 rng(3);
  for (std::int64_t c = 0; c < C; ++c)
    gamma[c] = 1.f + 0.01f * float(c), beta[c] = -0.1f * float(c % 3);
  std::int64_t batches = 0;
  bool ok = true;

  // ---- Training: three steps, each on a new batch (conv outputs with per-channel offsets).
  simdnorm::batch_norm_params train;
  train.training = true;  // momentum 0.1, PyTorch convention (the defaults)
  simdnorm::plan step;
  simdnorm::status s = simdnorm::plan::batch_norm(desc, desc, train, &step);
  if (!s) return std::fprintf(stderr, "plan: %s\n", s.message()), 1;
  std::vector<float> saved_mean(C), saved_rstd(C);
  for (int it = 0; it < 3 && ok; ++it) {
    std::normal_distribution<float> dist(0.f, 2.f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = dist(rng) + float(i / HW % C) * 0.5f;
    const std::vector<float> old_mean = running_mean, old_var = running_var;
    simdnorm::batch_norm_args a;
    a.x = x.data();
    a.y = y.data();
    a.gamma = gamma.data();
    a.beta = beta.data();
    a.mean = saved_mean.data();  // saved for the backward pass
    a.rstd = saved_rstd.data();
    a.running_mean = running_mean.data();
    a.running_var = running_var.data();
    a.num_batches_tracked = &batches;
    s = step.execute(a);
    if (!s) return std::fprintf(stderr, "train: %s\n", s.message()), 1;
    for (std::int64_t c = 0; c < C; ++c) {  // check the update rule in float64
      double m, v;
      channel_moments(x, c, &m, &v);
      const double unbiased = v * double(N * HW) / double(N * HW - 1);
      ok &= std::fabs(running_mean[c] - (0.9 * old_mean[c] + 0.1 * m)) < 1e-4;
      ok &= std::fabs(running_var[c] - (0.9 * old_var[c] + 0.1 * unbiased)) < 1e-4 * (1 + unbiased);
      ok &= std::fabs(saved_mean[c] - m) < 1e-4 &&
            std::fabs(saved_rstd[c] * std::sqrt(v + train.eps) - 1) < 1e-4;
    }
  }
  std::printf("batch_norm: %lld training steps, running_mean[5] = %.4f, running_var[5] = %.4f\n",
              static_cast<long long>(batches), double(running_mean[5]), double(running_var[5]));
  ok &= batches == 3;

  // ---- Inference: fold the running statistics into the plan, with the ReLU fused.
  simdnorm::batch_norm_params infer;
  infer.running_mean = running_mean.data();  // read only while the plan is made
  infer.running_var = running_var.data();
  infer.gamma = gamma.data();
  infer.beta = beta.data();
  infer.fuse_relu = true;
  simdnorm::plan eval;
  s = simdnorm::plan::batch_norm(desc, desc, infer, &eval);
  if (!s) return std::fprintf(stderr, "plan: %s\n", s.message()), 1;
  simdnorm::norm_args a;
  a.x = x.data();
  a.y = x.data();  // in place, as after a convolution
  const std::vector<float> x0 = x;
  s = eval.execute(a);
  if (!s) return std::fprintf(stderr, "inference: %s\n", s.message()), 1;
  double err = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i / HW % C;
    const double want = std::fmax(
        (x0[i] - running_mean[c]) / std::sqrt(running_var[c] + double(infer.eps)) * gamma[c] +
            beta[c],
        0.0);
    err = std::fmax(err, std::fabs(want - x[i]));
  }
  ok &= err < 1e-4;
  std::printf(
      "batch_norm: folded inference + ReLU on (%lld, %lld, %lld, %lld), %s, max |err| = %.2g %s\n",
      static_cast<long long>(N), static_cast<long long>(C), static_cast<long long>(H),
      static_cast<long long>(W), simdnorm::isa_name(eval.kernel_isa()), err, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
