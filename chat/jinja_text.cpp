// Python str semantics over UTF-8 text (see jinja_text.h).
#include "chat/jinja_text.h"

#include <algorithm>

#include "chat/jinja_budget.h"
#include "chat/jinja_error.h"
#include "chat/jinja_unicode.h"

namespace chat::jinja::text {

uint32_t decode(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = 0;
  uint32_t cp = 0, min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 1, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 2, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 3, cp = b0 & 0x07, min = 0x10000;
  }
  bool ok = n > 0 && i + n < s.size();  // the continuation bytes s[i+1..i+n] exist
  for (int k = 1; ok && k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) ok = false;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
    i += n + 1;
    return cp;
  }
  ++i;
  return 0xDC00 + b0;  // surrogate escape: written back as the same byte
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out += static_cast<char>(cp - 0xDC00);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate has no UTF-8 form
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<uint32_t> code_points(std::string_view s) {
  tick_bytes(s.size());
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(decode(s, i));
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t length(std::string_view s) {
  tick_bytes(s.size());
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) decode(s, i);
  return n;
}

std::vector<size_t> boundaries(std::string_view s) {
  tick_bytes(s.size());
  std::vector<size_t> b;
  b.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    b.push_back(i);
    decode(s, i);
  }
  b.push_back(s.size());
  return b;
}

bool is_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

// str.lower of cps[i] within cps[lo, hi): Python's Final_Sigma rule makes a capital sigma that ends a word (a cased
// letter before it, none after it, case-ignorable characters skipped on both sides) the final ς.
void append_lower_at(std::string& out, const std::vector<uint32_t>& cps, size_t lo, size_t hi, size_t i) {
  if (cps[i] != 0x3A3) return unicode::append_lower(out, cps[i]);
  size_t j = i;
  while (j > lo && unicode::is_case_ignorable(cps[j - 1])) --j;
  bool final = j > lo && unicode::is_cased(cps[j - 1]);
  if (final) {
    j = i + 1;
    while (j < hi && unicode::is_case_ignorable(cps[j])) ++j;
    final = j == hi || !unicode::is_cased(cps[j]);
  }
  append_utf8(out, final ? 0x3C2 : 0x3C3);
}

void append_lower_range(std::string& out, const std::vector<uint32_t>& cps, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) append_lower_at(out, cps, lo, hi, i);
}

// Splits on a separator for split()/rsplit(); from_right decides which end maxsplit counts from.
std::vector<std::string> split_on(std::string_view s, std::string_view sep, int64_t maxsplit, bool from_right) {
  tick_bytes(s.size());
  if (sep.empty()) throw TemplateError(TemplateError::Kind::Render, "empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// Whitespace split over decoded code points; from_right mirrors Python's rsplit(None, n).
std::vector<std::string> split_ws(std::string_view s, int64_t maxsplit, bool from_right) {
  const std::vector<size_t> b = boundaries(s);
  const size_t n = b.size() - 1;
  auto space_at = [&](size_t k) {
    size_t i = b[k];
    return is_space(decode(s, i));
  };
  std::vector<std::string> parts;
  if (!from_right) {
    size_t k = 0;
    while (true) {
      while (k < n && space_at(k)) ++k;
      if (k == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(s.substr(b[k]));
        break;
      }
      size_t j = k;
      while (j < n && !space_at(j)) ++j;
      parts.emplace_back(s.substr(b[k], b[j] - b[k]));
      k = j;
    }
    return parts;
  }
  size_t k = n;
  while (true) {
    while (k > 0 && space_at(k - 1)) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(0, b[k]));
      break;
    }
    size_t j = k;
    while (j > 0 && !space_at(j - 1)) --j;
    parts.emplace_back(s.substr(b[j], b[k] - b[j]));
    k = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

int64_t cp_index(std::string_view s, size_t byte_offset) { return static_cast<int64_t>(length(s.substr(0, byte_offset))); }

}  // namespace

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strippable = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_space(cp);
  };
  const std::vector<size_t> b = boundaries(s);
  size_t lo = 0, hi = b.size() - 1;
  auto cp_at = [&](size_t k) {
    size_t i = b[k];
    return decode(s, i);
  };
  if (left)
    while (lo < hi && strippable(cp_at(lo))) ++lo;
  if (right)
    while (hi > lo && strippable(cp_at(hi - 1))) --hi;
  return std::string(s.substr(b[lo], b[hi] - b[lo]));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  return sep ? split_on(s, *sep, maxsplit, false) : split_ws(s, maxsplit, false);
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  return sep ? split_on(s, *sep, maxsplit, true) : split_ws(s, maxsplit, true);
}

std::vector<std::string> splitlines(std::string_view s) {
  tick_bytes(s.size());
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = decode(s, i);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) {
      cur.append(s.substr(at, i - at));
      continue;
    }
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : code_points(s)) unicode::append_upper(out, cp);
  return out;
}

std::string lower(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::string out;
  out.reserve(s.size());
  append_lower_range(out, cps, 0, cps.size());
  return out;
}

std::string swapcase(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    if (unicode::is_uppercase(cps[i])) append_lower_at(out, cps, 0, cps.size(), i);
    else if (unicode::is_lowercase(cps[i])) unicode::append_upper(out, cps[i]);
    else append_utf8(out, cps[i]);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::string out;
  out.reserve(s.size());
  if (cps.empty()) return out;
  unicode::append_title(out, cps[0]);
  for (size_t i = 1; i < cps.size(); ++i) append_lower_at(out, cps, 0, cps.size(), i);
  return out;
}

std::string py_title(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (prev_cased) append_lower_at(out, cps, 0, cps.size(), i);
    else unicode::append_title(out, cps[i]);
    prev_cased = unicode::is_cased(cps[i]);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // Jinja's |title: re.split(r"([-\s({\[<]+)") into words and separator runs, then item[0].upper() +
  // item[1:].lower() on each (so a final sigma is judged within the word alone).
  const std::vector<uint32_t> cps = code_points(s);
  auto sep = [](uint32_t c) { return is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  out.reserve(s.size());
  for (size_t a = 0; a < cps.size();) {
    size_t b = a + 1;
    while (b < cps.size() && sep(cps[b]) == sep(cps[a])) ++b;
    unicode::append_upper(out, cps[a]);
    append_lower_range(out, cps, a + 1, b);
    a = b;
  }
  return out;
}

// str.islower / str.isupper: no character of the other case (titlecase counts as both) and at least one cased.
bool is_lower(std::string_view s) {
  bool cased = false;
  for (uint32_t c : code_points(s)) {
    if (unicode::is_uppercase(c) || unicode::is_titlecase(c)) return false;
    cased = cased || unicode::is_lowercase(c);
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (uint32_t c : code_points(s)) {
    if (unicode::is_lowercase(c) || unicode::is_titlecase(c)) return false;
    cased = cased || unicode::is_uppercase(c);
  }
  return cased;
}

std::string replace(std::string_view s, std::string_view old, std::string_view new_, int64_t count) {
  tick_bytes(s.size());
  std::string out;
  if (old.empty()) {
    // Python inserts new_ before every character and at the end, up to count times.
    const std::vector<size_t> b = boundaries(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < b.size(); ++k) {
      if (count < 0 || done < count) out.append(new_), ++done;
      out.append(s.substr(b[k], b[k + 1] - b[k]));
    }
    if (count < 0 || done < count) out.append(new_);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start)).append(new_);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t find(std::string_view s, std::string_view sub) {
  tick_bytes(s.size());
  const size_t at = s.find(sub);
  return at == std::string_view::npos ? -1 : cp_index(s, at);
}

int64_t rfind(std::string_view s, std::string_view sub) {
  tick_bytes(s.size());
  const size_t at = s.rfind(sub);
  return at == std::string_view::npos ? -1 : cp_index(s, at);
}

int64_t count(std::string_view s, std::string_view sub) {
  tick_bytes(s.size());
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

}  // namespace chat::jinja::text
