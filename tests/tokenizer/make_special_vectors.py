#!/usr/bin/env python3
"""Writes special_vectors.txt: texts with special-token lookalikes next to spaces and newlines, for every shared
vocabulary, with the ids llama.cpp's tokenizer gives them in both modes (test_special_vectors.cpp checks ours).

The ids come from running llama.cpp's own tool (the reference, not this project):
    mkdir /tmp/llama.cpp-de3ff81 && tar xzf ../shared/anchors/llama.cpp-de3ff81.tar.gz -C /tmp/llama.cpp-de3ff81
    cmake -S /tmp/llama.cpp-de3ff81 -B /tmp/lcpp -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \\
          -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release
    cmake --build /tmp/lcpp -j2 --target llama-tokenize
    tests/tokenizer/make_special_vectors.py /tmp/lcpp/bin/llama-tokenize ../shared/tokenizer \\
          > tests/tokenizer/special_vectors.txt
Each text is written to a file and tokenized with
    llama-tokenize -m ggml-vocab-NAME.gguf -f FILE --no-escape --no-bos --ids --log-disable [--no-parse-special]
(the tool parses special tokens unless told not to; --no-bos: the tests encode with add_special = false).
The small vocabularies of rule_vocabs.txt are written as GGUF files in a temporary folder first.
"""
import os
import struct
import subprocess
import sys
import tempfile

# Per vocabulary: the special tokens (and lookalikes) placed into the templates, then whole chat-style texts.
TOKENS = {
    "llama-spm": ["<s>", "</s>", "<unk>"],
    "phi-3": ["<|user|>", "<|end|>", "<|assistant|>", "<|system|>", "<|endoftext|>", "</s>", "<s>", "<unk>",
              "[PAD32011]", "<|placeholder1|>"],
    "llama-bpe": ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_of_text|>",
                  "<|reserved_special_token_0|>", "</s>"],
    "qwen2": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "</s>", "[PAD151646]"],
    "gpt-2": ["<|endoftext|>", "</s>"],
    "deepseek-llm": ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
                     "\u00f8", "[PAD100015]", "</s>"],
    "falcon": [">>TITLE<<", "<|endoftext|>", ">>SUFFIX<<", "</s>"],
    "starcoder": ["<fim_prefix>", "<fim_pad>", "<|endoftext|>", "<issue_start>", "</s>"],
}

CHATS = {
    "llama-spm": ["<s>[INST] Hi [/INST] Hello</s><s>[INST]  again\n[/INST]",
                  "Hello</s>\n<s> world", "<unk>\n\n<unk> x"],
    "phi-3": ["<|system|>\nYou are helpful.<|end|>\n<|user|>\n  Hi there <|end|>\n<|assistant|>\n",
              "<s><|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|endoftext|>",
              "<|user|>\n\n\t Hi\n<|end|>  \n  <|assistant|>  ",
              "user text </s> more </s>\n<s> end"],
    "llama-bpe": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n",
                  " <|start_header_id|> system <|end_header_id|> \n x <|eot_id|> "],
    "qwen2": ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
              "<|im_start|>assistant\n",
              "a </s> b<|im_end|>\n\n</s>"],
    "gpt-2": ["Hello<|endoftext|> world<|endoftext|>\n\n</s>"],
    "deepseek-llm": ["<\uff5cbegin\u2581of\u2581sentence\uff5c>User: Hi\n\nAssistant: Hello"
                     "<\uff5cend\u2581of\u2581sentence\uff5c>User: \u00f8\u00f6 x"],
    "falcon": [">>QUESTION<< Why? >>ANSWER<<\nBecause.<|endoftext|>"],
    "starcoder": ["<fim_prefix>def f():\n    <fim_suffix>\n    return x<fim_middle>",
                  "<repo_name>r<file_sep>a.py\n<|endoftext|>"],
}

# Extra texts for the rule vocabularies (their tokens come from rule_vocabs.txt).
RULE_CHATS = {
    "rules-phi3": ["<|user|>\n\n\nHi<|end|>          x", "a  <|tag|>\n\n\n\n b</s>\n\nc<s>\n d",
                   "<|user|>" + " " * 9 + "x", "[UNK1]\t\n<unk>\n<|endoftext|>  \n"],
    "rules-modern-bert": ["[CLS] a   [MASK] b  [MASK][SEP]", "\n\t [MASK]\n [MASK]  [MASK]"],
    "rules-nomic": ["a   <mask>  b <|user|>  c", "<s>  <mask>\n</s>\n"],
    "rules-harmony": ["<|start|>assistant<|channel|>final<|message|>Hi<|end|> <|return|>"],
    "rules-solar": ["x <|end|> y<|calls|><|flush|>"],
    "rules-end-only-return": ["x <|end|> y<|return|>"],
    "rules-gemma4": ["Hi</s> <eos><turn|>\n<|tool_response>"],
    "rules-promote": ["<PRE>a<SUF>b<my_suffix>c[EOS]", "<|file_sep|>x<fim_pad> <|eom_id|><tag>"],
}

TEMPLATES = ["{T}", " {T}", "{T} ", "a {T} b", "a{T}b", "Hello{T}\nworld", "\n{T}\n\nHi", "  {T}  x  ",
             "{T}\t\tx\r\n", "{T}{T}", "{T} {T}", "x {T}\n {U}  y", "<{T}>", "{T}\u00a0y", "{T}\v\fz",
             "x\r\n\v\f\t{T}"]


def unescape(text):
    """Inverse of escape()."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            e = text[i + 1]
            if e == "x":
                out.append(chr(int(text[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append({"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f"}.get(e, e))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_rule_vocabs(path):
    """rule_vocabs.txt -> {name: {"name": .., "arch": .., "tokens": [(type, text)], "keys": {key: id}}}."""
    vocabs, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            word, _, rest = line.partition(" ")
            if word == "vocab":
                cur = vocabs.setdefault(rest, {"name": "", "arch": "gpt2", "tokens": [], "keys": {}})
            elif word == "name":
                cur["name"] = rest
            elif word == "arch":
                cur["arch"] = rest
            elif word == "token":
                ty, _, text = rest.partition(" ")
                cur["tokens"].append((int(ty), unescape(text)))
            elif word == "key":
                key, _, val = rest.partition(" ")
                cur["keys"][key] = int(val)
            else:
                raise ValueError(line)
    return vocabs


def gpt2_byte_tokens():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = dict(zip(bs, cs))
    return [chr(m[b]) for b in range(256)]


def write_gguf(path, spec):
    """A vocab-only GGUF v3 file (no tensors) holding the rule vocabulary."""
    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    tokens = gpt2_byte_tokens() + [t for _, t in spec["tokens"]]
    types = [1] * 256 + [ty for ty, _ in spec["tokens"]]
    kv = [("general.architecture", 8, s(spec["arch"]))]
    if spec["name"]:
        kv.append(("general.name", 8, s(spec["name"])))
    kv += [("tokenizer.ggml.model", 8, s("gpt2")), ("tokenizer.ggml.pre", 8, s("gpt-2")),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(s(t) for t in tokens)),
           ("tokenizer.ggml.token_type", 9,
            struct.pack("<IQ", 5, len(types)) + b"".join(struct.pack("<i", t) for t in types)),
           ("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, 0))]
    kv += [("tokenizer.ggml." + k, 4, struct.pack("<I", v)) for k, v in spec["keys"].items()]
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, ty, payload in kv:
        out += s(key) + struct.pack("<I", ty) + payload
    with open(path, "wb") as f:
        f.write(out)


def texts_for(name, toks, chats):
    out = []
    for i, t in enumerate(toks):
        u = toks[(i + 1) % len(toks)]
        out += [tmpl.replace("{T}", t).replace("{U}", u) for tmpl in TEMPLATES]
        if len(t) > 2:
            out.append(t[:-1] + " x")  # a truncated lookalike
        if t.upper() != t:
            out.append("a " + t.upper())
    out += chats
    seen = set()
    return [t for t in out if not (t in seen or seen.add(t))]


def escape(text):
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\n\t\r\v\f":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\v": "\\v", "\f": "\\f"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def tokenize(tool, vocab, text, parse_special):
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        cmd = [tool, "-m", vocab, "-f", path, "--no-escape", "--no-bos", "--ids", "--log-disable"]
        if not parse_special:
            cmd.append("--no-parse-special")
        res = subprocess.run(cmd, capture_output=True, check=True)
    finally:
        os.unlink(path)
    line = res.stdout.decode().strip().splitlines()[-1]
    assert line.startswith("[") and line.endswith("]"), line
    return [int(x) for x in line[1:-1].split(",") if x.strip()]


def main():
    tool, shared = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    rules = read_rule_vocabs(os.path.join(here, "rule_vocabs.txt"))
    print("# Special-token vectors: vocabulary, parse_special (0/1), text (escapes \\\\ \\n \\t \\r \\v \\f \\xHH),")
    print("# then the ids llama.cpp de3ff81 gives (llama-tokenize ... --no-bos --ids [--no-parse-special]).")
    print("# Written by tests/tokenizer/make_special_vectors.py (see there for the commands); do not edit by hand.")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(name, os.path.join(shared, "ggml-vocab-%s.gguf" % name), TOKENS[name], CHATS[name])
                for name in TOKENS]
        for name, spec in rules.items():
            path = os.path.join(tmp, name + ".gguf")
            write_gguf(path, spec)
            jobs.append((name, path, [t for _, t in spec["tokens"]], RULE_CHATS.get(name, [])))
        for name, vocab, toks, chats in jobs:
            for text in texts_for(name, toks, chats):
                for parse_special in (0, 1):
                    ids = tokenize(tool, vocab, text, parse_special)
                    print("%s\t%d\t%s\t%s" % (name, parse_special, escape(text), " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
