#!/usr/bin/env bash
# Eval latency of torchvision models (resnet50, mobilenet_v3_large, convnext_tiny, vit_b_16,
# swin_t) before and after simdnorm_torch.convert(), at 1 and 2 threads, with the share of time
# in normalization ops and the per-call overhead on a tiny tensor. Builds the extension first.
#   scripts/torch_models.sh [options of python/bench/torch_models.py]
#     e.g. --size 160 --runs 5 --threads 1,2,4 --models resnet50,swin_t
#     --dtype bfloat16: bfloat16 models (docs/results/torch_models_bf16.md was made with it)
# Writes docs/results/torch_models.md (SIMDNORM_TORCH_MODELS_OUT to change). Slow: Debian's
# torch takes seconds per vit_b_16 forward on a small machine.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SIMDNORM_TORCH_BUILD:-build-torch}
out=${SIMDNORM_TORCH_MODELS_OUT:-docs/results/torch_models.md}

scripts/setup.sh --torch
cmake -S python -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "${SIMDNORM_TORCH_JOBS:-2}" >/dev/null
command="scripts/torch_models.sh${*:+ $*}"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
PYTHONPATH=python /usr/bin/python3 python/bench/torch_models.py --command "$command" "$@" >"$tmp"
mkdir -p "$(dirname "$out")"
mv "$tmp" "$out"
cat "$out"
