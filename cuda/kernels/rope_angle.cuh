// The rotation of one RoPE pair, shared by the rope kernels (rope.cu) and the q/k/v matvec epilogue
// (matvec_i16.cu) so both form bit-identical angles: pos * freq_scale * base^(-2i/n_rot) / factor in double (at
// positions in the thousands a float angle is off by more than the reference tolerance), with the powers
// base^(-2i/n_rot) computed on the host by rope_base_powers (glibc's pow, as the CPU reference).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// (x0, x1) rotated by the angle of pair j at position pos; power = base^(-2j/n_rot), factor = freq_factors[j] or 1.
__device__ __forceinline__ void rope_rotate(int32_t pos, float freq_scale, double power, const float* freq_factors,
                                            int64_t j, float x0, float x1, float& y0, float& y1) {
  double theta = double(pos) * double(freq_scale) * power;
  if (freq_factors) theta /= double(freq_factors[j]);
  double sd, cd;
  sincos(theta, &sd, &cd);
  const float c = float(cd), s = float(sd);
  y0 = x0 * c - x1 * s;
  y1 = x0 * s + x1 * c;
}

}  // namespace cuda
