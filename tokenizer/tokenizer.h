// Text <-> token ids for GGUF vocabularies: SentencePiece-style ("llama", through the sentencepiece library) and
// byte-level BPE ("gpt2", with a per-model PCRE2 pre-tokenizer). Built once from a gguf::File (model or vocab-only);
// thread-compatible: const methods may be called concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gguf {
class File;
}

namespace tokenizer {

// Any tokenizer failure: bad or unsupported vocabulary metadata, out-of-range ids, library errors.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

enum class ModelKind { SPM, BPE };

struct EncodeOptions {
  bool add_bos = false;        // prepend BOS (TokenizerError if the vocabulary has none)
  bool add_eos = false;        // append EOS (same)
  bool parse_special = false;  // see Tokenizer::encode
};

struct DecodeOptions {
  bool render_special = false;  // control/unknown tokens render as their text instead of nothing
  // SentencePiece rule (SPM vocabularies with add_space_prefix): the first text piece, at the start or after BOS
  // and other control tokens, loses its one leading space. Turn off when decoding a continuation.
  bool strip_leading_space = true;
};

// The vocabulary as stored in the GGUF metadata, with the documented defaults applied to absent keys.
struct Vocab {
  ModelKind kind = ModelKind::SPM;
  std::string model_name;            // tokenizer.ggml.model ("llama", "gpt2")
  std::string pre;                   // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;   // [n_vocab]
  std::vector<float> scores;         // [n_vocab], or empty for all 0
  std::vector<TokenType> types;      // [n_vocab], or empty for all NORMAL
  std::vector<std::string> merges;   // "a b" pairs, BPE only
  int32_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;  // -1 = none
  int32_t eom = -1;                  // end of message
  // Fill-in-the-middle roles; when absent the reference finds them by text (and makes them control tokens).
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;      // SPM only
  std::string chat_template;         // tokenizer.chat_template, "" when absent
  // general.name and general.architecture ("" when absent): the reference sets per-model token attributes by
  // them (e.g. a name containing "phi3" makes special tokens eat the whitespace after them; docs/tokenizer.md).
  std::string name, architecture;

  // Reads the tokenizer.* keys, applying the defaults in docs/tokenizer.md to absent optional ones; throws
  // TokenizerError naming the file and the key when a required key is missing or a key is malformed.
  static Vocab from_gguf(const gguf::File& file);
};

class Tokenizer {
 public:
  static Tokenizer from_gguf(const gguf::File& file);
  static Tokenizer from_vocab(Vocab vocab);  // tests build vocabularies in memory

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: prepend BOS / append EOS per add_bos()/add_eos(). parse_special: recognise control and
  // user-defined tokens written in the text (user-defined tokens are matched even when it is false; tokens the
  // reference treats as control, such as every "</s>", only when it is true). See docs/tokenizer.md.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Same, with explicit BOS/EOS choices overriding the vocabulary's flags.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opts) const;

  // The bytes a token stands for when detokenized: "▁Hello" -> " Hello", "<0x0A>" -> "\n", "Ġworld" -> " world".
  // Control tokens render as their text only when render_special is true (else ""). Throws on an out-of-range id.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  // The token's raw vocabulary string ("▁Hello", "Ġworld", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;  // as stored in the file (is_control() gives the effective role)

  // ids -> bytes (normally UTF-8 text; invalid only if the ids spell invalid bytes). Throws on an out-of-range id.
  // Use StreamDecoder for incremental output.
  std::string decode(const std::vector<int32_t>& ids, const DecodeOptions& opts = {}) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;
  int32_t eot() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  bool is_eog(int32_t id) const;  // end of generation: EOS, EOT and other known end markers of the vocabulary
  bool is_control(int32_t id) const;  // control as the reference treats it (type CONTROL, or promoted by its text)
  ModelKind kind() const;
  const std::string& pre() const;
  const std::string& chat_template() const;
  // Exact vocabulary lookup ("<|im_start|>", "▁Hello"); nullopt when absent.
  std::optional<int32_t> find_token(std::string_view text) const;

  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for generation: push() returns the text that became complete with this token, never a
// partial UTF-8 sequence (byte-fallback tokens <0xE2><0x9C><0x85> come out together as "✅"); bytes that can never
// become valid UTF-8 come out as U+FFFD. Applies the same leading-space rule as Tokenizer::decode.
// flush() returns what is left (an incomplete sequence becomes U+FFFD). The Tokenizer must outlive the decoder
// (moving it is fine).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, const DecodeOptions& opts = {});
  std::string push(int32_t id);
  std::string flush();
  void reset();  // back to the start of a text (the leading-space rule applies again)

 private:
  const Tokenizer::Impl* impl_;
  DecodeOptions opts_;
  bool at_start_ = true;  // no text piece seen yet
  std::string pending_;   // bytes of an incomplete UTF-8 sequence
};

}  // namespace tokenizer
