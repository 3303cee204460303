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
#   --full       a longer, fuller sweep: 5 repetitions of 3x longer runs, thread counts
#                1, 2, 4, ... up to the core count, longer waits for a quiet machine
#                (default: 3 repetitions, 1 and 2 threads)
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
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
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

# 3. The sweep: every benchmark of the compared ops and shapes, simdnorm and the peers, in one
# process with its repetitions randomly interleaved (bench/peers/bench_peers.cpp says why).
# DRAM-sized cases may get a single timed iteration per repetition at the main run's minimum
# time; the benchmark still times all three copy kinds after it.
ncpu=$(nproc)
if [ "$full" = 1 ]; then
  reps=5; min_time=0.1; quiet_max=120
  threads=1; t=2; while [ "$t" -le "$ncpu" ]; do threads="$threads,$t"; t=$((t * 2)); done
  [ "$ncpu" -gt 1 ] && [[ ",$threads," != *",$ncpu,"* ]] && threads="$threads,$ncpu"
else
  reps=3; min_time=0.03; quiet_max=15
  threads=1; [ "$ncpu" -gt 1 ] && threads=1,2
fi
# Ops compared with the peers, and their shapes: LayerNorm x of 1 MiB (cache) and 256 MiB
# (DRAM); BatchNorm CNN shapes (cache) and one 256 MiB tensor; GroupNorm(32) UNet shapes. Each
# also with bf16 x and y (the _bf16 benchmarks; the row ops' x_MiB is then of bf16 data).
ops='(layer_norm|layer_norm_single_mean|rms_norm|batch_norm_inference|batch_norm_training|group_norm32)(_bf16)?'
shapes="x_MiB:(1|256)/|/(1x64x112x112|8x64x56x56|32x256x14x14|32x512x7x7|256x2048x1x1|64x64x128x128|1x320x64x64|1x640x32x32)/"

# On a shared machine, start each sweep when the other processes leave the CPUs alone (less
# than 0.3 cores busy over a second), waiting at most $quiet_max seconds. Repetitions that are
# disturbed anyway are detected by the benchmark (runq_wait) and set aside by the report.
wait_quiet() {
  local waited=0 a b
  [ -r /proc/stat ] || return 0
  while [ "$waited" -lt "$quiet_max" ]; do
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
  log "machine still busy after ${quiet_max}s (other processes); running anyway"
}

run_sweep() {  # name, impl regex, [env...]
  local name=$1 impl=$2
  shift 2
  wait_quiet
  log "sweep $name (repetitions $reps, min time $min_time s, threads $threads)"
  env "$@" "$bench" --simdnorm_threads="$threads" \
    --benchmark_filter="^$ops/$impl/.*($shapes)" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_min_time="$min_time" \
    --benchmark_out="$raw/bench_$name.json" --benchmark_out_format=json >"$raw/bench_$name.txt" 2>&1 ||
    { log "sweep $name failed, see $raw/bench_$name.txt"; tail -5 "$raw/bench_$name.txt" >&2; }
}
run_sweep main '[^/]+' -u ATEN_CPU_CAPABILITY

# libtorch's AVX-512 kernels are used only when forced, and the choice is fixed per process.
has_torch=0
"$bench" --benchmark_list_tests --benchmark_filter='^layer_norm/torch/' 2>/dev/null | grep -q . && has_torch=1
avx512=0
[ "$has_torch" = 1 ] && grep -qw avx512bw /proc/cpuinfo 2>/dev/null && avx512=1
[ "$avx512" = 1 ] && run_sweep torch_avx512 torch_avx512 ATEN_CPU_CAPABILITY=avx512

# 4. Accuracy.
log "accuracy"
env -u ATEN_CPU_CAPABILITY "$accuracy" --json "$raw/accuracy.json" >"$raw/accuracy.md"
acc=("$raw/accuracy.json")
if [ "$avx512" = 1 ]; then
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
