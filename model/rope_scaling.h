// RoPE scaling, one module for every architecture: the kind a file asks for (none, linear, YaRN, LongRoPE) read as
// llama.cpp reads it, and the graph::RopeParams of one layer derived from it. The graph op (graph/ir.h RopeParams)
// knows nothing of kinds: it gets a position scale, YaRN's ramp and a cos/sin factor, all computed here.
#pragma once
#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace model {

enum class RopeScalingKind : uint8_t {
  None,      // positions as they are (llama.cpp ignores any factor)
  Linear,    // positions times 1/factor (also the kind of a file that names none: llama.cpp's default)
  Yarn,      // linear interpolation for low-frequency pairs, none for high-frequency ones, a ramp between
  LongRope,  // per-pair frequency divisors (rope_factors_long / _short tensors) and an attention factor; the
             // positions are scaled as for Linear (phi3's converter writes no kind: Linear with factor 1)
};
const char* rope_scaling_name(RopeScalingKind k);  // "none", "linear", "yarn", "longrope" (the GGUF strings)

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::Linear;
  float factor = 1.0f;          // context extension (rope.scaling.factor); 1 = none
  int32_t n_ctx_orig = 0;       // rope.scaling.original_context_length, else the training context
  float attn_factor = 1.0f;     // rope.scaling.attn_factor: multiplies cos and sin (LongRoPE's sqrt(1 + ln s / ln L))
  // YaRN's correction range: pairs that turn fewer than beta_slow times over n_ctx_orig are interpolated, those
  // that turn more than beta_fast times are not. llama.cpp's defaults; no supported architecture reads their keys.
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;

  // Position scale of the layers the scaling applies to: 1 / factor, or 1 for None.
  float freq_scale() const;
  // llama.cpp's choice between the LongRoPE factor tensors: the long ones when the context, rounded up to a multiple
  // of 256 as llama.cpp pads it (n_ctx_seq), exceeds n_ctx_orig. So a phi3 file with a 4096-token original context
  // uses the short factors up to -c 4096 and the long ones from -c 4097 on, for every position.
  bool use_long_factors(int32_t n_ctx) const;

  // The rotation of a layer with this base and position scale (freq_scale() for layers the file's scaling
  // applies to; a gemma3 sliding-window layer passes its own base and 1). YaRN's ramp (corr dims from n_rot,
  // n_ctx_orig and this base) and magnitude correction enter here, with the attention factor.
  graph::RopeParams params(graph::RopeMode mode, int32_t n_rot, float freq_base, float layer_freq_scale) const;
};

// rope.scaling.type as stored (absent: "linear", as llama.cpp defaults); false for a name llama.cpp does not know.
bool parse_rope_scaling_kind(const std::string& s, RopeScalingKind& out);

}  // namespace model
