// Session factory: picks the executor for --device and the KV-cache size for -c.
#include "runtime/session.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "model/model.h"
#include "runtime/memory_plan.h"
#include "runtime/session_cpu.h"

#ifdef LLM_HAVE_CUDA_SESSION
#include "cuda/check.h"
#endif

namespace runtime {

namespace {
// A float KV cache for a 128k training context costs gigabytes (and the CPU reference allocates it whole) for nothing
// in the common short run, so an unspecified -c is capped; -c lifts it.
constexpr int32_t kDefaultCtxCap = 4096;
}  // namespace

void check_eval_batch(std::span<const int32_t> tokens, int32_t start_pos, int32_t n_ctx, int32_t n_vocab) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw SessionError("eval: no tokens");
  if (start_pos < 0 || start_pos + n > n_ctx)
    throw SessionError("eval: positions " + std::to_string(start_pos) + ".." + std::to_string(start_pos + n - 1) +
                       " do not fit the context of " + std::to_string(n_ctx) + " tokens");
  for (int32_t id : tokens)
    if (id < 0 || id >= n_vocab)
      throw std::out_of_range("eval: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(n_vocab) + ")");
}

std::span<const float> Session::eval_paged(const PagedBatch&) {
  throw SessionError("this session has no paged KV cache (it serves one sequence)");
}

bool PagedBatch::asks_draws() const {
  return std::any_of(draws.begin(), draws.end(), [](const RowDraw& d) { return d.params != nullptr; });
}

void Session::launch_paged(const PagedBatch& b) { eval_paged(b); }

PagedResult Session::take_paged() {
  throw SessionError("this session has no paged KV cache (it serves one sequence)");
}

void check_paged_launch(const PagedBatch& b, size_t queued, bool newest_wants_host, int32_t last_outputs) {
  if (queued >= 2) throw SessionError("launch_paged: two steps are queued already (take_paged first)");
  if (newest_wants_host)
    throw SessionError("launch_paged: the queued step wants logits or draws (take_paged before the next)");
  for (int32_t r : b.token_from_row)
    if (r >= 0 && r >= last_outputs)
      throw SessionError("launch_paged: a token from output row " + std::to_string(r) + " of the step before, " +
                         (last_outputs < 0 ? std::string("but none was launched")
                                           : "which had " + std::to_string(last_outputs) + " output rows"));
}

void check_paged_batch(const PagedBatch& b, const PagedLayout& layout, int32_t n_vocab) {
  const size_t n = b.tokens.size();
  if (n == 0) throw SessionError("eval_paged: no tokens");
  if (b.positions.size() != n || b.kv_seq.size() != n)
    throw SessionError("eval_paged: " + std::to_string(n) + " tokens but " + std::to_string(b.positions.size()) +
                       " positions and " + std::to_string(b.kv_seq.size()) + " block-table rows");
  if (b.block_table.size() != size_t(layout.n_seq) * size_t(layout.max_blocks))
    throw SessionError("eval_paged: the block table has " + std::to_string(b.block_table.size()) +
                       " entries, not n_seq * max_blocks = " + std::to_string(layout.n_seq) + " * " +
                       std::to_string(layout.max_blocks));
  for (int32_t r : b.output_rows)
    if (r < 0 || static_cast<size_t>(r) >= n)
      throw SessionError("eval_paged: output row " + std::to_string(r) + " is not a token of the batch");
  if (layout.max_outputs > 0 && b.output_rows.size() > size_t(layout.max_outputs))
    throw SessionError("eval_paged: " + std::to_string(b.output_rows.size()) + " output rows, more than the " +
                       std::to_string(layout.max_outputs) + " a step may have");
  if (!b.draws.empty() && b.draws.size() != b.output_rows.size())
    throw SessionError("eval_paged: " + std::to_string(b.draws.size()) + " draws for " +
                       std::to_string(b.output_rows.size()) + " output rows (one each, or none)");
  for (const RowDraw& d : b.draws)
    if (d.params) validate(*d.params);  // std::invalid_argument naming the field
  if (!b.token_from_row.empty() && b.token_from_row.size() != n)
    throw SessionError("eval_paged: " + std::to_string(b.token_from_row.size()) + " token sources for " +
                       std::to_string(n) + " tokens (one each, or none)");
  for (int32_t r : b.token_from_row)
    if (r < -1) throw SessionError("eval_paged: token source " + std::to_string(r) + " (an output row or -1)");
  for (size_t t = 0; t < n; ++t) {
    const int32_t row = b.kv_seq[t], pos = b.positions[t];
    if (row < 0 || row >= layout.n_seq)
      throw SessionError("eval_paged: token " + std::to_string(t) + " names block-table row " + std::to_string(row) +
                         " of " + std::to_string(layout.n_seq));
    if (pos < 0 || pos >= layout.seq_capacity())
      throw SessionError("eval_paged: position " + std::to_string(pos) + " of token " + std::to_string(t) +
                         " is outside a sequence's " + std::to_string(layout.seq_capacity()) + " positions");
    const int32_t block = b.block_table[size_t(row) * size_t(layout.max_blocks) + size_t(pos / layout.block_size)];
    if (block < 0 || block >= layout.n_blocks)
      throw SessionError("eval_paged: token " + std::to_string(t) + " at position " + std::to_string(pos) +
                         " maps to block " + std::to_string(block) + " outside the pool of " +
                         std::to_string(layout.n_blocks));
    if (b.tokens[t] < 0 || b.tokens[t] >= n_vocab)
      throw std::out_of_range("eval_paged: token id " + std::to_string(b.tokens[t]) +
                              " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  }
}

PagedLayout paged_layout_for(const SessionOptions& options, int32_t n_ctx, int32_t max_seq_tokens) {
  const int32_t bs = options.kv_block_size;
  if (bs <= 0 || (bs & (bs - 1)) != 0)
    throw OptionsError("KV block size must be a power of two, got " + std::to_string(bs));
  if (n_ctx < bs)
    throw OptionsError("a paged KV cache of " + std::to_string(n_ctx) + " tokens holds not even one block of " +
                       std::to_string(bs) + " (raise -c)");
  PagedLayout l;
  l.block_size = bs;
  l.n_blocks = n_ctx / bs;
  l.max_blocks = std::max(1, std::min(l.n_blocks, (max_seq_tokens + bs - 1) / bs));
  l.n_seq = options.n_seq;
  // Output rows a step: a sequence's one, or a prompt's many when its logprobs are asked for, whose logits rows
  // (n_vocab floats each) are bounded so: 64 rows of a 128k vocabulary are 32 MB. A GPU session lowers it to its
  // largest output bucket.
  l.max_outputs = std::max(64, static_cast<int32_t>(std::bit_ceil(static_cast<uint32_t>(std::max(l.n_seq, 1)))));
  return l;
}

void check_kv_type(const model::Config& c, graph::KvType type) {
  if (graph::kv_head_dims_fit(type, c.head_dim, c.head_dim_v)) return;
  const std::string dims =
      std::to_string(c.head_dim) + (c.head_dim_v != c.head_dim ? "/" + std::to_string(c.head_dim_v) : "");
  throw SessionError(std::string("a ") + graph::kv_type_name(type) + " KV cache stores blocks of " +
                     std::to_string(graph::kv_block_values(type)) + " values per head; this model's head_dim is " +
                     dims + " (use --cache-type f16)");
}

int32_t cpu_n_ctx(const model::Model& model, const SessionOptions& options) {
  if (options.n_ctx < 0) throw OptionsError("context size (-c) must be positive, got " + std::to_string(options.n_ctx));
  if (options.n_ctx > 0) return options.n_ctx;
  return std::min(model.config().n_ctx_train, kDefaultCtxCap);
}

namespace {
std::unique_ptr<Session> make_cpu_session(std::shared_ptr<const model::Model> model, const SessionOptions& options) {
  const int32_t n_ctx = cpu_n_ctx(*model, options);
  if (options.n_ctx == 0 && n_ctx < model->config().n_ctx_train)
    log(options.log, LogLevel::Note,
        "context capped at " + std::to_string(n_ctx) + " tokens (model trained for " +
            std::to_string(model->config().n_ctx_train) + "); use -c to change");
  if (options.half_weights_bytes > 0)
    log(options.log, LogLevel::Note, "--half-weights is for the GPU: the CPU reference reads the weights as they are");
  if (options.n_seq > 0) {
    const PagedLayout layout = paged_layout_for(options, n_ctx, model->config().n_ctx_train);
    return std::make_unique<CpuSession>(std::move(model), layout, options.n_threads, options.kv_type);
  }
  return std::make_unique<CpuSession>(std::move(model), n_ctx, options.n_threads, options.kv_type);
}

std::unique_ptr<Session> make_device_session(std::shared_ptr<const model::Model> model, const SessionOptions& options) {
  const std::string& device = options.device;
  if (device == "cpu") return make_cpu_session(std::move(model), options);
  if (device == "cuda") {
#ifdef LLM_HAVE_CUDA_SESSION
    return make_cuda_session(std::move(model), options);
#else
    throw std::runtime_error("CUDA device not available in this build");
#endif
  }
  if (device == "auto") {
#ifdef LLM_HAVE_CUDA_SESSION
    // The CPU reference is the documented fallback when no GPU can be used; a machine without one is no news.
    if (!cuda::device_available()) {
      if (options.verbose) log(options.log, LogLevel::Detail, "no CUDA device; running on the CPU reference");
      return make_cpu_session(std::move(model), options);
    }
    try {
      return make_cuda_session(model, options);
    } catch (const DeviceMemoryError&) {
      throw;  // a GPU that is too small for the request is the user's to resolve, not a reason to run on the CPU
    } catch (const SessionError&) {
      throw;  // so is a request the session refuses (a context size, a KV cache type this model cannot use)
    } catch (const cuda::Unsupported& e) {
      log(options.log, LogLevel::Note, std::string(e.what()) + "; running on the CPU reference");
    } catch (const std::exception& e) {
      log(options.log, LogLevel::Note,
          std::string("no usable CUDA device (") + e.what() + "); running on the CPU reference");
    }
#endif
    return make_cpu_session(std::move(model), options);
  }
  throw OptionsError("unknown device '" + options.device + "' (expected cpu, cuda or auto)");
}
}  // namespace

std::unique_ptr<Session> make_session(std::shared_ptr<const model::Model> model, const SessionOptions& options) {
  if (options.n_ctx < 0) throw OptionsError("context size (-c) must be positive, got " + std::to_string(options.n_ctx));
  const int32_t n_train = model->config().n_ctx_train;
  std::unique_ptr<Session> session = make_device_session(std::move(model), options);
  // After the session exists, so that a context refused for lack of memory gets its one error line and nothing else.
  if (options.n_ctx > n_train)
    log(options.log, LogLevel::Warning,
        "context " + std::to_string(options.n_ctx) + " is longer than the model's training context " +
            std::to_string(n_train));
  return session;
}

}  // namespace runtime
