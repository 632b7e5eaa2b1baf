// Lowering of the element-wise ops (Add, Mul, the unary ops, the gated activations, Slice): each a launch of its
// own unless a neighbour's launch computes it (plan_fusions), on NVRTC's fused kernels where they compiled.
#include "cuda/executor.h"
#include "cuda/kernels/elementwise.cuh"

namespace cuda {

using graph::Node;
using graph::Op;

void Executor::lower_binary(const Node& n) {
  // Written by the launch of the product that feeds it, or of the norm that reads it.
  if (lowering(n.id) == Lowering::Epilogue || lowering(n.id) == Lowering::InNorm) return;
  const int64_t nb = g_.node(n.inputs.at(1)).shape.elements();
  const FusedShape fs{n.op == Op::Add ? FusedKind::Add : FusedKind::Mul, n.shape.elements(), nb};
  if (const FusedElementwise* f = fused(fs)) {
    const float *a = f32_in(n, 0), *b = f32_in(n, 1);
    float* out = f32_out(n);
    steps_.push_back([f, a, b, out](cudaStream_t s) { f->launch(a, b, out, s); });
    return;
  }
  const BinaryParams p{n.op == Op::Add ? BinaryOp::Add : BinaryOp::Mul, f32_in(n, 0), f32_in(n, 1), f32_out(n),
                       n.shape.elements(), nb};
  steps_.push_back([p](cudaStream_t s) { launch_binary(p, s); });
}

void Executor::lower_unary(const Node& n) {
  UnaryParams p{UnaryOp::Silu, f32_in(n, 0), f32_out(n), n.shape.elements()};
  if (n.op == Op::Scale) p.op = UnaryOp::Scale, p.param = ::std::get<graph::ScaleParams>(n.params).scale;
  if (n.op == Op::Softcap) p.op = UnaryOp::Softcap, p.param = ::std::get<graph::SoftcapParams>(n.params).cap;
  steps_.push_back([p](cudaStream_t s) { launch_unary(p, s); });
}

void Executor::lower_geglu(const Node& n) {
  if (lowering(n.id) == Lowering::Epilogue) return;  // written by the gate/up launch (fold_swiglu_epilogue)
  const SwiGluParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), n.shape.elements(), half_x_for(n)};
  steps_.push_back([p](cudaStream_t s) { launch_geglu(p, s); });
  if (p.half_out) last_gemm_ = {steps_.size(), p.out, n.shape.ne[0], n.shape.rows()};
}

void Executor::lower_slice(const Node& n) {
  const auto& sp = ::std::get<graph::SliceParams>(n.params);
  const graph::Shape& in = g_.node(n.inputs.at(0)).shape;
  const SliceParams p{f32_in(n, 0), f32_out(n), in.ne[0], in.rows(), sp.offset, sp.n};
  steps_.push_back([p](cudaStream_t s) { launch_slice(p, s); });
}

void Executor::lower_swiglu(const Node& n) {
  // Written by the gate/up launch (fold_swiglu_epilogue), or formed by the down launch's x image (fold_glu_into_image).
  if (lowering(n.id) == Lowering::Epilogue || lowering(n.id) == Lowering::InImage) return;
  if (void* half = half_x_for(n)) {  // the down product's half x as well: the ahead-of-time kernel writes both
    const SwiGluParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), n.shape.elements(), half};
    steps_.push_back([p](cudaStream_t s) { launch_swiglu(p, s); });
    last_gemm_ = {steps_.size(), p.out, n.shape.ne[0], n.shape.rows()};
    return;
  }
  if (const FusedElementwise* f = fused({FusedKind::SwiGlu, n.shape.elements(), n.shape.elements()})) {
    const float *a = f32_in(n, 0), *b = f32_in(n, 1);
    float* out = f32_out(n);
    steps_.push_back([f, a, b, out](cudaStream_t s) { f->launch(a, b, out, s); });
    return;
  }
  const SwiGluParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), n.shape.elements()};
  steps_.push_back([p](cudaStream_t s) { launch_swiglu(p, s); });
}

}  // namespace cuda
