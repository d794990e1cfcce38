// The project's logger: spdlog underneath, one global logger with levels.
// Library code logs through these macros, never straight to std::cerr.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "common/log_level.h"

namespace elastrain {

// Sets the process-wide level (every logger). Thread-safe.
void SetLogLevel(LogLevel level);
// Adds a file sink (the run's human log) beside the console sink, once per path per
// process. Thread-safe.
void AddLogFile(const std::string& path);

}  // namespace elastrain

#define LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define LOG_ERROR(...) spdlog::error(__VA_ARGS__)
