// simdnorm: run-time instruction-set selection.
//
// Every kernel is compiled once per ISA; one of them is selected at run time. The default is the
// best ISA that this build contains and this CPU and OS can run (CPUID plus the XCR0 register
// state the OS enables). `SIMDNORM_ISA=<name>` in the environment, or `force_isa()`, selects
// another. Plans capture the selected ISA when they are made.
#pragma once
#include <cstddef>

#include "simdnorm/export.h"
#include "simdnorm/isa_list.h"
#include "simdnorm/status.hpp"

namespace simdnorm {

/// Instruction sets, named as in `SIMDNORM_ISA` and in benchmark and test names; the values
/// and facts of each are in simdnorm/isa_list.h.
enum class isa : int {
#define SIMDNORM_ISA_ENUMERATOR(name, NAME, id, lanes, fma, arch, features) name = id,
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_ENUMERATOR)
#undef SIMDNORM_ISA_ENUMERATOR
};

/// f32 lanes of the ISA's vectors (1 for scalar, 0 for a value that is not an ISA).
constexpr int isa_lanes(isa i) noexcept {
#define SIMDNORM_ISA_LANES(name, NAME, id, lanes, fma, arch, features) \
  if (i == isa::name) return lanes;
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_LANES)
#undef SIMDNORM_ISA_LANES
  return 0;
}

/// True when the ISA's kernels fuse multiply-adds (one rounding): their results may differ in
/// the last bits from those of the ISAs without, never among themselves for the same lanes.
constexpr bool isa_has_fma(isa i) noexcept {
#define SIMDNORM_ISA_FMA(name, NAME, id, lanes, fma, arch, features) \
  if (i == isa::name) return fma;
  SIMDNORM_ISA_LIST(SIMDNORM_ISA_FMA)
#undef SIMDNORM_ISA_FMA
  return false;
}

/// The ISA's name ("avx2_fma"), or "unknown".
SIMDNORM_EXPORT const char* isa_name(isa i) noexcept;

/// Parses a name as written by `isa_name`. Returns false for an unknown name.
SIMDNORM_EXPORT bool isa_from_name(const char* name, isa* out) noexcept;

/// ISAs compiled into this build, best first. `*count` receives their number.
SIMDNORM_EXPORT const isa* compiled_isas(std::size_t* count) noexcept;

/// True when `i` is compiled in and the CPU and OS can run it.
SIMDNORM_EXPORT bool cpu_supports(isa i) noexcept;

/// The ISA the next plan will use. If `SIMDNORM_ISA` names an ISA that cannot run here, the
/// best runnable ISA is reported and plan creation fails with `unsupported_isa` until
/// `force_isa` is called.
SIMDNORM_EXPORT isa active_isa() noexcept;

/// Selects `i` for plans made from now on. Fails with `unsupported_isa` (and changes nothing)
/// when `i` is not compiled in or the CPU cannot run it.
SIMDNORM_EXPORT status force_isa(isa i) noexcept;

/// Undoes `force_isa`: plans use the default selection again (`SIMDNORM_ISA` when set, else the
/// best runnable ISA).
SIMDNORM_EXPORT void reset_isa() noexcept;

}  // namespace simdnorm
