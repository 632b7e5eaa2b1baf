# Sourced by the GPU-machine scripts that run scripts/pack-carry.sh's archive: $out exists, the binaries are unpacked
# into /tmp/bin (once a machine), and the carried assets' environment and libraries are loaded.
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/bin
[ -x /tmp/bin/llm-run ] || tar xJf .device-bin/bins.tar.xz -C /tmp/bin
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"
# At exit, when $out holds more files than the device tool returns (8), everything but table.txt goes into one
# archive, out.tar.gz, so that a call's logs are never left out by count (session 77 lost a call's that way).
pack_out() {
  local n
  n=$(find "$out" -type f | wc -l)
  [ "$n" -gt 8 ] || return 0
  (cd "$out" && find . -mindepth 1 -maxdepth 1 ! -name table.txt ! -name out.tar.gz -print0 |
    tar czf out.tar.gz --null -T - && find . -mindepth 1 -maxdepth 1 ! -name table.txt ! -name out.tar.gz -exec rm -rf {} +)
}
trap pack_out EXIT
