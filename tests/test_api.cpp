// The plan API: one test per error path (clear status, nothing written), and bitwise
// invariance of the outputs under any partition of tasks, executor and thread count.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <cstdlib>
#include <thread>

#include "test_util.hpp"

namespace {

using simdnorm::status_code;
using simdnorm::tensor_desc;

tensor_desc mat(std::int64_t r, std::int64_t c) { return tensor_desc::contiguous({r, c}); }

// Runs make(plan*) and expects `code`, a message, and an untouched output plan.
template <class Make>
void expect_plan_error(Make make, status_code code) {
  simdnorm::plan p;
  const simdnorm::status s = make(&p);
  CHECK(s.code() == code);
  CHECK(std::string(s.message()).size() > 10);
  CHECK_FALSE(p.valid());
  MESSAGE(std::string(simdnorm::to_string(s.code())) << ": " << std::string(s.message()));
}

simdnorm::status ln(const tensor_desc& x, const tensor_desc& y, int nd, float eps, simdnorm::plan* p) {
  simdnorm::layer_norm_params prm;
  prm.normalized_ndim = nd;
  prm.eps = eps;
  return simdnorm::plan::layer_norm(x, y, prm, p);
}

struct run_fixture {
  std::vector<float> x = std::vector<float>(4 * 8, 1.5f), y = std::vector<float>(4 * 8, 7.25f);
  simdnorm::plan p;
  run_fixture() { REQUIRE(simdnorm::plan::layer_norm(mat(4, 8), mat(4, 8), {}, &p).ok()); }
  bool y_untouched() const {
    for (float v : y)
      if (v != 7.25f) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("errors: plan creation rejects bad shapes, parameters and layouts") {
  SUBCASE("zero dim") { expect_plan_error([](auto* p) { return ln(mat(0, 8), mat(0, 8), 1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("negative dim") { expect_plan_error([](auto* p) { return ln(mat(4, -8), mat(4, -8), 1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("ndim 0") { expect_plan_error([](auto* p) { return ln(tensor_desc{}, tensor_desc{}, 1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("too many dims") {
    const tensor_desc d = tensor_desc::contiguous({1, 1, 1, 1, 1, 1, 1, 1, 2});
    CHECK(d.ndim == simdnorm::max_dims + 1);
    expect_plan_error([&](auto* p) { return ln(d, d, 1, 1e-5f, p); }, status_code::invalid_argument);
  }
  SUBCASE("normalized_ndim 0") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 8), 0, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("normalized_ndim > ndim") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 8), 3, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("normalized_ndim negative") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 8), -1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("eps negative") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 8), 1, -1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("eps NaN") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 8), 1, std::nanf(""), p); }, status_code::invalid_argument); }
  SUBCASE("x and y shapes differ") { expect_plan_error([](auto* p) { return ln(mat(4, 8), mat(4, 9), 1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("x and y ranks differ") { expect_plan_error([](auto* p) { return ln(mat(4, 8), tensor_desc::contiguous({32}), 1, 1e-5f, p); }, status_code::invalid_argument); }
  SUBCASE("y rows overlap") {
    tensor_desc y = mat(4, 8);
    y.strides[0] = 4;
    expect_plan_error([&](auto* p) { return ln(mat(4, 8), y, 1, 1e-5f, p); }, status_code::unsupported_layout);
  }
  SUBCASE("y rows all alias (stride 0)") {
    tensor_desc y = mat(4, 8);
    y.strides[0] = 0;
    expect_plan_error([&](auto* p) { return ln(mat(4, 8), y, 1, 1e-5f, p); }, status_code::unsupported_layout);
  }
  SUBCASE("normalized block not dense") {
    tensor_desc x = mat(4, 8);
    x.strides[1] = 2;
    x.strides[0] = 16;
    expect_plan_error([&](auto* p) { return ln(x, mat(4, 8), 1, 1e-5f, p); }, status_code::unsupported_layout);
  }
  SUBCASE("normalized block padded inside (2 normalized dims)") {
    tensor_desc x = tensor_desc::contiguous({2, 3, 4});
    x.strides[1] = 5;
    x.strides[0] = 15;
    expect_plan_error([&](auto* p) { return ln(x, tensor_desc::contiguous({2, 3, 4}), 2, 1e-5f, p); }, status_code::unsupported_layout);
  }
  SUBCASE("negative stride") {
    tensor_desc x = mat(4, 8);
    x.strides[0] = -8;
    expect_plan_error([&](auto* p) { return ln(x, mat(4, 8), 1, 1e-5f, p); }, status_code::unsupported_layout);
  }
  SUBCASE("sizes overflow") {
    const std::int64_t big = std::int64_t(1) << 40;
    expect_plan_error([&](auto* p) { return ln(mat(big, big), mat(big, big), 1, 1e-5f, p); }, status_code::size_overflow);
  }
  SUBCASE("byte size overflows") {
    const std::int64_t big = std::int64_t(1) << 61;
    expect_plan_error([&](auto* p) { return ln(tensor_desc::contiguous({big}), tensor_desc::contiguous({big}), 1, 1e-5f, p); }, status_code::size_overflow);
  }
  SUBCASE("unknown store policy") {
    simdnorm::layer_norm_params prm;
    prm.stores = static_cast<simdnorm::store_policy>(9);
    expect_plan_error([&](auto* p) { return simdnorm::plan::layer_norm(mat(4, 8), mat(4, 8), prm, p); }, status_code::invalid_argument);
  }
  SUBCASE("null output plan") {
    CHECK(simdnorm::plan::layer_norm(mat(4, 8), mat(4, 8), {}, nullptr).code() == status_code::invalid_argument);
    CHECK(simdnorm::plan::rms_norm(mat(4, 8), mat(4, 8), {}, nullptr).code() == status_code::invalid_argument);
  }
  SUBCASE("rms_norm validates the same way") {
    simdnorm::rms_norm_params prm;
    prm.eps = -1.f;
    expect_plan_error([&](auto* p) { return simdnorm::plan::rms_norm(mat(4, 8), mat(4, 8), prm, p); }, status_code::invalid_argument);
  }
}

TEST_CASE("errors: run and execute reject bad arguments and write nothing") {
  run_fixture f;
  simdnorm::norm_args a;
  a.x = f.x.data();
  a.y = f.y.data();
  SUBCASE("null x") {
    a.x = nullptr;
    CHECK(f.p.execute(a).code() == status_code::invalid_argument);
    CHECK(f.p.run(a, 0, 0, 1).code() == status_code::invalid_argument);
  }
  SUBCASE("null y") {
    a.y = nullptr;
    CHECK(f.p.execute(a).code() == status_code::invalid_argument);
  }
  SUBCASE("y partially overlaps x") {
    std::vector<float> buf(64, 7.25f);
    a.x = buf.data();
    a.y = buf.data() + 3;
    CHECK(f.p.execute(a).code() == status_code::invalid_argument);
    for (std::size_t i = 0; i < 3; ++i) CHECK(buf[i] == 7.25f);
  }
  SUBCASE("in place with different strides") {
    tensor_desc y = mat(4, 8);
    y.strides[0] = 9;
    simdnorm::plan p;
    REQUIRE(simdnorm::plan::layer_norm(mat(4, 8), y, {}, &p).ok());
    std::vector<float> buf(64, 7.25f);
    a.x = buf.data();
    a.y = buf.data();
    CHECK(p.execute(a).code() == status_code::invalid_argument);
  }
  SUBCASE("phase out of range") { CHECK(f.p.run(a, 1, 0, 1).code() == status_code::invalid_argument); }
  SUBCASE("task range out of range") {
    CHECK(f.p.run(a, 0, 0, f.p.num_tasks() + 1).code() == status_code::invalid_argument);
    CHECK(f.p.run(a, 0, 1, 0).code() == status_code::invalid_argument);
  }
  SUBCASE("empty plan") {
    simdnorm::plan empty;
    CHECK(empty.execute(a).code() == status_code::invalid_argument);
    CHECK(empty.run(a, 0, 0, 0).code() == status_code::invalid_argument);
    CHECK(empty.num_tasks() == 0);
  }
  SUBCASE("rms_norm has no beta and no mean output") {
    simdnorm::plan p;
    REQUIRE(simdnorm::plan::rms_norm(mat(4, 8), mat(4, 8), {}, &p).ok());
    std::vector<float> b(8), mean(4);
    a.beta = b.data();
    CHECK(p.execute(a).code() == status_code::invalid_argument);
    a.beta = nullptr;
    a.mean = mean.data();
    CHECK(p.execute(a).code() == status_code::invalid_argument);
  }
  SUBCASE("an executor that throws") {
    struct throwing_executor final : simdnorm::executor {
      std::size_t concurrency() const noexcept override { return 2; }
      void parallel_for(std::size_t, task_fn, void*) override { throw std::runtime_error("pool down"); }
    } ex;
    std::vector<float> x(256 * 1024, 1.f), y(256 * 1024, 7.25f);
    simdnorm::plan p;
    REQUIRE(simdnorm::plan::layer_norm(mat(256, 1024), mat(256, 1024), {}, &p).ok());
    REQUIRE(p.num_tasks() > 1);
    a.x = x.data();
    a.y = y.data();
    CHECK(p.execute(a, &ex).code() == status_code::internal_error);
    a.x = f.x.data();
    a.y = f.y.data();
  }
  CHECK(f.y_untouched());
}

TEST_CASE("errors: forcing an ISA that is not compiled or cannot run is refused") {
#if defined(__aarch64__)
  const simdnorm::isa foreign = simdnorm::isa::avx512bw;
#else
  const simdnorm::isa foreign = simdnorm::isa::neon64;
#endif
  const simdnorm::isa before = simdnorm::active_isa();
  const simdnorm::status s = simdnorm::force_isa(foreign);
  CHECK(s.code() == status_code::unsupported_isa);
  CHECK(std::string(s.message()).find(simdnorm::isa_name(foreign)) != std::string::npos);
  CHECK(simdnorm::active_isa() == before);
  CHECK(simdnorm::force_isa(static_cast<simdnorm::isa>(42)).code() == status_code::unsupported_isa);
}

TEST_CASE("threads: outputs are bitwise identical for any partition, executor and thread count") {
  struct shape { std::int64_t rows, cols; };
  const shape shapes[] = {{1, 65537}, {3, 4099}, {1000, 64}, {517, 768}, {64, 16384}, {2000, 33}};
  test::for_each_isa([&](simdnorm::isa) {
    for (const shape& sh : shapes) {
      if (test::quick() && sh.rows * sh.cols > 300000) continue;  // emulated: smaller shapes
      for (bool rms : {false, true}) {
        CAPTURE(sh.rows);
        CAPTURE(sh.cols);
        CAPTURE(rms);
        const std::size_t n = std::size_t(sh.rows * sh.cols);
        std::vector<float> x(n), g(std::size_t(sh.cols)), b(std::size_t(sh.cols));
        test::fill_normal(x.data(), n, 41, 100.0, 3.0);
        test::fill_normal(g.data(), g.size(), 42);
        test::fill_normal(b.data(), b.size(), 43);
        simdnorm::plan p;
        const tensor_desc d = mat(sh.rows, sh.cols);
        REQUIRE((rms ? simdnorm::plan::rms_norm(d, d, {}, &p) : simdnorm::plan::layer_norm(d, d, {}, &p)).ok());
        auto run_with = [&](auto&& drive) {
          std::vector<float> y(n), mean(std::size_t(sh.rows)), rstd(std::size_t(sh.rows));
          simdnorm::norm_args a;
          a.x = x.data();
          a.y = y.data();
          a.gamma = g.data();
          a.beta = rms ? nullptr : b.data();
          a.mean = rms ? nullptr : mean.data();
          a.rstd = rstd.data();
          drive(a);
          y.insert(y.end(), mean.begin(), mean.end());
          y.insert(y.end(), rstd.begin(), rstd.end());
          return y;
        };
        const auto ref = run_with([&](const simdnorm::norm_args& a) { REQUIRE(p.run(a, 0, 0, p.num_tasks()).ok()); });
        for (std::size_t chunks : {1, 2, 7}) {
          test::chunked_thread_executor ex(chunks);
          const auto y = run_with([&](const simdnorm::norm_args& a) { REQUIRE(p.execute(a, &ex).ok()); });
          CHECK(test::bitwise_equal(y.data(), ref.data(), ref.size()));
        }
        const auto y_tbb = run_with([&](const simdnorm::norm_args& a) { REQUIRE(p.execute(a).ok()); });
        CHECK(test::bitwise_equal(y_tbb.data(), ref.data(), ref.size()));
        const auto y_serial = run_with([&](const simdnorm::norm_args& a) { REQUIRE(p.execute(a, &simdnorm::serial_executor()).ok()); });
        CHECK(test::bitwise_equal(y_serial.data(), ref.data(), ref.size()));
        // One task per run call, in reverse order, from three host threads at once.
        const auto y_host = run_with([&](const simdnorm::norm_args& a) {
          std::vector<std::thread> ts;
          for (std::size_t t = 0; t < 3; ++t)
            ts.emplace_back([&, t] {
              for (std::size_t k = p.num_tasks(); k-- > 0;)
                if (k % 3 == t) (void)p.run(a, 0, k, k + 1);
            });
          for (auto& th : ts) th.join();
        });
        CHECK(test::bitwise_equal(y_host.data(), ref.data(), ref.size()));
        // The same rows in a taller batch (a different task split) give the same bits.
        if (!rms && sh.rows > 1) {
          simdnorm::plan p1;
          REQUIRE(simdnorm::plan::layer_norm(mat(1, sh.cols), mat(1, sh.cols), {}, &p1).ok());
          const std::int64_t r = sh.rows - 1;
          std::vector<float> y1(std::size_t(sh.cols));
          simdnorm::norm_args a;
          a.x = x.data() + r * sh.cols;
          a.y = y1.data();
          a.gamma = g.data();
          a.beta = b.data();
          REQUIRE(p1.execute(a).ok());
          CHECK(test::bitwise_equal(y1.data(), ref.data() + r * sh.cols, y1.size()));
        }
      }
    }
  });
}

TEST_CASE("threads: streaming stores give the same bits as regular stores") {
  test::for_each_isa([](simdnorm::isa) {
    for (std::int64_t cols : {64, 100, 4099}) {
      const std::int64_t rows = 37;
      std::vector<float> x(std::size_t(rows * cols)), y1(x.size()), y2(x.size());
      test::fill_normal(x.data(), x.size(), 5);
      simdnorm::layer_norm_params reg, str;
      reg.stores = simdnorm::store_policy::regular;
      str.stores = simdnorm::store_policy::streaming;
      simdnorm::norm_args a;
      a.x = x.data();
      a.y = y1.data();
      REQUIRE(simdnorm::layer_norm(mat(rows, cols), mat(rows, cols), reg, a).ok());
      a.y = y2.data() ;
      REQUIRE(simdnorm::layer_norm(mat(rows, cols), mat(rows, cols), str, a).ok());
      CHECK(test::bitwise_equal(y1.data(), y2.data(), y1.size()));
    }
  });
}

TEST_CASE("isa: SIMDNORM_ISA naming an unknown ISA makes plan creation fail with a clear message") {
  if (std::getenv("SIMDNORM_EXPECT_ISA_ERROR") == nullptr) return;  // set by the env_isa_invalid test
  simdnorm::reset_isa();
  simdnorm::plan p;
  const simdnorm::status s = simdnorm::plan::layer_norm(mat(2, 8), mat(2, 8), {}, &p);
  CHECK(s.code() == status_code::unsupported_isa);
  CHECK(std::string(s.message()).find("SIMDNORM_ISA") != std::string::npos);
  MESSAGE(std::string(s.message()));
  // force_isa overrides the broken environment.
  REQUIRE(simdnorm::force_isa(simdnorm::isa::scalar).ok());
  CHECK(simdnorm::plan::layer_norm(mat(2, 8), mat(2, 8), {}, &p).ok());
  simdnorm::reset_isa();
}
