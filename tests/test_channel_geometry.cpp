// The channel ops' canonical geometry on its own (src/channel/geometry.hpp): NCHW and NHWC,
// channels_last strides, merging of dims, padded batch strides, size-1 dims, the order of the
// reduced dims, the layouts it rejects, and the aligned cut of a segment into pieces.
#include <cstdint>
#include <initializer_list>

#include "../src/channel/geometry.hpp"
#include "doctest/doctest.h"

namespace {

using simdnorm::tensor_desc;
using simdnorm::detail::channel::channel_geometry;
using simdnorm::detail::channel::dim_run;
using simdnorm::detail::channel::make_geometry;
using simdnorm::detail::channel::merge_runs;
using simdnorm::detail::channel::piece_bound;

tensor_desc dense(std::initializer_list<std::int64_t> shape) {
  return tensor_desc::contiguous(shape);
}

tensor_desc strided(std::initializer_list<std::int64_t> shape,
                    std::initializer_list<std::int64_t> strides) {
  tensor_desc t;
  for (std::int64_t v : shape) t.shape[t.ndim++] = v;
  int i = 0;
  for (std::int64_t v : strides) t.strides[i++] = v;
  return t;
}

/// make_geometry with kept dims `kd` (batch, channel order) and the other dims reduced.
bool geometry(const tensor_desc& x, const tensor_desc& y, std::initializer_list<int> kd,
              std::int64_t group, channel_geometry* g) {
  int k[simdnorm::max_dims], nk = 0, rd[simdnorm::max_dims], nr = 0;
  for (int d : kd) k[nk++] = d;
  for (int d = 0; d < x.ndim; ++d) {
    bool kept = false;
    for (int i = 0; i < nk; ++i) kept = kept || k[i] == d;
    if (!kept) rd[nr++] = d;
  }
  return make_geometry(x, y, k, nk, rd, nr, group, g);
}

/// BatchNorm's view of `x` with channel dim `ca` (y = x's layout).
channel_geometry batch_norm_view(const tensor_desc& x, int ca) {
  channel_geometry g;
  REQUIRE(geometry(x, x, {ca}, 1, &g));
  return g;
}

void check_planes(const channel_geometry& g, std::int64_t B, std::int64_t xb, std::int64_t U,
                  std::int64_t xu, std::int64_t nseg, std::int64_t xs, std::int64_t len) {
  CHECK_FALSE(g.columns);
  CHECK(g.B == B);
  if (B > 1) CHECK(g.xb == xb);
  CHECK(g.U == U);
  CHECK(g.xu == xu);
  CHECK(g.nseg == nseg);
  if (nseg > 1) CHECK(g.xs == xs);
  CHECK(g.len == len);
}

void check_columns(const channel_geometry& g, std::int64_t B, std::int64_t xb, std::int64_t R,
                   std::int64_t xr, std::int64_t C) {
  CHECK(g.columns);
  CHECK(g.B == B);
  if (B > 1) CHECK(g.xb == xb);
  CHECK(g.R == R);
  if (R > 1) CHECK(g.xr == xr);
  CHECK(g.C == C);
}

TEST_CASE("geometry: NCHW BatchNorm is planes, the N planes of a channel its segments") {
  const channel_geometry g = batch_norm_view(dense({8, 3, 5, 7}), 1);
  check_planes(g, 1, 0, 3, 35, 8, 105, 35);
  CHECK(g.group == 1);
  CHECK(g.yu == 35);
  CHECK(g.ys == 105);
  // N = 1: one segment per channel
  check_planes(batch_norm_view(dense({1, 3, 5, 7}), 1), 1, 0, 3, 35, 1, 0, 35);
}

TEST_CASE("geometry: NHWC and channels_last strides are columns, the spatial dims merged") {
  const channel_geometry nhwc = batch_norm_view(dense({8, 5, 7, 3}), 3);
  check_columns(nhwc, 1, 0, 8 * 5 * 7, 3, 3);
  CHECK(nhwc.yr == 3);
  // NCHW shape with channels_last strides: the same view as NHWC
  const tensor_desc cl = strided({8, 3, 5, 7}, {105, 1, 21, 3});
  const channel_geometry g = batch_norm_view(cl, 1);
  check_columns(g, 1, 0, 8 * 5 * 7, 3, 3);
  // [N, C]: one run of rows of dense channels
  check_columns(batch_norm_view(dense({4, 6}), 1), 1, 0, 4, 6, 6);
  // GroupNorm on [N, C]: batch and channels merge into one row of N * C channels
  channel_geometry gn;
  REQUIRE(geometry(dense({4, 6}), dense({4, 6}), {0, 1}, 3, &gn));
  check_columns(gn, 1, 0, 1, 0, 24);
  CHECK(gn.group == 3);
}

TEST_CASE("geometry: GroupNorm merges batch and channels into units when they are adjacent") {
  // NCHW: (n, c) runs into one kept run of N * C channels; a unit is a group of planes
  channel_geometry g;
  const tensor_desc x = dense({2, 6, 4, 5});
  REQUIRE(geometry(x, x, {0, 1}, 3, &g));
  check_planes(g, 1, 0, 2 * 6 / 3, 3 * 20, 3, 20, 20);
  CHECK(g.group == 3);
  // NHWC: batch and channels do not merge; the spatial dims merge into rows
  const tensor_desc h = dense({2, 4, 5, 6});
  REQUIRE(geometry(h, h, {0, 3}, 3, &g));
  check_columns(g, 2, 120, 20, 6, 6);
  CHECK(g.group == 3);
}

TEST_CASE("geometry: padded batch strides give a batch run, in x and in y") {
  // x's batch stride is padded (100 > 3 * 20), y is dense
  const tensor_desc x = strided({2, 3, 4, 5}, {100, 20, 5, 1});
  const tensor_desc y = dense({2, 3, 4, 5});
  channel_geometry g;
  REQUIRE(geometry(x, y, {0, 1}, 1, &g));
  check_planes(g, 2, 100, 3, 20, 1, 0, 20);
  CHECK(g.yb == 60);
  CHECK(g.yu == 20);
  // BatchNorm: the padded batch is a strided run of segments
  REQUIRE(geometry(x, y, {1}, 1, &g));
  check_planes(g, 1, 0, 3, 20, 2, 100, 20);
  CHECK(g.ys == 60);
  // NHWC with padded batch: columns with a batch run
  const tensor_desc xh = strided({2, 4, 5, 3}, {64, 15, 3, 1});
  REQUIRE(geometry(xh, xh, {0, 3}, 1, &g));
  check_columns(g, 2, 64, 20, 3, 3);
}

TEST_CASE("geometry: size-1 dims are dropped whatever their stride") {
  const channel_geometry a = batch_norm_view(dense({2, 3, 4, 5}), 1);
  const tensor_desc ones = strided({2, 1, 3, 4, 1, 5}, {60, 999, 20, 5, 7, 1});
  const channel_geometry b = batch_norm_view(ones, 2);
  check_planes(b, a.B, a.xb, a.U, a.xu, a.nseg, a.xs, a.len);
  // every reduced dim of size 1: one value per unit, channels dense
  const channel_geometry c = batch_norm_view(dense({1, 16, 1, 1}), 1);
  check_columns(c, 1, 0, 1, 0, 16);
  // merge_runs skips size-1 dims and merges the rest
  const tensor_desc x = strided({1, 4, 1, 5}, {3, 5, 11, 1});
  const int idx[4] = {0, 1, 2, 3};
  dim_run runs[2];
  REQUIRE(merge_runs(x, x, idx, 4, 2, runs) == 1);
  CHECK(runs[0].size == 20);
  CHECK(runs[0].xs == 1);
}

TEST_CASE("geometry: a stride times a size past INT64_MAX merges nothing (no overflow)") {
  // x dense, so its dims merge; y's inner dim has 2 elements 2^62 apart, so the test whether
  // y's outer dim continues it, 2^62 * 2, overflows, while y's extent fits (found by the fuzzer
  // under UBSan in the row ops' twin of this merge; the asan stage runs this test under UBSan)
  const std::int64_t far = std::int64_t(1) << 62;
  const tensor_desc x = strided({3, 2}, {2, 1});
  const tensor_desc y = strided({3, 2}, {1, far});
  const int idx[2] = {0, 1};
  dim_run runs[2];
  REQUIRE(merge_runs(x, x, idx, 2, 2, runs) == 1);
  REQUIRE(merge_runs(x, y, idx, 2, 2, runs) == 2);
  CHECK(runs[1].ys == far);
}

TEST_CASE("geometry: reduced dims may come in any order (MeanVarianceNormalization axes)") {
  const tensor_desc x = dense({2, 3, 4});
  int kd[1] = {1};
  int rd_a[2] = {0, 2}, rd_b[2] = {2, 0};
  channel_geometry a, b;
  REQUIRE(make_geometry(x, x, kd, 1, rd_a, 2, 1, &a));
  REQUIRE(make_geometry(x, x, kd, 1, rd_b, 2, 1, &b));
  check_planes(a, 1, 0, 3, 4, 2, 12, 4);
  check_planes(b, a.B, a.xb, a.U, a.xu, a.nseg, a.xs, a.len);
  // all dims reduced: one unit
  int rd_all[3] = {2, 1, 0};
  channel_geometry u;
  REQUIRE(make_geometry(x, x, nullptr, 0, rd_all, 3, 1, &u));
  check_planes(u, 1, 0, 1, 1, 1, 0, 24);
}

TEST_CASE("geometry: layouts that fit neither view are rejected") {
  channel_geometry g;
  // three reduced runs (padded rows and batch)
  const tensor_desc rows3 = strided({2, 3, 4, 5}, {200, 28, 7, 1});
  CHECK_FALSE(geometry(rows3, rows3, {1}, 1, &g));
  // three kept runs
  const tensor_desc x5 = dense({2, 3, 4, 5, 6});
  CHECK_FALSE(geometry(x5, x5, {0, 2, 4}, 1, &g));
  // GroupNorm over padded rows: a group's planes are not one dense run per segment
  const tensor_desc padded = strided({2, 4, 3, 5}, {96, 24, 8, 1});
  CHECK_FALSE(geometry(padded, padded, {0, 1}, 2, &g));
  CHECK(geometry(padded, padded, {0, 1}, 1, &g));  // InstanceNorm: one plane per unit is fine
  // x NCHW, y channels_last: no dim runs dense in both
  const tensor_desc x = dense({2, 3, 4, 5});
  const tensor_desc y = strided({2, 3, 4, 5}, {60, 1, 15, 3});
  CHECK_FALSE(geometry(x, y, {1}, 1, &g));
}

TEST_CASE("geometry: pieces of a segment start at aligned offsets and end at its length") {
  const std::int64_t align = std::int64_t(simdnorm::detail::kLineFloats);
  for (std::int64_t len : {16, 100, 1000, 4099}) {
    for (std::int64_t n : {1, 2, 3, 7}) {
      CAPTURE(len);
      CAPTURE(n);
      CHECK(piece_bound(len, 0, n) == 0);
      CHECK(piece_bound(len, n, n) == len);
      for (std::int64_t i = 1; i < n; ++i) {
        CHECK(piece_bound(len, i, n) % align == 0);
        CHECK(piece_bound(len, i, n) <= piece_bound(len, i + 1, n));
      }
    }
  }
  CHECK(piece_bound(1000, 1, 3) == 320);
  CHECK(piece_bound(1000, 2, 3) == 656);
}

}  // namespace
