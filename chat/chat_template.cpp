// Chat templates (see chat_template.h): the built-in family templates, family detection and the ChatML fallback.
// The built-ins are written from each family's published prompt format; every line uses {%- / {{- so the layout
// of the Jinja source never leaks into the prompt.
#include "chat/chat_template.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace chat {

namespace {

// <|im_start|>role\ncontent<|im_end|>\n per message (OpenAI ChatML; Qwen, Hermes, Yi, ...).
constexpr std::string_view kChatML = R"JINJA(
{%- for message in messages %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)JINJA";

// Llama 2 chat: <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] ...
constexpr std::string_view kLlama2 = R"JINJA(
{%- if messages and messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- set content = message['content'] %}
        {%- if loop.first and system_message is defined %}
            {%- set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + content %}
        {%- endif %}
        {{- bos_token + '[INST] ' + content | trim + ' [/INST]' }}
    {%- else %}
        {{- ' ' + message['content'] | trim + ' ' + eos_token }}
    {%- endif %}
{%- endfor %}
)JINJA";

// Llama 3: <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
constexpr std::string_view kLlama3 = R"JINJA(
{%- for message in messages %}
    {%- if loop.first %}
        {{- bos_token }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

// Mistral v1 (7B-Instruct v0.1/v0.2, Mixtral): <s> [INST] system\n\nuser [/INST] answer</s> [INST] ...
constexpr std::string_view kMistralV1 = R"JINJA(
{%- if messages and messages[0]['role'] == 'system' %}
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
        {%- set prefix = system_message + '\n\n' if loop.first and system_message is defined else '' %}
        {{- ' [INST] ' + prefix + message['content'] + ' [/INST]' }}
    {%- else %}
        {{- ' ' + message['content'] + eos_token }}
    {%- endif %}
{%- endfor %}
)JINJA";

// Mistral v3 (7B-Instruct v0.3): <s>[INST] user[/INST] answer</s>[INST] system\n\nlast user[/INST]
// The system prompt goes in front of the last user message, as Mistral's reference tokenizer does.
constexpr std::string_view kMistralV3 = R"JINJA(
{%- if messages and messages[0]['role'] == 'system' %}
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
        {%- set prefix = system_message + '\n\n' if loop.last and system_message is defined else '' %}
        {{- '[INST] ' + prefix + message['content'] + '[/INST]' }}
    {%- else %}
        {{- ' ' + message['content'] | trim + eos_token }}
    {%- endif %}
{%- endfor %}
)JINJA";

// Mistral v7 (Large 2411, Small 2501): [SYSTEM_PROMPT] system[/SYSTEM_PROMPT][INST] user[/INST] answer</s>
constexpr std::string_view kMistralV7 = R"JINJA(
{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'user' %}
        {{- '[INST] ' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}
)JINJA";

// Gemma: <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n... Gemma has no system turn; like
// Gemma 3's own template, the system prompt opens the first user turn.
constexpr std::string_view kGemma = R"JINJA(
{{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set first_user_prefix = '' %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}
    {%- set prefix = first_user_prefix if loop.first else '' %}
    {{- '<start_of_turn>' + role + '\n' + prefix + message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\n' }}
{%- endif %}
)JINJA";

// Phi-3: <|system|>\n...<|end|>\n<|user|>\n...<|end|>\n<|assistant|>\n
constexpr std::string_view kPhi3 = R"JINJA(
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- '<|system|>\n' + message['content'] + '<|end|>\n' }}
    {%- elif message['role'] == 'user' %}
        {{- '<|user|>\n' + message['content'] + '<|end|>\n' }}
    {%- elif message['role'] == 'assistant' %}
        {{- '<|assistant|>\n' + message['content'] + '<|end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\n' }}
{%- else %}
    {{- eos_token }}
{%- endif %}
)JINJA";

// Zephyr: <|system|>\n...</s>\n<|user|>\n...</s>\n<|assistant|>\n
constexpr std::string_view kZephyr = R"JINJA(
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- '<|system|>\n' + message['content'] + eos_token + '\n' }}
    {%- elif message['role'] == 'user' %}
        {{- '<|user|>\n' + message['content'] + eos_token + '\n' }}
    {%- elif message['role'] == 'assistant' %}
        {{- '<|assistant|>\n' + message['content'] + eos_token + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\n' }}
{%- endif %}
)JINJA";

struct Builtin {
  std::string_view name;
  ChatFamily family;
  std::string_view text;
};

constexpr Builtin kBuiltins[] = {
    {"chatml", ChatFamily::ChatML, kChatML},          {"llama2", ChatFamily::Llama2, kLlama2},
    {"llama3", ChatFamily::Llama3, kLlama3},          {"mistral-v1", ChatFamily::MistralV1, kMistralV1},
    {"mistral-v3", ChatFamily::MistralV3, kMistralV3}, {"mistral-v7", ChatFamily::MistralV7, kMistralV7},
    {"gemma", ChatFamily::Gemma, kGemma},             {"phi3", ChatFamily::Phi3, kPhi3},
    {"zephyr", ChatFamily::Zephyr, kZephyr},
};

bool has(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

std::tm local_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

std::string_view family_name(ChatFamily family) {
  for (const Builtin& b : kBuiltins)
    if (b.family == family) return b.name;
  return "unknown";
}

jinja::Value ChatMessage::to_value() const {
  std::vector<std::pair<std::string, jinja::Value>> fields = {{"role", jinja::Value(role)}};
  if (!content.is_undefined()) fields.emplace_back("content", content);
  fields.insert(fields.end(), extra.begin(), extra.end());
  if (!field_order.empty()) {
    // A stable partition by rank: named fields in the order given, the rest after them as they were.
    auto rank = [&](const std::string& name) {
      const auto it = std::find(field_order.begin(), field_order.end(), name);
      return static_cast<size_t>(it - field_order.begin());
    };
    std::stable_sort(fields.begin(), fields.end(),
                     [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  }
  return jinja::Value::object(std::move(fields));
}

// A short conversation every chat template must accept; failing it means failing on real input.
static std::vector<ChatMessage> probe_messages() {
  return {{"user", "Hello", {}}, {"assistant", "Hi", {}}, {"user", "Bye", {}}};
}

static ChatRenderOptions probe_options() {
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now = std::tm{};
  // Real templates render this three-message probe in a few thousand steps and a few hundred bytes; the small
  // budget keeps loading a hostile model file (which renders the probe) from costing seconds.
  options.limits.max_steps = 100'000;
  options.limits.max_output_bytes = size_t{1} << 20;
  return options;
}

ChatTemplate::ChatTemplate(std::string source, ChatFamily family)
    : source_(std::move(source)),
      template_(std::make_shared<const jinja::Template>(source_)),
      family_(family),
      reads_thinking_(source_.find(".thinking") != std::string::npos &&
                      source_.find("reasoning_content") == std::string::npos) {}

bool renders_text_parts(const ChatTemplate& tmpl) {
  // A user message of one text part: a template that takes parts prints its text. A marker no template writes.
  static constexpr std::string_view kMarker = "text-part-probe-7c1e";
  const jinja::Value part = jinja::Value::object({{"type", jinja::Value("text")}, {"text", jinja::Value(kMarker)}});
  try {
    const std::string out = tmpl.render({{"user", jinja::Value::array({part}), {}}}, probe_options());
    return out.find(kMarker) != std::string::npos && out.find("'text'") == std::string::npos &&
           out.find("\"text\"") == std::string::npos;
  } catch (const TemplateError&) {
    return false;
  }
}

jinja::Value join_text_parts(const jinja::Value& content) {
  if (!content.is_array()) return content;
  std::string text;
  for (const jinja::Value& part : content.items()) {
    const jinja::Value* type = part.is_object() ? part.object().find("type") : nullptr;
    const jinja::Value* t = part.is_object() ? part.object().find("text") : nullptr;
    if (!type || !type->is_string() || type->as_string() != "text" || !t || !t->is_string())
      throw std::invalid_argument("a content part of type '" +
                                  (type && type->is_string() ? type->as_string() : std::string("?")) +
                                  "': only text parts are taken (this model reads no images or audio)");
    if (!text.empty()) text += '\n';
    text += t->as_string();
  }
  return jinja::Value(text);
}

ChatTemplate ChatTemplate::parse(std::string_view text) {
  ChatTemplate t(std::string(text), detect_family(text));
  if (t.family_ == ChatFamily::Unknown) {
    // Some templates assemble their control tokens ('<|' + role + '|>'); a rendered probe shows them whole.
    try {
      t.family_ = detect_family(t.render(probe_messages(), probe_options()));
    } catch (const TemplateError&) {
    }
  }
  return t;
}

ChatTemplate ChatTemplate::from_text(std::string_view text) {
  std::string why;
  if (std::all_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); })) {
    why = "the model has no chat template";
  } else {
    try {
      ChatTemplate t = parse(text);
      t.render(probe_messages(), probe_options());
      return t;
    } catch (const TemplateError& e) {
      why = std::string("the model's chat template cannot be used (") + e.what() + ")";
    }
  }
  ChatTemplate fallback = builtin("chatml");
  fallback.warning_ = why + "; falling back to the chatml template";
  return fallback;
}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const Builtin& b : kBuiltins)
    if (b.name == lower) return ChatTemplate(std::string(b.text), b.family);
  std::string names;
  for (const std::string& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown chat template '" + std::string(name) + "'; built-in templates: " + names);
}

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  return names;
}

ChatFamily ChatTemplate::detect_family(std::string_view text) {
  // Ordered from the most specific marker to the most generic one.
  if (has(text, "<|im_start|>")) return has(text, "<|im_sep|>") ? ChatFamily::Unknown : ChatFamily::ChatML;
  if (has(text, "<|start_header_id|>")) return ChatFamily::Llama3;
  if (has(text, "<start_of_turn>")) return ChatFamily::Gemma;
  if (has(text, "[SYSTEM_PROMPT]")) return ChatFamily::MistralV7;
  if (has(text, "[INST]")) {
    if (has(text, "<<SYS>>")) return ChatFamily::Llama2;
    // v0.1 writes "content [/INST]" with a space; v0.3 writes "content[/INST]" and knows [AVAILABLE_TOOLS].
    if (has(text, "[AVAILABLE_TOOLS]") || !has(text, " [/INST]")) return ChatFamily::MistralV3;
    return ChatFamily::MistralV1;
  }
  if (has(text, "<|user|>")) return has(text, "<|end|>") ? ChatFamily::Phi3 : ChatFamily::Zephyr;
  return ChatFamily::Unknown;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const {
  std::vector<jinja::Value> list;
  list.reserve(messages.size());
  const auto field = [](const ChatMessage& m, std::string_view name) {
    return std::find_if(m.extra.begin(), m.extra.end(), [&](const auto& kv) { return kv.first == name; });
  };
  for (const ChatMessage& m : messages) {
    // ChatRenderOptions::reasoning_as_thinking, for a template that reads `thinking`.
    const auto reasoning = field(m, "reasoning_content");
    if (options.reasoning_as_thinking && reads_thinking_ && reasoning != m.extra.end() &&
        field(m, "thinking") == m.extra.end()) {
      ChatMessage named = m;
      named.extra.emplace_back("thinking", reasoning->second);
      list.push_back(named.to_value());
    } else {
      list.push_back(m.to_value());
    }
  }
  // The variables transformers' apply_chat_template passes: messages, tools, documents, add_generation_prompt,
  // and the special tokens.
  jinja::Variables vars = {
      {"messages", jinja::Value::array(std::move(list))},
      {"tools", options.tools},
      {"documents", jinja::Value::none()},
      {"add_generation_prompt", jinja::Value(options.add_generation_prompt)},
      {"bos_token", jinja::Value(options.bos_token)},
      {"eos_token", jinja::Value(options.eos_token)},
  };
  for (const auto& v : options.variables) vars.push_back(v);  // later bindings replace earlier ones
  jinja::RenderEnv env;
  env.limits = options.limits;
  env.now = options.now ? *options.now : local_now();
  return template_->render(vars, env);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 std::string_view bos_token, std::string_view eos_token) const {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = std::string(bos_token);
  options.eos_token = std::string(eos_token);
  return render(messages, options);
}

jinja::Variables template_variables_from(const jinja::Value& object) {
  if (!object.is_object() || object.is_namespace())
    throw std::invalid_argument("must be a JSON object such as {\"enable_thinking\": false}");
  jinja::Variables out;
  for (const auto& [key, value] : object.object().items) {
    std::string name = key.as_string();
    if (name == "messages" || name == "tools")
      throw std::invalid_argument("may not set '" + name + "': the conversation's own, from its " + name + " field");
    out.emplace_back(std::move(name), value);
  }
  return out;
}

}  // namespace chat
