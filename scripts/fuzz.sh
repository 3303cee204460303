#!/usr/bin/env bash
# Builds the libFuzzer harness of the C API (tests/fuzz) with clang-16, AddressSanitizer and
# UBSan, and fuzzes for a bounded time on a copy of the committed seed corpus. Fails on any crash,
# sanitizer report, failed check, timeout or out-of-memory.
#   scripts/fuzz.sh [SECONDS [BUILD_DIR]]      default 60 s (0: replay the corpus only), build-fuzz
# Environment: SIMDNORM_FUZZ_JOBS (build parallelism, default 2), SIMDNORM_FUZZ_ARGS (extra
# libFuzzer flags), SIMDNORM_FUZZ_ALL_DTYPES=1 (build the bf16 / f16 kernels too, so that the
# harness checks 16-bit x and y by value; without it, as in CI, whose time they would exceed,
# they must be refused with unsupported_dtype). Crash inputs are left in BUILD_DIR/artifacts/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
build=${2:-build-fuzz}
jobs=${SIMDNORM_FUZZ_JOBS:-2}
case "$seconds" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a number, got '$seconds'" >&2; exit 2 ;;
esac

"$root/scripts/setup.sh" --fuzz
gen=()  # Ninja when there is one, unless the build folder was made with another generator
command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
# The serial default executor (no oneTBB): runs are deterministic, and the harness drives the
# parallel path itself through a host-pool executor.
all_dtypes=OFF
[ "${SIMDNORM_FUZZ_ALL_DTYPES:-0}" = 1 ] && all_dtypes=ON
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMDNORM_ALL_DTYPES=$all_dtypes \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 -DSIMDNORM_FUZZ=ON \
  -DSIMDNORM_WITH_TBB=OFF -DSIMDNORM_BUILD_TESTS=OFF -DSIMDNORM_BUILD_BENCHMARKS=OFF \
  -DSIMDNORM_BUILD_EXAMPLES=OFF -DSIMDNORM_INSTALL=OFF >/dev/null
cmake --build "$build" --target simdnorm_fuzz_c_api -j "$jobs"

corpus="$build/corpus"
rm -rf "$corpus"
mkdir -p "$corpus" "$build/artifacts"
cp tests/fuzz/corpus/* "$corpus/"
# shellcheck disable=SC2086
# SECONDS = 0: replay the corpus only (every input once, deterministic), as CI does.
limit=(-max_total_time="$seconds")
[ "$seconds" -eq 0 ] && limit=(-runs=0)
"$build/tests/fuzz/simdnorm_fuzz_c_api" "${limit[@]}" -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/" \
  ${SIMDNORM_FUZZ_ARGS:-} "$corpus"
