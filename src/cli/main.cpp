// The `elastrain` command. main() is the only place that decides the exit code:
//   0 success, 1 runtime failure, 2 bad usage or configuration, 3 preempted, 4 stopped
// (elastic/exit_codes.h).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/signals.h"

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
      "  tokenizer train --input PATH --vocab-size N --output M.model\n"
      "                                       train a sentencepiece BPE tokenizer\n"
      "  checkpoint list|verify|inspect|export ...\n"
      "                                       list, check, describe or consolidate checkpoints\n"
      "  head --store etcd://HOST:PORT        the controller of cluster mode, with its HTTP API\n"
      "  agent --store etcd://HOST:PORT --slots K\n"
      "                                       run the workers of this host\n"
      "  submit [--head URL] [--wait] [CONFIG.yml] [key=value ...]\n"
      "                                       submit a job to a head\n"
      "  status [--head URL | --run-dir DIR] [--json]\n"
      "                                       state, generation, world size, step, ranks\n"
      "  stop [--head URL | --run-dir DIR] [--token T]\n"
      "                                       save and stop the job\n"
      "  chaos kill [--hang] --rank R | kill --host H [--head URL | --run-dir DIR]\n"
      "                                       rehearse a failure\n"
      "  report RUN_DIR [--html PATH] [--json]\n"
      "                                       goodput breakdown and an HTML report of a run\n"
      "exit codes: 0 success, 1 failure, 2 bad configuration, 3 preempted, 4 stopped\n");
}
}  // namespace

int main(int argc, char** argv) {
  elastrain::StartSignalThread();  // before any thread: see common/signals.h
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
  if (cmd == "cost") return elastrain::RunCostCommand(args);
  if (cmd == "checkpoint") return elastrain::RunCheckpointCommand(args);
  if (cmd == "head") return elastrain::RunHeadCommand(args);
  if (cmd == "agent") return elastrain::RunAgentCommand(args);
  if (cmd == "submit") return elastrain::RunSubmitCommand(args);
  if (cmd == "status") return elastrain::RunStatusCommand(args);
  if (cmd == "stop") return elastrain::RunStopCommand(args);
  if (cmd == "chaos") return elastrain::RunChaosCommand(args);
  if (cmd == "report") return elastrain::RunReportCommand(args);
  std::fprintf(stderr, "elastrain: unknown command '%s'\n", cmd.c_str());
  PrintUsage();
  return 2;
}
