// Every error path of every op, as one table: each row starts from a valid call of its op,
// applies a mutation, and expects the status code, a message naming the problem, no plan (when
// plan creation fails), and nothing written: y, the running statistics and the batch counter
// keep their values.
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "test_util.hpp"

namespace {

using simdnorm::status_code;
using code = simdnorm::status_code;
using simdnorm::tensor_desc;

enum class op { layer_norm, rms_norm, bn_inference, bn_training, group_norm, instance_norm, mvn };

const char* op_name(op o) {
  switch (o) {
    case op::layer_norm: return "layer_norm";
    case op::rms_norm: return "rms_norm";
    case op::bn_inference: return "batch_norm inference";
    case op::bn_training: return "batch_norm training";
    case op::group_norm: return "group_norm";
    case op::instance_norm: return "instance_norm";
    case op::mvn: return "mean_variance_norm";
  }
  return "?";
}

tensor_desc mat(std::int64_t r, std::int64_t c) { return tensor_desc::contiguous({r, c}); }

constexpr float kY = 7.25f;  // what y holds before the call, and must hold after it

/// A valid call of one op: LayerNorm and RMSNorm on [4, 8], BatchNorm on [2, 3, 4], the other
/// channel ops on [2, 6, 4]. x holds 1.5, y holds kY; `big` (1.0) backs strided x descriptors.
struct call {
  op o;
  tensor_desc xd, yd;
  simdnorm::layer_norm_params ln;
  simdnorm::rms_norm_params rms;
  simdnorm::batch_norm_params bn;
  simdnorm::group_norm_params gn;
  simdnorm::instance_norm_params in;
  simdnorm::mean_variance_norm_params mvn;
  std::vector<float> x, y, big = std::vector<float>(256, 1.f);
  std::vector<float> rm = {0.f, 1.f, 2.f}, rv = {1.f, 1.f, 1.f};
  std::int64_t batches = 3;
  test::any_args a;
  bool null_plan = false;  // pass no output plan
  /// Runs a made plan; the default executes it on the default executor.
  std::function<simdnorm::status(const simdnorm::plan&, const test::any_args&)> run =
      [](const simdnorm::plan& p, const test::any_args& a) { return test::execute_any(p, a); };

  explicit call(op which) : o(which) {
    const bool rows = o == op::layer_norm || o == op::rms_norm;
    xd = yd = rows ? mat(4, 8)
                   : tensor_desc::contiguous(
                         {2, o == op::bn_inference || o == op::bn_training ? 3 : 6, 4});
    const std::size_t n = rows ? 32 : o == op::bn_inference || o == op::bn_training ? 24 : 48;
    x.assign(n, 1.5f);
    y.assign(n, kY);
    a.x = x.data();
    a.y = y.data();
    if (o == op::bn_inference) bn.running_mean = rm.data(), bn.running_var = rv.data();
    if (o == op::bn_training) {
      bn.training = true;
      a.running_mean = rm.data(), a.running_var = rv.data();
    }
    if (o == op::mvn) mvn.num_axes = 1, mvn.axes[0] = 2;
  }

  simdnorm::status make(simdnorm::plan* p) const {
    if (null_plan) p = nullptr;
    switch (o) {
      case op::layer_norm: return simdnorm::plan::layer_norm(xd, yd, ln, p);
      case op::rms_norm: return simdnorm::plan::rms_norm(xd, yd, rms, p);
      case op::bn_inference:
      case op::bn_training: return simdnorm::plan::batch_norm(xd, yd, bn, p);
      case op::group_norm: return simdnorm::plan::group_norm(xd, yd, gn, p);
      case op::instance_norm: return simdnorm::plan::instance_norm(xd, yd, in, p);
      case op::mvn: return simdnorm::plan::mean_variance_norm(xd, yd, mvn, p);
    }
    return simdnorm::status::error(status_code::invalid_argument, "no such op");
  }
};

enum class stage { plan, run };

using runner = std::function<simdnorm::status(const simdnorm::plan&, const test::any_args&)>;

/// A call::run that runs tasks [begin, end) of `phase` on the calling thread.
runner run_tasks(std::size_t phase, std::size_t begin, std::size_t end) {
  return [=](const simdnorm::plan& p, const test::any_args& a) {
    return test::run_any(p, a, phase, begin, end);
  };
}

struct row {
  const char* name;
  op o;
  std::function<void(call&)> mutate;
  stage at;  // where the call must fail: making the plan, or running it
  status_code code;
  const char* what;  // a substring of the message
};

const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// x and y in one buffer of kY, y 3 floats after x: a partial overlap.
void overlap_x_and_y(call& c) {
  c.y.assign(64, kY);
  c.a.x = c.y.data();
  c.a.y = c.y.data() + 3;
}

/// An x whose spatial dim and channels are strided (not dense), backed by `big`.
void odd_strides(call& c) {
  c.xd.strides[2] = 2, c.xd.strides[1] = 8, c.xd.strides[0] = c.xd.shape[1] * 8;
  c.a.x = c.big.data();
}

struct throwing_executor final : simdnorm::executor {
  std::size_t concurrency() const noexcept override { return 2; }
  void parallel_for(std::size_t, task_fn, void*) override { throw std::runtime_error("pool down"); }
};

const std::int64_t k2p40 = std::int64_t(1) << 40, k2p61 = std::int64_t(1) << 61;

const row kRows[] = {
    // ---- LayerNorm and RMSNorm plans: shapes, parameters, layouts ----
    {"zero dim", op::layer_norm, [](call& c) { c.xd = c.yd = mat(0, 8); },
     stage::plan, code::invalid_argument, "shape"},
    {"negative dim", op::layer_norm, [](call& c) { c.xd = c.yd = mat(4, -8); },
     stage::plan, code::invalid_argument, "shape"},
    {"ndim 0", op::layer_norm, [](call& c) { c.xd = c.yd = tensor_desc{}; },
     stage::plan, code::invalid_argument, "ndim"},
    {"too many dims", op::layer_norm, [](call& c) {
       c.xd = c.yd = tensor_desc::contiguous({1, 1, 1, 1, 1, 1, 1, 1, 2});
       CHECK(c.xd.ndim == simdnorm::max_dims + 1);
     }, stage::plan, code::invalid_argument, "ndim"},
    {"normalized_ndim 0", op::layer_norm, [](call& c) { c.ln.normalized_ndim = 0; },
     stage::plan, code::invalid_argument, "normalized_ndim"},
    {"normalized_ndim > ndim", op::layer_norm, [](call& c) { c.ln.normalized_ndim = 3; },
     stage::plan, code::invalid_argument, "normalized_ndim"},
    {"normalized_ndim negative", op::layer_norm, [](call& c) { c.ln.normalized_ndim = -1; },
     stage::plan, code::invalid_argument, "normalized_ndim"},
    {"eps negative", op::layer_norm, [](call& c) { c.ln.eps = -1e-5f; },
     stage::plan, code::invalid_argument, "eps"},
    {"eps NaN", op::layer_norm, [](call& c) { c.ln.eps = kNaN; },
     stage::plan, code::invalid_argument, "eps"},
    {"x and y shapes differ", op::layer_norm, [](call& c) { c.yd = mat(4, 9); },
     stage::plan, code::invalid_argument, "shape"},
    {"x and y ranks differ", op::layer_norm, [](call& c) { c.yd = tensor_desc::contiguous({32}); },
     stage::plan, code::invalid_argument, "ndim"},
    {"y rows overlap", op::layer_norm, [](call& c) { c.yd.strides[0] = 4; },
     stage::plan, code::unsupported_layout, "overlap"},
    {"y rows all alias (stride 0)", op::layer_norm, [](call& c) { c.yd.strides[0] = 0; },
     stage::plan, code::unsupported_layout, "overlap"},
    {"normalized block not dense", op::layer_norm, [](call& c) {
       c.xd.strides[1] = 2, c.xd.strides[0] = 16;
       c.a.x = c.big.data();
     }, stage::plan, code::unsupported_layout, "dense"},
    {"normalized block padded inside (2 normalized dims)", op::layer_norm, [](call& c) {
       c.xd = c.yd = tensor_desc::contiguous({2, 3, 4});
       c.xd.strides[1] = 5, c.xd.strides[0] = 15;
       c.ln.normalized_ndim = 2;
       c.a.x = c.big.data();
     }, stage::plan, code::unsupported_layout, "dense"},
    {"negative stride", op::layer_norm, [](call& c) { c.xd.strides[0] = -8; },
     stage::plan, code::unsupported_layout, "stride"},
    {"sizes overflow", op::layer_norm, [](call& c) { c.xd = c.yd = mat(k2p40, k2p40); },
     stage::plan, code::size_overflow, "overflow"},
    {"byte size overflows", op::layer_norm,
     [](call& c) { c.xd = c.yd = tensor_desc::contiguous({k2p61}); },
     stage::plan, code::size_overflow, "overflow"},
    {"unknown store policy", op::layer_norm,
     [](call& c) { c.ln.stores = simdnorm::store_policy(9); },
     stage::plan, code::invalid_argument, "store_policy"},
    {"null output plan", op::layer_norm, [](call& c) { c.null_plan = true; },
     stage::plan, code::invalid_argument, "null"},
    {"null output plan", op::rms_norm, [](call& c) { c.null_plan = true; },
     stage::plan, code::invalid_argument, "null"},
    {"eps negative", op::rms_norm, [](call& c) { c.rms.eps = -1.f; },
     stage::plan, code::invalid_argument, "eps"},
    // ---- LayerNorm and RMSNorm runs ----
    {"null x (execute)", op::layer_norm, [](call& c) { c.a.x = nullptr; },
     stage::run, code::invalid_argument, "null"},
    {"null x (run)", op::layer_norm, [](call& c) {
       c.a.x = nullptr;
       c.run = run_tasks(0, 0, 1);
     }, stage::run, code::invalid_argument, "null"},
    {"null y", op::layer_norm, [](call& c) { c.a.y = nullptr; },
     stage::run, code::invalid_argument, "null"},
    {"null y", op::rms_norm, [](call& c) { c.a.y = nullptr; },
     stage::run, code::invalid_argument, "null"},
    {"y partially overlaps x", op::layer_norm, overlap_x_and_y,
     stage::run, code::invalid_argument, "overlap"},
    {"in place with different strides", op::layer_norm, [](call& c) {
       c.yd.strides[0] = 9;
       c.y.assign(64, kY);
       c.a.x = c.a.y = c.y.data();
     }, stage::run, code::invalid_argument, "in place"},
    {"phase out of range", op::layer_norm, [](call& c) {
       c.run = run_tasks(1, 0, 1);
     }, stage::run, code::invalid_argument, "phase"},
    {"task range past the end", op::layer_norm, [](call& c) {
       c.run = [](const simdnorm::plan& p, const test::any_args& a) {
         return test::run_any(p, a, 0, 0, p.num_tasks() + 1);
       };
     }, stage::run, code::invalid_argument, "task"},
    {"task range reversed", op::layer_norm, [](call& c) {
       c.run = run_tasks(0, 1, 0);
     }, stage::run, code::invalid_argument, "task"},
    {"empty plan (execute)", op::layer_norm, [](call& c) {
       c.run = [](const simdnorm::plan&, const test::any_args& a) {
         const simdnorm::plan empty;
         CHECK(empty.num_tasks() == 0);
         return empty.execute(static_cast<const simdnorm::norm_args&>(a));
       };
     }, stage::run, code::invalid_argument, "empty"},
    {"empty plan (run)", op::layer_norm, [](call& c) {
       c.run = [](const simdnorm::plan&, const test::any_args& a) {
         return simdnorm::plan().run(static_cast<const simdnorm::norm_args&>(a), 0, 0, 0);
       };
     }, stage::run, code::invalid_argument, "empty"},
    {"beta given", op::rms_norm, [](call& c) { c.a.beta = c.big.data(); },
     stage::run, code::invalid_argument, "beta"},
    {"mean output given", op::rms_norm, [](call& c) { c.a.mean = c.big.data(); },
     stage::run, code::invalid_argument, "mean"},
    {"modulation_tokens not dividing the rows", op::layer_norm,
     [](call& c) { c.ln.modulation_tokens = 3; },
     stage::plan, code::invalid_argument, "modulation_tokens=3"},
    {"modulation_tokens negative", op::rms_norm, [](call& c) { c.rms.modulation_tokens = -2; },
     stage::plan, code::invalid_argument, "modulation_tokens=-2"},
    {"modulation on a moments plan", op::layer_norm, [](call& c) {
       c.ln.modulation_tokens = 2;
       c.ln.stage = simdnorm::stats_stage::moments;
     }, stage::plan, code::invalid_argument, "modulation_tokens"},
    {"modulation scale without shift", op::rms_norm, [](call& c) {
       c.rms.modulation_tokens = 2;
       c.a.modulation_scale = c.big.data();
     }, stage::run, code::invalid_argument, "modulation_shift is null"},
    {"modulation shift without a modulation plan", op::layer_norm,
     [](call& c) { c.a.modulation_shift = c.big.data(); },
     stage::run, code::invalid_argument, "no adaLN modulation"},
    {"modulation stride shorter than a row", op::layer_norm, [](call& c) {
       c.ln.modulation_tokens = 2;
       c.a.modulation_scale = c.big.data();
       c.a.modulation_shift = c.big.data() + 64;
       c.a.modulation_stride = 4;
     }, stage::run, code::invalid_argument, "modulation_stride=4"},
    {"modulation stride negative", op::rms_norm, [](call& c) {
       c.rms.modulation_tokens = 4;
       c.a.modulation_scale = c.big.data();
       c.a.modulation_shift = c.big.data() + 64;
       c.a.modulation_stride = -8;
     }, stage::run, code::invalid_argument, "modulation_stride=-8"},
    {"modulation shift over y", op::layer_norm, [](call& c) {
       c.ln.modulation_tokens = 2;
       c.a.modulation_scale = c.big.data();
       c.a.modulation_shift = c.y.data() + 8;
     }, stage::run, code::invalid_argument, "args.modulation_shift and args.y overlap"},
    {"an executor that throws", op::layer_norm, [](call& c) {
       c.xd = c.yd = mat(256, 1024);
       c.x.assign(256 * 1024, 1.f);
       c.y.assign(256 * 1024, kY);
       c.a.x = c.x.data(), c.a.y = c.y.data();
       c.run = [](const simdnorm::plan& p, const test::any_args& a) {
         REQUIRE(p.num_tasks() > 1);
         throwing_executor ex;
         return test::execute_any(p, a, &ex);
       };
     }, stage::run, code::internal_error, "executor threw"},
    // ---- BatchNorm ----
    {"inference without running_var", op::bn_inference, [](call& c) { c.bn.running_var = nullptr; },
     stage::plan, code::invalid_argument, "running_var"},
    {"negative running variance", op::bn_inference, [](call& c) { c.rv[1] = -1.f; },
     stage::plan, code::invalid_argument, "running_var[1]"},
    {"NaN running variance", op::bn_inference, [](call& c) { c.rv[1] = kNaN; },
     stage::plan, code::invalid_argument, "running_var[1]"},
    {"eps negative", op::bn_inference, [](call& c) { c.bn.eps = -1e-5f; },
     stage::plan, code::invalid_argument, "eps"},
    {"eps NaN", op::bn_inference, [](call& c) { c.bn.eps = kNaN; },
     stage::plan, code::invalid_argument, "eps"},
    {"momentum negative", op::bn_training, [](call& c) { c.bn.momentum = -0.1f; },
     stage::plan, code::invalid_argument, "momentum"},
    {"momentum above 1", op::bn_training, [](call& c) { c.bn.momentum = 1.5f; },
     stage::plan, code::invalid_argument, "momentum"},
    {"momentum NaN", op::bn_training, [](call& c) { c.bn.momentum = kNaN; },
     stage::plan, code::invalid_argument, "momentum"},
    {"one value per channel [1, 3, 1, 1]", op::bn_training,
     [](call& c) { c.xd = c.yd = tensor_desc::contiguous({1, 3, 1, 1}); },
     stage::plan, code::invalid_argument, "more than 1 value per channel"},
    {"one value per channel [1, 3]", op::bn_training, [](call& c) { c.xd = c.yd = mat(1, 3); },
     stage::plan, code::invalid_argument, "more than 1 value per channel"},
    {"mismatched shapes", op::bn_inference,
     [](call& c) { c.yd = tensor_desc::contiguous({2, 3, 5}); },
     stage::plan, code::invalid_argument, "shape[2]"},
    {"mismatched ranks", op::bn_inference, [](call& c) { c.yd = mat(2, 12); },
     stage::plan, code::invalid_argument, "ndim"},
    {"fewer than 2 dims", op::bn_inference,
     [](call& c) { c.xd = c.yd = tensor_desc::contiguous({24}); },
     stage::plan, code::invalid_argument, "ndim=1"},
    {"unknown layout", op::bn_inference, [](call& c) { c.bn.layout = simdnorm::channel_layout(7); },
     stage::plan, code::invalid_argument, "channel_layout"},
    {"unknown store policy", op::bn_inference,
     [](call& c) { c.bn.stores = simdnorm::store_policy(9); },
     stage::plan, code::invalid_argument, "store_policy"},
    {"unknown momentum convention", op::bn_training,
     [](call& c) { c.bn.convention = simdnorm::momentum_convention(3); },
     stage::plan, code::invalid_argument, "momentum_convention"},
    {"training plan given inference pointers", op::bn_training, [](call& c) {
       c.bn.running_mean = c.rm.data(), c.bn.running_var = c.rv.data();
     }, stage::plan, code::invalid_argument, "for inference"},
    {"inference run given gamma", op::bn_inference, [](call& c) { c.a.gamma = c.big.data(); },
     stage::run, code::invalid_argument, "folds gamma"},
    {"inference run given a mean output", op::bn_inference, [](call& c) {
       c.a.mean = c.big.data();
       c.run = run_tasks(0, 0, 1);
     }, stage::run, code::invalid_argument, "training-mode outputs"},
    {"running_mean without running_var", op::bn_training,
     [](call& c) { c.a.running_var = nullptr; },
     stage::run, code::invalid_argument, "go together"},
    {"cumulative averaging without the batch counter", op::bn_training,
     [](call& c) { c.bn.cumulative = true; },
     stage::run, code::invalid_argument, "num_batches_tracked"},
    {"cumulative averaging with a negative counter", op::bn_training, [](call& c) {
       c.bn.cumulative = true;
       c.batches = -1;
       c.a.num_batches_tracked = &c.batches;
     }, stage::run, code::invalid_argument, "num_batches_tracked=-1"},
    {"a batch counter that cannot be incremented", op::bn_training, [](call& c) {
       c.batches = INT64_MAX;
       c.a.num_batches_tracked = &c.batches;
     }, stage::run, code::invalid_argument, "num_batches_tracked=9223372036854775807"},
    {"strides the plan cannot serve", op::bn_inference, odd_strides,
     stage::plan, code::unsupported_layout, "strides"},
    {"y items overlap", op::bn_inference, [](call& c) { c.yd.strides[0] = 4; },
     stage::plan, code::unsupported_layout, "overlap"},
    {"y partially overlapping x", op::bn_inference, overlap_x_and_y,
     stage::run, code::invalid_argument, "overlap"},
    {"null x", op::bn_training, [](call& c) { c.a.x = nullptr; },
     stage::run, code::invalid_argument, "null"},
    // ---- GroupNorm, InstanceNorm, MeanVarianceNormalization ----
    {"channels not divisible by groups", op::group_norm, [](call& c) { c.gn.num_groups = 4; },
     stage::plan, code::invalid_argument, "divide C=6"},
    {"no groups", op::group_norm, [](call& c) { c.gn.num_groups = 0; },
     stage::plan, code::invalid_argument, "divide C=6"},
    {"negative groups", op::group_norm, [](call& c) { c.gn.num_groups = -2; },
     stage::plan, code::invalid_argument, "divide C=6"},
    {"eps negative", op::group_norm, [](call& c) { c.gn.eps = -1.f; },
     stage::plan, code::invalid_argument, "eps"},
    {"eps NaN", op::group_norm, [](call& c) { c.gn.eps = kNaN; },
     stage::plan, code::invalid_argument, "eps"},
    {"mismatched shapes", op::group_norm,
     [](call& c) { c.yd = tensor_desc::contiguous({2, 6, 5}); },
     stage::plan, code::invalid_argument, "shape[2]"},
    {"BatchNorm's args struct", op::group_norm, [](call& c) {
       c.run = [](const simdnorm::plan& p, const test::any_args& a) {
         return p.execute(test::as<simdnorm::batch_norm_args>(a));
       };
     }, stage::run, code::invalid_argument, "batch_norm_args given to a plan of group_norm"},
    {"unsupported strides", op::group_norm, [](call& c) {
       odd_strides(c);
       c.gn.num_groups = 2;
     }, stage::plan, code::unsupported_layout, "strides"},
    {"null x", op::group_norm, [](call& c) { c.a.x = nullptr; },
     stage::run, code::invalid_argument, "null"},
    {"no spatial dims", op::instance_norm, [](call& c) { c.xd = c.yd = mat(8, 6); },
     stage::plan, code::invalid_argument, "at least 3"},
    {"eps NaN", op::instance_norm, [](call& c) { c.in.eps = kNaN; },
     stage::plan, code::invalid_argument, "eps"},
    {"null y", op::instance_norm, [](call& c) { c.a.y = nullptr; },
     stage::run, code::invalid_argument, "null"},
    {"no axes", op::mvn, [](call& c) { c.mvn.num_axes = 0; },
     stage::plan, code::invalid_argument, "num_axes=0"},
    {"axis out of range", op::mvn,
     [](call& c) { c.mvn.num_axes = 2, c.mvn.axes[0] = 1, c.mvn.axes[1] = 3; },
     stage::plan, code::invalid_argument, "axes[1]=3"},
    {"axis twice", op::mvn,
     [](call& c) { c.mvn.num_axes = 2, c.mvn.axes[0] = 2, c.mvn.axes[1] = -1; },
     stage::plan, code::invalid_argument, "appears twice"},
    {"a pattern of axes the plan cannot serve", op::mvn, [](call& c) {
       c.xd = c.yd = tensor_desc::contiguous({2, 3, 4, 5});  // reduced, kept, reduced, kept
       c.x.assign(120, 1.5f), c.y.assign(120, kY);
       c.a.x = c.x.data(), c.a.y = c.y.data();
       c.mvn.num_axes = 2, c.mvn.axes[0] = 0, c.mvn.axes[1] = 2;
     }, stage::plan, code::unsupported_layout, "reduced dims"},
    {"gamma given", op::mvn, [](call& c) { c.a.gamma = c.big.data(); },
     stage::run, code::invalid_argument, "x and y only"},
    {"null y", op::mvn, [](call& c) { c.a.y = nullptr; },
     stage::run, code::invalid_argument, "null"},
    // ---- channel ops: element types (f32, bf16, f16; an 8-bit y with static scales only) ----
    {"i8 x", op::bn_training, [](call& c) { c.xd.type = simdnorm::dtype::i8; },
     stage::plan, code::unsupported_dtype, "f32, bf16 or f16"},
    {"f8e4m3fn y without scales", op::group_norm,
     [](call& c) { c.yd.type = simdnorm::dtype::f8e4m3fn; }, stage::plan, code::invalid_argument,
     "needs static scales"},
    {"i8 y without scales", op::bn_inference, [](call& c) { c.yd.type = simdnorm::dtype::i8; },
     stage::plan, code::invalid_argument, "needs static scales"},
#if SIMDNORM_ALL_DTYPES
    {"in place across types", op::instance_norm, [](call& c) {
       c.yd.type = simdnorm::dtype::bf16;
       c.a.y = c.x.data();
     }, stage::run, code::invalid_argument, "types differ"},
    {"in place across types", op::bn_inference, [](call& c) {
       c.xd.type = simdnorm::dtype::f16;
       c.a.y = c.x.data();
     }, stage::run, code::invalid_argument, "types differ"},
#else
    {"bf16 in an f32-only build", op::mvn, [](call& c) { c.xd.type = simdnorm::dtype::bf16; },
     stage::plan, code::unsupported_dtype, "SIMDNORM_ALL_DTYPES=OFF"},
#endif
};

}  // namespace

TEST_CASE("errors: every op rejects bad plans and runs with a clear status, writing nothing") {
  for (const row& r : kRows) {
    const std::string name = std::string(op_name(r.o)) + ": " + r.name;
    SUBCASE(name.c_str()) {
      call c(r.o);
      r.mutate(c);
      const std::vector<float> rm = c.rm, rv = c.rv;
      const std::int64_t batches = c.batches;
      simdnorm::plan p;
      simdnorm::status s = c.make(&p);
      if (r.at == stage::plan) {
        CHECK_FALSE(s.ok());
        CHECK_FALSE(p.valid());
      } else {
        REQUIRE_MESSAGE(s.ok(), s.message());
        s = c.run(p, c.a);
      }
      CHECK(s.code() == r.code);
      const std::string message = s.message();  // doctest 2.4.9 prints a char* as a pointer
      CHECK_MESSAGE(message.find(r.what) != std::string::npos, message);
      std::size_t written = 0;
      for (float v : c.y) written += v != kY;
      CHECK(written == 0);
      CHECK(test::bitwise_equal(c.rm.data(), rm.data(), rm.size()));  // NaN included
      CHECK(test::bitwise_equal(c.rv.data(), rv.data(), rv.size()));
      CHECK(c.batches == batches);
    }
  }
}
