#!/usr/bin/env bash
# The CPU instruction-set levels this machine runs, lowest first, one per line: the names of the
# test setups `meson test -C build --setup isa<level>` (test/meson.build). The last one is what
# the plain suite runs. Linux only (/proc/cpuinfo); elsewhere just "default".
set -euo pipefail
echo default
[ -r /proc/cpuinfo ] || exit 0
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
has avx2 fma || exit 0
echo avx2
has avx512f avx512bw avx512vl avx512dq || exit 0
echo avx512
has avx512_bf16 || exit 0
echo avx512bf16
has amx_tile amx_bf16 || exit 0
echo amx
