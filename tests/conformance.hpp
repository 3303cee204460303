// Reader for the ONNX conformance cases in tests/data/onnx (manifest.txt + raw float32 files).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace conformance {

struct tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
  double atol = 0, rtol = 0;
};

struct onnx_case {
  std::string name, op, dir;
  std::map<std::string, std::string> attr;
  std::vector<std::string> tags;
  std::map<std::string, tensor> inputs, outputs;

  double attr_num(const std::string& k, double dflt) const {
    auto it = attr.find(k);
    return it == attr.end() ? dflt : std::stod(it->second);
  }
  bool has_tag(const std::string& t) const {
    for (const auto& s : tags)
      if (s == t) return true;
    return false;
  }
};

inline std::string root() { return SIMDNORM_CONFORMANCE_DIR; }

inline std::vector<float> read_floats(const std::string& path, std::size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(float)));
  if (!f) v.clear();
  return v;
}

inline onnx_case load(const std::string& dir) {
  onnx_case c;
  c.dir = dir;
  std::ifstream m(dir + "/manifest.txt");
  std::string line;
  while (std::getline(m, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "name")
      ls >> c.name;
    else if (key == "op")
      ls >> c.op;
    else if (key == "attr") {
      std::string k, v;
      ls >> k >> v;
      c.attr[k] = v;
    } else if (key == "tags") {
      std::string t;
      ls >> t;
      std::stringstream ts(t);
      std::string one;
      while (std::getline(ts, one, ','))
        if (one != "-") c.tags.push_back(one);
    } else if (key == "input" || key == "output") {
      std::string role, dtype, file;
      int rank;
      ls >> role >> dtype >> file >> rank;
      tensor t;
      std::size_t n = 1;
      for (int i = 0; i < rank; ++i) {
        std::int64_t d;
        ls >> d;
        t.shape.push_back(d);
        n *= std::size_t(d);
      }
      t.data = read_floats(dir + "/" + file, n);
      (key == "input" ? c.inputs : c.outputs)[role] = std::move(t);
    } else if (key == "tol") {
      std::string role;
      double atol, rtol;
      ls >> role >> atol >> rtol;
      c.outputs[role].atol = atol;
      c.outputs[role].rtol = rtol;
    }
  }
  return c;
}

/// Every case whose manifest names `op`, sorted by name.
inline std::vector<onnx_case> load_all(const std::string& op) {
  std::vector<std::string> dirs;
  if (DIR* d = opendir(root().c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::ifstream probe(root() + "/" + n + "/manifest.txt");
      if (probe) dirs.push_back(root() + "/" + n);
    }
    closedir(d);
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<onnx_case> out;
  for (const auto& d : dirs) {
    onnx_case c = load(d);
    if (c.op == op) out.push_back(std::move(c));
  }
  return out;
}

/// The dense (row-major) descriptor of a case tensor's shape; more than max_dims dims make an
/// invalid descriptor, as tensor_desc::contiguous does.
inline simdnorm::tensor_desc desc_of(const std::vector<std::int64_t>& shape) {
  simdnorm::tensor_desc d;
  if (shape.size() > std::size_t(simdnorm::max_dims)) {
    d.ndim = simdnorm::max_dims + 1;
    return d;
  }
  d.ndim = int(shape.size());
  std::int64_t stride = 1;
  for (int i = d.ndim - 1; i >= 0; --i) {
    d.shape[i] = shape[std::size_t(i)];
    d.strides[i] = stride;
    stride *= shape[std::size_t(i)];
  }
  return d;
}

/// The elements of `got` outside |got - ref| <= atol + rtol * |ref| (NaN must match NaN).
inline test::failures mismatches(const float* got, const tensor& ref) {
  test::failures bad;
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    const double g = got[i], r = ref.data[i];
    const double tol = ref.atol + ref.rtol * std::fabs(r);
    const bool ok = std::isnan(r) ? std::isnan(g) : std::fabs(g - r) <= tol;
    bad.expect(ok, [&] {
      return "element " + std::to_string(i) + ": got " + std::to_string(g) + " want " +
             std::to_string(r);
    });
  }
  return bad;
}

/// Checks `got` against the case's output `name`.
inline void check_output(const onnx_case& c, const char* name, const float* got) {
  const test::failures bad = mismatches(got, c.outputs.at(name));
  CHECK_MESSAGE(bad.none(), std::string(name) << ": " << bad.report());
}

/// Checks `got` against the case's output `name` when the case has that output.
inline void check_optional_output(const onnx_case& c, const char* name, const float* got) {
  if (c.outputs.count(name)) check_output(c, name, got);
}

}  // namespace conformance
