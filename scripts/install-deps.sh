#!/usr/bin/env bash
# Installs what Halformer builds with, from Debian 12's own packages only:
# Halide 14 (brings LLVM 14), CMake, g++, GoogleTest, Google Benchmark, and the
# benchmark baselines OpenBLAS and oneDNN; the OpenCL headers Debian's oneDNN
# CMake package asks for; PoCL (an OpenCL driver on the CPU) so the GPU builds
# of every kernel are tested without a GPU; the aarch64 cross compiler and
# qemu-user for the ARM build and its tests (qemu-x86_64 also runs the x86
# tests on emulated AVX2-only and SSE4.1 CPUs), and arm64's package lists for
# the ARM runtime's SentencePiece and ICU (scripts/arm64-libs.sh); ICU
# (libicu-dev) for the Unicode tables of the Hugging Face tokenizers
# (runtime/src/text/unicode.cpp); matplotlib for the plots of
# `halformer tune`, `halformer train` and bench/report.py; CLI11 for the
# command line; Open MPI for data-parallel training; gettext (msgfmt) for the
# corpus builder's test catalogs; NLTK (python3-nltk) for the reference BLEU
# and chrF that tests/check_metrics.py compares `halformer eval` with;
# pybind11, the Python headers, numpy and pytest for the Python module and
# its tests (python/), and setuptools, wheel and venv for its pip install
# (tests/check_pip.sh).
# (bench/torch_baseline.py, torch_train.py and the fixture scripts also want
# python3-torch: optional.)
# Does nothing when everything is already there.
#   --runtime: only what the main job (scripts/main.sh) builds with: Halide,
#   CMake, g++, SentencePiece, ICU and CLI11.
set -euo pipefail
if [ "${1:-}" = "--runtime" ]; then
  pkgs=(libhalide14-0-dev cmake g++ make libsentencepiece-dev libicu-dev libcli11-dev libcpp-httplib-dev nlohmann-json3-dev pkg-config)
else
pkgs=(libhalide14-0-dev cmake g++ make libgtest-dev libbenchmark-dev libopenblas-dev libdnnl-dev
      ocl-icd-opencl-dev pocl-opencl-icd g++-aarch64-linux-gnu qemu-user python3-matplotlib
      libcli11-dev libopenmpi-dev openmpi-bin gettext libsentencepiece-dev libicu-dev python3-nltk libcpp-httplib-dev nlohmann-json3-dev pkg-config
      pybind11-dev python3-dev python3-numpy python3-pytest python3-setuptools python3-wheel python3-venv gdb)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The ARM build of the runtime links Debian's arm64 SentencePiece, which
# cannot be installed beside the amd64 one (the packages are not Multi-Arch),
# and arm64 ICU: scripts/arm64-libs.sh downloads and unpacks both into the
# build, and needs arm64's package lists for that.
arm64_lists=0
if [ "${1:-}" != "--runtime" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-deps: adding arm64 package lists (for scripts/arm64-libs.sh)"
  $SUDO dpkg --add-architecture arm64
  arm64_lists=1
fi
if [ ${#missing[@]} -eq 0 ]; then
  [ "$arm64_lists" -eq 0 ] || $SUDO apt-get update -qq
  echo "install-deps: all present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
