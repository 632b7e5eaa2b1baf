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
"""
import os
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

TEMPLATES = ["{T}", " {T}", "{T} ", "a {T} b", "a{T}b", "Hello{T}\nworld", "\n{T}\n\nHi", "  {T}  x  ",
             "{T}\t\tx\r\n", "{T}{T}", "{T} {T}", "x {T}\n {U}  y", "<{T}>", "{T}\u00a0y", "{T}\v\fz"]


def texts_for(name):
    toks = TOKENS[name]
    out = []
    for i, t in enumerate(toks):
        u = toks[(i + 1) % len(toks)]
        out += [tmpl.replace("{T}", t).replace("{U}", u) for tmpl in TEMPLATES]
        if len(t) > 2:
            out.append(t[:-1] + " x")  # a truncated lookalike
        if t.upper() != t:
            out.append("a " + t.upper())
    out += CHATS[name]
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
    print("# Special-token vectors: vocabulary, parse_special (0/1), text (escapes \\\\ \\n \\t \\r \\v \\f \\xHH),")
    print("# then the ids llama.cpp de3ff81 gives (llama-tokenize ... --no-bos --ids [--no-parse-special]).")
    print("# Written by tests/tokenizer/make_special_vectors.py (see there for the commands); do not edit by hand.")
    for name in TOKENS:
        vocab = os.path.join(shared, "ggml-vocab-%s.gguf" % name)
        for text in texts_for(name):
            for parse_special in (0, 1):
                ids = tokenize(tool, vocab, text, parse_special)
                print("%s\t%d\t%s\t%s" % (name, parse_special, escape(text), " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
