// CUDA session (see session_cuda.h). Compiled only in builds with the CUDA executor.
#ifdef LLM_HAVE_CUDA_SESSION
#include "runtime/session_cuda.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "cuda/capabilities.h"
#include "cuda/device_info.h"
#include "cuda/kernels/host_inputs.cuh"
#include "cuda/kernels/sample_rows.cuh"
#include "cuda/weight_layouts.h"
#include "cuda/work_buffers.h"
#include "graph/rope_pairs.h"
#include "model/build_graph.h"
#include "runtime/device_sampling.h"
#include "runtime/memory_plan.h"

namespace runtime {

namespace {

bool same_params(const SamplerParams& a, const SamplerParams& b) {
  return a.temp == b.temp && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repeat_penalty == b.repeat_penalty && a.repeat_last_n == b.repeat_last_n &&
         a.presence_penalty == b.presence_penalty && a.frequency_penalty == b.frequency_penalty && a.seed == b.seed &&
         a.logit_bias == b.logit_bias;
}

cuda::AttentionShape attention_shape(const model::Config& c) {
  return {c.n_head, c.n_head_kv, c.head_dim, c.head_dim_v};
}

// Whose q and k rows the upload reorders so that NeoX rope pairs lie side by side (cuda/weight_layouts.h): a NeoX
// model that normalises neither q nor k per head (a norm's weights would have to move too, and those models' ropes
// run in the norm's launch anyway), with F32 biases if any. Qwen 2, Phi-3/4 and gpt-oss qualify.
cuda::RopePairs rope_pairs_for(const model::Config& c, const model::Weights& weights) {
  if (c.rope_mode != graph::RopeMode::Neox || c.n_rot <= 0 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim) return {};
  using graph::WeightRole;
  for (const auto& w : weights.all()) {
    const WeightRole r = w.params.role;
    if (r == WeightRole::AttnQNorm || r == WeightRole::AttnKNorm) return {};
    if (graph::is_rope_pair_bias(r) && w.params.type != quant::Type::F32) return {};
  }
  return {c.head_dim, c.n_rot, c.n_head, c.n_head_kv};
}

}  // namespace

CudaSession::CudaSession(std::shared_ptr<const model::Model> model, int32_t n_ctx, CudaSessionOptions options)
    : model_(std::move(model)), n_ctx_(n_ctx), opt_(options) {
  if (n_ctx_ < 0) throw SessionError("context size must be positive, got " + std::to_string(n_ctx_));
  check_kv_type(model_->config(), opt_.kv_type);
  const cuda::AttentionShape attention = attention_shape(model_->config());
  if (!cuda::kv_cache_supported(opt_.kv_type, attention))
    throw SessionError(cuda::kv_cache_refusal(opt_.kv_type, attention) + " (use --cache-type f16)");
  // A graph of this model, built on the host only, tells whether the CUDA executor runs every node.
  if (const std::string missing = cuda::graph_refusal(model::build_graph(model_->config(), model_->weights(), 1,
                                                                         false, std::max(n_ctx_, 1)));
      !missing.empty())
    throw cuda::Unsupported("the CUDA path cannot run this model yet: " + missing + " is not implemented there");
  if (opt_.n_seq > 0) {
    const int32_t bs = opt_.kv_block_size;
    if (!cuda::paged_block_size_supported(bs))
      throw OptionsError("KV block size " + std::to_string(bs) + ": the CUDA kernels serve powers of two from 16 "
                         "to 256");
    const model::BatchShape probe{.n_tokens = 2, .all_logits = false, .n_ctx = bs, .block_size = bs,
                                  .max_blocks = 1, .n_seq = 2, .n_outputs = 1};
    if (const std::string missing =
            cuda::graph_refusal(model::build_graph(model_->config(), model_->weights(), probe));
        !missing.empty())
      throw cuda::Unsupported("the CUDA path cannot batch this model yet: " + missing);
  }
  if (!cuda::device_available()) throw cuda::Error("no CUDA device is available (use --device cpu)");
  const uint64_t used_before_context = opt_.verbose ? cuda::device_memory_used() : 0;
  ctx_ = std::make_unique<cuda::Context>(opt_.device);
  if (opt_.verbose)
    detail("cuda: context, streams and cuBLASLt workspace: " +
           format_bytes(cuda::device_memory_used() - used_before_context));

  // Everything big (weights, KV cache, work buffers) is checked against free memory here, before it is allocated.
  const std::vector<cuda::WeightDesc> descs = weight_descs();
  cuda::HalfWeightsPlan half_plan;
  {
    const CudaDeviceFacts facts = cuda_device_facts(*ctx_, model_->config().n_vocab);
    Footprint fp = cuda_session_footprint(*model_, facts, opt_.plan, opt_.kv_type, opt_.exec);
    const uint64_t free_bytes = cuda::device_memory_free();
    const int32_t n_train = std::max(model_->config().n_ctx_train, 1);
    // The half copies come before the cache: they take what -c (or a 4096-slot context) leaves.
    half_plan = plan_half_weights(descs, fp, free_bytes, n_ctx_ > 0 ? n_ctx_ : std::min(n_train, 4096));
    fp.weights_bytes += half_plan.bytes;
    // The smaller caches this model could use instead (its heads fit the GPU's quantized-cache kernels), for the
    // hints when the context does not fit.
    std::vector<CacheOption> smaller;
    for (const graph::KvType t : {graph::KvType::Q8_0, graph::KvType::Q4_0})
      if (cuda::kv_cache_supported(t, attention)) {
        Footprint option = cuda_session_footprint(*model_, facts, opt_.plan, t, opt_.exec);
        option.weights_bytes += half_plan.bytes;
        if (option.kv_bytes_per_token < fp.kv_bytes_per_token)
          smaller.push_back({graph::kv_type_name(t), std::move(option)});
      }
    if (n_ctx_ == 0 && opt_.n_seq > 0) {
      // A paged pool for every sequence at the training context, or as much of it as fits.
      const int32_t want = int32_t(std::min<int64_t>(int64_t{1} << 30, int64_t{n_train} * opt_.n_seq));
      n_ctx_ = default_ctx_that_fits(fp, free_bytes, want);
      if (n_ctx_ < want)
        log(opt_.log, LogLevel::Note,
            "KV cache pool of " + std::to_string(n_ctx_) + " tokens for " + std::to_string(opt_.n_seq) +
                " sequences, to fit in free GPU memory (" + format_bytes(free_bytes) + " free); use -c to change");
    } else if (n_ctx_ == 0) {
      n_ctx_ = default_ctx_that_fits(fp, free_bytes, n_train);
      if (n_ctx_ < n_train)
        log(opt_.log, LogLevel::Note,
            "context capped at " + std::to_string(n_ctx_) + " tokens to fit in free GPU memory (" +
                format_bytes(free_bytes) + " free; model trained for " + std::to_string(n_train) +
                "); use -c to change" + larger_context_hint(smaller, free_bytes, n_ctx_, n_train));
    } else {
      try {
        require_fits(fp, free_bytes, n_ctx_);
      } catch (const DeviceMemoryError& e) {
        throw DeviceMemoryError(e.what() + smaller_cache_hint(smaller, free_bytes, n_ctx_));
      }
    }
    if (opt_.verbose) {
      const MemoryNeed need = fp.need(n_ctx_);
      const std::string copies = half_plan.bytes ? " (half copies " + format_bytes(half_plan.bytes) + ")" : "";
      detail("cuda: memory plan: weights " + format_bytes(need.weights) + copies + ", KV cache " +
             format_bytes(need.kv_cache) +
             " (" + std::to_string(n_ctx_) + " slots), work buffers " + format_bytes(need.work) + ", headroom " +
             format_bytes(need.headroom) + "; " + format_bytes(free_bytes) + " free");
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<cuda::WeightUpload> items;
  for (const auto& w : model_->weights().all())
    items.push_back({w.params.host, w.params.arena_offset, w.params.nbytes});
  cuda::ProgressFn upload_progress;
  if (opt_.progress)
    upload_progress = [this](uint64_t done, uint64_t total) { opt_.progress("loading weights", done, total); };
  weights_ = cuda::DeviceWeights(*ctx_, model_->weights().arena_bytes(), items, upload_progress);
  regroup_weights(descs);
  if (!half_plan.chosen.empty())  // from the regrouped layouts, as the dequantizing GEMM reads them
    half_weights_ = cuda::HalfWeights(weights_.base(), descs, half_plan, regrouped_, ctx_->compute());
  if (opt_.verbose) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char line[256];
    std::snprintf(line, sizeof line, "cuda: %s, %.1f MiB of weights uploaded in %.2f s", ctx_->name().c_str(),
                  double(weights_.bytes()) / (1 << 20), s);
    detail(line);
  }
  const auto& c = model_->config();
  if (opt_.n_seq > 0) {
    SessionOptions so;
    so.n_seq = opt_.n_seq;
    so.kv_block_size = opt_.kv_block_size;
    paged_ = paged_layout_for(so, n_ctx_, std::max(c.n_ctx_train, 1));
    n_ctx_ = paged_->n_blocks * paged_->block_size;  // whole blocks
    const size_t rows = std::bit_ceil(uint32_t(paged_->n_seq));  // the largest output bucket (output_bucket)
    paged_->max_outputs = int32_t(rows);
    draw_rows_ = cuda::PinnedBuffer(rows * sizeof(cuda::RowSampling));
    draw_windows_ = cuda::PinnedBuffer(rows * size_t(cuda::kSampleRowsMaxWindow) * 4);
    draw_out_ = cuda::PinnedBuffer(rows * 4);
    ids_stride_ = int32_t(rows);
    paged_ids_ = cuda::PinnedBuffer(2 * rows * 4);
    for (auto& e : slot_done_) e = cuda::Event::create();
  }
  kv_ = std::make_unique<cuda::KvCache>(
      graph::KvCacheSpec{c.n_layer, n_ctx_, c.n_head_kv, c.head_dim, c.head_dim_v, opt_.kv_type});
  if (opt_.exec.rtc_kernels) rtc_ = std::make_unique<cuda::RtcCache>();
  history_ = cuda::DeviceBuffer(size_t(n_ctx_) * 4);
  sample_state_ = cuda::DeviceBuffer(sizeof(cuda::SamplingState));
  sample_scratch_ = cuda::DeviceBuffer(cuda::sampling_scratch_bytes(c.n_vocab));
  for (auto& st : staging_) st = cuda::PinnedBuffer(sizeof(DecodeStaging) + size_t(n_ctx_) * 4);
  tokens_host_ = cuda::PinnedBuffer(2 * sizeof(int32_t));
}

CudaSession::~CudaSession() {
  if (ctx_) (void)cudaStreamSynchronize(ctx_->compute());  // a step queued ahead reads staging_ and writes tokens_host_
}

int32_t CudaSession::n_vocab() const { return model_->config().n_vocab; }

std::string CudaSession::device_name() const { return ctx_->name(); }

std::vector<cuda::WeightDesc> CudaSession::weight_descs() const {
  std::vector<cuda::WeightDesc> descs;
  for (const auto& w : model_->weights().all())
    descs.push_back({w.params.role, w.params.layer, w.params.type, w.shape.ne[0], w.shape.rows(),
                     w.params.arena_offset, w.shape.ne[2]});
  return descs;
}

cuda::HalfWeightsPlan CudaSession::plan_half_weights(std::span<const cuda::WeightDesc> descs, const Footprint& fp,
                                                     uint64_t free_bytes, int32_t reserve_ctx) const {
  if (opt_.half_weights_budget == 0) return {};
  const uint64_t reserved = fp.need(reserve_ctx).total();
  const uint64_t room = free_bytes > reserved ? free_bytes - reserved : 0;
  const uint64_t budget = std::min(opt_.half_weights_budget, room);
  cuda::HalfWeightsPlan plan = cuda::plan_half_weights(descs, budget);
  if (plan.chosen.size() < plan.candidates)
    log(opt_.log, LogLevel::Note,
        "half-precision copies for " + std::to_string(plan.chosen.size()) + " of " +
            std::to_string(plan.candidates) + " matrices (" + format_bytes(plan.bytes) + " of the " +
            format_bytes(plan.candidate_bytes) + " all would take): " +
            (budget < opt_.half_weights_budget ? "that is what free GPU memory leaves beside a " +
                                                     std::to_string(reserve_ctx) + "-token context"
                                               : std::string("raise --half-weights for more")));
  else if (opt_.verbose)
    detail("cuda: half-precision copies of " + std::to_string(plan.chosen.size()) + " matrices for prompts: " +
           format_bytes(plan.bytes));
  return plan;
}

// The weights' layouts as cuda/ chooses them by role and shape (cuda/weight_layouts.h); the executors learn which
// moved from regrouped_.
void CudaSession::regroup_weights(std::span<const cuda::WeightDesc> descs) {
  // A paged session's steps never take the attention + o launch (it attends one unpaged sequence), the only
  // decode reader of o regrouped by columns: every other product of it would be a GEMM (T = 1 had no scratch for
  // one, and a Q4_0 8B served 2-4 streams at 200-280 tok/s against ~500-730 on the file's layout).
  cuda::LayoutOptions layouts = opt_.exec.layouts;
  if (opt_.n_seq > 0) layouts.attention_o = false;
  const cuda::RopePairs pairs = layouts.rope_pairs ? rope_pairs_for(model_->config(), model_->weights())
                                                   : cuda::RopePairs{};
  rope_pairs_adjacent_ = pairs.head_dim > 0;
  regrouped_ = cuda::regroup_weights(const_cast<uint8_t*>(weights_.base()), descs,
                                     attention_shape(model_->config()), layouts, pairs, ctx_->compute());
}

std::unique_ptr<CudaSession::Compiled> CudaSession::compile(int32_t n_tokens, bool all_logits) {
  // Only the decode step is replayed often enough to capture.
  return compile(model::BatchShape{.n_tokens = n_tokens, .all_logits = all_logits, .n_ctx = n_ctx_}, n_tokens == 1);
}

std::unique_ptr<CudaSession::Compiled> CudaSession::compile(const model::BatchShape& shape, bool capture) {
  const int32_t n_tokens = shape.n_tokens;
  auto c = std::make_unique<Compiled>();
  c->graph = model::build_graph(model_->config(), model_->weights(), shape);
  c->graph.kv.type = opt_.kv_type;  // the cache's element type is the session's choice, not the model's
  c->plan = graph::plan(c->graph);
  c->logits = c->graph.find("result_output");
  c->argmax = c->graph.find("result_argmax");
  cuda::ExecutorOptions eo = opt_.exec;
  eo.cuda_graph = eo.cuda_graph && capture;
  eo.verbose = opt_.verbose;
  eo.log = [sink = opt_.log](bool warning, const std::string& m) {
    log(sink, warning ? LogLevel::Warning : LogLevel::Detail, m);
  };
  eo.rtc = rtc_.get();
  eo.regrouped_offsets = &regrouped_;
  eo.half_weights = half_weights_.count() ? &half_weights_ : nullptr;
  eo.rope_pairs_adjacent = rope_pairs_adjacent_;
  const cuda::WorkBuffers wb =
      cuda::work_buffers(c->graph, c->plan, ctx_->sm_count(), eo);
  ensure_free(wb.device_bytes(), n_tokens);
  c->exec = std::make_unique<cuda::Executor>(*ctx_, c->graph, c->plan, weights_.base(), kv_.get(), eo);
  if (opt_.verbose)  // where device memory goes beyond weights and KV (bench reports the total)
    detail("cuda: graph of " + std::to_string(n_tokens) + " tokens: arena " + format_bytes(wb.arena) +
           ", GEMM scratch " + format_bytes(wb.gemm_scratch) + ", attention scratch " + format_bytes(wb.attn_scratch) +
           "; device memory in use " + format_bytes(cuda::device_memory_used()));
  if (opt_.verbose && rtc_)
    detail("cuda: run-time kernels in " + rtc_->dir().string() + ": " + std::to_string(rtc_->stats().compiled) +
           " compiled, " + std::to_string(rtc_->stats().loaded) + " from cache, " +
           std::to_string(rtc_->stats().rejected) + " rejected");
  return c;
}

void CudaSession::ensure_free(uint64_t bytes, int32_t n_tokens) {
  // Room for the allocations themselves and a graph instantiation; the load-time plan kept the larger headroom.
  constexpr uint64_t kSlack = uint64_t{32} << 20;
  uint64_t free_bytes = cuda::device_memory_free();
  if (bytes + kSlack <= free_bytes) return;
  // Cached prompt graphs are the only memory a session can give back (cudaFree returns it at once).
  if (std::erase_if(graphs_, [](const auto& kv) { return kv.first.first != 1; }) > 0) {
    free_bytes = cuda::device_memory_free();
    if (bytes + kSlack <= free_bytes) return;
  }
  throw DeviceMemoryError("evaluating " + std::to_string(n_tokens) + " tokens at once needs " + format_bytes(bytes) +
                          " of GPU work buffers but " + format_bytes(free_bytes) +
                          " is free; use a shorter prompt or a smaller -c");
}

CudaSession::Compiled& CudaSession::compiled(int32_t n_tokens, bool all_logits) {
  const auto key = std::make_pair(n_tokens, all_logits);
  if (auto it = graphs_.find(key); it != graphs_.end()) return *it->second;
  // Prompts of many lengths would otherwise pile up device arenas; keep the decode graph, drop the rest.
  if (graphs_.size() >= 4) std::erase_if(graphs_, [](const auto& kv) { return kv.first.first != 1; });
  return *graphs_.emplace(key, compile(n_tokens, all_logits)).first->second;
}

void CudaSession::check_batch(std::span<const int32_t> tokens, int32_t start_pos) const {
  check_eval_batch(tokens, start_pos, n_ctx_, n_vocab());
}

std::span<const float> CudaSession::eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) {
  if (paged_) throw SessionError("eval: this session's KV cache is paged (use eval_paged)");
  check_batch(tokens, start_pos);
  ahead_.valid = false;  // the KV cache changes under a step queued ahead: it will not be this session's next
  const int32_t n = static_cast<int32_t>(tokens.size());
  Compiled& c = compiled(n, all_logits);
  positions_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) positions_[size_t(i)] = start_pos + i;
  c.exec->write_inputs(tokens, positions_);
  c.exec->run();
  logits_ = c.exec->read_f32(c.logits);
  return logits_;
}

void CudaSession::sampler_graphs(const SamplerParams& p) {
  if (decode_[0] && same_params(p, sample_params_)) return;
  if (opt_.verbose && decode_[0]) detail("cuda: sampling parameters changed, re-capturing the decode graph");
  CUDA_CHECK(cudaStreamSynchronize(ctx_->compute()));  // a step queued ahead may still run on the old graphs
  ahead_.valid = false;
  sample_params_ = p;
  const auto device_int = [](const cuda::PinnedBuffer& b) {
    return static_cast<int32_t*>(cuda::device_address_of_pinned(b.get()));
  };
  int32_t* const tokens = device_int(tokens_host_);
  static_assert(sizeof(DecodeStaging) % 4 == 0 && offsetof(DecodeStaging, state) == 0 &&
                offsetof(cuda::SamplingState, n_history) == 0);
  constexpr int32_t kStateWords = sizeof(cuda::SamplingState) / 4, kHeadWords = sizeof(DecodeStaging) / 4;
  for (int slot = 0; slot < 2; ++slot) {
    decode_[slot].reset();
    decode_[slot] = compile(1, false);
    Compiled& c = *decode_[slot];
    cuda::SampleParams sp;
    sp.cfg = to_device_config(p);
    sp.logits = static_cast<const float*>(c.exec->device_ptr(c.logits));
    sp.V = n_vocab();
    sp.history = history_.as<int32_t>();
    sp.state = sample_state_.as<cuda::SamplingState>();
    // The sampling kernels write the id straight into page-locked host memory (no copy back in the graph).
    sp.out_token = tokens + slot;
    sp.scratch = sample_scratch_.get(), sp.scratch_bytes = sample_scratch_.bytes();
    // The state and the penalty window come with the run's inputs, read from the slot's staging by its first kernel;
    // so does the token, or from the other slot's sampled id when the step was queued ahead.
    const int32_t* st = device_int(staging_[slot]);
    c.exec->add_host_input(st, sample_state_.get(), kStateWords);
    c.exec->add_host_input(st + kHeadWords, history_.get(), n_ctx_, st);  // n_history values
    c.exec->set_tokens_alternative(tokens + (slot ^ 1), st + offsetof(DecodeStaging, token_from_previous) / 4);
    c.exec->append_step([sp](cudaStream_t s) { cuda::launch_sample(sp, s); });
  }
}

void CudaSession::stage_decode(int slot, uint64_t step, std::span<const int32_t> window, bool token_from_previous) {
  DecodeStaging head;
  head.state.n_history = int32_t(window.size());
  head.state.step = step;
  head.token_from_previous = token_from_previous ? 1 : 0;
  auto* stage = staging_[slot].as<uint8_t>();
  std::memcpy(stage, &head, sizeof head);
  if (!window.empty()) std::memcpy(stage + sizeof head, window.data(), window.size_bytes());
}

std::optional<int32_t> CudaSession::decode_sample(int32_t token, int32_t pos, const SampleRequest& req) {
  // The device samplers have no logit bias: a biased draw takes eval() and the CPU sampler.
  if (!req.params || paged_ || !req.params->logit_bias.empty()) return std::nullopt;
  const int32_t tokens[1] = {token};
  check_batch(tokens, pos);
  validate(*req.params);
  // The penalty window (the last repeat_last_n tokens, all for -1, none for 0) goes to the device as the whole
  // history it sees; a window longer than the buffer falls back to eval() + the CPU sampler.
  const int32_t n_hist = int32_t(req.history.size());
  const int32_t last_n = req.params->repeat_last_n;
  const int32_t first = last_n < 0 ? 0 : std::max(0, n_hist - last_n);
  const int32_t window = last_n == 0 ? 0 : n_hist - first;
  if (window > n_ctx_) return std::nullopt;
  sampler_graphs(*req.params);
  const bool penalties = req.params->penalties();

  // This step: already queued by the previous call when it brings what that call expected, else queued now.
  int slot = ahead_.slot;
  if (!(ahead_.valid && ahead_.pos == pos && ahead_.step == req.step && ahead_.token == token)) {
    slot = last_slot_ ^ 1;
    decode_[slot]->exec->wait();  // its staging is about to be rewritten
    stage_decode(slot, req.step, std::span<const int32_t>(req.history).subspan(size_t(first), size_t(window)),
                 false);
    const int32_t positions[1] = {pos};
    decode_[slot]->exec->write_inputs(tokens, positions);
    decode_[slot]->exec->run();
  }
  ahead_.valid = false;
  last_slot_ = slot;
  // The next step, queued before this one is waited for: the stream never waits for the host between tokens. Its
  // token is this step's sample, read on the device; a caller that brings anything else gets a fresh step (the
  // queued one's KV write at pos + 1 is overwritten by whatever computes that position).
  const int next = slot ^ 1;
  if (opt_.exec.decode_ahead && req.more && !penalties && pos + 1 < n_ctx_) {
    decode_[next]->exec->wait();  // the step two tokens back (or a dropped one): normally long finished
    stage_decode(next, req.step + 1, {}, true);
    const int32_t ahead_tokens[1] = {0}, ahead_positions[1] = {pos + 1};  // the token comes from the device
    decode_[next]->exec->write_inputs(ahead_tokens, ahead_positions);
    decode_[next]->exec->run();
    ahead_ = Ahead{true, next, pos + 1, req.step + 1, 0};
  }
  decode_[slot]->exec->wait();
  const int32_t sampled = tokens_host_.as<int32_t>()[slot];
  ahead_.token = sampled;
  return sampled;
}

namespace {
int32_t next_pow2(int32_t n) { return int32_t(std::bit_ceil(uint32_t(std::max(n, 1)))); }
// A paged step's token bucket: a power of two, or 24 for 17..24 tokens where the small-batch products take three
// n-tiles of 8 tokens instead of four (BatchMmChoices::wide_three_tiles): a step of 20 sequences then costs less
// than one of 32. The bucket after tb is token_bucket(tb + 1).
int32_t token_bucket(int32_t n, bool with_24) { return with_24 && n > 16 && n <= 24 ? 24 : next_pow2(n); }
// Buckets of batch steps up to this many tokens are captured as CUDA graphs: decode steps and small mixed ones,
// replayed every step; larger ones are mostly prompt chunks, whose launches are long enough on their own.
constexpr int32_t kCapturedTokens = 64;
}  // namespace

CudaSession::Compiled& CudaSession::compiled_paged(int32_t n_tokens, int32_t n_outputs) {
  const auto key = std::make_pair(n_tokens, n_outputs);
  if (auto it = paged_graphs_.find(key); it != paged_graphs_.end()) return *it->second;
  const model::BatchShape shape{.n_tokens = n_tokens, .all_logits = false, .n_ctx = n_ctx_,
                                .block_size = paged_->block_size, .max_blocks = paged_->max_blocks,
                                .n_seq = paged_->n_seq, .n_outputs = n_outputs};
  if (opt_.verbose)
    detail("cuda: paged graph for " + std::to_string(n_tokens) + " tokens, " + std::to_string(n_outputs) +
           " outputs");
  std::unique_ptr<Compiled> c = compile(shape, n_tokens <= kCapturedTokens);
  auto* const ids = static_cast<int32_t*>(cuda::device_address_of_pinned(paged_ids_.get()));
  c->exec->set_tokens_gather(ids);
  if (opt_.exec.paged_host_io) c->exec->set_argmax_ring(c->argmax, ids, ids_stride_);  // no copy after each step
  return *paged_graphs_.emplace(key, std::move(c)).first->second;
}

// One output bucket per token bucket: as many rows as sequences can want logits (each of its tokens for a decode
// bucket). A prompt-chunk step then computes a few unread logits rows (a vocabulary product per row, small beside
// the chunk) so that every step of a token bucket reuses one graph.
int32_t CudaSession::output_bucket(int32_t token_bucket) const {
  return std::min(token_bucket, next_pow2(paged_->n_seq));
}

int32_t CudaSession::prepare_paged(int32_t max_tokens) {
  if (!paged_) return 0;
  PagedBatch b;
  b.block_table.assign(size_t(paged_->n_seq) * paged_->max_blocks, 0);
  int32_t shapes = 0;
  const bool with_24 = opt_.exec.batch_mm.wide_three_tiles;
  for (int32_t tb = 1;; tb = token_bucket(tb + 1, with_24)) {
    // Every token padding (position -1: no cache write): builds the graph, and a second run captures it.
    b.tokens.assign(size_t(tb), 0);
    b.positions.assign(size_t(tb), -1);
    b.kv_seq.assign(size_t(tb), 0);
    b.output_rows.assign(size_t(output_bucket(tb)), 0);
    b.need_logits = false;
    Compiled& c = compiled_paged(tb, output_bucket(tb));
    for (int run = 0; run < 2; ++run) {
      c.exec->write_inputs(graph::RunInputs{b.tokens, b.positions, b.kv_seq, b.block_table, b.output_rows});
      c.exec->run();
    }
    c.exec->wait();
    ++shapes;
    if (tb >= max_tokens) break;
  }
  return shapes;
}

std::span<const float> CudaSession::eval_paged(const PagedBatch& b) {
  if (!paged_) return Session::eval_paged(b);
  if (!launched_.empty()) throw SessionError("eval_paged: a launched step is not taken yet");
  launch_paged(b);
  return take_paged().logits;
}

void CudaSession::launch_paged(const PagedBatch& b) {
  if (!paged_) return Session::launch_paged(b);
  check_paged_batch(b, *paged_, n_vocab());
  check_paged_launch(b, launched_.size(), !launched_.empty() && launched_.back().wants_host, last_outputs_);
  // Padded to buckets (token_bucket): tokens at position -1 (no cache write, zero attention), output rows at token 0.
  const int32_t n = static_cast<int32_t>(b.tokens.size());
  const int32_t n_out = static_cast<int32_t>(b.output_rows.size());
  const int32_t tb = token_bucket(n, opt_.exec.batch_mm.wide_three_tiles), ob = output_bucket(tb);
  if (n_out > ob) throw SessionError("eval_paged: " + std::to_string(n_out) + " output rows, more than the " +
                                     std::to_string(ob) + " a batch of " + std::to_string(n) + " tokens may have");
  padded_.tokens.assign(b.tokens.begin(), b.tokens.end());
  padded_.positions.assign(b.positions.begin(), b.positions.end());
  padded_.kv_seq.assign(b.kv_seq.begin(), b.kv_seq.end());
  padded_.tokens.resize(size_t(tb), 0);
  padded_.positions.resize(size_t(tb), -1);
  padded_.kv_seq.resize(size_t(tb), 0);
  padded_.output_rows.assign(b.output_rows.begin(), b.output_rows.end());
  padded_.output_rows.resize(size_t(ob), 0);
  // Tokens from the step before: its argmax slot, which its copy below filled before this step's first kernel runs.
  gather_.clear();
  if (!b.token_from_row.empty()) {
    const int32_t before = int32_t((n_launched_ - 1) & 1) * ids_stride_;
    gather_.assign(size_t(tb), -1);
    for (int32_t t = 0; t < n; ++t)
      if (const int32_t r = b.token_from_row[size_t(t)]; r >= 0) gather_[size_t(t)] = before + r;
  }
  Compiled& c = compiled_paged(tb, ob);
  Launched l;
  l.slot = int(n_launched_ & 1);
  l.n_out = n_out;
  c.exec->write_inputs(graph::RunInputs{padded_.tokens, padded_.positions, padded_.kv_seq, b.block_table,
                                        padded_.output_rows},
                       gather_);
  if (opt_.exec.paged_host_io) c.exec->set_ring_slot(l.slot);  // the argmax kernel writes the ids there
  // A prompt step's products leave the bucket's padding out (captured graphs: all). The output matrix's columns are
  // the output rows, which may outnumber the tokens (a row may repeat): it computes at least those.
  c.exec->set_live_tokens(std::max(n, n_out));
  c.exec->run();
  const cudaStream_t stream = ctx_->compute();
  if (!opt_.exec.paged_host_io)
    CUDA_CHECK(cudaMemcpyAsync(paged_ids_.as<int32_t>() + size_t(l.slot) * size_t(ids_stride_),
                               c.exec->device_ptr(c.argmax), size_t(n_out) * 4, cudaMemcpyDeviceToHost, stream));
  const bool undrawn = launch_draws(b, c, n_out);
  l.drawn = !draws_.empty();
  if (l.drawn) {
    draw_asked_.resize(size_t(n_out));
    for (int32_t i = 0; i < n_out; ++i) draw_asked_[size_t(i)] = b.draws[size_t(i)].params != nullptr;
  }
  l.logits_out = n_out > 0 && (b.need_logits || undrawn);
  if (l.logits_out) copy_paged_logits(c, n_out);
  l.wants_host = b.need_logits || b.asks_draws();
  slot_done_[l.slot].record(stream);
  launched_.push_back(l);
  ++n_launched_;
  last_outputs_ = n_out;
  last_compiled_ = &c;
}

void CudaSession::copy_paged_logits(const Compiled& c, int32_t n_out) {
  const size_t bytes = size_t(n_out) * size_t(n_vocab()) * 4;
  if (paged_out_.bytes() < bytes) paged_out_ = cuda::PinnedBuffer(bytes);  // no step in flight writes it
  CUDA_CHECK(cudaMemcpyAsync(paged_out_.get(), c.exec->device_ptr(c.logits), bytes, cudaMemcpyDeviceToHost,
                             ctx_->compute()));
}

PagedResult CudaSession::take_paged() {
  if (!paged_) return Session::take_paged();
  if (launched_.empty()) throw SessionError("take_paged: no step is queued");
  const Launched l = launched_.front();
  launched_.pop_front();
  slot_done_[l.slot].synchronize();
  const int32_t* ids = paged_ids_.as<int32_t>() + size_t(l.slot) * size_t(ids_stride_);
  taken_argmax_.assign(ids, ids + l.n_out);
  argmax_ = taken_argmax_;
  draws_ = l.drawn ? std::span<const int32_t>(draw_out_.as<int32_t>(), size_t(l.n_out)) : std::span<const int32_t>{};
  // A row the kernel declined (a NaN or +inf logit) goes to the host's sampler, which says what is wrong. A step
  // with draws is the newest (launch_paged's rules), so its logits are still on the device.
  bool logits_out = l.logits_out;
  for (size_t i = 0; i < draws_.size() && !logits_out; ++i)
    if (draw_asked_[i] && draws_[i] == cuda::kRowNotDrawn) {
      copy_paged_logits(*last_compiled_, l.n_out);
      CUDA_CHECK(cudaStreamSynchronize(ctx_->compute()));
      logits_out = true;
    }
  const std::span<const float> logits =
      logits_out ? std::span<const float>(paged_out_.as<float>(), size_t(l.n_out) * size_t(n_vocab()))
                 : std::span<const float>{};
  return PagedResult{logits, argmax_, draws_};
}

bool CudaSession::launch_draws(const PagedBatch& b, const Compiled& c, int32_t n_out) {
  draws_ = {};
  if (b.draws.empty()) return false;
  if (!opt_.exec.device_draws) return true;  // LLM_CUDA_DEVICE_DRAWS=0: the host samples every row
  const int64_t V = n_vocab();
  auto* rows = draw_rows_.as<cuda::RowSampling>();
  auto* windows = draw_windows_.as<int32_t>();
  int32_t used = 0;
  bool undrawn = false;
  for (int32_t i = 0; i < n_out; ++i) {
    const RowDraw& d = b.draws[size_t(i)];
    cuda::RowSampling& r = rows[i];
    r = cuda::RowSampling{};
    if (!d.params) continue;
    r.cfg = to_device_config(*d.params);
    r.step = d.step;
    if (!d.params->logit_bias.empty()) {  // the kernel has no logit bias: the host's draw
      undrawn = true;
      continue;
    }
    std::span<const int32_t> window = r.cfg.penalties() ? d.history : std::span<const int32_t>{};
    if (r.cfg.repeat_last_n > 0 && window.size() > size_t(r.cfg.repeat_last_n))
      window = window.last(size_t(r.cfg.repeat_last_n));
    r.draw = cuda::sample_rows_draws(r.cfg, V, int32_t(window.size())) ? 1 : 0;
    undrawn |= !r.draw;
    if (!r.draw) continue;
    std::memcpy(windows + used, window.data(), window.size_bytes());
    r.window_offset = used, r.window_len = int32_t(window.size());
    used += r.window_len;
  }
  cuda::SampleRowsParams p;
  p.logits = static_cast<const float*>(c.exec->device_ptr(c.logits));
  p.V = V, p.row_stride = V, p.n_rows = n_out;
  p.rows = static_cast<const cuda::RowSampling*>(cuda::device_address_of_pinned(rows));
  p.windows = static_cast<const int32_t*>(cuda::device_address_of_pinned(windows));
  auto* out = draw_out_.as<int32_t>();
  p.out = static_cast<int32_t*>(cuda::device_address_of_pinned(out));
  cuda::launch_sample_rows(p, ctx_->compute());
  draws_ = std::span<const int32_t>(out, size_t(n_out));
  return undrawn;
}

std::unique_ptr<Session> make_cuda_session(std::shared_ptr<const model::Model> model, const SessionOptions& options) {
  CudaSessionOptions o;
  o.verbose = options.verbose;
  o.plan = CudaPlanShape{options.plan_batch, options.plan_all_logits};
  o.kv_type = options.kv_type;
  o.exec.cuda_graph = o.exec.cuda_graph && options.cuda_graph;  // o.exec: the environment's (CudaSessionOptions)
  o.log = options.log;
  o.progress = options.progress;
  o.n_seq = options.n_seq;
  o.kv_block_size = options.kv_block_size;
  o.half_weights_budget = options.half_weights_bytes;
  if (!o.exec.omit_steps_of.empty())
    log(o.log, LogLevel::Warning, "LLM_CUDA_OMIT_STEPS is set: those steps are left out, every result is wrong "
                                  "(timing only)");
  return std::make_unique<CudaSession>(std::move(model), options.n_ctx, o);
}

}  // namespace runtime
#endif  // LLM_HAVE_CUDA_SESSION
