#!/usr/bin/env bash
# Thread-scaling run on a many-core x86 machine that may not have the build's libraries:
#   scripts/device_scaling.sh pack   - build the benchmark (simdnorm + oneDNN peer) and pack it
#                                      with every shared library it loads, glibc's loader
#                                      included, into devrun/
#   scripts/device_scaling.sh run OUT - on the target: run LayerNorm, RMSNorm, BatchNorm and
#                                      GroupNorm at 1..N threads, JSON and text into OUT/
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  pack)
    build="$root/build-devrun"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSIMDNORM_BUILD_TESTS=OFF \
      -DSIMDNORM_BUILD_EXAMPLES=OFF -DSIMDNORM_BENCH_ONEDNN=ON -DSIMDNORM_BENCH_TORCH=OFF >/dev/null
    cmake --build "$build" --target simdnorm_bench -j "$(nproc)" >/dev/null
    rm -rf "$root/devrun" && mkdir -p "$root/devrun/lib"
    cp "$build/bench/simdnorm_bench" "$root/devrun/"
    ldd "$build/bench/simdnorm_bench" | awk '/=> \//{print $3} /^\t\/lib/{print $1}' |
      while read -r lib; do cp -L "$lib" "$root/devrun/lib/"; done
    du -sh "$root/devrun"
    ;;
  run)
    out=${2:?output folder}
    d="$root/devrun"
    run=("$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/simdnorm_bench")
    ncpu=$(nproc)
    threads=1; t=2; while [ "$t" -le "$ncpu" ]; do threads="$threads,$t"; t=$((t * 2)); done
    { lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|L2|L3|NUMA node\(s\)'; free -g | head -2; } >"$out/machine.txt"
    common=(--simdnorm_threads="$threads" --benchmark_min_time=0.2 --benchmark_repetitions=1
           )
    # Beyond the last-level cache: 256 MiB rows and a 256 MiB+ NCHW tensor; in cache: x = 1 MiB
    # is tiny per thread at 16 threads, so LayerNorm also runs at 16 MiB there.
    timeout 250 "${run[@]}" "${common[@]}" \
      --benchmark_filter='^(layer_norm|rms_norm)/(avx512bw|onednn)/D:(128|4096)/x_MiB:(1|256)/|^(batch_norm_inference|batch_norm_training)/(avx512bw|onednn)/(nchw|nhwc)/(32x256x14x14|64x64x128x128)/|^group_norm(32)?/(avx512bw|onednn)/nchw/1x320x64x64/' \
      --benchmark_out="$out/scaling.json" --benchmark_out_format=json >"$out/scaling.txt" 2>&1 || true
    ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
