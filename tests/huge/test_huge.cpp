// Huge shapes: counts beyond 2^24 and tensors beyond 2^31 elements.
//
// What it pins: a LayerNorm or RMSNorm row of more than 2^24 elements and a BatchNorm channel
// of more than 2^24 values (NCHW and NHWC) keep an exact element count (a float count stops
// at 2^24, and a float loop counter would skip elements from there); a tensor of more than
// 2^31 floats is indexed in 64 bits (rows past element 2^31 are read and written where they
// are). The statistics are checked against closed forms in double: a row or channel of zeros
// with one value b at its very end has mean b / n and biased variance b^2 (n - 1) / n^2. A
// float counter that stops at 2^24 is off by 17 or more here, which moves rstd and the
// outputs by several float ulp (a float count rounded once is off by at most half an ulp,
// invisible in float outputs; the code review covers that).
// Why: these sizes are real (long-context LayerNorm rows, BatchNorm over large batches of
// images) but far too big for the regular suite. Not in the default ctest run: the `huge`
// entry exists only with -DSIMDNORM_HUGE_TESTS=ON; scripts/huge.sh builds and runs it once.
// The 2^31 case needs 8 GiB and skips itself when less than 12 GiB of memory is free.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "simdnorm/simdnorm.hpp"

namespace {

using simdnorm::plan;
using simdnorm::tensor_desc;

constexpr std::int64_t k2p24 = std::int64_t(1) << 24;
constexpr std::int64_t k2p31 = std::int64_t(1) << 31;
constexpr float kSentinel = -12345.678f;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// |got - want| within `ulps` float ulps of want (relative).
bool close_ulps(double got, double want, double ulps) {
  return std::fabs(got - want) <= ulps * std::ldexp(std::fabs(want), -23);
}

#define CHECK_ULPS(got, want, ulps)                                                             \
  CHECK_MESSAGE(close_ulps(double(got), double(want), ulps),                                    \
                #got << " = " << double(got) << ", closed form " << double(want) << " ("        \
                     << (double(got) - double(want)) / std::ldexp(std::fabs(double(want)), -23) \
                     << " ulp)")

/// Float storage that is not touched (no page is faulted in) until it is written.
struct floats {
  std::unique_ptr<float, void (*)(void*)> p{nullptr, &std::free};
  explicit floats(std::size_t n) {
    p.reset(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)));
    REQUIRE(p != nullptr);
  }
  float* get() const { return p.get(); }
};

TEST_CASE("huge: LayerNorm and RMSNorm of one row of 2^24 + 17 elements") {
  const std::int64_t n = k2p24 + 17;
  const double b = 1024.0, dn = double(n);
  std::vector<float> x(std::size_t(n), 0.f), y(std::size_t(n), kSentinel);
  x.back() = float(b);  // the last element, past index 2^24
  const tensor_desc d = tensor_desc::contiguous({1, n});
  const auto t0 = std::chrono::steady_clock::now();

  SUBCASE("layer_norm") {
    simdnorm::layer_norm_params prm;
    prm.eps = 0.f;
    plan p;
    REQUIRE(plan::layer_norm(d, d, prm, &p).ok());
    REQUIRE(p.row_length() == std::size_t(n));
    float mean = kSentinel, rstd = kSentinel;
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    a.mean = &mean;
    a.rstd = &rstd;
    REQUIRE(p.execute(a).ok());
    // mean = b / n, var = b^2 (n - 1) / n^2: rstd = n / (b sqrt(n - 1)); y = -1 / sqrt(n - 1)
    // for the zeros and sqrt(n - 1) for b.
    CHECK_ULPS(mean, b / dn, 1);
    CHECK_ULPS(rstd, dn / (b * std::sqrt(dn - 1)), 1);
    for (std::int64_t i : {std::int64_t(0), k2p24 - 1, k2p24, k2p24 + 15, n - 2})
      CHECK_ULPS(y[std::size_t(i)], -1.0 / std::sqrt(dn - 1), 4);
    CHECK_ULPS(y.back(), std::sqrt(dn - 1), 4);
  }
  SUBCASE("rms_norm") {
    simdnorm::rms_norm_params prm;
    prm.eps = 0.f;
    plan p;
    REQUIRE(plan::rms_norm(d, d, prm, &p).ok());
    float rstd = kSentinel;
    simdnorm::norm_args a;
    a.x = x.data();
    a.y = y.data();
    a.rstd = &rstd;
    REQUIRE(p.execute(a).ok());
    // mean(x^2) = b^2 / n: rstd = sqrt(n) / b, y = sqrt(n) for b and 0 elsewhere.
    CHECK_ULPS(rstd, std::sqrt(dn) / b, 1);
    CHECK_ULPS(y.back(), std::sqrt(dn), 2);
    CHECK(y[std::size_t(k2p24)] == 0.f);
    CHECK(y[0] == 0.f);
  }
  MESSAGE("row of 2^24 + 17: " << seconds_since(t0) << " s");
}

/// BatchNorm training over channels of N * H * W > 2^24 values: every channel is zeros but
/// for b_c at its last position (n = N - 1, h = H - 1, w = W - 1).
void batch_norm_huge_channel(simdnorm::channel_layout layout) {
  const std::int64_t N = 3, C = 2, H = 2049, W = 2731;
  const std::int64_t m = N * H * W;  // 16787457 = 2^24 + 10241 values per channel
  REQUIRE(m > k2p24);
  const bool nhwc = layout == simdnorm::channel_layout::nhwc;
  const std::size_t total = std::size_t(N * C * H * W);
  std::vector<float> x(total, 0.f), y(total, kSentinel);
  const auto index = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    return std::size_t(nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w);
  };
  const double b[2] = {512.0, -2048.0};
  for (std::int64_t c = 0; c < C; ++c) x[index(N - 1, c, H - 1, W - 1)] = float(b[c]);
  const tensor_desc d =
      nhwc ? tensor_desc::contiguous({N, H, W, C}) : tensor_desc::contiguous({N, C, H, W});
  simdnorm::batch_norm_params prm;
  prm.layout = layout;
  prm.training = true;
  prm.eps = 0.f;
  prm.momentum = 1.f;  // running = batch statistics (unbiased variance)
  plan p;
  REQUIRE(plan::batch_norm(d, d, prm, &p).ok());
  REQUIRE(p.row_length() == std::size_t(m));
  std::vector<float> mean(2, kSentinel), rstd(2, kSentinel), rmean(2, 0.f), rvar(2, 1.f);
  simdnorm::batch_norm_args a;
  a.x = x.data();
  a.y = y.data();
  a.mean = mean.data();
  a.rstd = rstd.data();
  a.running_mean = rmean.data();
  a.running_var = rvar.data();
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.execute(a).ok());
  const double dm = double(m);
  for (std::int64_t c = 0; c < C; ++c) {
    INFO("channel " << c);
    // mean b / m, biased var b^2 (m - 1) / m^2, unbiased b^2 / m.
    CHECK_ULPS(mean[c], b[c] / dm, 1);
    CHECK_ULPS(rstd[c], dm / (std::fabs(b[c]) * std::sqrt(dm - 1)), 1);
    CHECK_ULPS(rmean[c], b[c] / dm, 1);
    CHECK_ULPS(rvar[c], b[c] * b[c] / dm, 2);
    // y: -sign(b) / sqrt(m - 1) for the zeros, sign(b) sqrt(m - 1) for b; values of the first
    // and last batch items, the last ones past value 2^24 of the channel.
    const double sign = b[c] < 0 ? -1.0 : 1.0;
    for (std::int64_t n : {std::int64_t(0), N - 1})
      for (std::int64_t h : {std::int64_t(0), H / 2, H - 1})
        CHECK_ULPS(y[index(n, c, h, 0)], -sign / std::sqrt(dm - 1), 8);
    CHECK_ULPS(y[index(N - 1, c, H - 1, W - 2)], -sign / std::sqrt(dm - 1), 8);
    CHECK_ULPS(y[index(N - 1, c, H - 1, W - 1)], sign * std::sqrt(dm - 1), 8);
  }
  MESSAGE((nhwc ? "nhwc" : "nchw")
          << " channels of " << m << " values: " << seconds_since(t0) << " s");
}

TEST_CASE("huge: BatchNorm training with channels of more than 2^24 values, NCHW") {
  batch_norm_huge_channel(simdnorm::channel_layout::nchw);
}

TEST_CASE("huge: BatchNorm training with channels of more than 2^24 values, NHWC") {
  batch_norm_huge_channel(simdnorm::channel_layout::nhwc);
}

/// Input of the 2^31 test, element j of row r, from the indices alone: each row has its own
/// mean and scale around a hashed uniform value in [-1, 1).
inline float huge_input(std::int64_t r, std::int64_t j, std::int64_t cols) {
  std::uint64_t z = std::uint64_t(r * cols + j) + 0x9e3779b97f4a7c15u;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  z ^= z >> 31;
  const float u = float(z >> 40) * (1.f / 8388608.f) - 1.f;
  return float(r % 7) * 3.f - 5.f + (1.f + float(r % 5) * 0.5f) * u;
}

TEST_CASE("huge: LayerNorm and RMSNorm over a tensor of more than 2^31 floats") {
  const std::int64_t cols = 4096, rows = k2p31 / cols + 1;  // the last row lies past 2^31
  const std::size_t total = std::size_t(rows * cols);       // 2^31 + 4096 floats, 8 GiB
  const double free_bytes = double(sysconf(_SC_AVPHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (free_bytes < 12.0 * (1 << 30)) {
    MESSAGE("skipped: " << free_bytes / (1 << 30) << " GiB of memory free, the test needs 12");
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  floats x(total);  // y == x: in place, one 8 GiB buffer
  {
    const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> fill;
    for (unsigned t = 0; t < nt; ++t)
      fill.emplace_back([&, t] {
        for (std::int64_t r = rows * t / nt; r < rows * (t + 1) / nt; ++r) {
          float* xr = x.get() + std::size_t(r * cols);
          for (std::int64_t j = 0; j < cols; ++j) xr[j] = huge_input(r, j, cols);
        }
      });
    for (std::thread& th : fill) th.join();
  }
  MESSAGE("fill " << total << " floats: " << seconds_since(t0) << " s");

  // Sampled rows: the first, around the middle, both sides of element 2^31, the last.
  const std::int64_t sample[] = {0, 1, rows / 2, k2p31 / cols - 2, k2p31 / cols - 1, rows - 1};
  const tensor_desc d = tensor_desc::contiguous({rows, cols});
  std::vector<float> mean(std::size_t(rows), kSentinel), rstd(std::size_t(rows), kSentinel);
  simdnorm::layer_norm_params ln;
  plan p;
  REQUIRE(plan::layer_norm(d, d, ln, &p).ok());
  simdnorm::norm_args a;
  a.x = x.get();
  a.y = x.get();
  a.mean = mean.data();
  a.rstd = rstd.data();
  t0 = std::chrono::steady_clock::now();
  REQUIRE(p.execute(a).ok());
  const double ln_s = seconds_since(t0);
  MESSAGE("layer_norm [" << rows << ", " << cols << "] in place: " << ln_s << " s, "
                         << 2 * double(total) * sizeof(float) / ln_s / 1e9 << " GB/s");

  std::vector<std::vector<float>> ln_rows;  // the LayerNorm outputs of the sampled rows
  double worst = 0;
  for (std::int64_t r : sample) {
    INFO("row " << r);
    double s = 0, q = 0;
    for (std::int64_t j = 0; j < cols; ++j) s += huge_input(r, j, cols);
    const double mu = s / double(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double dv = huge_input(r, j, cols) - mu;
      q += dv * dv;
    }
    const double rs = 1.0 / std::sqrt(q / double(cols) + double(ln.eps));
    CHECK(std::fabs(mean[std::size_t(r)] - mu) <= 1e-6 * (1 + std::fabs(mu)));
    CHECK_ULPS(rstd[std::size_t(r)], rs, 8);
    const float* yr = x.get() + std::size_t(r * cols);
    double err = 0;
    for (std::int64_t j = 0; j < cols; ++j)
      err = std::max(err, std::fabs(yr[j] - (huge_input(r, j, cols) - mu) * rs));
    CHECK(err <= 1e-5);
    worst = std::max(worst, err);
    ln_rows.emplace_back(yr, yr + cols);
  }
  MESSAGE("layer_norm: largest error of the sampled rows " << worst);
  // Every row was normalized: its mean and rstd are those of its distribution (offset
  // 3 (r % 7) - 5, uniform of half-width 1 + (r % 5) / 2, so sd = half-width / sqrt(3)) to
  // within 6 standard errors of a 4096-value sample.
  std::int64_t off_rows = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double mu = double(r % 7) * 3 - 5, sd = (1 + double(r % 5) * 0.5) / std::sqrt(3.0);
    const std::size_t k = std::size_t(r);
    if (!(std::fabs(mean[k] - mu) < 6 * sd / 64 && std::fabs(rstd[k] * sd - 1) < 0.05)) ++off_rows;
  }
  CHECK_MESSAGE(off_rows == 0, off_rows << " rows with a mean or rstd off their distribution");

  // RMSNorm of the LayerNorm outputs, in place, checked against the saved rows in double.
  simdnorm::rms_norm_params rp;
  REQUIRE(plan::rms_norm(d, d, rp, &p).ok());
  a.mean = nullptr;
  t0 = std::chrono::steady_clock::now();
  REQUIRE(p.execute(a).ok());
  MESSAGE("rms_norm [" << rows << ", " << cols << "] in place: " << seconds_since(t0) << " s");
  worst = 0;
  for (std::size_t k = 0; k < ln_rows.size(); ++k) {
    const std::int64_t r = sample[k];
    INFO("row " << r);
    double q = 0;
    for (float v : ln_rows[k]) q += double(v) * double(v);
    const double rs = 1.0 / std::sqrt(q / double(cols) + double(rp.eps));
    CHECK_ULPS(rstd[std::size_t(r)], rs, 4);
    const float* yr = x.get() + std::size_t(r * cols);
    double err = 0;
    for (std::int64_t j = 0; j < cols; ++j)
      err = std::max(err, std::fabs(yr[j] - double(ln_rows[k][std::size_t(j)]) * rs) /
                              (1 + std::fabs(double(ln_rows[k][std::size_t(j)]))));
    CHECK(err <= 1e-6);
    worst = std::max(worst, err);
  }
  MESSAGE("rms_norm: largest relative error of the sampled rows " << worst);
}

}  // namespace
