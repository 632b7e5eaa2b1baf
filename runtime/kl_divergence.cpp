// Base-logits file for `perplexity --kl-divergence` and the KL statistics; the format is in kl_divergence.h.
#include "runtime/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace runtime::kld {
namespace {

constexpr uint64_t kHeaderBytes = 8 + 4 + 4 + 8;

[[noreturn]] void malformed(const std::string& path, const std::string& what) {
  throw std::runtime_error("malformed KL-divergence base file '" + path + "': " + what);
}

// Index of the largest value and log of the softmax normaliser (max + log sum exp(v - max)), in double.
void log_norm(std::span<const float> row, size_t* argmax, double* lse) {
  size_t am = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[am]) am = i;
  const double mx = row[am];
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  *argmax = am;
  *lse = mx + std::log(sum);
}

}  // namespace

Writer::Writer(const std::string& path, uint32_t n_vocab, uint32_t n_ctx, std::span<const int32_t> tokens)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc), n_vocab_(n_vocab) {
  if (!out_) throw std::runtime_error("cannot write KL-divergence base file '" + path + "'");
  expected_rows_ = static_cast<int64_t>(tokens.size()) / n_ctx * scored_per_chunk(n_ctx);
  const uint64_t n_tokens = tokens.size();
  out_.write(kMagic, sizeof kMagic);
  out_.write(reinterpret_cast<const char*>(&n_vocab), sizeof n_vocab);
  out_.write(reinterpret_cast<const char*>(&n_ctx), sizeof n_ctx);
  out_.write(reinterpret_cast<const char*>(&n_tokens), sizeof n_tokens);
  out_.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
  if (!out_) throw std::runtime_error("write error on KL-divergence base file '" + path_ + "'");
}

void Writer::add_row(std::span<const float> logits) {
  if (logits.size() != n_vocab_) throw std::logic_error("kld::Writer: row size differs from n_vocab");
  out_.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size_bytes()));
  if (!out_) throw std::runtime_error("write error on KL-divergence base file '" + path_ + "'");
  ++rows_;
}

void Writer::finish() {
  if (rows_ != expected_rows_) throw std::logic_error("kld::Writer: not every scored row was written");
  out_.flush();
  out_.close();
  if (!out_) throw std::runtime_error("write error on KL-divergence base file '" + path_ + "'");
}

Reader::Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw std::runtime_error("cannot read KL-divergence base file '" + path + "'");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read KL-divergence base file '" + path + "': " + ec.message());
  if (size < kHeaderBytes) malformed(path, "only " + std::to_string(size) + " bytes, shorter than the header");
  char magic[8];
  uint64_t n_tokens = 0;
  in_.read(magic, sizeof magic);
  in_.read(reinterpret_cast<char*>(&h_.n_vocab), sizeof h_.n_vocab);
  in_.read(reinterpret_cast<char*>(&h_.n_ctx), sizeof h_.n_ctx);
  in_.read(reinterpret_cast<char*>(&n_tokens), sizeof n_tokens);
  if (!in_) malformed(path, "cannot read the header");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) malformed(path, "bad magic (expected \"LLMKLD1\")");
  if (h_.n_vocab == 0) malformed(path, "n_vocab is 0");
  if (h_.n_ctx < 4) malformed(path, "n_ctx " + std::to_string(h_.n_ctx) + " is below 4");
  if (n_tokens == 0 || n_tokens % h_.n_ctx != 0)
    malformed(path, "token count " + std::to_string(n_tokens) + " is not a positive multiple of n_ctx " +
                        std::to_string(h_.n_ctx));
  // Bound the token count by the file size before allocating anything from it.
  if (n_tokens > (size - kHeaderBytes) / 4) malformed(path, "truncated (token ids)");
  const uint64_t rows = n_tokens / h_.n_ctx * static_cast<uint64_t>(scored_per_chunk(h_.n_ctx));
  const uint64_t logits_bytes = size - kHeaderBytes - n_tokens * 4;
  const uint64_t row_bytes = uint64_t{h_.n_vocab} * 4;
  if (logits_bytes / row_bytes != rows || logits_bytes % row_bytes != 0)
    malformed(path, "size " + std::to_string(size) + " bytes does not match the header (" +
                        std::to_string(rows) + " rows of " + std::to_string(h_.n_vocab) +
                        " logits expected" + (logits_bytes < rows * row_bytes ? ", file truncated)" : ")"));
  h_.tokens.resize(n_tokens);
  in_.read(reinterpret_cast<char*>(h_.tokens.data()), static_cast<std::streamsize>(n_tokens * 4));
  if (!in_) malformed(path, "cannot read the token ids");
  for (size_t i = 0; i < h_.tokens.size(); ++i)
    if (h_.tokens[i] < 0 || static_cast<uint32_t>(h_.tokens[i]) >= h_.n_vocab)
      malformed(path, "token id " + std::to_string(h_.tokens[i]) + " at " + std::to_string(i) +
                          " is outside the vocabulary of " + std::to_string(h_.n_vocab));
  row_.resize(h_.n_vocab);
}

std::span<const float> Reader::next_row() {
  if (rows_read_ >= h_.n_rows()) throw std::runtime_error("KL-divergence base file '" + path_ + "': no more rows");
  in_.read(reinterpret_cast<char*>(row_.data()), static_cast<std::streamsize>(row_.size() * sizeof(float)));
  if (!in_) malformed(path_, "read error in the logits");
  ++rows_read_;
  return row_;
}

double kl_divergence(std::span<const float> base, std::span<const float> current, bool* same_top1) {
  size_t am_p = 0, am_q = 0;
  double lse_p = 0, lse_q = 0;
  log_norm(base, &am_p, &lse_p);
  log_norm(current, &am_q, &lse_q);
  // KL = sum_i p_i (log p_i - log q_i), log p_i = b_i - lse_p, log q_i = c_i - lse_q.
  double kl = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double lp = double(base[i]) - lse_p;
    const double lq = double(current[i]) - lse_q;
    kl += std::exp(lp) * (lp - lq);
  }
  if (same_top1) *same_top1 = am_p == am_q;
  return kl;
}

void Stats::add(std::span<const float> base, std::span<const float> current) {
  bool same = false;
  const double kl = kl_divergence(base, current, &same);
  sum += kl;
  sum2 += kl * kl;
  ++count;
  same_top1 += same ? 1 : 0;
}

double Stats::mean() const { return count ? sum / double(count) : 0.0; }

double Stats::standard_error() const {
  if (count < 2) return 0.0;
  const double m = mean();
  const double var = std::max(0.0, sum2 / double(count) - m * m);
  return std::sqrt(var / double(count - 1));
}

double Stats::top1_percent() const { return count ? 100.0 * double(same_top1) / double(count) : 0.0; }

}  // namespace runtime::kld
