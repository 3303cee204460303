// Dispatch picks the expected ISA. CI runs the suite under `qemu-x86_64 -cpu Haswell` (no
// AVX-512), `-cpu Nehalem` (no AVX2), natively and under qemu-aarch64, each time with
// SIMDNORM_EXPECT_ISA naming the ISA the default selection must pick there; a wrong pick fails.
// The test cases that compare with a variable of the environment are skipped (doctest::skip)
// when it is not set; the ctest entries that set it run them (tests/CMakeLists.txt).
#include <cstdlib>
#include <string>

#include "test_util.hpp"

namespace {

using simdnorm::tensor_desc;

simdnorm::status make_plan(simdnorm::plan* p) {
  return simdnorm::plan::rms_norm(tensor_desc::contiguous({2, 8}), tensor_desc::contiguous({2, 8}),
                                  {}, p);
}

/// SIMDNORM_ISA when it is set, an ISA name, and runnable here; else false.
bool runnable_env_isa(simdnorm::isa* out) {
  return test::env_set("SIMDNORM_ISA") &&
         simdnorm::isa_from_name(std::getenv("SIMDNORM_ISA"), out) && simdnorm::cpu_supports(*out);
}

/// SIMDNORM_ISA is set but cannot be honoured: as documented, the best runnable ISA is reported
/// and plan creation fails until force_isa.
void check_unhonoured_env_isa() {
  INFO("SIMDNORM_ISA=" << std::string(std::getenv("SIMDNORM_ISA")) << " cannot run here");
  CHECK(simdnorm::active_isa() == test::runnable_isas().front());
  simdnorm::plan p;
  const simdnorm::status s = make_plan(&p);
  CHECK(s.code() == simdnorm::status_code::unsupported_isa);
  CHECK(std::string(s.message()).find("SIMDNORM_ISA") != std::string::npos);
  CHECK_FALSE(p.valid());
}

}  // namespace

TEST_CASE("isa: without a forced ISA, plans use SIMDNORM_ISA when it can run, else the best") {
  simdnorm::reset_isa();  // undo any force_isa of earlier test cases in this process
  simdnorm::isa want = test::runnable_isas().front();
  if (test::env_set("SIMDNORM_ISA") && !runnable_env_isa(&want)) {
    check_unhonoured_env_isa();
  } else {
    CHECK(simdnorm::active_isa() == want);
    simdnorm::plan p;
    REQUIRE(make_plan(&p).ok());
    CHECK(p.kernel_isa() == want);
  }
}

TEST_CASE("isa: the default selection is the one SIMDNORM_EXPECT_ISA names" *
          doctest::skip(!test::env_set("SIMDNORM_EXPECT_ISA"))) {
  const std::string want = std::getenv("SIMDNORM_EXPECT_ISA");
  simdnorm::isa expected, forced;
  REQUIRE_MESSAGE(simdnorm::isa_from_name(want.c_str(), &expected), "SIMDNORM_EXPECT_ISA=" << want);
  simdnorm::reset_isa();
  const bool overridden = test::env_set("SIMDNORM_ISA");
  if (overridden && !runnable_env_isa(&forced)) {
    check_unhonoured_env_isa();  // e.g. env_isa_avx512bw on a CPU without AVX-512
  } else {
    CHECK(std::string(simdnorm::isa_name(simdnorm::active_isa())) == want);
    CHECK(simdnorm::cpu_supports(expected));
    if (!overridden)  // the expected ISA is the best one here
      CHECK(std::string(simdnorm::isa_name(test::runnable_isas().front())) == want);
    simdnorm::plan p;
    REQUIRE(make_plan(&p).ok());
    CHECK(std::string(simdnorm::isa_name(p.kernel_isa())) == want);
  }
}

TEST_CASE("isa: SIMDNORM_ISA naming an unknown ISA makes plan creation fail with a clear message" *
          doctest::skip(!test::env_set("SIMDNORM_EXPECT_ISA_ERROR"))) {
  simdnorm::reset_isa();
  simdnorm::plan p;
  const simdnorm::status s = make_plan(&p);
  CHECK(s.code() == simdnorm::status_code::unsupported_isa);
  CHECK(std::string(s.message()).find("SIMDNORM_ISA") != std::string::npos);
  MESSAGE(std::string(s.message()));
  // force_isa overrides the broken environment.
  const test::forced_isa scalar(simdnorm::isa::scalar);
  REQUIRE(scalar.status().ok());
  CHECK(make_plan(&p).ok());
}

TEST_CASE("isa: names round-trip, and forcing an ISA that is not compiled or cannot run fails") {
  for (simdnorm::isa i : test::runnable_isas()) {
    simdnorm::isa back;
    REQUIRE(simdnorm::isa_from_name(simdnorm::isa_name(i), &back));
    CHECK(back == i);
  }
  simdnorm::isa out;
  CHECK_FALSE(simdnorm::isa_from_name("avx3", &out));
  CHECK_FALSE(simdnorm::isa_from_name(nullptr, &out));
  const simdnorm::isa before = simdnorm::active_isa();
  simdnorm::isa foreign;
  REQUIRE_MESSAGE(test::foreign_isa(&foreign), "every named ISA runs here");
  INFO("foreign ISA: " << std::string(simdnorm::isa_name(foreign)));
  const simdnorm::status s = simdnorm::force_isa(foreign);
  CHECK(s.code() == simdnorm::status_code::unsupported_isa);
  CHECK(std::string(s.message()).find(simdnorm::isa_name(foreign)) != std::string::npos);
  CHECK(simdnorm::active_isa() == before);
  CHECK(simdnorm::force_isa(static_cast<simdnorm::isa>(42)).code() ==
        simdnorm::status_code::unsupported_isa);
}
