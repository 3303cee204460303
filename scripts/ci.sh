#!/usr/bin/env bash
# The project's full test command. Stages, in order (pass names to run only some):
#   format    every C and C++ source follows .clang-format (scripts/format.sh)
#   release   Release build (library, tests, examples, benchmarks), the FULL test suite natively
#   isa-env   the release build's suite again with SIMDNORM_ISA naming a runnable ISA that is not
#             the best (the next one down; scalar where only one runs): every test must hold
#             under any valid SIMDNORM_ISA, including those that check the default selection
#   qemu-x86  the same test binaries under qemu-x86_64 -cpu Haswell / Nehalem: dispatch must
#             fall back to avx2_fma / sse4_2 there and the suite must pass on it (quick mode:
#             the selected ISA only, largest sizes skipped; see tests/test_util.hpp)
#   huge      tests/huge on the release build: counts beyond 2^24, a tensor beyond 2^31 floats
#             (8 GiB in place; skipped with less than 12 GiB free) (scripts/huge.sh)
#   mpi       split statistics across processes: an f32-only Release build that requires Open MPI
#             (-DSIMDNORM_WITH_MPI=ON), the MPI examples and tests/mpi under mpiexec with 1, 2
#             and 3 ranks, each test run twice (ctest label mpi; docs/distributed.md). The
#             release stage runs them too wherever MPI is installed; here they must run
#   asan      AddressSanitizer + UBSan build, the full suite (every ISA), must be clean
#   tsan      ThreadSanitizer build of the concurrency test (scripts/tsan.sh), must be clean
#   torch     the PyTorch extension (python/): Debian's torch 1.13, its pytest suite with real
#             torchvision models converted (scripts/torch.sh), linked against the release
#             stage's library installed to a temporary prefix (find_package), not a second build
#   fuzz      the C API's libFuzzer harness (clang-16, ASan + UBSan) replaying the committed
#             corpus (scripts/fuzz.sh 0; open-ended fuzzing is scripts/fuzz.sh SECONDS)
#   arm       aarch64 cross build (NEON) with oneTBB and the benchmark, against Debian's arm64
#             packages extracted into <build root>/arm-sysroot; whole suite under qemu-aarch64
#             (quick mode) on qemu's default CPU (BF16: neon64_bf16), again with
#             SIMDNORM_ISA=neon64 (the integer bf16 stores on the same CPU) and on a CPU model
#             without BF16 (Neoverse N1), a benchmark smoke run, and a serial (no oneTBB) build's
#             C API test
#   package   install (static and shared) to a temporary prefix; C++ and C consumer projects via
#             find_package, pkg-config, add_subdirectory and FetchContent; exported symbols
#
# Environment: SIMDNORM_CI_BUILD (build root, default build-ci), SIMDNORM_CI_JOBS (default 2).
# Every emulated run has a timeout. A summary of the wall time of each stage is printed at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SIMDNORM_CI_BUILD:-build-ci}
jobs=${SIMDNORM_CI_JOBS:-2}
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

stages=("$@")
if [ ${#stages[@]} -eq 0 ]; then
  stages=(format release isa-env qemu-x86 huge mpi asan tsan fuzz torch arm package)
  # The emulation stages check x86 fallbacks and cross-build for ARM from an x86-64 machine;
  # elsewhere (e.g. natively on aarch64, where release is the ARM build) they do not apply.
  [ "$(uname -m)" = x86_64 ] || stages=(format release isa-env huge mpi asan tsan fuzz torch package)
fi

say() { printf '\n==== %s ====\n' "$*"; }
# Each stage runs in a subshell with errexit: a failing stage is reported, the next stages still
# run, and the script fails at the end if any stage failed.
summary=()
failed=()
run_stage() {
  local name=$1 t0=$SECONDS rc
  say "stage $name"
  set +e
  (set -e; "stage_$name")
  rc=$?
  set -e
  [ $rc -eq 0 ] || failed+=("$name")
  summary+=("$(printf '%-9s %5ds  %s' "$name" $((SECONDS - t0)) "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
}

# The ISA the default dispatch must pick on this CPU, from the kernel's view of the CPU flags
# (which also reflects what the OS enables): an independent check of src/dispatch.cpp.
expected_native_isa() {
  local flags
  flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) "
  has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
  case "$(uname -m)" in
    aarch64) if has bf16; then echo neon64_bf16; else echo neon64; fi ;;
    x86_64)
      if has avx512f avx512cd avx512dq avx512bw avx512_bf16; then echo avx512bf16
      elif has avx512f avx512cd avx512dq avx512bw; then echo avx512bw
      elif has avx2 fma; then echo avx2_fma
      elif has sse4_2; then echo sse4_2
      else echo sse2; fi ;;
    *) echo scalar ;;
  esac
}

build() {  # build <dir> [cmake --build args]: the compiler output goes to <dir>.build.log, shown on failure
  local dir=$1; shift
  cmake --build "$dir" "$@" >"$dir.build.log" 2>&1 || {
    grep -E -A4 'error|FAILED' "$dir.build.log" | head -n 80
    return 1
  }
  echo "built $dir${*:+ ($*)} ($(grep -c 'warning:' "$dir.build.log" || true) compiler warnings, see $dir.build.log)"
}

configure() {  # configure <dir> <cmake args...>
  local dir=$1; shift
  mkdir -p "$(dirname "$dir")"
  cmake -S "$root" -B "$dir" "${gen[@]}" -Wno-dev "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
}

# ---- release: native, full suite ------------------------------------------------------------
stage_release() {
  configure "$build/release" -DCMAKE_BUILD_TYPE=Release -DSIMDNORM_BUILD_EXAMPLES=ON \
    -DSIMDNORM_BUILD_BENCHMARKS=ON -DSIMDNORM_BENCH_ONEDNN=OFF -DSIMDNORM_BENCH_TORCH=OFF \
    -DSIMDNORM_QEMU_CPU_TESTS=ON
  build "$build/release"
  SIMDNORM_EXPECT_ISA=$(expected_native_isa) \
    ctest --test-dir "$build/release" -LE qemu --output-on-failure -j"$jobs" --timeout 900
  if [ -x "$build/release/bench/simdnorm_bench" ]; then  # the benchmark binary starts
    "$build/release/bench/simdnorm_bench" --benchmark_list_tests >/dev/null
  fi
}

# ---- isa-env: the suite under SIMDNORM_ISA set to a runnable ISA below the best ------------------
# The ISAs of this architecture, best first: each one's CPU features include the next one's.
isas_best_first() {
  case "$(uname -m)" in
    x86_64) echo avx512bf16 avx512bw avx2_fma sse4_2 sse2 scalar ;;
    aarch64) echo neon64_bf16 neon64 scalar ;;
    *) echo scalar ;;
  esac
}

second_runnable_isa() {  # the ISA after the best runnable one, or scalar
  local best isa found=0
  best=$(expected_native_isa)
  for isa in $(isas_best_first); do
    [ $found -eq 1 ] && { echo "$isa"; return; }
    [ "$isa" = "$best" ] && found=1
  done
  echo scalar
}

stage_isa-env() {
  [ -d "$build/release" ] || stage_release
  local isa
  isa=$(second_runnable_isa)
  echo "SIMDNORM_ISA=$isa"
  # env_isa_* set SIMDNORM_ISA themselves (and ran in the release stage).
  SIMDNORM_ISA=$isa SIMDNORM_EXPECT_ISA=$isa \
    ctest --test-dir "$build/release" -LE qemu -E '^env_isa_' --output-on-failure -j"$jobs" \
    --timeout 900
}

# ---- qemu-x86: older x86 CPU models (test binaries of the release stage) ----------------------
stage_qemu-x86() {
  [ -d "$build/release" ] || stage_release
  # ctest tests labelled qemu (tests/CMakeLists.txt): SIMDNORM_EXPECT_ISA, quick mode, timeouts.
  timeout 1800 ctest --test-dir "$build/release" -L qemu --output-on-failure -j"$jobs" --timeout 900
}

# ---- huge: shapes beyond 2^24 and 2^31 elements (the release build's library) ---------------
stage_huge() {
  [ -d "$build/release" ] || stage_release
  "$root/scripts/huge.sh" "$build/release"
}

# ---- mpi: split statistics across MPI processes ---------------------------------------------
# Its own f32-only build of just the MPI targets (a minute on 2 cores); SIMDNORM_WITH_MPI=ON
# fails the configure when MPI or mpiexec is missing, and --no-tests=error fails a run that
# found no test, so this stage never passes by running nothing.
stage_mpi() {
  configure "$build/mpi" -DCMAKE_BUILD_TYPE=Release -DSIMDNORM_ALL_DTYPES=OFF \
    -DSIMDNORM_WITH_MPI=ON -DSIMDNORM_BUILD_EXAMPLES=ON -DSIMDNORM_BUILD_BENCHMARKS=OFF
  build "$build/mpi" --target simdnorm_test_mpi example_mpi_sharded_layer_norm \
    example_mpi_sync_batch_norm
  ctest --test-dir "$build/mpi" -L mpi --no-tests=error --output-on-failure -j"$jobs" \
    --timeout 600
}

# ---- asan: AddressSanitizer + UndefinedBehaviorSanitizer --------------------------------------
# Without the MPI tests (they run in the mpi stage): Open MPI is not instrumented, and
# LeakSanitizer reports what its runtime still holds at exit.
stage_asan() {
  configure "$build/asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMDNORM_SANITIZE=ON \
    -DSIMDNORM_ALL_DTYPES=OFF -DSIMDNORM_WITH_MPI=OFF \
    -DSIMDNORM_BUILD_EXAMPLES=ON -DSIMDNORM_BUILD_BENCHMARKS=OFF
  build "$build/asan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$build/asan" --output-on-failure -j"$jobs" --timeout 1200
}

# ---- format: .clang-format ------------------------------------------------------------------
stage_format() {
  "$root/scripts/format.sh"
}

# ---- tsan: ThreadSanitizer over the concurrency test ------------------------------------------
stage_tsan() {
  "$root/scripts/tsan.sh" "$build/tsan"
}

# ---- fuzz: libFuzzer over the C API ----------------------------------------------------------
stage_fuzz() {
  "$root/scripts/fuzz.sh" 0 "$build/fuzz"
}

# ---- torch: the PyTorch extension and its pytest suite ---------------------------------------
# The extension links the release stage's library: compiling every ISA and dtype instance a second
# time would test nothing that stage did not.
stage_torch() {
  [ -d "$build/release" ] || stage_release
  cmake --install "$build/release" --prefix "$ci_tmp/release" >/dev/null
  SIMDNORM_TORCH_PREFIX="$ci_tmp/release" SIMDNORM_TORCH_BUILD="$build/torch" \
    SIMDNORM_TORCH_JOBS="$jobs" "$root/scripts/torch.sh"
}

# ---- arm: aarch64 cross build, tests and a benchmark smoke under qemu-aarch64 -----------------
# oneTBB and Google Benchmark for arm64 are Debian's arm64 packages, extracted into
# $build/arm-sysroot by scripts/setup.sh --arm-sysroot (no multiarch: the system's packages and
# apt state are untouched); the toolchain file's SIMDNORM_ARM_SYSROOT points find_package there.
# The library, the whole suite, the examples and the benchmark are built with oneTBB, as users
# get them. qemu-user runs guest threads on the x86 host's stronger memory ordering, so this
# shows that the oneTBB build links and runs on arm64, not that it is free of ARM-only races.
# A serial build (SIMDNORM_WITH_TBB=OFF, what edge users build) is checked with the C API test.
stage_arm() {
  local sysroot out toolchain="$root/cmake/toolchains/aarch64-linux-gnu.cmake"
  sysroot=$(realpath -m "$build/arm-sysroot")
  "$root/scripts/setup.sh" --arm-sysroot "$sysroot"
  configure "$build/arm" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DSIMDNORM_ARM_SYSROOT="$sysroot" -DSIMDNORM_WITH_TBB=ON -DSIMDNORM_BUILD_EXAMPLES=ON \
    -DSIMDNORM_BUILD_BENCHMARKS=ON -DSIMDNORM_BENCH_ONEDNN=OFF -DSIMDNORM_BENCH_TORCH=OFF
  build "$build/arm"
  [ -x "$build/arm/bench/simdnorm_bench" ] ||
    { echo "arm: bench/simdnorm_bench was not built (see $build/arm.configure.log)"; return 1; }
  export SIMDNORM_TEST_QUICK=1
  SIMDNORM_EXPECT_ISA=neon64_bf16 \
    timeout 1800 ctest --test-dir "$build/arm" --output-on-failure -j"$jobs" --timeout 900
  local qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
  [ -e /lib/ld-linux-aarch64.so.1 ] && qemu=(qemu-aarch64)  # multiarch libc: see the toolchain
  # neon64 forced on the same CPU (bf16 stores in integer SIMD, the same bits as bfcvtn), and on
  # a core without BF16 and SVE (Neoverse N1), where dispatch must pick it.
  SIMDNORM_ISA=neon64 SIMDNORM_EXPECT_ISA=neon64 \
    timeout 900 "${qemu[@]}" "$build/arm/tests/simdnorm_tests" | tail -n 3
  QEMU_CPU=neoverse-n1 SIMDNORM_EXPECT_ISA=neon64 \
    timeout 900 "${qemu[@]}" "$build/arm/tests/simdnorm_tests" | tail -n 3  # pipefail keeps a failure
  unset SIMDNORM_TEST_QUICK

  # Benchmark smoke: one small case at 2 threads (oneTBB arena, interleaved copies); it must
  # print its counters. Under emulation the figures say nothing about ARM performance.
  if ! out=$(QEMU_CPU=neoverse-n1 timeout 300 "${qemu[@]}" "$build/arm/bench/simdnorm_bench" \
      --simdnorm_threads=2 --benchmark_filter='^layer_norm/neon64/D:768/x_MiB:1/threads:2/manual_time$' \
      --benchmark_min_time=0.01 2>&1) ||
     ! grep -Eq '^layer_norm/neon64/.* ratio=[0-9.]+' <<<"$out"; then
    printf 'arm: the benchmark smoke run failed or printed no ratio counter:\n%s\n' "$out"
    return 1
  fi
  grep '^layer_norm/' <<<"$out"

  # Serial build: library and C API test without oneTBB, which is then not linked at all.
  configure "$build/arm-serial" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DSIMDNORM_ALL_DTYPES=OFF \
    -DSIMDNORM_WITH_TBB=OFF -DSIMDNORM_BUILD_EXAMPLES=OFF -DSIMDNORM_BUILD_BENCHMARKS=OFF
  build "$build/arm-serial" --target simdnorm_test_c_api
  if aarch64-linux-gnu-readelf -d "$build/arm-serial/tests/simdnorm_test_c_api" | grep -q libtbb; then
    echo "arm: the SIMDNORM_WITH_TBB=OFF build links oneTBB"; return 1
  fi
  QEMU_CPU=neoverse-n1 timeout 300 "${qemu[@]}" "$build/arm-serial/tests/simdnorm_test_c_api"
}

# ---- package: install, consumers, exported symbols ---------------------------------------------
consumer() {  # consumer <c|cxx> <build dir> <cmake args...>
  local kind=$1 dir=$2; shift 2
  cmake -S "$root/tests/consumer/$kind" -B "$dir" "${gen[@]}" "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  build "$dir"
  ctest --test-dir "$dir" --output-on-failure
}

stage_package() {
  local tmp=$ci_tmp/package kind
  mkdir -p "$tmp"
  for kind in static shared; do
    local shared=OFF
    [ $kind = shared ] && shared=ON
    configure "$build/pkg-$kind" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=$shared \
      -DSIMDNORM_ALL_DTYPES=OFF \
      -DSIMDNORM_BUILD_TESTS=OFF -DSIMDNORM_BUILD_BENCHMARKS=OFF -DSIMDNORM_BUILD_EXAMPLES=OFF \
      -DCMAKE_INSTALL_PREFIX="$tmp/$kind"
    build "$build/pkg-$kind"
    cmake --install "$build/pkg-$kind" >/dev/null
    consumer cxx "$tmp/cxx-$kind" -DCMAKE_PREFIX_PATH="$tmp/$kind"
    consumer c "$tmp/c-$kind" -DCMAKE_PREFIX_PATH="$tmp/$kind"
    # pkg-config, from C with no CMake at all.
    local pc=(pkg-config)
    [ $kind = static ] && pc+=(--static)
    if command -v pkg-config >/dev/null; then
      local pcdir
      pcdir=$(dirname "$(find "$tmp/$kind" -name simdnorm.pc)")
      # shellcheck disable=SC2046
      gcc -std=c99 -Wall -Wextra -pedantic "$root/tests/consumer/c/main.c" -o "$tmp/pc-$kind" \
        $(PKG_CONFIG_PATH=$pcdir "${pc[@]}" --cflags --libs simdnorm) \
        -Wl,-rpath,"$(dirname "$(find "$tmp/$kind" -name 'libsimdnorm.*' | head -1)")"
      "$tmp/pc-$kind"
    else
      echo "package: pkg-config not installed, .pc check skipped"
    fi
  done

  # The shared library exports the public API only: C functions simdnorm_* and namespace
  # simdnorm (with the typeinfo and vtable of its classes), never simdnorm::detail, xsimd,
  # oneTBB or libstdc++ template instantiations (cmake/simdnorm.map).
  local so syms leaked
  so=$(find "$tmp/shared" -name 'libsimdnorm.so.*.*' | head -1)
  syms=$(nm -D --defined-only "$so" | awk '{ print $3 }' | c++filt)
  leaked=$(grep -Ev '^((typeinfo|typeinfo name|vtable) for )?simdnorm(_|::)' <<<"$syms" || true)
  leaked+=$(grep -E 'simdnorm::detail|xsimd|tbb' <<<"$syms" || true)
  if [ -n "$leaked" ]; then
    printf 'package: exported from %s but not public API:\n%s\n' "$so" "$leaked"
    return 1
  fi
  echo "package: $(wc -l <<<"$syms") exported symbols, all public API"

  # Source-tree users get the same simdnorm::simdnorm target.
  consumer cxx "$tmp/cxx-subdir" -DSIMDNORM_CONSUME=add_subdirectory -DSIMDNORM_SOURCE_DIR="$root" \
    -DSIMDNORM_ALL_DTYPES=OFF
  consumer c "$tmp/c-fetch" -DSIMDNORM_CONSUME=fetchcontent -DSIMDNORM_SOURCE_DIR="$root" \
    -DSIMDNORM_ALL_DTYPES=OFF
}

say "setup"
"$root/scripts/setup.sh" --ci
ci_tmp=$(mktemp -d)
trap 'rm -rf "$ci_tmp"' EXIT
t_all=$SECONDS
for s in "${stages[@]}"; do
  declare -F "stage_$s" >/dev/null || { echo "ci.sh: unknown stage '$s'" >&2; exit 2; }
  run_stage "$s"
done
say "summary (wall time per stage, $jobs jobs)"
printf '%s\n' "${summary[@]}"
printf '%-9s %5ds\n' total $((SECONDS - t_all))
if [ ${#failed[@]} -ne 0 ]; then
  echo "ci.sh: FAILED stages: ${failed[*]}"
  exit 1
fi
echo "ci.sh: all stages passed"
