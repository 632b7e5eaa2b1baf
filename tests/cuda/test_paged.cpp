// Paged attention through cuda::Executor against the CPU reference (graph::ReferenceExecutor, the definition):
// ragged batches of several sequences with shuffled block tables, prompt chunks beside decode tokens, padding
// tokens, sliding windows whose passed blocks are freed, f16 / q8_0 / q4_0 caches, head dims 64, 128 and 256 (every
// attention kernel: the tensor-core prefill and split kernels in their head_dim 64/128 and 256 forms, the per-head
// split kernel), the KV write inside the attention step and on its own; decode batches replayed as a captured CUDA
// graph; a one-sequence graph's results bit for bit the same paged and not; the refusals. Skipped without a GPU,
// except the refusals.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/capabilities.h"
#include "cuda/paged_batch.h"
#include "paged_fixture.h"

namespace {

using namespace paged_test;
using gpu_test::close;

// The GPU keeps K/V and the products' operands in f16 (q x scale and the softmax weights too): an output is off by
// about 2^-11 of the largest |v| per rounding. A q8_0 / q4_0 cache holds the same quants as the reference (its
// writers match the host quantizer), up to a rotation an ulp apart that moves a quant by one.
double tolerance(KvType kv) { return kv == KvType::F16 ? 4e-3 : 2e-2; }

std::string describe(const Layer& l, const CacheShape& c, bool fuse) {
  return std::string(graph::kv_type_name(l.kv)) + " nh=" + std::to_string(l.nh) + " nkv=" + std::to_string(l.nkv) +
         " hd=" + std::to_string(l.hd) + " window=" + std::to_string(l.window) + " bs=" +
         std::to_string(c.block_size) + (fuse ? " rope+kv in attention" : " kv_write");
}

std::vector<double> widened(std::span<const float> v) { return {v.begin(), v.end()}; }

// Runs the current batch on both executors and compares every token's attention output (padding exactly zero) and
// the gathered rows.
void run_and_compare(Both& b, graph::ReferenceExecutor& ref, const Sequences& s, KvType kv, const std::string& what) {
  const graph::RunInputs in = s.inputs();
  ref.run(b.l.g, b.l.plan, in);
  b.gpu->write_inputs(in);
  b.gpu->run();
  const auto got = b.gpu->read_f32(b.l.att);
  const auto want = ref.output_f32(b.l.att);
  EXPECT_TRUE(close(what + " attention", got, widened(want), {tolerance(kv)}, 0.0));
  const size_t per_token = got.size() / s.positions.size();
  size_t pad_nonzero = 0;
  for (size_t t = 0; t < s.positions.size(); ++t)
    if (s.positions[t] < 0)
      for (size_t i = 0; i < per_token; ++i) pad_nonzero += got[t * per_token + i] != 0.0f;
  EXPECT_EQ(pad_nonzero, 0u) << what << ": padding tokens' outputs must be zero";
  if (b.l.rows != graph::kNoNode) {
    const auto rows = b.gpu->read_f32(b.l.rows);
    for (size_t i = 0; i < s.output_rows.size(); ++i)
      for (size_t e = 0; e < per_token; ++e)
        ASSERT_EQ(rows[i * per_token + e], got[size_t(s.output_rows[i]) * per_token + e]) << what << " gather " << i;
  }
}

struct MixedCase {
  Layer l;
  int block_size;
  bool fuse;
};

using Steps = std::vector<std::vector<Sequences::Piece>>;

// Four sequences through ragged batches of 96 tokens: by default four, of prompt chunks (runs of 5 to 70 tokens,
// several per batch) beside decode tokens, padding in the middle and at the end, rows out of order.
// run_bases: with KvPaging::run_base (ExecutorOptions::paged_run_bases), from an ordered pool (consecutive blocks).
void run_mixed(const MixedCase& mc, uint32_t seed, const Steps* given = nullptr, bool run_bases = false) {
  const cuda::Context ctx;
  const int bs = mc.block_size, cap = 320;
  CacheShape c;
  c.block_size = bs, c.max_blocks = (cap + bs - 1) / bs, c.n_seq = 4, c.n_blocks = 4 * c.max_blocks + 3;
  const std::string what = describe(mc.l, c, mc.fuse);
  const auto emb = embedding(mc.l, seed);
  auto dw = gpu_test::upload(emb);
  OneLayer shape(mc.l, c, 96, 4, emb);
  cuda::KvCache kv(shape.g.kv);
  Both b(mc.l, c, 96, 4, emb, ctx, dw.as<uint8_t>(), &kv, mc.fuse, false, run_bases);
  graph::ReferenceExecutor ref(2);
  Sequences s(c, seed + 1, run_bases);
  const Steps fixed = {
      {{0, 40}, {1, 17}, {2, 5}, {3, 2}},                    // prompt chunks, two too short for a tile
      {{2, 1}, {1, 70}, {3, 20}, {0, 0, 3}, {0, 1}},         // decode, a 2-tile chunk, a chunk, padding, decode
      {{0, 30}, {1, 1}, {2, 64}, {3, 1}},                    // chunks and decode tokens alternating
      {{3, 1}, {0, 0, 50}, {1, 1}, {2, 1}, {0, 1}},          // decode only, padding between
  };
  const Steps& steps = given ? *given : fixed;
  for (size_t i = 0; i < steps.size(); ++i) {
    s.batch(steps[i], 96, mc.l.window);
    run_and_compare(b, ref, s, mc.l.kv, what + " step " + std::to_string(i));
  }
}

TEST(PagedAttention, MixedBatchesMatchReference) {
  REQUIRE_GPU();
  const MixedCase cases[] = {
      {{8, 2, 128, KvType::F16, 0}, 16, true},    // tensor-core prefill + split kernels, smallest blocks
      {{8, 2, 128, KvType::F16, 0}, 64, false},   // the KV write on its own
      {{8, 8, 64, KvType::F16, 40}, 16, true},    // sliding window, its passed blocks freed (-1 entries)
      {{4, 2, 256, KvType::F16, 0}, 64, true},    // head_dim 256: its prefill and slot-row split kernels
      {{4, 1, 256, KvType::F16, 48}, 16, false},  // and with a window
      {{16, 8, 256, KvType::Q8_0, 40}, 16, true}, // Gemma-3-12B's heads, q8_0, a window
      {{8, 4, 256, KvType::Q4_0, 0}, 32, false},
      {{6, 2, 64, KvType::F16, 0}, 256, true},    // group of 3: per-head split kernel beside the prefill kernel
      {{8, 2, 128, KvType::Q8_0, 0}, 64, true},
      {{8, 4, 64, KvType::Q8_0, 0}, 32, false},
      {{8, 8, 64, KvType::Q4_0, 0}, 16, true},
      {{16, 2, 128, KvType::Q4_0, 100}, 64, false},  // group of 8, window
      {{8, 2, 128, KvType::Q4_0, 24}, 16, true},      // a window shorter than two blocks
  };
  uint32_t seed = 100;
  for (const MixedCase& mc : cases) run_mixed(mc, seed += 7);
}

// Steps that take sequences past 270 positions (five tiles a split at 271) beside prompt chunks and padding.
const Steps kDeepSteps = {
    {{0, 90}, {1, 2}, {2, 2}, {3, 2}},  {{0, 90}, {1, 2}, {2, 2}, {3, 2}}, {{0, 90}, {1, 2}, {2, 2}, {3, 2}},
    {{2, 90}, {1, 2}, {0, 1}, {3, 2}},  // decode at 270, a chunk
    {{0, 1}, {1, 1}, {2, 1}, {3, 60}},  // decode at 271 (five tiles), 8 and 96, a chunk
    {{2, 1}, {0, 1}, {0, 0, 4}, {3, 1}, {1, 1}},  // decode at 97, 272, 68 and 9, padding between
};

// Splits of many tiles: in a 96-token batch a decode token has one split, so a token at 271 streams five tiles
// through the split kernel's two stages (the copies two tiles ahead, empty copy groups past the last), beside
// prompt chunks on the prefill kernel; blocks smaller than a tile (a table lookup a row) and larger (one a tile),
// windows, head_dim 64 and 128, f16 and quantized caches.
TEST(PagedAttention, LongSplitsMatchReference) {
  REQUIRE_GPU();
  const MixedCase cases[] = {
      {{8, 2, 128, KvType::F16, 0}, 16, true},
      {{8, 2, 128, KvType::F16, 0}, 64, false},
      {{32, 8, 128, KvType::F16, 0}, 128, true},  // Llama 3 8B's heads
      {{8, 8, 64, KvType::F16, 40}, 16, true},
      {{16, 2, 128, KvType::F16, 100}, 64, false},
      {{4, 2, 256, KvType::F16, 0}, 64, true},
      {{8, 2, 128, KvType::Q8_0, 0}, 64, true},
  };
  uint32_t seed = 300;
  for (const MixedCase& mc : cases) run_mixed(mc, seed += 7, &kDeepSteps);
}

// The run bases (lab, ExecutorOptions::paged_run_bases): blocks handed out in order, so that a prompt chunk's blocks
// are consecutive and its tokens take slot = base + position in the attention kernels and the KV writers, while
// sequences whose blocks interleave with others' keep the table; the fixed and the long steps, f16 and quantized
// caches (the quantized split kernel reads the table either way), windows, several block sizes.
TEST(PagedAttention, RunBasesMatchReference) {
  REQUIRE_GPU();
  const MixedCase cases[] = {
      {{8, 2, 128, KvType::F16, 0}, 16, true},
      {{32, 8, 128, KvType::F16, 0}, 64, false},
      {{8, 8, 64, KvType::F16, 40}, 16, true},  // a window: its passed blocks freed, the row's first entry -1
      {{4, 2, 256, KvType::F16, 0}, 64, true},
      {{16, 8, 256, KvType::Q8_0, 40}, 16, true},
      {{8, 2, 128, KvType::Q4_0, 0}, 32, false},
  };
  uint32_t seed = 500;
  for (const MixedCase& mc : cases) {
    run_mixed(mc, seed += 7, nullptr, true);
    run_mixed(mc, seed += 7, &kDeepSteps, true);
  }
}

// A decode bucket replayed as a captured graph: every step's positions, rows, block tables and output rows are
// written before the replay; sequences grow across block boundaries (new blocks), one finishes (its token becomes
// padding) and a new one starts in its row. T = 8 runs the split kernels alone; T = 16 also the prefill launch, whose
// tiles are empty for decode tokens.
TEST(PagedAttention, CapturedDecodeMatchesReference) {
  REQUIRE_GPU();
  const cuda::Context ctx;
  for (const KvType kvt : {KvType::F16, KvType::Q8_0})
    for (const int T : {8, 16}) {
      const Layer l{8, 2, 128, kvt, 0};
      CacheShape c;
      c.block_size = 16, c.max_blocks = 16, c.n_seq = 6, c.n_blocks = 6 * 16;
      const std::string what = describe(l, c, true) + " captured T=" + std::to_string(T);
      const auto emb = embedding(l, 7);
      auto dw = gpu_test::upload(emb);
      const OneLayer shape(l, c, 64, 5, emb);
      cuda::KvCache kv(shape.g.kv);
      Both prefill(l, c, 64, 5, emb, ctx, dw.as<uint8_t>(), &kv, true, false);
      Both decode(l, c, T, 5, emb, ctx, dw.as<uint8_t>(), &kv, true, true);
      graph::ReferenceExecutor ref(2);
      Sequences s(c, 8);
      using P = Sequences::Piece;
      s.batch({{0, 14}, {1, 3}, {2, 20}, {3, 15}, {4, 1}}, 64, 0);
      run_and_compare(prefill, ref, s, kvt, what + " prefill");
      for (int step = 0; step < 6; ++step) {
        std::vector<P> pieces = {{4, 1}, {0, 1}, {1, 1}, {2, 1}};
        if (step < 3) pieces.push_back({3, 1});         // row 3 finishes after three steps
        else pieces.push_back({0, 0, 1}), pieces.push_back({5, 1});  // padding, then a new sequence in row 5
        s.batch(pieces, T, 0);
        run_and_compare(decode, ref, s, kvt, what + " step " + std::to_string(step));
        if (step >= 1) {
          EXPECT_TRUE(decode.gpu->captured()) << what << ": the decode steps must replay a captured graph";
        }
      }
    }
}

// Decode steps whose attention launch forms the new tokens itself (ExecutorOptions::batch_new_tokens, session 71),
// replayed as captured graphs: each step's outputs and the whole pool the same bits as with the rope + KV launch
// (the same arithmetic), and within tolerance of the reference. Steps whose tokens are each of its own sequence take
// that graph variant; a step with a short prompt chunk beside the decode tokens (two tokens of one sequence, the
// second attending the first's new slot) takes the other, and the fused form comes back after it. Eight tokens
// (a graph without the prefill launch; sixteen have it and keep the rope + KV launch; sixty-four take the fused form
// from batch_new_tokens_wide_min's 32 tokens, without the prefill launch), with and without run bases,
// head_dim 64 and 128 (Llama 3's groups of 4). The head_dim-128 layer's plan puts the output over the raw q at an
// offset, so that layer keeps the rope + KV launch: its fused form read other tokens' outputs as q (session 72).
TEST(PagedAttention, DecodeStepsFormTheirTokens) {
  REQUIRE_GPU();
  const cuda::Context ctx;
  const int64_t kWideMin = cuda::ExecutorOptions{}.batch_new_tokens_wide_min;
  ASSERT_GT(kWideMin, 16);
  ASSERT_LE(kWideMin, 64);
  for (const int T : {8, 16, 64})
    for (const bool run_bases : {false, true})
      for (const Layer l : {Layer{32, 8, 128, KvType::F16, 0}, Layer{8, 8, 64, KvType::F16, 40}}) {
        CacheShape c;
        c.block_size = 16, c.max_blocks = 24, c.n_seq = 6, c.n_blocks = 6 * 24;
        const std::string what =
            describe(l, c, true) + (run_bases ? " run bases" : "") + " new tokens T=" + std::to_string(T);
        const auto emb = embedding(l, 71);
        auto dw = gpu_test::upload(emb);
        const OneLayer shape(l, c, 64, 5, emb);
        cuda::KvCache kv_on(shape.g.kv), kv_off(shape.g.kv);
        Both prefill_on(l, c, 64, 5, emb, ctx, dw.as<uint8_t>(), &kv_on, true, false, run_bases);
        Both prefill_off(l, c, 64, 5, emb, ctx, dw.as<uint8_t>(), &kv_off, true, false, run_bases);
        Both on(l, c, T, 5, emb, ctx, dw.as<uint8_t>(), &kv_on, true, true, run_bases, true, kWideMin);
        Both off(l, c, T, 5, emb, ctx, dw.as<uint8_t>(), &kv_off, true, true, run_bases, false);
        {  // The fused form reads the raw q, which the plan frees after its rope: it takes it unless the output
           // overlaps the raw q other than element for element (Executor::raw_heads_intact). Both kinds occur here.
          const graph::Plan& pl = on.l.plan;
          const graph::Node& att = on.l.g.node(on.l.att);
          const auto q = size_t(pl.root.at(size_t(on.l.g.node(att.inputs[0]).inputs[0]))), o = size_t(on.l.att);
          const bool apart = pl.offset[o] + int64_t(pl.bytes[o]) <= pl.offset[q] ||
                             pl.offset[q] + int64_t(pl.bytes[q]) <= pl.offset[o];
          const bool fusable = (T < 16 || T >= kWideMin) && (apart || pl.offset[o] == pl.offset[q]);
          EXPECT_EQ(on.gpu->n_fused() > off.gpu->n_fused(), fusable)
              << what << ": output at " << pl.offset[o] << ", raw q at " << pl.offset[q];
        }
        graph::ReferenceExecutor ref(2);
        Sequences s(c, 72, run_bases);
        using P = Sequences::Piece;
        s.batch({{0, 30}, {1, 3}, {2, 17}, {3, 1}, {4, 9}}, 64, l.window);
        run_and_compare(prefill_off, ref, s, l.kv, what + " prefill");
        {
          const graph::RunInputs in = s.inputs();
          prefill_on.gpu->write_inputs(in);
          prefill_on.gpu->run();
        }
        for (int step = 0; step < 8; ++step) {
          std::vector<P> pieces = {{4, 1}, {0, 1}, {1, 1}, {0, 0, 1}, {2, 1}, {3, 1}};
          if (step == 4) pieces = {{4, 1}, {0, 1}, {5, 2}, {2, 1}, {3, 1}};  // a 2-token chunk: not alone
          s.batch(pieces, T, l.window);
          const std::string at = what + " step " + std::to_string(step);
          run_and_compare(off, ref, s, l.kv, at);
          const graph::RunInputs in = s.inputs();
          on.gpu->write_inputs(in);
          on.gpu->run();
          const auto a = on.gpu->read_f32(on.l.att), b = off.gpu->read_f32(off.l.att);
          ASSERT_EQ(a.size(), b.size());
          EXPECT_TRUE(close(at + " fused attention", a, widened(ref.output_f32(on.l.att)), {tolerance(l.kv)}, 0.0));
          size_t differ = 0;
          std::string rows;  // the tokens whose outputs differ: row, position, largest difference
          const size_t per_token = a.size() / s.positions.size();
          for (size_t t = 0; t < s.positions.size(); ++t) {
            size_t n = 0;
            double most = 0.0;
            for (size_t i = t * per_token; i < (t + 1) * per_token; ++i)
              if (std::memcmp(&a[i], &b[i], 4) != 0) ++n, most = std::max(most, std::fabs(double(a[i]) - b[i]));
            if (n) rows += " row " + std::to_string(t) + " (position " + std::to_string(s.positions[t]) + ", up to " +
                           std::to_string(most) + ")";
            differ += n;
          }
          EXPECT_EQ(differ, 0u) << at << ": outputs differ from the rope + KV launch's in " << differ << " values:"
                                << rows;
          if (step >= 2 && step != 4) {
            EXPECT_TRUE(on.gpu->captured()) << at;
          }
        }
        const size_t bytes = size_t(c.n_blocks) * c.block_size * l.hd * l.nkv * 2;
        for (const bool v : {false, true}) {
          std::vector<uint8_t> pa(bytes), pb(bytes);
          CUDA_CHECK(cudaMemcpy(pa.data(), v ? kv_on.v(0) : kv_on.k(0), bytes, cudaMemcpyDeviceToHost));
          CUDA_CHECK(cudaMemcpy(pb.data(), v ? kv_off.v(0) : kv_off.k(0), bytes, cudaMemcpyDeviceToHost));
          EXPECT_TRUE(pa == pb) << what << ": the " << (v ? "v" : "k") << " pools differ";
        }
      }
}

// A one-sequence graph and the same graph paged (one row, shuffled blocks): the same kernels with the same tiles
// and splits, so bit for bit the same outputs, and both within tolerance of the reference.
TEST(PagedAttention, OneSequenceSameAsNotPaged) {
  REQUIRE_GPU();
  const cuda::Context ctx;
  for (const Layer l : {Layer{8, 2, 128, KvType::F16, 0}, Layer{8, 8, 64, KvType::Q4_0, 0},
                        Layer{4, 2, 256, KvType::F16, 64}, Layer{4, 2, 256, KvType::Q8_0, 0}}) {
    CacheShape flat, paged;
    flat.n_ctx = 512;
    paged.block_size = 64, paged.max_blocks = 8, paged.n_seq = 1, paged.n_blocks = 8;
    const std::string what = describe(l, paged, true) + " vs one sequence";
    const auto emb = embedding(l, 21);
    auto dw = gpu_test::upload(emb);
    OneLayer shape_flat(l, flat, 1, 0, emb), shape_paged(l, paged, 1, 0, emb);
    cuda::KvCache kv_flat(shape_flat.g.kv), kv_paged(shape_paged.g.kv);
    graph::ReferenceExecutor ref(2);
    Sequences s(paged, 22);
    for (const int T : {96, 1, 1, 5}) {
      Both f(l, flat, T, 0, emb, ctx, dw.as<uint8_t>(), &kv_flat, true, false);
      Both p(l, paged, T, 0, emb, ctx, dw.as<uint8_t>(), &kv_paged, true, false);
      s.batch({{0, T}}, T, 0);
      f.gpu->write_inputs(s.tokens, s.positions);
      f.gpu->run();
      run_and_compare(p, ref, s, l.kv, what + " T=" + std::to_string(T));
      const auto a = f.gpu->read_f32(f.l.att), b = p.gpu->read_f32(p.l.att);
      ASSERT_EQ(a.size(), b.size());
      size_t differ = 0;
      for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
      EXPECT_EQ(differ, 0u) << what << " T=" << T << ": paged and one-sequence outputs differ";
    }
  }
}

// Inputs that would take a kernel outside the block table or the pool are refused before the run (no device needed).
TEST(PagedAttention, RefusesBadInputs) {
  graph::KvCacheSpec kv{1, 64, 2, 64, 64, KvType::F16};
  kv.block_size = 16, kv.max_blocks = 4, kv.n_seq = 2;  // a pool of 4 blocks; 64 positions a sequence
  const std::vector<int32_t> table = {-1, 1, 3, -1, 0, 5, -1, -1};  // row 0 lost block 0 to a window; 5: no block
  const std::vector<int32_t> tokens(3, 0);
  auto check = [&](std::vector<int32_t> pos, std::vector<int32_t> seq, std::vector<int32_t> rows, int32_t reach) {
    cuda::check_paged_inputs(kv, reach, graph::RunInputs{tokens, pos, seq, table, rows});
  };
  EXPECT_NO_THROW(check({40, -1, 10}, {0, 7, 1}, {0, 2}, 16));  // a window of 16 reaches blocks 1..2; padding's row
  using cuda::InvalidArgument;
  EXPECT_THROW(check({40, -1, 10}, {0, 7, 1}, {0, 2}, 0), InvalidArgument);   // a global layer reaches block 0
  EXPECT_THROW(check({48, -1, 10}, {0, 0, 1}, {}, 16), InvalidArgument);      // entry 3 of row 0 is -1
  EXPECT_THROW(check({40, -1, 20}, {0, 0, 1}, {}, 16), InvalidArgument);      // block 5 is outside the pool
  EXPECT_THROW(check({64, -1, 10}, {0, 0, 1}, {}, 16), InvalidArgument);      // past max_blocks * block_size
  EXPECT_THROW(check({-2, -1, 10}, {0, 0, 1}, {}, 16), InvalidArgument);      // only -1 is padding
  EXPECT_THROW(check({40, -1, 10}, {0, 0, 2}, {}, 16), InvalidArgument);      // row 2 of 2
  EXPECT_THROW(check({40, -1, 10}, {0, 0, 1}, {3}, 16), InvalidArgument);     // output row 3 of 3 tokens
}

// The prefill tiles: runs of 16+ tokens of one row in tiles of at most 64, every other token to the split kernels.
TEST(PagedAttention, PlansPrefillTiles) {
  std::vector<int32_t> pos, seq;
  const auto run = [&](int32_t row, int32_t first, int n) {
    for (int i = 0; i < n; ++i) pos.push_back(first + i), seq.push_back(row);
  };
  run(0, 7, 1);    // decode token
  run(1, 0, 70);   // a prompt chunk: tiles of 64 and 6
  pos.push_back(-1), seq.push_back(1);  // padding inside the batch ends the run
  run(1, 70, 15);  // too short for a tile
  run(2, 3, 16);   // exactly one tile
  const int64_t T = int64_t(pos.size());
  std::vector<int32_t> plan(size_t(cuda::PagedTiles::ints(T)), -7);
  cuda::plan_paged_tiles(pos, seq, plan);
  const int32_t max_tiles = cuda::PagedTiles::max_tiles(T);
  EXPECT_EQ(max_tiles, T / 16);
  ASSERT_EQ(plan[0], 3);
  EXPECT_EQ(std::vector<int32_t>(plan.begin() + 1, plan.begin() + 7), (std::vector<int32_t>{1, 64, 65, 6, 87, 16}));
  const int32_t* tiled = plan.data() + 1 + 2 * max_tiles;
  for (int64_t t = 0; t < T; ++t)
    EXPECT_EQ(tiled[t], (t >= 1 && t < 71) || t >= 87 ? 1 : 0) << "token " << t;
}

// The run bases (no device needed): a row whose blocks through its tokens' highest position are consecutive gets the
// slot of its position 0; one with a gap, a freed first block (-1) or only padding, -1; every token of a row alike.
TEST(PagedAttention, PlansRunBases) {
  graph::KvCacheSpec kv;
  kv.block_size = 16, kv.max_blocks = 4, kv.n_seq = 4;
  std::vector<int32_t> table = {5, 6, 7, 2,     // row 0: 5, 6, 7 consecutive (entry 3 beyond its positions)
                                3, 9, 10, -1,   // row 1: a gap after block 0
                                -1, 12, 13, 0,  // row 2: first block freed by a window
                                8, 1, 1, 1};    // row 3: one block, then padding only
  std::vector<int32_t> pos = {40, 3, 20, 5, 47, 30, -1};
  std::vector<int32_t> seq = {0, 1, 2, 1, 0, 2, 3};
  std::vector<int32_t> base(pos.size(), -7);
  const std::vector<int32_t> tokens(pos.size(), 1);
  cuda::plan_run_bases(kv, graph::RunInputs{tokens, pos, seq, table, {}}, base);
  // Row 1 reaches position 5 only (block 0): consecutive so far. Row 3 has padding alone.
  EXPECT_EQ(base, (std::vector<int32_t>{80, 48, -1, 48, 80, -1, -1}));
  pos[3] = 20;  // row 1 now reaches block 1 (9 after 3): its base goes
  cuda::plan_run_bases(kv, graph::RunInputs{tokens, pos, seq, table, {}}, base);
  EXPECT_EQ(base[1], -1);
  EXPECT_EQ(base[3], -1);
}

// Which steps may form their tokens in the attention launch (no device needed): no two real tokens of one row.
TEST(PagedAttention, TokensOfDistinctSequences) {
  using V = std::vector<int32_t>;
  EXPECT_TRUE(cuda::tokens_of_distinct_sequences(V{5, 9, 0}, V{2, 0, 1}));
  EXPECT_TRUE(cuda::tokens_of_distinct_sequences(V{5, -1, 9}, V{2, 2, 0}));  // padding shares a row
  EXPECT_FALSE(cuda::tokens_of_distinct_sequences(V{5, 6, 9}, V{2, 2, 0}));  // a chunk of two
  EXPECT_TRUE(cuda::tokens_of_distinct_sequences(V{}, V{}));
  EXPECT_FALSE(cuda::tokens_of_distinct_sequences(V{1}, V{}));  // sizes differ
}

// Block sizes the kernels serve, and the refusal of a graph with another one.
TEST(PagedAttention, BlockSizes) {
  for (int bs : {16, 32, 64, 128, 256}) EXPECT_TRUE(cuda::paged_block_size_supported(bs)) << bs;
  for (int bs : {0, 8, 48, 512}) EXPECT_FALSE(cuda::paged_block_size_supported(bs)) << bs;
  const Layer l{8, 2, 128, KvType::F16, 0};
  const auto emb = embedding(l, 1);
  CacheShape c;
  c.block_size = 8, c.max_blocks = 4, c.n_seq = 2, c.n_blocks = 8;
  const OneLayer small(l, c, 4, 2, emb);
  EXPECT_NE(cuda::graph_refusal(small.g).find("block size 8"), std::string::npos) << cuda::graph_refusal(small.g);
  c.block_size = 64;
  const OneLayer ok(l, c, 4, 2, emb);
  EXPECT_EQ(cuda::graph_refusal(ok.g), "");
}

}  // namespace
