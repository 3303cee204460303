/* The C API, compiled as C99: every function, its error paths, and a host thread pool (pthreads)
 * driving plan tasks through simdnorm_executor. Results must equal the C++ path bit for bit
 * whatever runs the tasks, and a float64 reference within 1e-4. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simdnorm/simdnorm.h"

static int g_failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)
/* A call that must fail with `code` and leave a message that mentions `word`. */
#define CHECK_FAILS(call, code, word)                                         \
  do {                                                                        \
    simdnorm_status s_ = (call);                                              \
    CHECK(s_ == (code));                                                      \
    if (strstr(simdnorm_last_error_message(), (word)) == NULL) {              \
      fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__, \
              simdnorm_last_error_message(), (word));                         \
      ++g_failures;                                                           \
    }                                                                         \
  } while (0)

/* ---- A host pool: one pthread per chunk, the shape of an engine's pool --------------------- */

typedef struct host_pool {
  size_t threads;
  size_t calls;        /* parallel_for calls */
  unsigned char* seen; /* per task: how many times it ran (must end at exactly 1) */
  size_t seen_size;
} host_pool;

typedef struct chunk {
  simdnorm_task_fn task;
  void* ctx;
  size_t begin, end;
  host_pool* pool;
} chunk;

static void* run_chunk(void* p) {
  chunk* c = (chunk*)p;
  size_t i;
  for (i = c->begin; i < c->end && i < c->pool->seen_size; ++i) c->pool->seen[i]++; /* disjoint */
  c->task(c->ctx, c->begin, c->end);
  return NULL;
}

static void pool_parallel_for(void* user, size_t n, simdnorm_task_fn task, void* ctx) {
  host_pool* pool = (host_pool*)user;
  pthread_t tid[16];
  chunk chunks[16];
  size_t k, used = 0;
  pool->calls++;
  for (k = 0; k < pool->threads && k < 16; ++k) {
    chunks[k].task = task;
    chunks[k].ctx = ctx;
    chunks[k].begin = n * k / pool->threads;
    chunks[k].end = n * (k + 1) / pool->threads;
    chunks[k].pool = pool;
    if (chunks[k].begin == chunks[k].end) continue;
    if (pthread_create(&tid[used], NULL, run_chunk, &chunks[k]) != 0) {
      run_chunk(&chunks[k]); /* no thread: run it here, the contract still holds */
      continue;
    }
    ++used;
  }
  for (k = 0; k < used; ++k) pthread_join(tid[k], NULL);
}

/* ---- Helpers ------------------------------------------------------------------------------ */

static void fill(float* p, size_t n, unsigned seed, float offset) {
  size_t i;
  for (i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = offset + (float)((double)(seed >> 8) / 16777216.0 * 4.0 - 2.0);
  }
}

static simdnorm_tensor_desc matrix(size_t rows, size_t cols) {
  simdnorm_tensor_desc d;
  int64_t shape[2];
  shape[0] = (int64_t)rows;
  shape[1] = (int64_t)cols;
  CHECK(simdnorm_tensor_contiguous(&d, 2, shape) == SIMDNORM_OK);
  return d;
}

static double max_layer_norm_error(const float* x, const float* y, const float* g, const float* b,
                                   size_t rows, size_t cols, double eps) {
  double worst = 0;
  size_t r, i;
  for (r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0, var = 0, rstd;
    for (i = 0; i < cols; ++i) mean += xr[i];
    mean /= (double)cols;
    for (i = 0; i < cols; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    rstd = 1.0 / sqrt(var / (double)cols + eps);
    for (i = 0; i < cols; ++i) {
      const double want = (xr[i] - mean) * rstd * (g ? g[i] : 1.0) + (b ? b[i] : 0.0);
      const double err = fabs(want - y[r * cols + i]);
      if (!(err <= worst)) worst = err; /* NaN-propagating max */
    }
  }
  return worst;
}

/* ---- Tests -------------------------------------------------------------------------------- */

static void test_status(void) {
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_OK), "ok") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_UNSUPPORTED_LAYOUT), "unsupported_layout") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_SIZE_OVERFLOW), "size_overflow") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_UNSUPPORTED_ISA), "unsupported_isa") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_OUT_OF_MEMORY), "out_of_memory") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_INTERNAL_ERROR), "internal_error") == 0);
  CHECK(strcmp(simdnorm_status_string(SIMDNORM_UNSUPPORTED_DTYPE), "unsupported_dtype") == 0);
  CHECK(strcmp(simdnorm_status_string((simdnorm_status)42), "unknown") == 0);
}

static void* read_last_error(void* out) {
  *(const char**)out = simdnorm_last_error_message();
  return NULL;
}

static void test_last_error_is_per_thread(void) {
  pthread_t t;
  const char* other = NULL;
  simdnorm_isa isa;
  CHECK_FAILS(simdnorm_isa_from_name("no_such_isa", &isa), SIMDNORM_INVALID_ARGUMENT,
              "no_such_isa");
  CHECK(simdnorm_isa_from_name("scalar", &isa) == SIMDNORM_OK); /* success keeps the message */
  CHECK(strstr(simdnorm_last_error_message(), "no_such_isa") != NULL);
  CHECK(pthread_create(&t, NULL, read_last_error, (void*)&other) == 0);
  pthread_join(t, NULL);
  CHECK(other != NULL && other[0] == '\0'); /* a fresh thread has no error */
}

/* The ISA the default selection must report: SIMDNORM_ISA when it names an ISA that runs here,
 * else the best runnable one of `list` (compiled ISAs, best first). */
static simdnorm_isa default_isa(const simdnorm_isa* list, size_t n) {
  const char* env = getenv("SIMDNORM_ISA");
  simdnorm_isa want;
  size_t i;
  if (env != NULL && env[0] != '\0' && simdnorm_isa_from_name(env, &want) == SIMDNORM_OK &&
      simdnorm_cpu_supports(want))
    return want;
  for (i = 0; i < n; ++i)
    if (simdnorm_cpu_supports(list[i])) return list[i];
  return SIMDNORM_ISA_SCALAR;
}

static void test_isa(void) {
  simdnorm_isa list[8], parsed;
  const size_t n = simdnorm_compiled_isas(list, 8);
  const simdnorm_isa before = simdnorm_active_isa();
  size_t i;
  CHECK(n >= 1 && n <= 8);
  CHECK(simdnorm_compiled_isas(NULL, 0) == n);
  CHECK(list[n - 1] == SIMDNORM_ISA_SCALAR); /* best first, scalar last */
  CHECK(simdnorm_cpu_supports(SIMDNORM_ISA_SCALAR) == 1);
  CHECK(simdnorm_cpu_supports((simdnorm_isa)99) == 0);
  CHECK(strcmp(simdnorm_isa_name((simdnorm_isa)99), "unknown") == 0);
  CHECK(simdnorm_cpu_supports(before) == 1);

  for (i = 0; i < n; ++i) {
    CHECK(simdnorm_isa_from_name(simdnorm_isa_name(list[i]), &parsed) == SIMDNORM_OK);
    CHECK(parsed == list[i]);
    if (!simdnorm_cpu_supports(list[i])) {
      CHECK_FAILS(simdnorm_force_isa(list[i]), SIMDNORM_UNSUPPORTED_ISA,
                  simdnorm_isa_name(list[i]));
      continue;
    }
    CHECK(simdnorm_force_isa(list[i]) == SIMDNORM_OK);
    CHECK(simdnorm_active_isa() == list[i]);
    {
      simdnorm_tensor_desc d = matrix(2, 5);
      simdnorm_plan_t p = NULL;
      CHECK(simdnorm_plan_rms_norm(&d, &d, NULL, &p) == SIMDNORM_OK);
      CHECK(simdnorm_plan_isa(p) == list[i]); /* plans capture the forced ISA */
      simdnorm_plan_destroy(p);
    }
  }
  /* An ISA of the other architecture is never compiled in. */
  {
    const simdnorm_isa foreign =
        simdnorm_cpu_supports(SIMDNORM_ISA_NEON64) ? SIMDNORM_ISA_AVX2_FMA : SIMDNORM_ISA_NEON64;
    const simdnorm_isa now = simdnorm_active_isa();
    CHECK_FAILS(simdnorm_force_isa(foreign), SIMDNORM_UNSUPPORTED_ISA, simdnorm_isa_name(foreign));
    CHECK(simdnorm_active_isa() == now); /* a failed force changes nothing */
  }
  CHECK_FAILS(simdnorm_force_isa((simdnorm_isa)99), SIMDNORM_INVALID_ARGUMENT, "not an ISA");
  CHECK_FAILS(simdnorm_isa_from_name(NULL, &parsed), SIMDNORM_INVALID_ARGUMENT, "null");
  CHECK_FAILS(simdnorm_isa_from_name("scalar", NULL), SIMDNORM_INVALID_ARGUMENT, "null");
  simdnorm_reset_isa(); /* back to the default selection: SIMDNORM_ISA if it can run, else the best
                         */
  CHECK(simdnorm_active_isa() == default_isa(list, n));
  CHECK(simdnorm_cpu_supports(simdnorm_active_isa()) == 1);
}

static void test_descs_and_defaults(void) {
  simdnorm_tensor_desc d;
  const int64_t shape[3] = {2, 3, 5};
  const simdnorm_layer_norm_params ln = simdnorm_layer_norm_params_default();
  const simdnorm_rms_norm_params rms = simdnorm_rms_norm_params_default();
  CHECK(simdnorm_tensor_contiguous(&d, 3, shape) == SIMDNORM_OK);
  CHECK(d.ndim == 3 && d.shape[0] == 2 && d.shape[2] == 5);
  CHECK(d.strides[0] == 15 && d.strides[1] == 5 && d.strides[2] == 1);
  CHECK_FAILS(simdnorm_tensor_contiguous(&d, 0, shape), SIMDNORM_INVALID_ARGUMENT, "ndim=0");
  CHECK_FAILS(simdnorm_tensor_contiguous(&d, SIMDNORM_MAX_DIMS + 1, shape),
              SIMDNORM_INVALID_ARGUMENT, "ndim=9");
  CHECK_FAILS(simdnorm_tensor_contiguous(NULL, 3, shape), SIMDNORM_INVALID_ARGUMENT, "null");
  CHECK_FAILS(simdnorm_tensor_contiguous(&d, 3, NULL), SIMDNORM_INVALID_ARGUMENT, "null");
  CHECK(d.ndim == 3); /* unchanged by the failures */
  CHECK(ln.normalized_ndim == 1 && ln.eps == 1e-5f && ln.compensated_mean == 1);
  CHECK(ln.stores == SIMDNORM_STORES_AUTOMATIC);
  CHECK(rms.normalized_ndim == 1 && rms.eps == 1e-6f && rms.stores == SIMDNORM_STORES_AUTOMATIC);
}

static void test_plan_errors(void) {
  simdnorm_tensor_desc x = matrix(4, 6), y = matrix(4, 7), bad = x;
  simdnorm_layer_norm_params prm = simdnorm_layer_norm_params_default();
  simdnorm_plan_t p = (simdnorm_plan_t)&x; /* must be overwritten with NULL on error */
  CHECK_FAILS(simdnorm_plan_layer_norm(NULL, &x, NULL, &p), SIMDNORM_INVALID_ARGUMENT, "x is null");
  CHECK(p == NULL);
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, NULL, NULL, &p), SIMDNORM_INVALID_ARGUMENT, "y is null");
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, &x, NULL, NULL), SIMDNORM_INVALID_ARGUMENT,
              "out is null");
  CHECK_FAILS(simdnorm_plan_rms_norm(&x, &x, NULL, NULL), SIMDNORM_INVALID_ARGUMENT, "out is null");
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, &y, NULL, &p), SIMDNORM_INVALID_ARGUMENT, "shape[1]");
  bad.ndim = 0;
  CHECK_FAILS(simdnorm_plan_layer_norm(&bad, &bad, NULL, &p), SIMDNORM_INVALID_ARGUMENT, "ndim=0");
  bad = x;
  bad.shape[0] = -3;
  CHECK_FAILS(simdnorm_plan_rms_norm(&bad, &bad, NULL, &p), SIMDNORM_INVALID_ARGUMENT,
              "shape[0]=-3");
  bad = x;
  bad.strides[1] = 2; /* the normalized dim must be dense */
  CHECK(simdnorm_plan_layer_norm(&bad, &bad, NULL, &p) != SIMDNORM_OK);
  bad = x;
  bad.shape[0] = (int64_t)1 << 62;
  bad.strides[0] = (int64_t)1 << 62;
  CHECK_FAILS(simdnorm_plan_layer_norm(&bad, &bad, NULL, &p), SIMDNORM_SIZE_OVERFLOW, "overflow");
  prm.eps = -1.f;
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, &x, &prm, &p), SIMDNORM_INVALID_ARGUMENT, "eps");
  prm = simdnorm_layer_norm_params_default();
  prm.normalized_ndim = 3;
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, &x, &prm, &p), SIMDNORM_INVALID_ARGUMENT,
              "normalized_ndim");
  prm = simdnorm_layer_norm_params_default();
  prm.stores = (simdnorm_store_policy)7;
  CHECK_FAILS(simdnorm_plan_layer_norm(&x, &x, &prm, &p), SIMDNORM_INVALID_ARGUMENT, "stores");
  CHECK(p == NULL);

  /* Accessors and destroy accept NULL. */
  CHECK(simdnorm_plan_num_phases(NULL) == 0 && simdnorm_plan_num_tasks(NULL, 0) == 0);
  CHECK(simdnorm_plan_rows(NULL) == 0 && simdnorm_plan_row_length(NULL) == 0);
  CHECK(simdnorm_plan_workspace_bytes(NULL) == 0 && simdnorm_plan_isa(NULL) == SIMDNORM_ISA_SCALAR);
  simdnorm_plan_destroy(NULL);
}

/* LayerNorm 64 x 1000 (several tasks): default executor, host pool, serial executor and
 * plan_run over uneven ranges give the same bits, within 1e-4 of float64. */
static void test_layer_norm_paths(void) {
  enum { R = 160, C = 1000 }; /* above the row plans' inline size: several tasks */
  static float x[R * C], g[C], b[C], y_default[R * C], y_pool[R * C], y_serial[R * C], y_run[R * C];
  float mean[R], rstd[R], mean2[R], rstd2[R];
  simdnorm_tensor_desc d = matrix(R, C);
  simdnorm_plan_t p = NULL;
  simdnorm_norm_args a;
  host_pool pool;
  unsigned char seen[256];
  simdnorm_executor exec, serial;
  size_t tasks, t, r;

  fill(x, R * C, 1, 100.f);
  fill(g, C, 2, 1.f);
  fill(b, C, 3, 0.f);
  CHECK(simdnorm_plan_layer_norm(&d, &d, NULL, &p) == SIMDNORM_OK);
  if (p == NULL) return;
  CHECK(simdnorm_plan_rows(p) == R && simdnorm_plan_row_length(p) == C);
  CHECK(simdnorm_plan_num_phases(p) == 1 && simdnorm_plan_workspace_bytes(p) == 0);
  CHECK(simdnorm_plan_isa(p) == simdnorm_active_isa());
  tasks = simdnorm_plan_num_tasks(p, 0);
  CHECK(tasks >= 2 && tasks <= 256);
  CHECK(simdnorm_plan_num_tasks(p, 1) == 0);

  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y_default;
  a.gamma = g;
  a.beta = b;
  a.mean = mean;
  a.rstd = rstd;
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  CHECK(max_layer_norm_error(x, y_default, g, b, R, C, 1e-5) <= 1e-4);
  for (r = 0; r < R; ++r) CHECK(fabs(mean[r] - 100.0) < 0.2 && rstd[r] > 0.5f && rstd[r] < 2.f);

  memset(seen, 0, sizeof seen);
  pool.threads = 3;
  pool.calls = 0;
  pool.seen = seen;
  pool.seen_size = tasks;
  exec.user = &pool;
  exec.concurrency = 3;
  exec.parallel_for = pool_parallel_for;
  a.y = y_pool;
  a.mean = mean2;
  a.rstd = rstd2;
  CHECK(simdnorm_plan_execute(p, &a, &exec) == SIMDNORM_OK);
  CHECK(pool.calls == 1); /* one phase, one parallel_for */
  for (t = 0; t < tasks; ++t) CHECK(seen[t] == 1);
  CHECK(memcmp(y_pool, y_default, sizeof y_pool) == 0);
  CHECK(memcmp(mean2, mean, sizeof mean) == 0 && memcmp(rstd2, rstd, sizeof rstd) == 0);

  serial.user = NULL;
  serial.concurrency = 1;
  serial.parallel_for = NULL; /* inline */
  a.y = y_serial;
  a.mean = NULL;
  a.rstd = NULL;
  CHECK(simdnorm_plan_execute(p, &a, &serial) == SIMDNORM_OK);
  CHECK(memcmp(y_serial, y_default, sizeof y_serial) == 0);

  a.y = y_run; /* the host runs ranges itself: [0,1), [1, tasks-1), [tasks-1, tasks) */
  CHECK(simdnorm_plan_run(p, &a, 0, 0, 1) == SIMDNORM_OK);
  CHECK(simdnorm_plan_run(p, &a, 0, 1, tasks - 1) == SIMDNORM_OK);
  CHECK(simdnorm_plan_run(p, &a, 0, tasks - 1, tasks) == SIMDNORM_OK);
  CHECK(simdnorm_plan_run(p, &a, 0, 2, 2) == SIMDNORM_OK); /* empty range */
  CHECK(memcmp(y_run, y_default, sizeof y_run) == 0);

  /* The one-shot call gives the same bits. */
  memset(y_run, 0, sizeof y_run);
  CHECK(simdnorm_layer_norm(&d, &d, NULL, &a, &exec) == SIMDNORM_OK);
  CHECK(memcmp(y_run, y_default, sizeof y_run) == 0);

  /* Error paths of run and execute; a failed run writes nothing. */
  memset(y_run, 0, sizeof y_run);
  CHECK_FAILS(simdnorm_plan_run(NULL, &a, 0, 0, 1), SIMDNORM_INVALID_ARGUMENT, "plan is null");
  CHECK_FAILS(simdnorm_plan_run(p, NULL, 0, 0, 1), SIMDNORM_INVALID_ARGUMENT, "args is null");
  CHECK_FAILS(simdnorm_plan_run(p, &a, 0, 0, tasks + 1), SIMDNORM_INVALID_ARGUMENT, "outside");
  CHECK_FAILS(simdnorm_plan_run(p, &a, 0, 2, 1), SIMDNORM_INVALID_ARGUMENT, "outside");
  CHECK_FAILS(simdnorm_plan_run(p, &a, 1, 0, 1), SIMDNORM_INVALID_ARGUMENT, "phase");
  a.x = NULL;
  CHECK_FAILS(simdnorm_plan_run(p, &a, 0, 0, 1), SIMDNORM_INVALID_ARGUMENT, "x is null");
  CHECK_FAILS(simdnorm_plan_execute(p, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "x is null");
  a.x = y_run;
  a.y = y_run + 1; /* partial overlap with x is refused */
  CHECK_FAILS(simdnorm_plan_execute(p, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "overlap");
  a.x = x;
  a.y = y_run;
  CHECK_FAILS(simdnorm_plan_execute(NULL, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "plan is null");
  CHECK_FAILS(simdnorm_plan_execute(p, NULL, NULL), SIMDNORM_INVALID_ARGUMENT, "args is null");
  exec.parallel_for = NULL;
  CHECK_FAILS(simdnorm_plan_execute(p, &a, &exec), SIMDNORM_INVALID_ARGUMENT,
              "parallel_for is null");
  for (t = 0; t < R * C; ++t) CHECK(y_run[t] == 0.f);
  CHECK_FAILS(simdnorm_layer_norm(NULL, &d, NULL, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "x is null");
  simdnorm_plan_destroy(p);
}

/* RMSNorm in place on a 3-D tensor over its last two dims, against a float64 reference. */
static void test_rms_norm(void) {
  enum { N = 3, T = 5, D = 40 };
  static float x[N * T * D], x0[N * T * D], g[T * D], copy[N * T * D];
  float rstd[N];
  const int64_t shape[3] = {N, T, D};
  simdnorm_tensor_desc d;
  simdnorm_rms_norm_params prm = simdnorm_rms_norm_params_default();
  simdnorm_plan_t p = NULL;
  simdnorm_norm_args a;
  size_t n, i;
  double worst = 0;

  fill(x0, N * T * D, 9, 0.5f);
  fill(g, T * D, 10, 1.f);
  memcpy(x, x0, sizeof x);
  CHECK(simdnorm_tensor_contiguous(&d, 3, shape) == SIMDNORM_OK);
  prm.normalized_ndim = 2;
  CHECK(simdnorm_plan_rms_norm(&d, &d, &prm, &p) == SIMDNORM_OK);
  CHECK(simdnorm_plan_rows(p) == N && simdnorm_plan_row_length(p) == T * D);
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = x;
  a.gamma = g;
  a.rstd = rstd;
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  for (n = 0; n < N; ++n) {
    double ss = 0, r;
    for (i = 0; i < T * D; ++i) ss += (double)x0[n * T * D + i] * x0[n * T * D + i];
    r = 1.0 / sqrt(ss / (T * D) + prm.eps);
    CHECK(fabs(rstd[n] - r) <= 1e-5 * r);
    for (i = 0; i < T * D; ++i) {
      const double err = fabs(x0[n * T * D + i] * r * g[i] - x[n * T * D + i]);
      if (!(err <= worst)) worst = err;
    }
  }
  CHECK(worst <= 1e-5);

  memcpy(copy, x0, sizeof copy); /* one-shot, in place, equals the plan */
  a.x = copy;
  a.y = copy;
  a.rstd = NULL;
  CHECK(simdnorm_rms_norm(&d, &d, &prm, &a, NULL) == SIMDNORM_OK);
  CHECK(memcmp(copy, x, sizeof x) == 0);

  a.beta = g; /* RMSNorm has no beta */
  CHECK_FAILS(simdnorm_plan_execute(p, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "beta");
  CHECK_FAILS(simdnorm_rms_norm(&d, &d, &prm, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "beta");
  a.beta = NULL;
  CHECK_FAILS(simdnorm_rms_norm(&d, &d, &prm, NULL, NULL), SIMDNORM_INVALID_ARGUMENT,
              "args is null");
  prm.eps = (float)NAN;
  CHECK_FAILS(simdnorm_rms_norm(&d, &d, &prm, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "eps");
  simdnorm_plan_destroy(p);
}

/* Mean and biased variance of x over the (n, c) positions of an NCHW tensor selected by `pick`. */
typedef int (*pick_fn)(size_t n, size_t c, size_t key);
static void moments(const float* x, size_t N, size_t C, size_t HW, pick_fn pick, size_t key,
                    double* mean, double* var) {
  size_t n, c, i, count = 0;
  double s = 0, q = 0;
  for (n = 0; n < N; ++n)
    for (c = 0; c < C; ++c)
      if (pick(n, c, key))
        for (i = 0; i < HW; ++i) s += x[(n * C + c) * HW + i], ++count;
  *mean = s / (double)count;
  for (n = 0; n < N; ++n)
    for (c = 0; c < C; ++c)
      if (pick(n, c, key))
        for (i = 0; i < HW; ++i)
          q += (x[(n * C + c) * HW + i] - *mean) * (x[(n * C + c) * HW + i] - *mean);
  *var = q / (double)count;
}
static int pick_channel(size_t n, size_t c, size_t key) {
  (void)n;
  return c == key;
}
static int pick_instance(size_t n, size_t c, size_t key) { return n * 4 + c == key; }
static int pick_group(size_t n, size_t c, size_t key) {
  return n * 2 + c / 2 == key;
} /* 2 groups of 2 */

/* y[(n, c, i)] == (x - mean) * rstd (no affine) where mean/var come from the group `key_of` names.
 */
static double max_norm_error(const float* x, const float* y, size_t N, size_t C, size_t HW,
                             pick_fn pick, size_t (*key_of)(size_t n, size_t c), double eps) {
  double worst = 0, mean, var;
  size_t n, c, i;
  for (n = 0; n < N; ++n)
    for (c = 0; c < C; ++c) {
      moments(x, N, C, HW, pick, key_of(n, c), &mean, &var);
      for (i = 0; i < HW; ++i) {
        const size_t k = (n * C + c) * HW + i;
        const double err = fabs((x[k] - mean) / sqrt(var + eps) - y[k]);
        if (!(err <= worst)) worst = err;
      }
    }
  return worst;
}
static size_t key_channel(size_t n, size_t c) {
  (void)n;
  return c;
}
static size_t key_instance(size_t n, size_t c) { return n * 4 + c; }
static size_t key_group(size_t n, size_t c) { return n * 2 + c / 2; }

/* BatchNorm (inference and training), GroupNorm, InstanceNorm and MeanVarianceNormalization on
 * a small NCHW tensor against float64 references, plus their parameter errors. */
/* bf16 in, bf16 out: LayerNorm of rows {1, 2, 3, 4} and {10, 20, 30, 40} in bf16, and
 * simdnorm_convert both ways. Values of the form k / sqrt(1.25) rounded to bf16 (8 bits). */
static void test_bf16(void) {
  const float xf[8] = {1, 2, 3, 4, 10, 20, 30, 40};
  uint16_t xb[8], yb[8];
  float y[8];
  const int64_t shape[2] = {2, 4};
  simdnorm_tensor_desc d;
  CHECK(simdnorm_tensor_contiguous(&d, 2, shape) == SIMDNORM_OK);
  CHECK(d.type == SIMDNORM_DTYPE_F32);
  d.type = SIMDNORM_DTYPE_BF16;
  CHECK(simdnorm_convert(xf, SIMDNORM_DTYPE_F32, xb, SIMDNORM_DTYPE_BF16, 8) == SIMDNORM_OK);
  CHECK(xb[0] == 0x3f80 && xb[4] == 0x4120); /* 1.0 and 10.0 */
  simdnorm_norm_args a = {0};
  a.x = xb;
  a.y = yb;
#if !SIMDNORM_ALL_DTYPES /* a sanitizer build: f32 row kernels only */
  CHECK(simdnorm_layer_norm(&d, &d, NULL, &a, NULL) == SIMDNORM_UNSUPPORTED_DTYPE);
  printf("test_bf16: bf16 LayerNorm skipped (SIMDNORM_ALL_DTYPES=OFF)\n");
  return;
#endif
  CHECK(simdnorm_layer_norm(&d, &d, NULL, &a, NULL) == SIMDNORM_OK);
  CHECK(simdnorm_convert(yb, SIMDNORM_DTYPE_BF16, y, SIMDNORM_DTYPE_F32, 8) == SIMDNORM_OK);
  for (int i = 0; i < 8; ++i) {
    const float want = ((float)(i % 4) - 1.5f) / 1.118034f; /* (x - mean) / std, std = sqrt(1.25) */
    CHECK(fabsf(y[i] - want) <= fabsf(want) / 256 + 1e-3f);
  }
  /* the fused residual add: h = x + x in place over a copy of x, then y = LayerNorm(h) */
  {
    uint16_t r[8];
    float yh[8];
    simdnorm_layer_norm_args la;
    memset(&la, 0, sizeof la);
    memcpy(r, xb, sizeof r);
    la.base = a;
    la.residual.in = r;
    la.residual.out = r;
    CHECK(simdnorm_layer_norm_ex(&d, &d, NULL, &la, NULL) == SIMDNORM_OK);
    CHECK(r[0] == 0x4000 && r[4] == 0x41a0); /* 2.0 and 20.0 */
    CHECK(simdnorm_convert(yb, SIMDNORM_DTYPE_BF16, yh, SIMDNORM_DTYPE_F32, 8) == SIMDNORM_OK);
    for (int i = 0; i < 8; ++i) CHECK(yh[i] == y[i]); /* LayerNorm is scale-invariant: 2x */
    la.residual.out = NULL;
    CHECK_FAILS(simdnorm_layer_norm_ex(&d, &d, NULL, &la, NULL), SIMDNORM_INVALID_ARGUMENT,
                "go together");
  }
  /* a channel op on bf16: InstanceNorm of x as [2, 1, 4] (one plane per row of x) is the f32
   * op on the same values rounded once into bf16 */
  {
    const int64_t shape3[3] = {2, 1, 4};
    simdnorm_tensor_desc d3, d3f;
    float yf[8];
    uint16_t yr[8];
    simdnorm_norm_args ia = {0};
    CHECK(simdnorm_tensor_contiguous(&d3f, 3, shape3) == SIMDNORM_OK);
    d3 = d3f;
    d3.type = SIMDNORM_DTYPE_BF16;
    ia.x = xb;
    ia.y = yb;
    CHECK(simdnorm_instance_norm(&d3, &d3, NULL, &ia, NULL) == SIMDNORM_OK);
    ia.x = xf;
    ia.y = yf;
    CHECK(simdnorm_instance_norm(&d3f, &d3f, NULL, &ia, NULL) == SIMDNORM_OK);
    CHECK(simdnorm_convert(yf, SIMDNORM_DTYPE_F32, yr, SIMDNORM_DTYPE_BF16, 8) == SIMDNORM_OK);
    CHECK(memcmp(yr, yb, sizeof yr) == 0);
    d3.type = SIMDNORM_DTYPE_I8;
    CHECK_FAILS(simdnorm_instance_norm(&d3, &d3, NULL, &ia, NULL), SIMDNORM_UNSUPPORTED_DTYPE,
                "f32, bf16 or f16");
  }
  d.type = (simdnorm_dtype)9;
  CHECK_FAILS(simdnorm_layer_norm(&d, &d, NULL, &a, NULL), SIMDNORM_INVALID_ARGUMENT, "type=9");
  CHECK_FAILS(simdnorm_convert(xf, (simdnorm_dtype)9, y, SIMDNORM_DTYPE_F32, 8),
              SIMDNORM_INVALID_ARGUMENT, "not a simdnorm::dtype");
}

static void test_channel_ops(void) {
  enum { N = 2, C = 4, H = 3, W = 5, HW = H * W, SIZE = N * C * HW };
  static float x[SIZE], y[SIZE], y2[SIZE];
  const int64_t shape[4] = {N, C, H, W};
  float rmean[C], rvar[C], bmean[C], brstd[C], g[C], b[C];
  int64_t batches = 0;
  simdnorm_tensor_desc d;
  simdnorm_batch_norm_params bn = simdnorm_batch_norm_params_default();
  simdnorm_group_norm_params gn = simdnorm_group_norm_params_default();
  simdnorm_instance_norm_params in = simdnorm_instance_norm_params_default();
  simdnorm_mean_variance_norm_params mvn = simdnorm_mean_variance_norm_params_default();
  simdnorm_plan_t p = NULL;
  simdnorm_norm_args a;
  simdnorm_batch_norm_args ba;
  size_t c, i;
  double worst = 0;

  CHECK(bn.layout == SIMDNORM_NCHW && bn.eps == 1e-5f && bn.training == 0 && bn.momentum == 0.1f);
  CHECK(bn.convention == SIMDNORM_MOMENTUM_PYTORCH && bn.running_mean == NULL &&
        bn.cumulative == 0);
  CHECK(gn.num_groups == 1 && gn.eps == 1e-5f && gn.per_group_affine == 0);
  CHECK(in.layout == SIMDNORM_NCHW && in.eps == 1e-5f);
  CHECK(mvn.num_axes == 3 && mvn.axes[0] == 0 && mvn.axes[1] == 2 && mvn.axes[2] == 3);

  fill(x, SIZE, 21, 3.f);
  fill(g, C, 22, 1.f);
  fill(b, C, 23, 0.f);
  CHECK(simdnorm_tensor_contiguous(&d, 4, shape) == SIMDNORM_OK);
  memset(&a, 0, sizeof a);
  memset(&ba, 0, sizeof ba);
  a.x = x;
  a.y = y;

  /* Inference: the running statistics are folded into the plan. */
  for (c = 0; c < C; ++c) rmean[c] = 0.5f * (float)c, rvar[c] = 1.f + (float)c;
  bn.running_mean = rmean;
  bn.running_var = rvar;
  bn.gamma = g;
  bn.beta = b;
  CHECK(simdnorm_plan_batch_norm(&d, &d, &bn, &p) == SIMDNORM_OK);
  CHECK(simdnorm_plan_rows(p) == C && simdnorm_plan_row_length(p) == N * HW);
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  simdnorm_plan_destroy(p);
  for (i = 0; i < SIZE; ++i) {
    const size_t ch = i / HW % C;
    const double want = (x[i] - rmean[ch]) / sqrt(rvar[ch] + 1e-5) * g[ch] + b[ch];
    const double err = fabs(want - y[i]);
    if (!(err <= worst)) worst = err;
  }
  CHECK(worst <= 1e-5);
  memcpy(y2, y, sizeof y);
  memset(y, 0, sizeof y);
  CHECK(simdnorm_batch_norm(&d, &d, &bn, &a, NULL) == SIMDNORM_OK); /* one-shot: same bits */
  CHECK(memcmp(y, y2, sizeof y) == 0);

  /* Training: batch statistics, saved mean/rstd, running statistics updated (PyTorch rule). */
  bn = simdnorm_batch_norm_params_default();
  bn.training = 1;
  for (c = 0; c < C; ++c) rmean[c] = 0.f, rvar[c] = 1.f;
  a.mean = bmean;
  a.rstd = brstd;
  ba.base = a;
  ba.running.mean = rmean;
  ba.running.var = rvar;
  ba.running.num_batches_tracked = &batches;
  CHECK(simdnorm_batch_norm_ex(&d, &d, &bn, &ba, NULL) == SIMDNORM_OK);
  CHECK(batches == 1);
  CHECK(max_norm_error(x, y, N, C, HW, pick_channel, key_channel, 1e-5) <= 1e-5);
  for (c = 0; c < C; ++c) {
    double mean, var;
    moments(x, N, C, HW, pick_channel, c, &mean, &var);
    CHECK(fabs(bmean[c] - mean) <= 1e-5 * fabs(mean) + 1e-6);
    CHECK(fabs(rmean[c] - 0.1 * mean) <= 1e-5);
    CHECK(fabs(rvar[c] - (0.9 + 0.1 * var * (N * HW) / (N * HW - 1))) <= 1e-5); /* unbiased */
  }
  bn.convention = (simdnorm_momentum_convention)5;
  CHECK_FAILS(simdnorm_batch_norm_ex(&d, &d, &bn, &ba, NULL), SIMDNORM_INVALID_ARGUMENT,
              "convention");
  CHECK(batches == 1); /* untouched by the failure */
  bn = simdnorm_batch_norm_params_default();
  bn.layout = (simdnorm_channel_layout)2;
  CHECK_FAILS(simdnorm_plan_batch_norm(&d, &d, &bn, &p), SIMDNORM_INVALID_ARGUMENT, "layout");
  CHECK(simdnorm_plan_batch_norm(&d, &d, NULL, &p) ==
        SIMDNORM_INVALID_ARGUMENT); /* no running stats */
  CHECK(p == NULL);
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y;

  /* GroupNorm, 2 groups of 2 channels. */
  gn.num_groups = 2;
  CHECK(simdnorm_plan_group_norm(&d, &d, &gn, &p) == SIMDNORM_OK);
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  simdnorm_plan_destroy(p);
  CHECK(max_norm_error(x, y, N, C, HW, pick_group, key_group, 1e-5) <= 1e-5);
  CHECK(simdnorm_group_norm(&d, &d, &gn, &a, NULL) == SIMDNORM_OK);
  gn.num_groups = 3;
  CHECK_FAILS(simdnorm_plan_group_norm(&d, &d, &gn, &p), SIMDNORM_INVALID_ARGUMENT, "num_groups");

  /* InstanceNorm. */
  CHECK(simdnorm_plan_instance_norm(&d, &d, NULL, &p) == SIMDNORM_OK);
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  simdnorm_plan_destroy(p);
  CHECK(max_norm_error(x, y, N, C, HW, pick_instance, key_instance, 1e-5) <= 1e-5);
  CHECK(simdnorm_instance_norm(&d, &d, &in, &a, NULL) == SIMDNORM_OK);
  in.stores = (simdnorm_store_policy)3;
  CHECK_FAILS(simdnorm_plan_instance_norm(&d, &d, &in, &p), SIMDNORM_INVALID_ARGUMENT, "stores");

  /* MeanVarianceNormalization over axes {0, 2, 3}: per channel, like BatchNorm training with
   * eps added to the standard deviation. */
  CHECK(simdnorm_plan_mean_variance_norm(&d, &d, NULL, &p) == SIMDNORM_OK);
  CHECK(simdnorm_plan_execute(p, &a, NULL) == SIMDNORM_OK);
  simdnorm_plan_destroy(p);
  CHECK(max_norm_error(x, y, N, C, HW, pick_channel, key_channel, 0) <= 1e-5);
  CHECK(simdnorm_mean_variance_norm(&d, &d, &mvn, &a, NULL) == SIMDNORM_OK);
  mvn.num_axes = 0;
  CHECK(simdnorm_mean_variance_norm(&d, &d, &mvn, &a, NULL) == SIMDNORM_INVALID_ARGUMENT);
}

/* Split statistics from C: LayerNorm of rows whose columns are cut in two shards, each
 * shard's moments, merged, then applied per shard; equals the one-call result within float
 * rounding, and the merge checks its records. */
static void test_split_stats(void) {
  enum { N = 3, D = 300, CUT = 110 };
  static float x[N * D], y[N * D], y_split[N * D];
  simdnorm_moments parts[2 * N], merged[N];
  const int64_t shape[2] = {N, D};
  simdnorm_tensor_desc full, shard[2];
  simdnorm_layer_norm_params prm = simdnorm_layer_norm_params_default();
  simdnorm_norm_args a;
  size_t k, i;
  double worst = 0;

  fill(x, N * D, 21, 2.f);
  CHECK(prm.stage == SIMDNORM_STAGE_FULL);
  CHECK(simdnorm_tensor_contiguous(&full, 2, shape) == SIMDNORM_OK);
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y;
  CHECK(simdnorm_layer_norm(&full, &full, &prm, &a, NULL) == SIMDNORM_OK);
  for (k = 0; k < 2; ++k) {
    shard[k] = full;
    shard[k].shape[1] = k == 0 ? CUT : D - CUT;
    memset(&a, 0, sizeof a);
    a.x = x + k * CUT;
    a.moments_out = parts + k * N;
    prm.stage = SIMDNORM_STAGE_MOMENTS;
    CHECK(simdnorm_layer_norm(&shard[k], &shard[k], &prm, &a, NULL) == SIMDNORM_OK);
  }
  CHECK(simdnorm_merge_moments(parts, 2, N, merged) == SIMDNORM_OK);
  CHECK(merged[0].count == D && merged[0].kind == SIMDNORM_MOMENTS_CENTERED);
  for (k = 0; k < 2; ++k) {
    memset(&a, 0, sizeof a);
    a.x = x + k * CUT;
    a.y = y_split + k * CUT;
    a.moments_in = merged;
    prm.stage = SIMDNORM_STAGE_APPLY;
    CHECK(simdnorm_layer_norm(&shard[k], &shard[k], &prm, &a, NULL) == SIMDNORM_OK);
  }
  for (i = 0; i < N * D; ++i)
    if (!(fabs(y[i] - y_split[i]) <= worst)) worst = fabs(y[i] - y_split[i]);
  CHECK(worst <= 1e-5);

  parts[N].kind = SIMDNORM_MOMENTS_SQUARES; /* record 0 of part 1 is of another kind */
  CHECK_FAILS(simdnorm_merge_moments(parts, 2, N, merged), SIMDNORM_INVALID_ARGUMENT, "kind");
  prm.stage = (simdnorm_stats_stage)9;
  CHECK_FAILS(simdnorm_layer_norm(&full, &full, &prm, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "stage");
}

/* The fusions: gated RMSNorm with a biased residual add, into int8 with a dynamic scale per row,
 * and the amax output; the quant defaults; a bad block size. */
static void test_fusions(void) {
  const float x[2 * 4] = {1, -2, 3, -4, 0.5f, 0.5f, 0.5f, 0.5f};
  const float bias[4] = {0, 0, 0, 0};
  float r[8] = {0}, h[8], gate[8], scales[2] = {-1, -1}, amax[2] = {-1, -1};
  int8_t q[8];
  const int64_t shape[2] = {2, 4};
  simdnorm_tensor_desc xd, yd;
  simdnorm_rms_norm_params p = simdnorm_rms_norm_params_default();
  simdnorm_rms_norm_args a;
  int i;
  memset(&a, 0, sizeof a);
  CHECK(p.quant.scaling == SIMDNORM_QUANT_DYNAMIC && p.quant.block == 0 && p.quant.scale == 1.f &&
        p.quant.zero_point == 0 && p.quant.row_amax == 0);
  CHECK(simdnorm_tensor_contiguous(&xd, 2, shape) == SIMDNORM_OK);
  yd = xd;
  yd.type = SIMDNORM_DTYPE_I8;
  for (i = 0; i < 8; ++i) gate[i] = 100.f; /* silu(100) = 100 */
  a.base.x = x;
  a.base.y = q;
  a.residual.in = r;
  a.residual.out = h;
  a.residual.bias = bias;
  a.gate = gate;
  a.quant.y_scale = scales;
  a.quant.amax = amax;
  p.quant.row_amax = 1;
  CHECK(simdnorm_rms_norm_ex(&xd, &yd, &p, &a, NULL) == SIMDNORM_OK);
  /* row 0: rms = sqrt(7.5), y = x / rms * 100, the largest |y| (4) gets code -127 */
  CHECK(fabsf(amax[0] - 400.f / sqrtf(7.5f)) <= 1e-3f);
  CHECK(fabsf(scales[0] - amax[0] / 127) <= 1e-5f);
  CHECK(q[3] == -127 && q[2] == 95 && q[0] == 32); /* 3 * 127 / 4 = 95.25, 127 / 4 = 31.75 */
  CHECK(q[4] == 127 && q[7] == 127);               /* a constant row: all at the top */
  p.quant.block = 3;
  CHECK_FAILS(simdnorm_rms_norm_ex(&xd, &yd, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "quant.block=3");
}

/* The post-norm residual (Gemma 2's sandwich norm): y = rms_norm(x) * (1 + w) + residual, in
 * place over the residual; the default is off; a residual_out is refused. */
static void test_post_norm(void) {
  const float x[4] = {1, -1, 1, -1}, w[4] = {0, 1, 0, 1}; /* rms 1: y = x * (1 + w) */
  float r[4] = {10, 20, 30, 40}, h[4];
  const int64_t shape[2] = {1, 4};
  simdnorm_tensor_desc d;
  simdnorm_rms_norm_params p = simdnorm_rms_norm_params_default();
  simdnorm_rms_norm_args a;
  CHECK(p.residual_after_norm == 0 &&
        simdnorm_layer_norm_params_default().residual_after_norm == 0);
  CHECK(simdnorm_tensor_contiguous(&d, 2, shape) == SIMDNORM_OK);
  memset(&a, 0, sizeof a);
  a.base.x = x;
  a.base.y = r;
  a.base.gamma = w;
  a.residual.in = r;
  p.eps = 0.f;
  p.weight_offset = 1.f;
  p.residual_after_norm = 1;
  CHECK(simdnorm_rms_norm_ex(&d, &d, &p, &a, NULL) == SIMDNORM_OK);
  CHECK(r[0] == 11.f && r[1] == 18.f && r[2] == 31.f && r[3] == 38.f);
  a.residual.out = h;
  CHECK_FAILS(simdnorm_rms_norm_ex(&d, &d, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "residual_out");
  CHECK(r[0] == 11.f && r[3] == 38.f);
}

/* BatchNorm inference into uint8 with a scale and zero point per channel: y = x (mean 0,
 * var 1, eps 0), q = y / scale[c] + zero_point[c]; the quant defaults of the channel ops. */
static void test_channel_quant(void) {
  const float x[4] = {1, 2, 3, 4}, mean[2] = {0, 0}, var[2] = {1, 1}, scales[2] = {0.5f, 0.25f};
  const int32_t zero_points[2] = {10, 20};
  uint8_t q[4] = {0, 0, 0, 0};
  const int64_t shape[3] = {1, 2, 2};
  simdnorm_tensor_desc xd, yd;
  simdnorm_batch_norm_params p = simdnorm_batch_norm_params_default();
  simdnorm_norm_args a;
  CHECK(p.quant.scaling == SIMDNORM_QUANT_DYNAMIC && p.quant.channel_scales == NULL &&
        p.quant.channel_zero_points == NULL);
  CHECK(simdnorm_group_norm_params_default().quant.channel_scales == NULL);
  CHECK(simdnorm_tensor_contiguous(&xd, 3, shape) == SIMDNORM_OK);
  yd = xd;
  yd.type = SIMDNORM_DTYPE_U8;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = q;
  p.eps = 0.f;
  p.running_mean = mean;
  p.running_var = var;
  p.quant.scaling = SIMDNORM_QUANT_PER_CHANNEL;
  p.quant.channel_scales = scales;
  p.quant.channel_zero_points = zero_points;
  CHECK(simdnorm_batch_norm(&xd, &yd, &p, &a, NULL) == SIMDNORM_OK);
  CHECK(q[0] == 12 && q[1] == 14 && q[2] == 32 && q[3] == 36);
  p.quant.channel_scales = NULL;
  CHECK_FAILS(simdnorm_batch_norm(&xd, &yd, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "quant.channel_scales is null");
}

/* LayerNorm into uint8 with an asymmetric scale and zero point per row (ONNX
 * DynamicQuantizeLinear); a zero row gets scale 1 and code = zero point = 0. */
static void test_asymmetric_quant(void) {
  const float x[2 * 4] = {1, 2, 3, 5, 0.5f, 0.5f, 0.5f, 0.5f};
  float scales[2] = {-1, -1};
  int32_t zero_points[2] = {-1, -1};
  uint8_t q[8];
  const int64_t shape[2] = {2, 4};
  simdnorm_tensor_desc xd, yd;
  simdnorm_layer_norm_params p = simdnorm_layer_norm_params_default();
  simdnorm_layer_norm_args a;
  memset(&a, 0, sizeof a);
  CHECK(simdnorm_tensor_contiguous(&xd, 2, shape) == SIMDNORM_OK);
  yd = xd;
  yd.type = SIMDNORM_DTYPE_U8;
  a.base.x = x;
  a.base.y = q;
  a.quant.y_scale = scales;
  a.quant.y_zero_point = zero_points;
  p.quant.scaling = SIMDNORM_QUANT_DYNAMIC_ASYMMETRIC;
  CHECK(simdnorm_layer_norm_ex(&xd, &yd, &p, &a, NULL) == SIMDNORM_OK);
  /* row 0: y = (x - 2.75) * 0.676123 = -1.18322, -0.50709, 0.16903, 1.52128; scale = (1.52128
   * + 1.18322) / 255 = 0.0106059; zero point rne(1.18322 / scale = 111.56) = 112; codes
   * rne(y / scale) + 112 = -112, -48, 16, 143 (+ 112) */
  CHECK(fabsf(scales[0] - 0.0106059f) <= 1e-6f);
  CHECK(zero_points[0] == 112);
  CHECK(q[0] == 0 && q[1] == 64 && q[2] == 128 && q[3] == 255);
  CHECK(scales[1] == 1.f && zero_points[1] == 0);
  CHECK(q[4] == 0 && q[5] == 0 && q[6] == 0 && q[7] == 0);
  a.quant.y_zero_point = NULL;
  CHECK_FAILS(simdnorm_layer_norm_ex(&xd, &yd, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "args.y_zero_point is null");
}

/* adaLN: y = layer_norm(x) * (1 + scale[b]) + shift[b] over [B = 2, T = 2, D = 4], the rows
 * of scale and shift 8 floats apart (stride 8); then the errors of the new fields. */
static void test_modulation(void) {
  float x[16], y[16], mod[16];
  const int64_t shape[3] = {2, 2, 4};
  simdnorm_tensor_desc d;
  simdnorm_layer_norm_params p = simdnorm_layer_norm_params_default();
  simdnorm_layer_norm_args a;
  size_t r, i;
  for (i = 0; i < 16; ++i) {
    x[i] = (float)(i % 4) + (float)(i / 4); /* each row: k, k + 1, k + 2, k + 3 */
    mod[i] = (float)i / 16.f;               /* batch b: scale at 8b, shift at 8b + 4 */
  }
  CHECK(p.modulation_tokens == 0);
  CHECK(simdnorm_tensor_contiguous(&d, 3, shape) == SIMDNORM_OK);
  p.modulation_tokens = 2;
  memset(&a, 0, sizeof a);
  a.base.x = x;
  a.base.y = y;
  a.modulation.scale = mod;
  a.modulation.shift = mod + 4;
  a.modulation.stride = 8;
  CHECK(simdnorm_layer_norm_ex(&d, &d, &p, &a, NULL) == SIMDNORM_OK);
  for (r = 0; r < 4; ++r)
    for (i = 0; i < 4; ++i) {
      /* (i - 1.5) / sqrt(1.25 + eps) */
      const double t = ((double)i - 1.5) / sqrt(1.25 + 1e-5);
      const double want = t * (1 + mod[r / 2 * 8 + i]) + mod[r / 2 * 8 + 4 + i];
      CHECK(fabs(y[r * 4 + i] - want) <= 1e-5);
    }
  a.modulation.shift = NULL;
  CHECK_FAILS(simdnorm_layer_norm_ex(&d, &d, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "modulation_shift");
  a.modulation.shift = mod + 4;
  a.modulation.stride = 3;
  CHECK_FAILS(simdnorm_layer_norm_ex(&d, &d, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "modulation_stride=3");
  p.modulation_tokens = 3;
  CHECK_FAILS(simdnorm_layer_norm_ex(&d, &d, &p, &a, NULL), SIMDNORM_INVALID_ARGUMENT,
              "modulation_tokens=3");
  { /* the typed entry points: another op's args struct is refused, run_<op> runs tasks */
    simdnorm_plan_t plan = NULL;
    simdnorm_rms_norm_args ra;
    memset(&ra, 0, sizeof ra);
    ra.base = a.base;
    CHECK(simdnorm_plan_layer_norm(&d, &d, NULL, &plan) == SIMDNORM_OK);
    CHECK_FAILS(simdnorm_plan_execute_rms_norm(plan, &ra, NULL), SIMDNORM_INVALID_ARGUMENT,
                "rms_norm_args given to a plan of layer_norm");
    memset(&a.modulation, 0, sizeof a.modulation);
    CHECK(simdnorm_plan_run_layer_norm(plan, &a, 0, 0, simdnorm_plan_num_tasks(plan, 0)) ==
          SIMDNORM_OK);
    CHECK(simdnorm_plan_execute_layer_norm(plan, &a, NULL) == SIMDNORM_OK);
    simdnorm_plan_destroy(plan);
  }
}

int main(void) {
  CHECK(simdnorm_last_error_message()[0] == '\0'); /* nothing failed yet */
  test_status();
  test_last_error_is_per_thread();
  test_isa();
  test_descs_and_defaults();
  test_plan_errors();
  test_layer_norm_paths();
  test_rms_norm();
  test_channel_ops();
  test_bf16();
  test_split_stats();
  test_fusions();
  test_post_norm();
  test_asymmetric_quant();
  test_channel_quant();
  test_modulation();
  printf("test_c_api: %s (isa %s, %d failures)\n", g_failures ? "FAILED" : "passed",
         simdnorm_isa_name(simdnorm_active_isa()), g_failures);
  return g_failures ? 1 : 0;
}
