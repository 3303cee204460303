# Toolchain: cross-compile for aarch64 (NEON) with Debian's g++-aarch64-linux-gnu and run every
# test, try_run and doctest_discover_tests step under qemu-user.
#
#   scripts/setup.sh --arm-sysroot build-arm-sysroot      # cross compiler, qemu, arm64 oneTBB + benchmark
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DSIMDNORM_ARM_SYSROOT=$PWD/build-arm-sysroot
#   cmake --build build-arm -j2 && SIMDNORM_TEST_QUICK=1 ctest --test-dir build-arm --timeout 600
#
# SIMDNORM_ARM_SYSROOT is a folder into which Debian's arm64 oneTBB and Google Benchmark
# packages were extracted (not installed: no multiarch); find_package() looks there too, and
# CMake puts its library folder into the binaries' RUNPATH, so they run under
# 'qemu-aarch64 -L /usr/aarch64-linux-gnu'. Without it, build with -DSIMDNORM_WITH_TBB=OFF
# (the benchmark is then skipped), or install the arm64 packages through multiarch (docs/isa.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(SIMDNORM_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${SIMDNORM_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${SIMDNORM_CROSS_TRIPLE}-g++)
# Debian multiarch layout: arm64 packages live in /usr/lib/aarch64-linux-gnu. Setting the library
# architecture keeps find_package()/find_library() away from the x86_64-linux-gnu copies.
set(CMAKE_LIBRARY_ARCHITECTURE ${SIMDNORM_CROSS_TRIPLE})
# No re-rooting into /usr/aarch64-linux-gnu: architecture-independent packages (doctest,
# the xsimd headers) live under /usr. Host programs (qemu) must be found on the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(SIMDNORM_ARM_SYSROOT "" CACHE PATH
  "Folder holding Debian's arm64 oneTBB and Google Benchmark, extracted (scripts/setup.sh --arm-sysroot)")
if(SIMDNORM_ARM_SYSROOT AND NOT SIMDNORM_ARM_SYSROOT IN_LIST CMAKE_FIND_ROOT_PATH)
  # Searched in addition to the host: <sysroot>/usr/lib/aarch64-linux-gnu/cmake/TBB, ...
  list(APPEND CMAKE_FIND_ROOT_PATH "${SIMDNORM_ARM_SYSROOT}")
endif()

# The emulator CMake puts in front of add_test commands, try_run and doctest_discover_tests.
find_program(SIMDNORM_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(NOT SIMDNORM_QEMU_AARCH64)
  message(FATAL_ERROR "qemu-aarch64 not found: run scripts/setup.sh --cross")
endif()
if(EXISTS /lib/ld-linux-aarch64.so.1)
  # libc6:arm64 is installed (multiarch). Use it alone: with '-L /usr/aarch64-linux-gnu' the
  # cross ld.so would load the multiarch libc.so.6, a different glibc build, and the first
  # pthread_create hangs.
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SIMDNORM_QEMU_AARCH64})
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SIMDNORM_QEMU_AARCH64} -L /usr/${SIMDNORM_CROSS_TRIPLE})
endif()
# qemu's default CPU is 'max' (NEON + SVE). QEMU_CPU=neoverse-n1 in the environment of ctest
# runs on a NEON-only core instead.
