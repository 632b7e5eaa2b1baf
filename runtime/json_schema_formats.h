// JSON Schema's `format` for strings, as byte grammars of the string (quotes included): the formats whose texts a
// grammar says exactly, so that a schema's date is written as a date. Other formats (email, hostname, ipv6, uri,
// duration, ...) stay what JSON Schema makes every format by default, an annotation, and are read past.
#pragma once
#include <optional>
#include <string_view>

#include "runtime/byte_grammar.h"

namespace runtime {

inline constexpr std::string_view kExactStringFormats[] = {"date", "time", "date-time", "uuid", "ipv4"};

// date (RFC 3339 full-date, YYYY-MM-DD), time (full-time, with a Z or an offset), date-time (a date, T, a time),
// uuid (8-4-4-4-12 hex digits), ipv4 (four decimal octets 0-255 without leading zeros). nullopt for any other name.
std::optional<ByteGrammar::Rule> string_format_rule(ByteGrammar& g, std::string_view format);

}  // namespace runtime
