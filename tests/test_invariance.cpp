// Properties every op has on every runnable ISA, written once over a table of the ops
// (LayerNorm, RMSNorm, BatchNorm inference and training in NCHW and NHWC, GroupNorm and
// InstanceNorm in NCHW and NHWC, MeanVarianceNormalization):
// - the outputs (y, mean, rstd, running statistics) are bitwise identical under any partition
//   of the tasks, executor and thread count;
// - streaming (non-temporal) stores change where y goes through the caches, never its bits;
// - a NaN or Inf changes nothing outside its statistics unit (row, channel, group, plane).
#include <cmath>
#include <limits>
#include <thread>

#include "test_util.hpp"

namespace {

using simdnorm::tensor_desc;

/// A problem in logical [N, C, S] order: N * C planes of S (row ops: N rows of C * S).
struct shape3 {
  std::size_t N, C, S;
  std::size_t numel() const { return N * C * S; }
};

enum class kind { layer_norm, rms_norm, bn_inference, bn_training, group_norm, instance_norm, mvn };

struct op {
  const char* name;
  kind k;
  bool nhwc = false;
  bool rows() const { return k == kind::layer_norm || k == kind::rms_norm; }
  bool channels() const { return !rows(); }
};

const op kOps[] = {
    {"layer_norm", kind::layer_norm},
    {"rms_norm", kind::rms_norm},
    {"batch_norm inference nchw", kind::bn_inference},
    {"batch_norm inference nhwc", kind::bn_inference, true},
    {"batch_norm training nchw", kind::bn_training},
    {"batch_norm training nhwc", kind::bn_training, true},
    {"group_norm nchw", kind::group_norm},
    {"group_norm nhwc", kind::group_norm, true},
    {"instance_norm nchw", kind::instance_norm},
    {"instance_norm nhwc", kind::instance_norm, true},
    {"mean_variance_norm", kind::mvn},
};

std::size_t groups(const shape3& s) { return s.C % 2 == 0 ? s.C / 2 : s.C; }

/// The statistics unit of logical element (n, c, i), and how many there are.
std::size_t unit_of(const op& o, const shape3& s, std::size_t n, std::size_t c) {
  switch (o.k) {
    case kind::layer_norm:
    case kind::rms_norm: return n;
    case kind::bn_inference:
    case kind::bn_training:
    case kind::mvn: return c;
    case kind::group_norm: return n * groups(s) + c / (s.C / groups(s));
    case kind::instance_norm: return n * s.C + c;
  }
  return 0;
}
std::size_t num_units(const op& o, const shape3& s) { return unit_of(o, s, s.N - 1, s.C - 1) + 1; }

/// Index of logical element (n, c, i) in the op's memory layout.
std::size_t index_of(const op& o, const shape3& s, std::size_t n, std::size_t c, std::size_t i) {
  return o.nhwc ? (n * s.S + i) * s.C + c : (n * s.C + c) * s.S + i;
}

tensor_desc desc(const op& o, const shape3& s) {
  const auto n = std::int64_t(s.N), c = std::int64_t(s.C), sp = std::int64_t(s.S);
  if (o.rows()) return tensor_desc::contiguous({n, c * sp});
  return o.nhwc ? tensor_desc::contiguous({n, sp, c}) : tensor_desc::contiguous({n, c, sp});
}

/// One call's inputs besides x, and every output it writes.
struct call {
  std::vector<float> gamma, beta, rm0, rv0;  // affine and (BatchNorm) the running statistics
  std::vector<float> y, mean, rstd, rm, rv;  // outputs; rm, rv start as rm0, rv0
  /// Every output in one vector, for bitwise comparison.
  std::vector<float> all() const {
    std::vector<float> v = y;
    for (const auto* o : {&mean, &rstd, &rm, &rv}) v.insert(v.end(), o->begin(), o->end());
    return v;
  }
};

struct variant {
  simdnorm::store_policy stores = simdnorm::store_policy::automatic;
  bool relu = false;  // BatchNorm only
};

/// Makes the plan of `o` on `s`; `c` holds gamma, beta and the running statistics the plan
/// reads (BatchNorm inference reads them while it is made).
simdnorm::status make_plan(const op& o, const shape3& s, const call& c, const variant& v,
                           simdnorm::plan* p) {
  const tensor_desc d = desc(o, s);
  const auto layout = o.nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
  switch (o.k) {
    case kind::layer_norm: {
      simdnorm::layer_norm_params prm;
      prm.stores = v.stores;
      return simdnorm::plan::layer_norm(d, d, prm, p);
    }
    case kind::rms_norm: {
      simdnorm::rms_norm_params prm;
      prm.stores = v.stores;
      return simdnorm::plan::rms_norm(d, d, prm, p);
    }
    case kind::bn_inference:
    case kind::bn_training: {
      simdnorm::batch_norm_params prm;
      prm.layout = layout;
      prm.stores = v.stores;
      prm.fuse_relu = v.relu;
      prm.training = o.k == kind::bn_training;
      if (!prm.training) {
        prm.running_mean = c.rm0.data(), prm.running_var = c.rv0.data();
        prm.gamma = c.gamma.data(), prm.beta = c.beta.data();
      }
      return simdnorm::plan::batch_norm(d, d, prm, p);
    }
    case kind::group_norm: {
      simdnorm::group_norm_params prm;
      prm.num_groups = int(groups(s));
      prm.layout = layout;
      prm.stores = v.stores;
      return simdnorm::plan::group_norm(d, d, prm, p);
    }
    case kind::instance_norm: {
      simdnorm::instance_norm_params prm;
      prm.layout = layout;
      prm.stores = v.stores;
      return simdnorm::plan::instance_norm(d, d, prm, p);
    }
    case kind::mvn: {
      simdnorm::mean_variance_norm_params prm;  // statistics per channel, as BatchNorm
      prm.num_axes = 2;
      prm.axes[0] = 0, prm.axes[1] = 2;
      prm.stores = v.stores;
      return simdnorm::plan::mean_variance_norm(d, d, prm, p);
    }
  }
  return simdnorm::status::error(simdnorm::status_code::invalid_argument, "no such op");
}

/// Inputs for `o` on `s` (seeded) and output buffers for the arguments the op takes.
call make_call(const op& o, const shape3& s, std::uint32_t seed) {
  call c;
  const std::size_t affine = o.rows() ? s.C * s.S : s.C;
  const std::size_t stats = o.k == kind::layer_norm || o.k == kind::rms_norm ? s.N
                            : o.k == kind::group_norm                        ? s.N * groups(s)
                            : o.k == kind::instance_norm                     ? s.N * s.C
                                                                             : s.C;
  c.y.assign(s.numel(), 7.25f);
  if (o.k != kind::mvn) {
    c.gamma.resize(affine);
    test::fill_normal(c.gamma.data(), affine, seed, 1.0, 0.5);
  }
  if (o.k != kind::mvn && o.k != kind::rms_norm) {
    c.beta.resize(affine);
    test::fill_normal(c.beta.data(), affine, seed + 1);
  }
  if (o.k == kind::bn_inference || o.k == kind::bn_training) {
    c.rm0.resize(s.C);
    test::fill_normal(c.rm0.data(), s.C, seed + 2);
    c.rv0.assign(s.C, 1.5f);
    if (o.k == kind::bn_training) c.rm = c.rm0, c.rv = c.rv0;
  }
  if (o.k != kind::mvn && o.k != kind::bn_inference) c.rstd.assign(stats, -1.f);
  if (o.k != kind::mvn && o.k != kind::bn_inference && o.k != kind::rms_norm)
    c.mean.assign(stats, -1.f);
  return c;
}

test::any_args args_of(const op& o, const float* x, call& c) {
  test::any_args a;
  a.x = x;
  a.y = c.y.data();
  if (o.k == kind::bn_inference) return a;  // folded into the plan
  auto ptr = [](std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  a.gamma = ptr(c.gamma), a.beta = ptr(c.beta), a.mean = ptr(c.mean), a.rstd = ptr(c.rstd);
  a.running_mean = ptr(c.rm), a.running_var = ptr(c.rv);
  return a;
}

/// Runs the plan's tasks some way: every driver must give the same bits.
struct driver {
  const char* name;
  void (*drive)(const simdnorm::plan& p, const test::any_args& a);
};

void all_tasks_inline(const simdnorm::plan& p, const test::any_args& a) {
  test::buffer ws(p.workspace_bytes() / sizeof(float) + 1);
  test::any_args b = a;
  b.workspace = ws.data();
  for (std::size_t ph = 0; ph < p.num_phases(); ++ph)
    REQUIRE(test::run_any(p, b, ph, 0, p.num_tasks(ph)).ok());
}

/// One task per run call, in reverse order, from three host threads at once (per phase).
void host_threads(const simdnorm::plan& p, const test::any_args& a) {
  test::buffer ws(p.workspace_bytes() / sizeof(float) + 1);
  test::any_args b = a;
  b.workspace = ws.data();
  for (std::size_t ph = 0; ph < p.num_phases(); ++ph) {
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < 3; ++t)
      ts.emplace_back([&, t] {
        for (std::size_t k = p.num_tasks(ph); k-- > 0;)
          if (k % 3 == t) (void)test::run_any(p, b, ph, k, k + 1);
      });
    for (auto& th : ts) th.join();
  }
}

template <std::size_t Chunks>
void chunked(const simdnorm::plan& p, const test::any_args& a) {
  test::chunked_thread_executor ex(Chunks);
  REQUIRE(test::execute_any(p, a, &ex).ok());
}

const driver kDrivers[] = {
    {"serial executor",
     [](const simdnorm::plan& p, const test::any_args& a) {
       REQUIRE(test::execute_any(p, a, &simdnorm::serial_executor()).ok());
     }},
    {"default executor", [](const simdnorm::plan& p,
                            const test::any_args& a) { REQUIRE(test::execute_any(p, a).ok()); }},
    {"1 thread", chunked<1>},
    {"2 threads", chunked<2>},
    {"7 threads", chunked<7>},
    {"host threads, one task per run, reversed", host_threads},
};

/// Shapes of the thread test: split rows and channels, many small units, long rows. The row
/// shapes are all above the row plans' inline size (kInlineElements, src/tuning.hpp), so that
/// they make several tasks.
std::vector<shape3> thread_shapes(const op& o) {
  std::vector<shape3> out;
  if (o.rows()) {
    for (const shape3& s : {shape3{1, 1, 131073}, shape3{33, 1, 4099}, shape3{2500, 1, 64},
                            shape3{517, 1, 768}, shape3{64, 1, 16384}, shape3{4001, 1, 33}})
      if (!test::quick() || s.numel() <= 300000) out.push_back(s);  // emulated: smaller shapes
    return out;
  }
  // C = 1, 3: channels split into parts; C = 64 with N = 1, 3: many groups per task;
  // C = 520 on NHWC: several blocks of the vector fold
  for (const shape3& s : {shape3{5, 1, 12544}, shape3{5, 3, 12544}, shape3{5, 64, 49},
                          shape3{1, 64, 784}, shape3{3, 64, 784}, shape3{4, 520, 64}})
    if (!test::quick() || s.numel() <= 200000) out.push_back(s);
  return out;
}

}  // namespace

TEST_CASE(
    "invariance: outputs are bitwise identical for any partition, executor and thread count") {
  test::for_each_isa([](simdnorm::isa) {
    for (const op& o : kOps) {
      INFO(std::string(o.name));  // doctest 2.4.9 prints a char* as a pointer
      for (const shape3& s : thread_shapes(o)) {
        CAPTURE(s.N);
        CAPTURE(s.C);
        CAPTURE(s.S);
        std::vector<float> x(s.numel());
        test::fill_normal(x.data(), x.size(), 41, 100.0, 3.0);
        const call c0 = make_call(o, s, 42);
        simdnorm::plan p;
        REQUIRE(make_plan(o, s, c0, {}, &p).ok());
        if (o.rows()) CHECK(p.num_tasks(p.num_phases() - 1) > 1);
        call ref = c0;
        all_tasks_inline(p, args_of(o, x.data(), ref));
        const std::vector<float> want = ref.all();
        for (const driver& d : kDrivers) {
          INFO(std::string(d.name));
          call c = c0;
          d.drive(p, args_of(o, x.data(), c));
          CHECK(test::bitwise_equal(c.all().data(), want.data(), want.size()));
        }
        // Row ops: the last row alone (a different task split) gives the same bits.
        if (o.rows() && s.N > 1) {
          const shape3 one{1, s.C, s.S};
          call c = make_call(o, one, 42);
          simdnorm::plan p1;
          REQUIRE(make_plan(o, one, c, {}, &p1).ok());
          REQUIRE(test::execute_any(p1, args_of(o, x.data() + (s.N - 1) * s.C * s.S, c)).ok());
          CHECK(test::bitwise_equal(c.y.data(), ref.y.data() + (s.N - 1) * s.C * s.S, c.y.size()));
        }
      }
    }
  });
}

TEST_CASE("invariance: streaming and regular stores give the same bits") {
  test::for_each_isa([](simdnorm::isa) {
    for (const op& o : kOps) {
      INFO(std::string(o.name));  // doctest 2.4.9 prints a char* as a pointer
      std::vector<shape3> shapes = {{37, 1, 64}, {37, 1, 100}, {37, 1, 4099}};
      if (o.channels()) shapes = {{5, 32, 3136}, {3, 17, 49}, {2, 3, 4096}};
      for (const shape3& s : shapes) {
        CAPTURE(s.N);
        CAPTURE(s.C);
        CAPTURE(s.S);
        test::buffer x(s.numel());  // 64-byte aligned, as y below: the streaming stores stream
        test::fill_normal(x.data(), x.size(), 777);
        std::vector<std::vector<float>> outs;
        for (auto stores : {simdnorm::store_policy::regular, simdnorm::store_policy::streaming}) {
          call c = make_call(o, s, 5);
          test::buffer y(s.numel());
          simdnorm::plan p;
          REQUIRE(make_plan(o, s, c, {stores, true}, &p).ok());
          test::any_args a = args_of(o, x.data(), c);
          a.y = y.data();
          REQUIRE(test::execute_any(p, a).ok());
          c.y.assign(y.data(), y.data() + s.numel());
          outs.push_back(c.all());
        }
        CHECK(test::bitwise_equal(outs[0].data(), outs[1].data(), outs[0].size()));
      }
    }
  });
}

// A NaN, an Inf and a -Inf in three units. Every other unit's outputs (y, mean, rstd, running
// statistics) are those of the same call without them, bit for bit. In a poisoned unit every y
// is non-finite (and BatchNorm's running mean), except where the op is elementwise (BatchNorm
// inference: only the element itself) or an Inf cannot spread (RMSNorm: x / Inf is 0).
TEST_CASE("invariance: NaN or Inf changes nothing outside its own unit") {
  test::for_each_isa([](simdnorm::isa) {
    for (const op& o : kOps) {
      INFO(std::string(o.name));  // doctest 2.4.9 prints a char* as a pointer
      for (std::size_t S : {std::size_t(1), std::size_t(49), std::size_t(3136)}) {
        const shape3 s{5, 20, S};
        CAPTURE(S);
        const float inf = std::numeric_limits<float>::infinity();
        struct poison {
          std::size_t n, c, i;
          float v;
        };
        const poison bad[] = {{1, 5, S / 2, std::numeric_limits<float>::quiet_NaN()},
                              {0, 14, 0, inf},
                              {3, 9, S - 1, -inf}};
        std::vector<float> clean(s.numel());
        test::fill_normal(clean.data(), clean.size(), 7);
        std::vector<float> x = clean;
        for (const poison& b : bad) x[index_of(o, s, b.n, b.c, b.i)] = b.v;
        const call c0 = make_call(o, s, 8);
        simdnorm::plan p;
        REQUIRE(make_plan(o, s, c0, {}, &p).ok());
        call want = c0, got = c0;
        REQUIRE(test::execute_any(p, args_of(o, clean.data(), want)).ok());
        REQUIRE(test::execute_any(p, args_of(o, x.data(), got)).ok());

        std::vector<int> poisoned(num_units(o, s), -1);  // unit -> index into bad
        for (int k = 0; k < 3; ++k) poisoned[unit_of(o, s, bad[k].n, bad[k].c)] = k;
        test::failures fails;
        for (std::size_t n = 0; n < s.N; ++n)
          for (std::size_t c = 0; c < s.C; ++c)
            for (std::size_t i = 0; i < S; ++i) {
              const std::size_t k = index_of(o, s, n, c, i), u = unit_of(o, s, n, c);
              const auto where = [&] {
                return "n " + std::to_string(n) + " c " + std::to_string(c) + " s " +
                       std::to_string(i) + ": " + std::to_string(got.y[k]);
              };
              const int pk = poisoned[u];
              const bool self = pk >= 0 && bad[pk].n == n && bad[pk].c == c && bad[pk].i == i;
              const bool spreads = o.k != kind::bn_inference &&
                                   !(o.k == kind::rms_norm && std::isinf(bad[pk < 0 ? 0 : pk].v));
              if (self || (pk >= 0 && spreads))
                fails.expect(!std::isfinite(got.y[k]), where);
              else if (pk >= 0 && o.k == kind::rms_norm)
                fails.expect(std::isfinite(got.y[k]), where);
              else
                fails.expect(std::memcmp(&got.y[k], &want.y[k], sizeof(float)) == 0, where);
            }
        const auto stats_of = [&](const std::vector<float>& g, const std::vector<float>& w,
                                  const char* what) {
          for (std::size_t u = 0; u < g.size(); ++u)  // one statistic per unit
            fails.expect(poisoned[u] >= 0 || std::memcmp(&g[u], &w[u], sizeof(float)) == 0,
                         [&] { return std::string(what) + " of unit " + std::to_string(u); });
        };
        stats_of(got.mean, want.mean, "mean");
        stats_of(got.rstd, want.rstd, "rstd");
        stats_of(got.rm, want.rm, "running_mean");
        stats_of(got.rv, want.rv, "running_var");
        for (std::size_t u = 0; u < got.rm.size(); ++u)
          if (poisoned[u] >= 0)
            fails.expect(!std::isfinite(got.rm[u]),
                         [&] { return "running_mean " + std::to_string(u); });
        CHECK_MESSAGE(fails.none(), fails.report());
      }
    }
  });
}
