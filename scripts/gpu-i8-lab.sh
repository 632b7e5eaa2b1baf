#!/usr/bin/env bash
# The small-batch kernels' lab switches alone (seconds): KernelLab.BatchMm at the 8B's gate|up, v and down shapes
# (SHAPES) and 2..4 tokens (TOKENS, up to 64), once per switch setting, every kernel's column (us and GB/s of W: the
# i8 kernel's at 2..8 tokens, the wide and wgmma kernels' above; LLM_CUDA_WIDE_* settings for the wide one). Settings: SETTINGS, space-separated, each comma-separated LLM_CUDA_* assignments or `-` for the
# defaults (default: the defaults, and Q6_Kx8 off the kernel). Table last ($OUT/table.txt).
#   here:  scripts/pack-carry.sh
#   there: scripts/gpu-i8-lab.sh   (carry .device-bin; .device for its environment)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-bins.sh"  # $out, /tmp/bin, the environment
shapes=${SHAPES:-4096x28672,4096x1024,14336x4096}
for setting in ${SETTINGS:-- LLM_CUDA_I8_Q6X8=0}; do
  envs=()
  [ "$setting" = - ] || IFS=, read -ra envs <<<"$setting"
  log="$out/lab-${setting//[^A-Za-z0-9_]/_}.log"
  timeout 240 env LLM_CUDA_BENCH=1 LLM_LAB_TOKENS="${TOKENS:-2,3,4}" LLM_LAB_BATCH_SHAPES="$shapes" "${envs[@]}" \
    /tmp/bin/cuda_kernels_test --gtest_color=no --gtest_filter=KernelLab.BatchMm >"$log" 2>&1
  rc=$?
  {
    echo "== $setting (rc $rc)"
    grep -E '^(device|small batch|type|Q4_K|Q6_Kx8) ' "$log" || echo "  no lab table: $log"
  } | tee -a "$out/table.txt"
done
