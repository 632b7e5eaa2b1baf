# Sourced by the GPU-machine scripts after .device/env.sh: puts the libraries carried beside the binaries (the HTTP
# library llm-run links for `serve`, which the GPU machine's image lacks; scripts/build-carry.sh and
# scripts/pack-carry.sh copy them) on the library path.
for d in "$PWD/build-carry/lib" "$PWD/build-perf-carry/lib" /tmp/bin/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
true
