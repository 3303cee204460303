#!/usr/bin/env bash
# Huge-shape test (tests/huge): a LayerNorm / RMSNorm row and BatchNorm channels of more than
# 2^24 values, and LayerNorm then RMSNorm over a tensor of more than 2^31 floats (8 GiB in
# place; the test skips that case when less than 12 GiB of memory is free). Configures a
# Release build with the test's ctest entry (-DSIMDNORM_HUGE_TESTS=ON, label huge), builds that
# test only and runs it once under a timeout. 20-60 s on 2 busy cores, most of it filling 8 GiB.
#
#   scripts/huge.sh [build dir]        (default build-huge, relative to the repository root)
#
# Environment: SIMDNORM_HUGE_TIMEOUT (seconds, default 900), SIMDNORM_CI_JOBS (default 2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${1:-build-huge}
jobs=${SIMDNORM_CI_JOBS:-2}
timeout_s=${SIMDNORM_HUGE_TIMEOUT:-900}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

mkdir -p "$(dirname "$build")"
cmake -S "$root" -B "$build" "${gen[@]}" -Wno-dev -DCMAKE_BUILD_TYPE=Release \
  -DSIMDNORM_BUILD_TESTS=ON -DSIMDNORM_HUGE_TESTS=ON -DSIMDNORM_BUILD_BENCHMARKS=OFF \
  -DSIMDNORM_BUILD_EXAMPLES=OFF >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target simdnorm_test_huge -j"$jobs" >"$build.build.log" 2>&1 ||
  { grep -E -A4 'error|FAILED' "$build.build.log" | head -n 80; exit 1; }
echo "built $build (simdnorm_test_huge)"
t0=$SECONDS
rc=0
timeout "$timeout_s" "$build/tests/simdnorm_test_huge" || rc=$?
[ $rc -eq 124 ] && echo "huge: timed out after ${timeout_s}s"
echo "huge: exit code $rc after $((SECONDS - t0))s"
exit $rc
