// KV write + attention (the tensor-core prefill and split kernels, head_dim 64, 128 and 256; the per-head split kernel
// for odd groups and other head sizes)
// against a double-precision causal softmax over the f16-rounded cache; a q8_0 or q4_0 cache against the same
// softmax over the values the host quantizer gives, and its writers (kv_write, rope_kv) against the host
// quantizer's bytes.
#include <cstring>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/attention_prefill.cuh"
#include "cuda/kernels/attention_split_tc.cuh"
#include "cuda/kernels/rope.cuh"
#include "gpu_test.h"

namespace {

using namespace gpu_test;
using graph::KvType;

struct Case {
  int64_t nh, nkv, hd, n_ctx, prefix, T;
  int32_t max_splits;  // 0: attention_max_splits's choice
  KvType kv = KvType::F16;
  int32_t window = 0;  // > 0: a sliding-window layer (the query at p sees slots p - window + 1 .. p)
  bool sinks = false;  // per-head attention-sink logits in the softmax denominator (gpt-oss)
};

double h16(float f) { return quant::f16_to_f32(quant::f32_to_f16(f)); }

// x (whole 32-value blocks) as quant::quantize_row(Q8_0) stores it: per block the quants and the binary16 scale.
void host_q8_0(const float* x, int64_t n, int8_t* quants, uint16_t* scales) {
  std::vector<uint8_t> blocks(quant::row_bytes(quant::Type::Q8_0, n));
  quant::quantize_row(quant::Type::Q8_0, x, blocks.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    std::memcpy(&scales[b], &blocks[size_t(b) * 34], 2);
    std::memcpy(&quants[b * 32], &blocks[size_t(b) * 34 + 2], 32);
  }
}

// x (whole 32-value blocks) as quant::quantize_row(Q4_0) stores it: per block 16 bytes of nibbles and the scale.
void host_q4_0(const float* x, int64_t n, uint8_t* quants, uint16_t* scales) {
  std::vector<uint8_t> blocks(quant::row_bytes(quant::Type::Q4_0, n));
  quant::quantize_row(quant::Type::Q4_0, x, blocks.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    std::memcpy(&scales[b], &blocks[size_t(b) * 18], 2);
    std::memcpy(&quants[b * 16], &blocks[size_t(b) * 18 + 2], 16);
  }
}

// The values a q8_0 or q4_0 cache holds for x: host quantizer, then host dequantizer.
std::vector<float> kv_roundtrip(KvType kv, const std::vector<float>& x) {
  const quant::Type t = graph::kv_block_type(kv);
  std::vector<uint8_t> blocks(quant::row_bytes(t, int64_t(x.size())));
  quant::quantize_row(t, x.data(), blocks.data(), int64_t(x.size()));
  std::vector<float> out(x.size());
  quant::dequantize_row(t, blocks.data(), out.data(), int64_t(out.size()));
  return out;
}

// Quant bytes of one slot's row of hd values: q8_0 one per value, q4_0 one per two.
int64_t row_bytes(KvType kv, int64_t hd) { return kv == KvType::Q4_0 ? hd / 2 : hd; }

// One layer's cache on the device: f16 values, or q8_0 / q4_0 quants [row_bytes, n_ctx, nkv] and scales
// [hd / 32, n_ctx, nkv].
struct DeviceCache {
  cuda::DeviceBuffer k, v, k_scales, v_scales;
  DeviceCache(KvType kv, int64_t hd, int64_t hdv, int64_t n_ctx, int64_t nkv)
      : k(size_t((kv == KvType::F16 ? 2 * hd : row_bytes(kv, hd)) * n_ctx * nkv)),
        v(size_t((kv == KvType::F16 ? 2 * hdv : row_bytes(kv, hdv)) * n_ctx * nkv)),
        k_scales(kv != KvType::F16 ? size_t(hd / 32 * n_ctx * nkv * 2) : 0),
        v_scales(kv != KvType::F16 ? size_t(hdv / 32 * n_ctx * nkv * 2) : 0) {}
};

void run_case(const Case& c, std::mt19937& rng) {
  const int64_t hd = c.hd, hdv = c.hd;
  const bool quantized = c.kv != KvType::F16;
  const std::string what = std::string(quantized ? graph::kv_type_name(c.kv) : "") + " attention nh=" +
                           std::to_string(c.nh) +
                           " nkv=" + std::to_string(c.nkv) + " hd=" + std::to_string(hd) +
                           " ctx=" + std::to_string(c.n_ctx) + " prefix=" + std::to_string(c.prefix) +
                           " T=" + std::to_string(c.T) + " max_splits=" + std::to_string(c.max_splits) +
                           (c.window ? " window=" + std::to_string(c.window) : "") + (c.sinks ? " sinks" : "");
  const int64_t total = c.prefix + c.T;  // tokens in the cache after both writes
  const auto k = random_floats(rng, hd * c.nkv * total, -2, 2);
  const auto v = random_floats(rng, hdv * c.nkv * total);
  const auto q = random_floats(rng, hd * c.nh * c.T);
  // Sinks of the size of the scores and above, so that they take a visible share of each softmax.
  const auto sinks = random_floats(rng, size_t(c.nh), -1.0f, 3.0f);
  auto dsinks = upload(sinks);
  std::vector<int32_t> pos(total);
  for (int64_t i = 0; i < total; ++i) pos[i] = int32_t(i);
  // What the cache holds before the f16 rounding of the tensor-core tiles: the values, or their round trip.
  const std::vector<float> k_held = quantized ? kv_roundtrip(c.kv, k) : k;
  const std::vector<float> v_held = quantized ? kv_roundtrip(c.kv, v) : v;

  DeviceCache cache(c.kv, hd, hdv, c.n_ctx, c.nkv);
  // Zeroed, as the session's cache is: the test downloads whole caches, slots past the written prefix included.
  for (const auto* b : {&cache.k, &cache.v, &cache.k_scales, &cache.v_scales})
    if (b->bytes()) CUDA_CHECK(cudaMemset(b->get(), 0, b->bytes()));
  auto dk = upload(k), dv = upload(v), dq = upload(q), dp = upload(pos);
  // Prefix as one batch, then the queried batch, as a prefill followed by decode steps would.
  auto write = [&](int64_t t0, int64_t n) {
    cuda::KvWriteParams w{dk.as<float>() + t0 * hd * c.nkv, dv.as<float>() + t0 * hdv * c.nkv, dp.as<int32_t>() + t0,
                          cache.k.get(), cache.v.get(), c.n_ctx, c.nkv, hd, hdv, n};
    w.kv_type = c.kv, w.k_scales = cache.k_scales.as<uint16_t>(), w.v_scales = cache.v_scales.as<uint16_t>();
    cuda::launch_kv_write(w, nullptr);
  };
  if (c.prefix) write(0, c.prefix);
  write(c.prefix, c.T);

  const int32_t splits = c.max_splits ? c.max_splits : cuda::attention_max_splits(c.n_ctx, c.nkv, c.T, 132);
  cuda::DeviceBuffer partial(cuda::attention_scratch_floats(c.nh, hdv, c.T, splits) * 4);
  CUDA_CHECK(cudaMemset(partial.get(), 0, partial.bytes()));
  auto out = poisoned_f32(hdv * c.nh * c.T);
  const float scale = 1.0f / std::sqrt(float(hd));
  cuda::AttentionKernelParams p;
  p.q = dq.as<float>(), p.positions = dp.as<int32_t>() + c.prefix, p.k_cache = cache.k.get();
  p.v_cache = cache.v.get(), p.out = out.as<float>(), p.partial = partial.as<float>();
  p.n_ctx = c.n_ctx, p.n_head = c.nh, p.n_head_kv = c.nkv, p.hd = hd, p.hd_v = hdv, p.T = c.T, p.scale = scale;
  p.max_splits = splits, p.window = c.window;
  p.sinks = c.sinks ? dsinks.as<float>() : nullptr;
  p.kv_type = c.kv, p.k_scales = cache.k_scales.as<uint16_t>(), p.v_scales = cache.v_scales.as<uint16_t>();
  // The half outputs beside them (AttentionKernelParams::out_half), as a product reading x in half asks for.
  cuda::DeviceBuffer out_half(size_t(hdv * c.nh * c.T) * 2);
  p.out_half = out_half.as<__half>();
  // Twice, the outputs poisoned in between: the second launch must find the split counters back at zero.
  cuda::launch_attention(p, nullptr);
  CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
  CUDA_CHECK(cudaMemset(out_half.get(), 0xff, out_half.bytes()));
  cuda::launch_attention(p, nullptr);

  // The tensor-core kernels take Q x scale rounded to f16 (the reference does the same) and round the softmax
  // weights P to f16 for P V: |error| <= 2^-11 max|v| (weights sum to one) on top of f32 accumulation. A q8_0 or
  // q4_0 cache reaches their tiles as f16(q x scale), the f16 rounding of the host's dequantized value: the
  // reference uses exactly that; except the split kernel's quantized K, which enters the products as exact small
  // integers with the scale applied in f32 after them (the host's dequantized value, unrounded).
  const bool prefill = cuda::attention_prefill_applies(p);
  const bool tensor_cores = prefill || cuda::attention_split_tc_applies(p);
  const bool k_exact = tensor_cores && !prefill && quantized;
  if (quantized) {
    EXPECT_TRUE(tensor_cores) << what;
  }
  double v_max = 0;
  for (float x : v_held) v_max = std::max(v_max, double(std::fabs(x)));
  const double abs_tol = tensor_cores ? v_max / 2048 + 2e-5 : 2e-6;
  const double rel_tol = tensor_cores ? 0.0 : 1e-5;
  std::vector<double> ref(hdv * c.nh * c.T);
  const int64_t group = c.nh / c.nkv;
  // The operands as the kernels see them, rounded once up front (the head_dim-256 cases reach 16k slots).
  std::vector<double> qd(q.size()), kd(k_held.size()), vd(v_held.size());
  for (size_t i = 0; i < q.size(); ++i) qd[i] = tensor_cores ? h16(q[i] * scale) : double(q[i]);
  for (size_t i = 0; i < k_held.size(); ++i) kd[i] = k_exact ? double(k_held[i]) : h16(k_held[i]);
  for (size_t i = 0; i < v_held.size(); ++i) vd[i] = h16(v_held[i]);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t h = 0; h < c.nh; ++h) {
      const int64_t kvh = h / group, last = c.prefix + t;
      const int64_t first = c.window ? std::max<int64_t>(0, last - c.window + 1) : 0;  // the window's first slot
      std::vector<double> s(last + 1, -1e300);
      double mx = -1e300, sum = 0;
      for (int64_t j = first; j <= last; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) {
          const double qe = qd[(t * c.nh + h) * hd + e], kj = kd[(j * c.nkv + kvh) * hd + e];
          d += tensor_cores ? qe * kj : qe * kj * scale;
        }
        s[j] = d, mx = std::max(mx, s[j]);
      }
      for (int64_t j = first; j <= last; ++j) s[j] = std::exp(s[j] - mx), sum += s[j];
      if (c.sinks) sum += std::exp(double(sinks[size_t(h)]) - mx);
      for (int64_t e = 0; e < hdv; ++e) {
        double a = 0;
        for (int64_t j = first; j <= last; ++j) a += s[j] * vd[(j * c.nkv + kvh) * hdv + e];
        ref[(t * c.nh + h) * hdv + e] = a / sum;
      }
    }
  const std::vector<float> got = download<float>(out, ref.size());
  EXPECT_TRUE(close(what + (tensor_cores ? " (tensor cores)" : ""), got, ref, {abs_tol}, rel_tol));
  // Every half output is its float output rounded to nearest even, as the conversion launch it replaces rounds.
  const std::vector<uint16_t> got_half = download<uint16_t>(out_half, ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(got_half[i], quant::f32_to_f16(got[i])) << what << " half output " << i;

  // The cache holds the f16 rounding of what was written, or the host quantizer's bytes, in the documented layout.
  const int64_t j = total - 1, kvh = c.nkv - 1;
  const float* k_row = &k[(j * c.nkv + kvh) * hd];
  if (!quantized) {
    const auto kh = download<uint16_t>(cache.k, hd * c.n_ctx * c.nkv);
    for (int64_t e = 0; e < hd; ++e) ASSERT_EQ(kh[(kvh * c.n_ctx + j) * hd + e], quant::f32_to_f16(k_row[e])) << what;
    return;
  }
  const int64_t rb = row_bytes(c.kv, hd);
  const auto kq = download<uint8_t>(cache.k, rb * c.n_ctx * c.nkv);
  const auto ks = download<uint16_t>(cache.k_scales, hd / 32 * c.n_ctx * c.nkv);
  std::vector<uint8_t> want_q(rb);
  std::vector<uint16_t> want_s(hd / 32);
  if (c.kv == KvType::Q4_0) host_q4_0(k_row, hd, want_q.data(), want_s.data());
  else host_q8_0(k_row, hd, reinterpret_cast<int8_t*>(want_q.data()), want_s.data());
  for (int64_t e = 0; e < rb; ++e) ASSERT_EQ(kq[(kvh * c.n_ctx + j) * rb + e], want_q[e]) << what;
  for (int64_t b = 0; b < hd / 32; ++b) ASSERT_EQ(ks[(kvh * c.n_ctx + j) * (hd / 32) + b], want_s[b]) << what;
}

TEST(AttentionKernels, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  const Case cases[] = {
      // per-head kernel (head_dim not 64/128/256, or a group of 3 or 6) and the tensor-core split kernel (head_dim
      // 64/128/256, groups 1, 2, 4, 8)
      {4, 4, 8, 16, 0, 5, 0},        // tiny heads (stories260K-like), prefill only
      {8, 4, 8, 64, 10, 1, 0},       // decode after a prefix
      {8, 2, 64, 300, 37, 7, 64},    // GQA 4:1, several splits
      {6, 1, 128, 1000, 700, 1, 0},  // MQA decode, long context, computed split
      {4, 2, 128, 1000, 900, 3, 100},
      {2, 2, 256, 130, 0, 129, 0},   // largest head, long prefill (tensor-core prefill kernel)
      {32, 8, 128, 4096, 4000, 1, 0},
      {8, 1, 128, 2000, 1500, 1, 0},   // group of 8
      {16, 8, 64, 700, 650, 2, 0},     // group of 2, head_dim 64
      {6, 2, 128, 500, 400, 1, 0},     // group of 3: per-head kernel
      {4, 1, 256, 3000, 2900, 1, 3},   // 3 splits of ~967 slots
      {32, 8, 128, 5000, 30, 1, 0},    // short position in a long cache: one split holds every slot
      // tensor-core kernel (T >= 16, head_dim 64/128): partial query tiles, a prefix, groups 1 to 8
      {8, 2, 128, 600, 0, 200, 0},     // prefill from empty, 200 = 3 tiles + 8 rows
      {4, 4, 64, 300, 37, 16, 0},      // smallest batch after an unaligned prefix
      {8, 1, 128, 1100, 900, 70, 0},   // group of 8, many cache tiles, a tile edge inside the batch
      {6, 2, 64, 256, 0, 256, 0},      // group of 3, the whole cache
      {2, 2, 256, 300, 0, 40, 0},      // head_dim 256, a short prefill
      {16, 4, 128, 300, 100, 5, 0},    // tensor-core split kernel, a short batch of 5 tokens
      {8, 8, 64, 20000, 16400, 1, 0},  // 16k context, groups of 1, tiles of 64 slots per split
      {32, 8, 128, 1000, 230, 1, 0},   // 4 tiles: one split streams them all (kSerialTiles), no merge
      {32, 8, 128, 1000, 256, 1, 0},   // 5 tiles: the first position that splits again
  };
  for (const auto& c : cases) run_case(c, rng);
}

// Sliding-window layers (gemma3's local layers): the tensor-core kernels mask the slots before p - window + 1, in
// decode (one and a few tokens; windows inside one warp's 16 slots, across tiles and splits, longer than the
// context) and in prefill (rows whose windows start at different slots), for every cache type.
TEST(AttentionKernels, SlidingWindowMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(15);
  for (const KvType kv : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    const Case cases[] = {
        {8, 2, 64, 600, 300, 1, 0, kv, 8},       // decode: the window inside one warp's slots
        {8, 1, 128, 2000, 1500, 1, 0, kv, 100},  // across tiles, splits wholly before the window
        {4, 4, 64, 1001, 900, 3, 100, kv, 512},  // forced one-tile splits, a window of many tiles
        {16, 4, 128, 300, 20, 5, 0, kv, 1024},   // a window longer than the context: no slot masked
        {8, 2, 128, 600, 0, 200, 0, kv, 8},      // prefill from empty
        {4, 4, 64, 1001, 300, 100, 0, kv, 64},   // prefill after a prefix
    };
    for (const auto& c : cases) run_case(c, rng);
  }
  // Head_dim 256 (every Gemma 3; its local layers' window is 1024): the tensor-core kernels' head_dim-256 forms,
  // for every cache type.
  for (const KvType kv : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    const Case hd256[] = {
        {16, 8, 256, 3000, 2500, 1, 0, kv, 1024},  // Gemma-3-12B's heads, computed splits over the window's tiles
        {4, 2, 256, 3000, 2900, 1, 3, kv, 1024},   // 3 splits of the window's 17 tiles
        {8, 4, 256, 600, 300, 1, 0, kv, 8},        // the window inside one warp's slots
        {4, 1, 256, 1001, 900, 3, 100, kv, 512},   // forced one-tile splits, a window of many tiles
        {8, 2, 256, 600, 250, 7, 0, kv, 300},      // a window longer than some positions' prefixes
        {8, 4, 256, 600, 0, 200, 0, kv, 8},        // prefill from empty
        {4, 4, 256, 1001, 300, 100, 0, kv, 64},    // prefill after a prefix, rows' windows in different tiles
        {16, 8, 256, 2000, 1000, 64, 0, kv, 1024}, // prefill of Gemma-3-12B's heads, a window longer than a tile
    };
    for (const auto& c : hd256) run_case(c, rng);
  }
}

// Attention sinks (gpt-oss: head_dim 64, groups of 4 and 8; and head_dim 128, 256): the split kernel with one split
// and with merged splits, the prefill kernel, with and without a sliding window, for every cache type.
TEST(AttentionKernels, SinksMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  for (const KvType kv : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    const Case cases[] = {
        {8, 2, 64, 300, 5, 1, 0, kv, 0, true},       // decode, one split
        {64, 8, 64, 2000, 1500, 1, 0, kv, 0, true},  // gpt-oss-20b's heads, merged splits
        {8, 2, 64, 600, 300, 1, 0, kv, 16, true},    // a sliding-window layer
        {8, 2, 64, 300, 20, 5, 0, kv, 0, true},      // a short batch
        {8, 2, 64, 600, 0, 100, 0, kv, 0, true},     // prefill
        {64, 8, 64, 600, 100, 40, 0, kv, 16, true},  // prefill with a window after a prefix
        {8, 2, 128, 1000, 900, 3, 100, kv, 0, true}, // head_dim 128, forced splits
        {16, 8, 256, 2000, 1500, 1, 0, kv, 0, true}, // head_dim 256: merged splits
        {8, 2, 256, 300, 5, 1, 0, kv, 0, true},      // one split
        {4, 2, 256, 600, 300, 1, 0, kv, 16, true},   // a sliding-window layer
        {8, 2, 256, 600, 100, 40, 0, kv, 16, true},  // prefill with a window after a prefix
    };
    for (const auto& c : cases) run_case(c, rng);
  }
}

TEST(AttentionKernels, RejectsBadParams) {
  cuda::AttentionKernelParams p;
  EXPECT_THROW(cuda::launch_attention(p, nullptr), cuda::InvalidArgument);
}

// A q8_0 or q4_0 cache through the two tensor-core kernels: decode (one and a few tokens, prefixes over many 64-slot
// tiles, computed and forced split counts so that splits hold one or several tiles), prefill (16+ tokens, with and
// without a prefix), head_dim 64 and 128, groups 1, 2, 4, 8, cache lengths that are no multiple of 4 (so a slot's
// scales are only 4-byte aligned for head_dim 64).
std::vector<Case> quantized_cases(KvType kv) {
  return {
      {8, 8, 64, 1001, 0, 1, 0, kv},        // the first token: one slot, one split
      {32, 8, 128, 4096, 4000, 1, 0, kv},   // the 8B's shape, ~2 tiles per split
      {8, 1, 128, 2000, 1500, 1, 0, kv},    // group of 8
      {16, 8, 64, 1001, 650, 2, 0, kv},     // group of 2, head_dim 64, n_ctx odd
      {4, 2, 128, 1000, 900, 3, 100, kv},   // one tile per split
      {8, 2, 128, 3001, 2900, 1, 3, kv},    // 3 splits of ~15 tiles: the two-stage ring goes round many times
      {4, 4, 64, 1001, 99, 1, 1, kv},       // a single split over two tiles, the last warp's slots partly past
      {32, 8, 128, 5000, 30, 1, 0, kv},     // short position in a long cache: the result without a merge
      {16, 4, 128, 300, 100, 5, 0, kv},     // a short batch of 5 tokens
      {8, 8, 64, 20001, 16400, 1, 0, kv},   // 16k context
      {32, 8, 128, 1000, 230, 1, 0, kv},    // 4 tiles in one split (kSerialTiles): the ring goes round twice
      {32, 8, 128, 1000, 256, 1, 0, kv},    // 5 tiles: split again
      // prefill kernel
      {8, 2, 128, 600, 0, 200, 0, kv},      // from empty, 200 = 3 tiles + 8 rows
      {4, 4, 64, 1001, 37, 16, 0, kv},      // smallest batch after an unaligned prefix
      {16, 8, 64, 1001, 300, 100, 0, kv},   // group of 2 with a prefix
      {8, 1, 128, 1100, 900, 70, 0, kv},    // group of 8, many cache tiles
  };
}

// Head_dim 256 (Gemma 3) through both tensor-core kernels, for each cache type: the split kernel's slot-row products
// (decode at one and several positions, up to 16k context and hundreds of tiles; computed and forced split counts,
// one split of kSerialTiles tiles, merges of one round and of the general path; groups 1, 2, 4, 8; a short batch)
// and the prefill kernel's Q in shared memory and 32-slot tiles (from empty and after a prefix, partial query
// tiles).
std::vector<Case> hd256_cases(KvType kv) {
  return {
      {8, 4, 256, 1001, 0, 1, 0, kv},       // the first token: one slot, one split
      {16, 8, 256, 20000, 16400, 1, 0, kv}, // Gemma-3-12B's heads at 16k: 257 tiles over the computed splits
      {16, 8, 256, 1100, 1023, 1, 0, kv},   // and at 1k
      {4, 2, 256, 1000, 230, 1, 0, kv},     // 4 tiles: one split streams them all (kSerialTiles), no merge
      {4, 2, 256, 1000, 256, 1, 0, kv},     // 5 tiles: split again
      {8, 1, 256, 3001, 2900, 1, 3, kv},    // group of 8, 3 splits of ~15 tiles
      {4, 4, 256, 2000, 1500, 1, 0, kv},    // group of 1
      {8, 2, 256, 5000, 4000, 1, 60, kv},   // 60 splits: more than the one-round merge takes (18 for a group of 4)
      {16, 4, 256, 1000, 300, 5, 0, kv},    // a short batch of 5 tokens
      {8, 4, 256, 600, 0, 200, 0, kv},      // prefill from empty, 200 = 6 tiles of 32 + 8 rows
      {4, 2, 256, 1001, 37, 16, 0, kv},     // the smallest batch after an unaligned prefix
      {16, 8, 256, 1100, 900, 70, 0, kv},   // Gemma-3-12B's heads, many cache tiles, a tile edge inside the batch
      {8, 1, 256, 700, 100, 64, 0, kv},     // group of 8
  };
}

TEST(AttentionKernels, HeadDim256MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(19);
  for (const KvType kv : {KvType::F16, KvType::Q8_0, KvType::Q4_0})
    for (const auto& c : hd256_cases(kv)) run_case(c, rng);
}

TEST(AttentionKernels, Q8_0MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(12);
  for (const auto& c : quantized_cases(KvType::Q8_0)) run_case(c, rng);
}

TEST(AttentionKernels, Q4_0MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(15);
  for (const auto& c : quantized_cases(KvType::Q4_0)) run_case(c, rng);
}

// The q8_0 writers store exactly the host quantizer's bytes: kv_write (head dims that are multiples of 32, blocks
// with ties at .5 and an all-zero block), and rope_kv (q rotated as on the f16 path, k rotated then quantized, v
// quantized; both pair orderings, a partial rotation, frequency factors). Slots of positions outside the cache stay
// untouched.
constexpr uint8_t kPoison = 0x5a;  // the caches' bytes before the write

// The slot (h, pos) of a q8_0 or q4_0 cache holds x quantized by the host. exact = false (rope_kv: the device's
// rotation may differ from the host's by an ulp): a scale may differ by one binary16 step (the block's largest value
// on an f16 rounding boundary) and a quant by one where the host's rounding lies within 1e-3 of its boundary (q8_0:
// x / d at a .5 tie; q4_0: x / d + 8.5 at an integer, where truncation steps).
void expect_slot(KvType kv, const std::string& what, const std::vector<uint8_t>& quants,
                 const std::vector<uint16_t>& scales, int64_t hd, int64_t n_ctx, int64_t h, int32_t pos, const float* x,
                 bool exact) {
  const bool q4 = kv == KvType::Q4_0;
  const int64_t rb = row_bytes(kv, hd);
  std::vector<uint8_t> want_q(static_cast<size_t>(rb));
  std::vector<uint16_t> want_s(static_cast<size_t>(hd / 32));
  if (q4) host_q4_0(x, hd, want_q.data(), want_s.data());
  else host_q8_0(x, hd, reinterpret_cast<int8_t*>(want_q.data()), want_s.data());
  const uint8_t* got_q = &quants[size_t((h * n_ctx + pos) * rb)];
  const uint16_t* got_s = &scales[size_t((h * n_ctx + pos) * (hd / 32))];
  // Value i's quant in a row of quant bytes: an int8, or a nibble of byte i % 16 of its block (high for 16..31).
  const auto quant_of = [&](const uint8_t* row, int64_t i) {
    if (!q4) return int(int8_t(row[i]));
    const uint8_t byte = row[i / 32 * 16 + i % 16];
    return int(i % 32 < 16 ? byte & 15 : byte >> 4);
  };
  for (int64_t b = 0; b < hd / 32; ++b) {
    ASSERT_LE(std::abs(int(got_s[b]) - int(want_s[b])), exact ? 0 : 1)
        << what << " head " << h << " pos " << pos << " block " << b;
    float amax = 0.0f, m = 0.0f;
    for (int64_t i = b * 32; i < b * 32 + 32; ++i)
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), m = x[i];
    const float d = q4 ? m / -8.0f : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
      const int got = quant_of(got_q, i), want = quant_of(want_q.data(), i);
      if (got == want) continue;
      const double r = q4 ? double(x[i] * id) + 8.5 : std::fabs(double(x[i] * id));
      const bool tie = q4 ? std::fabs(r - std::round(r)) < 1e-3 : std::fabs(r - std::floor(r) - 0.5) < 1e-3;
      ASSERT_TRUE(!exact && tie && std::abs(got - want) == 1)
          << what << " head " << h << " pos " << pos << " value " << i << ": got " << got << ", host " << want
          << " (x " << x[i] << ", x / d " << x[i] * id << ")";
    }
  }
}

// Every byte of the slots not written (written[h * n_ctx + slot] false) still holds kPoison.
template <class T>
void expect_untouched(const std::string& what, const std::vector<T>& cache, int64_t per_slot,
                      const std::vector<bool>& written) {
  size_t touched = 0;
  for (size_t s = 0; s < written.size(); ++s) {
    if (written[s]) continue;
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&cache[s * size_t(per_slot)]);
    for (size_t i = 0; i < size_t(per_slot) * sizeof(T); ++i) touched += b[i] != kPoison;
  }
  EXPECT_EQ(touched, 0u) << what << ": bytes written outside the tokens' slots";
}

TEST(AttentionKernels, QuantizedKvWriteMatchesHostQuantizer) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  struct Shape {
    int64_t nkv, hd, hdv, n_ctx;
  };
  for (const KvType kv : {KvType::Q8_0, KvType::Q4_0})
  for (const Shape sh : {Shape{3, 128, 128, 1001}, Shape{2, 64, 96, 37}}) {
    const std::string what = std::string("kv_write ") + graph::kv_type_name(kv) + " nkv=" + std::to_string(sh.nkv) +
                             " hd=" + std::to_string(sh.hd) + "/" + std::to_string(sh.hdv) +
                             " ctx=" + std::to_string(sh.n_ctx);
    const std::vector<int32_t> pos = {0, 17, int32_t(sh.n_ctx - 1), int32_t(sh.n_ctx), -1};  // the last two: outside
    const int64_t T = int64_t(pos.size());
    auto k = random_floats(rng, sh.hd * sh.nkv * T, -3, 3);
    const auto v = random_floats(rng, sh.hdv * sh.nkv * T, -0.01f, 0.01f);
    // Token 0, head 0: for q8_0 a block with largest value 127 (d = 1, so x / d = x) and the rest on .5 ties
    // (rounded away from zero); for q4_0 one whose largest magnitudes are 4 and then -4 (the first wins: d = -0.5),
    // the rest in -3..3; then a block of zeros (d = 0).
    for (int i = 0; i < 32; ++i)
      k[i] = kv == KvType::Q4_0 ? (i < 2 ? (i ? -4.0f : 4.0f) : float(i % 7 - 3))
                                : i == 0 ? 127.0f : (i % 2 ? 2.5f : -3.5f) + float(i / 2 % 5);
    for (int i = 32; i < 64; ++i) k[i] = 0.0f;
    DeviceCache cache(kv, sh.hd, sh.hdv, sh.n_ctx, sh.nkv);
    for (const auto* b : {&cache.k, &cache.v, &cache.k_scales, &cache.v_scales})
      CUDA_CHECK(cudaMemset(b->get(), kPoison, b->bytes()));
    auto dk = upload(k), dv = upload(v), dp = upload(pos);
    cuda::KvWriteParams w{dk.as<float>(), dv.as<float>(), dp.as<int32_t>(), cache.k.get(), cache.v.get(),
                          sh.n_ctx, sh.nkv, sh.hd, sh.hdv, T};
    w.kv_type = kv, w.k_scales = cache.k_scales.as<uint16_t>(), w.v_scales = cache.v_scales.as<uint16_t>();
    cuda::launch_kv_write(w, nullptr);

    const int64_t krb = row_bytes(kv, sh.hd), vrb = row_bytes(kv, sh.hdv);
    const auto kq = download<uint8_t>(cache.k, size_t(krb * sh.n_ctx * sh.nkv));
    const auto vq = download<uint8_t>(cache.v, size_t(vrb * sh.n_ctx * sh.nkv));
    const auto ks = download<uint16_t>(cache.k_scales, size_t(sh.hd / 32 * sh.n_ctx * sh.nkv));
    const auto vs = download<uint16_t>(cache.v_scales, size_t(sh.hdv / 32 * sh.n_ctx * sh.nkv));
    std::vector<bool> written(size_t(sh.n_ctx * sh.nkv), false);
    for (int64_t t = 0; t < T; ++t) {
      if (pos[t] < 0 || pos[t] >= sh.n_ctx) continue;
      for (int64_t h = 0; h < sh.nkv; ++h) {
        written[size_t(h * sh.n_ctx + pos[t])] = true;
        expect_slot(kv, what + " k", kq, ks, sh.hd, sh.n_ctx, h, pos[t], &k[(t * sh.nkv + h) * sh.hd], true);
        expect_slot(kv, what + " v", vq, vs, sh.hdv, sh.n_ctx, h, pos[t], &v[(t * sh.nkv + h) * sh.hdv], true);
      }
    }
    expect_untouched(what + " k", kq, krb, written);
    expect_untouched(what + " v", vq, vrb, written);
    expect_untouched(what + " k scales", ks, sh.hd / 32, written);
    expect_untouched(what + " v scales", vs, sh.hdv / 32, written);
    if (kv == KvType::Q8_0) {
      // The tie block: 127, then 2.5 -> 3, -3.5 -> -4, ... (half away from zero), as the host quantizer.
      EXPECT_EQ(int(int8_t(kq[1])), 3) << what;
      EXPECT_EQ(int(int8_t(kq[2])), -3) << what;  // -3.5 + 1
    } else {
      // d = 4 / -8: 4 -> trunc(4 x -2 + 8.5) = 0, -4 -> 16.5 clamped to 15; the zero block: 8 (0x88 a byte).
      EXPECT_EQ(kq[0] & 15, 0) << what;
      EXPECT_EQ(kq[1] & 15, 15) << what;
      EXPECT_EQ(int(kq[16]), 0x88) << what;
    }
  }
}

TEST(AttentionKernels, QuantizedRopeKvMatchesHostQuantizer) {
  REQUIRE_GPU();
  std::mt19937 rng(14);
  using graph::RopeMode;
  struct Shape {
    int64_t nh, nkv, hd, hdv;
    int32_t n_rot;
    RopeMode mode;
    bool ff;
  };
  const Shape shapes[] = {{32, 8, 128, 128, 128, RopeMode::Normal, false}, {8, 2, 128, 128, 64, RopeMode::Neox, true},
                          {4, 4, 64, 96, 64, RopeMode::Neox, false}, {6, 2, 64, 64, 32, RopeMode::Normal, true}};
  const int64_t n_ctx = 1001;
  const float base = 500000.0f, fscale = 0.5f;
  const std::vector<int32_t> pos = {5, 1000, 1001, 700};  // 1001: outside the cache (q still rotated)
  const int64_t T = int64_t(pos.size());
  for (const KvType kv : {KvType::Q8_0, KvType::Q4_0})
  for (const Shape& c : shapes) {
    const std::string what = std::string("rope_kv ") + graph::kv_type_name(kv) + " " +
                             (c.mode == RopeMode::Neox ? "neox" : "normal") +
                             " nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) +
                             " hd=" + std::to_string(c.hd) + "/" + std::to_string(c.hdv) +
                             " n_rot=" + std::to_string(c.n_rot) + (c.ff ? " ff" : "");
    const auto q = random_floats(rng, c.hd * c.nh * T), k = random_floats(rng, c.hd * c.nkv * T, -2, 2);
    const auto v = random_floats(rng, c.hdv * c.nkv * T);
    const auto factors = random_floats(rng, size_t(c.n_rot / 2), 1.0f, 8.0f);
    const auto powers = cuda::rope_base_powers(base, c.n_rot);
    // Rows rotated on the host: in double (the q reference), and as the kernel forms them in float (the k the
    // quantizer sees, up to an ulp).
    auto rotate = [&](const float* x, int32_t p, double* yd, float* yf) {
      for (int64_t d = 0; d < c.hd; ++d) yd[d] = x[d], yf[d] = x[d];
      for (int32_t j = 0; j < c.n_rot / 2; ++j) {
        const int64_t a = c.mode == RopeMode::Neox ? j : 2 * j, b = c.mode == RopeMode::Neox ? j + c.n_rot / 2 : 2 * j + 1;
        double th = double(p) * double(fscale) * powers[size_t(j)];
        if (c.ff) th /= double(factors[size_t(j)]);
        const double cd = std::cos(th), sd = std::sin(th);
        yd[a] = x[a] * cd - x[b] * sd, yd[b] = x[a] * sd + x[b] * cd;
        const float cf = float(cd), sf = float(sd);
        yf[a] = float(double(x[a]) * cf - double(x[b]) * sf), yf[b] = float(double(x[a]) * sf + double(x[b]) * cf);
      }
    };
    auto dq = upload(q), dk = upload(k), dv = upload(v), dp = upload(pos), df = upload(factors);
    auto q_out = poisoned_f32(q.size());
    DeviceCache cache(kv, c.hd, c.hdv, n_ctx, c.nkv);
    for (const auto* b : {&cache.k, &cache.v, &cache.k_scales, &cache.v_scales})
      CUDA_CHECK(cudaMemset(b->get(), kPoison, b->bytes()));
    cuda::RopeKvParams p;
    p.rope.x = dq.as<float>(), p.rope.out = q_out.as<float>(), p.rope.positions = dp.as<int32_t>();
    p.rope.freq_factors = c.ff ? df.as<float>() : nullptr;
    p.rope.head_dim = c.hd, p.rope.n_head = c.nh, p.rope.T = T, p.rope.n_rot = c.n_rot, p.rope.mode = c.mode;
    p.rope.freq_base = base, p.rope.freq_scale = fscale;
    p.k = dk.as<float>(), p.v = dv.as<float>(), p.k_cache = cache.k.get(), p.v_cache = cache.v.get();
    p.n_head_kv = c.nkv, p.hd_v = c.hdv, p.n_ctx = n_ctx, p.kv_type = kv;
    p.k_scales = cache.k_scales.as<uint16_t>(), p.v_scales = cache.v_scales.as<uint16_t>();
    cuda::launch_rope_kv(p, nullptr);

    std::vector<double> q_ref(q.size());
    std::vector<float> unused(size_t(c.hd));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < c.nh; ++h)
        rotate(&q[(t * c.nh + h) * c.hd], pos[t], &q_ref[(t * c.nh + h) * c.hd], unused.data());
    EXPECT_TRUE(close(what + " q", download<float>(q_out, q.size()), q_ref, {1e-6}, 1e-6));

    const int64_t krb = row_bytes(kv, c.hd), vrb = row_bytes(kv, c.hdv);
    const auto kq = download<uint8_t>(cache.k, size_t(krb * n_ctx * c.nkv));
    const auto vq = download<uint8_t>(cache.v, size_t(vrb * n_ctx * c.nkv));
    const auto ks = download<uint16_t>(cache.k_scales, size_t(c.hd / 32 * n_ctx * c.nkv));
    const auto vs = download<uint16_t>(cache.v_scales, size_t(c.hdv / 32 * n_ctx * c.nkv));
    std::vector<bool> written(size_t(n_ctx * c.nkv), false);
    std::vector<double> kd(size_t(c.hd));
    std::vector<float> kf(size_t(c.hd));
    for (int64_t t = 0; t < T; ++t) {
      if (pos[t] >= n_ctx) continue;
      for (int64_t h = 0; h < c.nkv; ++h) {
        written[size_t(h * n_ctx + pos[t])] = true;
        rotate(&k[(t * c.nkv + h) * c.hd], pos[t], kd.data(), kf.data());
        expect_slot(kv, what + " k", kq, ks, c.hd, n_ctx, h, pos[t], kf.data(), false);
        expect_slot(kv, what + " v", vq, vs, c.hdv, n_ctx, h, pos[t], &v[(t * c.nkv + h) * c.hdv], true);
      }
    }
    expect_untouched(what + " k", kq, krb, written);
    expect_untouched(what + " v", vq, vrb, written);
    expect_untouched(what + " k scales", ks, c.hd / 32, written);
    expect_untouched(what + " v scales", vs, c.hdv / 32, written);
  }
}

// Shapes the q8_0 and q4_0 readers and writers do not serve are refused before any launch (no device needed).
TEST(AttentionKernels, QuantizedRefusesUnsupportedShapes) {
  EXPECT_TRUE(cuda::kv_quant_supported(32, 8, 128, 128));
  EXPECT_TRUE(cuda::kv_quant_supported(8, 8, 64, 64));
  EXPECT_TRUE(cuda::kv_quant_supported(16, 8, 256, 256));  // head_dim 256 (Gemma 3)
  EXPECT_FALSE(cuda::kv_quant_supported(8, 8, 192, 192));
  EXPECT_FALSE(cuda::kv_quant_supported(6, 2, 128, 128));  // group of 3
  EXPECT_FALSE(cuda::kv_quant_supported(8, 8, 128, 64));   // hd != hd_v
  EXPECT_FALSE(cuda::kv_quant_supported(8, 8, 96, 96));
  EXPECT_NE(cuda::kv_quant_refusal(KvType::Q4_0, 6, 2, 128, 128).find("q4_0"), std::string::npos);
  // Non-null stand-ins: every check below fails on the host before a pointer is touched.
  float* f = reinterpret_cast<float*>(uintptr_t(256));
  void* c = reinterpret_cast<void*>(uintptr_t(512));
  uint16_t* sc = reinterpret_cast<uint16_t*>(uintptr_t(1024));
  const int32_t* pos = reinterpret_cast<const int32_t*>(uintptr_t(2048));
  for (const KvType kv : {KvType::Q8_0, KvType::Q4_0}) {
    const auto attention = [&](int64_t nh, int64_t nkv, int64_t hd, int64_t T, bool scales) {
      cuda::AttentionKernelParams p;
      p.q = f, p.positions = pos, p.k_cache = c, p.v_cache = c, p.out = f, p.partial = f;
      p.n_ctx = 100, p.n_head = nh, p.n_head_kv = nkv, p.hd = hd, p.hd_v = hd, p.T = T, p.scale = 1.0f, p.max_splits = 4;
      p.kv_type = kv, p.k_scales = scales ? sc : nullptr, p.v_scales = scales ? sc : nullptr;
      cuda::launch_attention(p, nullptr);
    };
    EXPECT_THROW(attention(8, 8, 192, 1, true), cuda::InvalidArgument);   // head_dim 192 (decode)
    EXPECT_THROW(attention(8, 8, 192, 32, true), cuda::InvalidArgument);  // and prefill
    EXPECT_THROW(attention(6, 2, 128, 1, true), cuda::InvalidArgument);   // group of 3
    EXPECT_THROW(attention(6, 2, 128, 32, true), cuda::InvalidArgument);
    EXPECT_THROW(attention(8, 8, 128, 1, false), cuda::InvalidArgument);  // no scales
    cuda::KvWriteParams w{f, f, pos, c, c, 100, 2, 48, 48, 1};
    w.kv_type = kv, w.k_scales = sc, w.v_scales = sc;
    EXPECT_THROW(cuda::launch_kv_write(w, nullptr), cuda::InvalidArgument);  // head_dim 48: no whole blocks
    w.hd = w.hd_v = 64, w.v_scales = nullptr;
    EXPECT_THROW(cuda::launch_kv_write(w, nullptr), cuda::InvalidArgument);  // no scales
    cuda::RopeKvParams r;
    r.rope.x = f, r.rope.out = f, r.rope.positions = pos, r.rope.head_dim = 48, r.rope.n_head = 2, r.rope.T = 1;
    r.rope.n_rot = 48, r.k = f, r.v = f, r.k_cache = c, r.v_cache = c, r.n_head_kv = 2, r.hd_v = 48, r.n_ctx = 100;
    r.kv_type = kv, r.k_scales = sc, r.v_scales = sc;
    EXPECT_THROW(cuda::launch_rope_kv(r, nullptr), cuda::InvalidArgument);
  }
}

}  // namespace
