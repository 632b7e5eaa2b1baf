// Tool calls in model output (see tool_calls.h). Each format has two questions: where its calls begin (a marker
// anywhere for Hermes, Mistral and Granite, whose markers are never prose; the very start for Llama 3, whose calls
// are bare JSON that prose could also begin with), and what follows that opening. JSON is located by matching
// brackets and then read by the project's strict parser, so a call is only accepted when it is real JSON.
#include "server/tool_calls.h"

#include <optional>
#include <random>

#include "chat/json.h"

namespace server {
namespace {

using chat::jinja::Value;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kGraniteOpen = "<|tool_call|>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

std::string trim(std::string_view s) {
  size_t b = skip_space(s, 0), e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

bool at(std::string_view s, size_t i, std::string_view word) { return i <= s.size() && s.substr(i).starts_with(word); }

// The length of the JSON object or array that starts s, by bracket depth outside strings; npos when it does not
// close. Only a locator: parse_json decides whether the text is JSON.
size_t json_length(std::string_view s) {
  if (s.empty() || (s[0] != '{' && s[0] != '[')) return std::string_view::npos;
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// The JSON value at s[i] and where it ends.
std::optional<Value> json_at(std::string_view s, size_t& i) {
  const size_t n = json_length(s.substr(i));
  if (n == std::string_view::npos) return std::nullopt;
  try {
    Value v = chat::parse_json(s.substr(i, n));
    i += n;
    return v;
  } catch (const chat::JsonError&) {
    return std::nullopt;
  }
}

bool is_plain_object(const Value& v) { return v.is_object() && !v.is_namespace(); }

// {"name": "...", "arguments" (or Llama's "parameters"): {...} or its JSON text, "id"?: "..."}.
std::optional<ToolCall> call_from_object(const Value& v) {
  if (!is_plain_object(v)) return std::nullopt;
  const Value* name = v.object().find("name");
  if (!name || !name->is_string() || name->as_string().empty()) return std::nullopt;
  ToolCall call;
  call.name = name->as_string();
  const Value* args = v.object().find("arguments");
  if (!args || args->is_none()) args = v.object().find("parameters");
  Value parsed = Value::object({});
  if (args && args->is_string()) {
    try {
      parsed = chat::parse_json(args->as_string());
    } catch (const chat::JsonError&) {
      return std::nullopt;
    }
  } else if (args && !args->is_none()) {
    parsed = *args;
  }
  const std::optional<std::string> text = chat::compact_json_object(parsed);
  if (!text) return std::nullopt;
  call.arguments = *text;
  if (const Value* id = v.object().find("id"); id && id->is_string()) call.id = id->as_string();
  return call;
}

// A JSON array of call objects at s[i] (Mistral's first form, Granite).
bool calls_array_at(std::string_view s, size_t& i, std::vector<ToolCall>& out) {
  const std::optional<Value> v = json_at(s, i);
  if (!v || !v->is_array() || v->items().empty()) return false;
  for (const Value& item : v->items()) {
    std::optional<ToolCall> call = call_from_object(item);
    if (!call) return false;
    out.push_back(std::move(*call));
  }
  return true;
}

// Qwen3-Coder writes its calls inside <tool_call> as XML: <function=NAME><parameter=KEY>VALUE</parameter>...
// </function>. Values have no types in the text; one that reads as JSON (a number, true, a list) is taken as that,
// anything else as a string, which is what the model's own parser does without the schema at hand.
std::optional<ToolCall> xml_call_at(std::string_view s, size_t& i) {
  constexpr std::string_view kFunction = "<function=", kParameter = "<parameter=";
  if (!at(s, i, kFunction)) return std::nullopt;
  const size_t name_end = s.find('>', i);
  if (name_end == std::string_view::npos) return std::nullopt;
  ToolCall call;
  call.name = trim(s.substr(i + kFunction.size(), name_end - i - kFunction.size()));
  if (call.name.empty()) return std::nullopt;
  std::vector<std::pair<std::string, Value>> args;
  i = skip_space(s, name_end + 1);
  while (at(s, i, kParameter)) {
    const size_t key_end = s.find('>', i);
    const size_t value_end = key_end == std::string_view::npos ? key_end : s.find("</parameter>", key_end);
    if (value_end == std::string_view::npos) return std::nullopt;
    std::string key = trim(s.substr(i + kParameter.size(), key_end - i - kParameter.size()));
    std::string_view raw = s.substr(key_end + 1, value_end - key_end - 1);
    if (raw.starts_with('\n')) raw.remove_prefix(1);  // the newlines the format puts around a value
    if (raw.ends_with('\n')) raw.remove_suffix(1);
    Value value{std::string(raw)};
    try {
      value = chat::parse_json(raw);
    } catch (const chat::JsonError&) {
    }
    args.emplace_back(std::move(key), std::move(value));
    i = skip_space(s, value_end + std::string_view("</parameter>").size());
  }
  if (!at(s, i, "</function>")) return std::nullopt;
  i += std::string_view("</function>").size();
  const std::optional<std::string> text = chat::compact_json_object(Value::object(std::move(args)));
  if (!text) return std::nullopt;
  call.arguments = *text;
  return call;
}

// <tool_call> JSON-or-XML </tool_call>, repeated; the closing tag may be missing only at the very end (a model that
// stops on its end-of-turn token right after the JSON).
bool hermes_calls(std::string_view s, size_t& i, std::vector<ToolCall>& out) {
  while (at(s, i, kHermesOpen)) {
    i = skip_space(s, i + kHermesOpen.size());
    std::optional<ToolCall> call;
    if (at(s, i, "<function=")) {
      call = xml_call_at(s, i);
    } else if (const std::optional<Value> v = json_at(s, i)) {
      call = call_from_object(*v);
    }
    if (!call) return false;
    out.push_back(std::move(*call));
    i = skip_space(s, i);
    if (at(s, i, kHermesClose)) {
      i = skip_space(s, i + kHermesClose.size());
    } else if (i != s.size()) {
      return false;
    }
  }
  return true;
}

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

// A Python identifier at s[i] (advanced past it), or empty.
std::string_view ident_at(std::string_view s, size_t& i) {
  if (i >= s.size() || !ident_start(s[i])) return {};
  const size_t b = i;
  while (i < s.size() && ident_char(s[i])) ++i;
  return s.substr(b, i - b);
}

// A Python literal at s[i] (advanced past it) as JSON text: a string in single or double quotes (the escapes \\,
// \', \", \n, \t, \r; any other backslash stays as written), a decimal number, True, False or None.
std::optional<std::string> python_literal_at(std::string_view s, size_t& i) {
  if (i >= s.size()) return std::nullopt;
  const char q = s[i];
  if (q == '"' || q == '\'') {
    std::string text;
    for (size_t k = i + 1; k < s.size(); ++k) {
      if (s[k] == q) {
        i = k + 1;
        return chat::json_quote(text);
      }
      if (s[k] == '\\' && k + 1 < s.size()) {
        const char e = s[++k];
        switch (e) {
          case 'n': text += '\n'; break;
          case 't': text += '\t'; break;
          case 'r': text += '\r'; break;
          case '\\':
          case '\'':
          case '"': text += e; break;
          default: text += '\\', text += e;  // any other escape stays as written
        }
        continue;
      }
      text += s[k];
    }
    return std::nullopt;  // no closing quote
  }
  for (const auto& [word, json] : {std::pair{"True", "true"}, {"False", "false"}, {"None", "null"}}) {
    const std::string_view w = word;
    if (at(s, i, w) && (i + w.size() == s.size() || !ident_char(s[i + w.size()]))) {
      i += w.size();
      return std::string(json);
    }
  }
  // A JSON number is a Python number too; Python's others (1_000, .5, 0x10) are not taken. The run of characters a
  // number may hold goes to the JSON parser whole: whatever follows a number in a call is a space, ',' or ')'.
  size_t k = i;
  while (k < s.size() && ((s[k] >= '0' && s[k] <= '9') || s[k] == '-' || s[k] == '+' || s[k] == '.' || s[k] == 'e' ||
                          s[k] == 'E'))
    ++k;
  if (k == i) return std::nullopt;
  const std::string_view number = s.substr(i, k - i);
  try {
    if (!chat::parse_json(number).is_number()) return std::nullopt;
  } catch (const chat::JsonError&) {
    return std::nullopt;
  }
  i = k;
  return std::string(number);
}

// Llama 3.1's built-in tools: NAME.call(KEY=VALUE, ...) after <|python_tag|> (brave_search.call(query="..."),
// wolfram_alpha.call(query="...")), VALUE a Python literal; the arguments become a JSON object.
std::optional<ToolCall> builtin_call_at(std::string_view s, size_t& i) {
  const std::string_view name = ident_at(s, i);
  if (name.empty() || !at(s, i, ".call(")) return std::nullopt;
  i = skip_space(s, i + 6);
  std::string args = "{";
  while (i < s.size() && s[i] != ')') {
    const std::string_view key = ident_at(s, i);
    i = skip_space(s, i);
    if (key.empty() || i >= s.size() || s[i] != '=') return std::nullopt;
    i = skip_space(s, i + 1);
    const std::optional<std::string> value = python_literal_at(s, i);
    if (!value) return std::nullopt;
    if (args.size() > 1) args += ',';
    args += chat::json_quote(key) + ":" + *value;
    i = skip_space(s, i);
    if (i < s.size() && s[i] == ',') i = skip_space(s, i + 1);
    else if (i >= s.size() || s[i] != ')') return std::nullopt;
  }
  if (i >= s.size()) return std::nullopt;
  ++i;  // ')'
  return ToolCall{"", std::string(name), args + "}"};
}

// Llama 3: [<|python_tag|>] then one or more call objects (separated by ';' or space) and nothing else; after the
// tag also Llama 3.1's built-in tools' calls (builtin_call_at).
bool llama3_calls(std::string_view s, size_t& i, std::vector<ToolCall>& out) {
  const bool tagged = at(s, i, kPythonTag);
  if (tagged) i += kPythonTag.size();
  for (i = skip_space(s, i); i < s.size(); i = skip_space(s, i)) {
    std::optional<ToolCall> call;
    if (tagged && i < s.size() && s[i] != '{') {
      call = builtin_call_at(s, i);
    } else {
      const std::optional<Value> v = json_at(s, i);
      call = v ? call_from_object(*v) : std::nullopt;
    }
    if (!call) return false;
    out.push_back(std::move(*call));
    i = skip_space(s, i);
    if (i < s.size() && s[i] == ';') ++i;
  }
  return true;
}

// [TOOL_CALLS] then a JSON array of calls, or NAME[CALL_ID]ID[ARGS]{...} (the id part optional); repeated.
bool mistral_calls(std::string_view s, size_t& i, std::vector<ToolCall>& out) {
  while (at(s, i, kMistralOpen)) {
    i = skip_space(s, i + kMistralOpen.size());
    if (i < s.size() && s[i] == '[') {
      if (!calls_array_at(s, i, out)) return false;
    } else {
      const size_t args = s.find(kMistralArgs, i);
      if (args == std::string_view::npos) return false;
      std::string_view head = s.substr(i, args - i);
      ToolCall call;
      if (const size_t id = head.find(kMistralCallId); id != std::string_view::npos) {
        call.id = trim(head.substr(id + kMistralCallId.size()));
        head = head.substr(0, id);
      }
      call.name = trim(head);
      if (call.name.empty() || call.name.find_first_of(" \t\n\r[]{}\"") != std::string::npos) return false;
      i = skip_space(s, args + kMistralArgs.size());
      const std::optional<Value> v = json_at(s, i);
      const std::optional<std::string> text = v ? chat::compact_json_object(*v) : std::nullopt;
      if (!text) return false;
      call.arguments = *text;
      out.push_back(std::move(call));
    }
    i = skip_space(s, i);
  }
  return true;
}

bool granite_calls(std::string_view s, size_t& i, std::vector<ToolCall>& out) {
  if (!at(s, i, kGraniteOpen)) return false;
  i = skip_space(s, i + kGraniteOpen.size());
  return calls_array_at(s, i, out);
}

// A marker anywhere: Found at it, or Partial where the longest end of the text that begins the marker starts.
ToolCallStart find_marker(std::string_view text, std::string_view marker) {
  if (const size_t p = text.find(marker); p != std::string_view::npos) return {ToolCallStart::Kind::Found, p};
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k)
    if (text.ends_with(marker.substr(0, k))) return {ToolCallStart::Kind::Partial, text.size() - k};
  return {};
}

enum class Match { No, Prefix, Full };

// Whether s begins with these words, with any whitespace between them; Prefix when s ends before they do.
Match match_words(std::string_view s, std::initializer_list<std::string_view> words) {
  size_t i = 0;
  for (std::string_view w : words) {
    i = skip_space(s, i);
    const size_t n = std::min(w.size(), s.size() - i);
    if (s.substr(i, n) != w.substr(0, n)) return Match::No;
    if (n < w.size()) return Match::Prefix;
    i += n;
  }
  return Match::Full;
}

// Llama 3's calls are the whole reply: <|python_tag|>, or an object whose first key is "name" (after an optional
// "type": "function", which Llama 3.2 sometimes writes first). Prose that merely starts with "{" is not held back
// for long: the first key decides.
ToolCallStart find_llama3(std::string_view text) {
  const size_t i = skip_space(text, 0);
  const std::string_view rest = text.substr(i);
  if (rest.empty()) return {ToolCallStart::Kind::Partial, i};
  if (rest.starts_with(kPythonTag)) return {ToolCallStart::Kind::Found, i};
  if (kPythonTag.starts_with(rest)) return {ToolCallStart::Kind::Partial, i};
  const Match plain = match_words(rest, {"{", "\"name\"", ":"});
  const Match typed = match_words(rest, {"{", "\"type\"", ":", "\"function\"", ",", "\"name\"", ":"});
  if (plain == Match::Full || typed == Match::Full) return {ToolCallStart::Kind::Found, i};
  if (plain == Match::Prefix || typed == Match::Prefix) return {ToolCallStart::Kind::Partial, i};
  return {};
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view src) {
  // The order matters where a template writes more than one marker: Mistral's before anything else, since its
  // markers are its own; the ipython role is Llama 3.1's alone.
  if (src.find(kMistralOpen) != std::string_view::npos) return ToolCallFormat::Mistral;
  if (src.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::Hermes;
  if (src.find("<|start_header_id|>ipython<|end_header_id|>") != std::string_view::npos) return ToolCallFormat::Llama3;
  if (src.find(kGraniteOpen) != std::string_view::npos) return ToolCallFormat::Granite;
  return ToolCallFormat::None;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None: return "none";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::Granite: return "granite";
  }
  return "none";
}

ToolCallStart find_tool_call_start(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::None: return {};
    case ToolCallFormat::Llama3: return find_llama3(text);
    case ToolCallFormat::Hermes: return find_marker(text, kHermesOpen);
    case ToolCallFormat::Mistral: return find_marker(text, kMistralOpen);
    case ToolCallFormat::Granite: return find_marker(text, kGraniteOpen);
  }
  return {};
}

ToolCallsAt parse_tool_calls_at(ToolCallFormat format, std::string_view text, size_t pos) {
  ToolCallsAt r;
  if (pos > text.size()) return r;
  size_t i = pos;
  bool ok = false;
  switch (format) {
    case ToolCallFormat::None: break;
    case ToolCallFormat::Llama3: ok = llama3_calls(text, i, r.calls); break;
    case ToolCallFormat::Hermes: ok = hermes_calls(text, i, r.calls); break;
    case ToolCallFormat::Mistral: ok = mistral_calls(text, i, r.calls); break;
    case ToolCallFormat::Granite: ok = granite_calls(text, i, r.calls); break;
  }
  r.ok = ok && !r.calls.empty();
  if (!r.ok) {
    r.calls.clear();
    return r;
  }
  r.trailing = trim(text.substr(i));
  return r;
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text) {
  const ToolCallStart start = find_tool_call_start(format, text);
  if (start.kind == ToolCallStart::Kind::Found) {
    ToolCallsAt at = parse_tool_calls_at(format, text, start.pos);
    if (at.ok) {
      std::string content = trim(text.substr(0, start.pos));
      if (!content.empty() && !at.trailing.empty()) content += '\n';
      return {content + at.trailing, std::move(at.calls)};
    }
  }
  return {std::string(text), {}};
}

std::string make_tool_call_id(ToolCallFormat format, uint64_t random) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::mt19937_64 rng(random);
  const bool mistral = format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int k = 0; k < (mistral ? 9 : 24); ++k) id += kAlphabet[rng() % kAlphabet.size()];
  return id;
}

}  // namespace server
