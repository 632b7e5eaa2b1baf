// The CPU reference kernels (see reference_ops.h). Written for clarity first; the only speed concessions are the
// eight-lane dot product and the row split over threads for large products, neither of which changes any result.
#include "graph/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/thread_pool.h"
#include "quant/types.h"

namespace graph::ref {
namespace {

// Below this many multiply-adds a product runs on the calling thread: waking the workers costs more (~10-50 us).
constexpr int64_t kParallelWork = int64_t{1} << 18;

// One token's K or V row (every kv head, n values) into its cache slot as the cache type stores it: F16 keeps the
// floats; Q8_0 and Q4_0 round them through the CPU quantizer of the GGUF type of that name (the rounding graph/ir.h
// defines for the cache) and keep the dequantized values. Blocks of 32 never straddle two heads: head dims are
// multiples of 32 (checked when the cache is made).
void store_kv(KvType type, const float* src, float* dst, int64_t n) {
  if (type == KvType::F16) {
    std::copy(src, src + n, dst);
    return;
  }
  const quant::Type q = kv_block_type(type);
  std::vector<uint8_t> blocks(quant::row_bytes(q, n));
  quant::quantize_row(q, src, blocks.data(), n);
  quant::dequantize_row(q, blocks.data(), dst, n);
}

// The first cache slot the query at position pos sees: 0, or with a sliding window the oldest of the last `window`.
int64_t first_slot(int32_t pos, int32_t window) {
  return window > 0 ? std::max<int64_t>(0, int64_t{pos} - window + 1) : 0;
}

}  // namespace

double dot(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums (lane j takes the indices = j mod 8): a fixed order, so results are reproducible,
  // that does not serialise on one add chain and that compilers map onto vector registers.
  double s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(a[i + j]) * b[i + j];
  for (; i < n; ++i) s[0] += static_cast<double>(a[i]) * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void mul_mat(const MulMatArgs& a, ThreadPool* pool) {
  auto rows = [&a](int64_t n0, int64_t n1, int) {
    // A quantized matrix is dequantized one row at a time (the same floats a whole-matrix copy would hold, so the
    // same results) instead of keeping a float copy of every weight: memory stays at the file's size.
    std::vector<float> row(a.wq ? static_cast<size_t>(a.k) : 0);
    for (int64_t n = n0; n < n1; ++n) {
      const float* w = a.w ? a.w + n * a.k : row.data();
      if (!a.w) quant::dequantize_row(a.wtype, a.wq + static_cast<size_t>(n) * a.row_bytes, row.data(), a.k);
      const double bias = a.bias ? a.bias[n] : 0.0;
      for (int64_t t = 0; t < a.t; ++t)
        a.out[t * a.n + n] = static_cast<float>(dot(w, a.x + t * a.k, a.k) + bias);
    }
  };
  if (pool && pool->size() > 1 && a.n * a.k * a.t >= kParallelWork) {
    pool->parallel_for(a.n, rows);
  } else {
    rows(0, a.n, 0);
  }
}

void rms_norm(const RmsNormArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ne0;
    float* y = a.out + r * a.ne0;
    const double scale = 1.0 / std::sqrt(dot(x, x, a.ne0) / static_cast<double>(a.ne0) + a.eps);
    for (int64_t i = 0; i < a.ne0; ++i)
      y[i] = static_cast<float>(x[i] * scale * (a.w ? static_cast<double>(a.w[i]) : 1.0));
  }
}

void rope(const RopeArgs& a) {
  const int64_t half = a.p.n_rot / 2;
  double* cs = a.trig;          // cos, [half]
  double* sn = a.trig + half;   // sin, [half]
  const bool yarn = a.p.ext_factor != 0.0f;
  for (int64_t t = 0; t < a.t; ++t) {
    const double pos = static_cast<double>(a.positions[t]) * a.p.freq_scale;
    for (int64_t i = 0; i < half; ++i) {
      const double power = std::pow(static_cast<double>(a.p.freq_base), -2.0 * static_cast<double>(i) / a.p.n_rot);
      double theta = pos * power;  // the interpolated (scaled) angle
      if (a.freq_factors) theta /= a.freq_factors[i];
      if (yarn) {
        // YaRN: the highest-frequency pairs keep their unscaled angle, the lowest take the scaled one, a linear
        // ramp between the correction dims.
        double extrap = static_cast<double>(a.positions[t]) * power;
        if (a.freq_factors) extrap /= a.freq_factors[i];
        const double y = (static_cast<double>(i) - a.p.corr_low) /
                         std::max(0.001, static_cast<double>(a.p.corr_high) - a.p.corr_low);
        const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * a.p.ext_factor;
        theta = theta * (1.0 - mix) + extrap * mix;
      }
      cs[i] = std::cos(theta) * a.p.attn_factor;
      sn[i] = std::sin(theta) * a.p.attn_factor;
    }
    for (int64_t h = 0; h < a.n_head; ++h) {
      const float* x = a.x + (t * a.n_head + h) * a.head_dim;
      float* y = a.out + (t * a.n_head + h) * a.head_dim;
      // Normal pairs neighbours (2i, 2i+1); Neox pairs the two halves of the rotated part (i, i + n_rot/2).
      const int64_t stride = a.p.mode == RopeMode::Neox ? half : 1;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = a.p.mode == RopeMode::Neox ? i : 2 * i;
        const double x0 = x[i0], x1 = x[i0 + stride];
        y[i0] = static_cast<float>(x0 * cs[i] - x1 * sn[i]);
        y[i0 + stride] = static_cast<float>(x0 * sn[i] + x1 * cs[i]);
      }
      for (int64_t d = a.p.n_rot; d < a.head_dim; ++d) y[d] = x[d];
    }
  }
}

int64_t attention_scratch_per_thread(const KvCacheSpec& kv) {
  return int64_t{std::max(kv.n_ctx, kv.seq_capacity())} + kv.head_dim_v;
}

namespace {

// Where attention finds token t's position `pos`: the slot itself for one sequence, through the block table of
// the token's row when paged.
struct SlotMap {
  const AttentionArgs& a;
  int64_t operator()(int64_t t, int64_t pos) const {
    if (!a.block_table) return pos;
    const int64_t block = a.block_table[int64_t{a.kv_seq[t]} * a.max_blocks + pos / a.block_size];
    return block * a.block_size + pos % a.block_size;
  }
};

// Every slot a token writes or reads must exist: checked for the whole batch before the cache changes.
void check_attention_batch(const AttentionArgs& a) {
  auto fail = [&](int64_t t, const std::string& what) {
    throw std::out_of_range("attention (layer " + std::to_string(a.p.layer) + "): token " + std::to_string(t) + ": " +
                            what);
  };
  const bool paged = a.block_table != nullptr;
  const int64_t capacity = paged ? int64_t{a.max_blocks} * a.block_size : a.n_ctx;
  for (int64_t t = 0; t < a.t; ++t) {
    const int32_t pos = a.positions[t];
    if (paged && pos == -1) continue;  // padding
    if (pos < 0 || pos >= capacity)
      fail(t, "position " + std::to_string(pos) + " is outside the KV cache of " + std::to_string(capacity) +
                  (paged ? " positions per sequence" : " slots"));
    if (!paged) continue;
    const int32_t row = a.kv_seq[t];
    if (row < 0 || row >= a.n_seq)
      fail(t, "block-table row " + std::to_string(row) + " is outside [0, " + std::to_string(a.n_seq) + ")");
    const int64_t n_blocks = a.n_ctx / a.block_size;
    for (int64_t b = first_slot(pos, a.p.window) / a.block_size; b <= pos / a.block_size; ++b) {
      const int32_t block = a.block_table[int64_t{row} * a.max_blocks + b];
      if (block < 0 || block >= n_blocks)
        fail(t, "block " + std::to_string(block) + " (entry " + std::to_string(b) + " of row " +
                    std::to_string(row) + ") is outside the pool of " + std::to_string(n_blocks) + " blocks");
    }
  }
}

}  // namespace

void attention(const AttentionArgs& a, ThreadPool* pool) {
  const int64_t hd = a.p.head_dim, hdv = a.p.head_dim_v, nh = a.p.n_head, nkv = a.p.n_head_kv;
  check_attention_batch(a);
  const SlotMap slot_of{a};
  // The whole batch enters the cache first, so token t sees every token of its sequence in the batch at a position
  // <= its own.
  for (int64_t t = 0; t < a.t; ++t) {
    if (a.positions[t] < 0) continue;  // padding
    const int64_t slot = slot_of(t, a.positions[t]);
    store_kv(a.kv_type, a.k + t * nkv * hd, a.k_cache + slot * nkv * hd, nkv * hd);
    store_kv(a.kv_type, a.v + t * nkv * hdv, a.v_cache + slot * nkv * hdv, nkv * hdv);
  }
  const int64_t group = nh / nkv;
  auto heads = [&](int64_t j0, int64_t j1, int thread) {
    double* score = a.scratch + thread * a.scratch_stride;  // [positions]
    double* acc = score + (a.scratch_stride - hdv);          // [hdv]
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t t = j / nh, h = j % nh, kvh = h / group;
      float* out = a.out + t * nh * hdv + h * hdv;
      if (a.positions[t] < 0) {  // padding
        for (int64_t d = 0; d < hdv; ++d) out[d] = 0.0f;
        continue;
      }
      const int64_t n_slots = int64_t{a.positions[t]} + 1;
      const int64_t first = first_slot(a.positions[t], a.p.window);
      const float* q = a.q + (t * nh + h) * hd;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t s = first; s < n_slots; ++s) {
        score[s] = static_cast<double>(a.p.scale) * dot(q, a.k_cache + (slot_of(t, s) * nkv + kvh) * hd, hd);
        if (score[s] > max) max = score[s];
      }
      // A sink is one more (unscaled) logit in the softmax with no value row: it only enlarges the denominator.
      const double sink = a.sinks ? static_cast<double>(a.sinks[h]) : -std::numeric_limits<double>::infinity();
      if (sink > max) max = sink;
      double sum = a.sinks ? std::exp(sink - max) : 0.0;
      for (int64_t s = first; s < n_slots; ++s) {
        score[s] = std::exp(score[s] - max);
        sum += score[s];
      }
      for (int64_t d = 0; d < hdv; ++d) acc[d] = 0;
      for (int64_t s = first; s < n_slots; ++s) {
        const float* v = a.v_cache + (slot_of(t, s) * nkv + kvh) * hdv;
        for (int64_t d = 0; d < hdv; ++d) acc[d] += score[s] * v[d];
      }
      for (int64_t d = 0; d < hdv; ++d) out[d] = static_cast<float>(acc[d] / sum);
    }
  };
  int64_t work = 0;
  for (int64_t t = 0; t < a.t; ++t)
    if (a.positions[t] >= 0)
      work += (int64_t{a.positions[t]} + 1 - first_slot(a.positions[t], a.p.window)) * nh * (hd + hdv);
  if (pool && pool->size() > 1 && work >= kParallelWork) {
    pool->parallel_for(a.t * nh, heads);
  } else {
    heads(0, a.t * nh, 0);
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, int64_t nb, float* out, int64_t n) {
  if (nb == n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
    return;
  }
  for (int64_t r = 0; r < n; r += nb)
    for (int64_t i = 0; i < nb; ++i) out[r + i] = a[r + i] * b[i];
}

void silu(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i];
    out[i] = static_cast<float>(x / (1.0 + std::exp(-x)));
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

double gelu_tanh(double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * x * (1.0 + 0.044715 * x * x)));
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu_tanh(gate[i]) * up[i]);
}

void scale(const float* a, float s, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(a[i]) * s);
}

void softcap(const float* a, float cap, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cap * std::tanh(static_cast<double>(a[i]) / cap));
}

void slice(const float* a, int64_t ne0, int64_t rows, int64_t offset, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) std::copy(a + r * ne0 + offset, a + r * ne0 + offset + n, out + r * n);
}

void softmax(const float* a, float* out, int64_t ne0, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * ne0;
    float* y = out + r * ne0;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < ne0; ++i)
      if (x[i] > max) max = x[i];
    double sum = 0;
    for (int64_t i = 0; i < ne0; ++i) sum += std::exp(x[i] - max);
    for (int64_t i = 0; i < ne0; ++i) y[i] = static_cast<float>(std::exp(x[i] - max) / sum);
  }
}

void argmax(const float* a, int32_t* out, int64_t ne0, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * ne0;
    int64_t best = 0;
    for (int64_t i = 1; i < ne0; ++i)
      if (x[i] > x[best]) best = i;
    out[r] = static_cast<int32_t>(best);
  }
}

}  // namespace graph::ref
