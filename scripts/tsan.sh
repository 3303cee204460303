#!/usr/bin/env bash
# ThreadSanitizer stage: builds the library and the concurrency test (tests/concurrency) with
# -fsanitize=thread and runs it once; any report fails the run (halt_on_error=1).
#
#   scripts/tsan.sh [build dir]        (default build-tsan, relative to the repository root)
#
# The build has no oneTBB (SIMDNORM_WITH_TBB=OFF, the default executor is serial): oneTBB is
# not instrumented, so TSan would not see its synchronization and would report races inside
# it. The test drives plans from its own std::threads and a host pool instead; the regular
# build runs the same test with oneTBB. No suppressions: simdnorm's code must run clean.
# Environment: SIMDNORM_TSAN_TIMEOUT (seconds, default 900), SIMDNORM_CI_JOBS (default 2),
# CXX / CC (default g++ / gcc), TSAN_OPTIONS (added to ours).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${1:-build-tsan}
jobs=${SIMDNORM_CI_JOBS:-2}
timeout_s=${SIMDNORM_TSAN_TIMEOUT:-900}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

flags="-fsanitize=thread -fno-omit-frame-pointer"
mkdir -p "$(dirname "$build")"
cmake -S "$root" -B "$build" "${gen[@]}" -Wno-dev -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMDNORM_ALL_DTYPES=OFF \
  -DCMAKE_C_COMPILER="${CC:-gcc}" -DCMAKE_CXX_COMPILER="${CXX:-g++}" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DSIMDNORM_WITH_TBB=OFF -DSIMDNORM_BUILD_TESTS=ON -DSIMDNORM_BUILD_BENCHMARKS=OFF \
  -DSIMDNORM_BUILD_EXAMPLES=OFF -DSIMDNORM_INSTALL=OFF >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target simdnorm_test_concurrency -j"$jobs" >"$build.build.log" 2>&1 ||
  { grep -E -A4 'error|FAILED' "$build.build.log" | head -n 80; exit 1; }
echo "built $build (simdnorm_test_concurrency, -fsanitize=thread, no oneTBB)"

test_bin=$build/tests/simdnorm_test_concurrency
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
t0=$SECONDS
set +e
out=$(timeout "$timeout_s" "$test_bin" 2>&1)
rc=$?
# GCC 12's TSan runtime cannot map its shadow memory under the larger ASLR ranges of recent
# kernels (vm.mmap_rnd_bits > 28): it stops before main. Run once more without ASLR then.
if [ $rc -ne 0 ] && grep -q 'unexpected memory mapping' <<<"$out"; then
  echo "tsan: the runtime cannot map its shadow memory with ASLR on; running without ASLR"
  out=$(timeout "$timeout_s" setarch "$(uname -m)" -R "$test_bin" 2>&1)
  rc=$?
fi
set -e
printf '%s\n' "$out" | tail -n 200
[ $rc -eq 124 ] && echo "tsan: timed out after ${timeout_s}s"
echo "tsan: exit code $rc after $((SECONDS - t0))s"
exit $rc
