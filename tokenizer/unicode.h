// UTF-8 helpers shared by the tokenizers: strict validation, sanitizing invalid input, incremental completeness
// checks for streaming output, and the GPT-2 byte <-> unicode mapping used by byte-level BPE vocabularies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenizer::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class SeqStatus { VALID, INCOMPLETE, INVALID };

// Classifies the UTF-8 sequence starting at s[i] (strict: no overlongs, surrogates or values above U+10FFFF).
// VALID sets *len to its byte length; INCOMPLETE means s ends inside an otherwise valid sequence.
SeqStatus check_sequence(std::string_view s, size_t i, size_t* len);

bool is_valid(std::string_view s);

// Replaces every byte that does not start a valid sequence with U+FFFD (one replacement per byte, which is what
// llama.cpp does before pre-tokenizing). Returns s unchanged when it is already valid.
std::string sanitize(std::string_view s);

// Appends the UTF-8 encoding of cp (which must be <= 0x10FFFF).
void append_codepoint(std::string& out, char32_t cp);

// Decodes the valid sequence at s[i] (caller has checked it); sets *len.
char32_t decode_at(std::string_view s, size_t i, size_t* len);

// "<0xAB>" -> 0xAB: the byte-fallback piece spelling (upper-case hex, as sentencepiece writes it); -1 otherwise.
int parse_byte_piece(std::string_view s);

// GPT-2 byte-level mapping: every byte gets a printable codepoint (printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100..U+0143 in byte order).
char32_t byte_to_codepoint(uint8_t b);
// The byte a codepoint stands for, or -1 when the codepoint is not in the mapping.
int codepoint_to_byte(char32_t cp);
// UTF-8 of byte_to_codepoint(b), for building mapped token strings.
const std::string& byte_to_mapped(uint8_t b);

}  // namespace tokenizer::utf8
