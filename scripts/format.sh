#!/usr/bin/env bash
# Checks that every C and C++ source follows .clang-format (Debian 12's clang-format 14):
#   scripts/format.sh          list the files that differ and fail if any does
#   scripts/format.sh --fix    rewrite them in place
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh" --format
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h' '*.hpp' '*.inc' ':!:tests/data/**')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -ne 0 ]; then
  printf 'format.sh: not formatted (scripts/format.sh --fix): %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format.sh: ${#files[@]} files follow .clang-format"
