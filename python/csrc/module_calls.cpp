// The converted modules' forward calls (simdnorm_torch/modules.py): one C++ call per forward
// checks what simdnorm needs to take the call and runs the operator, or says why not.
//
// A converted module must not cost more per call than the torch.nn module it replaces: a
// ResNet's BatchNorm on a 7x7 plane runs in a few microseconds. Done in Python, the checks
// (dtype, device, autograd, dense rows) and the operator's argument parsing through torch.ops
// cost more than the kernel on such tensors (docs/results/torch_models.md has the per-call
// overhead). Each function here returns the operator's output tensor, or a str naming why
// simdnorm cannot take the call, for the module to run PyTorch's forward and count the reason:
//   "dtype"     x is not float32, bfloat16 or float16, or a parameter (weight, bias, running
//               statistics, gate) has another dtype than x: other mixes keep PyTorch's result
//               dtype (a user RMSNorm promotes) or its error through the fallback;
//   "device"    x is not on the CPU;
//   "autograd"  grad mode is on and x or a parameter requires grad (the operators are
//               forward-only);
//   "layout"    the rows are not dense, or the plan refuses the strides.
// The operators run through the dispatcher, as torch.ops would run them: the profiler records
// them under their names and the GIL is released while they run.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/utils/pybind.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "module_calls.hpp"

namespace simdnorm_torch {
namespace {

namespace py = pybind11;
using at::Tensor;
using c10::optional;

bool present(const optional<Tensor>& t) { return t.has_value() && t->defined(); }

const char* obstacle(const Tensor& x, std::initializer_list<const optional<Tensor>*> params) {
  const at::ScalarType type = x.scalar_type();
  if (type != at::kFloat && type != at::kBFloat16 && type != at::kHalf) return "dtype";
  for (const auto* p : params) {
    if (present(*p) && (*p)->scalar_type() != type) return "dtype";
  }
  if (!x.device().is_cpu()) return "device";
  if (c10::GradMode::is_enabled()) {
    if (x.requires_grad()) return "autograd";
    for (const auto* p : params) {
      if (present(*p) && (*p)->requires_grad()) return "autograd";
    }
  }
  return nullptr;
}

// Whether the trailing `ndim` dims of x are dense row-major, as the row plans need. Checked
// before the plan because a refused plan costs an exception per call.
bool rows_dense(const Tensor& x, int64_t ndim) {
  int64_t expected = 1;
  for (int64_t d = x.dim() - 1; d >= 0 && d >= x.dim() - ndim; --d) {
    if (x.size(d) != 1 && x.stride(d) != expected) return false;
    expected *= x.size(d);
  }
  return true;
}

// simdnorm::<name>'s handle in the dispatcher, for the C++ signature Sig.
template <class Sig>
c10::TypedOperatorHandle<Sig> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// The tensor `call` returns, run without the GIL; "layout" when its plan refuses the strides.
// Other errors reach Python as RuntimeError with the operator's message, as through torch.ops.
template <class Call>
py::object run(Call&& call) {
  Tensor y;
  try {
    py::gil_scoped_release no_gil;
    y = call();
  } catch (const c10::Error& e) {
    if (e.msg().find("unsupported_layout") != std::string::npos) return py::str("layout");
    throw std::runtime_error(e.what_without_backtrace());
  }
  return py::cast(std::move(y));
}

using row_norm_sig = Tensor(const Tensor&, at::IntArrayRef, const optional<Tensor>&,
                            const optional<Tensor>&, double);
using rms_norm_sig = Tensor(const Tensor&, at::IntArrayRef, const optional<Tensor>&, double,
                            double);

py::object layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                      const optional<Tensor>& weight, const optional<Tensor>& bias, double eps) {
  static const auto op = op_handle<row_norm_sig>("simdnorm::layer_norm");
  if (const char* why = obstacle(x, {&weight, &bias})) return py::str(why);
  if (!rows_dense(x, static_cast<int64_t>(normalized_shape.size()))) return py::str("layout");
  return run([&] { return op.call(x, normalized_shape, weight, bias, eps); });
}

py::object rms_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                    const optional<Tensor>& weight, double eps, double weight_offset) {
  static const auto op = op_handle<rms_norm_sig>("simdnorm::rms_norm");
  if (const char* why = obstacle(x, {&weight})) return py::str(why);
  if (!rows_dense(x, static_cast<int64_t>(normalized_shape.size()))) return py::str("layout");
  return run([&] { return op.call(x, normalized_shape, weight, eps, weight_offset); });
}

// Without a gate, RMSNorm over the last dim.
py::object rms_norm_gated(const Tensor& x, const optional<Tensor>& gate,
                          const optional<Tensor>& weight, double eps, bool norm_before_gate) {
  static const auto plain = op_handle<rms_norm_sig>("simdnorm::rms_norm");
  static const auto gated = op_handle<Tensor(const Tensor&, const Tensor&, const optional<Tensor>&,
                                             double, double, bool)>("simdnorm::rms_norm_gated");
  if (const char* why = obstacle(x, {&weight, &gate})) return py::str(why);
  if (!rows_dense(x, 1)) return py::str("layout");
  if (!present(gate)) {
    return run([&] { return plain.call(x, {x.dim() > 0 ? x.size(-1) : 1}, weight, eps, 0.0); });
  }
  return run([&] { return gated.call(x, *gate, weight, eps, 0.0, norm_before_gate); });
}

py::object group_norm(const Tensor& x, int64_t num_groups, const optional<Tensor>& weight,
                      const optional<Tensor>& bias, double eps) {
  static const auto op = op_handle<Tensor(const Tensor&, int64_t, const optional<Tensor>&,
                                          const optional<Tensor>&, double)>("simdnorm::group_norm");
  if (const char* why = obstacle(x, {&weight, &bias})) return py::str(why);
  return run([&] { return op.call(x, num_groups, weight, bias, eps); });
}

py::object instance_norm(const Tensor& x, const optional<Tensor>& weight,
                         const optional<Tensor>& bias, double eps) {
  static const auto op =
      op_handle<Tensor(const Tensor&, const optional<Tensor>&, const optional<Tensor>&, double)>(
          "simdnorm::instance_norm");
  if (const char* why = obstacle(x, {&weight, &bias})) return py::str(why);
  return run([&] { return op.call(x, weight, bias, eps); });
}

py::object batch_norm(const Tensor& x, const optional<Tensor>& weight, const optional<Tensor>& bias,
                      const optional<Tensor>& running_mean, const optional<Tensor>& running_var,
                      const optional<Tensor>& num_batches_tracked, bool training, double momentum,
                      bool cumulative, double eps) {
  static const auto op =
      op_handle<Tensor(const Tensor&, const optional<Tensor>&, const optional<Tensor>&,
                       const optional<Tensor>&, const optional<Tensor>&, const optional<Tensor>&,
                       bool, double, bool, double)>("simdnorm::batch_norm");
  if (const char* why = obstacle(x, {&weight, &bias, &running_mean, &running_var})) {
    return py::str(why);
  }
  return run([&] {
    return op.call(x, weight, bias, running_mean, running_var, num_batches_tracked, training,
                   momentum, cumulative, eps);
  });
}

}  // namespace

void bind_module_calls(pybind11::module_& m) {
  m.def(
      "call_obstacle",
      [](const Tensor& x) -> py::object {
        const char* why = obstacle(x, {});
        return why ? py::object(py::str(why)) : py::object(py::none());
      },
      "Why simdnorm cannot take a call on x alone (dtype, device or autograd), or None.");
  const char* doc =
      "A converted module's call: the operator's output, or why simdnorm cannot "
      "take the call (a str: dtype, device, autograd or layout).";
  m.def("layer_norm_call", &layer_norm, doc);
  m.def("rms_norm_call", &rms_norm, doc);
  m.def("rms_norm_gated_call", &rms_norm_gated, doc);
  m.def("group_norm_call", &group_norm, doc);
  m.def("instance_norm_call", &instance_norm, doc);
  m.def("batch_norm_call", &batch_norm, doc);
}

}  // namespace simdnorm_torch
