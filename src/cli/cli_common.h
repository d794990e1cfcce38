// Helpers shared by the CLI commands. How the CLI reports a Status: one line on stderr, and the exit code of main.cpp:
// 2 for a configuration that cannot run (bad key or value, missing file, too big for
// memory), 1 for runtime failures.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "wire/job_state.h"

namespace elastrain {

int ExitCodeFor(const Status& st);
// The exit code of a command that ran or waited for a job to its end (wire/exit_codes.h):
// 0 SUCCEEDED, 4 STOPPED (the same command resumes it), 1 FAILED or anything else.
int ExitCodeForJobState(JobState state);

// Prints "elastrain <command>: error: <message>" and returns ExitCodeFor(st).
int FailCommand(const std::string& command, const Status& st);

// "1.50 GiB", "3.2 MiB", "12.0 KiB", "17 B".
std::string FormatBytes(int64_t bytes);

// `[CONFIG.yml] [key=value ...]` as train and plan take them: the first argument is a
// config file unless it contains '='. MaxText keys that elastrain ignores are logged
// once as a warning.
Result<TrainConfig> LoadConfigFromArgs(const std::vector<std::string>& args);

// `[CONFIG.yml] [key=value ...]` as train, plan and submit take them, as one CLI11
// positional named "config"; the footer points at configs/base.yml for the keys.
void AddConfigArgs(CLI::App& app, std::vector<std::string>* config_args);

// Parses argv with CLI11; returns -1 to go on, else the exit code (0 after --help, 2
// with one line on stderr for bad usage).
int ParseArgs(CLI::App& app, const std::string& name, std::vector<std::string> args);

// `... -- PROGRAM ARGS`: the arguments before the first "--" stay in *args, the program
// and its arguments go to *program. False when there is no "--".
bool SplitProgramArgs(std::vector<std::string>* args, std::vector<std::string>* program);
// Puts `program` into cfg->launch_program (a JSON array), checked as the config checks
// it (InvalidArgument naming it, or asking for the program when there is none).
Status SetLaunchProgram(const std::vector<std::string>& program, TrainConfig* cfg);

// The job in this process: controller, local agent and API over an in-memory store, for
// `train` with num_workers > 1 and for `launch` (src/cli/cmd_train.cpp).
int RunEmbeddedJob(const TrainConfig& cfg);

}  // namespace elastrain
