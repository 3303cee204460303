#!/usr/bin/env bash
# The side-by-side report: simdnorm against oneDNN and libtorch (when installed) on the same
# shapes and thread counts, in the same processes, plus an accuracy table; writes a report
# folder with README.md (tables) and PNG charts.
#
#   scripts/bench_report.sh [--peers | --no-peers] [--full] [--out DIR] [--build-dir DIR]
#
#   (default)    compare with the peers that are installed (Debian libdnnl-dev, libtorch-dev)
#   --peers      install them first (scripts/setup.sh --peers), then compare
#   --no-peers   simdnorm only, even when the peers are installed
#   --full       a longer, fuller sweep: 7 repetitions of longer runs, and thread counts
#                1, 2, 4, ... up to the core count (default: 3 repetitions, 1 and 2 threads;
#                about 6 minutes on a 2-core machine, build included)
#   --out DIR    report folder (default: report/ in the repository, git-ignored)
#   --build-dir  build folder (default: build-report/, a Release build of the benchmarks only)
#
# Needs Debian's python3-matplotlib for the charts (installed here through scripts/setup.sh
# --plots; without it the report has the tables only). The raw Google Benchmark JSON and logs
# stay in DIR/raw/.
set -euo pipefail

start=$(date +%s)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/report"
build="$root/build-report"
full=0
peers=auto
for ((i = 1; i <= $#; ++i)); do
  a=${!i}
  case "$a" in
    --peers) peers=install ;;
    --no-peers) peers=off ;;
    --full) full=1 ;;
    --out) i=$((i + 1)); out=${!i} ;;
    --build-dir) i=$((i + 1)); build=${!i} ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench_report.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
raw="$out/raw"
mkdir -p "$raw"
rm -f "$raw"/*.json "$out"/*.png

log() { echo "[bench_report $(($(date +%s) - start))s] $*" >&2; }

# 1. Packages (quiet when present).
setup_args=(--plots)
[ "$peers" = install ] && setup_args+=(--peers)
"$root/scripts/setup.sh" "${setup_args[@]}"

# 2. Release build of the benchmark and the accuracy tool.
peer_opt=ON
[ "$peers" = off ] && peer_opt=OFF
gen=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
log "configuring and building in $build"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DSIMDNORM_BUILD_TESTS=OFF -DSIMDNORM_BUILD_EXAMPLES=OFF -DSIMDNORM_BUILD_BENCHMARKS=ON \
  -DSIMDNORM_BENCH_ONEDNN=$peer_opt -DSIMDNORM_BENCH_TORCH=$peer_opt >"$raw/cmake.log"
cmake --build "$build" --target simdnorm_bench simdnorm_accuracy -j "$(nproc)" >"$raw/build.log"
bench="$build/bench/simdnorm_bench"
accuracy="$build/bench/simdnorm_accuracy"

# 3. The sweep. Shapes (the names' parameters) are split by regime, so that the DRAM-sized
# cases get runs long enough for all three copy kinds (each timed iteration is followed by one
# of them in rotation), without making every cache-resident case that long.
ncpu=$(nproc)
if [ "$full" = 1 ]; then
  reps=7; min_cache=0.1; min_dram=0.4; quiet_max=120
  threads=1; t=2; while [ "$t" -le "$ncpu" ]; do threads="$threads,$t"; t=$((t * 2)); done
  [ "$ncpu" -gt 1 ] && [[ ",$threads," != *",$ncpu,"* ]] && threads="$threads,$ncpu"
else
  reps=3; min_cache=0.05; min_dram=0.15; quiet_max=20
  threads=1; [ "$ncpu" -gt 1 ] && threads=1,2
fi
# Ops compared with the peers; the cache-resident and the DRAM-sized shapes of each.
ops='(layer_norm|batch_norm_inference|batch_norm_training|group_norm)'
cache_re="x_MiB:1/|/(1x64x112x112|8x64x56x56|32x256x14x14|32x512x7x7|256x2048x1x1|1x320x64x64|1x640x32x32)/"
dram_re="x_MiB:256/|/64x64x128x128/"

# On a shared machine, start each sweep when the other processes leave the CPUs alone (less
# than 0.3 cores busy over a second), waiting at most $1 seconds. Repetitions that are disturbed
# anyway are detected by the benchmark (runq_wait) and set aside by the report.
wait_quiet() {
  local max=$1 waited=0 a b
  [ -r /proc/stat ] || return 0
  while [ "$waited" -lt "$max" ]; do
    a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
    if awk -v a="$a" -v b="$b" -v n="$ncpu" 'BEGIN{split(a,x," "); split(b,y," ");
         t=y[2]-x[2]; exit !(t > 0 && (y[1]-x[1]) / t * n < 0.3)}'; then
      [ "$waited" -gt 0 ] && log "machine quiet after ${waited}s"
      return 0
    fi
    waited=$((waited + 1))
  done
  log "machine still busy after ${max}s (other processes); running anyway"
}

run_sweep() {  # name, impl regex, regime regex, min time, [env...]
  local name=$1 impl=$2 regime=$3 mt=$4
  shift 4
  wait_quiet "$quiet_max"
  log "sweep $name (repetitions $reps, min time $mt s, threads $threads)"
  env "$@" "$bench" --simdnorm_threads="$threads" \
    --benchmark_filter="^$ops/$impl/.*($regime)" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_min_time="$mt" --benchmark_report_aggregates_only=false \
    --benchmark_out="$raw/bench_$name.json" --benchmark_out_format=json >"$raw/bench_$name.txt" 2>&1 ||
    { log "sweep $name failed, see $raw/bench_$name.txt"; tail -5 "$raw/bench_$name.txt" >&2; }
}
run_sweep cache '[^/]+' "$cache_re" "$min_cache" -u ATEN_CPU_CAPABILITY
run_sweep dram '[^/]+' "$dram_re" "$min_dram" -u ATEN_CPU_CAPABILITY

# libtorch's AVX-512 kernels are used only when forced, and the choice is fixed per process.
has_torch=0
"$bench" --benchmark_list_tests --benchmark_filter='^layer_norm/torch/' 2>/dev/null | grep -q . && has_torch=1
if [ "$has_torch" = 1 ] && grep -qw avx512bw /proc/cpuinfo 2>/dev/null; then
  run_sweep cache_torch_avx512 torch_avx512 "$cache_re" "$min_cache" ATEN_CPU_CAPABILITY=avx512
  run_sweep dram_torch_avx512 torch_avx512 "$dram_re" "$min_dram" ATEN_CPU_CAPABILITY=avx512
fi

# 4. Accuracy.
log "accuracy"
env -u ATEN_CPU_CAPABILITY "$accuracy" --json "$raw/accuracy.json" >"$raw/accuracy.md"
acc=("$raw/accuracy.json")
if [ "$has_torch" = 1 ] && grep -qw avx512bw /proc/cpuinfo 2>/dev/null; then
  ATEN_CPU_CAPABILITY=avx512 "$accuracy" --only torch_avx512 --json "$raw/accuracy_torch_avx512.json" \
    >"$raw/accuracy_torch_avx512.md"
  acc+=("$raw/accuracy_torch_avx512.json")
fi

# 5. The report (Debian's own python3, for Debian's matplotlib).
wall=$(($(date +%s) - start))
python=/usr/bin/python3
[ -x "$python" ] || python=python3
cmd="scripts/bench_report.sh${*:+ $*}"
"$python" "$root/scripts/bench_report.py" --out "$out" --bench "$raw"/bench_*.json \
  --accuracy "${acc[@]}" --command "$cmd" --wall-seconds "$wall"
log "done in $(($(date +%s) - start)) s: $out/README.md"
