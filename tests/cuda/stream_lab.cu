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
//   launches  today's decode kernel (cuda::launch_matvec, the int16 kernel), one launch a product, programmatic
//             dependent launches as in a decode step;
//   stream    one persistent launch (one block a multiprocessor): a producer lane per block copies the block's tiles
//             (`rows` consecutive rows) with cp.async.bulk into a ring of `stages` slots, never waiting on data;
//             8 or 16 consumer warps wait for a product's predecessor through a counter in global memory (one
//             release addition a finished tile), then dot their tiles out of shared memory. Tiles are dealt round
//             robin over the whole chain, so every block streams the same bytes;
//   per-op    the same kernel launched once a product (the ring cannot run ahead across a product);
//   no-math   the stream kernel with the consumers' products skipped (the mechanism's own ceiling).
// Usage: stream-lab   (STREAM_LAB_CONFIGS="warps:slot_bytes:stages,..." to choose the stream configurations)
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
#include "cuda/kernels/matvec_units.cuh"
#include "quant/types.h"

#define LAB_CHECK(e)                                                                            \
  do {                                                                                          \
    cudaError_t err_ = (e);                                                                     \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #e, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace {

namespace bulk = cuda::bulk;
namespace mv = cuda::mv;

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

// How a block publishes its finished tiles: a fence and a release addition a tile; the release addition alone; one
// fence and addition a product after the block's last tile of it; nothing (no product waits: a bound).
enum : int { kSyncTileFence = 0, kSyncTileRelease = 1, kSyncBlock = 2, kSyncNone = 3 };

constexpr int kRowsMax = 16;  // rows a tile
constexpr int kMaxK = 16384;  // the widest row a consumer block covers with its units

// One Q4_K unit (32 weights of a row: 16 bytes of nibbles and the block head) dotted out of shared memory; the
// arithmetic of mv::Unit<Q4_K>::dot.
__device__ __forceinline__ float q4k_unit(const uint8_t* row, int u, const float (&x0)[16], const float (&x1)[16],
                                          float s0, float s1) {
  const uint8_t* b = row + 144 * (u >> 3);
  const int i = u & 7, j = i >> 1;
  const uint4 hd = *reinterpret_cast<const uint4*>(b);
  const uint4 qv = *reinterpret_cast<const uint4*>(b + 16 + 16 * i);
  const uint32_t q[4] = {qv.x, qv.y, qv.z, qv.w};
  uint32_t sc0, mn0, sc1, mn1;
  mv::q4k_scales(hd, j, sc0, mn0, sc1, mn1);
  const float d = mv::h2f(hd.x & 0xffffu), dmin = mv::h2f(hd.x >> 16);
  const float f0 = mv::dot_nibbles<0>(q, x0) - s0, f1 = mv::dot_nibbles<4>(q, x1) - s1;
  return 16.0f * d * (float(sc0) * f0 + float(sc1) * f1) - dmin * (float(mn0) * s0 + float(mn1) * s1);
}

__device__ __forceinline__ int unit_seg0(int u) { return 256 * (u >> 3) + 64 * ((u & 7) >> 1) + 16 * (u & 1); }

// Shared memory: the barriers, the reduction scratch and the launch's products (read a few times a tile: from global
// memory each read was a round trip of the loaded L2, ~2 us a tile in the lab's first version), then the ring at a
// 128-byte boundary.
// The barriers sit alone in their 128-byte lines (kBarrierBytes): the lab's reduction scratch right after them made
// every tile's reduction ~1 us slower.
constexpr int kBarrierBytes = 512;
__host__ __device__ constexpr int red_offset() { return kBarrierBytes; }
__host__ __device__ constexpr int table_offset(int stages, int consumer_warps) {
  return kBarrierBytes + 2 * consumer_warps * kRowsMax * 4 + 0 * stages;
}
__host__ __device__ constexpr int ring_offset(int stages, int consumer_warps, int n_ops) {
  return (table_offset(stages, consumer_warps) + n_ops * int(sizeof(ChainOp)) + 127) / 128 * 128;
}

template <int kConsumerWarps>
__global__ void __launch_bounds__(32 * (kConsumerWarps + 1), 1)
    stream_chain(const ChainOp* __restrict__ all_ops, int op_begin, int op_end, unsigned* done, int stages,
                 int slot_bytes, int math, int sync, long long* prof, int wait_mode) {
  constexpr int kThreads = 32 * kConsumerWarps;
  constexpr int kUnitsMax = (kMaxK / 32 + kThreads - 1) / kThreads;  // unit columns a consumer thread owns
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + stages;
  float* red = reinterpret_cast<float*>(smem + (wait_mode >= 8 ? 16 * stages : red_offset()));  // [2][warps][kRowsMax]
  ChainOp* ops = reinterpret_cast<ChainOp*>(smem + table_offset(stages, kConsumerWarps)) - op_begin;
  uint8_t* ring = smem + ring_offset(stages, kConsumerWarps, op_end - op_begin);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  wait_mode &= 7;  // 8: the lab's first layout, scratch beside the barriers
  for (int k = op_begin + int(threadIdx.x); k < op_end; k += blockDim.x) ops[k] = all_ops[k];
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) bulk::mbar_init(full + s, 1), bulk::mbar_init(empty + s, 1);
    bulk::mbar_init_fence();
  }
  __syncthreads();
  const long long start = clock64();
  const int g_begin = ops[op_begin].first_tile, g_end = ops[op_end - 1].first_tile + ops[op_end - 1].tiles;

  if (warp == kConsumerWarps) {  // the producer: one lane keeps the ring full
    if (lane != 0) return;
    const uint64_t policy = bulk::l2_evict_first();
    int op = op_begin, i = 0;
    for (int g = g_begin + blockIdx.x; g < g_end; g += gridDim.x, ++i) {
      while (g >= ops[op].first_tile + ops[op].tiles) ++op;
      const ChainOp& o = ops[op];
      const int r0 = (g - o.first_tile) * o.rows, nr = min(o.rows, o.N - r0), s = i % stages;
      const long long c0 = clock64();
      if (i >= stages) {
        const uint32_t parity = ((i / stages) + 1) & 1;
        if (wait_mode == 3)
          bulk::mbar_wait_backoff(empty + s, parity, 128);
        else if (wait_mode == 4)
          bulk::mbar_wait_hint(empty + s, parity, 1000000);
        else
          bulk::mbar_wait(empty + s, parity);
      }
      if (prof) prof[4 * blockIdx.x + 2] += clock64() - c0;
      const uint32_t bytes = uint32_t(nr * o.row_bytes);
      bulk::mbar_arrive_expect_tx(full + s, bytes);
      bulk::copy_to_shared(ring + size_t(s) * slot_bytes, o.w + size_t(r0) * o.row_bytes, bytes, full + s, policy);
    }
    if (prof) prof[4 * blockIdx.x + 3] += clock64() - start;
    return;
  }

  // The consumers. Thread t owns unit column u = t % U of row group q = t / U (P groups share a tile's rows when a
  // row has fewer units than there are threads), or units t, t + kThreads when a row has more.
  const int t = threadIdx.x;
  int op = -1, U = 0, P = 1, q = 0, rows = 0, row_bytes = 0, N = 0, first_tile = 0;
  float* y = nullptr;
  int unit[kUnitsMax];
  float x0[kUnitsMax][16], x1[kUnitsMax][16], s0[kUnitsMax], s1[kUnitsMax];
  int par = 0, i = 0;
  for (int g = g_begin + blockIdx.x; g < g_end; g += gridDim.x, ++i) {
    int next = op < 0 ? op_begin : op;
    while (g >= ops[next].first_tile + ops[next].tiles) ++next;
    if (next != op) {
      op = next;
      if (op > op_begin && sync != kSyncNone) {  // the whole product before this one
        if (t == 0) {
          const unsigned need =
              unsigned(sync == kSyncBlock ? min(ops[op - 1].tiles, int(gridDim.x)) : ops[op - 1].tiles);
          while (bulk::acquire_load(done + op - 1) < need) {
          }
          __threadfence();
        }
        bulk::named_sync(1, kThreads);
      }
      const ChainOp& o = ops[op];
      U = o.K / 32, P = max(1, kThreads / U), q = t / U;
      rows = o.rows, row_bytes = o.row_bytes, N = o.N, first_tile = o.first_tile, y = o.y;
#pragma unroll
      for (int k = 0; k < kUnitsMax; ++k) {
        const int u = t % U + k * kThreads;
        unit[k] = (q < P && u < U && (k == 0 || P == 1)) ? u : -1;
        s0[k] = s1[k] = 0.0f;
        if (unit[k] < 0) continue;
        const float4* a = reinterpret_cast<const float4*>(o.x + unit_seg0(u));
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const float4 lo = __ldcg(a + v), hi = __ldcg(a + 8 + v);
          x0[k][4 * v] = lo.x, x0[k][4 * v + 1] = lo.y, x0[k][4 * v + 2] = lo.z, x0[k][4 * v + 3] = lo.w;
          x1[k][4 * v] = hi.x, x1[k][4 * v + 1] = hi.y, x1[k][4 * v + 2] = hi.z, x1[k][4 * v + 3] = hi.w;
        }
#pragma unroll
        for (int e = 0; e < 16; ++e) s0[k] += x0[k][e], s1[k] += x1[k][e];
      }
    }
    const int r0 = (g - first_tile) * rows, nr = min(rows, N - r0), s = i % stages;
    const long long c0 = clock64();
    long long* trace = (prof && t == 0 && blockIdx.x == 0 && i < 256) ? prof + 4 * gridDim.x + 4 * i : nullptr;
    if (trace) trace[0] = c0;
    if (wait_mode == 0) {
      bulk::mbar_wait(full + s, (i / stages) & 1);
    } else if (wait_mode == 1) {  // one thread waits, the barrier releases the rest
      if (t == 0) bulk::mbar_wait(full + s, (i / stages) & 1);
      bulk::named_sync(1, kThreads);
    } else if (wait_mode == 2) {
      bulk::mbar_spin(full + s, (i / stages) & 1);
    } else if (wait_mode == 3) {
      bulk::mbar_wait_backoff(full + s, (i / stages) & 1, 32);
    } else {
      bulk::mbar_wait_hint(full + s, (i / stages) & 1, 1000000);
    }
    if (prof && t == 0) prof[4 * blockIdx.x] += clock64() - c0;
    if (trace) trace[1] = clock64();
    const uint8_t* tile = ring + size_t(s) * slot_bytes;
    // One row at a time, reduced across the warp at once: a loop that is not unrolled keeps the kernel's code small
    // (the first version, 16 rows unrolled, was 126 KB of code and every tile waited on instruction fetches).
    if (math <= -2) {  // lab levels: -2 wait, barrier, release; -3 wait and release only
      if (math == -2) bulk::named_sync(1, kThreads);
      if (t == 0) bulk::mbar_arrive(empty + s);
      continue;
    }
    int j = 0;
#pragma unroll 1
    for (int r = q; j * P < nr; r += P, ++j) {
      float v = 0.0f;
      if (math > 0 && r < nr) {
#pragma unroll
        for (int k = 0; k < kUnitsMax; ++k)
          if (unit[k] >= 0) v += q4k_unit(tile + r * row_bytes, unit[k], x0[k], x1[k], s0[k], s1[k]);
      }
#pragma unroll
      for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
      if (lane == 0) red[(par * kConsumerWarps + warp) * kRowsMax + j] = v;
    }
    if (trace) trace[2] = clock64();
    bulk::named_sync(1, kThreads);
    if (trace) trace[3] = clock64();
    if (t == 0) bulk::mbar_arrive(empty + s);
    if (warp == 0) {
      if (lane < nr) {
        const int qq = lane % P, j = lane / P;
        float sum = 0.0f;
        for (int w = 0; w < kConsumerWarps; ++w)
          if ((P == 1 ? 0 : w * 32 / U) == qq) sum += red[(par * kConsumerWarps + w) * kRowsMax + j];
        if (math >= 0) y[r0 + lane] = sum;
      }
      __syncwarp();
      // kSyncBlock: once a product, after the block's last tile of it.
      const bool last = g + int(gridDim.x) >= min(g_end, first_tile + ops[op].tiles);
      if (lane == 0 && (sync == kSyncTileFence || sync == kSyncTileRelease || (sync == kSyncBlock && last))) {
        if (sync != kSyncTileRelease) __threadfence();
        bulk::release_add(done + op, 1u);
      }
    }
    par ^= 1;
  }
  if (prof && t == 0) prof[4 * blockIdx.x + 1] += clock64() - start;
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

// Random bytes with every binary16 field small and finite (the high byte of each half < 0x40).
__global__ void fill_kernel(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = uint8_t(h & 0x3f);
  }
}

float graph_us(cudaGraphExec_t exec, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  LAB_CHECK(cudaEventCreate(&a));
  LAB_CHECK(cudaEventCreate(&b));
  LAB_CHECK(cudaGraphLaunch(exec, s));
  LAB_CHECK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    LAB_CHECK(cudaEventRecord(a, s));
    LAB_CHECK(cudaGraphLaunch(exec, s));
    LAB_CHECK(cudaEventRecord(b, s));
    LAB_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f);
  }
  LAB_CHECK(cudaEventDestroy(a));
  LAB_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
  int warps, slot_bytes, stages, math, sync;
};

int g_wait_mode = 0;  // STREAM_LAB_WAIT: how consumers wait for a tile (0 all try_wait, 1 one thread, 2 test_wait,
                      // 3 try_wait with sleeps between, 4 try_wait with a suspend-time hint)
long long* g_prof = nullptr;  // STREAM_LAB_PROF: per block cycles (consumer waits, consumer, producer waits, producer)

template <int kWarps>
void launch_stream(const ChainOp* d_ops, int op_begin, int op_end, unsigned* done, const StreamConfig& c, int blocks,
                   cudaStream_t s) {
  const size_t smem = size_t(ring_offset(c.stages, kWarps, op_end - op_begin)) + size_t(c.stages) * c.slot_bytes;
  LAB_CHECK(cudaFuncSetAttribute(stream_chain<kWarps>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(32 * (kWarps + 1)), cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // every block resident: consumers wait on other blocks' tiles
  attr[0].val.cooperative = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  LAB_CHECK(cudaLaunchKernelEx(&cfg, stream_chain<kWarps>, d_ops, op_begin, op_end, done, c.stages, c.slot_bytes,
                               c.math, c.sync, g_prof, g_wait_mode));
}

void launch_stream_any(const ChainOp* d_ops, int op_begin, int op_end, unsigned* done, const StreamConfig& c,
                       int blocks, cudaStream_t s) {
  if (c.warps == 8)
    launch_stream<8>(d_ops, op_begin, op_end, done, c, blocks, s);
  else
    launch_stream<16>(d_ops, op_begin, op_end, done, c, blocks, s);
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
  double copy_gbs = 0;
  {
    const size_t bytes = size_t(1) << 30;
    void *a, *b;
    LAB_CHECK(cudaMalloc(&a, bytes));
    LAB_CHECK(cudaMalloc(&b, bytes));
    LAB_CHECK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    LAB_CHECK(cudaEventCreate(&e0));
    LAB_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 11; ++r) {
      LAB_CHECK(cudaEventRecord(e0, s));
      LAB_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
      LAB_CHECK(cudaEventRecord(e1, s));
      LAB_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      LAB_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e3f);
    }
    std::sort(t.begin(), t.end());
    copy_gbs = 2.0 * bytes / t[5] / 1e3;
    std::printf("copy D2D 1 GiB: %.0f GB/s (read + write)\n", copy_gbs);
    LAB_CHECK(cudaFree(a));
    LAB_CHECK(cudaFree(b));
  }

  if (const char* e = std::getenv("STREAM_LAB_WAIT")) g_wait_mode = std::atoi(e);
  if (std::getenv("STREAM_LAB_ADJACENT")) g_wait_mode |= 8;
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
          cudaEvent_t e0, e1;
          LAB_CHECK(cudaEventCreate(&e0));
          LAB_CHECK(cudaEventCreate(&e1));
          std::vector<float> t;
          for (int r = 0; r < 7; ++r) {
            LAB_CHECK(cudaEventRecord(e0, s));
            read_ring<<<sms, 256, smem, s>>>(src, bytes, chunk, stages, mode, sink);
            LAB_CHECK(cudaEventRecord(e1, s));
            LAB_CHECK(cudaEventSynchronize(e1));
            float ms = 0;
            LAB_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms * 1e3f);
          }
          LAB_CHECK(cudaGetLastError());
          std::sort(t.begin(), t.end());
          const double gbs = bytes / t[3] / 1e3;
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
    fill_kernel<<<1024, 256, 0, s>>>(w[k], bytes, 77u + k);
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
  std::vector<StreamConfig> configs = {{8, 18432, 11, 0, kSyncNone},        {8, 18432, 11, 0, kSyncBlock},
                                       {8, 18432, 11, 1, kSyncBlock},       {16, 18432, 11, 1, kSyncBlock},
                                       {8, 36864, 5, 1, kSyncBlock},        {8, 18432, 4, 1, kSyncBlock},
                                       {8, 18432, 11, 1, kSyncTileRelease}, {8, 18432, 11, 1, kSyncTileFence},
                                       {8, 18432, 11, 1, kSyncNone}};
  if (const char* e = std::getenv("STREAM_LAB_CONFIGS")) {
    configs.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      StreamConfig c{};
      if (std::sscanf(item.c_str(), "%d:%d:%d:%d:%d", &c.warps, &c.slot_bytes, &c.stages, &c.math, &c.sync) != 5 ||
          (c.warps != 8 && c.warps != 16) || c.slot_bytes < 16128 || c.slot_bytes % 128 || c.stages < 1 ||
          c.sync < 0 || c.sync > kSyncNone) {
        std::fprintf(stderr, "STREAM_LAB_CONFIGS: '%s' is not warps(8|16):slot_bytes:stages:math(0|1):sync(0-3)\n",
                     item.c_str());
        return 2;
      }
      configs.push_back(c);
    }
  }
  ChainOp* d_ops;
  LAB_CHECK(cudaMalloc(&d_ops, n_ops * sizeof(ChainOp)));
  bool ok = true;
  for (const StreamConfig& c : configs) {
    if (size_t(ring_offset(c.stages, c.warps, n_ops)) + size_t(c.stages) * c.slot_bytes > prop.sharedMemPerBlockOptin) {
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
    static const char* kSyncNames[] = {"fence+add/tile", "add/tile", "once/product", "no waits"};
    for (int per_op = 0; per_op < 2; ++per_op) {
      if (per_op && (c.math != 1 || c.sync != kSyncBlock)) continue;
      static const char* kLevels[] = {"wait+release", "+barrier", "+reduce", "+store"};
      std::snprintf(name, sizeof name, "%s %d warps, %d x %d B, %s", per_op ? "per-op" : c.math > 0 ? "stream" : kLevels[c.math + 3],
                    c.warps, c.stages, c.slot_bytes, kSyncNames[c.sync]);
      LAB_CHECK(cudaMemset(y_out, 0, total_out * 4));
      cudaGraphExec_t g = capture(s, [&] {
        LAB_CHECK(cudaMemsetAsync(done, 0, n_ops * 4, s));
        if (per_op)
          for (int k = 0; k < n_ops; ++k) launch_stream_any(d_ops, k, k + 1, done, c, sms, s);
        else
          launch_stream_any(d_ops, 0, n_ops, done, c, sms, s);
      });
      const float us = graph_us(g, s, 20);
      LAB_CHECK(cudaGetLastError());
      if (std::getenv("STREAM_LAB_PROF") && !per_op) {
        LAB_CHECK(cudaMalloc(&g_prof, (sms + 256) * 4 * sizeof(long long)));
        LAB_CHECK(cudaMemset(g_prof, 0, (sms + 256) * 4 * sizeof(long long)));
        LAB_CHECK(cudaMemsetAsync(done, 0, n_ops * 4, s));
        launch_stream_any(d_ops, 0, n_ops, done, c, sms, s);
        LAB_CHECK(cudaStreamSynchronize(s));
        std::vector<long long> hp((sms + 256) * 4);
        LAB_CHECK(cudaMemcpy(hp.data(), g_prof, hp.size() * 8, cudaMemcpyDeviceToHost));
        int khz = 0;
        LAB_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
        const double clock_mhz = khz * 1e-3;
        double m[4] = {0, 0, 0, 0};
        for (int b = 0; b < sms; ++b)
          for (int e = 0; e < 4; ++e) m[e] += hp[4 * b + e] / double(sms) / clock_mhz;
        std::printf("  %s: us a block: consumer waits for tiles %.0f of %.0f, producer waits for slots %.0f of %.0f\n",
                    name, m[0], m[1], m[2], m[3]);
        std::printf("  block 0, cycles: tile: wait, work, sync, rest (to the next tile's wait)\n");
        for (int k = 0; k < 40; ++k) {
          const long long* e = hp.data() + 4 * sms + 4 * k;
          std::printf("  %3d: %6lld %6lld %6lld %6lld\n", k, e[1] - e[0], e[2] - e[1], e[3] - e[2], e[4] - e[3]);
        }
        LAB_CHECK(cudaFree(g_prof));
        g_prof = nullptr;
      }
      LAB_CHECK(cudaMemcpy(h_out.data(), y_out, total_out * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      if (c.math > 0) {  // (without waits the products still run, only their order is free)
        for (int k = 0; k < n_ops; ++k) err = std::max(err, rel_err(h_out, h_ref, out_off[k], shapes[k].second));
        if (!(err < 2e-3)) ok = false;
      }
      results.push_back({name, us, c.math > 0 ? err : -1.0});
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
