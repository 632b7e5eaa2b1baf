// Spellings of the command line that CLI11 cannot parse as they are, rewritten before it sees them. The popular
// *-bench tool spells its prompt+generation test `-pg 512,128`: one dash and two letters, which CLI11 reads as
// `-p g`, so `llm-run bench` declares `--pg` and the user's `-pg` is turned into it here.
#pragma once
#include <string>
#include <vector>

namespace app {

// args as main() receives them (program name first). After the `bench` subcommand token and before a `--`, the exact
// tokens `-pg` and `-pg=VALUE` become `--pg` and `--pg=VALUE`; every other token, and every token outside bench,
// is returned unchanged (elsewhere `-pg` keeps its CLI11 meaning, `-p g`).
std::vector<std::string> respell_bench_pg(std::vector<std::string> args);

}  // namespace app
