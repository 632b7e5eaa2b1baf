// Kernel lab for issue 29 (docs/kernel-notes.md, "Session 26"): is a persistent decode kernel whose weights stream
// through a shared-memory ring, independent of the data dependencies, faster than a launch per matvec?
//
// The chain: the matvecs of a Llama-3-8B decode step (32 layers of q|k|v 4096 -> 6144, o 4096 -> 4096, gate|up
// 4096 -> 28672, down 14336 -> 4096, then the LM head 4096 -> 128256), every matrix Q4_K (a Q4_K_M file keeps
// v and half the downs in Q6_K), 4.2 GB in all, so nothing stays in the L2 between steps. Each product waits for the
// whole product before it, as a decode step's products do; the values of x do not flow (every product reads one
// fixed x) so that each output can be checked on its own. Norms, RoPE, attention and the residual adds are left out:
// this bounds the matvec chain alone.
//
// Variants, each replayed as a CUDA graph (median of 20 replays):
//   launches   today's decode kernel (cuda::launch_matvec, the int16 kernel), one launch a product, programmatic
//              dependent launches as in a decode step;
//   stream     one persistent launch, one block a multiprocessor (stream_chain): a producer lane copies the block's
//              tiles (`rows` consecutive rows) with cp.async.bulk into a ring of `stages` slots, never waiting on
//              data; 4, 8 or 16 consumer warps each dot their own tiles out of shared memory with the int16 kernel's
//              unit arithmetic (x quantized into shared memory once a product). Between products every block
//              publishes itself on a counter and waits for all the others ("products wait"), or does not ("no
//              waits", a bound); "one x" quantizes x once for the whole launch (a bound);
//   per-op     the same kernel launched once a product (the ring cannot run ahead across a product);
//   no-math    the stream kernel without the products (the copy mechanism with the waits);
//   math only  the products without the copies (the consumers' arithmetic alone, on whatever the ring holds).
// STREAM_LAB_READ=1: the copy mechanism alone (read_ring). STREAM_LAB_PROF=1: where a block's time goes.
// Usage: stream-lab   (STREAM_LAB_CONFIGS="warps:slot_bytes:stages:math:waits:x_once,..." chooses the stream
//        configurations: math 0 none, 1 the products, 2 the products without copies; waits 1 products wait, 0 not)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/bulk_copy.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "lab_common.cuh"
#include "quant/types.h"

namespace {

namespace bulk = cuda::bulk;
namespace mv16 = cuda::mv16;
using Q4K = mv16::Unit<quant::Type::Q4_K>;

struct ChainOp {
  const uint8_t* w;  // N rows of K Q4_K weights
  const float* x;    // [K]
  float* y;          // [N]
  int K, N;
  int rows;        // rows a tile
  int row_bytes;   // K / 256 * 144
  int tiles;       // ceil(N / rows)
  int first_tile;  // index of the product's first tile in the chain
};


constexpr int kRowsMax = 8;  // rows a tile at most

__device__ __forceinline__ int unit_seg0(int u) { return 256 * (u >> 3) + 64 * ((u & 7) >> 1) + 16 * (u & 1); }

// Shared memory: the barriers alone in their lines, the launch's products (read a few times a tile: from global
// memory each read was a round trip of the loaded L2, ~2 us a tile in the lab's first version), x quantized as
// the int16 kernel's runs (matvec_i16_units.cuh) in unit order: the four uint4 of unit u's two runs at v * U + u
// and their scales and sums (s0, S0, s1, S1) at 4 U + u, so the lanes of a warp, which take consecutive units,
// read consecutive 16 bytes; then the ring.
constexpr int kBarrierBytes = 512;
__host__ __device__ constexpr int align128(int b) { return (b + 127) / 128 * 128; }
__host__ __device__ constexpr int x_offset(int n_ops) { return align128(kBarrierBytes + n_ops * int(sizeof(ChainOp))); }
__host__ __device__ constexpr int x_bytes(int max_k) { return max_k / 32 * 80; }
__host__ __device__ constexpr int ring_offset(int n_ops, int max_k) { return align128(x_offset(n_ops) + x_bytes(max_k)); }

// Tiles are dealt round robin over the grid in chain order, and a block's tiles round robin over its consumer warps
// (the block's i-th tile to warp i % kConsumerWarps), each warp working on its own (the first version worked on a
// tile with the whole block and lost to its per-tile latency: docs/kernel-notes.md, "Session 26").
template <int kConsumerWarps>
__global__ void __launch_bounds__(32 * (kConsumerWarps + 1), 1)
    stream_chain(const ChainOp* __restrict__ all_ops, int op_begin, int op_end, unsigned* done, int stages,
                 int slot_bytes, int max_k, int math, int waits, int x_once, long long* prof) {
  constexpr int kThreads = 32 * kConsumerWarps;
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + stages;
  ChainOp* ops = reinterpret_cast<ChainOp*>(smem + kBarrierBytes) - op_begin;
  float4* xs = reinterpret_cast<float4*>(smem + x_offset(op_end - op_begin));
  uint8_t* ring = smem + ring_offset(op_end - op_begin, max_k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, G = int(gridDim.x), b = int(blockIdx.x);
  for (int k = op_begin + int(threadIdx.x); k < op_end; k += blockDim.x) ops[k] = all_ops[k];
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) bulk::mbar_init(full + s, 1), bulk::mbar_init(empty + s, 1);
    bulk::mbar_init_fence();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer: one lane keeps the ring full, never waiting on data
    if (lane != 0 || math == 2) return;  // math 2 (a lab bound): the consumers dot whatever the ring holds
    const uint64_t policy = bulk::l2_evict_first();
    const int g_begin = ops[op_begin].first_tile, g_end = ops[op_end - 1].first_tile + ops[op_end - 1].tiles;
    const long long start = clock64();
    long long waited = 0;
    int op = op_begin, i = 0;
    for (int g = g_begin + b; g < g_end; g += G, ++i) {
      while (g >= ops[op].first_tile + ops[op].tiles) ++op;
      const ChainOp& o = ops[op];
      const int r0 = (g - o.first_tile) * o.rows, nr = min(o.rows, o.N - r0), s = i % stages;
      const long long w0 = prof ? clock64() : 0;
      if (i >= stages) bulk::mbar_wait(empty + s, ((i / stages) + 1) & 1);
      if (prof) waited += clock64() - w0;
      const uint32_t bytes = uint32_t(nr * o.row_bytes);
      bulk::mbar_arrive_expect_tx(full + s, bytes);
      bulk::copy_to_shared(ring + size_t(s) * slot_bytes, o.w + size_t(r0) * o.row_bytes, bytes, full + s, policy);
    }
    if (prof) prof[4 * b + 2] = waited, prof[4 * b + 3] = clock64() - start;
    return;
  }
  // Lab profile (STREAM_LAB_PROF): per block, warp 0's cycles waiting for its tiles and in all, the producer's
  // cycles waiting for a free slot and in all; the sync and x phases of every product are warp 0's "rest".
  const long long start = clock64();
  long long waited = 0, in_x = 0;

  const int t = threadIdx.x;
  int i_base = 0;  // the block's index of its first tile of the product (the producer's i)
  for (int op = op_begin; op < op_end; ++op) {
    const ChainOp& o = ops[op];
    const long long x0c = clock64();
    bulk::named_sync(1, kThreads);  // every warp is done with x and with the product before
    // waits: each block publishes a finished product (a fence and a release addition) and waits for all blocks' before
    // it starts the next; without (a bound) nothing orders the products.
    if (op > op_begin && waits && t == 0) {
      __threadfence();
      bulk::release_add(done + op - 1, 1u);
      while (bulk::acquire_load(done + op - 1) < unsigned(G)) {
      }
      __threadfence();
    }
    if (op > op_begin && waits) bulk::named_sync(1, kThreads);
    const int U = o.K / 32, XU = max_k / 32;  // x rows are XU units apart whatever the product's K
    uint4* xq = reinterpret_cast<uint4*>(xs);
    // x_once (a lab bound): every product reads one x, quantized at the launch's start for the widest K.
    for (int u = t; u < (x_once ? XU : U) && (!x_once || op == op_begin); u += kThreads) {
      float v[16];
      mv16::load16<false>(o.x + unit_seg0(u), v);  // (plain loads: another block wrote x)
      const mv16::Run r0 = mv16::quantize_run(v);
      mv16::load16<false>(o.x + unit_seg0(u) + 32, v);
      const mv16::Run r1 = mv16::quantize_run(v);
      xq[u] = make_uint4(r0.q[0], r0.q[1], r0.q[2], r0.q[3]);
      xq[XU + u] = make_uint4(r0.q[4], r0.q[5], r0.q[6], r0.q[7]);
      xq[2 * XU + u] = make_uint4(r1.q[0], r1.q[1], r1.q[2], r1.q[3]);
      xq[3 * XU + u] = make_uint4(r1.q[4], r1.q[5], r1.q[6], r1.q[7]);
      xs[4 * XU + u] = make_float4(r0.s, r0.S, r1.s, r1.S);
    }
    bulk::named_sync(1, kThreads);
    in_x += clock64() - x0c;
    // This block's tiles of the product: global indices g0, g0 + G, ... below first_tile + tiles (the producer's
    // sequence: g_begin + b, + G, ...). The block's i-th tile goes to warp i % kConsumerWarps and ring slot
    // i % stages (stages a multiple of the warps), so a slot only ever holds one warp's tiles, in that warp's order:
    // with tiles dealt to warps per product, a warp running ahead could wait on a slot whose previous tile another
    // warp had not yet consumed, and take that older phase for its own (the lab's crash).
    const int rho = (ops[op_begin].first_tile + b) % G;
    const int g0 = o.first_tile + ((rho - o.first_tile) % G + G) % G, g_stop = o.first_tile + o.tiles;
    const int n_local = g0 < g_stop ? (g_stop - 1 - g0) / G + 1 : 0;
    for (int j = ((warp - i_base) % kConsumerWarps + kConsumerWarps) % kConsumerWarps; j < n_local;
         j += kConsumerWarps) {
      const int i = i_base + j, s = i % stages;
      const int r0 = (g0 + j * G - o.first_tile) * o.rows, nr = min(o.rows, o.N - r0);
      const long long w0 = clock64();
      if (math != 2) bulk::mbar_wait(full + s, (i / stages) & 1);
      waited += clock64() - w0;
      const uint8_t* tile = ring + size_t(s) * slot_bytes;
      float acc[kRowsMax];
#pragma unroll
      for (int r = 0; r < kRowsMax; ++r) acc[r] = 0.0f;
      if (math) {
#pragma unroll 1
        for (int u = lane; u < U; u += 32) {
          mv16::Run xr0, xr1;
          const uint4 a = xq[u], b4 = xq[XU + u], c = xq[2 * XU + u], e = xq[3 * XU + u];
          const float4 f = xs[4 * XU + u];
          xr0.q[0] = a.x, xr0.q[1] = a.y, xr0.q[2] = a.z, xr0.q[3] = a.w, xr0.q[4] = b4.x, xr0.q[5] = b4.y, xr0.q[6] = b4.z;
          xr0.q[7] = b4.w, xr1.q[0] = c.x, xr1.q[1] = c.y, xr1.q[2] = c.z, xr1.q[3] = c.w, xr1.q[4] = e.x, xr1.q[5] = e.y;
          xr1.q[6] = e.z, xr1.q[7] = e.w;
          xr0.s = f.x, xr0.S = f.y, xr1.s = f.z, xr1.S = f.w;
          const uint8_t* blk = tile + 144 * (u >> 3);
#pragma unroll
          for (int r = 0; r < kRowsMax; ++r)
            if (r < nr) {
              const uint8_t* p = blk + r * o.row_bytes;
              const Q4K::Raw raw{*reinterpret_cast<const uint4*>(p), *reinterpret_cast<const uint4*>(p + 16 + 16 * (u & 7))};
              acc[r] += Q4K::dot(raw, u, xr0, xr1);
            }
        }
      }
#pragma unroll
      for (int r = 0; r < kRowsMax; ++r) {
        if (r >= nr) break;
        float v = acc[r];
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
        if (lane == r) o.y[r0 + r] = v;
      }
      __syncwarp();
      if (lane == 0 && math != 2) bulk::mbar_arrive(empty + s);
    }
    i_base += n_local;
  }
  if (prof && t == 0) prof[4 * b] = waited, prof[4 * b + 1] = clock64() - start, prof[4 * gridDim.x + b] = in_x;
}

__device__ __forceinline__ void wait_groups(int n) {
  switch (n) {
    case 0: cuda::cp_async_wait<0>(); break;
    case 1: cuda::cp_async_wait<1>(); break;
    case 2: cuda::cp_async_wait<2>(); break;
    case 3: cuda::cp_async_wait<3>(); break;
    case 4: cuda::cp_async_wait<4>(); break;
    case 5: cuda::cp_async_wait<5>(); break;
    case 6: cuda::cp_async_wait<6>(); break;
    default: cuda::cp_async_wait<7>(); break;
  }
}

// The copy mechanism alone (STREAM_LAB_READ=1): each block streams chunks of `chunk` bytes, dealt round robin over
// the grid (as the chain's tiles are), through a ring of `stages` slots: one lane issues cp.async.bulk copies and
// waits for them (mode 0: with the evict-first hint, 1: without), or every thread issues 16-byte cp.async (mode 2).
__global__ void __launch_bounds__(256, 1)
    read_ring(const uint8_t* src, size_t bytes, int chunk, int stages, int mode, unsigned* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint8_t* ring = smem + 128;
  const size_t n_chunks = bytes / size_t(chunk);
  unsigned acc = 0;
  if (mode < 2) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < stages; ++s) bulk::mbar_init(full + s, 1);
      bulk::mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const uint64_t policy = bulk::l2_evict_first();
    auto issue = [&](size_t c, int s) {
      bulk::mbar_arrive_expect_tx(full + s, uint32_t(chunk));
      if (mode == 0)
        bulk::copy_to_shared(ring + size_t(s) * chunk, src + c * chunk, uint32_t(chunk), full + s, policy);
      else
        bulk::copy_to_shared_nohint(ring + size_t(s) * chunk, src + c * chunk, uint32_t(chunk), full + s);
    };
    size_t i = 0;
    for (size_t c = blockIdx.x; c < n_chunks && i < size_t(stages); c += gridDim.x, ++i) issue(c, int(i));
    size_t k = 0;
    for (size_t c = blockIdx.x; c < n_chunks; c += gridDim.x, ++k) {
      const int s = int(k % stages);
      bulk::mbar_wait(full + s, uint32_t(k / stages) & 1u);
      acc += ring[size_t(s) * chunk];
      const size_t c2 = c + size_t(stages) * gridDim.x;
      if (c2 < n_chunks) issue(c2, s);
    }
  } else {
    size_t k = 0;
    const int per = chunk / 16;
    for (size_t c = blockIdx.x; c < n_chunks + size_t(stages - 1) * gridDim.x; c += gridDim.x, ++k) {
      if (c < n_chunks)
        for (int e = threadIdx.x; e < per; e += blockDim.x)
          cuda::cp_async16(ring + size_t(k % stages) * chunk + 16 * e, src + c * chunk + 16 * size_t(e));
      asm volatile("cp.async.commit_group;" ::: "memory");
      if (k >= size_t(stages - 1)) {
        wait_groups(stages - 1);  // the oldest group has landed; the newer ones stay in flight
        __syncthreads();
        acc += ring[size_t((k - stages + 1) % stages) * chunk + threadIdx.x];
        __syncthreads();
      }
    }
  }
  if (acc == 0xdeadbeefu) *sink = acc;
}

float graph_us(cudaGraphExec_t exec, cudaStream_t s, int reps) {
  return lab::median_us(reps, 1, s, [&](int) { LAB_CHECK(cudaGraphLaunch(exec, s)); });
}

template <class F>
cudaGraphExec_t capture(cudaStream_t s, F&& f) {
  f();  // once outside the capture: first-call attribute setting
  LAB_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  LAB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  f();
  LAB_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  LAB_CHECK(cudaGraphInstantiate(&exec, g, 0));
  LAB_CHECK(cudaGraphDestroy(g));
  return exec;
}

struct StreamConfig {
  int warps, slot_bytes, stages, math, waits, x_once;
};

long long* g_prof = nullptr;  // STREAM_LAB_PROF: the kernel's cycle counts (stream_chain's profile)

template <int kWarps>
void launch_stream(const ChainOp* d_ops, int op_begin, int op_end, int max_k, unsigned* done, const StreamConfig& c,
                   int blocks, cudaStream_t s) {
  const size_t smem = size_t(ring_offset(op_end - op_begin, max_k)) + size_t(c.stages) * c.slot_bytes;
  LAB_CHECK(cudaFuncSetAttribute(stream_chain<kWarps>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(32 * (kWarps + 1)), cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // every block resident: consumers wait on other blocks' tiles
  attr[0].val.cooperative = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  LAB_CHECK(cudaLaunchKernelEx(&cfg, stream_chain<kWarps>, d_ops, op_begin, op_end, done, c.stages, c.slot_bytes,
                               max_k, c.math, c.waits, c.x_once, g_prof));
}

void launch_stream_any(const ChainOp* d_ops, int op_begin, int op_end, int max_k, unsigned* done,
                       const StreamConfig& c, int blocks, cudaStream_t s) {
  if (c.warps == 4)
    launch_stream<4>(d_ops, op_begin, op_end, max_k, done, c, blocks, s);
  else if (c.warps == 8)
    launch_stream<8>(d_ops, op_begin, op_end, max_k, done, c, blocks, s);
  else
    launch_stream<16>(d_ops, op_begin, op_end, max_k, done, c, blocks, s);
}

// max |a - b| / max |b| over n values.
double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t off, size_t n) {
  double e = 0, m = 0;
  for (size_t i = off; i < off + n; ++i) e = std::max(e, double(std::fabs(a[i] - b[i]))), m = std::max(m, double(std::fabs(b[i])));
  return m > 0 ? e / m : e;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  LAB_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MiB, %zu KB shared a block at most\n", prop.name, sms, prop.l2CacheSize >> 20,
              prop.sharedMemPerBlockOptin >> 10);
  const double copy_gbs = lab::copy_gbs(s);
  std::printf("copy D2D 1 GiB: %.0f GB/s (read + write)\n", copy_gbs);

  if (std::getenv("STREAM_LAB_READ")) {  // the copy mechanism alone
    const size_t bytes = size_t(2) << 30;
    uint8_t* src;
    unsigned* sink;
    LAB_CHECK(cudaMalloc(&src, bytes));
    LAB_CHECK(cudaMalloc(&sink, 4));
    LAB_CHECK(cudaMemset(src, 1, bytes));
    LAB_CHECK(cudaFuncSetAttribute(read_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    static const char* kModes[] = {"bulk, evict-first", "bulk, no hint", "cp.async 16 B"};
    std::printf("\n%-20s %7s %6s %8s %6s\n", "read ring", "chunk", "stages", "GB/s", "%copy");
    for (int mode = 0; mode < 3; ++mode)
      for (int chunk : {4096, 8192, 16384, 32768})
        for (int stages : {2, 4, 8}) {
          const size_t smem = 128 + size_t(stages) * chunk;
          if (smem > 227 * 1024) continue;
          const float us = lab::median_us(7, 1, s, [&](int) {
            read_ring<<<sms, 256, smem, s>>>(src, bytes, chunk, stages, mode, sink);
            LAB_CHECK(cudaGetLastError());
          });
          const double gbs = bytes / us / 1e3;
          std::printf("%-20s %7d %6d %8.0f %5.1f%%\n", kModes[mode], chunk, stages, gbs, 100 * gbs / copy_gbs);
        }
    LAB_CHECK(cudaFree(src));
    LAB_CHECK(cudaFree(sink));
    return 0;
  }

  // The chain: {K, N} of each product.
  std::vector<std::pair<int, int>> shapes;
  for (int l = 0; l < 32; ++l) shapes.insert(shapes.end(), {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}});
  shapes.push_back({4096, 128256});
  const int n_ops = int(shapes.size());
  std::vector<uint8_t*> w(n_ops);
  size_t total_bytes = 0, total_out = 0;
  std::vector<size_t> out_off(n_ops);
  for (int k = 0; k < n_ops; ++k) {
    const size_t rb = size_t(shapes[k].first) / 256 * 144, bytes = rb * shapes[k].second;
    LAB_CHECK(cudaMalloc(&w[k], bytes));
    lab::fill_kernel<<<1024, 256, 0, s>>>(w[k], bytes, 77u + k);
    total_bytes += bytes;
    out_off[k] = total_out;
    total_out += size_t(shapes[k].second);
  }
  float* x;
  LAB_CHECK(cudaMalloc(&x, 16384 * 4));
  std::vector<float> hx(16384);
  {
    std::mt19937 rng(1);
    for (auto& v : hx) v = float(rng() % 2001) / 1000.0f - 1.0f;
    LAB_CHECK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  }
  float *y_ref, *y_out;
  LAB_CHECK(cudaMalloc(&y_ref, total_out * 4));
  LAB_CHECK(cudaMalloc(&y_out, total_out * 4));
  unsigned* done;
  LAB_CHECK(cudaMalloc(&done, n_ops * 4));
  LAB_CHECK(cudaStreamSynchronize(s));
  std::printf("chain: %d products, %.1f MB of Q4_K weights\n", n_ops, total_bytes / 1e6);

  std::vector<float> h_ref(total_out), h_out(total_out);
  // launches: today's decode kernel.
  cudaGraphExec_t ref_graph = capture(s, [&] {
    for (int k = 0; k < n_ops; ++k) {
      cuda::MatvecParams p{w[k], quant::Type::Q4_K, x, nullptr, y_ref + out_off[k], shapes[k].first, shapes[k].second, 1};
      cuda::launch_matvec(p, s);
    }
  });
  const float ref_us = graph_us(ref_graph, s, 20);
  LAB_CHECK(cudaMemcpy(h_ref.data(), y_ref, total_out * 4, cudaMemcpyDeviceToHost));
  {  // today's kernel against the CPU on layer 0's products (the reference the stream variants are checked by)
    double worst = 0;
    for (int k = 0; k < 4; ++k) {
      const int K = shapes[k].first, N = shapes[k].second;
      const size_t rb = size_t(K) / 256 * 144;
      std::vector<uint8_t> hw(rb * N);
      LAB_CHECK(cudaMemcpy(hw.data(), w[k], hw.size(), cudaMemcpyDeviceToHost));
      std::vector<float> row(K), yc(N);
      for (int n = 0; n < N; ++n) {
        quant::dequantize_row(quant::Type::Q4_K, hw.data() + rb * n, row.data(), K);
        double a = 0;
        for (int e = 0; e < K; ++e) a += double(row[e]) * hx[e];
        yc[n] = float(a);
      }
      std::vector<float> yg(h_ref.begin() + out_off[k], h_ref.begin() + out_off[k] + N);
      worst = std::max(worst, rel_err(yg, yc, 0, N));
    }
    std::printf("launches against the CPU, layer 0: max |err| / max |y| = %.2e\n", worst);
  }

  struct Result {
    std::string name;
    float us;
    double err;
  };
  std::vector<Result> results{{"launches (today's int16 kernel)", ref_us, 0.0}};
  int max_k = 0;  // every K a multiple of 1024: a warp's lanes take whole runs of 32 units
  for (const auto& sh : shapes) max_k = std::max(max_k, sh.first);
  // warps:slot_bytes:stages:math:waits:x_once; 20 x 9216 fill the shared memory beside x (K 14336).
  std::vector<StreamConfig> configs = {{8, 9216, 16, 0, 1, 0},  {8, 9216, 16, 1, 1, 0}, {16, 9216, 16, 1, 1, 0},
                                       {16, 9216, 16, 1, 0, 0}, {16, 9216, 16, 1, 0, 1}, {8, 9216, 16, 1, 0, 1}};
  if (const char* e = std::getenv("STREAM_LAB_CONFIGS")) {
    configs.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      StreamConfig c{};
      if (std::sscanf(item.c_str(), "%d:%d:%d:%d:%d:%d", &c.warps, &c.slot_bytes, &c.stages, &c.math, &c.waits,
                      &c.x_once) != 6 ||
          (c.warps != 4 && c.warps != 8 && c.warps != 16) || c.slot_bytes < 8064 || c.slot_bytes % 128 ||
          c.stages < 1 || c.stages % c.warps ||
          c.math < 0 || c.math > 2 || (c.waits != 0 && c.waits != 1)) {
        std::fprintf(stderr,
                     "STREAM_LAB_CONFIGS: '%s' is not warps(4|8|16):slot_bytes(>= 8064):stages(a multiple of warps):math(0|1|2: no copies):waits(0|1):x_once(0|1)\n",
                     item.c_str());
        return 2;
      }
      configs.push_back(c);
    }
  }
  for (const StreamConfig& c : configs)
    if (c.stages % c.warps) {  // a slot must only ever hold one warp's tiles (stream_chain)
      std::fprintf(stderr, "stream-lab: %d stages are not a multiple of %d warps\n", c.stages, c.warps);
      return 2;
    }
  ChainOp* d_ops;
  LAB_CHECK(cudaMalloc(&d_ops, n_ops * sizeof(ChainOp)));
  bool ok = true;
  for (const StreamConfig& c : configs) {
    if (size_t(ring_offset(n_ops, max_k)) + size_t(c.stages) * c.slot_bytes > prop.sharedMemPerBlockOptin) {
      std::printf("skip %d:%d:%d: the ring does not fit\n", c.warps, c.slot_bytes, c.stages);
      continue;
    }
    std::vector<ChainOp> ops(n_ops);
    int first = 0;
    for (int k = 0; k < n_ops; ++k) {
      ChainOp& o = ops[k];
      o.w = w[k], o.x = x, o.y = y_out + out_off[k], o.K = shapes[k].first, o.N = shapes[k].second;
      o.row_bytes = o.K / 256 * 144;
      o.rows = std::min({kRowsMax, c.slot_bytes / o.row_bytes, o.N});
      o.tiles = (o.N + o.rows - 1) / o.rows;
      o.first_tile = first;
      first += o.tiles;
    }
    LAB_CHECK(cudaMemcpy(d_ops, ops.data(), n_ops * sizeof(ChainOp), cudaMemcpyHostToDevice));
    char name[96];
    for (int per_op = 0; per_op < 2; ++per_op) {
      if (per_op && (c.math != 1 || !c.waits)) continue;
      std::snprintf(name, sizeof name, "%s %d warps, %d x %d B, %s", per_op ? "per-op" : c.math == 1 ? "stream" : c.math ? "math only" : "no-math",
                    c.warps, c.stages, c.slot_bytes, c.math == 2 ? "no copies" :
                    c.waits ? "products wait" : c.x_once ? "no waits, one x" : "no waits");
      LAB_CHECK(cudaMemset(y_out, 0, total_out * 4));
      cudaGraphExec_t g = capture(s, [&] {
        LAB_CHECK(cudaMemsetAsync(done, 0, n_ops * 4, s));
        if (per_op)
          for (int k = 0; k < n_ops; ++k) launch_stream_any(d_ops, k, k + 1, max_k, done, c, sms, s);
        else
          launch_stream_any(d_ops, 0, n_ops, max_k, done, c, sms, s);
      });
      const float us = graph_us(g, s, 20);
      LAB_CHECK(cudaGetLastError());
      if (std::getenv("STREAM_LAB_PROF") && !per_op) {
        LAB_CHECK(cudaMalloc(&g_prof, sms * 5 * sizeof(long long)));
        LAB_CHECK(cudaMemsetAsync(done, 0, n_ops * 4, s));
        launch_stream_any(d_ops, 0, n_ops, max_k, done, c, sms, s);
        LAB_CHECK(cudaStreamSynchronize(s));
        std::vector<long long> hp(sms * 5);
        LAB_CHECK(cudaMemcpy(hp.data(), g_prof, hp.size() * 8, cudaMemcpyDeviceToHost));
        LAB_CHECK(cudaFree(g_prof));
        g_prof = nullptr;
        int khz = 0;
        LAB_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
        double m[5] = {};
        for (int b = 0; b < sms; ++b)
          for (int e = 0; e < 4; ++e) m[e] += hp[4 * b + e] / double(sms) / (khz * 1e-3);
        for (int b = 0; b < sms; ++b) m[4] += hp[4 * sms + b] / double(sms) / (khz * 1e-3);
        std::printf("  %s, us a block: warp 0 waits for tiles %.0f, in x/sync phases %.0f, of %.0f; the producer "
                    "waits for slots %.0f of %.0f\n", name, m[0], m[4], m[1], m[2], m[3]);
      }
      LAB_CHECK(cudaMemcpy(h_out.data(), y_out, total_out * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      if (c.math == 1) {  // (without waits the products still run, only their order is free)
        for (int k = 0; k < n_ops; ++k) err = std::max(err, rel_err(h_out, h_ref, out_off[k], shapes[k].second));
        if (!(err < 2e-3)) ok = false;
      }
      results.push_back({name, us, c.math == 1 ? err : -1.0});
      LAB_CHECK(cudaGraphExecDestroy(g));
    }
  }
  std::printf("\nmatvec chain of an 8B decode step (all Q4_K, %.1f MB), median of 20 graph replays; copy %.0f GB/s\n",
              total_bytes / 1e6, copy_gbs);
  std::printf("%-58s %9s %8s %6s %10s\n", "variant", "us", "GB/s", "%copy", "err vs ref");
  for (const Result& r : results) {
    const double gbs = total_bytes / r.us / 1e3;
    std::printf("%-58s %9.1f %8.0f %5.1f%% ", r.name.c_str(), r.us, gbs, 100 * gbs / copy_gbs);
    if (r.err < 0)
      std::printf("%10s\n", "-");
    else
      std::printf("%10.2e\n", r.err);
  }
  std::printf("%s\n", ok ? "every stream variant matches the launches" : "MISMATCH: a stream variant differs");
  return ok ? 0 : 1;
}
