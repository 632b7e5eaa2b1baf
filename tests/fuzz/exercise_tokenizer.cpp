// The tokenizer fuzz target's body, over real vocabularies loaded once. Encoding arbitrary bytes must never fail and
// must yield ids inside the vocabulary; decoding arbitrary ids fails with TokenizerError exactly when one is out of
// range; the stream decoder emits only valid UTF-8 and, when the text is valid UTF-8, the same text as decode().
// For byte-level BPE vocabularies, decode(encode(text)) must give back any valid UTF-8 text whose bytes all have a
// byte token in the vocabulary.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "exercise.h"
#include "gguf/gguf.h"
#include "invariant.h"
#include "tokenizer/tokenizer.h"

namespace fuzz {

Vocabularies::Vocabularies() = default;
Vocabularies::~Vocabularies() = default;
Vocabularies::Vocabularies(Vocabularies&&) noexcept = default;

namespace {

// The byte-level BPE alphabet (GPT-2): printable Latin-1 bytes stand for themselves, the other bytes for U+0100 + n.
std::string byte_token_text(uint8_t b) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256, 0);
    uint32_t next = 256;
    for (uint32_t c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
      t[c] = printable ? c : next++;
    }
    return t;
  }();
  const uint32_t cp = table[b];
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

Vocabularies load_vocabularies(const std::vector<std::string>& files) {
  std::filesystem::path dir;
  if (const char* env = std::getenv("LLM_TEST_ASSETS"); env && *env) {
    dir = std::filesystem::path(env) / "tokenizer";
  } else {
    dir = std::filesystem::path(LLM_SOURCE_DIR) / ".." / "shared" / "tokenizer";
  }
  std::vector<std::string> names = files;
  if (names.empty()) names = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"};
  Vocabularies v;
  for (const std::string& name : names) {
    const std::filesystem::path p = dir / name;
    if (!std::filesystem::exists(p))
      throw std::runtime_error("vocabulary " + p.string() + " not found (set LLM_TEST_ASSETS)");
    const gguf::File f = gguf::File::open(p.string());
    v.names.push_back(name);
    v.tokenizers.push_back(std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(f)));
    std::vector<bool> bytes(256, false);
    const tokenizer::Tokenizer& tok = *v.tokenizers.back();
    for (int b = 0; b < 256; ++b) {
      char spm[8];
      std::snprintf(spm, sizeof spm, "<0x%02X>", b);
      const std::string text = tok.kind() == tokenizer::ModelKind::BPE ? byte_token_text(uint8_t(b)) : spm;
      bytes[b] = tok.find_token(text).has_value();
    }
    v.has_byte_token.push_back(std::move(bytes));
  }
  return v;
}

namespace {

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

// Text for a message: printable ASCII as is, everything else as \xNN; long texts cut.
std::string show_text(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + (s.size() > 64 ? "\"..." : "\"");
}

std::string show_ids(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size() && i < 32; ++i) s << (i ? "," : "") << ids[i];
  if (ids.size() > 32) s << ",...";
  return s.str();
}

void check_ids(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& vocab) {
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) broken(vocab + ": encode produced id " + std::to_string(id));
}

void encode_text(const tokenizer::Tokenizer& tok, const std::string& vocab, const std::vector<bool>& has_byte_token,
                 std::string_view text, bool special) {
  const std::vector<int32_t> ids = tok.encode(text, special, special);
  check_ids(tok, ids, vocab);
  bool spellable = true;  // every byte has a byte token to fall back on
  for (char c : text) spellable = spellable && has_byte_token[static_cast<uint8_t>(c)];
  if (!text.empty() && ids.empty() && spellable) broken(vocab + ": " + show_text(text) + " encoded to no tokens");
  tokenizer::DecodeOptions opts;
  opts.render_special = special;
  const std::string back = tok.decode(ids, opts);
  if (!special && tok.kind() == tokenizer::ModelKind::BPE && spellable && valid_utf8(text) && back != text)
    broken(vocab + ": decode(encode(" + show_text(text) + ")) = " + show_text(back) + " (ids " + show_ids(ids) + ")");
}

// Three bytes per id, spread over [-2, n_vocab + 2) so that out-of-range ids occur.
std::vector<int32_t> read_ids(std::string_view rest, int32_t n_vocab, bool in_range) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 <= rest.size(); i += 3) {
    const uint32_t x = static_cast<uint8_t>(rest[i]) | uint32_t(static_cast<uint8_t>(rest[i + 1])) << 8 |
                       uint32_t(static_cast<uint8_t>(rest[i + 2])) << 16;
    ids.push_back(in_range ? static_cast<int32_t>(x % uint32_t(n_vocab))
                           : static_cast<int32_t>(x % uint32_t(n_vocab + 4)) - 2);
  }
  return ids;
}

void decode_ids(const tokenizer::Tokenizer& tok, const std::string& vocab, const std::vector<int32_t>& ids,
                uint8_t flags) {
  bool out_of_range = false;
  for (int32_t id : ids) out_of_range = out_of_range || id < 0 || id >= tok.n_vocab();
  tokenizer::DecodeOptions opts;
  opts.render_special = flags & 1;
  opts.strip_leading_space = flags & 2;
  try {
    (void)tok.decode(ids, opts);
    if (out_of_range) broken(vocab + ": decode accepted an out-of-range id (" + show_ids(ids) + ")");
  } catch (const tokenizer::TokenizerError&) {
    if (!out_of_range) broken(vocab + ": decode rejected in-range ids (" + show_ids(ids) + ")");
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) {
      try {
        (void)tok.token_to_piece(id);
        broken(vocab + ": token_to_piece accepted id " + std::to_string(id));
      } catch (const tokenizer::TokenizerError&) {
      }
      continue;
    }
    (void)tok.token_to_piece(id, opts.render_special);
    (void)tok.token_type(id);
    (void)tok.is_eog(id);
    (void)tok.is_control(id);
    const std::string& text = tok.token_text(id);
    const std::optional<int32_t> found = tok.find_token(text);
    if (!found || tok.token_text(*found) != text)
      broken(vocab + ": find_token(token_text(id)) misses id " + std::to_string(id));
  }
}

void stream_ids(const tokenizer::Tokenizer& tok, const std::string& vocab, const std::vector<int32_t>& ids,
                uint8_t flags) {
  tokenizer::DecodeOptions opts;
  opts.render_special = flags & 1;
  opts.strip_leading_space = flags & 2;
  tokenizer::StreamDecoder stream(tok, opts);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    if (!valid_utf8(piece)) broken(vocab + ": StreamDecoder::push returned invalid UTF-8 (" + show_ids(ids) + ")");
    streamed += piece;
  }
  const std::string tail = stream.flush();
  if (!valid_utf8(tail)) broken(vocab + ": StreamDecoder::flush returned invalid UTF-8 (" + show_ids(ids) + ")");
  streamed += tail;
  const std::string whole = tok.decode(ids, opts);
  if (valid_utf8(whole) && streamed != whole)
    broken(vocab + ": StreamDecoder gives " + show_text(streamed) + ", decode " + show_text(whole) + " (ids " +
           show_ids(ids) + ")");
  stream.reset();
  if (!ids.empty()) (void)stream.push(ids.back());
}

}  // namespace

void exercise_tokenizer(const Vocabularies& vocabs, Bytes input) {
  if (input.empty() || vocabs.tokenizers.empty()) return;
  const uint8_t head = input[0];
  const size_t which = head % vocabs.tokenizers.size();
  const tokenizer::Tokenizer& tok = *vocabs.tokenizers[which];
  const std::string& vocab = vocabs.names[which];
  const std::string_view rest(reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1);
  switch ((head >> 4) & 3) {
    case 0: return encode_text(tok, vocab, vocabs.has_byte_token[which], rest, false);
    case 1: return encode_text(tok, vocab, vocabs.has_byte_token[which], rest, true);
    case 2: return decode_ids(tok, vocab, read_ids(rest, tok.n_vocab(), false), head >> 6);
    default: return stream_ids(tok, vocab, read_ids(rest, tok.n_vocab(), true), head >> 6);
  }
}

}  // namespace fuzz
