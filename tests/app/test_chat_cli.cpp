// `llm-run chat`: the prompt each template family produces, token for token, on the synthetic models whose
// vocabularies carry the family's control tokens; KV-cache reuse across turns; dropping the oldest turns when the
// context fills; and the command as a process over piped stdin.
#include <gtest/gtest.h>

#include <algorithm>

#include "assets.h"
#include "model/model.h"
#include "process.h"
#include "runtime/chat_session.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Fixture {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<runtime::Session> session;
};

Fixture load(const std::string& path, int32_t n_ctx) {
  Fixture f;
  f.model = model::Model::load(path);
  f.tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(f.model->file()));
  runtime::SessionOptions o;
  o.device = "cpu";
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  f.session = runtime::make_session(f.model, o);
  return f;
}

runtime::ChatOptions greedy(int32_t n_predict) {
  runtime::ChatOptions o;
  o.generation.n_predict = n_predict;
  o.generation.sampling.temp = 0;
  return o;
}

// The prompt of the first turn must be the template's documented text, tokenized with special tokens recognised,
// BOS exactly once.
void expect_first_prompt(const std::string& model_rel, const std::string& tmpl, const std::string& system,
                         const std::string& expected_text) {
  auto path = testing_assets::path(model_rel);
  if (!path) GTEST_SKIP() << "test asset " << model_rel << " not found (set LLM_TEST_ASSETS)";
  Fixture f = load(*path, 256);
  runtime::ChatOptions o = greedy(3);
  o.system = system;
  runtime::ChatSession chat(*f.session, *f.tok, chat::ChatTemplate::builtin(tmpl), o);
  std::string streamed;
  const auto r = chat.turn("Hello", [&](std::string_view t) { streamed += t; }, [](const std::string&) {});
  std::vector<int32_t> expected = f.tok->encode(expected_text, /*add_special=*/false, /*parse_special=*/true);
  if (f.tok->add_bos() && (expected.empty() || expected.front() != f.tok->bos()))
    expected.insert(expected.begin(), f.tok->bos());
  EXPECT_EQ(r.generation.prompt, expected) << tmpl;
  EXPECT_EQ(r.reused_tokens, 0);
  if (f.tok->bos() >= 0) {
    EXPECT_LE(std::count(expected.begin(), expected.end(), f.tok->bos()), 1);
  }
  EXPECT_LE(r.generation.generated.size(), 3u);
  EXPECT_EQ(r.reply, streamed);
  ASSERT_EQ(chat.messages().size(), system.empty() ? 2u : 3u);
  EXPECT_EQ(chat.messages().back().role, "assistant");
}

TEST(ChatPrompt, ChatMLOnQwen2) {
  expect_first_prompt("models/synth-qwen2-Q4_K_M.gguf", "chatml", "Be brief.",
                      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                      "<|im_start|>assistant\n");
}

TEST(ChatPrompt, Llama3OnLlamaBpe) {
  expect_first_prompt("models/synth-llama-bpe-Q4_K_M.gguf", "llama3", "Be brief.",
                      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                      "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatPrompt, Llama2OnLlamaSpm) {
  expect_first_prompt("models/synth-llama-spm-Q4_K_M.gguf", "llama2", "Be brief.",
                      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHello [/INST]");
}

TEST(ChatPrompt, SpecialTokensAreSingleIds) {
  REQUIRE_ASSET(path, "models/synth-qwen2-Q4_K_M.gguf");
  Fixture f = load(path, 256);
  const auto im_start = f.tok->find_token("<|im_start|>");
  ASSERT_TRUE(im_start.has_value());
  runtime::ChatSession chat(*f.session, *f.tok, chat::ChatTemplate::builtin("chatml"), greedy(1));
  const auto r = chat.turn("Hi", [](std::string_view) {}, [](const std::string&) {});
  EXPECT_EQ(std::count(r.generation.prompt.begin(), r.generation.prompt.end(), *im_start), 2);
}

TEST(ChatSession, SecondTurnReusesTheCache) {
  REQUIRE_ASSET(path, "models/synth-qwen2-Q4_K_M.gguf");
  Fixture f = load(path, 512);
  runtime::ChatSession chat(*f.session, *f.tok, chat::ChatTemplate::builtin("chatml"), greedy(4));
  const auto first = chat.turn("Hello", [](std::string_view) {}, [](const std::string&) {});
  const auto second = chat.turn("And again", [](std::string_view) {}, [](const std::string&) {});
  // Everything up to the end of the first user message is shared.
  EXPECT_GE(second.reused_tokens, static_cast<int32_t>(first.generation.prompt.size()) - 1);
  // Same conversation from scratch: the reply to the second turn must be identical (the cache was reused correctly).
  Fixture g = load(path, 512);
  runtime::ChatSession fresh(*g.session, *g.tok, chat::ChatTemplate::builtin("chatml"), greedy(4));
  fresh.turn("Hello", [](std::string_view) {}, [](const std::string&) {});
  const auto again = fresh.turn("And again", [](std::string_view) {}, [](const std::string&) {});
  EXPECT_EQ(second.generation.generated, again.generation.generated);
}

// A template whose generation prompt opens a <think> block (DeepSeek-R1's way): the reply (stories260K never closes
// the block) is reasoning, streamed to the reasoning sink, not to the content's; the conversation keeps it as
// reasoning_content beside an empty content, and the next turn renders and runs. Without a reasoning sink it is
// not shown at all.
TEST(ChatSession, ReasoningOfAThinkingTemplateStreamsApart) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const chat::ChatTemplate think = chat::ChatTemplate::parse(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}");
  Fixture f = load(path, 512);
  runtime::ChatSession chat(*f.session, *f.tok, think, greedy(8));
  std::string content, reasoning;
  const auto r = chat.turn(
      "Hello", [&](std::string_view t) { content += t; }, [](const std::string&) {},
      [&](std::string_view t) { reasoning += t; });
  EXPECT_EQ(content, "");
  EXPECT_EQ(r.reply, "");
  EXPECT_FALSE(r.reasoning.empty());
  EXPECT_EQ(reasoning, r.reasoning);
  const chat::ChatMessage& kept = chat.messages().back();
  ASSERT_EQ(kept.extra.size(), 1u);
  EXPECT_EQ(kept.extra[0].first, "reasoning_content");
  EXPECT_EQ(kept.extra[0].second.as_string(), r.reasoning);
  std::string quiet;
  const auto second = chat.turn("Again", [&](std::string_view t) { quiet += t; }, [](const std::string&) {});
  EXPECT_EQ(quiet, "");
  EXPECT_FALSE(second.reasoning.empty());
  // A plain template keeps every reply whole as content.
  Fixture g = load(path, 512);
  runtime::ChatSession plain(*g.session, *g.tok, chat::ChatTemplate::builtin("chatml"), greedy(8));
  std::string all;
  const auto p = plain.turn("Hello", [&](std::string_view t) { all += t; }, [](const std::string&) {});
  EXPECT_EQ(p.reply, all);
  EXPECT_TRUE(p.reasoning.empty());
}

// --chat-template-kwargs reach the template on every turn (ChatOptions::template_variables).
TEST(ChatSession, TemplateVariablesReachEveryTurn) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  Fixture f = load(path, 512);
  runtime::ChatOptions o = greedy(2);
  o.template_variables = {{"mood", chat::jinja::Value("calm")}};
  runtime::ChatSession chat(*f.session, *f.tok,
                            chat::ChatTemplate::parse("[{{ mood }}]{% for m in messages %}{{ m.content }}|{% endfor %}"),
                            o);
  const auto first = chat.turn("Hi", [](std::string_view) {}, [](const std::string&) {});
  EXPECT_EQ(first.generation.prompt, runtime::chat_prompt_ids(*f.tok, "[calm]Hi|"));
  chat.turn("Again", [](std::string_view) {}, [](const std::string&) {});
  const std::string reply = chat.messages()[1].content.as_string();
  EXPECT_EQ(chat.prompt_tokens(), runtime::chat_prompt_ids(*f.tok, "[calm]Hi|" + reply + "|Again|" +
                                                                       chat.messages()[3].content.as_string() + "|"));
}

TEST(ChatSession, FullContextDropsOldestTurnsKeepingSystem) {
  REQUIRE_ASSET(path, "models/synth-qwen2-Q4_K_M.gguf");
  Fixture f = load(path, 96);
  runtime::ChatOptions o = greedy(6);
  o.system = "S";
  runtime::ChatSession chat(*f.session, *f.tok, chat::ChatTemplate::builtin("chatml"), o);
  std::vector<std::string> notes;
  int dropped = 0;
  for (int i = 0; i < 8; ++i) {
    const auto r = chat.turn("message number " + std::to_string(i) + " with a few more words in it",
                             [](std::string_view) {}, [&](const std::string& n) { notes.push_back(n); });
    dropped += r.dropped_turns;
  }
  EXPECT_GT(dropped, 0);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.front().find("dropped"), std::string::npos);
  EXPECT_EQ(chat.messages().front().role, "system");
  EXPECT_LE(static_cast<int32_t>(chat.prompt_tokens().size()), 96);
}

TEST(ChatSession, MessageLargerThanContextIsAnError) {
  REQUIRE_ASSET(path, "models/synth-qwen2-Q4_K_M.gguf");
  Fixture f = load(path, 32);
  runtime::ChatSession chat(*f.session, *f.tok, chat::ChatTemplate::builtin("chatml"), greedy(2));
  std::string big;
  for (int i = 0; i < 50; ++i) big += "word ";
  EXPECT_THROW(chat.turn(big, [](std::string_view) {}, [](const std::string&) {}), runtime::SessionError);
  EXPECT_TRUE(chat.messages().empty()) << "a refused message must not stay in the conversation";
}

// ---- the command as a process ----

testing_process::Result run_chat(const std::string& args, const std::string& stdin_text) {
  return testing_process::run_llm_run("chat " + args, stdin_text);
}

TEST(ChatCli, PipedTurnsWithEachTemplate) {
  REQUIRE_ASSET(bpe, "models/synth-llama-bpe-Q4_K_M.gguf");
  REQUIRE_ASSET(spm, "models/synth-llama-spm-Q4_K_M.gguf");
  REQUIRE_ASSET(qwen, "models/synth-qwen2-Q4_K_M.gguf");
  const std::pair<std::string, std::string> cases[] = {{qwen, "chatml"}, {bpe, "llama3"}, {spm, "llama2"}};
  for (const auto& [model, tmpl] : cases) {
    const testing_process::Result r = run_chat("-m " + model + " --device cpu --temp 0 -n 4 -v --chat-template " + tmpl +
                               " --system 'Be brief.'",
                           "Hello\n/reset\nWhat is two plus two?\n/exit\nnever read\n");
    EXPECT_EQ(r.code, 0) << tmpl << "\n" << r.err;
    EXPECT_NE(r.err.find("chat template: " + tmpl), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("conversation reset"), std::string::npos) << r.err;
    // Two turns ran: two turn lines on stderr; /exit stopped reading before the last line.
    size_t turns = 0;
    for (size_t p = r.err.find("llm-run: turn:"); p != std::string::npos; p = r.err.find("llm-run: turn:", p + 1))
      ++turns;
    EXPECT_EQ(turns, 2u) << r.err;
  }
}

TEST(ChatCli, BadTemplateNameIsAUsageError) {
  REQUIRE_ASSET(qwen, "models/synth-qwen2-Q4_K_M.gguf");
  const testing_process::Result r = run_chat("-m " + qwen + " --device cpu --chat-template nosuch", "Hi\n");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("llm-run: error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chatml"), std::string::npos) << "the message should list the built-in names: " << r.err;
}

TEST(ChatCli, MissingModelIsAUsageError) {
  const testing_process::Result r = run_chat("-m /nonexistent/model.gguf --device cpu", "Hi\n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

}  // namespace
