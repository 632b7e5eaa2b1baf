#!/usr/bin/env python3
"""Renders every corpus template x conversation x variant x add_generation_prompt with Python Jinja2, exactly as
Hugging Face transformers' apply_chat_template does, and writes the results to tests/chat/expected/<template>.json.
test_chat_corpus (tests/chat/test_chat_corpus.cpp) renders the same combinations with chat::ChatTemplate and
compares them byte for byte.

    python3 tests/chat/render_expected.py            # rewrite tests/chat/expected/
    python3 tests/chat/render_expected.py --check    # exit 1 if any expected file would change

Needs only jinja2 (3.1.x). transformers is not imported: its rendering environment is reproduced below, so the
expected files do not depend on a transformers install. What is reproduced (transformers' chat_template_utils):
  * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[generation tracker, jinja2.ext.loopcontrols]);
  * the tojson filter replaced by json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
    sort_keys=sort_keys) (Jinja's own escapes HTML characters and sorts keys);
  * globals raise_exception(msg) (raises TemplateError(msg)) and strftime_now(fmt) (pinned here, see NOW);
  * render(messages=..., tools=tools or None, documents=None, add_generation_prompt=..., **special tokens,
    **extra template variables): the messages are the dicts as given, in their key order.

Layout of the corpus (tests/chat/):
  templates/<name>.jinja            a model's chat template, byte for byte
  corpus.json                       per template: bos_token, eos_token, variants (extra template variables)
  conversations/<name>.json         an OpenAI-style messages array
  conversations/<name>.tools.json   optional: the tools array offered with that conversation
  expected/<template>.json          {"<conversation>[@<variant>]": {"gen": R, "nogen": R}} where R is
                                    {"prompt": text}, {"raised": message} (raise_exception) or
                                    {"error": message} (any other Jinja or Python error while rendering)
"""
import argparse
import datetime
import json
import pathlib
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent

# The clock strftime_now reads: 2024-07-26 13:05:09, a Friday (the C++ test pins the same std::tm).
NOW = datetime.datetime(2024, 7, 26, 13, 5, 9)


class Raised(jinja2.exceptions.TemplateError):
    """What raise_exception throws; a subclass only so that the expected file can say which errors are refusals."""


class GenerationTracker(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers' AssistantTracker records where assistant text lies
    (for return_assistant_tokens_mask) and renders the body unchanged; only the rendering matters here."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_one(template, messages, tools, add_generation_prompt, tokens, variables):
    # What apply_chat_template passes; extra variables (its keyword arguments) may replace any of them.
    context = {"messages": messages, "tools": tools, "documents": None,
               "add_generation_prompt": add_generation_prompt}
    context.update(tokens)
    context.update(variables)
    try:
        return {"prompt": template.render(**context)}
    except Raised as e:
        return {"raised": e.message}
    except Exception as e:  # what transformers lets through: UndefinedError, TypeError, ...
        return {"error": f"{type(e).__name__}: {e}"}


def load_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def conversations():
    out = {}
    for path in sorted((HERE / "conversations").glob("*.json")):
        if path.name.endswith(".tools.json"):
            continue
        name = path.name[: -len(".json")]
        tools_path = path.with_name(name + ".tools.json")
        out[name] = (load_json(path), load_json(tools_path) if tools_path.exists() else None)
    return out


def render_template(env, name, spec, convs):
    # Read as bytes so that no newline translation happens here; Jinja normalises \r\n itself, as it does for a
    # template string transformers reads from tokenizer_config.json.
    source = (HERE / "templates" / (name + ".jinja")).read_bytes().decode("utf-8")
    template = env.from_string(source)
    tokens = {"bos_token": spec["bos_token"], "eos_token": spec["eos_token"]}
    variants = {"": {}}
    variants.update(spec.get("variants", {}))
    result = {}
    for conv_name, (messages, tools) in convs.items():
        for variant, variables in variants.items():
            key = conv_name + ("@" + variant if variant else "")
            result[key] = {
                "gen": render_one(template, messages, tools, True, tokens, variables),
                "nogen": render_one(template, messages, tools, False, tokens, variables),
            }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report expected files that would change")
    args = parser.parse_args()

    env = make_environment()
    corpus = load_json(HERE / "corpus.json")
    convs = conversations()
    out_dir = HERE / "expected"
    out_dir.mkdir(exist_ok=True)
    changed = []
    for name, spec in sorted(corpus["templates"].items()):
        text = json.dumps(render_template(env, name, spec, convs), ensure_ascii=False, indent=1) + "\n"
        path = out_dir / (name + ".json")
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            changed.append(path.name)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    stale = sorted(p.name for p in out_dir.glob("*.json") if p.stem not in corpus["templates"])
    for name in stale:
        changed.append(name + " (no longer in corpus.json)")
        if not args.check:
            (out_dir / name).unlink()
    print(f"jinja2 {jinja2.__version__}: {len(corpus['templates'])} templates x {len(convs)} conversations; "
          f"{len(changed)} expected file(s) {'differ' if args.check else 'written'}")
    for c in changed:
        print("  " + c)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
