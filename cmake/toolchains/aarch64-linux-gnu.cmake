# Toolchain: cross-compile for aarch64 (NEON) with Debian's g++-aarch64-linux-gnu and run every
# test, try_run and doctest_discover_tests step under qemu-user.
#
#   scripts/setup.sh --cross
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DSIMDNORM_WITH_TBB=OFF
#   cmake --build build-arm -j2 && SIMDNORM_TEST_QUICK=1 ctest --test-dir build-arm --timeout 600
#
# oneTBB for arm64 is not installed by default (it needs Debian multiarch, which upgrades amd64
# packages); build with SIMDNORM_WITH_TBB=OFF, or see docs/threading.md for the multiarch route.
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
