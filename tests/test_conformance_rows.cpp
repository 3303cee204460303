// ONNX LayerNormalization-17 and RMSNormalization-23 backend node tests (tests/data/onnx),
// including the Mean and InvStdDev outputs and negative axes, on every runnable ISA.
#include <algorithm>

#include "conformance.hpp"
#include "test_util.hpp"

namespace {

// Scale and bias may broadcast (unidirectionally) to the normalized shape; expand them.
std::vector<float> expand_to(const conformance::tensor& t,
                             const std::vector<std::int64_t>& norm_shape) {
  std::size_t n = 1;
  for (auto d : norm_shape) n *= std::size_t(d);
  if (t.data.size() == n) return t.data;
  std::vector<float> out(n);
  const int r = int(norm_shape.size()), tr = int(t.shape.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t rem = i, src = 0, mul = 1;
    for (int k = r - 1; k >= 0; --k) {
      const std::size_t idx = rem % std::size_t(norm_shape[k]);
      rem /= std::size_t(norm_shape[k]);
      const int tk = k - (r - tr);
      if (tk >= 0) {
        const std::size_t td = std::size_t(t.shape[tk]);
        src += (td == 1 ? 0 : idx) * mul;
        mul *= td;
      }
    }
    out[i] = t.data[src];
  }
  return out;
}

}  // namespace

TEST_CASE("conformance: ONNX LayerNormalization and RMSNormalization (38 cases)") {
  auto ln = conformance::load_all("layer_norm");
  auto rms = conformance::load_all("rms_norm");
  REQUIRE(ln.size() == 19);
  REQUIRE(rms.size() == 19);
  test::for_each_isa([&](simdnorm::isa) {
    for (auto* cases : {&ln, &rms}) {
      for (const conformance::onnx_case& c : *cases) {
        INFO("case " << c.name);
        const auto& x = c.inputs.at("x");
        REQUIRE(!x.data.empty());
        const int rank = int(x.shape.size());
        const int axis = int(c.attr_num("axis", -1));
        const int nn = axis >= 0 ? rank - axis : -axis;  // normalized_ndim
        const std::vector<std::int64_t> norm_shape(x.shape.end() - nn, x.shape.end());
        std::vector<float> g, b;
        if (c.inputs.count("weight")) g = expand_to(c.inputs.at("weight"), norm_shape);
        if (c.inputs.count("bias")) b = expand_to(c.inputs.at("bias"), norm_shape);
        std::vector<float> y(x.data.size()), mean(x.data.size()), rstd(x.data.size());
        simdnorm::norm_args a;
        a.x = x.data.data();
        a.y = y.data();
        a.gamma = g.empty() ? nullptr : g.data();
        a.beta = b.empty() ? nullptr : b.data();
        const float eps = float(c.attr_num("epsilon", 1e-5));
        simdnorm::status s;
        if (c.op == "layer_norm") {
          a.mean = mean.data();
          a.rstd = rstd.data();
          simdnorm::layer_norm_params p;
          p.normalized_ndim = nn;
          p.eps = eps;
          s = simdnorm::layer_norm(conformance::desc_of(x.shape), conformance::desc_of(x.shape), p,
                                   a);
        } else {
          simdnorm::rms_norm_params p;
          p.normalized_ndim = nn;
          p.eps = eps;
          s = simdnorm::rms_norm(conformance::desc_of(x.shape), conformance::desc_of(x.shape), p,
                                 a);
        }
        REQUIRE_MESSAGE(s.ok(), s.message());
        conformance::check_output(c, "y", y.data());
        conformance::check_optional_output(c, "saved_mean", mean.data());
        conformance::check_optional_output(c, "saved_invstd", rstd.data());
      }
    }
  });
}
