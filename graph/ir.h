// The compute-graph IR: nodes with an op, inputs, a 4-d shape, a dtype, typed parameters and a model-given name.
// Graphs are built per batch size by model/ and run unchanged by the CPU reference (graph/reference.h) and by cuda/.
// Shapes follow GGUF order: ne[0] is the innermost, contiguous dimension; activations are [n_embd, n_tokens].
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "quant/types.h"

namespace graph {

using NodeId = int32_t;
inline constexpr NodeId kNoNode = -1;

enum class DType : uint8_t { F32, F16, I32 };
const char* dtype_name(DType t);
size_t dtype_size(DType t);

struct Shape {
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  bool operator==(const Shape&) const = default;
};
std::string to_string(const Shape& s);

enum class Op : uint8_t {
  Input,      // per-run host data (InputParams::Kind): I32, token ids and positions [n_tokens], ...
  Weight,     // a tensor of the weight arena, any quant type; shape as in the file
  GetRows,    // inputs {weight [n_embd, n_vocab], ids I32 [T]} -> F32 [n_embd, T], rows dequantized
  RmsNorm,    // inputs {x, weight [ne0] (optional)}: each row of ne[0] elements normalised, times weight
  MulMat,     // inputs {weight [K, N], x [K, T], bias [N] (optional)} -> [N, T]: out = W^T-style row dots
  Add,        // inputs {a, b} same element count -> a + b
  Mul,        // inputs {a, b}; b may be one row [ne0] broadcast over the rows of a
  Silu,       // inputs {a}
  SwiGlu,     // inputs {gate, up} -> silu(gate) * up
  GeGlu,      // inputs {gate, up} -> gelu_tanh(gate) * up (Gemma's feed-forward), exact tanh-approximated GELU
  Scale,      // inputs {a} -> a * ScaleParams::scale (Gemma's sqrt(n_embd) on the input embeddings)
  Softcap,    // inputs {a} -> cap * tanh(a / cap), SoftcapParams::cap (final-logit softcapping)
  Slice,      // inputs {a [ne0, ...]} -> [n, ...]: elements [offset, offset + n) of every row of a (the q, k, v parts
              //   of a fused qkv product; gate and up of a fused gate+up product). A strided view of a; the CPU
              //   reference copies it
  Rope,       // inputs {x [head_dim, n_head, T], positions I32 [T], freq_factors [n_rot/2] (optional)}
  Attention,  // inputs {q [hd, n_head, T], k [hd, n_head_kv, T], v [hd_v, n_head_kv, T], positions I32 [T]}
              //   -> [hd_v * n_head, T]; writes k, v into the layer's KV cache at each position, then attends
              //   causally over positions [0, positions[t]] of the token's sequence, or only the last `window` of
              //   them (AttentionParams::window) (GQA: head h reads kv head h / group). One sequence (g.kv not
              //   paged): position p is cache slot p. Paged (g.kv.paged()): two more inputs {kv_seq I32 [T],
              //   block_table I32 [max_blocks, n_seq]}; token t belongs to block-table row r = kv_seq[t] and its
              //   position p lives in slot block_table[r][p / block_size] * block_size + p % block_size; a token
              //   at position -1 is padding: it writes nothing and its output is zero. Inputs after these are
              //   parameters' (AttentionParams::sinks: the sinks tensor is the last input)
  Softmax,    // inputs {a}: over each row of ne[0]
  Reshape,    // inputs {a}: a view with a new shape of the same element count (no data moves)
  LastToken,  // inputs {a [ne0, T]} -> [ne0, 1]: the last column (logits for generation)
  Gather,     // inputs {a [ne0, T], rows I32 [n]} -> [ne0, n]: columns rows[i] of a (the tokens of a ragged batch
              //   whose logits are wanted); every row must lie in [0, T)
  Argmax,     // inputs {a [ne0, T]} -> I32 [T]: index of the largest value per row, lower index on ties
  // ---- mixture of experts (model/layers.h moe_ffn); expert ids stay graph data, so an executor can read them where
  // it computes (a GPU decodes without a host round trip and reads only the chosen experts' weights) ----
  TopK,       // inputs {a [n, T]} -> I32 [k, T]: the indices of the k largest values of each row, largest first;
              //   equal values in index order (the order llama.cpp's CPU argsort gives them up to 16 experts)
  MoeWeights, // inputs {scores [n_expert, T], ids I32 [k, T]} -> [k, T]: scores[ids[j, t], t], then optionally a
              //   softmax over those k (gpt-oss) and/or a division by their sum (Qwen3-MoE), MoeWeightsParams
  MulMatId,   // inputs {w [K, N, n_expert], x [K, X, T], ids I32 [k, T], bias [N, n_expert] (optional)} ->
              //   [N, k, T]: out[:, j, t] = w[ids[j, t]] x[:, X == 1 ? 0 : j, t] (+ bias[:, ids[j, t]]); X is 1 (the
              //   token's input, shared by its k experts) or k (one input per chosen expert). ggml's mul_mat_id
  SwiGluOai,  // inputs {gate, up} -> g' sigmoid(alpha g') (u' + 1), g' = min(gate, limit), u' = clamp(up, +-limit)
              //   (gpt-oss's clamped SwiGLU), SwiGluOaiParams
  WeightedSum,  // inputs {a [ne0, k, T], w [k, T]} -> [ne0, T]: sum over j of w[j, t] a[:, j, t] (the chosen experts'
                //   outputs mixed by their routing weights)
};
const char* op_name(Op op);

// ---- typed parameters, one struct per op that needs any ----
struct InputParams {
  // Tokens, Positions: [n_tokens]. Paged graphs also have KvSeq [n_tokens] (each token's block-table row),
  // BlockTable [max_blocks, n_seq] and OutputRows [n_outputs] (the tokens whose logits are computed).
  enum class Kind : uint8_t { Tokens, Positions, KvSeq, BlockTable, OutputRows } kind = Kind::Tokens;
};
const char* input_kind_name(InputParams::Kind k);  // "tokens", "positions", "kv_seq", "block_table", "output_rows"

// The per-run data of a graph's Input nodes, by kind. A graph without an input of some kind ignores that span.
struct RunInputs {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t> kv_seq;
  std::span<const int32_t> block_table;
  std::span<const int32_t> output_rows;
  std::span<const int32_t> of(InputParams::Kind k) const;
};
// What a weight is for in the model. Executors choose layouts and fusions by role (the matrix that reads the
// attention output, the output projection, ...), never by the tensor's name in the file.
enum class WeightRole : uint8_t {
  Other,
  TokenEmbedding,  // [n_embd, n_vocab], read by GetRows (and as the output matrix when tied)
  AttnNorm, AttnQ, AttnK, AttnV, AttnQBias, AttnKBias, AttnVBias,
  AttnQNorm, AttnKNorm,          // per-head RMSNorm of q and k (qwen3, gemma3)
  AttnQkv, AttnQkvBias,          // fused q|k|v projection [n_embd, n_q + n_k + n_v] (phi3): rows q, then k, then v
  AttnOutput, AttnOutputBias,    // the o projection: reads the attention output
  AttnPostNorm,                  // RMSNorm of the attention output before the residual add (gemma3)
  FfnNorm, FfnGate, FfnUp, FfnDown,
  FfnGateUp,                     // fused gate|up [n_embd, 2 n_ff] (phi3's ffn_up): rows 0..n_ff gate, then up
  FfnPostNorm,                   // RMSNorm of the feed-forward output before the residual add (gemma3)
  OutputNorm, Output,            // the final norm and the output projection (logits)
  RopeFreqs,                     // long-context frequency factors (llama 3.1+)
  RopeFactorsLong, RopeFactorsShort,  // LongRoPE frequency factors (phi3): one of the two is used, by context size
  AttnSinks,                     // per-head attention-sink logits [n_head] (gpt-oss)
  FfnRouter, FfnRouterBias,      // MoE router [n_embd, n_expert] (ffn_gate_inp) and its bias [n_expert] (gpt-oss)
  FfnGateExps, FfnUpExps,        // the experts' gate and up matrices, 3-D [n_embd, n_ff_exp, n_expert]
  FfnDownExps,                   // the experts' down matrices [n_ff_exp, n_embd, n_expert]
  FfnGateExpsBias, FfnUpExpsBias,  // per-expert biases [n_ff_exp, n_expert] (gpt-oss)
  FfnDownExpsBias,               // [n_embd, n_expert] (gpt-oss)
  kCount
};
const char* weight_role_name(WeightRole role);

struct WeightParams {
  std::string tensor;           // the tensor's name in the model file ("blk.0.attn_q.weight"), for messages and dumps
  WeightRole role = WeightRole::Other;
  int32_t layer = -1;           // the block it belongs to; -1 for model-wide weights
  quant::Type type = quant::Type::F32;
  const void* host = nullptr;   // the tensor's bytes in the mapped file (CPU reference reads these)
  uint64_t arena_offset = 0;    // byte offset of the tensor in the weight arena (device copy)
  uint64_t nbytes = 0;
  // A row range of a file tensor (model::Layers::weight_rows: phi3's fused q|k|v and gate|up): the bytes from the
  // file tensor's start to this range's; host and arena_offset already point at the range. Layouts an executor
  // chose at upload for the whole tensor are found through arena_offset - tensor_offset.
  uint64_t tensor_offset = 0;
};
struct RmsNormParams {
  float eps = 1e-5f;
};
struct ScaleParams {
  float scale = 1.0f;
};
struct SoftcapParams {
  float cap = 1.0f;             // > 0
};
struct SliceParams {
  int64_t offset = 0;           // first element of each row taken
  int64_t n = 0;                // elements taken per row (the output's ne[0])
};
enum class RopeMode : uint8_t { Normal, Neox };  // Normal rotates (x[2i], x[2i+1]); Neox rotates (x[i], x[i+n_rot/2])
// The angle of pair i (i < n_rot/2) at position p: theta_extrap = p * freq_base^(-2i/n_rot) / factor_i (factor_i from
// the optional freq_factors input, else 1) and theta_interp = freq_scale * theta_extrap. Without YaRN
// (ext_factor 0) theta = theta_interp; with it, theta = theta_interp * (1 - m) + theta_extrap * m where
// m = ext_factor * ramp(i), ramp(i) = 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1).
// The pair is rotated by theta and both outputs multiplied by attn_factor.
struct RopeParams {
  RopeMode mode = RopeMode::Normal;
  int32_t n_rot = 0;            // rotated dimensions per head (== head_dim for the supported models)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;      // linear position scaling: theta uses pos * freq_scale
  float ext_factor = 0.0f;      // YaRN: how much of the unscaled angle the low pairs keep (0: no YaRN, 1: all)
  float corr_low = 0.0f;        // YaRN: pairs below this keep the unscaled angle, above corr_high the scaled one
  float corr_high = 0.0f;
  float attn_factor = 1.0f;     // multiplies cos and sin: LongRoPE's attention factor, YaRN's magnitude correction

  // The plain rotation every executor implements: no YaRN mix, no magnitude factor.
  bool plain() const { return ext_factor == 0.0f && attn_factor == 1.0f; }
};
struct AttentionParams {
  int32_t layer = 0;            // which layer's KV cache
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;         // q/k head size
  int32_t head_dim_v = 0;       // v head size
  float scale = 1.0f;           // usually 1/sqrt(head_dim)
  int32_t window = 0;           // sliding window (llama.cpp's standard SWA): the query at position p sees the keys at
                                // positions p - window < pk <= p; 0: every key at pk <= p
  // Attention sinks (gpt-oss): the node's last input is an F32 [n_head] of per-head logits s_h that join each
  // softmax's denominator unscaled (softmax over [scores, s_h], the sink's column then dropped). Always found as
  // inputs.back(), never by index: the inputs before it depend on the KV-cache layout.
  bool sinks = false;
};
struct TopKParams {
  int32_t k = 1;
};
struct MoeWeightsParams {
  bool softmax = false;         // softmax over the k gathered scores (gpt-oss: top-k by raw logit, then weights)
  bool normalize = false;       // divide by their sum, clamped below at 6.103515625e-5 (the smallest normal f16),
                                // as llama.cpp guards it (Qwen3-MoE: the top-k of a softmax, renormalised)
};
struct SwiGluOaiParams {
  float alpha = 1.702f;         // the sigmoid's slope
  float limit = 7.0f;           // gate clamped above, up clamped on both sides
};

using Params = std::variant<std::monostate, InputParams, WeightParams, RmsNormParams, RopeParams, AttentionParams,
                            ScaleParams, SoftcapParams, SliceParams, TopKParams, MoeWeightsParams,
                            SwiGluOaiParams>;

struct Node {
  NodeId id = kNoNode;
  Op op = Op::Input;
  std::vector<NodeId> inputs;
  Shape shape;
  DType dtype = DType::F32;
  std::string name;             // "blk.3.attn_norm", "tokens", "result_output"
  Params params;
};

// How the KV cache stores its values. F16: binary16. Q8_0: blocks of 32 values along the head dimension, each
// int8 quants q and one binary16 scale d (value = q d), GGUF's Q8_0 rounding: d = max|x| / 127, q = round(x / d)
// (half away from zero, computed as x * (1 / d)). Half the bytes of F16 for long contexts; head dims must be
// multiples of 32. Q4_0: the same blocks as GGUF's Q4_0 (quant::quantize_row): 4-bit q in 0..15, value =
// (q - 8) d with d = m / -8, m the value of largest magnitude; a quarter of F16's bytes plus the scales (18 bytes
// per 32 values), at a larger rounding error.
enum class KvType : uint8_t { F16, Q8_0, Q4_0 };
const char* kv_type_name(KvType t);                    // "f16", "q8_0", "q4_0"
bool parse_kv_type(std::string_view s, KvType& out);   // the names above; false for anything else
// Whether the cache stores GGUF blocks (q8_0, q4_0), and which: quant::Type::Q8_0 / Q4_0 (F16 for an f16 cache).
inline bool kv_quantized(KvType t) { return t != KvType::F16; }
quant::Type kv_block_type(KvType t);
// Values per block along the head dimension (1 for f16; q8_0 and q4_0 store whole GGUF blocks of 32, one scale
// each), and whether heads of these dims are whole blocks: the one check behind every layer's refusal of a
// quantized cache.
int64_t kv_block_values(KvType t);
bool kv_head_dims_fit(KvType t, int64_t head_dim_k, int64_t head_dim_v);

// The KV cache a graph's Attention nodes use; executors allocate it from this description.
struct KvCacheSpec {
  int32_t n_layer = 0;
  int32_t n_ctx = 0;            // slots per layer (paged: the whole pool, n_blocks * block_size)
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  KvType type = KvType::F16;    // of K and V alike
  // Paged caches (block_size > 0): the slots form n_ctx / block_size blocks that sequences hold through block
  // tables of max_blocks entries, one row per sequence of the batch (n_seq rows). block_size 0: one sequence whose
  // position p is slot p.
  int32_t block_size = 0;       // a power of two when paged
  int32_t max_blocks = 0;       // entries per block-table row: a sequence holds at most max_blocks * block_size tokens
  int32_t n_seq = 0;            // block-table rows
  bool paged() const { return block_size > 0; }
  int32_t n_blocks() const { return paged() ? n_ctx / block_size : 0; }
  // Positions a sequence may use: max_blocks * block_size when paged, else n_ctx.
  int32_t seq_capacity() const { return paged() ? max_blocks * block_size : n_ctx; }
};
// Paged attention's extra inputs (Graph::attention).
struct PagedKv {
  NodeId kv_seq = kNoNode;       // I32 [T]
  NodeId block_table = kNoNode;  // I32 [max_blocks, n_seq]
};

// Nodes are appended in topological order (every input exists before its user); ids are indices into nodes().
class Graph {
 public:
  int32_t n_tokens = 1;         // batch size the graph was built for
  KvCacheSpec kv;

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
  const std::vector<NodeId>& outputs() const { return outputs_; }
  void mark_output(NodeId id);

  // Builders. Each validates input shapes and throws std::invalid_argument naming the node on a mismatch.
  // I32 [n] (a block table: [n = max_blocks, rows = n_seq]).
  NodeId input(std::string name, InputParams::Kind kind, int64_t n, int64_t rows = 1);
  NodeId weight(std::string name, WeightParams p, Shape shape);
  NodeId get_rows(std::string name, NodeId table, NodeId ids);
  NodeId rms_norm(std::string name, NodeId x, NodeId w, float eps);  // w may be kNoNode
  NodeId mul_mat(std::string name, NodeId w, NodeId x, NodeId bias = kNoNode);
  NodeId add(std::string name, NodeId a, NodeId b);
  NodeId mul(std::string name, NodeId a, NodeId b);
  NodeId silu(std::string name, NodeId a);
  NodeId swiglu(std::string name, NodeId gate, NodeId up);
  NodeId geglu(std::string name, NodeId gate, NodeId up);
  NodeId scale(std::string name, NodeId a, float s);
  NodeId softcap(std::string name, NodeId a, float cap);
  NodeId slice(std::string name, NodeId a, int64_t offset, int64_t n);
  NodeId rope(std::string name, NodeId x, NodeId positions, RopeParams p, NodeId freq_factors = kNoNode);
  // paged: the block-table inputs, required exactly when this graph's kv is paged. sinks: an F32 [n_head] node, or
  // kNoNode; p.sinks is set from it.
  NodeId attention(std::string name, NodeId q, NodeId k, NodeId v, NodeId positions, AttentionParams p,
                   PagedKv paged = {}, NodeId sinks = kNoNode);
  NodeId softmax(std::string name, NodeId a);
  NodeId reshape(std::string name, NodeId a, Shape shape);
  NodeId last_token(std::string name, NodeId a);
  NodeId gather(std::string name, NodeId a, NodeId rows);
  NodeId argmax(std::string name, NodeId a);
  NodeId top_k(std::string name, NodeId a, int32_t k);
  NodeId moe_weights(std::string name, NodeId scores, NodeId ids, MoeWeightsParams p);
  NodeId mul_mat_id(std::string name, NodeId w, NodeId x, NodeId ids, NodeId bias = kNoNode);
  NodeId swiglu_oai(std::string name, NodeId gate, NodeId up, SwiGluOaiParams p);
  NodeId weighted_sum(std::string name, NodeId a, NodeId w);

  // The first node with this name, or kNoNode.
  NodeId find(std::string_view name) const;

 private:
  NodeId append(Node n);
  NodeId glu(std::string name, Op op, NodeId gate, NodeId up);  // swiglu, geglu
  std::vector<Node> nodes_;
  std::vector<NodeId> outputs_;
};

}  // namespace graph
