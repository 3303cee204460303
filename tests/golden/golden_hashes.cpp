// Golden hashes: every op over a fixed sweep of shapes (every tail, short and long rows, both
// layouts, training and inference, streaming and regular stores, large means), run on each
// runnable ISA, its outputs hashed bit for bit (FNV-1a over y, mean, rstd and the running
// statistics). Refactorings that must not change a bit compare against a committed list:
//
//   simdnorm_golden_hashes                      print "<isa> <case> <hash>" lines
//   simdnorm_golden_hashes --check FILE         compare with FILE; exit 1 on a difference
//
// A deliberate change of the numerics regenerates the list, and its commit says why:
//   build/tests/simdnorm_golden_hashes > tests/golden/golden_hashes.txt (keep the header line)
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "simdnorm/simdnorm.hpp"

namespace {

using simdnorm::tensor_desc;

struct fnv1a {
  std::uint64_t h = 1469598103934665603ull;
  void add_bytes(const void* p, std::size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(const std::vector<float>& v) { add_bytes(v.data(), v.size() * sizeof(float)); }
};

std::vector<float> data(std::size_t n, std::uint32_t seed, double mean, double sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<float> v(n);
  for (float& f : v) f = float(d(rng));
  return v;
}

using results = std::map<std::string, std::uint64_t>;

#if defined(__x86_64__)
constexpr const char* kArch = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kArch = "aarch64";
#else
constexpr const char* kArch = "other";
#endif

void fail_if(const simdnorm::status& s, const std::string& name) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), s.message());
    std::exit(2);
  }
}

void rows(results& out) {
  const std::size_t cols_list[] = {1,   3,   7,   15,  16,  17,   31,   33,   64,
                                   100, 128, 200, 256, 768, 1000, 1024, 4097, 16384};
  for (std::size_t cols : cols_list)
    for (int variant = 0; variant < 4; ++variant) {
      const std::size_t n_rows = cols >= 4096 ? 3 : 37;
      const bool stream = variant & 1, large_mean = variant & 2;
      const auto shape = tensor_desc::contiguous({std::int64_t(n_rows), std::int64_t(cols)});
      const std::vector<float> x =
          data(n_rows * cols, std::uint32_t(cols * 8 + variant), large_mean ? 1e4 : 0.5, 2.0);
      const std::vector<float> g = data(cols, 7, 1.0, 0.3), b = data(cols, 8, 0.0, 1.0);
      const auto store =
          stream ? simdnorm::store_policy::streaming : simdnorm::store_policy::regular;
      for (int op = 0; op < 3; ++op) {
        std::vector<float> y(x.size()), mean(n_rows), rstd(n_rows);
        simdnorm::norm_args a;
        a.x = x.data();
        a.y = y.data();
        a.gamma = g.data();
        a.rstd = rstd.data();
        std::string name;
        simdnorm::status s;
        if (op < 2) {
          simdnorm::layer_norm_params p;
          p.compensated_mean = op == 0;
          p.stores = store;
          a.beta = b.data();
          a.mean = mean.data();
          name = op == 0 ? "layer_norm" : "layer_norm_single_mean";
          s = simdnorm::layer_norm(shape, shape, p, a);
        } else {
          simdnorm::rms_norm_params p;
          p.stores = store;
          name = "rms_norm";
          s = simdnorm::rms_norm(shape, shape, p, a);
        }
        name += "/D" + std::to_string(cols) + "/v" + std::to_string(variant);
        fail_if(s, name);
        fnv1a h;
        h.add(y);
        h.add(mean);
        h.add(rstd);
        out[name] = h.h;
      }
    }
}

void channels(results& out) {
  const std::int64_t c_list[] = {1, 3, 16, 17, 64};
  const std::int64_t s_list[] = {1, 7, 49, 3136};
  int v = 0;
  for (std::int64_t C : c_list)
    for (std::int64_t S : s_list)
      for (bool nhwc : {false, true}) {
        const std::int64_t N = S == 1 ? 5 : 2;
        ++v;
        const auto shape =
            nhwc ? tensor_desc::contiguous({N, S, C}) : tensor_desc::contiguous({N, C, S});
        const std::size_t n = std::size_t(N * C * S), c = std::size_t(C);
        const std::size_t units = std::size_t(N) * c;
        const std::vector<float> x = data(n, std::uint32_t(v), v % 3 == 0 ? 1e3 : 0.0, 1.5);
        const std::vector<float> g = data(c, 11, 1.0, 0.3), b = data(c, 12, 0.0, 1.0);
        const std::string tag = std::string(nhwc ? "/nhwc" : "/nchw") + "/C" + std::to_string(C) +
                                "/S" + std::to_string(S);
        const auto layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
        const auto store =
            v % 2 ? simdnorm::store_policy::streaming : simdnorm::store_policy::regular;
        for (bool training : {false, true}) {
          std::vector<float> y(n), mean(c), rstd(c);
          std::vector<float> rm = data(c, 13, 0.0, 1.0), rv(c);
          for (std::size_t k = 0; k < rv.size(); ++k) rv[k] = 0.25f + float(k % 7) * 0.5f;
          std::int64_t batches = 3;
          simdnorm::batch_norm_params p;
          p.layout = layout;
          p.training = training;
          p.fuse_relu = v % 4 == 0;
          p.stores = store;
          simdnorm::batch_norm_args a;
          a.x = x.data();
          a.y = y.data();
          if (training) {
            a.gamma = g.data();
            a.beta = b.data();
            a.mean = mean.data();
            a.rstd = rstd.data();
            a.running_mean = rm.data();
            a.running_var = rv.data();
            a.num_batches_tracked = &batches;
          } else {
            p.running_mean = rm.data();
            p.running_var = rv.data();
            p.gamma = g.data();
            p.beta = b.data();
          }
          const std::string name =
              std::string(training ? "batch_norm_training" : "batch_norm") + tag;
          fail_if(simdnorm::batch_norm(shape, shape, p, a), name);
          fnv1a h;
          h.add(y);
          h.add(mean);
          h.add(rstd);
          h.add(rm);
          h.add(rv);
          out[name] = h.h;
        }
        for (int groups : {1, int(C)}) {
          if (C % groups) continue;
          std::vector<float> y(n), mean(std::size_t(N) * std::size_t(groups)), rstd(mean.size());
          simdnorm::group_norm_params p;
          p.num_groups = groups;
          p.layout = layout;
          p.stores = store;
          simdnorm::norm_args a;
          a.x = x.data();
          a.y = y.data();
          a.gamma = g.data();
          a.beta = b.data();
          a.mean = mean.data();
          a.rstd = rstd.data();
          const std::string name = "group_norm" + std::to_string(groups) + tag;
          fail_if(simdnorm::group_norm(shape, shape, p, a), name);
          fnv1a h;
          h.add(y);
          h.add(mean);
          h.add(rstd);
          out[name] = h.h;
        }
        if (S > 1) {
          const auto shape4 =
              nhwc ? tensor_desc::contiguous({N, S, 1, C}) : tensor_desc::contiguous({N, C, S, 1});
          std::vector<float> y(n), mean(units), rstd(mean.size());
          simdnorm::instance_norm_params p;
          p.layout = layout;
          simdnorm::norm_args a;
          a.x = x.data();
          a.y = y.data();
          a.gamma = g.data();
          a.mean = mean.data();
          a.rstd = rstd.data();
          const std::string name = "instance_norm" + tag;
          fail_if(simdnorm::instance_norm(shape4, shape4, p, a), name);
          fnv1a h;
          h.add(y);
          h.add(mean);
          h.add(rstd);
          out[name] = h.h;
        }
        if (!nhwc) {
          const auto shape4 = tensor_desc::contiguous({N, C, S, 1});
          std::vector<float> y(n);
          simdnorm::mean_variance_norm_params p;
          simdnorm::norm_args a;
          a.x = x.data();
          a.y = y.data();
          const std::string name = "mean_variance_norm" + tag;
          fail_if(simdnorm::mean_variance_norm(shape4, shape4, p, a), name);
          fnv1a h;
          h.add(y);
          out[name] = h.h;
        }
      }
}

std::map<std::string, results> run_all() {
  std::map<std::string, results> by_isa;
  std::size_t n = 0;
  const simdnorm::isa* isas = simdnorm::compiled_isas(&n);
  for (std::size_t k = 0; k < n; ++k) {
    if (!simdnorm::cpu_supports(isas[k])) continue;
    fail_if(simdnorm::force_isa(isas[k]), "force_isa");
    // Keyed by architecture too: the same ISA name (scalar) may round differently elsewhere.
    results& r = by_isa[std::string(kArch) + "/" + simdnorm::isa_name(isas[k])];
    rows(r);
    channels(r);
  }
  simdnorm::reset_isa();
  return by_isa;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, results> got = run_all();
  if (argc == 1) {
    for (const auto& [isa, r] : got)
      for (const auto& [name, h] : r)
        std::printf("%s %s %016" PRIx64 "\n", isa.c_str(), name.c_str(), h);
    return 0;
  }
  if (argc != 3 || std::strcmp(argv[1], "--check") != 0) {
    std::fprintf(stderr, "usage: %s [--check FILE]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[2]);
    return 2;
  }
  std::map<std::string, results> want;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string isa, name, hex;
    ls >> isa >> name >> hex;
    want[isa][name] = std::stoull(hex, nullptr, 16);
  }
  int compared = 0, differ = 0;
  for (const auto& [isa, r] : got) {
    auto w = want.find(isa);
    if (w == want.end()) {
      std::printf("%s: no golden list for this ISA (skipped)\n", isa.c_str());
      continue;
    }
    for (const auto& [name, h] : r) {
      auto it = w->second.find(name);
      ++compared;
      if (it == w->second.end() || it->second != h) {
        if (++differ <= 20) std::printf("DIFFERS %s %s\n", isa.c_str(), name.c_str());
      }
    }
  }
  std::printf("%d cases compared, %d differ\n", compared, differ);
  if (compared == 0) return 77;  // ctest SKIP_RETURN_CODE: no list for any ISA that runs here
  return differ == 0 ? 0 : 1;
}
