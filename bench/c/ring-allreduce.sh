#!/bin/bash
# Builds bench/c/ring_allreduce.c (Muster's all-reduce design in C) outside the repository and runs
# it: `bench/c/ring-allreduce.sh N SIZE...`, one JSON line per size, a CANDIDATE for
# ../shared/bench/run-anchors.sh beside `muster bench allreduce`.
set -euo pipefail
source="$(cd "$(dirname "$0")" && pwd)/ring_allreduce.c"
binary="${XDG_CACHE_HOME:-$HOME/.cache}/muster/ring-allreduce-c"
mkdir -p "$(dirname "$binary")"
if [[ ! -x "$binary" || "$source" -nt "$binary" ]]; then
  cc -O3 -march=native -Wall -o "$binary" "$source"
fi
exec "$binary" "$@"
