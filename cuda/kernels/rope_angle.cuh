// The rotation of one RoPE pair, shared by the rope kernels (rope.cu), the q/k/v matvec epilogue (matvec_i16.cu) and
// the split attention's new token (attention_new_token.cuh) so all form bit-identical angles: pos * freq_scale *
// base^(-2i/n_rot) / factor in double (at positions in the thousands a float angle is off by more than the reference
// tolerance), with the powers base^(-2i/n_rot) computed on the host by rope_base_powers (glibc's pow, as the CPU
// reference).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// The cosine and sine of pair j's angle at position pos; power = base^(-2j/n_rot), factor = freq_factors[j] or 1.
__device__ __forceinline__ void rope_cos_sin(int32_t pos, float freq_scale, double power, const float* freq_factors,
                                             int64_t j, float& c, float& s) {
  double theta = double(pos) * double(freq_scale) * power;
  if (freq_factors) theta /= double(freq_factors[j]);
  double sd, cd;
  sincos(theta, &sd, &cd);
  c = float(cd), s = float(sd);
}

// (x0, x1) rotated by the angle whose cosine and sine are c and s.
__device__ __forceinline__ void rope_apply(float c, float s, float x0, float x1, float& y0, float& y1) {
  y0 = x0 * c - x1 * s;
  y1 = x0 * s + x1 * c;
}

// (x0, x1) rotated by the angle of pair j at position pos.
__device__ __forceinline__ void rope_rotate(int32_t pos, float freq_scale, double power, const float* freq_factors,
                                            int64_t j, float x0, float x1, float& y0, float& y1) {
  float c, s;
  rope_cos_sin(pos, freq_scale, power, freq_factors, j, c, s);
  rope_apply(c, s, x0, x1, y0, y1);
}

// The same with YaRN's ramp and the cos/sin factor (graph::RopeParams): theta_interp = pos * freq_scale * power /
// factor, theta_extrap = pos * power / factor, mixed by ext_factor * ramp(j) when ext_factor != 0, and both outputs
// scaled by attn_factor; the CPU reference's formula (graph/reference_ops.cpp), in double.
__device__ __forceinline__ void rope_rotate_scaled(int32_t pos, float freq_scale, double power, const float* freq_factors,
                                                   int64_t j, float ext_factor, float corr_low, float corr_high,
                                                   float attn_factor, float x0, float x1, float& y0, float& y1) {
  double theta = double(pos) * double(freq_scale) * power;
  if (freq_factors) theta /= double(freq_factors[j]);
  if (ext_factor != 0.0f) {
    double extrap = double(pos) * power;
    if (freq_factors) extrap /= double(freq_factors[j]);
    const double y = (double(j) - double(corr_low)) / fmax(0.001, double(corr_high) - double(corr_low));
    const double mix = (1.0 - fmin(fmax(y, 0.0), 1.0)) * double(ext_factor);
    theta = theta * (1.0 - mix) + extrap * mix;
  }
  double sd, cd;
  sincos(theta, &sd, &cd);
  const double c = cd * double(attn_factor), s = sd * double(attn_factor);
  y0 = float(double(x0) * c - double(x1) * s);
  y1 = float(double(x0) * s + double(x1) * c);
}

}  // namespace cuda
