// The `elastrain` command. main() is the only place that decides the exit code:
//   0 success, 1 runtime failure, 2 bad usage or configuration, 3 preempted, 4 stopped
// (wire/exit_codes.h).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/fault.h"
#include "common/signals.h"
#include "wire/exit_codes.h"

namespace {
void PrintUsage() {
  std::printf(
      "usage: elastrain <command> [args]\n"
      "commands:\n"
      "  train [CONFIG.yml] [key=value ...]   train a model (keys: configs/base.yml)\n"
      "  plan [CONFIG.yml] [key=value ...]    print the mesh and per-rank memory, FLOPs and\n"
      "                                       collective volume, without training\n"
      "  cost interval|plan|simulate ...      checkpoint intervals (Young, Daly); the cheapest\n"
      "                                       accelerator plan for a deadline; spot Monte Carlo\n"
      "  generate --run-dir DIR [--prompt TEXT] [--max-new-tokens N] [--temperature T] ...\n"
      "                                       continue a prompt with a trained model (tokens/s)\n"
      "  eval --run-dir DIR [--max-batches N] [key=value ...]\n"
      "                                       loss and perplexity of a checkpoint on a dataset\n"
      "  tokenizer train --input PATH --vocab-size N --output M.model\n"
      "                                       train a sentencepiece BPE tokenizer\n"
      "  tokenizer encode|decode --tokenizer PATH [--type T] (--input FILE | --text S | --ids I)\n"
      "                                       the ids of a text, or the text of ids\n"
      "  data prepare INPUT... --output DIR [--tokenizer PATH] [--type T] [--workers N]\n"
      "                                       tokenise text or JSONL into llm.c token files\n"
      "  checkpoint list|verify|inspect|export ...\n"
      "                                       list, check, describe or consolidate checkpoints\n"
      "  head --store etcd[s]://HOST:PORT     the controller of cluster mode, with its HTTP API\n"
      "  agent --store etcd[s]://HOST:PORT --slots K\n"
      "                                       run the workers of this host\n"
      "  launch [CONFIG.yml] [key=value ...] -- PROGRAM ARGS\n"
      "                                       run your own program (a torchrun script) per worker\n"
      "  submit [--head URL] [--wait] [CONFIG.yml] [key=value ...] [-- PROGRAM ARGS]\n"
      "                                       submit a job to a head\n"
      "  status [--head URL | --run-dir DIR] [--json]\n"
      "                                       state, generation, world size, step, ranks\n"
      "  stop [--head URL | --run-dir DIR]\n"
      "                                       save and stop the job\n"
      "  chaos kill [--hang] --rank R | kill --host H [--head URL | --run-dir DIR]\n"
      "  chaos slow --rank R --factor F [--seconds S] | unslow --rank R | preempt --rank R [--seconds S]\n"
      "  chaos replay TRACE [--time-scale X] | trace [--rate R --duration S ...]\n"
      "                                       rehearse a failure (all fault injection: docs/faults.md)\n"
      "  report RUN_DIR [--html PATH] [--json]\n"
      "                                       goodput breakdown and an HTML report of a run\n"
      "the job commands take the API token from --token-file PATH or $ELASTRAIN_TOKEN\n"
      "(never from the command line) and an https head's CA from --ca-cert PATH\n"
      "exit codes: 0 success, 1 failure, 2 bad configuration, 3 preempted, 4 stopped\n");
}

// The subcommands; each parses its own arguments with CLI11 (src/cli/cmd_*.cpp).
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};
constexpr Command kCommands[] = {
    {"train", elastrain::RunTrainCommand},     {"worker", elastrain::RunWorkerCommand},
    {"tokenizer", elastrain::RunTokenizerCommand}, {"plan", elastrain::RunPlanCommand},
    {"cost", elastrain::RunCostCommand},       {"checkpoint", elastrain::RunCheckpointCommand},
    {"head", elastrain::RunHeadCommand},       {"agent", elastrain::RunAgentCommand},
    {"submit", elastrain::RunSubmitCommand},   {"status", elastrain::RunStatusCommand},
    {"stop", elastrain::RunStopCommand},       {"chaos", elastrain::RunChaosCommand},
    {"report", elastrain::RunReportCommand},   {"launch", elastrain::RunLaunchCommand},
    {"generate", elastrain::RunGenerateCommand}, {"eval", elastrain::RunEvalCommand},
    {"data", elastrain::RunDataCommand},
};
}  // namespace

int main(int argc, char** argv) {
  elastrain::StartSignalThread();  // before any thread: see common/signals.h
  // Everything elastrain creates (run directories, checkpoints, token caches, logs,
  // tokens) is private to the user: files 0600, directories 0700 (docs/security.md).
  ::umask(077);
  // A misspelt ELASTRAIN_FAULT is a usage error, not a fault that silently never fires.
  if (const elastrain::Status st = elastrain::fault::CheckEnvironment(); !st.ok()) {
    std::fprintf(stderr, "elastrain: %s\n", st.message().c_str());
    return elastrain::kExitBadConfig;
  }
  // CLI11 picks the subcommand; everything after its name goes to it untouched
  // (prefix_command), including -h and --help, which each command answers itself.
  CLI::App app{"elastrain"};
  app.set_help_flag();  // PrintUsage, not CLI11's generated page: it shows each command's arguments
  app.require_subcommand(1, 1);
  for (const Command& c : kCommands) app.add_subcommand(c.name)->prefix_command()->set_help_flag();
  const bool asked_for_help = argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help");
  try {
    if (!asked_for_help) app.parse(argc, argv);
  } catch (const CLI::ParseError&) {
    if (argc >= 2) std::fprintf(stderr, "elastrain: unknown command '%s'\n", argv[1]);
    PrintUsage();
    return elastrain::kExitBadConfig;
  }
  if (argc < 2 || asked_for_help) {
    PrintUsage();
    return argc < 2 ? elastrain::kExitBadConfig : elastrain::kExitSuccess;
  }
  const CLI::App* sub = app.get_subcommands().front();
  for (const Command& c : kCommands)
    if (sub->get_name() == c.name) return c.run(sub->remaining());
  return elastrain::kExitBadConfig;  // not reached: CLI11 accepts only the names above
}
