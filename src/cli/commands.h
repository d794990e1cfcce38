// Entry points of the `elastrain` subcommands. Each returns the process exit code
// (see docs/exit-codes.md); argv excludes the program and subcommand names.
#pragma once

#include <string>
#include <vector>

namespace elastrain {

int RunTrainCommand(const std::vector<std::string>& args);
int RunTokenizerCommand(const std::vector<std::string>& args);

}  // namespace elastrain
