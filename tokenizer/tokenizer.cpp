// Tokenizer: special-token partitioning, BOS/EOS, dispatch to the SPM or BPE encoder, and detokenization
// (including the streaming decoder). GGUF loading lives in vocab.cpp.
#include <algorithm>
#include <array>

#include "tokenizer/impl.h"
#include "tokenizer/memo.h"
#include "tokenizer/unicode.h"

namespace tokenizer {

namespace {

// Texts that end generation in the reference implementation, whatever the token's id.
constexpr std::array<std::string_view, 12> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};
// When tokenizer.ggml.eot_token_id is absent, the first of these that exists is the end-of-turn token.
constexpr std::array<std::string_view, 8> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};  // <｜end▁of▁sentence｜>

std::string render_piece(const Vocab& v, int32_t id) {
  const std::string& text = v.tokens[id];
  const TokenType type = v.types[id];
  switch (type) {
    case TokenType::CONTROL:
    case TokenType::UNKNOWN:
      return {};
    case TokenType::USER_DEFINED:
      return text;  // stored as plain text in both vocabulary kinds
    case TokenType::BYTE:
      if (const int b = utf8::parse_byte_piece(text); b >= 0) return std::string(1, static_cast<char>(b));
      break;
    default:
      break;
  }
  if (v.kind == ModelKind::SPM) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581 stands for a space
        out.push_back(' ');
        i += 3;
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  // Byte-level BPE: each character stands for one byte; characters outside the mapping are kept as they are.
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    if (utf8::check_sequence(text, i, &len) != utf8::SeqStatus::VALID) {
      out.push_back(text[i++]);
      continue;
    }
    const int b = utf8::codepoint_to_byte(utf8::decode_at(text, i, &len));
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  return out;
}

}  // namespace

Tokenizer::Impl::Impl(Vocab vocab) : v(std::move(vocab)) {
  const size_t n = v.tokens.size();
  if (n == 0) throw TokenizerError("vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX / 2)) throw TokenizerError("vocabulary too large");
  if (v.scores.empty()) v.scores.assign(n, 0.0f);
  if (v.types.empty()) v.types.assign(n, TokenType::NORMAL);
  if (v.scores.size() != n)
    throw TokenizerError("tokenizer scores have " + std::to_string(v.scores.size()) + " entries, expected " +
                         std::to_string(n));
  if (v.types.size() != n)
    throw TokenizerError("tokenizer token types have " + std::to_string(v.types.size()) + " entries, expected " +
                         std::to_string(n));
  const int32_t nv = static_cast<int32_t>(n);
  for (int32_t* id : {&v.bos, &v.eos, &v.eot, &v.unk, &v.pad})
    if (*id < -1 || *id >= nv) throw TokenizerError("special token id " + std::to_string(*id) + " out of range");

  token_to_id.build(v.tokens);

  if (v.eot < 0) {
    for (const auto text : kEotTexts) {
      if (const int32_t id = token_to_id.find(text); id >= 0) {
        v.eot = id;
        break;
      }
    }
  }
  eog.assign(n, 0);
  for (const auto text : kEogTexts)
    if (const int32_t id = token_to_id.find(text); id >= 0) eog[id] = 1;
  if (v.eos >= 0) eog[v.eos] = 1;
  if (v.eot >= 0) eog[v.eot] = 1;

  for (int32_t id = 0; id < nv; ++id) {
    const TokenType t = v.types[id];
    if ((t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN) && !v.tokens[id].empty())
      specials.push_back(id);
  }
  std::stable_sort(specials.begin(), specials.end(),
                   [&](int32_t a, int32_t b) { return v.tokens[a].size() > v.tokens[b].size(); });
  special_rank.assign(n, 0);
  for (size_t k = 0; k < specials.size(); ++k) {
    const int32_t id = specials[k];
    special_rank[id] = static_cast<uint32_t>(k);
    const uint8_t first = static_cast<uint8_t>(v.tokens[id][0]);
    if (v.types[id] == TokenType::USER_DEFINED) {
      by_first[0][first].push_back(id);
      has_specials[0] = true;
    }
    by_first[1][first].push_back(id);
    has_specials[1] = true;
  }

  piece.reserve(n);
  for (int32_t id = 0; id < nv; ++id) piece.push_back(render_piece(v, id));

  // Nothing to add when the vocabulary asks for a BOS/EOS it does not have.
  if (v.bos < 0) v.add_bos = false;
  if (v.eos < 0) v.add_eos = false;

  if (v.kind == ModelKind::SPM) {
    strip_space = v.add_space_prefix;
    spm = std::make_unique<SpmModel>(v);
  } else {
    pre = std::make_unique<PreTokenizer>(v.pre);
    bpe = std::make_unique<BpeModel>(v.tokens, v.types, v.merges, pre->ignore_merges());
  }
}

std::vector<Tokenizer::Impl::Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  const auto& by_first = this->by_first[parse_special ? 1 : 0];
  if (!has_specials[parse_special ? 1 : 0]) return {Fragment{-1, 0, text.size()}};
  struct Hit {
    uint32_t rank;  // priority: index in `specials`, then left to right
    int32_t id;
    size_t pos;
  };
  std::vector<Hit> hits;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (const int32_t id : by_first[static_cast<uint8_t>(text[pos])]) {
      const std::string& tok = v.tokens[id];
      if (text.compare(pos, tok.size(), tok) == 0) hits.push_back(Hit{special_rank[id], id, pos});
    }
  }
  if (hits.empty()) return {Fragment{-1, 0, text.size()}};
  std::sort(hits.begin(), hits.end(),
            [](const Hit& a, const Hit& b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; });
  std::vector<uint8_t> taken(text.size(), 0);
  std::vector<Hit> accepted;
  for (const auto& h : hits) {
    const size_t len = v.tokens[h.id].size();
    if (std::any_of(taken.begin() + h.pos, taken.begin() + h.pos + len, [](uint8_t x) { return x != 0; })) continue;
    std::fill(taken.begin() + h.pos, taken.begin() + h.pos + len, 1);
    accepted.push_back(h);
  }
  std::sort(accepted.begin(), accepted.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
  std::vector<Fragment> out;
  size_t cur = 0;
  for (const auto& h : accepted) {
    if (h.pos > cur) out.push_back(Fragment{-1, cur, h.pos - cur});
    out.push_back(Fragment{h.id, h.pos, v.tokens[h.id].size()});
    cur = h.pos + v.tokens[h.id].size();
  }
  if (cur < text.size()) out.push_back(Fragment{-1, cur, text.size() - cur});
  return out;
}

void Tokenizer::Impl::encode_raw(std::string_view text, std::vector<int32_t>& out) const {
  if (spm) {
    spm->encode(text, out);
    return;
  }
  // Invalid UTF-8 becomes U+FFFD before pre-tokenizing, as in the reference implementation.
  std::string clean;
  if (!utf8::is_valid(text)) {
    clean = utf8::sanitize(text);
    text = clean;
  }
  thread_local std::vector<uint32_t> lens;
  pre->split(text, lens);
  Memo memo;
  size_t off = 0;
  for (const uint32_t len : lens) {
    const std::string_view word = text.substr(off, len);
    off += len;
    if (memo.lookup(word, out)) continue;
    const size_t from = out.size();
    bpe->encode_word(word, out);
    memo.store(word, out, from);
  }
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(v.tokens.size()))
    throw TokenizerError("token id " + std::to_string(id) + " out of range [0, " + std::to_string(v.tokens.size()) +
                         ")");
}

bool Tokenizer::Impl::hidden(int32_t id) const {
  return v.types[id] == TokenType::CONTROL || v.types[id] == TokenType::UNKNOWN;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_vocab(Vocab vocab) { return Tokenizer(std::make_unique<Impl>(std::move(vocab))); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode(text, EncodeOptions{add_special && impl_->v.add_bos, add_special && impl_->v.add_eos, parse_special});
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
  const Impl& im = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (opts.add_bos) {
    if (im.v.bos < 0) throw TokenizerError("cannot add BOS: the vocabulary has no BOS token");
    out.push_back(im.v.bos);
  }
  for (const auto& f : im.partition(text, opts.parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else if (f.len > 0) {
      im.encode_raw(text.substr(f.off, f.len), out);
    }
  }
  if (opts.add_eos) {
    if (im.v.eos < 0) throw TokenizerError("cannot add EOS: the vocabulary has no EOS token");
    out.push_back(im.v.eos);
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  impl_->check_id(id);
  if (render_special && impl_->hidden(id)) return impl_->v.tokens[id];
  return impl_->piece[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.tokens[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.types[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& opts) const {
  const Impl& im = *impl_;
  std::string out;
  bool at_start = true;
  for (const int32_t id : ids) {
    im.check_id(id);
    if (im.hidden(id)) {
      if (opts.render_special) out += im.v.tokens[id];
      continue;
    }
    std::string_view p = im.piece[id];
    if (at_start && im.strip_space && opts.strip_leading_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    at_start = false;
    out.append(p);
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }
int32_t Tokenizer::eot() const { return impl_->v.eot; }
int32_t Tokenizer::unk() const { return impl_->v.unk; }
int32_t Tokenizer::pad() const { return impl_->v.pad; }
bool Tokenizer::add_bos() const { return impl_->v.add_bos; }
bool Tokenizer::add_eos() const { return impl_->v.add_eos; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id] != 0;
}
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->v.types[id] == TokenType::CONTROL;
}
ModelKind Tokenizer::kind() const { return impl_->v.kind; }
const std::string& Tokenizer::pre() const { return impl_->v.pre; }
const std::string& Tokenizer::chat_template() const { return impl_->v.chat_template; }

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->token_to_id.find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

// ---- streaming ----

StreamDecoder::StreamDecoder(const Tokenizer& tok, const DecodeOptions& opts) : impl_(tok.impl_.get()), opts_(opts) {}

std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& im = *impl_;
  im.check_id(id);
  if (im.hidden(id)) {
    if (!opts_.render_special) return {};
    pending_ += im.v.tokens[id];
  } else {
    std::string_view p = im.piece[id];
    if (at_start_ && im.strip_space && opts_.strip_leading_space && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    at_start_ = false;
    pending_.append(p);
  }
  // Emit every complete sequence; keep a trailing incomplete one; replace bytes that can never be valid.
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const auto st = utf8::check_sequence(pending_, i, &len);
    if (st == utf8::SeqStatus::INCOMPLETE) break;
    if (st == utf8::SeqStatus::VALID) {
      out.append(pending_, i, len);
      i += len;
    } else {
      out.append(utf8::kReplacement);
      ++i;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = pending_.empty() ? std::string() : std::string(utf8::kReplacement);
  pending_.clear();
  return out;
}

void StreamDecoder::reset() {
  pending_.clear();
  at_start_ = true;
}

}  // namespace tokenizer
