// The README's C++ example, built and run as a test so that it keeps compiling.
#include <simdnorm/simdnorm.hpp>

#include <cstdio>
#include <vector>

int main() {
  const std::int64_t tokens = 128, embedding = 768;
  std::vector<float> h(tokens * embedding, 1.5f), gamma(embedding, 1.f), beta(embedding, 0.f);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] += float(i % 7);

  // A plan validates the shape once and picks the kernels; run it as often as needed.
  const auto desc = simdnorm::tensor_desc::contiguous({tokens, embedding});
  simdnorm::plan ln;
  simdnorm::status s =
      simdnorm::plan::layer_norm(desc, desc, {/*normalized_ndim=*/1, /*eps=*/1e-5f}, &ln);
  if (!s) return std::fprintf(stderr, "%s\n", s.message()), 1;

  simdnorm::norm_args args;
  args.x = h.data();
  args.y = h.data();  // in place
  args.gamma = gamma.data();
  args.beta = beta.data();
  s = ln.execute(args);  // oneTBB in the caller's arena; ln.run(args, 0, b, e) for a host pool
  if (!s) return std::fprintf(stderr, "%s\n", s.message()), 1;
  std::printf("y[0] = %f on %s\n", h[0], simdnorm::isa_name(ln.kernel_isa()));
}
