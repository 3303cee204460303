// Concurrency: one plan run from many threads at once, plans made while others run, the
// default executor and a host pool driving plans at the same time, and the process-wide ISA
// selection (force_isa / reset_isa) changed on one thread while others make and run plans.
//
// What it pins: a plan is immutable, so `run` and `execute` may be called on it from any
// number of threads at once (on different buffers) and every output is bitwise equal to a
// serial run on the same ISA; making a plan shares no unsynchronized state with running one;
// the oneTBB default executor (serial in a build without oneTBB) and a host pool of
// std::threads may drive plans at the same time; a plan runs the ISA it captured when it was
// made (plan::kernel_isa(), and its outputs match a serial run on that ISA), whatever
// force_isa / reset_isa do meanwhile; the C API's last error message is per thread. Every op
// of simdnorm/op_list.h takes part, BatchNorm in both modes and both schedules of its
// statistics (planes split into phases, columns).
// Why: hosts share plans between request threads and switch the ISA as a global; a data race
// there corrupts outputs silently. scripts/tsan.sh runs this suite under ThreadSanitizer (in
// a build without oneTBB, which is not instrumented); the regular build runs it with oneTBB.
// Worker threads never call doctest: they record failures, which the test's thread checks.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "simdnorm/simdnorm.h"
#include "test_util.hpp"

namespace {

using simdnorm::isa;
using simdnorm::plan;
using simdnorm::status;
using simdnorm::tensor_desc;

std::size_t numel(const tensor_desc& d) {
  std::size_t n = 1;
  for (int i = 0; i < d.ndim; ++i) n *= std::size_t(d.shape[i]);
  return n;
}

// ---- the ops ---------------------------------------------------------------------------------

/// One op on one shape, with the sizes of its optional arguments (0: not passed).
struct op_case {
  std::string name;
  tensor_desc desc;
  std::size_t affine = 0;  ///< gamma (and beta, with `beta`) entries
  bool beta = false;
  std::size_t stats = 0;    ///< mean entries
  std::size_t rstd = 0;     ///< rstd entries
  std::size_t running = 0;  ///< BatchNorm training: running statistics entries
  bool counter = false;     ///< BatchNorm training: num_batches_tracked
  std::function<status(const tensor_desc&, plan*)> make;
};

/// The running statistics that BatchNorm inference folds at plan creation: made once, read by
/// every thread that makes such a plan.
struct inference_stats {
  std::vector<float> mean, var, gamma, beta;
  explicit inference_stats(std::size_t c) {
    for (std::size_t i = 0; i < c; ++i) {
      mean.push_back(0.25f * float(i) - 1.f);
      var.push_back(0.5f + 0.125f * float(i));
      gamma.push_back(1.f + 0.0625f * float(i));
      beta.push_back(0.5f - 0.03125f * float(i));
    }
  }
};

const std::vector<op_case>& cases() {
  static const std::vector<op_case> all = [] {
    static const inference_stats bn_infer(16);
    std::vector<op_case> v;
    auto add = [&](std::string name, tensor_desc d, auto make) {
      op_case c;
      c.name = std::move(name);
      c.desc = d;
      c.make = make;
      v.push_back(std::move(c));
      return &v.back();
    };
    op_case* c;
    // Row ops (above the inline size, kInlineElements): 10 tasks of long rows; 16 tasks of
    // short rows (the lane-parallel statistics).
    c = add("layer_norm long rows", tensor_desc::contiguous({256, 640}),
            [](const tensor_desc& d, plan* p) { return plan::layer_norm(d, d, {}, p); });
    c->affine = 640, c->beta = true, c->stats = 256, c->rstd = 256;
    c = add("layer_norm short rows", tensor_desc::contiguous({4096, 64}),
            [](const tensor_desc& d, plan* p) {
              simdnorm::layer_norm_params prm;
              prm.compensated_mean = false;
              return plan::layer_norm(d, d, prm, p);
            });
    c->affine = 64, c->beta = true, c->stats = 4096, c->rstd = 4096;
    c = add("rms_norm", tensor_desc::contiguous({256, 640}),
            [](const tensor_desc& d, plan* p) { return plan::rms_norm(d, d, {}, p); });
    c->affine = 640, c->rstd = 256;
    c = add("lp_norm p=1", tensor_desc::contiguous({256, 640}), [](const tensor_desc& d, plan* p) {
      simdnorm::lp_norm_params prm;
      prm.p = 1;
      return plan::lp_norm(d, d, prm, p);
    });
    c->rstd = 256;
    c = add("lp_norm p=2", tensor_desc::contiguous({1536, 100}),
            [](const tensor_desc& d, plan* p) { return plan::lp_norm(d, d, {}, p); });
    c->rstd = 1536;
    // BatchNorm inference (above the inline size too): 64 planes of 2304, 8 tasks.
    add("batch_norm inference nchw", tensor_desc::contiguous({4, 16, 48, 48}),
        [](const tensor_desc& d, plan* p) {
          simdnorm::batch_norm_params prm;
          prm.running_mean = bn_infer.mean.data();
          prm.running_var = bn_infer.var.data();
          prm.gamma = bn_infer.gamma.data();
          prm.beta = bn_infer.beta.data();
          prm.fuse_relu = true;
          return plan::batch_norm(d, d, prm, p);
        });
    // BatchNorm training, 2 channels of 32768: each cut into 4 parts, partial moments in the
    // workspace (phase A), merged by every part's task (phase B), then the counter phase.
    c = add("batch_norm training nchw split", tensor_desc::contiguous({2, 2, 128, 128}),
            [](const tensor_desc& d, plan* p) {
              simdnorm::batch_norm_params prm;
              prm.training = true;
              return plan::batch_norm(d, d, prm, p);
            });
    c->affine = 2, c->beta = true, c->stats = 2, c->rstd = 2, c->running = 2, c->counter = true;
    // BatchNorm training NHWC: the columns schedule (partial column moments, merge, normalize),
    // cumulative running average in the ONNX convention.
    c = add("batch_norm training nhwc columns", tensor_desc::contiguous({4, 16, 16, 48}),
            [](const tensor_desc& d, plan* p) {
              simdnorm::batch_norm_params prm;
              prm.training = true;
              prm.layout = simdnorm::channel_layout::nhwc;
              prm.cumulative = true;
              prm.convention = simdnorm::momentum_convention::onnx;
              return plan::batch_norm(d, d, prm, p);
            });
    c->affine = 48, c->beta = true, c->stats = 48, c->rstd = 48, c->running = 48, c->counter = true;
    c = add("group_norm nchw", tensor_desc::contiguous({4, 32, 16, 16}),
            [](const tensor_desc& d, plan* p) {
              simdnorm::group_norm_params prm;
              prm.num_groups = 8;
              return plan::group_norm(d, d, prm, p);
            });
    c->affine = 32, c->beta = true, c->stats = 32, c->rstd = 32;
    c = add("instance_norm nhwc", tensor_desc::contiguous({2, 12, 12, 64}),
            [](const tensor_desc& d, plan* p) {
              simdnorm::instance_norm_params prm;
              prm.layout = simdnorm::channel_layout::nhwc;
              return plan::instance_norm(d, d, prm, p);
            });
    c->affine = 64, c->beta = true, c->stats = 128, c->rstd = 128;
    add("mean_variance_norm", tensor_desc::contiguous({2, 16, 32, 32}),
        [](const tensor_desc& d, plan* p) { return plan::mean_variance_norm(d, d, {}, p); });
    return v;
  }();
  return all;
}

/// The buffers of one run of a case: a fixed input, and outputs reset before every run.
struct io {
  const op_case* c;
  std::vector<float> x, y, gamma, beta, mean, rstd, running_mean, running_var;
  std::int64_t batches = 0;

  explicit io(const op_case& oc) : c(&oc), x(numel(oc.desc)) {
    test::fill_normal(x.data(), x.size(), 1234, 3.0, 2.0);
    for (std::size_t i = 0; i < oc.affine; ++i) {
      gamma.push_back(0.75f + 0.001f * float(i % 500));
      if (oc.beta) beta.push_back(0.002f * float(i % 300) - 0.25f);
    }
    reset();
  }
  void reset() {
    y.assign(x.size(), test::buffer::sentinel);
    mean.assign(c->stats, test::buffer::sentinel);
    rstd.assign(c->rstd, test::buffer::sentinel);
    running_mean.assign(c->running, 0.f);
    running_var.assign(c->running, 1.f);
    for (std::size_t i = 0; i < c->running; ++i) {
      running_mean[i] = 0.01f * float(i);
      running_var[i] = 1.f + 0.02f * float(i);
    }
    batches = 3;
  }
  test::any_args args() {
    test::any_args a;
    a.x = x.data();
    a.y = y.data();
    if (!gamma.empty()) a.gamma = gamma.data();
    if (!beta.empty()) a.beta = beta.data();
    if (!mean.empty()) a.mean = mean.data();
    if (!rstd.empty()) a.rstd = rstd.data();
    if (!running_mean.empty()) a.running_mean = running_mean.data();
    if (!running_var.empty()) a.running_var = running_var.data();
    if (c->counter) a.num_batches_tracked = &batches;
    return a;
  }
  /// Bitwise comparison of every output with `ref`'s.
  bool same_outputs(const io& ref) const {
    const auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() &&
             (a.empty() || test::bitwise_equal(a.data(), b.data(), a.size()));
    };
    return same(y, ref.y) && same(mean, ref.mean) && same(rstd, ref.rstd) &&
           same(running_mean, ref.running_mean) && same(running_var, ref.running_var) &&
           batches == ref.batches;
  }
};

/// Serial outputs of every case on every runnable ISA (forced in turn, then reset), made on
/// the first call, which must come from the test's own thread before any worker starts.
const std::map<isa, std::vector<io>>& references() {
  static const std::map<isa, std::vector<io>> refs = [] {
    std::map<isa, std::vector<io>> m;
    for (isa i : test::runnable_isas()) {
      REQUIRE(simdnorm::force_isa(i).ok());
      std::vector<io>& v = m[i];
      for (const op_case& c : cases()) {
        v.emplace_back(c);
        plan p;
        REQUIRE(c.make(c.desc, &p).ok());
        REQUIRE(p.kernel_isa() == i);
        REQUIRE(test::execute_any(p, v.back().args(), &simdnorm::serial_executor()).ok());
      }
    }
    simdnorm::reset_isa();
    return m;
  }();
  return refs;
}

// ---- threads ---------------------------------------------------------------------------------

/// Failures seen by worker threads, checked by the test's thread after join.
class failures {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(m_);
    if (count_++ < 10) text_ += what + "\n";
  }
  std::size_t count() const {
    std::lock_guard<std::mutex> lock(m_);
    return count_;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(m_);
    return text_;
  }

 private:
  mutable std::mutex m_;
  std::size_t count_ = 0;
  std::string text_;
};

/// Starts body(t) on n threads, released together, and joins them.
template <class F>
void run_threads(std::size_t n, F body) {
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return go; });
      }
      body(t);
    });
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
  }
  cv.notify_all();
  for (std::thread& th : threads) th.join();
}

/// A host pool: `workers` std::threads that wait for parallel_for calls and claim tasks one at
/// a time; the calling thread works too. Any number of threads may call parallel_for at once:
/// their jobs queue up and the workers serve them in order.
class thread_pool final : public simdnorm::executor {
 public:
  explicit thread_pool(std::size_t workers) {
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~thread_pool() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  std::size_t concurrency() const noexcept override { return threads_.size() + 1; }

  void parallel_for(std::size_t n, task_fn task, void* ctx) override {
    job j{n, task, ctx};
    {
      std::lock_guard<std::mutex> lock(m_);
      jobs_.push_back(&j);
    }
    cv_.notify_all();
    claim(j);
    std::unique_lock<std::mutex> lock(m_);
    done_cv_.wait(lock, [&] { return j.done.load() == n && j.users == 0; });
    const auto it = std::find(jobs_.begin(), jobs_.end(), &j);
    if (it != jobs_.end()) jobs_.erase(it);
  }

 private:
  struct job {
    std::size_t n;
    task_fn task;
    void* ctx;
    std::atomic<std::size_t> next{0}, done{0};
    std::size_t users = 0;  // workers holding a pointer to the job; guarded by m_
    job(std::size_t n_, task_fn t, void* c) : n(n_), task(t), ctx(c) {}
  };

  static void claim(job& j) {
    for (std::size_t i; (i = j.next.fetch_add(1)) < j.n;) {
      j.task(j.ctx, i, i + 1);
      j.done.fetch_add(1);
    }
  }

  void work() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      // Drop exhausted jobs from the front; their callers wait for done and users.
      while (!jobs_.empty() && jobs_.front()->next.load() >= jobs_.front()->n) jobs_.pop_front();
      if (jobs_.empty()) {
        if (stop_) return;
        cv_.wait(lock);
        continue;
      }
      job* j = jobs_.front();
      ++j->users;
      lock.unlock();
      claim(*j);
      lock.lock();
      --j->users;
      done_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<job*> jobs_;
  bool stop_ = false;
};

/// A workspace buffer with a 64-byte aligned start.
class workspace {
 public:
  void* get(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    storage_.resize(bytes + 64);
    const auto p = reinterpret_cast<std::uintptr_t>(storage_.data());
    return storage_.data() + (64 - p % 64) % 64;
  }

 private:
  std::vector<unsigned char> storage_;
};

/// Runs every phase of `p` by hand on this thread, in chunks of `chunk` tasks.
status run_by_hand(const plan& p, test::any_args a, std::size_t chunk, workspace& ws) {
  a.workspace = ws.get(p.workspace_bytes());
  for (std::size_t phase = 0; phase < p.num_phases(); ++phase) {
    const std::size_t n = p.num_tasks(phase);
    for (std::size_t b = 0; b < n; b += chunk) {
      const status s = test::run_any(p, a, phase, b, std::min(n, b + chunk));
      if (!s) return s;
    }
  }
  return {};
}

/// Runs plan `p` of case k on `out` (reset first) by `how` and compares with the reference
/// of the ISA the plan reports. how: 0 execute on `exec`, 1 tasks by hand.
void run_and_check(const plan& p, std::size_t k, io& out, int how, simdnorm::executor* exec,
                   std::size_t chunk, workspace& ws, failures& f, const char* where) {
  const auto& refs = references();
  const op_case& c = cases()[k];
  const auto ref = refs.find(p.kernel_isa());
  if (ref == refs.end()) {
    f.add(std::string(where) + ": " + c.name + ": plan reports ISA " +
          simdnorm::isa_name(p.kernel_isa()) + ", not a runnable one");
    return;
  }
  out.reset();
  const status s =
      how == 0 ? test::execute_any(p, out.args(), exec) : run_by_hand(p, out.args(), chunk, ws);
  if (!s) {
    f.add(std::string(where) + ": " + c.name + ": " + s.message());
    return;
  }
  if (!out.same_outputs(ref->second[k]))
    f.add(std::string(where) + ": " + c.name + " on " + simdnorm::isa_name(p.kernel_isa()) +
          ": outputs differ from the serial run");
}

std::vector<plan> make_all(failures* f = nullptr) {
  std::vector<plan> plans(cases().size());
  for (std::size_t k = 0; k < plans.size(); ++k) {
    const status s = cases()[k].make(cases()[k].desc, &plans[k]);
    if (!s && f) f->add(cases()[k].name + ": make: " + s.message());
    if (!s && !f) FAIL_CHECK(cases()[k].name << ": " << s.message());
  }
  return plans;
}

std::vector<io> buffers() { return std::vector<io>(cases().begin(), cases().end()); }

constexpr std::size_t kThreads = 4;

TEST_CASE("concurrency: one plan per op run from several threads at once") {
  simdnorm::reset_isa();
  references();
  const std::vector<plan> plans = make_all();
  for (std::size_t k = 0; k < plans.size(); ++k) {  // every plan has tasks to share
    INFO(cases()[k].name);
    CHECK(plans[k].num_tasks(0) >= 2);
    if (cases()[k].running) CHECK(plans[k].num_phases() >= 3);  // workspace phases, counter
  }
  failures f;
  thread_pool pool(2);
  run_threads(kThreads, [&](std::size_t t) {
    std::vector<io> bufs = buffers();
    workspace ws;
    for (int iter = 0; iter < 2; ++iter)
      for (std::size_t k = 0; k < plans.size(); ++k) {
        // The same shared plans, on this thread's buffers: by hand in chunks of t + 1 tasks,
        // on the serial executor, on the default one and on the shared host pool.
        run_and_check(plans[k], k, bufs[k], 1, nullptr, t + 1, ws, f, "by hand");
        run_and_check(plans[k], k, bufs[k], 0, &simdnorm::serial_executor(), 0, ws, f, "serial");
        run_and_check(plans[k], k, bufs[k], 0, nullptr, 0, ws, f, "default executor");
        run_and_check(plans[k], k, bufs[k], 0, &pool, 0, ws, f, "host pool");
      }
  });
  CHECK_MESSAGE(f.count() == 0, f.text());
}

TEST_CASE("concurrency: plans made on some threads while others run them") {
  simdnorm::reset_isa();
  references();
  const std::vector<plan> first = make_all();
  // Plans made by the maker threads, handed to the runners through this slot.
  std::mutex slot_m;
  std::vector<plan> slot = first;
  failures f;
  const isa active = simdnorm::active_isa();
  run_threads(kThreads, [&](std::size_t t) {
    std::vector<io> bufs = buffers();
    workspace ws;
    for (int iter = 0; iter < 3; ++iter)
      for (std::size_t k = 0; k < first.size(); ++k) {
        if (t < 2) {  // makers: make, run here, publish; and the one-shot call
          plan p;
          const status s = cases()[k].make(cases()[k].desc, &p);
          if (!s || p.kernel_isa() != active) {
            f.add(cases()[k].name + ": make on a maker thread: " + s.message());
            continue;
          }
          run_and_check(p, k, bufs[k], 0, &simdnorm::serial_executor(), 0, ws, f, "maker");
          std::lock_guard<std::mutex> lock(slot_m);
          slot[k] = p;
        } else {  // runners: the newest published plan, and the first one, on the default executor
          plan p;
          {
            std::lock_guard<std::mutex> lock(slot_m);
            p = slot[k];
          }
          run_and_check(p, k, bufs[k], 0, nullptr, 0, ws, f, "runner (published plan)");
          run_and_check(first[k], k, bufs[k], 1, nullptr, 2, ws, f, "runner (first plan)");
        }
      }
  });
  CHECK_MESSAGE(f.count() == 0, f.text());
}

TEST_CASE("concurrency: the default executor and a host pool at once") {
  simdnorm::reset_isa();
  references();
  const std::vector<plan> plans = make_all();
  thread_pool pool(3);
  test::chunked_thread_executor spawner(3);
  failures f;
  MESSAGE("default executor concurrency: " << simdnorm::default_executor().concurrency());
  run_threads(kThreads + 1, [&](std::size_t t) {
    std::vector<io> bufs = buffers();
    workspace ws;
    // Threads 0 and 1 on the default executor, 2 and 3 on the shared pool, 4 on a thread per
    // chunk; the pool's tasks are run by its own workers while the default executor runs.
    simdnorm::executor* exec = t < 2   ? &simdnorm::default_executor()
                               : t < 4 ? static_cast<simdnorm::executor*>(&pool)
                                       : &spawner;
    for (int iter = 0; iter < 3; ++iter)
      for (std::size_t k = 0; k < plans.size(); ++k)
        run_and_check(plans[k], k, bufs[k], 0, exec, 0, ws, f, t < 2 ? "default" : "host");
  });
  CHECK_MESSAGE(f.count() == 0, f.text());
}

TEST_CASE("concurrency: force_isa and reset_isa while other threads make and run plans") {
  simdnorm::reset_isa();
  const auto& refs = references();
  const std::vector<isa> isas = test::runnable_isas();
  // Plans made before the switching starts, one set per ISA: they must keep their ISA.
  std::vector<std::vector<plan>> fixed;
  for (isa i : isas) {
    REQUIRE(simdnorm::force_isa(i).ok());
    fixed.push_back(make_all());
  }
  simdnorm::reset_isa();
  failures f;
  std::atomic<int> makers_left{3};
  std::mutex seen_m;
  std::set<isa> seen;
  thread_pool pool(2);
  run_threads(5, [&](std::size_t t) {
    if (t == 0) {  // the switcher, until the makers are done
      for (std::size_t round = 0; makers_left.load() > 0; ++round) {
        const isa i = isas[round % isas.size()];
        const status s = simdnorm::force_isa(i);
        if (!s) f.add(std::string("force_isa: ") + s.message());
        std::this_thread::yield();
        if (round % 3 == 2) simdnorm::reset_isa();
      }
      simdnorm::reset_isa();
      return;
    }
    std::vector<io> bufs = buffers();
    workspace ws;
    if (t == 4) {  // runs the fixed plans of every ISA meanwhile
      while (makers_left.load() > 0)
        for (std::size_t j = 0; j < isas.size(); ++j)
          for (std::size_t k = 0; k < fixed[j].size(); ++k) {
            if (fixed[j][k].kernel_isa() != isas[j])
              f.add(cases()[k].name + ": a plan made on " + simdnorm::isa_name(isas[j]) +
                    " now reports " + simdnorm::isa_name(fixed[j][k].kernel_isa()));
            run_and_check(fixed[j][k], k, bufs[k], 0, &pool, 0, ws, f, "fixed plan");
          }
      return;
    }
    // Makers: each plan runs the ISA it captured, whichever that was.
    for (int iter = 0; iter < 4; ++iter)
      for (std::size_t k = 0; k < cases().size(); ++k) {
        plan p;
        const status s = cases()[k].make(cases()[k].desc, &p);
        if (!s) {
          f.add(cases()[k].name + ": make during switching: " + s.message());
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(seen_m);
          seen.insert(p.kernel_isa());
        }
        run_and_check(p, k, bufs[k], int((iter + t) % 2), &simdnorm::serial_executor(), 3, ws, f,
                      "made during switching");
      }
    makers_left.fetch_sub(1);
  });
  simdnorm::reset_isa();
  CHECK_MESSAGE(f.count() == 0, f.text());
  std::string names;
  for (isa i : seen) names += std::string(simdnorm::isa_name(i)) + " ";
  MESSAGE("ISAs captured by plans made during switching: " << names << "(of " << refs.size()
                                                           << " runnable)");
}

TEST_CASE("concurrency: C API plans and per-thread error messages from several threads") {
  simdnorm::reset_isa();
  const auto& refs = references();
  const op_case& c = cases()[0];  // LayerNorm, gamma, beta, mean and rstd, C API defaults
  REQUIRE(c.name == "layer_norm long rows");
  simdnorm_tensor_desc d;
  REQUIRE(simdnorm_tensor_contiguous(&d, c.desc.ndim, c.desc.shape) == SIMDNORM_OK);
  failures f;
  run_threads(kThreads, [&](std::size_t t) {
    io out(c);
    for (int iter = 0; iter < 20; ++iter) {
      // A failure of this thread's own, then a success: the last error stays this thread's.
      simdnorm_layer_norm_params bad = simdnorm_layer_norm_params_default();
      bad.eps = -float(t + 1);
      simdnorm_plan_t none = nullptr;
      if (simdnorm_plan_layer_norm(&d, &d, &bad, &none) != SIMDNORM_INVALID_ARGUMENT || none)
        f.add("a negative eps was not refused");
      const std::string want = "eps=-" + std::to_string(t + 1);
      simdnorm_plan_t p = nullptr;
      if (simdnorm_plan_layer_norm(&d, &d, nullptr, &p) != SIMDNORM_OK) {
        f.add(std::string("C plan: ") + simdnorm_last_error_message());
        continue;
      }
      out.reset();
      const test::any_args a = out.args();
      simdnorm_norm_args ca{};
      ca.x = a.x, ca.y = a.y, ca.gamma = a.gamma, ca.beta = a.beta, ca.mean = a.mean;
      ca.rstd = a.rstd;
      const simdnorm_isa pi = simdnorm_plan_isa(p);
      if (simdnorm_plan_execute(p, &ca, nullptr) != SIMDNORM_OK)
        f.add(std::string("C execute: ") + simdnorm_last_error_message());
      else if (!out.same_outputs(refs.at(isa(pi))[0]))
        f.add("C API outputs differ from the serial run");
      simdnorm_plan_destroy(p);
      const std::string last = simdnorm_last_error_message();
      if (last.find(want) == std::string::npos)
        f.add("thread " + std::to_string(t) + ": last error '" + last + "', expected " + want);
    }
  });
  CHECK_MESSAGE(f.count() == 0, f.text());
}

}  // namespace
