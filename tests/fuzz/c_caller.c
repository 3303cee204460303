/* Calls that pass enum values the way a C caller may: any bit pattern of the enum's 32-bit
 * type, including values no enumerator names. Compiled as C so that the harness (C++) never
 * holds an out-of-range enum itself. */
#include <string.h>

#include "simdnorm/simdnorm.h"

static simdnorm_isa as_isa(int32_t v) {
  simdnorm_isa i;
  memcpy(&i, &v, sizeof i);
  return i;
}

simdnorm_status fuzz_c_force_isa(int32_t v) { return simdnorm_force_isa(as_isa(v)); }
int fuzz_c_cpu_supports(int32_t v) { return simdnorm_cpu_supports(as_isa(v)); }
int fuzz_c_isa_lanes(int32_t v) { return simdnorm_isa_lanes(as_isa(v)); }
int fuzz_c_isa_has_fma(int32_t v) { return simdnorm_isa_has_fma(as_isa(v)); }
const char* fuzz_c_isa_name(int32_t v) { return simdnorm_isa_name(as_isa(v)); }

const char* fuzz_c_status_string(int32_t v) {
  simdnorm_status s;
  memcpy(&s, &v, sizeof s);
  return simdnorm_status_string(s);
}
