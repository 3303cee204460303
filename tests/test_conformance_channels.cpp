// ONNX BatchNormalization (inference and training_mode, opset 15 and legacy opset 6),
// GroupNormalization (opset 21 per-channel and the deprecated opset 18 per-group affine),
// InstanceNormalization and MeanVarianceNormalization backend node tests (tests/data/onnx),
// on every runnable ISA, with each case's own tolerance.
#include <sstream>

#include "conformance.hpp"
#include "test_util.hpp"

namespace {

const float* input(const conformance::onnx_case& c, const char* role) {
  auto it = c.inputs.find(role);
  return it == c.inputs.end() ? nullptr : it->second.data.data();
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ',')) out.push_back(std::stoi(t));
  return out;
}

simdnorm::status run_case(const conformance::onnx_case& c, std::vector<float>& y,
                          std::vector<float>& rm, std::vector<float>& rv) {
  const auto& x = c.inputs.at("x");
  const simdnorm::tensor_desc d = conformance::desc_of(x.shape);
  y.assign(x.data.size(), 0.f);
  test::any_args a;
  a.x = x.data.data();
  a.y = y.data();
  const float eps = float(c.attr_num("epsilon", 1e-5));
  if (c.op == "batch_norm") {
    simdnorm::batch_norm_params p;
    p.eps = eps;
    if (c.attr_num("training_mode", 0) != 0) {
      p.training = true;
      p.convention = simdnorm::momentum_convention::onnx;
      p.momentum = float(c.attr_num("momentum", 0.9));
      rm = c.inputs.at("running_mean").data;
      rv = c.inputs.at("running_var").data;
      a.gamma = input(c, "weight");
      a.beta = input(c, "bias");
      a.running_mean = rm.data();
      a.running_var = rv.data();
    } else {
      p.running_mean = input(c, "running_mean");
      p.running_var = input(c, "running_var");
      p.gamma = input(c, "weight");
      p.beta = input(c, "bias");
    }
    return simdnorm::batch_norm(d, d, p, test::as<simdnorm::batch_norm_args>(a));
  }
  a.gamma = input(c, "weight");
  a.beta = input(c, "bias");
  if (c.op == "group_norm") {
    simdnorm::group_norm_params p;
    p.eps = eps;
    p.num_groups = int(c.attr_num("num_groups", 1));
    p.per_group_affine = c.has_tag("opset18_per_group_affine");
    return simdnorm::group_norm(d, d, p, test::as<simdnorm::group_norm_args>(a));
  }
  if (c.op == "instance_norm") {
    simdnorm::instance_norm_params p;
    p.eps = eps;
    return simdnorm::instance_norm(d, d, p, test::as<simdnorm::instance_norm_args>(a));
  }
  simdnorm::mean_variance_norm_params p;  // mean_variance_norm
  const std::vector<int> axes = int_list(c.attr.count("axes") ? c.attr.at("axes") : "0,2,3");
  p.num_axes = int(axes.size());
  for (std::size_t k = 0; k < axes.size(); ++k) p.axes[k] = axes[k];
  return simdnorm::mean_variance_norm(d, d, p, test::as<simdnorm::mean_variance_norm_args>(a));
}

}  // namespace

TEST_CASE(
    "conformance: ONNX BatchNormalization, GroupNormalization, InstanceNormalization, "
    "MeanVarianceNormalization (16 cases)") {
  std::vector<conformance::onnx_case> cases;
  for (const char* op : {"batch_norm", "group_norm", "instance_norm", "mean_variance_norm"})
    for (auto& c : conformance::load_all(op)) cases.push_back(std::move(c));
  REQUIRE(cases.size() == 16);
  std::size_t training = 0, per_group = 0;
  for (const auto& c : cases) {
    training += c.attr_num("training_mode", 0) != 0;
    per_group += c.has_tag("opset18_per_group_affine");
  }
  CHECK(training == 2);
  CHECK(per_group == 2);
  test::for_each_isa([&](simdnorm::isa) {
    for (const conformance::onnx_case& c : cases) {
      INFO("case " << c.name);
      REQUIRE(!c.inputs.at("x").data.empty());
      std::vector<float> y, rm, rv;
      const simdnorm::status s = run_case(c, y, rm, rv);
      REQUIRE_MESSAGE(s.ok(), s.message());
      conformance::check_output(c, "y", y.data());
      conformance::check_optional_output(c, "running_mean_out", rm.data());
      conformance::check_optional_output(c, "running_var_out", rv.data());
    }
  });
}
