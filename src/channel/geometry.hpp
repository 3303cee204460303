// Internal: the canonical geometry of the channel ops, pure shape algebra on tensor_desc.
// Every layout a channel op accepts (NCHW, NHWC, channels-last strides, padded batches, any
// MeanVarianceNormalization axes) is reduced here to one of two views, so that the schedule
// and the phase executors deal with two shapes only. Strides are in elements.
//
// Each op computes statistics per "unit" over a set of values:
//   BatchNorm: unit = channel, values over N and the spatial dims;
//   GroupNorm: unit = (n, group); InstanceNorm: unit = (n, c) (GroupNorm with C groups);
//   MeanVarianceNormalization: unit = an index of the kept dims, values over `axes`.
// After dropping size-1 dims and merging neighbours, the tensor is one of
//   planes:  [B][U units][nseg segments][len] with len dense (NCHW: unit = channel, segments
//            = the N planes; GroupNorm: segments = the group's channels),
//   columns: [B][R rows][C dense channels], a unit is `group` adjacent channels (NHWC, [N, C]).
#pragma once
#include <cstdint>

#include "simdnorm/tensor.hpp"
#include "../tuning.hpp"

namespace simdnorm::detail::channel {

/// Dims merged into one: `size` indices at stride xs in x and ys in y.
struct dim_run {
  std::int64_t size = 1, xs = 0, ys = 0;
};

/// Merges dims idx[0..n) (outermost first, size-1 dims skipped) into runs: dim b joins the run
/// of the dim a before it when stride[a] == stride[b] * size[b] in x and in y. Returns the
/// number of runs, or -1 when there would be more than `max_runs`.
int merge_runs(const tensor_desc& x, const tensor_desc& y, const int* idx, int n, int max_runs,
               dim_run* out);

/// The canonical view (see the top of the file).
struct channel_geometry {
  bool columns = false;
  std::int64_t B = 1, xb = 0, yb = 0;
  // planes
  std::int64_t U = 1, xu = 0, yu = 0;
  std::int64_t nseg = 1, xs = 0, ys = 0, len = 1;
  // columns
  std::int64_t R = 1, xr = 0, yr = 0, C = 1;
  std::int64_t group = 1;  ///< channels per unit (GroupNorm), in both forms
};

/// Builds the geometry from the kept dims `kd` (in order: batch, channel) and the reduced dims
/// `rd` (any order; they are sorted by stride, as a reduction may take them in any order).
/// `group` kept channels make one unit. False when the strides fit neither view.
bool make_geometry(const tensor_desc& x, const tensor_desc& y, const int* kd, int nk, int* rd,
                   int nr, std::int64_t group, channel_geometry* g);

/// Bound i (0..n) of `len` elements cut into n pieces: i = n gives len, the other bounds are
/// rounded down to a multiple of kLineFloats.
inline std::int64_t piece_bound(std::int64_t len, std::int64_t i, std::int64_t n) {
  constexpr auto align = std::int64_t(kLineFloats);
  return i == n ? len : len * i / n / align * align;
}

}  // namespace simdnorm::detail::channel
