/* The C API in a few lines: RMSNorm in place over the last dim of a (2, 3, 8) tensor, run by a
 * host "pool" given as callbacks (here: serial, in pthreadpool's shape). This file is the
 * example in docs/c-api.md. */
#include <simdnorm/simdnorm.h>

#include <stdio.h>

/* The host pool: must run task(ctx, b, e) over disjoint ranges covering [0, n). */
static void my_parallel_for(void* user, size_t n, simdnorm_task_fn task, void* ctx) {
  size_t i;
  (void)user;
  for (i = 0; i < n; ++i) task(ctx, i, i + 1); /* one task at a time; a real pool spreads them */
}

int main(void) {
  float x[2 * 3 * 8];
  const int64_t shape[3] = {2, 3, 8};
  simdnorm_tensor_desc d;
  simdnorm_rms_norm_params params = simdnorm_rms_norm_params_default();
  simdnorm_executor pool;
  simdnorm_norm_args args = {0};
  simdnorm_plan_t plan;
  int i;

  for (i = 0; i < 48; ++i) x[i] = (float)(i % 8) - 3.5f;
  simdnorm_tensor_contiguous(&d, 3, shape);
  params.eps = 1e-6f;
  if (simdnorm_plan_rms_norm(&d, &d, &params, &plan) != SIMDNORM_OK) {
    fprintf(stderr, "plan: %s\n", simdnorm_last_error_message());
    return 1;
  }

  pool.user = NULL;
  pool.concurrency = 4; /* > 1, so execute() hands the tasks to parallel_for */
  pool.parallel_for = my_parallel_for;
  args.x = x;
  args.y = x; /* in place */
  if (simdnorm_plan_execute(plan, &args, &pool) != SIMDNORM_OK) {
    fprintf(stderr, "execute: %s\n", simdnorm_last_error_message());
    simdnorm_plan_destroy(plan);
    return 1;
  }
  printf("c_api: %zu rows of %zu on %s, y[0..3] = %.4f %.4f %.4f %.4f\n", simdnorm_plan_rows(plan),
         simdnorm_plan_row_length(plan), simdnorm_isa_name(simdnorm_plan_isa(plan)), x[0], x[1],
         x[2], x[3]);
  simdnorm_plan_destroy(plan);

  /* Errors come back as a status plus a per-thread message. */
  if (simdnorm_force_isa(SIMDNORM_ISA_MAX_ENUM) != SIMDNORM_OK)
    printf("c_api: expected error: %s: %s\n", simdnorm_status_string(SIMDNORM_INVALID_ARGUMENT),
           simdnorm_last_error_message());
  return 0;
}
