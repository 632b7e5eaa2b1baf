// Printable dump: header with arena size and outputs, one aligned line per node with names, ops, shapes, offsets.
#include <gtest/gtest.h>

#include <sstream>

#include "graph/plan.h"
#include "graph/print.h"
#include "graph_test_util.h"

using namespace graph;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// s between spaces, as a column of the dump shows it.
std::string word(const std::string& s) {
  std::string w(1, ' ');
  w.append(s).push_back(' ');
  return w;
}

}  // namespace

TEST(GraphPrint, OneLinePerNodeWithPlan) {
  graph_test::TinyConfig c;
  c.n_layer = 1;
  const graph_test::TinyWeights w(c, 3);
  graph_test::TinyGraph tg;
  graph_test::build_tiny(tg, c, w, 2);
  const Graph& g = tg.g;
  const Plan p = plan(g);
  const auto lines = lines_of(to_string(g, &p));
  // 3 header lines + column titles + one per node
  ASSERT_EQ(lines.size(), 4 + g.nodes().size());
  EXPECT_TRUE(contains(lines[0], std::to_string(g.nodes().size()) + " nodes")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "result_output")) << lines[0];
  EXPECT_TRUE(contains(lines[1], "arena: " + std::to_string(p.arena_bytes) + " bytes")) << lines[1];
  EXPECT_TRUE(contains(lines[2], "n_ctx " + std::to_string(c.n_ctx))) << lines[2];
  EXPECT_TRUE(contains(lines[3], "name") && contains(lines[3], "offset")) << lines[3];
  for (const Node& n : g.nodes()) {
    const std::string& l = lines[4 + static_cast<size_t>(n.id)];
    EXPECT_EQ(l.rfind(word(std::to_string(n.id)).substr(1), 0), 0u) << l;
    EXPECT_TRUE(contains(l, word(n.name))) << l;
    EXPECT_TRUE(contains(l, op_name(n.op))) << l;
    EXPECT_TRUE(contains(l, to_string(n.shape))) << l;
    for (NodeId in : n.inputs) EXPECT_TRUE(contains(l, g.node(in).name)) << l;
    if (p.owns(n.id)) {
      EXPECT_TRUE(contains(l, word(std::to_string(p.offset[static_cast<size_t>(n.id)])))) << l;
    }
  }
  const std::string att = lines[4 + static_cast<size_t>(g.find("blk.0.attn"))];
  EXPECT_TRUE(contains(att, "layer=0 heads=4/2 head_dim=6/6")) << att;
  const std::string view = lines[4 + static_cast<size_t>(g.find("blk.0.q_heads"))];
  EXPECT_TRUE(contains(view, "view of blk.0.attn_q")) << view;
  const std::string weight = lines[4 + static_cast<size_t>(g.find("token_embd"))];
  EXPECT_TRUE(contains(weight, "F32") && contains(weight, "token_embd.weight")) << weight;
  const std::string rope = lines[4 + static_cast<size_t>(g.find("blk.0.q_rope"))];
  EXPECT_TRUE(contains(rope, "normal n_rot=6 base=10000")) << rope;
}

TEST(GraphPrint, WithoutPlan) {
  Graph g;
  const auto t = g.input("tokens", InputParams::Kind::Tokens, 3);
  g.mark_output(t);
  const std::string s = to_string(g);
  EXPECT_TRUE(contains(s, "not planned")) << s;
  EXPECT_TRUE(contains(s, "tokens")) << s;
  EXPECT_TRUE(contains(s, "[3, 1, 1, 1]")) << s;
  EXPECT_EQ(lines_of(s).size(), 5u);
}
