// `llm-run bench` as a process, and the `-pg` spelling (app/argv_spelling.h): the popular *-bench tool's one-dash
// two-letter flag must reach bench as --pg, and nothing outside bench may be rewritten.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/argv_spelling.h"
#include "app/bench_report.h"
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

TEST(BenchCli, PipelinedParallelDecodeIsGreedyAndBatched) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  const std::string m = "bench -m " + shell_quote(stories) + " --device cpu -t 1";
  const Result r = testing_process::run_llm_run(m + " --parallel 2 -p 8 -n 4 --pipeline");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| 8 | 4 | 2 | 24 |"), std::string::npos) << r.out;
  const Result sampled = testing_process::run_llm_run(m + " --parallel 2 -p 8 -n 4 --pipeline --temp 0.8");
  EXPECT_EQ(sampled.code, 2) << sampled.err;
  EXPECT_NE(sampled.err.find("--pipeline is greedy"), std::string::npos) << sampled.err;
  const Result alone = testing_process::run_llm_run(m + " -p 8 -n 4 --pipeline");
  EXPECT_EQ(alone.code, 2) << alone.err;
  EXPECT_NE(alone.err.find("--pipeline goes with --parallel"), std::string::npos) << alone.err;
}

}  // namespace

namespace {

// The bandwidth of a mixture of experts counts the routed experts' bytes, and every format says so; a dense model's
// reports keep their columns and lines.
app::BenchContext context(int32_t n_expert, int32_t n_expert_used) {
  app::BenchContext c;
  c.model = "m.gguf";
  c.backend = "CPU";
  c.device = "CPU reference";
  c.copy_gbs = 20;
  c.weight_bytes_per_token = 3ull << 30;
  c.n_expert = n_expert;
  c.n_expert_used = n_expert_used;
  c.expert_bytes = n_expert > 0 ? 16ull << 30 : 0;
  return c;
}

TEST(BenchReport, MoeSaysItCountsActiveBytes) {
  const std::vector<app::BenchTest> tests = {{"tg8", 0, 8, 0, {0.5}}};
  const app::BenchContext moe = context(128, 8), dense = context(0, 0);
  EXPECT_DOUBLE_EQ(app::achieved_gbs(moe, tests[0]), 3.0 * (1ull << 30) * 16 / 1e9);
  const std::string md = app::report_markdown(moe, tests);
  EXPECT_NE(md.find("GB/s counts active bytes: 3.00 GiB per token, the non-expert weights and 8 of 128 experts "
                    "(1.00 GiB of all experts' 16.00 GiB)\n\n| model |"),
            std::string::npos)
      << md;
  EXPECT_EQ(app::report_markdown(dense, tests).find("active"), std::string::npos);
  EXPECT_NE(app::report_markdown(dense, tests).find("peak in use n/a\n\n| model |"), std::string::npos);

  const std::string csv = app::report_csv(moe, tests);
  EXPECT_NE(csv.find(",kv_type,active_bytes_per_token,n_expert,n_expert_used\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",f16,3221225472,128,8\n"), std::string::npos) << csv;
  const std::string dense_csv = app::report_csv(dense, tests);
  EXPECT_EQ(dense_csv.substr(0, dense_csv.find('\n')),
            "model,size_bytes,params,backend,device,test,n_prompt,n_gen,depth,reps,tps_mean,tps_sd,gbs,copy_gbs,"
            "weights_bytes,kv_bytes,peak_mem_bytes,kv_type");
  EXPECT_NE(dense_csv.find(",f16\n"), std::string::npos) << dense_csv;

  EXPECT_NE(app::report_json(moe, tests).find(
                "\"active_bytes_per_token\": 3221225472, \"n_expert\": 128, \"n_expert_used\": 8, \"seconds\""),
            std::string::npos);
  EXPECT_EQ(app::report_json(dense, tests).find("active"), std::string::npos);
  // All experts used: every byte is read, as for a dense model.
  EXPECT_EQ(app::report_markdown(context(8, 8), tests).find("active"), std::string::npos);
}

// --half-weights: the memory line names the copies beside the weights and the cache; without, it does not.
TEST(BenchReport, HalfWeightCopiesAreInTheMemoryLine) {
  const std::vector<app::BenchTest> tests = {{"pp512", 512, 0, 0, {0.5}}};
  app::BenchContext c = context(0, 0);
  EXPECT_EQ(app::report_markdown(c, tests).find("half weight copies"), std::string::npos);
  c.half_copies_bytes = 3ull << 29;
  EXPECT_NE(app::report_markdown(c, tests).find(" (f16) + half weight copies 1.50 GiB (--half-weights); peak in use"),
            std::string::npos)
      << app::report_markdown(c, tests);
}

// The command on the small qwen3moe file: 997648 bytes per token (worked by hand in tests/model/test_decode_bytes).
TEST(BenchCli, MoeModelReportsActiveBytes) {
  REQUIRE_ASSET(moe, "models/synth-qwen3moe-Q8_0.gguf");
  const Result csv = testing_process::run_llm_run("bench -m " + shell_quote(moe) +
                                                  " -p 0 -n 2 -r 1 --no-warmup --device cpu -t 1 -o csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_NE(csv.out.find(",f16,997648,8,2\n"), std::string::npos) << csv.out;
  const Result md = testing_process::run_llm_run("bench -m " + shell_quote(moe) +
                                                 " -p 0 -n 2 -r 1 --no-warmup --device cpu -t 1");
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("GB/s counts active bytes"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("2 of 8 experts"), std::string::npos) << md.out;
}

}  // namespace
