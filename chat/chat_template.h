// Chat templates: turning a conversation into the prompt text a model was trained on. Uses the model's own GGUF
// tokenizer.chat_template (a Jinja template, rendered exactly as Hugging Face transformers renders it) or a built-in
// template chosen by name (--chat-template NAME); recognises the common families, and falls back to ChatML with a
// warning the caller can show when a model's template is missing or unusable.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_value.h"

namespace chat {

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, jinja::Value content, std::vector<std::pair<std::string, jinja::Value>> extra = {})
      : role(std::move(role)), content(std::move(content)), extra(std::move(extra)) {}

  std::string role;  // "system", "user", "assistant", "tool", ...
  // Usually a string; a list of parts ([{"type": "text", "text": ...}]) for templates that accept them, or none.
  // Undefined (jinja::Value()) when the message has no content at all: the template then sees a dict without a
  // 'content' key, as transformers passes an assistant tool-call message that omits it.
  jinja::Value content = jinja::Value("");
  // Further fields the template may read, in order: tool_calls, tool_call_id, name, reasoning_content, ...
  std::vector<std::pair<std::string, jinja::Value>> extra;
  // The order of the fields in the dict the template sees, by name (role and content included), for templates that
  // iterate over a message or print it; fields it does not name come last. Empty: role, content, then
  // extra. messages_from_json (chat/messages_json.h) fills it with the order the JSON gave.
  std::vector<std::string> field_order;

  // The dict the template sees as messages[i].
  jinja::Value to_value() const;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the header that opens the assistant's reply
  std::string bos_token;
  std::string eos_token;
  // Tool schemas (a list); none when no tools are offered, as transformers passes tools=None.
  jinja::Value tools = jinja::Value::none();
  // Further template variables (enable_thinking, date_string, ...); they may override the ones above.
  jinja::Variables variables;
  // An assistant's reasoning_content (the field clients send reasoning back in) also reaches a template that reads
  // `thinking` instead (gpt-oss's) under that name, unless the message has a thinking of its own. Off, the
  // messages reach the template exactly as given (as transformers passes them).
  bool reasoning_as_thinking = false;
  // What strftime_now() formats; the current local time when unset. Tests pin it for reproducible prompts.
  std::optional<std::tm> now;
  jinja::Limits limits;
};

enum class ChatFamily { Unknown, ChatML, Llama2, Llama3, MistralV1, MistralV3, MistralV7, Gemma, Phi3, Zephyr };

// The built-in name of a family ("chatml", "llama3", "mistral-v3", ...); "unknown" for Unknown.
std::string_view family_name(ChatFamily family);

class ChatTemplate {
 public:
  // The model's template. Never throws: empty text, or a template that fails to parse or to render a short probe
  // conversation (user/assistant/user), gives the ChatML built-in and warning() says why.
  static ChatTemplate from_text(std::string_view text);
  // Strict: throws TemplateError(Syntax) when the text does not parse.
  static ChatTemplate parse(std::string_view text);
  // A built-in by name (one of builtin_names(), case-insensitive); throws std::invalid_argument listing them.
  static ChatTemplate builtin(std::string_view name);
  static std::vector<std::string> builtin_names();
  // The family a template text belongs to, judged from the control tokens it writes; Unknown when none matches.
  static ChatFamily detect_family(std::string_view text);

  // Throws TemplateError: Raised when the template refuses the conversation (raise_exception), Render for errors
  // in the template, Limit for runaway templates.
  std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const;
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view bos_token,
                     std::string_view eos_token) const;

  ChatFamily family() const { return family_; }
  const std::string& source() const { return source_; }
  const std::string& warning() const { return warning_; }  // empty unless from_text fell back to ChatML
  bool is_fallback() const { return !warning_.empty(); }

 private:
  ChatTemplate(std::string source, ChatFamily family);

  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
  ChatFamily family_ = ChatFamily::Unknown;
  std::string warning_;
  // The template reads an assistant's reasoning as `thinking` (gpt-oss's), not as reasoning_content, the field
  // clients send it back in (ChatRenderOptions::reasoning_as_thinking).
  bool reads_thinking_ = false;
};

// Whether the template renders a message whose content is a list of text parts ([{"type": "text", "text": ...}]),
// judged by rendering one and finding its text in the output (a render: call it once, where the answer is needed).
// Templates written for string content alone fail on a list or print it as a list; the server then joins the parts
// into one string (join_text_parts).
bool renders_text_parts(const ChatTemplate& tmpl);

// A message content's text parts joined into one string, a newline between parts once some text is there (as the
// reference runtime's server joins them for such templates); a content that is not a list is returned as it is.
// The parts must all be text parts (messages_from_json checked their shapes); throws std::invalid_argument
// naming the first other part's type.
jinja::Value join_text_parts(const jinja::Value& content);

// Template variables from a JSON object of them (the server's chat_template_kwargs, --chat-template-kwargs), in
// its order. Throws std::invalid_argument saying why for anything but an object, or for one that sets the
// conversation's own `messages` or `tools`, which come from their own fields.
jinja::Variables template_variables_from(const jinja::Value& object);

}  // namespace chat
