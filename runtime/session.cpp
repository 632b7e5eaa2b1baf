// Session factory: picks the executor for --device and the KV-cache size for -c.
#include "runtime/session.h"

#include <algorithm>
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
