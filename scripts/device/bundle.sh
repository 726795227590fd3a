#!/bin/bash
# Packs what the GPU checks need into .device/ (git-ignored), for the device tool's `carry`:
# a build of the binary and the gpu-suite programs for the same LibTorch (torch 2.11.0+cu130, which
# the GPU machine's Python has), the shared libraries they need that such a machine lacks, the
# test datasets and the reference package's wheels. scripts/device/gpu-check.sh runs it there.
#
#   scripts/device/bundle.sh            # here, after scripts/setup.sh
#   device run: command="bash scripts/device/gpu-check.sh", carry=[".device"], timeout_s=560
#
# The build is build-device/, configured -Dimgcodecs=disabled: Debian's OpenCV imgcodecs pulls in
# some 130 libraries (GDAL, GDCM, Poppler, ...), 170 MB that would not fit the 64 MiB the device
# tool carries; without it the binary reads and writes JPEG only (coco8 and coco128 are JPEG).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=build-device
bundle=.device
datasets=${LIBREYOLO_DATASETS:-$root/../shared/datasets}
venv=${LIBREYOLO_VENV:-$HOME/.local/share/libreyolo/venv}
log() { printf 'bundle: %s\n' "$*" >&2; }

[ -f "$build/build.ninja" ] || meson setup "$build" -Dimgcodecs=disabled >/dev/null
grep -q 'LIBREYOLO_HAVE_CUDA 1' "$build/build_config.h" || { log "$build has no CUDA code (meson option cuda): nothing to check on a GPU"; exit 1; }

# The gpu suite as meson knows it; every file of the build folder it names gets built and carried.
meson introspect "$build" --tests >"$build/tests.json"
mapfile -t targets < <(python3 - "$root/$build" <<'PY'
import json, os, sys
build = sys.argv[1] + "/"
tests = [t for t in json.load(open(build + "tests.json")) if "gpu" in t["suite"] or "libreyolo:gpu" in t["suite"]]
names = {"tools/libreyolo/libreyolo"}
for test in tests:
    for value in test["cmd"] + list(test["env"].values()):
        for part in str(value).split(":"):
            part = os.path.normpath(part) if part.startswith("/") else part
            if part.startswith(build):
                names.add(part[len(build):])
print("\n".join(sorted(names)))
PY
)
log "building ${targets[*]}"
ninja -C "$build" "${targets[@]}" >/dev/null

rm -rf "$bundle"
mkdir -p "$bundle/build" "$bundle/lib" "$bundle/datasets" "$bundle/wheels"
for target in "${targets[@]}"; do
  mkdir -p "$bundle/build/$(dirname "$target")"
  cp "$build/$target" "$bundle/build/$target"
done
cp "$build/tests.json" "$bundle/tests.json"
printf '{"source_root": "%s", "build_root": "%s", "venv_python": "%s"}\n' "$root" "$root/$build" "$venv/bin/python3" >"$bundle/paths.json"

# Shared libraries: everything the programs load except glibc, the compiler's runtime, zlib (on
# every machine), and LibTorch with its CUDA libraries (the GPU machine's torch has them).
base='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libutil|libresolv|libstdc\+\+|libgcc_s|libz)\.so'
for target in "${targets[@]}"; do
  if [ -x "$build/$target" ]; then ldd "$build/$target"; fi
done | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  [[ $name =~ $base ]] && continue
  [[ $path == */torch/lib/* || $path == */nvidia/* ]] && continue
  cp -L "$path" "$bundle/lib/$name"
done

for name in coco8 coco128; do
  if [ -d "$datasets/$name" ]; then
    cp -r "$datasets/$name" "$bundle/datasets/"
  else
    log "no $datasets/$name: the tests that need it will skip there"
  fi
done

# The reference (libreyolo 1.6.0) and what it needs that the GPU machine's Python 3.12 lacks.
if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
     -d "$bundle/wheels" libreyolo==1.6.0 mss pycocotools >/dev/null 2>&1; then
  log "pip could not fetch the reference's wheels: the LibreYOLO comparison will be skipped there"
fi

# Proof that nothing else is needed: with only the bundle and torch's folders, every library
# outside the base set resolves into them.
torch_lib=$("$venv/bin/python3" -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib
for target in "${targets[@]}"; do
  [ -x "$bundle/build/$target" ] || continue
  LD_LIBRARY_PATH="$root/$bundle/lib:$torch_lib" ldd "$bundle/build/$target" | awk '/=>/ {print $1, $3}' | while read -r name path; do
    [[ $name =~ $base ]] && continue
    case $path in
      "$root/$bundle/lib/"* | */torch/lib/* | */nvidia/*) ;;
      *) log "$target needs $name from $path, which the bundle lacks"; exit 1 ;;
    esac
  done
done

size=$(du -sb "$bundle" | cut -f1)
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
total=$((size + tracked))
log "$bundle: $((size / 1048576)) MiB ($(ls "$bundle/lib" | wc -l) libraries, $(ls "$bundle/wheels" | wc -l) wheels); with the tracked tree $((total / 1048576)) MiB of the 64 the device tool carries"
((total < 62 * 1048576)) || { log "too large for the device tool"; exit 1; }
