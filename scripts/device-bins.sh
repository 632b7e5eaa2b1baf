# Sourced by the GPU-machine scripts that run scripts/pack-carry.sh's archive: $out exists, the binaries are unpacked
# into /tmp/bin (once a machine), and the carried assets' environment and libraries are loaded.
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
[ -x /tmp/bin/llm-run ] || tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
