#!/usr/bin/env bash
# Installs the Debian packages simdnorm needs to build, test and benchmark, and nothing else.
# Idempotent and quiet when everything is present.
#   scripts/setup.sh            build + test + benchmark dependencies
#   scripts/setup.sh --peers    also oneDNN and libtorch (optional benchmark comparators)
#   scripts/setup.sh --cross    also the aarch64 cross compiler and qemu-user (ARM tests)
#   scripts/setup.sh --plots    also Debian's python3-matplotlib (benchmark report charts)
#   scripts/setup.sh --ci       what scripts/ci.sh needs: --cross plus pkg-config
set -euo pipefail

pkgs=(cmake make g++ libxsimd-dev libtbb-dev doctest-dev libbenchmark-dev)
for arg in "$@"; do
  case "$arg" in
    --peers) pkgs+=(libdnnl-dev libtorch-dev) ;;
    --cross) pkgs+=(g++-aarch64-linux-gnu qemu-user binutils-aarch64-linux-gnu) ;;
    --plots) pkgs+=(python3-matplotlib) ;;
    --qemu)  pkgs+=(qemu-user) ;;
    --ci)    pkgs+=(g++-aarch64-linux-gnu qemu-user binutils-aarch64-linux-gnu pkg-config) ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
