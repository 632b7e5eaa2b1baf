// Prompt products on the dequantising route (product_route.h's GemmDequant: a mixture's small attention
// projections) convert their weights to half on the compute stream right before cuBLAS multiplies them: a
// memory-bound pass in the chain (Qwen3-30B-A3B pp512: 1.34 ms of 23.7 ms in 192 launches, H100, session 76's
// timeline). DequantAhead takes it off the chain. The products that take it share a ring of kDequantAheadSlots
// slots, the j-th product slot j % slots; a side stream makes product j's copies once product j - slots (the slot's
// previous reader) has been launched, and product j's step waits for them and multiplies the copies
// (GemmParams::w_half). Where to queue them matters: right after the previous reader they ran beside the small
// launches that follow it (cuBLAS's, the router's, the norms), which grew by as much as the copies saved; queued
// right before the layer's first expert launch (anchor), at the highest priority, they run beside its tiles, which
// are bound by their issue latency and leave the memory mostly idle (session 74's Nsight): +1.2% on Qwen3-30B-A3B's
// pp512 (docs/kernel-notes.md, session 76). work_buffers reserves the ring only in graphs with such launches. The same
// half values reach the same cuBLAS call, so the products keep their bits.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/executor_options.h"
#include "cuda/kernels/gemm.cuh"
#include "cuda/product_route.h"
#include "cuda/raii.h"

namespace cuda {

// Slots in the ring: a product's copies are made while the products of the slots before it run (a mixture's layer
// has three: q, the k / v pair, o; so a copy has about a layer to be ready in).
constexpr int kDequantAheadSlots = 3;

// Whether a product takes the ring (ExecutorOptions::dequant_ahead_bytes): on the dequantising route with the whole
// matrix converted (more tokens than the matvec takes), its matrices' halves (half_bytes: one matrix, or a pair's
// two) within a slot of the budget.
inline bool dequant_ahead_takes(const ExecutorOptions& opt, ProductRoute route, int64_t T, size_t half_bytes) {
  return route == ProductRoute::GemmDequant && T > opt.matvec_max_tokens && half_bytes > 0 &&
         half_bytes <= opt.dequant_ahead_bytes / kDequantAheadSlots;
}

class DequantAhead {
 public:
  using Step = ::std::function<void(cudaStream_t)>;
  DequantAhead() = default;
  // A ring of ring_bytes (kDequantAheadSlots slots of ring_bytes / kDequantAheadSlots; 0: off, nothing allocated).
  DequantAhead(const ExecutorOptions& opt, size_t ring_bytes);

  // A product (GemmParams of one matrix, or a pair's two) on `route`, launched by the step that will be at index
  // `step`: its use of the ring (for ready()), or -1 when it does not take it (dequant_ahead_takes, or the ring off).
  int take(const GemmParams& p, ProductRoute route, size_t step);
  // A long launch at step index `step` (a mixture's expert tiles, bound by their issue latency, not the memory): a
  // use whose slot is free before it has its copies queued right before that launch, to run beside it.
  void anchor(size_t step) {
    if (slot_bytes_ && opt_.dequant_ahead_anchors) anchors_.push_back(step);
  }
  // Lowering dropped the steps from index `step` on (ExecutorOptions::omit_steps_of): their products take no copies.
  void drop_from(size_t step);
  // After lowering, before any step is inserted in front: each use's copies are queued right before the first anchor
  // between the slot's previous use and its own, else right after that previous use's launch (the first uses: before
  // the first step).
  void attach(::std::vector<Step>& steps) const;
  // At launch, on the product's stream: waits for the use's copies and returns them (GemmParams::w_half).
  const uint16_t* ready(int use, cudaStream_t s) const;

  size_t bytes() const { return ring_.bytes(); }
  size_t uses() const { return uses_.size(); }

 private:
  struct Use {
    DequantF16Params m[2];  // out: an offset into the slot, made an address at launch
    int n = 0;
    size_t step = 0;
  };
  void fork(size_t use, cudaStream_t s) const;  // queues the use's copies on the side stream after s's work so far

  ExecutorOptions opt_;
  DeviceBuffer ring_;
  size_t slot_bytes_ = 0;
  Stream side_;
  ::std::vector<Event> ready_, freed_;  // by slot: its copies made; its previous reader launched
  ::std::vector<Use> uses_;
  ::std::vector<size_t> anchors_;  // ascending step indices
};

}  // namespace cuda
