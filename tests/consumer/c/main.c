/* Consumer check: the installed C header compiles as C99 and the library links from C. */
#include <simdnorm/simdnorm.h>

#include <math.h>
#include <stdio.h>

int main(void) {
  enum { ROWS = 4, COLS = 37 };
  static float x[ROWS * COLS];
  const int64_t shape[2] = {ROWS, COLS};
  simdnorm_tensor_desc d;
  simdnorm_norm_args a = {0};
  simdnorm_plan_t p;
  double sum = 0, sq = 0;
  int i, ok;
  for (i = 0; i < ROWS * COLS; ++i) x[i] = (float)(i % COLS) * 0.25f;
  if (simdnorm_tensor_contiguous(&d, 2, shape) != SIMDNORM_OK ||
      simdnorm_plan_rms_norm(&d, &d, NULL, &p) != SIMDNORM_OK) {
    fprintf(stderr, "plan: %s\n", simdnorm_last_error_message());
    return 1;
  }
  a.x = x;
  a.y = x; /* in place */
  if (simdnorm_plan_execute(p, &a, NULL) != SIMDNORM_OK) {
    fprintf(stderr, "execute: %s\n", simdnorm_last_error_message());
    return 1;
  }
  simdnorm_plan_destroy(p);
  for (i = 0; i < COLS; ++i) sq += (double)x[i] * x[i], sum += x[i];
  ok = fabs(sq / COLS - 1) < 1e-3 && sum > 0; /* RMSNorm: mean square 1, signs kept */
  printf("consumer_c: %s on %s\n", ok ? "ok" : "WRONG", simdnorm_isa_name(simdnorm_active_isa()));
  return ok ? 0 : 1;
}
