// Plans for the row-wise ops (LayerNorm, RMSNorm, Lp normalization): validation, collapsing the
// outer dims into runs of equally strided rows, and splitting rows into tasks. The op's kernel
// is chosen here, once, when the plan is made.
#include <algorithm>
#include <cmath>

#include "plan_impl.hpp"
#include "tuning.hpp"

namespace simdnorm {
namespace detail {
namespace {

/// What each row op accepts in norm_args besides x and y, and the kernel that runs it.
struct row_op {
  const char* name;  ///< for messages: "layer_norm"
  bool beta, mean, gamma;
  dtype_pairs<row_norm_fn> kernel_table::*kernel;  ///< [x dtype][y dtype]
};
constexpr row_op kLayerNorm{"layer_norm", true, true, true, &kernel_table::layer_norm_rows};
constexpr row_op kRmsNorm{"rms_norm", false, false, true, &kernel_table::rms_norm_rows};
constexpr row_op kL1Norm{"lp_norm", false, false, false, &kernel_table::l1_norm_rows};
constexpr row_op kL2Norm{"lp_norm", false, false, false, &kernel_table::l2_norm_rows};

struct row_norm_plan final : plan_impl {
  const row_op* op = nullptr;
  row_norm_fn kernel = nullptr;
  add_rows_fn add_kernel = nullptr;  // the fused residual add, for x's type
  row_norm_config cfg;
  // Outer dims after dropping size-1 dims and merging contiguous ones; innermost last.
  int n_outer = 0;
  std::int64_t outer_size[max_dims] = {};
  std::int64_t outer_x_stride[max_dims] = {};
  std::int64_t outer_y_stride[max_dims] = {};
  std::size_t rows_per_task = 1, tasks = 1;
  std::int64_t x_bytes = 0, y_bytes = 0;  // spans
  std::size_t x_elem = 4, y_elem = 4;     // bytes per element
  bool same_layout = false;

  float weight_offset = 0.f;  // nonzero: phase 0 writes gamma + weight_offset to the workspace

  std::size_t num_phases() const noexcept override { return weight_offset != 0.f ? 2 : 1; }
  std::size_t num_tasks(std::size_t phase) const noexcept override {
    return phase + 1 < num_phases() ? 1 : tasks;
  }
  std::size_t workspace_bytes() const noexcept override {
    return weight_offset != 0.f ? (cols * sizeof(float) + 63) / 64 * 64 : 0;
  }

  status check_args(const norm_args& a) const noexcept override {
    if (a.x == nullptr) return status::error(status_code::invalid_argument, "args.x is null");
    if (a.y == nullptr) return status::error(status_code::invalid_argument, "args.y is null");
    if (!op->beta && a.beta != nullptr)
      return status::error(status_code::invalid_argument, "args.beta: %s has no beta", op->name);
    if (!op->mean && a.mean != nullptr)
      return status::error(status_code::invalid_argument, "args.mean: %s has no mean output",
                           op->name);
    if (!op->gamma && a.gamma != nullptr)
      return status::error(status_code::invalid_argument, "args.gamma: %s has no gamma", op->name);
    if (weight_offset != 0.f && a.gamma == nullptr)
      return status::error(status_code::invalid_argument,
                           "args.gamma is null: %s with weight_offset=%g scales by gamma + offset",
                           op->name, double(weight_offset));
    if ((a.residual == nullptr) != (a.residual_out == nullptr))
      return status::error(status_code::invalid_argument,
                           "args.residual and args.residual_out go together (h = x + residual "
                           "is stored to residual_out)");
    if (a.residual != nullptr) {
      // h (residual_out) may be residual or x; y may be x or residual, never h.
      const struct {
        const void *p, *q;
        std::int64_t q_bytes;
        bool may_alias;
        const char* what;
      } pairs[] = {
          {a.x, a.residual, x_bytes, true, "args.residual and args.x"},
          {a.x, a.residual_out, x_bytes, true, "args.residual_out and args.x"},
          {a.residual, a.residual_out, x_bytes, true, "args.residual_out and args.residual"},
          {a.residual_out, a.y, y_bytes, false, "args.y and args.residual_out"},
          {a.residual, a.y, y_bytes, same_layout, "args.y and args.residual"},
      };
      for (const auto& c : pairs) {
        const auto p = reinterpret_cast<std::uintptr_t>(c.p);
        const auto q = reinterpret_cast<std::uintptr_t>(c.q);
        if (p == q ? !c.may_alias
                   : (p < q + std::uintptr_t(c.q_bytes) && q < p + std::uintptr_t(x_bytes)))
          return status::error(status_code::invalid_argument,
                               "%s overlap: they must be the same tensor (where allowed) or "
                               "disjoint",
                               c.what);
      }
    }
    return check_aliasing(a.x, x_bytes, a.y, y_bytes, same_layout);
  }

  void run_tasks(const norm_args& a, std::size_t phase, std::size_t begin,
                 std::size_t end) const noexcept override {
    row_norm_config c = cfg;
    c.gamma = a.gamma;
    if (weight_offset != 0.f) {  // gamma_eff, rounded once in f32, shared by the row tasks
      float* gamma_eff = static_cast<float*>(a.workspace);
      if (phase == 0) {
        for (std::size_t i = 0; i < cols; ++i) gamma_eff[i] = a.gamma[i] + weight_offset;
        return;
      }
      c.gamma = gamma_eff;
    }
    c.beta = a.beta;
    const std::size_t r_end = std::min(rows, end * rows_per_task);
    std::size_t r = begin * rows_per_task;
    const int inner = n_outer - 1;
    while (r < r_end) {
      // Decompose r over the outer dims; the run continues along the innermost outer dim.
      std::int64_t rem = std::int64_t(r), xo = 0, yo = 0, i_inner = 0;
      for (int d = inner; d >= 0; --d) {
        const std::int64_t idx = rem % outer_size[d];
        rem /= outer_size[d];
        xo += idx * outer_x_stride[d];
        yo += idx * outer_y_stride[d];
        if (d == inner) i_inner = idx;
      }
      const std::size_t count =
          std::min<std::size_t>(r_end - r, std::size_t(outer_size[inner] - i_inner));
      row_block b;
      b.x = static_cast<const char*>(a.x) + xo * std::int64_t(x_elem);
      if (a.residual != nullptr) {  // h = x + residual, then the norm of h (in cache: one task)
        add_rows_job add;
        add.x = b.x;
        add.r = static_cast<const char*>(a.residual) + xo * std::int64_t(x_elem);
        add.h = static_cast<char*>(a.residual_out) + xo * std::int64_t(x_elem);
        add.stride = outer_x_stride[inner];
        add.rows = count;
        add.cols = cols;
        add_kernel(add);
        b.x = add.h;
      }
      b.x_stride = outer_x_stride[inner];
      b.y = static_cast<char*>(a.y) + yo * std::int64_t(y_elem);
      b.y_stride = outer_y_stride[inner];
      b.rows = count;
      b.mean = a.mean ? a.mean + r : nullptr;
      b.rstd = a.rstd ? a.rstd + r : nullptr;
      kernel(c, b);
      r += count;
    }
  }
};

// y's rows must not overlap: sorted by stride, each outer dim must step past everything the
// smaller ones cover. (Sufficient, and exact for the layouts frameworks produce.)
bool rows_disjoint(int n, const std::int64_t* size, const std::int64_t* stride, std::int64_t cols) {
  int order[max_dims];
  for (int i = 0; i < n; ++i) {  // insertion sort by stride; n <= max_dims
    int j = i;
    for (; j > 0 && stride[order[j - 1]] > stride[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  std::int64_t covered = cols;  // extent of one row
  for (int k = 0; k < n; ++k) {
    const int d = order[k];
    if (size[d] == 1) continue;
    if (stride[d] < covered) return false;
    covered = stride[d] * (size[d] - 1) + covered;
  }
  return true;
}

status make_row_norm(const row_op& op, const tensor_desc& x, const tensor_desc& y,
                     int normalized_ndim, float eps, bool compensated, store_policy stores,
                     float weight_offset, plan* out) noexcept {
  const char* opname = op.name;
  if (out == nullptr)
    return status::error(status_code::invalid_argument, "%s: out is null", opname);
  status s = check_tensor(x, "x");
  if (!s) return s;
  if (!(s = check_tensor(y, "y"))) return s;
  if (!(s = check_same_shape(x, y))) return s;
  if (normalized_ndim < 1 || normalized_ndim > x.ndim)
    return status::error(status_code::invalid_argument,
                         "%s: normalized_ndim=%d must be in [1, ndim=%d]", opname, normalized_ndim,
                         x.ndim);
  if (!(s = check_eps(eps))) return s;
  if (!std::isfinite(weight_offset))
    return status::error(status_code::invalid_argument, "%s: weight_offset=%g must be finite",
                         opname, double(weight_offset));
  const int first = x.ndim - normalized_ndim;
  if (!dense_suffix(x, first) || !dense_suffix(y, first))
    return status::error(status_code::unsupported_layout,
                         "%s: the normalized (last %d) dims of x and y must be dense row-major",
                         opname, normalized_ndim);
  if (stores != store_policy::automatic && stores != store_policy::regular &&
      stores != store_policy::streaming)
    return status::error(status_code::invalid_argument, "%s: unknown store_policy %d", opname,
                         int(stores));

  const kernel_table* kt = selected_table(&s);
  if (kt == nullptr) return s;

  std::shared_ptr<row_norm_plan> p;
  try {
    p = std::make_shared<row_norm_plan>();
  } catch (...) {
    return status::error(status_code::out_of_memory, "%s: cannot allocate the plan", opname);
  }
  p->op = &op;
  p->kernels = kt;
  p->kernel = (kt->*op.kernel)[std::size_t(x.type)][std::size_t(y.type)];
  p->add_kernel = kt->add_rows[std::size_t(x.type)];
  if (p->kernel == nullptr)
    return status::error(status_code::unsupported_dtype,
                         "%s: x %s, y %s: this build has f32 row kernels only "
                         "(SIMDNORM_ALL_DTYPES=OFF)",
                         opname, dtype_name(x.type), dtype_name(y.type));
  std::int64_t cols = 1;
  for (int i = first; i < x.ndim; ++i) cols *= x.shape[i];
  std::int64_t rows = 1;
  for (int i = 0; i < first; ++i) {
    rows *= x.shape[i];
    if (x.shape[i] == 1) continue;
    const int k = p->n_outer;
    if (k > 0 && p->outer_x_stride[k - 1] == x.strides[i] * x.shape[i] &&
        p->outer_y_stride[k - 1] == y.strides[i] * x.shape[i]) {  // merge with the outer dim
      p->outer_size[k - 1] *= x.shape[i];
      p->outer_x_stride[k - 1] = x.strides[i];
      p->outer_y_stride[k - 1] = y.strides[i];
      continue;
    }
    p->outer_size[k] = x.shape[i];
    p->outer_x_stride[k] = x.strides[i];
    p->outer_y_stride[k] = y.strides[i];
    ++p->n_outer;
  }
  if (p->n_outer == 0) {  // a single row
    p->outer_size[0] = 1;
    p->n_outer = 1;
  }
  if (!rows_disjoint(p->n_outer, p->outer_size, p->outer_y_stride, cols))
    return status::error(status_code::unsupported_layout, "%s: y's strides make rows overlap",
                         opname);
  p->same_layout = x.type == y.type;
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != 1 && x.strides[i] != y.strides[i]) p->same_layout = false;
  p->x_bytes = span_bytes(x);
  p->y_bytes = span_bytes(y);
  p->x_elem = dtype_size(x.type);
  p->y_elem = dtype_size(y.type);
  p->rows = std::size_t(rows);
  p->cols = std::size_t(cols);
  p->cfg.cols = std::size_t(cols);
  p->cfg.inv_cols = 1.0 / double(cols);
  p->cfg.eps = eps;
  p->cfg.compensated_mean = compensated;
  p->weight_offset = weight_offset;
  // Streaming stores write whole vectors of floats: f32 outputs only.
  const std::size_t elements = std::size_t(rows) * std::size_t(cols);
  p->cfg.stream = y.type == dtype::f32 &&
                  use_streaming_stores(stores, elements * p->x_elem, elements * p->y_elem);
  // Tasks of about kTaskElements, in whole kernel tiles: the kernel takes short rows one vector
  // of rows at a time and long rows kRowGroup at a time (tuning.hpp).
  const std::size_t tile = p->cols <= kShortCols ? std::size_t(isa_lanes(kt->id)) : kRowGroup;
  const std::size_t rows_for_elements = (kTaskElements + p->cols - 1) / p->cols;
  p->rows_per_task = (rows_for_elements + tile - 1) / tile * tile;
  p->tasks = (p->rows + p->rows_per_task - 1) / p->rows_per_task;
  plan_access::set(out, std::move(p));
  return {};
}

}  // namespace
}  // namespace detail

status plan::layer_norm(const tensor_desc& x, const tensor_desc& y, const layer_norm_params& params,
                        plan* out) noexcept {
  return detail::make_row_norm(detail::kLayerNorm, x, y, params.normalized_ndim, params.eps,
                               params.compensated_mean, params.stores, params.weight_offset, out);
}

status plan::rms_norm(const tensor_desc& x, const tensor_desc& y, const rms_norm_params& params,
                      plan* out) noexcept {
  return detail::make_row_norm(detail::kRmsNorm, x, y, params.normalized_ndim, params.eps, false,
                               params.stores, params.weight_offset, out);
}

status plan::lp_norm(const tensor_desc& x, const tensor_desc& y, const lp_norm_params& params,
                     plan* out) noexcept {
  if (params.p != 1 && params.p != 2)
    return status::error(status_code::invalid_argument, "lp_norm: p=%d must be 1 or 2", params.p);
  const int ndim = x.ndim;
  if (ndim >= 1 && ndim <= max_dims && (params.axis < -ndim || params.axis >= ndim))
    return status::error(status_code::invalid_argument, "lp_norm: axis=%d must be in [%d, %d)",
                         params.axis, -ndim, ndim);
  // The axis and the size-1 dims after it form the row: normalized_ndim = ndim - axis.
  int normalized_ndim = 1;
  if (ndim >= 1 && ndim <= max_dims) {
    const int axis = params.axis < 0 ? params.axis + ndim : params.axis;
    for (int d = axis + 1; d < ndim; ++d)
      if (x.shape[d] != 1)
        return status::error(status_code::unsupported_layout,
                             "lp_norm: axis=%d: the dims after the normalized axis must have "
                             "size 1 (dim %d has %lld); move the axis last",
                             params.axis, d, static_cast<long long>(x.shape[d]));
    normalized_ndim = ndim - axis;
  }
  return detail::make_row_norm(params.p == 1 ? detail::kL1Norm : detail::kL2Norm, x, y,
                               normalized_ndim, params.eps, false, params.stores, 0.f, out);
}

}  // namespace simdnorm
