// Python str semantics over UTF-8 text for the chat-template interpreter: code-point length and slicing,
// whitespace, case mapping and the str methods templates call. Case mapping is Python's for every character (full
// mappings, the final sigma; tables in jinja_unicode.h); invalid UTF-8 bytes survive every operation unchanged,
// like Python's surrogateescape.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chat::jinja::text {

// One code point at s[i], advancing i. An invalid byte b decodes to 0xDC00 + b, which append_utf8 writes back as
// the same single byte.
uint32_t decode(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);
std::vector<uint32_t> code_points(std::string_view s);

size_t length(std::string_view s);  // in code points
bool is_ascii(std::string_view s);
// Byte offset of every code point plus a final s.size(): code point k is s[b[k], b[k+1]).
std::vector<size_t> boundaries(std::string_view s);

bool is_space(uint32_t cp);  // Python str.isspace()

// str.strip / lstrip / rstrip; chars == nullptr strips whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; sep == nullptr splits on runs of whitespace and drops empty parts. maxsplit < 0: no limit.
// An empty sep throws TemplateError, as Python raises ValueError.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string swapcase(std::string_view s);     // uppercase to lower, lowercase to upper
std::string capitalize(std::string_view s);   // first character titlecase, the rest lower
std::string py_title(std::string_view s);     // str.title(): titlecase after an uncased character, else lower
std::string jinja_title(std::string_view s);  // the |title filter: words split at whitespace and -({[<
bool is_lower(std::string_view s);            // str.islower(): has a cased character and none is upper
bool is_upper(std::string_view s);

// str.replace; count < 0 replaces all. An empty old inserts new_ between characters, as Python does.
std::string replace(std::string_view s, std::string_view old, std::string_view new_, int64_t count);
int64_t find(std::string_view s, std::string_view sub);   // code-point index or -1
int64_t rfind(std::string_view s, std::string_view sub);
int64_t count(std::string_view s, std::string_view sub);  // non-overlapping

}  // namespace chat::jinja::text
