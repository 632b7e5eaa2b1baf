// A JSON schema compiled to a byte grammar (see json_schema_grammar.h). One rule per schema (and per $ref target, so
// recursive schemas become recursive rules); shared rules for whitespace, strings, numbers and values of any type.
#include "runtime/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"
#include "chat/jinja_text.h"
#include "chat/json.h"
#include "runtime/code_point_sets.h"
#include "runtime/json_prefix.h"
#include "runtime/json_schema_formats.h"
#include "runtime/json_schema_numbers.h"
#include "runtime/json_schema_pattern.h"

namespace runtime {

JsonSchemaError::JsonSchemaError(const std::string& where, const std::string& message)
    : std::invalid_argument((where.empty() ? std::string("the schema") : "the schema at " + where) + ": " + message),
      where_(where) {}

namespace {

using chat::jinja::Value;
using ObjectData = chat::jinja::ObjectData;
using Rule = ByteGrammar::Rule;
using Symbol = ByteGrammar::Symbol;
using Seq = std::vector<Symbol>;

// Keywords that say nothing about which values are valid.
constexpr std::string_view kAnnotations[] = {
    "title", "description", "default", "examples", "format", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding", "$anchor"};
// Keywords that constrain values and that this reader does not hold a reply to: refused, not ignored.
constexpr std::string_view kUnsupported[] = {
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
    "dependentSchemas", "dependencies", "multipleOf", "not", "if", "then", "else", "contains", "minContains",
    "maxContains", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"};
// The keywords of each value type, which decide the type when `type` is absent.
constexpr std::string_view kObjectKeywords[] = {"properties", "required", "additionalProperties"};
constexpr std::string_view kArrayKeywords[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems"};
constexpr std::string_view kStringKeywords[] = {"minLength", "maxLength", "pattern"};
constexpr std::string_view kNumberKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
// Keywords that each stand for the whole schema.
constexpr std::string_view kCombinators[] = {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"};

template <size_t N>
bool among(const std::string_view (&list)[N], std::string_view key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

std::string child(const std::string& where, std::string_view key) {
  std::string escaped;  // a JSON pointer token: ~ and / escaped
  for (const char c : key) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return where + "/" + escaped;
}

// `v` as compact JSON text ({"a":1}): a const or enum value, which the reply must spell this way.
std::string compact(const Value& v) {
  chat::JsonOptions o;
  o.item_separator = ",";
  o.key_separator = ":";
  return chat::to_json(v, o);
}

const char* json_type(const Value& v) {
  if (v.is_none()) return "null";
  if (v.is_bool()) return "boolean";
  if (v.is_int()) return "integer";
  if (v.is_float()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

class SchemaCompiler {
 public:
  // One document: the schema's value, whitespace before it.
  std::shared_ptr<const ByteGrammar> schema(const Value& root) {
    return finish([&] {
      const Rule value = document(root);
      const Rule top = g_->add_rule();
      g_->add_alternative(top, {ws(), ByteGrammar::rule(value)});
      return top;
    });
  }

  // Calls as json_call_grammar describes them.
  std::shared_ptr<const ByteGrammar> calls(const std::vector<CallSchema>& choices, const CallSyntax& syntax) {
    return finish([&] {
      // {"name": then the names as one trie, each followed by its arguments.
      std::vector<ByteGrammar::LiteralAlternative> by_name;
      for (const CallSchema& c : choices) {
        const Rule arguments = arguments_of(c);
        Seq rest{ws(), g_->byte(','), ws()};
        g_->append_literal(rest, chat::json_quote(syntax.arguments_key));
        push_member_tail(rest, arguments);
        rest.push_back(g_->byte('}'));
        by_name.push_back({chat::json_quote(c.name), std::move(rest)});
      }
      Seq opening{g_->byte('{'), ws()};
      g_->append_literal(opening, chat::json_quote(syntax.name_key));
      opening.insert(opening.end(), {ws(), g_->byte(':'), ws(), ByteGrammar::rule(g_->literal_choice(by_name))});
      const Rule call = g_->add_rule();
      g_->add_alternative(call, opening);
      Seq one;  // before, a call, after
      g_->append_literal(one, syntax.before);
      one.push_back(ByteGrammar::rule(call));
      g_->append_literal(one, syntax.after);
      Seq all;  // open, the calls, close
      g_->append_literal(all, syntax.open);
      all.insert(all.end(), one.begin(), one.end());
      if (syntax.several) {
        const Rule next = g_->add_rule();  // between, before, a call, after: any number of them after the first
        Seq seq;
        g_->append_literal(seq, syntax.between);
        seq.insert(seq.end(), one.begin(), one.end());
        g_->add_alternative(next, seq);
        all.push_back(ByteGrammar::rule(g_->repeat(next, 0, ByteGrammar::kUnbounded)));
      }
      g_->append_literal(all, syntax.close);
      const Rule top = g_->add_rule();
      g_->add_alternative(top, all);
      return top;
    });
  }

  // A call's arguments alone (arguments_grammar).
  std::shared_ptr<const ByteGrammar> arguments(const CallSchema& call) {
    return finish([&] { return arguments_of(call); });
  }

  // Calls as header_call_grammar describes them.
  std::shared_ptr<const ByteGrammar> header_calls(const std::vector<CallSchema>& choices, std::string_view before,
                                                  std::string_view after) {
    return finish([&] {
      std::vector<ByteGrammar::LiteralAlternative> by_name;
      for (const CallSchema& c : choices) {
        Seq rest;
        g_->append_literal(rest, after);
        rest.push_back(ByteGrammar::rule(arguments_of(c)));
        by_name.push_back({c.name, std::move(rest)});
      }
      Seq call;
      g_->append_literal(call, before);
      call.push_back(ByteGrammar::rule(g_->literal_choice(by_name)));
      const Rule top = g_->add_rule();
      g_->add_alternative(top, call);
      return top;
    });
  }

 private:
  // A call's arguments: its parameters' schema, a document of its own; one that cannot be held, only an object,
  // unless the function is strict.
  Rule arguments_of(const CallSchema& c) {
    try {
      return c.parameters ? document(*c.parameters) : object_any();
    } catch (const JsonSchemaError& e) {
      if (c.strict) throw JsonSchemaError(e.where(), c.name + "'s parameters: " + e.what());
      return object_any();  // a call of this function, with arguments held only to being an object
    }
  }

  template <class Build>
  std::shared_ptr<const ByteGrammar> finish(Build&& build) {
    try {
      g_->set_root(build());
    } catch (const std::length_error&) {
      throw JsonSchemaError("", "the schema is too large to hold to");
    }
    if (!g_->admits_text() || GrammarState(*g_).accepts_nothing())
      throw JsonSchemaError("", "no finite JSON text satisfies it (its references go round without end)");
    return std::move(g_);
  }

  // A schema that is its own document: its $refs point into it.
  Rule document(const Value& root) {
    const Value* outer = root_;
    root_ = &root;
    const Rule r = compile(root, "");
    root_ = outer;
    return r;
  }

  Rule object_any() {
    if (!object_any_) {
      const Value any_object = Value::object({{"type", Value("object")}});
      object_any_ = document(any_object);
    }
    return *object_any_;
  }

  Rule compile(const Value& s, const std::string& where) {
    if (++depth_ > kMaxDepth) throw JsonSchemaError(where, "schemas nest (or $refs chain) too deep");
    const Rule r = compile_schema(s, where);
    --depth_;
    if (g_->n_symbols() > kMaxSchemaSymbols) throw JsonSchemaError(where, "the schema is too large to hold to");
    return r;
  }

  Rule compile_schema(const Value& s, const std::string& where) {
    if (s.is_bool()) {
      if (s.as_bool()) return any_value();
      throw JsonSchemaError(where, "false admits no value");
    }
    if (!s.is_object() || s.is_namespace()) throw JsonSchemaError(where, "a schema is an object or a boolean");
    const auto& o = s.object();
    const Value* combinator = nullptr;
    std::string combinator_key;
    std::vector<std::string> constraints;  // value keywords beside the combinator, if any
    for (const auto& [k, v] : o.items) {
      if (!k.is_string()) continue;
      const std::string& key = k.as_string();
      if (among(kUnsupported, key) || (key == "uniqueItems" && !(v.is_bool() && !v.as_bool())))
        throw JsonSchemaError(child(where, key), "\"" + key + "\" is not supported");
      if (among(kCombinators, key)) {
        if (combinator)
          throw JsonSchemaError(where, "\"" + combinator_key + "\" and \"" + key + "\" together are not supported");
        combinator = &v, combinator_key = key;
      } else if (among(kObjectKeywords, key) || among(kArrayKeywords, key) || among(kStringKeywords, key) ||
                 among(kNumberKeywords, key) || key == "type") {
        constraints.push_back(key);
      }
    }
    if (!combinator) return typed(o, where);
    const std::string at = child(where, combinator_key);
    const bool typed_values = combinator_key == "const" || combinator_key == "enum";
    for (const std::string& key : constraints)
      if (!(typed_values && key == "type"))
        throw JsonSchemaError(where, "\"" + key + "\" beside \"" + combinator_key +
                                         "\" is not supported (write it into each alternative)");
    if (combinator_key == "$ref") {
      if (!combinator->is_string()) throw JsonSchemaError(at, "$ref must be a string");
      return reference(combinator->as_string(), at);
    }
    if (typed_values) {
      const std::set<std::string> types = type_names(o, where);
      std::vector<Value> values;
      if (combinator_key == "const") {
        values.push_back(*combinator);
      } else {
        if (!combinator->is_array()) throw JsonSchemaError(at, "enum must be an array");
        values = combinator->items();
      }
      std::vector<ByteGrammar::LiteralAlternative> kept;
      for (const Value& v : values)
        if (types.empty() || types.count(json_type(v)) || (v.is_int() && types.count("number")))
          kept.push_back({compact(v), {}});
      if (kept.empty()) throw JsonSchemaError(at, "no value is allowed (of the type the schema names)");
      return g_->literal_choice(kept);
    }
    if (!combinator->is_array() || combinator->items().empty())
      throw JsonSchemaError(at, combinator_key + " must be a non-empty array of schemas");
    const std::vector<Value>& alternatives = combinator->items();
    if (combinator_key == "allOf") {
      if (alternatives.size() != 1)
        throw JsonSchemaError(at, "allOf of more than one schema is not supported");
      return compile(alternatives[0], child(at, "0"));
    }
    const Rule r = g_->add_rule();
    for (size_t i = 0; i < alternatives.size(); ++i)
      g_->add_alternative(r, {ByteGrammar::rule(compile(alternatives[i], child(at, std::to_string(i))))});
    return r;
  }

  // `type` as a set of names; empty when absent.
  std::set<std::string> type_names(const ObjectData& o, const std::string& where) {
    static constexpr std::string_view kTypes[] = {"object", "array", "string", "number", "integer", "boolean",
                                                  "null"};
    std::set<std::string> names;
    const Value* t = o.find("type");
    if (!t) return names;
    const std::string at = child(where, "type");
    std::vector<Value> list = t->is_array() ? t->items() : std::vector<Value>{*t};
    if (list.empty()) throw JsonSchemaError(at, "type must name at least one type");
    for (const Value& v : list) {
      if (!v.is_string() || !among(kTypes, v.as_string()))
        throw JsonSchemaError(at, "type must be one of object, array, string, number, integer, boolean, null "
                                  "(or a list of them)");
      names.insert(v.as_string());
    }
    return names;
  }

  Rule typed(const ObjectData& o, const std::string& where) {
    std::set<std::string> types = type_names(o, where);
    if (types.empty()) {
      // No type: the one(s) whose keywords the schema uses; a schema with none admits any value.
      const auto uses = [&](const auto& keywords) {
        return std::any_of(std::begin(keywords), std::end(keywords),
                           [&](std::string_view k) { return o.find(k) != nullptr; });
      };
      if (uses(kObjectKeywords)) types.insert("object");
      if (uses(kArrayKeywords)) types.insert("array");
      if (uses(kStringKeywords)) types.insert("string");
      if (uses(kNumberKeywords)) types.insert("number");
      if (const Value* format = o.find("format"); format && format->is_string() &&
                                                  among(kExactStringFormats, format->as_string()))
        types.insert("string");
      if (types.empty()) return any_value();
    }
    if (types.count("integer") && types.count("number")) types.erase("integer");  // every integer is a number
    std::vector<Rule> rules;
    for (const std::string& t : types) {
      if (t == "object") rules.push_back(object(o, where));
      if (t == "array") rules.push_back(array(o, where));
      if (t == "string") rules.push_back(string(o, where));
      if (t == "number") rules.push_back(number(o, where));
      if (t == "integer") rules.push_back(integer(o, where));
      if (t == "boolean") rules.push_back(literals({"true", "false"}));
      if (t == "null") rules.push_back(literals({"null"}));
    }
    if (rules.size() == 1) return rules[0];
    const Rule r = g_->add_rule();
    for (const Rule x : rules) g_->add_alternative(r, {ByteGrammar::rule(x)});
    return r;
  }

  // A $ref: a JSON pointer into this document. Each target becomes one rule, made before its schema is read, so
  // a schema that refers to itself calls its own rule.
  Rule reference(const std::string& ref, const std::string& where) {
    if (const auto it = refs_.find({root_, ref}); it != refs_.end()) return it->second;
    if (ref.empty() || ref[0] != '#')
      throw JsonSchemaError(where, "only references into the same schema (\"#/...\") are supported");
    const Value* target = root_;
    std::string_view path = std::string_view(ref).substr(1);
    while (!path.empty()) {
      if (path[0] != '/') throw JsonSchemaError(where, "\"" + ref + "\" is not a JSON pointer");
      path.remove_prefix(1);
      const size_t end = std::min(path.find('/'), path.size());
      std::string token;
      for (size_t i = 0; i < end; ++i) {
        if (path[i] == '~' && i + 1 < end && (path[i + 1] == '0' || path[i + 1] == '1')) {
          token += path[++i] == '0' ? '~' : '/';
        } else {
          token += path[i];
        }
      }
      path.remove_prefix(end);
      const Value* next = nullptr;
      if (target->is_object() && !target->is_namespace()) {
        next = target->object().find(token);
      } else if (target->is_array() && !token.empty() &&
                 std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                 token.size() < 10 && std::stoul(token) < target->items().size()) {
        next = &target->items()[std::stoul(token)];
      }
      if (!next) throw JsonSchemaError(where, "\"" + ref + "\" names nothing in the schema");
      target = next;
    }
    const Rule r = g_->add_rule();
    refs_.emplace(std::make_pair(root_, ref), r);
    g_->add_alternative(r, {ByteGrammar::rule(compile(*target, where))});
    return r;
  }

  // properties in order, each optional one skippable; then additional properties where allowed.
  //   first_i: properties i.. with none written yet; rest_i: the same after at least one (so each starts with ',').
  Rule object(const ObjectData& o, const std::string& where) {
    struct Property {
      std::string name;
      Rule value;
      bool required;
    };
    std::vector<Property> props;
    std::set<std::string> required;
    if (const Value* req = o.find("required")) {
      if (!req->is_array()) throw JsonSchemaError(child(where, "required"), "required must be an array of names");
      for (const Value& n : req->items()) {
        if (!n.is_string()) throw JsonSchemaError(child(where, "required"), "required must be an array of names");
        required.insert(n.as_string());
      }
    }
    const Value* listed = o.find("properties");
    if (listed) {
      if (!listed->is_object() || listed->is_namespace())
        throw JsonSchemaError(child(where, "properties"), "properties must be an object of schemas");
      for (const auto& [k, v] : listed->object().items) {
        const std::string& name = k.as_string();
        props.push_back({name, compile(v, child(child(where, "properties"), name)), required.count(name) > 0});
      }
    }
    std::optional<Rule> extra;  // the value of an additional property
    const Value* additional = o.find("additionalProperties");
    const bool refused = additional && additional->is_bool() && !additional->as_bool();
    if (!additional) {
      if (!listed) extra = any_value();
    } else if (!refused) {
      extra = compile(*additional, child(where, "additionalProperties"));
    }
    // Required but not described: an additional property as the schema has it (its value additionalProperties'
    // schema, any value where that is absent), and a schema no object meets where additional ones are refused.
    for (const std::string& name : required)
      if (std::none_of(props.begin(), props.end(), [&](const Property& p) { return p.name == name; })) {
        if (refused)
          throw JsonSchemaError(child(where, "required"),
                                "\"" + name + "\" is required, but properties does not describe it and "
                                "additionalProperties is false: no object fits");
        props.push_back({name, additional ? *extra : any_value(), true});
      }

    const auto member = [&](const std::string& name, Rule value) {
      Seq seq;
      g_->append_literal(seq, chat::json_quote(name));
      push_member_tail(seq, value);
      return seq;
    };
    Rule rest = g_->add_rule(), first = g_->add_rule();
    g_->add_alternative(rest, {});
    g_->add_alternative(first, {});
    if (extra) {
      // An additional property's name is none of the listed ones: a listed name belongs to its own schema, and an
      // object that repeats a name is not what the schema describes. (Two additional properties of one name are not
      // refused: a grammar cannot remember the names it wrote.)
      std::vector<std::string> names;
      for (const Property& p : props) names.push_back(p.name);
      Seq any_member{ByteGrammar::rule(string_except(names))};
      push_member_tail(any_member, *extra);
      add_member(first, rest, std::move(any_member), rest);
    }
    for (size_t i = props.size(); i-- > 0;) {
      const Rule next_rest = rest, next_first = first;
      rest = g_->add_rule(), first = g_->add_rule();
      add_member(first, rest, member(props[i].name, props[i].value), next_rest);
      if (!props[i].required) {
        g_->add_alternative(rest, {ByteGrammar::rule(next_rest)});
        g_->add_alternative(first, {ByteGrammar::rule(next_first)});
      }
    }
    const Rule r = g_->add_rule();
    g_->add_alternative(r, {g_->byte('{'), ws(), ByteGrammar::rule(first), g_->byte('}')});
    return r;
  }

  // `member` as an object's first (to `first`) and as a later one, after a comma (to `rest`), each followed by `then`.
  void add_member(Rule first, Rule rest, Seq member, Rule then) {
    Seq later{g_->byte(','), ws()};
    later.insert(later.end(), member.begin(), member.end());
    later.push_back(ByteGrammar::rule(then));
    g_->add_alternative(rest, later);
    member.push_back(ByteGrammar::rule(then));
    g_->add_alternative(first, member);
  }

  void push_member_tail(Seq& seq, Rule value) {
    seq.insert(seq.end(), {ws(), g_->byte(':'), ws(), ByteGrammar::rule(value), ws()});
  }

  // Items in order, each followed by whitespace: list_i is the list from item i on, optional once minItems are
  // written; past the tuple (and minItems), a loop of the remaining items' schema, or the end.
  Rule array(const ObjectData& o, const std::string& where) {
    std::vector<Rule> tuple;
    std::optional<Rule> rest;
    const Value* items = o.find("items");
    const Value* prefix = o.find("prefixItems");
    const Value* additional = o.find("additionalItems");
    const auto schema_or_none = [&](const Value* v, const std::string& at) -> std::optional<Rule> {
      if (v->is_bool() && !v->as_bool()) return std::nullopt;
      return compile(*v, at);
    };
    if (items && items->is_array()) {  // draft 4's tuple form
      for (size_t i = 0; i < items->items().size(); ++i)
        tuple.push_back(compile(items->items()[i], child(child(where, "items"), std::to_string(i))));
      if (additional) rest = schema_or_none(additional, child(where, "additionalItems"));
    } else {
      if (prefix) {
        if (!prefix->is_array())
          throw JsonSchemaError(child(where, "prefixItems"), "prefixItems must be an array of schemas");
        for (size_t i = 0; i < prefix->items().size(); ++i)
          tuple.push_back(compile(prefix->items()[i], child(child(where, "prefixItems"), std::to_string(i))));
      }
      if (items) rest = schema_or_none(items, child(where, "items"));
      else if (!prefix) rest = any_value();
    }
    const int64_t min = count(o, "minItems", where).value_or(0);
    std::optional<int64_t> max = count(o, "maxItems", where);
    if (!rest) max = std::min<int64_t>(max.value_or(static_cast<int64_t>(tuple.size())),
                                       static_cast<int64_t>(tuple.size()));
    if (max && min > *max) throw JsonSchemaError(where, "no array has as many items as minItems asks");
    // Explicit positions: the tuple's, up to minItems, and up to maxItems when it bounds the loop.
    const int64_t explicit_items = max ? *max : std::max<int64_t>(static_cast<int64_t>(tuple.size()), min);
    const auto item = [&](int64_t i) { return i < static_cast<int64_t>(tuple.size()) ? tuple[i] : *rest; };

    Rule list = g_->add_rule();  // after the explicit positions
    g_->add_alternative(list, {});
    if (!max) {
      const Rule loop = g_->add_rule();
      g_->add_alternative(loop, {g_->byte(','), ws(), ByteGrammar::rule(*rest), ws(), ByteGrammar::rule(loop)});
      g_->add_alternative(loop, {});
      if (explicit_items == 0) {
        g_->add_alternative(list, {ByteGrammar::rule(*rest), ws(), ByteGrammar::rule(loop)});
      } else {
        list = loop;
      }
    }
    for (int64_t i = explicit_items; i-- > 0;) {
      const Rule next = list;
      list = g_->add_rule();
      Seq seq;
      if (i > 0) seq = {g_->byte(','), ws()};
      seq.insert(seq.end(), {ByteGrammar::rule(item(i)), ws(), ByteGrammar::rule(next)});
      g_->add_alternative(list, seq);
      if (i >= min) g_->add_alternative(list, {});
    }
    const Rule r = g_->add_rule();
    g_->add_alternative(r, {g_->byte('['), ws(), ByteGrammar::rule(list), g_->byte(']')});
    return r;
  }

  // A count keyword (minItems, maxLength, ...): a whole number up to kMaxSchemaRepeat.
  static std::optional<int64_t> count(const ObjectData& o, std::string_view key, const std::string& where) {
    const Value* v = o.find(key);
    if (!v) return std::nullopt;
    const bool whole = v->is_int() || (v->is_float() && std::floor(v->as_float()) == v->as_float());
    if (v->is_bool() || !whole || v->as_float() < 0)
      throw JsonSchemaError(child(where, key), std::string(key) + " must be a whole number, 0 or more");
    if (v->as_float() > static_cast<double>(kMaxSchemaRepeat))
      throw JsonSchemaError(child(where, key), std::string(key) + " above " + std::to_string(kMaxSchemaRepeat) +
                                                   " is not supported");
    return static_cast<int64_t>(v->as_float());
  }

  Rule string(const ObjectData& o, const std::string& where) {
    const int64_t min = count(o, "minLength", where).value_or(0);
    const std::optional<int64_t> max = count(o, "maxLength", where);
    if (const Value* pattern = o.find("pattern")) {
      const std::string at = child(where, "pattern");
      if (!pattern->is_string()) throw JsonSchemaError(at, "pattern must be a string");
      const Value* format = o.find("format");
      if (o.find("minLength") || o.find("maxLength") ||
          (format && format->is_string() && among(kExactStringFormats, format->as_string())))
        throw JsonSchemaError(where, "\"pattern\" beside minLength, maxLength or a format is not supported (write "
                                     "the length into the pattern: {1,20})");
      try {
        return pattern_rule(*g_, pattern->as_string());
      } catch (const PatternError& e) {
        throw JsonSchemaError(at, e.what());
      }
    }
    if (const Value* format = o.find("format"); format && format->is_string()) {
      if (const auto r = string_format_rule(*g_, format->as_string())) {
        if (o.find("minLength") || o.find("maxLength"))
          throw JsonSchemaError(where, "\"format\": \"" + format->as_string() +
                                           "\" beside minLength or maxLength is not supported");
        return *r;
      }
    }
    if (max && min > *max) throw JsonSchemaError(where, "minLength is above maxLength");
    if (min == 0 && !max) return string_any();
    const Rule r = g_->add_rule();
    const uint32_t most = max ? static_cast<uint32_t>(*max) : ByteGrammar::kUnbounded;
    g_->add_alternative(r, {g_->byte('"'), g_->text(static_cast<uint32_t>(min), most), g_->byte('"')});
    return r;
  }

  // A bound from minimum / exclusiveMinimum (or maximum / exclusiveMaximum), the tighter where both are given;
  // draft 4's boolean exclusive* makes its plain bound strict.
  using Bound = NumberRules::Bound;
  static std::optional<Bound> bound(const ObjectData& o, const std::string& where, bool lower) {
    constexpr double kLimit = 1e18;
    const std::string_view plain = lower ? "minimum" : "maximum";
    const std::string_view exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    const auto number_at = [&](std::string_view key) -> std::optional<double> {
      const Value* v = o.find(key);
      if (!v || v->is_bool()) return std::nullopt;
      if (!v->is_number() || !(std::fabs(v->as_float()) <= kLimit))
        throw JsonSchemaError(child(where, key), std::string(key) + " must be a number within ±1e18");
      return v->as_float();
    };
    std::optional<Bound> b;
    if (const auto m = number_at(plain)) {
      const Value* flag = o.find(exclusive);
      b = Bound{*m, flag && flag->is_bool() && flag->as_bool()};
    }
    if (const auto e = number_at(exclusive)) {
      const bool tighter = !b || (lower ? *e >= b->value : *e <= b->value);
      if (tighter) b = Bound{*e, true};
    }
    return b;
  }

  // A number between whole-number bounds (NumberRules::number); a bound that is not whole is refused.
  Rule number(const ObjectData& o, const std::string& where) {
    const std::optional<Bound> lo = bound(o, where, true), hi = bound(o, where, false);
    if (!lo && !hi) return numbers_.any();
    for (const auto& b : {lo, hi})
      if (b && std::floor(b->value) != b->value)
        throw JsonSchemaError(where, "bounds on a number must be whole numbers (or the type an integer)");
    if (lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->strict || hi->strict))))
      throw JsonSchemaError(where, "no number lies within its bounds");
    return numbers_.number(lo, hi);
  }

  Rule integer(const ObjectData& o, const std::string& where) {
    std::optional<int64_t> lo, hi;
    if (const auto b = bound(o, where, true))
      lo = static_cast<int64_t>(b->strict ? std::floor(b->value) + 1 : std::ceil(b->value));
    if (const auto b = bound(o, where, false))
      hi = static_cast<int64_t>(b->strict ? std::ceil(b->value) - 1 : std::floor(b->value));
    if (lo && hi && *lo > *hi) throw JsonSchemaError(where, "no integer lies within its bounds");
    return numbers_.integer(lo, hi);
  }

  Rule literals(std::initializer_list<std::string_view> texts) {
    const Rule r = g_->add_rule();
    for (const std::string_view t : texts) {
      Seq seq;
      g_->append_literal(seq, t);
      g_->add_alternative(r, seq);
    }
    return r;
  }

  // Shared rules, each made on first use.

  // Whitespace between tokens: none, one space, or a newline and an indent of up to JsonPrefix::kMaxSpaces spaces
  // or tabs. So little, because a model held to a grammar that allows more can spend its tokens on blank lines (the
  // tiny test model does): compact and pretty-printed JSON are both still written as models write them.
  Symbol ws() {
    if (!ws_) {
      ByteGrammar::ByteSet indent;
      indent.set(' '), indent.set('\t');
      Rule next = g_->add_rule();
      g_->add_alternative(next, {});
      for (int i = 0; i < JsonPrefix::kMaxSpaces; ++i) {
        const Rule r = g_->add_rule();
        g_->add_alternative(r, {});
        g_->add_alternative(r, {g_->bytes(indent), ByteGrammar::rule(next)});
        next = r;
      }
      ws_ = g_->add_rule();
      g_->add_alternative(*ws_, {});
      g_->add_alternative(*ws_, {g_->byte(' ')});
      g_->add_alternative(*ws_, {g_->byte('\n'), ByteGrammar::rule(next)});
    }
    return ByteGrammar::rule(*ws_);
  }

  Rule string_any() {
    if (!string_any_) {
      string_any_ = g_->add_rule();
      g_->add_alternative(*string_any_, {g_->byte('"'), g_->text(0, ByteGrammar::kUnbounded), g_->byte('"')});
    }
    return *string_any_;
  }

  // A JSON string whose value is none of `names`: the names' characters walked as a trie, each written as JSON writes
  // it (code_point_rule), into any text from the first character that no name continues with; a string may end on a
  // trie node only where no name ends. Escapes that write a name's own characters another way (\u0061 for a) are
  // taken only past that point, where they can no longer spell a name.
  Rule string_except(const std::vector<std::string>& names) {
    if (names.empty()) return string_any();
    struct Node {
      std::map<uint32_t, size_t> next;  // a code point to the node after it
      bool name = false;                // a name ends here
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      size_t node = 0, at = 0;
      bool whole = true;
      while (at < name.size()) {
        const uint32_t cp = chat::jinja::text::decode(name, at);
        if (cp >= 0xD800 && cp <= 0xDFFF) {  // not UTF-8 here: a name no JSON text can spell
          whole = false;
          break;
        }
        const auto found = trie[node].next.find(cp);
        const size_t child = found != trie[node].next.end() ? found->second : trie.size();
        if (child == trie.size()) trie[node].next.emplace(cp, child), trie.emplace_back();
        node = child;
      }
      if (whole) trie[node].name = true;
    }
    const Symbol rest = g_->text(0, ByteGrammar::kUnbounded);
    std::vector<Rule> rules(trie.size());
    for (size_t i = trie.size(); i-- > 0;) {  // a child's index is above its parent's
      const Rule r = g_->add_rule();
      CodePointRanges continuing;
      for (const auto& [cp, child] : trie[i].next) {
        const Rule c = code_point_rule(*g_, {{cp, cp}}, CharWriting::JsonString);
        g_->add_alternative(r, {ByteGrammar::rule(c), ByteGrammar::rule(rules[child])});
        continuing.emplace_back(cp, cp);
      }
      const Rule other = code_point_rule(*g_, complement(continuing), CharWriting::JsonString);
      g_->add_alternative(r, {ByteGrammar::rule(other), rest});
      if (!trie[i].name) g_->add_alternative(r, {});
      rules[i] = r;
    }
    const Rule r = g_->add_rule();
    g_->add_alternative(r, {g_->byte('"'), ByteGrammar::rule(rules[0]), g_->byte('"')});
    return r;
  }

  // Any JSON value, containers nested as deep as the recognizer's stacks allow.
  Rule any_value() {
    if (any_value_) return *any_value_;
    any_value_ = g_->add_rule();
    const Rule members = g_->add_rule(), elements = g_->add_rule();
    const Symbol value = ByteGrammar::rule(*any_value_), key = ByteGrammar::rule(string_any());
    g_->add_alternative(members, {g_->byte(','), ws(), key, ws(), g_->byte(':'), ws(), value, ws(),
                                  ByteGrammar::rule(members)});
    g_->add_alternative(members, {});
    g_->add_alternative(elements, {g_->byte(','), ws(), value, ws(), ByteGrammar::rule(elements)});
    g_->add_alternative(elements, {});
    g_->add_alternative(*any_value_, {g_->byte('{'), ws(), g_->byte('}')});
    g_->add_alternative(*any_value_, {g_->byte('{'), ws(), key, ws(), g_->byte(':'), ws(), value, ws(),
                                      ByteGrammar::rule(members), g_->byte('}')});
    g_->add_alternative(*any_value_, {g_->byte('['), ws(), g_->byte(']')});
    g_->add_alternative(*any_value_, {g_->byte('['), ws(), value, ws(), ByteGrammar::rule(elements), g_->byte(']')});
    g_->add_alternative(*any_value_, {key});
    g_->add_alternative(*any_value_, {ByteGrammar::rule(numbers_.any())});
    for (const std::string_view literal : {"true", "false", "null"}) {
      Seq seq;
      g_->append_literal(seq, literal);
      g_->add_alternative(*any_value_, seq);
    }
    return *any_value_;
  }

  static constexpr int kMaxDepth = 128;
  const Value* root_ = nullptr;
  std::shared_ptr<ByteGrammar> g_ = std::make_shared<ByteGrammar>();
  NumberRules numbers_{*g_};
  int depth_ = 0;
  std::map<std::pair<const Value*, std::string>, Rule> refs_;  // by document and pointer
  std::optional<Rule> ws_, string_any_, any_value_, object_any_;
};

}  // namespace

std::shared_ptr<const ByteGrammar> json_schema_grammar(const chat::jinja::Value& schema) {
  return SchemaCompiler().schema(schema);
}

std::shared_ptr<const ByteGrammar> json_call_grammar(const std::vector<CallSchema>& choices, const CallSyntax& syntax) {
  return SchemaCompiler().calls(choices, syntax);
}

std::shared_ptr<const ByteGrammar> arguments_grammar(const CallSchema& call) {
  return SchemaCompiler().arguments(call);
}

std::shared_ptr<const ByteGrammar> header_call_grammar(const std::vector<CallSchema>& choices, std::string_view before,
                                                       std::string_view after) {
  return SchemaCompiler().header_calls(choices, before, after);
}

}  // namespace runtime
