/* The README's C example, built and run as a test so that it keeps compiling. */
#include <simdnorm/simdnorm.h>
#include <stdio.h>

int main(void) {
  float x[2 * 4] = {1, 2, 3, 4, 10, 20, 30, 40}, y[2 * 4];
  const int64_t shape[2] = {2, 4};
  simdnorm_tensor_desc d;
  simdnorm_tensor_contiguous(&d, 2, shape);
  simdnorm_layer_norm_params params = simdnorm_layer_norm_params_default();
  simdnorm_plan_t plan = NULL;
  if (simdnorm_plan_layer_norm(&d, &d, &params, &plan) != SIMDNORM_OK) {
    fprintf(stderr, "%s\n", simdnorm_last_error_message());
    return 1;
  }
  simdnorm_norm_args args = {0};
  args.x = x;
  args.y = y;
  if (simdnorm_plan_execute(plan, &args, NULL) != SIMDNORM_OK)
    return 1; /* NULL: default executor */
  printf("%f %f\n", y[0], y[4]);
  simdnorm_plan_destroy(plan);
  return 0;
}
