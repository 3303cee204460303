// simdnorm: run-time instruction-set selection.
//
// Every kernel is compiled once per ISA; one of them is selected at run time. The default is the
// best ISA that this build contains and this CPU and OS can run (CPUID plus the XCR0 register
// state the OS enables). `SIMDNORM_ISA=<name>` in the environment, or `force_isa()`, selects
// another. Plans capture the selected ISA when they are made.
#pragma once
#include <cstddef>

#include "simdnorm/export.h"
#include "simdnorm/status.hpp"

namespace simdnorm {

/// Instruction sets, named as in `SIMDNORM_ISA` and in benchmark and test names.
enum class isa : int {
  scalar = 0,    ///< portable C++, no SIMD; always compiled
  sse2 = 1,      ///< x86-64 baseline, 4 lanes
  sse4_2 = 2,    ///< SSE4.2, 4 lanes
  avx2_fma = 3,  ///< AVX2 + FMA3, 8 lanes
  avx512bw = 4,  ///< AVX-512 F+CD+DQ+BW, 16 lanes
  neon64 = 5,    ///< AArch64 Advanced SIMD, 4 lanes
};

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
