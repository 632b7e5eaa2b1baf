// `llm-run bench` as a process, and the `-pg` spelling (app/argv_spelling.h): the popular *-bench tool's one-dash
// two-letter flag must reach bench as --pg, and nothing outside bench may be rewritten.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/argv_spelling.h"
#include "assets.h"
#include "process.h"

namespace {

using testing_process::Result;
using testing_process::shell_quote;

using Args = std::vector<std::string>;

TEST(RespellBenchPg, OnlyTheExactTokensAfterBench) {
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "bench", "-m", "x.gguf", "-pg", "512,128"}),
            (Args{"llm-run", "bench", "-m", "x.gguf", "--pg", "512,128"}));
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "bench", "-pg=8,4", "-pg", "1,1"}),
            (Args{"llm-run", "bench", "--pg=8,4", "--pg", "1,1"}));
  // Before the subcommand (and without one) -pg is CLI11's `-p g`; other tokens that merely start alike stay.
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "-m", "x.gguf", "-pg"}), (Args{"llm-run", "-m", "x.gguf", "-pg"}));
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "-pg", "bench"}), (Args{"llm-run", "-pg", "bench"}));
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "bench", "-pg8,4", "--pg", "-p", "-pgx"}),
            (Args{"llm-run", "bench", "-pg8,4", "--pg", "-p", "-pgx"}));
  EXPECT_EQ(app::respell_bench_pg({"llm-run", "bench", "--", "-pg"}), (Args{"llm-run", "bench", "--", "-pg"}));
}

// A short CPU bench on stories260K: one pp+tg pair, one repetition, CSV.
Result bench(const std::string& model, const std::string& args) {
  return testing_process::run_llm_run("bench -m " + shell_quote(model) +
                                      " -p 0 -n 0 -r 1 --no-warmup --device cpu -t 1 -o csv " + args);
}

TEST(BenchCli, DashPgRunsAPromptPlusGenerationTest) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  for (const std::string spelling : {"-pg 8,4", "--pg 8,4", "-pg=8,4"}) {
    const Result r = bench(stories, spelling);
    ASSERT_EQ(r.code, 0) << spelling << "\n" << r.err;
    EXPECT_NE(r.out.find(",pp8+tg4,8,4,0,1,"), std::string::npos) << spelling << "\n" << r.out;
  }
  const Result two = bench(stories, "-pg 8,4 -pg 4,2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find(",pp8+tg4,"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find(",pp4+tg2,"), std::string::npos) << two.out;
}

TEST(BenchCli, BadPgValueIsAUsageError) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  const Result r = bench(stories, "-pg 512");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("llm-run: error: -pg expects PROMPT,GEN"), std::string::npos) << r.err;
}

TEST(BenchCli, HelpShowsDashPg) {
  const Result r = testing_process::run_llm_run("bench --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("-pg 512,128"), std::string::npos) << r.out;
}

}  // namespace

namespace {

TEST(BenchCli, ParallelGivesOneRowPerSequenceCount) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  const Result r = testing_process::run_llm_run("bench -m " + shell_quote(stories) + " --device cpu -t 1 --parallel 1,3 -p 8 -n 4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| PP | TG | B | N_KV |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 8 | 4 | 1 | 12 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 8 | 4 | 3 | 36 |"), std::string::npos) << r.out;
  const Result bad = testing_process::run_llm_run("bench -m " + shell_quote(stories) + " --device cpu --parallel 0 -p 8 -n 4");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--parallel values must be positive"), std::string::npos) << bad.err;
}

}  // namespace
