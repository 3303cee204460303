#!/usr/bin/env bash
# The PyTorch extension's test command: installs Debian's PyTorch, torchvision, pybind11 and
# pytest (scripts/setup.sh --torch), builds python/ (the extension and simdnorm under it) and
# runs its pytest suite through CTest. Exits non-zero when any step or test fails.
#   scripts/torch.sh            build in build-torch/ (SIMDNORM_TORCH_BUILD to change)
# Environment: SIMDNORM_TORCH_JOBS (build jobs, default 2), SIMDNORM_TORCH_TEST_THREADS (torch
# threads in the tests, default 2), SIMDNORM_TORCH_PREFIX (link the simdnorm installed there,
# found with find_package, instead of building the repository's sources a second time).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SIMDNORM_TORCH_BUILD:-build-torch}

scripts/setup.sh --torch
use_installed=()
[ -n "${SIMDNORM_TORCH_PREFIX:-}" ] &&
  use_installed=(-DSIMDNORM_TORCH_USE_INSTALLED=ON -DCMAKE_PREFIX_PATH="$SIMDNORM_TORCH_PREFIX")
cmake -S python -B "$build" -DCMAKE_BUILD_TYPE=Release "${use_installed[@]}" >/dev/null
cmake --build "$build" -j "${SIMDNORM_TORCH_JOBS:-2}"
ctest --test-dir "$build" --output-on-failure
