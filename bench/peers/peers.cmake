# Optional benchmark peers: oneDNN and libtorch, run side by side with simdnorm when they are
# installed (Debian: libdnnl-dev, libtorch-dev; `scripts/setup.sh --peers`). Without them
# everything builds and runs; the peer benchmarks are simply not registered.
# Included from bench/CMakeLists.txt after the simdnorm_bench target exists. Defines
#   simdnorm_peers     static library: the adapters (bench/peers/*.cpp) compiled in, with
#                      SIMDNORM_BENCH_WITH_ONEDNN / SIMDNORM_BENCH_WITH_TORCH = 0 or 1
#   simdnorm_accuracy  max error against a float64 reference, simdnorm and each peer
option(SIMDNORM_BENCH_ONEDNN "Compare with oneDNN in the benchmarks when it is found" ON)
option(SIMDNORM_BENCH_TORCH "Compare with libtorch in the benchmarks when it is found" ON)

set(_peers_dir ${CMAKE_CURRENT_LIST_DIR})
set(_with_onednn 0)
set(_with_torch 0)
add_library(simdnorm_peers STATIC ${_peers_dir}/peers.cpp)
target_compile_features(simdnorm_peers PUBLIC cxx_std_17)

if(SIMDNORM_BENCH_ONEDNN OR SIMDNORM_BENCH_TORCH)
  # Both peers as Debian builds them run on GNU OpenMP; the adapters set its thread count, so
  # they must call the same runtime (g++'s -fopenmp is libgomp).
  find_package(OpenMP COMPONENTS CXX QUIET)
  if(NOT OpenMP_CXX_FOUND)
    message(STATUS "simdnorm: OpenMP not found; benchmark peers (oneDNN, libtorch) disabled")
  elseif(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(WARNING "simdnorm: benchmark peers expect GNU OpenMP (libgomp), as Debian's oneDNN and "
                    "libtorch use; this compiler's OpenMP may be another runtime")
  endif()
endif()

if(SIMDNORM_BENCH_ONEDNN AND OpenMP_CXX_FOUND)
  # Debian's dnnl-config.cmake requires OpenCL development files (its GPU runtime is OpenCL)
  # and fails configuration without them, so use it only when OpenCL is there; otherwise the
  # header and the library are all the adapter needs.
  find_package(OpenCL QUIET)
  if(OpenCL_FOUND)
    find_package(dnnl CONFIG QUIET)
  endif()
  if(TARGET DNNL::dnnl)
    set(_onednn_link DNNL::dnnl)
  else()
    find_path(SIMDNORM_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
    find_library(SIMDNORM_ONEDNN_LIBRARY dnnl)
    if(SIMDNORM_ONEDNN_INCLUDE_DIR AND SIMDNORM_ONEDNN_LIBRARY)
      add_library(simdnorm_onednn INTERFACE)
      target_include_directories(simdnorm_onednn SYSTEM INTERFACE ${SIMDNORM_ONEDNN_INCLUDE_DIR})
      target_link_libraries(simdnorm_onednn INTERFACE ${SIMDNORM_ONEDNN_LIBRARY})
      set(_onednn_link simdnorm_onednn)
    endif()
  endif()
  if(_onednn_link)
    find_file(SIMDNORM_ONEDNN_VERSION_H oneapi/dnnl/dnnl_version.h)
    set(_dnnl_major "")
    if(SIMDNORM_ONEDNN_VERSION_H)
      file(STRINGS ${SIMDNORM_ONEDNN_VERSION_H} _dnnl_major REGEX "#define DNNL_VERSION_MAJOR")
      string(REGEX MATCH "[0-9]+" _dnnl_major "${_dnnl_major}")
    endif()
    if(_dnnl_major STREQUAL "2")
      set(_with_onednn 1)
      target_sources(simdnorm_peers PRIVATE ${_peers_dir}/peer_onednn.cpp)
      target_link_libraries(simdnorm_peers PRIVATE ${_onednn_link})
    else()
      message(STATUS "simdnorm: oneDNN ${_dnnl_major}.x found; the peer adapter is written for 2.x")
    endif()
  endif()
endif()

if(SIMDNORM_BENCH_TORCH AND OpenMP_CXX_FOUND)
  # Debian's libtorch-dev also ships TorchConfig.cmake, but it loads Caffe2's whole
  # configuration (glog, protobuf, ...) and global flags; the ATen headers and two libraries are
  # all the adapter needs.
  find_path(SIMDNORM_TORCH_INCLUDE_DIR ATen/ATen.h)
  find_library(SIMDNORM_TORCH_CPU_LIBRARY torch_cpu)
  find_library(SIMDNORM_C10_LIBRARY c10)
  if(SIMDNORM_TORCH_INCLUDE_DIR AND SIMDNORM_TORCH_CPU_LIBRARY AND SIMDNORM_C10_LIBRARY)
    set(_with_torch 1)
    target_sources(simdnorm_peers PRIVATE ${_peers_dir}/peer_torch.cpp)
    target_include_directories(simdnorm_peers SYSTEM PRIVATE ${SIMDNORM_TORCH_INCLUDE_DIR})
    target_link_libraries(simdnorm_peers PRIVATE ${SIMDNORM_TORCH_CPU_LIBRARY} ${SIMDNORM_C10_LIBRARY})
  endif()
endif()

if(_with_onednn OR _with_torch)
  target_link_libraries(simdnorm_peers PRIVATE OpenMP::OpenMP_CXX)
endif()
target_compile_definitions(simdnorm_peers PUBLIC
  SIMDNORM_BENCH_WITH_ONEDNN=${_with_onednn} SIMDNORM_BENCH_WITH_TORCH=${_with_torch})
message(STATUS "simdnorm: benchmark peers: oneDNN ${_with_onednn}, libtorch ${_with_torch}")

target_sources(simdnorm_bench PRIVATE ${_peers_dir}/bench_peers.cpp)
target_link_libraries(simdnorm_bench PRIVATE simdnorm_peers)

add_executable(simdnorm_accuracy ${CMAKE_CURRENT_LIST_DIR}/../accuracy.cpp)
target_link_libraries(simdnorm_accuracy PRIVATE simdnorm::simdnorm simdnorm_peers)
