#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs llm-run with the given arguments.
#   scripts/run.sh -m models/x.gguf -p "Hello"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" >&2
exec "${BUILD_DIR:-$root/build}/app/llm-run" "$@"
