// The `elastrain` command. main() is the only place that decides the exit code:
//   0 success, 1 runtime failure, 2 bad usage or configuration.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {
void PrintUsage() {
  std::printf(
      "usage: elastrain <command> [args]\n"
      "commands:\n"
      "  train [CONFIG.yml] [key=value ...]   train a model (keys: configs/base.yml)\n"
      "  plan [CONFIG.yml] [key=value ...]    print the mesh and per-rank memory, FLOPs and\n"
      "                                       collective volume, without training\n"
      "  tokenizer train --input PATH --vocab-size N --output M.model\n"
      "                                       train a sentencepiece BPE tokenizer\n"
      "  checkpoint list|verify|inspect|export ...\n"
      "                                       list, check, describe or consolidate checkpoints\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "train") return elastrain::RunTrainCommand(args);
  if (cmd == "worker") return elastrain::RunWorkerCommand(args);
  if (cmd == "tokenizer") return elastrain::RunTokenizerCommand(args);
  if (cmd == "plan") return elastrain::RunPlanCommand(args);
  if (cmd == "checkpoint") return elastrain::RunCheckpointCommand(args);
  std::fprintf(stderr, "elastrain: unknown command '%s'\n", cmd.c_str());
  PrintUsage();
  return 2;
}
