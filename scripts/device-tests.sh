# Sourced by the GPU-machine A/B scripts (gpu-switch-ab.sh, gpu-variants-ab.sh): `gpu_tests [VAR=VALUE...]` runs the
# carried test binaries' KERNEL_TESTS and SESSION_TESTS filters (each skipped when unset) with those variables set,
# logs to $out/kernels.log and $out/session.log, and appends each one's result line to the caller's `table` array.
gpu_tests() {
  local bin log filter
  for bin in cuda_kernels_test cuda_session_test; do
    filter=${SESSION_TESTS:-} log=session
    [ "$bin" = cuda_kernels_test ] && filter=${KERNEL_TESTS:-} log=kernels
    [ -n "$filter" ] || continue
    timeout 240 env "$@" "/tmp/bin/$bin" --gtest_color=no --gtest_filter="$filter" >"$out/$log.log" 2>&1
    table+=("${log%s} tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \]' "$out/$log.log" | tr '\n' ' ')")
  done
}
