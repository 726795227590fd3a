#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for libreyolo and builds it:
#   Debian packages -> a shared venv with pip torch==2.11.0 (CUDA 13.0 build) -> meson + ccache -> ninja.
# Idempotent: every step checks first, so a second run only rebuilds what changed.
#
#   scripts/setup.sh --main                # what the libreyolo binary needs: its packages, LibTorch, the binary
#   scripts/setup.sh                       # everything: also the test oracles, the test-only packages, the tests
#   scripts/setup.sh -Dlibtorch=/opt/libtorch   # use an existing LibTorch tree, no pip torch
#
# Environment: LIBREYOLO_VENV (default ~/.local/share/libreyolo/venv, shared by every clone on
# the machine, CI's too), LIBREYOLO_BUILD (default <checkout>/build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${LIBREYOLO_VENV:-$HOME/.local/share/libreyolo/venv}
build=${LIBREYOLO_BUILD:-$root/build}
torch_version=2.11.0
torchvision_version=0.26.0  # the torchvision release built against torch 2.11
main_only=false
if [ "${1:-}" = "--main" ]; then main_only=true; shift; fi
meson_args=("$@")
log() { printf '[setup] %s\n' "$*" >&2; }

packages=(
  build-essential pkg-config git meson ninja-build ccache
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libfmt-dev catch2
  libgoogle-perftools-dev  # tcmalloc_minimal: the binaries' malloc (-Dtcmalloc; large tensors without page faults)
  libgloo-dev  # headers only: the declarations of c10d's Gloo backend (LibTorch holds the code)
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libturbojpeg0-dev libjpeg62-turbo-dev
  libtiff-dev libwebp-dev  # image sizes from TIFF and WebP headers, before a decode (data/image_io.cpp)
)
if ! $main_only; then
  packages+=(
    chromium  # test-time only: renders the profiler's timeline.html headless
    clang libclang-rt-14-dev  # test-time only: libFuzzer for the fuzz suite (test/fuzz/fuzz.sh)
  )
fi
have_python_venv() { command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; }
have_python_venv || packages+=(python3 python3-venv)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv holds the LibTorch we link (pip torch, CUDA 13.0 build) and the test-time oracles:
# the reference package libreyolo==1.6.0, ultralytics (P/R) and pycocotools. Installed in one resolve with torch
# and torchvision pinned, or pip would upgrade torch under our build to satisfy torchvision.
ultralytics_version=8.4.190  # test-time oracle for precision/recall (ap_per_class)
python_packages=("torch==$torch_version" "torchvision==$torchvision_version" "libreyolo==1.6.0" "ultralytics==$ultralytics_version" pycocotools numpy)
# (Also with -Dlibtorch=...: the parity tests need the oracles either way.) --main: torch alone.
if $main_only; then
  if ! "$venv/bin/python3" -c 'import sys, importlib.metadata as m; sys.exit(m.version("torch").split("+")[0] != sys.argv[1])' \
      "$torch_version" 2>/dev/null; then
    log "installing into $venv: torch==$torch_version (the CUDA 13.0 build, ~3 GB)"
    [ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
    "$venv/bin/python3" -m pip install -q --upgrade pip
    "$venv/bin/python3" -m pip install -q "torch==$torch_version"
  fi
else
  if ! "$venv/bin/python3" - "$torch_version" "$ultralytics_version" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as m
want = {"torch": sys.argv[1], "libreyolo": "1.6.0", "ultralytics": sys.argv[2]}
sys.exit(any(m.version(k).split("+")[0] != v for k, v in want.items()) or not m.version("pycocotools"))
PY
    log "installing into $venv: ${python_packages[*]} (torch is the CUDA 13.0 build, ~3 GB)"
    [ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
    "$venv/bin/python3" -m pip install -q --upgrade pip
    "$venv/bin/python3" -m pip install -q "${python_packages[@]}"
  fi
  # The original YOLOv5 (PyPI's yolov5 7.0.14), the oracle of its family: without its requirements,
  # which would move torch, plus the two modules its import chain needs that the venv lacks.
  if ! "$venv/bin/python3" -c 'import sys, importlib.metadata as m; sys.exit(m.version("yolov5") != "7.0.14")' 2>/dev/null; then
    log "installing into $venv: yolov5==7.0.14 (--no-deps), pandas, seaborn"
    "$venv/bin/python3" -m pip install -q pandas==3.1.1 seaborn==0.13.2
    "$venv/bin/python3" -m pip install -q --no-deps yolov5==7.0.14
  fi
fi

# ccache: release builds carry no debug paths and Meson passes sources relative to the build
# dir, so a clone in another folder hits the same cache entries. The PCH needs the sloppiness.
ccache --set-config=sloppiness=pch_defines,time_macros,include_file_mtime,include_file_ctime
ccache --set-config=max_size=8G
ccache --set-config=hash_dir=false

if [ ! -f "$build/build.ninja" ]; then
  log "configuring $build"
  meson setup "$build" "$root" "${meson_args[@]+"${meson_args[@]}"}" >/dev/null
elif ((${#meson_args[@]})); then
  meson configure "$build" "${meson_args[@]}" >/dev/null
fi
if $main_only; then
  log "building the libreyolo binary"
  ninja -C "$build" tools/libreyolo/libreyolo >&2
else
  log "building"
  ninja -C "$build" >&2
fi
log "ready: $build/tools/libreyolo/libreyolo"
