// A Session is one loaded model bound to one device with its KV cache: the seam between the shared generate loop
// (runtime/generate.h, logits, perplexity) and an executor. The CPU implementation (runtime/session_cpu.h) runs the graph
// on graph::ReferenceExecutor; the CUDA implementation plugs in behind the same interface.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "runtime/events.h"
#include "runtime/sampler.h"

namespace model {
class Model;
struct Config;
}

namespace runtime {

// Bad use of a session: prompt longer than the context, positions out of range, empty batch.
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Session options that cannot be right whatever the model (an unknown device name, a negative context): the
// caller's mistake, which a command line reports as a usage error.
class OptionsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct SessionOptions {
  std::string device = "auto";  // "auto" (CUDA when a GPU is usable, else the CPU) | "cpu" | "cuda"
  int32_t n_ctx = 0;           // KV-cache slots; 0 = the model's training context, capped by the device (make_session)
  int32_t n_threads = 0;       // CPU threads; 0 = hardware concurrency
  bool verbose = false;        // device / allocation notes on stderr
  graph::KvType kv_type = graph::KvType::F16;  // --cache-type: how the KV cache stores K and V
  bool cuda_graph = true;      // capture the decode step as a CUDA graph (--no-cuda-graph: plain launches)
  // The largest evaluation the caller will make, for the GPU memory check before loading: 0 = prompts of up to
  // kPlannedPrefillTokens with last-token logits (a longer one is checked when it comes); perplexity sets its
  // chunk size with all_logits.
  int32_t plan_batch = 0;
  bool plan_all_logits = false;
  // > 0: a paged KV cache shared by up to n_seq sequences at once (the serving engine); n_ctx is then the pool's
  // tokens in all, in blocks of kv_block_size, and one sequence holds at most min(pool, training context) tokens.
  int32_t n_seq = 0;
  int32_t kv_block_size = 64;  // a power of two
  // GPU only: device memory for half-precision copies of the matrices prompts' products read (--half-weights;
  // cuda/half_weights.h): faster prompts of more than 64 tokens for 2 bytes a weight. 0: none.
  uint64_t half_weights_bytes = 0;
  LogSink log;                 // notes, warnings and (verbose) details; none: silent
  ProgressSink progress;       // the weight upload's progress; none: silent
};

// What a device-side sampler needs to pick the next token itself (see Session::decode_sample).
struct SampleRequest {
  const SamplerParams* params = nullptr;
  uint64_t step = 0;                    // Philox counter of this draw (runtime/sampler.h)
  std::span<const int32_t> history;     // all tokens so far (prompt + generated); penalties use the last repeat_last_n
  // Whether the caller means to call again at pos + 1 with the token this call returns (a decode session may start
  // that step before returning; false on a generation's last step saves that step's work).
  bool more = true;
};

// How a paged session's cache is cut up (Session::paged_layout).
struct PagedLayout {
  int32_t block_size = 0;
  int32_t n_blocks = 0;       // in the pool
  int32_t max_blocks = 0;     // per sequence: it holds at most max_blocks * block_size tokens
  int32_t n_seq = 0;          // block-table rows: sequences in one batch at most
  // Output rows one step may have (PagedBatch::output_rows), at least n_seq; 0: as many as its tokens.
  // paged_layout_for: max(64, n_seq rounded up to a power of two); a GPU session: that power of two.
  int32_t max_outputs = 0;
  int32_t seq_capacity() const { return max_blocks * block_size; }
};

// A draw the caller asks a paged session to make on its device for one output row (PagedBatch::draws): the
// request's parameters, the draw counter and the history, as Sampler::sample(logits, history, step) takes them
// (the session reads only the penalties' window of it). params null: no draw for this row.
struct RowDraw {
  const SamplerParams* params = nullptr;
  uint64_t step = 0;
  std::span<const int32_t> history;
};

// One step of a paged session: tokens of any of its sequences, each sequence's tokens consecutive and at increasing
// consecutive positions (graph/ir.h, Op::Attention); token t belongs to block-table row kv_seq[t].
struct PagedBatch {
  std::vector<int32_t> tokens, positions, kv_seq;  // [T]
  std::vector<int32_t> block_table;                // [n_seq * max_blocks]: row r holds sequence r's blocks
  std::vector<int32_t> output_rows;                // the tokens whose logits eval_paged returns, in this order
  // false: the caller needs only each output row's argmax (paged_argmax) or draw (paged_draws), not the logits (a
  // device then keeps them; eval_paged returns an empty span unless a draw it was asked for was not made).
  bool need_logits = true;
  // Empty, or one per output row: draws for the device to make (paged_draws). A session that does not make a draw
  // returns the logits, whatever need_logits says, so that the caller samples that row itself.
  std::vector<RowDraw> draws;
  // Empty, or one per token: -1 takes tokens[t]; r >= 0 takes the argmax of output row r of the step queued just
  // before this one (launch_paged), which the caller need not have seen yet (tokens[t] is then not read, but must
  // be a valid id). Greedy sequences go on this way while the caller still handles that step's results.
  std::vector<int32_t> token_from_row;

  bool asks_draws() const;  // whether any row has a draw
};

// What one paged step gave (take_paged): argmax and draws valid until the next take_paged or eval_paged, logits
// until the next launch_paged as well (a step that wants logits copies them into the same host buffer).
struct PagedResult {
  std::span<const float> logits;    // as eval_paged returns them
  std::span<const int32_t> argmax;  // as paged_argmax
  std::span<const int32_t> draws;   // as paged_draws
};

class Session {
 public:
  virtual ~Session() = default;

  // Runs `tokens` at positions start_pos, start_pos+1, ... (one graph, one batch), writing their K/V into cache
  // slots [start_pos, start_pos + n) and attending causally over [0, position]. Returns logits:
  //   all_logits: [n_tokens * n_vocab], token t's row at t * n_vocab;  else: [n_vocab] of the last token.
  // The span stays valid until the next call. Throws SessionError when start_pos + n > n_ctx() or tokens is empty,
  // and std::out_of_range naming the id when a token id is not in [0, n_vocab).
  virtual std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) = 0;

  // Optional fused path for devices that sample on the device: evaluates one token at `pos` and returns the sampled
  // next token, bit-identical to Sampler::sample on eval()'s logits. nullopt = not supported here; the caller then
  // uses eval() + the CPU sampler. The CPU session returns nullopt.
  virtual std::optional<int32_t> decode_sample(int32_t token, int32_t pos, const SampleRequest& req) {
    (void)token, (void)pos, (void)req;
    return std::nullopt;
  }

  // Paged sessions (SessionOptions::n_seq > 0) only: the layout of the pool, and one step of many sequences.
  // eval_paged returns logits [output_rows.size() * n_vocab], row i for token output_rows[i], valid until the next
  // call (none for a batch of prompt chunks only, whose output_rows is empty); it throws SessionError for a malformed batch (sizes, rows, positions past a sequence's capacity, blocks
  // outside the pool) and std::out_of_range for a token id outside the vocabulary. Others: nullopt / SessionError.
  virtual std::optional<PagedLayout> paged_layout() const { return std::nullopt; }
  virtual std::span<const float> eval_paged(const PagedBatch& batch);
  // Pipelined steps: launch_paged queues a step and returns (a device starts it when the step before is done);
  // take_paged waits for the oldest queued step and gives its results. At most two steps are queued at once, and a
  // step that wants logits (need_logits) or draws is taken before the next is queued; eval_paged is launch_paged +
  // take_paged with nothing queued. Both throw SessionError when these rules are broken, and launch_paged as
  // eval_paged for a malformed batch (nothing queued then).
  virtual void launch_paged(const PagedBatch& batch);
  virtual PagedResult take_paged();
  // Builds (and, on a GPU, captures) everything eval_paged needs for batches of up to max_tokens tokens, so that no
  // later step builds a graph, compiles a kernel or allocates device memory. Returns the number of batch shapes
  // prepared (0 where nothing needs preparing, as on the CPU).
  virtual int32_t prepare_paged(int32_t max_tokens) {
    (void)max_tokens;
    return 0;
  }
  // After eval_paged: the argmax of each output row's logits (lower id on ties, as runtime::argmax), valid until
  // the next call.
  virtual std::span<const int32_t> paged_argmax() const { return {}; }
  // After eval_paged: for each output row the token the device drew for PagedBatch::draws, bit-identical to
  // Sampler::sample on that row's logits, or -1 where it drew none (none asked, parameters past the device's
  // limits, a logit that is NaN or +inf). Empty: none drawn (sessions without device sampling, as the CPU's).
  virtual std::span<const int32_t> paged_draws() const { return {}; }

  virtual int32_t n_ctx() const = 0;        // KV slots = longest sequence this session can hold
  virtual int32_t n_vocab() const = 0;
  virtual std::string device_name() const = 0;  // "CPU reference (2 threads)", "NVIDIA H100 80GB HBM3"
  // Bytes the KV cache of n_ctx() slots takes on its device (the CPU reference keeps floats).
  virtual uint64_t kv_cache_bytes() const = 0;
  // Device bytes of half-precision weight copies kept for prompt products (SessionOptions::half_weights_bytes).
  virtual uint64_t half_weights_bytes() const { return 0; }
};

// The checks every Session::eval makes before touching a device: a non-empty batch whose positions fit the context
// (SessionError) and token ids inside the vocabulary (std::out_of_range naming the id).
void check_eval_batch(std::span<const int32_t> tokens, int32_t start_pos, int32_t n_ctx, int32_t n_vocab);

// The checks every Session::eval_paged makes before touching a device (SessionError / std::out_of_range).
void check_paged_batch(const PagedBatch& b, const PagedLayout& layout, int32_t n_vocab);
// launch_paged's rules (SessionError): queued steps not taken yet, whether the newest of them wants logits or
// draws, and the output rows of the step launched last (-1: none), which token_from_row may name.
void check_paged_launch(const PagedBatch& b, size_t queued, bool newest_wants_host, int32_t last_outputs);

// The layout of a paged cache of n_ctx tokens for options.n_seq sequences of at most max_seq_tokens each
// (OptionsError for a block size that is not a power of two, or a pool smaller than one block).
PagedLayout paged_layout_for(const SessionOptions& options, int32_t n_ctx, int32_t max_seq_tokens);

// SessionError when the model's heads cannot use a KV cache of this type (q8_0, q4_0: head dims multiples of 32).
void check_kv_type(const model::Config& c, graph::KvType type);

// Creates the session for options.device: "cpu", "cuda", or "auto" (cuda when this build has the CUDA session and
// it starts, else cpu with a note on stderr). The context is options.n_ctx when positive; the default (0) is the
// model's training context, on the CPU at most 4096 tokens (cpu_n_ctx), on a GPU as much of it as fits in free
// device memory (a note to options.log says when either cap applied). Throws OptionsError for an unknown device or a
// negative -c, SessionError (even for "auto") for a KV cache type the model or device cannot use,
// std::runtime_error("CUDA device not available in this build") for "cuda" without the CUDA session, and
// runtime::DeviceMemoryError (runtime/memory_plan.h), even for "auto", when the model or the requested context does not
// fit in the GPU's free memory. The session shares ownership of the model.
std::unique_ptr<Session> make_session(std::shared_ptr<const model::Model> model, const SessionOptions& options);

// KV-cache slots for a CPU session: options.n_ctx when positive, else min(training context, 4096) (a 128k-token
// default would cost gigabytes of float cache for the common short run). OptionsError when negative.
int32_t cpu_n_ctx(const model::Model& model, const SessionOptions& options);

#ifdef LLM_HAVE_CUDA_SESSION
// Provided by the CUDA session's source file; builds that define LLM_HAVE_CUDA_SESSION must link it. Resolves the
// context itself (options.n_ctx, or the default that fits), since free device memory is known only once the device
// is opened.
std::unique_ptr<Session> make_cuda_session(std::shared_ptr<const model::Model> model, const SessionOptions& options);
#endif

}  // namespace runtime
