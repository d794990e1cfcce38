// `elastrain launch [CONFIG.yml] [key=value ...] -- PROGRAM ARGS`: the user's own
// training program (first of all an unmodified torchrun script) run elastically by the
// embedded controller and agent; each worker runs PROGRAM with torchrun's environment
// (src/launch/, docs/launch.md).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/log.h"
#include "common/process.h"

namespace elastrain {

int RunLaunchCommand(const std::vector<std::string>& all_args) {
  CLI::App app{"elastrain launch: run PROGRAM once per worker with torchrun's environment, elastically"};
  std::vector<std::string> args = all_args, program;
  SplitProgramArgs(&args, &program);
  std::vector<std::string> config_args;
  AddConfigArgs(app, &config_args);
  app.footer("Usage: elastrain launch [CONFIG.yml] [key=value ...] -- PROGRAM ARGS\n"
             "Job keys as for train (num_workers=N|MIN:MAX, max_failures, ...): configs/base.yml; "
             "the contract: docs/launch.md");
  if (int rc = ParseArgs(app, "launch", args); rc >= 0) return rc;
  auto cfg = LoadConfigFromArgs(config_args);
  if (!cfg.ok()) return FailCommand("launch", cfg.status());
  if (Status st = SetLaunchProgram(program, &cfg.value()); !st.ok()) return FailCommand("launch", st);
  // Here, the program must exist before anything starts (in a cluster, each agent's host checks it).
  if (Status st = FindProgram(program[0]).status(); !st.ok()) return FailCommand("launch", st);
  SetLogLevel(cfg->log_level);
  return RunEmbeddedJob(cfg.value());
}

}  // namespace elastrain
