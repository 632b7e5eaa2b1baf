// Lookups in the generated Unicode tables (see jinja_unicode.h and jinja_unicode_data.h).
#include "chat/jinja_unicode.h"

#include <algorithm>

#include "chat/jinja_text.h"
#include "chat/jinja_unicode_data.h"

namespace chat::jinja::unicode {

namespace {

// The run whose span may hold cp: the last one starting at or before it.
template <typename R>
const R* find_run(const R* runs, size_t n, uint32_t cp) {
  const R* end = runs + n;
  const R* it = std::upper_bound(runs, end, cp, [](uint32_t c, const R& r) { return c < r.start; });
  if (it == runs) return nullptr;
  const R* r = it - 1;
  const uint32_t offset = cp - r->start;
  if (offset % r->stride != 0 || offset / r->stride >= r->count) return nullptr;
  return r;
}

bool in(const data::Run* runs, size_t n, uint32_t cp) { return find_run(runs, n, cp) != nullptr; }

void append_mapped(std::string& out, uint32_t cp, const data::MappingRun* runs, size_t n,
                   const data::Special* special, size_t n_special) {
  const data::Special* end = special + n_special;
  const data::Special* s =
      std::lower_bound(special, end, cp, [](const data::Special& e, uint32_t c) { return e.cp < c; });
  if (s != end && s->cp == cp) {
    for (uint32_t k = 0; k < s->length; ++k) text::append_utf8(out, s->to[k]);
    return;
  }
  const data::MappingRun* r = find_run(runs, n, cp);
  text::append_utf8(out, r ? static_cast<uint32_t>(static_cast<int64_t>(cp) + r->delta) : cp);
}

}  // namespace

bool is_alpha(uint32_t cp) { return in(data::kAlpha, data::kAlphaSize, cp); }
bool is_decimal(uint32_t cp) { return in(data::kDecimal, data::kDecimalSize, cp); }
bool is_digit(uint32_t cp) { return in(data::kDigit, data::kDigitSize, cp); }
bool is_numeric(uint32_t cp) { return in(data::kNumeric, data::kNumericSize, cp); }
bool is_alnum(uint32_t cp) { return is_alpha(cp) || is_decimal(cp) || is_digit(cp) || is_numeric(cp); }
bool is_word(uint32_t cp) { return cp == '_' || is_alnum(cp); }
bool is_printable(uint32_t cp) { return in(data::kPrintable, data::kPrintableSize, cp); }
bool is_lowercase(uint32_t cp) { return in(data::kLowercase, data::kLowercaseSize, cp); }
bool is_uppercase(uint32_t cp) { return in(data::kUppercase, data::kUppercaseSize, cp); }
bool is_titlecase(uint32_t cp) { return in(data::kTitlecase, data::kTitlecaseSize, cp); }
bool is_cased(uint32_t cp) { return is_lowercase(cp) || is_uppercase(cp) || is_titlecase(cp); }
bool is_case_ignorable(uint32_t cp) { return in(data::kCaseIgnorable, data::kCaseIgnorableSize, cp); }

void append_lower(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  append_mapped(out, cp, data::kLower, data::kLowerSize, data::kLowerSpecial, data::kLowerSpecialSize);
}

void append_upper(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
    return;
  }
  append_mapped(out, cp, data::kUpper, data::kUpperSize, data::kUpperSpecial, data::kUpperSpecialSize);
}

void append_title(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
    return;
  }
  append_mapped(out, cp, data::kTitle, data::kTitleSize, data::kTitleSpecial, data::kTitleSpecialSize);
}

}  // namespace chat::jinja::unicode
