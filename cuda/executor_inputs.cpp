// The executor's exchanges with the host around a run: the page-locked staging of the Input nodes' values and the
// first kernel's copies from it (write_inputs, add_host_input), the token sources of pipelined steps (the decode
// session's run-ahead, a paged step's gather) and the argmax ring a paged step writes its ids into.
#include <algorithm>
#include <cstring>

#include "cuda/executor.h"
#include "cuda/paged_batch.h"

namespace cuda {

using graph::NodeId;
using graph::Op;

void Executor::add_host_input(const int32_t* src, void* dst, int32_t n, const int32_t* n_at) {
  if (host_inputs_.n == HostCopies::kMax) throw InvalidArgument("more than " + ::std::to_string(HostCopies::kMax) +
                                                                " inputs copied from the host");
  host_inputs_.c[host_inputs_.n++] = HostCopy{src, static_cast<int32_t*>(dst), n, n_at};
  drop_capture();
}

void Executor::set_tokens_alternative(const int32_t* alt_src, const int32_t* use_alt_at) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].second != graph::InputParams::Kind::Tokens) continue;
    HostCopy& c = host_inputs_.c[input_copy_[i]];
    c.alt_src = alt_src, c.use_alt_at = use_alt_at;
  }
  drop_capture();
}

void Executor::set_tokens_gather(const int32_t* src) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].second != graph::InputParams::Kind::Tokens) continue;
    HostCopy& c = host_inputs_.c[input_copy_[i]];
    gather_rows_ = PinnedBuffer(size_t(c.n) * 4);
    ::std::fill_n(gather_rows_.as<int32_t>(), c.n, -1);
    c.gather_src = src;
    c.gather_rows = static_cast<const int32_t*>(device_address_of_pinned(gather_rows_.get()));
  }
  drop_capture();
}

void Executor::write_inputs(::std::span<const int32_t> tokens, ::std::span<const int32_t> positions) {
  write_inputs(graph::RunInputs{tokens, positions, {}, {}, {}});
}

void Executor::write_inputs(const graph::RunInputs& in) { write_inputs(in, {}); }

void Executor::write_inputs(const graph::RunInputs& in, ::std::span<const int32_t> token_from) {
  const size_t n_gather = gather_rows_.bytes() / 4;
  if (!token_from.empty() && token_from.size() != n_gather)
    throw InvalidArgument(n_gather ? "expected " + ::std::to_string(n_gather) + " token gather indices, got " +
                                         ::std::to_string(token_from.size())
                                   : ::std::string("token gather indices for a graph that gathers none"));
  for (const auto& [id, kind] : inputs_) {  // every check before anything is written
    const size_t n = size_t(g_.node(id).shape.elements());
    if (in.of(kind).size() != n)
      throw InvalidArgument(describe(g_.node(id)) + ": expected " + ::std::to_string(n) + " " +
                            graph::input_kind_name(kind) + " values, got " + ::std::to_string(in.of(kind).size()));
  }
  if (paged_tiles_.bytes()) check_paged_inputs(g_.kv, paged_reach_, in);
  // The previous run may still read the staging (normally long finished); with staging_event only until its first
  // kernel has, so that a pipelined step is queued while the one before runs.
  if (opt_.staging_event)
    inputs_read_.synchronize();
  else
    wait();
  if (n_gather) {
    if (token_from.empty())
      ::std::fill_n(gather_rows_.as<int32_t>(), n_gather, -1);
    else
      ::std::memcpy(gather_rows_.get(), token_from.data(), token_from.size_bytes());
  }
  auto* st = input_staging_.as<uint8_t>();
  for (const auto& [id, kind] : inputs_) {
    auto src = in.of(kind);
    if (kind == graph::InputParams::Kind::BlockTable && table_count_.bytes()) {
      // Only the rows up to the highest a token uses are staged and copied (each token reads its own row only).
      const int32_t rows = in.kv_seq.empty() ? 1 : *::std::max_element(in.kv_seq.begin(), in.kv_seq.end()) + 1;
      const size_t n = ::std::min(src.size(), size_t(rows) * size_t(g_.kv.max_blocks));
      *table_count_.as<int32_t>() = int32_t(n);
      ::std::memcpy(st, src.data(), n * 4);
      st += src.size_bytes();
      continue;
    }
    ::std::memcpy(st, src.data(), src.size_bytes());
    st += src.size_bytes();
  }
  if (paged_tiles_.bytes()) {
    auto* const tiles = reinterpret_cast<int32_t*>(st);
    const size_t T = in.positions.size(), n_tiles = size_t(PagedTiles::ints(int64_t(T)));
    LLM_REQUIRE(paged_tiles_.bytes() / 4 == n_tiles + T, "paged tiles: staging size");
    plan_paged_tiles(in.positions, in.kv_seq, {tiles, n_tiles});
    if (opt_.paged_run_bases) plan_run_bases(g_.kv, in, {tiles + n_tiles, T});
    else ::std::fill_n(tiles + n_tiles, T, -1);
  }
  const auto& pos = in.positions;
  max_pos_ = pos.empty() ? INT32_MAX : *::std::max_element(pos.begin(), pos.end());
  alone_ = has_alone_ && tokens_of_distinct_sequences(pos, in.kv_seq);
}

void Executor::set_argmax_ring(NodeId argmax, int32_t* ring, int64_t stride) {
  if (argmax < 0 || size_t(argmax) >= g_.nodes().size() || g_.node(argmax).op != Op::Argmax)
    throw InvalidArgument("set_argmax_ring: not an Argmax node");
  if (!ring || stride < g_.node(g_.node(argmax).inputs.at(0)).shape.rows())
    throw InvalidArgument("set_argmax_ring: no ring, or a slot shorter than the node's rows");
  if (!ring_slot_.bytes()) {
    ring_slot_ = PinnedBuffer(4);
    *ring_slot_.as<int32_t>() = 0;
    ring_slot_device_ = DeviceBuffer(4);
    add_host_input(static_cast<const int32_t*>(device_address_of_pinned(ring_slot_.get())), ring_slot_device_.get(),
                   1);
  }
  ring_node_ = argmax, ring_ = ring, ring_stride_ = stride;
  drop_capture();
}

void Executor::set_ring_slot(int32_t slot) {
  if (!ring_slot_.bytes()) throw InvalidArgument("set_ring_slot: no ring (set_argmax_ring)");
  *ring_slot_.as<int32_t>() = slot;
}

}  // namespace cuda
