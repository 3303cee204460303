#!/usr/bin/env bash
# Installs the Debian packages simdnorm needs to build, test and benchmark, and nothing else.
# Idempotent and quiet when everything is present.
#   scripts/setup.sh            build + test + benchmark dependencies
#   scripts/setup.sh --peers    also oneDNN and libtorch (optional benchmark comparators)
#   scripts/setup.sh --cross    also the aarch64 cross compiler and qemu-user (ARM tests)
#   scripts/setup.sh --plots    also Debian's python3-matplotlib (benchmark report charts)
#   scripts/setup.sh --torch    also Debian's PyTorch, torchvision, pybind11 and pytest (the
#                               PyTorch extension in python/)
#   scripts/setup.sh --mpi      also Debian's Open MPI (mpicc, mpirun: the MPI examples and
#                               their tests, label mpi; docs/distributed.md)
#   scripts/setup.sh --ci       what scripts/ci.sh needs: --cross, --mpi and pkg-config
#   scripts/setup.sh --format   also clang-format (scripts/format.sh)
#   scripts/setup.sh --fuzz     also clang-16 and its sanitizer runtimes (libFuzzer harness,
#                               scripts/fuzz.sh)
#   scripts/setup.sh --arm-sysroot DIR
#                               --cross, plus Debian's arm64 oneTBB and Google Benchmark
#                               packages downloaded and extracted into DIR (for the toolchain
#                               file's SIMDNORM_ARM_SYSROOT). No multiarch: apt reads the arm64
#                               package lists into a temporary folder of its own, so the
#                               system's apt lists and dpkg database stay as they are, and this
#                               part needs no root. Skipped when DIR already holds them.
set -euo pipefail

pkgs=(cmake make g++ libxsimd-dev libtbb-dev doctest-dev libbenchmark-dev)
cross=(g++-aarch64-linux-gnu qemu-user binutils-aarch64-linux-gnu)
# Debian has no aarch64 cross compiler for arm64 hosts, which build natively instead.
[ "$(dpkg --print-architecture)" = arm64 ] && cross=()
mpi=(libopenmpi-dev openmpi-bin)
arm_sysroot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --peers) pkgs+=(libdnnl-dev libtorch-dev) ;;
    --cross) pkgs+=("${cross[@]}") ;;
    --plots) pkgs+=(python3-matplotlib) ;;
    --torch) pkgs+=(python3-torch libtorch-dev pybind11-dev python3-pytest python3-torchvision) ;;
    --qemu)  pkgs+=(qemu-user) ;;
    --mpi)   pkgs+=("${mpi[@]}") ;;
    --ci)    pkgs+=("${cross[@]}" "${mpi[@]}" pkg-config) ;;
    --fuzz)  pkgs+=(clang-16 libclang-rt-16-dev) ;;
    --format) pkgs+=(clang-format) ;;
    --arm-sysroot)
      [ $# -ge 2 ] || { echo "setup.sh: --arm-sysroot needs a directory" >&2; exit 2; }
      arm_sysroot=$2; shift
      pkgs+=("${cross[@]}") ;;
    *) echo "setup.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Another process's apt run may hold the locks: wait for it instead of failing.
lock=(-o DPkg::Lock::Timeout=600)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  $sudo apt-get "${lock[@]}" update -qq >/dev/null
  $sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ -n "$arm_sysroot" ] || exit 0

# ---- arm64 oneTBB and Google Benchmark, extracted (not installed) into $arm_sysroot ----------
# libtbbbind-2-5 is there because TBB's CMake config checks that every library it names exists;
# oneTBB opens it at run time only for NUMA/core-type topology, and goes on without it when its
# libhwloc (not extracted) is missing. Google Benchmark links libstdc++/libm/libc only.
arm_pkgs=(libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libbenchmark-dev libbenchmark1debian)
stamp="$arm_sysroot/.simdnorm-arm-sysroot"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "${arm_pkgs[*]}" ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs" "$tmp/root"
apt=(apt-get -qq "${lock[@]}" -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache"
     -o APT::Architectures::=arm64 -o Acquire::Languages=none)
# As root apt downloads as user _apt, which cannot write into the private folders.
[ "$(id -u)" -eq 0 ] && apt+=(-o APT::Sandbox::User=root)
"${apt[@]}" update >/dev/null
(cd "$tmp/debs" && "${apt[@]}" download "${arm_pkgs[@]/%/:arm64}" >/dev/null)
got=()
for d in "$tmp"/debs/*.deb; do
  dpkg-deb -x "$d" "$tmp/root"
  got+=("$(basename "$d" _arm64.deb)")
done
echo "${arm_pkgs[*]}" >"$tmp/root/.simdnorm-arm-sysroot"
mkdir -p "$(dirname "$arm_sysroot")"
rm -rf "$arm_sysroot"
mv "$tmp/root" "$arm_sysroot"
echo "setup.sh: extracted arm64 ${got[*]} into $arm_sysroot" >&2
