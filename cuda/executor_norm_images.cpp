// An add + RMSNorm between i8 products, without a launch of its own (ExecutorOptions::norm_images). At 3..8 tokens a
// layer's two add + norm launches (fold_add_norm) cost ~4.5 us each of a 4-sequence step's chain, for a few KB of
// work: one block a token, then the dependency on the next launch (docs/kernel-notes.md, session 55). Where the
// Add's product operand and every reader of the norm are i8 launches (batch_mm_i8.cuh), the product adds the
// residual as it writes its output into the Add's slot and leaves each tile's sums of squares beside it, and each
// reader's image launch, which reads x anyway, finds the scale from those sums and normalises (I8NormLink). The sum
// is the same float add; the scale's sum of squares is taken in another order than the norm launch's, so the
// normalised x may differ from it in the last bits.
#include <algorithm>

#include "cuda/executor.h"

namespace cuda {

using graph::Node;
using graph::NodeId;
using graph::Op;

// A MulMat launched by the i8 small-batch kernel (lower_gemm's route: small-batch, not few-column, i8 chosen).
bool Executor::i8_takes(const Node& m) const {
  if (m.op != Op::MulMat || m.inputs.size() < 2 || !batch_mm_takes(m) || matvec_cols_takes(m)) return false;
  const Node& w = g_.node(m.inputs[0]);
  return batch_mm_takes_i8(::std::get<graph::WeightParams>(w.params).type, regrouped(w), w.shape.ne[0], launch_rows(m),
                           m.shape.rows(), opt_.batch_mm);
}

void Executor::fold_norm_into_images(const Node& norm) {
  if (!opt_.fuse || lowering(norm.id) != Lowering::Own || norm.inputs.size() < 2 || norm.inputs[1] == graph::kNoNode)
    return;
  if (plan_.last_use.at(size_t(norm.id)) >= int32_t(g_.nodes().size())) return;  // an output: stored
  const Node& a = g_.node(norm.inputs[0]);  // the residual Add, folded into the norm's launch until now
  if (a.op != Op::Add || lowering(a.id) != Lowering::InNorm || a.inputs.size() != 2) return;
  const int64_t K = norm.shape.ne[0];
  if (!batch_mm_i8_norm_fits(K) || !plan_.owns(a.id)) return;
  // The readers: i8 launches of x = the norm (stacked members ride on their leader's launch and image).
  ::std::vector<NodeId> launches;
  for (const NodeId u : users_.at(size_t(norm.id))) {
    const Node& m = g_.node(u);
    if (m.op != Op::MulMat || m.inputs[1] != norm.id || m.inputs[0] == norm.id) return;
    if (lowering(u) == Lowering::InSibling) continue;
    if (lowering(u) != Lowering::Own || !i8_takes(m) || g_.node(m.inputs[0]).shape.ne[0] != K ||
        norm_links_.contains(u) || plan_.last_use.at(size_t(a.id)) < u)
      return;
    launches.push_back(u);
  }
  if (launches.empty()) return;
  // The producer: one operand of the Add, a plain i8 launch (no stack, no SwiGLU epilogue) read by the Add alone.
  for (int side = 0; side < 2; ++side) {
    const Node& m = g_.node(a.inputs[size_t(side)]);
    const NodeId residual = a.inputs[size_t(1 - side)];
    if (m.op != Op::MulMat || lowering(m.id) != Lowering::Own || !i8_takes(m) || norm_links_.contains(m.id) ||
        glu_epilogues_.contains(m.id) || small_batch_stacks_.contains(m.id) || users_.at(size_t(m.id)).size() != 1 ||
        g_.node(m.inputs[0]).shape.ne[1] != K || residual > m.id)
      continue;
    // The Add's slot is written at the product's step now: nothing alive from there to the norm may share it, but
    // what only the product's image launch reads (its x, or a SwiGLU's gate and up it forms), done before the
    // product's epilogue runs. Its residual operand is read there element by element by the writing thread (the
    // same bytes or none of them).
    const auto read_by_image_alone = [&](NodeId id) {
      const NodeId root = plan_.root.at(size_t(id));
      return plan_.last_use.at(size_t(root)) <= m.id ? root : graph::kNoNode;
    };
    const Node& x = g_.node(m.inputs[1]);
    const bool glu_x = lowering(x.id) == Lowering::InImage;
    const NodeId x_root = glu_x ? x.id : read_by_image_alone(x.id);
    const NodeId gate = glu_x ? read_by_image_alone(x.inputs[0]) : graph::kNoNode;
    const NodeId up = glu_x ? read_by_image_alone(x.inputs[1]) : graph::kNoNode;
    const NodeId r = plan_.root.at(size_t(residual));
    const bool in_place = g_.node(r).op != Op::Input && plan_.owns(r) &&
                          plan_.offset.at(size_t(r)) == plan_.offset.at(size_t(a.id)) &&
                          plan_.bytes.at(size_t(r)) == plan_.bytes.at(size_t(a.id));
    const NodeId same_bytes = in_place ? r : graph::kNoNode;
    if (!slot_free_between(a.id, m.id, norm.id, {a.id, m.id, norm.id, x_root, gate, up, same_bytes})) continue;
    const size_t sums = batch_mm_i8_sumsq_floats(K);
    if (!norm_sums_.bytes()) norm_sums_ = DeviceBuffer(sums * 4);
    if (norm_sums_.bytes() < sums * 4) return;  // another width than the first fold's: left to the norm's launch
    auto* const sumsq = norm_sums_.as<float>();
    NormLink producer;
    producer.link.residual = f32_in(a, size_t(1 - side)), producer.link.sumsq_out = sumsq;
    producer.y = f32_out(a);
    norm_links_[m.id] = producer;
    for (const NodeId u : launches) {
      NormLink reader;
      reader.link.norm_w = f32_in(norm, 1), reader.link.sumsq_in = sumsq;
      reader.link.parts = int32_t(sums / size_t(kBatchMmI8MaxTokens));  // the producer's tiles
      reader.link.eps = ::std::get<graph::RmsNormParams>(norm.params).eps;
      reader.x = f32_out(a);
      norm_links_[u] = reader;
    }
    lowering_.at(size_t(norm.id)) = Lowering::InImages;
    lowering_.at(size_t(a.id)) = Lowering::Epilogue;
    count_fusion(Fusion::NormInImages);
    return;
  }
}

}  // namespace cuda
