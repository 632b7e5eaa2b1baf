// Many rows of logits sampled at once, each with its own parameters, seed, draw counter and penalty window: the
// paged (serving) session's per-sequence sampling. Every row picks exactly the token runtime::Sampler picks
// (runtime/sampler.h is the specification), without sorting the vocabulary: one block per row finds the row's
// top k by a radix select on the logits' bits, sorts only those candidates, and walks them as the CPU does.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/sampling.cuh"

namespace cuda {

// Limits of the one-block-a-row kernel; a row outside them is left to the host (kRowNotDrawn).
constexpr int32_t kSampleRowsMaxTopK = 1024;     // candidates a draw may need (the top-k clamp; 1 for greedy)
constexpr int32_t kSampleRowsMaxWindow = 512;    // penalty-window tokens
constexpr int32_t kSampleRowsMaxCandidates = 4096;  // logits tied with the k-th largest's radix bin, sorted in full

constexpr int32_t kRowNotDrawn = -1;  // out[r]: the row is left to the host (outside the limits, or non-finite)

// One row's draw. The window is the history's last repeat_last_n tokens (all for -1), as runtime::apply_penalties
// takes them; empty when the penalties are off.
struct RowSampling {
  SamplingConfig cfg;
  uint64_t step = 0;               // Philox counter of this draw
  int32_t window_offset = 0;       // into SampleRowsParams::windows
  int32_t window_len = 0;
  int32_t draw = 0;                // 0: not drawn (out = kRowNotDrawn), 1: drawn
  int32_t pad = 0;
};

struct SampleRowsParams {
  const float* logits = nullptr;   // [n_rows][row_stride], V valid values a row
  int64_t V = 0;
  int64_t row_stride = 0;
  int32_t n_rows = 0;
  const RowSampling* rows = nullptr;  // [n_rows], memory the device can read (page-locked host memory is fine)
  const int32_t* windows = nullptr;   // the rows' windows, likewise
  int32_t* out = nullptr;             // [n_rows]: the token, or kRowNotDrawn (also when a logit is NaN or +inf:
                                      // the host's sampler then reports it)
};

// Whether the kernel draws a row of these parameters (and V, window length) itself.
bool sample_rows_draws(const SamplingConfig& c, int64_t V, int32_t window_len);

void launch_sample_rows(const SampleRowsParams& p, cudaStream_t stream);

}  // namespace cuda
