// The shape of the generated Unicode tables (jinja_unicode_data.cpp, written by gen_unicode_data.py); only
// jinja_unicode.cpp reads them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace chat::jinja::unicode::data {

// The code points start, start + stride, ..., start + (count - 1) * stride. Runs are sorted by start and their
// spans do not overlap.
struct Run {
  uint32_t start;
  uint32_t count;
  uint32_t stride;
};

// Like Run, each of its code points c mapping to the single code point c + delta.
struct MappingRun {
  uint32_t start;
  uint32_t count;
  uint32_t stride;
  int32_t delta;
};

// A code point whose mapping is several code points (up to three), sorted by cp.
struct Special {
  uint32_t cp;
  uint32_t length;
  uint32_t to[3];
};

// Python's str.isalpha, isdecimal, isdigit, isnumeric, isprintable, islower, isupper (one character each); Lt
// letters (istitle but not isupper); Unicode's Case_Ignorable, as Python's lower() uses it for the final sigma.
extern const Run kAlpha[], kDecimal[], kDigit[], kNumeric[], kPrintable[], kLowercase[], kUppercase[], kTitlecase[],
    kCaseIgnorable[];
extern const size_t kAlphaSize, kDecimalSize, kDigitSize, kNumericSize, kPrintableSize, kLowercaseSize,
    kUppercaseSize, kTitlecaseSize, kCaseIgnorableSize;

// Python's full case mappings of one character: str.lower, str.upper, and the titlecase str.capitalize gives a
// first character. A code point in neither table maps to itself.
extern const MappingRun kLower[], kUpper[], kTitle[];
extern const size_t kLowerSize, kUpperSize, kTitleSize;
extern const Special kLowerSpecial[], kUpperSpecial[], kTitleSpecial[];
extern const size_t kLowerSpecialSize, kUpperSpecialSize, kTitleSpecialSize;

}  // namespace chat::jinja::unicode::data
