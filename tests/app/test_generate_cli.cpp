// llm-run as a process: the root generate command, `logits` and `perplexity`: output formats, values against the
// references, and exit codes (usage errors 2, runtime errors 1).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "assets.h"
#include "chat/json.h"
#include "model/model.h"
#include "process.h"
#include "refs.h"
#include "runtime/session_cpu.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

using testing_process::Result;
using testing_process::slurp;
std::string quote(const std::string& s) { return testing_process::shell_quote(s); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("llm_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& args) { return testing_process::run_llm_run(args); }
  fs::path dir_;
};

#define REQUIRE_STORIES()                                                   \
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");                    \
  REQUIRE_ASSET(stories_ref, "models/stories260K-reference.txt")

TEST_F(Cli, GreedyGenerationPrintsThePromptAndTheReferenceContinuation) {
  REQUIRE_STORIES();
  const auto cases = refs::read_stories_ref(stories_ref);
  const Result r = run("-m " + quote(stories) + " -p 'Once upon a time' -n 40 --temp 0 --device cpu -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  // 40 tokens are a prefix of the reference's 200 (the reference text includes the prompt).
  ASSERT_GT(r.out.size(), 40u);
  ASSERT_EQ(r.out.back(), '\n');
  EXPECT_EQ(cases[1].text.substr(0, r.out.size() - 1), r.out.substr(0, r.out.size() - 1));
  EXPECT_NE(r.err.find("load"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("40 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

// The quick start: with no -m, $LLM_RUN_MODEL or models/default.gguf, llm-run runs the shipped stories260K
// (models/stories260K.gguf, found through the checkout it was built from even outside it), says so on stderr, and
// continues the prompt exactly as llama2.c does.
TEST_F(Cli, WithoutAModelTheShippedStoryModelRuns) {
  REQUIRE_STORIES();
  const auto cases = refs::read_stories_ref(stories_ref);
  const Result r = run("-p 'Once upon a time' -n 40 --temp 0 --device cpu -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("models/stories260K.gguf, the tiny story model shipped with llm-run"), std::string::npos)
      << r.err;
  ASSERT_GT(r.out.size(), 40u);
  EXPECT_EQ(cases[1].text.substr(0, r.out.size() - 1), r.out.substr(0, r.out.size() - 1));
}

TEST_F(Cli, PromptFromFileAndSeededSamplingIsReproducible) {
  REQUIRE_STORIES();
  std::ofstream(dir_ / "prompt.txt") << "Lily and Tom";
  const std::string args = "-m " + quote(stories) + " -f " + quote((dir_ / "prompt.txt").string()) +
                           " -n 30 --temp 1.0 --top-k 0 --top-p 1 --min-p 0 -s 1234 --device cpu";
  const Result a = run(args), b = run(args), c = run(args + " -s 99");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("Lily and Tom", 0), 0u) << a.out;
  EXPECT_NE(a.out, c.out);  // another seed, another story (30 tokens at temperature 1)
}

TEST_F(Cli, LogitsMatchTheReferenceFile) {
  REQUIRE_ASSET(model, "models/stories260K-f32.gguf");
  REQUIRE_ASSET(ref_path, "models/refs/stories260K-f32.public.txt");
  const refs::LogitsRef ref = refs::read_logits_ref(ref_path);
  const std::string out_f32 = (dir_ / "last.f32").string();
  const Result r = run("logits -m " + quote(model) + " -p " + quote(ref.prompt) + " --device cpu --out " +
                       quote(out_f32));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  std::string want = "tokens ";
  for (size_t i = 0; i < ref.tokens.size(); ++i) want += (i ? "," : "") + std::to_string(ref.tokens[i]);
  EXPECT_EQ(line, want);
  const double tol = 1.5e-5;  // F32 file: see test_refs.cpp
  for (size_t p = 0; p < ref.tokens.size(); ++p) {
    ASSERT_TRUE(std::getline(lines, line)) << "missing position " << p;
    std::istringstream s(line);
    std::string head;
    size_t pos = 0;
    s >> head >> pos;
    EXPECT_EQ(head, "top10");
    EXPECT_EQ(pos, p);
    std::vector<std::pair<int32_t, double>> ours;
    std::string item;
    while (s >> item) ours.push_back({std::stoi(item.substr(0, item.find(':'))), std::stod(item.substr(item.find(':') + 1))});
    ASSERT_EQ(ours.size(), 10u) << line;
    for (size_t i = 1; i < ours.size(); ++i) EXPECT_GE(ours[i - 1].second, ours[i].second) << line;
    // Reference entries clear of the 10th by 2 tol must be listed, with their logit within tol.
    for (const refs::TopEntry& e : ref.top10[p]) {
      if (e.logit - ref.top10[p].back().logit <= 2 * tol) continue;
      auto it = std::find_if(ours.begin(), ours.end(), [&](const auto& o) { return o.first == e.id; });
      ASSERT_NE(it, ours.end()) << "position " << p << " id " << e.id;
      EXPECT_NEAR(it->second, e.logit, tol);
    }
  }
  EXPECT_FALSE(std::getline(lines, line)) << "extra line: " << line;
  const std::vector<float> last = refs::read_f32(out_f32);
  const std::vector<float> want_last = refs::read_f32(ref_path.substr(0, ref_path.rfind('/') + 1) + ref.lastlogits_file);
  ASSERT_EQ(last.size(), want_last.size());
  for (size_t i = 0; i < last.size(); ++i) EXPECT_NEAR(last[i], want_last[i], tol) << i;
}

TEST_F(Cli, LogitsTopKAndCudaWithoutCuda) {
  REQUIRE_STORIES();
  const Result r = run("logits -m " + quote(stories) + " -p 'Hi' --top 3 --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  std::getline(lines, line);
  EXPECT_EQ(line.rfind("top3 0 ", 0), 0u) << line;
  EXPECT_EQ(std::count(line.begin(), line.end(), ':'), 3);
#ifndef LLM_HAVE_CUDA_SESSION
  const Result c = run("logits -m " + quote(stories) + " -p 'Hi' --device cuda");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("CUDA device not available in this build"), std::string::npos) << c.err;
#endif
}

TEST_F(Cli, PerplexityMatchesAnInProcessComputation) {
  REQUIRE_STORIES();
  const auto cases = refs::read_stories_ref(stories_ref);
  const std::string text = cases[0].text + "\n" + cases[2].text;
  std::ofstream(dir_ / "text.txt") << text;
  const int n_ctx = 64;
  const Result r = run("perplexity -m " + quote(stories) + " -f " + quote((dir_ / "text.txt").string()) +
                       " -c 64 --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("[1]", 0), 0u) << r.out;
  const size_t at = r.out.find("Final estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  double ppl = 0, err = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "Final estimate: PPL = %lf +/- %lf", &ppl, &err), 2) << r.out;

  // The same quantity computed here: chunks of n_ctx, BOS first, second half scored.
  auto m = model::Model::load(stories);
  auto tok = tokenizer::Tokenizer::from_gguf(m->file());
  const std::vector<int32_t> ids = tok.encode(text, true, false);
  runtime::CpuSession session(m, n_ctx, 1);
  double sum = 0;
  int count = 0;
  for (size_t c = 0; c + n_ctx <= ids.size(); c += n_ctx) {
    std::vector<int32_t> chunk(ids.begin() + std::ptrdiff_t(c), ids.begin() + std::ptrdiff_t(c + n_ctx));
    chunk[0] = tok.bos();
    const std::span<const float> l = session.eval(chunk, 0, true);
    for (int j = n_ctx / 2; j < n_ctx - 1; ++j) {
      const std::span<const float> row = l.subspan(size_t(j) * 512, 512);
      double mx = -INFINITY, z = 0;
      for (float v : row) mx = std::max(mx, double(v));
      for (float v : row) z += std::exp(double(v) - mx);
      sum += mx + std::log(z) - row[size_t(chunk[size_t(j) + 1])];
      ++count;
    }
  }
  ASSERT_GT(count, 0);
  EXPECT_NEAR(ppl, std::exp(sum / count), 1e-4);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(ppl, 20.0);  // the model's own text is easy for it
}

TEST_F(Cli, ExitCodes) {
  REQUIRE_STORIES();
  EXPECT_EQ(run("").code, 2);                                                    // bare: help
  EXPECT_EQ(run("-m /nonexistent/model.gguf -p hi").code, 2);                    // missing file
  std::ofstream(dir_ / "junk.gguf") << "this is not a GGUF file at all";
  const Result junk = run("-m " + quote((dir_ / "junk.gguf").string()) + " -p hi --device cpu");
  EXPECT_EQ(junk.code, 1) << junk.err;                                           // not GGUF
  EXPECT_NE(junk.err.find("llm-run: error:"), std::string::npos) << junk.err;
  EXPECT_EQ(run("-m " + quote(stories) + " -p hi -n abc").code, 2);              // bad flag value
  EXPECT_EQ(run("-m " + quote(stories) + " -p hi --device gpu").code, 2);
  EXPECT_EQ(run("-m " + quote(stories) + " -p hi --top-p 2").code, 2);
  EXPECT_EQ(run("-m " + quote(stories) + " -p hi --no-such-flag").code, 2);
  // A thread count past the pool's bound is refused before any thread starts (100 000 once exhausted the machine's).
  const Result threads = run("-m " + quote(stories) + " -p hi -t 100000 --device cpu");
  EXPECT_EQ(threads.code, 2) << threads.err;
  EXPECT_NE(threads.err.find("--threads"), std::string::npos) << threads.err;
  const Result bad_kv = run("-m " + quote(stories) + " -p hi --cache-type q4_1");
  EXPECT_EQ(bad_kv.code, 2);
  EXPECT_NE(bad_kv.err.find("expected f16, q8_0 or q4_0"), std::string::npos) << bad_kv.err;
  const Result q8 = run("-m " + quote(stories) + " -p hi --cache-type q8_0 --device cpu");  // head_dim 8
  EXPECT_EQ(q8.code, 1) << q8.err;
  EXPECT_NE(q8.err.find("q8_0 KV cache"), std::string::npos) << q8.err;
  const Result q4 = run("-m " + quote(stories) + " -p hi --cache-type q4_0 --device cpu");
  EXPECT_EQ(q4.code, 1) << q4.err;
  EXPECT_NE(q4.err.find("q4_0 KV cache"), std::string::npos) << q4.err;
  for (const char* gib : {"-1", "nan", "inf", "2e6", "lots"}) {  // --half-weights takes GiB from 0 to 2^20
    const Result half = run("-m " + quote(stories) + " -p hi --device cpu --half-weights " + gib);
    EXPECT_EQ(half.code, 2) << gib << ": " << half.err;
    EXPECT_NE(half.err.find("--half-weights"), std::string::npos) << gib << ": " << half.err;
  }
  EXPECT_EQ(run("logits -m " + quote(stories)).code, 2);                          // -p required
  EXPECT_EQ(run("perplexity -m " + quote(stories) + " -f /nonexistent.txt").code, 2);
  const Result lg = run("logits -m /nonexistent.gguf -p hi");
  EXPECT_EQ(lg.code, 2);
  // A directory as a text file is named as one, not read as an empty prompt.
  const Result from_dir = run("-m " + quote(stories) + " -f " + quote(dir_.string()) + " --device cpu -n 2");
  EXPECT_EQ(from_dir.code, 2) << from_dir.err;
  EXPECT_NE(from_dir.err.find("': a directory"), std::string::npos) << from_dir.err;
  // Lower bounds are said plainly, without double's whole range.
  for (const char* flags : {"-c -1", "--repeat-penalty 0", "--repeat-penalty x"}) {
    const Result low = run("-m " + quote(stories) + " -p hi --device cpu " + flags);
    EXPECT_EQ(low.code, 2) << flags << ": " << low.err;
    EXPECT_NE(low.err.find(std::string(flags).find('x') != std::string::npos ? "expected a number" : "must be"),
              std::string::npos) << flags << ": " << low.err;
    EXPECT_LT(low.err.size(), 200u) << flags << ": " << low.err;
  }
  EXPECT_NE(run("logits -m " + quote(stories) + " -p hi --top 0").err.find("--top: must be at least 1, got 0"),
            std::string::npos);
}

// --half-weights on the CPU: the reference reads the weights as they are, says so, and writes the same text.
TEST_F(Cli, HalfWeightsOnTheCpuIsANote) {
  REQUIRE_STORIES();
  const std::string args = "-m " + quote(stories) + " -p 'Once upon a time' -n 8 --temp 0 --device cpu -t 1";
  const Result plain = run(args), half = run(args + " --half-weights 0.5");
  ASSERT_EQ(half.code, 0) << half.err;
  EXPECT_EQ(half.out, plain.out);
  EXPECT_NE(half.err.find("--half-weights is for the GPU"), std::string::npos) << half.err;
  EXPECT_EQ(plain.err.find("--half-weights"), std::string::npos) << plain.err;
}

// -l / --logit-bias as llama.cpp spells it: "432-inf" bans ',' (token 432 of stories260K), which the greedy
// reference writes after "Once upon a time"; malformed specs and ids past the vocabulary are usage errors.
TEST_F(Cli, LogitBiasBansAToken) {
  REQUIRE_STORIES();
  const std::string base = "-m " + quote(stories) + " -p 'Once upon a time' -n 8 --temp 0 --device cpu -t 1";
  const Result plain = run(base), banned = run(base + " -l 432-inf");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(banned.code, 0) << banned.err;
  EXPECT_NE(plain.out.find("time,"), std::string::npos) << plain.out;
  EXPECT_EQ(banned.out.find(','), std::string::npos) << banned.out;
  for (const char* bad : {"12x", "+1", "12", "12+", "12+1y", "99999999999+1"})
    EXPECT_EQ(run(base + " -l " + quote(bad)).code, 2) << bad;
  const Result outside = run(base + " --logit-bias 512+1");
  EXPECT_EQ(outside.code, 2);
  EXPECT_NE(outside.err.find("outside the model's vocabulary of 512"), std::string::npos) << outside.err;
}

// --json-schema holds the continuation to a schema: with every value enumerated or bounded, stories260K must write
// exactly such an object and end there. The schema may come from a file; bad schemas and --json beside a schema are
// usage errors before the model loads. --grammar does the same for a GBNF grammar.
TEST_F(Cli, JsonSchemaHoldsTheContinuation) {
  REQUIRE_STORIES();
  const std::string schema =
      R"({"type": "object", "properties": {"who": {"enum": ["Lily", "Tom"]}, "age": {"type": "integer", "minimum": 1,
          "maximum": 9}}, "required": ["who", "age"]})";
  const std::string base = "-m " + quote(stories) + " -p 'Once upon a time' -n 60 --temp 0 --device cpu -t 1 "
                           "--no-display-prompt";
  const Result r = run(base + " --json-schema " + quote(schema));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("stopped at end of generation"), std::string::npos) << r.err;
  const chat::jinja::Value v = chat::parse_json(r.out);
  ASSERT_TRUE(v.is_object()) << r.out;
  const chat::jinja::Value* who = v.object().find("who");
  const chat::jinja::Value* age = v.object().find("age");
  ASSERT_TRUE(who && age) << r.out;
  EXPECT_TRUE(who->as_string() == "Lily" || who->as_string() == "Tom") << r.out;
  EXPECT_TRUE(age->is_int() && age->as_int() >= 1 && age->as_int() <= 9) << r.out;
  const fs::path file = dir_ / "schema.json";
  std::ofstream(file) << schema;
  const Result from_file = run(base + " --json-schema-file " + quote(file.string()));
  ASSERT_EQ(from_file.code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, r.out);

  const Result refused = run(base + R"( --json-schema '{"type": "string", "not": {"const": "a"}}')");
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("the schema at /not: \"not\" is not supported"), std::string::npos) << refused.err;
  const Result not_json = run(base + " --json-schema '{type: 1}'");
  EXPECT_EQ(not_json.code, 2);
  EXPECT_NE(not_json.err.find("the JSON schema is not JSON"), std::string::npos) << not_json.err;
  EXPECT_EQ(run(base + " --json --json-schema '{}'").code, 2);
  // --grammar (llama.cpp's GBNF), from the command line or a file.
  const std::string gbnf = R"(root ::= " there was a " ("dog" | "cat") ".")";
  const Result g = run(base + " --grammar " + quote(gbnf));
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_TRUE(g.out == " there was a dog.\n" || g.out == " there was a cat.\n") << g.out;
  const fs::path gfile = dir_ / "g.gbnf";
  std::ofstream(gfile) << gbnf;
  EXPECT_EQ(run(base + " --grammar-file " + quote(gfile.string())).out, g.out);
  const Result bad = run(base + " --grammar 'root ::= x'");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("rule 'x' is used but not defined"), std::string::npos) << bad.err;
  EXPECT_EQ(run(base + " --grammar 'root ::= \"a\"' --json").code, 2);
  EXPECT_EQ(run(base + " --json-schema-file " + quote((dir_ / "missing.json").string())).code, 2);
}

TEST_F(Cli, PromptLongerThanContext) {
  REQUIRE_STORIES();
  const Result r = run("-m " + quote(stories) + " -p 'Once upon a time there was a dog' -c 4 --device cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("but the context holds 4"), std::string::npos) << r.err;
  const Result l = run("logits -m " + quote(stories) + " -p 'Once upon a time there was a dog' -c 4 --device cpu");
  EXPECT_EQ(l.code, 1);
  EXPECT_NE(l.err.find("but the context holds 4"), std::string::npos) << l.err;
}

}  // namespace

namespace {

TEST_F(Cli, ReversePromptStopsAfterTheStopString) {
  REQUIRE_STORIES();
  // The greedy continuation of "Once upon a time" mentions "park" within its first sentences (reference text).
  const Result r = run("-m " + quote(stories) + " -p 'Once upon a time' -n 150 --temp 0 --device cpu -r park");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("park");
  ASSERT_NE(at, std::string::npos) << r.out;
  // Nothing beyond the token that completed "park" (at most the rest of that token and the final newline).
  EXPECT_LE(r.out.size(), at + std::string("park").size() + 8) << r.out;
  EXPECT_NE(r.err.find("stop string"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// perplexity --kl-divergence-base / --kl-divergence (issue 7).
std::string kld_words(unsigned seed, int n) {
  static const char* const words[] = {"the", "cat", "dog", "sun", "park", "ball", "girl", "boy", "happy", "little",
                                      "big", "ran", "played", "saw", "went", "home", "tree", "and", "Lily", "Tom"};
  std::string s;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    s += words[(seed >> 16) % 20];
    s += (i % 12 == 11) ? ".\n" : " ";
  }
  return s;
}

struct KlResult {
  double mean = -1, err = -1, top1 = -1;
};

KlResult parse_kl(const std::string& out) {
  KlResult k;
  const size_t a = out.find("KL divergence (base || current): mean = ");
  const size_t b = out.find("Same top-1 token: ");
  if (a != std::string::npos)
    std::sscanf(out.c_str() + a, "KL divergence (base || current): mean = %lf +/- %lf", &k.mean, &k.err);
  if (b != std::string::npos) std::sscanf(out.c_str() + b, "Same top-1 token: %lf", &k.top1);
  return k;
}

TEST_F(Cli, KlDivergenceAgainstASavedBase) {
  REQUIRE_STORIES();
  REQUIRE_ASSET(q8, "models/stories260K-q8_0.gguf");
  const std::string text = (dir_ / "text.txt").string(), other = (dir_ / "other.txt").string();
  const std::string base = (dir_ / "base.kld").string();
  std::ofstream(text) << kld_words(7, 300);
  std::ofstream(other) << kld_words(8, 300);
  const Result b = run("perplexity -m " + quote(stories) + " -f " + quote(text) + " -c 64 --device cpu " +
                       "--kl-divergence-base " + quote(base));
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_TRUE(fs::exists(base));
  {
    std::ifstream in(base, std::ios::binary);
    char magic[8] = {};
    in.read(magic, 8);
    EXPECT_EQ(std::string(magic, 8), std::string("LLMKLD1\0", 8));
  }

  const std::string cmp = " --device cpu --kl-divergence --kl-divergence-base ";
  const Result same = run("perplexity -m " + quote(stories) + " -f " + quote(text) + " -c 64" + cmp + quote(base));
  ASSERT_EQ(same.code, 0) << same.err;
  const KlResult s = parse_kl(same.out);
  EXPECT_GE(s.mean, 0.0) << same.out;
  EXPECT_LT(s.mean, 1e-9) << same.out;
  EXPECT_DOUBLE_EQ(s.top1, 100.0) << same.out;

  // -c comes from the base file when not given.
  const Result q = run("perplexity -m " + quote(q8) + " -f " + quote(text) + cmp + quote(base));
  ASSERT_EQ(q.code, 0) << q.err;
  const KlResult k = parse_kl(q.out);
  EXPECT_GT(k.mean, 0.0) << q.out;
  EXPECT_LT(k.mean, 0.5) << q.out;
  EXPECT_GT(k.err, 0.0) << q.out;
  EXPECT_GT(k.top1, 50.0) << q.out;
  EXPECT_LE(k.top1, 100.0) << q.out;

  const Result diff = run("perplexity -m " + quote(stories) + " -f " + quote(other) + cmp + quote(base));
  EXPECT_EQ(diff.code, 1) << diff.out;
  EXPECT_NE(diff.err.find("token ids differ"), std::string::npos) << diff.err;

  const Result ctx = run("perplexity -m " + quote(stories) + " -f " + quote(text) + " -c 32" + cmp + quote(base));
  EXPECT_EQ(ctx.code, 1);
  EXPECT_NE(ctx.err.find("n_ctx differs"), std::string::npos) << ctx.err;

  // Truncated: the last logits row is cut short.
  const std::string cut = (dir_ / "cut.kld").string();
  fs::copy_file(base, cut);
  fs::resize_file(cut, fs::file_size(base) - 100);
  const Result t = run("perplexity -m " + quote(stories) + " -f " + quote(text) + cmp + quote(cut));
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.err.find("malformed KL-divergence base file"), std::string::npos) << t.err;
  fs::resize_file(cut, 10);  // shorter than the header
  const Result h = run("perplexity -m " + quote(stories) + " -f " + quote(text) + cmp + quote(cut));
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.err.find("malformed"), std::string::npos) << h.err;

  // --kl-divergence without a base file is a usage error.
  EXPECT_EQ(run("perplexity -m " + quote(stories) + " -f " + quote(text) + " --kl-divergence").code, 2);
}

}  // namespace
