# ODR guard (run as a test: cmake -DNM=<nm> -DOBJS="a.o|b.o|..." -P odr_guard.cmake).
#
# Every ISA object is compiled with different instruction-set flags. If two of them define the
# same weak (inline / template) symbol, the linker keeps one copy for both, and e.g. the AVX-512
# copy of a helper can end up serving the SSE2 path (seen with GCC 12 at -O0). Kernels live in
# per-ISA namespaces and the objects are always optimized, so no weak symbol may be shared.
#
# One exception, -DALLOW=<regex> (tests/CMakeLists.txt): on AArch64, xsimd 8.1's NEON intrinsic
# wrappers (xsimd::kernel::wrap::vaddq_f32, ...: non-template inline functions whose addresses
# its dispatch tables take) are defined by both NEON objects. Each is one base-NEON intrinsic
# and compiles to the same instructions under both units' flags (checked once by disassembly:
# 81 wrappers, all identical); the guard requires their copies to have the same size.
cmake_minimum_required(VERSION 3.21)
string(REPLACE "|" ";" objs "${OBJS}")
list(LENGTH objs n)
if(n LESS 2)
  message(FATAL_ERROR "odr_guard: expected several ISA objects, got '${OBJS}'")
endif()
set(seen "")
set(shared "")
foreach(obj IN LISTS objs)
  execute_process(COMMAND ${NM} --defined-only -S ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "odr_guard: ${NM} failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(mine "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-fA-F]* ([0-9a-fA-F]+ )?[WVu] (.+)$")
      set(sym "${CMAKE_MATCH_2}")
      if(sym STREQUAL "DW.ref.__gxx_personality_v0")
        continue()
      endif()
      if(ALLOW AND sym MATCHES "${ALLOW}")  # allowed if every copy has the same size
        string(MAKE_C_IDENTIFIER "size_${sym}" key)
        if(DEFINED ${key} AND NOT ${key} STREQUAL "${CMAKE_MATCH_1}")
          list(APPEND shared "${sym} (copies of different sizes)")
        endif()
        set(${key} "${CMAKE_MATCH_1}")
        continue()
      endif()
      list(APPEND mine "${sym}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES mine)
  foreach(sym IN LISTS mine)
    if(sym IN_LIST seen)
      list(APPEND shared "${sym}")
    else()
      list(APPEND seen "${sym}")
    endif()
  endforeach()
endforeach()
list(LENGTH seen total)
if(shared)
  list(REMOVE_DUPLICATES shared)
  string(REPLACE ";" "\n  " pretty "${shared}")
  message(FATAL_ERROR "odr_guard: weak symbols defined by more than one ISA object:\n  ${pretty}")
endif()
message(STATUS "odr_guard: ${n} ISA objects, ${total} weak symbols, none shared")
