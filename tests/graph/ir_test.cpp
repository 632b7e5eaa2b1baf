// IR builders: output shapes and dtypes, names, lookups, and shape validation errors that name the node and shapes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "graph/ir.h"
#include "graph_test_util.h"

using namespace graph;
using graph_test::WeightStore;

namespace {

Shape sh(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) { return Shape{{a, b, c, d}}; }

// Runs f, expects std::invalid_argument whose message contains every string of `parts`.
template <class F>
void expect_invalid(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing in: " << msg;
  }
}

}  // namespace

TEST(GraphIr, NamesAndShapeStrings) {
  EXPECT_STREQ(op_name(Op::MulMat), "MulMat");
  EXPECT_STREQ(op_name(Op::Attention), "Attention");
  EXPECT_STREQ(op_name(Op::Argmax), "Argmax");
  EXPECT_STREQ(dtype_name(DType::I32), "i32");
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(to_string(sh(3, 5)), "[3, 5, 1, 1]");
  EXPECT_EQ(sh(3, 5, 2).elements(), 30);
  EXPECT_EQ(sh(3, 5, 2).rows(), 10);
  EXPECT_THROW(op_name(static_cast<Op>(200)), std::invalid_argument);
}

TEST(GraphIr, BuildersComputeShapesAndDtypes) {
  Graph g;
  WeightStore ws;
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, 3);
  const auto pos = g.input("positions", InputParams::Kind::Positions, 3);
  EXPECT_EQ(g.node(tok).dtype, DType::I32);
  EXPECT_EQ(g.node(tok).shape, sh(3));
  const auto emb = ws.add(g, "emb", std::vector<float>(8 * 11), sh(8, 11));
  const auto x = g.get_rows("x", emb, tok);
  EXPECT_EQ(g.node(x).shape, sh(8, 3));
  EXPECT_EQ(g.node(x).dtype, DType::F32);
  const auto w = ws.add(g, "w", std::vector<float>(8 * 12), sh(8, 12));
  const auto b = ws.add(g, "b", std::vector<float>(12), sh(12));
  const auto y = g.mul_mat("y", w, x, b);
  EXPECT_EQ(g.node(y).shape, sh(12, 3));
  EXPECT_EQ(g.node(y).inputs.size(), 3u);
  const auto n = g.rms_norm("n", y, ws.add(g, "nw", std::vector<float>(12), sh(12)), 1e-6f);
  EXPECT_EQ(g.node(n).shape, sh(12, 3));
  EXPECT_FLOAT_EQ(std::get<RmsNormParams>(g.node(n).params).eps, 1e-6f);
  const auto r = g.reshape("r", n, sh(4, 3, 3));
  EXPECT_EQ(g.node(r).shape, sh(4, 3, 3));
  RopeParams rp;
  rp.n_rot = 4;
  const auto q = g.rope("q", r, pos, rp);
  EXPECT_EQ(g.node(q).shape, sh(4, 3, 3));
  const auto kv = g.reshape("kv", g.mul_mat("kvm", ws.add(g, "wk", std::vector<float>(8 * 4), sh(8, 4)), x),
                            sh(4, 1, 3));
  const auto vv = g.reshape("vv", g.mul_mat("vvm", ws.add(g, "wv", std::vector<float>(8 * 5), sh(8, 5)), x),
                            sh(5, 1, 3));
  const auto a = g.attention("att", q, kv, vv, pos, AttentionParams{0, 3, 1, 4, 5, 0.5f});
  EXPECT_EQ(g.node(a).shape, sh(15, 3));
  const auto l = g.last_token("last", a);
  EXPECT_EQ(g.node(l).shape, sh(15));
  const auto am = g.argmax("am", a);
  EXPECT_EQ(g.node(am).shape, sh(3));
  EXPECT_EQ(g.node(am).dtype, DType::I32);
  EXPECT_EQ(g.node(g.softmax("sm", a)).shape, sh(15, 3));
  EXPECT_EQ(g.node(g.mul("m", a, ws.add(g, "mw", std::vector<float>(15), sh(15)))).shape, sh(15, 3));
  EXPECT_EQ(g.node(g.swiglu("sw", y, y)).shape, sh(12, 3));
  // ids are indices into nodes(), in insertion order
  for (size_t i = 0; i < g.nodes().size(); ++i) EXPECT_EQ(g.nodes()[i].id, static_cast<NodeId>(i));
}

TEST(GraphIr, FindAndMarkOutput) {
  Graph g;
  const auto a = g.input("tokens", InputParams::Kind::Tokens, 2);
  const auto b = g.input("positions", InputParams::Kind::Positions, 2);
  EXPECT_EQ(g.find("positions"), b);
  EXPECT_EQ(g.find("tokens"), a);
  EXPECT_EQ(g.find("nope"), kNoNode);
  g.mark_output(b);
  g.mark_output(b);
  g.mark_output(a);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0], b);
  EXPECT_THROW(g.mark_output(7), std::invalid_argument);
  EXPECT_THROW(g.mark_output(-1), std::invalid_argument);
}

TEST(GraphIr, ShapeErrorsNameNodeAndShapes) {
  Graph g;
  WeightStore ws;
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, 3);
  const auto pos = g.input("positions", InputParams::Kind::Positions, 3);
  const auto emb = ws.add(g, "emb", std::vector<float>(8 * 11), sh(8, 11));
  const auto x = g.get_rows("x", emb, tok);
  const auto w = ws.add(g, "blk.0.attn_q.weight", std::vector<float>(9 * 4), sh(9, 4));
  expect_invalid([&] { g.mul_mat("blk.0.attn_q", w, x); }, {"blk.0.attn_q", "MulMat", "[9, 4, 1, 1]", "[8, 3, 1, 1]"});
  const auto w8 = ws.add(g, "w8", std::vector<float>(8 * 4), sh(8, 4));
  expect_invalid([&] { g.mul_mat("mm", w8, x, ws.add(g, "bias", std::vector<float>(5), sh(5))); }, {"mm", "bias"});
  expect_invalid([&] { g.rms_norm("norm", x, ws.add(g, "nw", std::vector<float>(7), sh(7)), 1e-5f); },
                 {"norm", "RmsNorm", "[7, 1, 1, 1]"});
  expect_invalid([&] { g.add("sum", x, w); }, {"sum", "Add", "element count"});
  expect_invalid([&] { g.mul("prod", x, ws.add(g, "m5", std::vector<float>(5), sh(5))); }, {"prod", "Mul"});
  expect_invalid([&] { g.reshape("view", x, sh(5, 5)); }, {"view", "[5, 5, 1, 1]", "[8, 3, 1, 1]"});
  expect_invalid([&] { g.get_rows("rows", emb, x); }, {"rows", "i32"});
  expect_invalid([&] { g.get_rows("rows", emb, 99); }, {"rows", "99"});
  expect_invalid([&] { g.silu("", x); }, {"name"});
  const auto heads = g.reshape("heads", x, sh(4, 2, 3));
  RopeParams rp;
  rp.n_rot = 6;
  expect_invalid([&] { g.rope("rope", heads, pos, rp); }, {"rope", "n_rot 6"});
  rp.n_rot = 4;
  const auto pos2 = g.input("pos2", InputParams::Kind::Positions, 2);
  expect_invalid([&] { g.rope("rope", heads, pos2, rp); }, {"rope", "positions", "[2, 1, 1, 1]"});
  expect_invalid([&] { g.rope("rope", heads, pos, rp, ws.add(g, "ff", std::vector<float>(3), sh(3))); },
                 {"freq_factors"});
  // q [4, 2, 3] with n_head 3 / bad GQA ratio / mismatched k
  expect_invalid([&] { g.attention("att", heads, heads, heads, pos, AttentionParams{0, 3, 1, 4, 4, 1.0f}); },
                 {"att", "Attention", "q", "[4, 3, 3, 1]"});
  expect_invalid([&] { g.attention("att", heads, heads, heads, pos, AttentionParams{0, 2, 3, 4, 4, 1.0f}); },
                 {"att", "n_head_kv 3"});
  expect_invalid([&] { g.attention("att", heads, heads, heads, pos, AttentionParams{0, 2, 1, 4, 4, 1.0f}); },
                 {"att", "k", "[4, 1, 3, 1]"});
  expect_invalid([&] { g.input("tokens2", InputParams::Kind::Tokens, 0); }, {"tokens2"});
  expect_invalid([&] { g.last_token("last", heads); }, {"last"});
  expect_invalid([&] { g.argmax("am", tok); }, {"am", "f32"});
}

TEST(GraphIr, WeightValidation) {
  Graph g;
  WeightStore ws;
  WeightParams p;
  p.tensor = "blk.0.ffn_up.weight";
  p.type = quant::Type::Q4_0;
  p.host = nullptr;
  // Q4_0 rows are blocks of 32 elements: 18 bytes each.
  const auto ok = g.weight("up", p, sh(64, 3));
  EXPECT_EQ(std::get<WeightParams>(g.node(ok).params).nbytes, 2u * 18u * 3u);
  expect_invalid([&] { g.weight("odd", p, sh(33, 3)); }, {"odd", "33", "Q4_0"});
  p.nbytes = 100;
  expect_invalid([&] { g.weight("wrong", p, sh(64, 3)); }, {"wrong", "blk.0.ffn_up.weight", "108", "100"});
  p.nbytes = 0;
  expect_invalid([&] { g.weight("neg", p, sh(64, 0)); }, {"neg"});
  // a quantized weight may be viewed only with its row length kept
  expect_invalid([&] { g.reshape("flat", ok, sh(192)); }, {"flat", "row length"});
  EXPECT_EQ(g.node(g.reshape("split", ok, sh(64, 1, 3))).shape, sh(64, 1, 3));
}
