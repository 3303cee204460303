// simdnorm_accuracy: maximum output error against a float64 reference, for simdnorm and each
// peer compiled into the benchmarks (oneDNN, libtorch), on inputs whose mean is large against
// their spread, where single-pass or single-float statistics lose digits:
//   N(0,1), 1e4 + N(0,1), 1e6 + N(0,1)
//   LayerNorm   64 rows x D = 4096
//   BatchNorm   training-mode forward (batch statistics), (8, 64, 56, 56): N*H*W = 25088 values
//               per channel, NCHW and NHWC
// and the same ops on bf16 x and y (gamma and beta f32 for simdnorm and oneDNN, bf16 for
// libtorch, as a model converted with .to(torch.bfloat16) has them), on inputs rounded to bf16:
//   N(0,1), 16 + N(0,1), 256 + N(0,1)   (bf16 spacing 1/8 and 2 at those means)
// gamma = 1, beta = 0, eps = 1e-5, so outputs have unit scale and the absolute error is also a
// relative one. The reference computes exact (two-pass, float64) statistics of the same inputs.
// "floor" is, for f32, what exact statistics rounded to float give, y = (x - mean_f) * rstd_f
// in float: the error of any kernel that keeps the mean as one float; for bf16, the exact y
// rounded to bf16: the error of a perfect bf16 kernel.
//
//   simdnorm_accuracy [--json FILE] [--only NAME[,NAME...]]
// prints a markdown table; --json also writes the results as JSON; --only restricts the
// implementations (e.g. --only torch_avx512 in a process run with ATEN_CPU_CAPABILITY=avx512).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "peers/peers.hpp"
#include "simdnorm/simdnorm.hpp"

namespace {

struct input_kind {
  const char* name;
  double mean;
};
const input_kind kInputs[] = {{"N(0,1)", 0.0}, {"1e4+N(0,1)", 1e4}, {"1e6+N(0,1)", 1e6}};
const input_kind kBf16Inputs[] = {{"N(0,1)", 0.0}, {"16+N(0,1)", 16.0}, {"256+N(0,1)", 256.0}};

struct acc_case {
  peers::problem p;
  std::string op_name, layout_name, shape;
  std::vector<float> x;               // in the problem's memory layout (bf16 inputs: exact)
  std::vector<std::uint16_t> x_bf16;  // the bf16 inputs' bits, for a bf16 problem
  std::vector<double> ref;            // float64 reference, same layout
  std::vector<double> floor;          // the floor output (see the banner), same layout
};

// Index of logical element (n, c, s) (s = h * W + w) in the problem's memory layout.
std::size_t index_of(const peers::problem& p, std::int64_t n, std::int64_t c, std::int64_t s) {
  const std::int64_t hw = p.h * p.w;
  if (p.lay == peers::layout::nhwc) return std::size_t((n * hw + s) * p.c + c);
  return std::size_t((n * p.c + c) * hw + s);
}

// Statistics groups: LayerNorm = one row; BatchNorm = one channel over (n, h, w).
template <class F>
void for_each_group(const peers::problem& p, F f) {
  std::vector<std::size_t> idx;
  if (p.op == peers::op_kind::layer_norm) {
    for (std::int64_t r = 0; r < p.n; ++r) {
      idx.clear();
      for (std::int64_t i = 0; i < p.c; ++i) idx.push_back(std::size_t(r * p.c + i));
      f(idx);
    }
  } else {
    for (std::int64_t c = 0; c < p.c; ++c) {
      idx.clear();
      for (std::int64_t n = 0; n < p.n; ++n)
        for (std::int64_t s = 0; s < p.h * p.w; ++s) idx.push_back(index_of(p, n, c, s));
      f(idx);
    }
  }
}

acc_case make_case(const peers::problem& p, const input_kind& in) {
  acc_case k;
  k.p = p;
  const std::size_t n = p.elements();
  k.x.resize(n);
  k.ref.resize(n);
  k.floor.resize(n);
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> z(0.0, 1.0);
  const bool bf16 = p.type == peers::elem::bf16;
  for (std::size_t i = 0; i < n; ++i) k.x[i] = float(in.mean + z(rng));
  if (bf16) {
    k.x_bf16.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      k.x_bf16[i] = peers::float_to_bf16(k.x[i]);
      k.x[i] = peers::bf16_to_float(k.x_bf16[i]);
    }
  }
  for_each_group(p, [&](const std::vector<std::size_t>& idx) {
    double s = 0;
    for (std::size_t i : idx) s += k.x[i];
    const double mean = s / double(idx.size());
    double q = 0;
    for (std::size_t i : idx) q += (k.x[i] - mean) * (k.x[i] - mean);
    const double var = q / double(idx.size());
    const double rstd = 1.0 / std::sqrt(var + double(p.eps));
    const float mean_f = float(mean), rstd_f = float(rstd);
    for (std::size_t i : idx) {
      k.ref[i] = (k.x[i] - mean) * rstd;
      k.floor[i] = bf16 ? double(peers::bf16_to_float(peers::float_to_bf16(float(k.ref[i]))))
                        : double((k.x[i] - mean_f) * rstd_f);
    }
  });
  return k;
}

struct error {
  double max_abs = 0;
  bool finite = true;
};

error max_error(const float* y, const acc_case& k) {
  error e;
  for (std::size_t i = 0; i < k.ref.size(); ++i) {
    if (!std::isfinite(y[i])) {
      e.finite = false;
      continue;
    }
    e.max_abs = std::max(e.max_abs, std::fabs(double(y[i]) - k.ref[i]));
  }
  return e;
}

error floor_error(const acc_case& k) {
  error e;
  for (std::size_t i = 0; i < k.ref.size(); ++i)
    e.max_abs = std::max(e.max_abs, std::fabs(k.floor[i] - k.ref[i]));
  return e;
}

/// The x of a case for a kernel: its bf16 bits or its floats.
const void* input_of(const acc_case& k) {
  return k.p.type == peers::elem::bf16 ? static_cast<const void*>(k.x_bf16.data())
                                       : static_cast<const void*>(k.x.data());
}

// simdnorm on the case: false with the reason when simdnorm has no such op (yet).
bool run_simdnorm(const acc_case& k, std::vector<float>* y, std::string* why) {
  const peers::problem& p = k.p;
  const bool bf16 = p.type == peers::elem::bf16;
  const simdnorm::dtype dt = bf16 ? simdnorm::dtype::bf16 : simdnorm::dtype::f32;
  y->assign(p.elements(), 0.0f);
  std::vector<std::uint16_t> y_bf16(bf16 ? p.elements() : 0);
  std::vector<float> ones(p.affine_length(), 1.0f), zeros(p.affine_length(), 0.0f);
  simdnorm::status s;
  simdnorm::norm_args a;
  a.x = input_of(k);
  a.y = bf16 ? static_cast<void*>(y_bf16.data()) : static_cast<void*>(y->data());
  a.gamma = ones.data();
  a.beta = zeros.data();
  if (p.op == peers::op_kind::layer_norm) {
    const auto d = simdnorm::tensor_desc::contiguous({p.n, p.c}, dt);
    simdnorm::layer_norm_params prm;
    prm.eps = p.eps;
    s = simdnorm::layer_norm(d, d, prm, a);
  } else if (p.op == peers::op_kind::batch_norm_training) {
    const bool nhwc = p.lay == peers::layout::nhwc;
    const auto d = nhwc ? simdnorm::tensor_desc::contiguous({p.n, p.h, p.w, p.c}, dt)
                        : simdnorm::tensor_desc::contiguous({p.n, p.c, p.h, p.w}, dt);
    simdnorm::batch_norm_params prm;
    prm.layout = nhwc ? simdnorm::channel_layout::nhwc : simdnorm::channel_layout::nchw;
    prm.eps = p.eps;
    prm.training = true;
    s = simdnorm::batch_norm(d, d, prm, a);
  } else {
    *why = "not in simdnorm_accuracy";
    return false;
  }
  if (!s) *why = s.message();
  for (std::size_t i = 0; i < y_bf16.size(); ++i) (*y)[i] = peers::bf16_to_float(y_bf16[i]);
  return s.ok();
}

std::string fmt(double v) {
  char b[32];
  if (v == 0) return "0";
  std::snprintf(b, sizeof b, "%.2g", v);
  return b;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string t;
      while (std::getline(ss, t, ',')) only.insert(t);
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--only NAME[,NAME...]]\n", argv[0]);
      return 2;
    }
  }
  peers::init(1);
  auto wanted = [&](const std::string& n) { return only.empty() || only.count(n) > 0; };

  std::vector<peers::problem> problems;
  for (peers::elem type : {peers::elem::f32, peers::elem::bf16}) {
    peers::problem ln;
    ln.op = peers::op_kind::layer_norm;
    ln.lay = peers::layout::rows;
    ln.n = 64;
    ln.c = 4096;
    ln.type = type;
    problems.push_back(ln);
    for (peers::layout l : {peers::layout::nchw, peers::layout::nhwc}) {
      peers::problem bn;
      bn.op = peers::op_kind::batch_norm_training;
      bn.lay = l;
      bn.n = 8;
      bn.c = 64;
      bn.h = 56;
      bn.w = 56;
      bn.type = type;
      problems.push_back(bn);
    }
  }

  std::vector<std::string> impls;
  if (wanted("simdnorm")) impls.push_back("simdnorm");
  for (const auto& pr : peers::available())
    if (wanted(pr.name)) impls.push_back(pr.name);

  struct row {
    std::string op, type, lay, shape, input;
    double floor;
    std::map<std::string, std::string> cell;  // impl -> error text
    std::map<std::string, error> err;
    std::map<std::string, std::string> note;
  };
  std::vector<row> rows;
  for (const peers::problem& p : problems) {
    const bool bf16 = p.type == peers::elem::bf16;
    for (const input_kind& in : bf16 ? kBf16Inputs : kInputs) {
      acc_case k = make_case(p, in);
      row r;
      r.op = p.op == peers::op_kind::layer_norm ? "layer_norm" : "batch_norm_training";
      r.type = bf16 ? "bf16" : "f32";
      r.lay = p.lay == peers::layout::rows   ? "rows"
              : p.lay == peers::layout::nchw ? "nchw"
                                             : "nhwc";
      r.shape = p.op == peers::op_kind::layer_norm
                    ? std::to_string(p.n) + "x" + std::to_string(p.c)
                    : std::to_string(p.n) + "x" + std::to_string(p.c) + "x" + std::to_string(p.h) +
                          "x" + std::to_string(p.w);
      r.input = in.name;
      r.floor = floor_error(k).max_abs;
      for (const std::string& name : impls) {
        std::vector<float> y;
        std::string why;
        const float* out = nullptr;
        std::unique_ptr<peers::peer_op> op;
        if (name == "simdnorm") {
          if (run_simdnorm(k, &y, &why)) out = y.data();
        } else {
          for (const auto& pr : peers::available()) {
            if (pr.name != name) continue;
            std::vector<float> ones(p.affine_length(), 1.0f), zeros(p.affine_length(), 0.0f);
            y.assign(p.elements(), 0.0f);  // wide enough for a bf16 y as well
            peers::io b;
            b.x = input_of(k);
            b.y = y.data();
            b.gamma = ones.data();
            b.beta = zeros.data();
            op = pr.make(p, b, 1, &why);
            if (op) {
              op->run();
              out = op->output();
              // Copy out while gamma/beta are alive (output() may point into the op).
              if (out != y.data()) std::memcpy(y.data(), out, y.size() * sizeof(float));
              out = y.data();
            }
          }
        }
        if (!out) {
          r.cell[name] = "n/a";
          r.note[name] = why;
          continue;
        }
        const error e = max_error(out, k);
        r.err[name] = e;
        r.cell[name] = e.finite ? fmt(e.max_abs) : fmt(e.max_abs) + " (non-finite!)";
      }
      rows.push_back(r);
    }
  }

  // Markdown.
  std::printf("| op | type | layout | shape | input | floor |");
  for (const auto& n : impls) std::printf(" %s |", n.c_str());
  std::printf("\n|---|---|---|---|---|---|");
  for (std::size_t i = 0; i < impls.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s |", r.op.c_str(), r.type.c_str(), r.lay.c_str(),
                r.shape.c_str(), r.input.c_str(), fmt(r.floor).c_str());
    for (const auto& n : impls) std::printf(" %s |", r.cell.at(n).c_str());
    std::printf("\n");
  }

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::perror(json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"context\": {");
    bool first = true;
    for (const auto& kv : peers::describe()) {
      std::fprintf(f, "%s\n    \"%s\": \"%s\"", first ? "" : ",", json_escape(kv.first).c_str(),
                   json_escape(kv.second).c_str());
      first = false;
    }
    std::fprintf(f, "%s\n    \"simdnorm_isa\": \"%s\"\n  },\n  \"results\": [", first ? "" : ",",
                 simdnorm::isa_name(simdnorm::active_isa()));
    first = true;
    for (const row& r : rows) {
      auto emit = [&](const std::string& impl, const std::string& val, const std::string& note) {
        std::fprintf(
            f,
            "%s\n    {\"op\": \"%s\", \"type\": \"%s\", \"layout\": \"%s\", "
            "\"shape\": \"%s\", \"input\": \"%s\", \"impl\": \"%s\", \"max_abs_error\": %s, "
            "\"note\": \"%s\"}",
            first ? "" : ",", r.op.c_str(), r.type.c_str(), r.lay.c_str(), r.shape.c_str(),
            r.input.c_str(), impl.c_str(), val.c_str(), json_escape(note).c_str());
        first = false;
      };
      char b[64];
      std::snprintf(b, sizeof b, "%.6g", r.floor);
      emit("floor", b, "");
      for (const auto& n : impls) {
        auto it = r.err.find(n);
        if (it == r.err.end()) {
          emit(n, "null", r.note.count(n) ? r.note.at(n) : "");
        } else {
          std::snprintf(b, sizeof b, "%.6g", it->second.max_abs);
          emit(n, b, it->second.finite ? "" : "non-finite outputs");
        }
      }
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
