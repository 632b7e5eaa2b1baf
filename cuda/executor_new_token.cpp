// The attention launches that form their decode tokens themselves (AttentionNewToken, attention_new_token.cuh):
// which attention steps take that form, and with which parameters. One unpaged token with per-head q/k norms (Qwen 3,
// Gemma 3: fold_qk_norms' launch goes), and paged decode steps whose tokens are each of its own sequence (their
// graph variant: the rope + KV launch goes). Lowered by push_attention (executor.cpp).
#include "cuda/executor.h"
#include "cuda/kernels/attention_split_tc.cuh"
#include "cuda/kernels/rope.cuh"

namespace cuda {

using graph::Node;
using graph::NodeId;

// fold_qk_norms' attention at a one-token decode step, whose split attention launch can form the token itself
// (AttentionNewToken, attention_new_token.cuh: each block normalises and rotates its group's q heads, the block
// holding the token's slot also k, and writes k and v): the rope_kv launch f would have run before it does not.
// `at` takes the raw q (f's, rotated in place otherwise) and the new token's parameters; false leaves it as it was.
bool Executor::attend_new_token(AttentionKernelParams& at, const RopeKvParams& f, const Node& rope_q) {
  if (!opt_.new_token_attention || at.T != 1 || at.paging.block_table || !f.q_norm_w) return false;
  return take_new_token(at, f, rope_q, opt_.new_token_pdl);
}

// `at` with the new-token form of f (the raw q, f's k, v, norms and rope) where the form applies (an f16 cache,
// head_dim = hd_v, the plain rope over at most the head) and the tensor-core split kernel takes it (alignment, group
// size, splits); false leaves it as it was.
bool Executor::take_new_token(AttentionKernelParams& at, const RopeKvParams& f, const Node& rope_q, bool programmatic) {
  if (!::std::get<graph::RopeParams>(rope_q.params).plain() || at.kv_type != graph::KvType::F16 ||
      at.hd != at.hd_v || f.rope.head_dim != at.hd || f.rope.n_rot > at.hd)
    return false;
  AttentionKernelParams t = at;
  t.q = f.rope.x;
  t.new_token = AttentionNewToken{f.k,
                                  f.v,
                                  f.q_norm_w,
                                  f.k_norm_w,
                                  rope_powers(f.rope.freq_base, f.rope.n_rot),
                                  f.rope.freq_factors,
                                  f.rope.freq_scale,
                                  f.norm_eps,
                                  f.rope.n_rot,
                                  f.rope.mode,
                                  programmatic};
  if (!attention_split_tc_applies(t)) return false;
  at = t;
  count_fusion(Fusion::NewTokenAttention);
  return true;
}

// A paged step's attention whose launch can form its tokens' q, k and v itself (AttentionNewToken: the q/k norms
// where the model has them, f's rope): in the graph variant of steps whose tokens are each of its own sequence
// (has_alone_), where no block reads a slot another block writes, the rope_kv launch f goes. Graphs of fewer than
// kPrefillMinTokens tokens (no prefill launch), and larger ones from batch_new_tokens_wide_min (32): in 16-token
// graphs, leaving the rope_kv and the (empty) prefill launches out made the step 4% slower on an H100 (its
// products, not the attention, took longer: not understood), while 32- and 64-token steps gain ~1.5-1.9%
// (docs/kernel-notes.md, sessions 71 and 73). `at` takes the raw q; false leaves it as it was.
bool Executor::attend_new_tokens(AttentionKernelParams& at, const RopeKvParams& f, const Node& att) {
  if (!opt_.batch_new_tokens || !at.paging.block_table || !raw_heads_intact(att, f)) return false;
  AttentionKernelParams t = at;
  if (at.tiles) {  // a tile is kPrefillMinTokens tokens of one sequence: a step of one token a sequence has none
    if (opt_.batch_new_tokens_wide_min <= 0 || at.T < opt_.batch_new_tokens_wide_min) return false;
    t.tiles = t.tiled = nullptr, t.max_tiles = 0, t.tiles_after_split = false;
  }
  if (!take_new_token(t, f, g_.node(att.inputs[0]), false)) return false;
  at = t;
  return true;
}

// Whether the fused variant may read the raw q, k and v where the plan put them: the plan frees the raw q and k
// after their ropes (or folded norms), which that variant does not run, so no tensor written from those steps up to
// the attention's may share their bytes, and the attention's output may share none of the three's, except as the
// raw q itself, element for element (an output slot of the same size placed where the freed q was, the likely
// best fit): each block reads its token's q heads before it, or the last of its splits, writes their outputs. A
// layer whose output overlapped the raw q any other way read other tokens' outputs as q (session 72: three of
// five tokens of a test layer off by up to 0.5).
bool Executor::raw_heads_intact(const Node& att, const RopeKvParams& f) const {
  const Node& rq = g_.node(att.inputs[0]);
  const Node& rk = g_.node(att.inputs[1]);
  // The raw heads: the ropes' inputs, or with folded q/k norms the norms' inputs.
  const auto raw = [&](const Node& rope) {
    const Node* norm = folded_qk_norm(rope);
    return norm ? norm->inputs[0] : rope.inputs[0];
  };
  const NodeId q_src = plan_.root.at(size_t(raw(rq))), k_src = plan_.root.at(size_t(raw(rk)));
  const NodeId v_src = plan_.root.at(size_t(att.inputs[2]));
  if (!plan_.owns(att.id) || !plan_.owns(q_src) || !plan_.owns(k_src) || !plan_.owns(v_src)) return false;
  if (!raw_heads_kept(att, q_src, k_src)) return false;
  const bool q_in_place = f.rope.x == f32_out(att) && plan_.bytes.at(size_t(att.id)) == plan_.bytes.at(size_t(q_src));
  return (!slots_overlap(att.id, q_src) || q_in_place) && !slots_overlap(att.id, k_src) &&
         !slots_overlap(att.id, v_src);
}

// The q split of a new-token attention launch in the short graph (AttentionNewToken::q_split_shift): 2^shift blocks
// a KV head, up to opt_.new_token_q_split, each with two q heads at least. Below kShortSlots positions a token has
// one split (kSerialTiles tiles of 64 slots), so a launch is n_head_kv blocks that each form and rotate their G q
// heads in turn; beyond, the splits fill the GPU and every further block of a KV head reads its tiles again.
// Measured (H200, session 46): Qwen3-30B-A3B (G = 8) tg128 524.8 -> 541.6 / 547.3 with 2 / 4 blocks a KV head, at
// depth 4096 423.6 -> 413.6 / 341.6 (hence the short graph only); Gemma-3-4B (G = 2, head_dim 256) 648.7 -> 636.0
// with one q head a block (hence two at least).
int32_t Executor::new_token_q_split_shift(const AttentionKernelParams& at) const {
  const int64_t G = at.n_head_kv > 0 ? at.n_head / at.n_head_kv : 1;
  int32_t shift = 0;
  while (shift < 2 && (int64_t(2) << shift) <= opt_.new_token_q_split && G % (int64_t(4) << shift) == 0) ++shift;
  return shift;
}

}  // namespace cuda
