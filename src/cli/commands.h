// Entry points of the `elastrain` subcommands. Each returns the process exit code
// (elastic/exit_codes.h, README.md); argv excludes the program and subcommand names.
#pragma once

#include <string>
#include <vector>

namespace elastrain {

int RunTrainCommand(const std::vector<std::string>& args);
// `launch [CONFIG.yml] [key=value ...] -- PROGRAM ARGS`: the user's program per worker,
// elastically (src/cli/cmd_launch.cpp, docs/launch.md).
int RunLaunchCommand(const std::vector<std::string>& args);
// Internal: a worker process, started by an agent (elastic/worker.h).
int RunWorkerCommand(const std::vector<std::string>& args);
int RunTokenizerCommand(const std::vector<std::string>& args);
int RunPlanCommand(const std::vector<std::string>& args);
// `cost interval|plan|simulate`: checkpoint intervals, cost planner, spot simulator
// (src/cli/cmd_cost.cpp, docs/cost.md).
int RunCostCommand(const std::vector<std::string>& args);
// `checkpoint list|verify|inspect|export` (src/cli/cmd_checkpoint.cpp).
int RunCheckpointCommand(const std::vector<std::string>& args);
// Cluster mode and job control (src/cli/cmd_cluster.cpp).
int RunHeadCommand(const std::vector<std::string>& args);
int RunAgentCommand(const std::vector<std::string>& args);
int RunSubmitCommand(const std::vector<std::string>& args);
int RunStatusCommand(const std::vector<std::string>& args);
int RunStopCommand(const std::vector<std::string>& args);
int RunChaosCommand(const std::vector<std::string>& args);
// `generate` and `eval`: text, and loss and perplexity, from a checkpoint
// (src/cli/cmd_generate.cpp, src/cli/cmd_eval.cpp, docs/generate.md).
int RunGenerateCommand(const std::vector<std::string>& args);
int RunEvalCommand(const std::vector<std::string>& args);
// `data prepare`: corpora tokenised into llm.c token files (src/cli/cmd_data.cpp).
int RunDataCommand(const std::vector<std::string>& args);
// `report RUN_DIR`: goodput breakdown and HTML report (src/cli/cmd_report.cpp).
int RunReportCommand(const std::vector<std::string>& args);

}  // namespace elastrain
