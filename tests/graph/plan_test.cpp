// Buffer planner: simultaneously live tensors never overlap (liveness recomputed here independently of the planner),
// on many random graphs and on a llama-like graph; views share their source's bytes; memory is actually reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "graph/plan.h"
#include "graph_test_util.h"

using namespace graph;

namespace {

Shape sh(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) { return Shape{{a, b, c, d}}; }

std::string name_of(const char* prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// Checks every placement invariant of p against g; liveness is derived here from the graph alone.
void check_plan(const Graph& g, const Plan& p, bool all_live = false) {
  const auto& nodes = g.nodes();
  const auto n = static_cast<int>(nodes.size());
  ASSERT_TRUE(p.covers(g));
  ASSERT_EQ(p.arena_bytes % p.alignment, 0u);
  // storage owner of each node
  std::vector<int> owner(nodes.size());
  for (int i = 0; i < n; ++i) {
    const Node& nd = nodes[static_cast<size_t>(i)];
    owner[static_cast<size_t>(i)] = nd.op == Op::Reshape ? owner[static_cast<size_t>(nd.inputs[0])] : i;
  }
  std::vector<int> end(nodes.size());
  for (int i = 0; i < n; ++i) end[static_cast<size_t>(i)] = (all_live || nodes[static_cast<size_t>(i)].op == Op::Input) ? n : i;
  for (int i = 0; i < n; ++i)
    for (NodeId in : nodes[static_cast<size_t>(i)].inputs)
      end[static_cast<size_t>(owner[static_cast<size_t>(in)])] =
          std::max(end[static_cast<size_t>(owner[static_cast<size_t>(in)])], i);
  for (NodeId o : g.outputs()) end[static_cast<size_t>(owner[static_cast<size_t>(o)])] = n;

  struct Buf {
    int id;
    uint64_t lo, hi;
    int from, to;
  };
  std::vector<Buf> bufs;
  for (int i = 0; i < n; ++i) {
    const Node& nd = nodes[static_cast<size_t>(i)];
    const auto si = static_cast<size_t>(i);
    const Node& root = nodes[static_cast<size_t>(owner[si])];
    if (root.op == Op::Weight) {
      EXPECT_EQ(p.offset[si], -1) << nd.name;
      continue;
    }
    const uint64_t bytes = static_cast<uint64_t>(nd.shape.elements()) * dtype_size(nd.dtype);
    EXPECT_EQ(p.bytes[si], bytes) << nd.name;
    ASSERT_GE(p.offset[si], 0) << nd.name;
    EXPECT_EQ(static_cast<uint64_t>(p.offset[si]) % p.alignment, 0u) << nd.name;
    EXPECT_LE(static_cast<uint64_t>(p.offset[si]) + bytes, p.arena_bytes) << nd.name;
    if (owner[si] != i) {
      EXPECT_EQ(p.offset[si], p.offset[static_cast<size_t>(owner[si])]) << nd.name << " must alias its source";
      EXPECT_FALSE(p.owns(i));
      continue;
    }
    EXPECT_TRUE(p.owns(i));
    bufs.push_back({i, static_cast<uint64_t>(p.offset[si]), static_cast<uint64_t>(p.offset[si]) + bytes, i,
                    end[si]});
  }
  // An output never shares bytes with an input of the node just before it (what executors' fusions rely on).
  for (int i = 1; i < n; ++i) {
    const auto si = static_cast<size_t>(i);
    if (owner[si] != i || nodes[si].op == Op::Weight) continue;
    const uint64_t lo = static_cast<uint64_t>(p.offset[si]), hi = lo + p.bytes[si];
    for (NodeId in : nodes[si - 1].inputs) {
      const auto r = static_cast<size_t>(owner[static_cast<size_t>(in)]);
      if (nodes[r].op == Op::Weight || static_cast<int>(r) == i) continue;
      const uint64_t ilo = static_cast<uint64_t>(p.offset[r]), ihi = ilo + p.bytes[r];
      EXPECT_FALSE(lo < ihi && ilo < hi) << "'" << nodes[si].name << "' overlaps '" << nodes[r].name
                                         << "', an input of the node before it";
    }
  }
  // The one sanctioned overlap: a SwiGlu written in place over its gate, which it is the last reader of.
  const auto in_place = [&](const Buf& gate, const Buf& sw) {
    const Node& s = nodes[static_cast<size_t>(sw.id)];
    return s.op == Op::SwiGlu && owner[static_cast<size_t>(s.inputs[0])] == gate.id && gate.to == sw.from &&
           gate.lo == sw.lo && gate.hi == sw.hi && owner[static_cast<size_t>(s.inputs[1])] != gate.id;
  };
  for (size_t a = 0; a < bufs.size(); ++a)
    for (size_t b = a + 1; b < bufs.size(); ++b) {
      const Buf &x = bufs[a], &y = bufs[b];
      if (in_place(x, y)) continue;
      const bool live_together = x.from <= y.to && y.from <= x.to;
      const bool overlap = x.lo < y.hi && y.lo < x.hi;
      EXPECT_FALSE(live_together && overlap)
          << "'" << nodes[static_cast<size_t>(x.id)].name << "' [" << x.lo << ", " << x.hi << ") live " << x.from
          << ".." << x.to << " overlaps '" << nodes[static_cast<size_t>(y.id)].name << "' [" << y.lo << ", " << y.hi
          << ") live " << y.from << ".." << y.to;
    }
}

// A random DAG of element-wise ops, products, views and norms over a few widths, with random outputs.
Graph random_graph(uint32_t seed, graph_test::WeightStore& ws) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  Graph g;
  const int64_t t = 1 + pick(4);
  const int64_t widths[] = {3, 8, 17, 64, 130};
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, t);
  g.input("positions", InputParams::Kind::Positions, t);
  std::vector<std::vector<NodeId>> by_width(5);  // f32 activations [w, t]
  auto emb = ws.add(g, "emb", std::vector<float>(static_cast<size_t>(widths[1]) * 10), sh(widths[1], 10));
  by_width[1].push_back(g.get_rows("emb_rows", emb, tok));
  const int n_ops = 10 + pick(50);
  for (int i = 0; i < n_ops; ++i) {
    std::string name = "n";
    name += std::to_string(i);
    int wi = pick(5);
    if (by_width[static_cast<size_t>(wi)].empty()) wi = 1;
    auto& pool = by_width[static_cast<size_t>(wi)];
    const NodeId a = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
    const NodeId b = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
    const int64_t w = widths[wi];
    switch (pick(7)) {
      case 0: pool.push_back(g.add(name, a, b)); break;
      case 1: pool.push_back(g.mul(name, a, b)); break;
      case 2: pool.push_back(g.silu(name, a)); break;
      case 3: pool.push_back(g.rms_norm(name, a, kNoNode, 1e-5f)); break;
      case 4: {  // a view, used later like any activation (and possibly a view of a view)
        pool.push_back(g.reshape(name, g.reshape(name + ".v", a, sh(w * t)), sh(w, t)));
        break;
      }
      case 5: {
        const int to = pick(5);
        const int64_t n_out = widths[to];
        auto wt = ws.add(g, name + ".w", std::vector<float>(static_cast<size_t>(w * n_out)), sh(w, n_out));
        by_width[static_cast<size_t>(to)].push_back(g.mul_mat(name, wt, a));
        break;
      }
      default: pool.push_back(g.swiglu(name, a, b)); break;
    }
    if (pick(8) == 0) g.mark_output(static_cast<NodeId>(g.nodes().size() - 1));
  }
  if (pick(2) == 0) g.mark_output(g.argmax("am", g.last_token("last", by_width[1].back())));
  return g;
}

}  // namespace

TEST(GraphPlan, RandomGraphsNeverOverlapLiveBuffers) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    graph_test::WeightStore ws;
    const Graph g = random_graph(seed, ws);
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    const uint64_t align = uint64_t{1} << (seed % 9);  // 1 .. 256
    check_plan(g, plan(g, align));
    check_plan(g, plan_all_live(g, align), true);
    if (HasFatalFailure() || HasFailure()) break;
  }
}

TEST(GraphPlan, ModelGraphNeverOverlapsAndReuses) {
  for (int n_tokens : {1, 5}) {
    graph_test::TinyConfig c;
    c.n_layer = 3;
    const graph_test::TinyWeights w(c, 7);
    graph_test::TinyGraph tg;
    graph_test::build_tiny(tg, c, w, n_tokens);
    const Plan p = plan(tg.g);
    check_plan(tg.g, p);
    // Without reuse the arena would hold every activation; with it, far less.
    uint64_t total = 0;
    for (const Node& n : tg.g.nodes())
      if (p.owns(n.id)) total += (p.bytes[static_cast<size_t>(n.id)] + 255) / 256 * 256;
    EXPECT_LT(p.arena_bytes * 3, total) << "arena " << p.arena_bytes << " vs unshared " << total;
    const Plan all = plan_all_live(tg.g);
    check_plan(tg.g, all, true);
    EXPECT_EQ(all.arena_bytes, total);
  }
}

// A chain rotates three buffers: x_i cannot take the slot of x_{i-2}, an input of the node just before it.
TEST(GraphPlan, ChainReusesThreeBuffers) {
  Graph g;
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, 1);
  graph_test::WeightStore ws;
  auto x = g.get_rows("x", ws.add(g, "emb", std::vector<float>(256 * 4), sh(256, 4)), tok);  // 1 KiB
  for (int i = 0; i < 20; ++i) x = g.silu(name_of("s", i), x);
  g.mark_output(x);
  const Plan p = plan(g, 256);
  check_plan(g, p);
  // tokens (256 after alignment) + three 1 KiB buffers in rotation
  EXPECT_EQ(p.arena_bytes, 256u + 3u * 1024u);
  EXPECT_NE(p.offset[static_cast<size_t>(x)], p.offset[static_cast<size_t>(x - 1)]);
  EXPECT_NE(p.offset[static_cast<size_t>(x)], p.offset[static_cast<size_t>(x - 2)]);
  EXPECT_EQ(p.offset[static_cast<size_t>(x)], p.offset[static_cast<size_t>(x - 3)]);
}

// A SwiGlu takes its gate's buffer when it is the gate's last reader; a gate read later keeps its own.
TEST(GraphPlan, SwiGluRunsInPlaceOverADyingGate) {
  Graph g;
  graph_test::WeightStore ws;
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, 4);
  const auto x = g.get_rows("x", ws.add(g, "emb", std::vector<float>(64 * 8), sh(64, 8)), tok);
  const auto gate = g.silu("gate", x), up = g.silu("up", x);
  const auto sw = g.swiglu("sw", gate, up);
  const auto gate2 = g.silu("gate2", sw), up2 = g.silu("up2", sw);
  const auto sw2 = g.swiglu("sw2", gate2, up2);
  g.mark_output(g.add("out", sw2, gate2));  // gate2 is read after sw2: sw2 cannot take its buffer
  const Plan p = plan(g);
  check_plan(g, p);
  EXPECT_EQ(p.offset[static_cast<size_t>(sw)], p.offset[static_cast<size_t>(gate)]);
  EXPECT_NE(p.offset[static_cast<size_t>(sw2)], p.offset[static_cast<size_t>(gate2)]);
  const Plan all = plan_all_live(g);  // every tensor kept: nothing in place
  check_plan(g, all, true);
  EXPECT_NE(all.offset[static_cast<size_t>(sw)], all.offset[static_cast<size_t>(gate)]);
}

TEST(GraphPlan, InputsAndOutputsStayLive) {
  Graph g;
  graph_test::WeightStore ws;
  const auto tok = g.input("tokens", InputParams::Kind::Tokens, 2);
  auto x = g.get_rows("x", ws.add(g, "emb", std::vector<float>(64 * 4), sh(64, 4)), tok);
  const auto early = g.silu("early", x);
  g.mark_output(g.reshape("early_view", early, sh(128)));
  for (int i = 0; i < 6; ++i) x = g.silu(name_of("s", i), x);
  g.mark_output(x);
  const Plan p = plan(g);
  check_plan(g, p);
  EXPECT_EQ(p.last_use[static_cast<size_t>(tok)], static_cast<int32_t>(g.nodes().size()));
  EXPECT_EQ(p.last_use[static_cast<size_t>(early)], static_cast<int32_t>(g.nodes().size()));
  EXPECT_EQ(p.root[static_cast<size_t>(g.find("early_view"))], early);
}

TEST(GraphPlan, RejectsBadAlignment) {
  Graph g;
  g.input("tokens", InputParams::Kind::Tokens, 1);
  EXPECT_THROW(plan(g, 0), std::invalid_argument);
  EXPECT_THROW(plan(g, 48), std::invalid_argument);
  EXPECT_NO_THROW(plan(g, 1));
}
