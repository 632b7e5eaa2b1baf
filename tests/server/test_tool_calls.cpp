// The tool-call reader alone: which format each real template of the corpus gets, and real model replies of each
// family read into calls; replies that are cut short, malformed or prose stay text, whole and unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <variant>

#include "assets.h"
#include "chat/harmony_split.h"
#include "chat/json.h"
#include "chat/messages_json.h"
#include "gguf/gguf.h"
#include "runtime/byte_grammar.h"
#include "runtime/json_schema_grammar.h"
#include "server/tool_calls.h"
#include "server/tool_choice.h"
#include "server/tool_reply.h"
#include "tokenizer/tokenizer.h"

namespace {

using server::ToolCallFormat;
using server::ToolCallStart;

std::string read_template(const std::string& name) {
  std::ifstream f(std::filesystem::path(LLM_SOURCE_DIR) / "tests/chat/templates" / name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ToolCallFormat, DetectedFromTheCorpusTemplates) {
  const std::map<std::string, ToolCallFormat> expected = {
      {"llama-3.2-3b-instruct.jinja", ToolCallFormat::Llama3},
      {"llama-3.3-70b-instruct.jinja", ToolCallFormat::Llama3},
      {"qwen2.5-7b-instruct.jinja", ToolCallFormat::Hermes},
      {"qwen3-0.6b.jinja", ToolCallFormat::Hermes},
      {"qwen3-coder-30b-a3b-instruct.jinja", ToolCallFormat::Hermes},
      {"hermes-3-llama-3.1-8b-tool-use.jinja", ToolCallFormat::Hermes},
      {"smollm3-3b.jinja", ToolCallFormat::Hermes},
      {"mistral-7b-instruct-v0.3.jinja", ToolCallFormat::Mistral},
      {"mistral-nemo-instruct-2407.jinja", ToolCallFormat::Mistral},
      {"mistral-small-3.2-24b-instruct-2506.jinja", ToolCallFormat::Mistral},
      {"granite-3.3-2b-instruct.jinja", ToolCallFormat::Granite},
  };
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(LLM_SOURCE_DIR) /
                                                               "tests/chat/templates")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".jinja") continue;
    ++seen;
    const std::string text = read_template(name);
    ASSERT_FALSE(text.empty()) << name;
    const auto it = expected.find(name);
    // Every other template (Llama 2, Llama 3.0, Gemma, Phi, DeepSeek, Command R, ...) has no format of ours: text.
    const ToolCallFormat want = it == expected.end() ? ToolCallFormat::None : it->second;
    EXPECT_EQ(server::tool_call_format_name(server::detect_tool_call_format(text)),
              server::tool_call_format_name(want))
        << name;
  }
  EXPECT_EQ(seen, 30u);
}

struct Call {
  std::string name, arguments, id = "";
};

void expect_calls(ToolCallFormat f, const std::string& reply, const std::vector<Call>& calls,
                  const std::string& content = "") {
  SCOPED_TRACE(reply);
  const server::ParsedReply r = server::parse_tool_calls(f, reply);
  ASSERT_EQ(r.tool_calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(r.tool_calls[i].name, calls[i].name);
    EXPECT_EQ(r.tool_calls[i].arguments, calls[i].arguments);
    EXPECT_EQ(r.tool_calls[i].id, calls[i].id);
  }
  EXPECT_EQ(r.content, content);
}

void expect_text(ToolCallFormat f, const std::string& reply) {
  SCOPED_TRACE(reply);
  const server::ParsedReply r = server::parse_tool_calls(f, reply);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, reply);
}

TEST(ToolCalls, Llama3) {
  const auto f = ToolCallFormat::Llama3;
  // Llama 3.1 8B, custom tools (JSON after the ipython-style prompt), with and without the python tag.
  expect_calls(f, R"({"name": "get_current_weather", "parameters": {"location": "San Francisco, CA", "unit": "celsius"}})",
               {{"get_current_weather", R"({"location":"San Francisco, CA","unit":"celsius"})"}});
  expect_calls(f, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
               {{"get_weather", R"({"city":"Paris"})"}});
  // Llama 3.2 3B sometimes names the type first, and puts two calls in one reply.
  expect_calls(f, R"( {"type": "function", "name": "get_weather", "parameters": {"city": "Paris", "days": 3}})",
               {{"get_weather", R"({"city":"Paris","days":3})"}});
  expect_calls(f, R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": [1, 2.5, null, true]}})",
               {{"a", "{}"}, {"b", R"({"x":[1,2.5,null,true]})"}});
  // Llama 3.1's built-in tools after the tag: NAME.call(KEY=VALUE, ...) with Python literals as arguments.
  expect_calls(f, "<|python_tag|>brave_search.call(query=\"weather in Paris\")",
               {{"brave_search", R"({"query":"weather in Paris"})"}});
  expect_calls(f, R"(<|python_tag|>wolfram_alpha.call(query='2+2', n = 3, exact=True, x=None, y=-1.5e3, z=0.25,))",
               {{"wolfram_alpha", R"({"query":"2+2","n":3,"exact":true,"x":null,"y":-1.5e3,"z":0.25})"}});
  expect_calls(f, R"(<|python_tag|>brave_search.call(query="say \"hi\"\n\d"); wolfram_alpha.call())",
               {{"brave_search", R"({"query":"say \"hi\"\n\\d"})"}, {"wolfram_alpha", "{}"}});
  // Prose, JSON that is not a call, a call followed by prose, a cut-off call, built-in calls that are not well
  // formed or untagged, and code for the code interpreter (returned as text).
  expect_text(f, "The weather in Paris is sunny.");
  expect_text(f, R"({"city": "Paris"})");
  expect_text(f, R"({"name": "get_weather", "parameters": {"city": "Paris"}} and then I will tell you.)");
  expect_text(f, R"({"name": "get_weather", "parameters": {"city": "Par)");
  expect_text(f, "brave_search.call(query=\"weather in Paris\")");
  expect_text(f, "<|python_tag|>brave_search.call(query=\"weather in Paris\"");
  expect_text(f, "<|python_tag|>brave_search.call(query=\"weather in Paris)");
  expect_text(f, "<|python_tag|>brave_search.call(\"weather\")");
  expect_text(f, "<|python_tag|>brave_search.call(query=weather)");
  expect_text(f, "<|python_tag|>brave_search.call(n=012)");
  expect_text(f, "<|python_tag|>brave_search.call(q=Truer)");
  expect_text(f, "<|python_tag|>import math\nprint(math.sqrt(2))");
  expect_text(f, R"({"name": 42, "parameters": {}})");
}

TEST(ToolCalls, HermesAndQwen) {
  const auto f = ToolCallFormat::Hermes;
  // Qwen 2.5's documented parallel calls.
  expect_calls(f,
               "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, "
               "USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": "
               "\"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>",
               {{"get_current_temperature", R"({"location":"San Francisco, CA, USA"})"},
                {"get_temperature_date", R"({"location":"San Francisco, CA, USA","date":"2024-10-01"})"}});
  // Hermes 3 writes the arguments first; Qwen 3 thinks before it calls (the thought stays content).
  expect_calls(f, "<tool_call>\n{\"arguments\": {\"symbol\": \"TSLA\"}, \"name\": \"get_stock_fundamentals\"}\n</tool_call>",
               {{"get_stock_fundamentals", R"({"symbol":"TSLA"})"}});
  expect_calls(f,
               "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               {{"get_weather", R"({"city":"Paris"})"}}, "<think>\nThe user wants the weather.\n</think>");
  // Arguments sent as JSON text, a missing closing tag at the very end, non-ASCII arguments.
  expect_calls(f, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", {{"f", R"({"a":1})"}});
  expect_calls(f, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"caf\xc3\xa9 }{\"}}",
               {{"f", "{\"q\":\"caf\xc3\xa9 }{\"}"}});
  // Qwen3-Coder's XML form: values that read as JSON keep their type.
  expect_calls(f,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
               "</parameter>\n</function>\n</tool_call>",
               {{"get_weather", R"({"city":"Paris","days":3})"}});
  // Cut short by max_tokens, not JSON, no name, prose about the tag, a second call cut short.
  expect_text(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  expect_text(f, "<tool_call>\nget_weather(city='Paris')\n</tool_call>");
  expect_text(f, "<tool_call>{\"arguments\": {}}</tool_call>");
  expect_text(f, "Wrap calls in <tool_call> tags, like this.");
  expect_text(f, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"");
  expect_text(f, "<tool_call>{\"name\": \"f\", \"arguments\": \"not json\"}</tool_call>");
  expect_text(f, "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 1e999}}</tool_call>");
}

TEST(ToolCalls, Mistral) {
  const auto f = ToolCallFormat::Mistral;
  // v0.3 (SentencePiece: a space after the control token), Nemo with its own 9-character id.
  expect_calls(f,
               "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", "
               "\"format\": \"celsius\"}}]",
               {{"get_current_weather", R"({"location":"Paris, France","format":"celsius"})"}});
  expect_calls(f,
               "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"a1b2c3d4e\"}, {\"name\": \"b\", "
               "\"arguments\": {}}]",
               {{"a", R"({"x":1})", "a1b2c3d4e"}, {"b", "{}"}});
  // Small 3.2 and later: one marker per call, the name before [ARGS]; with a call id.
  expect_calls(f, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", {{"get_weather", R"({"city":"Paris"})"}});
  expect_calls(f, "[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[CALL_ID]abc123XYZ[ARGS]{}",
               {{"a", R"({"x":1})"}, {"b", "{}", "abc123XYZ"}});
  expect_calls(f, "Let me look.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
               {{"get_weather", R"({"city":"Paris"})"}}, "Let me look.");
  expect_text(f, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\"");
  expect_text(f, "[TOOL_CALLS]get weather[ARGS]{}");
  expect_text(f, "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}");
  expect_text(f, "[TOOL_CALLS][]");
  expect_text(f, "It is sunny in Paris.");
}

TEST(ToolCalls, Granite) {
  const auto f = ToolCallFormat::Granite;
  expect_calls(f, "<|tool_call|>[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Boston\"}}]",
               {{"get_current_weather", R"({"location":"Boston"})"}});
  expect_text(f, "<|tool_call|>{\"name\": \"x\"}");
}

TEST(ToolCalls, NoFormatIsAlwaysText) {
  expect_text(ToolCallFormat::None, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  expect_text(ToolCallFormat::None, "");
}

// What a stream may send before the end: nothing from where a call may begin.
TEST(ToolCalls, WhereCallsMayBegin) {
  using K = ToolCallStart::Kind;
  const auto start = [](ToolCallFormat f, std::string_view text) { return server::find_tool_call_start(f, text); };
  EXPECT_EQ(start(ToolCallFormat::Hermes, "Sure.\n<tool").kind, K::Partial);
  EXPECT_EQ(start(ToolCallFormat::Hermes, "Sure.\n<tool").pos, 6u);
  EXPECT_EQ(start(ToolCallFormat::Hermes, "Sure.\n<tool_call>{").kind, K::Found);
  EXPECT_EQ(start(ToolCallFormat::Hermes, "a < b").kind, K::None);
  EXPECT_EQ(start(ToolCallFormat::Mistral, "[TOOL_").kind, K::Partial);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "  ").kind, K::Partial);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "{\"na").kind, K::Partial);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "{ \"name\" :").kind, K::Found);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "<|python").kind, K::Partial);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "{\"city\"").kind, K::None);
  EXPECT_EQ(start(ToolCallFormat::Llama3, "Hello {\"name\":").kind, K::None);
}

TEST(ToolCalls, Ids) {
  const std::string id = server::make_tool_call_id(ToolCallFormat::Hermes, 1);
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(id.size(), 29u);
  EXPECT_NE(id, server::make_tool_call_id(ToolCallFormat::Hermes, 2));
  const std::string mistral = server::make_tool_call_id(ToolCallFormat::Mistral, 1);
  EXPECT_EQ(mistral.size(), 9u);
  EXPECT_EQ(mistral.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
            std::string::npos);
}

bool grammar_takes(const runtime::ByteGrammar& g, std::string_view text) {
  runtime::GrammarState s(g);
  for (const char c : text)
    if (!s.feed(static_cast<unsigned char>(c))) return false;
  return s.complete();
}

// A forced call's grammar (tool_choice "required" or named): the family's own syntax around one call of an offered
// function, its arguments held to the parameters' schema, and what the reader then returns as that call. Formats
// whose markers are control tokens are not forced; a strict function whose schema cannot be held is an error, a
// loose one gets arguments held only to being an object.
TEST(ForcedToolCall, GrammarOfEachFormat) {
  const chat::jinja::Value tools = chat::tools_from_json(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
       "required": ["city", "days"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
       "properties": {"q": {"not": {"type": "null"}}}}}}])");
  const auto hermes = server::forced_call_grammar(ToolCallFormat::Hermes, tools, "");
  ASSERT_TRUE(hermes);
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                           "\"days\": 3}}\n</tool_call>";
  EXPECT_TRUE(grammar_takes(*hermes, call));
  const server::ParsedReply parsed = server::parse_tool_calls(ToolCallFormat::Hermes, call);
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].name, "get_weather");
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"city":"Paris","days":3})");
  // search's pattern cannot be held and it is not strict: any object.
  EXPECT_TRUE(grammar_takes(*hermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"zz\", "
                                     "\"n\": [1]}}\n</tool_call>"));
  for (const char* bad :
       {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",  // no markers
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"search\", \"arguments\": []}\n</tool_call>"})
    EXPECT_FALSE(grammar_takes(*hermes, bad)) << bad;
  const auto named = server::forced_call_grammar(ToolCallFormat::Hermes, tools, "search");
  ASSERT_TRUE(named);
  EXPECT_FALSE(grammar_takes(*named, call));
  // Several calls (parallel_tool_calls), as the family writes them: read back as two calls.
  const std::string two = call + "\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>";
  EXPECT_FALSE(grammar_takes(*hermes, two));
  const auto several = server::forced_call_grammar(ToolCallFormat::Hermes, tools, "", true);
  ASSERT_TRUE(several);
  EXPECT_TRUE(grammar_takes(*several, call));
  EXPECT_TRUE(grammar_takes(*several, two));
  EXPECT_EQ(server::parse_tool_calls(ToolCallFormat::Hermes, two).tool_calls.size(), 2u);

  const auto llama = server::forced_call_grammar(ToolCallFormat::Llama3, tools, "get_weather");
  ASSERT_TRUE(llama);
  const std::string llama_call = R"({"name": "get_weather", "parameters": {"city": "Oslo", "days": 1}})";
  EXPECT_TRUE(grammar_takes(*llama, llama_call));
  EXPECT_EQ(server::parse_tool_calls(ToolCallFormat::Llama3, llama_call).tool_calls.size(), 1u);
  const std::string llama_two = llama_call + "; " + llama_call;
  EXPECT_FALSE(grammar_takes(*llama, llama_two));
  const auto llama_several = server::forced_call_grammar(ToolCallFormat::Llama3, tools, "get_weather", true);
  EXPECT_TRUE(grammar_takes(*llama_several, llama_two));
  EXPECT_EQ(server::parse_tool_calls(ToolCallFormat::Llama3, llama_two).tool_calls.size(), 2u);
  EXPECT_FALSE(server::forced_call_grammar(ToolCallFormat::Mistral, tools, ""));
  EXPECT_FALSE(server::forced_call_grammar(ToolCallFormat::Granite, tools, ""));

  const chat::jinja::Value strict = chat::tools_from_json(R"([{"type": "function", "function": {"name": "s",
      "strict": true, "parameters": {"type": "object", "properties": {"q": {"not": {"type": "null"}}}}}}])");
  try {
    server::forced_call_grammar(ToolCallFormat::Hermes, strict, "");
    ADD_FAILURE() << "a strict function's unsupported schema was accepted";
  } catch (const runtime::JsonSchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("s's parameters"), std::string::npos) << e.what();
    EXPECT_EQ(e.where(), "/properties/q/not");
  }
}

// gpt-oss's forced call (harmony): after the "<|channel|>" the lead-in writes, a commentary header to one offered
// function with its arguments held to its parameters; the harmony split reads the whole reply, an analysis message
// first, back as that call. A name that is a prefix of another's stays apart from it.
TEST(ForcedToolCall, HarmonyGrammar) {
  const chat::jinja::Value tools = chat::tools_from_json(R"([
      {"type": "function", "function": {"name": "get", "parameters": {"type": "object",
       "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const auto any = server::harmony_call_grammar(tools, "");
  ASSERT_TRUE(any);
  const std::string call = R"(commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"})";
  EXPECT_TRUE(grammar_takes(*any, call));
  EXPECT_TRUE(grammar_takes(*any, R"(commentary to=functions.get <|constrain|>json<|message|>{"id": 4})"));
  for (const char* bad : {R"(commentary to=functions.get <|constrain|>json<|message|>{"city": "Oslo"})",
                          R"(commentary to=functions.other <|constrain|>json<|message|>{})",
                          R"(final<|message|>{"city": "Oslo"})",
                          R"(commentary to=functions.get_weather<|message|>{"city": "Oslo"})"})
    EXPECT_FALSE(grammar_takes(*any, bad)) << bad;
  const auto named = server::harmony_call_grammar(tools, "get");
  ASSERT_TRUE(named);
  EXPECT_FALSE(grammar_takes(*named, call));
  EXPECT_FALSE(server::harmony_call_grammar(tools, "missing"));

  chat::HarmonySplit split(true);
  split.push("<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>" + call);
  split.finish();
  const std::vector<chat::ReplyCall> calls = split.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city":"Oslo"})");
}

// A reply driven through a constraint: each part a control token or text spelled by its longest allowed pieces; every
// token must be allowed, a first control token alone at its step; when `whole`, only an end may follow. Returns the
// ids (empty after a failure).
using Part = std::variant<int32_t, std::string>;
std::vector<int32_t> drive(runtime::TokenConstraint& c, const tokenizer::Tokenizer& tok, const std::vector<Part>& parts,
                           bool whole = true) {
  std::vector<int32_t> ids;
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  const auto allowed = [&] {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.mask(logits);
    std::vector<int32_t> out;
    for (size_t id = 0; id < logits.size(); ++id)
      if (logits[id] == 0.0f) out.push_back(static_cast<int32_t>(id));
    return out;
  };
  for (const Part& part : parts) {
    if (const int32_t* marker = std::get_if<int32_t>(&part)) {
      const std::vector<int32_t> a = allowed();
      const bool alone = a == std::vector<int32_t>{*marker};
      if (ids.empty() ? !alone : std::find(a.begin(), a.end(), *marker) == a.end())
        return ADD_FAILURE() << "the marker " << *marker << (ids.empty() ? " not alone" : " refused"), ids.clear(), ids;
      c.accept(*marker);
      ids.push_back(*marker);
      continue;
    }
    const std::string& text = std::get<std::string>(part);
    for (size_t at = 0; at < text.size();) {
      int32_t best = -1;
      size_t len = 0;
      for (const int32_t id : allowed()) {
        const std::string p = tok.is_control(id) ? "" : tok.token_to_piece(id);
        if (!p.empty() && p.size() > len && text.compare(at, p.size(), p) == 0) best = id, len = p.size();
      }
      if (best < 0) return ADD_FAILURE() << "no allowed piece at " << text.substr(at), ids.clear(), ids;
      c.accept(best);
      ids.push_back(best);
      at += len;
    }
  }
  if (!whole) return ids;
  const std::vector<int32_t> next = allowed();
  EXPECT_TRUE(!next.empty() && std::all_of(next.begin(), next.end(), [&](int32_t id) { return tok.is_eog(id); }))
      << "the call is whole: only an end may follow";
  return ids;
}

// Mistral's and Granite's forced calls begin with markers that are control tokens, which no byte grammar can write:
// the lead-in allows the marker alone first, the grammar holds the text after it (a JSON list of calls; Mistral
// Small 3.2's NAME, then [ARGS] as a token, then the arguments), only an end may follow the whole call, and the
// tool reply reads the ids back as that call. Three rarely used tokens of stories260K's vocabulary stand for the
// markers.
TEST(ForcedToolCall, MarkersAsControlTokens) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  tokenizer::Vocab vocab = tokenizer::Vocab::from_gguf(gguf::File::open(path));
  const auto n = static_cast<int32_t>(vocab.tokens.size());
  const int32_t calls = n - 1, args = n - 2, granite = n - 3;
  for (const auto& [id, text] : {std::pair{calls, "[TOOL_CALLS]"}, {args, "[ARGS]"}, {granite, "<|tool_call|>"}}) {
    vocab.tokens[static_cast<size_t>(id)] = text;
    vocab.types[static_cast<size_t>(id)] = tokenizer::TokenType::CONTROL;
  }
  const auto tok = tokenizer::Tokenizer::from_vocab(std::move(vocab));
  const auto cv = std::make_shared<runtime::ConstraintVocabulary>(tok);
  const chat::jinja::Value tools = chat::tools_from_json(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get", "parameters": {"type": "object",
       "properties": {"id": {"type": "integer"}}, "required": ["id"]}}}])");
  const auto hold = [&](const std::optional<server::ForcedCall>& f) {
    EXPECT_TRUE(f && f->lead);
    return runtime::lead_in_grammar(cv, f->grammars, *f->lead);
  };
  const auto read_back = [&](ToolCallFormat format, const std::vector<int32_t>& ids) {
    server::ToolReply reply(tok, format, {});
    reply.push(ids);
    return reply.finish().calls;
  };
  const std::string list = R"([{"name": "get_weather", "arguments": {"city": "Oslo"}}])";
  const auto mistral = server::forced_call(ToolCallFormat::Mistral, chat::ReplyFormat::Plain, "[TOOL_CALLS] [",
                                           tok, tools, "", true);
  auto c = hold(mistral);
  std::vector<server::ToolCall> got = read_back(ToolCallFormat::Mistral, drive(*c, tok, {calls, " " + list}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "get_weather");
  EXPECT_EQ(got[0].arguments, R"({"city":"Oslo"})");

  c = hold(server::forced_call(ToolCallFormat::Granite, chat::ReplyFormat::Plain, "", tok, tools, "get", false));
  got = read_back(ToolCallFormat::Granite, drive(*c, tok, {granite, R"([{"name": "get", "arguments": {"id": 7}}])"}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].arguments, R"({"id":7})");

  // Small 3.2: "get" is a prefix of "get_weather"; [ARGS] may come only after a whole name.
  const auto v11 = server::forced_call(ToolCallFormat::Mistral, chat::ReplyFormat::Plain, "[TOOL_CALLS]x[ARGS]y",
                                       tok, tools, "", false);
  c = hold(v11);
  got = read_back(ToolCallFormat::Mistral, drive(*c, tok, {calls, "get", args, R"({"id": 3})"}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "get");
  c = hold(v11);
  got = read_back(ToolCallFormat::Mistral, drive(*c, tok, {calls, "get_weather", args, R"({"city": "Rome"})"}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "get_weather");
  c = hold(v11);
  drive(*c, tok, {calls, "get_w"}, false);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()), 0.0f);
  c->mask(logits);
  EXPECT_NE(logits[static_cast<size_t>(args)], 0.0f);  // not after half a name

  // A function named "" (tools may name one so): [ARGS] at once.
  const auto unnamed = server::forced_call(ToolCallFormat::Mistral, chat::ReplyFormat::Plain, "[ARGS]", tok,
                                           chat::tools_from_json(R"([{"type": "function", "function": {"name": ""}}])"),
                                           "", false);
  c = hold(unnamed);
  got = read_back(ToolCallFormat::Mistral, drive(*c, tok, {calls, args, "{}"}));
  EXPECT_EQ(got.size(), 0u);  // the reader wants a name: the reply stays text, as unheld

  // Many tools (agents pass hundreds): each name is a way of its own at first, and every one stays callable.
  std::string many = "[";
  for (int i = 0; i < 300; ++i)
    many += std::string(i ? ", " : "") + R"({"type": "function", "function": {"name": "tool_)" + std::to_string(i) +
            R"("}})";
  const auto wide = server::forced_call(ToolCallFormat::Mistral, chat::ReplyFormat::Plain, "[ARGS]", tok,
                                        chat::tools_from_json(many + "]"), "", false);
  for (const int i : {0, 7, 299}) {
    c = hold(wide);
    got = read_back(ToolCallFormat::Mistral, drive(*c, tok, {calls, "tool_" + std::to_string(i), args, "{}"}));
    ASSERT_EQ(got.size(), 1u) << i;
    EXPECT_EQ(got[0].name, "tool_" + std::to_string(i));
  }

  // A vocabulary without the markers as control tokens cannot be held: read as "auto".
  const auto plain_file = gguf::File::open(path);
  const auto plain = tokenizer::Tokenizer::from_gguf(plain_file);
  EXPECT_FALSE(server::forced_call(ToolCallFormat::Mistral, chat::ReplyFormat::Plain, "", plain, tools, "", true));
}

// A forced call among many tools (agents pass hundreds): every tool stays callable with its own arguments, though the
// recognizer keeps a bounded number of ways to read a text (the names are one trie, not one way each).
TEST(ToolChoice, EveryOneOfManyToolsIsCallable) {
  std::string json = "[";
  for (int i = 0; i < 400; ++i)
    json += std::string(i ? ", " : "") + R"({"type": "function", "function": {"name": "tool_)" + std::to_string(i) +
            R"(", "parameters": {"type": "object", "properties": {"n": {"const": )" + std::to_string(i) +
            R"(}}, "required": ["n"]}}})";
  const auto grammar = server::forced_call_grammar(ToolCallFormat::Hermes, chat::tools_from_json(json + "]"), "");
  ASSERT_TRUE(grammar);
  for (int i = 0; i < 400; ++i) {
    const std::string call = "<tool_call>\n{\"name\": \"tool_" + std::to_string(i) + "\", \"arguments\": {\"n\": ";
    EXPECT_TRUE(grammar_takes(*grammar, call + std::to_string(i) + "}}\n</tool_call>")) << i;
    EXPECT_FALSE(grammar_takes(*grammar, call + std::to_string(i + 1) + "}}\n</tool_call>")) << i;
  }
  EXPECT_FALSE(
      grammar_takes(*grammar, "<tool_call>\n{\"name\": \"tool_400\", \"arguments\": {\"n\": 400}}\n</tool_call>"));
}

}  // namespace
