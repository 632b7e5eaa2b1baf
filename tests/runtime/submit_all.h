// Submits requests to a runtime::Engine all at once and waits for each one's Final: the collector type C gathers the
// events (bool on(const EngineEvent&); void wait()), one per request, returned in submission order.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runtime/engine.h"

namespace test_engine {

template <class C>
std::vector<std::unique_ptr<C>> submit_all(runtime::Engine& e, const std::vector<runtime::EngineRequest>& rs) {
  std::vector<std::unique_ptr<C>> cs;
  for (const auto& r : rs) {
    cs.push_back(std::make_unique<C>());
    C* c = cs.back().get();
    EXPECT_EQ(e.submit(r, [c](const runtime::EngineEvent& ev) { return c->on(ev); }).status,
              runtime::SubmitStatus::Accepted);
  }
  for (auto& c : cs) c->wait();
  return cs;
}

}  // namespace test_engine
