// Locating the optional shared test assets (models, tokenizer vectors): $LLM_TEST_ASSETS, default ../shared
// relative to the repository root. Tests that need them skip with a message when the folder is missing.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace testing_assets {

inline std::optional<std::filesystem::path> root() {
  std::filesystem::path p;
  if (const char* env = std::getenv("LLM_TEST_ASSETS"); env && *env) {
    p = env;
  } else {
    p = std::filesystem::path(LLM_SOURCE_DIR) / ".." / "shared";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) return std::nullopt;
  return std::filesystem::canonical(p, ec);
}

// Full path of an asset ("models/stories260K-f32.gguf"), or nullopt when the assets or that file are missing.
inline std::optional<std::string> path(const std::string& rel) {
  auto r = root();
  if (!r) return std::nullopt;
  auto p = *r / rel;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  return p.string();
}

}  // namespace testing_assets

// Skips the current test (with the reason) when an asset is unavailable; otherwise binds VAR to its path.
#define REQUIRE_ASSET(VAR, REL)                                                        \
  auto VAR##_opt = ::testing_assets::path(REL);                                        \
  if (!VAR##_opt) GTEST_SKIP() << "test asset " << (REL) << " not found (set LLM_TEST_ASSETS)"; \
  const std::string VAR = *VAR##_opt
