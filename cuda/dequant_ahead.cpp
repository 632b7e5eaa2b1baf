#include "cuda/dequant_ahead.h"

#include <algorithm>
#include <map>
#include <utility>

#include "cuda/check.h"

namespace cuda {

DequantAhead::DequantAhead(const ExecutorOptions& opt, size_t ring_bytes) : opt_(opt) {
  slot_bytes_ = ring_bytes / kDequantAheadSlots / 256 * 256;  // every slot on a 256-byte boundary (cuBLASLt)
  if (slot_bytes_ == 0) return;
  ring_ = DeviceBuffer(slot_bytes_ * kDequantAheadSlots);
  side_ = opt.dequant_ahead_urgent ? Stream::create_urgent() : Stream::create();
  for (int i = 0; i < kDequantAheadSlots; ++i) ready_.push_back(Event::create()), freed_.push_back(Event::create());
}

int DequantAhead::take(const GemmParams& p, ProductRoute route, size_t step) {
  const size_t half = gemm_half_bytes(p.K, p.N), bytes = half * (p.w2 ? 2 : 1);
  if (!slot_bytes_ || bytes > slot_bytes_ || !dequant_ahead_takes(opt_, route, p.T, bytes)) return -1;
  Use u;
  u.n = p.w2 ? 2 : 1;
  for (int i = 0; i < u.n; ++i) {  // in the batched call's order (GemmParams::w_half)
    u.m[i] = gemm_member_dequant(p, i);
    u.m[i].out = reinterpret_cast<uint16_t*>(uintptr_t(i * half));  // an offset into the slot
  }
  u.step = step;
  uses_.push_back(u);
  return int(uses_.size() - 1);
}

void DequantAhead::drop_from(size_t step) {
  while (!uses_.empty() && uses_.back().step >= step) uses_.pop_back();
  while (!anchors_.empty() && anchors_.back() >= step) anchors_.pop_back();
}

void DequantAhead::attach(::std::vector<Step>& steps) const {
  struct Forks {
    ::std::vector<size_t> before, after;  // the uses forked before / after the step's launch
  };
  ::std::map<size_t, Forks> at;  // by step index
  for (size_t j = 0; j < uses_.size(); ++j) {
    const size_t from = j < size_t(kDequantAheadSlots) ? 0 : uses_[j - kDequantAheadSlots].step + 1;
    const auto a = ::std::lower_bound(anchors_.begin(), anchors_.end(), from);
    if (a != anchors_.end() && *a < uses_[j].step) at[*a].before.push_back(j);
    else if (j < size_t(kDequantAheadSlots)) at[0].before.push_back(j);
    else at[from - 1].after.push_back(j);
  }
  for (auto& [k, f] : at) {
    Step& step = steps.at(k);
    step = [this, f = ::std::move(f), old = ::std::move(step)](cudaStream_t s) {
      for (const size_t j : f.before) fork(j, s);
      old(s);
      for (const size_t j : f.after) fork(j, s);
    };
  }
}

void DequantAhead::fork(size_t use, cudaStream_t s) const {
  const Use& u = uses_[use];
  const size_t slot = use % kDequantAheadSlots;
  auto* base = static_cast<uint8_t*>(ring_.get()) + slot * slot_bytes_;
  freed_[slot].record(s);  // after the slot's previous reader (or, for the first uses, all the run's work before)
  CUDA_CHECK(cudaStreamWaitEvent(side_.get(), freed_[slot].get(), 0));
  for (int i = 0; i < u.n; ++i) {
    DequantF16Params m = u.m[i];
    m.out = reinterpret_cast<uint16_t*>(base + reinterpret_cast<uintptr_t>(u.m[i].out));
    launch_dequant_f16(m, side_.get());
  }
  ready_[slot].record(side_.get());
}

const uint16_t* DequantAhead::ready(int use, cudaStream_t s) const {
  const size_t slot = size_t(use) % kDequantAheadSlots;
  CUDA_CHECK(cudaStreamWaitEvent(s, ready_[slot].get(), 0));
  return reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(ring_.get()) + slot * slot_bytes_);
}

}  // namespace cuda
