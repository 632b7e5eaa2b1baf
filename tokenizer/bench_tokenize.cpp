// tokenize-bench: encoding throughput on ~1 MB of deterministically generated English prose, single thread.
// Usage: tokenize-bench [VOCAB.gguf] [--mb N] [--reps N]
// The default vocabulary is the llama-bpe one from the shared test assets ($LLM_TEST_ASSETS or ../shared).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

// Prose from a fixed word list and a fixed-seed generator: sentences of 6-20 words, commas, the odd number or
// quotation, paragraphs separated by blank lines. Same bytes on every run and machine.
std::string make_prose(size_t bytes) {
  static const char* kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
      "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
      "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
      "who", "so", "no", "river", "mountain", "government", "language", "between", "through", "because", "people",
      "history", "morning", "evening", "question", "different", "important", "understand", "children", "without",
      "another", "something", "nothing", "everything", "remember", "beautiful", "together", "although", "however",
      "information", "development", "international", "particularly", "nevertheless", "tokenizer", "quickly",
      "carefully", "village", "library", "garden", "window", "kitchen", "teacher", "doctor", "machine", "engine",
      "journey", "silence", "weather", "summer", "winter", "ocean", "forest", "castle", "bridge", "market",
      "letter", "story", "music", "light", "shadow", "water", "fire", "stone", "glass", "paper", "table", "chair",
      "walked", "looked", "thought", "said", "asked", "found", "gave", "told", "became", "seemed", "wanted",
      "didn't", "couldn't", "it's", "she'd", "we'll", "they're", "I've"};
  constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  auto next = [&state](uint32_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>((state >> 33) % n);
  };
  std::string text;
  text.reserve(bytes + 256);
  while (text.size() < bytes) {
    const uint32_t n_sentences = 3 + next(5);
    for (uint32_t s = 0; s < n_sentences; ++s) {
      const uint32_t n = 6 + next(15);
      for (uint32_t w = 0; w < n; ++w) {
        std::string word = kWords[next(kNumWords)];
        if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
        if (next(40) == 0) word = std::to_string(next(100000));
        if (next(60) == 0) word = "\"" + word + "\"";
        text += word;
        if (w + 1 < n) text += next(9) == 0 ? ", " : " ";
      }
      text += next(10) == 0 ? "? " : (next(12) == 0 ? "! " : ". ");
    }
    text += "\n\n";
  }
  text.resize(bytes);
  return text;
}

std::string default_vocab() {
  std::filesystem::path root = "../shared";
  if (const char* env = std::getenv("LLM_TEST_ASSETS"); env && *env) root = env;
  return (root / "tokenizer" / "ggml-vocab-llama-bpe.gguf").string();
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab_path;
  double mb = 1.0;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: %s [VOCAB.gguf] [--mb N] [--reps N]\n", argv[0]);
      return 2;
    } else {
      vocab_path = argv[i];
    }
  }
  if (vocab_path.empty()) vocab_path = default_vocab();
  try {
    const gguf::File file = gguf::File::open(vocab_path);
    const auto t_load0 = std::chrono::steady_clock::now();
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
    const auto t_load1 = std::chrono::steady_clock::now();
    const std::string text = make_prose(static_cast<size_t>(mb * 1e6));

    size_t n_tokens = tok.encode(text, false, false).size();  // warm-up
    std::vector<double> secs;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      n_tokens = tok.encode(text, false, false).size();
      const auto t1 = std::chrono::steady_clock::now();
      secs.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    const double median = secs[secs.size() / 2];
    std::printf("vocab      %s (%s, pre '%s', %d tokens), loaded in %.0f ms\n", vocab_path.c_str(),
                tok.kind() == tokenizer::ModelKind::SPM ? "llama/SPM" : "gpt2/BPE", tok.pre().c_str(), tok.n_vocab(),
                std::chrono::duration<double, std::milli>(t_load1 - t_load0).count());
    std::printf("input      %zu bytes of generated English prose -> %zu tokens (%.2f bytes/token)\n", text.size(),
                n_tokens, static_cast<double>(text.size()) / static_cast<double>(n_tokens));
    std::printf("encode     median %.1f ms over %d runs (min %.1f, max %.1f): %.1f MB/s, %.2f M tokens/s, 1 thread\n",
                median * 1e3, reps, secs.front() * 1e3, secs.back() * 1e3, static_cast<double>(text.size()) / median / 1e6,
                static_cast<double>(n_tokens) / median / 1e6);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenize-bench: error: %s\n", e.what());
    return 1;
  }
}
