#!/usr/bin/env bash
# Copies into DIR the shared libraries llm-run links that the GPU machine's image lacks (the HTTP library `serve` uses
# and its compression libraries); scripts/device-libs.sh puts DIR on the library path there.
#   scripts/carry-libs.sh DIR      (used by build-carry.sh and pack-carry.sh)
set -euo pipefail
mkdir -p "$1"
for lib in libcpp-httplib.so.0.11 libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1; do
  src=$(ldconfig -p | awk -v l="$lib" '$1==l {print $NF; exit}')
  if [ -n "$src" ]; then cp -L "$src" "$1/"; else echo "warning: $lib not found here" >&2; fi
done
