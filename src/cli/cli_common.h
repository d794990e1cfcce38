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

namespace elastrain {

int ExitCodeFor(const Status& st);
// Prints "elastrain <command>: error: <message>" and returns ExitCodeFor(st).
int FailCommand(const std::string& command, const Status& st);

// "1.50 GiB", "3.2 MiB", "12.0 KiB", "17 B".
std::string FormatBytes(int64_t bytes);

// `[CONFIG.yml] [key=value ...]` as train and plan take them: the first argument is a
// config file unless it contains '='. MaxText keys that elastrain ignores are logged
// once as a warning.
Result<TrainConfig> LoadConfigFromArgs(const std::vector<std::string>& args);

// Parses argv with CLI11; returns -1 to go on, else the exit code (0 after --help, 2
// with one line on stderr for bad usage).
int ParseArgs(CLI::App& app, const std::string& name, std::vector<std::string> args);

}  // namespace elastrain
