// The probes of bench_memory.cpp, included once per vector width inside a namespace that
// defines vec (a vector of floats) and stream (its streaming store).

constexpr std::size_t W = sizeof(vec) / sizeof(float);
inline vec zero() { return vec{}; }
inline vec set1(float v) { return vec{} + v; }
inline vec load(const float* p) { return *reinterpret_cast<const vec*>(p); }  // aligned
inline vec add(vec a, vec b) { return a + b; }
inline vec mul(vec a, vec b) { return a * b; }
inline float first(vec v) { return v[0]; }

float read(const float* x, std::size_t n) {
  vec s0 = zero(), s1 = s0, s2 = s0, s3 = s0;
  for (std::size_t i = 0; i < n; i += 4 * W) {
    s0 = add(s0, load(x + i));
    s1 = add(s1, load(x + i + W));
    s2 = add(s2, load(x + i + 2 * W));
    s3 = add(s3, load(x + i + 3 * W));
  }
  return first(add(add(s0, s1), add(s2, s3)));
}

void write(float* y, std::size_t n, float v) {
  const vec c = set1(v);
  for (std::size_t i = 0; i < n; i += W) stream(y + i, c);
}

void scale(const float* x, float* y, std::size_t n, float v) {
  const vec c = set1(v);
  for (std::size_t i = 0; i < n; i += W) stream(y + i, mul(load(x + i), c));
}

/// Slices of `slice` floats: a slice of x read, then a slice of y written.
float phases(const float* x, float* y, std::size_t n, std::size_t slice) {
  float r = 0.f;
  for (std::size_t i = 0; i < n; i += slice) {
    r += read(x + i, slice);
    write(y + i, slice, 2.f);
  }
  return r;
}

/// x[lag, n) read and y[0, n - lag) = x[0, n - lag) * c written in one loop, then the rest.
float one_loop(const float* x, float* y, std::size_t n, std::size_t lag) {
  const vec c = set1(0.5f);
  const float r = read(x, lag);
  vec s0 = zero(), s1 = s0;
  for (std::size_t i = lag; i < n; i += 2 * W) {
    s0 = add(s0, load(x + i));
    s1 = add(s1, load(x + i + W));
    stream(y + i - lag, mul(load(x + i - lag), c));
    stream(y + i - lag + W, mul(load(x + i - lag + W), c));
  }
  scale(x + n - lag, y + n - lag, lag, 0.5f);
  return r + first(add(s0, s1));
}
