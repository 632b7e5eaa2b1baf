// Chat templates of well-known models, written out as published in their tokenizer_config.json, rendered on the same
// conversation and compared with the prompt each model's documented format prescribes. The expected strings were
// worked out by hand from the template text (Jinja2 with trim_blocks and lstrip_blocks, as transformers renders).
#include <gtest/gtest.h>

#include <stdexcept>

#include "chat/chat_template.h"

namespace {

using chat::ChatFamily;
using chat::ChatMessage;
using chat::ChatRenderOptions;
using chat::ChatTemplate;
using chat::TemplateError;
using chat::jinja::Value;

const std::string kSystem = "You are a helpful assistant.";

// System prompt plus three turns; the assistant answer carries surrounding spaces so templates that trim differ
// visibly from those that do not.
std::vector<ChatMessage> conversation(bool with_system = true) {
  std::vector<ChatMessage> m;
  if (with_system) m.push_back({"system", kSystem, {}});
  m.push_back({"user", "Hello!", {}});
  m.push_back({"assistant", "  Hi there.  ", {}});
  m.push_back({"user", "What is 2+2?", {}});
  return m;
}

ChatRenderOptions options(std::string bos, std::string eos, bool add_generation_prompt = true) {
  ChatRenderOptions o;
  o.bos_token = std::move(bos);
  o.eos_token = std::move(eos);
  o.add_generation_prompt = add_generation_prompt;
  o.now = std::tm{};
  return o;
}

// ---- real templates ----

// Qwen/Qwen2.5-7B-Instruct.
const char* kQwen25 = R"TPL({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

// meta-llama/Meta-Llama-3-8B-Instruct.
const char* kLlama3 =
    R"TPL({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})TPL";

// meta-llama/Llama-2-7b-chat-hf.
const char* kLlama2 =
    R"TPL({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})TPL";

// mistralai/Mistral-7B-Instruct-v0.1 (the revision that accepts a leading system message).
const char* kMistralV01 = R"TPL({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
)TPL";

// mistralai/Mistral-7B-Instruct-v0.3.
const char* kMistralV03 = R"TPL({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
)TPL";

// google/gemma-2-9b-it.
const char* kGemma2 =
    R"TPL({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %})TPL";

// google/gemma-3-4b-it: merges the system prompt into the first user turn and accepts content parts.
const char* kGemma3 = R"TPL({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)TPL";

// microsoft/Phi-3-mini-4k-instruct.
const char* kPhi3 =
    R"TPL({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %})TPL";

// HuggingFaceH4/zephyr-7b-beta: block tags on their own lines, newlines inside the string literals.
const char* kZephyr = R"TPL({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})TPL";

const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

// ---- model templates, one test per family ----

TEST(ChatTemplateModels, Qwen25) {
  const ChatTemplate t = ChatTemplate::from_text(kQwen25);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::ChatML);
  EXPECT_EQ(t.render(conversation(), options("", "<|im_end|>")),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n  Hi there.  <|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // Without a system message Qwen supplies its own.
  EXPECT_EQ(t.render(conversation(false), options("", "<|im_end|>", false)),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n  Hi there.  <|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
}

TEST(ChatTemplateModels, Qwen25ToolsBranch) {
  const ChatTemplate t = ChatTemplate::parse(kQwen25);
  ChatRenderOptions o = options("", "<|im_end|>");
  o.tools = Value::array({Value::from_json(kWeatherTool)});
  std::vector<ChatMessage> m = {
      {"system", kSystem, {}},
      {"user", "What's the weather in Paris?", {}},
      {"assistant", "", {{"tool_calls", Value::from_json(R"([{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])")}}},
      {"tool", R"({"temperature": 22})", {}},
  };
  EXPECT_EQ(t.render(m, o),
            "<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to "
            "assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML "
            "tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"
            "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"temperature\": 22}\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateModels, Llama3) {
  const ChatTemplate t = ChatTemplate::from_text(kLlama3);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Llama3);
  EXPECT_EQ(t.render(conversation(), options("<|begin_of_text|>", "<|eot_id|>")),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateModels, Llama2) {
  const ChatTemplate t = ChatTemplate::from_text(kLlama2);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Llama2);
  // Llama 2 has no generation prompt: the prompt ends with [/INST].
  EXPECT_EQ(t.render(conversation(), options("<s>", "</s>")),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi there. </s>"
            "<s>[INST] What is 2+2? [/INST]");
  EXPECT_EQ(t.render(conversation(false), options("<s>", "</s>")),
            "<s>[INST] Hello! [/INST] Hi there. </s><s>[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplateModels, Llama2RejectsNonAlternatingRoles) {
  const ChatTemplate t = ChatTemplate::parse(kLlama2);
  std::vector<ChatMessage> m = {{"user", "a", {}}, {"user", "b", {}}};
  try {
    t.render(m, options("<s>", "</s>"));
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
    EXPECT_EQ(e.message(), "Conversation roles must alternate user/assistant/user/assistant/...");
    EXPECT_EQ(e.line(), 1);
  }
}

TEST(ChatTemplateModels, MistralV01) {
  const ChatTemplate t = ChatTemplate::from_text(kMistralV01);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::MistralV1);
  EXPECT_EQ(t.render(conversation(), options("<s>", "</s>")),
            "<s> [INST] You are a helpful assistant.\n\nHello! [/INST]   Hi there.  </s> [INST] What is 2+2? [/INST]");
}

TEST(ChatTemplateModels, MistralV03) {
  const ChatTemplate t = ChatTemplate::from_text(kMistralV03);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::MistralV3);
  // v0.3 puts the system prompt in front of the last user message and trims assistant answers.
  EXPECT_EQ(t.render(conversation(), options("<s>", "</s>")),
            "<s>[INST] Hello![/INST] Hi there.</s>[INST] You are a helpful assistant.\n\nWhat is 2+2?[/INST]");
}

TEST(ChatTemplateModels, MistralV03WithToolCalls) {
  const ChatTemplate t = ChatTemplate::parse(kMistralV03);
  ChatRenderOptions o = options("<s>", "</s>");
  o.tools = Value::array({Value::from_json(kWeatherTool)});
  std::vector<ChatMessage> m = {
      {"system", kSystem, {}},
      {"user", "What's the weather in Paris?", {}},
      {"assistant", Value::none(), {{"tool_calls", Value::from_json(R"([{"id": "abc123def", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])")}}},
      {"tool", R"({"temperature": 22})", {{"tool_call_id", "abc123def"}}},
      {"assistant", "It is 22 degrees.", {}},
      {"user", "Thanks!", {}},
  };
  EXPECT_EQ(t.render(m, o),
            "<s>[INST] What's the weather in Paris?[/INST]"
            R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]</s>)"
            R"([TOOL_RESULTS] {"content": {"temperature": 22}, "call_id": "abc123def"}[/TOOL_RESULTS])"
            " It is 22 degrees.</s>"
            R"([AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}][/AVAILABLE_TOOLS])"
            "[INST] You are a helpful assistant.\n\nThanks![/INST]");
  // A tool call id of the wrong length is refused by the template itself.
  m[2].extra[0].second = Value::from_json(R"([{"id": "short", "function": {"name": "f", "arguments": {}}}])");
  try {
    t.render(m, o);
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
    EXPECT_EQ(e.message(), "Tool call IDs should be alphanumeric strings with length 9!");
    EXPECT_EQ(e.line(), 62);
    EXPECT_EQ(e.column(), 21);
  }
}

TEST(ChatTemplateModels, Gemma2RaisesOnSystemRole) {
  const ChatTemplate t = ChatTemplate::from_text(kGemma2);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Gemma);
  try {
    t.render(conversation(), options("<bos>", "<eos>"));
    FAIL() << "expected raise_exception";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
    EXPECT_EQ(e.message(), "System role not supported");
  }
  EXPECT_EQ(t.render(conversation(false), options("<bos>", "<eos>")),
            "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi there.<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateModels, Gemma3MergesSystemIntoFirstUserTurn) {
  const ChatTemplate t = ChatTemplate::from_text(kGemma3);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Gemma);
  EXPECT_EQ(t.render(conversation(), options("<bos>", "<eos>")),
            "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n"
            "<start_of_turn>model\nHi there.<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n");
  // Content given as parts: text is trimmed, images become a marker.
  std::vector<ChatMessage> m = {
      {"user", Value::from_json(R"([{"type": "image"}, {"type": "text", "text": " Describe this. "}])"), {}}};
  EXPECT_EQ(t.render(m, options("<bos>", "<eos>")),
            "<bos><start_of_turn>user\n<start_of_image>Describe this.<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateModels, Phi3) {
  const ChatTemplate t = ChatTemplate::from_text(kPhi3);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Phi3);
  EXPECT_EQ(t.render(conversation(), options("<s>", "<|endoftext|>")),
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n"
            "<|assistant|>\n  Hi there.  <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n");
  // Without a generation prompt Phi-3 ends with the EOS token.
  EXPECT_EQ(t.render(conversation(), options("<s>", "<|endoftext|>", false)),
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n"
            "<|assistant|>\n  Hi there.  <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|endoftext|>");
}

TEST(ChatTemplateModels, Zephyr) {
  const ChatTemplate t = ChatTemplate::from_text(kZephyr);
  EXPECT_FALSE(t.is_fallback()) << t.warning();
  EXPECT_EQ(t.family(), ChatFamily::Zephyr);
  // trim_blocks eats the newline after each {% %} line; the newline after each {{ }} line stays.
  EXPECT_EQ(t.render(conversation(), options("<s>", "</s>")),
            "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n"
            "<|assistant|>\n  Hi there.  </s>\n<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n");
  EXPECT_EQ(t.render(conversation(), options("<s>", "</s>", false)),
            "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n"
            "<|assistant|>\n  Hi there.  </s>\n<|user|>\nWhat is 2+2?</s>\n");
}

// ---- built-ins: each renders its family's documented format ----

struct BuiltinCase {
  const char* name;
  ChatFamily family;
  const char* bos;
  const char* eos;
  const char* expected;
};

TEST(ChatTemplateBuiltins, RenderTheirFamilyFormat) {
  const BuiltinCase cases[] = {
      {"chatml", ChatFamily::ChatML, "", "<|im_end|>",
       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
       "<|im_start|>assistant\n  Hi there.  <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"llama2", ChatFamily::Llama2, "<s>", "</s>",
       "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi there. </s>"
       "<s>[INST] What is 2+2? [/INST]"},
      {"llama3", ChatFamily::Llama3, "<|begin_of_text|>", "<|eot_id|>",
       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"mistral-v1", ChatFamily::MistralV1, "<s>", "</s>",
       "<s> [INST] You are a helpful assistant.\n\nHello! [/INST]   Hi there.  </s> [INST] What is 2+2? [/INST]"},
      {"mistral-v3", ChatFamily::MistralV3, "<s>", "</s>",
       "<s>[INST] Hello![/INST] Hi there.</s>[INST] You are a helpful assistant.\n\nWhat is 2+2?[/INST]"},
      {"mistral-v7", ChatFamily::MistralV7, "<s>", "</s>",
       "<s>[SYSTEM_PROMPT] You are a helpful assistant.[/SYSTEM_PROMPT][INST] Hello![/INST]   Hi there.  </s>"
       "[INST] What is 2+2?[/INST]"},
      {"gemma", ChatFamily::Gemma, "<bos>", "<eos>",
       "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n"
       "<start_of_turn>model\nHi there.<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
       "<start_of_turn>model\n"},
      {"phi3", ChatFamily::Phi3, "<s>", "<|endoftext|>",
       "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n"
       "<|assistant|>\n  Hi there.  <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n"},
      {"zephyr", ChatFamily::Zephyr, "<s>", "</s>",
       "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n"
       "<|assistant|>\n  Hi there.  </s>\n<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n"},
  };
  ASSERT_EQ(std::size(cases), ChatTemplate::builtin_names().size());
  for (const BuiltinCase& c : cases) {
    SCOPED_TRACE(c.name);
    const ChatTemplate t = ChatTemplate::builtin(c.name);
    EXPECT_EQ(t.family(), c.family);
    EXPECT_EQ(chat::family_name(c.family), c.name);
    EXPECT_EQ(ChatTemplate::detect_family(t.source()), c.family);
    EXPECT_EQ(t.render(conversation(), options(c.bos, c.eos)), c.expected);
  }
}

TEST(ChatTemplateBuiltins, MatchTheModelTemplatesTheyStandFor) {
  // The built-in must give the model's own prompt, so --chat-template NAME is a faithful substitute.
  const std::pair<const char*, const char*> pairs[] = {
      {"llama3", kLlama3}, {"llama2", kLlama2}, {"mistral-v1", kMistralV01}, {"mistral-v3", kMistralV03},
      {"phi3", kPhi3},     {"zephyr", kZephyr}};
  for (const auto& [name, model] : pairs) {
    SCOPED_TRACE(name);
    for (bool with_system : {true, false}) {
      for (bool gen : {true, false}) {
        const auto o = options("<B>", "<E>", gen);
        EXPECT_EQ(ChatTemplate::builtin(name).render(conversation(with_system), o),
                  ChatTemplate::parse(model).render(conversation(with_system), o));
      }
    }
  }
  EXPECT_EQ(ChatTemplate::builtin("gemma").render(conversation(), options("<bos>", "<eos>")),
            ChatTemplate::parse(kGemma3).render(conversation(), options("<bos>", "<eos>")));
}

TEST(ChatTemplateBuiltins, UnknownNameListsTheValidOnes) {
  EXPECT_EQ(ChatTemplate::builtin("ChatML").family(), ChatFamily::ChatML);  // case-insensitive
  try {
    ChatTemplate::builtin("alpaca");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'alpaca'"), std::string::npos) << msg;
    for (const std::string& n : ChatTemplate::builtin_names()) EXPECT_NE(msg.find(n), std::string::npos) << n;
  }
}

// ---- detection and fallback ----

TEST(ChatTemplateDetection, Families) {
  EXPECT_EQ(ChatTemplate::detect_family(kQwen25), ChatFamily::ChatML);
  EXPECT_EQ(ChatTemplate::detect_family(kLlama3), ChatFamily::Llama3);
  EXPECT_EQ(ChatTemplate::detect_family(kLlama2), ChatFamily::Llama2);
  EXPECT_EQ(ChatTemplate::detect_family(kMistralV01), ChatFamily::MistralV1);
  EXPECT_EQ(ChatTemplate::detect_family(kMistralV03), ChatFamily::MistralV3);
  EXPECT_EQ(ChatTemplate::detect_family(kGemma2), ChatFamily::Gemma);
  EXPECT_EQ(ChatTemplate::detect_family(kPhi3), ChatFamily::Phi3);
  EXPECT_EQ(ChatTemplate::detect_family(kZephyr), ChatFamily::Zephyr);
  EXPECT_EQ(ChatTemplate::detect_family("{{ '[SYSTEM_PROMPT]' }}"), ChatFamily::MistralV7);
  EXPECT_EQ(ChatTemplate::detect_family("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatFamily::Unknown);
  // Phi-4 writes <|im_start|> but separates the role with <|im_sep|>: not ChatML.
  EXPECT_EQ(ChatTemplate::detect_family("{{'<|im_start|>user<|im_sep|>'}}"), ChatFamily::Unknown);
}

TEST(ChatTemplateDetection, UnknownTemplatesStillRenderWithTheirOwnText) {
  const ChatTemplate t = ChatTemplate::from_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}");
  EXPECT_FALSE(t.is_fallback());
  EXPECT_EQ(t.family(), ChatFamily::Unknown);
  EXPECT_EQ(t.render(conversation(false), options("", "")), "[user] Hello!\n[assistant]   Hi there.  \n[user] What is 2+2?\n");
}

TEST(ChatTemplateFallback, EmptyOrBrokenTemplatesBecomeChatMLWithAWarning) {
  const char* bad[] = {"", "   \n", "{% for m in messages %}{{ m.content }}", "{{ messages | no_such_filter }}",
                       "{{ messages[0].content.nope() }}", "{{ raise_exception('nope') }}"};
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    const ChatTemplate t = ChatTemplate::from_text(text);
    EXPECT_TRUE(t.is_fallback());
    EXPECT_EQ(t.family(), ChatFamily::ChatML);
    EXPECT_NE(t.warning().find("chatml"), std::string::npos) << t.warning();
    EXPECT_EQ(t.render(conversation(false), options("", "")),
              ChatTemplate::builtin("chatml").render(conversation(false), options("", "")));
  }
  EXPECT_NE(ChatTemplate::from_text("{% if %}").warning().find("line 1, column 7"), std::string::npos)
      << ChatTemplate::from_text("{% if %}").warning();
  EXPECT_THROW(ChatTemplate::parse("{% if %}"), TemplateError);
}

TEST(ChatTemplateRender, ExtraVariablesAndFixedClock) {
  const ChatTemplate t = ChatTemplate::parse(
      "{{ strftime_now('%d %b %Y') }}|{{ enable_thinking }}|{{ tools }}|{{ documents }}|{{ messages[0].name }}");
  ChatRenderOptions o = options("", "");
  o.now = std::tm{};
  o.now->tm_year = 124;
  o.now->tm_mon = 6;
  o.now->tm_mday = 26;
  o.variables = {{"enable_thinking", Value(false)}};
  std::vector<ChatMessage> m = {{"user", "hi", {{"name", "alice"}}}};
  EXPECT_EQ(t.render(m, o), "26 Jul 2024|False|None|None|alice");
}

TEST(ChatTemplateRender, ConvenienceOverload) {
  const ChatTemplate t = ChatTemplate::builtin("llama3");
  EXPECT_EQ(t.render({{"user", "x", {}}}, false, "<B>", "<E>"),
            "<B><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

// With reasoning_as_thinking, an assistant's reasoning sent back as reasoning_content reaches a template that reads
// `thinking` (gpt-oss's) under that name; a thinking of the message's own is kept; a template that reads
// reasoning_content itself sees no added field. Without it, the messages reach the template as given.
TEST(ChatTemplateRender, ReasoningContentIsThinkingForTemplatesThatReadIt) {
  const ChatTemplate reads_thinking = ChatTemplate::parse(
      "{% for m in messages %}{% if m.thinking %}[{{ m.thinking }}]{% endif %}{{ m.content }}|{% endfor %}");
  const std::vector<ChatMessage> m = {
      {"user", "Hi", {}},
      {"assistant", "Hello", {{"reasoning_content", Value("greet back")}}},
      {"assistant", "Again", {{"reasoning_content", Value("x")}, {"thinking", Value("own")}}}};
  ChatRenderOptions o = options("", "");
  EXPECT_EQ(reads_thinking.render(m, o), "Hi|Hello|[own]Again|");  // off: the messages as given
  o.reasoning_as_thinking = true;
  EXPECT_EQ(reads_thinking.render(m, o), "Hi|[greet back]Hello|[own]Again|");
  const ChatTemplate reads_both = ChatTemplate::parse(
      "{% for m in messages %}{{ m.thinking is defined }}{{ m.reasoning_content }}|{% endfor %}");
  EXPECT_EQ(reads_both.render({m[1]}, o), "Falsegreet back|");
}

}  // namespace
