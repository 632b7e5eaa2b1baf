// Unicode in the interpreter: Python's case mappings (full ones, the final sigma), character classes and repr()
// escapes, from the tables gen_unicode_data.py generates. Expected values are what Python 3.11 prints.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace {

using namespace jinja_test;

TEST(JinjaUnicode, FullCaseMappings) {
  expect_cases({
      {"{{ 'straße'.upper() }}", "STRASSE"},        // one character becomes two
      {"{{ 'ﬁne'|upper }}", "FINE"},
      {"{{ 'İ'.lower()|length }}", "2"},            // i + combining dot above
      {"{{ 'ǆemal'.capitalize() }}", "ǅemal"},       // titlecase, not uppercase
      {"{{ 'ǆemal'.title() }}", "ǅemal"},
      {"{{ 'ǆemal'|title }}", "Ǆemal"},              // Jinja's |title uppercases the first letter
      {"{{ 'ᾀ'.upper() }}", "ἈΙ"},
      {"{{ 'Ⅻ'.lower() }}", "ⅻ"},
      {"{{ 'Hello Wörld'.swapcase() }}", "hELLO wÖRLD"},
      {"{{ 'ǅ'.swapcase() }}", "ǅ"},                 // titlecase is neither upper nor lower
  });
}

TEST(JinjaUnicode, FinalSigmaDependsOnContext) {
  expect_cases({
      {"{{ 'ΣΑΣ'.lower() }}", "σας"},
      {"{{ 'Σ'.lower() }}", "σ"},                    // no cased letter before it
      {"{{ 'ΑΣ1'.lower() }}", "ας1"},
      {"{{ 'ΑΣΑ'.lower() }}", "ασα"},
      {"{{ 'ΑΣ\u0301Α'.lower() }}", "ασ\u0301α"},    // a combining mark is skipped
      {"{{ 'ΣΑΣ ΟΔΟΣ'|title }}", "Σας Οδος"},          // judged within each word
      {"{{ 'ΟΔΟΣ'.capitalize() }}", "Οδος"},
  });
}

TEST(JinjaUnicode, CharacterClasses) {
  expect_cases({
      {"{{ 'héllo'.isalpha() }}", "True"},
      {"{{ '٣٤'.isdigit() }}{{ '٣٤'.isdecimal() }}", "TrueTrue"},
      {"{{ '½'.isdigit() }}{{ '½'.isnumeric() }}{{ '½'.isalnum() }}", "FalseTrueTrue"},
      {"{{ '²'.isdigit() }}{{ '²'.isdecimal() }}", "TrueFalse"},
      {"{{ 'Ⅻ'.isupper() }}", "True"},
      {"{{ 'ǅ'.isupper() }}{{ 'ǅ'.islower() }}", "FalseFalse"},
      {"{{ 'a\u0301b'|wordcount }}", "2"},            // a combining mark is not a word character
      {"{{ 'naïve café'|wordcount }}", "2"},
  });
}

TEST(JinjaUnicode, ReprEscapesWhatPythonCannotPrint) {
  expect_cases({
      {"{{ ['\u00a0'] }}", "['\\xa0']"},
      {"{{ ['\u200b\ue000\U000f0000'] }}", "['\\u200b\\ue000\\U000f0000']"},  // format, private use
      {"{{ ['\u0378'] }}", "['\\u0378']"},                                    // unassigned
      {"{{ ['é👋'] }}", "['é👋']"},
      {"{{ '\x7f'|tojson(ensure_ascii=true) }}{{ '\x7f'|tojson }}", "\"\\u007f\"\"\x7f\""},
  });
}

}  // namespace
