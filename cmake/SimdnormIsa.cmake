# simdnorm_add_isa(<name> [flags...])
# Builds src/isa/<name>.cpp as an object library with the ISA's flags, always optimized: at -O0
# the ISA objects would emit weak copies of inline helpers that the linker may share across
# ISAs (the AVX-512 copy serving the SSE2 path). Appends to SIMDNORM_ISAS and defines
# SIMDNORM_HAVE_<NAME>=1 for the dispatcher. -ffp-contract=off: the kernels fuse multiply-adds
# only where they say so (fma/fms, fma1/fms1), so vector bodies and scalar tails round alike.
function(simdnorm_add_isa name)
  add_library(simdnorm_isa_${name} OBJECT ${PROJECT_SOURCE_DIR}/src/isa/${name}.cpp)
  target_compile_features(simdnorm_isa_${name} PRIVATE cxx_std_17)
  target_compile_options(simdnorm_isa_${name} PRIVATE ${ARGN} -O2 -fno-math-errno -ffp-contract=off -Wall -Wextra)
  target_include_directories(simdnorm_isa_${name} PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
  target_link_libraries(simdnorm_isa_${name} PRIVATE simdnorm_xsimd)
  set_target_properties(simdnorm_isa_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(NOT BUILD_SHARED_LIBS)
    target_compile_definitions(simdnorm_isa_${name} PRIVATE SIMDNORM_STATIC_DEFINE)
  endif()
  string(TOUPPER ${name} up)
  set(SIMDNORM_ISAS ${SIMDNORM_ISAS} ${name} PARENT_SCOPE)
  set(SIMDNORM_ISA_DEFINITIONS ${SIMDNORM_ISA_DEFINITIONS} SIMDNORM_HAVE_${up}=1 PARENT_SCOPE)
endfunction()
