// Dispatch picks the expected ISA. CI runs the suite under `qemu-x86_64 -cpu Haswell` (no
// AVX-512), `-cpu Nehalem` (no AVX2), natively and under qemu-aarch64, each time with
// SIMDNORM_EXPECT_ISA naming the ISA the default selection must pick there; a wrong pick fails.
#include <cstdlib>
#include <string>

#include "test_util.hpp"

TEST_CASE("isa: the default selection is the one SIMDNORM_EXPECT_ISA names") {
  const char* want = std::getenv("SIMDNORM_EXPECT_ISA");
  if (want == nullptr || *want == '\0') {
    MESSAGE("SIMDNORM_EXPECT_ISA is not set: nothing to compare");
    return;
  }
  simdnorm::isa expected, forced;
  REQUIRE_MESSAGE(simdnorm::isa_from_name(want, &expected), "SIMDNORM_EXPECT_ISA=" << std::string(want));
  const char* env = std::getenv("SIMDNORM_ISA");
  const bool overridden = env != nullptr && *env != '\0';
  if (overridden && !(simdnorm::isa_from_name(env, &forced) && simdnorm::cpu_supports(forced))) {
    // Plan creation fails by design here (test_api.cpp checks that); nothing to compare.
    MESSAGE("SIMDNORM_ISA=" << std::string(env) << " cannot run here: nothing to compare");
    return;
  }
  simdnorm::reset_isa();  // undo any force_isa of earlier test cases in this process
  CHECK(std::string(simdnorm::isa_name(simdnorm::active_isa())) == want);
  CHECK(simdnorm::cpu_supports(expected));
  if (!overridden)  // the expected ISA is the best one here
    CHECK(std::string(simdnorm::isa_name(test::runnable_isas().front())) == want);
  simdnorm::plan p;
  REQUIRE(simdnorm::plan::rms_norm(simdnorm::tensor_desc::contiguous({2, 8}),
                                   simdnorm::tensor_desc::contiguous({2, 8}), {}, &p).ok());
  CHECK(std::string(simdnorm::isa_name(p.kernel_isa())) == want);
}

TEST_CASE("isa: names round-trip and the selection API refuses what cannot run") {
  for (simdnorm::isa i : test::runnable_isas()) {
    simdnorm::isa back;
    REQUIRE(simdnorm::isa_from_name(simdnorm::isa_name(i), &back));
    CHECK(back == i);
  }
  simdnorm::isa out;
  CHECK_FALSE(simdnorm::isa_from_name("avx3", &out));
  CHECK_FALSE(simdnorm::isa_from_name(nullptr, &out));
  const simdnorm::isa before = simdnorm::active_isa();
#if defined(__aarch64__)
  const simdnorm::isa foreign = simdnorm::isa::avx2_fma;
#else
  const simdnorm::isa foreign = simdnorm::isa::neon64;
#endif
  const simdnorm::status s = simdnorm::force_isa(foreign);
  CHECK(s.code() == simdnorm::status_code::unsupported_isa);
  CHECK(simdnorm::active_isa() == before);
}
