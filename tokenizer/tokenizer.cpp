// Tokenizer: BOS/EOS, dispatch of the raw fragments (special.cpp splits them out) to the SPM or BPE encoder, and
// detokenization (including the streaming decoder). GGUF loading lives in vocab.cpp.

#include "tokenizer/impl.h"
#include "tokenizer/memo.h"
#include "tokenizer/unicode.h"

namespace tokenizer {

namespace {

// Decoded bytes of a token with render_special off; `attr` is its effective attribute set (special.h), which
// decides before the file type: hidden tokens give nothing, user-defined ones their text.
std::string render_piece(const Vocab& v, int32_t id, uint8_t attr) {
  const std::string& text = v.tokens[id];
  if (attr & (kAttrControl | kAttrUnknown)) return {};
  if (attr & kAttrUserDefined) return text;  // stored as plain text in both vocabulary kinds
  if (v.types[id] == TokenType::BYTE) {
    if (const int b = utf8::parse_byte_piece(text); b >= 0) return std::string(1, static_cast<char>(b));
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
  for (int32_t* id : {&v.bos, &v.eos, &v.eot, &v.unk, &v.pad, &v.eom, &v.fim_pre, &v.fim_suf, &v.fim_mid, &v.fim_pad,
                      &v.fim_rep, &v.fim_sep})
    if (*id < -1 || *id >= nv) throw TokenizerError("special token id " + std::to_string(*id) + " out of range");

  token_to_id.build(v.tokens);
  special = std::make_unique<SpecialTokens>(v, token_to_id);
  v.eot = special->eot();

  piece.reserve(n);
  for (int32_t id = 0; id < nv; ++id) piece.push_back(render_piece(v, id, special->attr(id)));

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
  for (const auto& f : im.special->partition(text, opts.parse_special)) {
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
bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && impl_->special->is_eog(id); }
bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < n_vocab() && impl_->special->is_control(id); }
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
