#!/usr/bin/env bash
# Installs the Debian packages llm-run builds against, when they are missing. Safe to run repeatedly.
# The CUDA Toolkit (13.x at /usr/local/cuda) is not installed here; without it the build is CPU-only.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libsentencepiece-dev libcli11-dev libgtest-dev libgmock-dev libpcre2-dev libcpp-httplib-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
