// RoPE scaling (see rope_scaling.h). The float arithmetic follows llama.cpp's order (context setup in
// llama-context.cpp, the corr dims and the YaRN magnitude in ggml's rope), so the parameters are the same floats.
#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace model {

const char* rope_scaling_name(RopeScalingKind k) {
  switch (k) {
    case RopeScalingKind::None: return "none";
    case RopeScalingKind::Linear: return "linear";
    case RopeScalingKind::Yarn: return "yarn";
    case RopeScalingKind::LongRope: return "longrope";
  }
  return "?";
}

bool parse_rope_scaling_kind(const std::string& s, RopeScalingKind& out) {
  for (RopeScalingKind k : {RopeScalingKind::None, RopeScalingKind::Linear, RopeScalingKind::Yarn,
                            RopeScalingKind::LongRope})
    if (s == rope_scaling_name(k)) {
      out = k;
      return true;
    }
  return false;
}

float RopeScaling::freq_scale() const { return kind == RopeScalingKind::None ? 1.0f : 1.0f / factor; }

bool RopeScaling::use_long_factors(int32_t n_ctx) const {
  constexpr int64_t kPad = 256;  // llama.cpp pads every context to a multiple of 256 before choosing
  const int64_t padded = (int64_t{n_ctx} + kPad - 1) / kPad * kPad;
  return padded > n_ctx_orig;
}

namespace {

// The pair index at which a pair turns `turns` times over n_ctx_orig positions (YaRN's correction dim).
float corr_dim(int32_t n_rot, int32_t n_ctx_orig, float turns, float base) {
  const float turns_per_pos = turns * 2.0f * std::numbers::pi_v<float>;
  return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / turns_per_pos) / (2.0f * std::log(base));
}

// YaRN's attention temperature for a context extension `scale`: 1 + 0.1 ln(scale), 1 when not extending.
float yarn_mscale(float scale) { return scale <= 1.0f ? 1.0f : 0.1f * std::log(scale) + 1.0f; }

}  // namespace

graph::RopeParams RopeScaling::params(graph::RopeMode mode, int32_t n_rot, float freq_base,
                                      float layer_freq_scale) const {
  graph::RopeParams p;
  p.mode = mode;
  p.n_rot = n_rot;
  p.freq_base = freq_base;
  p.freq_scale = layer_freq_scale;
  float magnitude = attn_factor;
  if (kind == RopeScalingKind::Yarn) {
    p.ext_factor = 1.0f;
    p.corr_low = std::max(0.0f, std::floor(corr_dim(n_rot, n_ctx_orig, yarn_beta_fast, freq_base)));
    p.corr_high =
        std::min(static_cast<float>(n_rot - 1), std::ceil(corr_dim(n_rot, n_ctx_orig, yarn_beta_slow, freq_base)));
    // llama.cpp sets the context's factor to mscale(s) / (1 + 0.1 ln s) for the file's factor s, and ggml multiplies
    // by 1 + 0.1 ln(1 / layer scale) again: for a scaled layer the net factor is mscale(s) times attn_factor.
    const float s = 1.0f / freq_scale();
    magnitude = yarn_mscale(s) * (1.0f / (1.0f + 0.1f * std::log(s))) * attn_factor;
    magnitude *= 1.0f + 0.1f * std::log(1.0f / layer_freq_scale);
  }
  p.attn_factor = magnitude;
  return p;
}

}  // namespace model
