// LayerNorm in a transformer block: activations of shape (batch, tokens, embedding), normalized
// over the embedding in place, with learned gamma and beta, as in pre-LN blocks
// (h = x + attention(LN(x))). The plan is made once for the shape and reused every step; the
// per-token mean and 1/std come out too (what a training framework saves for the backward).
#include <simdnorm/simdnorm.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const std::int64_t batch = 4, tokens = 128, embedding = 768;
  const std::size_t n = std::size_t(batch * tokens * embedding);
  std::vector<float> h(n), gamma(embedding), beta(embedding);
  std::vector<float> mean(batch * tokens), rstd(batch * tokens);
  std::mt19937 rng(7);
  std::normal_distribution<float> act(0.5f, 3.f), w(1.f, 0.1f);
  for (float& v : h) v = act(rng);
  for (std::int64_t e = 0; e < embedding; ++e) gamma[e] = w(rng), beta[e] = 0.01f * float(e % 7);
  const std::vector<float> h0 = h;

  // Made once per shape: validation, task split and kernel choice happen here.
  const auto desc = simdnorm::tensor_desc::contiguous({batch, tokens, embedding});
  simdnorm::layer_norm_params params;  // normalized_ndim = 1 (the embedding), eps = 1e-5
  simdnorm::plan ln;
  simdnorm::status s = simdnorm::plan::layer_norm(desc, desc, params, &ln);
  if (!s) return std::fprintf(stderr, "plan: %s\n", s.message()), 1;

  simdnorm::norm_args args;
  args.x = h.data();
  args.y = h.data();  // in place: y aliases x exactly
  args.gamma = gamma.data();
  args.beta = beta.data();
  args.mean = mean.data();
  args.rstd = rstd.data();
  const auto t0 = std::chrono::steady_clock::now();
  s = ln.execute(args);  // default executor: oneTBB in the caller's arena (or serial)
  const auto t1 = std::chrono::steady_clock::now();
  if (!s) return std::fprintf(stderr, "execute: %s\n", s.message()), 1;

  // Check one token in float64: y = (x - mean) / sqrt(var + eps) * gamma + beta.
  const std::int64_t tok = 3 * tokens + 17;
  const float* x0 = &h0[std::size_t(tok * embedding)];
  double m = 0, v = 0, err = 0;
  for (std::int64_t e = 0; e < embedding; ++e) m += x0[e];
  m /= double(embedding);
  for (std::int64_t e = 0; e < embedding; ++e) v += (x0[e] - m) * (x0[e] - m);
  const double r = 1 / std::sqrt(v / double(embedding) + params.eps);
  for (std::int64_t e = 0; e < embedding; ++e) {
    // a plain compare, not std::fmax: aarch64 g++ 12 -O3 crashes vectorizing that reduction
    const double d =
        std::fabs((x0[e] - m) * r * gamma[e] + beta[e] - h[std::size_t(tok * embedding + e)]);
    if (!(d <= err)) err = d;  // NaN counts as an error
  }
  const bool ok =
      err < 1e-4 && std::fabs(mean[tok] - m) < 1e-4 && std::fabs(rstd[tok] - r) < 1e-4 * r;
  std::printf(
      "transformer_layer_norm: (%lld, %lld, %lld) in place on %s in %.3f ms, %zu tasks; "
      "token %lld max |err| = %.2g %s\n",
      static_cast<long long>(batch), static_cast<long long>(tokens),
      static_cast<long long>(embedding), simdnorm::isa_name(ln.kernel_isa()),
      std::chrono::duration<double, std::milli>(t1 - t0).count(), ln.num_tasks(),
      static_cast<long long>(tok), err, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
