// Unicode character properties and case mappings for the chat-template interpreter, exactly as Python's str methods
// use them (tables generated from Python by gen_unicode_data.py): what str.isalpha/isdigit/islower/... test, what
// str.lower/upper/capitalize write for one character (full mappings: "ß" upper is "SS"), and what repr() escapes.
#pragma once
#include <cstdint>
#include <string>

namespace chat::jinja::unicode {

bool is_alpha(uint32_t cp);     // str.isalpha
bool is_decimal(uint32_t cp);   // str.isdecimal
bool is_digit(uint32_t cp);     // str.isdigit
bool is_numeric(uint32_t cp);   // str.isnumeric
bool is_alnum(uint32_t cp);     // str.isalnum: alpha, decimal, digit or numeric
bool is_word(uint32_t cp);      // the regular expression \w of Python's re: alnum or '_'
bool is_printable(uint32_t cp); // str.isprintable; repr() escapes the others
bool is_lowercase(uint32_t cp); // Unicode Lowercase (str.islower of one character)
bool is_uppercase(uint32_t cp); // Unicode Uppercase
bool is_titlecase(uint32_t cp); // general category Lt
bool is_cased(uint32_t cp);     // lowercase, uppercase or titlecase
bool is_case_ignorable(uint32_t cp);

// Appends the full lower, upper or title case mapping of cp (one to three code points) as UTF-8. The lower mapping
// of U+03A3 (capital sigma) is the medial σ: str.lower's final ς depends on context (see text::lower).
void append_lower(std::string& out, uint32_t cp);
void append_upper(std::string& out, uint32_t cp);
void append_title(std::string& out, uint32_t cp);

}  // namespace chat::jinja::unicode
