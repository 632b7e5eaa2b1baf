// Submits requests to a runtime::Engine all at once and waits for each one's Final: the collector type C gathers the
// events (bool on(const EngineEvent&); void wait()), one per request, returned in submission order.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
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

// A collector of a request's text alone.
struct TextCollector {
  std::string text;
  std::promise<void> final;
  bool on(const runtime::EngineEvent& e) {
    if (e.kind == runtime::EngineEvent::Kind::Final) final.set_value();
    else text.append(e.text);
    return true;
  }
  void wait() { EXPECT_EQ(final.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready); }
};

// The texts of requests submitted all at once, in submission order.
inline std::vector<std::string> texts_of(runtime::Engine& e, const std::vector<runtime::EngineRequest>& rs) {
  std::vector<std::string> out;
  for (const auto& c : submit_all<TextCollector>(e, rs)) out.push_back(c->text);
  return out;
}

}  // namespace test_engine
