// Entry points of the `elastrain` subcommands. Each returns the process exit code
// (see docs/exit-codes.md); argv excludes the program and subcommand names.
#pragma once

#include <string>
#include <vector>

namespace elastrain {

int RunTrainCommand(const std::vector<std::string>& args);
// Internal: one rank of a multi-worker run, started by the launcher.
int RunWorkerCommand(const std::vector<std::string>& args);
int RunTokenizerCommand(const std::vector<std::string>& args);
int RunPlanCommand(const std::vector<std::string>& args);
// `checkpoint list|verify|inspect|export` (src/cli/cmd_checkpoint.cpp).
int RunCheckpointCommand(const std::vector<std::string>& args);

}  // namespace elastrain
