// The canonical geometry of the channel ops (see geometry.hpp): merging dims into runs and
// choosing the planes or the columns view. Shape algebra only, no kernels and no allocation,
// so that it can be tested on its own.
#include "geometry.hpp"

#include <algorithm>

#include "../plan_impl.hpp"

namespace simdnorm::detail::channel {

int merge_runs(const tensor_desc& x, const tensor_desc& y, const int* idx, int n, int max_runs,
               dim_run* out) {
  int runs = 0;
  for (int k = 0; k < n; ++k) {
    const int d = idx[k];
    if (x.shape[d] == 1) continue;
    if (runs > 0 && spans(out[runs - 1].xs, x.strides[d], x.shape[d]) &&
        spans(out[runs - 1].ys, y.strides[d], x.shape[d])) {
      out[runs - 1].size *= x.shape[d];
      out[runs - 1].xs = x.strides[d];
      out[runs - 1].ys = y.strides[d];
      continue;
    }
    if (runs == max_runs) return -1;
    out[runs++] = {x.shape[d], x.strides[d], y.strides[d]};
  }
  return runs;
}

bool make_geometry(const tensor_desc& x, const tensor_desc& y, const int* kd, int nk, int* rd,
                   int nr, std::int64_t group, channel_geometry* g) {
  std::stable_sort(rd, rd + nr, [&](int a, int b) { return x.strides[a] > x.strides[b]; });
  dim_run K[2], R[2];
  const int k_runs = merge_runs(x, y, kd, nk, 2, K);
  const int r_runs = merge_runs(x, y, rd, nr, 2, R);
  if (k_runs < 0 || r_runs < 0) return false;
  const dim_run kb = k_runs == 2 ? K[0] : dim_run{};
  const dim_run kc = k_runs == 2 ? K[1] : k_runs == 1 ? K[0] : dim_run{1, 1, 1};

  // planes: the innermost reduced run dense; or, failing that, one reduced run of segments of
  // length 1 (slow, but any strides work)
  bool planes = false;
  dim_run rn, rs;
  if (r_runs == 0) {
    planes = true;
  } else if (R[r_runs - 1].xs == 1 && R[r_runs - 1].ys == 1) {
    rs = R[r_runs - 1];
    if (r_runs == 2) rn = R[0];
    planes = group == 1 || r_runs == 1;
  } else if (r_runs == 1 && group == 1) {
    rn = R[0];
    planes = true;
  }
  // columns: the innermost kept run dense, at most one run of rows
  const bool columns = kc.size > 1 && kc.xs == 1 && kc.ys == 1 && r_runs <= 1;
  if (columns && (!planes || rs.size == 1)) {
    g->columns = true;
    g->B = kb.size, g->xb = kb.xs, g->yb = kb.ys;
    g->C = kc.size;
    g->group = group;
    if (r_runs == 1) g->R = R[0].size, g->xr = R[0].xs, g->yr = R[0].ys;
    return true;
  }
  if (!planes) return false;
  g->columns = false;
  g->B = kb.size, g->xb = kb.xs, g->yb = kb.ys;
  g->group = group;
  g->U = kc.size / group, g->xu = kc.xs * group, g->yu = kc.ys * group;
  g->len = rs.size;
  if (group > 1) {
    g->nseg = group, g->xs = kc.xs, g->ys = kc.ys;
  } else {
    g->nseg = rn.size, g->xs = rn.xs, g->ys = rn.ys;
  }
  return true;
}

}  // namespace simdnorm::detail::channel
