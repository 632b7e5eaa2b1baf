// Pre-tokenizer regex chains (see pretokenize.h). The regexes are the public ones from each model family's
// tokenizer definition, in the form llama.cpp uses (case-insensitive contractions spelled out as [sS] etc.).
#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <stdexcept>

#include "tokenizer/tokenizer.h"

namespace tokenizer {

namespace {

// GPT-2 style: contractions, letters, digits, other symbols, whitespace not followed by a non-space.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Non-ASCII class members are written as \x{...}: several of these letters (U+1FBE, U+2126, U+212A...) have
// canonical singleton decompositions, so a Unicode-normalizing editor would silently change literal ones.
constexpr const char* kDeepseekLetters =
    R"(\s?[)"
    R"(\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386})"
    R"(\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
    R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})"
    R"(]+)";
constexpr const char* kDeepseekPunct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr const char* kPoro = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
// GPT-4o / Tekken: the original Hugging Face regexes (PCRE2 has the letter sub-categories they need).
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  std::vector<std::string> names;
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"deepseek-llm"}, {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$", kCjk, R"(\p{N}+)"}, false, true},
      {{"deepseek-coder"}, {"[\\r\\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}, false, true},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe"}, {kGpt2}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {kQwen2}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
      {{"viking"}, {kPoro, R"(\p{N})"}},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
      {{"tekken"}, {kTekken}, true, true},
  };
  return kFamilies;
}

const Family* find_family(std::string_view name) {
  for (const auto& f : families())
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  return nullptr;
}

// Unicode White_Space, the set llama.cpp and Hugging Face tokenizers use for \s.
constexpr const char* kWhiteSpace =
    R"(\x{09}-\x{0D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread matching state: a JIT stack large enough for long words and one match-data block.
struct MatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    data = pcre2_match_data_create(32, nullptr);
    if (!context || !stack || !data) throw TokenizerError("PCRE2: out of memory creating match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

std::string rewrite_whitespace_classes(std::string_view re) {
  std::string out;
  out.reserve(re.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char n = re[++i];
      if (n == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (n == 'S') {
        if (in_class) throw std::logic_error("\\S inside a character class is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += n;
      }
    } else if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < re.size() && re[i + 1] == '^') out += re[++i];
      if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];  // a leading ']' is literal
    } else if (c == ']' && in_class) {
      in_class = false;
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::string_view name) {
  const Family* fam = find_family(name);
  if (!fam) {
    std::string list;
    for (const auto& n : supported_names()) list += (list.empty() ? "" : ", ") + n;
    throw TokenizerError("unknown pre-tokenizer '" + std::string(name) + "' (tokenizer.ggml.pre); supported: " + list);
  }
  ignore_merges_ = fam->ignore_merges;
  for (const auto& src : fam->regexes) {
    const std::string pattern = rewrite_whitespace_classes(src);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto rx = std::make_unique<Regex>();
    rx->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!rx->code)
      throw TokenizerError("pre-tokenizer '" + std::string(name) + "': cannot compile regex at offset " +
                           std::to_string(err_off) + ": " + pcre2_message(err));
    rx->jit = pcre2_jit_compile(rx->code, PCRE2_JIT_COMPLETE) == 0;
    regexes_.push_back(std::move(rx));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<uint32_t>& out) const {
  out.clear();
  if (text.empty()) return;
  MatchState& ms = match_state();
  std::vector<uint32_t> segs{static_cast<uint32_t>(text.size())};
  std::vector<uint32_t> next;
  for (const auto& rx : regexes_) {
    next.clear();
    next.reserve(segs.size() * 2);
    size_t seg_start = 0;
    for (const uint32_t seg_len : segs) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + seg_start);
      size_t pos = 0, last = 0;
      while (pos < seg_len) {
        // The text was validated once up front, so the per-call UTF check is skipped.
        const int rc = rx->jit ? pcre2_jit_match(rx->code, subject, seg_len, pos, 0, ms.data, ms.context)
                               : pcre2_match(rx->code, subject, seg_len, pos, PCRE2_NO_UTF_CHECK, ms.data, ms.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw TokenizerError("pre-tokenizer regex failed: " + pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ms.data);
        const size_t m_start = ov[0], m_end = ov[1];
        if (m_end == m_start) {  // an empty match splits nothing; step over one character
          pos = m_start + 1;
          while (pos < seg_len && (static_cast<uint8_t>(subject[pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (m_start > last) next.push_back(static_cast<uint32_t>(m_start - last));
        next.push_back(static_cast<uint32_t>(m_end - m_start));
        last = pos = m_end;
      }
      if (last < seg_len) next.push_back(static_cast<uint32_t>(seg_len - last));
      seg_start += seg_len;
    }
    segs.swap(next);
  }
  out = std::move(segs);
}

std::vector<std::string> PreTokenizer::supported_names() {
  std::vector<std::string> names;
  for (const auto& f : families()) names.insert(names.end(), f.names.begin(), f.names.end());
  return names;
}

bool PreTokenizer::default_add_bos(std::string_view name) {
  const Family* fam = find_family(name);
  return fam && fam->add_bos;
}

std::vector<std::string> PreTokenizer::regexes_for(std::string_view name) {
  const Family* fam = find_family(name);
  return fam ? fam->regexes : std::vector<std::string>{};
}

}  // namespace tokenizer
