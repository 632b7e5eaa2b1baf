// Helpers of the op tests: a graph with F32 "weights" as op inputs, run on the reference executor, and a closeness
// check that reports the first mismatch and the max error.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/plan.h"
#include "graph/reference.h"
#include "graph_test_util.h"

namespace graph_test {

inline graph::Shape sh(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) { return graph::Shape{{a, b, c, d}}; }

// A graph under construction plus the data of its F32 "weights" (used as op inputs).
struct Fixture {
  graph::Graph g;
  WeightStore ws;
  graph::NodeId w(const std::string& name, std::vector<float> v, graph::Shape s) {
    return ws.add(g, name, std::move(v), s);
  }
  // Runs g with `out` marked as output; returns its values.
  std::vector<float> run(graph::NodeId out, std::vector<int32_t> tokens = {}, std::vector<int32_t> positions = {}) {
    g.mark_output(out);
    graph::ReferenceExecutor ex(1);
    ex.run(g, graph::plan(g), tokens, positions);
    const auto s = ex.output_f32(out);
    return {s.begin(), s.end()};
  }
};

// |a-b| <= atol + rtol*|ref| elementwise, reporting the first mismatch and the max error.
inline void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol = 1e-6,
                         double rtol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  double max_err = 0;
  size_t bad = want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]);
    max_err = std::max(max_err, err);
    if (bad == want.size() && !(err <= atol + rtol * std::fabs(want[i]))) bad = i;
  }
  EXPECT_EQ(bad, want.size()) << "first mismatch at " << bad << ": got " << got[bad] << " want " << want[bad]
                              << ", max error " << max_err;
}

}  // namespace graph_test
