// KL divergence between two runs of `llm-run perplexity` over the same text (issue 7).
//
// `perplexity --kl-divergence-base FILE` saves the full logits of every scored position to FILE;
// `perplexity --kl-divergence --kl-divergence-base FILE` (another quant type, another device) reads them back and
// reports the mean KL(base || current) with its standard error and the share of positions whose argmax agrees.
//
// File format (all integers little-endian, as written by the host; floats IEEE-754 binary32):
//   offset 0   char[8]   magic "LLMKLD1\0"
//   offset 8   uint32    n_vocab
//   offset 12  uint32    n_ctx                (chunk size, -c, of the base run)
//   offset 16  uint64    n_tokens             (= n_chunks * n_ctx: the tokens of the scored chunks)
//   offset 24  int32     tokens[n_tokens]     (token ids as encoded from the text, before BOS replaces each
//                                              chunk's first token)
//   then       float32   logits[n_chunks * scored_per_chunk(n_ctx)][n_vocab]
//              for each chunk in order, the rows of positions n_ctx/2 .. n_ctx-2 (the positions perplexity scores).
// The file size must be exactly what the header implies; anything else is reported as a malformed base file.
#pragma once
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace runtime::kld {

inline constexpr char kMagic[8] = {'L', 'L', 'M', 'K', 'L', 'D', '1', '\0'};

// Positions scored per chunk of n_ctx tokens: n_ctx/2 .. n_ctx-2.
inline int64_t scored_per_chunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

struct Header {
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;
  std::vector<int32_t> tokens;
  int64_t n_chunks() const { return n_ctx ? static_cast<int64_t>(tokens.size()) / n_ctx : 0; }
  int64_t n_rows() const { return n_chunks() * scored_per_chunk(n_ctx); }
};

// Streams a base file: header at construction, then one add_row per scored position, then finish().
// Throws std::runtime_error on I/O failure.
class Writer {
 public:
  Writer(const std::string& path, uint32_t n_vocab, uint32_t n_ctx, std::span<const int32_t> tokens);
  void add_row(std::span<const float> logits);
  void finish();  // checks that every expected row was written and flushes

 private:
  std::string path_;
  std::ofstream out_;
  size_t n_vocab_;
  int64_t expected_rows_, rows_ = 0;
};

// Reads a base file: validates the header and the file size at construction (std::runtime_error naming the file
// and what is wrong), then hands out the rows in order.
class Reader {
 public:
  explicit Reader(const std::string& path);
  const Header& header() const { return h_; }
  // The next row of n_vocab logits; throws std::runtime_error past the end or on a read failure.
  std::span<const float> next_row();

 private:
  std::string path_;
  std::ifstream in_;
  Header h_;
  std::vector<float> row_;
  int64_t rows_read_ = 0;
};

// KL(p || q) for p = softmax(base), q = softmax(current), in double with max-subtraction. Sets *same_top1 to
// whether the two argmaxes agree.
double kl_divergence(std::span<const float> base, std::span<const float> current, bool* same_top1);

// Running mean / standard error of per-position KL, and top-1 agreement count.
struct Stats {
  double sum = 0, sum2 = 0;
  int64_t count = 0, same_top1 = 0;
  void add(std::span<const float> base, std::span<const float> current);
  double mean() const;
  double standard_error() const;  // of the mean
  double top1_percent() const;
};

}  // namespace runtime::kld
